"""benchmarks/compare_revisions.py: two versions of minitf, each imported from its own tree and
from nowhere else, the same model and batch on both, one table row per config; a revision git does
not know, or one without minitf, is one clear line. No speed is asserted: timings on a shared
machine are not a test."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minitf import backend

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "compare_revisions.py"
ROW = re.compile(r"^\| tiny \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \(([\d.]+)–([\d.]+)\) \|$", re.M)


def compare(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--configs", "tiny",
                           "--threads", "1"], capture_output=True, text=True, timeout=300)


def in_git_checkout():
    return shutil.which("git") is not None and subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True).returncode == 0


def test_the_same_tree_twice_computes_the_same_loss_and_prints_a_row():
    done = compare(".", ".", "--rounds", "3", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    assert "tiny: first loss A" in done.stdout
    assert "relative difference 0.0e+00)" in done.stdout        # same code, same weights, same batch
    a_ms, b_ms, ratio, low, high = map(float, ROW.search(done.stdout).groups())
    assert a_ms > 0 and b_ms > 0 and low <= ratio <= high
    assert "command: python benchmarks/compare_revisions.py . ." in done.stdout


def test_decoding_is_timed_per_token():
    done = compare(".", ".", "--measure", "decode", "--rounds", "2", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    assert "| config | A (ms per token) | B (ms per token) |" in done.stdout
    a_ms, b_ms, ratio, low, high = map(float, ROW.search(done.stdout).groups())
    assert 0 < a_ms < 10 and 0 < b_ms < 10 and low <= ratio <= high   # a token, not 256 of them


def test_a_directory_with_a_minitf_tree_is_a_revision(tmp_path):
    """A copy of the package, changed so that its loss differs: the worker imports the copy."""
    shutil.copytree(ROOT / "minitf", tmp_path / "minitf")
    lm = tmp_path / "minitf" / "models" / "lm.py"
    head = "logits, head_cache = F.linear(h, self._head_weight())"
    lm.write_text(lm.read_text().replace(head, head.replace("(h,", "(2 * h,")))
    done = compare(".", str(tmp_path), "--rounds", "1", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    assert "the versions compute different things" in done.stdout
    assert ROW.search(done.stdout), done.stdout


@pytest.mark.skipif(not in_git_checkout(), reason="needs git and a git checkout of minitf")
def test_a_revision_runs_from_its_own_unpacked_tree():
    # The script stops if a worker imported minitf from anywhere but its own tree
    done = compare("HEAD", "--rounds", "1", "--warmup", "0")
    assert done.returncode == 0, done.stderr
    assert ROW.search(done.stdout), done.stdout


@pytest.mark.skipif(not in_git_checkout(), reason="needs git and a git checkout of minitf")
def test_an_unknown_revision_is_one_clear_line():
    done = compare("no-such-revision", "--rounds", "1")
    assert done.returncode != 0
    assert done.stderr.startswith("compare_revisions: revision 'no-such-revision' is not one git "
                                  "knows here: ")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not in_git_checkout(), reason="needs git and a git checkout of minitf")
def test_a_revision_without_the_package_is_refused():
    first = subprocess.run(["git", "-C", str(ROOT), "rev-list", "--max-parents=0", "HEAD"],
                           capture_output=True, text=True).stdout.split()[0]
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{first}:minitf/__init__.py"],
                      capture_output=True).returncode == 0:
        pytest.skip("the first commit already has minitf/__init__.py")
    done = compare(first, "--rounds", "1")
    assert done.returncode != 0
    assert done.stderr.strip().endswith("has no minitf package (minitf/__init__.py) to time")


def test_a_tree_missing_a_module_never_borrows_the_installed_one(tmp_path):
    """A tree whose minitf lacks optim.py: the worker must stop, not time the installed optim."""
    shutil.copytree(ROOT / "minitf", tmp_path / "minitf",
                    ignore=shutil.ignore_patterns("optim.py", "__pycache__"))
    done = subprocess.run([sys.executable, str(SCRIPT), "--worker", str(tmp_path), "--configs",
                           "tiny"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode != 0 and not done.stdout
    assert ("imported minitf modules from elsewhere" in done.stderr        # an editable install
            or "No module named 'minitf.optim'" in done.stderr)            # a regular one


@pytest.mark.parametrize("args, message", [
    ((".", ".", "--configs", "huge"), "--configs: wanted some of"),
    ((".", ".", "--rounds", "0"), "--rounds: wanted at least 1; got 0"),
    ((), "the revision A to compare against is missing"),
])
def test_bad_options_are_named(args, message):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and message in done.stderr


@pytest.mark.skipif(backend.cupy_available(), reason="a GPU is here: the refusal cannot be seen")
def test_backend_cupy_without_a_gpu_is_one_clear_line():
    done = compare(".", ".", "--backend", "cupy", "--rounds", "1")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--backend: cupy needs CuPy and a GPU, and this machine lacks one; got 'cupy'")


@pytest.mark.skipif(not backend.cupy_available(), reason="needs CuPy and a GPU")
def test_backend_cupy_runs_both_versions_on_the_gpu():
    done = compare(".", ".", "--backend", "cupy", "--rounds", "3", "--warmup", "1")
    assert done.returncode == 0, done.stderr
    assert "backend: cupy (each step waits for the GPU)" in done.stdout
    assert "relative difference 0.0e+00)" in done.stdout
    assert ROW.search(done.stdout), done.stdout
