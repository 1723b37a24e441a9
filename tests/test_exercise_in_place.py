"""Submissions that once got past the grader, each now caught with its own line: a
backward that writes into dy or into the arrays of its cache (full marks, and broken gradients in
a model), None for a gradient the forward has, a gradient minitf's own layer cannot use (NumPy's
error alone), an error message of megabytes or a recursion of a thousand frames (a results.json
of megabytes), and the reference's folder in every report's header."""
import importlib
from pathlib import Path

import pytest

import minitf
import minitf.functional as F
from minitf import exercises, gradcheck_cases
from minitf.backend import backend_name, precision, randn, seed
from minitf.exercises import find, grade, starter_text
from minitf.gradcheck import FunctionCase, check, run_backward


def _hints(result) -> str:
    return "\n".join(line for _, lines in result.problems for line in lines)


def _failed(result) -> set:
    return {(r.check, r.tensor) for r in result.rows if not r.passed}


def _reference(name):
    exercise = find(name)
    return vars(importlib.import_module(exercise.module))[exercise.attribute]


def _answered_with(tmp_path, name: str, old: str = "", new: str = "") -> tuple:
    """(report, status) of the answered exercise file ``name``, ``old`` replaced by ``new``."""
    text = starter_text(find(name), solution=True)
    assert old in text, f"the {name} line this test changes has changed"
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace(old, new) if old else text)
    return exercises.check_file(path)


# -- 1, 2: arrays the backward is handed, written into -------------------------------------------

def test_a_backward_that_writes_into_dy_fails():
    """dy *= 0 after a right linear_backward got full marks; a Residual then sends the zeroed dy
    down its identity path."""
    linear_backward = _reference("linear_backward")

    def zeroes_dy(dy, cache):
        grads = linear_backward(dy, cache)
        dy *= 0
        return grads

    result = grade(find("linear_backward"), zeroes_dy)
    assert not result.passed and ("linear", "dy") in _failed(result)
    assert ("your backward changed dy in place; its caller still reads dy after it returns"
            in _hints(result)), _hints(result)


def test_a_backward_that_writes_into_the_output_in_its_cache_fails():
    """F.softmax returns p and keeps the same array in its cache: p *= … destroyed the caller's
    probabilities, and passed."""
    def into_p(dp, cache):
        p, axis = cache
        p *= dp - (dp * p).sum(axis=axis, keepdims=True)
        return p

    result = grade(find("softmax_backward"), into_p)
    assert not result.passed and ("softmax", "the forward's output") in _failed(result)
    assert "your backward changed the forward's output in place" in _hints(result)
    assert "cache[0]" not in _hints(result)           # one array, named once


def test_a_write_into_the_cache_alone_is_named_by_where_it_sits():
    """layer_norm's cache holds x̂, an array of its own: scribbling on it is named as cache[0]."""
    layer_norm_backward = _reference("layer_norm_backward")

    def into_x_hat(dy, cache):
        grads = layer_norm_backward(dy, cache)
        cache[0][...] = 0
        return grads

    result = grade(find("layer_norm_backward"), into_x_hat, cases=["layer_norm"])
    assert "your backward changed cache[0] in place" in _hints(result), _hints(result)


def test_gradcheck_refuses_a_backward_that_writes_into_dy():
    """The framework's own check says it too, in one line, for a case a learner builds."""
    def relu_backward_in_place(dy, mask):
        dy *= mask
        return dy

    with precision("float64"), seed(0):
        case = FunctionCase(F.relu, relu_backward_in_place, {"x": randn(3, 4)}, ("x",))
        with pytest.raises(ValueError, match=r"^relu: backward changed dy in place; wanted new "
                                             r"arrays"):
            check("relu", case)


def test_none_of_minitf_s_own_backward_passes_writes_into_what_it_is_handed():
    """So the check above never refuses minitf's own layers (and the grader never fails one for
    it): none writes into dy, its output or its cache."""
    changed = {name: list(run_backward(gradcheck_cases.build(name)).changed)
               for name in gradcheck_cases.CASES}
    assert {name: c for name, c in changed.items() if c} == {}


# -- 3: what minitf could not use, named -----------------------------------------------------------

def test_none_for_a_gradient_the_forward_has_says_so():
    """It read "b: no gradient came back for it; hint: return one gradient per input": three
    came back, the third None, though the forward had a bias."""
    linear_backward = _reference("linear_backward")
    result = grade(find("linear_backward"), lambda dy, cache: (*linear_backward(dy, cache)[:2],
                                                               None), cases=["linear"])
    hints = _hints(result)
    assert "b: None came back for it, but the forward had b (shape (5,)), so it has a gradient" \
        in hints and "no gradient came back" not in hints, hints


@pytest.mark.parametrize("name", ["relu_backward", "softmax_backward"])
def test_a_body_without_a_return_says_so(name):
    """A one-output backward whose body forgot its return was told "None is for an input the
    forward went without (linear with no b, …)": advice for a case it was not."""
    reference = _reference(name)
    result = grade(find(name), lambda *args: (reference(*args), None)[1])
    hints = _hints(result)
    assert "the backward returned None, no gradient at all" in hints and \
        "a body without a return statement returns None" in hints, hints
    assert "None is for an input the forward went without" not in hints, hints
    assert not result.passed and all(not row.passed for row in result.rows)


def test_none_where_minitf_s_layer_adds_a_gradient_is_named(tmp_path):
    """In the Linear case minitf's b.grad += None raised NumPy's UFuncTypeError alone."""
    report, status = _answered_with(tmp_path, "linear_backward", "    return dx, dW, db\n",
                                    "    return dx, dW, None\n")
    assert status == 1 and "UFuncTypeError: Cannot cast ufunc 'add'" in report
    assert ("\n  b: None came back for it, but this forward had b: minitf's own linear_backward "
            "returns its gradient here, of shape (3,)\n") in report, report


def test_a_shape_minitf_s_layer_cannot_use_is_named(tmp_path):
    """In the Linear case a transposed dW showed only "operands could not be broadcast
    together with shapes (4,3) (3,4) (4,3)"."""
    report, status = _answered_with(tmp_path, "linear_backward", "dW = x_rows.T @ dy_rows",
                                    "dW = dy_rows.T @ x_rows")
    assert status == 1
    assert ("operands could not be broadcast together with shapes (4,3) (3,4) (4,3)\n"
            "  W: your gradient has shape (3, 4), wanted (4, 3): the shape minitf's own "
            "linear_backward returns here") in report, report


# -- 4: the size of what a learner's error puts in a report --------------------------------------

def test_a_huge_error_message_is_cut_saying_how_much(tmp_path):
    report, status = _answered_with(tmp_path, "linear_backward", "    x, W, has_bias = cache\n",
                                    "    raise ValueError('x' * 1_000_000)\n")
    assert status == 1 and "ValueError: " + "x" * 300 + "… (999700 more characters cut)" \
        in report
    assert len(report) < 2_000, len(report)


def test_a_huge_tuple_returned_is_described_in_a_few_words():
    """The report lists what a backward returned: a tuple of 100,000 Nones was listed in full."""
    result = grade(find("linear_backward"), lambda dy, cache: (None,) * 100_000, cases=["linear"])
    assert "the backward returned a tuple of 100000: None, None, None, None, None, None, … " \
        "(99994 more)" in _hints(result) and len(_hints(result)) < 1_000, _hints(result)[:500]


@pytest.mark.parametrize("body, says", [
    ("    return linear_backward(dy, cache)\n", "  [Previous line repeated "),
    ("    return _there(dy, cache)\n\n\ndef _there(dy, cache):\n    return linear_backward(dy, "
     "cache)\n", " more calls in linear_backward.py …")])
def test_a_recursion_is_shown_in_a_few_frames(tmp_path, body, says):
    """A RecursionError put a thousand identical frames (44 KB) into the report."""
    report, status = _answered_with(tmp_path, "linear_backward", "    x, W, has_bias = cache\n",
                                    body)
    assert status == 1 and "RecursionError: maximum recursion depth exceeded" in report
    assert says in report and len(report) < 3_000, report


# -- 5: the header --------------------------------------------------------------------------------

def test_the_report_names_minitf_s_version_not_its_folder(tmp_path):
    """A homework's grader runs a reference copy of minitf, whose folder is not the student's to
    see: the header said "minitf 0.1.0 (/…/source/reference/minitf)"."""
    report, status = _answered_with(tmp_path, "linear_backward")
    assert status == 0 and f"minitf {minitf.__version__}, {backend_name()}, float64" in report
    assert str(Path(minitf.__file__).parent) not in report


def test_a_case_that_raises_names_the_cases_it_left_unrun(tmp_path):
    """The check stops at a case that raises; the table above read as the whole check, and case
    'Linear, no bias', never run, was not mentioned."""
    report, status = _answered_with(
        tmp_path, "linear_backward", "db = sum_over_positions(dy) if has_bias else None",
        "db = dy.sum(axis=0) if has_bias else None")
    assert status == 1 and "in case 'Linear', your linear_backward raised an error" in report
    assert ("\n(not run after it: case 'Linear, no bias'; run the check again once this one "
            "passes)\n") in report, report


def test_a_numpy_warning_in_the_learner_s_file_names_its_line(tmp_path, capsys):
    """"minitf exercise check: warning: divide by zero encountered in divide", printed above the
    report, named no file and no line."""
    from minitf import cli
    text = starter_text(find("relu_backward"), solution=True)
    body, dividing = "    return dy * positive", "    return dy * positive + 0 * (dy / (dy * 0))"
    assert body + "\n" in text
    path = tmp_path / "relu_backward.py"
    path.write_text(text.replace(body + "\n", dividing + "\n"))
    line = path.read_text().splitlines().index(dividing) + 1
    assert cli.main(["exercise", "check", str(path)]) == 1
    assert (f"minitf exercise check: warning: relu_backward.py, line {line}: divide by zero "
            f"encountered in divide") in capsys.readouterr().err.splitlines()
