"""The registry cases that grade a homework's exercises are fixed when it is made, from the
reference, and stored in homework.json: every grading reads them there (the instructor's, the
autograder's with a submission, a student's inside the copy, where tracing would be cut short by
the stubs and would run a looping answer once per case), and 'exercise list' inside the copy
shows them. A homework.json without them is graded by tracing, as before; one naming a case
this minitf lacks is refused in one line."""
import json
import shutil
import subprocess
import sys

import pytest

from minitf import cli, homework
from minitf.exercises import EXERCISES, find
from minitf.exercises import tracing
from minitf.homework import autograde, autograder, graded_by

LINEAR = "minitf/functional/linear.py"
LINEAR_CASES = ["linear", "linear, rows (2-D x)", "Linear", "Linear, no bias"]   # traced
LOOPS = "    while True:\n        pass\n"                   # an answer that never returns


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, a submission folder holding the reference's answer), of
    linear_backward alone: quick to grade."""
    root = tmp_path_factory.mktemp("cases")
    hw = homework.make(root / "hw", ["linear_backward"])
    key = homework.make(root / "key", ["linear_backward"], solutions=True)
    submission = root / "submission"
    submission.mkdir()
    shutil.copy(key / LINEAR, submission / "linear.py")       # uploaded, as on Gradescope
    return hw, submission


def _copy(hw, tmp_path, change=None):
    """A copy of the homework ``hw``; ``change`` edits its homework.json (a dict) in place."""
    folder = tmp_path / "hw"
    shutil.copytree(hw, folder)
    path = folder / homework.MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    if change is not None:
        change(data)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return folder


def _traced_here(monkeypatch, allowed: bool) -> list:
    """Every call of the registry's tracing, noted (and, unless ``allowed``, refused)."""
    calls = []
    real = tracing.traces

    def watched():
        calls.append(1)
        assert allowed, "the grading traced the registry, where homework.json fixes its cases"
        return real()
    monkeypatch.setattr(tracing, "traces", watched)
    monkeypatch.setattr(autograde, "traces", watched)
    return calls


def test_make_stores_the_references_cases_for_every_catalogue_exercise(made):
    stored = homework.manifest(made[0])[graded_by.KEY]
    assert list(stored) == [e.name for e in EXERCISES]               # the catalogue, in order
    assert stored == {e.name: list(tracing.homework_grading_cases(e)) for e in EXERCISES}
    assert stored["linear_backward"] == LINEAR_CASES


def test_grading_uses_the_stored_cases_and_traces_nothing(made, tmp_path, monkeypatch):
    """The autograder's run: the reference grades a submission, by the cases the homework
    stores (one, here, to tell them from the three tracing would choose)."""
    hw = _copy(made[0], tmp_path,
               lambda data: data[graded_by.KEY].update(linear_backward=["Linear, no bias"]))
    _traced_here(monkeypatch, allowed=False)
    outcome, = homework.grade(hw, made[1])
    assert outcome.result.passed
    assert {row.check for row in outcome.result.rows} == {"Linear, no bias"}


def test_a_homework_json_without_stored_cases_is_graded_by_tracing_as_before(made, tmp_path,
                                                                             monkeypatch):
    hw = _copy(made[0], tmp_path, lambda data: data.pop(graded_by.KEY))
    calls = _traced_here(monkeypatch, allowed=True)
    outcome, = homework.grade(hw, made[1])
    assert calls and outcome.result.passed
    assert list(dict.fromkeys(row.check for row in outcome.result.rows)) == LINEAR_CASES


@pytest.mark.parametrize("change, said", [
    (lambda data: data[graded_by.KEY].update(linear_backward=["linear", "Linear, renamed"]),
     "homework.json: linear_backward is graded by the case 'Linear, renamed', which this minitf "
     "("),
    (lambda data: data[graded_by.KEY].pop("linear_backward"),
     "homework.json: no cases stored for linear_backward under 'graded by'; wanted a list"),
    (lambda data: data[graded_by.KEY].update(linear_backward=[]),
     "homework.json: no cases stored for linear_backward under 'graded by'; wanted a list"),
    (lambda data: data.update({graded_by.KEY: ["linear"]}),
     "homework.json: its 'graded by' is ['linear']; wanted {exercise: [case names]}"),
])
def test_stored_cases_this_minitf_cannot_run_are_refused_in_one_line(made, tmp_path, capsys,
                                                                     change, said):
    """A homework made by another minitf (a case renamed since): refused before anything is
    graded, and by the autograder's build, which would carry it to every student."""
    hw = _copy(made[0], tmp_path, change)
    assert cli.main(["homework", "grade", str(hw), "--submission", str(made[1])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and said in err, err
    with pytest.raises(ValueError, match="homework.json: "):
        autograder.build(hw, tmp_path / "autograder.zip")


def test_inside_the_copy_a_looping_answer_costs_its_own_limit_and_the_list_is_the_references(
        made, tmp_path):
    """A student's folder, their linear_backward a loop: 'exercise list' traces nothing (it
    showed 10 cases, whole models among them, cut short by the stubs, and ran the loop once per
    case: 8 minutes), and grading reaches the loop at once, stopped by the --budget (tracing ran
    it first under every case's 10 s limit: 9 minutes)."""
    hw = tmp_path / "hw"
    shutil.copytree(made[0], hw)
    answer = hw / LINEAR
    text = answer.read_text(encoding="utf-8")
    stub = text.split("# BEGIN SOLUTION linear_backward\n", 1)[1].split("    # END SOLUTION")[0]
    answer.write_text(text.replace(stub, LOOPS, 1), encoding="utf-8")

    listed = subprocess.run([sys.executable, "-m", "minitf", "exercise", "list"], cwd=hw,
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    row = listed.stdout.split("linear_backward", 1)[1].split("\n\n", 1)[0]
    assert "Linear, no" in row and "DecoderLM" not in row, row

    # tracing first would run the loop under each case's 10 s limit, past the timeout
    graded = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", ".",
                             "--budget", "3"], cwd=hw, capture_output=True, text=True,
                            timeout=90)
    assert graded.returncode == 1, graded.stderr
    assert "linear.py could not be graded:" in graded.stdout
    assert "ran for more than" in graded.stdout and "while True" in graded.stdout
    assert graded.stdout.splitlines()[-1].startswith("score 0 of 1 (")


def test_the_copys_cases_are_what_it_stores(made, monkeypatch):
    """grading_cases inside a copy (here: this minitf taken for one) reads homework.json."""
    monkeypatch.setattr(graded_by, "_this_copys_manifest",
                        lambda: {"exercises": [], graded_by.KEY: {"linear_backward": ["Linear"]}})
    assert tracing.grading_cases(find("linear_backward")) == ("Linear",)
    monkeypatch.setattr(graded_by, "_this_copys_manifest", lambda: None)    # the reference
    assert tracing.grading_cases(find("linear_backward")) == tuple(LINEAR_CASES)


def test_a_homework_made_before_the_gradient_checks_moved_still_loads():
    """Its files import gradient_of and check_like from minitf.validate: graded by a newer minitf
    they raised ImportError, and every answer scored 0."""
    from minitf import validate, validate_gradients
    for name in ("gradient_of", "check_like", "check_loss_gradient", "is_gradient_check"):
        assert getattr(validate, name) is getattr(validate_gradients, name), name
