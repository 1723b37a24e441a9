"""A run directory's list of its checkpoints, checkpoints.txt: which step directory is current,
and what a save that was interrupted left behind. minitf.checkpoint writes and reads the
checkpoints themselves; the layout is described there.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from minitf.checkpoint_format import CheckpointError
from minitf.data.text import not_utf8
from minitf.validate import check_path

WEIGHTS, META, INDEX = "weights.npz", "checkpoint.json", "checkpoints.txt"


def run_directory(directory, where: str) -> Path:
    """``directory`` as a Path, refused in one line when it is no path or is a file."""
    check_path(directory, "directory", where)
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{where}: {directory} is a file; wanted a run directory")
    return directory


LISTING = ("wanted the list minitf train writes there, its step directories' names, newest "
           "first, one a line (or load a step directory by its own path)")


def listed_steps(directory: Path) -> list[str]:
    """The step directories named in checkpoints.txt, newest first ([] when there is none). One
    that no save wrote (a folder, bytes that are no text, the NULs a crash can leave of a file)
    is a CheckpointError, and is left as it is: a save never writes over what it cannot read."""
    if (directory / INDEX).is_dir():
        raise CheckpointError(f"checkpoint {directory}: {INDEX} is a folder; {LISTING}")
    try:
        with open(directory / INDEX, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    problem = not_utf8(raw)
    if problem:
        raise CheckpointError(f"checkpoint {directory}: {INDEX} is corrupt ({problem}); "
                              f"{LISTING}")
    return [line for line in raw.decode().splitlines() if line]


# The names a save writes: step directories, and the hidden temporaries of one process (its pid)
STEP = re.compile(r"step-\d{6,}(-\d+)?")
_TEMPORARY = re.compile(rf"\.({STEP.pattern}|{re.escape(INDEX)})\.\d+\.tmp")


def holds_only_a_checkpoint(path: Path) -> bool:
    """A real directory (no link) holding nothing but a checkpoint's files, or nothing at all."""
    return (path.is_dir() and not path.is_symlink()
            and all(p.name in (WEIGHTS, META) and p.is_file() for p in path.iterdir()))


def _never_current(temporaries: list, kept: set) -> set:
    """The step directories a save renamed into place but was killed before it made current. A
    save writes its new checkpoints.txt, naming its step directory first, as a temporary file
    *before* that rename: such a directory is the first line of a leftover temporary."""
    found = set()
    for temporary in temporaries:
        if temporary.name.startswith(f".{INDEX}.") and temporary.is_file():
            pid = temporary.name.split(".")[-2]
            name = temporary.read_bytes().decode(errors="replace").partition("\n")[0]
            # its staging directory still there: killed before the rename, so a step-N there
            # now is not this save's
            staged = temporary.with_name(f".{name}.{pid}.tmp")
            if STEP.fullmatch(name) and name not in kept and not staged.exists():
                found.add(name)
    return found


def clean(directory) -> None:
    """Remove what interrupted saves left in ``directory``: their hidden temporaries, and a step
    directory that a save renamed into place but was killed before it made current. Nothing
    else: a checkpoint that checkpoints.txt does not name (copied in, say, or a run whose
    checkpoints.txt was edited) is yours and stays. Only the one process writing there may call
    it (``minitf train`` holds a lock): another writer's save in progress looks like a leftover."""
    directory = run_directory(directory, "checkpoint.clean")
    if not directory.is_dir():
        return
    temporaries = [p for p in directory.iterdir() if _TEMPORARY.fullmatch(p.name)]
    for name in _never_current(temporaries, set(listed_steps(directory))):
        if holds_only_a_checkpoint(directory / name):
            shutil.rmtree(directory / name)
    for path in temporaries:                 # a save's staging directory, or a file
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def refuse_a_list_of_someone_else(directory: Path, listed: list) -> None:
    """A checkpoints.txt of the user's own is not rewritten and cut to KEEP lines: each line must
    name a step directory, or a checkpoint elsewhere (edited to ../best, which load follows)."""
    for number, line in enumerate(listed, 1):        # (isfile: a line too long is no file)
        if not (STEP.fullmatch(line) or os.path.isfile(directory / line / META)):
            raise CheckpointError(f"checkpoint {directory}: {INDEX} is not minitf's (line "
                                  f"{number}, {line[:40]!r}, names no checkpoint), and a save "
                                  f"would rewrite it; {LISTING}, or save to another directory")


def find(directory) -> Path | None:
    """The directory holding the current checkpoint of run ``directory``; None if it has none.
    A checkpoints.txt that names no directory is a CheckpointError, not "none": it is a run."""
    directory = run_directory(directory, "checkpoint")
    listed = listed_steps(directory)
    if not listed:
        if (directory / INDEX).is_file():
            raise CheckpointError(f"checkpoint {directory}: {INDEX} names nothing; {LISTING}")
        return directory if (directory / META).is_file() else None
    if (directory / listed[0]).is_file():
        raise CheckpointError(f"checkpoint {directory}: {INDEX} names {listed[0]}, a file, as "
                              f"the current checkpoint; wanted a step directory holding {META} "
                              f"and {WEIGHTS}")
    return directory / listed[0]
