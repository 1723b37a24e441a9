"""Heads: one feature axis cut into h heads and put back together.

Multi-head attention runs h attentions side by side on h slices of the features. split_heads
cuts them out and moves the head axis next to the batch axis, so that one batched matmul runs
all b·h attentions; merge_heads puts the heads' outputs back into one feature axis. Both are
pure rearrangements: the gradient of one is the other.
"""
from __future__ import annotations

import itertools

from minitf.backend import get_array_module
from minitf.validate import at_the_boundary, check_int, check_shape


@at_the_boundary
def _check_split(y, n_heads, parts):
    """split_heads' arguments: y's features must cut into n_heads heads of each part's width."""
    where = "split_heads"
    check_shape(y, "y", ("b", "n", "features"), where)
    check_int(n_heads, "n_heads", where, what="the number of heads")
    if isinstance(parts, int):
        check_int(parts, "parts", where, what="the number of projections side by side")
        if y.shape[-1] % (parts * n_heads):
            raise ValueError(f"{where}: y has {y.shape[-1]} features; wanted a multiple of "
                             f"parts · n_heads = {parts * n_heads}")
        return
    if not isinstance(parts, (tuple, list)) or not parts:       # 2.0: "not iterable"
        raise ValueError(f"{where}: parts must be a positive integer or a tuple of head widths; "
                         f"got {parts!r}")
    for w in parts:
        check_int(w, "each width in parts", where, what="the features of one head")
    if y.shape[-1] != n_heads * sum(parts):
        raise ValueError(f"{where}: y has {y.shape[-1]} features; wanted n_heads · (sum of the "
                         f"widths {tuple(parts)}) = {n_heads * sum(parts)}")


def split_heads(y, n_heads, parts=1):
    """(b, n, parts·h·d_head) -> (parts, b, h, n, d_head); or, with per-head widths
    parts = (w_1, …, w_p):  (b, n, h·(w_1 + … + w_p)) -> a tuple of p arrays (b, h, n, w_i).

    ``parts`` projections side by side (3 for a fused q|k|v; (d_head, d_head, d_v) when the
    values are of another width) are separated, each one's features are cut into h heads of
    consecutive features, and the head axis is moved next to the batch axis: matmul then treats
    (b, h) as one batch of b·h independent attentions. Views of y: nothing is copied.
    """
    _check_split(y, n_heads, parts)
    b, n, width = y.shape
    if isinstance(parts, int):
        d_head = width // (parts * n_heads)
        return y.reshape(b, n, parts, n_heads, d_head).transpose(2, 0, 3, 1, 4)
    if len(set(parts)) == 1:           # equal widths (q, k, v of d_head each): one reshape cuts
        return tuple(split_heads(y, n_heads, len(parts)))     # them all, not one slice per part
    ends = list(itertools.accumulate(n_heads * w for w in parts))       # the column boundaries
    return tuple(y[:, :, end - n_heads * w:end].reshape(b, n, n_heads, w).transpose(0, 2, 1, 3)
                 for w, end in zip(parts, ends))


@at_the_boundary
def _check_merge(parts):
    """merge_heads' argument: one or more (b, h, n, w) arrays that agree on b, h and n."""
    where = "merge_heads"
    if not isinstance(parts, (list, tuple)):
        check_shape(parts, "parts", ("parts", "b", "h", "n", "d_head"), where)
        return
    if not parts:
        raise ValueError(f"{where}: parts is empty; wanted one or more (b, h, n, w) arrays")
    check_shape(parts[0], "parts[0]", ("b", "h", "n", "w"), where)
    b, h, n, _ = parts[0].shape
    for i, z in enumerate(parts[1:], 1):
        check_shape(z, f"parts[{i}]", (("b", b), ("h", h), ("n", n), "w"), where)


def merge_heads(parts):
    """The exact inverse of split_heads: (parts, b, h, n, d_head), or a sequence of p arrays
    (b, h, n, w_i), -> (b, n, h·(w_1 + … + w_p)), the heads concatenated back into one feature
    axis. Both are pure rearrangements, so the gradient of one is the other applied to the
    upstream gradient.
    """
    _check_merge(parts)
    b, h, n, _ = parts[0].shape
    y = get_array_module(parts[0]).empty((b, n, h * sum(z.shape[-1] for z in parts)),
                                         dtype=parts[0].dtype)
    end = 0
    for z in parts:                                                   # (b, h, n, w)
        start, end = end, end + h * z.shape[-1]
        # Cut y's columns for this part the way split_heads cut them, and write the heads in:
        # a view of the fresh y, so each number is copied once, straight to its place.
        y[:, :, start:end].reshape(b, n, h, z.shape[-1])[...] = z.transpose(0, 2, 1, 3)
    return y
