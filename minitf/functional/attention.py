"""Scaled dot-product attention, the masks it takes, and the split of features into heads.

    scores = q kᵀ / √d_k + M          M: 0 where a query may look, −inf where it may not
    probs  = softmax(scores)          row-wise: each query's weights over the keys sum to 1
    out    = probs v
"""
import math
from collections import namedtuple

from minitf.backend import float_dtype, get_array_module, sum_to_shape
from minitf.functional.softmax import softmax, softmax_backward
from minitf.validate import check_array, check_broadcast, check_ids

AttentionCache = namedtuple("AttentionCache", ["q", "k", "v", "probs", "scale", "bias_shape"])
AttentionCache.__doc__ = """What attention_backward needs; ``probs`` (..., n_q, n_k) is ready to plot."""

_SCORES = "the attention scores (..., n_q, n_k)"
MASK_HINT = ("; a causal mask is (n_q, n_k), a padding mask (b, 1, 1, n_k), "
              "a per-head mask (b, h, n_q, n_k)")


def _check_qkv(q, k, v):
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_array(a, name, "attention")
        if a.ndim < 2:
            raise ValueError(f"attention: {name} has shape {tuple(a.shape)}; "
                             f"wanted at least 2 axes (..., n, d)")
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"attention: q, k and v must share their leading axes; got {shapes}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"attention: q and k must have the same last axis d_k; got {shapes}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: k and v must have the same number of keys n_k; got {shapes}")


def attention(q, k, v, mask=None, bias=None, scale=None):
    """Scaled dot-product attention: every query takes a softmax-weighted average of the values.

    Why divide by √d_k: if the entries of q and k have unit variance, q·k has variance d_k, and
    large scores saturate the softmax (one weight near 1, gradients near 0). Dividing by √d_k
    keeps the scores' variance at 1 whatever the width.

    q: (..., n_q, d_k)   k: (..., n_k, d_k)   v: (..., n_k, d_v)
    mask: constant added to the scores, broadcastable to (..., n_q, n_k): 0 = look, −inf = don't;
          a boolean mask (True = look) is converted to that form here
    bias: a *learned* term added to the scores (relative position bias); its gradient is returned
    ->    out: (..., n_q, d_v), and a cache whose ``probs`` (..., n_q, n_k) are the weights
    A query whose every key is masked gets probs 0 and out 0 (not NaN).
    """
    _check_qkv(q, k, v)
    scores_shape = (*q.shape[:-1], k.shape[-2])
    if mask is not None:
        check_broadcast(mask, "mask", scores_shape, _SCORES, "attention", MASK_HINT)
        mask = as_additive_mask(mask, q.dtype)
    if bias is not None:
        check_broadcast(bias, "bias", scores_shape, _SCORES, "attention")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])

    scores = q @ k.swapaxes(-1, -2)              # (..., n_q, n_k)
    scores *= scale
    if mask is not None:
        scores += mask
    if bias is not None:
        scores += bias
    probs, _ = softmax(scores, axis=-1)          # (..., n_q, n_k)
    out = probs @ v                              # (..., n_q, d_v)
    bias_shape = None if bias is None else tuple(bias.shape)
    return out, AttentionCache(q, k, v, probs, scale, bias_shape)


def attention_backward(dout, cache):
    """Backward through out = probs v, probs = softmax(scores), scores = q kᵀ · scale + M + B.

        dv      = probsᵀ dout                (..., n_k, d_v)
        dprobs  = dout vᵀ                    (..., n_q, n_k)
        dscores = softmax_backward(dprobs)   (..., n_q, n_k)
        dq      = dscores k · scale          (..., n_q, d_k)
        dk      = dscoresᵀ q · scale         (..., n_k, d_k)
        dbias   = dscores, summed over the axes the bias was broadcast along (None if no bias)
    Returns (dq, dk, dv, dbias). The mask is a constant and gets no gradient.
    """
    q, k, v, probs, scale, bias_shape = cache
    dv = probs.swapaxes(-1, -2) @ dout
    dprobs = dout @ v.swapaxes(-1, -2)
    dscores = softmax_backward(dprobs, (probs, -1))
    dbias = None if bias_shape is None else sum_to_shape(dscores, bias_shape)
    dq = (dscores @ k) * scale
    dk = (dscores.swapaxes(-1, -2) @ q) * scale
    return dq, dk, dv, dbias


# ----------------------------------------------------------------------------------------------
# Masks: additive arrays that broadcast to the scores (b, h, n_q, n_k)
# ----------------------------------------------------------------------------------------------

def as_additive_mask(mask, dtype=None):
    """A mask in additive form: 0 where attention is allowed, −inf where it is not.

    A boolean mask (True = keep) is converted; a float mask is taken as additive already.
    """
    if mask is None:
        return None
    xp = get_array_module(mask)
    dtype = dtype or float_dtype()
    if mask.dtype == bool:
        return xp.where(mask, 0.0, -math.inf).astype(dtype)
    return mask.astype(dtype, copy=False)


def causal_mask(n_q, n_k=None, dtype=None, xp=None):
    """No peeking at the future: query i may attend to key j only if j ≤ i.

    The queries are the *last* n_q of the n_k positions (n_k > n_q when earlier keys come from a
    KV cache during generation), so query i sits at position i + (n_k − n_q).
    ->  (n_q, n_k) additive mask: 0 on and below the diagonal, −inf above it
    """
    n_k = n_q if n_k is None else n_k
    if n_k < n_q:
        raise ValueError(f"causal_mask: n_k={n_k} must be at least n_q={n_q}")
    xp = xp or get_array_module()
    query_pos = xp.arange(n_q)[:, None] + (n_k - n_q)           # (n_q, 1)
    key_pos = xp.arange(n_k)[None, :]                           # (1, n_k)
    return as_additive_mask(key_pos <= query_pos, dtype)


def padding_mask(lengths, n, dtype=None):
    """Keys at positions ≥ a sequence's length are padding and must not be attended to.

    lengths: (b,) integers in [0, n]   ->   (b, 1, 1, n) additive mask (broadcasts over h and n_q)
    """
    xp = get_array_module(lengths)
    lengths = xp.asarray(lengths)
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
    return as_additive_mask((ids != pad_id)[:, None, None, :], dtype)


def combine_masks(*masks):
    """The sum of additive masks (None entries skipped): a position is blocked if any mask blocks it.

    E.g. combine_masks(causal_mask(n), padding_mask(lengths, n)) -> (b, 1, n, n). None if all None.
    """
    present = [m for m in masks if m is not None]
    if not present:
        return None
    total = present[0]
    for m in present[1:]:
        total = total + m
    return total


# ----------------------------------------------------------------------------------------------
# Heads: cutting the feature axis into h slices that attend independently, in one batched matmul
# ----------------------------------------------------------------------------------------------

def split_heads(y, n_heads, parts=1):
    """(b, n, parts·d_model) -> (parts, b, h, n, d_head), d_head = d_model / h.

    ``parts`` projections side by side (3 for a fused q|k|v) are separated, each one's features
    are cut into h heads of d_head consecutive features, and the head axis is moved next to the
    batch axis: matmul then treats (b, h) as one batch of b·h independent attentions.
    """
    b, n, width = y.shape
    d_head = width // (parts * n_heads)
    return y.reshape(b, n, parts, n_heads, d_head).transpose(2, 0, 3, 1, 4)


def merge_heads(z):
    """(parts, b, h, n, d_head) -> (b, n, parts·h·d_head): the exact inverse of split_heads.

    Concatenates the heads back into one feature axis. Both are pure rearrangements, so the
    gradient of one is the other applied to the upstream gradient.
    """
    parts, b, h, n, d_head = z.shape
    return z.transpose(1, 3, 0, 2, 4).reshape(b, n, parts * h * d_head)
