"""Bad input to attention, blocks and whole models: one line, in the words of what the user called."""
import numpy as np
import pytest

import minitf.functional as F
import minitf.models as models
import minitf.nn as nn
from minitf import backend

from test_bad_input import raises, refused_in_one_line


def test_a_block_names_itself_for_a_bad_input(backend_name):
    """Given to a block, a bad x is the block's error, not that of a layer deep inside it."""
    with backend.precision("float64"):
        x64 = backend.randn(2, 3, 8)
    with raises(TypeError, "EncoderBlock: x has dtype float64; wanted float32"):
        nn.EncoderBlock(8, 2, 16)(x64)
    with raises(ValueError, "DecoderBlock: memory has shape (3, 4, 8); wanted (b=2, m, d_model=8)"):
        nn.DecoderBlock(8, 2, 16)(backend.randn(2, 3, 8), backend.randn(3, 4, 8))


@pytest.mark.parametrize("build, message", [
    (lambda: models.Transformer(13, 13, pad_id=None), "Transformer: pad_id must be an integer in [0, 12]"),
    (lambda: models.Transformer(13, 9, pad_id=10), "Transformer: pad_id must be an integer in [0, 8]"),
    (lambda: models.Transformer(13, 13, n_layers=-1), "Transformer: n_layers must be an integer ≥ 0"),
    (lambda: models.Transformer(13, 13, n_layers=None), "Transformer: n_layers must be an integer ≥ 0"),
    (lambda: models.Transformer(13, 13, d_model=None), "Transformer: d_model must be a positive integer"),
    (lambda: models.EncoderClassifier(10, 2, pad_id=-1), "EncoderClassifier: pad_id must be an integer in [0, 9]"),
    (lambda: models.EncoderClassifier(10, 0), "EncoderClassifier: n_classes must be a positive integer"),
    (lambda: models.EncoderClassifier(10, 2, max_len=2.5), "EncoderClassifier: max_len must be a positive"),
    (lambda: models.VisionTransformer(8, 0, 2), "VisionTransformer: patch_size must be a positive integer"),
    (lambda: models.VisionTransformer(-8, 2, 2), "VisionTransformer: image_size must be a positive integer"),
    (lambda: models.SetEncoder(3, 0), "SetEncoder: n_classes must be a positive integer"),
    (lambda: models.DecoderLM(10, n_layers=0, activation="tanh"),    # no block to refuse it
     "DecoderLM: activation must be one of ('relu', 'gelu', 'gelu_exact'); got 'tanh'"),
    (lambda: models.Transformer(5, 5, n_layers=0, activation="tanh"),
     "Transformer: activation must be one of"),
    (lambda: models.EncoderClassifier(10, 2, n_layers=0, activation="tanh"),
     "EncoderClassifier: activation must be one of"),
    # named by a block's MultiHeadAttention or Dropout, or by DecoderLM for an EncoderLM
    (lambda: models.Transformer(10, 12, d_model=9, n_heads=2), "Transformer: d_model=9 is not "
                                                               "divisible by n_heads=2"),
    (lambda: models.Transformer(10, 12, dropout=2), "Transformer: dropout must lie in [0, 1)"),
    (lambda: models.EncoderClassifier(10, 2, d_model=6, n_heads=4), "EncoderClassifier: d_model=6"),
    (lambda: models.EncoderClassifier(10, 2, attn_dropout=1.5),
     "EncoderClassifier: attn_dropout must lie in [0, 1)"),
    (lambda: models.VisionTransformer(8, 4, 2, dropout=-1), "VisionTransformer: dropout must lie"),
    (lambda: models.SetEncoder(3, 2, d_model=10, n_heads=3), "SetEncoder: d_model=10 is not"),
    (lambda: models.EncoderLM(10, dropout=2), "EncoderLM: dropout must lie in [0, 1)"),
])
def test_a_model_names_its_own_bad_size(build, message):
    """Each was built silently (a pad_id of None or outside the vocabulary, -1 blocks, a negative
    image) or failed deep inside, in the words of an inner Linear or Embedding."""
    with raises(ValueError, message):
        build()


def test_a_model_without_blocks_generates_with_or_without_the_cache():
    from minitf.generate import generate
    lm = models.DecoderLM(5, 8, 2, 0, max_len=8)
    cached, plain = (generate(lm, np.array([1, 2]), 4, greedy=True, use_cache=use)
                     for use in (True, False))
    assert cached.shape == (1, 6) and (cached == plain).all()


def test_attention_wants_a_finite_scale(backend_name):
    import minitf.functional as F
    q = backend.randn(1, 2, 4)
    with raises(ValueError, "attention: scale must be a finite number; got nan"):
        F.attention(q, q, q, scale=float("nan"))


def _decode(**settings):
    model = models.Transformer(10, 10, d_model=8, n_heads=2, n_layers=1)
    ids = backend.randint(3, 10, (1, 4))
    return model.decode(ids, *model.encode(ids), **settings)


@pytest.mark.parametrize("build, named", [
    (lambda: models.DecoderLM(10, d_model=8, n_heads=2, tie_weights="no"), "DecoderLM: tie_weights"),
    (lambda: models.DecoderLM(10, d_model=8, n_heads=2, causal="False"), "DecoderLM: causal"),
    (lambda: models.Transformer(10, 10, d_model=8, n_heads=2, share_embeddings="no"),
     "Transformer: share_embeddings"),
    (lambda: nn.EncoderBlock(4, 2, 8, causal="no"), "EncoderBlock: causal"),
    (lambda: nn.DecoderBlock(4, 2, 8, pre_ln=1), "DecoderBlock: pre_ln"),
    (lambda: nn.Residual(nn.Linear(4, 4), 4, pre_ln="no"), "Residual: pre_ln"),
    (lambda: nn.MultiHeadAttention(4, 2, bias="yes"), "MultiHeadAttention: bias"),
    (lambda: nn.Dropout(0.5).train("False"), "Dropout.train: mode"),
    (lambda: nn.RelativePositionBias(2, bidirectional="no"), "RelativePositionBias: bidirectional"),
    (lambda: _decode(mask_padding="no"), "Transformer.decode: mask_padding"),
])
def test_a_yes_or_no_setting_must_be_true_or_false(build, named):
    """'no' and 'False' are truthy strings: each turned on what it was written to turn off."""
    with raises(ValueError, named, "must be True or False"):
        build()


def test_settings_no_layer_reads_are_still_checked_and_a_cast_that_overflows_is_refused():
    """With n_layers=0 no block checks n_heads or the dropout rates, but the config keeps them
    (a checkpoint rebuilds from it); one class makes a loss of exactly 0; 1e300 is finite in
    float64 and inf once cast to a float32 parameter."""
    with raises(ValueError, "DecoderLM: n_heads must be a positive integer", "-3"):
        models.DecoderLM(10, d_model=8, n_heads=-3, n_layers=0)
    with raises(ValueError, "DecoderLM: d_model=8 is not divisible by n_heads=3"):
        models.DecoderLM(10, d_model=8, n_heads=3, n_layers=0)
    with raises(ValueError, "DecoderLM: attn_dropout must lie in [0, 1)", "5.0"):
        models.DecoderLM(10, d_model=8, n_heads=2, n_layers=0, attn_dropout=5.0)
    with raises(ValueError, "EncoderClassifier: n_classes must be an integer ≥ 2", "got 1"):
        models.EncoderClassifier(10, 1, d_model=8, n_heads=2, n_layers=1)
    with raises(ValueError, "LayerNorm: d must be a positive integer", "got 0"):
        nn.LayerNorm(0)
    layer = nn.Linear(3, 2)
    before = backend.to_numpy(layer.W.data).copy()
    with raises(ValueError, "Linear.load_state_dict", "W: holds values beyond float32's range"):
        layer.load_state_dict({"W": np.full((3, 2), 1e300), "b": np.zeros(2)})
    assert np.array_equal(backend.to_numpy(layer.W.data), before), "nothing was loaded"


def test_a_stack_and_a_residual_hold_modules():
    """Each failed only at the first forward, with "'int' object is not callable"."""
    for blocks in (None, nn.Linear(4, 4), [1, 2]):
        with raises(TypeError, "Stack: blocks must be a list (or generator) of minitf modules"):
            nn.Stack(blocks)
    with raises(TypeError, "Residual: layer is a NoneType; wanted a minitf module"):
        nn.Residual(None, 4)
    for pre_ln in (False, True):           # the sum x + f(x) failed as NumPy's broadcast error
        with raises(ValueError, "Residual: its Linear maps x (1, 2, 4) to (1, 2, 3)",
                    "wanted x's shape"):
            nn.Residual(nn.Linear(4, 3), 4, pre_ln=pre_ln)(backend.randn(1, 2, 4))


def test_the_building_blocks_name_what_they_were_given():
    from minitf.nn.init import initialize
    from minitf.nn.parameter import Parameter
    for data in ([1.0], None, np.arange(3)):          # a list was kept; int data failed at a step
        with raises(TypeError, "Parameter: data has", "wanted a float array"):
            Parameter(data)
    with raises(ValueError, "FeedForward: d_ff must be a positive integer", "got 0"):
        nn.FeedForward(4, 0)                           # it was named "Linear: d_out"
    with raises(TypeError, "build: config is a NoneType"):
        models.build("lm", None)
    with raises(ValueError, "build: unknown model kind 'gpt'"):
        models.build("gpt", {})
    with raises(ValueError, "build: unknown model kind ['lm']"):        # unhashable, raw
        models.build(["lm"], {})
    # Python's "RNNLM.__init__() got an unexpected keyword argument 'n_heads'", and "missing 1
    # required positional argument"
    with raises(ValueError, "build: config has 'n_heads', 'n_layers', 'd_ff' and 8 more, which "
                "RNNLM does not take; wanted RNNLM's settings"):
        models.build("rnn", models.DecoderLM(10, 8, 2, 1).config)
    with raises(ValueError, "build: config lacks 'n_classes', which EncoderClassifier needs"):
        models.build("classifier", {"vocab_size": 10})
    with raises(TypeError, "initialize: module is a NoneType"):
        initialize(None, "xavier")
    from minitf.nn.init import xavier_uniform
    from minitf.optim import decayed
    for fans, got in (((0, 0), "fan_in must be a positive integer; got 0"),  # ZeroDivisionError
                      ((-3, 2), "got -3"), ((4, 2.5), "fan_out must be a positive integer")):
        with raises(ValueError, "xavier_uniform:", got):
            xavier_uniform(*fans)
    with raises(TypeError, "decayed: module is a list; wanted a minitf module"):
        decayed([nn.Linear(2, 2).W])                       # 'list' has no attribute 'modules'


def test_a_translation_batch_of_sources_and_targets_that_differ_is_named():
    """src of 2 sentences and tgt of 1 failed in a Residual deep inside: "its MultiHeadAttention
    maps x (1, 4, 8) to (2, 4, 8)", never saying that src and tgt differ."""
    model = models.Transformer(10, 10, 8, 2, 1)
    with raises(ValueError, "Transformer: tgt holds 1 sequences and memory 2",
                "src and tgt of the same batch size"):
        model(backend.randint(3, 10, (2, 4)), backend.randint(3, 10, (1, 4)))


def test_sizes_and_names_of_the_wrong_type_are_one_line_not_python_s_own_error():
    """'not all arguments converted during string formatting' (a str d_model met %), 'unhashable
    type: list' (an activation looked up in a dict), and NumPy's rand for a float16 dropout."""
    with raises(ValueError, "MultiHeadAttention: d_model must be a positive integer", "got '8'"):
        nn.MultiHeadAttention("8", 2)
    with raises(ValueError, "MultiHeadAttention: n_heads must be a positive integer", "got 0"):
        nn.MultiHeadAttention(8, 0)
    with raises(ValueError, "DecoderLM: activation must be one of ('relu', 'gelu', 'gelu_exact'); "
                            "got ['gelu']"):
        models.DecoderLM(10, 16, 2, 1, activation=["gelu"])
    with raises(TypeError, "dropout: x has dtype float16; wanted float32 or float64"):
        F.dropout(np.ones(4, np.float16), 0.5)


def test_zero_grad_remakes_a_gradient_set_to_none_and_a_step_refuses_a_list():
    """torch's zero_grad sets .grad to None, and a learner may too: minitf's then failed with
    'NoneType' object has no attribute 'fill'; a list as a gradient, with 'no attribute shape'."""
    from minitf.optim import AdamW
    lm = models.DecoderLM(10, 16, 2, 1, max_len=8)
    for p in lm.parameters():
        p.grad = None
    lm.zero_grad()
    assert all(p.grad.shape == p.data.shape and not p.grad.any() for p in lm.parameters())
    first = lm.parameters()[0]
    first.grad = first.data.tolist()
    with raises(ValueError, f"AdamW.step: parameter 0 {first.data.shape} has a list as its "
                            f"gradient; wanted its own shape"):
        AdamW(lm).step()


def test_a_two_axis_mask_is_refused_where_its_batch_would_be_read_as_queries(backend_name):
    """keep = ids != pad, (b, n_k), with b = n_q = 4: broadcast as (n_q, n_k), sequence i's
    padding hid keys from query i of every sequence, silently (where b ≠ n_q the shapes
    clashed)."""
    block = nn.EncoderBlock(8, 2, 16)
    x = backend.randn(4, 4, 8)
    keep = np.ones((4, 4), dtype=bool)
    keep[0, 2:] = False
    refused_in_one_line(lambda: block(x, mask=backend.to_device(keep)), ValueError, [
        "MultiHeadAttention: mask has shape (4, 4), two axes, the first the size of the batch "
        "and of the queries (b = n_q = 4); broadcast, it would be read as one row per query",
        "wanted mask[:, None, None, :] for a mask per sequence, or mask[None, None] for one row "
        "per query"])
    padded = block(x, mask=backend.to_device(keep[:, None, None, :]))
    alone = block(x[:1, :2])                                 # sequence 0 without its padding
    assert np.allclose(backend.to_numpy(padded[:1, :2]), backend.to_numpy(alone), atol=1e-5)
    causal = np.tril(np.ones((4, 4), dtype=bool))            # one row per query, said so
    assert block(x, mask=backend.to_device(causal[None, None])).shape == (4, 4, 8)
    assert block(x[:1], mask=backend.to_device(causal)).shape == (1, 4, 8)   # b = 1: no doubt


def test_a_three_axis_mask_is_refused_where_its_batch_would_be_read_as_heads(backend_name):
    """With b = h = 2, (b, 1, n_k) broadcast against (h, n_q, n_k): padding of sequence 0 was
    applied to head 0 of every sequence, silently (with h = 3 the shapes clashed)."""
    mha = nn.MultiHeadAttention(8, 2)
    x = backend.randn(2, 5, 8)
    keep = np.ones((2, 5), dtype=bool)
    keep[0, 3:] = False
    for mask in (keep[:, None, :], np.ones((2, 5, 5), dtype=bool)):
        refused_in_one_line(lambda: mha(x, mask=backend.to_device(mask)), ValueError, [
            f"MultiHeadAttention: mask has shape {mask.shape}, three axes, the first the size "
            f"of the batch (b = 2); broadcast, it would be read as the heads' (h = 2)",
            "wanted mask[:, None] for a mask per sequence, or mask[None] for one per head",
            "a padding mask (b, 1, 1, n_k)"])
    padded = mha(x, mask=backend.to_device(keep[:, None, None, :]))          # (b, 1, 1, n_k): fine
    alone = mha(x[:1, :3])                                   # sequence 0 without its padding
    assert np.allclose(backend.to_numpy(padded[:1, :3]), backend.to_numpy(alone), atol=1e-5)
    # (h, n_q, n_k) of other heads than sequences is a mask per head (lesson 16's), as it was
    per_head = np.tril(np.ones((3, 5, 5), dtype=bool))
    three = nn.MultiHeadAttention(9, 3)
    assert three(backend.randn(2, 5, 9), mask=backend.to_device(per_head)).shape == (2, 5, 9)


def test_an_empty_sequence_attends_to_nothing_in_every_path(backend_name):
    """The causal path gave an empty output; the others stopped in softmax ("x has shape
    (2, 2, 0, 0), no entries along axis -1"): an empty sequence has no query to normalise."""
    for options in (dict(causal=True), dict(causal=False), dict(positional="alibi"),
                    dict(positional="relative")):
        mha = nn.MultiHeadAttention(8, 2, **options)
        y = mha(backend.randn(2, 0, 8))
        dx = mha.backward(backend.randn(2, 0, 8))
        assert y.shape == dx.shape == (2, 0, 8), options
    with raises(ValueError, "attention: there are no keys (n_k = 0) for the 3 queries"):
        F.attention(backend.randn(1, 3, 4), backend.randn(1, 0, 4), backend.randn(1, 0, 4))


def test_a_loss_backward_after_another_forward_is_refused(backend_name):
    """A forward between loss() and its backward() (to look at the logits) left its caches in
    every layer, and the backward used them: wrong gradients without a word."""
    lm = models.DecoderLM(11, d_model=8, n_heads=2, n_layers=1, max_len=8)
    a, c = backend.randint(0, 11, (2, 5)), backend.randint(0, 11, (2, 5))
    for between in (lambda: lm(c), lambda: lm.blocks(backend.randn(2, 5, 8))):   # or a block
        _, backward = lm.loss(a, a)
        between()
        with raises(RuntimeError, "DecoderLM.loss: its backward() was called after another "
                    "forward of the model or of its layers, whose caches replaced this loss's "
                    "(its gradients would be that input's); wanted backward() before they run "
                    "again, or the loss computed again"):
            backward()
    seq2seq = models.Transformer(13, 13, d_model=8, n_heads=2, n_layers=1)
    src, tgt = backend.randint(1, 13, (2, 4)), backend.randint(1, 13, (2, 3))
    _, backward = seq2seq.loss(src, tgt, tgt)
    seq2seq.encode(backend.randint(1, 13, (2, 4)))                 # its encoder's caches only
    with raises(RuntimeError, "Transformer.loss: its backward() was called after another forward"):
        backward()
    other = models.DecoderLM(11, d_model=8, n_heads=2, n_layers=1, max_len=8)
    _, backward = lm.loss(a, a)
    _, other_backward = other.loss(a, a)                           # another model's: no matter
    backward()
    other_backward()
    with raises(RuntimeError, "DecoderLM.backward() was called with no forward() since"):
        backward()                                                  # twice: the model's own line


def test_decode_given_encode_s_whole_return_says_to_unpack_it(backend_name):
    """memory = model.encode(src) is the first try: a bare AttributeError of a tuple's dtype."""
    model = models.Transformer(13, 13, d_model=8, n_heads=2, n_layers=1)
    src, tgt = backend.randint(1, 13, (2, 4)), backend.randint(1, 13, (2, 3))
    with raises(TypeError, "Transformer.decode: memory is a tuple; wanted the (b, m, d_model) "
                "array: encode returns (memory, memory_mask), unpack it"):
        model.decode(tgt, model.encode(src), None)
    with raises(TypeError, "Transformer: memory must be a NumPy or CuPy array; got list"):
        model.decode(tgt, [0.0], None)
    memory, memory_mask = model.encode(src)
    assert model.decode(tgt, memory, memory_mask).shape == (2, 3, 13)
