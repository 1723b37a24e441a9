"""Errors in the learner's file, shown in the learner's own lines: an exception, a gradient
minitf cannot use, gradients in another order, their own NotImplementedError, a syntax error, an
exit or os._exit, an endless loop, code below the end line."""
import importlib
import os
import re

import pytest

from minitf import exercises
from minitf.exercises import find, grade, starter_text

from test_exercise_check import _hints

def test_an_error_in_the_learner_s_code_shows_their_lines_only(tmp_path):
    path = tmp_path / "softmax_backward.py"
    path.write_text(starter_text(find("softmax_backward")).replace(
        'raise NotImplementedError("softmax_backward: not written yet")',
        "p, axis = cache\n    return p @ dp"))
    report, status = exercises.check_file(path)
    assert status == 1
    assert "in case 'softmax', your softmax_backward raised an error:" in report
    assert "softmax_backward.py, line" in report and "    return p @ dp" in report
    assert "ValueError: matmul" in report
    places = re.findall(r"^\s+(\S+), line \d+, in (\S+)$", report, flags=re.M)
    assert places == [("softmax_backward.py", "softmax_backward")]     # not minitf's frames
    assert "Traceback" not in report


def test_an_error_of_the_learner_s_own_that_says_not_written_yet_is_a_full_report(tmp_path):
    """Told apart from a stub by what raised, not by the words: a message of their own that read
    "not written yet" lost the report's header, lines and verdict."""
    path = tmp_path / "softmax_backward.py"
    path.write_text(starter_text(find("softmax_backward")).replace(
        'raise NotImplementedError("softmax_backward: not written yet")',
        'raise ValueError("TODO: the masked rows are not written yet")'))
    report, status = exercises.check_file(path)
    assert status == 1 and report.startswith("exercise softmax_backward: your"), report
    assert "ValueError: TODO: the masked rows are not written yet" in report
    assert report.endswith("softmax_backward: not yet: see what went wrong above")


def test_a_gradient_minitf_cannot_use_gets_a_shape_hint_not_numpy_alone(tmp_path):
    """In the module case a transposed dW raises in minitf's Linear, after the learner's function
    returned: NumPy's broadcast error names no gradient, so the report says where to look."""
    path = tmp_path / "linear_backward.py"
    right = "dW = x_rows.T @ dy_rows"
    text = starter_text(find("linear_backward"), solution=True)
    assert right in text, "the linear_backward line this test breaks has changed"
    path.write_text(text.replace(right, "dW = dy_rows.T @ x_rows"))
    report, status = exercises.check_file(path)
    assert status == 1 and "W: your gradient has shape (5, 4), wanted (4, 5)" in report, report
    assert ("in case 'Linear', your linear_backward raised an error (raised in minitf, after it "
            "returned):\nValueError: operands could not be broadcast together") in report
    assert ("hint: minitf could not use what your linear_backward returned (a tuple of 3: an "
            "array of shape (2, 3, 4), an array of shape (3, 4), an array of shape (3,)): is each "
            "gradient the shape of its input, and are there as many as minitf's own returns?"
            ) in report


def test_a_tuple_where_one_gradient_is_wanted_is_described(tmp_path):
    """embedding_backward returning (dW, None) failed in Embedding's dW += … with NumPy's "setting
    an array element with a sequence" alone: the report now says what came back."""
    path = tmp_path / "embedding_backward.py"
    text = starter_text(find("embedding_backward"), solution=True)
    assert "    return dW\n" in text, "the embedding_backward line this test breaks has changed"
    path.write_text(text.replace("    return dW\n", "    return dW, None\n"))
    report, status = exercises.check_file(path)
    assert status == 1 and ("minitf could not use what your embedding_backward returned (a tuple "
                            "of 2: an array of shape (7, 4), None)") in report, report


def test_a_parameter_s_grad_assigned_at_another_shape_is_named_not_the_return(tmp_path):
    """self.W.grad = the rows' sum, (n, d), failed in minitf's next += into it, and the hint
    blamed the gradient returned, which was right."""
    path = tmp_path / "LearnedPositionalEmbedding_backward.py"
    path.write_text(starter_text(find("LearnedPositionalEmbedding.backward")).replace(
        'raise NotImplementedError("LearnedPositionalEmbedding.backward: not written yet")',
        "offset, n = self._pop_cache()\n    self.W.grad = sum_to_shape(dy, (n, dy.shape[-1]))"
        "\n    return dy"))
    report, status = exercises.check_file(path)
    assert status == 1 and ("  param W: your backward set its .grad to shape (3, 6), wanted "
                            "(10, 6), W's own: add into self.W.grad (+=), never assign it"
                            ) in report, report
    assert "could not use what your backward returned" not in report


@pytest.mark.parametrize("name, swap, wrong, says", [
    ("layer_norm_backward", lambda g: (g[0], g[2], g[1]), "gamma",
     "gamma: your gradient is the gradient of beta, not of gamma"),
    ("linear_backward", lambda g: (g[1], g[0], g[2]), "x",
     "x: your gradient has the shape of W, not of x")])
def test_gradients_returned_in_another_order_are_named_as_such(name, swap, wrong, says):
    """layer_norm's dγ and dβ swapped got layer norm's classic-mistake hint (the mean or variance
    path missing from dx, which was right); linear's dW and dx swapped got shape lines only."""
    exercise = find(name)
    reference = vars(importlib.import_module(exercise.module))[exercise.attribute]
    result = grade(exercise, lambda dy, cache: swap(reference(dy, cache)), cases=[name[:-9]])
    hints = _hints(result)
    assert says in hints and "hint: gradients returned (or added into .grad) in another order?" \
        in hints, hints
    assert exercise.mistake not in hints


def test_a_wrong_gradient_that_only_equals_another_s_is_not_called_another_order():
    """A Residual whose wrong W_o.b gradient happened to equal norm.beta's true one (both Σ dy)
    read "your gradient is the gradient of param norm.beta … in another order?": it returned
    nothing in another order. Only a swap (or a cycle) is one."""
    exercise = find("layer_norm_backward")
    reference = vars(importlib.import_module(exercise.module))[exercise.attribute]
    result = grade(exercise, lambda dy, cache: (lambda g: (g[0], g[2], g[2]))(
        reference(dy, cache)), cases=["layer_norm"])
    hints = _hints(result)
    assert not result.passed and "gamma: worst entry" in hints, hints
    assert "another order" not in hints and "is the gradient of beta" not in hints


def test_a_not_implemented_error_of_the_learner_s_own_is_their_error(tmp_path):
    """raise NotImplementedError("dropout: later") in an answer was reported as "dropout is not
    written yet, and attention_backward calls it": no exercise is called dropout."""
    path = tmp_path / "attention_backward.py"
    text = starter_text(find("attention_backward"), solution=True)
    first = "    dv, dweights = _values_backward(dout, cache)\n"
    assert first in text, "the attention_backward line this test changes has changed"
    path.write_text(text.replace(first, '    if cache.dropout is not None:\n        raise '
                                        'NotImplementedError("dropout: later")\n' + first))
    report, status = exercises.check_file(path)
    assert status == 1 and "not written yet" not in report, report
    assert "your attention_backward raised an error:" in report
    assert 'raise NotImplementedError("dropout: later")' in report


def test_a_not_implemented_error_in_the_exercise_s_name_but_its_own_words_is_theirs(tmp_path):
    """raise NotImplementedError("relu_backward: I still need the mask") read as the blank stub:
    "not written yet", and no report. A stub says "not written yet", the exercise's hint, or
    that a helper is part of it; other words are the learner's."""
    path = tmp_path / "relu_backward.py"
    path.write_text(starter_text(find("relu_backward")).replace(
        'raise NotImplementedError("relu_backward: not written yet")',
        'raise NotImplementedError("relu_backward: I still need the mask")'))
    report, status = exercises.check_file(path)
    assert status == 1 and "not written yet" not in report, report
    assert "NotImplementedError: relu_backward: I still need the mask" in report
    path.write_text(starter_text(find("relu_backward")))            # the stub itself
    assert "relu_backward is not written yet" in exercises.check_file(path)[0]


def test_a_syntax_error_and_a_missing_function_are_one_clear_message(tmp_path):
    path = tmp_path / "relu_backward.py"
    path.write_text(starter_text(find("relu_backward")).replace("def relu_backward(", "def relu_backward(("))
    report, status = exercises.check_file(path)
    assert status == 1 and report.startswith("relu_backward.py, line ")
    path.write_text(starter_text(find("relu_backward")).replace("def relu_backward(", "def relu_b("))
    report, status = exercises.check_file(path)
    assert status == 1 and report == ("relu_backward.py: defines no function relu_backward; wanted "
                                      "the one 'minitf exercise start relu_backward' wrote")


def test_an_exit_in_the_learner_s_code_fails_the_check_instead_of_ending_it(tmp_path):
    """sys.exit(0) in an answer ended 'minitf exercise check' (and a homework's grading) at
    once, with exit status 0 and no report: a pass, to anyone reading the status."""
    path = tmp_path / "relu_backward.py"
    starter = starter_text(find("relu_backward"))
    stub = 'raise NotImplementedError("relu_backward: not written yet")'
    for answer, where in [("import sys\n    sys.exit(0)", "in case 'relu', your relu_backward"),
                          ("exit()", "in case 'relu', your relu_backward")]:
        path.write_text(starter.replace(stub, answer))
        report, status = exercises.check_file(path)
        assert status == 1 and where in report and "SystemExit" in report, report
    path.write_text("import sys\nsys.exit(0)\n" + starter)            # at the top of the file
    report, status = exercises.check_file(path)
    assert status == 1 and "raised an error as it was loaded" in report and "SystemExit" in report


def test_os_exit_in_the_learner_s_code_fails_the_check_instead_of_ending_the_process(
        tmp_path, monkeypatch):
    """os._exit(0), which no except clause sees, ended 'minitf exercise check' and a homework's
    grading with exit status 0 and not a word; inside the learner's code it now raises."""
    path = tmp_path / "relu_backward.py"
    starter = starter_text(find("relu_backward"))

    def real_exit(status):       # stands in for the real one, should the guard let a call by
        raise AssertionError("os._exit reached: it would have ended this test run with 0")
    monkeypatch.setattr(os, "_exit", real_exit)
    path.write_text(starter.replace('raise NotImplementedError("relu_backward: not written yet")',
                                    "import os\n    os._exit(0)"))
    report, status = exercises.check_file(path)
    assert status == 1 and "in case 'relu', your relu_backward" in report, report
    assert "ExitRefused: your code called os._exit(0), which would end the grading" in report
    path.write_text("import os\nos._exit(0)\n" + starter)               # at the top of the file
    report, status = exercises.check_file(path)
    assert status == 1 and "raised an error as it was loaded" in report and "os._exit(0)" in report
    assert os._exit is real_exit, "outside the learner's code os._exit is itself again"


@pytest.mark.parametrize("name, limit", [
    ("relu_backward", "EXERCISE_SECONDS"),
    ("DecoderBlock.backward", "COMPOSITE_SECONDS"),  # a whole model's: a longer limit, its own
])
def test_an_answer_that_never_returns_is_stopped_where_it_loops(tmp_path, monkeypatch, name,
                                                                limit):
    """A loop that never ends hung 'minitf exercise check' for good, with no word."""
    monkeypatch.setattr(f"minitf.exercises.time_limit.{limit}", 1)
    exercise = find(name)
    path = tmp_path / exercise.filename
    path.write_text(starter_text(exercise).replace(
        f'raise NotImplementedError("{name}: not written yet")', "while True:\n        dy = dy + 0"))
    report, status = exercises.check_file(path)
    assert status == 1 and report.startswith(f"{path.name} could not be graded:"), report
    # where it was: the loop's line (the one Python checks for signals at) or its body's
    assert f"{path.name}, line" in report
    assert "    while True:" in report or "    dy = dy + 0" in report, report
    assert report.endswith(f"TookTooLong: your {path.name} ran for more than 1 s and was "
                           f"stopped (a loop that never ends?)")


def test_a_long_failing_table_shows_its_failing_rows_only():
    """A whole model's report listed some 180 rows, its few failures somewhere among them."""
    from minitf.exercises.grade import Result
    from minitf.exercises.report import report
    from minitf.gradcheck import Row
    result = Result(rows=[Row("case", f"param p{i}", (2,), 0.5 if i == 7 else 1e-9)
                          for i in range(40)])
    text = report(find("relu_backward"), result)
    assert "param p7 " in text and "param p8 " not in text
    assert "39 of 40 tensors within 1e-06; 1 FAILED (only those are shown)" in text
    short = report(find("relu_backward"), Result(rows=result.rows[:20]))    # every row
    assert "param p8 " in short and "only those" not in short


def test_code_below_the_end_line_and_a_name_without_py_are_pointed_out(tmp_path):
    """An answer pasted below the END line was reported as "not written yet" alone, and
    'check softmax_backward' (no .py) as "no such file"."""
    exercise = find("softmax_backward")
    path = tmp_path / "softmax_backward.py"
    end = "    " + exercises.starter.FENCE.format("END", exercise.name)
    starter = starter_text(exercise)
    path.write_text(starter.replace(end, end + "\n    p, axis = cache\n    return p * dp"))
    report, status = exercises.check_file(path)
    assert status == 1 and report.startswith(
        "softmax_backward.py: softmax_backward is not written yet") and \
        "there is code below its END OF YOUR CODE line, which never runs" in report, report
    path.write_text(starter)                                 # the untouched starter: no such word
    report, status = exercises.check_file(path)
    assert status == 1 and "below" not in report, report
    with pytest.raises(ValueError, match=re.escape(
            f"FILE {tmp_path / 'softmax_backward'}: no such file (did you mean "
            f"softmax_backward.py?)")):
        exercises.check_file(tmp_path / "softmax_backward")
    # a method's file is named with a _ (ClassToken_backward.py): its name with the . is near
    (tmp_path / "ClassToken_backward.py").write_text(starter_text(find("ClassToken.backward")))
    for typed in ("ClassToken.backward.py", "ClassToken.backward"):
        with pytest.raises(ValueError, match=re.escape(
                f"FILE {tmp_path / typed}: no such file (did you mean ClassToken_backward.py?)")):
            exercises.check_file(tmp_path / typed)


def test_a_grade_of_no_checks_is_no_pass():
    """Nothing checked is nothing passed: a grading that built no case (an instructor's
    check_<name>() returning {}) must not score, or every student would get the point."""
    from minitf.exercises.grade import Result
    assert not Result().passed
    assert not grade(find("softmax_backward"), lambda dp, cache: None, cases=[]).passed
