"""Writing what a command was asked to write -- a homework folder (``homework make --out``), an
autograder zip (``homework autograder --out``), an exercise file (``exercise start --dir``):

    with os_errors_named("--out", out, "a new folder you can write to"):
        ...                       # an OSError about ``out`` is one line naming the flag
    with removed_if_unfinished(out):
        ...                       # a failure removes what the block wrote into ``out``

The OS's own error names neither the flag nor what was wanted ("[Errno 20] Not a directory"),
and a homework folder a full disk stopped half-way was left behind, refused by the rerun as "not
empty" until it was removed by hand.
"""
from __future__ import annotations

import os
import shutil
from contextlib import contextmanager, suppress
from pathlib import Path


def _named(err: OSError) -> Path | None:
    return None if err.filename is None else Path(os.fsdecode(err.filename)).absolute()


def _about(err: OSError, given) -> bool:
    """Whether the OSError ``err`` is about the path ``given``: that path, a file inside it, a
    folder on the way to it (made first), or no path at all (a write to a full disk) -- not a
    file that was being read."""
    named, given = _named(err), Path(given).absolute()
    return named is None or named == given or given in named.parents or named in given.parents


@contextmanager
def os_errors_named(flag: str, given, wanted: str):
    """An OSError in the block about ``given`` (the path the flag ``flag`` was given) becomes a
    ValueError of one line: the flag, the path, the OS's words (and where, when that is another
    path than ``given``), and what was ``wanted``. Any other OSError names its own file: as it
    is."""
    try:
        yield
    except OSError as err:
        if not _about(err, given):
            raise
        named = _named(err)
        at = "" if named in (None, Path(given).absolute()) else f" at {named}"
        raise ValueError(f"{flag} {given}: cannot be written ({err.strerror or err}{at}); "
                         f"wanted {wanted}") from None


@contextmanager
def removed_if_unfinished(out: Path):
    """Should the block fail (a full disk, Ctrl-C), remove what it wrote: the file or folder
    ``out`` and the folders on its way that did not exist before it, or, when ``out`` was a
    folder already (an empty one), the entries it added to it. Nothing that was there before is
    touched. (A process killed outright removes nothing.)"""
    out = Path(out).absolute()
    made = None                     # the outermost path of out's that the block makes
    for path in (out, *out.parents):
        if os.path.lexists(path):
            break
        made = path
    before = set(out.iterdir()) if made is None and out.is_dir() else set()
    try:
        yield
    except BaseException:
        added = [made] if made is not None else set(out.iterdir()) - before if out.is_dir() \
            else []
        for path in added:
            _remove(path)
        raise


def _remove(path: Path) -> None:
    """Remove a file or a folder, as far as it can be: the error being raised is the one to see."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with suppress(OSError):
            path.unlink(missing_ok=True)
