"""What a wrong gradient looks like, and the sentence that tells a learner what to look at.

Each function gets the array a gradient is taken of (x), the learner's gradient (dx) and, for
values, the numerical one, and returns the lines of explanation -- empty when nothing is wrong.
The hints are signatures of the classic mistakes: all zeros, a constant factor, a transpose, a
gradient that ignores the upstream gradient, a wrong shape or dtype, NaN.
"""
from __future__ import annotations

import math

from minitf.backend import get_array_module, is_array
from minitf.gradcheck import TOLERANCE, relative_error


def _index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _summable(got: tuple, wanted: tuple) -> bool:
    """Could ``wanted`` come from ``got`` by summing the axes a broadcast stretched?"""
    if len(got) < len(wanted):
        return False
    tail = got[len(got) - len(wanted):]
    return all(w in (g, 1) for g, w in zip(tail, wanted))


def shape_problem(name: str, x, dx) -> list[str]:
    """Lines saying why ``dx`` cannot be the gradient of ``x`` at all (nothing, not an array,
    the wrong shape or dtype); [] when it is an array of x's shape and dtype."""
    wanted = tuple(x.shape)
    if dx is None:
        return [f"{name}: no gradient came back for it",
                "hint: return one gradient per input, in the order of the inputs"]
    if not is_array(dx):
        return [f"{name}: got a {type(dx).__name__}, wanted an array of shape {wanted}"]
    got = tuple(dx.shape)
    if got != wanted:
        lines = [f"{name}: your gradient has shape {got}, wanted {wanted} (the shape of {name})"]
        if sorted(got) == sorted(wanted):
            lines.append("hint: the same sizes in another order -- axes swapped (a transpose "
                         "too many or too few?)")
        elif _summable(got, wanted):
            lines.append("hint: a broadcast in the forward is a sum in the backward: sum over "
                         "the axes that were stretched (minitf.array_ops.sum_to_shape)")
        return lines
    if dx.dtype != x.dtype:
        return [f"{name}: your gradient is {dx.dtype}, wanted {x.dtype} (the dtype of {name})",
                "hint: make new arrays with dtype=dy.dtype (or zeros_like), never a fixed dtype"]
    return []


def _scale_name(c: float) -> str:
    """' = √3' or ' = 1/√8' when c is the square root of a small integer (or its inverse)."""
    for value, text in ((c * c, "√{}"), (1.0 / (c * c), "1/√{}")):
        n = round(value)
        if 2 <= n <= 4096 and abs(value - n) < 1e-6 * n and math.isqrt(n) ** 2 != n:
            return " = " + text.format(n)
    return ""


def _constant_factor(dx, numeric):
    """c such that dx ≈ c · numeric (c ≠ 1), or None."""
    norm = float((numeric * numeric).sum())
    if norm == 0.0:
        return None
    c = float((dx * numeric).sum()) / norm
    if abs(c - 1.0) < 1e-3 or relative_error(dx, c * numeric) > 1e-5 or not math.isfinite(c):
        return None
    return c


def _hint(dx, numeric, dx_other, mistake: str, upstream: str) -> str:
    """The signature of the mistake, most specific first; the exercise's classic mistake last.
    ``upstream`` names the upstream gradient as the function does (dy, dp, dout)."""
    xp = get_array_module(dx)
    if not xp.any(dx):
        return ("your gradient is all zeros: did you return it -- or, for a parameter, add it "
                "into its .grad (+=)?")
    if dx_other is not None and relative_error(dx, dx_other) < 1e-12:
        return (f"your gradient is the same for two different upstream gradients: it ignores "
                f"{upstream} (every gradient is a product with the upstream one)")
    c = _constant_factor(dx, numeric)
    if c is not None and abs(c + 1.0) < 1e-3:
        return ("your gradient is the right one with the sign flipped: a minus sign lost or "
                "added (a − b written as b − a?)")
    if c is not None:
        return (f"your gradient is {c:.4g}{_scale_name(c)} times the right one: a constant factor "
                f"is missing or extra (a scale such as 1/√d_k, 1/N or 1/(1 − p)?)")
    if dx.ndim >= 2 and dx.shape[-1] == dx.shape[-2] and \
            relative_error(dx.swapaxes(-1, -2), numeric) <= TOLERANCE:
        return "the right numbers, transposed in the last two axes"
    # no signature fits: name the slip most learners make here, as a guess (said so), since a
    # wrong body that is not that slip would be sent looking for it
    return f"perhaps the classic mistake here: {mistake}"


def value_problem(name: str, x, dx, numeric, dx_other, mistake: str,
                  upstream: str) -> list[str]:
    """Lines locating and explaining a wrong gradient: the worst entry, analytic vs numeric
    there, how many entries are off, the shapes and a hint. ``dx_other`` is the learner's
    gradient for another upstream gradient (to catch one that ignores it), or None;
    ``upstream`` is the upstream gradient's name in the function (dy, dp, dout)."""
    xp = get_array_module(dx)
    bad = ~xp.isfinite(dx)
    if xp.any(bad):
        where = _index(xp.unravel_index(int(xp.argmax(bad)), dx.shape))
        return [f"{name}: your gradient has {int(bad.sum())} NaN or inf entries, the first at "
                f"{name}{where}",
                "hint: a division by zero, a log of 0, or an exp that overflowed? (a fully "
                "masked row has all p = 0, and its gradient must be 0)"]
    diff = xp.abs(dx - numeric)
    worst = xp.unravel_index(int(xp.argmax(diff)), dx.shape)
    scale = max(1e-8, float(xp.abs(dx).max()) + float(xp.abs(numeric).max()))
    off = int((diff > TOLERANCE * scale).sum())
    # + 0.0: a -0.0 prints as 0
    return [f"{name}: worst entry {name}{_index(worst)}: yours {float(dx[worst]) + 0.0:.6g}, "
            f"numeric {float(numeric[worst]) + 0.0:.6g}",
            f"{off} of {dx.size} entries off; {name} and your gradient have shape {tuple(x.shape)}",
            "hint: " + _hint(dx, numeric, dx_other, mistake, upstream)]
