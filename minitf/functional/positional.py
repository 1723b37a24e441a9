"""Positional information. Attention by itself is permutation-equivariant: shuffle the tokens and
the outputs are shuffled the same way. Order enters only through one of these:

    sinusoidal table  PE[p, 2i] = sin(p / 10000^(2i/d)),  PE[p, 2i+1] = cos(p / 10000^(2i/d))
    RoPE              rotate each pair of q and k features by an angle proportional to position
    ALiBi             add −m_h · |i − j| to the scores: a fixed, per-head penalty for distance
    relative bias     add a learned number per head and distance bucket to the scores (T5)
    Shaw relative     add a learned vector per clipped offset to the keys and values
                      (its ids are here; the attention is functional.attention.relative_attention)
    Fourier features  the same sines and cosines for real-valued coordinates (a pixel's x, y):
                      sin(2^k π x), cos(2^k π x) for octaves k = 0 … K−1

Positions are counted from ``offset`` so that a decoder fed one new token at a time (with a KV
cache) sees the same positions as one fed the whole sequence.
"""
import math

from minitf.backend import float_dtype, float_dtype_named, get_array_module
from minitf.functional.linear import embedding, embedding_backward
from minitf.functional.masks import query_key_lengths
from minitf.validate import (at_the_boundary, check_flags, check_float, check_ids, check_int,
                             check_real, check_shape, plain_int)
from minitf.validate_gradients import gradient_of


def _check_positions(n, offset, base, where):
    """The n positions offset … offset+n−1 and the base of the frequencies, as sinusoidal_table
    and rope_angles take them. Checked because NumPy would not complain: a negative n gives an
    empty table, a fractional or negative offset positions no sequence has, a base ≤ 0 NaNs."""
    check_int(n, "n", where, low=0, what="the number of positions")
    check_int(offset, "offset", where, low=0, what="the position of the first row")
    check_real(base, "base", where, low=0)


def _angles(n, width, offset, base, xp):
    """θ[p, i] = p / base^(2i / width) for p = offset … offset+n−1 and i = 0 … ⌈width/2⌉−1."""
    positions = xp.arange(offset, offset + n, dtype="float64")[:, None]            # (n, 1)
    inv_freq = base ** (-xp.arange(0, width, 2, dtype="float64") / width)        # (⌈width/2⌉,)
    return positions * inv_freq                                                  # (n, ⌈width/2⌉)


def _table_dtype(dtype, where: str):
    """A table's dtype: minitf's default for None, else one of the two float dtypes (an integer
    table of sines would be 0s and 1s, and say nothing)."""
    return float_dtype() if dtype is None else float_dtype_named(dtype, where)


def sinusoidal_table(n, d, offset=0, base=10000.0, dtype=None, xp=None):
    """The fixed encodings of Vaswani et al.: sines and cosines of geometrically spaced frequencies.

    Each pair of features is a clock running at its own speed, so any fixed offset k acts on
    PE[p] as a rotation -- relative positions are easy for a linear map to read off.
    ->  (n, d), computed in float64 and returned in ``dtype``
    """
    # a length read off an array may be a NumPy integer: as good as an int here
    n, d, offset = plain_int(n), plain_int(d), plain_int(offset)
    _check_positions(n, offset, base, "sinusoidal_table")
    check_int(d, "d", "sinusoidal_table", what="the width of each position's vector")
    xp = xp or get_array_module()
    theta = _angles(n, d, offset, base, xp)
    table = xp.empty((n, d), dtype="float64")
    table[:, 0::2] = xp.sin(theta)
    table[:, 1::2] = xp.cos(theta[:, : d // 2])
    return table.astype(_table_dtype(dtype, "sinusoidal_table"))


def rope_angles(n, d_head, offset=0, base=10000.0, dtype=None, xp=None):
    """cos θ and sin θ for RoPE, θ[p, i] = p / base^(2i / d_head).   ->  two (n, d_head/2) arrays"""
    n, d_head, offset = plain_int(n), plain_int(d_head), plain_int(offset)
    _check_positions(n, offset, base, "rope_angles")
    check_int(d_head, "d_head", "rope_angles", what="the width of each head's queries and keys")
    if d_head % 2:
        raise ValueError(f"rope_angles: d_head={d_head} must be even (features rotate in pairs)")
    xp = xp or get_array_module()
    theta = _angles(n, d_head, offset, base, xp)
    dtype = _table_dtype(dtype, "rope_angles")
    return xp.cos(theta).astype(dtype), xp.sin(theta).astype(dtype)


def _rotate(x, cos, sin):
    """Rotate every feature pair (x_2i, x_2i+1) by the angle whose cosine and sine are given.

    Read the pair as one complex number z = x_2i + i·x_2i+1. Turning it by θ is multiplying by
    e^{iθ} = cos θ + i sin θ:
        z e^{iθ} = (x_2i cos θ − x_2i+1 sin θ) + i (x_2i sin θ + x_2i+1 cos θ),
    the two lines of rope's docstring. NumPy and CuPy store a complex number as its real part
    followed by its imaginary part, so the pairs *are* complex numbers: viewed so, the rotation is
    one multiply. (Written pair by pair it is six passes over strided halves of x: 4-8 × slower
    on a q of the default `minitf train` step.)
    """
    xp = get_array_module(x)
    # A contiguous copy first: CuPy views only a contiguous array as complex numbers, and on
    # NumPy the copy saves more than it costs (a q cut out of W_qkv's output is strided).
    pair_dtype = xp.promote_types(x.dtype, xp.complex64)   # float32 -> complex64
    contiguous = xp.ascontiguousarray(x)                   # x itself if it was contiguous
    z = contiguous.view(pair_dtype)                        # (..., n, d_head/2)
    # e^{iθ} = cos θ + i sin θ, written as the pairs it is made of: cos + 1j * sin would make
    # two complex128 arrays first (a third of the rotation's time for a generated token)
    turn = xp.empty(cos.shape, dtype=pair_dtype)           # (n, d_head/2)   e^{iθ}
    turn_pairs = turn.view(x.dtype)                        # (n, d_head)     cos, sin, cos, …
    turn_pairs[..., 0::2], turn_pairs[..., 1::2] = cos, sin
    # A copy is this function's own: the rotation can go over it, one new array fewer (x itself
    # is never written: a cache may hold it)
    own = not xp.may_share_memory(contiguous, x)
    return xp.multiply(z, turn, out=z if own else None).view(x.dtype)   # (..., n, d_head)


@at_the_boundary
def _check_rope(x, cos, sin):
    """rope's arguments, skipped as one call inside a model (see linear's). x must hold floats:
    _rotate views its pairs as complex numbers, which would read an integer's bits as a float's."""
    check_shape(cos, "cos", ("n", "d_head/2"), "rope")
    check_shape(sin, "sin", (("n", cos.shape[0]), ("d_head/2", cos.shape[1])), "rope")
    check_float(x, "x", "rope")
    check_shape(x, "x", ("...", ("n", cos.shape[0]), ("d_head", 2 * cos.shape[1])), "rope")


def rope(x, cos, sin):
    """Rotary position embedding (Su et al.): rotate the pair (x_2i, x_2i+1) at position p by θ[p, i].

        y_2i   = x_2i cos θ − x_2i+1 sin θ
        y_2i+1 = x_2i sin θ + x_2i+1 cos θ
    Applied to q and k, a dot product q_m · k_n then depends on the positions only through m − n.
    x: (..., n, d_head)   cos, sin: (n, d_head/2) from rope_angles   ->   y: (..., n, d_head)
    """
    _check_rope(x, cos, sin)
    return _rotate(x, cos, sin), (cos, sin)


@gradient_of("rope's y", lambda cache: ("...", ("n", cache[0].shape[0]),     # cos: (n, d_head/2)
                                       ("d_head", 2 * cache[0].shape[1])))
def rope_backward(dy, cache):
    """A rotation's gradient is the rotation back: R(θ)ᵀ = R(−θ), so dx = rotate(dy, cos θ, −sin θ)."""
    # BEGIN SOLUTION rope_backward
    cos, sin = cache
    return _rotate(dy, cos, -sin)
    # END SOLUTION


def alibi_slopes(n_heads):
    """ALiBi's per-head slopes m_h: the geometric sequence 2^(−8/H), 2^(−16/H), …, 2^(−8).

    For H not a power of two (Press et al.): the slopes of the nearest lower power of two H',
    then every other slope of 2H' until there are H.   ->  a list of H floats
    """
    n_heads = plain_int(n_heads)
    check_int(n_heads, "n_heads", "alibi_slopes", what="the number of heads")

    def geometric(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    lower = 2 ** int(math.floor(math.log2(n_heads)))
    return geometric(lower) + geometric(2 * lower)[0::2][: n_heads - lower]


def _relative_positions(n_q, n_k, xp):
    """j − i for query i (the last n_q of n_k positions) and key j.   ->  (n_q, n_k) integers"""
    query_pos = xp.arange(n_q)[:, None] + (n_k - n_q)
    return xp.arange(n_k)[None, :] - query_pos


def alibi_bias(n_heads, n_q, n_k=None, dtype=None, xp=None):
    """Attention with Linear Biases: bias[h, i, j] = −m_h · |i − j|, added to the scores.

    A fixed penalty growing with distance, steeper for some heads than others; no parameters and
    no position embeddings at all. (Causal models also apply the causal mask, so only j ≤ i
    matters there.) i is the query's position among the keys': the n_q queries are the last
    n_q of the n_k positions (a generated token is the newest).   ->  (h, n_q, n_k)
    """
    # n_heads checked here too, so that a bad one is named in alibi_bias' words
    n_heads = plain_int(n_heads)
    check_int(n_heads, "n_heads", "alibi_bias", what="the number of heads")
    n_q, n_k = query_key_lengths(n_q, n_k, "alibi_bias")
    xp = xp or get_array_module()
    distance = xp.abs(_relative_positions(n_q, n_k, xp)).astype("float64")   # (n_q, n_k)
    slopes = xp.asarray(alibi_slopes(n_heads), dtype="float64")[:, None, None]
    return (-slopes * distance).astype(_table_dtype(dtype, "alibi_bias"))


def check_bucket_settings(num_buckets, max_distance, bidirectional, where) -> None:
    """ValueError unless T5's buckets can be built: at least one exact bucket (num_buckets ≥ 4
    bidirectional, ≥ 2 causal) and a max_distance beyond the exact ones, where the log scale
    starts (else the buckets divide by log(1) = 0); bidirectional must be True or False."""
    check_flags(where, bidirectional=bidirectional)
    halves = ("bidirectional: half for each direction, half of each half exact" if bidirectional
              else "half of them exact")
    check_int(num_buckets, "num_buckets", where, low=4 if bidirectional else 2, what=halves)
    max_exact = num_buckets // (4 if bidirectional else 2)
    check_int(max_distance, "max_distance", where, low=max_exact + 1,
              what=f"beyond the exact buckets, distances 0..{max_exact - 1}")


def relative_position_buckets(n_q, n_k=None, bidirectional=True, num_buckets=32,
                              max_distance=128, xp=None):
    """T5's bucket for each (query, key) pair: one bucket per distance below num_buckets/2 (or /4
    when bidirectional), then logarithmically wider buckets, the last of which takes every larger
    distance. The log scale reaches max_distance at the *end* of the last bucket, and buckets are
    rounded down, so the last one starts earlier: at distance 91 with the defaults, bidirectional
    (8 · 16^(7/8)), as in T5. Bidirectional buckets give keys after the query their own half; the
    distance 0 counts as the past, so the first bucket of that half is never used.

    ->  (n_q, n_k) integer bucket ids in [0, num_buckets)
    """
    check_bucket_settings(num_buckets, max_distance, bidirectional, "relative_position_buckets")
    n_q, n_k = query_key_lengths(n_q, n_k, "relative_position_buckets")
    xp = xp or get_array_module()
    distance = -_relative_positions(n_q, n_k, xp)         # > 0 for keys in the past
    bucket = xp.zeros_like(distance)
    if bidirectional:
        num_buckets //= 2
        bucket += (distance < 0) * num_buckets            # keys in the future: the upper half
        distance = xp.abs(distance)
    else:
        distance = xp.maximum(distance, 0)                # the future is masked anyway
    max_exact = num_buckets // 2
    # Beyond max_exact, the bucket grows with log(distance): far tokens are told apart coarsely.
    log_ratio = (xp.log(xp.maximum(distance, max_exact) / max_exact)
                 / math.log(max_distance / max_exact))
    far = max_exact + (log_ratio * (num_buckets - max_exact)).astype(distance.dtype)
    far = xp.minimum(far, num_buckets - 1)
    return bucket + xp.where(distance < max_exact, distance, far)


def clipped_relative_positions(n_q, n_k=None, max_relative=16, xp=None):
    """Shaw et al.'s table row for each (query, key) pair: clip(j − i, −K, K) + K, K = max_relative.

    Row K is the query's own position, K − 1 the key just before it, K + 1 the one after; every
    key K or more tokens away shares the row at its side's end (row 0 before the query, row 2K
    after it), so a model can run on sequences longer than any it was trained on. The queries are
    the last n_q of the n_k positions (as for the causal mask).
    ->  (n_q, n_k) integer ids in [0, 2K]
    """
    n_q, n_k = query_key_lengths(n_q, n_k, "clipped_relative_positions")
    check_int(max_relative, "max_relative", "clipped_relative_positions",
              what="the largest offset with its own row")
    xp = xp or get_array_module()
    offsets = _relative_positions(n_q, n_k, xp)                          # j − i
    return xp.clip(offsets, -max_relative, max_relative) + max_relative


def relative_bias(table, buckets):
    """T5-style learned relative position bias: bias[h, i, j] = table[bucket[i, j], h].

    It is an embedding lookup -- one learned number per (distance bucket, head) -- with the head
    axis moved to the front so that it adds straight onto the scores (b, h, n_q, n_k).
    table: (num_buckets, h)   buckets: (n_q, n_k)   ->   bias: (h, n_q, n_k)
    """
    # checked in its own words: the embedding's would name ids and vocab_size
    check_float(table, "table", "relative_bias")
    check_shape(table, "table", ("num_buckets", "h"), "relative_bias")
    check_shape(buckets, "buckets", ("n_q", "n_k"), "relative_bias")
    check_ids(buckets, "buckets", table.shape[0], "relative_bias", size_name="num_buckets")
    out, cache = embedding(buckets, table)                 # (n_q, n_k, h)
    return out.transpose(2, 0, 1), cache


@gradient_of("relative_bias' bias", lambda cache: (cache[1][1], *cache[0].shape))  # (h, n_q, n_k)
def relative_bias_backward(dbias, cache):
    """Undo the transpose, then the embedding's scatter-add into the table.
    dbias: (h, n_q, n_k)   ->   dtable: (num_buckets, h)
    """
    # BEGIN SOLUTION relative_bias_backward
    return embedding_backward(dbias.transpose(1, 2, 0), cache)
    # END SOLUTION


def fourier_features(coords, n_octaves):
    """γ(x) = [sin(2^k π x_j) | cos(2^k π x_j)] for every coordinate j and octave k < K: the
    sinusoidal encoding of token positions, applied to real coordinates (Tancik et al. 2020).

    Octave k completes 2^(k−1) periods across [0, 1] (a period of 2^(1−k)), so a layer reading
    γ(x) can draw detail down to the top octave's period, 2^(2−K), without having to build
    high frequencies out of ReLUs first.
    coords: (..., c)  ->  (..., 2·c·K): first the c·K sines, then the c·K cosines, each ordered
    coordinate by coordinate (x at octaves 0 … K−1, then y at octaves 0 … K−1, …)
    """
    where = "fourier_features"
    check_shape(coords, "coords", ("...", "c"), where)
    if coords.dtype.kind != "f":
        raise TypeError(f"{where}: coords has dtype {coords.dtype}; wanted a float dtype")
    check_int(n_octaves, "n_octaves", where, what="the number of frequencies per coordinate")
    xp = get_array_module(coords)
    freq = (math.pi * 2.0 ** xp.arange(n_octaves, dtype="float64")).astype(coords.dtype)  # (K,)
    theta = (coords[..., :, None] * freq).reshape(*coords.shape[:-1], -1)   # 2^k π x_j  (..., c·K)
    sin, cos = xp.sin(theta), xp.cos(theta)
    return xp.concatenate([sin, cos], axis=-1), (sin, cos, freq, coords.shape)


@gradient_of("fourier_features' output",                         # sin: (..., c·K), then cos
             lambda cache: (*cache[0].shape[:-1], 2 * cache[0].shape[-1]))
def fourier_features_backward(dy, cache):
    """d sin θ = cos θ dθ and d cos θ = −sin θ dθ, with θ_jk = 2^k π x_j, so
        dx_j = Σ_k 2^k π (cos θ_jk · dy_sin,jk − sin θ_jk · dy_cos,jk)
    dy: (..., 2·c·K)  ->  dcoords: (..., c)
    """
    sin, cos, freq, shape = cache
    dy_sin, dy_cos = dy[..., : sin.shape[-1]], dy[..., sin.shape[-1]:]            # (..., c·K) each
    dtheta = (cos * dy_sin - sin * dy_cos).reshape(*shape, -1)                   # (..., c, K)
    return (dtheta * freq).sum(axis=-1)                                          # (..., c)
