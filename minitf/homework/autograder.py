"""``minitf homework autograder DIR --out autograder.zip``: a homework directory as a Gradescope
autograder.

Gradescope builds an image from a zip with ``setup.sh`` and ``run_autograder`` at its root; the zip
is unpacked into /autograder/source, each submission lands in /autograder/submission, and
``run_autograder`` must leave /autograder/results/results.json behind. The zip written here holds:

    setup.sh          installs Python and minitf's runtime dependencies into /autograder/venv
    run_autograder    grades the submission with 'minitf homework grade --submission'
    homework/         the student directory's homework.json, README and blanked files
    reference/minitf  the reference minitf that grades (the zip is the instructor's: it holds
                      the solutions, as every autograder does; students never see it)

The grading runs from /autograder, never from inside homework/, so ``python -m minitf`` is the
reference, and each exercise's function comes from the student's file, loaded by path.
"""
from __future__ import annotations

import importlib.metadata
import zipfile
from pathlib import Path

from minitf.data.text import check_file_name
from minitf.cli_flags import MOST_TIMEOUT_MINUTES    # Gradescope's longest, 40
from minitf.exercises.time_limit import GRACE_SECONDS
from minitf.homework.autograde import edited_outside_regions, manifest
from minitf.homework.handout import (MANIFEST, package_files, refuse_a_homework_copy,
                                     refuse_answers_inside_a_homework)
from minitf.homework.writing import os_errors_named, removed_if_unfinished
from minitf.validate import check_int, check_path

# A fixed timestamp for every entry, so the same homework gives the same zip byte for byte.
_EPOCH = (1980, 1, 1, 0, 0, 0)

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image (Ubuntu).
set -euo pipefail
apt-get update
apt-get install -y python3 python3-venv
# minitf needs Python 3.10 or newer, Ubuntu 22.04's (20.04's python3 is 3.8): said, not a
# SyntaxError at the first submission
if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup.sh: $(python3 --version 2>&1); minitf needs 3.10: choose Ubuntu 22.04 or newer" >&2
  exit 1
fi
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install {requirements}
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this once per submission. AUTOGRADER_ROOT and AUTOGRADER_PYTHON exist only so
# that the same script can be tried on a machine of your own; Gradescope sets neither.
set -u
# Seconds the grading may take: a minute under the assignment's timeout (@MINUTES@ minutes), as
# Gradescope scores a run it kills 0 and shows nothing of it. Change both together.
budget=@BUDGET@
# Python counts its --budget from its own start, seconds after this script's (its imports; more
# on Gradescope's half a CPU): a kill at the budget itself came first, and an answer that loops
# was reported as a crash, not by its name. The kill comes kill_after seconds after the budget:
# after the budget's own stop and the writing of results.json, before the grader's watchdog
# (@GRACE@ s past a limit) would end a call that no alarm stops.
kill_after=@KILL_AFTER@
root="${AUTOGRADER_ROOT:-/autograder}"
python="${AUTOGRADER_PYTHON:-$root/venv/bin/python}"
# relative paths are read from where the script was started, before the cd below
case "$root" in /*) ;; *) root="$PWD/$root" ;; esac
case "$python" in /*) ;; */*) python="$PWD/$python" ;; esac
mkdir -p "$root/results"
cd "$root"      # not homework/: the minitf found there is the student's copy
results="$root/results/results.json"
rm -f "$results" "$results.progress"
# A student's code that ends the grading process (os._exit(), a crash, the OOM killer) leaves
# results.json.progress behind, naming the exercise it ended inside: that one scores 0 and the
# rest are graded in a new process (--resume). Each resumed run blames one more exercise, and so
# changes the progress, or stops; one that changed nothing (it could not write, say) ends it.
# A run still going kill_after seconds past the budget (one NumPy call no alarm can stop) is
# killed.
resume="" before=""
while :; do
    left=$(( budget + kill_after - SECONDS )); [ "$left" -ge 10 ] || left=10   # to write the rest
    limit=""; command -v timeout >/dev/null && limit="timeout -s KILL $left"
    PYTHONPATH="$root/source/reference" $limit "$python" -m minitf homework grade \\
        "$root/source/homework" --submission "$root/submission" --json "$results" \\
        --budget "$budget" $resume
    status=$?
    [ -e "$results.progress" ] || break
    progress=$(cat "$results.progress")
    if [ "$progress" = "$before" ]; then
        echo "run_autograder: a resumed grading changed nothing (exit status $status); stopping" >&2
        break
    fi
    before=$progress
    echo "run_autograder: the grading process ended inside an exercise (exit status $status); grading the rest in a new one" >&2
    resume="--resume --ended-with $status"
done
# A failed exercise is a score of 0 in results.json, not an error of the autograder; a grader that
# wrote no results (it could not start) is one.
if [ ! -s "$results" ]; then
    echo "run_autograder: 'minitf homework grade' wrote no results.json (exit status $status)" >&2
    exit 1
fi
exit 0
"""


def requirements() -> list[str]:
    """minitf's runtime dependencies as pip reads them (e.g. 'numpy>=1.24'), extras left out:
    from the installed package's metadata, or, run from a source checkout that was never
    installed, from the pyproject.toml beside the package."""
    try:
        declared = importlib.metadata.requires("minitf") or []
    except importlib.metadata.PackageNotFoundError:
        declared = _declared_in_pyproject(Path(__file__).resolve().parents[2] / "pyproject.toml")
    return sorted(r.split(";")[0].replace(" ", "") for r in declared if "extra ==" not in r)


def _declared_in_pyproject(path: Path) -> list[str]:
    try:
        import tomllib                                   # Python ≥ 3.11
        return tomllib.loads(path.read_text())["project"]["dependencies"]
    except (ImportError, OSError, KeyError) as err:
        raise RuntimeError(f"minitf's dependencies could not be read: it is not installed, and "
                           f"{path} gave {type(err).__name__}; install it (pip install .) and "
                           f"run again") from None


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    entry = zipfile.ZipInfo(name, _EPOCH)
    entry.external_attr = (0o100755 if executable else 0o100644) << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(entry, data)


def _homework_files(folder: Path, data: dict) -> list[str]:
    """What of the student directory the autograder needs: the manifest, the README and every
    file that holds an exercise (a submission that lacks one is graded on the blank)."""
    return sorted({MANIFEST, "README.md", *(e["file"] for e in data["exercises"])} &
                  {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()})


# Gradescope's timeout for an assignment unless it is raised in the assignment's settings (at most
# 40 minutes there); a run it kills scores 0 and shows the student nothing
TIMEOUT_MINUTES = 10
# Seconds past the budget before run_autograder kills a grading: more than Python's start-up and
# the writing of results.json take, fewer than GRACE_SECONDS (see RUN)
KILL_AFTER = 8


def build(folder, out, timeout_minutes: int | None = None) -> Path:
    """Write the Gradescope autograder zip ``out`` for the homework directory ``folder``, whose
    run_autograder finishes a minute inside the assignment's timeout of ``timeout_minutes``
    (None: Gradescope's default, TIMEOUT_MINUTES)."""
    check_path(folder, "folder", "autograder.build")
    check_path(out, "out", "autograder.build")
    timeout_minutes = TIMEOUT_MINUTES if timeout_minutes is None else timeout_minutes
    check_int(timeout_minutes, "timeout_minutes", "autograder.build", low=2,
              high=MOST_TIMEOUT_MINUTES, what="the assignment's timeout on Gradescope, a minute "
              "of it kept in reserve (the longest Gradescope allows is the upper end)")
    folder, out = Path(folder), Path(out)
    data = manifest(folder)
    refuse_a_homework_copy()
    if data.get("key") is True:     # its files in the zip: every answer, beside the reference
        raise ValueError(f"folder {folder}: is the answer key (made with --solutions); wanted "
                         f"the blank homework directory the students were given (the zip holds "
                         f"the reference, which grades them)")
    for file in dict.fromkeys(e["file"] for e in data["exercises"]):
        # every student would read "edited outside its regions" of a line of the instructor's,
        # and a check_NAME() changed there grades with the change, never tried on the answers
        if not (folder / file).is_file():
            continue                # not there: the zip goes without it (_homework_files)
        changed, where = edited_outside_regions(folder / file, file, data)
        if changed:
            raise ValueError(f"folder {folder}: {file} was edited after homework make (first "
                             f"at {where or 'a line outside its regions'}); wanted the "
                             f"directory as make wrote it: edit the source, then make it again")
    refuse_answers_inside_a_homework(out, "the zip holds the reference minitf, every answer")
    if out.suffix != ".zip" or out.exists():
        got = "already exists" if out.exists() else "does not end in .zip"
        raise ValueError(f"--out {out}: {got}; wanted a new file ending in .zip")
    check_file_name(out, "--out")
    # a full disk, Ctrl-C: no half a zip that the next try, refusing a file already there,
    # would be stuck on
    with os_errors_named("--out", out, "a new .zip file in a folder you can write to"), \
            removed_if_unfinished(out), zipfile.ZipFile(out, "w") as archive:
        _add(archive, "setup.sh", SETUP.format(
            requirements=" ".join(f'"{r}"' for r in requirements())).encode(),
            executable=True)
        run = RUN
        for key, value in (("MINUTES", timeout_minutes), ("KILL_AFTER", KILL_AFTER),
                           ("BUDGET", 60 * (timeout_minutes - 1)), ("GRACE", GRACE_SECONDS)):
            run = run.replace(f"@{key}@", str(value))
        _add(archive, "run_autograder", run.encode(), executable=True)
        for name in _homework_files(folder, data):
            _add(archive, f"homework/{name}", (folder / name).read_bytes())
        for path, relative in package_files():
            _add(archive, f"reference/minitf/{relative.as_posix()}", path.read_bytes())
    return out
