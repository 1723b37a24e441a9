"""Exercises: write minitf's own backward passes yourself, and have them graded.

    minitf exercise list                  the catalogue, easiest first
    minitf exercise start NAME [--dir D]  write NAME's file: signature, forward, hint, no body
    minitf exercise check FILE            grade it by minitf's gradient checks

    catalogue   the exercises (Exercise, EXERCISES, find)
    tracing     which gradient-check cases grade each exercise, found by tracing the registry
    starter     the learner's file, and the same file answered (for an instructor)
    grade       the learner's function graded in place of minitf's own
    report      what the learner reads of it: the table, what went wrong, the verdict
    stand_in    putting it where minitf looks up its own, and noting which ran
    diagnose    the signatures of classic mistakes, as hints
    time_limit  an answer that never returns costs its own exercise; a whole grading's budget
"""
from __future__ import annotations

import textwrap

from minitf.exercises.catalogue import EXERCISES, LEVELS, Exercise, find
from minitf.exercises.grade import Result, StudentError, check_file, grade, load
from minitf.exercises.stand_in import standing_in
from minitf.exercises.starter import starter_text, write_starter
from minitf.exercises.tracing import closure, grading_cases

__all__ = ["EXERCISES", "LEVELS", "Exercise", "find", "Result", "StudentError", "check_file",
           "grade", "load", "standing_in", "starter_text", "write_starter", "closure",
           "grading_cases", "table"]


def _cells(exercise: Exercise, number: int) -> list:
    """One row of the table, each cell a list of lines."""
    return [[str(number)], [exercise.name], [f"{exercise.level} {LEVELS[exercise.level]}"],
            textwrap.wrap("; ".join(grading_cases(exercise)), 30),
            textwrap.wrap(exercise.teaches, 44)
            + textwrap.wrap("✗ " + exercise.mistake, 44, subsequent_indent="  ")]


def table() -> str:
    """The catalogue as a plain-text table: number, name, level, the cases that grade it, what
    it teaches and (✗) the classic mistake."""
    header = [["#"], ["exercise"], ["level"], ["graded by (gradcheck cases)"],
              ["teaches;  ✗ the classic mistake"]]
    rows = [_cells(e, i) for i, e in enumerate(EXERCISES, 1)]
    widths = [max(len(line) for row in [header, *rows] for line in row[c]) for c in range(5)]
    out = []
    for row in [header, *rows]:
        for i in range(max(len(cell) for cell in row)):
            parts = [(cell[i] if i < len(cell) else "").ljust(w) for cell, w in zip(row, widths)]
            out.append("  ".join(parts).rstrip())
        out.append("")
    return "\n".join(out).rstrip() + "\n\nstart one with 'minitf exercise start NAME'"
