"""The code a grading runs cannot open the reference's own solutions: loaded by path, they gave
full marks in four lines, and printed, they reached the feedback a student reads."""
import shutil

import pytest

from minitf import homework

SOFTMAX = "minitf/functional/softmax.py"
RIGHT = "return p * (dp - row_dot(dp, p, axis))"
LOADED = """import importlib.util, os, minitf
    where = os.path.join(os.path.dirname(minitf.__file__), "functional", "softmax.py")
    spec = importlib.util.spec_from_file_location("answers", where)
    answers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(answers)
    return answers.softmax_backward(dp, cache)"""
PRINTED = """import inspect, minitf.array_ops
    import minitf.functional.softmax as mine
    try:
        print(open(minitf.array_ops.__file__.replace("array_ops.py", "functional/softmax.py")).read())
    except PermissionError:
        pass
    """ + RIGHT
# the lines of the file are in linecache already (the grader's own reads of it put them there),
# so inspect opened nothing and the open hook never saw it: the answer reached the feedback
SOURCE = """import inspect, sys
    import minitf.functional.softmax
    try:
        print(inspect.getsource(sys.modules["minitf.functional.softmax"]))
    except OSError:
        pass
    """ + RIGHT


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("guard")
    names = ["softmax_backward", "layer_norm_backward"]
    return homework.make(root / "hw", names), homework.make(root / "key", names, solutions=True)


def _submission(key, tmp_path, body):
    folder = tmp_path / "submission"
    shutil.copytree(key / "minitf", folder / "minitf")
    path = folder / SOFTMAX
    text = path.read_text(encoding="utf-8")
    assert RIGHT in text
    path.write_text(text.replace(RIGHT, body), encoding="utf-8")
    return folder


@pytest.mark.parametrize("body", [LOADED, PRINTED, SOURCE],
                         ids=["loaded by path", "printed", "inspect.getsource"])
def test_code_that_opens_the_reference_s_solutions_scores_0_and_sees_nothing(made, tmp_path,
                                                                            capsys, body):
    hw, key = made
    outcomes = {o.name: o for o in homework.grade(hw, _submission(key, tmp_path, body))}
    stopped = outcomes["softmax_backward"]
    assert stopped.score == 0 and stopped.result.stopped == (
        "your softmax.py tried to read minitf's own functional/softmax.py, which holds the "
        "solutions, while it was graded: softmax_backward scores 0")
    assert stopped.result.stopped in stopped.report
    assert RIGHT not in stopped.printed and RIGHT not in capsys.readouterr().out   # nothing shown
    assert outcomes["layer_norm_backward"].result.passed                 # the others as they are


def test_a_traceback_the_student_prints_is_no_read_and_shows_no_solution(made, tmp_path, capsys):
    """Its lines are looked up in the hidden cache, then in the file, which is refused: scored 0
    for reading, the student who printed an error they caught lost the exercise."""
    hw, key = made
    body = """import sys, traceback, minitf.functional.softmax
    mine = sys.modules["minitf.functional.softmax"]
    try:
        mine.softmax("not an array")          # raises in the reference's softmax.py
    except Exception:
        traceback.print_exc()
    import linecache
    assert mine.__file__ not in linecache.cache.copy(), "its lines shown"
    """ + RIGHT
    outcome = {o.name: o for o in homework.grade(hw, _submission(key, tmp_path, body))}
    assert outcome["softmax_backward"].result.passed, outcome["softmax_backward"].report
    assert "tried to read" not in outcome["softmax_backward"].report
    assert RIGHT not in outcome["softmax_backward"].printed + capsys.readouterr().out


def test_the_grader_s_own_reads_and_a_right_answer_go_through(made, tmp_path):
    """A traceback's source lines are read by the grader, after the student's code returned."""
    hw, key = made
    raising = _submission(key, tmp_path, "raise ValueError('not yet')")
    report = {o.name: o for o in homework.grade(hw, raising)}["softmax_backward"].report
    assert "ValueError: not yet" in report and "holds the solutions" not in report
    assert all(o.result.passed for o in homework.grade(hw, key))


# a process reads files the open hook never sees; a thread running exec of a string holds no
# frame of the student's file, so its open passed as the grader's: both printed the answer
BY_A_PROCESS = """import os, subprocess, sys, minitf
    where = os.path.join(os.path.dirname(minitf.__file__), "functional", "softmax.py")
    try:
        print(subprocess.run([sys.executable, "-c", f"print(open({where!r}).read())"],
                             capture_output=True, text=True).stdout)
    except PermissionError as err:
        print("refused:", err)
    """ + RIGHT
BY_A_THREAD = """import os, threading, minitf
    where = os.path.join(os.path.dirname(minitf.__file__), "functional", "softmax.py")
    thread = threading.Thread(target=exec, args=(f"print(open({where!r}).read())",))
    thread.start()
    thread.join()
    """ + RIGHT


def test_code_that_starts_a_process_is_refused_and_shows_nothing(made, tmp_path, capsys):
    hw, key = made
    outcome = {o.name: o for o in homework.grade(hw, _submission(key, tmp_path, BY_A_PROCESS))}
    softmax = outcome["softmax_backward"]
    assert "refused: the code being graded may not start a process (subprocess.Popen)" in \
        softmax.printed
    assert RIGHT not in softmax.printed + capsys.readouterr().out          # nothing shown
    assert softmax.result.passed                    # its own answer, right: the refusal is all


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_thread_that_opens_the_solutions_is_refused_and_scores_0(made, tmp_path, capsys):
    hw, key = made
    outcome = {o.name: o for o in homework.grade(hw, _submission(key, tmp_path, BY_A_THREAD))}
    softmax = outcome["softmax_backward"]
    assert softmax.score == 0 and "tried to read minitf's own functional/softmax.py" in \
        softmax.result.stopped
    assert RIGHT not in softmax.printed + capsys.readouterr().out          # nothing shown
