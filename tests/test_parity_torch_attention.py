"""Parity with PyTorch for the attention variants the lectures describe beyond the defaults: free
head sizes (full-width heads, d_v ≠ d_k) and Shaw's relative position representations, against
attention written out in plain torch with autograd. Same tolerances as test_parity_torch."""
import math

import pytest

torch = pytest.importorskip("torch")

import minitf.functional as F  # noqa: E402
import minitf.nn as nn  # noqa: E402
from minitf import backend  # noqa: E402
from test_parity_torch import (compare_gradients, copy_weights, dtype, run_both,  # noqa: E402,F401
                               torch_causal, torch_padding, torch_tensor)


# -- free head sizes and Shaw's relative positions, against attention written out in torch --------

def torch_parameters(ours):
    """A random torch leaf for each of our parameters (biases and tables too, so that every one
    matters), loaded into ours. -> the mapping that compare_gradients reads."""
    mapping = {name: (torch_tensor(backend.randn(*p.shape, std=0.5), requires_grad=True), None)
               for name, p in ours.named_parameters()}
    copy_weights(ours, mapping)
    return mapping


def torch_heads(y, n_heads):
    """(b, n, h·w) -> (b, h, n, w): head i owns the features i·w … (i+1)·w − 1."""
    b, n, width = y.shape
    return y.reshape(b, n, n_heads, width // n_heads).transpose(1, 2)


def torch_edges(table, n):
    """Shaw's a_ij = w[clip(j − i, −K, K) + K] for n positions: (2K+1, d) -> (n, n, d)."""
    K = (table.shape[0] - 1) // 2
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]          # j − i
    return table[offsets.clamp(-K, K) + K]


def torch_multi_head(p, x, memory=None, *, n_heads, d_head, mask=None):
    """Multi-head attention on our parameter names, from the equations, torch autograd for the
    gradients. The fused projection's columns are q | k | v, each h heads side by side; tables
    table_k / table_v, if present, add Shaw's edges to the keys / values. mask: True = blocked."""
    width = n_heads * d_head                                               # of q and of k
    if memory is None:
        qkv = x @ p["W_qkv.W"] + p["W_qkv.b"]
        q, k, v = qkv.split([width, width, qkv.shape[-1] - 2 * width], dim=-1)
    else:
        q = x @ p["W_q.W"] + p["W_q.b"]
        kv = memory @ p["W_kv.W"] + p["W_kv.b"]
        k, v = kv.split([width, kv.shape[-1] - width], dim=-1)
    q, k, v = (torch_heads(t, n_heads) for t in (q, k, v))
    n = q.shape[2]
    scores = q @ k.transpose(-1, -2)
    if "table_k" in p:
        scores = scores + torch.einsum("bhid,ijd->bhij", q, torch_edges(p["table_k"], n))
    scores = scores / math.sqrt(d_head)
    if mask is not None:
        scores = scores.masked_fill(mask, -math.inf)
    probs = scores.softmax(dim=-1)
    out = probs @ v                                                        # (b, h, n, d_v)
    if "table_v" in p:
        out = out + torch.einsum("bhij,ijd->bhid", probs, torch_edges(p["table_v"], n))
    return out.transpose(1, 2).flatten(2) @ p["W_o.W"] + p["W_o.b"]


def _leaves(mapping):
    return {name: tensor for name, (tensor, _) in mapping.items()}


HEAD_SIZES = pytest.mark.parametrize("d_head, d_v", [(5, 3), (8, 8)],
                                     ids=["d_v != d_head", "full-width heads"])


@HEAD_SIZES
def test_self_attention_with_free_head_sizes(dtype, d_head, d_v):
    ours = nn.MultiHeadAttention(8, 2, d_head=d_head, d_v=d_v, causal=True)
    mapping = torch_parameters(ours)
    run_both(ours, lambda x: torch_multi_head(_leaves(mapping), x, n_heads=2, d_head=d_head,
                                              mask=torch_causal(5)),
             [(3, 5, 8)], dtype)
    compare_gradients(ours, mapping, dtype)


@HEAD_SIZES
def test_cross_attention_with_free_head_sizes(dtype, d_head, d_v):
    ours = nn.MultiHeadAttention(8, 2, d_head=d_head, d_v=d_v, cross=True)
    mapping = torch_parameters(ours)
    lengths = [6, 2, 4]
    padding = torch_padding(lengths, 6)[:, None, None, :]                  # (b, 1, 1, m)
    run_both(ours, lambda x, memory: torch_multi_head(_leaves(mapping), x, memory, n_heads=2,
                                                      d_head=d_head, mask=padding),
             [(3, 4, 8), (3, 6, 8)], dtype, ours_kwargs={"mask": F.padding_mask(lengths, 6)})
    compare_gradients(ours, mapping, dtype)


@pytest.mark.parametrize("shaw_values", [True, False], ids=["keys and values", "keys only"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_shaw_relative_positions(dtype, shaw_values, causal):
    """7 positions > 2K + 1 = 5: the far offsets share the clipped rows of the tables."""
    ours = nn.MultiHeadAttention(8, 2, d_head=3, d_v=5, causal=causal, positional="shaw",
                                 max_relative=2, shaw_values=shaw_values)
    mapping = torch_parameters(ours)
    assert ("table_v" in mapping) == shaw_values
    run_both(ours, lambda x: torch_multi_head(_leaves(mapping), x, n_heads=2, d_head=3,
                                              mask=torch_causal(7) if causal else None),
             [(3, 7, 8)], dtype)
    compare_gradients(ours, mapping, dtype)
