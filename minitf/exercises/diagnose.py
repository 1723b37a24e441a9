"""What a wrong gradient looks like, and the sentence that tells a learner what to look at.

Each function gets the array a gradient is taken of (x), the learner's gradient (dx) and, for
values, the numerical one, and returns the lines of explanation -- empty when nothing is wrong.
The hints are signatures of the classic mistakes: all zeros, a constant factor, a transpose, a
gradient that ignores the upstream gradient, a wrong shape or dtype, NaN. Below them, the mistakes
a value check alone cannot see: gradients in another order, values returned beyond what minitf
reads (dropped unseen), a .grad assigned where it should be added into, and arrays the backward
was handed written into in place; what minitf could not use of what a backward returned; last,
which body still raises NotImplementedError: the exercise's, a helper's or another's it calls.
"""
from __future__ import annotations

import math

from minitf import gradcheck_cases
from minitf.backend import get_array_module, is_array, seed, to_numpy
from minitf.gradcheck import TOLERANCE, numerical_gradient, relative_error
from minitf.exercises.catalogue import EXERCISES, find
from minitf.exercises.report import described
from minitf.nn.module import as_tuple

_EXERCISE_NAMES = {exercise.name for exercise in EXERCISES}


def _index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _summable(got: tuple, wanted: tuple) -> bool:
    """Could ``wanted`` come from ``got`` by summing the axes a broadcast stretched?"""
    if len(got) < len(wanted):
        return False
    tail = got[len(got) - len(wanted):]
    return all(w in (g, 1) for g, w in zip(tail, wanted))


def shape_problem(name: str, x, dx, returned_none: bool = False,
                  nothing_returned: bool = False, upstream: str = "dy") -> list[str]:
    """Lines saying why ``dx`` cannot be the gradient of ``x`` at all (nothing, not an array,
    the wrong shape or dtype); [] when it is an array of x's shape and dtype. ``returned_none``:
    the backward returned None in x's place (not too few values); ``nothing_returned``: None
    was its whole return, the value of a body without a ``return``; ``upstream``: the name of
    the backward's upstream gradient (dy, dp, dout), whose dtype new arrays should take."""
    wanted = tuple(x.shape)
    if dx is None and nothing_returned:
        return [f"{name}: the backward returned None, no gradient at all (shape {wanted} "
                f"wanted)", "hint: a body without a return statement returns None: end it with "
                "return and the gradient"]
    if dx is None and returned_none:
        return [f"{name}: None came back for it, but the forward had {name} (shape {wanted}), "
                f"so it has a gradient", "hint: None is for an input the forward went without "
                "(linear with no b, attention with no bias), or for integer ids"]
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
        like = f"dtype={upstream}.dtype" if upstream.isidentifier() else "the upstream's dtype"
        hint = f"hint: make new arrays with {like} (or zeros_like), never a fixed dtype"
        if x.dtype.itemsize < dx.dtype.itemsize:     # float32 promoted by a float64 of theirs
            hint += (" -- NumPy computes float32 with a float64 in float64: an array made "
                     "without dtype= (np.zeros, np.full, np.eye), or a NumPy scalar such as "
                     "np.sqrt(2 / np.pi) (a Python number, math.sqrt(2 / math.pi), is not)")
        return [f"{name}: your gradient is {dx.dtype}, wanted {x.dtype} (the dtype of {name})",
                hint]
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
    if not mistake:                     # an instructor's exercise: no slip is known for it
        return "perhaps a slip no hint knows: compare each line with your derivation"
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


def miscounted(exercise, case, run, reference) -> list[str] | None:
    """Lines saying that a backward returned more than it should, or in another form, or None:
    the check pairs what came back with the inputs and dropped the rest unseen, and the answer
    then broke where minitf called it. A module's backward returns one gradient per input (None
    for ids), and nothing but None beyond them; where the learner's backward is the case's own,
    it returns what minitf's own (``reference``) returns for that case: one array, or a tuple
    of as many, with None where minitf's is None (attention's dbias when there is no bias: a
    caller tells from None that there is nothing to add). Too few is not said here: each
    missing one is "no gradient came back for it"."""
    back = run.returned[0] if run.bare else run.returned              # as backward gave it
    module = getattr(case, "module", None)
    if module is not None and not all(v is None for v in run.returned[len(case.inputs):]):
        return _returned_not(back, f"{len(case.inputs)}, one per input "
                                   f"({', '.join(case.inputs) or 'none'})")
    theirs = _reference_returns(exercise, case, run, reference)
    if theirs is None:
        return None
    mine, ours = len(run.returned), len(as_tuple(theirs))
    # too few is "no gradient came back" for a tensor, unless no tensor is left to say it: the
    # slots beyond are minitf's None (attention's dbias with no bias), or a list came back
    unseen = mine < ours and all(v is None for v in as_tuple(theirs)[mine:])
    if mine > ours or unseen or (mine == ours or not is_array(back)) and \
            isinstance(theirs, tuple) == run.bare:
        return _returned_not(back, f"{described(theirs)}, as minitf's own {exercise.name} returns")
    extra = [i for i, (given, own) in enumerate(zip(run.returned, as_tuple(theirs)), 1)
             if own is None and given is not None]
    if extra:
        return [f"the backward returned {described(run.returned[extra[0] - 1])} as its value "
                f"{extra[0]} of {len(run.returned)}, where minitf's own {exercise.name} "
                f"returns None in this case; wanted None there",
                "hint: None says there is no such gradient (no bias given, say): its caller "
                "reads it so, and adds nothing"]
    return None


def _returned_not(back, wanted: str) -> list[str]:
    return [f"the backward returned {described(back)}; wanted {wanted}",
            "hint: return what the docstring's -> line says: one array, or a tuple in that order"]


def _reference_returns(exercise, case, run, reference):
    """What minitf's own backward returns for the case, where the case's own backward is the
    learner's (a layer that calls theirs is not asked); None where it is not, or no reference.
    Run on the case's forward again, as run_backward ran it (the same dropout masks)."""
    module = getattr(case, "module", None)
    own = getattr(type(module), "backward", None) if module is not None else case.backward
    if reference is None or getattr(own, "stands_in_for", None) != exercise.name:
        return None
    with seed(1):
        if module is not None:
            module(*case.inputs.values(), **case.options)
            return reference(module, run.g.copy())
        _, cache = case.forward(**case.inputs, **case.options)
    return reference(run.g.copy(), cache)


def reused(moved: list) -> list[str]:
    """Lines for gradients that changed when the backward ran again: it returned an array it
    keeps (a buffer reused from call to call, or a view of one), which its next call rewrote."""
    return [f"{moved[0]}: your gradient changed when the backward ran again, for another upstream "
            f"gradient: it returned an array it keeps and writes into at the next call"
            + (f" (so did {', '.join(moved[1:])})" if moved[1:] else ""),
            "hint: return a new array from every call: a caller still holds the last one (a "
            "model adds up its blocks' gradients after all of them have run)"]


def assigned_not_added(name: str, g) -> tuple | None:
    """(tensor, shape, error, lines) when a second backward without zero_grad() leaves some
    .grad other than twice the first's -- the backward assigned it (=) instead of adding into it
    (+=) -- or None: the error is that of the .grad against twice the first. The checks start
    every .grad at zero, where the two are the same."""
    case = gradcheck_cases.build(name)
    module = case.module
    module.zero_grad()
    grads = []
    for _ in range(2):
        with seed(1):                                # the same dropout masks both times
            module(*case.inputs.values(), **case.options)
        module.backward(g.copy())
        grads.append({k: to_numpy(p.grad).copy() for k, p in module.named_parameters()})
    once, twice = grads
    for key in once:
        error = relative_error(twice[key], 2 * once[key])
        if error > TOLERANCE:
            return f"param {key}", once[key].shape, error, [
                f"param {key}: after two backwards without zero_grad() its .grad is not twice one "
                f"backward's: the backward assigns it instead of adding into it", "hint: add a "
                "parameter's gradient into its .grad (+=), never assign it (=): .grad adds up over "
                "micro-batches and over every use of a shared weight"]
    return None


def in_another_order(tensor: str, dx, run, numerics: dict, problem: list) -> list[str] | None:
    """Lines saying that the wrong ``dx`` is another tensor's gradient -- the gradients returned
    (or added into .grad) in another order -- or None. By shape where dx has another tensor's
    shape and ``problem`` (shape_problem's lines) has no hint of its own (a broadcast left
    unsummed, a transpose), else by value: it equals another tensor's numerical gradient (kept
    in ``numerics``, worked out here where not yet). The exercise's classic-mistake hint would
    otherwise send the learner looking for a mistake in a gradient that is right."""
    if not is_array(dx):
        return None
    for name, (y, _) in run.tensors.items():
        if name == tensor or y.dtype.kind != "f" or tuple(y.shape) != tuple(dx.shape):
            continue
        if tuple(dx.shape) != tuple(run.tensors[tensor][0].shape):      # another's shape
            if len(problem) > 1:
                return None
            match = f"has the shape of {name}"
        else:
            if not (_equals_numeric(dx, name, run, numerics)
                    and _misplaced(name, run, numerics)):
                continue
            match = f"is the gradient of {name}"
        order = ", ".join(n for n, (z, _) in run.tensors.items() if z.dtype.kind == "f")
        return [f"{tensor}: your gradient {match}, not of {tensor}",
                f"hint: gradients returned (or added into .grad) in another order? wanted in the "
                f"order {order}"]
    return None


def _equals_numeric(dx, name: str, run, numerics: dict) -> bool:
    """Whether ``dx`` is tensor ``name``'s numerical gradient (worked out once, into numerics)."""
    if name not in numerics:
        numerics[name] = numerical_gradient(run.loss, run.tensors[name][0])
    return relative_error(dx, numerics[name]) <= TOLERANCE


def _misplaced(name: str, run, numerics: dict) -> bool:
    """Whether what came back for ``name`` is in turn another tensor's gradient: a swap, or a
    longer cycle. A wrong gradient that only happens to equal another tensor's (a bias's Σ dy,
    which is also a LayerNorm β's) is no order, and is not called one."""
    given = run.tensors[name][1]
    return is_array(given) and any(
        other != name and z.dtype.kind == "f" and tuple(z.shape) == tuple(given.shape)
        and _equals_numeric(given, other, run, numerics)
        for other, (z, _) in run.tensors.items())


def written_in_place(changed) -> list[str]:
    """Lines saying that a backward wrote into arrays it was handed, named in ``changed``: its
    gradients can be right in the check and wrong in a model, whose other layers read those
    arrays after it returns (the check compares copies taken before the backward ran)."""
    names = ", ".join(changed)
    if "dy" in changed:
        why = ("its caller still reads dy after it returns (a Residual sends the same dy down "
               "its identity path)")
    elif any(name.startswith("the forward's output") for name in changed):
        why = "its caller still holds that output (softmax's cache keeps its output p itself)"
    elif any(name.startswith("cache") for name in changed):
        why = "a cache holds the forward's arrays, which its caller may still hold"
    else:
        why = "the forward's caller still holds them"
    return [f"your backward changed {names} in place; {why}",
            "hint: never write into what a backward is handed (dy *= …, p *= …, out=…); make "
            "new arrays (dx = dy * …)"]


def unusable(exercise, cases, theirs, call: tuple, reference) -> list[str]:
    """Lines naming what minitf could not use of ``theirs``, what the learner's function returned
    for ``call`` (args, kwargs), by what minitf's own (``reference``) returns for it: None where
    it returns a gradient, another shape. The gradients are named by the exercise's functional
    case among ``cases`` ('linear': x, W, b). For a method (the cache it popped is gone), the
    parameters' .grad it set to another shape. [] when nothing is found, and for an
    instructor's file (no reference)."""
    if exercise.is_method:            # self.W.grad = …: assigned, of another shape than W
        return [f"  param {name}: your {exercise.attribute} set its .grad to shape "
                f"{tuple(p.grad.shape)}, wanted {tuple(p.data.shape)}, {name}'s own: add into "
                f"self.{name}.grad (+=), never assign it"
                for name, p in call[0][0].named_parameters()
                if tuple(getattr(p.grad, "shape", ())) != tuple(p.data.shape)]
    if reference is None:
        return []
    try:
        ours = as_tuple(reference(*call[0], **call[1]))
    except Exception:              # their function changed what it was handed, say: no more to say
        return []
    theirs = as_tuple(theirs)
    if len(theirs) != len(ours):
        return []                     # the hint under these lines says what came back
    functional = (gradcheck_cases.build(name) for name in cases)
    names = next((tuple(case.wrt) for case in functional
                  if getattr(getattr(case, "backward", None), "stands_in_for", None)
                  == exercise.name), ())
    lines = []
    for i, (got, wanted) in enumerate(zip(theirs, ours)):
        name = names[i] if i < len(names) else f"gradient {i + 1} of {len(ours)}"
        if not is_array(wanted):
            continue
        shape, attribute = tuple(wanted.shape), exercise.attribute
        if got is None:
            lines.append(f"  {name}: None came back for it, but this forward had {name}: "
                         f"minitf's own {attribute} returns its gradient here, of shape {shape}")
        elif not is_array(got) or tuple(got.shape) != shape:
            got = f"has shape {tuple(got.shape)}" if is_array(got) else f"is {described(got)}"
            lines.append(f"  {name}: your gradient {got}, wanted {shape}: the shape minitf's "
                         f"own {attribute} returns here")
    return lines


def stub_of(err: BaseException, exercise) -> str | None:
    """The exercise whose untouched stub raised ``err``, or None. A stub raises
    NotImplementedError("NAME: …"), NAME this exercise or another of the catalogue (a homework's
    region says its hint after the colon, an instructor's "not written yet"); a
    NotImplementedError of the learner's own ("dropout: later") is an error their code raised."""
    if not isinstance(err, NotImplementedError):
        return None
    named, colon, rest = str(err).partition(":")
    named, rest = named.strip(), rest.strip()
    if colon and (named == exercise.name or named in _EXERCISE_NAMES
                  or rest == "not written yet") and _a_stub_says(named, rest):
        return named
    return None


def _a_stub_says(named: str, rest: str) -> bool:
    """Whether ``rest`` is what a stub says after its "NAME:": "not written yet" (a starter's,
    an instructor's), the exercise's hint (a homework's), or that a helper "is part of this
    exercise". Anything else is the learner's own words ("relu_backward: I still need …")."""
    hint = " ".join(find(named).hint.split()) if named in _EXERCISE_NAMES else None
    return rest in ("not written yet", hint) or " is part of this exercise" in rest


def not_written(exercise, named: str, stub: str = "", case: str = "",
                entered: bool = True) -> tuple[str, str]:
    """(kind, message): which body still raises -- this exercise's ('not written'), one of its
    helpers' ('helper not written'; a homework's stub says "NAME: HELPER is part of this
    exercise; …"), or (when a learner grades against their own copy of minitf) another
    exercise's that it, or (``entered`` False) the case, calls ('blocked')."""
    helper, part, _ = stub.partition(":")[2].partition(" is part of this exercise")
    if part:
        # minitf's other code calls a helper too: an answer written inline does not make it
        whose = f"{named}'s helper {helper.strip()}"
        if named != exercise.name:
            return "blocked", f"{whose} is not written yet, and {exercise.name} calls it"
        return "helper not written", (f"{whose} is not written yet: it is part of the exercise "
                                      f"(case {case!r} calls it, and an answer written without "
                                      f"it does not stand in for it); write its body too")
    if named != exercise.name:
        caller = exercise.name if entered else f"case {case!r}"     # relative attention's
        return "blocked", f"{named} is not written yet, and {caller} calls it"
    return "not written", (f"{exercise.name} is not written yet (its body still raises "
                           f"NotImplementedError)")
