"""The array operations that minitf's layers share, each written once for NumPy and CuPy in the
spelling its library runs fastest (measured in benchmarks/reductions.py and cache_blocks.py).

    scatter_add             target[indices] += values, repeats added (an embedding's backward)
    row_sum, row_dot        Σ_i a_i and Σ_i a_i b_i of every row (layer norm, softmax)
    row_max                 every row's maximum (softmax's shift)
    sum_over_positions      Σ over positions (a bias's or γ's gradient)
    sum_to_shape            undo a broadcast in the backward pass
    elementwise_in_blocks   an elementwise function a cache-sized block at a time (GELU)

Each gives what the plain NumPy expression gives (``a.sum(axis=-1, keepdims=True)`` for
``row_sum``), to rounding, and ``row_max`` to the bit; tests/test_array_ops.py checks that. Like
the layers, this file imports no array library: ``get_array_module`` hands it NumPy or CuPy, and
``on_numpy`` says when a path written for NumPy applies.
"""
from __future__ import annotations

import math

from minitf.backend import get_array_module, on_numpy


def scatter_add(target, indices, values) -> None:
    """In place: ``target[indices] += values``, adding every repeated index (unlike ``+=``).

    Embedding lookups are backpropagated this way: a token that appears twice receives both
    gradients.
    """
    if on_numpy(target) and indices.ndim == 1 and len(indices) == len(values) > 0:
        _add_rows_sorted(target, indices, values)
    else:
        # on CuPy an atomic add per entry (cupyx.scatter_add, its older name, is deprecated)
        get_array_module(target).add.at(target, indices, values)


def _add_rows_sorted(target, indices, values) -> None:
    """``target[indices] += values`` for rows, adding repeats: sort the indices, sum each run of
    equal ones with one ``add.reduceat``, then add each sum once. numpy.add.at does the same
    one row at a time: 5.8 x as long on the default model's (2048, 128) embedding gradient
    (benchmarks/RESULTS.md, twenty-third entry).
    indices: (N,)   values: (N, ...) rows of target"""
    xp = get_array_module(target)                            # NumPy: CuPy has no add.reduceat
    order = xp.argsort(indices, kind="stable")               # (N,) stable: a fixed summation order
    ranked = indices[order]                                  # (N,) the indices, sorted
    starts = xp.flatnonzero(xp.concatenate(([True], ranked[1:] != ranked[:-1])))  # (U,) run starts
    target[ranked[starts]] += xp.add.reduceat(values[order], starts, axis=0)


def row_dot(a, b, axis: int = -1):
    """Σ_i a_i b_i along ``axis``, keeping it: (..., d), (..., d) -> (..., 1) for the last axis.

    The same as ``(a * b).sum(axis=axis, keepdims=True)`` without the (..., d) product array: a
    layer norm or a softmax backward takes such a dot for every row, and on a (b, h, n, n) array
    of attention weights the temporary costs more than the arithmetic. ``b`` may be one (d,)
    vector for every row (a layer norm's γ): then it is one matrix-vector product, a @ b.
    """
    xp = get_array_module(a, b)
    if b.ndim == 1 and axis in (-1, a.ndim - 1):   # all rows against one vector: (rows, d) @ (d,)
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])     # counted, not -1: d may be 0
        return (rows @ b).reshape(*a.shape[:-1], 1)
    if axis not in (-1, a.ndim - 1):          # another axis: move it last and back (views, no copies)
        return xp.moveaxis(row_dot(xp.moveaxis(a, axis, -1), xp.moveaxis(b, axis, -1)), -1, axis)
    if hasattr(xp, "vecdot"):                 # NumPy ≥ 2: a ufunc, no einsum parsing
        return xp.vecdot(a, b)[..., None]
    # CuPy or NumPy < 2 (no vecdot): a batch of (1, d) @ (d, 1) products, one matrix-library
    # call; CuPy's einsum took up to 4 x as long (benchmarks/RESULTS.md, 2026-11-26, an H200).
    return (a[..., None, :] @ b[..., :, None])[..., 0]


def row_sum(a, axis: int = -1):
    """Σ_i a_i along ``axis``, keeping it: (..., d) -> (..., 1) for the last axis. Float arrays.

    On NumPy, from 128 rows on, ``a.sum(axis=axis, keepdims=True)`` as a product with a column
    of ones: NumPy sums each short row on its own, 3-4 x slower at a training step's shapes than
    one matrix-vector product over all rows (benchmarks/reductions.py); a generated token's few
    rows are cheaper summed. CuPy's own row sum is 1.5-9 x faster than the product on a GPU.
    """
    xp = get_array_module(a)
    if axis not in (-1, a.ndim - 1):          # another axis: move it last and back (views, no copies)
        return xp.moveaxis(row_sum(xp.moveaxis(a, axis, -1)), -1, axis)
    if a.size < 128 * a.shape[-1] or not on_numpy(a):      # the size first: the cheaper test
        return a.sum(axis=-1, keepdims=True)
    return a @ xp.ones((a.shape[-1], 1), dtype=a.dtype)


def row_max(a, axis: int = -1):
    """max along ``axis``, keeping it: (..., d) -> (..., 1) for the last axis. Float arrays.

    On NumPy, for rows of 16 to 128 numbers (attention scores at a short context), at least 128
    of them, as a knockout: the larger of each row's two halves, then of that result's two
    halves, and so on, log2(d) elementwise passes over ever shorter arrays. NumPy takes each
    short row's maximum on its own, at a cost per row that outweighs the row's numbers: on
    (52, 4, 64, 64) scores (52 windows of 64 characters, 4 heads: minitf train's batch when
    this was measured)
    1.4-1.7 x as long as the knockout (benchmarks/RESULTS.md, sixteenth entry). The maximum is
    exact either way, NaN included; longer rows are faster with NumPy's own maximum.
    """
    xp = get_array_module(a)
    if axis not in (-1, a.ndim - 1):          # another axis: move it last and back (views, no copies)
        return xp.moveaxis(row_max(xp.moveaxis(a, axis, -1)), -1, axis)
    d = a.shape[-1]
    if a.size < 128 * d or not 16 <= d <= 128 or not on_numpy(a):
        return a.max(axis=-1, keepdims=True)
    m = a
    while m.shape[-1] > 1:
        half = m.shape[-1] // 2
        winners = xp.maximum(m[..., :half], m[..., half:2 * half])     # (..., half)
        if m.shape[-1] % 2:                   # an odd number left: the last one meets the first winner
            xp.maximum(winners[..., :1], m[..., -1:], out=winners[..., :1])
        m = winners
    return m                                  # (..., 1)


def sum_over_positions(a, trailing: int = 1):
    """Σ over every axis but the last ``trailing``: (..., d) -> (d,) by default. A bias or a
    layer norm's γ is used at every position, so its gradient is this sum over the positions.

    Written as ones(positions) @ a(positions, d), a matrix-vector product: it runs at memory
    speed on both libraries, where a reduction over the leading axes does not: at a training
    step's shapes NumPy's ``a.sum(axis=0)`` takes up to 2.8 x as long, CuPy's up to 40 x
    (benchmarks/reductions.py).
    """
    kept = a.shape[a.ndim - trailing:]
    positions = math.prod(a.shape[:a.ndim - trailing])    # counted, not -1: it may be 0
    rows = a.reshape(positions, math.prod(kept))           # (positions, d): a view if contiguous
    ones = get_array_module(a).ones(rows.shape[0], dtype=rows.dtype)
    return (ones @ rows).reshape(kept)


def sum_to_shape(grad, shape: tuple):
    """Sum ``grad`` over the axes that broadcasting stretched, so it gets the operand's ``shape``.

    If ``y = x + c`` broadcast ``c`` of shape ``(1, n)`` over ``(b, m, n)``, then ``dc`` is
    ``dy`` summed over the broadcast axes: ``sum_to_shape(dy, (1, n))``.
    """
    shape = tuple(shape)
    extra = grad.ndim - len(shape)
    if extra:
        grad = sum_over_positions(grad, trailing=grad.ndim - extra)
    stretched = tuple(i for i, size in enumerate(shape) if size == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


# elements: 256 KiB of float32, so that a block's arrays (GELU's backward: dy, x, Φ and two
# temporaries) fit together in one core's own cache, 1-2 MiB on current CPUs
ELEMENTWISE_BLOCK = 1 << 16


def blocks_pay_off(*arrays) -> bool:
    """Whether to split work on ``arrays`` into blocks: yes on NumPy, where a block's temporaries
    are small and stay in the cache from one pass to the next; no on a GPU, where each block
    launches every kernel again (measured: causal attention in blocks of 64 queries took 1.6 ×
    the time of one block at the large config, benchmarks/RESULTS.md) and has memory to spare."""
    return on_numpy(*arrays)


def elementwise_in_blocks(fn, *arrays):
    """fn(*arrays) for an elementwise fn of arrays of one shape, ELEMENTWISE_BLOCK elements at a
    time, into one new array, or a tuple of them where fn returns a tuple (GELU's forward: Φ, then
    y). What it saves: fn's temporaries are the size of a block, not of the arrays (GELU's
    backward makes two the size of the hidden layer), and a block stays in the cache from one of
    fn's passes to the next. On a GPU it is fn(*arrays) (see blocks_pay_off)."""
    if arrays[0].size <= ELEMENTWISE_BLOCK or not blocks_pay_off(*arrays):
        return fn(*arrays)
    flat = [a.reshape(-1) for a in arrays]               # views of C-ordered arrays, else copies
    results = fn(*(a[:ELEMENTWISE_BLOCK] for a in flat))        # the first block's: their dtypes
    one = not isinstance(results, tuple)                        # are fn's to choose
    xp = get_array_module(*arrays)                              # NumPy (blocks_pay_off)
    outs = [xp.empty(arrays[0].shape, dtype=r.dtype) for r in ((results,) if one else results)]
    outs_flat = [out.reshape(-1) for out in outs]               # views: each out is new, C-ordered
    for start in range(0, outs[0].size, ELEMENTWISE_BLOCK):
        block = slice(start, start + ELEMENTWISE_BLOCK)
        if start:                                               # the first block's are in hand
            results = fn(*(a[block] for a in flat))
        for out_flat, result in zip(outs_flat, (results,) if one else results):
            out_flat[block] = result
    return outs[0] if one else tuple(outs)
