"""Which registry cases grade which exercise, found by running every case once and watching.

Each case of minitf.gradcheck_cases runs one forward and one backward pass under a profiler that
notes every Python function called inside the case's own backward, with its depth below it. Then

* an exercise is **graded** by the cases whose own backward it is -- and, for a functional op, by
  the case of the layer that only hands its work to it (Linear → linear_backward): one backward
  call, to that op;
* its **closure** is every case that calls it at any depth: the cases a blank body would fail.

No finite differences are taken, so tracing all cases takes a second or two; it is done once.
Traced is the minitf running: right for the reference, wrong for a homework copy, whose stubs
and answers cut each trace short -- so a homework fixes its cases when it is made (see
grading_cases).
"""
from __future__ import annotations

import functools
import inspect
import os
import sys

from minitf import gradcheck_cases
from minitf.backend import precision
from minitf.exercises.time_limit import TRACE_SECONDS, TookTooLong, time_limit
from minitf.gradcheck import ModuleCase, run_backward
from minitf.validate_gradients import is_gradient_check


# Only minitf's own functions are noted (the code graded is minitf's, or a homework copy of it):
# walking the callers of every call of a library's first import (SciPy's, for erf) took a case
# past its time limit.
_PACKAGE = os.path.dirname(os.path.dirname(__file__)) + os.sep     # as co_filename spells it


def _own_backward(case):
    """The code object of the function a case calls as its backward."""
    if isinstance(case, ModuleCase):
        return inspect.unwrap(type(case.module).backward).__code__     # inside Module's check
    return inspect.unwrap(case.backward).__code__                     # inside gradient_of's


def _trace(name: str) -> tuple:
    """(the case's own backward, {code: its smallest depth below it}) for one registry case."""
    with precision("float64"):
        case = gradcheck_cases.build(name)
    top = _own_backward(case)
    depths = {}

    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or not code.co_filename.startswith(_PACKAGE) or is_gradient_check(code):
            return
        # the depth counts the calls between, and a backward's dy check is not one of them
        depth, caller = 0, frame
        while caller is not None and caller.f_code is not top:
            depth += not is_gradient_check(caller.f_code)
            caller = caller.f_back
        if caller is not None:
            depths[frame.f_code] = min(depth, depths.get(frame.f_code, depth))

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with precision("float64"), time_limit(f"case {name}", TRACE_SECONDS):
            run_backward(case)
    except (Exception, TookTooLong):
        # a blank body, a wrong one or one that never returns (in a homework copy of minitf):
        # the calls up to it are traced, and its own exercise's grading says what went wrong
        pass
    finally:
        sys.setprofile(previous)
    return top, depths


@functools.lru_cache(maxsize=None)
def traces() -> dict:
    """{case name: (own backward, {code: depth})} for every registry case, traced once."""
    return {name: _trace(name) for name in gradcheck_cases.CASES}


def _hands_over_to(depths: dict):
    """The one backward a layer's backward calls directly, or None if it calls more or none."""
    called = {code for code, depth in depths.items()
              if depth == 1 and code.co_name.endswith("backward")}
    return called.pop() if len(called) == 1 else None


def grading_cases(exercise) -> tuple:
    """The registry cases that grade ``exercise``, in registry order: traced, except inside a
    homework copy, where they are those its homework.json fixed from the reference when the
    homework was made. Traced there, a stub or a student's answer stops each case at its first
    call, so a whole model's cut-short trace passes for a layer that hands over to that one
    backward, and an answer that loops is run once per case (minitf.homework.graded_by)."""
    from minitf.homework.graded_by import in_this_copy     # (it imports minitf.exercises)
    fixed = in_this_copy(exercise.name)
    return traced_grading_cases(exercise) if fixed is None else fixed


def traced_grading_cases(exercise) -> tuple:
    """The registry cases that grade ``exercise``, found by tracing the minitf running."""
    code = exercise.reference.__code__
    chosen = []
    for name, (top, depths) in traces().items():
        case_is_layer = top.co_name == "backward"
        if top is code or (not exercise.is_method and case_is_layer
                           and _hands_over_to(depths) is code):
            chosen.append(name)
    return tuple(chosen)


def homework_grading_cases(exercise) -> tuple:
    """The cases that grade ``exercise`` in a homework, in registry order: those that grade it
    anywhere (traced_grading_cases), and those of minitf's other code that calls its helpers
    itself (relative_attention_backward, attention_backward's two steps). A homework blanks the
    helpers with the exercise, so only there can these cases fail: an answer written inline,
    with its helpers left blank, would else pass, and then its relative attention fail."""
    from minitf.exercises.catalogue import EXERCISES
    helpers = {helper.__code__ for helper in exercise.helpers.values()}
    exercises = {e.reference.__code__ for e in EXERCISES}
    graded = set(traced_grading_cases(exercise))
    return tuple(name for name, (top, depths) in traces().items()
                 if name in graded or top not in exercises
                 and any(depths.get(code) == 1 for code in helpers))


def closure(exercise) -> tuple:
    """Every registry case whose backward calls ``exercise`` at any depth."""
    return reaching({exercise.reference.__code__})


def reaching(codes) -> tuple:
    """Every registry case whose backward calls any of the functions whose ``codes`` are given
    (a blank helper fails its callers as surely as a blank exercise)."""
    return tuple(name for name, (_, depths) in traces().items() if set(codes) & set(depths))
