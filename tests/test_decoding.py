"""Decoding: a batch decoded as each source alone, a translator's loss without its padded
targets, beam search against the best output found by hand, top-k and top-p at their edges,
generate in training mode without dropout, greedy decoding up to the EOS."""
import numpy as np
import pytest

import minitf.functional as F
from minitf import backend
from minitf.data import BOS, EOS
from minitf.generate import beam_search, generate, greedy_decode, sample_next
from minitf.models import DecoderLM, Transformer

from test_models import seeded  # noqa: F401  (a fixture)

def test_greedy_decoding_a_batch_decodes_each_source_as_alone(float64):
    """The batch stops only when every row has produced EOS: a row that ends early must not cut
    the others short (seed 3: one row ends at once, the others run on)."""
    backend.seed(3)
    model = Transformer(12, 12, 16, 2, 2, dropout=0.0)
    model.out.b.data[EOS] += 1.5                       # make EOS likely, so some rows end early
    src = backend.randint(3, 12, (4, 5))
    batch = greedy_decode(model, src, 6)
    alone = [greedy_decode(model, src[i:i + 1], 6)[0] for i in range(4)]
    assert len({len(tokens) for tokens in alone}) > 1, "the rows should end at different steps"
    assert batch == alone


def test_a_translator_s_loss_leaves_out_padded_targets(float64):
    """Transformer.loss ignores the targets equal to pad_id: it is the cross-entropy of the
    other targets alone."""
    model = Transformer(12, 12, 16, 2, 2, dropout=0.0)
    src = backend.to_device(np.array([[3, 4, 5, 6], [7, 8, 9, 0]]))
    tgt_in = backend.to_device(np.array([[BOS, 5, 9, 4], [BOS, 8, 7, 0]]))
    tgt_out = backend.to_device(np.array([[5, 9, 4, EOS], [8, 7, EOS, 0]]))   # one pad target
    loss, _ = model.loss(src, tgt_in, tgt_out)
    logits = model(src, tgt_in)
    kept = backend.to_numpy(tgt_out) != model.pad_id
    assert kept.sum() == 7
    log_p = backend.to_numpy(F.log_softmax(logits)[0])
    by_hand = -np.mean([log_p[b, t, backend.to_numpy(tgt_out)[b, t]]
                        for b, t in zip(*np.nonzero(kept))])
    assert loss == pytest.approx(by_hand, rel=1e-12)


def _best_by_hand(model, src, max_len, alpha, vocab):
    """The finished output (tokens, then EOS) of highest log p / ((5 + length) / 6)^α, length
    counting the EOS, over every output of fewer than max_len tokens: what a beam wide enough
    to keep them all must return."""
    import itertools
    memory, memory_mask = model.encode(src)
    best = None
    for m in range(max_len):
        for tokens in itertools.product([t for t in range(vocab) if t != EOS], repeat=m):
            tgt_in = backend.to_device(np.array([[BOS, *tokens]]))
            logits = model.decode(tgt_in, memory, memory_mask, mask_padding=False)
            log_p = backend.to_numpy(F.log_softmax(logits)[0])[0]       # (m + 1, vocab)
            score = sum(log_p[i, t] for i, t in enumerate([*tokens, EOS]))
            score /= ((5 + m + 1) / 6) ** alpha
            if best is None or score > best[0]:
                best = (score, list(tokens))
    return best[1]


@pytest.mark.parametrize("seed", [0, 4, 10])
def test_a_beam_wide_enough_returns_the_best_output_by_its_length_penalty(float64, seed):
    """With 5 target tokens and 3 steps, a beam of 200 keeps every hypothesis, so beam_search
    must return the exhaustive best under the length penalty (at these seeds a longer output
    than the unpenalised best)."""
    backend.seed(seed)
    model = Transformer(6, 5, 16, 2, 1, dropout=0.0)
    model.eval()
    src = backend.randint(3, 6, (1, 4))
    penalised = _best_by_hand(model, src, 3, 2.0, 5)
    assert penalised != _best_by_hand(model, src, 3, 0.0, 5), "the penalty should change it"
    assert beam_search(model, src, beam_size=200, max_len=3, alpha=2.0) == [penalised]
    assert beam_search(model, src, beam_size=200, max_len=3, alpha=0.0) == \
        [_best_by_hand(model, src, 3, 0.0, 5)]


def test_a_top_k_above_the_vocabulary_keeps_every_token(seeded):
    """top_k larger than V must mean "no cut": the k-th largest logit was looked up at -top_k,
    out of range for V = 4 and top_k = 10."""
    logits = backend.to_device(np.log(np.array([[0.4, 0.3, 0.2, 0.1]] * 2000)))
    for top_k in (4, 10):
        drawn = set(backend.to_numpy(sample_next(logits, top_k=top_k)).tolist())
        assert drawn == {0, 1, 2, 3}, f"top_k={top_k} drew only {drawn}"


def test_top_p_keeps_the_smallest_set_that_reaches_p_at_an_exact_tie(seeded):
    """softmax gives exactly [0.5, 0.25, 0.25]: token 0 alone reaches p = 0.5, so it is the
    nucleus; a token was kept while the tokens before it added up to at most p (not less than
    p), which let a 0.25 token in."""
    logits = backend.to_device(np.log(np.array([[0.5, 0.25, 0.25]] * 2000)))
    probs, _ = F.softmax(logits, axis=-1)
    assert backend.to_numpy(probs[0]).tolist() == [0.5, 0.25, 0.25]      # the tie is exact
    assert set(backend.to_numpy(sample_next(logits, top_p=0.5)).tolist()) == {0}
    assert set(backend.to_numpy(sample_next(logits, top_p=0.76)).tolist()) == {0, 1, 2}


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no cache"])
def test_generate_runs_a_model_in_training_mode_without_dropout(float64, use_cache):
    """generate puts the model in eval mode for its steps: left in .train() with dropout=0.5, the
    greedy continuation came out of randomly dropped units, not the model's most likely tokens."""
    backend.seed(5)
    model = DecoderLM(11, 16, 2, 2, max_len=12, dropout=0.5)
    prompt = backend.randint(0, 11, (4, 3))
    model.train()
    in_training = generate(model, prompt, 8, greedy=True, use_cache=use_cache)
    assert all(m.training for m in model.modules()), "generate gives the model back in .train()"
    model.eval()
    evaluated = generate(model, prompt, 8, greedy=True, use_cache=use_cache)
    assert in_training.shape == (4, 11) and (in_training == evaluated).all()


def test_greedy_decode_returns_the_tokens_before_the_eos(float64):
    """Each output is the argmax tokens up to, not including, the first EOS: the EOS was kept
    at the end of every output that had one (seed 7: two rows end after some tokens, two run to
    max_len)."""
    backend.seed(7)
    model = Transformer(12, 12, 16, 2, 2, dropout=0.0)
    model.out.b.data[EOS] += 2.0                       # make EOS likely, so rows end early
    src = backend.randint(3, 12, (4, 5))
    tokens, logits = greedy_decode(model, src, 6, return_logits=True)
    picked = logits.argmax(axis=-1).tolist()           # (4, steps): what each step chose
    wanted = [row[:row.index(EOS)] if EOS in row else row for row in picked]
    assert any(EOS in row[1:] for row in picked), "a row should end after some tokens"
    assert any(EOS not in row for row in picked), "a row should run to max_len"
    assert not any(EOS in t for t in tokens), f"an EOS left in {tokens}"
    assert tokens == wanted


def test_a_beam_crowded_by_finished_hypotheses_keeps_beam_size_live_ones(float64):
    """EOS is the second most likely first token (and ends a candidate again at step 2): were
    only the top beam_size candidates looked at, the finished ones would take places of the live
    beams, and the beam would lose [1, 4], the best output under α = 4, which a beam of 2 or 3
    that keeps beam_size live hypotheses finds."""
    backend.seed(17)
    model = Transformer(6, 5, 16, 2, 1, dropout=0.0)
    model.eval()
    model.out.b.data[EOS] += 1.5
    src = backend.randint(3, 6, (1, 4))
    memory, memory_mask = model.encode(src)
    first = backend.to_numpy(model.decode(backend.to_device(np.array([[BOS]])), memory,
                                          memory_mask))[0, -1]
    assert EOS in np.argsort(-first)[:2].tolist(), "EOS should be among the top 2 first tokens"
    best = _best_by_hand(model, src, 3, 4.0, 5)
    assert len(best) == 2, "the best should be longer than the first EOS"
    for beam_size in (2, 3):
        assert beam_search(model, src, beam_size=beam_size, max_len=3, alpha=4.0) == [best], \
            f"beam_size={beam_size}"
