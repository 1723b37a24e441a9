"""What each exercise of a homework is worth: 1 point unless ``homework make --points`` says
otherwise, e.g. ``--points attention_backward=3,softmax_backward=1.5``.

The points are written into homework.json, one "points" per exercise, so that every grading of
the homework scores by them: the student's table, ``--json``'s results.json (each test's
``max_score``) and the autograder's on Gradescope. An exercise scores all of its points or none:
it passes when every tensor of every case is within tolerance. A homework.json written before
points existed has none: each exercise is worth 1, as then.
"""
from __future__ import annotations

import math
import reprlib

from minitf.validate import is_real_number

MOST = 1000                 # more is a typo (--points a=1e9), not a weight


WANTED = (f"wanted NAME=N pairs separated by commas, each N a number of points > 0 and "
          f"≤ {MOST}, e.g. attention_backward=3,softmax_backward=1.5")


def parse(text: str | None) -> dict:
    """{exercise name: points} from the command line's ``--points A=N,B=M`` (None: {})."""
    points = {}
    for pair in (text or "").split(","):
        if not pair.strip():
            continue
        name, equals, value = pair.partition("=")
        try:
            number = float(value) if equals else None
        except ValueError:
            number = None
        if not name.strip() or number is None:
            raise ValueError(f"--points: {pair.strip()!r} is no NAME=N; {WANTED}")
        if not _is_points(number):           # said as typed: check's would read '=-1.0'
            raise ValueError(f"--points: {pair.strip()}; {WANTED}")
        if name.strip() in points:          # the later would win, unsaid
            raise ValueError(f"--points: {name.strip()} is given twice; wanted each exercise "
                             f"once")
        points[name.strip()] = number
    return points


def check(points, names: list, where: str) -> dict:
    """``points`` ({name: number}) for a homework of the exercises ``names``: each name one of
    them, each number in (0, MOST]; -> {name: points} for every exercise, 1 where not given."""
    if not isinstance(points, dict):
        raise TypeError(f"{where}: points must be a dict {{exercise name: points}}; got "
                        f"{reprlib.repr(points)}")
    worth = {}
    for given, value in points.items():
        name = _named(given, names)
        if name is None:
            raise ValueError(f"{where}: {given!r} is no exercise of this homework; wanted one of "
                             f"{', '.join(names)}")
        if name in worth:
            raise ValueError(f"{where}: {name} is given twice; wanted each exercise once")
        if not _is_points(value):
            raise ValueError(f"{where}: {given}={value!r}; {WANTED}")
        worth[name] = value
    return {name: float(worth.get(name, 1)) for name in names}


def _named(given, names: list):
    """The exercise of ``names`` that ``given`` names, as --exercises reads a name: in any case,
    or as its file ("MultiHeadAttention_backward"). None if none."""
    if given in names:
        return given
    if not isinstance(given, str):
        return None
    from minitf.exercises import find
    try:
        given = find(given).name
    except ValueError:            # no catalogue exercise: an instructor's own, by its case
        pass
    return {name.lower(): name for name in names}.get(given.lower())


def _is_points(value) -> bool:
    return is_real_number(value) and math.isfinite(value) and 0 < value <= MOST


def of(entry: dict, where) -> float:
    """The points of one exercise of a manifest (read from ``where``): 1 when it names none."""
    value = entry.get("points", 1)
    if not _is_points(value):
        raise ValueError(f"{where}/homework.json: {entry.get('name')!r} is worth {value!r} "
                         f"points; wanted a number > 0 and ≤ {MOST}, as 'minitf homework make "
                         f"--points' writes it")
    return float(value)
