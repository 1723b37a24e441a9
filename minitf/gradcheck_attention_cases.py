"""The gradient checks of attention: the functional ops, then MultiHeadAttention with every mask,
head size and position scheme. Part of the one registry in minitf.gradcheck_cases, which imports
this module; see there for how the cases are built and run.
"""
from __future__ import annotations

import minitf.functional as F
import minitf.nn as nn
from minitf.backend import randn
from minitf.gradcheck import FunctionCase, ModuleCase
from minitf.gradcheck_cases import case

# ----------------------------------------------------------------------------------------------
# Functional ops
# ----------------------------------------------------------------------------------------------

def _attention(mask=None, bias=None, dropout_p=0.0):
    """b=2, h=3, n_q=4, n_k=5, d_k=6, d_v=7: a different size on every axis, so a backward that
    swaps two axes raises instead of passing by luck (a student's, in an exercise)."""
    inputs = {"q": randn(2, 3, 4, 6), "k": randn(2, 3, 5, 6), "v": randn(2, 3, 5, 7)}
    wrt = ("q", "k", "v")
    if bias is not None:
        inputs["bias"] = bias
        wrt += ("bias",)
    return FunctionCase(F.attention, F.attention_backward, inputs, wrt,
                        {"mask": mask, "dropout_p": dropout_p})


@case("attention")
def _():
    return _attention()


@case("attention, without a head axis: (b, n, d)")
def _():
    # q, k, v are (..., n, d): a backward that transposes axes 2 and 3, right for (b, h, n, d)
    # alone, passed every 4-D case
    return FunctionCase(F.attention, F.attention_backward,
                        {"q": randn(2, 4, 6), "k": randn(2, 5, 6), "v": randn(2, 5, 7)},
                        ("q", "k", "v"))


@case("attention, causal mask")
def _():
    return _attention(mask=F.causal_mask(4, 5))       # the queries are the last 4 of 5


@case("attention, padding mask with a fully masked sequence")
def _():
    return _attention(mask=F.padding_mask([3, 0], 5))


@case("attention, learned bias")
def _():
    return _attention(mask=F.causal_mask(4, 5), bias=randn(3, 4, 5))   # (h, n_q, n_k)


@case("attention, attention dropout (one fixed mask), causal")
def _():
    return _attention(mask=F.causal_mask(4, 5), dropout_p=0.3)  # every evaluation: the same seed


@case("causal_attention, three blocks of queries")
def _():
    """n = 7 in blocks of 3: two full blocks and a last one of a single query."""
    inputs = {"q": randn(2, 3, 7, 6), "k": randn(2, 3, 7, 6), "v": randn(2, 3, 7, 5)}
    return FunctionCase(F.causal_attention, F.causal_attention_backward, inputs, ("q", "k", "v"),
                        {"block": 3})


def _relative_attention(values, mask=None, dropout_p=0.0):
    """b=2, h=3, n_q=4, 2K+1=5, n_k=6, d_v=7, d_k=8: offsets j − i run from −5 to 3, K = 2 clips."""
    inputs = {"q": randn(2, 3, 4, 8), "k": randn(2, 3, 6, 8), "v": randn(2, 3, 6, 7),
              "table_k": randn(5, 8)}
    if values:
        inputs["table_v"] = randn(5, 7)
    options = {"positions": F.clipped_relative_positions(4, 6, max_relative=2), "mask": mask,
               "dropout_p": dropout_p}
    return FunctionCase(F.relative_attention, F.relative_attention_backward, inputs,
                        tuple(inputs), options)


@case("relative_attention (Shaw), keys and values")
def _():
    return _relative_attention(values=True)


@case("relative_attention (Shaw), keys only, causal mask")
def _():
    return _relative_attention(values=False, mask=F.causal_mask(4, 6))


@case("relative_attention (Shaw), keys and values, attention dropout")
def _():
    return _relative_attention(values=True, dropout_p=0.3)   # the dropped weights also scale a^V


# ----------------------------------------------------------------------------------------------
# MultiHeadAttention
# ----------------------------------------------------------------------------------------------

@case("MultiHeadAttention")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2), {"x": randn(2, 4, 8)})


@case("MultiHeadAttention, causal + padding mask")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2, causal=True), {"x": randn(2, 4, 8)},
                      {"mask": F.padding_mask([4, 2], 4)})


@case("MultiHeadAttention, causal, past one block of queries (n = CAUSAL_BLOCK + 2)")
def _():
    n = F.CAUSAL_BLOCK + 2                               # two blocks, where blocks pay off
    return ModuleCase(nn.MultiHeadAttention(4, 2, causal=True), {"x": randn(2, n, 4)})


@case("MultiHeadAttention, fully masked query row")
def _():
    keep = F.causal_mask(4) == 0                         # boolean, True = attend
    keep = keep[None, None].repeat(2, axis=0)            # (b, 1, n, n)
    keep[0, 0, 2, :] = False
    return ModuleCase(nn.MultiHeadAttention(8, 2), {"x": randn(2, 4, 8)}, {"mask": keep})


@case("MultiHeadAttention, attention dropout, causal + padding mask")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2, causal=True, attn_dropout=0.3),
                      {"x": randn(2, 4, 8)}, {"mask": F.padding_mask([4, 2], 4)})


@case("MultiHeadAttention, cross (gradient into memory)")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2, cross=True),
                      {"x": randn(2, 3, 8), "memory": randn(2, 5, 8)},
                      {"mask": F.padding_mask([5, 3], 5)})


@case("MultiHeadAttention, cross, attention dropout")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2, cross=True, attn_dropout=0.3),
                      {"x": randn(2, 3, 8), "memory": randn(2, 5, 8)},
                      {"mask": F.padding_mask([5, 3], 5)})


@case("MultiHeadAttention, d_head and d_v free")
def _():
    return ModuleCase(nn.MultiHeadAttention(6, 3, d_head=5, d_v=7), {"x": randn(2, 4, 6)})


@case("MultiHeadAttention, cross, d_head and d_v free (gradient into memory)")
def _():
    return ModuleCase(nn.MultiHeadAttention(6, 3, d_head=5, d_v=7, cross=True),
                      {"x": randn(2, 4, 6), "memory": randn(2, 8, 6)},
                      {"mask": F.padding_mask([8, 5], 8)})


def _shaw(**options):
    """n = 7 > 2K + 1 = 5 positions: the farthest offsets share the clipped vectors."""
    attention = nn.MultiHeadAttention(6, 3, d_head=4, d_v=8, positional="shaw", max_relative=2,
                                      **options)
    return ModuleCase(attention, {"x": randn(2, 7, 6)})


@case("MultiHeadAttention, Shaw, keys and values, causal")
def _():
    return _shaw(causal=True)


@case("MultiHeadAttention, Shaw, keys and values, attention dropout")
def _():
    return _shaw(attn_dropout=0.3)


@case("MultiHeadAttention, Shaw, keys only")
def _():
    return _shaw(shaw_values=False)


@case("MultiHeadAttention, RoPE")
def _():
    return ModuleCase(nn.MultiHeadAttention(8, 2, causal=True, positional="rope"),
                      {"x": randn(2, 4, 8)})


@case("MultiHeadAttention, RoPE, not causal, padding mask, attention dropout")
def _():
    """RoPE through the general path (masks and dropout), not causal_attention's."""
    return ModuleCase(nn.MultiHeadAttention(8, 2, positional="rope", attn_dropout=0.3),
                      {"x": randn(2, 4, 8)}, {"mask": F.padding_mask([4, 2], 4)})


@case("MultiHeadAttention, ALiBi")
def _():
    return ModuleCase(nn.MultiHeadAttention(12, 3, causal=True, positional="alibi"),
                      {"x": randn(2, 4, 12)})


@case("MultiHeadAttention, relative bias")
def _():
    attention = nn.MultiHeadAttention(8, 2, positional="relative", num_buckets=8, max_distance=16)
    return ModuleCase(attention, {"x": randn(2, 5, 8)})
