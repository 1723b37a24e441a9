"""'minitf homework': the student directory hides every solution and nothing else, its starter
fails exactly the chosen exercises' checks, an instructor's own file with marked regions works
the same way, and bad input is one line (the grading itself: test_homework_grading.py)."""
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitf import cli, exercises, gradcheck_cases, homework
from minitf.backend import precision
from minitf.exercises import EXERCISES, find
from minitf.exercises.starter import _names_used
from minitf.exercises.tracing import reaching
from minitf.gradcheck import run_backward
from minitf.homework import handout, regions

HW1 = ["softmax_backward", "layer_norm_backward", "attention_backward"]
OPS = Path(__file__).with_name("homework_ops.py")      # an instructor's RMSNorm


@pytest.fixture(scope="module")
def hw1(tmp_path_factory):
    return homework.make(tmp_path_factory.mktemp("hw") / "hw1", HW1)


@pytest.fixture(scope="module")
def hw2(tmp_path_factory):
    return homework.make(tmp_path_factory.mktemp("hw") / "hw2", files=[OPS])


def _blanked(folder):
    """{file in the directory: (the reference's text, its edits)} for every blanked file."""
    found = {}
    for entry in homework.manifest(folder)["exercises"]:
        catalogue = entry["source"] == "minitf"
        reference = Path(handout.PACKAGE.parent / entry["file"]) if catalogue else OPS
        text = reference.read_text(encoding="utf-8")
        names = {e["name"] for e in homework.manifest(folder)["exercises"]
                 if e["file"] == entry["file"]}
        found[entry["file"]] = (text, handout.plan(text, reference.name, names, catalogue))
    return found


def _answered(folder, tmp_path, only=None):
    """A copy of ``folder`` with the reference regions put back (into the files of ``only``)."""
    copy = tmp_path / "answered"
    shutil.copytree(folder, copy)
    for file, (_, edits) in _blanked(folder).items():
        if only is None or file in only:      # the bodies only: a student keeps the docstrings
            bodies = [e for e in edits if e.body]
            target = copy / file
            target.write_text(regions.restore(target.read_text(encoding="utf-8"), bodies),
                              encoding="utf-8")
    return copy


def _lines(folder) -> set:
    """Every line of every file in ``folder``, stripped."""
    return {line.strip() for b in _files(folder).values()
            for line in b.decode("utf-8", "replace").splitlines()}


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


# -- regions in minitf's own source ----------------------------------------------------------------

def test_every_catalogue_exercise_has_its_region_around_its_body():
    for exercise in EXERCISES:
        path = Path(importlib.import_module(exercise.module).__file__)
        found = regions.find_regions(path.read_text(encoding="utf-8"), path.name)
        assert any(r.name == r.function == exercise.name for r in found), exercise.name
        assert {r.name for r in found} <= {e.name for e in EXERCISES}


def test_a_private_helper_that_does_an_exercises_work_is_blanked_with_it():
    """A helper the body calls but its forward does not (attention's two stages) would hand the
    answer to the student: it must hold a region of the same exercise."""
    for exercise in EXERCISES:
        module = importlib.import_module(exercise.module)
        forwards = set().union(*(_names_used(getattr(exercise.owner, f).__code__)
                                 for f in exercise.forwards))
        text = Path(module.__file__).read_text(encoding="utf-8")
        marked = {r.function for r in regions.find_regions(text, exercise.module)
                  if r.name == exercise.name}
        for name in _names_used(exercise.reference.__code__) - forwards:
            if name.startswith("_") and callable(vars(module).get(name)):
                assert name in marked, f"{exercise.name}: {name} holds part of its answer"


@pytest.mark.parametrize("text, message", [
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n", "line 2: BEGIN SOLUTION without an END"),
    ("def f():\n    return 1\n    # END SOLUTION\n", "line 3: END SOLUTION without a BEGIN"),
    ("def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    x = 1\n    # END SOLUTION\n",
     "line 3: BEGIN SOLUTION inside the region opened on line 2"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", "line 1: a solution region must sit inside"),
])
def test_unpaired_nested_or_stray_markers_are_errors(text, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        regions.find_regions(text, "f.py")
    (tmp_path / "f.py").write_text(text)              # through make: the flag and the path given
    with pytest.raises(ValueError, match=f"^--file {re.escape(str(tmp_path))}/f.py, {message}"):
        homework.make(tmp_path / "out", files=[tmp_path / "f.py"])


# -- the student directory -------------------------------------------------------------------------

def test_the_starter_keeps_the_fence_around_a_named_stub_and_drops_the_derivation(hw1):
    text = (hw1 / "minitf/functional/softmax.py").read_text(encoding="utf-8")
    assert ("    # BEGIN SOLUTION softmax_backward\n    # Your code replaces the next line."
            in text and "\n    # END SOLUTION\n" in text)
    assert f'raise NotImplementedError("softmax_backward: {find("softmax_backward").hint}")' in text
    assert "exp(x_i) / Σ_j exp(x_j)" in text and "dp: (...) the gradient of p" in text
    assert "∂p_i/∂x_j = p_i (δ_ij − p_j)" not in text                  # the derivation
    assert "dx = p ⊙ (dp − Σ_j dp_j p_j)" not in text
    everything = "\n".join(b.decode("utf-8", "replace") for b in _files(hw1).values())
    for answer in ("p ⊙ (dp − Σ", "dp − Σ_j dp_j p_j"):     # nor anywhere else: course.py's
        assert answer not in everything, answer           # lesson list, a docstring elsewhere
    readme = (hw1 / "README.md").read_text(encoding="utf-8")
    assert "python -m minitf homework grade ." in readme and "`attention_backward`" in readme


def test_no_solution_line_appears_anywhere_in_the_student_directory(hw1, hw2):
    for folder in (hw1, hw2):
        everything = _lines(folder)
        for file, (_, edits) in _blanked(folder).items():
            for line in (ln.strip() for e in edits for ln in e.old.splitlines()):
                assert len(line) < 6 or line not in everything, f"{file} leaks {line!r}"


def test_no_exercise_of_the_catalogue_leaks_a_non_trivial_line(tmp_path):
    """Every exercise blank at once; lines shared with the forward (an ``if`` header, the
    ``xp = get_array_module(x)`` idiom) or short ones are not solutions."""
    folder = homework.make(tmp_path / "all", [e.name for e in EXERCISES])
    everything = _lines(folder)
    for file, (_, edits) in _blanked(folder).items():
        for line in (ln.strip() for e in edits for ln in e.old.splitlines()):
            if len(line) >= 20 and not line.endswith(":") and "get_array_module(" not in line:
                assert line not in everything, f"{file} leaks {line!r}"


def test_the_reference_regions_put_back_give_the_reference_byte_for_byte(hw1, hw2):
    for folder in (hw1, hw2):
        for file, (text, edits) in _blanked(folder).items():
            starter = (folder / file).read_text(encoding="utf-8")
            assert starter != text and regions.restore(starter, edits) == text
    for file in set(_files(hw1)) - set(_blanked(hw1)) - {"README.md", "homework.json"}:
        assert _files(hw1)[file] == (handout.PACKAGE.parent / file).read_bytes(), file


def test_the_key_is_the_directory_answered(hw1, hw2, tmp_path):
    for folder, kwargs in ((hw1, dict(exercises=HW1)), (hw2, dict(files=[OPS]))):
        key = homework.make(tmp_path / folder.name, solutions=True, **kwargs)
        files, answered = _files(key), _files(_answered(folder, tmp_path / f"{folder.name}-answered"))
        readme = files.pop("README.md").decode()            # which says, first, that it is the key
        assert readme.startswith("# Homework\n\n**The key**: every body below is answered")
        assert readme.split("\n", 4)[4] == answered.pop("README.md").decode().split("\n", 2)[2]
        manifest = json.loads(files.pop("homework.json"))  # which says it too (autograder)
        assert manifest.pop("key") is True
        assert manifest == json.loads(answered.pop("homework.json"))
        assert files == answered


def test_two_runs_write_identical_directories(hw1, tmp_path):
    again = homework.make(tmp_path / "again", list(reversed(HW1)) + ["softmax_backward"])
    assert _files(again) == _files(hw1)


_RUN_EVERY_CASE = """
import sys, numpy as np
from minitf import gradcheck_cases
from minitf.gradcheck import run_backward
from minitf.backend import precision
grads, raised = {}, []
for name in gradcheck_cases.CASES:
    try:
        with precision("float64"):
            run = run_backward(gradcheck_cases.build(name))
    except NotImplementedError:
        raised.append(name)
        continue
    grads.update({f"{name}|{t}": dx for t, (x, dx) in run.tensors.items() if dx is not None})
np.savez(sys.argv[1], **grads)
print("\\n".join(raised))
"""


def test_the_starter_fails_exactly_the_chosen_exercises_checks(hw1, tmp_path):
    """The directory's own minitf runs every registry case: those that reach a blanked function
    raise, and every other one gives the reference's gradients exactly."""
    blanked = set()
    for file, (text, edits) in _blanked(hw1).items():
        module = importlib.import_module(file[:-3].replace("/", "."))
        for r in regions.find_regions(text, file):
            if r.name in HW1:
                owner, _, attr = r.function.rpartition(".")
                function = vars(getattr(module, owner) if owner else module)[attr]
                blanked.add(inspect.unwrap(function).__code__)      # inside its dy check
    expected = set(reaching(blanked))
    assert set().union(*(exercises.closure(find(n)) for n in HW1)) <= expected
    assert "relative_attention (Shaw), keys only, causal mask" in expected   # reuses the helpers

    run = subprocess.run([sys.executable, "-c", _RUN_EVERY_CASE, str(tmp_path / "g.npz")],
                         cwd=hw1, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert set(run.stdout.split("\n")) - {""} == expected
    theirs = np.load(tmp_path / "g.npz")
    for name in set(gradcheck_cases.CASES) - expected:
        with precision("float64"):
            ours = run_backward(gradcheck_cases.build(name)).tensors
        for tensor, (_, dx) in ours.items():
            if dx is not None:
                assert np.array_equal(theirs[f"{name}|{tensor}"], dx), (name, tensor)


# -- bad input: one line each, exit status 2 -------------------------------------------------------

def _one_line_error(args, capsys) -> str:
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    return err


def test_bad_input_is_one_line_and_exit_2(hw1, tmp_path, capsys):
    assert _one_line_error(["homework", "make", "--exercises", "nope", "--out",
                            str(tmp_path / "x")], capsys) == (
        "minitf homework make: --exercises: no exercise named 'nope'; see the names with 'minitf "
        "exercise list'")
    assert "no exercise named 'sofmax_backward'; did you mean 'softmax_backward'?" in _one_line_error(
        ["homework", "make", "--exercises", "sofmax_backward", "--out", str(tmp_path / "x")], capsys)
    (tmp_path / "a-file").write_text("")
    assert "--out " + str(tmp_path / "a-file") + ": is a file; wanted a new folder" in _one_line_error(
        ["homework", "make", "--exercises", "relu_backward", "--out", str(tmp_path / "a-file")], capsys)
    assert "no such folder; wanted a homework directory" in _one_line_error(
        ["homework", "grade", str(tmp_path / "nowhere")], capsys)
    assert f"{tmp_path / 'a-file'}: is a file; wanted a homework directory" in _one_line_error(
        ["homework", "grade", str(tmp_path / "a-file")], capsys)        # it said "no such folder"
    assert f"--submission {tmp_path / 'a-file'}: is a file; wanted the folder of a student's" in (
        _one_line_error(["homework", "grade", str(hw1), "--submission", str(tmp_path / "a-file")],
                        capsys))
    assert "already exists and is not empty" in _one_line_error(
        ["homework", "make", "--exercises", "relu_backward", "--out", str(hw1)], capsys)
    assert "not a homework directory" in _one_line_error(["homework", "grade", str(tmp_path)],
                                                         capsys)
    assert "--file missing.py: no such file" in _one_line_error(
        ["homework", "make", "--file", "missing.py", "--out", str(tmp_path / "y")], capsys)
    devices = [("/dev/null", "is not a regular file")] if os.path.exists("/dev/null") else []
    for given, got in [(tmp_path, "is a folder"), *devices]:
        assert f"--file {given}: {got}; wanted an instructor's own Python file" in (
            _one_line_error(["homework", "make", "--file", str(given), "--out",
                             str(tmp_path / "y")], capsys))


def test_where_a_frame_was_first_edited_counts_lines_as_an_editor_does():
    """str.splitlines also ends a line at a form feed or U+2028: the line numbers drifted. And
    lines cut from the end read "first at at its end"."""
    from minitf.homework import regions as R
    text = "# page one\x0c\nx = '''a\u2028b'''\n# BEGIN SOLUTION\npass\n# END SOLUTION\ny = 1\nz = 2\n"
    stored = R.frame_lines(text, "f.py")
    assert R.first_edit(stored, text.replace("y = 1", "y = 3"), "f.py") == "line 6"
    assert R.first_edit(stored, text.replace("pass", "return 2"), "f.py") == ""   # inside
    assert R.first_edit(stored, text.replace("z = 2\n", ""), "f.py") == "its end (lines removed)"
