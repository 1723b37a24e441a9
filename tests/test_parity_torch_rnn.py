"""Parity with PyTorch's nn.RNN and nn.LSTM on identical weights: the outputs and the gradients
of the input, the initial states and every weight. torch keeps two biases (b_ih + b_hh) where
minitf keeps their sum, so both of torch's get minitf's one gradient. Same tolerances as
test_parity_torch."""
import pytest

torch = pytest.importorskip("torch")

import minitf.models as models  # noqa: E402
import minitf.nn as nn  # noqa: E402
from minitf import backend  # noqa: E402
from test_parity_torch import TOLERANCE, assert_close, dtype, torch_tensor  # noqa: E402,F401


def torch_twin(ours, torch_class):
    """A torch layer (batch_first) with our weights: weight_ih = W_xᵀ, weight_hh = W_hᵀ, and our b
    split as b_ih = b, b_hh = 0 (only their sum matters)."""
    theirs = torch_class(ours.d_in, ours.d_h, batch_first=True).double()
    with torch.no_grad():
        theirs.weight_ih_l0.copy_(torch_tensor(ours.W_x.data).T)
        theirs.weight_hh_l0.copy_(torch_tensor(ours.W_h.data).T)
        theirs.bias_ih_l0.copy_(torch_tensor(ours.b.data))
        theirs.bias_hh_l0.zero_()
    return theirs


@pytest.mark.parametrize("cell", ["RNN", "LSTM"])
def test_a_recurrent_layer_matches_torch(cell, dtype):
    backend.seed(0)
    ours = getattr(nn, cell)(3, 5)
    ours.b.data[:] = backend.randn(*ours.b.shape)                     # so that b matters
    x, h0, c0 = backend.randn(2, 6, 3), backend.randn(2, 5), backend.randn(2, 5)
    states = (h0,) if cell == "RNN" else (h0, c0)
    H = ours(x, *states)
    dH = backend.randn(*H.shape)
    grads = ours.backward(dH)

    theirs = torch_twin(ours, getattr(torch.nn, cell)).to(torch.float64 if dtype == "float64"
                                                          else torch.float32)
    tx, *t_states = (torch_tensor(a, requires_grad=True) for a in (x, *states))
    t_states_arg = t_states[0][None] if cell == "RNN" else tuple(s[None] for s in t_states)
    tH, _ = theirs(tx, t_states_arg)
    tH.backward(torch_tensor(dH))
    assert_close(H, tH, dtype, f"{cell} output")
    for name, ours_grad, their_tensor in zip(("x", "h0", "c0"), grads, (tx, *t_states)):
        assert_close(ours_grad, their_tensor.grad, dtype, f"{cell} d{name}")
    assert_close(ours.W_x.grad, theirs.weight_ih_l0.grad.T, dtype, f"{cell} dW_x")
    assert_close(ours.W_h.grad, theirs.weight_hh_l0.grad.T, dtype, f"{cell} dW_h")
    for bias in (theirs.bias_ih_l0, theirs.bias_hh_l0):
        assert_close(ours.b.grad, bias.grad, dtype, f"{cell} db")


def test_the_rnn_language_model_matches_torch(dtype):
    """Embedding -> nn.RNN -> Linear in torch, against RNNLM: the cross-entropy loss and every
    parameter's gradient."""
    backend.seed(0)
    ours = models.RNNLM(11, d_model=6, d_hidden=7)
    ids, targets = backend.randint(0, 11, (3, 8)), backend.randint(0, 11, (3, 8))
    loss, backward = ours.loss(ids, targets)
    backward()
    float_type = torch.float64 if dtype == "float64" else torch.float32
    emb = torch_tensor(ours.tok_emb.W.data, requires_grad=True)
    rnn = torch_twin(ours.rnn, torch.nn.RNN).to(float_type)
    W, b = (torch_tensor(p.data, requires_grad=True) for p in (ours.head.W, ours.head.b))
    H, _ = rnn(emb[torch.from_numpy(backend.to_numpy(ids))])
    logits = H @ W + b
    their_loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 11), torch.from_numpy(backend.to_numpy(targets)).reshape(-1))
    their_loss.backward()
    assert abs(loss - their_loss.item()) <= TOLERANCE[dtype] * abs(loss), "loss"
    theirs = {"tok_emb.W": emb.grad, "rnn.W_x": rnn.weight_ih_l0.grad.T,
              "rnn.W_h": rnn.weight_hh_l0.grad.T, "rnn.b": rnn.bias_ih_l0.grad,
              "head.W": W.grad, "head.b": b.grad}
    for name, p in ours.named_parameters():
        assert_close(p.grad, theirs[name], dtype, f"d {name}")
