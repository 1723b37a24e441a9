"""Bad input to the layers and modules, one line each: an integer mask, sizes that are not
positive integers, gradients of the wrong shape or dtype, state dicts that are not finite real
arrays, relative-bias settings that make no buckets, a non-finite image, d_ff = 0, masking."""
import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
import minitf.models as models
from minitf import backend, cost

from test_bad_input import raises, refused_in_one_line

def test_an_integer_mask_is_refused_not_taken_as_additive(backend_name):
    """A 0/1 integer mask read as additive adds 0 or 1 to the scores: it would mask nothing."""
    keep = backend.to_device(np.tril(np.ones((3, 3), dtype=np.int64)))
    with raises(TypeError, "mask has dtype int64", "wanted bool (True = attend)", "astype(bool)"):
        nn.MultiHeadAttention(8, 2)(backend.randn(1, 3, 8), mask=keep)
    # a complex one lost its imaginary part to the cast, with NumPy's warning only
    with raises(TypeError, "MultiHeadAttention: mask has dtype complex128; wanted bool (True = "
                "attend) or float (additive: 0 or -inf)"):
        nn.MultiHeadAttention(8, 2)(backend.randn(1, 3, 8), mask=backend.to_device(
            np.zeros((3, 3), dtype=complex)))


@pytest.mark.parametrize("d_in, d_out, named", [(0, 3, "d_in"), (4.0, 3, "d_in"), (4, -1, "d_out")])
def test_linear_sizes_must_be_positive_integers(d_in, d_out, named):
    value = d_in if named == "d_in" else d_out
    with raises(ValueError, f"Linear: {named} must be a positive integer", f"got {value!r}"):
        nn.Linear(d_in, d_out)


def test_backward_refuses_a_gradient_of_the_wrong_shape_or_dtype(backend_name):
    layer = nn.Linear(4, 3)
    layer(backend.randn(2, 4))
    with raises(ValueError, "Linear.backward: dy has shape (2, 4)", "wanted (2, 3)",
                "last forward's output"):
        layer.backward(backend.randn(2, 4))
    with backend.precision("float64"):
        dy = backend.randn(2, 3)
    with raises(TypeError, "Linear.backward: dy has dtype float64", "wanted float32"):
        layer.backward(dy)
    from minitf.models import DecoderLM                          # every module, models included
    model = DecoderLM(7, 8, 2, 1, max_len=4)
    logits = model(backend.randint(0, 7, (2, 3)))
    with raises(ValueError, "DecoderLM.backward: dy has shape (2, 3)", "wanted (2, 3, 7)"):
        model.backward(logits[..., 0])


@pytest.mark.parametrize("state, error, fragments", [
    ([("W", np.zeros((2, 2)))], TypeError, ("state must be a dict", "got list")),
    ({"W": np.full((2, 2), np.nan), "b": np.zeros(2)}, ValueError,
     ("W: holds NaN or infinite values",)),
    ({"W": np.full((2, 2), "x"), "b": np.zeros(2)}, ValueError, ("W: dtype <U1; wanted real",)),
    ({"W": np.zeros((2, 2), complex), "b": np.zeros(2)}, ValueError, ("W: dtype complex128",)),
    ({"W": [[0.0, 0.0], [0.0, 0.0]], "b": np.zeros(2)}, ValueError, ("W: a list, not an array",)),
])
def test_load_state_dict_refuses_what_is_not_finite_real_arrays(state, error, fragments):
    with raises(error, "Linear.load_state_dict", *fragments):
        nn.Linear(2, 2).load_state_dict(state)


@pytest.mark.parametrize("settings, fragments", [
    (dict(num_buckets=2), ("num_buckets must be an integer ≥ 4", "got 2")),
    (dict(num_buckets=2, bidirectional=False, max_distance=1), ("max_distance must be an integer "
                                                                "≥ 2", "got 1")),
    (dict(num_buckets=32, max_distance=8), ("max_distance must be an integer ≥ 9",
                                            "distances 0..7", "got 8")),
    (dict(num_buckets=32, max_distance=4), ("max_distance must be an integer ≥ 9", "got 4")),
    (dict(bidirectional="no"), ("bidirectional must be True or False", "got 'no'")),  # truthy
])
def test_relative_bias_settings_that_cannot_make_buckets(settings, fragments):
    with raises(ValueError, "RelativePositionBias: ", *fragments):
        nn.RelativePositionBias(2, **settings)
    with raises(ValueError, "relative_position_buckets: ", *fragments):
        F.relative_position_buckets(4, **settings)


def test_a_non_finite_image_is_refused_at_the_model(backend_name):
    from minitf.models import VisionTransformer
    model = VisionTransformer(4, 2, 3, d_model=8, n_heads=2, n_layers=1)
    images = backend.to_numpy(backend.randn(2, 1, 4, 4))
    images[1, 0, 2, 3] = np.inf
    with raises(ValueError, "VisionTransformer: images holds 1 NaN or infinite value(s) of 32",
                "wanted finite numbers"):
        model(backend.to_device(images))


def test_mse_loss_and_fourier_features_bad_input(backend_name):
    with raises(ValueError, "mse_loss", "target has shape (4,)", "wanted (4, 1), the shape of pred"):
        F.mse_loss(backend.randn(4, 1), backend.randn(4))
    with raises(TypeError, "mse_loss", "target has dtype float32", "the dtype of pred"):
        F.mse_loss(backend.randn(4, dtype="float64"), backend.randn(4, dtype="float32"))
    with raises(TypeError, "fourier_features", "coords has dtype int64", "float"):
        F.fourier_features(backend.randint(0, 4, (3, 2)), 4)
    with raises(ValueError, "fourier_features", "n_octaves must be a positive integer", "got 0"):
        F.fourier_features(backend.randn(3, 2), 0)


@pytest.mark.parametrize("build", [
    lambda d_ff: models.DecoderLM(11, d_model=8, n_heads=2, n_layers=1, d_ff=d_ff),
    lambda d_ff: models.Transformer(11, 11, d_model=8, n_heads=2, n_layers=1, d_ff=d_ff),
    lambda d_ff: cost.lm_cost(11, 8, 1, d_ff=d_ff),
], ids=["DecoderLM", "Transformer", "lm_cost"])
def test_d_ff_zero_is_refused_not_read_as_the_default(build):
    with pytest.raises(ValueError, match=r"d_ff must be a positive integer, the feed-forward "
                                         r"network's hidden width; got 0"):
        build(0)
    assert build(None) is not None          # None still means 4 · d_model


def test_causal_attention_wants_one_sequence_and_a_positive_block(backend_name):
    q = backend.randn(1, 4, 2)
    with raises(ValueError, "causal_attention: q has 4 queries and k 5 keys; wanted the same "
                            "sequence for both (for a longer k, use attention with "
                            "causal_mask(n_q, n_k))"):
        F.causal_attention(q, backend.randn(1, 5, 2), backend.randn(1, 5, 2))
    with raises(ValueError, "causal_attention: block must be a positive integer, the number of "
                            "queries per block; got 0"):
        F.causal_attention(q, q, q, block=0)


def test_attention_dropout_outside_zero_one(backend_name):
    q = backend.randn(2, 3, 4)
    with raises(ValueError, "attention: dropout_p must lie in [0, 1); got 1.0"):
        F.attention(q, q, q, dropout_p=1.0)
    with raises(ValueError, "MultiHeadAttention: attn_dropout must lie in [0, 1); got -0.1"):
        nn.MultiHeadAttention(8, 2, attn_dropout=-0.1)
    with raises(ValueError, "attn_dropout must lie in [0, 1); got 1.5"):
        models.DecoderLM(10, d_model=8, n_heads=2, n_layers=1, attn_dropout=1.5)


def test_unknown_init_scheme():
    with raises(ValueError, "Transformer: init must be one of ('normal', 'xavier'); got 'he'"):
        models.Transformer(10, 10, d_model=8, n_heads=2, init="he")
    with raises(ValueError, "VisionTransformer: init must be one of", "got 'Xavier'"):
        models.VisionTransformer(8, 4, 2, d_model=8, n_heads=2, init="Xavier")
    with raises(ValueError, "initialize: init must be one of", "got 'glorot'"):
        nn.initialize(nn.Linear(3, 4), "glorot")


def test_segment_ids_and_masking_settings_are_checked(backend_name):
    from minitf import data
    model = models.EncoderLM(7, 8, 2, 1, max_len=6, n_segments=2)
    ids = backend.randint(1, 7, (2, 5))
    with raises(ValueError, "segment_ids must lie in [0, n_segments=2)", "from 0 to 2"):
        model(ids, backend.to_device(np.array([[0, 0, 1, 2, 0], [0, 1, 1, 1, 1]])))
    with raises(ValueError, "segment_ids has shape (2, 4)", "wanted (2, 5), the shape of ids"):
        model(ids, backend.randint(0, 2, (2, 4)))
    with raises(ValueError, "EncoderClassifier", "segment_ids were given", "n_segments"):
        models.EncoderClassifier(7, 2, 8, 2, 1)(ids, backend.randint(0, 1, (2, 5)))
    with raises(ValueError, "n_segments must be an integer ≥ 0", "-1"):
        models.EncoderClassifier(7, 2, 8, 2, 1, n_segments=-1)
    with raises(ValueError, "EncoderLM: pad_id must be an integer in [0, 6]", "7"):
        models.EncoderLM(7, 8, 2, 1, pad_id=7)
    with raises(TypeError, "EncoderLM: a bidirectional encoder has no KV cache"):
        model.new_cache()
    for p in (0, 1, 1.5, -0.1):
        with raises(ValueError, "mask_tokens: p must lie in (0, 1)", repr(p)):
            data.mask_tokens(ids, 1, 7, p=p)
    with raises(ValueError, "mask_tokens: mask_id must be an integer in [0, 6]", "9"):
        data.mask_tokens(ids, 9, 7)
    with raises(ValueError, "mask_tokens: ids must lie in [0, vocab_size=5)"):
        data.mask_tokens(ids, 1, 5)
    with raises(ValueError, "every id in [0, 3) is special"):
        data.mask_tokens(backend.randint(0, 3, (2, 5)), 1, 3, special_ids=(0, 2))
    for ignore_index in (3, 2.0, "x"):           # 3 is an ordinary id: a chosen 3 would not count
        with raises(ValueError, "mask_tokens: ignore_index must be an integer that no scored "
                    "token has", repr(ignore_index)):
            data.mask_tokens(ids, 1, 7, special_ids=(0,), ignore_index=ignore_index)
    data.mask_tokens(ids, 1, 7, special_ids=(0,), ignore_index=0)          # a special id will do
    with raises(ValueError, "encode_pairs: the vocabulary has no [SEP]"):
        data.WordVocabulary(["a b"]).encode_pairs([("a", "b")])


def test_cross_entropy_backward_wants_a_scalar(backend_name):
    logits = backend.randn(2, 3, 5)
    _, cache = F.cross_entropy(logits, backend.randint(0, 5, (2, 3)))
    with raises(ValueError, "cross_entropy_backward: dloss has shape (2,); wanted a scalar"):
        F.cross_entropy_backward(backend.randn(2), cache)


def test_table_layers_refuse_their_sizes_and_std_in_their_own_name():
    """A negative std was randn's error, naming no layer; LearnedPositionalEmbedding(0, 8) and
    SinusoidalPositionalEncoding('8') were built, and failed at their first forward."""
    for call, said in [
            (lambda: nn.Embedding(5, 4, std=-1), "Embedding: std must be a finite number ≥ 0"),
            (lambda: nn.LearnedPositionalEmbedding(8, 4, std=float("nan")),
             "LearnedPositionalEmbedding: std must be a finite number ≥ 0"),
            (lambda: nn.LearnedPositionalEmbedding(0, 8),
             "LearnedPositionalEmbedding: max_len must be a positive integer"),
            (lambda: nn.LearnedPositionalEmbedding(8, 2.5),
             "LearnedPositionalEmbedding: d_model must be a positive integer"),
            (lambda: nn.ClassToken(4, std=-1), "ClassToken: std must be a finite number ≥ 0"),
            # checked when built: SinusoidalPositionalEncoding('8') refused x of width 8
            (lambda: nn.SinusoidalPositionalEncoding("8"),
             "SinusoidalPositionalEncoding: d_model must be a positive integer"),
            (lambda: nn.SinusoidalPositionalEncoding(8, base=-1),
             "SinusoidalPositionalEncoding: base must be a finite number > 0")]:
        refused_in_one_line(call, ValueError, [said])
