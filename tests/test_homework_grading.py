"""'minitf homework grade': the reference passes and the starter fails, each exercise is
graded on its own (a wrong, unparsable, exiting or endless answer costs its own exercise alone),
a renamed function is one line, and the table and Gradescope's JSON say what to fix."""
import json
import subprocess
import sys

from minitf import cli, homework

from test_homework import _answered, hw1, hw2  # noqa: F401  (hw1, hw2 are fixtures)

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
