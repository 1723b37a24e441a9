"""The autograder's setup.sh refuses a Python older than minitf's own minimum, in one line: on
an image whose python3 is 3.8 every submission would fail to import minitf, unexplained."""
import os
import re
import subprocess
import sys

from minitf.homework.autograder import SETUP


def _version_check(tmp_path, python3: str) -> subprocess.CompletedProcess:
    """setup.sh's check of python3, run with ``python3`` first on the PATH."""
    check = re.search(r"^if ! python3 .*?^fi$", SETUP, re.S | re.M).group(0)
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "python3").write_text(python3)
    (tmp_path / "bin" / "python3").chmod(0o755)
    return subprocess.run(["bash", "-c", check], capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})


def test_setup_refuses_a_python_older_than_3_10(tmp_path):
    old = _version_check(tmp_path, '#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.8.10" '
                                   '&& exit 0\nexit 1\n')          # sys.exit(True): too old
    assert old.returncode == 1 and old.stderr == (
        "setup.sh: Python 3.8.10; minitf needs 3.10: choose Ubuntu 22.04 or newer\n")
    ours = _version_check(tmp_path, f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    assert ours.returncode == 0 and ours.stderr == ""
