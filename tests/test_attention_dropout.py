"""Attention dropout in MultiHeadAttention: on in training mode only, never when decoding with a
KV cache, and it drops about a fraction p of the weights, scaling the rest by 1/(1 − p)."""
import numpy as np
import pytest

import minitf.models as models
import minitf.nn as nn
from minitf import backend


@pytest.fixture(autouse=True)
def float64():
    with backend.precision("float64"):
        backend.seed(0)
        yield


def _pair(**options):
    """The same attention twice, with and without attention dropout."""
    backend.seed(1)
    plain = nn.MultiHeadAttention(8, 2, causal=True, **options)
    backend.seed(1)
    dropped = nn.MultiHeadAttention(8, 2, causal=True, attn_dropout=0.5, **options)
    return plain, dropped


@pytest.mark.parametrize("positional", [None, "rope", "alibi", "relative", "shaw"])
def test_training_drops_and_eval_does_not(positional):
    plain, dropped = _pair(positional=positional)
    x = backend.randn(2, 6, 8)
    assert not np.allclose(backend.to_numpy(dropped(x)), backend.to_numpy(plain(x)))
    dropped.eval()
    np.testing.assert_allclose(backend.to_numpy(dropped(x)), backend.to_numpy(plain(x)))


def test_a_cached_forward_never_drops():
    """Generation runs with a KVCache: even a module left in training mode decodes exactly."""
    plain, dropped = _pair()
    x = backend.randn(1, 5, 8)
    cache_plain, cache_dropped = nn.KVCache(), nn.KVCache()
    for t in range(5):
        step = x[:, t:t + 1]
        np.testing.assert_allclose(backend.to_numpy(dropped(step, cache=cache_dropped)),
                                   backend.to_numpy(plain(step, cache=cache_plain)))


def test_the_mask_drops_about_p_and_scales_the_rest():
    _, dropped = _pair()
    dropped(backend.randn(4, 32, 8))
    keep = backend.to_numpy(dropped._cache[0].dropout)            # (b, h, n, n): 0 or 1/(1 − p)
    assert set(np.unique(keep)) == {0.0, 2.0}
    assert abs((keep == 0).mean() - 0.5) < 0.02                  # 8,192 draws


def test_models_pass_attn_dropout_to_every_attention():
    model = models.Transformer(10, 10, d_model=8, n_heads=2, n_layers=2, attn_dropout=0.2)
    rates = [m.attn_dropout for m in model.modules() if isinstance(m, nn.MultiHeadAttention)]
    assert rates == [0.2] * 6                                    # 2 encoder + 2 × 2 decoder
    lm = models.DecoderLM(10, d_model=8, n_heads=2, n_layers=3, attn_dropout=0.1)
    assert [m.attn_dropout for m in lm.modules() if isinstance(m, nn.MultiHeadAttention)] == [0.1] * 3
