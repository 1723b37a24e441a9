"""The array-backend shim: the only file in minitf that imports NumPy or CuPy for array math.

Every layer in minitf is written once, against "an array module" ``xp`` that has NumPy's API.
This file decides which module that is:

    xp = get_array_module(x)     # cupy if x lives on the GPU, numpy otherwise
    xp = get_array_module()      # the active backend, for arrays made from nothing (masks, tables)

The active backend is NumPy unless ``use("cupy")`` is called or the environment variable
``MINITF_BACKEND=cupy`` is set. Both ``use`` and ``precision`` change a setting at once; written in a
``with`` statement they also put it back at the end of the block:

    with use("cupy"), precision("float64"):
        ...                      # GPU, float64 (gradient checks)

Random numbers are drawn on the host by one NumPy generator (``seed``), then moved to the device,
so that a model built after ``seed(0)`` has the very same weights on NumPy and on CuPy.

The sums, maxima and blocks that layers share, each in the spelling its library runs fastest,
are in ``minitf.array_ops``; they reach NumPy or CuPy through ``get_array_module`` like any layer.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os

import numpy

BACKENDS = ("numpy", "cupy")

_active = {"name": "numpy", "xp": numpy, "dtype": numpy.dtype("float32")}
_rng = {"generator": numpy.random.default_rng(0)}
_cupy = None  # the cupy module, once it has been loaded


class BackendUnavailable(RuntimeError):
    """Asked for CuPy where it is not installed or no GPU is present."""


class _Undo:
    """Returned by the setters below: the change is already made; a ``with`` block undoes it."""

    def __init__(self, undo):
        self._undo = undo

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._undo()
        return False


def _set(store: dict, **values) -> _Undo:
    """Change entries of a settings dict now; the returned _Undo puts the old ones back."""
    previous = {key: store[key] for key in values}
    store.update(values)
    return _Undo(lambda: store.update(previous))


@contextlib.contextmanager
def settings_restored():
    """A block after which the backend, float dtype, random generator and NumPy's float warnings
    are as before it. A stop raised by a signal (time_limit's alarm) between a setting and its
    ``with`` left it made (15–17 of 200 stops in a loop over ``precision``, ``seed`` or
    ``float_errors_ignored``): later exercises ran in float64, on other draws, or unwarned."""
    active, rng, float_errors = dict(_active), dict(_rng), numpy.geterr()
    try:
        yield
    finally:
        _active.update(active)
        _rng.update(rng)
        if numpy.geterr() != float_errors:      # set only if changed: no new state in the usual case
            numpy.seterr(**float_errors)


# ----------------------------------------------------------------------------------------------
# Which array module is active
# ----------------------------------------------------------------------------------------------

def _load_cupy():
    """Import CuPy and check that a GPU is there; one clear error otherwise."""
    global _cupy
    if _cupy is not None:
        return _cupy
    try:
        import cupy
    except ImportError as err:
        raise BackendUnavailable(
            "backend 'cupy' is not available: CuPy is not installed "
            "(install it with: pip install 'minitf[gpu]'), or use backend 'numpy'") from err
    try:
        n_gpus = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CuPy raises its own CUDA error types when no driver is present
        raise BackendUnavailable(
            f"backend 'cupy' is not available: CuPy is installed but no CUDA GPU could be "
            f"reached ({err}); use backend 'numpy'") from err
    if n_gpus == 0:
        raise BackendUnavailable("backend 'cupy' is not available: no CUDA GPU is present; "
                                 "use backend 'numpy'")
    _cupy = cupy
    return cupy


def check_backend_name(name, where: str) -> None:
    """ValueError unless ``name`` is one of BACKENDS, in ``where``'s words."""
    if name not in BACKENDS:
        raise ValueError(f"{where}: backend must be one of {BACKENDS}; got {name!r}")


def _module_for(name: str, where: str):
    check_backend_name(name, where)
    return numpy if name == "numpy" else _load_cupy()


def use(name: str) -> _Undo:
    """Make ``name`` ("numpy" or "cupy") the active backend. In a ``with`` block, only for the block."""
    return _set(_active, name=name, xp=_module_for(name, "backend.use"))


def backend_name() -> str:
    """The active backend's name: "numpy" or "cupy"."""
    return _active["name"]


def cupy_available() -> bool:
    """True when CuPy is installed and a GPU is present (what the CuPy tests are skipped on)."""
    try:
        _load_cupy()
    except BackendUnavailable:
        return False
    return True


def _is_cupy(a) -> bool:
    # Checked by the type's module name so that NumPy-only machines never import CuPy.
    return type(a).__module__.split(".")[0] == "cupy"


def get_array_module(*arrays):
    """The array module (numpy or cupy) that the given arrays live in; the active one if none.

    Arguments that are not arrays (None, Python numbers) are ignored, so optional arguments such
    as a missing mask can be passed straight through.
    """
    found = None
    for a in arrays:
        if isinstance(a, numpy.ndarray):
            found = numpy
        elif _is_cupy(a):
            return _load_cupy()
    return found if found is not None else _active["xp"]


def backend_of(a) -> str:
    """The name of the backend an array lives on: "cupy" for a CuPy array, "numpy" otherwise."""
    return "cupy" if _is_cupy(a) else "numpy"


def on_numpy(*arrays) -> bool:
    """True when ``arrays`` live in NumPy (when none is an array: when the active backend is
    NumPy). A fast path written for NumPy asks this before it runs."""
    return get_array_module(*arrays) is numpy


def is_array(a) -> bool:
    """True for a NumPy or a CuPy array."""
    return isinstance(a, numpy.ndarray) or _is_cupy(a)


# ----------------------------------------------------------------------------------------------
# Moving arrays between host and device
# ----------------------------------------------------------------------------------------------

def to_numpy(a):
    """A host (NumPy) copy of ``a``, for plotting, printing and saving."""
    if _is_cupy(a):
        return a.get()
    return numpy.asarray(a)


def to_device(a, backend: str | None = None, dtype=None):
    """``a`` as an array of ``backend`` (the active one by default), cast to ``dtype`` if given."""
    xp = _module_for(backend, "to_device") if backend is not None else _active["xp"]
    if not _is_cupy(a):
        try:                               # cast on the host: float32 moves half the bytes
            a = numpy.asarray(a, dtype=dtype)
        except ValueError:                 # NumPy's "inhomogeneous shape" names no function
            raise ValueError(f"to_device: a must be numbers in rows of one length; got "
                             f"{str(a)[:40]}") from None
        except TypeError as err:           # a dtype NumPy does not know, or a = object()
            raise TypeError(f"to_device: a cannot be an array of dtype {dtype!r} ({err})") from None
        if a.dtype.kind not in "biufc":    # None or 'abc' made an array of objects or text
            raise TypeError(f"to_device: a must hold numbers; got {a.dtype} "
                            f"({str(a.ravel()[:3])[:40]})")
    out = to_numpy(a) if xp is numpy else xp.asarray(a)    # a CuPy array comes to the host
    return out if dtype is None else out.astype(dtype, copy=False)


# ----------------------------------------------------------------------------------------------
# Default float dtype
# ----------------------------------------------------------------------------------------------

def float_dtype():
    """The dtype new parameters and tables are made in: float32, or float64 under ``precision``."""
    return _active["dtype"]


def precision(dtype) -> _Undo:
    """Set the default float dtype ("float32" or "float64"). In a ``with`` block, only for the block.

    Gradient checks run under ``precision("float64")``: central differences need the extra digits.
    """
    return _set(_active, dtype=float_dtype_named(dtype, "precision"))


_FLOAT_DTYPES = (numpy.dtype("float32"), numpy.dtype("float64"))   # the two minitf computes in


def float_dtype_named(dtype, where: str):
    """``dtype`` ("float32", numpy.float64, ...) as a NumPy dtype, if it is one of the two minitf
    computes in; else one line saying so, in ``where``'s name."""
    try:
        wanted = numpy.dtype(dtype) if dtype is not None else None   # numpy.dtype(None): float64
    except TypeError:
        wanted = None
    if wanted is None or wanted not in _FLOAT_DTYPES:
        raise ValueError(f"{where}: dtype must be 'float32' or 'float64'; got {dtype!r}")
    return wanted


# ----------------------------------------------------------------------------------------------
# Host-side random numbers (the same draws on every backend)
# ----------------------------------------------------------------------------------------------

def is_int(value) -> bool:
    """An integer, a NumPy one too; not a bool (True is no size, no id). Here, in the module
    every other imports, so that the shim's own checks and minitf.validate share one test."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def seed(value: int) -> _Undo:
    """Restart minitf's random numbers from ``value``. In a ``with`` block, only for the block.

    Weights, dropout masks and test inputs all come from this one host generator, so the same seed
    gives the same numbers on NumPy and on CuPy.
    """
    if not is_int(value) or value < 0:
        raise ValueError(f"seed: value must be an integer ≥ 0; got {value!r}")
    return _set(_rng, generator=numpy.random.default_rng(value))


def rng_state() -> dict:
    """The generator's state, a JSON-friendly dict (for checkpoints that resume exactly)."""
    return _rng["generator"].bit_generator.state


def set_rng_state(state: dict) -> None:
    """Put the generator back in a state taken by ``rng_state``."""
    try:
        _rng["generator"].bit_generator.state = state
    except (TypeError, ValueError, KeyError):       # NumPy's words name no function
        raise ValueError(f"set_rng_state: state must be a generator state that rng_state() "
                         f"returned; got {str(state)[:60]}") from None


def _draw_shape(shape, where: str) -> tuple:
    """``shape`` of a draw, each size an integer ≥ 0: NumPy's own error for -1 or 2.5 names
    neither the function nor the shape."""
    if not all(is_int(size) and size >= 0 for size in shape):
        raise ValueError(f"{where}: the shape must be integers ≥ 0; got {tuple(shape)!r}")
    return shape


def randn(*shape: int, std: float = 1.0, dtype=None):
    """Normal draws with standard deviation ``std``, in the default float dtype, on the device."""
    if (isinstance(std, bool) or not isinstance(std, numbers.Real) or not math.isfinite(std)
            or std < 0):                            # NaN would make every weight NaN
        raise ValueError(f"randn: std must be a finite number ≥ 0; got {std!r}")
    dtype = float_dtype() if dtype is None else float_dtype_named(dtype, "randn")   # int: all 0
    # Drawn in float64 and then cast (rand draws in its dtype): so a seed gives a model the
    # same initial weights, rounded, in float32 as in float64 (NumPy's float32 normals are
    # other draws altogether). Dropout masks, from rand, differ between the two.
    draws = _rng["generator"].standard_normal(_draw_shape(shape, "randn")) * std
    return to_device(draws, dtype=dtype)


def rand(*shape: int, dtype=None, like=None):
    """Uniform draws in [0, 1), in the default float dtype, on the device of ``like`` (an array;
    the active backend if None)."""
    where = None if like is None else backend_of(like)
    dtype = float_dtype() if dtype is None else float_dtype_named(dtype, "rand")
    # Drawn in the wanted dtype: a float32 dropout mask costs a third less than float64 + cast.
    return to_device(_rng["generator"].random(_draw_shape(shape, "rand"), dtype=dtype),
                     backend=where)


def randint(low: int, high: int, shape: tuple, like=None):
    """Integers drawn uniformly from [low, high), as int64, on the device of ``like`` (an array;
    the active backend if None): indices into a host array are drawn on the host, not copied
    to the GPU and back."""
    if not (is_int(low) and is_int(high) and low < high):     # (0, 2.5) drew from [0, 2)
        raise ValueError(f"randint: low and high must be integers with low < high; got "
                         f"{low!r}, {high!r}")
    shape = (shape,) if is_int(shape) else shape
    if not isinstance(shape, tuple):
        raise ValueError(f"randint: shape must be a tuple of sizes; got {shape!r}")
    where = None if like is None else backend_of(like)
    return to_device(_rng["generator"].integers(low, high, size=_draw_shape(shape, "randint"),
                                                dtype=numpy.int64), backend=where)


# ----------------------------------------------------------------------------------------------
# Two operations that need a library of their own (the sums and blocks layers share, written
# without one, are in array_ops.py)
# ----------------------------------------------------------------------------------------------

_math_erf = numpy.frompyfunc(math.erf, 1, 1)


def erf(x):
    """The error function, elementwise (for the exact GELU)."""
    if get_array_module(x) is not numpy:
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(x)
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:  # SciPy is optional: fall back to the standard library, exact but slower
        return _math_erf(x).astype(x.dtype)
    return scipy_erf(x)


def float_errors_ignored(*kinds: str):
    """A ``with`` block in which NumPy does not warn about floating-point ``kinds`` ("over",
    "invalid" (inf − inf, 0 · inf), "divide"; all three by default): for code that expects them
    and checks its results for inf and NaN itself. CuPy's kernels never warn; nothing to quiet."""
    return numpy.errstate(**{kind: "ignore" for kind in kinds or ("over", "invalid", "divide")})


class _Unavailable:
    """Stands in for the array module MINITF_BACKEND named when it cannot be had: importing
    minitf (and ``--help``) still works, and the first array made raises the one-line error."""

    def __init__(self, error: BackendUnavailable):
        self.error = error

    def __getattr__(self, name):
        raise self.error


def environment_error() -> BackendUnavailable | None:
    """Why MINITF_BACKEND could not be honoured at import (None when it was, or is unset)."""
    return _environment["error"]


# Honour MINITF_BACKEND at import time. A bad value is kept, not raised here: see _Unavailable.
_environment = {"error": None}
_requested = os.environ.get("MINITF_BACKEND", "numpy").strip().lower() or "numpy"
try:
    if _requested not in BACKENDS:
        raise BackendUnavailable(f"backend {_requested!r} does not exist; wanted one of {BACKENDS}")
    use(_requested)
except BackendUnavailable as err:
    # the way out is the variable, not a --backend flag (most commands have none)
    said = str(err).replace("use backend 'numpy'", "unset MINITF_BACKEND to use numpy")
    _environment["error"] = BackendUnavailable(f"MINITF_BACKEND={_requested}: {said}")
    _set(_active, name=_requested, xp=_Unavailable(_environment["error"]))


# ----------------------------------------------------------------------------------------------
# Host memory: keep what NumPy frees for its next array
# ----------------------------------------------------------------------------------------------

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3      # glibc's mallopt parameter numbers


def reuse_freed_memory(mmap_threshold: int = 32 << 20, trim_threshold: int = 1 << 30) -> bool:
    """Have the C allocator keep freed memory for the next array instead of handing it back.

    A training step makes and frees hundreds of temporaries of a few MiB each. By default glibc
    maps each large one fresh from the OS and unmaps it when freed, or returns the freed top of
    its heap, and the next array of that size page-faults its way back in: a process running 13
    steps of the default model of 2026-11-25 faulted 109,000 times, 29,000 with these settings,
    and its step took 6 % longer (benchmarks/RESULTS.md, that day's Intel Xeon entry). Arrays
    under ``mmap_threshold`` (32 MiB, glibc's largest) come from the heap, and the heap keeps up
    to ``trim_threshold`` of free memory. The peak memory is unchanged; the process just does
    not shrink below it between steps. Run once, at import, on Linux with glibc only; a
    MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ set in the environment is left to rule.
    -> True if the settings were made
    """
    import ctypes
    import platform
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    settings = {"MALLOC_MMAP_THRESHOLD_": (_M_MMAP_THRESHOLD, mmap_threshold),
                "MALLOC_TRIM_THRESHOLD_": (_M_TRIM_THRESHOLD, trim_threshold)}
    made = True
    for variable, (parameter, value) in settings.items():
        if variable not in os.environ:                  # the user's own setting wins
            made &= mallopt(parameter, value) == 1      # mallopt returns 1 on success
    return made


reuse_freed_memory()
