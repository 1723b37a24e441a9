"""Scaled dot-product attention (the split into heads: heads.py; the masks: masks.py).

    scores = q kᵀ / √d_k + M          M: 0 where a query may look, −inf where it may not
    probs  = softmax(scores)          row-wise: each query's weights over the keys sum to 1
    out    = (probs ⊙ D) v            D: the dropout mask / (1 − p) in training, else all ones

d_k is the width of a query and a key (the paper's name); in multi-head attention, where each
head attends on its own, it is one head's width, ``d_head`` (nn.MultiHeadAttention, heads.py).
``causal_attention`` is the same attention under a causal mask, a block of queries at a time, so
that the scores the mask would discard are never computed. Relative position representations
(Shaw et al.) add a learned vector per query-key offset to the keys and the values;
``relative_attention`` computes them with attention's two stages (the scores and their softmax,
then the weighted sum of the values), each given its edge term.
"""
import math
from collections import namedtuple

from minitf.array_ops import blocks_pay_off, sum_to_shape
from minitf.backend import get_array_module
from minitf.functional.activation import dropout, dropout_backward
from minitf.functional.linear import embedding, embedding_backward
from minitf.functional.masks import as_additive_mask, causal_mask
from minitf.functional.softmax import softmax, softmax_backward
from minitf.validate import (at_the_boundary, check_broadcast, check_float, check_ids, check_int,
                             check_probability, check_real, check_shape)
from minitf.validate_gradients import gradient_of

AttentionCache = namedtuple("AttentionCache",
                            ["q", "k", "v", "probs", "scale", "bias_shape", "dropout"])
AttentionCache.__doc__ = """What attention_backward needs; ``probs`` (..., n_q, n_k) is ready to
plot (before dropout); ``dropout``: D (..., n_q, n_k), entries 0 or 1/(1 − p), or None."""

_SCORES = "the attention scores (..., n_q, n_k)"
MASK_HINT = ("; a causal mask is (n_q, n_k), a padding mask (b, 1, 1, n_k), "
              "a per-head mask (b, h, n_q, n_k)")


@at_the_boundary
def _check_qkv(q, k, v, where: str = "attention", dropout_p=0.0):
    """q, k and v: float arrays of at least 2 axes (..., n, d) whose shapes fit one another, and
    the rate of attention dropout in [0, 1)."""
    check_probability(dropout_p, "dropout_p", where)
    for name, a in (("q", q), ("k", k), ("v", v)):
        check_float(a, name, where, min_ndim=2)
    shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(f"{where}: q, k and v must share their leading axes; got {shapes}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{where}: q and k must have the same last axis d_k; got {shapes}")
    if q.shape[-1] == 0:                  # 1/√0: a ZeroDivisionError, or every score NaN
        raise ValueError(f"{where}: q and k have d_k = 0 features; wanted at least one; got "
                         f"{shapes}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{where}: k and v must have the same number of keys n_k; got {shapes}")
    # queries with no key: a softmax over nothing (NumPy's "zero-size array" error); no queries
    # and no keys is an empty sequence, whose attention is empty
    if k.shape[-2] == 0 and q.shape[-2] > 0:
        raise ValueError(f"{where}: there are no keys (n_k = 0) for the {q.shape[-2]} queries; "
                         f"wanted at least one position to attend to; got {shapes}")


def _scale(scale, q, where: str = "attention") -> float:
    """The scores' factor: 1/√d_k unless given, and then a finite number (NaN or inf would make
    every weight NaN)."""
    if scale is None:
        return 1.0 / math.sqrt(q.shape[-1])
    check_real(scale, "scale", where)
    return scale


def attention(q, k, v, mask=None, bias=None, scale=None, dropout_p=0.0):
    """Scaled dot-product attention: every query takes a softmax-weighted average of the values.

    Why divide by √d_k: if the entries of q and k have unit variance, q·k has variance d_k, and
    large scores saturate the softmax (one weight near 1, gradients near 0). Dividing by √d_k
    keeps the scores' variance at 1 whatever the width.

    q: (..., n_q, d_k)   k: (..., n_k, d_k)   v: (..., n_k, d_v)
    mask: constant added to the scores, broadcastable to (..., n_q, n_k): 0 = look, −inf = don't;
          a boolean mask (True = look) is converted to that form here
    bias: a *learned* term added to the scores (relative position bias); its gradient is returned
    dropout_p: attention dropout (Vaswani et al.; torch's dropout_p): each weight is zeroed with
          probability p and the rest scaled by 1/(1 − p), so a query sees a random subset of the
          keys. The mask D comes from minitf's seeded generator, like F.dropout's; pass 0 when
          not training. The weights then no longer sum to 1, only their expectation does.
    ->    out: (..., n_q, d_v), and a cache whose ``probs`` (..., n_q, n_k) are the softmax's
          output, each row summing to 1 (the weights before dropout: out = (probs ⊙ D) v)
    A query whose every key is masked gets probs 0 and out 0 (not NaN).
    """
    _check_qkv(q, k, v, dropout_p=dropout_p)
    scores_shape = (*q.shape[:-1], k.shape[-2])
    if mask is not None:
        check_broadcast(mask, "mask", scores_shape, _SCORES, "attention", MASK_HINT)
        mask = as_additive_mask(mask, q.dtype)
    if bias is not None:
        check_broadcast(bias, "bias", scores_shape, _SCORES, "attention")
    scale = _scale(scale, q)

    # q kᵀ · scale as (q · scale) kᵀ: the same numbers, and a pass over the n_q × d_k queries
    # is cheaper than one over the n_q × n_k scores
    scores = (q * scale) @ k.swapaxes(-1, -2)    # (..., n_q, n_k)
    if mask is not None:
        scores += mask
    if bias is not None:
        scores += bias
    if scores.shape[-2] == 0:        # no queries (an empty sequence): no row to normalise
        probs = scores
    else:
        probs, _ = softmax(scores, axis=-1, out=scores)   # (..., n_q, n_k), over the scores
    weights, D = dropout(probs, dropout_p)       # (..., n_q, n_k): probs ⊙ D (probs if p = 0)
    out = weights @ v                            # (..., n_q, d_v)
    bias_shape = None if bias is None else tuple(bias.shape)
    return out, AttentionCache(q, k, v, probs, scale, bias_shape, D)


def _weights(cache):
    """probs ⊙ D, the weights that multiplied v (..., n_q, n_k): recomputed, not stored twice."""
    return cache.probs if cache.dropout is None else cache.probs * cache.dropout


def _out_shape(cache):
    """(..., n_q, d_v), the shape of attention's out, from its cache or causal_attention's."""
    return (*cache.q.shape[:-1], cache.v.shape[-1])


@gradient_of("attention's out", _out_shape)
def attention_backward(dout, cache):
    """Backward through out = (probs ⊙ D) v, probs = softmax(scores), scores = q kᵀs + M + B.

        dv      = (probs ⊙ D)ᵀ dout          (..., n_k, d_v)
        dprobs  = (dout vᵀ) ⊙ D              (..., n_q, n_k)    D = 1 without dropout
        dscores = softmax_backward(dprobs)   (..., n_q, n_k)
        dq      = dscores k · scale          (..., n_q, d_k)
        dk      = dscoresᵀ q · scale         (..., n_k, d_k)
        dbias   = dscores, summed over the axes the bias was broadcast along (None if no bias)
    Returns (dq, dk, dv, dbias). The mask is a constant and gets no gradient. Given
    causal_attention's cache, it is causal_attention_backward (one backward for both forwards).
    """
    if isinstance(cache, CausalAttentionCache):     # causal_attention's: a cache per query block
        return causal_attention_backward(dout, cache)
    # BEGIN SOLUTION attention_backward
    dv, dweights = _values_backward(dout, cache)
    dq, dk, dscores = _scores_backward(dweights, cache)
    dbias = None if cache.bias_shape is None else sum_to_shape(dscores, cache.bias_shape)
    return dq, dk, dv, dbias
    # END SOLUTION


def _values_backward(dout, cache):
    """attention_backward's first step, back through the forward's last, out = weights v
    (weights = probs ⊙ D): dv (..., n_k, d_v), dweights (..., n_q, n_k)."""
    # BEGIN SOLUTION attention_backward
    dv = _weights(cache).swapaxes(-1, -2) @ dout
    dweights = dout @ cache.v.swapaxes(-1, -2)                  # (..., n_q, n_k)
    return dv, dweights
    # END SOLUTION


def _scores_backward(dweights, cache):
    """attention_backward's second step, back through the forward's first, weights =
    softmax(q kᵀ · scale + M + B) ⊙ D: dq, dk, dscores. The dropout mask is a constant: the
    gradient passes the kept weights only."""
    # BEGIN SOLUTION attention_backward
    q, k, _, probs, scale, _, D = cache
    dprobs = dropout_backward(dweights, D)                      # (..., n_q, n_k)
    dscores = softmax_backward(dprobs, (probs, -1))
    dq = (dscores @ k) * scale                                  # (..., n_q, d_k)
    dk = (dscores.swapaxes(-1, -2) @ q) * scale                 # (..., n_k, d_k)
    return dq, dk, dscores
    # END SOLUTION


# ----------------------------------------------------------------------------------------------
# Causal attention a block of queries at a time: the masked half of the scores is never computed
# ----------------------------------------------------------------------------------------------

CAUSAL_BLOCK = 64   # queries per block on NumPy: 64 ran fastest at n = 512 (benchmarks/RESULTS.md)


class CausalAttentionCache(namedtuple("CausalAttentionCache", ["q", "k", "v", "blocks"])):
    """causal_attention's cache: ``blocks``, a list of (start, end, AttentionCache), one per
    block of queries; ``probs`` (..., n, n) is assembled from them when asked for."""
    __slots__ = ()

    @property
    def probs(self):
        n = self.q.shape[-2]
        probs = get_array_module(self.q).zeros((*self.q.shape[:-1], n), dtype=self.q.dtype)
        for start, end, block in self.blocks:
            probs[..., start:end, :end] = block.probs     # above the diagonal: 0, never computed
        return probs


def causal_attention(q, k, v, block=None):
    """attention(q, k, v, mask=causal_mask(n)), computed ``block`` queries at a time.

    Under a causal mask, the queries start … end − 1 see the keys 0 … end − 1 and no further. So
    each block of queries is an ordinary attention over that prefix of the keys, with the causal
    mask of its own (end − start, end) corner. The scores above the diagonal, which the mask
    would set to −inf and the softmax to 0, are never computed. At n = 512 in blocks of 64, 56 %
    of the n² scores are computed, and only those are kept for the backward: less work in both
    passes, and less memory. The weights are attention's, up to the order of float additions.
    block: queries per block; by default CAUSAL_BLOCK on NumPy, and all n on a GPU, where every
    block launches the same dozen kernels again and costs more time than its skipped scores save.

    q, k: (..., n, d_k)   v: (..., n, d_v)   (one sequence: n queries, the same n keys)
    ->    out: (..., n, d_v), and a CausalAttentionCache
    """
    _check_qkv(q, k, v, "causal_attention")
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(f"causal_attention: q has {n} queries and k {k.shape[-2]} keys; wanted "
                         f"the same sequence for both (for a longer k, use attention with "
                         f"causal_mask(n_q, n_k))")
    if block is None:
        block = CAUSAL_BLOCK if blocks_pay_off(q) else max(n, 1)
    check_int(block, "block", "causal_attention", what="the number of queries per block")
    xp = get_array_module(q)
    out = xp.empty((*q.shape[:-1], v.shape[-1]), dtype=q.dtype)       # (..., n, d_v)
    blocks = []
    for start in range(0, n, block):
        end = min(start + block, n)
        mask = causal_mask(end - start, end, q.dtype, xp)               # (end − start, end)
        out[..., start:end, :], cache = attention(q[..., start:end, :], k[..., :end, :],
                                                  v[..., :end, :], mask=mask)
        blocks.append((start, end, cache))
    return out, CausalAttentionCache(q, k, v, blocks)


@gradient_of("causal_attention's out", _out_shape)
def causal_attention_backward(dout, cache):
    """attention_backward block by block: a block's queries get their gradient from it alone,
    while every key and value gets a share from each block of queries that saw it.
    Returns (dq, dk, dv, None): no bias, so no dbias, as attention_backward's."""
    if not cache.blocks:                # n = 0: no queries and no keys, so empty gradients
        xp = get_array_module(dout)
        return xp.zeros_like(cache.q), xp.zeros_like(cache.k), xp.zeros_like(cache.v), None
    *earlier, (start, end, last) = cache.blocks
    # The last block saw all n keys: its dk and dv are full-size new arrays, so they can hold the
    # sums that the earlier blocks add into: no arrays of zeros to fill, and two adds fewer.
    # With one block (n ≤ the block size, or a GPU), its gradients are the gradients.
    dq_last, dk, dv, _ = attention_backward(dout[..., start:end, :], last)  # dk, dv (..., n, d)
    if not earlier:
        return dq_last, dk, dv, None
    dq = get_array_module(dout).empty_like(cache.q)                     # (..., n, d_k)
    dq[..., start:end, :] = dq_last
    for start, end, block in earlier:
        dq_block, dk_block, dv_block, _ = attention_backward(dout[..., start:end, :], block)
        dq[..., start:end, :] = dq_block
        dk[..., :end, :] += dk_block
        dv[..., :end, :] += dv_block
    return dq, dk, dv, None


# ----------------------------------------------------------------------------------------------
# Relative position representations (Shaw et al., 2018): a learned vector per query-key offset
# ----------------------------------------------------------------------------------------------

class RelativeAttentionCache(namedtuple("RelativeAttentionCache",
                                         ["attention", "a_k", "a_v", "lookup_k", "lookup_v"])):
    """What relative_attention_backward needs; ``probs`` (..., n_q, n_k) as in AttentionCache."""
    __slots__ = ()

    @property
    def probs(self):
        return self.attention.probs


def relative_attention(q, k, v, positions, table_k, table_v=None, mask=None, scale=None,
                       dropout_p=0.0):
    """Attention with relative position representations (Shaw, Uszkoreit & Vaswani, 2018).

    Each query-key pair (i, j) looks up learned vectors for its offset, one added to the key and
    one to the value, so what a query sees depends on where the key is *relative to it*:

        a^K_ij = w^K[positions[i, j]],   a^V_ij = w^V[positions[i, j]]       (embedding lookups)
        e_ij   = q_i · (k_j + a^K_ij) / √d_k + M_ij
        out_i  = Σ_j α_ij (v_j + a^V_ij),   α = softmax(e) ⊙ D   (D: attention dropout)

    positions[i, j] is clip(j − i, −K, K) + K (see clipped_relative_positions): past K tokens,
    every distance shares one vector. The tables are shared by all heads and batch rows. The
    edge terms are an extra score q_i · a^K_ij / √d_k and an extra output Σ_j α_ij a^V_ij, so
    this is ``attention`` given that score as its bias, plus that output; the bias depends on
    q as well as on the learned table, so the backward adds its share to dq too.

    q: (..., n_q, d_k)   k: (..., n_k, d_k)   v: (..., n_k, d_v)
    positions: (n_q, n_k) integers in [0, 2K+1)
    table_k: w^K (2K+1, d_k)   table_v: w^V (2K+1, d_v), or None for keys only
    mask, scale, dropout_p: as in attention
    ->  out: (..., n_q, d_v), and a cache whose ``probs`` (..., n_q, n_k) are the weights
        before dropout, as in attention
    """
    where = "relative_attention"
    _check_qkv(q, k, v, where)
    check_shape(table_k, "table_k", ("2K+1", ("d_k", q.shape[-1])), where)
    if table_v is not None:
        check_shape(table_v, "table_v", (("2K+1", table_k.shape[0]), ("d_v", v.shape[-1])), where)
    check_shape(positions, "positions", (("n_q", q.shape[-2]), ("n_k", k.shape[-2])), where)
    check_ids(positions, "positions", table_k.shape[0], where, size_name="2K+1")
    scale = _scale(scale, q, where)

    a_k, lookup_k = embedding(positions, table_k)                # (n_q, n_k, d_k)
    edge_scores = _edge_dot(q, a_k) * scale                      # (..., n_q, n_k): q_i · a^K_ij
    out, cache = attention(q, k, v, mask=mask, bias=edge_scores, scale=scale,
                           dropout_p=dropout_p)
    a_v = lookup_v = None
    if table_v is not None:
        a_v, lookup_v = embedding(positions, table_v)            # (n_q, n_k, d_v)
        out += _edge_sum(_weights(cache), a_v)                   # (..., n_q, d_v): Σ_j α_ij a^V_ij
    return out, RelativeAttentionCache(cache, a_k, a_v, lookup_k, lookup_v)


@gradient_of("relative_attention's out", lambda cache: _out_shape(cache[0]))
def relative_attention_backward(dout, cache):
    """attention_backward plus the two edge terms (s = scale, α = probs ⊙ D, e = scores):

        out_i += Σ_j α_ij a^V_ij   ->   dα_ij += dout_i · a^V_ij,     da^V_ij = Σ α_ij dout_i
        e_ij  += q_i · a^K_ij · s  ->   dq_i  += Σ_j de_ij a^K_ij · s,  da^K_ij = Σ de_ij q_i · s
    (Σ without j: over the batch and head axes, which share the tables.) Each lookup then
    scatter-adds da into the table: all pairs at the same clipped offset add into one row.
    Returns (dq, dk, dv, dtable_k, dtable_v); dtable_v is None for keys only.
    """
    attention_cache, a_k, a_v, lookup_k, lookup_v = cache
    q, scale = attention_cache.q, attention_cache.scale
    dv, dweights = _values_backward(dout, attention_cache)
    dtable_v = None
    if a_v is not None:
        dweights += _edge_dot(dout, a_v)
        dtable_v = embedding_backward(_edge_outer(_weights(attention_cache), dout), lookup_v)
    dq, dk, dscores = _scores_backward(dweights, attention_cache)
    dq += _edge_sum(dscores, a_k) * scale
    dtable_k = embedding_backward(_edge_outer(dscores, q) * scale, lookup_k)    # (2K+1, d_k)
    return dq, dk, dv, dtable_k, dtable_v


def _query_major(x):
    """(..., n_q, m) -> (n_q, B, m), B the product of the leading axes. With the query axis as the
    batch axis of a matmul, each query meets its own (n_k, d) slice of the edges: one batched
    product for all pairs (Shaw et al., §3.3), no (..., n_q, n_k, d) broadcast in memory."""
    return x.reshape(-1, *x.shape[-2:]).swapaxes(0, 1)


def _batch_major(y, like):
    """(n_q, B, m) -> (..., n_q, m) with the leading axes of ``like``: undoes _query_major."""
    return y.swapaxes(0, 1).reshape(*like.shape[:-1], y.shape[-1])


def _edge_dot(x, a):
    """x_i · a_ij for every pair:  x (..., n_q, d), a (n_q, n_k, d)  ->  (..., n_q, n_k)"""
    return _batch_major(_query_major(x) @ a.swapaxes(-1, -2), x)   # (n_q, B, d) @ (n_q, d, n_k)


def _edge_sum(p, a):
    """Σ_j p_ij a_ij:  p (..., n_q, n_k), a (n_q, n_k, d)  ->  (..., n_q, d)"""
    return _batch_major(_query_major(p) @ a, p)          # (n_q, B, n_k) @ (n_q, n_k, d)


def _edge_outer(p, x):
    """Σ_batch p_ij x_i:  p (..., n_q, n_k), x (..., n_q, d)  ->  (n_q, n_k, d)"""
    return _query_major(p).swapaxes(-1, -2) @ _query_major(x)     # (n_q, n_k, B) @ (n_q, B, d)

