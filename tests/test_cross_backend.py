"""One model, two devices: every model family built from one seed has the very same weights on
NumPy and on CuPy, computes the same forward and backward (to 1e-10 in float64, 1e-4 in
float32), and a checkpoint saved on either backend loads on the other.

The comparison (``_compare``) runs against CuPy where a GPU is present. Everywhere, it is shown to
find a difference where there is one, and to find none between two builds on NumPy (the same
seed, the same bits): so a GPU run tests the models, not the comparison.
"""
import copy

import numpy as np
import pytest

import minitf.models as models
from minitf import backend, checkpoint, gradcheck_cases
from minitf.gradcheck import ModuleCase, relative_error, run_backward

TOLERANCE = {"float64": 1e-10, "float32": 1e-4}
CUPY = pytest.param("cupy", marks=pytest.mark.skipif(
    not backend.cupy_available(), reason="CuPy with a GPU is not available"))


def _model_cases() -> list[str]:
    """The gradient-check cases whose module is a whole model (one per family and variant)."""
    families = tuple(models.MODELS.values())
    return [name for name in gradcheck_cases.CASES
            if isinstance(case := gradcheck_cases.build(name), ModuleCase)
            and isinstance(case.module, families)]


MODEL_CASES = _model_cases()


def _run(name: str, backend_name: str, dtype: str) -> dict:
    """Build case ``name`` on ``backend_name`` (seed 0), then run its forward and its backward
    with the registry's upstream gradient -> host copies of the weights, output and gradients."""
    with backend.use(backend_name):
        case = gradcheck_cases.build(name)
        if dtype == "float32":
            case.module.to(dtype="float32")
            case.inputs = {key: x.astype("float32") if x.dtype.kind == "f" else x
                           for key, x in case.inputs.items()}
        weights = case.module.state_dict()                    # host copies, taken before training
        with backend.precision(dtype), backend.seed(1):
            y = case.module(*case.inputs.values(), **case.options)
        with backend.precision(dtype):
            done = run_backward(case)
        grads = {tensor: backend.to_numpy(dx) for tensor, (_, dx) in done.tensors.items()
                 if dx is not None}
        return {"weights": weights, "y": backend.to_numpy(y), "grads": grads}


def _compare(ours: dict, theirs: dict, dtype: str) -> None:
    """AssertionError unless two runs of ``_run`` agree: equal weights, and the forward and every
    gradient within the dtype's tolerance."""
    assert ours["weights"].keys() == theirs["weights"].keys()
    for key, W in ours["weights"].items():
        assert np.array_equal(W, theirs["weights"][key]), f"{key}: the same seed, other weights"
    tolerance = TOLERANCE[dtype]
    assert relative_error(ours["y"], theirs["y"]) <= tolerance, "the forward differs"
    assert ours["grads"].keys() == theirs["grads"].keys()
    for tensor, dx in ours["grads"].items():
        assert relative_error(dx, theirs["grads"][tensor]) <= tolerance, f"{tensor} differs"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", MODEL_CASES)
@pytest.mark.parametrize("other", [CUPY])
def test_a_model_family_is_the_same_on_both_backends(other, name, dtype):
    _compare(_run(name, "numpy", dtype), _run(name, other, dtype), dtype)


def _changed(run: dict, part: str, dtype: str) -> dict:
    """A copy of ``run`` with its first weight, its output or its first gradient scaled by
    1 + 10 × the tolerance: a difference the comparison must find."""
    run = copy.deepcopy(run)
    table = {"weights": run["weights"], "grads": run["grads"], "y": run}[part]
    key = "y" if part == "y" else next(iter(table))
    table[key] = table[key] * (1 + 10 * TOLERANCE[dtype])
    return run


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_comparison_finds_a_difference_and_none_between_two_numpy_builds(dtype):
    name = next(n for n in MODEL_CASES if isinstance(gradcheck_cases.build(n).module,
                                                     models.DecoderLM))
    ours, again = _run(name, "numpy", dtype), _run(name, "numpy", dtype)
    _compare(ours, again, dtype)                       # the same seed: the same bits
    for part in ("weights", "y", "grads"):
        with pytest.raises(AssertionError):
            _compare(ours, _changed(ours, part, dtype), dtype)


def test_every_model_family_is_compared():
    compared = {type(gradcheck_cases.build(name).module) for name in MODEL_CASES}
    assert compared == set(models.MODELS.values())


@pytest.mark.parametrize("other", ["numpy", CUPY])
def test_a_checkpoint_saved_on_one_backend_loads_on_the_other(other, tmp_path):
    """DecoderLM saved where it was built, loaded on the other backend: the same weights, and
    the same logits for the same ids."""
    for saved_on, loaded_on in (("numpy", other), (other, "numpy")):
        with backend.use(saved_on), backend.seed(0):
            model = models.DecoderLM(11, 8, 2, 2, max_len=16)
            ids = backend.randint(0, 11, (2, 5))
            logits = backend.to_numpy(model(ids))
            checkpoint.save(tmp_path / saved_on, model)
        with backend.use(loaded_on):
            loaded = checkpoint.load(tmp_path / saved_on).model
            assert all(backend.backend_of(p.data) == loaded_on for p in loaded.parameters())
            again = backend.to_numpy(loaded(backend.to_device(backend.to_numpy(ids))))
        state, state_again = model.state_dict(), loaded.state_dict()
        assert all(np.array_equal(state[key], state_again[key]) for key in state)
        assert relative_error(logits, again) <= 1e-6
