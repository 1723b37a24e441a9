"""Bad input fails at the API boundary, with a message naming the argument, what it got and what
was wanted."""
import copy
import inspect
import re

import numpy as np
import pytest

import minitf.functional as F
import minitf.nn as nn
import minitf.models as models
from minitf import backend
from minitf.nn.attention import SCHEME_OPTIONS


def raises(error, *fragments):
    """pytest.raises whose message must contain every fragment (matched literally)."""
    return pytest.raises(error, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


def refused_in_one_line(call, error, fragments) -> None:
    """``call()`` raises ``error`` with every fragment in its message, and the message is one line."""
    with raises(error, *fragments) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_d_model_not_divisible_by_n_heads():
    with raises(ValueError, "d_model=10", "n_heads=3", "divisible"):
        nn.MultiHeadAttention(10, 3)
    with raises(ValueError, "d_model=10", "n_heads=3"):
        nn.EncoderBlock(10, 3, 20)


def test_last_dimension_is_not_d_model(backend_name):
    attention = nn.MultiHeadAttention(8, 2)
    with raises(ValueError, "MultiHeadAttention", "x has shape (2, 5, 7)", "(b, n, d_model=8)"):
        attention(backend.randn(2, 5, 7))
    with raises(ValueError, "LayerNorm", "x has shape (2, 5, 7)", "(..., d=8)"):
        nn.LayerNorm(8)(backend.randn(2, 5, 7))
    with raises(ValueError, "linear", "x has shape (3, 4)", "(..., d_in=5)"):
        F.linear(backend.randn(3, 4), backend.randn(5, 2))


def test_layer_norm_and_rope_name_their_bad_argument(backend_name):
    with raises(ValueError, "layer_norm", "beta has shape (5,)", "wanted (d=4)"):
        F.layer_norm(backend.randn(2, 4), backend.randn(4), backend.randn(5))
    with raises(ValueError, "rope", "x has shape (2, 3, 4)", "(..., n=3, d_head=6)"):
        F.rope(backend.randn(2, 3, 4), *F.rope_angles(3, 6))


def test_wrong_number_of_dimensions(backend_name):
    with raises(ValueError, "x has shape (5, 8)", "(b, n, d_model=8)"):
        nn.MultiHeadAttention(8, 2)(backend.randn(5, 8))
    with raises(ValueError, "x has shape (1, 2, 5, 8)", "(b, n, d_model=8)"):
        nn.EncoderBlock(8, 2, 16)(backend.randn(1, 2, 5, 8))
    with raises(ValueError, "q has shape (4,)", "at least 2 axes"):
        F.attention(backend.randn(4), backend.randn(3, 4), backend.randn(3, 4))


def test_mask_that_does_not_broadcast_to_the_scores(backend_name):
    attention = nn.MultiHeadAttention(8, 2)
    x = backend.randn(2, 5, 8)
    with raises(ValueError, "mask has shape (2, 5)", "(b, h, n_q, n_k) = (2, 2, 5, 5)",
                "(b, 1, 1, n_k)"):
        attention(x, mask=backend.randn(2, 5))
    with raises(ValueError, "mask has shape (4, 4)", "(2, 2, 5, 5)"):
        F.attention(backend.randn(2, 2, 5, 3), backend.randn(2, 2, 5, 3), backend.randn(2, 2, 5, 3),
                    mask=F.causal_mask(4))


def test_token_ids_out_of_range_are_caught_on_every_backend(backend_name):
    embedding = nn.Embedding(10, 4)
    xp = backend.get_array_module()
    with raises(ValueError, "ids must lie in [0, vocab_size=10)", "from 0 to 12"):
        embedding(xp.asarray([[0, 12, 3]]))
    with raises(ValueError, "ids must lie in [0, vocab_size=10)", "from -1 to 3"):
        embedding(xp.asarray([[-1, 3]]))
    with raises(ValueError, "targets must lie in [0, V=5)", "-100, ignored", "from 0 to 5"):
        F.cross_entropy(backend.randn(2, 3, 5), xp.asarray([[0, 1, 5], [2, -100, 1]]))


def test_token_ids_must_be_integers(backend_name):
    with raises(TypeError, "ids has dtype float32", "integer"):
        nn.Embedding(10, 4)(backend.randn(2, 3))
    with raises(TypeError, "targets has dtype float32", "integer"):
        F.cross_entropy(backend.randn(2, 5), backend.randn(2))


def test_targets_must_match_the_logits(backend_name):
    with raises(ValueError, "targets has shape (2, 4)", "(2, 3)"):
        F.cross_entropy(backend.randn(2, 3, 5), backend.randint(0, 5, (2, 4)))


@pytest.mark.parametrize("module, call", [
    (lambda: nn.Linear(4, 3), lambda m: m.backward(backend.randn(2, 3))),
    (lambda: nn.LayerNorm(4), lambda m: m.backward(backend.randn(2, 4))),
    (lambda: nn.Dropout(0.5), lambda m: m.backward(backend.randn(2, 4))),
    (lambda: nn.MultiHeadAttention(8, 2), lambda m: m.backward(backend.randn(2, 3, 8))),
    (lambda: nn.FeedForward(8, 16, "gelu"), lambda m: m.backward(backend.randn(2, 3, 8))),
    (lambda: nn.Residual(nn.FeedForward(8, 16), 8, pre_ln=True),
     lambda m: m.backward(backend.randn(2, 3, 8))),
    (lambda: nn.EncoderBlock(8, 2, 16), lambda m: m.backward(backend.randn(2, 3, 8))),
    (lambda: nn.SinusoidalPositionalEncoding(8), lambda m: m.backward(backend.randn(2, 3, 8))),
    (lambda: nn.RelativePositionBias(2), lambda m: m.backward(backend.randn(2, 3, 3))),
])
def test_backward_before_forward(module, call):
    m = module()
    with raises(RuntimeError, type(m).__name__, "backward() was called with no forward() since the last backward()"):
        call(m)


def test_a_gelu_output_asked_before_forward_is_refused():
    with raises(RuntimeError, "GELU.output_rebuilder() was called with no forward() since the last backward()"):
        nn.GELU().output_rebuilder()


def test_a_module_that_keeps_nothing_of_its_own_names_itself():
    """A Residual or a block keeps no cache: its own name, not a layer's inside it, is in the
    error for a gradient of the wrong shape and for a second backward."""
    block = nn.EncoderBlock(8, 2, 16)
    block(backend.randn(2, 3, 8))
    with raises(ValueError, "EncoderBlock.backward: dy has shape (2, 3, 7)", "wanted (2, 3, 8)"):
        block.backward(backend.randn(2, 3, 7))
    block.backward(backend.randn(2, 3, 8))
    with raises(RuntimeError, "EncoderBlock.backward() was called with no forward() since the last backward()"):
        block.backward(backend.randn(2, 3, 8))


def test_a_forward_that_failed_leaves_no_backward():
    block, memory = nn.DecoderBlock(8, 2, 16), backend.randn(2, 4, 8)
    block(backend.randn(2, 3, 8), memory)
    with raises(ValueError, "memory has shape (2, 4, 7)"):
        block(backend.randn(2, 3, 8), backend.randn(2, 4, 7))   # fails after self-attention ran
    with raises(RuntimeError, "DecoderBlock.backward() was called with no forward() since the last backward()"):
        block.backward(backend.randn(2, 3, 8))


def test_a_model_copied_between_forward_and_backward_goes_back_as_the_original():
    model, ids = models.DecoderLM(11, 8, 2, 1, max_len=6), backend.randint(0, 11, (2, 5))
    logits = model(ids)
    dlogits = backend.randn(*logits.shape)
    twin = copy.deepcopy(model)                 # its layers' records are copies too
    twin.backward(dlogits)
    model.backward(dlogits)
    for (name, mine), theirs in zip(model.named_parameters(), twin.parameters()):
        np.testing.assert_array_equal(backend.to_numpy(mine.grad), backend.to_numpy(theirs.grad),
                                      err_msg=name)


def test_backward_twice_after_one_forward_is_refused():
    layer = nn.Linear(4, 3)
    y = layer(backend.randn(2, 4))
    layer.backward(y)
    with raises(RuntimeError, "Linear.backward() was called with no forward() since the last backward()"):
        layer.backward(y)


def test_an_input_rebuilt_before_forward_is_refused():
    with raises(RuntimeError, "Linear.rebuild_input_with() was called with no forward() since the last backward()"):
        nn.Linear(4, 3).rebuild_input_with(lambda: None)


def test_input_dtype_must_match_the_parameters(backend_name):
    layer = nn.Linear(4, 3)                                  # float32 parameters
    with backend.precision("float64"):
        x = backend.randn(2, 4)
    with raises(TypeError, "Linear", "x has dtype float64", "wanted float32", "astype",
                "precision('float64')"):
        layer(x)
    integers = backend.get_array_module(x).ones((2, 4), dtype="int64")
    with pytest.raises(TypeError, match=r"x has dtype int64; wanted float32, the dtype of the "
                                        r"parameters \(cast with x.astype\('float32'\)\)$"):
        layer(integers)                         # no model is built in int64: no such advice


@pytest.mark.parametrize("dtype", ["int32", "float16", "bogus"])
def test_a_module_moves_to_float32_or_float64_only(dtype):
    with raises(ValueError, "Linear.to: dtype must be 'float32' or 'float64'", repr(dtype)):
        nn.Linear(2, 2).to(dtype=dtype)
    with raises(TypeError, "MultiHeadAttention", "memory has dtype float64"):
        nn.MultiHeadAttention(4, 2, cross=True)(backend.randn(1, 2, 4),
                                                backend.to_device(np.zeros((1, 3, 4))))


def test_inputs_must_be_arrays():
    with raises(TypeError, "x must be a NumPy or CuPy array", "got list"):
        nn.Linear(2, 2)([[1.0, 2.0]])


def test_cross_attention_needs_memory_and_self_attention_refuses_it(backend_name):
    x = backend.randn(2, 3, 8)
    with raises(ValueError, "cross-attention needs memory (b, m, d_model)", "got None"):
        nn.MultiHeadAttention(8, 2, cross=True)(x)
    with raises(ValueError, "self-attention takes no memory", "cross=True"):
        nn.MultiHeadAttention(8, 2)(x, x)
    with raises(ValueError, "memory has shape (3, 4, 8)", "(b=2, m, d_model=8)"):
        nn.MultiHeadAttention(8, 2, cross=True)(x, backend.randn(3, 4, 8))


def test_option_values_are_checked():
    with raises(ValueError, "positional must be one of", "'sinusoidal'"):
        nn.MultiHeadAttention(8, 2, positional="sinusoidal")
    with raises(ValueError, "positional='rope' needs an even d_head", "d_head=3"):
        nn.MultiHeadAttention(6, 2, positional="rope")
    with raises(ValueError, "cross-attention takes neither positional nor causal"):
        nn.MultiHeadAttention(8, 2, cross=True, causal=True)
    with raises(ValueError, "activation must be one of", "'swish'"):
        nn.FeedForward(8, 16, activation="swish")
    with raises(ValueError, "p must lie in [0, 1)", "1.0"):
        nn.Dropout(1.0)
    with raises(ValueError, "label_smoothing must lie in [0, 1)", "-0.1"):
        F.cross_entropy(backend.randn(2, 5), backend.randint(0, 5, (2,)), label_smoothing=-0.1)
    with raises(ValueError, "reduction must be one of ('mean', 'sum')", "'none'"):
        F.cross_entropy(backend.randn(2, 5), backend.randint(0, 5, (2,)), reduction="none")


@pytest.mark.parametrize("name, value", [("d_head", 0), ("d_head", 2.5), ("d_v", -3),
                                         ("d_v", True)])
def test_head_sizes_must_be_positive_integers(name, value):
    with raises(ValueError, "MultiHeadAttention", f"{name} must be a positive integer",
                f"got {value!r}"):
        nn.MultiHeadAttention(8, 2, **{name: value})


def test_shaw_needs_at_least_one_relative_offset():
    with raises(ValueError, "max_relative must be a positive integer", "got 0"):
        nn.MultiHeadAttention(8, 2, positional="shaw", max_relative=0)


@pytest.mark.parametrize("option, value, scheme", [
    ("rope_base", 5.0, "rope"), ("num_buckets", 8, "relative"), ("max_distance", 64, "relative"),
    ("max_relative", 4, "shaw"), ("shaw_values", False, "shaw")])
def test_an_option_of_another_positional_scheme_is_refused(option, value, scheme):
    """rope_base=5.0 with no RoPE (num_buckets without T5's bias, …) was taken and ignored."""
    for positional in (None, "alibi"):
        with raises(ValueError, f"MultiHeadAttention: {option}={value!r} is used only with "
                    f"positional={scheme!r}; got positional={positional!r}"):
            nn.MultiHeadAttention(8, 2, positional=positional, **{option: value})
    nn.MultiHeadAttention(8, 2, positional=scheme, **{option: value})     # its own: taken
    default = inspect.signature(nn.MultiHeadAttention).parameters[option].default
    assert SCHEME_OPTIONS[option] == (scheme, default)        # the table kept to __init__'s own


def test_a_rope_base_is_checked_where_it_is_given():
    """'1e4' was taken, and the first forward's rope_angles refused its 'base'."""
    with raises(ValueError, "MultiHeadAttention: rope_base must be a finite number > 0; got '1e4'"):
        nn.MultiHeadAttention(8, 2, positional="rope", rope_base="1e4")
    with raises(ValueError, "MultiHeadAttention: rope_base=array([1., 2.]) is used only with "
                "positional='rope'"):                  # != of an array: no one truth value
        nn.MultiHeadAttention(8, 2, rope_base=np.array([1.0, 2.0]))


def test_shaw_is_for_self_attention_only():
    with raises(ValueError, "cross-attention takes neither positional nor causal"):
        nn.MultiHeadAttention(8, 2, cross=True, positional="shaw")


def test_positions_beyond_the_learned_table(backend_name):
    with raises(ValueError, "positions 6..9", "max_len=8"):
        nn.LearnedPositionalEmbedding(8, 4)(backend.randn(1, 4, 4), offset=6)


def test_padding_lengths_must_fit(backend_name):
    with raises(ValueError, "lengths must lie in [0, n + 1=5)", "from 2 to 7"):
        F.padding_mask([2, 7], 4)
