"""What a learner reads of a grading: the table of every tensor checked, what went wrong and
where (their own lines of a traceback, not minitf's), then the verdict."""
from __future__ import annotations

import itertools
import traceback
from pathlib import Path

import minitf
from minitf.backend import backend_name, is_array
from minitf.exercises.catalogue import Exercise
from minitf.gradcheck import format_table

MESSAGE_CHARS = 300       # of an error's message (or a line of code) in a report: it is read
FRAMES_SHOWN = 12         # of the learner's frames, repeats counted: the first and last half
IN_FLOAT32 = ", in float32"   # a case's name once more in float32, in the table and the report
DESCRIBED_ITEMS = 6         # a tuple of a million Nones is not listed in full


def described(value) -> str:
    """What a backward returned, in a few words: "a tuple of 2: an array of shape (6, 3), None"."""
    def one(v):
        return f"an array of shape {tuple(v.shape)}" if is_array(v) else \
            "None" if v is None else f"a {type(v).__name__}"
    if isinstance(value, tuple):
        more = len(value) - DESCRIBED_ITEMS
        return f"a tuple of {len(value)}: " + ", ".join(one(v) for v in value[:DESCRIBED_ITEMS]) \
            + (f", … ({more} more)" if more > 0 else "")
    return one(value)


def capped(text: str) -> str:
    """``text`` cut to MESSAGE_CHARS, saying how much more there was: a message can be megabytes
    (raise ValueError('x' * 5_000_000)), and every report of it is kept in results.json."""
    cut = len(text) - MESSAGE_CHARS
    return text if cut <= 0 else f"{text[:MESSAGE_CHARS]}… ({cut} more characters cut)"


def error_message(err: BaseException) -> str:
    """'ValueError: its message', of the message its first line, capped."""
    try:
        text = str(err)
    except Exception:                    # an exception class of their own, its __str__ broken
        text = "(its message could not be made into text)"
    return f"{type(err).__name__}: {capped(text.splitlines()[0] if text else '')}".rstrip(": ")


def their_lines(err: BaseException, path: Path) -> list[str]:
    """The traceback of ``err``, cut down to the frames in the learner's file. A frame repeated
    in a row (a recursion: a thousand of them) is shown once and counted, as Python does, and of
    more than FRAMES_SHOWN the first and the last few are kept."""
    # resolved: a file loaded by a relative path runs under its absolute name
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if Path(f.filename).resolve() == Path(path).resolve()]
    runs = [(frame, len(list(run))) for frame, run in
            itertools.groupby(frames, lambda f: (f.lineno, f.name, f.line))]
    if len(runs) > FRAMES_SHOWN:
        half = FRAMES_SHOWN // 2
        hidden = sum(count for _, count in runs[half:-half])
        runs[half:-half] = [(None, hidden)]
    lines = []
    for frame, count in runs:
        if frame is None:
            lines.append(f"  … {count} more calls in {path.name} …")
            continue
        lineno, name, code = frame
        lines.append(f"  {path.name}, line {lineno}, in {name}\n    {capped(code or '')}")
        if count > 1:
            lines.append(f"  [Previous line repeated {count - 1} more times]")
    return lines + [error_message(err)]


BLANK = ("not written", "helper not written", "blocked")    # Result.kind of a stub that raised
LONG_TABLE = 30             # rows beyond which a failing report shows its FAIL rows only


def report(exercise: Exercise, result, path: Path | None = None) -> str:
    """What a learner reads: the table, then what went wrong and where, then the verdict."""
    if result.kind in BLANK and not result.rows:
        return f"{path.name if path else exercise.name}: {result.stopped}"
    source = f"from {path.name}" if path else "given"
    from minitf.homework.handout import is_a_homework_copy     # (it imports minitf.exercises)
    # an exercise of an instructor's file says what it stands in for itself
    stands_in = getattr(exercise, "stands_in", "stands in for minitf's own; everything else is "
                        + ("your copy of minitf" if is_a_homework_copy() else "minitf's"))
    lines = [f"exercise {exercise.name}: your {exercise.attribute} ({source}) {stands_in}",
             # the version, not the folder: a homework's reference lives where the student
             # must not be shown (and a path tells a learner nothing about the check)
             f"minitf {minitf.__version__}, {backend_name()}, float64, central differences, "
             f"a random upstream gradient (and each case once more in float32, for dtypes)"]
    if result.rows:         # a whole model's long table: its failures, not 180 rows to scan
        long = len(result.rows) > LONG_TABLE and any(not r.passed for r in result.rows)
        lines += ["", format_table(result.rows, failing_only=long)]
        dtype_only = sum(r.check.endswith(IN_FLOAT32) and r.tensor != "raised" and not r.passed
                         for r in result.rows)
        if dtype_only:      # "0 of 3 within 1e-06" read as wrong values where they were right
            lines.append(f"({dtype_only} FAILED in float32 only: in float64 their values pass; "
                         f"their dtype is what is wrong)")
    if result.problems:
        lines += ["", "what went wrong:"]
        shown = set()                    # a hint repeated case after case is said once
        for case, problem in result.problems:
            lines.append(f"  in case {case!r}, " + problem[0])
            lines += ["    hint: as above" if line in shown else f"    {line}"
                      for line in problem[1:]]
            shown.update(line for line in problem[1:] if line.startswith("hint:"))
    if result.stopped:
        lines += ["", result.stopped]
    verdict = "passes every check" if result.passed else "not yet: see what went wrong above"
    return "\n".join(lines + ["", f"{exercise.name}: {verdict}"])
