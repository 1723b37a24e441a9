"""The checker behind 'minitf exercise check' can fail: each classic mistake, written as a wrong
backward, fails with its own hint; the learner's function stands in for minitf's own only during
the check; their errors are shown in their own lines."""
import importlib
import os
import re

import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
from minitf import exercises
from mistakes import layer_norm_backward_without_variance
from minitf.backend import get_array_module
from minitf.exercises import find, grade, standing_in, starter_text
from minitf.nn.module import as_tuple

# minitf's own functions, taken now: while a wrong one stands in, F.<name> is the wrong one.
from minitf.functional import (attention_backward, layer_norm_backward,  # noqa: E402
                               linear_backward, softmax_backward)

functional_attention = importlib.import_module("minitf.functional.attention")


def _hints(result) -> str:
    return "\n".join(line for _, lines in result.problems for line in lines)


def _failed(result) -> set:
    return {(r.check, r.tensor) for r in result.rows if not r.passed}


# -- each classic mistake fails, with the hint that names it -------------------------------------

def test_a_gradient_of_zeros():
    result = grade(find("relu_backward"), lambda dy, cache: get_array_module(dy).zeros_like(dy))
    assert not result.passed and _failed(result) == {("relu", "x"), ("ReLU", "input x")}
    assert "hint: your gradient is all zeros: did you return it" in _hints(result)


def test_a_missing_scale_is_reported_with_its_factor():
    def unscaled(dout, cache):
        dq, dk, dv, dbias = attention_backward(dout, cache)
        return dq / cache.scale, dk / cache.scale, dv, dbias

    result = grade(find("attention_backward"), unscaled, cases=["attention"])
    assert _failed(result) == {("attention", "q"), ("attention", "k")}
    assert "your gradient is 2.449 = √6 times the right one" in _hints(result)   # d_k = 6


def test_a_missing_dropout_scale_is_a_constant_factor():
    def unscaled(dy, cache):
        return dy if cache is None else dy * (cache != 0)

    result = grade(find("dropout_backward"), unscaled, cases=["dropout"])
    assert "your gradient is 0.7 times the right one" in _hints(result)          # 1 − p


def test_a_transposed_weight_gradient_raises_a_shape_error_not_a_pass():
    def transposed(dy, cache):
        dx, dW, db = linear_backward(dy, cache)
        return dx, dW.T, db

    result = grade(find("linear_backward"), transposed, cases=["linear"])
    assert _failed(result) == {("linear", "W")}
    hints = _hints(result)
    assert "W: your gradient has shape (5, 4), wanted (4, 5)" in hints
    assert "axes swapped" in hints


def _softmax_backward_on_the_last_axis(dp, cache):
    p, _ = cache                                      # axis ignored: the last, whatever it says
    return p * (dp - (dp * p).sum(axis=-1, keepdims=True))


def _layer_norm_backward_summed_over_two_axes(dy, cache):
    dx, _, _ = layer_norm_backward(dy, cache)
    x_hat = cache[0]
    return dx, (dy * x_hat).sum(axis=(0, 1)), dy.sum(axis=(0, 1))    # right for (b, n, d) alone


def _values_backward_of_axes_2_and_3(dout, cache):
    weights = functional_attention._weights(cache)
    return weights.swapaxes(2, 3) @ dout, dout @ cache.v.swapaxes(2, 3)   # right for 4-D alone


@pytest.mark.parametrize("name, wrong, patched, case", [
    ("softmax_backward", _softmax_backward_on_the_last_axis, None,
     "softmax, along axis 1 of three"),
    ("layer_norm_backward", _layer_norm_backward_summed_over_two_axes, None,
     "layer_norm, a 2-D batch of rows"),
    ("attention_backward", attention_backward, "_values_backward",
     "attention, without a head axis: (b, n, d)"),
])
def test_an_answer_right_for_one_shape_or_axis_only_fails(monkeypatch, name, wrong, patched, case):
    """Each of these passed every check, and earned full marks in a homework: a softmax backward
    that ignores ``axis``, a layer norm's dγ summed over axes (0, 1), attention's transposes
    written for (b, h, n, d) inputs alone."""
    if patched:                                         # a helper the exercise grades with it
        monkeypatch.setattr(functional_attention, patched, _values_backward_of_axes_2_and_3)
    result = grade(find(name), wrong)
    assert not result.passed
    assert any(r.check == case and not r.passed for r in result.rows) or \
        case in (result.stopped or "") + _hints(result), (result.rows, result.stopped)


def test_a_bias_gradient_left_unsummed_gets_the_broadcast_hint():
    def unsummed(dy, cache):
        dx, dW, _ = linear_backward(dy, cache)
        return dx, dW, dy

    result = grade(find("linear_backward"), unsummed, cases=["linear"])
    assert "b: your gradient has shape (2, 3, 5), wanted (5,)" in _hints(result)
    assert "a broadcast in the forward is a sum in the backward" in _hints(result)


def test_a_wrong_dtype():
    result = grade(find("relu_backward"), lambda dy, cache: (dy * cache).astype("float32"))
    assert "x: your gradient is float32, wanted float64" in _hints(result)


def test_nan_in_a_fully_masked_row():
    def divides_by_p(dp, cache):
        p, axis = cache
        with np.errstate(invalid="ignore"):
            return softmax_backward(dp, cache) * (p / p)

    result = grade(find("softmax_backward"), divides_by_p)
    assert _failed(result) == {("softmax, masked entries and a fully masked row", "x")}
    assert "NaN or inf entries, the first at x[0, 3]" in _hints(result)


def test_a_gradient_that_ignores_dout():
    result = grade(find("relu_backward"), lambda dy, cache: cache.astype(dy.dtype))
    assert "it ignores dy (every gradient is a product with the upstream one)" in _hints(result)
    result = grade(find("softmax_backward"), lambda dp, cache: cache[0] * (1 - cache[0]))
    assert "it ignores dp (every" in _hints(result)                 # the function's own name


def test_a_flipped_sign_is_named_as_such_not_as_a_missing_factor():
    result = grade(find("softmax_backward"), lambda dp, cache: -softmax_backward(dp, cache))
    hints = _hints(result)
    assert "your gradient is the right one with the sign flipped: a minus sign lost" in hints
    assert "constant factor" not in hints


def test_a_negative_zero_prints_as_zero():
    """ReLU's backward with the mask taken from dy: where dy < 0 it returns -0.0, not 0."""
    result = grade(find("relu_backward"), lambda dy, cache: dy * (dy > 0))
    assert "yours -0," not in _hints(result)
    assert re.search(r"worst entry x\[[0-9, ]+\]: yours 0, numeric -?[0-9.]+", _hints(result))


def test_missing_terms_fail_with_the_exercise_s_classic_mistake():
    result = grade(find("layer_norm_backward"), layer_norm_backward_without_variance)
    assert _failed(result) == {("layer_norm", "x"), ("layer_norm, a 2-D batch of rows", "x"),
                               ("LayerNorm", "input x")}
    assert "the classic mistake here: μ or σ treated as constants" in _hints(result)

    result = grade(find("softmax_backward"), lambda dp, cache: cache[0] * dp)
    assert "the classic mistake here: dx = p ⊙ dp" in _hints(result)


def test_a_residual_undone_in_the_forward_s_order_fails_with_its_hint_not_an_error():
    """Pre-LN with the norm's backward first: the gradients come out wrong, and the grader says
    so with the hint for that order, not with an error from inside the layers."""
    def forward_order(self, dy):                               # pre-LN, the case graded
        return dy + as_tuple(self.layer.backward(self.drop.backward(self.norm.backward(dy))))[0]

    result = grade(find("Residual.backward"), forward_order, cases=["Residual, pre-LN"])
    assert not result.passed and ("Residual, pre-LN", "param layer.W_1.W") in _failed(result)
    assert "LN and f undone in the forward's order" in _hints(result)
    assert "raised" not in _hints(result)


def test_a_forgotten_gradient():
    result = grade(find("layer_norm_backward"),
                   lambda dy, cache: layer_norm_backward(dy, cache)[:2], cases=["layer_norm"])
    assert "beta: no gradient came back for it" in _hints(result)


def test_a_composite_that_drops_the_memory_gradient():
    exercise = find("DecoderBlock.backward")
    reference = exercise.reference
    result = grade(exercise, lambda self, dy: reference(self, dy)[0], cases=["DecoderBlock, pre-LN"])
    assert "input memory: no gradient came back for it" in _hints(result)


def test_a_backward_that_writes_into_the_forward_s_input():
    def in_place(dy, cache):
        x, W, has_bias = cache
        x *= 2
        return linear_backward(dy, (x, W, has_bias))

    result = grade(find("linear_backward"), in_place, cases=["linear"])
    assert not result.passed and "your backward changed input x in place" in _hints(result)


# -- standing in, and putting everything back ------------------------------------------------------

def test_the_learner_s_function_stands_in_wherever_minitf_looks_it_up():
    reference = F.softmax_backward
    seen = []

    def spy(dp, cache):
        seen.append(dp.shape)
        return reference(dp, cache)

    with standing_in(find("softmax_backward"), spy) as places:
        assert F.softmax_backward is spy and functional_attention.softmax_backward is spy
        assert {m.__name__ for m, _ in places} >= {"minitf.functional",
                                                   "minitf.functional.softmax",
                                                   "minitf.functional.attention"}
    assert F.softmax_backward is reference and functional_attention.softmax_backward is reference


def test_everything_is_put_back_when_the_learner_s_code_raises():
    exercise = find("MultiHeadAttention.backward")
    before = nn.MultiHeadAttention.backward       # as the class holds it (with Module's check)

    def broken(self, dy):
        raise ZeroDivisionError("oops")

    result = grade(exercise, broken)
    assert result.stopped and "ZeroDivisionError: oops" in result.stopped and not result.passed
    assert nn.MultiHeadAttention.backward is before


def test_another_exercise_is_graded_against_the_reference(tmp_path):
    """An unfinished softmax_backward does not fail attention_backward: only one function
    stands in at a time."""
    (tmp_path / "softmax_backward.py").write_text(starter_text(find("softmax_backward")))
    attention = tmp_path / "attention_backward.py"
    attention.write_text(starter_text(find("attention_backward"), solution=True))
    assert exercises.check_file(tmp_path / "softmax_backward.py")[1] == 1
    assert exercises.check_file(attention)[1] == 0


# -- errors in the learner's file are shown in their lines ----------------------------------------

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


def test_a_grade_of_no_checks_is_no_pass():
    """Nothing checked is nothing passed: a grading that built no case (an instructor's
    check_<name>() returning {}) must not score, or every student would get the point."""
    from minitf.exercises.grade import Result
    assert not Result().passed
    assert not grade(find("softmax_backward"), lambda dp, cache: None, cases=[]).passed
