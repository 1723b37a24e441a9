"""Weight initialisation: Xavier/Glorot uniform has the variance and bounds of its formula, only
Linear weight matrices are re-drawn, the choice is saved in the model config, bad names fail."""
import math

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


def test_xavier_uniform_has_the_variance_and_bounds_of_glorot():
    fan_in, fan_out = 300, 500
    w = backend.to_numpy(nn.xavier_uniform(fan_in, fan_out))
    bound = math.sqrt(6 / (fan_in + fan_out))
    assert w.shape == (fan_in, fan_out)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound   # fills U(−a, a)
    variance = 2 / (fan_in + fan_out)
    assert abs(w.var() / variance - 1) < 0.02                 # 150,000 draws: ±0.4 % std error
    assert abs(w.mean()) < 0.01 * math.sqrt(variance)


def _linears(model):
    return [m for m in model.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize("build", [
    lambda init: models.Transformer(50, 60, d_model=32, n_heads=4, n_layers=2, init=init),
    lambda init: models.DecoderLM(50, d_model=32, n_heads=4, n_layers=2, tie_weights=False,
                                  init=init),
    lambda init: models.EncoderClassifier(50, 3, d_model=32, init=init),
    lambda init: models.VisionTransformer(8, 4, 3, d_model=32, init=init),
], ids=["Transformer", "DecoderLM", "EncoderClassifier", "VisionTransformer"])
def test_models_xavier_redraws_every_linear_weight_and_nothing_else(build):
    model = build("xavier")
    linears = _linears(model)
    assert linears
    for layer in linears:
        w = backend.to_numpy(layer.W.data)
        start = 0
        for width in layer.parts or (layer.d_out,):       # a fused W_qkv: each map on its own
            part = w[:, start:start + width]
            start += width
            bound = math.sqrt(6 / (layer.d_in + width))
            assert np.abs(part).max() <= bound, "a weight outside ±√(6/(fan_in + fan_out))"
            assert np.abs(part).max() > 0.9 * bound, "a Linear weight not drawn by Xavier"
        assert start == layer.d_out
    untouched = {name: backend.to_numpy(p.data) for name, p in model.named_parameters()
                 if not name.endswith(".W") or "norm" in name}
    for name, value in untouched.items():
        if name.endswith((".b", ".beta")):
            assert not value.any(), f"{name}: a bias changed"
        if name.endswith(".gamma"):
            assert (value == 1).all(), f"{name}: LayerNorm's γ changed"
    assert model.config["init"] == "xavier"
    rebuilt = type(model)(**model.config)                        # what a checkpoint does
    assert rebuilt.config == model.config


def test_a_fused_projection_is_drawn_as_the_maps_it_holds():
    """W_qkv (d, 3d) holds W_q, W_k, W_v: each gets the variance of a (d, d) layer, 1/d, not
    that of one (d, 3d) layer, 1/(2d) -- as if the three had been built apart."""
    attention = nn.initialize(nn.MultiHeadAttention(96, 4), "xavier")
    w = backend.to_numpy(attention.W_qkv.W.data)                 # (96, 288)
    for i in range(3):
        part = w[:, 96 * i:96 * (i + 1)]
        assert abs(part.var() * 96 - 1) < 0.05, f"part {i}: variance {part.var():.4g}"


def test_normal_is_the_default_and_draws_what_it_always_drew():
    backend.seed(3)
    default = models.DecoderLM(30, d_model=16, n_heads=2, n_layers=1)
    backend.seed(3)
    normal = models.DecoderLM(30, d_model=16, n_heads=2, n_layers=1, init="normal")
    assert default.config["init"] == "normal"
    for (name, a), (_, b) in zip(default.named_parameters(), normal.named_parameters()):
        assert np.array_equal(backend.to_numpy(a.data), backend.to_numpy(b.data)), name
    # and what that is: a Linear's W of std 1/√d_in, so x W keeps unit-variance inputs at unit
    # variance (the two models above are one code path; this is the number itself)
    backend.seed(3)
    W = backend.to_numpy(nn.Linear(400, 300).W.data)
    assert abs(W.std() * np.sqrt(400) - 1) < 0.01 and abs(W.mean()) < 0.002   # 5 standard errors


def test_a_config_saved_before_init_existed_still_builds():
    config = models.DecoderLM(30, d_model=16, n_heads=2, n_layers=1).config
    del config["init"], config["attn_dropout"]
    model = models.build("lm", config)
    assert model.config["init"] == "normal" and model.config["attn_dropout"] == 0.0


def test_initialize_keeps_the_parameter_objects():
    layer = nn.Linear(6, 10)
    parameter = layer.W
    nn.initialize(layer, "xavier")
    assert layer.W is parameter
    assert np.abs(backend.to_numpy(parameter.data)).max() <= math.sqrt(6 / 16)
