"""Bad input to generation and decoding fails once, at the start, with a message naming the
argument, what it got and what was wanted: the steps themselves run the model's layers unchecked."""
import numpy as np
import pytest

import minitf.models as models
from minitf import backend
from minitf.generate import beam_search, generate, greedy_decode
from minitf.models import DecoderLM

from test_bad_input import raises


def test_a_language_model_needs_a_vocabulary():
    from minitf.models import DecoderLM
    with raises(ValueError, "DecoderLM: vocab_size must be a positive integer", "got 0"):
        DecoderLM(0)


def test_decode_refuses_ids_outside_the_vocabulary():
    from minitf.data import CharTokenizer
    tokenizer = CharTokenizer(list("abc"))
    assert tokenizer.decode([2, 0]) == "ca" and tokenizer.decode([]) == ""
    with raises(ValueError, "CharTokenizer.decode: ids must lie in [0, vocab_size=3)",
                "from -1 to -1"):
        tokenizer.decode([-1])                   # not "c", the last character


@pytest.mark.parametrize("setting, fragments", [
    (dict(top_k=2.5), ("top_k must be a positive integer", "2.5")),
    (dict(top_k=0), ("top_k must be a positive integer", "got 0")),
    (dict(temperature=float("nan")), ("temperature must be a finite number > 0", "nan")),
    (dict(temperature=0), ("temperature must be a finite number > 0", "got 0")),
    (dict(top_p=1.5), ("top_p must be a finite number > 0 and ≤ 1", "1.5")),
    (dict(max_new_tokens=-1), ("max_new_tokens must be an integer ≥ 0", "-1")),
])
def test_generate_checks_its_settings_before_the_first_step(setting, fragments):
    from minitf.generate import generate
    from minitf.models import DecoderLM
    arguments = {"max_new_tokens": 3, **setting}
    with raises(ValueError, "generate: ", *fragments):
        generate(DecoderLM(5, 8, 2, 1, max_len=8), [1, 2], **arguments)


@pytest.mark.parametrize("prompt, error, fragments", [
    (np.array([1, 5]), ValueError, ("generate: prompt must lie in [0, vocab_size=5)",
                                    "from 1 to 5")),
    (np.array([[-1, 2]]), ValueError, ("generate: prompt must lie in [0, vocab_size=5)",
                                       "from -1 to 2")),
    (np.array([1.0, 2.0]), TypeError, ("generate: prompt has dtype float64",
                                       "wanted an integer dtype")),
    ([[1, 2], [3]], ValueError, ("generate: prompt is not an array of token ids",)),
    (np.array([], dtype=int), ValueError, ("generate: prompt has shape (1, 0)", "with n ≥ 1")),
])
def test_generate_checks_its_prompt_once_at_the_start(backend_name, prompt, error, fragments):
    """The model checks no ids while generate runs it (they are the prompt, checked here, and
    tokens the model picked): a bad prompt is still one clear line, in generate's words."""
    with raises(error, *fragments):
        generate(DecoderLM(5, 8, 2, 1, max_len=8), prompt, 3)


def test_greedy_decode_and_beam_search_check_their_source(backend_name):
    """Their steps run the decoder's layers unchecked (the tokens are the model's own): the
    source is still checked, once, by the encoder."""
    from minitf.generate import beam_search, greedy_decode
    model = models.Transformer(5, 5, 8, 2, 1)
    for decode in (greedy_decode, beam_search):
        with raises(ValueError, "Transformer: src must lie in [0, vocab_size=5)", "from 1 to 7"):
            decode(model, backend.to_device(np.array([[1, 7]])))


@pytest.mark.parametrize("call, message", [
    (lambda m, s: beam_search(m, s, beam_size=0),
     "beam_search: beam_size must be a positive integer, the hypotheses kept at each step; got 0"),
    (lambda m, s: beam_search(m, s, max_len=-1),
     "beam_search: max_len must be a positive integer"),
    (lambda m, s: beam_search(m, s, alpha=float("nan")),
     "beam_search: alpha must be a finite number ≥ 0; got nan"),
    (lambda m, s: greedy_decode(m, s, max_len=2.5),
     "greedy_decode: max_len must be a positive integer, the most tokens to generate; got 2.5"),
])
def test_decoding_settings_are_checked_before_the_first_step(call, message):
    """Each returned [[]] (or failed deep inside) before."""
    model = models.Transformer(5, 5, 8, 2, 1)
    with raises(ValueError, message):
        call(model, backend.to_device(np.array([[1, 2]])))


def test_a_prompt_or_source_of_small_integers_gets_ids_beyond_its_type():
    """A prompt of int8 (a source of uint8) holds the ids the model picks: they must not wrap
    around at 127 (255); the decoded ids are the ones an int64 prompt gives."""
    lm = DecoderLM(300, d_model=16, n_heads=2, n_layers=1, max_len=64)
    small = generate(lm, np.array([1, 2], np.int8), 40, greedy=True)
    assert small.dtype == np.int64
    assert np.array_equal(small, generate(lm, np.array([1, 2]), 40, greedy=True))
    translate = models.Transformer(20, 400, d_model=16, n_heads=2, n_layers=1)
    src = np.array([[3, 4, 5]])
    for decode in (greedy_decode, beam_search):
        assert decode(translate, src.astype(np.uint8)) == decode(translate, src)


def test_sample_next_wants_rows_of_logits_and_a_cache_keeps_its_batch():
    from minitf.generate import sample_next
    with raises(ValueError, "sample_next: logits has shape (3,); wanted (b, V)"):
        sample_next(np.array([0.1, 5.0, 0.2]))               # it gave 3 ids, one per "row"
    with raises(ValueError, "sample_next: temperature must be a finite number > 0", "nan"):
        sample_next(np.ones((2, 3)), temperature=float("nan"))
    with raises(ValueError, "sample_next: top_k must be a positive integer", "2.5"):
        sample_next(np.ones((2, 3)), top_k=2.5)
    with raises(TypeError, "sample_next: logits has dtype int64"):
        sample_next(np.ones((2, 3), dtype=np.int64))
    with raises(ValueError, "sample_next: logits holds NaN"):
        sample_next(np.array([[0.1, np.nan, 0.2]]))          # it sampled id 0, and said nothing
    for greedy in (False, True):                              # +inf sampled id 0 too, warning
        with raises(ValueError, "sample_next: logits holds +inf (row 1, token 2); wanted finite"):
            sample_next(np.array([[0.0, 0.0, 0.0], [0.0, 0.0, np.inf]], np.float32),
                        greedy=greedy)
    ruled_out = np.array([[0.1, -np.inf, 0.2]] * 50)
    assert 1 not in sample_next(ruled_out), "−inf rules a token out, and is no error"
    lm = DecoderLM(10, d_model=16, n_heads=2, n_layers=1, max_len=16)
    cache = lm.new_cache()
    lm(np.array([[1, 2]]), cache=cache)
    with raises(ValueError, "KVCache: the new keys and values are (b, h, d_head, d_v) = "
                "(2, 2, 8, 8)", "holds (1, 2, 8, 8)", "new_cache()"):
        lm(np.array([[3], [4]]), cache=cache)                # one row's keys, broadcast to two
    wider = DecoderLM(10, d_model=32, n_heads=2, n_layers=1, max_len=16)
    with raises(ValueError, "KVCache: the new keys and values are (b, h, d_head, d_v) = "
                "(1, 2, 16, 16)", "holds (1, 2, 8, 8)", "another batch or model"):
        wider(np.array([[3]]), cache=cache)                  # failed inside NumPy's copy


def test_no_new_tokens_gives_no_logits():
    """max_new_tokens=0 with return_logits failed with NumPy's 'need at least one array to
    stack'; now the logits of no steps, (b, 0, V)."""
    lm = DecoderLM(5, d_model=8, n_heads=2, n_layers=1, max_len=8)
    ids, logits = generate(lm, np.array([[1, 2], [3, 4]]), 0, return_logits=True)
    assert np.array_equal(ids, [[1, 2], [3, 4]])
    assert logits.shape == (2, 0, 5) and logits.dtype == np.float32


def test_each_decoder_wants_its_kind_of_model_and_a_function_for_on_token():
    """Each failed deep inside with an AttributeError (or called on_token=5 after a step)."""
    lm = DecoderLM(5, d_model=8, n_heads=2, n_layers=1, max_len=8)
    translate = models.Transformer(5, 5, 8, 2, 1)
    src = np.array([[1, 2]])
    with raises(TypeError, "generate: model is a Transformer", "wanted a language model",
                "greedy_decode or beam_search"):
        generate(translate, src, 3)
    with raises(TypeError, "generate: model is a NoneType"):
        generate(None, src, 3)
    for decode in (greedy_decode, beam_search):
        with raises(TypeError, f"{decode.__name__}: model is a DecoderLM", "has no encode",
                    "wanted an encoder–decoder Transformer"):
            decode(lm, src)
    with raises(TypeError, "generate: on_token must be a function", "got 5"):
        generate(lm, src, 3, on_token=5)
    with raises(ValueError, "greedy_decode: use_cache must be True or False", "'no'"):
        greedy_decode(translate, src, use_cache="no")


def test_a_translator_whose_vocabulary_has_no_eos_is_refused():
    """With tgt_vocab_size=2 (ids 0 and 1: no EOS) decoding never stopped before max_len."""
    src = np.array([[1, 2]])
    for decode in (greedy_decode, beam_search):
        for size in (1, 2):
            with raises(ValueError, f"{decode.__name__}: the model's tgt_vocab_size is {size}",
                        "wanted more than 2", "BOS=1 and EOS=2"):
                decode(models.Transformer(5, size, 8, 2, 1), src, max_len=4)
        assert isinstance(decode(models.Transformer(5, 3, 8, 2, 1), src, max_len=4), list)


def test_a_cache_must_be_what_new_cache_makes_and_loss_wants_targets():
    """A string cache failed on .length, an empty list in a block, and loss(x, y, y) took the
    second y for the cache; loss(x) took x for the targets."""
    lm = DecoderLM(5, d_model=8, n_heads=2, n_layers=2, max_len=8)
    x = np.array([[1, 2, 3]])
    for cache, got in (("yes", "got str"), ([], "got a list of 0"), (x, "got ndarray")):
        with raises(TypeError, "DecoderLM: cache must be None or the list new_cache() makes",
                    "(2 here)", got):
            lm(x, cache=cache)
    with raises(TypeError, "DecoderLM: cache must be None"):
        lm.loss(x, x, x)
    with raises(TypeError, "DecoderLM.loss: wanted forward's inputs (ids), then the targets",
                "got 1 argument"):
        lm.loss(x)
    rnn = models.RNNLM(5, 8)
    with raises(TypeError, "RNNLM: cache must be None", "(1 here)", "got a list of 2"):
        rnn(x, cache=lm.new_cache())
    translate = models.Transformer(5, 5, 8, 2, 1)
    with raises(TypeError, "Transformer.loss: wanted forward's inputs (src, tgt), then the "
                           "targets; got 2 argument(s)"):
        translate.loss(x, x)                     # tgt forgotten: it failed inside forward
    memory, memory_mask = translate.encode(x)
    with raises(TypeError, "Transformer: cache must be None", "got a list of 1"):
        translate.decode(x, memory, memory_mask, cache=lm.new_cache()[:1])


def test_a_translation_needs_a_token_in_each_source_and_target():
    """A source of no tokens failed in the softmax over keys: 'zero-size array'."""
    translate = models.Transformer(5, 5, 8, 2, 1)
    x = np.array([[1, 2]])
    with raises(ValueError, "Transformer: src has shape (1, 0); wanted at least one token"):
        translate.loss(x[:, :0], x, x)
    with raises(ValueError, "Transformer: tgt has shape (1, 0)"):
        translate.loss(x, x[:, :0], x[:, :0])


def test_sample_next_refuses_a_row_with_no_token_left_to_draw():
    """Every logit −inf: softmax is 0/0, and the draw gave id 0, saying nothing."""
    from minitf.generate import sample_next
    logits = np.zeros((3, 5), np.float32)
    logits[1] = -np.inf
    with raises(ValueError, "sample_next: row 1 of logits is −inf for every token; wanted at "
                            "least one token left to draw"):
        sample_next(logits)
    logits[1, 2] = 0.0                                    # one token left: it is the one drawn
    assert int(sample_next(logits)[1]) == 2
