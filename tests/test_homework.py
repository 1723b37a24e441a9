"""'minitf homework': the student directory hides every solution and nothing else, its starter
fails exactly the chosen exercises' checks, the grader grades each exercise on its own, and an
instructor's own file with marked regions works the same way."""
import importlib
import inspect
import json
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


# -- grading ---------------------------------------------------------------------------------------

def test_the_reference_passes_every_check_and_the_starter_none(hw1, hw2, tmp_path):
    for folder in (hw1, hw2):
        blank = homework.grade(folder)
        assert [o.score for o in blank] == [0.0] * len(blank)
        assert all("not written yet" in o.report and not o.edited for o in blank)
        answered = homework.grade(_answered(folder, tmp_path / folder.name))
        assert all(o.result.passed and o.score == 1.0 for o in answered), \
            [o.report for o in answered if not o.result.passed]


def test_each_exercise_is_graded_on_its_own(hw1, tmp_path):
    """attention answered, softmax blank: against the reference, attention passes; against the
    student's own copy (run inside the directory) it names the blank it calls."""
    folder = _answered(hw1, tmp_path, only={"minitf/functional/attention.py"})
    outcomes = {o.name: o for o in homework.grade(folder)}
    assert outcomes["attention_backward"].result.passed
    assert not outcomes["softmax_backward"].result.passed
    run = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    rows = [line.split()[:3] for line in run.stdout.splitlines()
            if line.startswith("attention_backward ")]
    assert rows == [["attention_backward", "0/0", "blocked"]]
    # and why, under the table: it was said only in --json's results
    assert "softmax_backward is not written yet, and attention_backward calls it" in run.stdout
    mine = subprocess.run([sys.executable, "-c", "from minitf import homework; print(homework."
                           "grade('.')[-1].report)"], cwd=folder, capture_output=True, text=True,
                          timeout=300)
    assert "softmax_backward is not written yet, and attention_backward calls it" in mine.stdout


def test_in_a_students_copy_a_case_that_runs_a_failed_exercise_says_so(hw1, tmp_path):
    """softmax_backward wrong (its row-dot term left out), attention_backward right: inside the
    student's copy, attention's cases run that softmax and fail; their hint names it, not
    attention's classic mistake, and the header says whose minitf the rest is."""
    folder = _answered(hw1, tmp_path)
    path = folder / "minitf/functional/softmax.py"
    right = "return p * (dp - row_dot(dp, p, axis))"
    path.write_text(path.read_text(encoding="utf-8").replace(right, "return p * dp"),
                    encoding="utf-8")
    outcomes = {o.name: o for o in homework.grade(folder)}    # by the reference: on its own
    assert outcomes["attention_backward"].result.passed
    assert "also runs your" not in outcomes["softmax_backward"].report
    run = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    attention = run.stdout[run.stdout.index("exercise attention_backward"):]
    assert "hint: this case also runs your softmax_backward, which failed its own checks " \
           "above: fix that first" in attention, attention
    assert "classic mistake" not in attention.split("what went wrong")[1]
    assert "everything else is your copy of minitf" in attention.splitlines()[0]
    assert "also runs your" not in run.stdout[:run.stdout.index("exercise attention_backward")]
    # a mistake of attention's own keeps its own hint: a write into dout is no softmax's fault
    path = folder / "minitf/functional/attention.py"
    values = "    dv = _weights(cache).swapaxes(-1, -2) @ dout\n"
    text = path.read_text(encoding="utf-8")
    assert values in text
    path.write_text(text.replace(values, "    dout *= 2.0\n" + values, 1), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    attention = run.stdout[run.stdout.index("exercise attention_backward"):]
    assert "hint: never write into what a backward is handed" in attention, attention


def _layer_norm_answered_but(hw1, tmp_path, old: str, new: str):
    """An answered copy of hw1 whose layer_norm.py has ``old`` replaced by ``new``.
    -> (the folder, the file, its text)"""
    folder = _answered(hw1, tmp_path, only={"minitf/functional/layer_norm.py"})
    path = folder / "minitf/functional/layer_norm.py"
    right = path.read_text(encoding="utf-8")
    wrong = right.replace(old, new)
    assert wrong != right, "the layer_norm_backward line this test changes has changed"
    path.write_text(wrong, encoding="utf-8")
    return folder, path, wrong


def test_a_wrong_body_fails_with_its_hint_and_an_edit_outside_is_reported(hw1, tmp_path):
    folder, path, _ = _layer_norm_answered_but(hw1, tmp_path, "- x_hat * mean_dx_hat_x_hat", "- 0")
    outcome = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"]
    assert outcome.score == 0.0 and not outcome.edited
    assert "hint: perhaps the classic mistake here: μ or σ treated as constants" in outcome.report
    text = path.read_text(encoding="utf-8")
    path.write_text(text + "# a note\n", encoding="utf-8")
    edited = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"]
    end = len(text.splitlines()) + 1
    assert edited.edited and edited.edited_at == f"line {end}"
    # told where: a student cannot undo an edit that nothing locates
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("def layer_norm(")) + 1
    path.write_text("".join(lines[:at - 1] + ["\n", "import os\n"] + lines[at - 1:]),
                    encoding="utf-8")
    edited = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"]
    assert edited.edited_at == f"line {at + 1}", edited.edited_at      # the import, not the blank
    assert f"(file edited outside its regions, first at line {at + 1})" in homework.table([edited])
    from minitf.homework.results import gradescope_test
    assert gradescope_test(edited)["output"].endswith(
        f"this file was edited outside its solution regions, first at line {at + 1}")
    del_at = next(i for i, line in enumerate(lines) if line.startswith("from ")) + 1
    path.write_text("".join(lines[:del_at - 1] + lines[del_at:]), encoding="utf-8")
    removed = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"].edited_at
    assert removed == f"line {del_at} (lines removed before it)", removed
    # a homework made before each frame line had its fingerprint: an edit, not where
    manifest = json.loads((folder / "homework.json").read_text(encoding="utf-8"))
    del manifest["frame_lines"]
    (folder / "homework.json").write_text(json.dumps(manifest), encoding="utf-8")
    old = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"]
    assert old.edited and old.edited_at == ""
    assert "(file edited outside its regions)" in homework.table([old])


def test_an_answer_that_does_not_parse_is_not_called_an_edit_outside(hw1, tmp_path):
    """A syntax error between the fences (the commonest unfinished answer) made the frame's
    parse fail, and the grade said "file edited outside its regions" of an untouched file."""
    folder, path, wrong = _layer_norm_answered_but(hw1, tmp_path, "- x_hat * mean_dx_hat_x_hat",
                                                   "- x_hat * (mean_dx_hat_x_hat")
    outcome = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"]
    assert outcome.score == 0.0 and not outcome.edited
    assert "SyntaxError" in outcome.report
    path.write_text(wrong.replace("# END SOLUTION", "# END", 1), encoding="utf-8")
    assert {o.name: o for o in homework.grade(folder)}["layer_norm_backward"].edited


def test_an_answer_that_calls_exit_fails_and_the_grading_goes_on(hw1, tmp_path):
    """sys.exit(0) in an answer ended the grading with exit status 0, no table and no JSON."""
    begin = "    # BEGIN SOLUTION layer_norm_backward\n"
    folder, _, _ = _layer_norm_answered_but(hw1, tmp_path, begin,
                                            begin + "    import sys; sys.exit(0)\n")
    outcomes = {o.name: o for o in homework.grade(folder)}
    assert outcomes["layer_norm_backward"].score == 0.0
    assert "SystemExit" in outcomes["layer_norm_backward"].report
    assert len(outcomes) == 3                                  # the others were graded too


def test_an_answer_that_never_returns_costs_its_own_exercise_only(hw1, tmp_path, monkeypatch):
    """A loop that never ends hung the whole grade: on Gradescope, no score for any exercise."""
    monkeypatch.setattr("minitf.exercises.time_limit.EXERCISE_SECONDS", 2)
    begin = "    # BEGIN SOLUTION layer_norm_backward\n"
    folder, _, _ = _layer_norm_answered_but(hw1, tmp_path, begin,
                                            begin + "    while True:\n        pass\n")
    outcomes = {o.name: o for o in homework.grade(folder)}
    stopped = outcomes["layer_norm_backward"]
    assert stopped.score == 0.0 and stopped.seconds < 10
    assert "layer_norm_backward ran for more than 2 s and was stopped" in stopped.report
    assert "    while True:" in stopped.report or "    pass" in stopped.report   # where it was
    assert len(outcomes) == 3                                  # the others were graded too


def test_a_renamed_function_is_named_in_one_line(hw1, tmp_path):
    folder, _, _ = _layer_norm_answered_but(hw1, tmp_path, "def layer_norm_backward(",
                                            "def layernorm_backward(")
    report = {o.name: o for o in homework.grade(folder)}["layer_norm_backward"].report
    assert "layer_norm.py defines no layer_norm_backward (renamed or deleted?)" in report, report


def test_a_wrong_answer_in_a_students_own_copy_fails_only_itself(hw1, tmp_path):
    """Graded in the folder, on the student's copy of minitf, every case is first traced once:
    a softmax_backward that raised stopped the tracing, and every exercise failed, blamed on
    softmax.py; now it fails its own exercise and layer_norm_backward passes."""
    folder = _answered(hw1, tmp_path, only={"minitf/functional/softmax.py",
                                            "minitf/functional/layer_norm.py"})
    answer = folder / "minitf/functional/softmax.py"
    right = "return p * (dp - row_dot(dp, p, axis))"
    answer.write_text(answer.read_text().replace(right, "return p * dp.sum(axis=-1)"))  # raises
    code = "import sys, minitf.cli; sys.exit(minitf.cli.main(['homework', 'grade', '.']))"
    run = subprocess.run([sys.executable, "-c", code], cwd=folder, capture_output=True,
                         text=True, timeout=300)
    rows = {line.split()[0]: line.split() for line in run.stdout.splitlines()
            if line.split() and line.split()[0].endswith("_backward")}
    assert rows["layer_norm_backward"][2:4] == ["passed", "1/1"], run.stdout
    assert rows["softmax_backward"][3] == "0/1", run.stdout


def test_grade_prints_a_table_and_writes_gradescope_json(hw1, tmp_path, capsys):
    results = tmp_path / "results.json"
    folder = _answered(hw1, tmp_path, only={"minitf/functional/softmax.py"})
    assert cli.main(["homework", "grade", str(folder), "--json", str(results)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["exercise", "tensors", "ok", "result", "score", "seconds"]
    # the catalogue's order, easiest first, not the files' (attention.py would come first)
    assert [line.split()[0] for line in out[2:5]] == [
        "softmax_backward", "layer_norm_backward", "attention_backward"]
    assert out[2].split()[:4] == ["softmax_backward", "3/3", "passed", "1/1"]
    assert out[4].split()[:4] == ["attention_backward", "0/0", "not", "written"]
    assert out[-1].startswith("score 1 of 3 (")
    data = json.loads(results.read_text())
    assert data["score"] == 1.0 and isinstance(data["execution_time"], int)
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in data["tests"]] == [
        ("softmax_backward", 1.0, 1.0, "passed"), ("layer_norm_backward", 0.0, 1.0, "failed"),
        ("attention_backward", 0.0, 1.0, "failed")]
    assert "softmax_backward: passes every check" in data["tests"][0]["output"]


def test_a_student_grades_with_numpy_alone(hw1):
    """The handout says a student needs NumPy: grading, run in the folder on its own copy of
    minitf, imports none of minitf's other dependencies (here made unimportable)."""
    code = ("import sys; sys.modules.update(tqdm=None, matplotlib=None, scipy=None); "
            "import minitf.cli; sys.exit(minitf.cli.main(['homework', 'grade', '.']))")
    run = subprocess.run([sys.executable, "-c", code], cwd=hw1, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 1 and "Error" not in run.stderr, run.stderr
    assert run.stdout.splitlines()[-1].startswith("score 0 of 3 (")


def test_grade_shows_what_to_fix_before_the_table(hw1, tmp_path, capsys):
    folder = _answered(hw1, tmp_path, only={"minitf/functional/softmax.py"})
    answer = folder / "minitf/functional/softmax.py"
    right = "return p * (dp - row_dot(dp, p, axis))"
    assert right in answer.read_text()
    answer.write_text(answer.read_text().replace(right, "return p * dp"))
    assert cli.main(["homework", "grade", str(folder)]) == 1
    out = capsys.readouterr().out
    report, summary = out.split("exercise  ", 1)[0], out.rsplit("\n\n", 1)[-1]
    assert "worst entry" in report and "the classic mistake here: dx = p ⊙ dp" in report
    assert summary.startswith("score 0 of 3")


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
    assert f"--file {tmp_path}: is a folder; wanted an instructor's Python file" in _one_line_error(
        ["homework", "make", "--file", str(tmp_path), "--out", str(tmp_path / "y")], capsys)


def test_where_a_frame_was_first_edited_counts_lines_as_an_editor_does():
    """str.splitlines also ends a line at a form feed or U+2028: the line numbers drifted. And
    lines cut from the end read "first at at its end"."""
    from minitf.homework import regions as R
    text = "# page one\x0c\nx = '''a\u2028b'''\n# BEGIN SOLUTION\npass\n# END SOLUTION\ny = 1\nz = 2\n"
    stored = R.frame_lines(text, "f.py")
    assert R.first_edit(stored, text.replace("y = 1", "y = 3"), "f.py") == "line 6"
    assert R.first_edit(stored, text.replace("pass", "return 2"), "f.py") == ""   # inside
    assert R.first_edit(stored, text.replace("z = 2\n", ""), "f.py") == "its end (lines removed)"
