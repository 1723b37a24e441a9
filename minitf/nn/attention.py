"""Multi-head attention, self and cross, with its hand-written backward."""
import minitf.functional as F
from minitf.backend import get_array_module
from minitf.functional.attention import MASK_HINT
from minitf.nn.layers import Linear
from minitf.nn.module import Module
from minitf.nn.parameter import normal
from minitf.nn.positional import RelativePositionBias
from minitf.validate import (check_broadcast, check_flags, check_int, check_probability,
                             check_real, check_rope_width)

# The options of one positional scheme each, and their defaults (those of __init__)
SCHEME_OPTIONS = {"rope_base": ("rope", 10000.0), "num_buckets": ("relative", 32),
                  "max_distance": ("relative", 128), "max_relative": ("shaw", 16),
                  "shaw_values": ("shaw", True)}

# What an attention layer itself applies; None: positions, if any, were added to its input.
# (A language model's own list, models.lm.POSITIONAL, adds positions added to its input,
# "learned" and "sinusoidal", and leaves out "shaw".)
POSITIONAL_IN_ATTENTION = (None, "rope", "alibi", "relative", "shaw")


def _shape_of(k, v) -> tuple:
    """(b, h, d_head, d_v) of keys k (b, h, n, d_head) and values v (b, h, n, d_v)."""
    return (*k.shape[:2], k.shape[3], v.shape[3])


class KVCache:
    """The keys and values one attention layer has already computed, kept for generation.

    Decoding one token at a time, the new token's query needs the keys and values of *every*
    earlier token, and those never change (the causal mask keeps earlier tokens from seeing later
    ones). So each step computes k and v for the new token only and appends them here: a step
    of a layer costs O(d² + n·d) (the new token's projections, its attention over n keys)
    instead of O(n·d² + n²·d) for recomputing all n tokens. The price is memory,
    b · n · h · (d_head + d_v) numbers per layer (2 · b · n · d_model with the default head
    sizes). For cross-attention the cache holds the projected encoder output, computed on the
    first step and reused on every later one.

    k: (b, h, length, d_head), v: (b, h, length, d_v), or None before the first step.

    The keys and values live in buffers with room to spare, which double when full: appending a
    token writes its k and v in place, where concatenating would copy the whole cache at every
    step and make each token cost more than its attention does.
    """

    def __init__(self):
        self._k = self._v = None           # (b, h, capacity, ·); positions ≥ length unused
        self.length = 0                    # positions cached: the next token's position, too

    @property
    def k(self):
        return None if self._k is None else self._k[:, :, :self.length]

    @property
    def v(self):
        return None if self._v is None else self._v[:, :, :self.length]

    def append(self, k, v):
        """Add the new positions' keys and values; return all of them.  k, v: (b, h, n_new, ·)"""
        if self._k is not None and (k.shape[:2] != self._k.shape[:2]
                                    or k.shape[3] != self._k.shape[3]
                                    or v.shape[3] != self._v.shape[3]):
            # another batch: a cache of one row would be broadcast to every row of a larger one;
            # another model's cache (other head sizes) would fail inside NumPy's copy
            raise ValueError(f"KVCache: the new keys and values are (b, h, d_head, d_v) = "
                             f"{_shape_of(k, v)}; the cache holds {_shape_of(self._k, self._v)}: "
                             f"wanted a new cache (model.new_cache()) for another batch or model")
        start, end = self.length, self.length + k.shape[2]
        if self._k is None or end > self._k.shape[2]:
            self._k, self._v = (self._grown(old, new, end) for old, new in ((self._k, k),
                                                                             (self._v, v)))
        self._k[:, :, start:end], self._v[:, :, start:end] = k, v
        self.length = end
        return self.k, self.v

    def _grown(self, old, new, needed: int):
        """A buffer with room for at least ``needed`` positions (twice the old room, or more),
        holding the old buffer's cached positions."""
        xp = get_array_module(new)
        room = max(needed, 2 * (0 if old is None else old.shape[2]))
        buffer = xp.empty((*new.shape[:2], room, new.shape[3]), dtype=new.dtype)
        if old is not None:
            buffer[:, :, :self.length] = old[:, :, :self.length]
        return buffer

    def reorder(self, index) -> None:
        """Keep batch rows ``index`` (beam search: each surviving beam takes its parent's cache)."""
        if self._k is not None:
            self._k, self._v = self._k[index], self._v[index]


class MultiHeadAttention(Module):
    """h attention heads side by side, computed together in one batched matmul.

        q, k, v = x W_q, x W_k, x W_v        self-attention (one fused projection W_qkv)
        q = x W_q;  k, v = memory W_kv       cross-attention (keys and values from the encoder)
        split into h heads:  q, k (b, h, n, d_head)   v (b, h, n, d_v)
        head_i = dropout(softmax(q_i k_iᵀ / √d_head + M)) v_i    (b, n, d_v) each
        out    = concat(head_1, …, head_h) W_o              (b, n, h·d_v) -> (b, n, d_model)

    Head sizes: d_head (per head, of q and k) defaults to d_model / h, and d_v (of v) to d_head;
    either can be set freely: h full-width heads (d_head = d_model), or narrower values. Weights:
    W_qkv (d_model, h·(2·d_head + d_v)), or W_q (d_model, h·d_head) and W_kv (d_model,
    h·(d_head + d_v)) for cross-attention; W_o (h·d_v, d_model).

    Options:
        causal      query i sees keys j ≤ i only (decoder self-attention)
        positional  None | "rope" (rotate q and k; even d_head) | "alibi" (fixed distance
                    penalty) | "relative" (learned T5 bias) | "shaw" (learned vectors added to
                    keys and values, Shaw et al.); self-attention only
        max_relative, shaw_values   for "shaw": offsets j − i are clipped to ±max_relative, each
                    with a vector in table_k (2K+1, d_head) -- and in table_v (2K+1, d_v) unless
                    shaw_values=False (keys only); both tables are shared by all heads
        attn_dropout  the probability of dropping each attention weight, in training mode
                    only (off in eval mode and when decoding with a cache); 0 = none
    After each forward, ``probs`` holds the attention weights (b, h, n_q, n_k) for plotting,
    before attention dropout (each row sums to 1).

    forward(x, memory=None, mask=None, cache=None):
        x: (b, n, d_model);  memory: (b, m, d_model), cross-attention only
        mask: boolean (True = attend) or additive, broadcastable to (b, h, n, n_k): a padding
              mask as (b, 1, 1, n_k). NumPy aligns shapes on the right, so a (b, n_k) array
              would be read as (n, n_k), one row per query: it is refused where b ≠ n, and
              where b = n > 1 too, since the two cannot be told apart there (pass a mask of
              one row per query as mask[None, None])
        cache: a KVCache, for generation (see KVCache); x then holds only the new tokens
    backward(dy) -> dx, or (dx, dmemory) for cross-attention
    """

    def __init__(self, d_model: int, n_heads: int, *, d_head: int | None = None,
                 d_v: int | None = None, cross: bool = False, causal: bool = False,
                 positional: str | None = None, bias: bool = True, rope_base: float = 10000.0,
                 num_buckets: int = 32, max_distance: int = 128, max_relative: int = 16,
                 shaw_values: bool = True, attn_dropout: float = 0.0):
        where = "MultiHeadAttention"
        check_flags(where, cross=cross, causal=causal, bias=bias, shaw_values=shaw_values)
        check_probability(attn_dropout, "attn_dropout", where)
        check_int(d_model, "d_model", where, what="the width of its input")   # before the %
        check_int(n_heads, "n_heads", where, what="the number of heads")
        if d_head is None:
            if d_model % n_heads:
                raise ValueError(f"{where}: d_model={d_model} is not divisible by n_heads="
                                 f"{n_heads}; wanted d_model = n_heads · d_head, or d_head given")
            d_head = d_model // n_heads
        d_v = d_head if d_v is None else d_v
        check_int(d_head, "d_head", where, what="the width of each head's queries and keys")
        check_int(d_v, "d_v", where, what="the width of each head's values")
        if positional not in POSITIONAL_IN_ATTENTION:
            raise ValueError(f"{where}: positional must be one of {POSITIONAL_IN_ATTENTION}; "
                             f"got {positional!r}")
        if cross and (positional is not None or causal):
            raise ValueError(f"{where}: cross-attention takes neither positional nor causal: its "
                             f"queries and keys come from two different sequences")
        check_rope_width(positional, d_head, where)
        # an option of one positional scheme beside another was ignored without a word
        given = dict(rope_base=rope_base, num_buckets=num_buckets, max_distance=max_distance,
                     max_relative=max_relative, shaw_values=shaw_values)
        for option, (scheme, default) in SCHEME_OPTIONS.items():
            value = given[option]
            # a value of no plain number (an array, a str) counts as given: != of an array
            # has no one truth value
            given_here = not isinstance(value, (bool, int, float)) or value != default
            if positional != scheme and given_here:
                raise ValueError(f"{where}: {option}={value!r} is used only with positional="
                                 f"{scheme!r}; got positional={positional!r} (leave it out, or "
                                 f"set positional={scheme!r})")
        if positional == "rope":        # else the first forward's rope_angles named its base
            check_real(rope_base, "rope_base", where, low=0)
        if positional == "shaw":
            check_int(max_relative, "max_relative", where,
                      what="the largest offset with its own vector")
        self.d_model, self.n_heads, self.d_head, self.d_v = d_model, n_heads, d_head, d_v
        self.cross, self.causal, self.positional, self.rope_base = cross, causal, positional, rope_base
        self.max_relative, self.attn_dropout = max_relative, attn_dropout
        if cross:
            self.W_q = Linear(d_model, n_heads * d_head, bias)
            self.W_kv = Linear(d_model, n_heads * (d_head + d_v), bias)
            self.W_kv.parts = (n_heads * d_head, n_heads * d_v)                  # W_k | W_v
        else:
            self.W_qkv = Linear(d_model, n_heads * (2 * d_head + d_v), bias)
            self.W_qkv.parts = (n_heads * d_head, n_heads * d_head, n_heads * d_v)  # W_q|W_k|W_v
        self.W_o = Linear(n_heads * d_v, d_model, bias)
        if positional == "relative":
            self.relative_bias = RelativePositionBias(n_heads, num_buckets, max_distance,
                                                      bidirectional=not causal)
        if positional == "shaw":                         # w^K and w^V, one row per clipped offset
            rows = 2 * max_relative + 1
            self.table_k = normal(rows, d_head, std=0.02)
            self.table_v = normal(rows, d_v, std=0.02) if shaw_values else None
        self._last_attention = None
        self._rope_table = None        # (cos θ, sin θ) of positions 0 … some length, for RoPE

    @property
    def probs(self):
        """The attention weights of the last forward (b, h, n_q, n_k), before attention
        dropout, for plotting; None before the first. Made when asked for: causal_attention
        keeps only the blocks it computed."""
        return None if self._last_attention is None else self._last_attention.probs

    def _project(self, x, memory, cache):
        """q, k (b, h, n, d_head), v (b, h, n, d_v): one matmul for all heads (and q, k, v)."""
        where = type(self).__name__
        if not self.cross:
            if memory is not None:
                raise ValueError(f"{where}: self-attention takes no memory; build "
                                 f"MultiHeadAttention(..., cross=True) for cross-attention")
            return F.split_heads(self.W_qkv(x), self.n_heads,
                                 parts=(self.d_head, self.d_head, self.d_v))
        if memory is None:
            raise ValueError(f"{where}: cross-attention needs memory (b, m, d_model), the sequence "
                             f"its queries attend to; got None")
        self._check_input(memory, "memory", (("b", x.shape[0]), "m", ("d_model", self.d_model)))
        q = F.split_heads(self.W_q(x), self.n_heads)[0]
        if cache is not None and cache.k is not None:          # the memory was projected already
            return q, cache.k, cache.v
        k, v = F.split_heads(self.W_kv(memory), self.n_heads, parts=(self.d_head, self.d_v))
        if cache is not None:
            cache.append(k, v)
        return q, k, v

    def _rope_angles(self, offset, n, dtype, xp):
        """cos θ and sin θ (n, d_head/2) of positions offset … offset + n − 1, for RoPE.

        They are rows of a table the layer keeps, doubled when a longer sequence comes. Otherwise
        a generated token would compute its one row anew in every layer at every step: some ten
        small array operations, about 5 % of the layer's time for that token (benchmarks/RESULTS.md,
        ninth entry).
        """
        table = self._rope_table
        if (table is None or len(table[0]) < offset + n or table[0].dtype != dtype
                or get_array_module(table[0]) is not xp):
            length = max(offset + n, 2 * len(table[0]) if table is not None else 0)
            table = self._rope_table = F.rope_angles(length, self.d_head, base=self.rope_base,
                                                     dtype=dtype, xp=xp)
        cos, sin = table
        return cos[offset:offset + n], sin[offset:offset + n]

    def _mask(self, mask, scores_shape, dtype, xp):
        """The user's mask, the causal mask and the ALiBi bias: all constants, added together."""
        if mask is not None:
            b, h = scores_shape[:2]
            if getattr(mask, "ndim", None) == 3 and mask.shape[0] == b > 1:
                # broadcast, a 3-axis mask is (h, n_q, n_k): with b = h, one sequence's padding
                # was read as one head's, for every sequence, and nothing said
                raise ValueError(f"{type(self).__name__}: mask has shape {tuple(mask.shape)}, "
                                 f"three axes, the first the size of the batch (b = {b}); "
                                 f"broadcast, it would be read as the heads' (h = {h}); wanted "
                                 f"mask[:, None] for a mask per sequence, or mask[None] for "
                                 f"one per head{MASK_HINT}")
            if getattr(mask, "ndim", None) == 2 and mask.shape[0] == b == scores_shape[2] > 1:
                # (b, n_k), ids != pad, the first mask one builds: broadcast, it is (n_q, n_k),
                # one row per query, and with b = n_q nothing told them apart
                raise ValueError(f"{type(self).__name__}: mask has shape {tuple(mask.shape)}, "
                                 f"two axes, the first the size of the batch and of the queries "
                                 f"(b = n_q = {b}); broadcast, it would be read as one row per "
                                 f"query; wanted mask[:, None, None, :] for a mask per sequence, "
                                 f"or mask[None, None] for one row per query (the shapes are "
                                 f"read from the right)")
            check_broadcast(mask, "mask", scores_shape, "the attention scores (b, h, n_q, n_k)",
                            type(self).__name__, MASK_HINT)
            mask = F.as_additive_mask(mask, dtype, where=type(self).__name__)
        _, h, n_q, n_k = scores_shape
        # One query (a generated token) is the last position: it may see every key, so its causal
        # mask is all zeros, and adding it would only cost a pass over the scores.
        causal = F.causal_mask(n_q, n_k, dtype, xp) if self.causal and n_q > 1 else None
        alibi = F.alibi_bias(h, n_q, n_k, dtype, xp) if self.positional == "alibi" else None
        return F.combine_masks(mask, causal, alibi)

    def forward(self, x, memory=None, mask=None, cache=None):
        self._check_input(x, "x", ("b", "n", ("d_model", self.d_model)))
        if cache is not None and not isinstance(cache, KVCache):
            raise TypeError(f"{type(self).__name__}: cache must be a KVCache or None; "
                            f"got {type(cache).__name__}")
        xp = get_array_module(x)
        q, k, v = self._project(x, memory, cache)                # (b, h, n | n_k, d_head | d_v)
        b, h, n, _ = q.shape
        # With a cache, x holds the tokens at positions offset … offset + n − 1.
        offset = cache.length if cache is not None and not self.cross else 0

        rope_cache = None
        if self.positional == "rope":                            # rotate q and k, not v
            cos, sin = self._rope_angles(offset, n, x.dtype, xp)  # (n, d_head/2)
            q, rope_cache = F.rope(q, cos, sin)
            k, _ = F.rope(k, cos, sin)
            if self.training and cache is None:
                # q and k are new arrays now, and v is still a view of W_qkv's output: kept for
                # the backward, it would keep all of that output alive, two thirds of it (q and
                # k before turning) dead. Its own copy lets that go: a layer of the default
                # `minitf train` model (32 windows of 64) keeps 2 MiB less, for a copy of 1.
                v = xp.ascontiguousarray(v)
        if cache is not None and not self.cross:
            k, v = cache.append(k, v)                            # (b, h, offset + n, ·)
        n_k = k.shape[2]
        dropout_p = self.attn_dropout if self.training and cache is None else 0.0
        if (self.causal and n == n_k and mask is None and dropout_p == 0.0
                and self.positional in (None, "rope")):
            # A decoder's usual case: the causal mask is all there is, and causal_attention
            # skips the scores it would discard (the same weights, about half the work at n=512)
            context, attention_cache = F.causal_attention(q, k, v)
        else:
            mask = self._mask(mask, (b, h, n, n_k), x.dtype, xp)
            if self.positional == "shaw":                        # the new queries are the last n
                positions = F.clipped_relative_positions(n, n_k, self.max_relative, xp)
                table_v = None if self.table_v is None else self.table_v.data
                context, attention_cache = F.relative_attention(
                    q, k, v, positions, self.table_k.data, table_v, mask=mask,
                    dropout_p=dropout_p)
            else:
                bias = self.relative_bias(n, n_k) if self.positional == "relative" else None
                context, attention_cache = F.attention(q, k, v, mask=mask, bias=bias,
                                                       dropout_p=dropout_p)
        self._last_attention = attention_cache                   # its weights: see ``probs``
        # A cached forward is for generation: its keys came from earlier calls, so no backward.
        self._save(None if cache is not None else (attention_cache, rope_cache))
        # (b, h, n, d_v) -> (b, n, h·d_v): the heads side by side -> W_o -> (b, n, d_model)
        return self.W_o(F.merge_heads((context,)))

    def backward(self, dy):
        """The forward's steps undone, last first.   dy: (b, n, d_model)

            y = merge_heads(context) W_o   ->   dcontext = split_heads(dy W_oᵀ)   (b, h, n, d_v)
            context = attention(q, k, v)   ->   dq, dk, dv (and the bias's or the tables' grads)
            q, k rotated by RoPE           ->   dq, dk rotated back
            q, k, v = split_heads(x W_qkv) ->   dx = merge_heads(dq, dk, dv) W_qkvᵀ
        -> dx (b, n, d_model); for cross-attention (dx, dmemory), dx through W_q and dmemory
        (b, m, d_model) through W_kv.
        """
        # BEGIN SOLUTION MultiHeadAttention.backward
        saved = self._pop_cache()
        if saved is None:
            raise RuntimeError(f"{type(self).__name__}.backward(): the last forward ran with a "
                               f"KVCache, which is for generation only; run forward without a "
                               f"cache to train")
        attention_cache, rope_cache = saved
        dcontext = F.split_heads(self.W_o.backward(dy), self.n_heads)[0]   # (b, h, n, d_v)
        if self.positional == "shaw":
            dq, dk, dv, dtable_k, dtable_v = F.relative_attention_backward(dcontext,
                                                                           attention_cache)
            self.table_k.grad += dtable_k
            if dtable_v is not None:
                self.table_v.grad += dtable_v
        else:
            dq, dk, dv, dbias = F.attention_backward(dcontext, attention_cache)
            if dbias is not None:
                self.relative_bias.backward(dbias)
        if rope_cache is not None:
            dq = F.rope_backward(dq, rope_cache)
            dk = F.rope_backward(dk, rope_cache)
        if self.cross:
            dx = self.W_q.backward(F.merge_heads((dq,)))
            dmemory = self.W_kv.backward(F.merge_heads((dk, dv)))
            return dx, dmemory
        return self.W_qkv.backward(F.merge_heads((dq, dk, dv)))
        # END SOLUTION
