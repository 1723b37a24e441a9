"""The reference's answers, kept from the code that is graded: while a student's file runs, a file
of minitf's own that holds this homework's solutions (or its compiled copy in __pycache__) may
not be opened by that code -- the four lines that loaded it by path and returned its answer
scored full marks, and a print of it reached the feedback the student reads.

    with reading_refused(student_file, solution_files) as read:
        ...                       # run the student's code
    read                          # the solution files it tried to open, refused ([] if none)

Python's audit hook sees every open (``open``, ``io.open_code``, an import by path) and this one
refuses those whose call stack holds a frame of the student's file: the grader's own reads (a
traceback's source lines, after the student's code has returned) go through. What the grader
read is then in ``linecache``, where ``inspect.getsource`` found it without opening anything:
while the block runs, that cache hides a solution file's lines from the student's code, which
must then open the file, and is refused. Only asking for the source (``inspect.getsource``)
counts as reading it: a traceback the student prints looks its lines up too, and is given
none, unscored. It narrows the way in, it does not close it: the code runs in the grader's
process, beside the reference's functions in memory (the README says so)."""
from __future__ import annotations

import linecache
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

_watching = {"student": None, "solutions": (), "read": None, "thread": None}
_installed = False


def _a_solution(path: str) -> Path | None:
    """The solution file ``path`` is, or is the compiled copy of; None for any other file."""
    name = os.path.basename(path)
    if not any(name.startswith(solution.stem + ".") for solution in _watching["solutions"]):
        return None                 # most opens: no path to resolve (an import opens dozens)
    opened = Path(os.path.realpath(path))
    for solution in _watching["solutions"]:
        compiled = (opened.parent == solution.parent / "__pycache__"
                    and opened.name.startswith(solution.stem + "."))
        if opened == solution or compiled:
            return solution
    return None


def _student_is_calling() -> bool:
    """Whether the call stack holds a frame of the student's file, or this is another thread
    than the grading one: a thread the student's code started (exec of a string as its target)
    holds no frame of their file, and the grader starts none while that code runs."""
    if threading.get_ident() != _watching["thread"]:
        return True
    frame = sys._getframe(2)
    while frame is not None:
        if os.path.realpath(frame.f_code.co_filename) == _watching["student"]:
            return True
        frame = frame.f_back
    return False


# inspect's ways of asking for a file's source (not findsource alone, which inspect.stack's
# context lines go through too); linecache's other readers, a traceback's lines, show a line
# here and there of what ran, and are not reading
_ASKING_FOR_SOURCE = ("getsource", "getsourcelines", "getcomments")


def _a_lookup_of_lines() -> bool:
    """Whether this open is linecache fetching a file's lines for a traceback or a frame's
    context, not for inspect.getsource and its kin."""
    frame, lookup = sys._getframe(2), False
    while frame is not None:
        name = os.path.basename(frame.f_code.co_filename)
        if name == "inspect.py" and frame.f_code.co_name in _ASKING_FOR_SOURCE:
            return False
        lookup = lookup or name == "linecache.py"
        frame = frame.f_back
    return lookup


# A process the student's code starts (a cat of the solution file) opens files this hook never
# sees. A backward pass needs none: starting one is refused while the student's code runs (the
# refusal is their error, not a 0).
_STARTS = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
           "os.forkpty")


def _refuse(event: str, args: tuple) -> None:
    if _watching["student"] is None:
        return
    if event in _STARTS:
        if _student_is_calling():
            raise PermissionError(f"the code being graded may not start a process ({event}): "
                                  f"what it reads there is not checked")
        return
    if event != "open":
        return
    path = args[0]
    if not isinstance(path, (str, bytes, os.PathLike)):
        return                                      # a file descriptor: nothing named
    solution = _a_solution(os.fsdecode(path))
    if solution is not None and _student_is_calling():
        if not _a_lookup_of_lines():                # a traceback printed: no lines, no 0
            _watching["read"].append(solution)
        raise PermissionError(f"{solution.name} holds minitf's own solutions, which the "
                              f"code being graded may not read")


def _names_a_solution(filename) -> bool:
    return isinstance(filename, str) and _a_solution(filename) is not None


class _LinesHidden(dict):
    """linecache.cache while a student's file runs: a solution file's lines are not there for
    the student's code (linecache then opens the file, which _refuse refuses), and are for the
    grader's."""

    def _hidden(self, filename) -> bool:
        return _names_a_solution(filename) and _student_is_calling()

    def __contains__(self, filename):
        return not self._hidden(filename) and dict.__contains__(self, filename)

    def __getitem__(self, filename):
        if self._hidden(filename):
            raise KeyError(filename)
        return dict.__getitem__(self, filename)

    def get(self, filename, default=None):
        return default if self._hidden(filename) else dict.get(self, filename, default)

    def _shown(self) -> dict:
        """The entries the caller may see: all of them but the solutions' for the student."""
        if not _student_is_calling():
            return dict(dict.items(self))
        return {k: v for k, v in dict.items(self) if not _names_a_solution(k)}

    def items(self):
        return self._shown().items()

    def values(self):
        return self._shown().values()

    def copy(self):
        return self._shown()


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)           # through links, and a hard link too
    except OSError:                             # one is not there: no file is both
        return False


@contextmanager
def reading_refused(student_file, solution_files):
    """While the block runs, code of ``student_file`` cannot open ``solution_files``. A student's
    file that is one of them (a link to it, or a hard link) has read it before the block starts:
    graded, it is the reference's answer. (The grader refuses links before; this is the last
    line: exempted, a link to the reference's linear.py scored full marks.)"""
    global _installed
    if not _installed:              # once a process: an audit hook cannot be removed
        sys.addaudithook(_refuse)
        _installed = True
    solutions = tuple(Path(os.path.realpath(f)) for f in solution_files)
    read = [solution for solution in solutions if _same_file(solution, student_file)]
    _watching.update(student=os.path.realpath(student_file), read=read, solutions=solutions,
                     thread=threading.get_ident())
    linecache.cache = _LinesHidden(linecache.cache)
    try:
        yield read
    finally:
        linecache.cache = dict(linecache.cache)
        _watching.update(student=None, solutions=(), read=None, thread=None)
