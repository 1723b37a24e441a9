"""Masks: additive arrays that broadcast to the attention scores (b, h, n_q, n_k).

0 where a query may look at a key, −inf where it may not: added to the scores before the
softmax, a −inf becomes a weight of exactly 0. Masks are constants, so they get no gradient.
"""
import math

from minitf.backend import float_dtype, float_dtype_named, get_array_module
from minitf.validate import at_the_boundary, check_array, check_ids, check_int, plain_int


def as_additive_mask(mask, dtype=None, name="mask", where="attention"):
    """A mask in additive form: 0 where attention is allowed, −inf where it is not.

    A boolean mask (True = keep) is converted; a float mask is taken as additive already. An
    integer mask is refused: a 0/1 mask read as additive would add 0 or 1 to the scores and mask
    nothing, and read as boolean it could be a mask of either convention (1 = keep, or 1 = hide).
    name, where: how an error names the mask and the function it was given to.
    """
    if mask is None:
        return None
    check_array(mask, name, where)
    xp = get_array_module(mask)
    # float only: −inf has no place in a bool or an integer array
    dtype = float_dtype() if dtype is None else float_dtype_named(dtype, "attention mask")
    if mask.dtype.kind in "iu":
        raise TypeError(f"{where}: {name} has dtype {mask.dtype}; wanted bool (True = attend) or "
                        f"float (additive: 0 or -inf); for a 0/1 mask with 1 = attend, pass "
                        f"{name}.astype(bool)")
    if mask.dtype.kind not in "bf":     # complex: its cast dropped the imaginary part, warned
        raise TypeError(f"{where}: {name} has dtype {mask.dtype}; wanted bool (True = attend) or "
                        f"float (additive: 0 or -inf)")
    if mask.dtype == bool:
        _check_bool_mask(mask, name, where)
        return xp.where(mask, 0.0, -math.inf).astype(dtype)
    _check_float_mask(mask, name, where)
    return mask.astype(dtype, copy=False)


@at_the_boundary
def _check_bool_mask(mask, name, where):
    """PyTorch's causal mask, ``triu(ones(n, n, dtype=bool), 1)``, is True where a key is hidden:
    read as minitf's (True = attend) every query would see only later keys, the last one none,
    and nothing would say so. (Skipped inside a model, whose masks are its own.)"""
    xp = get_array_module(mask)
    n = mask.shape[-1] if mask.ndim >= 2 else 0
    if n < 2 or mask.shape[-2] != n:
        return
    # the diagonal first, n entries: a mask of minitf's sees itself there, and is let through
    # without a pass over all n² (causal_mask's own, every time it is called)
    if not bool(xp.diagonal(mask, axis1=-2, axis2=-1).any()) and \
            bool(xp.all(mask == xp.triu(xp.ones((n, n), bool), 1))):
        raise ValueError(f"{where}: {name} is True only above the diagonal, every query seeing "
                         f"only later keys: minitf's True means attend (PyTorch's means hide); "
                         f"for a mask with True = hide, pass ~{name} (to see only later keys, "
                         f"pass it as floats: 0 there, -inf elsewhere)")


@at_the_boundary
def _check_float_mask(mask, name, where):
    """A float mask is additive. One of 0s and 1s is a keep/hide mask built from ones
    (``np.tril(np.ones((n, n)))`` is float64): read as additive it adds 0 or 1 to the scores and
    masks nothing; a NaN makes its rows' weights NaN, and a +inf gives its key all the weight.
    (Skipped inside a model, whose masks are its own.)"""
    xp = get_array_module(mask)
    if bool(xp.isnan(mask).any()):       # NaN in the scores: every weight of its row NaN
        raise ValueError(f"{where}: {name} holds NaN; wanted an additive mask of 0 (attend) and "
                         f"-inf (hide), or finite biases")
    if bool((mask == math.inf).any()):   # a sign slip, where(keep, 0, inf): the hidden keys
        #                                  took all the weight
        raise ValueError(f"{where}: {name} holds +inf; wanted an additive mask of 0 (attend) and "
                         f"-inf (hide), or finite biases")
    if bool(xp.any(mask == 1)) and bool(xp.all((mask == 0) | (mask == 1))):
        raise ValueError(f"{where}: {name} is a float array of 0s and 1s; a float mask is "
                         f"additive (0 = attend, -inf = hide), so it would mask nothing; for a "
                         f"mask with 1 = attend, pass {name}.astype(bool)")


def query_key_lengths(n_q, n_k, where):
    """n_q and n_k (None: n_q) as ints, checked. The queries are the last n_q of the n_k positions
    (as in a KV-cached step), so there must be at least as many keys: NumPy would build a table
    for fewer all the same."""
    n_q, n_k = plain_int(n_q), plain_int(n_q if n_k is None else n_k)
    check_int(n_q, "n_q", where, low=0, what="the number of queries")
    check_int(n_k, "n_k", where, low=0, what="the number of keys")
    if n_k < n_q:
        raise ValueError(f"{where}: n_k={n_k} must be at least n_q={n_q} (the queries are the "
                         f"last n_q of the n_k positions)")
    return n_q, n_k


def causal_mask(n_q, n_k=None, dtype=None, xp=None):
    """No peeking at the future: a query may attend to a key only if the key is not later.

    The queries are the *last* n_q of the n_k positions (n_k > n_q when earlier keys come from a
    KV cache during generation), so query i sits at position i + (n_k − n_q) and may attend to
    key j when j ≤ i + (n_k − n_q); with n_q = n_k, when j ≤ i.
    ->  (n_q, n_k) additive mask: 0 on and below the diagonal (shifted n_k − n_q columns to the
    right), −inf above it
    """
    n_q, n_k = query_key_lengths(n_q, n_k, "causal_mask")
    xp = xp or get_array_module()
    query_pos = xp.arange(n_q)[:, None] + (n_k - n_q)           # (n_q, 1)
    key_pos = xp.arange(n_k)[None, :]                           # (1, n_k)
    return as_additive_mask(key_pos <= query_pos, dtype)


def padding_mask(lengths, n, dtype=None):
    """Keys at positions ≥ a sequence's length are padding and must not be attended to.

    lengths: (b,) integers in [0, n]   ->   (b, 1, 1, n) additive mask (broadcasts over h and n_q)
    """
    n = plain_int(n)
    check_int(n, "n", "padding_mask", low=0, what="the length of the padded sequences")
    xp = get_array_module(lengths)
    lengths = xp.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"padding_mask: lengths has shape {tuple(lengths.shape)}; wanted (b,), "
                         f"one length per sequence")
    check_ids(lengths, "lengths", n + 1, "padding_mask", size_name="n + 1")
    keep = xp.arange(n)[None, :] < lengths[:, None]              # (b, n)
    return as_additive_mask(keep[:, None, None, :], dtype)


def padding_mask_from_ids(ids, pad_id, dtype=None):
    """The padding mask of a batch of token ids: −inf wherever ``ids == pad_id``.

    ids: (b, n)   ->   (b, 1, 1, n) additive mask
    """
    check_array(ids, "ids", "padding_mask_from_ids")
    if ids.ndim != 2:
        raise ValueError(f"padding_mask_from_ids: ids has shape {tuple(ids.shape)}; wanted (b, n)")
    if ids.dtype.kind not in "iu":       # 1.5 == pad_id nowhere: nothing masked, nothing said
        raise TypeError(f"padding_mask_from_ids: ids has dtype {ids.dtype}; wanted integer "
                        f"token ids")
    # ids == None or ids == '0' is False everywhere: nothing would be masked, and nothing said
    check_int(plain_int(pad_id), "pad_id", "padding_mask_from_ids", low=0,
              what="the id of the padding token")
    return as_additive_mask((ids != pad_id)[:, None, None, :], dtype)


@at_the_boundary
def _check_broadcast_together(masks):
    """ValueError unless the masks' shapes broadcast together (NumPy's rules, aligned on the right:
    on each axis, the sizes other than 1 agree). Read off the shapes, before any addition."""
    for axis in range(1, max(m.ndim for m in masks) + 1):
        if len({m.shape[-axis] for m in masks if m.ndim >= axis} - {1}) > 1:
            shapes = " and ".join(str(tuple(m.shape)) for m in masks)
            raise ValueError(f"combine_masks: masks of shapes {shapes} do not broadcast together; "
                             f"wanted shapes that broadcast to the scores (b, h, n_q, n_k)")


def combine_masks(*masks):
    """The sum of additive masks (None entries skipped): a position is blocked if any mask blocks it.

    E.g. combine_masks(causal_mask(n), padding_mask(lengths, n)) -> (b, 1, n, n). None if all None.
    """
    # each in additive form first: a boolean mask added as it is would add 1 where it keeps
    present = [as_additive_mask(m, name=f"masks[{i}]", where="combine_masks")
               for i, m in enumerate(masks) if m is not None]
    if not present:
        return None
    _check_broadcast_together(present)
    total = present[0]
    for m in present[1:]:
        total = total + m
    return total
