"""Checks of the upstream gradient a backward pass is given, at the API boundary.

A backward's dy must be a float array of the shape of its forward's output (gradient_of wraps a
functional backward in that check; check_like is a module's), a loss's gradient one number
(check_loss_gradient); and the classic slip of passing the forward's whole (output, cache) pair
as the cache is refused by name. As every check of minitf.validate, they are skipped inside a
model, whose layers pass each other minitf's own arrays.
"""
from __future__ import annotations

import functools
import inspect
import numbers

from minitf.backend import is_array
from minitf.validate import (_shape_text, at_the_boundary, check_array, check_float,
                             check_shape, is_real_number)


def gradient_of(what: str, output_shape):
    """Decorate a functional backward, ``op_backward(dy, cache)``: a dy that is not a float
    array of the shape of the forward's output is refused in one line, before any arithmetic
    (a dy of another shape would otherwise fail deep in a matmul or, worse, broadcast into a
    gradient of the wrong shape).

    what: the output's name in the message, e.g. "linear's y".
    output_shape(cache) -> that output's shape, read from the cache the forward returned: a
    tuple of ints, an axis spec (see the module docstring) where the cache knows only some axes,
    or None where it knows none. Skipped inside a model, as every check; the exercises grade the
    undecorated body (``inspect.unwrap`` sees through this).
    """
    def decorate(backward):
        where = backward.__name__
        dy_name = next(iter(inspect.signature(backward).parameters))     # dy, dout, dp, dH, …

        @functools.wraps(backward)
        def checked(dy, cache, *args, **kwargs):
            _check_gradient(dy, dy_name, output_shape, cache, where, what)
            return backward(dy, cache, *args, **kwargs)
        return checked
    return decorate


# One code object is shared by every backward's wrapper: the code tools that follow calls see
# through (minitf.exercises.tracing counts a layer's call to its op as one call, not two).
_GRADIENT_CHECK_CODE = gradient_of("", lambda cache: None)(lambda dy, cache: None).__code__


def is_gradient_check(code) -> bool:
    """True for the code of the wrapper that gradient_of puts around a backward."""
    return code is _GRADIENT_CHECK_CODE


@at_the_boundary
def _check_gradient(dy, name: str, output_shape, cache, where: str, what: str) -> None:
    check_float(dy, name, where)
    _refuse_the_forward_pair(cache, dy, where)
    shape = output_shape(cache)                  # read only when checked: not inside a model
    if shape is None:
        return
    if all(isinstance(size, int) for size in shape):
        if tuple(dy.shape) != tuple(shape):
            raise ValueError(f"{where}: {name} has shape {_shape_text(dy.shape)}; wanted "
                             f"{_shape_text(shape)}, the shape of {what}")
    else:
        check_shape(dy, name, shape, where)


def _refuse_the_forward_pair(cache, dy, where: str) -> None:
    """The classic slip, the forward's whole return, (y, cache), passed as the cache, refused in
    one line (it failed deep inside, or ran on the wrong arrays). No cache of minitf's is a pair
    whose first element has the output's shape, or is a loss's number."""
    if not (isinstance(cache, tuple) and len(cache) == 2
            and (cache[1] is None or is_array(cache[1]) or isinstance(cache[1], tuple))):
        return                        # (None: the cache of a dropout that dropped nothing)
    y = cache[0]
    if (tuple(y.shape) == tuple(getattr(dy, "shape", ())) if is_array(y) else
            isinstance(y, numbers.Real) and getattr(dy, "ndim", 0) == 0):
        raise ValueError(f"{where}: cache is the (output, cache) pair that "
                         f"{where.removesuffix('_backward')} returned; wanted its second element")


def check_loss_gradient(dloss, where: str, cache=None) -> None:
    """ValueError unless ``dloss`` is one number (a Python number or a 0-d array): the gradient of
    a loss, which is one number too; an array would broadcast into every entry's gradient. Given
    the ``cache``, also refuses the forward's (loss, cache) pair in its place."""
    if getattr(dloss, "ndim", 0):
        raise ValueError(f"{where}: dloss has shape {tuple(dloss.shape)}; wanted a scalar, the "
                         f"gradient of the one loss (usually 1.0)")
    if not is_real_number(dloss):
        raise TypeError(f"{where}: dloss is {dloss!r}; wanted a real number (usually 1.0)")
    _refuse_the_forward_pair(cache, dloss, where)


@at_the_boundary
def check_like(dy, name: str, shape, dtype, where: str, what: str) -> None:
    """ValueError/TypeError unless ``dy`` is an array of exactly ``shape`` and ``dtype`` -- a
    gradient must have the shape and dtype of what it is the gradient of (``what``)."""
    check_array(dy, name, where)
    if tuple(dy.shape) != tuple(shape):
        raise ValueError(f"{where}: {name} has shape {_shape_text(dy.shape)}; wanted "
                         f"{_shape_text(shape)}, the shape of {what}")
    if dy.dtype != dtype:
        raise TypeError(f"{where}: {name} has dtype {dy.dtype}; wanted {dtype}, "
                        f"the dtype of {what}")
