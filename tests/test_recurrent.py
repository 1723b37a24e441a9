"""The recurrent baseline: causal by construction, its state carried on equals re-reading the
text, bad input refused in one line naming the argument."""
import re

import pytest

import minitf.functional as F
import minitf.nn as nn
from minitf import backend
from minitf.generate import generate
from minitf.models import RNNLM


def raises(error, *fragments):
    return pytest.raises(error, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_a_later_token_never_changes_an_earlier_output(cell, float64):
    model = RNNLM(9, 6, 5, cell=cell)
    ids = backend.randint(0, 9, (2, 7))
    changed = ids.copy()
    changed[:, 4] = (changed[:, 4] + 1) % 9
    a, b = model(ids), model(changed)
    assert float(abs(a[:, :4] - b[:, :4]).max()) == 0.0
    assert float(abs(a[:, 4:] - b[:, 4:]).max()) > 1e-6


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_the_carried_state_gives_the_logits_of_the_whole_text(cell, float64):
    model = RNNLM(9, 6, 5, cell=cell, max_len=16)
    ids = backend.randint(0, 9, (2, 7))
    cache = model.new_cache()
    pieces = [model(ids[:, :3], cache=cache), model(ids[:, 3:4], cache=cache),
              model(ids[:, 4:], cache=cache)]
    whole = model(ids)
    for start, piece in zip((0, 3, 4), pieces):
        assert float(abs(piece - whole[:, start:start + piece.shape[1]]).max()) < 1e-12
    assert cache[0].length == 7
    cached = generate(model, ids[0], 5, greedy=True)
    uncached = generate(model, ids[0], 5, greedy=True, use_cache=False)
    assert (cached == uncached).all()


def test_bad_input_is_one_line_naming_the_argument():
    rnn = nn.RNN(3, 5)
    with raises(ValueError, "RNN", "x has shape (2, 4, 4)", "d_in=3"):
        rnn(backend.randn(2, 4, 4))
    with raises(ValueError, "RNN", "h0 has shape (2, 6)", "d_h=5"):
        rnn(backend.randn(2, 4, 3), backend.randn(2, 6))
    with raises(ValueError, "LSTM", "c0 has shape (3, 5)", "b=2"):
        nn.LSTM(3, 5)(backend.randn(2, 4, 3), None, backend.randn(3, 5))
    with raises(ValueError, "lstm", "W_x", "4·d_h=20"):
        F.lstm(backend.randn(2, 4, 3), backend.randn(2, 5), backend.randn(2, 5),
               backend.randn(3, 5), backend.randn(5, 20), backend.randn(20))
    with raises(ValueError, "RNNLM", "cell must be one of", "'gru'"):
        RNNLM(9, cell="gru")
    with raises(ValueError, "RNNLM", "d_hidden"):
        RNNLM(9, d_hidden=0)
    with raises(ValueError, "RNNLM", "ids", "vocab_size=9"):
        RNNLM(9)(backend.randint(9, 12, (1, 3)))


@pytest.mark.parametrize("cell", [nn.RNN, nn.LSTM])
def test_a_layer_moved_to_float64_starts_from_a_zero_state_of_its_own_dtype(cell):
    layer = cell(3, 4).to(dtype="float64")                  # built in float32, then moved
    H = layer(backend.randn(2, 5, 3).astype("float64"))       # no h0 given: zeros, in float64
    assert H.dtype == "float64" and H.shape == (2, 5, 4)


@pytest.mark.parametrize("cell", [nn.RNN, nn.LSTM])
def test_no_steps_have_a_backward(cell, float64):
    """An empty sequence is accepted by the forward, so its backward has to work too: the inputs'
    gradient is empty, the states' are zero, and the weights get none."""
    layer = cell(3, 4)
    H = layer(backend.randn(2, 0, 3))
    dx, *d_states = layer.backward(backend.randn(2, 0, 4))   # empty, like H
    assert H.shape == (2, 0, 4) and dx.shape == (2, 0, 3)
    assert all(d.shape == (2, 4) and float(abs(d).max()) == 0.0 for d in d_states)
    assert all(float(abs(p.grad).max()) == 0.0 for p in layer.parameters())
