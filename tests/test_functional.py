"""What the functional ops compute (their gradients are checked in test_gradcheck.py)."""
import math
import re
import warnings

import numpy as np
import pytest

import minitf.functional as F
from minitf import array_ops, backend


def host(a):
    return backend.to_numpy(a)


def test_softmax_rows_sum_to_one_and_survive_large_inputs(float64):
    x = backend.randn(4, 7) * 1000
    p, _ = F.softmax(x)
    assert np.all(np.isfinite(host(p)))
    np.testing.assert_allclose(host(p).sum(-1), 1, rtol=1e-12)


def test_a_fully_masked_row_gives_zeros_not_nan(float64):
    x = backend.randn(3, 4)
    x[1] = -math.inf
    p, cache = F.softmax(x)
    assert host(p)[1].tolist() == [0, 0, 0, 0]
    dx = F.softmax_backward(backend.randn(3, 4), cache)
    assert host(dx)[1].tolist() == [0, 0, 0, 0]
    out, cache = F.attention(backend.randn(1, 2, 3), backend.randn(1, 4, 3), backend.randn(1, 4, 5),
                             mask=F.padding_mask([0], 4)[0, 0])
    assert not np.any(host(out)) and not np.any(np.isnan(host(cache.probs)))


def test_softmax_written_over_its_input_gives_the_same_numbers(float64):
    """out=x (as attention does with its scores): ordinary, fully masked and +inf rows alike."""
    x = backend.randn(4, 6)
    x[1] = -math.inf                     # fully masked
    x[2, [0, 5]] = math.inf              # two +inf entries: half the weight each
    x[3, 2] = -math.inf
    wanted, _ = F.softmax(x.copy())
    p, cache = F.softmax(x, out=x)
    assert p is x and cache[0] is x
    np.testing.assert_array_equal(host(p), host(wanted))
    assert host(p)[2].tolist() == [0.5, 0, 0, 0, 0, 0.5]


def test_a_row_holding_inf_shares_its_weight_among_the_inf_entries(float64):
    """The limit of softmax as those entries grow together: a huge equal value in their place
    gives the same probabilities and the same gradient, and nothing is NaN."""
    x = backend.randn(3, 5)
    x[0, [1, 3]] = math.inf
    x[2, 4] = math.inf
    x[2, 0] = -math.inf
    huge = x.copy()
    huge[huge == math.inf] = 1e6                         # exp(1 − 1e6) is 0 in float64
    p, cache = F.softmax(x)
    assert host(p)[0].tolist() == [0, 0.5, 0, 0.5, 0] and host(p)[2].tolist() == [0, 0, 0, 0, 1]
    np.testing.assert_allclose(host(p), host(F.softmax(huge)[0]), rtol=1e-12)
    dp = backend.randn(3, 5)
    np.testing.assert_allclose(host(F.softmax_backward(dp, cache)),
                               host(F.softmax_backward(dp, F.softmax(huge)[1])), rtol=1e-12)
    logp, cache = F.log_softmax(x)
    np.testing.assert_allclose(host(logp)[0, [1, 3]], [-math.log(2)] * 2, rtol=1e-12)
    assert np.all(np.isfinite(host(F.log_softmax_backward(dp, cache))))
    targets = backend.to_device(np.array([3, 2, 4]))
    loss, cache = F.cross_entropy(x, targets)
    huge_loss, huge_cache = F.cross_entropy(huge, targets)
    assert float(loss) == pytest.approx(float(huge_loss), rel=1e-12)     # row 0 costs log 2
    np.testing.assert_allclose(host(F.cross_entropy_backward(1.0, cache)),
                               host(F.cross_entropy_backward(1.0, huge_cache)), atol=1e-12)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_of_logits_at_the_float32_limit_is_finite_and_exact(backend_name,
                                                                           label_smoothing):
    """±3e38: x − max overflows in float32, and so would a float32 loss; nothing warns."""
    logits = backend.to_device(np.array([[3e38, -3e38, 0.0], [-math.inf, 2.0, 3.0],
                                         [-3e38, 0.0, -3e38]]), dtype="float32")
    targets = backend.to_device(np.array([1, -100, 0]))    # ignored: weight 0, even times inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss, cache = F.cross_entropy(logits, targets, label_smoothing=label_smoothing)
        dlogits = host(F.cross_entropy_backward(1.0, cache))
    eps = label_smoothing
    row0 = (1 - eps) * 6e38 + eps * (3e38 + 6e38) / 3        # −log p_1, then −mean_c log p_c
    row2 = (1 - eps) * 3e38 + eps * (3e38 + 0 + 3e38) / 3
    # The float32 logits are not exactly 3e38; the relative error is the float32 rounding.
    assert float(loss) == pytest.approx((row0 + row2) / 2, rel=1e-6)
    assert np.all(np.isfinite(dlogits)) and not np.any(dlogits[1])
    np.testing.assert_allclose(dlogits[0], [(1 - eps / 3) / 2, (-(1 - eps) - eps / 3) / 2,
                                            -eps / 3 / 2], rtol=1e-6)


def test_log_softmax_is_the_log_of_softmax(float64):
    x = backend.randn(3, 6)
    np.testing.assert_allclose(host(F.log_softmax(x)[0]), np.log(host(F.softmax(x)[0])), rtol=1e-12)


def test_cross_entropy_by_hand(float64):
    logits = backend.to_device(np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5]]))
    targets = backend.to_device(np.array([0, -100]))
    loss, _ = F.cross_entropy(logits, targets)
    assert float(loss) == pytest.approx(-math.log(math.exp(2) / (math.exp(2) + 1 + math.exp(-1))))
    everything_ignored, cache = F.cross_entropy(logits, targets * 0 - 100)
    assert float(everything_ignored) == 0.0
    assert not np.any(host(F.cross_entropy_backward(1.0, cache)))


def test_a_summed_cross_entropy_is_the_mean_times_the_kept_targets(float64):
    logits, targets = backend.randn(2, 4, 5), backend.randint(0, 5, (2, 4))
    targets[1, 2] = -100                                         # 7 targets kept
    mean, mean_cache = F.cross_entropy(logits, targets)
    total, sum_cache = F.cross_entropy(logits, targets, reduction="sum")
    assert float(total) == pytest.approx(7 * float(mean), rel=1e-12)
    np.testing.assert_allclose(host(F.cross_entropy_backward(1.0, sum_cache)),
                               7 * host(F.cross_entropy_backward(1.0, mean_cache)), rtol=1e-12)


def test_embedding_backward_adds_repeated_tokens(float64):
    xp = backend.get_array_module()
    W = backend.randn(5, 2)
    out, cache = F.embedding(xp.asarray([[1, 3, 1]]), W)
    dW = host(F.embedding_backward(xp.ones((1, 3, 2)), cache))
    assert dW[:, 0].tolist() == [0, 2, 0, 1, 0]


def test_dropout_keeps_the_expectation_and_is_the_identity_in_eval(float64):
    x = backend.randn(200, 500) * 0 + 1
    with backend.seed(0):
        y, _ = F.dropout(x, 0.3)
    values = np.unique(host(y))
    np.testing.assert_allclose(values, [0, 1 / 0.7])
    assert host(y).mean() == pytest.approx(1.0, abs=0.01)
    assert F.dropout(x, 0.3, training=False)[0] is x


def test_layer_norm_normalizes(float64):
    x = backend.randn(4, 16) * 5 + 3
    xp = backend.get_array_module()
    y, _ = F.layer_norm(x, xp.ones(16), xp.zeros(16), eps=0.0)
    np.testing.assert_allclose(host(y).mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(host(y).var(-1), 1, rtol=1e-12)      # biased variance


@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("op", ["gelu tanh", "gelu none", "layer_norm"])
def test_a_forward_that_keeps_no_cache_gives_the_same_y_to_the_bit(backend_name, precision, op):
    """keep_cache=False (what nn.no_grad() asks for) makes y over the array the cache would have
    kept: the same numbers, no cache, and x as it was. 40,000 and 200,000 entries: below and
    above the block that elementwise_in_blocks splits tanh-GELU into."""
    name, _, approximate = op.partition(" ")
    with backend.precision(precision):
        for size in (40_000, 200_000):
            x = backend.randn(size // 100, 100) * 3
            before = host(x).copy()
            args = (x, backend.randn(100), backend.randn(100)) if name == "layer_norm" else \
                   (x, approximate)
            kept, cache = getattr(F, name)(*args)
            free, none = getattr(F, name)(*args, keep_cache=False)
            assert cache is not None and none is None
            assert free.dtype == kept.dtype == x.dtype
            np.testing.assert_array_equal(host(free), host(kept))
            np.testing.assert_array_equal(host(x), before)


def test_masks(float64):
    causal = host(F.causal_mask(3, 5))
    assert (causal == 0).tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert causal[0, 4] == -math.inf
    pad = host(F.padding_mask([2, 4], 4))
    assert pad.shape == (2, 1, 1, 4) and (pad[:, 0, 0] == 0).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    ids = backend.to_device(np.array([[5, 6, 0, 0], [7, 0, 8, 0]]))
    from_ids = host(F.padding_mask_from_ids(ids, pad_id=0))
    assert (from_ids[:, 0, 0] == 0).tolist() == [[1, 1, 0, 0], [1, 0, 1, 0]]
    both = host(F.combine_masks(F.causal_mask(4), F.padding_mask([2, 4], 4), None))
    assert both.shape == (2, 1, 4, 4) and both[0, 0, 3, 2] == -math.inf and both[1, 0, 3, 2] == 0
    keep = backend.to_device(np.array([True, False]))
    assert host(F.as_additive_mask(keep)).tolist() == [0, -math.inf]
    # a boolean mask among them is made additive first (it added True = 1 to the scores)
    mixed = host(F.combine_masks(F.causal_mask(2), backend.to_device(np.ones((2, 2), bool))))
    assert mixed.tolist() == [[0, -math.inf], [0, 0]]
    assert host(F.causal_mask(np.int64(2))).shape == (2, 2)       # a length read off an array


@pytest.mark.parametrize("call, message", [
    (lambda: F.causal_mask(2.5), "causal_mask: n_q must be an integer ≥ 0, the number of queries"),
    (lambda: F.causal_mask(True), "causal_mask: n_q must be an integer ≥ 0"),
    (lambda: F.causal_mask(3, -1), "causal_mask: n_k must be an integer ≥ 0"),
    (lambda: F.causal_mask(3, dtype="bool"), "attention mask: dtype must be 'float32' or 'float64'"),
    (lambda: F.padding_mask([2, 3], 2.5), "padding_mask: n must be an integer ≥ 0"),
    (lambda: F.padding_mask(3, 4), "padding_mask: lengths has shape (); wanted (b,)"),
    (lambda: F.as_additive_mask([[True]]), "attention: mask must be a NumPy or CuPy array"),
])
def test_a_bad_mask_request_is_one_line(call, message):
    with pytest.raises((TypeError, ValueError), match="^" + re.escape(message)):
        call()


def test_split_and_merge_heads_are_inverse(float64):
    y = backend.randn(2, 5, 12)
    q, k, v = F.split_heads(y, 2, parts=3)
    assert q.shape == (2, 2, 5, 2)
    np.testing.assert_array_equal(host(q[:, 1, :, :]), host(y)[:, :, 2:4])   # head 1 of q
    np.testing.assert_array_equal(host(F.merge_heads(F.split_heads(y, 2, parts=3))), host(y))


def test_split_and_merge_heads_of_unequal_widths(float64):
    """q | k | v side by side, h = 2 heads each: q and k of width 3, v of width 4."""
    y = backend.randn(2, 5, 2 * (3 + 3 + 4))
    q, k, v = F.split_heads(y, 2, parts=(3, 3, 4))
    assert q.shape == k.shape == (2, 2, 5, 3) and v.shape == (2, 2, 5, 4)
    np.testing.assert_array_equal(host(v[:, 1]), host(y)[:, :, 12 + 4:12 + 8])   # head 1 of v
    assert all(backend.get_array_module(y).shares_memory(part, y) for part in (q, k, v))
    np.testing.assert_array_equal(host(F.merge_heads((q, k, v))), host(y))
    equal = F.split_heads(y[..., :18], 2, parts=(3, 3, 3))        # the same cut as parts=3
    for part, same in zip(equal, F.split_heads(y[..., :18], 2, parts=3)):
        np.testing.assert_array_equal(host(part), host(same))
    with pytest.raises(ValueError, match="wanted n_heads"):
        F.split_heads(y, 2, parts=(3, 3, 3))


def test_clipped_relative_positions(float64):
    """Queries at positions 3 and 4 (the last 2 of 5 keys); offsets j − i clipped to ±2, + 2."""
    assert host(F.clipped_relative_positions(2, 5, max_relative=2)).tolist() == \
        [[0, 0, 1, 2, 3], [0, 0, 0, 1, 2]]


def test_relative_attention_with_zero_tables_is_attention(float64):
    q, k, v = backend.randn(2, 3, 4), backend.randn(2, 5, 4), backend.randn(2, 5, 6)
    xp = backend.get_array_module(q)
    positions = F.clipped_relative_positions(3, 5, max_relative=1)
    out, _ = F.relative_attention(q, k, v, positions, xp.zeros((3, 4)), xp.zeros((3, 6)))
    np.testing.assert_allclose(host(out), host(F.attention(q, k, v)[0]), rtol=1e-12)
    # one shared key vector adds q_i · a to a whole row of scores: softmax ignores it
    out, _ = F.relative_attention(q, k, v, positions, backend.randn(1, 4).repeat(3, axis=0))
    np.testing.assert_allclose(host(out), host(F.attention(q, k, v)[0]), rtol=1e-12)


def test_sinusoidal_table_formula(float64):
    table = host(F.sinusoidal_table(7, 6))
    p, i = 5, 2
    assert table[p, 2 * i] == pytest.approx(math.sin(p / 10000 ** (2 * i / 6)))
    assert table[p, 2 * i + 1] == pytest.approx(math.cos(p / 10000 ** (2 * i / 6)))
    np.testing.assert_allclose(host(F.sinusoidal_table(3, 6, offset=4)), table[4:7])
    assert F.sinusoidal_table(4, 5).shape == (4, 5)                 # odd widths work too
    # and the layer adds that table, of base 10000 (its default is every such model's: 1000
    # there went unseen but by lesson 08)
    from minitf.nn import SinusoidalPositionalEncoding
    added = host(SinusoidalPositionalEncoding(6)(backend.to_device(np.zeros((2, 7, 6)))))
    np.testing.assert_allclose(added, np.broadcast_to(table, (2, 7, 6)), atol=1e-12)


def test_rope_scores_depend_only_on_relative_position(float64):
    """q_m · k_n after RoPE depends on m − n: shifting both positions changes nothing."""
    q, k = backend.randn(1, 8), backend.randn(1, 8)
    def score(m, n):
        cos_m, sin_m = F.rope_angles(1, 8, offset=m)
        cos_n, sin_n = F.rope_angles(1, 8, offset=n)
        return float((F.rope(q, cos_m, sin_m)[0] * F.rope(k, cos_n, sin_n)[0]).sum())
    assert score(7, 3) == pytest.approx(score(14, 10), rel=1e-12)
    assert score(7, 3) != pytest.approx(score(7, 4), rel=1e-6)
    x = backend.randn(3, 8)
    np.testing.assert_allclose(np.linalg.norm(host(F.rope(x, *F.rope_angles(3, 8))[0]), axis=-1),
                               np.linalg.norm(host(x), axis=-1))       # rotations keep length


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_rope_turns_each_pair_by_its_angle(backend_name, precision):
    """y_2i = x_2i cos θ − x_2i+1 sin θ, y_2i+1 = x_2i sin θ + x_2i+1 cos θ, pair by pair, for q
    as attention hands it over: one head's slice of the fused projection, a strided view."""
    with backend.precision(precision):
        b, n, h, d_head = 2, 5, 3, 8
        qkv = backend.randn(b, n, 3 * h * d_head)
        q = qkv[:, :, :h * d_head].reshape(b, n, h, d_head).transpose(0, 2, 1, 3)
        cos, sin = F.rope_angles(n, d_head, offset=4)
        before = host(q).copy()
        y, _ = F.rope(q, cos, sin)
        assert y.dtype == q.dtype and y.shape == q.shape
        np.testing.assert_array_equal(host(q), before)      # turned in a copy, never in place
        contiguous = backend.get_array_module().ascontiguousarray(q)
        np.testing.assert_array_equal(host(F.rope(contiguous, cos, sin)[0]), host(y))
        np.testing.assert_array_equal(host(contiguous), before)
        x, c, s = (host(a).astype("float64") for a in (q, cos, sin))
        want = np.empty_like(x)
        want[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
        want[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
        tolerance = 1e-6 if precision == "float32" else 1e-14
        np.testing.assert_allclose(host(y), want, rtol=0, atol=tolerance)
        np.testing.assert_allclose(host(F.rope_backward(y, (cos, sin))), x, rtol=0, atol=tolerance)


def test_alibi(float64):
    assert F.alibi_slopes(4) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]
    assert F.alibi_slopes(6) == [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]
    bias = host(F.alibi_bias(4, 3, 5))
    assert bias.shape == (4, 3, 5)
    assert bias[0, 2, 0] == -0.25 * 4      # query 2 sits at position 4; key 0 is 4 away
    # every entry, keys after the query too (an encoder has no causal mask to hide them): the
    # penalty grows with the distance either way, −m_h · |i − j|
    i = np.arange(3)[:, None] + 2                                   # queries at positions 2 … 4
    j = np.arange(5)[None, :]
    slopes = np.array(F.alibi_slopes(4))[:, None, None]
    np.testing.assert_array_equal(bias, -slopes * np.abs(i - j))


def test_relative_position_buckets_like_t5(float64):
    buckets = host(F.relative_position_buckets(1, 200, bidirectional=False, num_buckets=32,
                                               max_distance=128))[0]
    distance = 199 - np.arange(200)         # the query is the last position
    assert np.all(buckets[distance < 16] == distance[distance < 16])   # exact when close
    assert np.all(np.diff(buckets[::-1]) >= 0)                          # monotone in distance
    assert buckets[distance >= 128].tolist() == [31] * int((distance >= 128).sum())
    both = host(F.relative_position_buckets(3, bidirectional=True, num_buckets=8))
    assert both.tolist() == [[0, 5, 6], [1, 0, 5], [2, 1, 0]]          # the future: upper half


@pytest.mark.parametrize("block", [1, 3, 7, 64])
def test_causal_attention_is_attention_under_the_causal_mask(float64, block):
    """Blocks of 1 and 3 queries, one block of all 7, one block larger than n: the same output,
    weights and gradients as attention with causal_mask(n); only the prefixes' weights are kept."""
    q, k, v = backend.randn(2, 3, 7, 4), backend.randn(2, 3, 7, 4), backend.randn(2, 3, 7, 5)
    dout = backend.randn(2, 3, 7, 5)
    out, cache = F.attention(q, k, v, mask=F.causal_mask(7))
    blocked_out, blocked = F.causal_attention(q, k, v, block=block)
    assert isinstance(blocked, F.CausalAttentionCache) and len(blocked.blocks) == -(-7 // block)
    # atol: an entry near 0 is a sum that cancels, and its last bits follow the order of the
    # additions, which a GPU's matrix products change with the shape of a block
    np.testing.assert_allclose(host(blocked_out), host(out), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(host(blocked.probs), host(cache.probs), rtol=1e-12, atol=1e-300)
    for grad, blocked_grad in zip(F.attention_backward(dout, cache)[:3],
                                  F.attention_backward(dout, blocked)[:3]):
        np.testing.assert_allclose(host(blocked_grad), host(grad), rtol=1e-12, atol=1e-14)
    ends = [min(end, 7) for end in range(block, 7 + block, block)]   # each block's last key + 1
    kept = sum(c.probs.shape[-2] * c.probs.shape[-1] for _, _, c in blocked.blocks)
    assert kept == sum((end - start) * end for start, end in zip([0] + ends[:-1], ends))
    assert kept < 7 * 7 or block >= 7


def test_causal_attention_of_an_empty_sequence_is_empty_both_ways(backend_name):
    q, v = backend.randn(2, 3, 0, 4), backend.randn(2, 3, 0, 5)
    out, cache = F.causal_attention(q, q, v)
    dq, dk, dv, dbias = F.attention_backward(out, cache)
    assert out.shape == dv.shape == (2, 3, 0, 5) and dq.shape == dk.shape == (2, 3, 0, 4)
    assert dbias is None


def test_causal_attention_splits_its_queries_where_blocks_pay_off(backend_name):
    """By default: blocks of CAUSAL_BLOCK queries on NumPy, and one block of all n on a GPU,
    where each block launches every kernel again (array_ops.blocks_pay_off)."""
    b = F.CAUSAL_BLOCK
    q = backend.randn(1, 2, 2 * b + 1, 4)
    _, cache = F.causal_attention(q, q, q)
    wanted = ([(0, b), (b, 2 * b), (2 * b, 2 * b + 1)] if backend_name == "numpy" else
              [(0, 2 * b + 1)])
    assert array_ops.blocks_pay_off(q) == (backend_name == "numpy")
    assert [(start, end) for start, end, _ in cache.blocks] == wanted


@pytest.mark.parametrize("forward, backward", [(F.softmax, F.softmax_backward),
                                               (F.log_softmax, F.log_softmax_backward)])
def test_softmax_and_log_softmax_along_another_axis_have_their_gradient(float64, forward,
                                                                        backward):
    """The registry checks the last axis; the backward must use the axis its forward was given
    (a row sum along the last axis would broadcast silently and be wrong)."""
    from minitf.gradcheck import FunctionCase, check
    case = FunctionCase(forward, backward, {"x": backend.randn(4, 3)}, ("x",), {"axis": 0})
    assert all(row.passed for row in check(forward.__name__, case))


def test_a_row_with_every_key_masked_gives_log_softmax_minus_inf_and_no_gradient(float64):
    """An all −inf row (every position masked) has no distribution: log_softmax is −inf there,
    not NaN, and an ignored target in that row sends back a gradient of exactly 0."""
    xp = backend.get_array_module()
    logits = xp.asarray([[0.5, -1.0, 2.0], [-math.inf, -math.inf, -math.inf]])
    log_p = host(F.log_softmax(logits)[0])
    assert not np.isnan(log_p).any() and np.all(log_p[1] == -math.inf)
    loss, cache = F.cross_entropy(logits, xp.asarray([2, -100]))
    dlogits = host(F.cross_entropy_backward(1.0, cache))
    assert np.isfinite(float(loss)) and not np.isnan(dlogits).any()
    assert np.all(dlogits[1] == 0)


def _t5_bucket(key_minus_query, bidirectional, num_buckets=32, max_distance=128):
    """T5's bucket of one (query, key) pair, one pair at a time in plain Python, to check the
    vectorised version against: exact up to half the buckets, then logarithmic, rounded down."""
    bucket, n = 0, key_minus_query
    if bidirectional:
        num_buckets //= 2
        bucket, n = (num_buckets if n > 0 else 0), abs(n)
    else:
        n = max(-n, 0)
    exact = num_buckets // 2
    if n < exact:
        return bucket + n
    far = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return bucket + min(far, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_relative_position_buckets_are_t5_s_pair_by_pair(float64, bidirectional):
    buckets = host(F.relative_position_buckets(150, bidirectional=bidirectional))
    wanted = np.array([[_t5_bucket(j - i, bidirectional) for j in range(150)]
                       for i in range(150)])
    np.testing.assert_array_equal(buckets, wanted)
    if bidirectional:                       # the docstring's example: the last bucket from 91 on
        assert buckets[0, 91] == 31 and buckets[0, 90] == 30


def test_rope_angles_formula(float64):
    """θ[p, i] = p / 10000^(2i / d_head), the base of RoFormer (and of the sinusoidal table):
    cos θ and sin θ, each (n, d_head/2)."""
    cos, sin = (host(a) for a in F.rope_angles(7, 6))
    assert cos.shape == sin.shape == (7, 3)
    p, i = np.arange(7)[:, None], np.arange(3)[None, :]
    theta = p / 10000 ** (2 * i / 6)
    np.testing.assert_allclose(cos, np.cos(theta), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sin, np.sin(theta), rtol=0, atol=1e-15)
    assert sin[5, 2] == pytest.approx(math.sin(5 / 10000 ** (4 / 6)))
    cos4, sin4 = (host(a) for a in F.rope_angles(3, 6, offset=4))
    np.testing.assert_allclose(cos4, cos[4:7], rtol=0, atol=1e-15)
    np.testing.assert_allclose(sin4, sin[4:7], rtol=0, atol=1e-15)
