"""Fine-tuning the pretrained encoder with minitf's hand-written backward passes.

    logits = MeanPool(BertEncoder(ids)) W + b                     SentenceClassifier
    L = cross-entropy(logits, labels);  ∂L/∂θ for EVERY θ, by backward through the head, the
    pooling and all the pretrained blocks;  θ ← AdamW(θ, ∂L/∂θ)

The word-embedding table (30522 × 384 for all-MiniLM-L6-v2) still gets its gradient, but is not
updated: a few hundred sentences touch a few dozen of its rows, and leaving it frozen keeps every
word the fine-tuning never saw where pre-training put it (and saves most of the optimiser's work).
"""
from __future__ import annotations

import time

from minitf.backend import to_device, to_numpy
from minitf.optim import AdamW
from minitf.pretrained.model import SentenceClassifier
from minitf.pretrained.tokenizer import WordPieceTokenizer, check_texts
from minitf.validate import check_ids, check_int, check_real


def _check_labelled(classifier, tokenizer, sentences, labels, batch_size, where: str):
    """A SentenceClassifier and its tokenizer, a non-empty list of sentences, one integer label
    each in [0, n_classes), and a batch size -- all checked before any batch runs, so that a bad
    label is not met by cross_entropy after earlier batches have moved the weights.
    -> (the sentences as a list, the labels as a host array)"""
    if not isinstance(classifier, SentenceClassifier):
        raise TypeError(f"{where}: classifier must be a SentenceClassifier, such as "
                        f"pretrained.SentenceClassifier(model.encoder, n_classes); got "
                        f"{type(classifier).__name__}")
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"{where}: tokenizer must be a WordPieceTokenizer, the second of what "
                        f"pretrained.load() returns; got {type(tokenizer).__name__}")
    sentences = check_texts(sentences, "sentences", where, blank=False)
    labels = to_numpy(labels)
    if labels.shape != (len(sentences),) or labels.dtype.kind not in "iu":
        raise ValueError(f"{where}: labels has shape {labels.shape} and dtype {labels.dtype}; "
                         f"wanted ({len(sentences)},) integers, one per sentence")
    check_ids(labels, "labels", classifier.n_classes, where, size_name="n_classes")
    check_int(batch_size, "batch_size", where, what="sentences per batch")
    return sentences, labels


def accuracy(classifier: SentenceClassifier, tokenizer, sentences, labels,
             batch_size: int = 64) -> float:
    """The fraction of ``sentences`` whose largest logit is their label (inference only)."""
    sentences, labels = _check_labelled(classifier, tokenizer, sentences, labels, batch_size,
                                        "accuracy")
    correct = 0
    for start in range(0, len(sentences), batch_size):
        logits = classifier(tokenizer.batch(sentences[start:start + batch_size]))
        correct += int((to_numpy(logits).argmax(axis=-1) ==
                        to_numpy(labels[start:start + batch_size])).sum())
    return correct / len(sentences)


def fine_tune(classifier: SentenceClassifier, tokenizer, sentences, labels, steps: int,
              batch_size: int = 16, lr: float = 3e-5, head_lr: float = 1e-3):
    """``steps`` AdamW steps on batches taken in order (wrapping around) from ``sentences``.

    lr: the pretrained layers' learning rate (small: they are moved, not rewritten); head_lr: the
    new head's, which starts from random weights. -> (losses, seconds per step) as lists.
    """
    sentences, labels = _check_labelled(classifier, tokenizer, sentences, labels, batch_size,
                                        "fine_tune")
    check_int(steps, "steps", "fine_tune", what="the number of AdamW steps")
    # 0 freezes those parameters; past 10 (3e5 for 3e-5) every weight is noise after a step,
    # and the pretrained encoder, shared with the SentenceEncoder load() returned, with them
    for name, rate in (("lr", lr), ("head_lr", head_lr)):
        check_real(rate, name, "fine_tune", low=0, low_open=False, high=10)
    encoder = classifier.sentence.encoder
    body = [p for name, p in classifier.named_parameters()
            if not name.startswith("head.") and p is not encoder.word.W]
    optimizers = [AdamW(body, lr=lr, weight_decay=0.0),
                  AdamW(classifier.head.parameters(), lr=head_lr, weight_decay=0.0)]
    losses, seconds = [], []
    for step in range(steps):
        start = (step * batch_size) % len(sentences)
        batch = [(start + i) % len(sentences) for i in range(batch_size)]
        tick = time.perf_counter()
        classifier.zero_grad()
        loss, backward = classifier.loss(tokenizer.batch([sentences[i] for i in batch]),
                                         to_device(labels[batch]))
        backward()
        for optimizer in optimizers:
            optimizer.step()
        seconds.append(time.perf_counter() - tick)
        losses.append(loss)
    return losses, seconds
