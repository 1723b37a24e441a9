"""Mistakes a comparison with finite differences cannot see on its own, each caught with its own
line: a .grad assigned where it should be added into (the checks start every .grad at zero),
values returned beyond what the check reads, a gradient for integer ids, a write into an option
of the forward (RoPE's sin), and the context path of Residual and Stack."""
import importlib

import numpy as np

from minitf.exercises import find, grade, grading_cases


def _hints(result) -> str:
    return "\n".join(line for _, lines in result.problems for line in lines)


def _reference(name):
    exercise = find(name)
    return vars(importlib.import_module(exercise.module))[exercise.attribute] \
        if not exercise.is_method else exercise.reference


def test_a_grad_assigned_instead_of_added_into_fails():
    """ClassToken's classic mistake, named in its catalogue entry, passed every check."""
    def assigned(self, dy):
        self._pop_cache()
        self.cls.grad = dy[:, 0].sum(axis=0)                 # = where += belongs
        return dy[:, 1:]

    result = grade(find("ClassToken.backward"), assigned)
    assert not result.passed
    assert "param cls: after two backwards without zero_grad() its .grad is not twice" in \
        _hints(result)
    # its own row, the second backward's, with cls's shape: it read "param cls ()", a third tensor
    twice, = [row for row in result.rows if not row.passed]
    assert (twice.check, twice.tensor, twice.shape) == ("ClassToken, backward twice", "param cls",
                                                        (4,))
    assert abs(twice.error - 1 / 3) < 1e-9        # |g − 2g| / (|g| + |2g|): assigned, not added
    assert grade(find("ClassToken.backward"), find("ClassToken.backward").reference).passed


def test_a_value_returned_beyond_what_minitf_reads_fails():
    """rope_backward returning (dx, None) passed its check, then broke inside attention."""
    rope_backward = _reference("rope_backward")
    result = grade(find("rope_backward"), lambda dy, cache: (rope_backward(dy, cache), None))
    assert not result.passed
    assert ("the backward returned a tuple of 2: an array of shape (2, 3, 4, 6), None; wanted "
            "an array of shape (2, 3, 4, 6), as minitf's own rope_backward returns") in \
        _hints(result)


def test_a_gradient_for_integer_ids_fails_with_its_own_line():
    """It read as a shape error: "input ids: your gradient has shape (2, 5, 8), wanted (2, 5)"."""
    reference = find("DecoderLM.backward").reference

    def with_dx(self, dlogits):
        reference(self, dlogits)
        return np.zeros((2, 5, 8))

    result = grade(find("DecoderLM.backward"), with_dx, cases=["DecoderLM, RoPE"])
    assert not result.passed
    assert "input ids: integer ids have no gradient, but one came back" in _hints(result)


def test_a_write_into_an_option_of_the_forward_is_caught():
    """cos and sin are options of the rope case, not inputs: a backward that negated sin in
    place was blamed for a wrong formula."""
    rope_backward = _reference("rope_backward")

    def in_place(dy, cache):
        cos, sin = cache
        sin *= -1
        return rope_backward(dy, (cos, -sin))

    result = grade(find("rope_backward"), in_place)
    assert "your backward changed option sin in place" in _hints(result)


def test_residual_and_stack_are_graded_on_their_context_paths():
    """Both Residual cases wrapped a feed-forward layer and the only Stack case held decoder
    blocks: a Residual that dropped f's memory gradient, and a Stack that always unpacked two,
    passed."""
    assert any("cross-attention" in name for name in grading_cases(find("Residual.backward")))
    assert any("EncoderBlocks" in name for name in grading_cases(find("Stack.backward")))

    def two_always(self, dy):
        d_memory = None
        for block in reversed(self.blocks):
            dy, d = block.backward(dy)
            d_memory = d if d_memory is None else d_memory + d
        return dy, d_memory

    assert not grade(find("Stack.backward"), two_always).passed


def test_a_bias_gradient_where_there_is_no_bias_fails():
    """attention_backward returning a dbias when the case has no bias got full marks, and then
    every MultiHeadAttention read the array as a relative bias's gradient."""
    attention_backward = _reference("attention_backward")

    def always_dbias(dout, cache):
        dq, dk, dv, dbias = attention_backward(dout, cache)
        return dq, dk, dv, dbias if dbias is not None else np.zeros(cache.probs.shape)

    result = grade(find("attention_backward"), always_dbias, cases=["attention"])
    assert not result.passed
    assert ("the backward returned an array of shape (2, 3, 4, 5) as its value 4 of 4, where "
            "minitf's own attention_backward returns None in this case; wanted None there") in \
        _hints(result)
    assert grade(find("attention_backward"), attention_backward, cases=["attention"]).passed


def test_a_module_backward_that_returns_a_tuple_for_one_gradient_fails():
    """Residual.backward always returning (dx, *dcontext) got full marks: the check made a tuple
    of whatever came back, and EncoderBlock then got a tuple for its dx."""
    reference = find("Residual.backward").reference

    def always_a_tuple(self, dy):
        back = reference(self, dy)
        return back if isinstance(back, tuple) else (back,)

    result = grade(find("Residual.backward"), always_a_tuple)
    assert not result.passed
    assert "the backward returned a tuple of 1: an array of shape (2, 3, 6); wanted an array " \
           "of shape (2, 3, 6), as minitf's own Residual.backward returns" in _hints(result)
    # the cross-attention case, whose context gets a gradient, returns a tuple: passes there
    assert {case for case, _ in result.problems} == {"Residual, post-LN", "Residual, pre-LN"}


def test_answers_right_only_for_the_shapes_of_the_first_cases_fail():
    """A dropout_backward without its cache-is-None branch, and a linear_backward written for
    3-D x only, got full marks: no case had a dropout that dropped nothing (116 of minitf's 230
    calls of it in the registry do) or a 2-D x (a classifier's head)."""
    result = grade(find("dropout_backward"), lambda dy, cache: dy * cache)
    assert not result.passed and "TypeError: unsupported operand" in result.stopped
    assert "'dropout, evaluation (nothing dropped: the cache is None)'" in result.stopped

    def sequences_only(dy, cache):
        x, W, has_bias = cache
        return dy @ W.T, np.einsum("bni,bno->io", x, dy), \
            dy.sum(axis=(0, 1)) if has_bias else None

    result = grade(find("linear_backward"), sequences_only)
    assert not result.passed and "in case 'linear, rows (2-D x)'" in result.stopped
    for name in ("dropout_backward", "linear_backward"):
        assert grade(find(name), _reference(name)).passed


def test_a_backward_that_returns_a_buffer_it_reuses_fails():
    """A linear_backward writing dx into one buffer kept between calls got full marks: each case
    ran the backward once. In a Stack the first block's dx was overwritten by the second's."""
    buffers = {}

    def reusing(dy, cache):
        x, W, has_bias = cache
        dy_rows, x_rows = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
        dx = buffers.setdefault((x.shape, dy.dtype), np.empty((len(x_rows), len(W)), dy.dtype))
        np.matmul(dy_rows, W.T, out=dx)
        return dx.reshape(x.shape), x_rows.T @ dy_rows, dy_rows.sum(axis=0) if has_bias else None

    result = grade(find("linear_backward"), reusing, cases=["linear"])
    assert not result.passed
    assert "x: your gradient changed when the backward ran again, for another upstream " \
           "gradient: it returned an array it keeps" in _hints(result), _hints(result)
    buffers.clear()
    assert grade(find("linear_backward"), lambda dy, cache: tuple(
        None if v is None else v.copy() for v in reusing(dy, cache)), cases=["linear"]).passed


def test_a_gradient_of_a_fixed_dtype_fails_though_the_checks_run_in_float64():
    """np.zeros(dy.shape) is float64: right in the float64 checks, and then a float32 model
    refused it (Linear.backward: dy has dtype float64; wanted float32)."""
    def fixed(dy, cache):
        dx = np.zeros(dy.shape)
        dx[cache] = dy[cache]
        return dx

    result = grade(find("relu_backward"), fixed, cases=["relu"])
    assert not result.passed
    assert "x: your gradient is float64, wanted float32 (the dtype of x)" in _hints(result)
    assert [row.check for row in result.rows if not row.passed] == ["relu, in float32"]
    assert "NumPy computes float32 with a float64 in float64" in _hints(result)
    assert "hint: make new arrays with dtype=dy.dtype (or zeros_like)" in _hints(result)
    # the table's "0 of 1 tensors within 1e-06" read as a wrong value: the report says which
    from minitf.exercises.report import report
    assert "(1 FAILED in float32 only: in float64 their values pass; their dtype is what is " \
           "wrong)" in report(find("relu_backward"), result)

    def a_numpy_scalar(dy, cache):           # NumPy 2: np.float64 · float32 array is float64
        return dy * cache * np.sqrt(1.0)

    assert not grade(find("relu_backward"), a_numpy_scalar, cases=["relu"]).passed
    assert grade(find("relu_backward"), lambda dy, cache: dy * cache * 1.0, cases=["relu"]).passed


def test_every_gradient_of_a_fixed_dtype_is_named_not_only_the_first():
    """dW and db each made in np.zeros: the report named dW alone, and a learner who fixed it
    was sent round again for db."""
    linear_backward = _reference("linear_backward")

    def fixed_dw_and_db(dy, cache):
        dx, dW, db = linear_backward(dy, cache)
        return dx, np.zeros(dW.shape) + dW, np.zeros(db.shape) + db

    result = grade(find("linear_backward"), fixed_dw_and_db, cases=["linear"])
    assert [(row.check, row.tensor) for row in result.rows if not row.passed] == [
        ("linear, in float32", "W"), ("linear, in float32", "b")]
    assert "b: your gradient is float64, wanted float32 (the dtype of b)" in _hints(result)


def test_a_guessed_hint_says_which_cases_pass():
    """dv without the dropout mask fails the dropout case alone, and its hint guessed attention's
    classic mistake, the scale of dq and dk: it now says which cases pass, and where to look."""
    attention_backward = _reference("attention_backward")

    def without_the_mask_in_dv(dout, cache):
        dq, dk, _, dbias = attention_backward(dout, cache)
        return dq, dk, cache.probs.swapaxes(-1, -2) @ dout, dbias

    result = grade(find("attention_backward"), without_the_mask_in_dv)
    assert {case for case, _ in result.problems} == {
        "attention, attention dropout (one fixed mask), causal"}
    assert "; but case 'attention' and 4 more pass: look first at what the failing cases add" \
        in _hints(result), _hints(result)


def test_a_backward_through_a_layer_the_forward_never_ran_gets_a_hint(tmp_path):
    """DecoderLM.backward calling self.head.backward, where the forward computes the logits with
    F.linear and never runs self.head, got Linear's "no forward()" error alone."""
    from minitf.exercises import check_file, starter_text
    path = tmp_path / "DecoderLM_backward.py"
    text = starter_text(find("DecoderLM.backward"), solution=True)
    body = text.index("\n", text.index("# *** START OF YOUR CODE")) + 1
    path.write_text(text[:body] + "    if self.head is not None:\n"
                                  "        self.head.backward(dlogits)\n" + text[body:])
    report, status = check_file(path)
    assert status == 1 and "Linear.backward() was called with no forward()" in report, report
    assert "hint: your backward calls the backward of a layer that the forward did not run" \
        in report


def test_the_float32_rerun_gives_a_loss_its_gradient_as_minitf_does():
    """A loss's backward gets 1.0 from minitf, which NumPy reads in float32; the rerun handed it
    the loss's float64, and a right cross_entropy_backward came back float64 and failed."""
    def natural(dloss, cache):
        logp, y, kept, divisor, eps, shape = cache
        p = np.exp(logp)
        q = np.full_like(p, eps / shape[-1])
        q[np.arange(y.shape[0]), y] += 1.0 - eps
        return ((p - q) * kept[:, None] * dloss / divisor).reshape(shape)

    result = grade(find("cross_entropy_backward"), natural)
    assert result.passed, _hints(result)


def test_a_case_that_failed_in_float32_is_not_said_to_pass():
    """The float32 failure is its own row in place of the float64 one, each tensor counted once,
    and the guessed hint of the other case does not call this one passing."""
    def wrong(dy, cache):
        return dy * np.ones(dy.shape) if cache is None else dy * cache + dy

    result = grade(find("dropout_backward"), wrong)
    hints = _hints(result)
    assert "passes: look first" not in hints and "pass: look first" not in hints, hints
    assert len(result.rows) == 3 and [r.check for r in result.rows if r.passed] == []
    assert "dropout, evaluation (nothing dropped: the cache is None), in float32" in \
        {row.check for row in result.rows}


def test_fewer_values_than_minitf_returns_with_none_left_out_fail():
    """attention_backward returning (dq, dk, dv) when there is no bias passed: no tensor is left
    to say that nothing came back, and every MultiHeadAttention then failed to unpack four."""
    attention_backward = _reference("attention_backward")

    def three(dout, cache):
        back = attention_backward(dout, cache)
        return back if back[3] is not None else back[:3]

    result = grade(find("attention_backward"), three, cases=["attention"])
    assert not result.passed and "wanted a tuple of 4: " in _hints(result)
    linear_backward = _reference("linear_backward")
    result = grade(find("linear_backward"), lambda dy, cache: list(linear_backward(dy, cache)),
                   cases=["linear"])
    assert "the backward returned a list; wanted a tuple of 3" in _hints(result)


def test_the_dtype_hint_names_the_backward_s_own_upstream_gradient():
    """softmax_backward's upstream gradient is dp: "dtype=dy.dtype" named no argument of it."""
    softmax_backward = _reference("softmax_backward")
    result = grade(find("softmax_backward"),
                   lambda dp, cache: softmax_backward(dp, cache).astype(np.float64))
    assert "hint: make new arrays with dtype=dp.dtype (or zeros_like)" in _hints(result)
    assert "dy.dtype" not in _hints(result)
