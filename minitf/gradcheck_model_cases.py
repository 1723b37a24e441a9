"""The gradient checks of whole models -- every model family of minitf.models, and the pretrained
BERT encoder's architecture at a tiny size -- each through its logits, so that every parameter
is checked. Part of the one registry in minitf.gradcheck_cases, which imports this module last;
see there for how the cases are built and run.
"""
from __future__ import annotations

import minitf.models as models
import minitf.nn as nn
import minitf.pretrained as pretrained
from minitf.backend import get_array_module, randint, randn
from minitf.gradcheck import ModuleCase
from minitf.gradcheck_cases import case


# ----------------------------------------------------------------------------------------------
# Whole models: every parameter, through the loss-free logits (L = Σ g ⊙ logits)
# ----------------------------------------------------------------------------------------------

def _padded_ids(vocab, b, n, lengths):
    """Random ids in [1, vocab) with pad id 0 after each sequence's length."""
    ids = randint(1, vocab, (b, n))
    keep = get_array_module(ids).arange(n)[None, :] < get_array_module(ids).asarray(lengths)[:, None]
    return ids * keep


def _lm(positional, tie_weights, n_layers=2, **flags):
    model = models.DecoderLM(7, d_model=8, n_heads=2, n_layers=n_layers, d_ff=12, max_len=6,
                             positional=positional, tie_weights=tie_weights, dropout=0.1, **flags)
    return ModuleCase(model, {"ids": randint(0, 7, (2, 5))})


@case("DecoderLM, learned positions, tied head")
def _():
    return _lm("learned", True)


@case("DecoderLM, sinusoidal, untied head")
def _():
    return _lm("sinusoidal", False)


@case("DecoderLM, RoPE")
def _():
    return _lm("rope", True)


@case("DecoderLM, ALiBi")
def _():
    return _lm("alibi", True)


@case("DecoderLM, relative bias")
def _():
    return _lm("relative", True)


@case("DecoderLM, not causal, post-LN (one block)")
def _():
    return _lm("learned", True, n_layers=1, causal=False, pre_ln=False)


@case("Transformer, post-LN, padding in source and target")
def _():
    model = models.Transformer(7, 6, d_model=8, n_heads=2, n_layers=2, d_ff=12, dropout=0.1)
    return ModuleCase(model, {"src": _padded_ids(7, 2, 5, [5, 3]),
                              "tgt": _padded_ids(6, 2, 4, [4, 2])})


@case("Transformer, pre-LN, shared embeddings")
def _():
    model = models.Transformer(7, 7, d_model=8, n_heads=2, n_layers=2, d_ff=12, pre_ln=True,
                               share_embeddings=True)
    return ModuleCase(model, {"src": _padded_ids(7, 2, 5, [5, 3]), "tgt": randint(1, 7, (2, 4))})


@case("EncoderClassifier, padding")
def _():
    model = models.EncoderClassifier(7, 3, d_model=8, n_heads=2, n_layers=2, d_ff=12, max_len=6,
                                     dropout=0.1)
    return ModuleCase(model, {"ids": _padded_ids(7, 3, 5, [5, 2, 4])})


@case("EncoderClassifier, sentence pairs: segments and padding")
def _():
    model = models.EncoderClassifier(7, 3, d_model=8, n_heads=2, n_layers=1, d_ff=12, max_len=6,
                                     n_segments=2)
    return ModuleCase(model, options={"ids": _padded_ids(7, 2, 5, [5, 3]),
                                      "segment_ids": randint(0, 2, (2, 5))})


@case("EncoderLM (BERT), segments and padding")
def _():
    model = models.EncoderLM(7, d_model=8, n_heads=2, n_layers=2, d_ff=12, max_len=6,
                             n_segments=2, dropout=0.1)
    return ModuleCase(model, options={"ids": _padded_ids(7, 2, 5, [5, 3]),
                                      "segment_ids": randint(0, 2, (2, 5))})


@case("SetEncoder, CLS pooling, no positions")
def _():
    model = models.SetEncoder(3, 4, d_model=8, n_heads=2, n_layers=1, d_ff=12, dropout=0.1)
    return ModuleCase(model, {"points": randn(2, 5, 3)})


@case("SetEncoder, mean pooling, learned positions")
def _():
    model = models.SetEncoder(3, 4, d_model=8, n_heads=2, n_layers=1, d_ff=12, pooling="mean",
                              max_len=6)
    return ModuleCase(model, {"points": randn(2, 5, 3)})


@case("VisionTransformer")
def _():
    model = models.VisionTransformer(4, 2, 3, channels=2, d_model=8, n_heads=2, n_layers=1,
                                     d_ff=12)
    return ModuleCase(model, {"images": randn(2, 2, 4, 4)})


# ----------------------------------------------------------------------------------------------
# The pretrained BERT encoder's architecture, at a tiny size with random weights
# ----------------------------------------------------------------------------------------------

@case("MeanPool over real tokens (padding)")
def _():
    keep = get_array_module().arange(5)[None, :] < get_array_module().asarray([5, 2, 4])[:, None]
    return ModuleCase(nn.MeanPool(), {"x": randn(3, 5, 4)}, {"keep": keep})


@case("BertEncoder, post-LN, exact GELU, eps 1e-12, padding")
def _():
    encoder = pretrained.BertEncoder(9, 8, 2, 2, 12, max_len=6, eps=1e-12)
    return ModuleCase(encoder, {"ids": _padded_ids(9, 2, 5, [5, 3])})


@case("BertEncoder, sentence pairs: token types and padding")
def _():
    encoder = pretrained.BertEncoder(9, 8, 2, 1, 12, max_len=6, eps=1e-12)
    types = get_array_module().asarray([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])   # padding: type 0
    return ModuleCase(encoder, {"ids": _padded_ids(9, 2, 5, [5, 3])}, {"types": types})


@case("SentenceClassifier (BERT encoder, mean pooling, linear head)")
def _():
    model = pretrained.SentenceClassifier(pretrained.BertEncoder(9, 8, 2, 1, 12, max_len=6), 3)
    return ModuleCase(model, {"ids": _padded_ids(9, 3, 5, [5, 2, 4])})
