"""Where a student's files are: a submission folder as Gradescope hands it to the autograder, or
the .zip a student uploaded (which Gradescope unpacks first, and ``homework grade --submission
FILE.zip`` unpacks the same way, into a folder of its own that is removed afterwards)."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from minitf.rundir import alive

UNPACKED_LIMIT = 200 << 20       # bytes a submission may unpack to: a homework is a few MB
_UNPACKED = "minitf-submission-"  # + the grading process's id + a random part


def find_submitted(submission: Path, file: str, homework_files=()) -> Path | None:
    """The student's copy of the homework file ``file`` (e.g. 'minitf/functional/softmax.py') in
    a submission folder: at that path, or under a folder of its own (an uploaded directory), or
    the one file of that name anywhere (files uploaded one by one arrive side by side) -- unless
    another of the ``homework_files`` has that name too: only its folder tells the two apart."""
    exact = submission / file
    if exact.is_file():
        return exact
    name = Path(file).name
    found = sorted(p for p in submission.rglob(name) if p.is_file())
    tails = [p for p in found if p.as_posix().endswith("/" + file)]
    if len(tails) == 1:
        return tails[0]
    namesakes = [f for f in homework_files if f != file and Path(f).name == name]
    if len(found) == 1 and not namesakes:
        return found[0]
    listed = ", ".join(p.relative_to(submission).as_posix() for p in found)
    if found and namesakes:
        raise ValueError(f"{file}: the submission's {listed} is not in {Path(file).parent}/, and "
                         f"the homework has another {name} ({', '.join(namesakes)}); wanted "
                         f"each in its folder: upload the homework's folder, or a zip of it")
    if found:
        raise ValueError(f"{file}: the submission has {len(found)} files called {name} "
                         f"({listed}); wanted one")
    return None


def what_it_holds(submission: Path, most: int = 8) -> str:
    """The Python files a submission holds, for the line that says one is missing."""
    files = sorted(p.relative_to(submission).as_posix() for p in submission.rglob("*.py")
                   if p.is_file())
    if not files:
        return "it holds no .py file"
    more = f", and {len(files) - most} more" if len(files) > most else ""
    return f"it holds {', '.join(files[:most])}{more}"


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
        zipped.extractall(folder)
        yield Path(folder)


def _remove_what_ended_gradings_left() -> None:
    """The unpacked folders of gradings whose process ended inside an exercise (os._exit, a crash,
    the out-of-memory killer), which nothing else removes: up to UNPACKED_LIMIT each."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_UNPACKED}*-*"):
        pid = re.fullmatch(rf"{_UNPACKED}(\d+)-.*", folder.name)
        if pid and folder.is_dir() and not folder.is_symlink() and not alive(int(pid.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
