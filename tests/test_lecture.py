"""The lecture's facts about attention, checked on minitf's own layers."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import minitf.functional as F
import minitf.nn as nn
from minitf import backend

PROPERTY = settings(max_examples=30, deadline=None)


def test_thinking_machines_example(float64):
    """Query "Thinking" against keys "Thinking" and "Machines": scores 112 and 96; with d_k = 64
    the scaled scores are 14 and 12, and the softmax gives 0.88 and 0.12."""
    xp = backend.get_array_module()
    q = xp.full((1, 64), 1.0)
    k = xp.stack([xp.full(64, 112 / 64), xp.full(64, 96 / 64)])     # q·k = 112 and 96
    v = xp.eye(2)                                                     # out = the weights
    assert backend.to_numpy(q @ k.T).tolist() == [[112.0, 96.0]]
    out, cache = F.attention(q, k, v)
    assert cache.scale == 1 / 8                                       # 1/√64
    assert backend.to_numpy(q @ k.T * cache.scale).tolist() == [[14.0, 12.0]]
    np.testing.assert_allclose(backend.to_numpy(cache.probs), [[0.8808, 0.1192]], atol=1e-4)
    np.testing.assert_allclose(backend.to_numpy(out), backend.to_numpy(cache.probs))


def test_dividing_by_sqrt_d_keeps_the_scores_at_unit_variance():
    """Why √d_k: q·k of unit-variance vectors has variance d_k; scaled by the factor minitf's
    attention applies, variance 1."""
    with backend.seed(0), backend.precision("float64"):
        d = 256
        q, k = backend.randn(4000, 1, d), backend.randn(4000, 1, d)   # 4000 pairs, one key each
        _, cache = F.attention(q, k, k)
    raw = backend.to_numpy((q * k).sum(axis=-1))
    assert raw.var() == pytest.approx(d, rel=0.1)
    assert (raw * cache.scale).var() == pytest.approx(1.0, rel=0.1)


@PROPERTY
@given(permutation=st.permutations(range(6)))
def test_attention_without_positions_is_permutation_equivariant(permutation):
    """Shuffle the tokens and the outputs of self-attention are shuffled the same way."""
    with backend.seed(1), backend.precision("float64"):
        block = nn.EncoderBlock(8, 2, 16)
        x = backend.randn(2, 6, 8)
    order = np.array(permutation)
    np.testing.assert_allclose(backend.to_numpy(block(x[:, order])),
                               backend.to_numpy(block(x))[:, order], rtol=1e-12, atol=1e-12)


def test_positional_information_breaks_the_equivariance():
    with backend.seed(1), backend.precision("float64"):
        attention = nn.MultiHeadAttention(8, 2, positional="rope")
        x = backend.randn(1, 6, 8)
    order = np.array([1, 0, 2, 3, 4, 5])
    shuffled_first = backend.to_numpy(attention(x[:, order]))
    assert not np.allclose(shuffled_first, backend.to_numpy(attention(x))[:, order])


@PROPERTY
@given(arrays(np.float64, (5, 4), elements=st.floats(-2, 2)))
def test_self_similarity_bounds_every_score(X):
    """For S = X Xᵀ, Cauchy-Schwarz gives s_ij ≤ |x_i||x_j| ≤ max(s_ii, s_jj): of tokens i and j,
    at least one weighs the other no more than itself. Read off minitf's unscaled self-attention,
    whose weights in a row are in the ratios p_ij / p_ii = exp(s_ij − s_ii)."""
    _, cache = F.attention(X, X, X, scale=1.0)              # scores S = X Xᵀ
    p = cache.probs                                         # (5, 5), no weight below e^-32
    other_over_self = p / np.diag(p)[:, None]               # exp(s_ij − s_ii)
    assert np.all(np.minimum(other_over_self, other_over_self.T) <= 1 + 1e-9)


@PROPERTY
@given(arrays(np.float64, (5, 4), elements=st.floats(-10, 10)).filter(
    lambda X: np.all(np.linalg.norm(X, axis=1) > 1e-3)))
def test_with_equal_norms_every_token_attends_most_to_itself(X):
    """Unweighted self-attention (q = k = v = X) with rows of equal norm: the diagonal weight is the
    largest in every row -- why learned W_q, W_k, W_v are needed for anything else."""
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    _, cache = F.attention(X, X, X)
    probs = cache.probs
    assert np.all(np.diag(probs)[:, None] >= probs - 1e-12)


@pytest.mark.parametrize("build", [
    lambda: nn.MultiHeadAttention(8, 2, causal=True),
    lambda: nn.MultiHeadAttention(8, 2, causal=True, positional="alibi"),
    lambda: nn.EncoderBlock(8, 2, 16, causal=True, pre_ln=True, positional="rope"),
], ids=["attention", "attention-alibi", "block-rope"])
def test_with_a_causal_mask_no_gradient_reaches_the_future(build, float64):
    layer = build()
    x = backend.randn(2, 6, 8)
    y = layer(x)
    for t in range(6):
        if t:
            layer(x)
        dy = y * 0
        dy[:, t] = backend.randn(2, 8)                  # a loss on position t alone
        dx = backend.to_numpy(layer.backward(dy))
        assert np.all(dx[:, t + 1:] == 0), f"position {t} leaked gradient into the future"
        assert np.any(dx[:, : t + 1] != 0)


@pytest.mark.parametrize("d, d_ff", [(8, 16), (64, 256), (512, 2048)])
def test_parameters_of_a_block(d, d_ff):
    """4d² (W_q, W_k, W_v, W_o) + 2·d·d_ff (the FFN), plus biases (4d + d_ff + d) and two
    LayerNorms (2 · 2d)."""
    weights = 4 * d * d + 2 * d * d_ff
    biases = 4 * d + d_ff + d
    norms = 2 * 2 * d
    assert nn.EncoderBlock(d, 8, d_ff).num_parameters() == weights + biases + norms
    # a decoder block adds cross-attention: another 4d² + 4d, and a third LayerNorm
    assert nn.DecoderBlock(d, 8, d_ff).num_parameters() == weights + biases + norms + 4 * d * d \
        + 4 * d + 2 * d
