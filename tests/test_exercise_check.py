"""The checker behind 'minitf exercise check' can fail: each classic mistake, written as a wrong
backward, fails with its own hint; the learner's function stands in for minitf's own only during
the check. (Errors in the learner's file, shown in their own lines, are
test_exercise_learner_errors.py's.)"""
import importlib
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
