"""A results.json that outlives the grading process: a student's code that ends it (``os._exit()``,
a crash in compiled code, the out-of-memory killer) costs its own exercise, not every score.

The grader runs each submission in its own process, so nothing can stop such code from ending
that process; what it can do is never hold the results in memory alone. With ``--json FILE``,
before each exercise is graded:

    FILE           is rewritten as it would stand if the process ended now: the exercises graded
                   so far, the one about to run at 0 and why, the rest at 0, not reached
    FILE.progress  records the exercises graded so far and the one about to run

and once all are graded FILE is written in full and FILE.progress removed. A FILE.progress left
behind means the process ended inside the exercise it names. ``--resume`` (run_autograder adds it
when it finds one) keeps the exercises already graded as they were, scores that one 0, saying
why, and grades the rest in the new process. Every resumed run either blames one more exercise
or removes FILE.progress and stops (the process ended between two exercises, with nothing to
blame, or the file is another grading's), so a loop of resumed runs ends after at most one run
more than there are exercises; run_autograder also ends it at a run that changed nothing (one
that could not write, or a FILE.progress that no grading wrote, which is refused and kept).
"""
from __future__ import annotations

import json
import math
import re
import signal
import time
from pathlib import Path

from minitf.data.text import write_utf8
from minitf.exercises.time_limit import ENDED_STATUS
from minitf.homework.autograde import Outcome
from minitf.homework.results import gradescope_results, gradescope_test


def progress_file(path: Path) -> Path:
    """Where the journal of ``--json path`` keeps its progress: beside it."""
    return path.with_name(path.name + ".progress")


def check_replaceable(path: Path) -> None:
    """ValueError unless ``path`` is free or holds a results.json that a grading wrote: --json
    rewrites its file before every exercise, and a mistyped one (the homework's homework.json, a
    student's solution) would otherwise be lost."""
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):    # nothing to lose
        return                                       # (an empty file: --json "$(mktemp)")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        # Gradescope's format: the tests, each with its score (the total may be left to them);
        # other tools' reports hold a list of tests too (pytest-json-report's have no score)
        tests = results.get("tests") if isinstance(results, dict) else None
        ours = isinstance(tests, list) and bool(tests) and all(        # a grading grades one
            isinstance(t, dict) and "score" in t for t in tests)
    except (OSError, ValueError, RecursionError):        # unreadable, not UTF-8, not JSON
        ours = False
    if not ours:
        raise ValueError(f"--json {path}: already holds a file that is not a results.json a "
                         f"grading wrote; wanted a new file name, or an earlier results file to "
                         f"replace")


PROGRESS_KEYS = ("tests", "running", "seconds", "note", "started")


def _progress_in(path: Path):
    """What ``path`` holds if a journal wrote it (a JSON object of PROGRESS_KEYS), else None.
    Its "of" (which grading it was) is not asked for here: a journal's file without one is still
    a journal's, to be replaced, and _take_up finds it of no use."""
    try:
        left = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):        # unreadable, not UTF-8, not JSON
        return None
    return left if isinstance(left, dict) and all(k in left for k in PROGRESS_KEYS) else None


def _check_progress_replaceable(progress: Path, left) -> None:
    """The journal writes ``progress`` before every exercise and removes it at the end: a file
    of that name that no journal wrote (someone's notes) would be lost. (``left``: what it holds,
    read from its absolute path; ``progress``: its name as the user typed it, for the message.)"""
    if progress.exists() and left is None:
        raise ValueError(f"--json: {progress}, where the grading keeps its progress, holds a "
                         f"file that no grading wrote; wanted it moved, or another --json name")


def _ended_inside(name: str, resumed: bool, status: int | None = None) -> str:
    """Why ``name`` scores 0: the process grading it ended. With the exit status that
    run_autograder saw (``--ended-with``), the likely cause; without it, every cause there is."""
    if status is None:
        how = ("(its code called os._exit(), crashed in compiled code, used more memory than "
               "the grader has, raised KeyboardInterrupt, held one call past the grading's time, "
               "or caught the stop at its time limit and ran on)")
    else:
        how = f"(exit status {status}: {ending(status)})"
    return (f"{name} could not be graded: the grading process ended while it ran, so it scores 0 "
            f"{how}" + ("; the grading went on in a new process" if resumed else ""))


# What an exit status most likely means here. A shell reports a process ended by signal N as
# 128 + N; 124 is the grader's own watchdog (time_limit.ENDED_STATUS), and 137 also the kill
# that run_autograder sends a grading still running past its budget.
_ENDINGS = {
    ENDED_STATUS: "its code caught the stop at its time limit and ran on, or held one call past "
                  "it, and the grader ended the process",
    128 + 2: "a KeyboardInterrupt or Ctrl-C (SIGINT)",
    128 + 6: "an abort in compiled code (SIGABRT)",
    128 + 7: "a crash in compiled code (SIGBUS)",
    128 + 8: "a crash in compiled code (SIGFPE)",
    128 + 9: "killed (SIGKILL): its code held one call past the grading's time, or used more "
             "memory than the grader has",
    128 + 11: "a crash in compiled code (SIGSEGV, a segmentation fault)",
}


def ending(status: int) -> str:
    """The likely cause of a grading process's end, from its exit status, in a few words."""
    if status in _ENDINGS:
        return _ENDINGS[status]
    if status > 128:
        try:
            return f"ended by the signal {signal.Signals(status - 128).name}"
        except ValueError:
            return f"ended by signal {status - 128}"
    return "its code ended the process itself (posix._exit, or a thread's os._exit)"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _dumped(data, **layout) -> str:
    """``data`` as JSON text that UTF-8 can hold: a lone surrogate (in what a student's code
    printed or raised, from bytes that were not UTF-8) becomes U+FFFD, where it would stop the
    write, and with it the grading, for a right answer."""
    return _LONE_SURROGATE.sub("\ufffd", json.dumps(data, ensure_ascii=False, **layout)) + "\n"


def _zero(name: str, why: str, points: float) -> dict:
    """A test of Gradescope's results.json that scores 0 of its ``points``, saying ``why``."""
    return {"name": name, "score": 0.0, "max_score": points, "status": "failed", "output": why}


def _is_test(test) -> bool:
    """A test of Gradescope's results.json as this journal writes one."""
    return (isinstance(test, dict) and isinstance(test.get("name"), str)
            and all(isinstance(test.get(k), (int, float)) for k in ("score", "max_score"))
            and all(isinstance(test.get(k), str) for k in ("status", "output")))


class Journal:
    """Told of each exercise by ``homework.grade`` before it runs (``starting``) and after
    (``finished``); ``close()`` writes the results in full. ``graded`` holds the names already
    graded, by this process or by one that ended, which ``grade`` skips."""

    def __init__(self, path, names: list[str], resume: bool = False, of: str = "",
                 points: dict | None = None, ended_with: int | None = None):
        check_replaceable(Path(path))     # named as typed
        # absolute: a student's code may change the working directory while it is graded
        self.path = Path(path).absolute()
        self.progress = progress_file(self.path)
        self.names = list(names)
        self.points = {name: (points or {}).get(name, 1.0) for name in names}   # max_score each
        self.of = of             # what is graded (the folders): a progress of another is refused
        self.tests, self.seconds, self.note = [], 0.0, ""       # Gradescope's tests, so far
        self.started = time.time()          # the grading's start, for its budget: the first run's
        left = _progress_in(self.progress)
        _check_progress_replaceable(progress_file(Path(path)), left)      # named as typed
        if resume and left is not None:
            self._take_up(left, ended_with)

    @property
    def graded(self) -> set[str]:
        return {test["name"] for test in self.tests}

    def _take_up(self, left: dict, status: int | None) -> None:
        """The tests a process that ended had graded, and a 0 for the one it ended inside
        (``status``: that process's exit status, where the caller knows it)."""
        try:
            tests, running, seconds, note, started = (
                left["tests"], left["running"], float(left["seconds"]), str(left["note"]),
                float(left["started"]))
            names = [t["name"] for t in tests] + ([] if running is None else [running])
            known = (set(names) <= set(self.names) and len(set(names)) == len(names)
                     and all(map(_is_test, tests)) and math.isfinite(seconds + started)
                     and started <= time.time() and left["of"] == self.of)
        except Exception:        # a journal's keys, but values no journal wrote
            known = False
        if not known:            # of no use, and removed: a loop of resumed runs ends here
            self.progress.unlink(missing_ok=True)
            raise ValueError(f"--resume: {self.progress} is not the progress of this homework's "
                             f"grading (removed); wanted the one its --json run left behind")
        if running is None:      # it ended between two exercises: no one to blame, and removed
            self.progress.unlink()
            raise ValueError(f"--resume: the grading process ended outside any exercise "
                             f"({self.path} holds what it had graded); nothing to resume")
        self.tests, self.seconds, self.started = tests, seconds, started
        self.tests.append(_zero(running, _ended_inside(running, True, status),
                                self.points[running]))
        self.note = note + f"; the grading process ended inside {running}" + (
            "" if status is None else f" (exit status {status})")
        self._write_progress(None)       # taken up: a crash before the next one blames no one

    def _write_progress(self, running: str | None) -> None:
        write_utf8(self.progress, _dumped({"tests": self.tests, "running": running,
                                           "seconds": self.seconds, "note": self.note,
                                           "started": self.started, "of": self.of}),
                   "--json")

    def _write_results(self, tests: list[dict]) -> None:
        write_utf8(self.path, _dumped(gradescope_results(tests, self.seconds, self.note),
                                      indent=2), "--json")

    def starting(self, name: str) -> None:
        """Before ``name`` runs: the progress, and the results as they stand if it never ends."""
        self._write_progress(name)
        graded = self.graded
        rest = [n for n in self.names if n not in graded and n != name]
        self._write_results(self.tests + [
            _zero(name, _ended_inside(name, resumed=False), self.points[name])] + [
            _zero(n, f"{n} was not graded: the grading process ended inside {name}, before it "
                     f"reached {n}", self.points[n]) for n in rest])

    def finished(self, outcome: Outcome) -> None:
        self.tests.append(gradescope_test(outcome))
        self.seconds += outcome.seconds

    def close(self) -> None:
        """Every exercise graded: the results in full, and no progress left to take up."""
        self._write_results(self.tests)         # in the manifest's order, as they were graded
        self.progress.unlink(missing_ok=True)
