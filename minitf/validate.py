"""Checks at the API boundary.

Bad input fails here, before any arithmetic, with a message that names the argument, what it got
and what was wanted -- not three frames deep inside a matmul. Shapes are described by axis specs:

    ("b", "n", ("d_model", 8))      any b, any n, last axis exactly 8   ->  "(b, n, d_model=8)"
    ("...", ("d_in", 4))            any leading axes, last axis 4        ->  "(..., d_in=4)"
"""
from __future__ import annotations

from minitf.backend import get_array_module, is_array


def _spec_text(spec) -> str:
    parts = [axis if isinstance(axis, str) else f"{axis[0]}={axis[1]}" for axis in spec]
    return "(" + ", ".join(parts) + ")"


def _shape_text(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _matches(shape, spec) -> bool:
    if spec and spec[0] == "...":
        spec = spec[1:]
        if len(shape) < len(spec):
            return False
        shape = shape[len(shape) - len(spec):]
    elif len(shape) != len(spec):
        return False
    return all(isinstance(axis, str) or size == axis[1] for size, axis in zip(shape, spec))


def check_array(x, name: str, where: str) -> None:
    """TypeError unless ``x`` is a NumPy or CuPy array."""
    if not is_array(x):
        raise TypeError(f"{where}: {name} must be a NumPy or CuPy array; got {type(x).__name__}")


def check_shape(x, name: str, spec, where: str) -> None:
    """ValueError unless ``x.shape`` matches the axis ``spec`` (see the module docstring)."""
    check_array(x, name, where)
    if not _matches(tuple(x.shape), tuple(spec)):
        raise ValueError(f"{where}: {name} has shape {_shape_text(x.shape)}; "
                         f"wanted {_spec_text(spec)}")


def check_same(got: int, wanted: int, what: str, where: str) -> None:
    """ValueError unless two sizes that must agree do, e.g. the batch of x and of memory."""
    if got != wanted:
        raise ValueError(f"{where}: {what} is {got}; wanted {wanted}")


def check_dtype(x, name: str, dtype, where: str) -> None:
    """TypeError unless ``x`` has the parameters' float dtype.

    minitf never casts silently: a float64 input to a float32 model would quietly double memory
    and time (NumPy promotes the whole computation), and a float32 input to a float64 gradient
    check would ruin its precision.
    """
    if x.dtype != dtype:
        raise TypeError(f"{where}: {name} has dtype {x.dtype}; wanted {dtype}, the dtype of the "
                        f"parameters (cast with {name}.astype('{dtype}'), or build the model "
                        f"under minitf.backend.precision('{x.dtype}'))")


def check_ids(ids, name: str, size: int, where: str, ignore_index: int | None = None,
              size_name: str = "vocab_size") -> None:
    """Integer ids in ``[0, size)`` (``ignore_index`` also allowed); checked explicitly because
    CuPy, unlike NumPy, reads out of bounds without complaint."""
    check_array(ids, name, where)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{where}: {name} has dtype {ids.dtype}; wanted an integer dtype")
    if ids.size == 0:
        return
    xp = get_array_module(ids)
    kept = ids if ignore_index is None else ids[ids != ignore_index]
    if kept.size == 0:
        return
    low, high = int(xp.min(kept)), int(xp.max(kept))
    if low < 0 or high >= size:
        also = "" if ignore_index is None else f" (or {ignore_index}, ignored)"
        raise ValueError(f"{where}: {name} must lie in [0, {size_name}={size}){also}; "
                         f"got values from {low} to {high}")


def check_broadcast(x, name: str, target_shape, target_text: str, where: str,
                    hint: str = "") -> None:
    """ValueError unless ``x`` broadcasts to ``target_shape`` (NumPy's rules, aligned on the right)."""
    check_array(x, name, where)
    shape, target = tuple(x.shape), tuple(target_shape)
    fits = len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(reversed(shape), reversed(target)))
    if not fits:
        raise ValueError(f"{where}: {name} has shape {_shape_text(shape)}, which does not broadcast "
                         f"to {target_text} = {_shape_text(target)}{hint}")


def check_probability(p: float, name: str, where: str) -> None:
    """ValueError unless ``0 <= p < 1`` (a dropout rate, a smoothing weight)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{where}: {name} must lie in [0, 1); got {p!r}")
