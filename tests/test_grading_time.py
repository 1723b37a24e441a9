"""How long grading may take: an exercise's own limit (longer for a whole model, whose checks
difference every weight) and a whole grading's budget (Gradescope kills a run past the
assignment's timeout and scores it 0, showing nothing)."""
import json
import os
import shutil
import subprocess
import sys
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
                           "or 240 s for a composite one, level 5)")
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
    assert "more than 60 seconds (240 for a composite one, level 5) is stopped" in readme.replace("\n", " ")
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


def _grade_in_a_process(args, seconds=1.0, grace=1.0):
    """``minitf homework grade ARGS`` in a process of its own, with the limits given, and its
    grace after TookTooLong: the process may end itself."""
    code = (f"import sys; from minitf.exercises import time_limit as t; "
            f"t.EXERCISE_SECONDS = {seconds}; t.GRACE_SECONDS = {grace}; "
            f"from minitf import cli; sys.exit(cli.main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, "homework", "grade", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_an_answer_that_catches_its_stop_costs_its_own_exercise_alone(made, tmp_path):
    """`except BaseException` in a loop swallows TookTooLong and would run on with no alarm
    left, taking every later exercise's time: after a grace the process ends, in one line, and
    --resume grades the rest, as run_autograder does for a process that ended."""
    hw, key = made
    submission = tmp_path / "submission"
    shutil.copytree(key / "minitf", submission / "minitf")
    path = submission / SOFTMAX
    text = path.read_text(encoding="utf-8")
    stubborn = text.replace("return p * (dp - row_dot(dp, p, axis))",
                            "while True:\n        try:\n            while True:\n"
                            "                pass\n        except BaseException:\n"
                            "            pass")
    assert stubborn != text
    path.write_text(stubborn, encoding="utf-8")
    out = tmp_path / "results.json"
    run = _grade_in_a_process([hw, "--submission", submission, "--json", out])
    assert run.returncode == limits.ENDED_STATUS, run.stderr
    assert run.stderr == ("minitf: softmax_backward ran on for 1.0 s past its limit of 1 s (its "
                          "code caught the stop: an `except BaseException` or a bare `except:` "
                          "in a loop?); this process ends here\n")
    results = json.loads(out.read_text(encoding="utf-8"))
    assert "caught the stop at its time limit and ran on" in results["tests"][0]["output"]

    run = _grade_in_a_process([hw, "--submission", submission, "--json", out, "--resume"])
    assert run.returncode == 1, run.stderr                     # one of the two failed
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [(t["name"], t["score"]) for t in results["tests"]] == [
        ("softmax_backward", 0.0), ("layer_norm_backward", 1.0)]
    assert not out.with_name("results.json.progress").exists()


def test_a_stop_that_is_not_caught_leaves_the_process_running(tmp_path):
    """The grace's watchdog is cancelled once the block has ended: the grader goes on."""
    code = ("import time; from minitf.exercises import time_limit as t; t.GRACE_SECONDS = 0.3\n"
            "try:\n    with t.time_limit('x', 0.1):\n        time.sleep(5)\n"
            "except t.TookTooLong as err:\n    print(err)\n"
            "time.sleep(1); print('still here')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "x ran for more than 0.1 s and was stopped (a loop that never ends?)\n" \
                         "still here\n"


def test_a_limit_of_a_millisecond_never_leaves_the_watchdog_running():
    """Budget.limit gives the last exercise what is left, down to 1 ms: an alarm that early
    came while the watchdog started, before the block's cleanup was in place, and the watchdog
    ended the grading GRACE_SECONDS later, blaming an answer that had been stopped."""
    code = ("import time; from minitf.exercises import time_limit as t; t.GRACE_SECONDS = 0.3\n"
            "for _ in range(300):\n    try:\n        with t.time_limit('x', 0.001):\n"
            "            while True: pass\n    except t.TookTooLong:\n        pass\n"
            "time.sleep(1); print('still here')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "still here\n", "")


def test_an_alarm_due_as_the_block_ends_lets_it_end_in_time():
    """An alarm due at the instant the block ended was raised inside its cleanup, cut it short,
    and the watchdog it had not yet cancelled ended the process a grace later. Here the alarm is
    made due there: as the cleanup turns the timer off."""
    code = ("import signal, time; from minitf.exercises import time_limit as t\n"
            "t.GRACE_SECONDS = 0.3; timer = signal.setitimer\n"
            "def due_now(which, seconds, *rest):\n"
            "    if seconds == 0:\n        signal.raise_signal(signal.SIGALRM)\n"
            "    return timer(which, seconds, *rest)\n"
            "signal.setitimer = due_now\n"
            "with t.time_limit('x', 5):\n    pass\n"
            "print('ended in time'); time.sleep(1); print('still here')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (0, "ended in time\nstill here\n", "")


@pytest.mark.slow
def test_one_numpy_call_past_the_limit_ends_the_process_in_one_line(tmp_path):
    """No alarm interrupts a matrix product; the watchdog does, a grace past the limit (the
    product alone, float32 6000², takes several seconds on one core)."""
    code = ("import numpy as np; from minitf.exercises import time_limit as t\n"
            "t.GRACE_SECONDS = 0.5\n"
            "a = np.ones((6000, 6000), np.float32)\n"
            "with t.time_limit('softmax_backward', 0.5):\n    a @ a\n"
            "print('the call ended first')\n")
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1",
                                           "OMP_NUM_THREADS": "1"})
    assert run.returncode == limits.ENDED_STATUS, run.stdout + run.stderr
    assert run.stderr == ("minitf: softmax_backward ran on for 0.5 s past its limit of 0.5 s "
                          "(one call that no stop interrupts: a NumPy call on huge arrays?); "
                          "this process ends here\n")
    assert time.perf_counter() - start < 30


def test_a_stop_between_a_setting_and_its_with_leaves_minitfs_settings_as_they_were():
    """A stop that lands after a setting is made and before its ``with`` holds it (inside
    numpy.errstate's entry, or just after ``precision(...)`` or ``seed(...)`` returned) skipped
    the undo: later exercises of a grading ran without overflow warnings, in float64, or on
    other draws (about one stop in twelve, in a loop over those blocks)."""
    import numpy as np

    from minitf import backend
    from minitf.backend import float_errors_ignored, precision, seed

    def settings():
        return np.geterr(), backend.float_dtype(), backend.backend_name(), backend.rng_state()
    before = settings()
    with pytest.raises(limits.TookTooLong):
        with limits.time_limit("x", 0.05):
            np.errstate(over="ignore").__enter__()        # made, never undone: such stops
            precision("float64"), seed(3)
            while True:
                pass
    assert settings() == before
    for _ in range(100):                  # the stop itself, landing where it happens to
        with pytest.raises(limits.TookTooLong):
            with limits.time_limit("x", 0.002):
                while True:
                    with float_errors_ignored("over"), precision("float64"), seed(3):
                        pass
        assert settings() == before
