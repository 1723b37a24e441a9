"""The gradient checks minitf runs on itself: every functional op and every module, at tiny sizes,
in float64. ``python -m minitf gradcheck`` prints them as a table; the test suite runs the same
cases on every available backend, and checks that no op or module is missing from this list.

Each case is a small function that builds its inputs; ``build(name)`` runs it in float64 with a
fixed seed, on the active backend. The attention cases live in gradcheck_attention_cases.py, the
recurrent ones in gradcheck_recurrent_cases.py and the whole models in gradcheck_model_cases.py;
they register into the same CASES when this module imports them.
"""
from __future__ import annotations

import minitf.functional as F
import minitf.nn as nn
from minitf.backend import precision, randint, randn, seed
from minitf.gradcheck import FunctionCase, ModuleCase, check

CASES = {}


def case(name: str):
    """Register a case builder under ``name``."""
    def register(build):
        CASES[name] = build
        return build
    return register


def build(name: str, dtype: str = "float64"):
    """The case ``name``, built in float64 (or ``dtype``) from seed 0 on the active backend."""
    with precision(dtype), seed(0):
        return CASES[name]()


def run(name: str) -> list:
    """Build and check the case ``name``: one report row per checked tensor."""
    with precision("float64"):
        return check(name, build(name))


# ----------------------------------------------------------------------------------------------
# Functional ops
# ----------------------------------------------------------------------------------------------

@case("linear")
def _():
    return FunctionCase(F.linear, F.linear_backward,
                        {"x": randn(2, 3, 4), "W": randn(4, 5), "b": randn(5)}, ("x", "W", "b"))


@case("linear, rows (2-D x)")
def _():
    # a classifier's head gets a (b, d) batch of pooled rows, not (b, n, d) sequences
    return FunctionCase(F.linear, F.linear_backward,
                        {"x": randn(3, 4), "W": randn(4, 5), "b": randn(5)}, ("x", "W", "b"))


@case("embedding")
def _():
    return FunctionCase(F.embedding, F.embedding_backward,
                        {"ids": randint(0, 6, (2, 5)), "W": randn(6, 3)}, ("W",))


@case("patches")
def _():
    return FunctionCase(F.patches, F.patches_backward, {"images": randn(2, 3, 4, 6)}, ("images",),
                        {"patch_size": 2})


@case("relu")
def _():
    return FunctionCase(F.relu, F.relu_backward, {"x": randn(3, 5)}, ("x",))


@case("gelu (tanh)")
def _():
    return FunctionCase(F.gelu, F.gelu_backward, {"x": randn(3, 5)}, ("x",),
                        {"approximate": "tanh"})


@case("gelu (exact)")
def _():
    return FunctionCase(F.gelu, F.gelu_backward, {"x": randn(3, 5)}, ("x",),
                        {"approximate": "none"})


@case("dropout")
def _():
    return FunctionCase(F.dropout, F.dropout_backward, {"x": randn(3, 6)}, ("x",), {"p": 0.3})


@case("dropout, evaluation (nothing dropped: the cache is None)")
def _():
    # most of minitf's calls are of this kind: every layer's dropout at p = 0 or in eval mode
    return FunctionCase(F.dropout, F.dropout_backward, {"x": randn(3, 6)}, ("x",),
                        {"p": 0.3, "training": False})


@case("softmax")
def _():
    return FunctionCase(F.softmax, F.softmax_backward, {"x": randn(2, 3, 5)}, ("x",))


@case("softmax, masked entries and a fully masked row")
def _():
    x = randn(3, 5)
    x[0, 3] = -float("inf")
    x[1, :] = -float("inf")
    return FunctionCase(F.softmax, F.softmax_backward, {"x": x}, ("x",))


@case("softmax, along axis 1 of three")
def _():
    # a backward that reduces over the last axis whatever ``axis`` says passed every case above
    return FunctionCase(F.softmax, F.softmax_backward, {"x": randn(2, 4, 3)}, ("x",), {"axis": 1})


@case("log_softmax")
def _():
    return FunctionCase(F.log_softmax, F.log_softmax_backward, {"x": randn(2, 3, 5)}, ("x",))


@case("cross_entropy")
def _():
    return FunctionCase(F.cross_entropy, F.cross_entropy_backward,
                        {"logits": randn(2, 3, 5)}, ("logits",),
                        {"targets": randint(0, 5, (2, 3))})


@case("cross_entropy, ignore_index and label smoothing")
def _():
    targets = randint(0, 5, (2, 4))
    targets[0, 1] = targets[1, 3] = -100
    return FunctionCase(F.cross_entropy, F.cross_entropy_backward,
                        {"logits": randn(2, 4, 5)}, ("logits",),
                        {"targets": targets, "ignore_index": -100, "label_smoothing": 0.1})


@case("cross_entropy, reduction='sum' and ignore_index")
def _():
    targets = randint(0, 5, (2, 4))
    targets[0, 0] = targets[1, 2] = -100
    return FunctionCase(F.cross_entropy, F.cross_entropy_backward,
                        {"logits": randn(2, 4, 5)}, ("logits",),
                        {"targets": targets, "ignore_index": -100, "reduction": "sum"})


@case("mse_loss")
def _():
    return FunctionCase(F.mse_loss, F.mse_loss_backward,
                        {"pred": randn(2, 3, 4), "target": randn(2, 3, 4)}, ("pred", "target"))


@case("layer_norm")
def _():
    return FunctionCase(F.layer_norm, F.layer_norm_backward,
                        {"x": randn(2, 3, 6), "gamma": randn(6), "beta": randn(6)},
                        ("x", "gamma", "beta"))


@case("layer_norm, a 2-D batch of rows")
def _():
    # x is (..., d): γ's and β's gradients summed over axes (0, 1), not over all but the last,
    # passed the 3-D case above
    return FunctionCase(F.layer_norm, F.layer_norm_backward,
                        {"x": randn(4, 6), "gamma": randn(6), "beta": randn(6)},
                        ("x", "gamma", "beta"))


@case("rope")
def _():
    cos, sin = F.rope_angles(4, 6, offset=3)
    return FunctionCase(F.rope, F.rope_backward, {"x": randn(2, 3, 4, 6)}, ("x",),
                        {"cos": cos, "sin": sin})


@case("fourier_features")
def _():
    return FunctionCase(F.fourier_features, F.fourier_features_backward,
                        {"coords": randn(2, 5, 2)}, ("coords",), {"n_octaves": 3})


@case("relative_bias")
def _():
    buckets = F.relative_position_buckets(3, 5, num_buckets=8, max_distance=16)
    return FunctionCase(F.relative_bias, F.relative_bias_backward, {"table": randn(8, 2)},
                        ("table",), {"buckets": buckets})


# ----------------------------------------------------------------------------------------------
# Attention and recurrence: their ops, layers and models, registered here from their own modules
# ----------------------------------------------------------------------------------------------

from minitf import gradcheck_attention_cases  # noqa: E402, F401  (registers its cases in CASES)
from minitf import gradcheck_recurrent_cases  # noqa: E402, F401  (the RNN, the LSTM, RNNLM)


# ----------------------------------------------------------------------------------------------
# Modules
# ----------------------------------------------------------------------------------------------

@case("Linear")
def _():
    return ModuleCase(nn.Linear(4, 3), {"x": randn(2, 3, 4)})


@case("Linear, no bias")
def _():
    return ModuleCase(nn.Linear(4, 3, bias=False), {"x": randn(2, 3, 4)})


@case("Embedding")
def _():
    return ModuleCase(nn.Embedding(7, 4), options={"ids": randint(0, 7, (2, 5))})


@case("TokenEmbedding, segments")
def _():
    return ModuleCase(nn.TokenEmbedding(7, 4, n_segments=2),
                      options={"ids": randint(0, 7, (2, 5)), "segment_ids": randint(0, 2, (2, 5))})


@case("LayerNorm")
def _():
    return ModuleCase(nn.LayerNorm(5), {"x": randn(2, 3, 5)})


@case("Dropout")
def _():
    return ModuleCase(nn.Dropout(0.25), {"x": randn(2, 3, 4)})


@case("ClassToken")
def _():
    return ModuleCase(nn.ClassToken(4), {"x": randn(2, 3, 4)})


@case("ReLU")
def _():
    return ModuleCase(nn.ReLU(), {"x": randn(2, 3, 4)})


@case("GELU")
def _():
    return ModuleCase(nn.GELU(), {"x": randn(2, 3, 4)})


@case("FeedForward")
def _():
    return ModuleCase(nn.FeedForward(6, 12, activation="gelu", dropout=0.2), {"x": randn(2, 3, 6)})


@case("FeedForward, hidden layer rebuilt")       # GELU, no dropout: W_2's input is x Φ(x) again
def _():
    return ModuleCase(nn.FeedForward(6, 12, activation="gelu"), {"x": randn(2, 3, 6)})


@case("SinusoidalPositionalEncoding")
def _():
    return ModuleCase(nn.SinusoidalPositionalEncoding(6), {"x": randn(2, 3, 6)}, {"offset": 2})


@case("LearnedPositionalEmbedding")
def _():
    return ModuleCase(nn.LearnedPositionalEmbedding(10, 6), {"x": randn(2, 3, 6)}, {"offset": 2})


@case("RelativePositionBias")
def _():
    return ModuleCase(nn.RelativePositionBias(2, num_buckets=8, max_distance=16, bidirectional=False),
                      options={"n_q": 3, "n_k": 5})


@case("Residual, post-LN")
def _():
    return ModuleCase(nn.Residual(nn.FeedForward(6, 12), 6, pre_ln=False, dropout=0.2),
                      {"x": randn(2, 3, 6)})


@case("Residual, pre-LN")
def _():
    return ModuleCase(nn.Residual(nn.FeedForward(6, 12), 6, pre_ln=True, dropout=0.2),
                      {"x": randn(2, 3, 6)})


@case("Residual, post-LN, around cross-attention (the memory's gradient passed on)")
def _():
    return ModuleCase(nn.Residual(nn.MultiHeadAttention(8, 2, cross=True), 8),
                      {"x": randn(2, 3, 8), "memory": randn(2, 5, 8)})


@case("EncoderBlock, post-LN")
def _():
    return ModuleCase(nn.EncoderBlock(8, 2, 16, pre_ln=False, dropout=0.1),
                      {"x": randn(2, 4, 8)}, {"mask": F.padding_mask([4, 3], 4)})


@case("EncoderBlock, pre-LN")
def _():
    return ModuleCase(nn.EncoderBlock(8, 2, 16, pre_ln=True, dropout=0.1, activation="gelu"),
                      {"x": randn(2, 4, 8)}, {"mask": F.padding_mask([4, 3], 4)})


@case("EncoderBlock, pre-LN, no biases")
def _():
    return ModuleCase(nn.EncoderBlock(8, 2, 16, pre_ln=True, bias=False),
                      {"x": randn(2, 4, 8)}, {"mask": F.padding_mask([4, 3], 4)})


@case("DecoderBlock, post-LN")
def _():
    return ModuleCase(nn.DecoderBlock(8, 2, 16, pre_ln=False, dropout=0.1),
                      {"x": randn(2, 3, 8), "memory": randn(2, 4, 8)},
                      {"memory_mask": F.padding_mask([4, 2], 4)})


@case("DecoderBlock, pre-LN")
def _():
    return ModuleCase(nn.DecoderBlock(8, 2, 16, pre_ln=True, dropout=0.1),
                      {"x": randn(2, 3, 8), "memory": randn(2, 4, 8)},
                      {"memory_mask": F.padding_mask([4, 2], 4)})


@case("Stack of DecoderBlocks (memory gradient summed)")
def _():
    stack = nn.Stack(nn.DecoderBlock(8, 2, 16, pre_ln=True) for _ in range(2))
    return ModuleCase(stack, {"x": randn(2, 3, 8), "memory": randn(2, 4, 8)})


@case("Stack of EncoderBlocks (no memory: each block returns dx alone)")
def _():
    stack = nn.Stack([nn.EncoderBlock(8, 2, 16), nn.EncoderBlock(8, 2, 16, pre_ln=True)])
    return ModuleCase(stack, {"x": randn(2, 4, 8)})


from minitf import gradcheck_model_cases  # noqa: E402, F401  (whole models, the pretrained BERT)
