"""Bad input to a functional op at its edges: a float mask of zeros and ones, a NumPy number
where a Python one is wanted, nothing to normalise or attend to, settings that matched nothing,
the forward's whole return passed as the cache, sizes that do not fit."""
import numpy as np
import pytest

import minitf.functional as F
import minitf.models as models
import minitf.nn as nn
from minitf import backend

from test_bad_input import raises
from test_bad_input_functional import floats, ints

def test_a_float_mask_of_zeros_and_ones_is_refused_not_taken_as_additive(backend_name):
    """np.tril(np.ones((n, n))), the usual causal mask in NumPy, is float64: read as additive it
    added 0 or 1 to the scores and masked nothing (query 0 gave 2 % of its weight to the future)."""
    keep = backend.to_device(np.tril(np.ones((3, 3))))
    x = backend.randn(1, 3, 8)
    q = backend.randn(1, 2, 3, 4)
    for call, where, name in [
            (lambda: nn.MultiHeadAttention(8, 2)(x, mask=keep), "MultiHeadAttention", "mask"),
            (lambda: F.attention(q, q, q, mask=keep), "attention", "mask"),
            (lambda: F.combine_masks(keep > 0, keep), "combine_masks", "masks[1]")]:
        with raises(ValueError, f"{where}: {name} is a float array of 0s and 1s",
                    "so it would mask nothing", f"pass {name}.astype(bool)"):
            call()
    additive = backend.to_device(np.where(np.tril(np.ones((3, 3))) > 0, 0.0, -np.inf))
    zeros = backend.to_device(np.zeros((3, 3)))
    for allowed in (additive, zeros, additive - 1):              # additive, all zeros, a bias
        F.attention(q, q, q, mask=allowed)


def test_a_numpy_number_is_told_what_to_pass_instead():
    """DecoderLM(ids.max() + 1) said "vocab_size must be a positive integer; got np.int64(10)",
    which reads as a contradiction: a NumPy number is not a Python int (a config is JSON)."""
    from minitf.optim import AdamW
    lm = models.DecoderLM(10, 8, 2, 1)
    x = backend.randn(2, 3)
    for call, fragments in [
            (lambda: models.DecoderLM(np.int64(10), 8, 2, 1),
             ["got np.int64(10), a NumPy int64: pass int(vocab_size)"]),
            (lambda: AdamW(lm, np.float32(1e-3)), ["got np.float32(0.001), a NumPy float32: "
                                                   "pass float(lr)"]),
            (lambda: F.dropout(x, np.float32(0.5)), ["got np.float32(0.5), a NumPy float32: "
                                                     "pass float(p)"])]:
        with raises(ValueError, *fragments):
            call()
    for call in (lambda: models.DecoderLM(np.int64(-1), 8, 2, 1),     # int() would not do
                 lambda: AdamW(lm, np.float32(-1)), lambda: F.dropout(x, np.float32(2)),
                 lambda: F.dropout(x, np.str_("0.5")), lambda: F.dropout(x, np.complex128(0.5)),
                 lambda: AdamW(lm, np.datetime64("2020"))):          # no numbers: no advice
        with pytest.raises(ValueError) as caught:
            call()
        assert "NumPy" not in str(caught.value)


def test_nothing_to_normalise_average_or_attend_to_is_named(backend_name):
    """Each failed inside NumPy ("zero-size array to reduction operation maximum"), in Python
    (float division by zero), or on an index (-1 out of bounds for an LSTM of no steps)."""
    f32 = lambda *shape: backend.to_device(np.zeros(shape, np.float32))   # noqa: E731
    for call, where, fragments in [
            (lambda: F.softmax(f32(2, 0)), "softmax", ["no entries along axis -1"]),
            (lambda: F.log_softmax(f32(2, 0)), "log_softmax", ["no entries along axis -1"]),
            (lambda: F.attention(f32(1, 2, 3, 4), f32(1, 2, 0, 4), f32(1, 2, 0, 4)), "attention",
             ["there are no keys (n_k = 0)"]),
            (lambda: nn.MeanPool()(f32(2, 0, 8)), "MeanPool", ["no positions"]),
            (lambda: models.SetEncoder(3, 2, 8, 2, pooling="mean")(f32(2, 0, 3)), "SetEncoder",
             ["points has 0 elements", "mean pooling averages them"]),
            (lambda: nn.LearnedPositionalEmbedding(4, 8)(f32(1, 2, 8), offset=1.0),
             "LearnedPositionalEmbedding", ["offset must be an integer ≥ 0", "got 1.0"])]:
        with raises(ValueError, f"{where}: ", *fragments):
            call()
    lstm = nn.LSTM(8, 4)                              # no steps is no error: as for the RNN
    assert lstm(f32(2, 0, 8)).shape == (2, 0, 4) and lstm.last_cell.shape == (2, 4)


def test_settings_that_matched_nothing_or_built_nothing_are_refused():
    """Each was accepted: an ignore_index of 1.5 or '1' ignored no target, float ids were never
    equal to pad_id (nothing masked), a NaN in a mask made its rows NaN, a +inf gave its key all
    the weight, PyTorch's causal mask (True = hide) let each query see only the future, and a [CLS] token of width 0 or a bias of 0 heads was built."""
    logits, targets = backend.randn(2, 3, 5), backend.randint(0, 5, (2, 3))
    q = backend.randn(1, 2, 3, 4)
    nan_mask, inf_mask = np.zeros((3, 3)), np.where(np.tril(np.ones((3, 3), bool)), 0, np.inf)
    nan_mask[0, 1] = np.nan                                        # inf_mask: the sign slipped
    torch_causal = np.triu(np.ones((3, 3), bool), 1)               # True = hide, PyTorch's way
    for call, error, fragments in [
            (lambda: F.cross_entropy(logits, targets, ignore_index=1.5), TypeError,
             ["cross_entropy: ignore_index must be an integer id, or None", "got 1.5"]),
            (lambda: F.cross_entropy(logits, targets, ignore_index="1"), TypeError,
             ["got '1'"]),
            (lambda: F.padding_mask_from_ids(backend.to_device(np.array([[1.5, 0.0]])), 0),
             TypeError, ["padding_mask_from_ids: ids has dtype float64; wanted integer"]),
            (lambda: F.attention(q, q, q, mask=backend.to_device(nan_mask)), ValueError,
             ["attention: mask holds NaN"]),
            (lambda: F.attention(q, q, q, mask=backend.to_device(inf_mask)), ValueError,
             ["attention: mask holds +inf; wanted an additive mask of 0 (attend) and -inf"]),
            (lambda: nn.MultiHeadAttention(4, 2)(q[0], mask=backend.to_device(torch_causal)),
             ValueError, ["MultiHeadAttention: mask is True only above the diagonal",
                          "minitf's True means attend (PyTorch's means hide); for a mask with "
                          "True = hide, pass ~mask (to see only later keys, pass it as floats"]),

            (lambda: nn.ClassToken(0), ValueError, ["ClassToken: d must be a positive integer"]),
            (lambda: nn.RelativePositionBias(0), ValueError,
             ["RelativePositionBias: n_heads must be a positive integer"])]:
        with raises(error, *fragments):
            call()
    F.cross_entropy(logits, targets, ignore_index=None)          # None: no target ignored
    # later keys only, given as floats as that message says: taken
    F.attention(q, q, q, mask=backend.to_device(np.where(torch_causal, 0.0, -np.inf)))
    F.cross_entropy(logits, targets, ignore_index=np.int64(-100))


def _function_cases():
    """Every functional pair minitf's gradient checks run, by name."""
    from minitf import gradcheck_cases
    from minitf.gradcheck import FunctionCase
    with backend.precision("float64"):
        for name in gradcheck_cases.CASES:
            built = gradcheck_cases.build(name)
            for label, case in (built.items() if isinstance(built, dict) else [(name, built)]):
                if isinstance(case, FunctionCase):
                    yield label, case


@pytest.mark.parametrize("label, case", list(_function_cases()), ids=lambda v: str(v)[:40])
def test_the_forward_s_whole_return_as_the_cache_is_one_line(label, case):
    """The classic slip: op_backward(dy, op(x)) where op(x) is (y, cache). It failed deep inside
    (a tuple without .shape, an unpacking) or, for log_softmax's cache in softmax's backward,
    ran on the wrong arrays; the real cache is never refused."""
    with backend.precision("float64"):
        pair = case.forward(**case.inputs, **case.options)
        y, cache = pair
        dy = backend.randn(*y.shape) if np.ndim(y) else 1.0
        case.backward(dy, cache)
        forward = case.backward.__name__.removesuffix("_backward")
        with raises(ValueError, f"{case.backward.__name__}: cache is the (output, cache) pair "
                                f"that {forward} returned; wanted its second element"):
            case.backward(dy, pair)


def test_a_parameter_free_layer_or_a_table_refuses_what_is_not_a_float():
    """No parameters to take a dtype from: MeanPool averaged ints into 0s (1/n truncated), the
    sinusoidal layer and the tables returned integer sines."""
    with raises(TypeError, "MeanPool: x has dtype int64; wanted float32 or float64"):
        nn.MeanPool()(ints(2, 3, 4))
    x = backend.randn(1, 3, 2)
    for keep in (np.array([[0.0, 0.0, -np.inf]]), np.array([[1, 1, 0]])):  # -inf: a NaN warning
        with raises(TypeError, f"MeanPool: keep has dtype {keep.dtype}; wanted bool (True = a "
                    f"real token); for a 0/1 mask with 1 = real, pass keep.astype(bool)"):
            nn.MeanPool()(x, keep=backend.to_device(keep))
    assert nn.MeanPool()(x, keep=backend.to_device(np.array([[True, True, False]]))).shape == (1, 2)
    with raises(TypeError, "SinusoidalPositionalEncoding: x has dtype int64; wanted float32"):
        nn.SinusoidalPositionalEncoding(4)(ints(1, 3, 4))
    for table, call in (("sinusoidal_table", lambda dtype: F.sinusoidal_table(3, 4, dtype=dtype)),
                        ("rope_angles", lambda dtype: F.rope_angles(3, 4, dtype=dtype)),
                        ("alibi_bias", lambda dtype: F.alibi_bias(2, 3, dtype=dtype))):
        for dtype in ("int64", bool, "complex128", "bogus"):
            with raises(ValueError, f"{table}: dtype must be 'float32' or 'float64'; got"):
                call(dtype)
        assert np.asarray(call("float64")[0]).dtype == np.float64


def test_mse_backward_keeps_pred_s_dtype_for_a_numpy_dloss():
    pred = np.ones((2, 3), np.float32)
    _, cache = F.mse_loss(pred, np.zeros_like(pred))
    for dloss in (1.0, np.float64(1.0), np.array(1.0)):
        assert all(g.dtype == np.float32 for g in F.mse_loss_backward(dloss, cache))


def test_an_out_a_parts_a_d_k_or_buckets_that_do_not_fit_are_one_line():
    """NumPy's broadcast or casting error (softmax's out), "'float' object is not iterable"
    (split_heads' parts), ZeroDivisionError (d_k = 0), and relative_bias' errors in the words of
    the embedding it looks up (ids, vocab_size)."""
    x = floats(2, 3)
    with raises(ValueError, "softmax: out has shape (3, 3); wanted (2, 3), the shape of x"):
        F.softmax(x, out=backend.randn(3, 3))
    with raises(TypeError, "softmax: out has dtype int64; wanted"):
        F.softmax(x, out=ints(2, 3))
    for parts in (2.0, (), "qk"):
        with raises(ValueError, "split_heads: parts must be a positive integer or a tuple of head "
                                f"widths; got {parts!r}"):
            F.split_heads(floats(2, 3, 8), 2, parts=parts)
    empty = floats(1, 1, 3, 0)
    with raises(ValueError, "attention: q and k have d_k = 0 features; wanted at least one"):
        F.attention(empty, empty, floats(1, 1, 3, 4))
    with raises(ValueError, "relative_bias: buckets must lie in [0, num_buckets=3)"):
        F.relative_bias(floats(3, 2), ints(3, 5) * 4)
    with raises(TypeError, "relative_bias: buckets has dtype float"):
        F.relative_bias(floats(6, 2), floats(3, 5))
    with raises(ValueError, "relative_bias: table has shape (6,); wanted (num_buckets, h)"):
        F.relative_bias(floats(6), ints(3, 5))


def test_the_forward_pair_of_a_dropout_that_dropped_nothing_and_of_a_0d_loss_is_refused():
    """A dropout of p = 0 (or not training) keeps None: its pair is (y, None). On CuPy a loss is
    a 0-d array, not a Python float: its pair failed in a '.shape' of the float dloss."""
    x = floats(3, 4)
    for kept in (F.dropout(x, 0.0), F.dropout(x, 0.5, training=False)):
        with raises(ValueError, "dropout_backward: cache is the (output, cache) pair"):
            F.dropout_backward(x, kept)
        F.dropout_backward(x, kept[1])                    # its real cache, None, is taken
    loss, cache = F.cross_entropy(floats(4, 5), ints(4) * 0)
    with raises(ValueError, "cross_entropy_backward: cache is the (output, cache) pair"):
        F.cross_entropy_backward(1.0, (np.asarray(loss), cache))
    loss, cache = F.mse_loss(x, x * 0)
    with raises(ValueError, "mse_loss_backward: cache is the (output, cache) pair"):
        F.mse_loss_backward(1.0, (np.asarray(loss), cache))
