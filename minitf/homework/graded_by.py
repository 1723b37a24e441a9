"""Which registry cases grade each catalogue exercise of a homework: fixed when it is made.

minitf.exercises.tracing finds them by running every registry case once and watching which
backward it calls. On the reference that is right. Inside a student's homework copy it is not:
a blank stub raises at its first call, so a whole model's trace stops there and looks like a
layer that hands its work to that one backward (linear_backward, graded by a few cases, seemed
graded by 10, DecoderLM's among them); and an answer that never returns is run case after case,
each under the trace's own limit, before any grading starts -- minutes of silence.

So ``homework make`` traces the reference once and writes what it found into homework.json:

    "graded by": {"relu_backward": ["relu", "ReLU"], "linear_backward": ["linear", ...], ...}

one list per exercise of the whole catalogue (not only the homework's: 'minitf exercise list'
inside the copy shows them all, and must trace nothing there either), each in registry order.
Every grading of the homework reads them from there -- the instructor's, the autograder's, a
student's inside the copy -- and never traces the code it grades. A homework.json written before
the cases were stored has no "graded by": it is graded by tracing, as it was then.
"""
from __future__ import annotations

import functools
import json
import reprlib

import minitf
from minitf import gradcheck_cases
from minitf.homework.handout import MANIFEST, PACKAGE, is_a_homework_copy

KEY = "graded by"


def reference() -> dict:
    """{exercise: [its cases]} for every catalogue exercise, traced from the minitf running
    (``homework make`` runs it on the reference only: it refuses a homework copy first)."""
    from minitf.exercises import EXERCISES
    from minitf.exercises.tracing import homework_grading_cases
    return {exercise.name: list(homework_grading_cases(exercise)) for exercise in EXERCISES}


def stored(data: dict, where, names=None) -> dict | None:
    """{exercise: (its cases)} as the manifest ``data`` (read from ``where``) holds them, or
    None when it holds none (written before they were stored: grade by tracing, as then).
    ``names``, the exercises about to be graded (default: every catalogue exercise of the
    homework), must each have cases, all of them in this minitf's registry.

    A case the registry lacks means the homework was made by another minitf: grading it by the
    cases this minitf would trace instead could grade a different thing than the homework's
    students were told (and the autograder's zip would carry the mismatch to every one of them),
    so this refuses, in one line, rather than falls back."""
    given = data.get(KEY)
    if given is None:
        return None
    if not isinstance(given, dict) or not all(
            isinstance(cases, list) and all(isinstance(c, str) for c in cases)
            for cases in given.values()):
        raise ValueError(f"{where}/{MANIFEST}: its {KEY!r} is {reprlib.repr(given)}; wanted "
                         f"{{exercise: [case names]}}, as 'minitf homework make' writes it")
    if names is None:
        names = [e["name"] for e in data["exercises"] if e.get("source") == "minitf"]
    for name in names:
        if not given.get(name):          # an empty list would grade nothing, and fail it
            raise ValueError(f"{where}/{MANIFEST}: no cases stored for {name} under {KEY!r}; "
                             f"wanted a list of them for each exercise, as 'minitf homework make' "
                             f"writes it (make the homework again)")
        unknown = [case for case in given[name] if case not in gradcheck_cases.CASES]
        if unknown:
            raise ValueError(f"{where}/{MANIFEST}: {name} is graded by the case {unknown[0]!r}, "
                             f"which this minitf ({minitf.__version__}) does not have (the "
                             f"homework was made by another version); wanted a homework made by "
                             f"this minitf: grade it with the minitf that made it, or make it "
                             f"again")
    return {name: tuple(cases) for name, cases in given.items()}


def in_this_copy(name: str) -> tuple | None:
    """The cases that grade exercise ``name`` when the minitf running is a homework copy whose
    homework.json stores them; None anywhere else (the reference; an older homework's copy)."""
    data = _this_copys_manifest()
    cases = None if data is None else stored(data, PACKAGE.parent, [name])
    return None if cases is None else cases[name]


@functools.lru_cache(maxsize=None)
def _this_copys_manifest() -> dict | None:
    """The homework.json beside the minitf running, read once ('exercise list' asks for every
    exercise); None where there is none, or none that reads ('homework grade .' says why)."""
    if not is_a_homework_copy():
        return None
    try:
        data = json.loads((PACKAGE.parent / MANIFEST).read_text(encoding="utf-8"))
        data["exercises"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return data
