"""Parity with PyTorch for attention dropout: with one shared mask, our attention and relative
attention against the equations in torch (softmax, times keep / (1 − p), then · v), outputs and
every gradient, in float64. torch's own dropout draws its mask from its own generator, so the
mask is ours, read from the cache, and handed to torch."""
import math

import pytest

torch = pytest.importorskip("torch")

import minitf.functional as F  # noqa: E402
from minitf import backend  # noqa: E402
from test_parity_torch import assert_close, torch_tensor  # noqa: E402
from test_parity_torch_attention import torch_edges  # noqa: E402

P = pytest.mark.parametrize("p", [0.1, 0.5])


@pytest.fixture
def float64(backend_name):
    with backend.precision("float64"):
        backend.seed(0)
        yield "float64"


def _leaves(*arrays):
    return [torch_tensor(a, requires_grad=True) for a in arrays]


def _kept(cache, p):
    """Our mask as torch's keep / (1 − p): the booleans, rescaled in torch, not our scaled copy."""
    keep = torch_tensor(cache.dropout) > 0
    return keep.to(torch.float64) / (1.0 - p)


def _compare(out, theirs, leaves, names, dout, ours_grads):
    theirs.backward(torch_tensor(dout))
    assert_close(out, theirs, "float64", "output")
    for name, leaf, grad in zip(names, leaves, ours_grads):
        assert_close(grad, leaf.grad, "float64", f"gradient of {name}")


@P
def test_attention_dropout_with_a_shared_mask(float64, p):
    q, k, v = backend.randn(2, 3, 4, 6), backend.randn(2, 3, 5, 6), backend.randn(2, 3, 5, 7)
    out, cache = F.attention(q, k, v, mask=F.causal_mask(4, 5), dropout_p=p)
    kept = _kept(cache, p)
    assert 0 < float((kept == 0).to(torch.float64).mean()) < 1, "the mask drops some weights"
    tq, tk, tv = leaves = _leaves(q, k, v)
    blocked = torch.triu(torch.ones(4, 5, dtype=torch.bool), diagonal=2)    # queries: last 4 of 5
    scores = (tq @ tk.transpose(-1, -2) / math.sqrt(6)).masked_fill(blocked, -math.inf)
    theirs = (scores.softmax(dim=-1) * kept) @ tv
    dout = backend.randn(*out.shape)
    dq, dk, dv, _ = F.attention_backward(dout, cache)
    _compare(out, theirs, leaves, "qkv", dout, (dq, dk, dv))
    assert_close(cache.probs, scores.softmax(dim=-1), "float64", "probs (before dropout)")


@P
def test_relative_attention_dropout_with_a_shared_mask(float64, p):
    """Shaw's edge term on the values is weighted by the dropped weights too."""
    n, d = 6, 4
    q, k, v = backend.randn(2, 3, n, d), backend.randn(2, 3, n, d), backend.randn(2, 3, n, 5)
    table_k, table_v = backend.randn(5, d), backend.randn(5, 5)
    positions = F.clipped_relative_positions(n, n, max_relative=2)
    out, cache = F.relative_attention(q, k, v, positions, table_k, table_v, dropout_p=p)
    kept = _kept(cache.attention, p)
    tq, tk, tv, tk_table, tv_table = leaves = _leaves(q, k, v, table_k, table_v)
    scores = tq @ tk.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", tq,
                                                      torch_edges(tk_table, n))
    weights = (scores / math.sqrt(d)).softmax(dim=-1) * kept
    theirs = weights @ tv + torch.einsum("bhij,ijd->bhid", weights, torch_edges(tv_table, n))
    dout = backend.randn(*out.shape)
    grads = F.relative_attention_backward(dout, cache)
    _compare(out, theirs, leaves, ("q", "k", "v", "table_k", "table_v"), dout, grads)
