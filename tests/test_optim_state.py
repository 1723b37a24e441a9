"""An optimizer's saved state that is not of its parameters, or that its dtype cannot hold, is
refused in one line and loads nothing; the gradient norms skip a gradient that is None and
refuse one of another shape."""
import math

import numpy as np
import pytest

from minitf import backend, checkpoint
from minitf.models import DecoderLM
from minitf.nn import Linear
from minitf.optim import SGD, AdamW, clip_grad_norm, grad_norm
from minitf.train import Trainer
from test_bad_input import raises


def _lm():
    return DecoderLM(10, d_model=8, n_heads=2, n_layers=1, max_len=8)


def _state(optimizer):
    return {key: value.copy() for key, value in optimizer.state_dict()["arrays"].items()}


def _unchanged(optimizer, before):
    after = _state(optimizer)
    assert optimizer.t == 0 and after.keys() == before.keys()
    assert all(np.array_equal(after[key], before[key]) for key in before)


@pytest.mark.parametrize("extra", ["m.999", "velocity.0"])
def test_a_key_that_is_no_state_of_this_optimizer_is_refused(extra):
    """It was ignored: a state with m.999, or SGD's velocity.0, loaded into an AdamW."""
    optimizer = AdamW(Linear(3, 2))
    saved = optimizer.state_dict()
    saved["arrays"][extra] = np.zeros(3, np.float32)
    before = _state(optimizer)
    with raises(ValueError, f"AdamW.load_state_dict: saved['arrays'] holds {extra}, which is no "
                            f"state of this AdamW; wanted only m.i, v.i for i < 2"):
        optimizer.load_state_dict(saved)
    _unchanged(optimizer, before)


def test_a_state_of_another_number_of_parameters_is_refused():
    """A full model's state went into an optimizer of three of its parameters, silently."""
    lm = _lm()
    whole = AdamW(lm).state_dict()
    n = len(lm.parameters())
    for optimizer, saved, count in [(AdamW(lm.parameters()[:3]), whole, n),
                                    (AdamW(lm), AdamW(lm.parameters()[:3]).state_dict(), 3)]:
        before = _state(optimizer)
        with raises(ValueError, f"AdamW.load_state_dict: the saved state is of {count} "
                                f"parameter(s); this optimizer has {len(optimizer.params)}"):
            optimizer.load_state_dict(saved)
        _unchanged(optimizer, before)


def test_resume_refuses_a_checkpoint_of_more_parameters(tmp_path):
    lm = _lm()
    checkpoint.save(tmp_path / "run", lm, Trainer(lm, AdamW(lm), batches=None))
    trainer = Trainer(lm, AdamW(lm.parameters()[:3]), batches=None)       # a part will do
    with raises(checkpoint.CheckpointError, "the saved state is of", "this optimizer has 3"):
        checkpoint.resume(checkpoint.load(tmp_path / "run", lm), trainer)
    assert trainer.step == 0 and trainer.optimizer.t == 0


def test_a_state_beyond_the_state_s_dtype_is_refused():
    """1e300 is finite in float64 and became inf in the float32 state (as Module refuses)."""
    optimizer = SGD(Linear(3, 2), momentum=0.9)
    saved = optimizer.state_dict()
    saved["arrays"]["velocity.1"] = np.full(saved["arrays"]["velocity.1"].shape, 1e300)
    before = _state(optimizer)
    with raises(ValueError, "SGD.load_state_dict: state velocity.1 holds values beyond "
                            "float32's range"):
        optimizer.load_state_dict(saved)
    _unchanged(optimizer, before)


def test_arrays_that_are_no_dict_are_named():
    """It was "argument of type 'NoneType' is not iterable"."""
    optimizer = AdamW(Linear(3, 2))
    with raises(TypeError, "AdamW.load_state_dict: saved['arrays'] is a NoneType; wanted a dict "
                           "of the state's arrays by name (m.0, v.0, …)"):
        optimizer.load_state_dict(dict(optimizer.state_dict(), arrays=None))


def test_the_norms_skip_a_gradient_that_is_none_and_refuse_one_of_another_shape():
    """p.grad = None gave "unsupported operand type(s) for *: 'NoneType'"; a gradient of
    another shape gave a norm of whatever it held."""
    layer = Linear(3, 2)
    layer.W.grad = backend.to_device(np.full((3, 2), 2.0, np.float32))
    layer.b.grad = None                                                   # frozen, say
    assert math.isclose(grad_norm(layer), math.sqrt(6 * 4.0), rel_tol=1e-6)
    assert math.isclose(clip_grad_norm(layer, 1.0), math.sqrt(24.0), rel_tol=1e-6)
    assert layer.b.grad is None
    assert math.isclose(grad_norm(layer), 1.0, rel_tol=1e-4)             # the rest was clipped
    layer.W.grad = None
    assert grad_norm(layer) == 0.0 and clip_grad_norm(layer, 1.0) == 0.0
    with raises(ValueError, "AdamW.step: parameter 0 (3, 2) has no gradient"):
        AdamW(layer).step()                           # a step still refuses it: nothing to take
    layer.W.grad = backend.to_device(np.ones((1, 2), np.float32))          # would broadcast
    for norm, where in [(grad_norm, "grad_norm"), (lambda ps: clip_grad_norm(ps, 1.0),
                                                   "clip_grad_norm")]:
        with raises(ValueError, f"{where}: parameter 0 (3, 2) has a gradient of shape (1, 2); "
                                f"wanted its own shape"):
            norm(layer)


@pytest.mark.parametrize("over", [1.5, 1.01])
def test_a_norm_just_above_max_norm_is_clipped_to_it(over):
    """Clipping scales whenever the norm exceeds max_norm, by however little: a norm of 1.5 or
    1.01 times max_norm comes out at max_norm, and one below it is left exactly as it was."""
    with backend.precision("float64"):
        layer = Linear(2, 1, bias=False)
        layer.W.grad = backend.to_device(np.array([[0.6], [0.8]]) * over)      # norm = over
        assert clip_grad_norm(layer.parameters(), 1.0) == pytest.approx(over)
        assert grad_norm(layer.parameters()) == pytest.approx(1.0, rel=1e-5)   # ÷ (norm + 1e-6)
        before = backend.to_numpy(layer.W.grad).copy()
        assert clip_grad_norm(layer.parameters(), 2.0) == pytest.approx(1.0)
        np.testing.assert_array_equal(backend.to_numpy(layer.W.grad), before)


@pytest.mark.parametrize("bad, held", [(float("nan"), "NaN"), (float("inf"), "inf"),
                                       (-float("inf"), "inf")])
def test_a_step_on_a_gradient_that_is_not_finite_is_refused_and_moves_no_weight(backend_name,
                                                                                 bad, held):
    """A NaN gradient of a hand-written loop made every weight NaN without a word; an inf one
    with a clip before it likewise (the clip scaled it by 0). Now the clip leaves it, and the
    step refuses it before any weight moves."""
    model = Linear(3, 2)
    optimizer = AdamW(model, lr=1e-2)
    for p in model.parameters():
        p.grad = backend.randn(*p.shape)
    model.b.grad[1] = bad
    weights = [backend.to_numpy(p.data).copy() for p in model.parameters()]
    norm = clip_grad_norm(model, 1.0)
    assert math.isnan(norm) or math.isinf(norm)
    assert backend.to_numpy(model.W.grad).all() and np.isfinite(backend.to_numpy(model.W.grad)).all()
    with raises(ValueError, f"AdamW.step: parameter 1 (2,) has a gradient holding {held}; "
                            f"wanted finite numbers (no weight was updated)"):
        optimizer.step()
    assert all((backend.to_numpy(p.data) == w).all() for p, w in zip(model.parameters(), weights))
    assert optimizer.t == 0


def test_huge_finite_gradients_whose_sum_overflows_are_taken():
    """The check sums each gradient; a sum of large finite numbers that overflows is no NaN."""
    p = Linear(2, 2).W
    optimizer = SGD([p], lr=0.0)
    p.grad = backend.get_array_module(p.data).full(p.shape, 3e38, dtype=p.data.dtype)
    optimizer.step()
    assert optimizer.t == 1


@pytest.mark.parametrize("dtype", ["bool", "complex64", "int64"])
def test_a_gradient_that_is_not_floating_point_is_refused(dtype):
    """A complex gradient failed in NumPy's subtract ("Cannot cast ufunc 'subtract' output"),
    naming no parameter; a bool one was taken as 0s and 1s."""
    p = Linear(2, 2).W
    p.grad = backend.get_array_module(p.data).ones(p.shape, dtype=dtype)
    for call, where in ((SGD([p], lr=0.1).step, "SGD.step"), (lambda: grad_norm([p]), "grad_norm")):
        with raises(TypeError, f"{where}: parameter 0 (2, 2) has a gradient of dtype {dtype}; "
                               f"wanted floating-point numbers"):
            call()
