"""Sentence similarity with the pretrained encoder: the cosine of every pair of sentence vectors.

    s_i = mean of the last hidden states of sentence i's real tokens, divided by its length
    cos(i, j) = s_i · s_j            (both unit length)
"""
from __future__ import annotations

from minitf.backend import to_numpy

NEGATION_PAIR = ("my kid likes this movie", "my kid does not like this movie")


def similarity(model, tokenizer, sentences):
    """(n, n) host array of cosine similarities between ``sentences``, a list of strings."""
    vectors = model.embed(tokenizer.batch(list(sentences)))                # (n, d), unit length
    return to_numpy(vectors @ vectors.T)


def format_similarity(sentences, matrix, width: int = 40) -> str:
    """The matrix as text: one row per sentence, numbered columns, the sentences as row labels."""
    labels = [s if len(s) <= width else s[:width - 1] + "…" for s in sentences]
    lines = [" " * (width + 5) + "".join(f"{j + 1:>7}" for j in range(len(sentences)))]
    for i, (label, row) in enumerate(zip(labels, matrix)):
        lines.append(f"{i + 1:>2}  {label:<{width}} " + "".join(f"{c:7.3f}" for c in row))
    return "\n".join(lines)
