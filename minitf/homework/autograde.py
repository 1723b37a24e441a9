"""``minitf homework grade DIR``: grade every exercise of a homework directory, each on its own.

A catalogue exercise is graded by minitf.exercises' grader: the function is taken from the
submitted file (loaded by path, as a module of its own) and stands in for minitf's own only while
the registry cases that grade it run (those homework.json fixed, from the reference, when the
homework was made: see graded_by); everything else is the minitf that runs the grader. Run by
an instructor, that is the reference, so a blank or wrong softmax_backward never costs the
attention_backward exercise a point; run by a student inside the directory, it is their copy.

An exercise of an instructor's own file is graded by the file's ``check_<name>()``: it returns a
minitf.gradcheck FunctionCase or ModuleCase (or a dict of them, by label), built from the
submitted file, so the backward under test is the student's.

Each exercise scores its points (1 unless make's --points said otherwise: minitf.homework.points)
when every tensor of every case is within minitf's tolerance, else 0. minitf.homework.results
prints the table and puts the results in Gradescope's autograder format, which the journal
(minitf.homework.journal) writes to results.json.
"""
from __future__ import annotations

import importlib.util
import itertools
import json
import re
import reprlib
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from minitf import gradcheck_cases
from minitf.backend import is_array, precision, seed
from minitf.exercises import find, grade as grade_exercise
from minitf.exercises.grade import Result, run_cases
from minitf.exercises.report import report, their_lines
from minitf.exercises.time_limit import Budget, TookTooLong, seconds_for, time_limit
from minitf.exercises.tracing import traces
from minitf.gradcheck import FunctionCase, ModuleCase
from minitf.homework import graded_by, regions as R
from minitf.homework.guard import reading_refused
from minitf.homework.handout import (FORMAT, FORMAT_VERSION, MANIFEST, PACKAGE, check_name,
                                     is_a_homework_copy)
from minitf.homework.points import of as points_of
from minitf.homework.printed import Printed, kept
from minitf.homework.submission import NotGraded, graded_file, not_a_submission, unzipped
from minitf.validate import check_path

_loaded = itertools.count()



@dataclass(frozen=True)
class FileExercise:
    """What the shared grader needs to know of an exercise from an instructor's file."""
    name: str
    mistake: str = ""                               # no classic mistake known (diagnose._hint)
    upstream: str = "the upstream gradient"         # its name, in the hint for one ignoring it
    stands_in: str = "stands in for the instructor's answer; everything else is the homework's"

    @property
    def attribute(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def seconds(self) -> float:
        return seconds_for(None)


@dataclass
class Outcome:
    name: str
    result: Result
    report: str
    seconds: float
    edited: bool        # the file was changed outside its regions (reported, still graded)
    printed: str = ""   # what the exercise's code printed, as results.json shows it
    file_verdict: str = ""  # why its file was not graded, in a word: NotGraded.verdict
    points: float = 1.0     # what it is worth (homework.json's "points"), all or nothing
    warned: str = ""        # what its code wrote to standard error (warnings), as `printed`
    edited_at: str = ""     # where it was first edited outside its regions: "line 12"

    @property
    def score(self) -> float:
        return self.points if self.result.passed else 0.0


def manifest(folder: Path) -> dict:
    """The directory's homework.json, or a one-line error saying this is no homework directory."""
    if not Path(folder).is_dir():
        got = "is a file" if Path(folder).exists() else "no such folder"
        raise ValueError(f"{folder}: {got}; wanted a homework directory written by "
                         f"'minitf homework make'")
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["exercises"], data["frames"]        # both there, or this is something else
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f"{folder}: not a homework directory (no readable {MANIFEST}); wanted "
                         f"one written by 'minitf homework make'") from None
    _check_entries(data, folder)
    graded_by.stored(data, folder)      # its cases, in this minitf's registry: else one line
    for entry in data["exercises"]:     # and its points, before any exercise is graded
        points_of(entry, folder)
    return data


def _inside(file: str) -> bool:
    """Whether ``file`` names a path inside the homework directory, as make writes them."""
    parts = PurePosixPath(file).parts
    return bool(parts) and not PurePosixPath(file).is_absolute() and ".." not in parts \
        and "\\" not in file


def _check_entries(data: dict, folder) -> None:
    """One line for a homework.json whose exercises are not as make writes them (an entry
    edited by hand, or cut short): else a KeyError deep in the grading."""
    entries, frames = data["exercises"], data["frames"]
    wanted = ("wanted a list of {'name', 'file', 'source': 'minitf' or 'file'} entries, as "
              "'minitf homework make' writes it (make the homework again)")
    if not isinstance(entries, list):
        raise ValueError(f"{folder}/{MANIFEST}: its exercises are {reprlib.repr(entries)}; "
                         f"{wanted}")
    if not entries:                 # graded, none would be "score 0 of 0" and exit status 0
        raise ValueError(f"{folder}/{MANIFEST}: lists no exercises; wanted one or more, as "
                         f"'minitf homework make' writes it (make the homework again)")
    if data.get(FORMAT) != FORMAT_VERSION:      # another's fields would be misread, not refused
        raise ValueError(f"{folder}/{MANIFEST}: is of format {reprlib.repr(data.get(FORMAT))}; "
                         f"wanted {FORMAT_VERSION}, as 'minitf homework make' writes it (make "
                         f"the homework again with this minitf)")
    if not isinstance(frames, dict):
        raise ValueError(f"{folder}/{MANIFEST}: its frames are {reprlib.repr(frames)}; wanted "
                         f"{{file: fingerprint}}, as 'minitf homework make' writes it (make the "
                         f"homework again)")
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                and isinstance(entry.get("file"), str) and _inside(entry["file"])
                and entry.get("source") in ("minitf", "file")):
            raise ValueError(f"{folder}/{MANIFEST}: an exercise reads {reprlib.repr(entry)}; "
                             f"{wanted}")


def _load(path: Path):
    """The submitted file as a fresh module of its own (never the package it was copied from)."""
    spec = importlib.util.spec_from_file_location(f"minitf_homework_{next(_loaded)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def _registered(builders: dict):
    """Builders in minitf's case registry while the block runs, so the shared grader builds
    them (float64, seed 0) as it builds minitf's own."""
    gradcheck_cases.CASES.update(builders)
    try:
        yield list(builders)
    finally:
        for name in builders:
            gradcheck_cases.CASES.pop(name, None)


def _file_cases(module, name: str) -> dict:
    """{case name: builder} from the file's check_<name>(), which gives one case or a dict."""
    check = getattr(module, check_name(name))
    with precision("float64"), seed(0):        # the inputs minitf's own cases get: fixed
        built = check()
    built = built if isinstance(built, dict) else {"": built}
    for case in built.values():
        if not isinstance(case, (FunctionCase, ModuleCase)):
            raise TypeError(f"{check_name(name)}() returned {reprlib.repr(case)}; wanted a "
                            f"FunctionCase or a ModuleCase, or a dict of them")
        # float32 rounding swamps the tolerance: a right answer would fail, blamed on itself
        for key, x in case.inputs.items():
            if is_array(x) and x.dtype.kind == "f" and x.dtype.itemsize < 8:
                raise TypeError(f"{check_name(name)}(): its input {key!r} has dtype {x.dtype}; "
                                f"wanted float64, the only precision central differences can "
                                f"check (leave out the astype)")
    return {f"{name}: {label}" if label else name: (lambda case=case: case)
            for label, case in built.items()}


def _grade_one(entry: dict, path: Path, budget: Budget | None = None,
               solutions: tuple = (), fixed: tuple | None = None, failed=()) -> tuple:
    """(result, report) for one exercise of the manifest, graded from the file at ``path``
    within its own time limit, or what is left of ``budget`` if that is less; the code graded
    cannot open the reference's ``solutions`` (guard.py). A catalogue exercise is graded by
    the cases its homework ``fixed`` (None: traced, for a homework.json without them); a case
    of it that runs one of the exercises ``failed`` (before it, in a student's own copy) says
    so."""
    catalogue = entry["source"] == "minitf"
    exercise = find(entry["name"]) if catalogue else FileExercise(entry["name"])
    seconds, why = (budget or Budget()).limit(exercise.seconds)    # a loop that never ends
    read = []
    try:                                                             # costs its exercise alone
        with time_limit(exercise.name, seconds, why), reading_refused(path, solutions) as read:
            module = _load(path)
            if catalogue:
                owner = getattr(module, exercise.name.split(".")[0]) if exercise.is_method \
                    else module
                result = grade_exercise(exercise, _defined(owner, exercise.attribute, path),
                                        path, fixed, _helpers_of(module, exercise, path),
                                        failed)
            else:
                with precision("float64"), _registered(_file_cases(module, exercise.name)) \
                        as cases:
                    result = run_cases(exercise, cases, path)
    except (Exception, SystemExit, TookTooLong) as err:  # their file does not load, lost the
        #             function, calls exit() (which ended the grading with 0), or never returns
        result = Result(stopped="\n".join([f"{path.name} could not be graded:",
                                            *their_lines(err, path)]))
    if read:                    # whatever it then did with the refusal: it scores 0
        result = Result(stopped=f"your {path.name} tried to read minitf's own "
                                f"{read[0].parent.name}/{read[0].name}, which holds the "
                                f"solutions, while it was graded: {exercise.name} scores 0")
    return result, report(exercise, result, path)


def _defined(owner, name: str, path: Path):
    """The function ``name`` as the submitted file defines it; one line when it does not."""
    function = vars(owner).get(name)
    if function is None:
        raise ValueError(f"{path.name} defines no {name} (renamed or deleted?); "
                         f"wanted the file as the homework gave it, with its regions filled in")
    return function


def _helpers_of(module, exercise, path: Path) -> dict:
    """The submitted file's own helpers of the exercise (Exercise.helpers), by name: they are
    graded with it, through the minitf code that calls them too, so they stand in for minitf's
    (an exercise answered inline would else pass, its helpers still blank)."""
    return {name: _defined(module, name, path) for name in exercise.helpers}


def check_own_file(path: Path, names) -> None:
    """Refuse an instructor's file whose own answers fail their check_<name>(): graded as it is,
    with the solutions in place, every exercise must pass, or each student would be marked down
    for the check's fault (a wrong wrt, a case that is no case)."""
    for name in names:
        result, _ = _grade_one({"name": name, "source": "file"}, path)
        if not result.passed:
            why = (result.stopped.splitlines()[-1] if result.stopped else
                   f"{result.problems[0][0]}: {result.problems[0][1][0]}" if result.problems
                   else "it built no case to check")
            # raised in the file itself: its check, its answer or its import is at fault, and
            # its line says where (not "every answer would fail", which blames the answer)
            frames = re.findall(r"^  (\S.*), line (\d+), in (\S+)$", result.stopped or "", re.M)
            if frames:
                file, line, function = frames[-1]
                who = "importing it" if function == "<module>" else f"its {function}()"
                raise ValueError(f"--file {path}: graded with its own answers, {who} raised "
                                 f"{why.strip()} ({file}, line {line}); wanted a file that "
                                 f"grades its own answers without an error")
            raise ValueError(f"--file {path}: its own {name} fails {check_name(name)}(), so every "
                             f"answer would: {why.strip()}")


def grade(folder, submission=None, journal=None, budget=None) -> list[Outcome]:
    """Grade every exercise of the homework directory ``folder``, in the manifest's order; with
    ``submission``, each exercise's file is taken from that folder (or .zip) instead (see
    minitf.homework.submission).
    A ``journal`` (minitf.homework.journal) is told of each exercise before it runs and after,
    and skips those it already holds: a results.json that outlives a crash of this process.
    ``budget``: seconds the whole grading may take (from the journal's start, if there is one);
    exercises it leaves no time for are not graded (see time_limit.Budget)."""
    check_path(folder, "folder", "homework.grade")
    if submission is not None:
        check_path(submission, "submission", "homework.grade")
        if is_a_homework_copy():    # its blanks graded another's files, wrong, without a word
            raise ValueError(f"submission {submission}: another's files are graded by the "
                             f"reference minitf, and the one running is a homework copy "
                             f"({PACKAGE}); run it outside any homework directory")
    folder = Path(folder).resolve()
    data = manifest(folder)
    if (submission is not None and Path(submission).suffix.lower() == ".zip"
            and not Path(submission).is_dir()):
        with unzipped(Path(submission)) as folder_of_files:     # as Gradescope unpacks one
            return grade(folder, folder_of_files, journal, budget)
    if submission is not None and not Path(submission).is_dir():
        got = "is a file" if Path(submission).exists() else "no such folder"
        raise not_a_submission(submission, got)
    budget = Budget(budget, journal.started if journal is not None else None)
    # the reference's files of this homework's exercises, where the minitf running is the
    # reference (a student's own copy holds nothing to keep from them)
    own_copy = is_a_homework_copy()
    solutions = () if own_copy else tuple(
        PACKAGE.parent / e["file"] for e in data["exercises"] if e["source"] == "minitf")
    entries = [entry for entry in data["exercises"]
               if journal is None or entry["name"] not in journal.graded]
    # the cases the homework fixed when it was made: the code graded is never traced to choose
    # them (a loop in it would be run under every case's trace limit before any grading)
    fixed = graded_by.stored(data, folder)
    if fixed is None and any(entry["source"] == "minitf" for entry in entries):
        traces()            # an older homework.json: every case traced first, each under its
        #                     own limit, not an exercise's (limits never nest)
    outcomes = []
    for entry in entries:
        if journal is not None:
            journal.starting(entry["name"])
        try:
            outcome = _outcome(entry, folder, submission, data, budget, solutions,
                               None if fixed is None else fixed.get(entry["name"]),
                               _failed(outcomes, data) if own_copy else ())
        except KeyboardInterrupt:   # Ctrl-C (or their code's own): where it stopped, in words
            raise KeyboardInterrupt(f"interrupted (Ctrl-C) while grading {entry['name']}") \
                from None
        outcomes.append(outcome)
        if journal is not None:
            journal.finished(outcome)
    return outcomes


def _outcome(entry: dict, folder: Path, submission, data: dict, budget: Budget,
             solutions: tuple, fixed: tuple | None, failed) -> Outcome:
    """One exercise of the manifest graded: its file found (in ``submission``, if given), its
    regions put into the homework's frame, and graded by _grade_one; what it printed is kept."""
    start, printed, file_verdict = time.perf_counter(), Printed(sys.stdout), ""
    warned = Printed(sys.stderr)
    try:
        path = graded_file(folder, submission, entry["file"],
                           [e["file"] for e in data["exercises"]])
    except NotGraded as err:            # missing, no UTF-8, a link: one line, and its word
        path, not_graded = None, err
    if budget.left() <= 0:
        result = Result(stopped=budget.not_reached(entry["name"]), kind="not graded")
        text, edited = "", False
    elif path is None:
        result, text, edited = Result(stopped=str(not_graded)), "", False
        file_verdict = not_graded.verdict
    else:
        try:
            with _in_our_frame(folder / entry["file"], path, entry, submission) as graded, \
                    kept(printed, warned):
                result, text = _grade_one(entry, graded, budget, solutions, fixed, failed)
        except _RegionsChanged as err:
            result, text = Result(stopped=str(err)), ""
        edited, edited_at = edited_outside_regions(path, entry["file"], data)
    return Outcome(entry["name"], result, text or result.stopped, time.perf_counter() - start,
                   edited, printed.shown(), file_verdict, points_of(entry, folder), warned.shown(),
                   edited_at if edited else "")


def edited_outside_regions(path: Path, file: str, data: dict) -> tuple[bool, str]:
    """(whether the file graded as ``file`` was edited outside its regions, and where first:
    "line 12", or "" where homework.json, made before it kept each line's fingerprint, cannot
    tell). A byte-order mark (Windows' Notepad) is no edit: Python skips it."""
    try:                        # (a file its own code rewrote as no UTF-8: an edit too)
        text = path.read_text(encoding="utf-8-sig")
        if R.frame(text, path.name) == data["frames"].get(file):
            return False, ""
        stored = data.get("frame_lines", {}).get(file)
        return True, R.first_edit(stored, text, path.name) if isinstance(stored, list) else ""
    except ValueError:          # a fence moved or removed: the frame is broken
        return True, ""


def _failed(outcomes: list[Outcome], data: dict) -> list:
    """The catalogue exercises graded so far that failed: in a student's own copy, minitf's
    code runs their answers while it grades the next, which a wrong one can fail."""
    catalogue = {e["name"] for e in data["exercises"] if e["source"] == "minitf"}
    return [find(o.name) for o in outcomes if o.name in catalogue and not o.result.passed]


class _RegionsChanged(ValueError):
    """A submitted instructor's file whose solution regions are not the homework's."""


@contextmanager
def _in_our_frame(ours: Path, theirs: Path, entry: dict, submission):
    """The file to grade. A submitted copy of an instructor's own file (--file) is graded in the
    homework's frame with the insides of its regions (R.splice): the forward and the
    check_<name>() that grade it are then the instructor's, where the student's copy of them,
    edited, gave full marks to any answer; one whose regions were added, removed or lost cannot
    be spliced, and is not graded (_RegionsChanged). Everything else is graded as it is."""
    if submission is None or entry["source"] != "file" or not ours.is_file():
        yield theirs
        return
    try:
        spliced = R.splice(ours.read_text(encoding="utf-8"),
                           theirs.read_text(encoding="utf-8-sig"), theirs.name)
    except ValueError:                  # not UTF-8
        spliced = None
    if spliced is None:
        raise _RegionsChanged(f"{theirs.name}: its solution regions are not the homework's (a "
                              f"BEGIN or END SOLUTION line added, removed or changed), so its "
                              f"answers cannot be put in the homework's file to be graded")
    with tempfile.TemporaryDirectory() as scratch:
        graded = Path(scratch) / theirs.name        # the name the student knows, in reports
        graded.write_text(spliced, encoding="utf-8")
        yield graded
