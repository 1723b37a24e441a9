"""How long grading may take: an exercise's own limit (longer for a whole model, whose checks
difference every weight) and a whole grading's budget (Gradescope kills a run past the
assignment's timeout and scores it 0, showing nothing)."""
import shutil
import time

import pytest

from minitf import homework
from minitf.exercises import EXERCISES, find
from minitf.exercises import time_limit as limits
from minitf.exercises.tracing import traces

SOFTMAX = "minitf/functional/softmax.py"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the key) of softmax_backward and layer_norm_backward."""
    root = tmp_path_factory.mktemp("budget")
    names = ["softmax_backward", "layer_norm_backward"]
    return (homework.make(root / "hw", names),
            homework.make(root / "key", names, solutions=True))


def test_a_budget_stops_the_grading_in_time_and_says_what_it_left_ungraded(made, tmp_path):
    """Answers that never return, 60 s each, could outlast Gradescope's timeout. The budget
    cuts the one running when it ends and grades none after it, each saying why."""
    hw, key = made
    submission = tmp_path / "submission"
    shutil.copytree(key / "minitf", submission / "minitf")
    path = submission / SOFTMAX
    text = path.read_text(encoding="utf-8")
    looping = text.replace("return p * (dp - row_dot(dp, p, axis))", "while True: pass")
    assert looping != text
    path.write_text(looping, encoding="utf-8")
    traces()                                   # traced once, before the budget's clock starts
    start = time.perf_counter()
    outcomes = homework.grade(hw, submission, budget=2)
    assert time.perf_counter() - start < 5
    stopped, left = outcomes
    assert "softmax_backward ran for more than" in stopped.report
    assert "and was stopped when the grading's budget of 2 s ran out" in stopped.report
    assert left.report == ("layer_norm_backward was not graded: the grading's budget of 2 s ran "
                           "out before it (an answer that never returns takes up to 60 s of it, "
                           "or 240 s for a whole model)")
    assert "not graded" in homework.table(outcomes).splitlines()[3]
    assert all(o.result.passed for o in homework.grade(key, budget=100))    # time enough: all


def test_a_whole_model_s_exercise_has_a_longer_limit_of_its_own(tmp_path, monkeypatch):
    """A whole model's checks take seconds (20 s for Transformer.backward on one core), and on
    Gradescope's half a CPU a right answer could outrun the 60 s meant for a loop."""
    assert {e.name for e in EXERCISES if e.seconds == limits.COMPOSITE_SECONDS} == \
        {e.name for e in EXERCISES if e.level == 5} and limits.COMPOSITE_SECONDS == 240
    assert find("attention_backward").seconds == limits.EXERCISE_SECONDS == 60
    readme = (homework.make(tmp_path / "hw", ["relu_backward", "Stack.backward"]) /
              "README.md").read_text(encoding="utf-8")
    assert "more than 60 seconds (240 for a whole model) is stopped" in readme.replace("\n", " ")
    readme = (homework.make(tmp_path / "hw1", ["relu_backward"]) / "README.md").read_text(
        encoding="utf-8")
    assert "more than 60 seconds is stopped" in readme.replace("\n", " ")

    key = homework.make(tmp_path / "key", ["DecoderBlock.backward"], solutions=True)
    traces()
    monkeypatch.setattr(limits, "EXERCISE_SECONDS", 0.5)        # a limit it would outrun
    assert homework.grade(key)[0].result.passed                  # its own, 240 s, holds
    monkeypatch.setattr(limits, "COMPOSITE_SECONDS", 0.5)
    stopped = homework.grade(key)[0]
    assert "DecoderBlock.backward ran for more than 0.5 s and was stopped" in stopped.report


def test_what_is_left_of_a_budget_shortens_a_limit():
    assert limits.Budget().limit(60) == (60, "")
    seconds, why = limits.Budget(30).limit(240)
    assert 29 < seconds <= 30 and why == "when the grading's budget of 30 s ran out"
    assert limits.Budget(30, started=time.time() - 31).limit(60)[0] == 1e-3    # never 0 or less
