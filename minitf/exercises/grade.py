"""Grading a learner's file: their function stands in for minitf's own while the registry cases
that grade it run, and everything else -- every other backward pass included -- is minitf's own.
So one unfinished exercise never fails another, and a failure is always in the file being checked.

Standing in (minitf.exercises.stand_in) means replacing the reference wherever minitf looks it
up, and putting it back afterwards, also when the learner's code raises.
"""
from __future__ import annotations

import functools
import importlib.util
import inspect
import types
from dataclasses import dataclass, field
from pathlib import Path

from minitf import gradcheck_cases
from minitf.backend import is_array, precision, randn, seed
from minitf.data.text import read_utf8
from minitf.exercises.catalogue import Exercise, find
from minitf.exercises.diagnose import (assigned_not_added, in_another_order, miscounted,
                                       not_written, reused, shape_problem, stub_of, unusable,
                                       value_problem, written_in_place)
from minitf.exercises.report import (IN_FLOAT32, capped, described, error_message, report,
                                     their_lines)
from minitf.exercises.stand_in import noting_calls, standing_in
from minitf.exercises.starter import FENCE, starter_text
from minitf.exercises.time_limit import TookTooLong, time_limit
from minitf.exercises.tracing import grading_cases
from minitf.gradcheck import TOLERANCE, Row, numerical_gradient, relative_error, run_backward, same

OTHER_UPSTREAM_SEED = 7   # a second upstream gradient, to catch a backward that ignores it


class StudentError(Exception):
    """The learner's file cannot be graded (yet): the message says why, in their terms."""


@dataclass
class Result:
    rows: list = field(default_factory=list)        # gradcheck Rows, one per tensor checked
    problems: list = field(default_factory=list)    # (case, lines) for each failing tensor
    stopped: str | None = None                      # why grading stopped early (their code raised)
    # that why in a word, where it is not an error: 'not written' (the body is still the stub),
    # 'helper not written', 'blocked' (by another exercise's stub), 'not graded' (no time left)
    kind: str | None = None

    @property
    def passed(self) -> bool:
        return self.stopped is None and bool(self.rows) and all(r.passed for r in self.rows)


# ----------------------------------------------------------------------------------------------
# The learner's file
# ----------------------------------------------------------------------------------------------

def _exercise_of(path: Path, source: str) -> Exercise:
    """The exercise a file answers: its EXERCISE line, else its file name; one line saying
    which is missing when neither names one (a homework's file is graded by its homework)."""
    for line in source.splitlines():
        if line.startswith("EXERCISE = "):
            return find(line.split("=", 1)[1].split("#")[0].strip().strip("\"'"))
    try:
        return find(path.stem)
    except ValueError:
        homework = next((folder for folder in path.parents
                         if (folder / "homework.json").is_file()), None)
        if homework is not None:
            raise ValueError(f"{path.name} is a file of the homework in {homework}, which "
                             f"grades it: run 'python -m minitf homework grade .' there") from None
        raise ValueError(f"{path.name} has no EXERCISE line, and {path.stem!r} is no "
                         f"exercise's name; wanted a file that 'minitf exercise start NAME' "
                         f"wrote (its EXERCISE line says which exercise it answers)") from None


def read_python(path: Path, where: str, wanted: str) -> str:
    """The source of the Python file ``path``, or one line naming ``where`` (the argument), the
    file and ``wanted``: a name that does not end in .py, bytes that are not UTF-8."""
    if path.suffix != ".py":
        # Python imports no other name (importlib finds no loader for it); the usual cause is an
        # editor that added .txt to a name whose .py it showed as typed
        stem = path.stem[:-3] if path.stem.lower().endswith(".py") else path.stem
        hint = (f"export the notebook's code as {stem}.py" if path.suffix == ".ipynb" else
                f"rename it {stem}.py")
        raise ValueError(f"{where} {path}: not a .py file; wanted {wanted} ({hint})")
    return read_utf8(path, where)


def load(path) -> tuple:
    """(exercise, the learner's function) from the file at ``path``."""
    given, path = path, Path(path).resolve()
    if not path.is_file():      # named as given: the name alone looked right, in another folder
        got = "is a folder" if path.is_dir() else "no such file"
        base = path.name.removesuffix(".py")     # start writes a method's file with a _
        near = [name for name in (f"{base}.py", f"{base.replace('.', '_')}.py")
                if name != path.name and path.with_name(name).is_file()]
        got += f" (did you mean {near[0]}?)" if near else ""
        raise ValueError(f"FILE {given}: {got}; wanted an exercise file written by "
                         f"'minitf exercise start NAME'")
    source = read_python(path, "FILE", "the exercise file 'minitf exercise start NAME' wrote")
    exercise = _exercise_of(path, source)
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as err:
        raise StudentError(f"{path.name}, line {err.lineno}: {err.msg}\n    "
                           f"{capped((err.text or '').strip())}") from None
    module = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location(f"minitf_exercise_{path.stem}", path))
    try:
        exec(code, vars(module))
    except (Exception, SystemExit) as err:      # their module-level code; exit() ended the check
        raise StudentError("\n".join([f"{path.name} raised an error as it was loaded:",
                                      *their_lines(err, path)])) from None
    function = vars(module).get(exercise.attribute)
    if not callable(function):
        raise StudentError(f"{path.name}: defines no function {exercise.attribute}; wanted the "
                           f"one 'minitf exercise start {exercise.name}' wrote")
    return exercise, function


# ----------------------------------------------------------------------------------------------
# Grading
# ----------------------------------------------------------------------------------------------

def _arrays_of(case) -> dict:
    """The arrays a case's forward reads, by name, before anything runs: its inputs, a module's
    parameters, and options such as RoPE's cos and sin, which a backward may read too. (dy and
    the cache, which only the backward gets, run_backward compares itself.)"""
    arrays = {f"input {k}": v for k, v in case.inputs.items() if hasattr(v, "dtype")}
    arrays.update({f"option {k}": v for k, v in case.options.items() if hasattr(v, "dtype")})
    module = getattr(case, "module", None)
    if module is not None:
        arrays.update({f"param {k}": p.data for k, p in module.named_parameters()})
    return arrays


def _grade_case(exercise: Exercise, name: str, result: Result, reference=None) -> None:
    case = gradcheck_cases.build(name)
    before = {k: v.copy() for k, v in _arrays_of(case).items()}
    run = run_backward(case)
    # the forward's arrays first: a cache that holds one (linear's x) changes with it
    changed = {k: v for k, v in _arrays_of(case).items() if not same(v, before[k])} \
        or run.changed
    if changed:
        first = next(iter(changed))
        result.rows.append(Row(name, first, tuple(changed[first].shape), float("inf")))
        result.problems.append((name, written_in_place(changed)))
        return
    miscount = miscounted(exercise, case, run, reference)
    if miscount:
        result.rows.append(Row(name, "returned", (len(run.returned),), float("inf")))
        result.problems.append((name, miscount))
        return
    # a second backward, for another upstream gradient: what the first returned must not move
    first = {t: dx.copy() for t, (_, dx) in run.tensors.items() if is_array(dx)}
    with seed(OTHER_UPSTREAM_SEED):
        g = randn(*run.g.shape, dtype=run.g.dtype)
    other = run_backward(gradcheck_cases.build(name), g=g)
    moved = [t for t, dx in first.items() if not same(run.tensors[t][1], dx)]
    if moved:
        result.rows.append(Row(name, moved[0], tuple(first[moved[0]].shape), float("inf")))
        result.problems.append((name, reused(moved)))
        return
    numerics = {}
    failures = len(result.problems)
    # the tensors a value came back for, None included (the rest: too few were returned)
    slots = case.wrt if hasattr(case, "wrt") else [f"input {k}" for k in case.inputs]
    given = set(slots[:len(run.returned)])
    for tensor, (x, dx) in run.tensors.items():
        if x.dtype.kind != "f":                      # integer ids have no gradient
            if dx is not None:
                result.rows.append(Row(name, tensor, tuple(x.shape), float("inf")))
                result.problems.append((name, [
                    f"{tensor}: integer ids have no gradient, but one came back for them "
                    f"({described(dx)})", "hint: return None for ids"]))
            continue
        problem = shape_problem(tensor, x, dx, returned_none=tensor in given,
                                nothing_returned=run.bare and run.returned[0] is None,
                                upstream=exercise.upstream)
        error = float("inf")
        if not problem:
            numeric = numerics[tensor] = numerical_gradient(run.loss, x)
            error = relative_error(dx, numeric)
            if not error <= TOLERANCE:
                problem = value_problem(tensor, x, dx, numeric, other.tensors[tensor][1],
                                        exercise.mistake, exercise.upstream)
        result.rows.append(Row(name, tensor, tuple(x.shape), error))
        if problem:
            result.problems.append((name, in_another_order(tensor, dx, run, numerics, problem)
                                    or problem))
    if len(result.problems) == failures and getattr(case, "module", None) is not None:
        assigned = assigned_not_added(name, run.g)
        if assigned:                    # its own row: the .grad after a second backward
            tensor, shape, error, lines = assigned
            result.rows.append(Row(f"{name}, backward twice", tensor, tuple(shape), error))
            result.problems.append((name, lines))
    if len(result.problems) == failures:
        try:
            _grade_in_float32(name, result, exercise.upstream)
        except Exception as err:         # raised in float32 only: said so, not as float64's
            result.rows.append(Row(name + IN_FLOAT32, "raised", (), float("inf")))
            result.problems.append((name + IN_FLOAT32, [
                f"the backward raised an error in float32 (in float64 it ran): "
                f"{error_message(err)}", "hint: in float32 every array it is given is float32: "
                                          "one of a fixed dtype (np.zeros(shape), np.float64(…)) "
                                          "meets them there"]))


def _grade_in_float32(name: str, result: Result, upstream: str) -> None:
    """The case once more in float32, minitf's default, where the checks' float64 cannot see a
    gradient made of a fixed dtype (np.zeros(shape) is float64): each must keep its input's.
    A failing tensor's row is the float32 one, so the table counts each tensor once; every
    tensor of the wrong dtype is named (dW's np.zeros need not be db's)."""
    with precision("float32"):
        run = run_backward(gradcheck_cases.build(name, "float32"))
    for tensor, (x, dx) in run.tensors.items():
        if x.dtype.kind == "f" and is_array(dx) and dx.dtype != x.dtype:
            row = Row(name + IN_FLOAT32, tensor, tuple(x.shape), float("inf"))
            result.rows = [row if (r.check, r.tensor) == (name, tensor) else r
                           for r in result.rows]
            result.problems.append((name + IN_FLOAT32,
                                    shape_problem(tensor, x, dx, upstream=upstream)))


def run_cases(exercise, cases, path: Path | None = None, returned: list = (),
              reference=None, called: list = (), noted: set | None = None) -> Result:
    """Grade ``exercise`` by the registry ``cases``, as they are now: whatever stands in for
    what is the caller's business. ``exercise`` needs a name, an attribute, a mistake and an
    upstream (its helpers and stands_in are optional: see FileExercise). ``returned`` and
    ``called``: lists holding what the learner's function last returned and
    the (args, kwargs) it got in the case (see grade), to say what minitf could not use when it
    raises after that function returned; ``reference``: minitf's own function, to count what it
    returns and to say what it returns there. A case that never called the function checks the
    exercise's helpers (Exercise.helpers), through minitf's code that calls them: said so.
    ``noted``: the names of other exercises, failed before, that a case ran (noting_calls): a
    case that fails after running one says that one may be at fault."""
    result = Result()
    helpers = ", ".join(getattr(exercise, "helpers", {}))
    theirs = []                              # the cases that called the function itself
    for name in cases:
        for record in (returned, called, noted):
            if isinstance(record, (list, set)):
                record.clear()                   # what an earlier case left is not this one's
        failures = len(result.problems)
        try:
            _grade_case(exercise, name, result, reference)
        except (Exception, SystemExit) as err:   # an exit() ended the check, silently, with 0
            if stub_of(err, exercise) is not None:
                result.kind, result.stopped = not_written(exercise, stub_of(err, exercise),
                                                          str(err), name, entered=bool(called))
                break
            if helpers and not called:           # minitf's code called the helpers alone
                lines = their_lines(err, path) if path else [error_message(err)]
                result.stopped = "\n".join([
                    f"in case {name!r}, minitf's code called your {helpers} (not your "
                    f"{exercise.attribute}) and raised an error:", *lines,
                    "  hint: each must return what its docstring says", *_not_run(cases, name)])
                break
            where = f"in case {name!r}, your {exercise.attribute} raised an error"
            lines = their_lines(err, path) if path else [error_message(err)]
            after = len(lines) == 1       # none of their lines: minitf choked on what they gave
            what = f" ({described(returned[-1])})" if returned else ""
            hint = [f"  hint: minitf could not use what your {exercise.attribute} returned{what}: "
                    f"is each gradient the shape of its input, and are there as many as minitf's "
                    f"own returns?"] if after and path else []
            # NumPy's error names no gradient: the lines that do, where they can be worked out
            named = unusable(exercise, cases, returned[-1], called[-1], reference) \
                if hint and returned else []
            hint = [] if named and exercise.is_method else hint   # a .grad's line says the fix
            if not after and "() was called with no forward() since" in error_message(err):
                hint = ["  hint: your backward calls the backward of a layer that the forward "
                        "did not run, or calls one twice: undo the layers the forward ran, each "
                        "once, the last first"]
            result.stopped = "\n".join([where + (" (raised in minitf, after it returned):"
                                                 if after else ":"), *lines, *named, *hint,
                                         *_also_ran(noted), *_not_run(cases, name)])
            break
        if noted and len(result.problems) > failures:     # their hint is not the likeliest
            # for a wrong value only: a write in place, a miscount, a dtype are theirs alone
            result.problems[failures:] = [
                (case, [line for line in lines if not line.startswith("hint:")]
                 + [line.strip() for line in _also_ran(noted)])
                if ": worst entry " in lines[0] else (case, lines)
                for case, lines in result.problems[failures:]]
        if not (helpers and not called):
            theirs.append(name)
        if helpers and not called and len(result.problems) > failures:
            note = (f"(this case checks your {helpers}, which minitf's code calls itself, not "
                    f"your {exercise.attribute})")
            result.problems[failures:] = [(case, [note, *lines])
                                          for case, lines in result.problems[failures:]]
    return _narrowed(result, theirs)


def _not_run(cases, name: str) -> list[str]:
    """The line naming the cases after ``name`` that a case raising left unrun: the table above
    it is not the whole check."""
    rest = list(cases)[list(cases).index(name) + 1:]
    if not rest:
        return []
    shown = ", ".join(repr(case) for case in rest[:3]) + (f" and {len(rest) - 3} more"
                                                         if len(rest) > 3 else "")
    return [f"(not run after it: case{'s' if len(rest) > 1 else ''} {shown}; run the check "
            f"again once this one passes)"]


def _narrowed(result: Result, cases) -> Result:
    """A guessed hint ("perhaps the classic mistake …") of a case that fails where other cases
    of the exercise (``cases``: those that run the function itself) pass also says which pass:
    what the failing case adds (dropout, a mask, RoPE) is where to look first."""
    failing = {case.removesuffix(IN_FLOAT32) for case, _ in result.problems}
    passing = [case for case in cases if case not in failing]
    if result.stopped or not failing or not passing:
        return result
    others = f" and {len(passing) - 1} more" if len(passing) > 1 else ""
    focus = (f"; but case {passing[0]!r}{others} pass{'' if others else 'es'}: look first at what "
             f"the failing cases add")
    result.problems = [(case, [line + focus if line.startswith("hint: perhaps") else line
                               for line in lines]) for case, lines in result.problems]
    return result


def _also_ran(noted) -> list:
    """The hint of a case that ran other exercises of the learner's that failed before."""
    if not noted:
        return []
    names = ", ".join(sorted(noted))
    return [f"  hint: this case also runs your {names}, which failed its own checks above: fix "
            f"{'that' if len(noted) == 1 else 'those'} first, and this case may then pass"]


def grade(exercise: Exercise, function, path: Path | None = None, cases=None,
          helpers=None, failed=()) -> Result:
    """Run the cases that grade ``exercise`` (default: all of them) with ``function`` standing
    in for minitf's own, in float64, and ``helpers`` ({name: function}, the learner's own) for
    its helpers. ``path``, the learner's file, trims tracebacks to it. ``failed``: other
    exercises, the learner's own in their copy of minitf, that failed their checks before: a
    case that runs one of them says so (see noting_calls)."""
    cases = grading_cases(exercise) if cases is None else cases
    reference = exercise.reference              # taken now: standing in, the learner's is there
    if helpers:     # and with the names it calls as they are now: minitf's helpers, not theirs
        reference = types.FunctionType(reference.__code__, dict(reference.__globals__),
                                       reference.__name__, reference.__defaults__,
                                       reference.__closure__)
    returned, called = [], []

    @functools.wraps(function)
    def recording(*args, **kwargs):      # what it got and returned, for an error minitf raises
        called[:], returned[:] = [(args, kwargs)], []         # called, in this case, at least
        value = function(*args, **kwargs)
        returned[:] = [value]                                 # and it returned
        return value
    recording.stands_in_for = exercise.name     # a case whose backward is the learner's

    noted = set()            # and in their file's own globals, which bound minitf's when loaded
    in_their_file = [inspect.unwrap(function).__globals__]
    with precision("float64"), noting_calls(failed, noted, in_their_file), \
            standing_in(exercise, recording, helpers):
        return run_cases(exercise, cases, path, returned, reference, called, noted)


def check_file(path) -> tuple:
    """(report, exit status) for the learner's file at ``path``: 0 only when everything passes."""
    path = Path(path).resolve()
    try:
        with time_limit(f"your {path.name}"):          # its module-level code runs here
            exercise, function = load(path)
        # the cases first, outside the exercise's limit: traced, each case under its own limit
        # (limits never nest), or, inside a homework copy, as its homework.json fixed them
        cases = grading_cases(exercise)
        with time_limit(f"your {path.name}", exercise.seconds):
            result = grade(exercise, function, path, cases)
    except StudentError as err:
        return str(err), 1
    except TookTooLong as err:              # stopped where it was: the lines show which loop
        return "\n".join([f"{path.name} could not be graded:", *their_lines(err, path)]), 1
    if result.kind == "not written" and _below_the_end(exercise, path):
        result.stopped += ("; there is code below its END OF YOUR CODE line, which never runs "
                           "(the stub above it raises first): move it between the START and END "
                           "lines, in place of the stub")
    return report(exercise, result, path), 0 if result.passed else 1


def _below_the_end(exercise: Exercise, path: Path) -> bool:
    """Whether the learner's file has more code below its END OF YOUR CODE line, inside the
    function, than the starter has (lines of the reference after its solution region)."""
    def lines_below(text: str) -> int:
        lines = text.splitlines()
        end = lines.index(next(line for line in lines
                               if line.strip() == FENCE.format("END", exercise.name)))
        count = 0
        for line in lines[end + 1:]:
            if line.strip() and not line.startswith((" ", "\t")):
                break                                        # the function has ended
            count += bool(line.strip()) and not line.strip().startswith("#")
        return count
    try:
        return lines_below(read_utf8(path, "FILE")) > lines_below(starter_text(exercise))
    except StopIteration:                    # no END line: nothing to say about code below it
        return False
