"""Every op and every module passes a float64 gradient check, on every available backend; the
registry of checks leaves nothing out; and the checks are able to fail."""
import inspect

import numpy as np
import pytest

import minitf.functional as F
import minitf.models as models
import minitf.nn as nn
from mistakes import layer_norm_backward_without_variance
from minitf import gradcheck_cases
from minitf.gradcheck import (TOLERANCE, FunctionCase, ModuleCase, Row, check, check_entries,
                              format_table, numerical_gradient, relative_error)
from minitf.nn.module import Module
from test_bad_input import raises


def _wanted_tensors(case):
    if isinstance(case, ModuleCase):
        return {f"param {p}" for p, _ in case.module.named_parameters()}
    return set(case.wrt)


@pytest.mark.parametrize("name", list(gradcheck_cases.CASES))
def test_gradient_check(name, backend_name):
    case = gradcheck_cases.build(name)
    rows = gradcheck_cases.run(name)
    assert _wanted_tensors(case) <= {r.tensor for r in rows}, "a tensor went unchecked"
    assert all(r.passed for r in rows), "\n" + format_table(rows)


def _built_cases():
    return [gradcheck_cases.build(name) for name in gradcheck_cases.CASES]


def test_registry_covers_every_op():
    with_backward = {n for n in F.__all__ if f"{n}_backward" in F.__all__}
    checked = {c.forward.__name__ for c in _built_cases() if isinstance(c, FunctionCase)}
    assert with_backward - checked == set()


LAYERS = {nn.Linear, nn.Embedding, nn.TokenEmbedding, nn.LayerNorm, nn.Dropout, nn.ReLU, nn.GELU,
          nn.MultiHeadAttention, nn.FeedForward, nn.SinusoidalPositionalEncoding,
          nn.LearnedPositionalEmbedding, nn.RelativePositionBias, nn.Residual,
          nn.EncoderBlock, nn.DecoderBlock, nn.ClassToken, nn.Stack, nn.RNN, nn.LSTM, nn.MeanPool}


def test_registry_covers_every_module():
    exported = (getattr(nn, n) for n in nn.__all__)
    layers = {c for c in exported if inspect.isclass(c) and issubclass(c, Module) and c is not Module}
    assert layers == LAYERS, "a layer was added or removed: update LAYERS and the registry"
    checked = {type(c.module) for c in _built_cases() if isinstance(c, ModuleCase)}
    assert {c.__name__ for c in layers - checked} == set()


def test_registry_checks_every_model_whole():
    checked = {type(c.module) for c in _built_cases() if isinstance(c, ModuleCase)}
    assert set(models.MODELS.values()) <= checked
    lm_cases = [c.module.config["positional"] for c in _built_cases()
                if isinstance(c, ModuleCase) and type(c.module) is models.DecoderLM]
    assert set(lm_cases) == set(models.lm.POSITIONAL)


def test_registry_covers_masks_positions_and_both_norm_placements():
    """Read off the cases as built, not off their names: a case named "causal" that lost its
    causal=True would check nothing causal."""
    built = _built_cases()
    attention = [(c.module, c.options) for c in built if isinstance(c, ModuleCase)
                 and isinstance(c.module, nn.MultiHeadAttention)]
    assert {m.positional for m, _ in attention} >= {None, "rope", "alibi", "relative", "shaw"}
    for what in ("causal", "cross", "attn_dropout"):
        assert any(getattr(m, what) for m, _ in attention), what
    assert any(m.d_head * m.n_heads != m.d_model and m.d_v != m.d_head for m, _ in attention)
    masks = [o["mask"] for _, o in attention if o.get("mask") is not None]
    assert any(m.dtype == bool and not m.any(axis=-1).all() for m in masks), "a fully masked row"
    assert any(m.dtype != bool and m.shape[-2] == 1 for m in masks), "a padding mask"
    residuals = [c.module for c in built if isinstance(c, ModuleCase)
                 and isinstance(c.module, nn.Residual)]
    assert {r.pre_ln for r in residuals} == {True, False}
    losses = [c.options for c in built if isinstance(c, FunctionCase)
              and c.forward is F.cross_entropy]
    assert any(o.get("ignore_index") is not None for o in losses)
    assert any(o.get("label_smoothing", 0) > 0 for o in losses)


# -- the checks can fail: a wrong backward must turn the right row red --------------------------

def test_a_layer_norm_backward_without_the_variance_path_fails(monkeypatch, float64):
    import minitf.nn.layers as layers

    monkeypatch.setattr(layers.F, "layer_norm_backward", layer_norm_backward_without_variance)
    rows = {r.tensor: r for r in gradcheck_cases.run("LayerNorm")}
    assert not rows["input x"].passed
    assert rows["param gamma"].passed and rows["param beta"].passed


def test_an_attention_backward_without_the_scale_fails(float64):
    def unscaled(dout, cache):
        dq, dk, dv, dbias = F.attention_backward(dout, cache)
        return dq / cache.scale, dk / cache.scale, dv, dbias

    case = gradcheck_cases.build("attention")
    case.backward = unscaled
    rows = {r.tensor: r for r in check("attention", case)}
    assert not rows["q"].passed and not rows["k"].passed and rows["v"].passed


def test_a_forgotten_bias_gradient_fails(monkeypatch, float64):
    import minitf.nn.layers as layers

    real = layers.F.linear_backward

    def no_bias_gradient(dy, cache):
        dx, dW, db = real(dy, cache)
        return dx, dW, db * 0

    monkeypatch.setattr(layers.F, "linear_backward", no_bias_gradient)
    rows = {r.tensor: r for r in gradcheck_cases.run("Linear")}
    assert not rows["param b"].passed and rows["param W"].passed


def test_relative_error_formula():
    a, b = np.array([1.0, -2.0, 0.0]), np.array([1.0, -2.0, 3e-6])
    assert relative_error(a, b) == pytest.approx(3e-6 / (2.0 + 2.0))   # max|a| + max|b|
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error(a, a) == 0.0 <= TOLERANCE


def test_the_report_table():
    rows = [Row("linear", "x", (2, 3), 3e-10), Row("linear", "W", (3, 4), 2e-3)]
    assert rows[0].passed and not rows[1].passed
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["check", "tensor", "shape", "max", "rel", "error", "result"]
    assert lines[2].split()[-2:] == ["3.00e-10", "ok"]
    assert lines[3].split()[-2:] == ["2.00e-03", "FAIL"]
    assert lines[-1] == "1 of 2 tensors within 1e-06; 1 FAILED"


def test_a_gradient_never_compared_shows_a_dash_not_inf():
    """A missing gradient, or one of the wrong dtype, is kept as an error of inf: the table
    printed 'inf', read as 'infinitely wrong', where nothing was measured."""
    rows = [Row("softmax, in float32", "x", (2, 3), float("inf")), Row("linear", "W", (3,), 1e-9)]
    lines = format_table(rows).splitlines()
    assert lines[2].split()[-2:] == ["—", "FAIL"] and "inf" not in format_table(rows)
    assert lines[-1].startswith("— : no error measured: the gradient was missing")
    assert not format_table(rows[1:]).splitlines()[-1].startswith("—")     # said only when seen


def test_a_float_input_left_without_a_gradient_fails(monkeypatch, float64):
    real = nn.DecoderBlock.backward
    monkeypatch.setattr(nn.DecoderBlock, "backward", lambda self, dy: real(self, dy)[0])
    rows = {r.tensor: r for r in gradcheck_cases.run("DecoderBlock, pre-LN")}
    assert not rows["input memory"].passed and rows["input x"].passed


def test_registry_checks_the_pretrained_encoder_and_its_heads():
    import minitf.pretrained as pretrained
    checked = {type(c.module) for c in _built_cases() if isinstance(c, ModuleCase)}
    assert {nn.MeanPool, pretrained.BertEncoder, pretrained.SentenceClassifier} <= checked


@pytest.mark.parametrize("shape", [(7,), (2, 3), (4, 1, 5), (2, 3, 4, 5)])
def test_a_sampled_entry_is_found_where_numpy_puts_it(shape):
    """check_entries finds entry number i by host arithmetic (CuPy's unravel_index wants a device
    array, not a Python int): the same index NumPy gives, for every entry."""
    from minitf.gradcheck import _entry
    for flat in range(int(np.prod(shape))):
        assert _entry(flat, shape) == tuple(int(j) for j in np.unravel_index(flat, shape))


def test_checking_sampled_entries_passes_a_right_backward_and_fails_a_wrong_one(monkeypatch,
                                                                              float64):
    """check_entries (for pretrained models too big to difference whole) sees what check sees."""
    import minitf.nn.layers as layers
    from minitf.gradcheck import check_entries

    rows = check_entries("LayerNorm", gradcheck_cases.build("LayerNorm"), per_tensor=3)
    assert {r.tensor for r in rows} == {"input x", "param gamma", "param beta"}
    assert all(r.passed for r in rows)
    monkeypatch.setattr(layers.F, "layer_norm_backward", layer_norm_backward_without_variance)
    rows = {r.tensor: r for r in check_entries("LayerNorm", gradcheck_cases.build("LayerNorm"),
                                               per_tensor=3)}
    assert not rows["input x"].passed


def test_a_check_in_float32_is_refused_not_failed():
    """float32's rounding would fail a right backward: one line says to use float64 instead."""
    x = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(TypeError, match=r"^relu: x has dtype float32; wanted float64, the only "
                                        r"precision central differences can check"):
        check("relu", FunctionCase(F.relu, F.relu_backward, {"x": x}, ("x",)))
    layer = nn.Linear(3, 2)                                        # float32 parameters
    with pytest.raises(TypeError, match=r"^Linear: input x has dtype float32; wanted float64"):
        check("Linear", ModuleCase(layer, {"x": x}))


@pytest.mark.parametrize("build, message", [
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x}, "x"),
     r"FunctionCase: wrt must be a tuple of distinct names among the inputs \('x',\), at least "
     r"one; got 'x'"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x}, ("y",)),
     r"FunctionCase: wrt must be .* got \('y',\)"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x}, ()),       # it checked nothing
     r"FunctionCase: wrt must be .* at least one; got \(\)"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x}, ("x", "x")),
     r"FunctionCase: wrt must be a tuple of distinct names"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x[:0]}, ("x",)),   # passed any answer
     r"FunctionCase: inputs\['x'\] is an empty array of shape \(0,\); wanted a float array of "
     r"at least one number"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": x.astype(int)}, ("x",)),
     r"FunctionCase: inputs\['x'\] is an array of dtype int64; wanted a float array"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, {"x": [1.0]}, ("x",)),
     r"FunctionCase: inputs\['x'\] is a list; wanted a float array"),
    (lambda x: FunctionCase(F.relu, F.relu_backward, (x,), ("x",)),
     r"FunctionCase: inputs must be a dict \{name: array\}; got tuple"),
    (lambda x: ModuleCase(nn.ReLU(), (x,)), r"ModuleCase: inputs must be a dict \{name: array\}; got tuple"),
    (lambda x: ModuleCase(F.relu, {"x": x}), r"ModuleCase: module must be a minitf.nn Module; got function"),
])
def test_a_case_built_wrong_is_one_line(build, message):
    with pytest.raises((TypeError, ValueError), match=message):
        build(np.ones(3))


def test_a_forward_that_returns_no_cache_is_named():
    """An op written as y = f(x), not (y, cache) = f(x): "too many values to unpack" (y's rows
    taken for the pair), or a shape error far away."""
    x = np.ones((3, 4))
    for forward in (lambda x: F.relu(x)[0], lambda x: (F.relu(x)[0],)):
        with pytest.raises(TypeError, match=r"FunctionCase: forward returned (an array of shape "
                                            r"\(3, 4\)|a tuple); wanted \(y, cache\)"):
            check("relu", FunctionCase(forward, F.relu_backward, {"x": x}, ("x",)))


def test_the_helpers_refuse_what_would_give_a_meaningless_number():
    with pytest.raises(TypeError, match=r"^numerical_gradient: x has dtype int64; wanted a float"):
        numerical_gradient(lambda: 0.0, np.arange(3))             # x ± step cannot be held
    with pytest.raises(TypeError, match=r"^numerical_gradient: x has a list"):
        numerical_gradient(lambda: 0.0, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^numerical_gradient: step must be a finite number > 0"):
        numerical_gradient(lambda: 0.0, np.ones(3), step=0.0)
    with pytest.raises(ValueError, match=r"^relative_error: a has shape \(0,\) and b \(3,\)"):
        relative_error(np.ones(0), np.ones(3))                    # it said 0.0: a match


def test_numerical_gradient_names_a_loss_that_is_no_function_or_no_scalar():
    x = np.ones((2, 3))
    with raises(TypeError, "numerical_gradient: loss must be a function of no arguments",
                "got None"):
        numerical_gradient(None, x)                       # 'NoneType' object is not callable
    with raises(TypeError, "numerical_gradient: loss must return a scalar",
                "an array of shape (2, 3)", "float((f() * g).sum())"):
        numerical_gradient(lambda: x * 2, x)              # setting an array element with a sequence
    with raises(TypeError, "numerical_gradient: loss must return a real number; got 'a'"):
        numerical_gradient(lambda: "a", x)
    # what a loss may be: a Python float, a NumPy scalar, a 0-d array
    for loss in (lambda: float(x.sum()), lambda: x.sum(), lambda: np.array(x.sum())):
        np.testing.assert_allclose(numerical_gradient(loss, x), np.ones((2, 3)), rtol=1e-6)


def test_the_helpers_name_a_case_a_table_or_an_array_of_the_wrong_kind():
    x = np.ones(3)
    with raises(TypeError, "relative_error: a must be a NumPy or CuPy array; got a list"):
        relative_error([1.0], [1.0])                      # 'list' object has no attribute 'shape'
    assert relative_error(np.float64(1.0), np.float64(1.0)) == 0.0     # a NumPy scalar is kept
    with raises(TypeError, "FunctionCase: forward must be a function", "got None"):
        FunctionCase(None, F.relu_backward, {"x": x}, ("x",))
    with raises(TypeError, "FunctionCase: backward must be a function", "got 'x'"):
        FunctionCase(F.relu, "x", {"x": x}, ("x",))
    with raises(TypeError, "FunctionCase: options must be a dict", "got list"):
        FunctionCase(F.relu, F.relu_backward, {"x": x}, ("x",), [1])
    with raises(TypeError, "ModuleCase: options must be a dict", "got list"):
        ModuleCase(nn.ReLU(), {"x": x}, [1])
    for case, got in ((None, "got None"), ("case", "got 'case'")):
        with raises(TypeError, "check: case must be a FunctionCase or a ModuleCase", got):
            check("relu", case)                           # AttributeError: no attribute 'forward'
    case = gradcheck_cases.build("LayerNorm")
    for per_tensor in (0, -3, 2.5):                       # NumPy's "negative dimensions"
        with raises(ValueError, "check_entries: per_tensor must be a positive integer",
                    f"got {per_tensor}"):
            check_entries("LayerNorm", case, per_tensor=per_tensor)
    with raises(TypeError, "format_table: rows must be a list of Row", "got None"):
        format_table(None)                                # 'NoneType' object is not iterable
    with raises(TypeError, "format_table: rows must be a list of Row", "a list holding 'a'"):
        format_table(["a"])                               # 'str' object has no attribute 'check'


def test_a_backward_that_gives_a_gradient_of_another_shape_is_named_by_its_case():
    """It failed in relative_error, a function the learner never called: 'a has shape (1, 3)
    and b (2, 3)'. Now the case and the tensor are named."""
    from minitf.backend import precision, randn
    with precision("float64"):
        x = randn(2, 3)
        for returned, got in ((lambda dy: dy[:1], "has shape (1, 3)"),
                              (lambda dy: dy.tolist(), "is a list")):
            case = FunctionCase(F.relu, lambda dy, cache, r=returned: r(dy), {"x": x}, ("x",))
            for run in (check, check_entries):
                with raises(ValueError, f"my relu: backward's gradient of x {got}; wanted an "
                                        f"array of shape (2, 3), the shape of x"):
                    run("my relu", case)

        class Halves(Module):
            def forward(self, x):
                return 2 * x

            def backward(self, dy):
                return dy[:, :1]                      # a gradient of the wrong shape
        with raises(ValueError, "Halves: backward's gradient of input x has shape (2, 1); wanted "
                                "an array of shape (2, 3)"):
            check("Halves", ModuleCase(Halves(), {"x": x}))


def test_a_numpy_scalar_is_the_gradient_of_a_0d_input():
    """What .sum() returns: a NumPy float, of shape (), which a scalar input's gradient is."""
    from minitf.backend import precision, randn
    with precision("float64"):
        case = FunctionCase(lambda x, a: (a * x, (x, a)),
                            lambda dy, cache: (dy * cache[1], (dy * cache[0]).sum()),
                            {"x": randn(3, 4), "a": np.array(1.7)}, ("x", "a"))
        assert all(row.passed for row in check("scale", case))


MODULE_CASES = [name for name in gradcheck_cases.CASES
                if isinstance(gradcheck_cases.build(name), ModuleCase)]


@pytest.mark.parametrize("name", MODULE_CASES)
def test_a_second_backward_adds_to_every_grad(name, float64):
    """``.grad`` accumulates: two backwards without zero_grad() leave twice one backward's
    gradient in every parameter (what gradient accumulation over micro-batches relies on). The
    gradient check zeroes every .grad first, so a backward that wrote ``grad = dW`` would pass it."""
    from minitf.backend import seed, to_numpy
    from minitf.gradcheck import _upstream_gradient

    case = gradcheck_cases.build(name)
    module = case.module
    module.zero_grad()
    after = []                                              # every .grad after each backward
    for _ in range(2):
        with seed(1):                                       # the same dropout masks both times
            y = module(*case.inputs.values(), **case.options)
        module.backward(_upstream_gradient(y, 1))
        after.append({key: to_numpy(p.grad).copy() for key, p in module.named_parameters()})
    once, twice = after
    for key in once:
        np.testing.assert_allclose(twice[key], 2 * once[key], rtol=1e-12, atol=0,
                                   err_msg=f"{name}: {key}")


# -- the threshold itself: a backward a little wrong fails, not only one grossly wrong ----------

def test_a_backward_one_part_in_ten_thousand_off_fails(float64):
    """The tests above break a backward grossly; a threshold 100 x too loose would still fail
    those. A gradient 0.01 % too large (an error of 5e-5) must fail too, and a row just over the
    threshold is a FAIL."""
    case = gradcheck_cases.build("linear")
    right = case.backward
    case.backward = lambda dy, cache: tuple(g * 1.0001 for g in right(dy, cache))
    rows = check("linear", case)
    assert rows and not any(r.passed for r in rows)
    assert Row("linear", "x", (2, 3), 2 * TOLERANCE).passed is False
    assert Row("linear", "x", (2, 3), TOLERANCE).passed is True


def test_a_sampled_check_looks_at_the_largest_entry(float64):
    """check_entries always differences the entry of the largest gradient, where a backward
    wrong in one place is most likely wrong: a backward off at that entry only must fail,
    whatever the random picks."""
    from minitf import backend

    def off_at_the_largest(dy, cache):
        dx, *rest = F.layer_norm_backward(dy, cache)
        dx = dx.copy()
        dx.flat[int(np.abs(dx).argmax())] *= 1.2
        return (dx, *rest)

    # 512 entries of x: two random picks land on the largest one less than 1 time in 200
    case = FunctionCase(F.layer_norm, off_at_the_largest, {"x": backend.randn(4, 8, 16),
                        "gamma": backend.randn(16), "beta": backend.randn(16)}, ("x",))
    rows = {r.tensor: r for r in check_entries("layer_norm", case, per_tensor=3)}
    assert not rows["x"].passed
