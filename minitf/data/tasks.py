"""Small data sets minitf makes itself, for the three other model families:

    seq2seq_task    copy / reverse / sort a sequence of symbols     (encoder–decoder)
    sentiment       templated sentences with negation               (encoder classifier)
    digits          8×8 handwritten digits from scikit-learn        (Vision Transformer)
    point_sets      2-D point clouds: circle, line or blob           (set encoder)
All drawn from minitf's seeded generator: the same seed gives the same data.
"""
from __future__ import annotations

import numpy as np

from minitf.backend import rand, randint, randn, to_numpy
from minitf.validate import check_int

PAD, BOS, EOS = 0, 1, 2           # special ids of the seq2seq tasks; symbols start at 3
TASKS = ("copy", "reverse", "sort")


def pad_batch(sequences, pad_id: int = PAD, length: int | None = None):
    """Right-pad variable-length sequences into one (b, n) int64 array; also return the lengths.
    The padding is then masked as keys (padding_mask_from_ids) and ignored as targets."""
    where = "pad_batch"
    if isinstance(sequences, str) or not hasattr(sequences, "__len__"):
        raise TypeError(f"{where}: sequences must be a list of id sequences; "
                        f"got {type(sequences).__name__}")
    if len(sequences) == 0:
        raise ValueError(f"{where}: sequences is empty; wanted at least one sequence of ids")
    check_int(pad_id, "pad_id", where, low=0, what="the id of the padding token")
    _check_length(length, where)
    arrays = [_as_array(s, i, where) for i, s in enumerate(sequences)]
    for i, seq in enumerate(arrays):
        if seq.ndim == 0:           # [1, 2, 3] is one sequence, not three
            hint = " (one sequence: wrap it in a list)" if seq.dtype.kind in "iu" else ""
            raise TypeError(f"{where}: sequences must be a list of id sequences; got "
                            f"{seq.item()!r} among them{hint}")
        if seq.ndim > 1:            # a row of ids must fit a row of the (b, n) batch
            raise ValueError(f"{where}: sequences[{i}] has shape {tuple(seq.shape)}; wanted "
                             f"(n,), one sequence of ids")
        if seq.size and seq.dtype.kind not in "iu":      # ids, not numbers that would be truncated
            raise TypeError(f"{where}: a sequence holds {seq.dtype} values; wanted integer ids")
        if seq.size and seq.dtype == np.uint64 and seq.max() > INT64_MAX:   # would wrap negative
            raise ValueError(f"{where}: sequences[{i}] holds the id {int(seq.max())}; wanted ids "
                             f"that fit the int64 batch, at most {INT64_MAX}")
        if (seq == pad_id).any():   # masked as padding later: a real token silently dropped
            raise ValueError(f"{where}: sequences[{i}] holds the id {pad_id} at position "
                             f"{int(np.argmax(seq == pad_id))}, and pad_id is {pad_id}; wanted a "
                             f"pad_id that no sequence uses")
    lengths = np.array([len(s) for s in arrays], dtype=np.int64)
    n = int(lengths.max()) if length is None else length
    if lengths.max() > n:
        raise ValueError(f"{where}: a sequence has {lengths.max()} tokens; wanted at most {n}")
    out = np.full((len(sequences), n), pad_id, dtype=np.int64)
    for row, seq in zip(out, arrays):
        row[:len(seq)] = seq
    return out, lengths


INT64_MAX = int(np.iinfo(np.int64).max)


def _as_array(sequence, i: int, where: str):
    """sequences[i] as an array: NumPy's own error for [1, [2, 3]] names neither the function nor
    the sequence."""
    try:
        return np.asarray(sequence)
    except ValueError:
        raise ValueError(f"{where}: sequences[{i}] nests lists in it, {str(sequence)[:40]}; "
                         f"wanted (n,), one flat sequence of ids") from None


def _check_length(length, where: str) -> None:
    """The padded length, or None for the longest sequence's; 0 pads empty sequences."""
    if length is not None:
        check_int(length, "length", where, low=0, what="the padded length (None: the longest)")


def _check_sentences(sentences, where: str) -> None:
    """A list of sentences, each one string: a string alone would be read as its characters."""
    if isinstance(sentences, str):
        raise TypeError(f"{where}: sentences must be a list of strings; got one string "
                        f"(one sentence: wrap it in a list)")
    if not hasattr(sentences, "__len__"):        # None, a number; a generator would be used up
        raise TypeError(f"{where}: sentences must be a list of strings; "
                        f"got {type(sentences).__name__}")
    not_text = [s for s in sentences if not isinstance(s, str)]
    if not_text:
        raise TypeError(f"{where}: sentences must be a list of strings; got "
                        f"{type(not_text[0]).__name__} {not_text[0]!r} among them")


def seq2seq_task(task: str, n_examples: int, n_symbols: int = 10, min_len: int = 3,
                 max_len: int = 8):
    """(src, tgt_in, tgt_out): padded (b, ·) arrays for teacher forcing on a synthetic task.

        src     = x                    e.g. 5 3 9 4
        tgt_in  = BOS y                     BOS 4 9 3 5        (reverse)
        tgt_out = y EOS                     4 9 3 5 EOS
    vocab size = n_symbols + 3 (PAD, BOS, EOS).
    """
    where = "seq2seq_task"
    if task not in TASKS:
        raise ValueError(f"{where}: task must be one of {TASKS}; got {task!r}")
    check_int(n_examples, "n_examples", where, what="the number of examples")
    check_int(n_symbols, "n_symbols", where, what="the number of distinct symbols")
    check_int(min_len, "min_len", where, what="the shortest sequence")
    check_int(max_len, "max_len", where, low=min_len, what="the longest sequence, ≥ min_len")
    lengths = to_numpy(randint(min_len, max_len + 1, (n_examples,)))
    sources, targets = [], []
    for n in lengths:
        x = to_numpy(randint(3, 3 + n_symbols, (int(n),)))
        y = {"copy": x, "reverse": x[::-1], "sort": np.sort(x)}[task]
        sources.append(x)
        targets.append(y)
    src, _ = pad_batch(sources)
    tgt_in, _ = pad_batch([np.concatenate([[BOS], y]) for y in targets])
    tgt_out, _ = pad_batch([np.concatenate([y, [EOS]]) for y in targets])
    return src, tgt_in, tgt_out


# -- sentiment with negation ---------------------------------------------------------------------

SUBJECTS = ["my kid", "my little kid", "my sister", "the critic", "my old friend", "the audience"]
NOBODY = ["nobody", "no one i know"]           # a negation that sits in the subject
AUXILIARIES = ["does", "did", "will", "really does"]
POSITIVE = ["like", "love", "enjoy", "recommend"]
NEGATIVE = ["hate", "dislike", "regret", "avoid"]
OBJECTS = ["this movie", "this animated movie", "this book", "this long book", "the new show",
           "this funny show"]


def _third_person(verb: str) -> str:
    return verb + "s"


def sentiment(n_examples: int):
    """Templated sentences and labels (1 = positive), where negation flips the meaning:

        my kid does like this movie              1
        my kid does not like this movie          0
        my little kid likes this animated movie  1
        nobody likes this animated movie         0
        no one i know hates this book            1
    label = (verb is positive) XOR (sentence is negated). Every word, "not" and "nobody"
    included, occurs about as often in positive as in negative sentences, and XOR is not linearly
    separable: a bag-of-words model -- a linear function of word counts -- gets at most three of
    the four (verb, negation) cases right (a logistic regression on counts reaches 59 %). To do
    better, a model has to read the words in relation to one another.
    -> (list of n sentences, (n,) int64 labels)
    """
    check_int(n_examples, "n_examples", "sentiment", what="the number of sentences")
    def pick(options):
        return options[int(to_numpy(randint(0, len(options), (1,)))[0])]

    sentences, labels = [], []
    for _ in range(n_examples):
        positive_verb, negated, direct = (bool(b) for b in to_numpy(randint(0, 2, (3,))))
        verb = pick(POSITIVE if positive_verb else NEGATIVE)
        if direct:            # "my kid likes …" / "nobody likes …"
            subject = pick(NOBODY if negated else SUBJECTS)
            words = [subject, _third_person(verb), pick(OBJECTS)]
        else:                 # "my kid does like …" / "my kid does not like …"
            words = [pick(SUBJECTS), pick(AUXILIARIES) + (" not" if negated else ""), verb,
                     pick(OBJECTS)]
        sentences.append(" ".join(words))
        labels.append(int(positive_verb != negated))
    return sentences, np.array(labels, dtype=np.int64)


class WordVocabulary:
    """Word-level ids for the sentiment sentences: 0 is padding, then the ``specials`` (e.g.
    "[MASK]", "[SEP]") in the order given, then every word, sorted."""

    def __init__(self, sentences, specials=()):
        where = "WordVocabulary"
        _check_sentences(sentences, where)
        # each special must be one word, as encode splits a sentence into words at spaces
        if (not isinstance(specials, (list, tuple))      # ids follow their order: no set
                or not all(isinstance(t, str) and t.split() == [t] for t in specials)
                or len(set(specials)) != len(specials) or "<pad>" in specials):
            raise ValueError(f"{where}: specials must be distinct words without spaces, other "
                             f"than '<pad>' (id 0), e.g. ('[MASK]', '[SEP]'); got {specials!r}")
        self.specials = ["<pad>", *specials]
        # a special written in a sentence ("a [SEP] b") is that special, not a word of its own
        words = {w for s in sentences for w in s.split()} - set(self.specials)
        self.words = self.specials + sorted(words)
        self.index = {w: i for i, w in enumerate(self.words)}

    @property
    def vocab_size(self) -> int:
        return len(self.words)

    def encode(self, sentences, length: int | None = None):
        """A list of sentences -> padded (b, n) ids (and their lengths)."""
        _check_sentences(sentences, "WordVocabulary.encode")
        return self._encode(sentences, length, "WordVocabulary.encode", "sentences")

    def _encode(self, sentences, length, where: str, name: str, extra: str = ""):
        """encode's work, refused in the words of ``where`` (encode, or encode_pairs, which passes
        each pair joined, ``extra`` words beside its own): pad_batch's messages name pad_batch."""
        _check_length(length, where)
        if len(sentences) == 0:
            raise ValueError(f"{where}: {name} is empty; wanted at least one")
        unknown = sorted({w for s in sentences for w in s.split()} - set(self.index))
        if unknown:
            raise ValueError(f"{where}: unknown words {unknown[:5]}")
        rows = [[self.index[w] for w in s.split()] for s in sentences]
        for i, row in enumerate(rows):
            if 0 in row:            # the padding mask would hide it: a word silently dropped
                raise ValueError(f"{where}: {name}[{i}] holds the word '<pad>', id 0, the "
                                 f"padding; wanted the words alone (encode pads them itself)")
            if length is not None and len(row) > length:
                raise ValueError(f"{where}: {name}[{i}] has {len(row)} words{extra}; wanted at "
                                 f"most length={length}")
        return pad_batch(rows, 0, length)

    def encode_pairs(self, pairs, length: int | None = None):
        """Sentence pairs -> ids and segment ids, both padded (b, n), for a model that puts its own
        [CLS] in front (EncoderClassifier):

            ids          a₁ … aₖ [SEP] b₁ … bₘ [SEP] <pad> …
            segment_ids  0  … 0  0     1  … 1  1     0     …
        """
        where = "WordVocabulary.encode_pairs"
        if "[SEP]" not in self.index:
            raise ValueError(f"{where}: the vocabulary has no [SEP]; build it "
                             "with specials=('[SEP]',)")
        if isinstance(pairs, str) or not hasattr(pairs, "__len__"):
            raise TypeError(f"{where}: pairs must be a list of (sentence, sentence) pairs; "
                            f"got {type(pairs).__name__}")
        for pair in pairs:          # a lone sentence would be unpacked as its characters
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2
                    and all(isinstance(s, str) for s in pair)):
                raise TypeError(f"{where}: pairs must be a list of (sentence, sentence) pairs; "
                                f"got {pair!r} among them")
        joined = [f"{a} [SEP] {b} [SEP]" for a, b in pairs]
        ids, lengths = self._encode(joined, length, where, "pairs", " with its two [SEP]")
        first = np.array([len(a.split()) + 1 for a, _ in pairs])            # a and its [SEP]
        position = np.arange(ids.shape[1])
        in_b = (position >= first[:, None]) & (position < lengths[:, None])     # (b, n)
        segment_ids = in_b.astype(np.int64)
        return ids, segment_ids


# -- point clouds for the set encoder ------------------------------------------------------------

SHAPES = ("circle", "line", "blob")


def point_sets(n_examples: int, n_points: int = 8):
    """Small 2-D point clouds, each a set of n_points from one of three shapes, at a random angle:

        0  circle   points on the unit circle (a little noise)
        1  line     points along a random direction, from −1 to 1
        2  blob     points from N(0, 0.4²) in both coordinates
    The points come in no particular order: the label is a property of the set.
    -> points (n, n_points, 2) float32, labels (n,) int64
    """
    check_int(n_examples, "n_examples", "point_sets", what="the number of sets")
    check_int(n_points, "n_points", "point_sets", what="the points in a set")
    labels = to_numpy(randint(0, 3, (n_examples,)))
    u = to_numpy(rand(n_examples, n_points, dtype=np.float64)) * 2 - 1        # in [-1, 1)
    noise = to_numpy(randn(n_examples, n_points, 2, dtype=np.float64))
    angle = to_numpy(rand(n_examples, 1, dtype=np.float64)) * np.pi          # the line's direction
    circle = np.stack([np.cos(np.pi * u), np.sin(np.pi * u)], axis=-1) + 0.05 * noise
    line = u[..., None] * np.stack([np.cos(angle), np.sin(angle)], axis=-1) + 0.02 * noise
    blob = 0.4 * noise
    points = np.where(labels[:, None, None] == 0, circle, np.where(labels[:, None, None] == 1,
                                                                   line, blob))
    return points.astype(np.float32), labels


# -- digits for the Vision Transformer ----------------------------------------------------------

def digits():
    """scikit-learn's bundled 8×8 handwritten digits (1,797 images, no download).

    -> images (N, 1, 8, 8) in [0, 1] as float32, labels (N,) int64 in 0 … 9
    """
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the digits data set needs scikit-learn: pip install 'minitf[vision]' "
                          "(or pip install scikit-learn)") from None
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[:, None]
    return images, data.target.astype(np.int64)
