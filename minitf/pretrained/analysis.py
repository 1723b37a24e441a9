"""Looking inside the pretrained encoder: sentence similarities and attention maps.

    s_i = mean of the last hidden states of sentence i's real tokens, divided by its length
    cos(i, j) = s_i · s_j            (both unit length)
    attention: every layer's softmax(q kᵀ / √d_head) for every head, (layers, h, n, n)
"""
from __future__ import annotations

from minitf import viz
from minitf.backend import get_array_module, to_numpy
from minitf.pretrained.model import BertEncoder, SentenceEncoder
from minitf.pretrained.tokenizer import WordPieceTokenizer, check_texts
from minitf.validate import check_int

NEGATION_PAIR = ("my kid likes this movie", "my kid does not like this movie")


def _check_loaded(model, tokenizer, where: str) -> None:
    """TypeError unless (model, tokenizer) are what pretrained.load() returns, in that order:
    the encoder inside, or the two swapped, failed with an AttributeError of no argument."""
    if not isinstance(model, SentenceEncoder):
        hint = (" (the encoder inside it: pass the SentenceEncoder itself)"
                if isinstance(model, BertEncoder) else
                " (model and tokenizer swapped?)" if isinstance(model, WordPieceTokenizer) else "")
        raise TypeError(f"{where}: model must be the SentenceEncoder that pretrained.load() "
                        f"returns first; got {type(model).__name__}{hint}")
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"{where}: tokenizer must be the WordPieceTokenizer that "
                        f"pretrained.load() returns second; got {type(tokenizer).__name__}")


def similarity(model, tokenizer, sentences):
    """(n, n) host array of cosine similarities between ``sentences``, a list of strings."""
    _check_loaded(model, tokenizer, "similarity")
    # named as similarity's, not the tokenizer's; "" embedded [CLS] [SEP] alone
    sentences = check_texts(sentences, "sentences", "similarity", blank=False)
    vectors = model.embed(tokenizer.batch(sentences))                      # (n, d), unit length
    return to_numpy(vectors @ vectors.T)


def format_similarity(sentences, matrix, width: int = 40) -> str:
    """The matrix as text: one row per sentence, numbered columns, the sentences as row labels."""
    check_int(width, "width", "format_similarity", what="the labels' width in characters")
    n = len(sentences)
    try:
        got = f"shape {to_numpy(matrix).shape}"  # a list of lists as well as an array
    except ValueError:
        got = "rows of different lengths"
    if got != f"shape {(n, n)}":                  # else a sentence was dropped, unsaid
        raise ValueError(f"format_similarity: matrix has {got}; wanted ({n}, {n}), one row "
                         f"and column per sentence")
    labels = [s if len(s) <= width else s[:width - 1] + "…" for s in sentences]
    lines = [" " * (width + 5) + "".join(f"{j + 1:>7}" for j in range(len(sentences)))]
    for i, (label, row) in enumerate(zip(labels, matrix)):
        lines.append(f"{i + 1:>2}  {label:<{width}} " + "".join(f"{c:7.3f}" for c in row))
    return "\n".join(lines)


def attention_maps(model, tokenizer, sentence: str):
    """(probs, tokens): every layer's and head's attention weights for one sentence, as a host
    array (layers, h, n, n) -- queries on axis 2, keys on axis 3 -- and its n token strings."""
    _check_loaded(model, tokenizer, "attention_maps")
    if not isinstance(sentence, str):         # a list was WordPieceTokenizer.batch's texts[0]
        raise TypeError(f"attention_maps: sentence must be one str; got "
                        f"{type(sentence).__name__} (for several: one call each)")
    ids = tokenizer.batch([sentence])                                       # (1, n)
    encoder = model.encoder
    encoder(ids)
    xp = get_array_module(ids)
    probs = xp.stack([encoder.probs(layer)[0] for layer in range(len(encoder.blocks))])
    return to_numpy(probs), tokenizer.tokens(to_numpy(ids)[0])


def attention_figure(probs, tokens, title: str = "", panel_size: float = 1.9):
    """The layers × heads grid of attention maps (minitf.viz.attention_grid), token-labelled."""
    if getattr(probs, "ndim", None) != 4:     # tokens first, or one layer's: its row_names failed
        got = f"shape {probs.shape}" if hasattr(probs, "shape") else type(probs).__name__
        raise TypeError(f"attention_figure: probs must be a (layers, h, n, n) array, as "
                        f"attention_maps returns first; got {got}")
    layers = [f"layer {layer + 1}" for layer in range(probs.shape[0])]
    return viz.attention_grid(probs, queries=tokens, keys=tokens, title=title, row_names=layers,
                              panel_size=panel_size)
