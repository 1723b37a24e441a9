"""Bad input to a functional op, called by you: one line naming the op, the argument, what it got
and what was wanted -- not a traceback from inside NumPy, and never integers where the math
needs fractions (a rotation of integer bits read as floats, a softmax that cannot be written)."""
import numpy as np
import pytest

import minitf.functional as F
from minitf import backend

from test_bad_input import raises


def ints(*shape):
    return backend.to_device(np.ones(shape, dtype=np.int64))


def floats(*shape):
    return backend.randn(*shape)


# (the call, the error, fragments its one line must hold); each runs on every backend
CASES = {
    "gelu of a list": (lambda: F.gelu([1.0, 2.0]), TypeError,
                       ["gelu:", "x must be a NumPy or CuPy array", "got list"]),
    "gelu of integers": (lambda: F.gelu(ints(2, 3)), TypeError,
                         ["gelu:", "x has dtype int64", "wanted float32 or float64",
                          "x.astype('float32')"]),
    "gelu told keep_cache='no'": (lambda: F.gelu(floats(2, 3), keep_cache="no"), ValueError,
                                  ["gelu:", "keep_cache must be True or False", "got 'no'"]),
    "relu of a string": (lambda: F.relu("x"), TypeError, ["relu:", "x must be", "got str"]),
    "softmax of integers": (lambda: F.softmax(ints(2, 3)), TypeError,
                            ["softmax:", "x has dtype int64"]),
    "softmax of a NumPy scalar": (lambda: F.softmax(np.float64(1.0)), TypeError,
                                  ["softmax:", "x must be a NumPy or CuPy array",
                                   "got the scalar float64"]),
    "softmax of booleans": (lambda: F.softmax(ints(2, 3) > 0), TypeError,
                            ["softmax:", "x has dtype bool"]),
    "softmax along no axis": (lambda: F.softmax(floats(2, 3), axis=2), ValueError,
                              ["softmax:", "axis must be an integer in [-2, 1]", "(2, 3)",
                               "got 2"]),
    "log_softmax of a 0-d array": (lambda: F.log_softmax(backend.to_device(np.array(1.0))),
                                   ValueError, ["log_softmax:", "x has shape ()",
                                                "at least 1 axis"]),
    "dropout of integers": (lambda: F.dropout(ints(4), 0.5), TypeError,
                            ["dropout:", "x has dtype int64"]),
    "dropout told training='no'": (lambda: F.dropout(floats(4), 0.5, training="no"),
                                   ValueError, ["dropout:", "training must be True or False",
                                                "got 'no'"]),     # it dropped: 'no' is truthy
    "layer_norm of integers": (lambda: F.layer_norm(ints(2, 3), floats(3), floats(3)),
                               TypeError, ["layer_norm:", "x has dtype int64"]),  # a float64 y
    "layer_norm told keep_cache=0": (
        lambda: F.layer_norm(floats(2, 3), floats(3), floats(3), keep_cache=0), ValueError,
        ["layer_norm:", "keep_cache must be True or False", "got 0"]),
    "mse_loss of integers": (lambda: F.mse_loss(ints(2, 3), ints(2, 3)), TypeError,
                             ["mse_loss:", "pred has dtype int64"]),
    "mse_loss of nothing": (lambda: F.mse_loss(floats(0), floats(0)), ValueError,
                            ["mse_loss:", "pred has shape (0,), no entries"]),   # it was NaN
    "cross_entropy of boolean logits": (
        lambda: F.cross_entropy(ints(2, 5) > 0, backend.to_device(np.array([1, 2]))),
        TypeError, ["cross_entropy:", "logits has dtype bool"]),
    "rope of integers": (lambda: F.rope(ints(1, 4, 8), *F.rope_angles(4, 8)), TypeError,
                         ["rope:", "x has dtype int64"]),
    "rope without its sines": (lambda: F.rope(floats(1, 4, 8), F.rope_angles(4, 8)[0], None),
                               TypeError, ["rope:", "sin must be a NumPy or CuPy array",
                                           "got NoneType"]),
    "rope with too few sines": (
        lambda: F.rope(floats(1, 4, 8), F.rope_angles(4, 8)[0], F.rope_angles(2, 8)[1]),
        ValueError, ["rope:", "sin has shape (2, 4)", "wanted (n=4, d_head/2=4)"]),
    "causal_attention of integer queries": (
        lambda: F.causal_attention(ints(1, 2, 4, 8), floats(1, 2, 4, 8), floats(1, 2, 4, 8)),
        TypeError, ["causal_attention:", "q has dtype int64"]),
    "attention of integer values": (
        lambda: F.attention(floats(1, 4, 8), floats(1, 4, 8), ints(1, 4, 8)),
        TypeError, ["attention:", "v has dtype int64"]),
    "split_heads into uneven heads": (lambda: F.split_heads(floats(1, 4, 10), 4), ValueError,
                                      ["split_heads:", "y has 10 features",
                                       "a multiple of parts · n_heads = 4"]),
    "split_heads into no heads": (lambda: F.split_heads(floats(1, 4, 8), 0), ValueError,
                                  ["split_heads:", "n_heads must be a positive integer", "got 0"]),
    "split_heads of a 2-d y": (lambda: F.split_heads(floats(4, 8), 2), ValueError,
                               ["split_heads:", "y has shape (4, 8)", "wanted (b, n, features)"]),
    "split_heads into widths that do not add up": (
        lambda: F.split_heads(floats(1, 4, 8), 2, (2, 3)), ValueError,
        ["split_heads:", "y has 8 features", "(2, 3)) = 10"]),
    "merge_heads of one head array": (lambda: F.merge_heads(floats(1, 2, 4, 4)), ValueError,
                                      ["merge_heads:", "parts has shape (1, 2, 4, 4)",
                                       "(parts, b, h, n, d_head)"]),
    "merge_heads of heads that disagree": (
        lambda: F.merge_heads([floats(1, 2, 4, 4), floats(1, 3, 4, 4)]), ValueError,
        ["merge_heads:", "parts[1] has shape (1, 3, 4, 4)", "wanted (b=1, h=2, n=4, w)"]),
    "merge_heads of nothing": (lambda: F.merge_heads([]), ValueError,
                               ["merge_heads:", "parts is empty"]),
}


def test_the_checks_let_good_input_through_unchanged(backend_name):
    """The same ops on what they want: split and merge are inverses, rope keeps a vector's length."""
    y = floats(2, 4, 12)
    for parts in (3, (2, 2, 2), (2, 1, 3)):
        heads = F.split_heads(y, 2, parts)
        merged = F.merge_heads(heads if parts == 3 else list(heads))
        assert np.array_equal(backend.to_numpy(merged), backend.to_numpy(y))
    x = floats(1, 4, 8)
    rotated, _ = F.rope(x, *F.rope_angles(4, 8))
    assert np.allclose(backend.to_numpy((rotated ** 2).sum(-1)), backend.to_numpy((x ** 2).sum(-1)))
    p, _ = F.softmax(floats(2, 3), axis=0)
    assert np.allclose(backend.to_numpy(p.sum(0)), 1.0)


# (forward, its backward, the output's shape): each backward is given a dy of another shape,
# a list and integers, and must name what it wanted
BACKWARDS = {
    "linear": (lambda: F.linear(floats(2, 3), floats(3, 4), floats(4)), F.linear_backward,
               "dy", "(2, 4), the shape of linear's y"),
    "gelu": (lambda: F.gelu(floats(2, 3)), F.gelu_backward, "dy", "(2, 3), the shape of gelu's y"),
    "softmax": (lambda: F.softmax(floats(2, 3)), F.softmax_backward, "dp",
                "(2, 3), the shape of softmax's p"),
    "layer_norm": (lambda: F.layer_norm(floats(2, 3), floats(3), floats(3)),
                   F.layer_norm_backward, "dy", "(2, 3), the shape of layer_norm's y"),
    "attention": (lambda: F.attention(floats(1, 4, 8), floats(1, 5, 8), floats(1, 5, 6)),
                  F.attention_backward, "dout", "(1, 4, 6), the shape of attention's out"),
    "causal_attention": (lambda: F.causal_attention(floats(1, 4, 8), floats(1, 4, 8),
                                                    floats(1, 4, 6)),
                         F.causal_attention_backward, "dout",
                         "(1, 4, 6), the shape of causal_attention's out"),
    "rope": (lambda: F.rope(floats(1, 4, 8), *F.rope_angles(4, 8)), F.rope_backward, "dy",
             "(..., n=4, d_head=8)"),
    "patches": (lambda: F.patches(floats(2, 3, 4, 4), 2), F.patches_backward, "dy",
                "(2, 4, 12), the shape of patches' tokens"),
    "embedding": (lambda: F.embedding(backend.to_device(np.array([[1, 2]])), floats(5, 3)),
                  F.embedding_backward, "dy", "(1, 2, 3), the shape of embedding's y"),
    "lstm": (lambda: F.lstm(floats(2, 4, 3), floats(2, 5), floats(2, 5), floats(3, 20),
                            floats(5, 20), floats(20)),
             F.lstm_backward, "dH", "(2, 4, 5), the shape of lstm's H"),
}


@pytest.mark.parametrize("op", BACKWARDS)
def test_a_functional_backward_refuses_a_gradient_that_is_not_its_outputs(op, backend_name):
    forward, backward, name, wanted = BACKWARDS[op]
    out, cache = forward()
    backward(backend.randn(*out.shape), cache)                       # the right one passes
    where = backward.__name__ + ":"
    with raises(ValueError, where, f"{name} has shape", wanted):
        backward(backend.randn(*(size + 1 for size in out.shape)), cache)
    with raises(TypeError, where, f"{name} must be a NumPy or CuPy array", "got list"):
        backward(backend.to_numpy(out).tolist(), cache)
    with raises(TypeError, where, f"{name} has dtype int64"):
        backward(ints(*out.shape), cache)


@pytest.mark.parametrize("forward, backward", [
    (lambda: F.mse_loss(floats(3), floats(3)), F.mse_loss_backward),
    (lambda: F.cross_entropy(floats(2, 5), backend.to_device(np.array([1, 2]))),
     F.cross_entropy_backward),
])
def test_a_loss_gradient_is_one_real_number(forward, backward, backend_name):
    _, cache = forward()
    backward(1.0, cache)
    backward(backend.to_device(np.array(2.0)), cache)
    with raises(ValueError, backward.__name__, "dloss has shape (3,)", "wanted a scalar"):
        backward(floats(3), cache)
    for bad in ("1.0", True):
        with raises(TypeError, backward.__name__, f"dloss is {bad!r}", "a real number"):
            backward(bad, cache)


# Tables of positions and masks are built from plain numbers: a bad one is named, not passed on
# to NumPy (a negative length, a fractional size, a log2 of 0 heads, shapes that do not add up).
def _sizes(where, name, wanted, call, bads):
    return {f"{where} with {name}={bad!r}": (lambda bad=bad: call(bad), ValueError,
                                             [f"{where}: {name} must be {wanted}", f"got {bad!r}"])
            for bad in bads}


SIZES = {
    **_sizes("sinusoidal_table", "n", "an integer ≥ 0", lambda n: F.sinusoidal_table(n, 8),
             [-1, 4.5, "4", None]),
    **_sizes("sinusoidal_table", "d", "a positive integer", lambda d: F.sinusoidal_table(4, d),
             [0, -2, 8.0, None]),
    **_sizes("sinusoidal_table", "offset", "an integer ≥ 0",
             lambda o: F.sinusoidal_table(4, 8, offset=o), [-2, 1.5]),
    **_sizes("sinusoidal_table", "base", "a finite number > 0",
             lambda b: F.sinusoidal_table(4, 8, base=b), [0, -10000.0, float("inf")]),
    **_sizes("rope_angles", "n", "an integer ≥ 0", lambda n: F.rope_angles(n, 8),
             [-1, 4.5, "4", None]),
    **_sizes("rope_angles", "d_head", "a positive integer", lambda d: F.rope_angles(4, d),
             [0, -2, 8.0, None]),
    **_sizes("rope_angles", "offset", "an integer ≥ 0", lambda o: F.rope_angles(4, 8, offset=o),
             [-3]),
    **_sizes("rope_angles", "base", "a finite number > 0", lambda b: F.rope_angles(4, 8, base=b),
             [0, -1]),
    **_sizes("alibi_slopes", "n_heads", "a positive integer", F.alibi_slopes,
             [0, -2, 2.5, None, "4"]),
    **_sizes("alibi_bias", "n_heads", "a positive integer", lambda h: F.alibi_bias(h, 4),
             [0, -2, 2.5, None, "4"]),
    **_sizes("alibi_bias", "n_q", "an integer ≥ 0", lambda n: F.alibi_bias(4, n), [-1, None]),
    **_sizes("relative_position_buckets", "n_q", "an integer ≥ 0",
             F.relative_position_buckets, [-1]),
    **_sizes("clipped_relative_positions", "max_relative", "a positive integer",
             lambda k: F.clipped_relative_positions(4, max_relative=k), [-1, 0]),
    **_sizes("patches", "patch_size", "a positive integer",
             lambda p: F.patches(floats(2, 1, 8, 8), p), [None, "2", 2.5, 0]),
    **_sizes("padding_mask_from_ids", "pad_id", "an integer",
             lambda p: F.padding_mask_from_ids(ints(1, 2), p), [None, "0"]),
    **{f"{where} with fewer keys than queries": (lambda call=call: call(4, 2), ValueError,
                                                 [f"{where}: n_k=2 must be at least n_q=4"])
       for where, call in [("alibi_bias", lambda n_q, n_k: F.alibi_bias(4, n_q, n_k)),
                           ("relative_position_buckets", F.relative_position_buckets),
                           ("clipped_relative_positions", F.clipped_relative_positions)]},
    "combine_masks of shapes that do not broadcast": (
        lambda: F.combine_masks(F.causal_mask(3), None, F.causal_mask(4)), ValueError,
        ["combine_masks: masks of shapes (3, 3) and (4, 4) do not broadcast together"]),
    "combine_masks of a string": (lambda: F.combine_masks(F.causal_mask(3), "x"), TypeError,
                                  ["combine_masks: masks[1] must be a NumPy or CuPy array",
                                   "got str"]),
    "combine_masks of an integer mask": (lambda: F.combine_masks(None, ints(3, 3)), TypeError,
                                         ["combine_masks: masks[1] has dtype int64",
                                          "masks[1].astype(bool)"]),
}


@pytest.mark.parametrize("case", [*CASES, *SIZES])
def test_a_functional_op_refuses_bad_input_in_one_line(case, backend_name):
    """CASES: the ops' arrays; SIZES: the sizes of tables and masks."""
    call, error, fragments = {**CASES, **SIZES}[case]
    with raises(error, *fragments) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_sizes_read_off_arrays_and_masks_that_broadcast_still_pass(backend_name):
    """A NumPy integer is a size like any other, and masks of different ranks still combine."""
    four, two = np.int64(4), np.int64(2)
    assert F.sinusoidal_table(four, 6, offset=two).shape == (4, 6)
    assert F.rope_angles(four, 8, offset=two)[0].shape == (4, 4)
    assert F.alibi_bias(two, four).shape == (2, 4, 4)
    assert F.patches(floats(1, 1, 4, 4), two)[0].shape == (1, 4, 4)
    keep = backend.to_device(np.array([[True, True, False]]))
    assert F.combine_masks(F.causal_mask(3), F.padding_mask_from_ids(ints(2, 3), 0),
                           keep).shape == (2, 1, 3, 3)
