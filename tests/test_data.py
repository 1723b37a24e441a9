"""Tokenizer, the default corpus, batching, padding and the synthetic tasks."""
import hashlib
import re
import sys

import numpy as np
import pytest

import minitf.functional as F
from minitf import backend, data
from minitf.data import text as text_module
from test_bad_input import raises


def test_char_tokenizer_round_trips_and_saves(tmp_path):
    tok = data.CharTokenizer.fit("hello, world")
    ids = tok.encode("world, hello")
    assert tok.decode(ids) == "world, hello" and tok.vocab_size == len(set("hello, world"))
    tok.save(tmp_path / "tok.json")
    assert data.CharTokenizer.load(tmp_path / "tok.json").chars == tok.chars


def test_an_unknown_character_is_named():
    with pytest.raises(ValueError, match=r"character 'z' at position 2 is not in the vocabulary"):
        data.CharTokenizer.fit("abc").encode("abzc")


def test_the_default_corpus_needs_no_download():
    text = data.default_corpus()
    assert 400_000 < len(text) < 600_000 and "the" in text
    train, val = data.split(np.arange(1000))
    assert len(train) == 900 and train[-1] + 1 == val[0]          # contiguous, no overlap


def test_the_default_corpus_is_the_same_text_on_every_python(monkeypatch):
    """Shipped with minitf, not read from the running Python (whose topics change with each
    release): the same characters, byte for byte, whatever pydoc_data holds or lacks."""
    monkeypatch.setitem(sys.modules, "pydoc_data.topics", None)
    text = data.default_corpus()
    assert len(text) == 464_970 and len(set(text)) == 103
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "37d06970fc926e60c16dff401e441b84752446a36b6b64516c229fdec77e992c"


def test_a_missing_corpus_suggests_text(monkeypatch, tmp_path):
    monkeypatch.setattr(text_module, "CORPUS_FILE", tmp_path / "python_docs.txt.gz")
    with pytest.raises(FileNotFoundError, match="reinstall minitf, or pass a text file with "
                                                "--text PATH"):
        data.default_corpus()


def test_read_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        data.read_text(tmp_path / "missing.txt")
    (tmp_path / "short.txt").write_text("tiny")
    with pytest.raises(ValueError, match="only 4 characters"):
        data.read_text(tmp_path / "short.txt")
    # named as the caller knows it: the function's path from Python, the flag from the command
    with pytest.raises(IsADirectoryError, match=f"^read_text: path {tmp_path}: is a folder"):
        data.read_text(tmp_path)
    with pytest.raises(IsADirectoryError, match=f"^--text {tmp_path}: is a folder"):
        data.read_text(tmp_path, "--text")


def test_a_byte_order_mark_is_no_character_of_the_text(tmp_path):
    """A file saved "UTF-8 with BOM" (Windows' Notepad) put U+FEFF in the vocabulary, and so in
    the samples; a tokenizer file with one was not JSON."""
    text = "the cat sat on the mat. " * 10
    path = tmp_path / "bom.txt"
    path.write_text(text, encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert data.read_text(path) == text
    saved = tmp_path / "tok.json"
    data.CharTokenizer.fit(text).save(saved)
    saved.write_text(saved.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert data.CharTokenizer.load(saved).chars == sorted(set(text))


def test_random_windows_are_shifted_by_one(backend_name):
    ids = np.arange(100)
    x, y = data.random_windows(ids, 4, 10)
    x, y = backend.to_numpy(x), backend.to_numpy(y)
    assert x.shape == y.shape == (4, 10)
    assert (y == x + 1).all()                                     # Y = text[:, 1:] of each window


def test_random_windows_start_anywhere_in_the_text_about_evenly():
    """Windows drawn from the first one only, or from the first half of the text, passed every
    test here, and the last window, ending on the stream's last token, was never drawn: a
    window's first token is its start, so the starts can be counted."""
    backend.seed(0)
    x, _ = data.random_windows(np.arange(30), 6000, 5)
    counts = np.bincount(backend.to_numpy(x)[:, 0], minlength=30)
    drawn = np.flatnonzero(counts)
    assert drawn[0] == 0 and drawn[-1] == 30 - 5 - 1              # from the first window to the last
    share = counts[drawn] / counts.sum()
    assert share.min() > 0.5 / len(drawn) and share.max() < 1.5 / len(drawn)    # 240 each


def test_evaluation_windows_cover_the_text_in_order():
    x, y = data.evaluation_windows(np.arange(25), 6)
    assert x.shape == (4, 6) and (x.reshape(-1) == np.arange(24)).all() and (y == x + 1).all()


def test_bigram_baseline_is_near_zero_on_a_deterministic_text():
    ids = np.tile(np.arange(5), 200)
    assert data.bigram_loss(ids, ids, 5, alpha=1e-3) < 0.01
    assert data.bigram_loss(ids, ids[::-1].copy(), 5, alpha=1e-3) > 5   # never seen


def test_pad_batch():
    out, lengths = data.pad_batch([[5, 6, 7], [8]], pad_id=0)
    assert out.tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]
    with pytest.raises(ValueError, match="at most 2"):
        data.pad_batch([[1, 2, 3]], length=2)


@pytest.mark.parametrize("task", data.TASKS)
def test_seq2seq_tasks(task):
    with backend.seed(0):
        src, tgt_in, tgt_out = data.seq2seq_task(task, 50, n_symbols=6)
    for s, i, o in zip(src, tgt_in, tgt_out):
        x = s[s != data.PAD]
        y = o[: list(o).index(data.EOS)]
        want = {"copy": x, "reverse": x[::-1], "sort": np.sort(x)}[task]
        assert (y == want).all() and i[0] == data.BOS and (i[1:len(y) + 1] == y).all()


def test_sentiment_needs_more_than_a_bag_of_words():
    with backend.seed(0):
        sentences, labels = data.sentiment(2000)
    assert "my kid does not like this movie" in sentences or "not" in " ".join(sentences)
    vocab = data.WordVocabulary(sentences)
    counts = np.zeros((len(sentences), vocab.vocab_size))
    for row, s in zip(counts, sentences):
        for w in s.split():
            row[vocab.index[w]] += 1
    # A bag-of-words probe: logistic regression on word counts, fitted on this very set.
    features = np.hstack([counts, np.ones((len(counts), 1))])
    w = np.zeros(features.shape[1])
    for _ in range(2000):
        p = 1 / (1 + np.exp(-features @ w))
        w -= 0.5 * features.T @ (p - labels) / len(labels)
    accuracy = ((features @ w > 0) == labels).mean()
    assert 0.4 < labels.mean() < 0.6
    # XOR is not linearly separable: at best 3 of the 4 (verb, negation) cases, 75 %
    assert accuracy < 0.75, f"a bag of words reaches {accuracy:.2f}"


def test_digits_or_a_clear_message():
    try:
        import sklearn  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="scikit-learn"):
            data.digits()
        return
    images, labels = data.digits()
    assert images.shape == (1797, 1, 8, 8) and 0 <= images.min() and images.max() <= 1
    assert set(labels.tolist()) == set(range(10))


@pytest.mark.parametrize("call, message", [
    (lambda ids: data.split(ids, 1.5), "split: validation_fraction must lie in [0, 1); got 1.5"),
    (lambda ids: data.random_windows(ids, 4, 0), "random_windows: n must be a positive integer"),
    (lambda ids: data.random_windows(ids, 0, 8), "random_windows: batch_size must be a positive"),
    (lambda ids: data.random_windows(ids.reshape(5, 20), 4, 8), "random_windows: ids has shape (5, 20) and dtype int64; wanted (N,)"),
    (lambda ids: data.random_windows(ids.astype(float), 4, 8), "random_windows: ids has shape (100,) and dtype float64; wanted (N,) integer"),
    (lambda ids: data.split(ids, 0.999), "split: 100 tokens with validation_fraction=0.999 leave 0 for training"),
    (lambda ids: data.bigram_loss(ids[:0], ids, 7), "bigram_loss: train_ids has 0 tokens; wanted at least 2"),
    (lambda ids: data.evaluation_windows(ids, 0), "evaluation_windows: n must be a positive integer"),
    (lambda ids: data.evaluation_windows(ids, 4, max_windows=0), "evaluation_windows: max_windows must be a positive integer"),
    (lambda ids: data.bigram_loss(ids - 1, ids, 7), "bigram_loss: train_ids must lie in [0, vocab_size=7)"),
    (lambda ids: data.bigram_loss(ids, ids, 3), "bigram_loss: train_ids must lie in [0, vocab_size=3)"),
    (lambda ids: data.bigram_loss(ids, ids, 7, alpha=-1), "bigram_loss: alpha must be a finite number > 0"),
    (lambda ids: data.bigram_loss(ids, ids[:1], 7), "bigram_loss: eval_ids has 1 tokens; wanted at least 2"),
    (lambda ids: F.layer_norm(np.ones((2, 4)), np.ones(4), np.zeros(4), eps=-1.0), "layer_norm: eps must be a finite number ≥ 0"),
])
def test_a_bad_setting_is_one_line_not_a_silent_result(call, message):
    """Each of these was taken: a 1.5 split, empty windows, a bigram loss read off the wrong row
    (an id of -1) or negative (α < 0), a layer norm with ε < 0."""
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        call(np.arange(100) % 7)


def test_pad_batch_refuses_what_it_would_truncate_or_cannot_pad():
    with pytest.raises(TypeError, match=r"^pad_batch: a sequence holds float64 values; wanted integer ids"):
        data.pad_batch([[1.7, 2.2], [3.9]])                  # became [[1, 2], [3, 0]]
    with pytest.raises(ValueError, match=r"^pad_batch: sequences is empty"):
        data.pad_batch([])
    with pytest.raises(ValueError, match=r"^pad_batch: pad_id must be an integer ≥ 0"):
        data.pad_batch([[1, 2]], pad_id=0.5)


def test_word_vocabulary_refuses_specials_and_sentences_it_cannot_use():
    for specials in ("[SEP]", ("<pad>",), ("[SEP]", "[SEP]"), (3,), ("[ SEP ]",)):
        with raises(ValueError, "WordVocabulary: specials must be distinct words", repr(specials)):
            data.WordVocabulary(["a b"], specials=specials)
    with raises(TypeError, "WordVocabulary: sentences must be a list of strings", "one string"):
        data.WordVocabulary("a b")
    with raises(TypeError, "WordVocabulary", "got int 3 among them"):
        data.WordVocabulary(["a b", 3])
    # a special written in a sentence is the special: one id, and vocab_size counts it once
    vocabulary = data.WordVocabulary(["a [SEP] b"], specials=("[SEP]",))
    assert vocabulary.words == ["<pad>", "[SEP]", "a", "b"] and vocabulary.vocab_size == 4


def test_a_char_tokenizer_is_made_of_single_characters():
    """Each was a tokenizer that could encode nothing, or bytes read as integers."""
    for chars in ([], ["ab", "c"], "abc", [1, 2]):
        with raises(ValueError, "CharTokenizer: chars must be a non-empty list of single"):
            data.CharTokenizer(chars)
    with raises(TypeError, "CharTokenizer.fit: text is a bytes", "decode them first"):
        data.CharTokenizer.fit(b"abc")
    with raises(TypeError, "CharTokenizer.fit: text is a list"):
        data.CharTokenizer.fit(["ab", "cd"])
    with raises(TypeError, "CharTokenizer.encode: text is a NoneType"):
        data.CharTokenizer.fit("abc").encode(None)
    with raises(ValueError, "CharTokenizer: chars must be a non-empty list of single"):
        data.CharTokenizer.from_json({"type": "char", "chars": ["ab", "c"]})


def test_a_synthetic_task_wants_counts_it_can_make():
    """n_symbols=2.5 was truncated, min_len=0 gave sources of padding only, sentiment(-5) and
    point_sets(0) returned nothing at all."""
    for call, fragment in [
        (lambda: data.seq2seq_task("copy", 3, n_symbols=2.5), "seq2seq_task: n_symbols must be"),
        (lambda: data.seq2seq_task("copy", 3, min_len=0), "seq2seq_task: min_len must be"),
        (lambda: data.seq2seq_task("copy", 3, min_len=9), "seq2seq_task: max_len must be an "
                                                          "integer ≥ 9"),
        (lambda: data.sentiment(-5), "sentiment: n_examples must be a positive integer"),
        (lambda: data.point_sets(0), "point_sets: n_examples must be a positive integer"),
        (lambda: data.point_sets(3, 0), "point_sets: n_points must be a positive integer"),
    ]:
        with raises(ValueError, fragment):
            call()


def test_evaluation_windows_stop_at_max_windows():
    """max_windows caps the count: 100 tokens hold 24 windows of 4, and all 24 came back."""
    x, y = data.evaluation_windows(np.arange(100), 4, max_windows=3)
    assert x.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] and (y == x + 1).all()
    x, _ = data.evaluation_windows(np.arange(100), 4, max_windows=50)      # more than there are
    assert x.shape == (24, 4)


def test_seq2seq_lengths_span_min_len_to_max_len_inclusive():
    """max_len is the longest sequence: the lengths were drawn from [min_len, max_len), so no
    source ever had max_len symbols."""
    with backend.seed(0):
        src, tgt_in, tgt_out = data.seq2seq_task("copy", 500, min_len=3, max_len=8)
    lengths = (src != data.PAD).sum(axis=1)
    assert set(lengths.tolist()) == {3, 4, 5, 6, 7, 8}
    assert src.shape == (500, 8) and tgt_in.shape == tgt_out.shape == (500, 9)
    assert ((tgt_out == data.EOS).argmax(axis=1) == lengths).all()
