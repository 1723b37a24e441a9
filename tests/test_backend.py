"""The array-backend shim: choosing a backend, moving arrays, dtypes, seeded randomness."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minitf.nn as nn
from minitf import backend
from test_bad_input import raises


def test_use_and_precision_work_as_statements_and_as_context_managers():
    assert backend.backend_name() == "numpy"
    assert backend.float_dtype() == np.float32
    with backend.precision("float64"):
        assert backend.float_dtype() == np.float64
        assert backend.randn(2, 3).dtype == np.float64
    assert backend.float_dtype() == np.float32
    undo = backend.precision("float64")
    assert backend.float_dtype() == np.float64
    with undo:
        pass
    assert backend.float_dtype() == np.float32
    with backend.use("numpy"):
        assert backend.get_array_module() is np


def test_bad_names_are_refused():
    with pytest.raises(ValueError, match="^backend.use: backend must be one of"):
        backend.use("torch")
    with pytest.raises(ValueError, match="^to_device: backend must be one of .* got 'gpu'"):
        backend.to_device(np.zeros(2), "gpu")
    layer = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="^Linear.to: backend must be one of .* got 'NumPy'"):
        layer.to("NumPy")
    with pytest.raises(ValueError, match="'float32' or 'float64'"):
        backend.precision("float16")


@pytest.mark.skipif(backend.cupy_available(), reason="CuPy is available here")
def test_asking_for_cupy_without_it_is_one_clear_error():
    with pytest.raises(backend.BackendUnavailable, match="backend 'cupy' is not available"):
        backend.use("cupy")
    assert backend.backend_name() == "numpy"


@pytest.mark.parametrize("value, message", [
    ("tensorflow", "MINITF_BACKEND=tensorflow: backend 'tensorflow' does not exist; wanted one of"),
    ("numpy", None)])
def test_the_environment_variable_chooses_the_backend(value, message):
    """A bad value does not break ``import minitf``: the first array made raises it."""
    env = dict(os.environ, MINITF_BACKEND=value)
    code = "import minitf; print(minitf.backend.backend_name()); minitf.backend.randn(2)"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.stdout.strip() == value
    if message is None:
        assert result.returncode == 0
    else:
        assert result.returncode != 0 and "BackendUnavailable: " + message in result.stderr


def test_get_array_module_follows_the_arrays(backend_name):
    xp = backend.get_array_module()
    a = backend.randn(3)
    assert backend.get_array_module(a) is xp
    assert backend.get_array_module(None, 1.5, a) is xp
    assert backend.get_array_module(np.zeros(2)) is np
    assert backend.backend_of(a) == backend_name
    assert backend.on_numpy(a) == backend.on_numpy() == (backend_name == "numpy")
    assert backend.on_numpy(np.zeros(2)) and backend.on_numpy(None, np.zeros(2))


def test_moving_arrays_round_trips(backend_name):
    host = np.arange(6, dtype=np.float64).reshape(2, 3)
    device = backend.to_device(host, dtype="float32")
    assert backend.backend_of(device) == backend_name and device.dtype == np.float32
    back = backend.to_numpy(device)
    assert isinstance(back, np.ndarray) and np.array_equal(back, host)


@pytest.mark.parametrize("scipy", ["as installed", "absent"])
def test_erf_matches_the_standard_library(backend_name, scipy, monkeypatch):
    """With SciPy's erf, and with the fallback a machine without SciPy takes (a None in
    sys.modules makes the import fail), in float64 and float32."""
    import math
    if scipy == "absent":
        monkeypatch.setitem(sys.modules, "scipy.special", None)
    for dtype, tolerance in (("float64", 1e-14), ("float32", 1e-6)):
        with backend.precision(dtype):
            x = backend.randn(50)
        y = backend.erf(x)
        expected = [math.erf(v) for v in backend.to_numpy(x).astype("float64")]
        assert y.dtype == x.dtype
        np.testing.assert_allclose(backend.to_numpy(y), expected, rtol=tolerance, atol=tolerance)


def test_the_same_seed_gives_the_same_model():
    def weights():
        with backend.seed(7):
            return nn.EncoderBlock(8, 2, 16).state_dict()
    first, second = weights(), weights()
    assert all(np.array_equal(first[k], second[k]) for k in first)


def test_seed_as_a_context_manager_restores_the_stream():
    backend.seed(3)
    expected = backend.to_numpy(backend.randn(4))
    backend.seed(3)
    with backend.seed(99):
        backend.randn(10)
    np.testing.assert_array_equal(backend.to_numpy(backend.randn(4)), expected)


def test_rng_state_round_trips():
    state = backend.rng_state()
    first = backend.to_numpy(backend.rand(5))
    backend.set_rng_state(state)
    np.testing.assert_array_equal(backend.to_numpy(backend.rand(5)), first)


@pytest.mark.skipif(not backend.cupy_available(), reason="CuPy with a GPU is not available")
def test_a_model_built_from_one_seed_is_identical_on_numpy_and_cupy():
    with backend.seed(0), backend.use("numpy"):
        on_cpu = nn.DecoderBlock(8, 2, 16, positional="relative")
    with backend.seed(0), backend.use("cupy"):
        on_gpu = nn.DecoderBlock(8, 2, 16, positional="relative")
    cpu, gpu = on_cpu.state_dict(), on_gpu.state_dict()
    assert cpu.keys() == gpu.keys()
    assert all(np.array_equal(cpu[k], gpu[k]) for k in cpu)
    x, memory = backend.randn(2, 3, 8), backend.randn(2, 4, 8)
    y_cpu = on_cpu(backend.to_numpy(x), backend.to_numpy(memory))
    y_gpu = on_gpu(backend.to_device(x, "cupy"), backend.to_device(memory, "cupy"))
    np.testing.assert_allclose(backend.to_numpy(y_gpu), y_cpu, rtol=1e-4, atol=1e-5)


def test_modules_move_between_backends_and_dtypes(backend_name):
    layer = nn.Linear(3, 2).to(dtype="float64")
    assert layer.W.data.dtype == np.float64 and layer.W.grad.dtype == np.float64
    assert backend.backend_of(layer.W.data) == backend_name
    layer.to("numpy", dtype="float32")
    assert isinstance(layer.W.data, np.ndarray) and layer.W.data.dtype == np.float32


def test_seed_wants_an_integer_at_least_zero():
    for value in (-1, 1.5, "abc", True):            # NumPy's own SeedSequence error before
        with raises(ValueError, "seed: value must be an integer ≥ 0", repr(value)):
            backend.seed(value)


def test_draws_name_a_bad_shape_or_setting():
    """NumPy's own errors ('negative dimensions are not allowed', "'float' object cannot be
    interpreted as an integer") name neither the function nor the argument; randint(0, 2.5)
    drew from [0, 2) and randn(std=nan) gave NaN weights, silently."""
    for draw in (backend.randn, backend.rand):
        for shape in ((-1,), (2.5,), ("a",), (None,), (2, True)):
            with raises(ValueError, f"{draw.__name__}: the shape must be integers ≥ 0",
                        repr(shape)):
                draw(*shape)
    for std in (float("nan"), float("inf"), -1.0, "1", None):
        with raises(ValueError, "randn: std must be a finite number ≥ 0", repr(std)):
            backend.randn(2, std=std)
    for low, high in ((0, 2.5), (5, 0), (3, 3), (None, 4), (0.0, 4)):
        with raises(ValueError, "randint: low and high must be integers with low < high"):
            backend.randint(low, high, (3,))
    with raises(ValueError, "randint: shape must be a tuple", "[2, 3]"):
        backend.randint(0, 4, [2, 3])
    with raises(ValueError, "randint: the shape must be integers ≥ 0", "(2, -3)"):
        backend.randint(0, 4, (2, -3))
    for draw in (backend.randn, backend.rand):             # int32: every normal draw became 0
        for dtype in ("int32", "float16", bool):
            with raises(ValueError, f"{draw.__name__}: dtype must be 'float32' or 'float64'"):
                draw(2, dtype=dtype)
        assert draw(2, dtype="float64").dtype == np.float64
    assert backend.randint(0, 4, 3).shape == (3,)              # one size, as NumPy takes it
    assert backend.randn(np.int64(2), 3).shape == (2, 3)       # a size read off an array
    assert backend.randn(0, 3, std=0.0).shape == (0, 3)


def test_set_rng_state_names_what_it_wants():
    state = backend.rng_state()
    for bad in (None, 5, {"a": 1}):
        with raises(ValueError, "set_rng_state: state must be a generator state that "
                                "rng_state() returned", str(bad)[:10]):
            backend.set_rng_state(bad)
    backend.set_rng_state(state)                    # a good state still goes back
    first = backend.randn(3)
    backend.set_rng_state(state)
    assert np.array_equal(backend.to_numpy(backend.randn(3)), backend.to_numpy(first))


def test_to_device_wants_numbers_of_one_shape(backend_name):
    """None, 'abc' or a dict made arrays of objects or text that failed later, far away; ragged
    rows gave NumPy's 'inhomogeneous shape', which names no function."""
    for a in (None, "abc", {"a": 1}, object()):
        with raises(TypeError, "to_device: a must hold numbers"):
            backend.to_device(a)
    with raises(ValueError, "to_device: a must be numbers in rows of one length", "[[1, 2], [3]]"):
        backend.to_device([[1, 2], [3]])
    with raises(TypeError, "to_device: a cannot be an array of dtype 'float99'"):
        backend.to_device([1.5], dtype="float99")
    for a, dtype in (([1, 2], np.int64), ([True], np.bool_), (3.5, np.float64)):
        out = backend.to_device(a)
        assert backend.backend_of(out) == backend_name and out.dtype == dtype


def test_to_device_brings_a_device_array_to_the_host(monkeypatch):
    """to_device(a CuPy array, "numpy") returned the CuPy array itself (Module.to("numpy") kept
    its weights on the GPU). Without a GPU, a stand-in plays the device array: what the shim
    asks of one is _is_cupy and .get()."""
    class OnDevice:
        def __init__(self, host):
            self.host = host

        def get(self):
            return self.host.copy()
    monkeypatch.setattr(backend, "_is_cupy", lambda a: isinstance(a, OnDevice))
    moved = backend.to_device(OnDevice(np.arange(3.0)), "numpy", dtype="float32")
    assert isinstance(moved, np.ndarray) and moved.dtype == np.float32
    np.testing.assert_array_equal(moved, [0.0, 1.0, 2.0])
