"""minitf.array_ops: the sums, maxima, scatter and blocks layers share give what the plain NumPy
expressions give, on every backend, whichever path (matrix product, knockout, blocks) they take."""
import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
from minitf import array_ops, backend


def test_scatter_add_adds_every_repeated_index(backend_name):
    xp = backend.get_array_module()
    for dtype in ("float32", "float64"):
        target = xp.zeros((4, 2), dtype=dtype)
        array_ops.scatter_add(target, xp.asarray([1, 3, 1, 1]), xp.ones((4, 2), dtype=dtype))
        assert backend.to_numpy(target)[:, 0].tolist() == [0, 3, 0, 1]
        # rows of their own values, unsorted ids, many repeats: each row lands on its own id
        # (with ones, rows added in another order than their ids gave the same sums)
        rng = np.random.default_rng(0)
        ids, values = rng.integers(0, 5, 40), rng.normal(size=(40, 3)).astype(dtype)
        target = xp.zeros((5, 3), dtype=dtype)
        array_ops.scatter_add(target, xp.asarray(ids), xp.asarray(values))
        wanted = np.zeros((5, 3))
        np.add.at(wanted, ids, values.astype(np.float64))
        np.testing.assert_allclose(backend.to_numpy(target), wanted, rtol=1e-5, atol=1e-5)


def test_sum_to_shape_undoes_broadcasting(backend_name):
    g = backend.randn(2, 3, 4, 5)
    assert array_ops.sum_to_shape(g, (4, 5)).shape == (4, 5)
    assert array_ops.sum_to_shape(g, (1, 3, 1, 5)).shape == (1, 3, 1, 5)
    np.testing.assert_allclose(backend.to_numpy(array_ops.sum_to_shape(g, (3, 1, 1))),
                               backend.to_numpy(g).sum(axis=(0, 2, 3))[:, None, None], rtol=1e-5)


def test_sums_over_positions_and_row_dots_agree_with_plain_sums(backend_name):
    """The shim's matrix-library sums give what the plain reductions give, for contiguous and
    transposed input, one or several trailing axes, float32 and float64."""
    for dtype in ("float32", "float64"):
        a = backend.randn(3, 4, 5, dtype=dtype)
        b = backend.randn(3, 4, 5, dtype=dtype)
        for x in (a, a.transpose(1, 0, 2)):
            sums = array_ops.sum_over_positions(x)
            assert sums.shape == (5,) and sums.dtype == x.dtype
            np.testing.assert_allclose(backend.to_numpy(sums), backend.to_numpy(x).sum(axis=(0, 1)),
                                       rtol=1e-5)
        np.testing.assert_allclose(backend.to_numpy(array_ops.sum_over_positions(a, trailing=2)),
                                   backend.to_numpy(a).sum(axis=0), rtol=1e-5)
        # Empty arrays (an empty sequence's gradients): zeros of the kept shape, or empty
        assert backend.to_numpy(array_ops.sum_over_positions(a[:, :0])).tolist() == [0.0] * 5
        assert array_ops.sum_over_positions(a[:, :0], trailing=2).shape == (0, 5)
        for axis, shape in ((-1, (3, 4, 1)), (1, (3, 1, 5)), (0, (1, 4, 5))):
            dots = array_ops.row_dot(a, b, axis)
            assert dots.shape == shape and dots.dtype == a.dtype
            np.testing.assert_allclose(backend.to_numpy(dots), (backend.to_numpy(a) *
                                       backend.to_numpy(b)).sum(axis, keepdims=True),
                                       rtol=1e-5, atol=1e-6)
        gamma = b[0, 0]                     # one (d,) vector for every row: a matrix-vector product
        for x in (a, a.transpose(1, 0, 2)):
            dots = array_ops.row_dot(x, gamma)
            assert dots.shape == x.shape[:-1] + (1,) and dots.dtype == a.dtype
            np.testing.assert_allclose(backend.to_numpy(dots), (backend.to_numpy(x) *
                                       backend.to_numpy(gamma)).sum(-1, keepdims=True),
                                       rtol=1e-5, atol=1e-6)
        empty = array_ops.row_dot(a[..., :0], gamma[:0])          # rows of no numbers: zeros
        assert backend.to_numpy(empty).tolist() == [[[0.0]] * 4] * 3


def test_row_sums_agree_with_plain_sums(backend_name):
    """row_sum gives a.sum(axis, keepdims=True) along any axis, for contiguous and strided rows,
    float32 and float64, for a few rows and for many (on NumPy the product with ones, on CuPy
    its own sum)."""
    for dtype in ("float32", "float64"):
        for a in (backend.randn(2, 3, 5, dtype=dtype), backend.randn(3, 128, 5, dtype=dtype)):
            for x in (a, a.transpose(1, 0, 2).copy().transpose(1, 0, 2)):   # strided rows too
                for axis in (-1, 1, 0):
                    sums = array_ops.row_sum(x, axis)
                    wanted = backend.to_numpy(x).sum(axis, keepdims=True)
                    assert sums.shape == wanted.shape and sums.dtype == a.dtype
                    np.testing.assert_allclose(backend.to_numpy(sums), wanted, rtol=1e-5,
                                               atol=1e-5)


def test_row_maxima_are_exactly_numpys(backend_name):
    """row_max gives a.max(axis, keepdims=True), bit for bit, along any axis: rows of every
    length the knockout takes on NumPy (16 to 128, odd ones too) and around it, few rows and
    many, strided rows, and rows holding NaN, +inf or only −inf."""
    for d in (5, 16, 17, 33, 63, 64, 100, 128, 129):
        for rows in (3, 130):
            a = backend.randn(rows, 2, d, dtype="float32")
            a[0, 0, d // 2] = np.nan
            a[1, 0, :] = -np.inf
            a[1, 1, d - 1] = np.inf
            a[2, 1, :] = 7.0                              # a row of ties
            for x in (a, a.transpose(1, 0, 2).copy().transpose(1, 0, 2)):   # strided rows too
                for axis in (-1, 0):
                    maxima = array_ops.row_max(x, axis)
                    wanted = backend.to_numpy(x).max(axis, keepdims=True)
                    assert maxima.shape == wanted.shape and maxima.dtype == a.dtype
                    np.testing.assert_array_equal(backend.to_numpy(maxima), wanted)


def test_elementwise_in_blocks_is_the_function_on_the_whole(backend_name, monkeypatch):
    """Blocks of 7 over 60 elements (the last block short), on an array in C order and on a
    transposed view: the same numbers, bit for bit, in an array of the function's dtype."""
    monkeypatch.setattr(array_ops, "ELEMENTWISE_BLOCK", 7)
    xp = backend.get_array_module()
    a, b = backend.randn(3, 5, 4), backend.randn(4, 5, 3).transpose(2, 1, 0)

    def fn(a, b):
        return (a * b + xp.exp(a)) > 1.0

    out = array_ops.elementwise_in_blocks(fn, a, b)
    assert out.shape == (3, 5, 4) and out.dtype == bool
    assert bool((out == fn(a, b)).all())
    small = backend.randn(7)
    assert bool((array_ops.elementwise_in_blocks(xp.exp, small) == xp.exp(small)).all())

    def two(a, b):                            # a tuple: one array of the whole for each result
        return a * b, xp.exp(a) > 1.0

    product, positive = array_ops.elementwise_in_blocks(two, a, b)
    assert product.shape == positive.shape == (3, 5, 4) and positive.dtype == bool
    assert bool((product == a * b).all()) and bool((positive == (xp.exp(a) > 1.0)).all())


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gelu_in_blocks_has_the_gradient_of_gelu_on_the_whole(float64, monkeypatch, approximate):
    """nn.GELU's backward, and the tanh GELU's forward, run a block at a time (on NumPy): the
    gradient check, with a block of 5 elements; Φ and y bit-equal to the whole array's, and the
    gradient bit-equal to F.gelu_backward on the whole array."""
    monkeypatch.setattr(array_ops, "ELEMENTWISE_BLOCK", 5)
    from minitf.gradcheck import ModuleCase, check
    gelu, x = nn.GELU(approximate), backend.randn(2, 3, 4)
    rows = check("GELU in blocks", ModuleCase(gelu, {"x": x}))
    assert rows and all(row.passed for row in rows)
    y, cache = F.gelu(x, approximate)
    if approximate == "tanh":
        from minitf.functional.activation import _gelu_tanh_cdf
        assert bool((cache[1] == _gelu_tanh_cdf(x)).all())
        assert bool((y == x * _gelu_tanh_cdf(x)).all())
    dy = backend.randn(2, 3, 4)
    gelu(x)
    assert bool((gelu.backward(dy) == F.gelu_backward(dy, cache)).all())


def test_scatter_add_adds_into_what_the_target_holds(backend_name):
    """The embedding's backward starts from zeros, but scatter_add is ``target[i] += v``: it adds
    to what is there, repeats included, as numpy.add.at does."""
    xp = backend.get_array_module()
    target = xp.ones((4, 2))
    array_ops.scatter_add(target, xp.asarray([1, 3, 1, 1]), xp.ones((4, 2)))
    wanted = np.ones((4, 2))
    np.add.at(wanted, np.array([1, 3, 1, 1]), np.ones((4, 2)))
    np.testing.assert_array_equal(backend.to_numpy(target), wanted)     # rows 1, 4, 1, 2
