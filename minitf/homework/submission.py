"""Where a student's files are: a submission folder as Gradescope hands it to the autograder, or
the .zip a student uploaded (which Gradescope unpacks first, and ``homework grade --submission
FILE.zip`` unpacks the same way, into a folder of its own that is removed afterwards)."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path

from minitf.data.text import read_utf8
from minitf.rundir import alive

UNPACKED_LIMIT = 200 << 20       # bytes a submission may unpack to: a homework is a few MB
_UNPACKED = "minitf-submission-"  # + the grading process's id + a random part


class NotGraded(ValueError):
    """A homework file that cannot be graded, in one line, and the ``verdict`` the results
    table shows for it ('missing', 'unreadable', ...): a student reads that word first."""

    def __init__(self, message: str, verdict: str):
        super().__init__(message)
        self.verdict = verdict


def graded_file(folder: Path, submission, file: str, homework_files=()) -> Path:
    """The file to grade for the homework file ``file``: the homework directory ``folder``'s own,
    or, with a ``submission`` folder, the student's copy in it (find_submitted). NotGraded when
    there is none, when it is a link (_no_link), or when it is no UTF-8 text, which Python could
    read (UTF-16 would be a SyntaxError, blamed on the student's code)."""
    root = folder if submission is None else Path(submission)
    path = root / file if submission is None else find_submitted(root, file, homework_files)
    if path is None or not (path.is_file() or path.is_symlink()):  # a link to nothing: a link
        raise NotGraded(f"{file}: missing" + ("" if submission is None else
                                               f" from the submission, which "
                                               f"{what_it_holds(root)}"), "missing")
    _no_link(root, path, file)
    try:
        read_utf8(path, file + ": the submission's")
    except (ValueError, OSError) as err:
        raise NotGraded(str(err), "unreadable") from None
    return path


def _no_link(root: Path, path: Path, file: str) -> None:
    """NotGraded for a ``path`` that is a symbolic link, or that lies outside ``root`` through
    one (a linked folder): a linear.py that linked to the autograder's own reference file
    scored full marks, the answers being the reference's. What is graded is the student's text,
    inside what they handed in."""
    if path.is_symlink():
        got = f"is a symbolic link (to {os.readlink(path)})"
    elif not path.resolve().is_relative_to(root.resolve()):
        got = f"lies outside it, through a linked folder (in {path.resolve().parent})"
    else:
        return
    raise NotGraded(f"{file}: the submission's {path.relative_to(root).as_posix()} {got}; "
                    f"wanted the file itself, not a link to one", "refused")


def find_submitted(submission: Path, file: str, homework_files=()) -> Path | None:
    """The student's copy of the homework file ``file`` (e.g. 'minitf/functional/softmax.py') in
    a submission folder: at that path, or under a folder of its own (an uploaded directory), or
    the one file of that name anywhere (files uploaded one by one arrive side by side) -- unless
    another of the ``homework_files`` has that name too: only its folder tells the two apart.
    A file that is a link, or lies outside the submission through one, is refused (_no_link)."""
    exact = submission / file
    if exact.is_file():
        _no_link(submission, exact, file)
        return exact
    name = Path(file).name
    found = sorted(p for p in submission.rglob(name) if p.is_file())
    tails = [p for p in found if p.as_posix().endswith("/" + file)]
    namesakes = [f for f in homework_files if f != file and Path(f).name == name]
    if len(tails) == 1 or (len(found) == 1 and not namesakes):
        chosen = tails[0] if len(tails) == 1 else found[0]
        _no_link(submission, chosen, file)
        return chosen
    listed = ", ".join(p.relative_to(submission).as_posix() for p in found)
    if found and namesakes:
        raise NotGraded(f"{file}: the submission's {listed} is not in {Path(file).parent}/, and "
                        f"the homework has another {name} ({', '.join(namesakes)}); wanted "
                        f"each in its folder: upload the homework's folder, or a zip of it",
                        "ambiguous")
    if found:
        raise NotGraded(f"{file}: the submission has {len(found)} files called {name} "
                        f"({listed}); wanted one", "ambiguous")
    return None


def what_it_holds(submission: Path, most: int = 8) -> str:
    """The Python files a submission holds, for the line that says one is missing; with none,
    the zips it holds, if any: a zip inside the uploaded zip, which Gradescope (and --submission
    FILE.zip) unpacks once, not the zips inside it."""
    def holds(pattern: str) -> list:
        return sorted(p.relative_to(submission).as_posix() for p in submission.rglob(pattern)
                      if p.is_file())
    files = holds("*.py")
    zips = [] if files else holds("*.zip")
    if zips:
        return (f"holds no .py file, but the zip {', '.join(zips[:most])}, which is not "
                f"unpacked; wanted the files themselves, or one zip of them")
    if not files:
        return "holds no .py file"
    more = f", and {len(files) - most} more" if len(files) > most else ""
    return f"holds {', '.join(files[:most])}{more}"


def not_a_submission(path, got: str) -> ValueError:
    """The error for a --submission that is neither a folder of files nor a zip of them."""
    return ValueError(f"--submission {path}: {got}; wanted the folder of a student's files, or "
                      f"a .zip of them")


@contextmanager
def unzipped(archive: Path):
    """``with unzipped(archive) as folder:`` -- the .zip ``archive`` unpacked into a new temporary
    folder. Its names stay inside the folder (zipfile drops a leading / and every ..), no link is
    made, and one that would unpack past UNPACKED_LIMIT is refused before anything is written."""
    try:
        zipped = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        got = ("no such file" if isinstance(err, FileNotFoundError) else "is a folder"
               if isinstance(err, IsADirectoryError) else "is not a zip archive")
        raise not_a_submission(archive, got) from None
    _remove_what_ended_gradings_left()
    with zipped, tempfile.TemporaryDirectory(prefix=f"{_UNPACKED}{os.getpid()}-") as folder:
        size = sum(member.file_size for member in zipped.infolist())
        if size > UNPACKED_LIMIT:
            raise ValueError(f"--submission {archive}: unpacks to {size:,} bytes; wanted at "
                             f"most {UNPACKED_LIMIT:,}, a homework's files")
        for member in zipped.infolist():       # one by one, to name the file that fails
            try:
                zipped.extract(member, folder)
            except (RuntimeError, NotImplementedError, zipfile.BadZipFile, EOFError,
                    zlib.error) as err:
                raise not_a_submission(archive, f"its {member.filename} cannot be unpacked: "
                                                f"{_unreadable(member, err)}") from None
        yield Path(folder)


def _unreadable(member: zipfile.ZipInfo, err: Exception) -> str:
    """Why a zip's member cannot be unpacked, in the words of whoever made the zip: zipfile says
    'password required' (RuntimeError), 'That compression method is not supported', 'Bad
    CRC-32'."""
    if member.flag_bits & 0x1:              # 7-Zip's AES (method 99) sets it too
        return "it is encrypted (the zip was made with a password)"
    if isinstance(err, NotImplementedError):
        return (f"it is compressed by method {member.compress_type}, which Python's zipfile "
                f"cannot read (Deflate64 is 9, PPMd 98): zip it again with the usual Deflate")
    return f"the zip is damaged ({err})"


def _remove_what_ended_gradings_left() -> None:
    """The unpacked folders of gradings whose process ended inside an exercise (os._exit, a crash,
    the out-of-memory killer), which nothing else removes: up to UNPACKED_LIMIT each."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_UNPACKED}*-*"):
        pid = re.fullmatch(rf"{_UNPACKED}(\d+)-.*", folder.name)
        if pid and folder.is_dir() and not folder.is_symlink() and not alive(int(pid.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
