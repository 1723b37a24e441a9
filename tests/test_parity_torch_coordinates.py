"""Parity with PyTorch for regressing a function of coordinates: the MSE loss against
torch.nn.functional.mse_loss, and Fourier features (which torch lacks) against the formula written
out in torch with autograd. Same tolerances as test_parity_torch."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import minitf.functional as F  # noqa: E402
from minitf import backend  # noqa: E402
from test_parity_torch import assert_close, dtype, torch_tensor  # noqa: E402,F401


def test_mse_loss_and_both_gradients(dtype):
    pred, target = backend.randn(3, 4, 5), backend.randn(3, 4, 5)
    loss, cache = F.mse_loss(pred, target)
    p, t = torch_tensor(pred, requires_grad=True), torch_tensor(target, requires_grad=True)
    loss_torch = torch.nn.functional.mse_loss(p, t)
    assert str(loss.dtype) == dtype
    assert_close(loss, loss_torch, dtype, "loss")
    loss_torch.backward(torch.tensor(0.7, dtype=p.dtype))
    dpred, dtarget = F.mse_loss_backward(0.7, cache)
    assert_close(dpred, p.grad, dtype, "gradient of pred")
    assert_close(dtarget, t.grad, dtype, "gradient of target")


def test_fourier_features_match_the_formula_in_torch(dtype):
    coords, n_octaves = backend.rand(4, 6, 2), 5
    y, cache = F.fourier_features(coords, n_octaves)
    x = torch_tensor(coords, requires_grad=True)
    freq = math.pi * 2.0 ** torch.arange(n_octaves, dtype=x.dtype)
    theta = (x[..., :, None] * freq).flatten(-2)                   # (4, 6, 2·K), x then y
    y_torch = torch.cat([theta.sin(), theta.cos()], dim=-1)
    assert_close(y, y_torch, dtype, "features")
    g = backend.randn(*y.shape)
    y_torch.backward(torch_tensor(g))
    assert_close(F.fourier_features_backward(g, cache), x.grad, dtype, "gradient of coords")


def test_mse_loss_and_fourier_features_by_hand(float64):
    loss, _ = F.mse_loss(backend.to_device([[1.0, 2.0], [3.0, 4.0]], dtype="float64"),
                         backend.to_device([[1.0, 0.0], [3.0, 7.0]], dtype="float64"))
    assert float(loss) == pytest.approx((0 + 4 + 0 + 9) / 4)
    coords = backend.to_device([[0.25, 0.5]], dtype="float64")
    y, _ = F.fourier_features(coords, 2)                      # θ = π/4, π/2 | π/2, π
    s = math.sqrt(0.5)
    np.testing.assert_allclose(backend.to_numpy(y)[0], [s, 1, 1, 0, s, 0, 0, -1], atol=1e-12)
