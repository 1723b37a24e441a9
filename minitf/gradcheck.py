"""Gradient checking: is a hand-written backward pass right?

For a function y = f(x) and a random upstream gradient g (the same shape as y), take the scalar
L = Σ g ⊙ f(x). Its exact gradient is what backward(g) returns; central differences estimate it
one entry at a time:

    dL/dx_i ≈ (L(x + h e_i) − L(x − h e_i)) / 2h          (error O(h²), in float64)

The two are compared by a relative error, taken over the whole tensor:

    max_i |a_i − b_i| / max(1e-8, max_i |a_i| + max_i |b_i|)

and a tensor passes when that is at most TOLERANCE. Every input and every parameter is checked.
Each evaluation is run under the same seed, so dropout draws the same mask every time; g comes
from a seed of its own. (It must be independent of the inputs: with g = x and γ = 1, for one,
layer norm's input gradient is zero up to its ε, since layer norm ignores a rescaling of x, and a
check against (almost) zero proves little.)

Why over the whole tensor, not entry by entry (as in CS231n): central differences carry a
rounding error of about ε·|L|/h ≈ 1e-10 on *every* entry, and some true gradients are exactly
zero -- the key bias of attention, for one, since softmax ignores a constant added to a whole row
of scores. Entry by entry, 1e-10 of noise against a true 0 reads as a large relative error; against
the tensor's own scale it reads as what it is. A wrong backward still shows up: any error larger
than a millionth of the tensor's largest gradient fails.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

from minitf.backend import float_dtype, get_array_module, is_array, randint, randn, seed
from minitf.nn.module import Module, as_tuple
from minitf.validate import check_int, check_real, is_real_number

TOLERANCE = 1e-6   # the one threshold every gradient check in minitf must meet
STEP = 1e-6        # h, the finite-difference step (float64: O(h²) truncation, O(ε/h) rounding)


@dataclass
class FunctionCase:
    """A functional pair to check: ``forward(**inputs, **options) -> (y, cache)`` and
    ``backward(dy, cache)``, whose outputs are the gradients of the inputs named in ``wrt``."""
    forward: Callable
    backward: Callable
    inputs: dict
    wrt: tuple
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        # checked here, not when the check first calls them three frames down
        for role, example in (("forward", "F.relu"), ("backward", "F.relu_backward")):
            if not callable(getattr(self, role)):
                raise TypeError(f"FunctionCase: {role} must be a function (such as {example}); "
                                f"got {_what(getattr(self, role))}")
        _check_inputs(self.inputs, "FunctionCase")
        _check_options(self.options, "FunctionCase")
        if (isinstance(self.wrt, str) or not isinstance(self.wrt, (tuple, list)) or not self.wrt
                or len(set(self.wrt)) < len(self.wrt)
                or not all(name in self.inputs for name in self.wrt)):
            # an empty wrt would check nothing, and report "0 of 0 within tolerance": a pass
            raise ValueError(f"FunctionCase: wrt must be a tuple of distinct names among the "
                             f"inputs {tuple(self.inputs)}, at least one; got {self.wrt!r}")
        for name in self.wrt:
            x = self.inputs[name]
            if not is_array(x) or x.dtype.kind != "f" or x.size == 0:
                # an empty input is checked in no number, and every answer passes it; an
                # integer one failed in the draw of its upstream gradient, in other words
                got = (f"an empty array of shape {tuple(x.shape)}" if is_array(x) and x.size == 0
                       else f"an array of dtype {x.dtype}" if is_array(x) else _what(x))
                raise ValueError(f"FunctionCase: inputs[{name!r}] is {got}; wanted a float array "
                                 f"of at least one number, as every input in wrt (its gradient "
                                 f"is checked)")


@dataclass
class ModuleCase:
    """A module to check: ``module(*inputs.values(), **options)``; its backward returns the
    gradients of ``inputs`` in order (or None when it has none), and fills every ``.grad``."""
    module: Module
    inputs: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.module, Module):
            raise TypeError(f"ModuleCase: module must be a minitf.nn Module; got "
                            f"{type(self.module).__name__}")
        _check_inputs(self.inputs, "ModuleCase")
        _check_options(self.options, "ModuleCase")


def _check_inputs(inputs, where: str) -> None:
    if not isinstance(inputs, dict):
        raise TypeError(f"{where}: inputs must be a dict {{name: array}}; got "
                        f"{type(inputs).__name__}")


def _check_options(options, where: str) -> None:
    # the keyword arguments of every forward call: ** takes a mapping and nothing else
    if not isinstance(options, Mapping):
        raise TypeError(f"{where}: options must be a dict {{name: value}} of keyword arguments "
                        f"for forward; got {type(options).__name__}")


def _check_case(case, where: str) -> None:
    if not isinstance(case, (FunctionCase, ModuleCase)):
        raise TypeError(f"{where}: case must be a FunctionCase or a ModuleCase; got "
                        f"{_what(case)}")


def _what(value) -> str:
    """What a wrong argument is, for a message: None, 'x', a list, an array of shape (2, 3)."""
    if value is None or isinstance(value, (str, int, float)):
        return repr(value)
    if getattr(value, "shape", None) is not None:
        return f"an array of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _float64_only(run: "Backward", name: str) -> None:
    """A check in float32 would fail a right backward: its rounding error, ε/h ≈ 0.1 at h = 1e-6,
    swamps the tolerance. Refused, in one line, rather than reported as a FAIL."""
    for tensor, (x, _) in run.tensors.items():
        if x.dtype.kind == "f" and x.dtype.itemsize < 8:
            raise TypeError(f"{name}: {tensor} has dtype {x.dtype}; wanted float64, the only "
                            f"precision central differences can check (build the case under "
                            f"minitf.backend.precision('float64'))")
    for tensor, (x, dx) in run.tensors.items():       # what backward gave, in the case's words
        # an array, or a NumPy scalar (what .sum() gives) for a 0-d input; a list has no shape
        shape = getattr(dx, "shape", None)
        if dx is not None and (shape is None or tuple(shape) != tuple(x.shape)):
            got = f"has shape {tuple(shape)}" if shape is not None else f"is {_what(dx)}"
            raise ValueError(f"{name}: backward's gradient of {tensor} {got}; wanted an "
                             f"array of shape {tuple(x.shape)}, the shape of {tensor}")


@dataclass
class Row:
    """One line of the report: a tensor, its shape, its error, pass or fail."""
    check: str
    tensor: str
    shape: tuple
    error: float

    @property
    def passed(self) -> bool:
        return self.error <= TOLERANCE


def relative_error(a, b) -> float:
    """max |a − b| / max(1e-8, max |a| + max |b|), as a Python float."""
    for name, x in (("a", a), ("b", b)):
        if not hasattr(x, "shape"):              # an array (or a NumPy scalar); a list has none
            raise TypeError(f"relative_error: {name} must be a NumPy or CuPy array; got "
                            f"{_what(x)}")
    if tuple(a.shape) != tuple(b.shape):         # broadcasting would compare other entries
        raise ValueError(f"relative_error: a has shape {tuple(a.shape)} and b "
                         f"{tuple(b.shape)}; wanted the same")
    if a.size == 0:
        return 0.0
    xp = get_array_module(a, b)
    scale = float(xp.abs(a).max()) + float(xp.abs(b).max())
    return float(xp.abs(a - b).max()) / max(1e-8, scale)


def numerical_gradient(loss: Callable[[], float], x, step: float = STEP):
    """dL/dx by central differences. ``loss()`` must read ``x``, which is changed in place and
    restored entry by entry."""
    if not callable(loss):
        raise TypeError(f"numerical_gradient: loss must be a function of no arguments returning "
                        f"a scalar loss; got {_what(loss)}")
    if not is_array(x) or x.dtype.kind != "f":
        got = f"dtype {x.dtype}" if is_array(x) else f"a {type(x).__name__}"
        # an integer x cannot hold x ± step (float32 can, coarsely: lesson 05 shows how coarsely)
        raise TypeError(f"numerical_gradient: x has {got}; wanted a float array (float64 for a "
                        f"gradient check)")
    check_real(step, "step", "numerical_gradient", low=0)
    grad = get_array_module(x).zeros_like(x)
    for index in itertools.product(*(range(s) for s in x.shape)):
        original = float(x[index])
        x[index] = original + step
        plus = _scalar(loss())
        x[index] = original - step
        minus = _scalar(loss())
        x[index] = original
        grad[index] = (plus - minus) / (2 * step)
    return grad


def _scalar(value):
    """The loss, checked to be one real number (a Python number, a NumPy scalar, a 0-d array):
    an array would fail as "setting an array element with a sequence", far from the cause."""
    if getattr(value, "ndim", 0):
        raise TypeError(f"numerical_gradient: loss must return a scalar; got an array of shape "
                        f"{tuple(value.shape)} (for an output y, return the scalar Σ g ⊙ y for a "
                        f"fixed random g of y's shape: lambda: float((f() * g).sum()))")
    if not is_real_number(value):
        raise TypeError(f"numerical_gradient: loss must return a real number; got "
                        f"{_what(value)}")
    return value


@dataclass
class Backward:
    """One backward pass of a case, and what a gradient check compares it with.

    ``tensors`` maps a tensor's name ("x", "input x", "param W") to the pair (the array it is the
    gradient of, the gradient backward gave for it -- None where nothing came back); ``loss()``
    is L = Σ g ⊙ forward(), which numerical_gradient differentiates; ``returned`` is exactly what
    backward returned, as a tuple (for telling a learner that a gradient is missing), and
    ``bare`` whether it was one value, not a tuple; ``changed`` holds, by name, what of dy and
    the cache the backward overwrote (see _handed).
    """
    tensors: dict
    loss: Callable
    g: object
    returned: tuple
    changed: dict = field(default_factory=dict)    # {"dy": dy, …}: written into in place
    bare: bool = False


def _upstream_gradient(y, seed_value: int):
    """The random g of L = Σ g ⊙ y, from its own seed (never the inputs' stream). A loss's y is
    one number, summed in float64 whatever the precision; its g is of the precision running, as
    minitf's own 1.0 reads (NumPy takes a Python number in the arrays' dtype)."""
    with seed(seed_value + 1):
        return randn(*y.shape, dtype=y.dtype if y.ndim else float_dtype())


def _arrays_in(value, where: str) -> list:
    """[(where, array)] for the arrays in a cache. minitf builds its caches of arrays, numbers
    and tuples of them (attention's a namedtuple: its arrays are named by field)."""
    if is_array(value):
        return [(where, value)]
    if not isinstance(value, (tuple, list)):
        return []
    keys = [f".{k}" for k in value._fields] if hasattr(value, "_fields") else \
        [f"[{i}]" for i in range(len(value))]
    return [found for key, item in zip(keys, value) for found in _arrays_in(item, where + key)]


def _handed(dy, y, cache) -> dict:
    """{name: array}: what a backward is handed besides the forward's inputs -- dy, and in the
    cache the arrays the caller may still hold, the forward's output among them. Each array
    once, by its first name (softmax's cache holds its output itself)."""
    handed = {}
    for name, array in [("dy", dy), *_arrays_in(y, "the forward's output"),
                        *_arrays_in(cache, "cache")]:
        if all(array is not seen for seen in handed.values()):
            handed[name] = array
    return handed


def same(a, b) -> bool:
    """Equal entry by entry, a NaN equal to a NaN (a mask's −inf equals itself anyway)."""
    return bool(((a == b) | ((a != a) & (b != b))).all())


def run_backward(case, seed_value: int = 1, g=None) -> Backward:
    """Run a FunctionCase or ModuleCase forward (under ``seed_value``: dropout masks), then
    backward with the upstream gradient ``g`` (default: drawn under ``seed_value + 1``).

    backward gets a copy of g, so one that writes into its dy in place cannot change the loss
    the numerical gradient is taken of. That copy, the forward's output and the arrays in its
    cache are compared with what they were before, and ``changed`` holds what the backward wrote
    into: in a model such a write breaks a gradient, since a Residual sends the same dy down its
    identity path, and softmax's caller still holds the probabilities its cache keeps.
    """
    _check_case(case, "run_backward")
    module = case.module if isinstance(case, ModuleCase) else None

    def forward():
        """(y, cache) for a functional op; (y, None) for a module, which keeps its own cache."""
        with seed(seed_value):
            if module is not None:
                return module(*case.inputs.values(), **case.options), None
            out = case.forward(**case.inputs, **case.options)
        if not (isinstance(out, tuple) and len(out) == 2):
            # else "too many values to unpack", or a shape error far away in the comparison
            raise TypeError(f"FunctionCase: forward returned {_what(out)}; wanted (y, cache), "
                            f"as minitf's functional ops return")
        return out

    if module is not None:
        module.zero_grad()
    y, cache = forward()
    g = _upstream_gradient(y, seed_value) if g is None else g
    dy = g.copy()
    # a module's cache taken now: its backward pops it
    handed = _handed(dy, y, cache if module is None else vars(module).get("_cache"))
    before = {name: array.copy() for name, array in handed.items()}
    raw = case.backward(dy, cache) if module is None else module.backward(dy)
    returned = as_tuple(raw)
    if module is None:
        grads = dict(zip(case.wrt, returned))
        tensors = {name: (case.inputs[name], grads.get(name)) for name in case.wrt}
    else:
        grads = dict(zip(case.inputs, returned))
        tensors = {f"input {name}": (x, grads.get(name)) for name, x in case.inputs.items()}
        tensors.update({f"param {name}": (p.data, p.grad.copy())
                        for name, p in module.named_parameters()})
    changed = {name: array for name, array in handed.items() if not same(array, before[name])}
    return Backward(tensors, lambda: float((forward()[0] * g).sum()), g, returned, changed,
                    bare=not isinstance(raw, tuple))


def _nothing_overwritten(run: Backward, name: str) -> None:
    """A backward that wrote into what it was handed is refused, in one line: its gradients may
    be right here, and wrong in a model, where the caller still reads those arrays."""
    if run.changed:
        raise ValueError(f"{name}: backward changed {', '.join(run.changed)} in place; wanted "
                         f"new arrays (dx = dy * …, not dy *= …): its caller still reads them")


def check(name: str, case, seed_value: int = 1) -> list[Row]:
    """Check a FunctionCase (every input named in ``wrt``) or a ModuleCase (every float input
    and every parameter; integer ids have no gradient). The forward runs under ``seed_value`` (dropout masks), g is drawn
    under ``seed_value + 1``; build the inputs from another seed (0)."""
    _check_case(case, "check")
    run = run_backward(case, seed_value)
    _float64_only(run, name)
    _nothing_overwritten(run, name)
    rows = []
    for tensor, (x, dx) in run.tensors.items():
        if dx is not None:
            rows.append(Row(name, tensor, tuple(x.shape),
                            relative_error(dx, numerical_gradient(run.loss, x))))
        elif x.dtype.kind == "f":            # a float input left without its gradient fails
            rows.append(Row(name, tensor, tuple(x.shape), float("inf")))
    return rows


def _entry(flat: int, shape: tuple) -> tuple:
    """The index (i, j, …) of entry number ``flat`` of a C-ordered array of ``shape``. Plain
    integer arithmetic on the host: the same for a NumPy and a CuPy array, and no device sync."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def check_entries(name: str, case, per_tensor: int = 2, seed_value: int = 1) -> list[Row]:
    """``check`` for a model too big to difference every entry (a pretrained one: millions of
    weights, two forward passes each). For each tensor, the backward's gradient is computed in
    full, and central differences are taken at ``per_tensor`` entries only: the one with the
    largest gradient, then entries drawn at random. The error is measured as in ``check``,
    against the scale of the whole analytic gradient:

        max over the chosen i of |a_i − b_i|  /  max(1e-8, max_all |a| + max_chosen |b|)
    """
    _check_case(case, "check_entries")
    check_int(per_tensor, "per_tensor", "check_entries",
              what="the entries of each tensor to difference")
    run = run_backward(case, seed_value)
    _float64_only(run, name)
    _nothing_overwritten(run, name)
    xp = get_array_module(run.g)
    rows = []
    with seed(seed_value + 2):                  # which entries: its own stream, reproducible
        for tensor, (x, dx) in run.tensors.items():
            if dx is None:
                continue
            picks = [int(xp.abs(dx).argmax())] + [int(i) for i in
                                                  randint(0, dx.size, (per_tensor - 1,))]
            errors, numeric = [], []
            for i in picks:
                index = _entry(i, x.shape)
                original = float(x[index])
                x[index] = original + STEP
                plus = run.loss()
                x[index] = original - STEP
                minus = run.loss()
                x[index] = original
                numeric.append((plus - minus) / (2 * STEP))
                errors.append(abs(float(dx[index]) - numeric[-1]))
            scale = float(xp.abs(dx).max()) + max(abs(b) for b in numeric)
            rows.append(Row(name, tensor, tuple(x.shape), max(errors) / max(1e-8, scale)))
    return rows


def format_table(rows: list[Row], failing_only: bool = False) -> str:
    """The report a learner reads: check, tensor, shape, max relative error, ok/FAIL; with
    ``failing_only``, the FAIL rows alone (a whole model's 180 rows would bury its 6 failures),
    still counted against all of them."""
    if not isinstance(rows, (list, tuple)):
        raise TypeError(f"format_table: rows must be a list of Row, as check returns; got "
                        f"{_what(rows)}")
    for row in rows:
        if not isinstance(row, Row):
            raise TypeError(f"format_table: rows must be a list of Row, as check returns; got "
                            f"a list holding {_what(row)}")
    header = ("check", "tensor", "shape", "max rel error", "result")
    # an error of inf is no measurement (a missing gradient, one of the wrong shape or dtype, a
    # backward that raised): printed as "inf", it read as "infinitely wrong"
    lines = [(r.check, r.tensor, str(r.shape), f"{r.error:.2e}" if math.isfinite(r.error) else
              "—", "ok" if r.passed else "FAIL") for r in rows if not (failing_only and r.passed)]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*line) for line in lines]
    failed = sum(not r.passed for r in rows)
    out.append(f"\n{len(rows) - failed} of {len(rows)} tensors within {TOLERANCE:.0e}"
               + (f"; {failed} FAILED" if failed else "")
               + (" (only those are shown)" if failing_only and failed < len(rows) else ""))
    if any(line[3] == "—" for line in lines):
        out.append("— : no error measured: the gradient was missing, or could not be compared "
                   "with finite differences")
    return "\n".join(out)
