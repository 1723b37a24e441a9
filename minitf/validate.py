"""Checks at the API boundary.

Bad input fails here, before any arithmetic, with a message that names the argument, what it got
and what was wanted -- not three frames deep inside a matmul. Shapes are described by axis specs:

    ("b", "n", ("d_model", 8))      any b, any n, last axis exactly 8   ->  "(b, n, d_model=8)"
    ("...", ("d_in", 4))            any leading axes, last axis 4        ->  "(..., d_in=4)"
"""
from __future__ import annotations

import functools
import math
import numbers
import os
import threading
from pathlib import Path

from minitf.backend import get_array_module, is_array, is_int


class _Nesting(threading.local):
    """What is running in this thread: ``state`` is (depth, models), how many Module forwards and
    backwards are running and how many of them are whole models. minitf.nn.Module sets it on
    the way in and puts the outer state back on the way out: one tuple, read once and written
    twice, because a generated token goes through some forty modules and every attribute of a
    thread-local costs a lookup."""
    state = (0, 0)


nesting = _Nesting()


def at_the_boundary(check):
    """Run ``check`` except inside a model's layers. A model (minitf.models) checks its input at
    its own forward; the arrays its layers then pass each other are minitf's own, made from that
    checked input, and checking them again in every layer at every generated token would cost
    more than a decoding step's arithmetic. A layer or an op called by you is always checked."""
    @functools.wraps(check)
    def checked(*args, **kwargs):
        depth, models = nesting.state     # inside_a_model(), spelled out: a decoded token
        if not (models and depth > 1):    # passes some seventy checks
            check(*args, **kwargs)
    return checked


class already_checked:
    """``with already_checked():`` -- a model called in the block skips its own input checks, as
    its layers skip theirs: for a caller that has checked what it passes. ``generate`` checks the
    prompt once and then feeds the model only tokens it picked itself, hundreds of times, where
    checking the ids again (a min, a max and a shape) and the model's entering and recording cost
    7 % of a token. A model's method that is not its forward (``Transformer.decode``, which
    ``greedy_decode`` calls at every step) still checks its own arguments; the layers it runs
    skip theirs, as in its forward. Code outside the block (generate's ``on_token``, say) is
    checked as ever."""

    def __enter__(self):
        self.outer = depth, models = nesting.state
        nesting.state = (depth + 1, models + 1)       # as if inside a model already

    def __exit__(self, *exc_info):
        nesting.state = self.outer


def inside_a_model() -> bool:
    """True while a layer runs inside a model's forward or backward: its input was checked at
    the model's boundary, so the layer's own checks are skipped (see at_the_boundary)."""
    depth, models = nesting.state
    return bool(models and depth > 1)


def _spec_text(spec) -> str:
    parts = [axis if isinstance(axis, str) else f"{axis[0]}={axis[1]}" for axis in spec]
    return "(" + ", ".join(parts) + ")"


def _shape_text(shape) -> str:
    """A shape as Python prints a tuple: (2, 3), (3,), ()."""
    return str(tuple(int(s) for s in shape))


def _matches(shape, spec) -> bool:
    if spec and spec[0] == "...":
        spec = spec[1:]
        if len(shape) < len(spec):
            return False
        shape = shape[len(shape) - len(spec):]
    elif len(shape) != len(spec):
        return False
    return all(isinstance(axis, str) or size == axis[1] for size, axis in zip(shape, spec))


@at_the_boundary
def check_array(x, name: str, where: str) -> None:
    """TypeError unless ``x`` is a NumPy or CuPy array."""
    if not is_array(x):
        # a NumPy scalar (x.sum(), a[0]) has a shape and a dtype but is not an array
        got = type(x).__name__
        got = f"the scalar {got}" if getattr(x, "shape", None) == () else got
        raise TypeError(f"{where}: {name} must be a NumPy or CuPy array; got {got}")


@at_the_boundary
def check_shape(x, name: str, spec, where: str) -> None:
    """ValueError unless ``x.shape`` matches the axis ``spec`` (see the module docstring)."""
    check_array(x, name, where)
    if not _matches(tuple(x.shape), tuple(spec)):
        raise ValueError(f"{where}: {name} has shape {_shape_text(x.shape)}; "
                         f"wanted {_spec_text(spec)}")


@at_the_boundary
def check_float(x, name: str, where: str, min_ndim: int = 0) -> None:
    """TypeError unless ``x`` is an array of floats; ValueError unless it has at least
    ``min_ndim`` axes.

    Where the math needs fractions -- an exp, a random mask, a rotation -- an integer or boolean
    array would either fail deep inside NumPy or, worse, be truncated back to integers.
    """
    check_array(x, name, where)
    if x.dtype.kind != "f" or x.dtype.itemsize not in (4, 8):       # float16: no kernels of its own
        raise TypeError(f"{where}: {name} has dtype {x.dtype}; wanted float32 or float64 "
                        f"(cast with {name}.astype('float32'))")
    if x.ndim < min_ndim:
        raise ValueError(f"{where}: {name} has shape {_shape_text(x.shape)}; wanted at least "
                         f"{min_ndim} ax{'is' if min_ndim == 1 else 'es'}")


def check_same(got: int, wanted: int, what: str, where: str) -> None:
    """ValueError unless two sizes that must agree do, e.g. the batch of x and of memory."""
    if got != wanted:
        raise ValueError(f"{where}: {what} is {got}; wanted {wanted}")


@at_the_boundary
def check_dtype(x, name: str, dtype, where: str) -> None:
    """TypeError unless ``x`` has the parameters' float dtype.

    minitf never casts silently: a float64 input to a float32 model would quietly double memory
    and time (NumPy promotes the whole computation), and a float32 input to a float64 gradient
    check would ruin its precision.
    """
    if x.dtype != dtype:
        # the other way out, a model in x's dtype, exists only for the two float dtypes
        other = (f", or build the model under minitf.backend.precision('{x.dtype}')"
                 if x.dtype.name in ("float32", "float64") else "")
        raise TypeError(f"{where}: {name} has dtype {x.dtype}; wanted {dtype}, the dtype of the "
                        f"parameters (cast with {name}.astype('{dtype}'){other})")


@at_the_boundary
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


def check_segments(segment_ids, ids, n_segments: int, where: str) -> None:
    """segment_ids (or None): ids' shape, values in [0, n_segments), and a model that has segments."""
    if segment_ids is None:
        return
    if not n_segments:
        raise ValueError(f"{where}: segment_ids were given, but the model has no segment "
                         f"embedding; build it with n_segments ≥ 1 (2 for sentence pairs)")
    check_array(segment_ids, "segment_ids", where)
    if tuple(segment_ids.shape) != tuple(ids.shape):
        raise ValueError(f"{where}: segment_ids has shape {_shape_text(segment_ids.shape)}; "
                         f"wanted {_shape_text(ids.shape)}, the shape of ids")
    check_ids(segment_ids, "segment_ids", n_segments, where, size_name="n_segments")


@at_the_boundary
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
    def fits(x):
        return 0.0 <= x < 1.0
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not fits(p):
        raise ValueError(f"{where}: {name} must lie in [0, 1); got {_got(p)}"
                         f"{_numpy_hint(p, name, float, fits)}")


def _got(value) -> str:
    """What a number's check got, in a line: an array (two arguments swapped, say) by its dtype
    and shape, not its every entry; anything else by its repr, cut short."""
    if is_array(value) and getattr(value, "ndim", 0) > 0:
        article = "an" if str(value.dtype)[0] in "aeio" else "a"      # a uint8, an int64
        return f"{article} {value.dtype} array of shape {tuple(value.shape)}"
    import reprlib
    return reprlib.repr(value)


def _numpy_hint(value, name: str, plain, fits) -> str:
    """For a NumPy number (np.int64(10) read off an array, np.float32(0.1)) that a check of a
    plain Python number refused, but whose plain number, ``plain(value)``, ``fits``: what to
    pass instead. Else nothing (a NumPy string, date or complex number is no number)."""
    kind = numbers.Integral if plain is int else numbers.Real
    if type(value).__module__ != "numpy" or not isinstance(value, kind) or not fits(plain(value)):
        return ""
    return f", a NumPy {type(value).__name__}: pass {plain.__name__}({name})"


MOST_EXACT = 2 ** 53     # the largest count a float holds exactly: a bound past any real size


def check_int(value, name: str, where: str, low: int = 1, high: int | None = None,
              what: str = "") -> None:
    """ValueError unless ``value`` is an int (a bool is not) in ``[low, high]``; ``what`` says
    what the number is, e.g. "the number of heads"."""
    at_least = "a positive integer" if low == 1 else f"an integer ≥ {low}"
    wanted = (f"{at_least} (and ≤ 2^53 = {MOST_EXACT})" if high == MOST_EXACT else
              f"an integer in [{low}, {high}]" if high is not None else at_least)
    def fits(n):
        return n >= low and (high is None or n <= high)
    if isinstance(value, bool) or not isinstance(value, int) or not fits(value):
        raise ValueError(f"{where}: {name} must be {wanted}{', ' + what if what else ''}; "
                         f"got {_got(value)}{_numpy_hint(value, name, int, fits)}")


def plain_int(size):
    """A NumPy integer (a length read off an array) as a Python int; anything else as it is, for
    check_int to judge. (Sizes a model is built from are not converted: its config is JSON.)"""
    return int(size) if is_int(size) else size


def check_path(path, name: str, where: str) -> None:
    """TypeError unless ``path`` is a str or a pathlib.Path (any os.PathLike): pathlib's own error
    for None or a number names neither the function nor the argument. An empty str is refused:
    read as a path, it is the current directory."""
    if not isinstance(path, (str, os.PathLike)):
        got = repr(path) if path is None or isinstance(path, (int, float)) else \
            f"a {type(path).__name__}"
        raise TypeError(f"{where}: {name} must be a path (a str or a pathlib.Path); got {got}")
    if isinstance(path, str) and not path.strip():  # Path('') is '.': $OUT unset wrote there
        raise ValueError(f"{where}: {name} is {path!r}; wanted a path (a file or folder name)")
    home = literal_home(path)
    if home is not None:
        raise ValueError(f"{where}: {name} {os.fspath(path)!r} {home}")
    text = not_a_name(path)
    if text is not None:
        raise ValueError(f"{where}: {name} {text}")


NAME_MAX = 255      # bytes in one file or folder name (Linux's, macOS's; Windows' 255 characters)


def not_a_name(path) -> str | None:
    """What is wrong with a ``path`` too long to name any file -- a text passed where its
    file's path belongs, read_text(open(f).read()) -- or None. The system's own error
    (File name too long) printed the whole text."""
    text = os.fspath(path)
    if isinstance(text, bytes) or all(len(part.encode(errors="surrogateescape")) <= NAME_MAX
                                      for part in Path(text).parts):
        return None
    lines = text.count("\n") + 1
    shape = f"{len(text):,} characters" + (f" on {lines:,} lines" if lines > 1 else "")
    return (f"is {shape}, {text[:20]!r}…, too long for a file's name (the text itself?); "
            f"wanted the path of a file")


def literal_home(path) -> str | None:
    """What is wrong with a ``path`` that starts with a '~' no shell expanded ('~/runs' quoted,
    or from a notebook or Python), or None: it would make a folder called ~ here, and the
    obvious clean-up of that, rm -rf ~, is of the home folder."""
    parts = Path(path).parts                   # ./~/runs too: a Path of it is ~/runs
    if not parts or not parts[0].startswith("~") or os.path.expanduser(parts[0]) == parts[0]:
        return None                          # ~ of no user is a name like another
    return (f"starts with a literal {parts[0]!r} that nothing expanded to a home folder; "
            f"wanted the path itself, e.g. {os.path.expanduser(os.fspath(path))} (or "
            f"{os.path.abspath(path)} for a folder called {parts[0]} here)")


def check_sizes(where: str, **sizes) -> None:
    """The sizes a model is built from, each a positive integer (n_layers may be 0: no blocks),
    checked before any is used, so that a bad one is named in the model's words."""
    for name, value in sizes.items():
        if name == "n_layers":
            check_int(value, name, where, low=0, what="the number of blocks")
        else:
            check_int(value, name, where)


def check_flags(where: str, **flags) -> None:
    """ValueError unless each flag is True or False: a string such as 'no' or 'False' is truthy,
    and would turn on what it was written to turn off."""
    for name, value in flags.items():
        if not isinstance(value, bool):          # (not even NumPy's: a config is written as JSON)
            raise ValueError(f"{where}: {name} must be True or False; got {value!r}")


def check_block_settings(where: str, d_model, n_heads, dropout, attn_dropout) -> None:
    """What a model hands each of its blocks, checked in the model's name (the sizes checked as
    positive integers already): heads that split the width, dropout rates in [0, 1). Left to the
    blocks, a bad one was named as a MultiHeadAttention's or a Dropout's."""
    check_heads(d_model, n_heads, where)
    check_probability(dropout, "dropout", where)
    check_probability(attn_dropout, "attn_dropout", where)


def check_rope_width(positional, d_head: int, where: str) -> None:
    """RoPE turns q's and k's features in pairs: a head of an odd width has one left over."""
    if positional == "rope" and d_head % 2:
        raise ValueError(f"{where}: positional='rope' needs an even d_head (features rotate in "
                         f"pairs); got d_head={d_head}")


def check_heads(d_model: int, n_heads: int, where: str, names=("d_model", "n_heads")) -> None:
    """ValueError unless the heads split the width evenly, d_model = n_heads · d_head (the sizes
    checked as positive integers already; ``names``: how the caller calls them)."""
    if d_model % n_heads:
        d, h = names
        raise ValueError(f"{where}: {d}={d_model} is not divisible by {h}={n_heads}; wanted "
                         f"{d} = {h} · d_head")


def feed_forward_width(d_ff, d_model: int, where: str) -> int:
    """d_ff, the feed-forward network's hidden width: 4 · d_model when not given (None), as in the
    original Transformer; otherwise a positive integer (0 is refused, not read as "not given")."""
    if d_ff is None:
        return 4 * d_model
    check_int(d_ff, "d_ff", where, what="the feed-forward network's hidden width")
    return d_ff


def check_real(value, name: str, where: str, low: float | None = None,
               high: float | None = None, low_open: bool = True) -> None:
    """ValueError unless ``value`` is a finite real number in ``(low, high]`` (``[low, high]``
    with ``low_open=False``); None for either end means unbounded."""
    left = "" if low is None else ("> " if low_open else "≥ ") + f"{low:g}"
    right = "" if high is None else f"≤ {high:g}"
    wanted = "a finite number" + (" " if left or right else "") + " and ".join(
        t for t in (left, right) if t)
    def fits(x):
        return (math.isfinite(x) and (low is None or (x > low if low_open else x >= low))
                and (high is None or x <= high))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not fits(value):
        raise ValueError(f"{where}: {name} must be {wanted}; got {_got(value)}"
                         f"{_numpy_hint(value, name, float, fits)}")


@at_the_boundary
def check_finite(x, name: str, where: str) -> None:
    """ValueError unless every element of the float array ``x`` is finite (no NaN, no inf)."""
    xp = get_array_module(x)
    if x.dtype.kind in "fc" and not bool(xp.isfinite(x).all()):
        bad = int((~xp.isfinite(x)).sum())
        raise ValueError(f"{where}: {name} holds {bad} NaN or infinite value(s) of {x.size}; "
                         f"wanted finite numbers")


def is_real_number(value) -> bool:
    """Whether ``value`` is one real number: a Python int or float (not a bool), a NumPy scalar
    or a 0-d array of one. A loss, its gradient, what an evaluation returns."""
    if getattr(value, "ndim", 0):                             # an array of several numbers
        return False
    if hasattr(value, "dtype"):                               # a 0-d array, a NumPy scalar
        return value.dtype.kind in "fiu"
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def not_real_numbers(x) -> str:
    """Why the array ``x`` cannot hold weights -- it must hold finite real numbers -- or ''."""
    if x.dtype.kind not in "fiu":
        return f"dtype {x.dtype}; wanted real numbers"
    if x.dtype.kind == "f" and not bool(get_array_module(x).isfinite(x).all()):
        return "holds NaN or infinite values; wanted finite numbers"
    return ""


# The checks of a backward's upstream gradient live in minitf.validate_gradients. A homework's
# files, written by a minitf from before they moved there, import them from here, and a newer
# minitf grading that homework must still load them: so they stay importable from here too.
from minitf.validate_gradients import (check_like, check_loss_gradient,  # noqa: E402,F401
                                       gradient_of, is_gradient_check)
