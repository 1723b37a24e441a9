"""The set encoder: without positions, permuting the elements changes nothing (with either
pooling); with learned positions it does; and it learns to tell point-cloud shapes apart."""
import numpy as np
import pytest

from minitf import backend, data
from minitf.models import SetEncoder
from minitf.optim import AdamW


def _largest_change_under_a_permutation(model):
    points = backend.randn(3, 7, 2)
    order = np.array([3, 6, 0, 5, 1, 2, 4])                # no element keeps its place
    shuffled = points[:, backend.to_device(order)]
    return np.abs(backend.to_numpy(model(points) - model(shuffled))).max()


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_without_positions_a_set_encoder_is_permutation_invariant(float64, pooling):
    model = SetEncoder(2, 3, d_model=8, n_heads=2, n_layers=2, pooling=pooling)
    assert _largest_change_under_a_permutation(model) < 1e-12


def test_learned_positions_make_the_order_matter(float64):
    model = SetEncoder(2, 3, d_model=8, n_heads=2, n_layers=2, max_len=7)
    for p in model.pos_emb.parameters():
        p.data = backend.randn(*p.shape)                # positions as large as the inputs
    assert _largest_change_under_a_permutation(model) > 1e-3


def test_point_sets_are_three_shapes():
    with backend.seed(0):
        points, labels = data.point_sets(300, n_points=10)
    assert points.shape == (300, 10, 2) and set(labels.tolist()) == {0, 1, 2}
    radius = np.linalg.norm(points, axis=-1)
    assert np.abs(radius[labels == 0] - 1).max() < 0.3            # circles
    assert radius[labels == 1].max() < 1.1                         # lines through the centre


def test_the_set_encoder_tells_circles_lines_and_blobs_apart():
    backend.seed(0)
    points, labels = data.point_sets(1200)
    model = SetEncoder(2, 3, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    optimizer = AdamW(model, 1e-2)
    for _ in range(100):
        rows = backend.to_numpy(backend.randint(0, 1000, (32,)))
        model.zero_grad()
        _, backward = model.loss(backend.to_device(points[rows]), backend.to_device(labels[rows]))
        backward()
        optimizer.step()
    predicted = backend.to_numpy(model(backend.to_device(points[1000:])).argmax(axis=-1))
    assert (predicted == labels[1000:]).mean() > 0.9


def test_bad_settings_and_inputs_are_named():
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean'; got 'max'"):
        SetEncoder(2, 3, pooling="max")
    with pytest.raises(ValueError, match=r"points has shape \(2, 5, 3\); wanted \(b, n, d_in=2\)"):
        SetEncoder(2, 3, d_model=8, n_heads=2)(backend.randn(2, 5, 3))
    with pytest.raises(ValueError, match="points has 5 elements; wanted at most max_len=4"):
        SetEncoder(2, 3, d_model=8, n_heads=2, max_len=4)(backend.randn(2, 5, 2))
