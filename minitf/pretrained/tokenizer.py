"""BERT's WordPiece tokenizer, lower-cased, written out: text -> words -> sub-word pieces -> ids.

    "The café's crêpes!"  ->  clean, lower-case, strip accents:   "the cafe's crepes!"
                          ->  split at spaces and punctuation:    the cafe ' s crepes !
                          ->  WordPiece, longest piece first:     the cafe ' s cr ##ep ##es !
                          ->  [CLS] … [SEP], then ids from vocab.txt (line number = id)

A word with no split into known pieces becomes [UNK] as a whole. A special token typed in the
text exactly so, "[MASK]" say, is first cut out whole, as the reference tokenizer does (it is
matched before any cleaning or lower-casing: "[mask]" is ordinary text). This reproduces the
reference (uncased) BERT tokenizer's ids exactly; the tests check it on sentences with
punctuation, accents, unknown words and special tokens.
"""
from __future__ import annotations

import os
import re
import sys
import unicodedata
import warnings
from collections.abc import Iterable
from pathlib import Path

from minitf.backend import to_device, to_numpy
from minitf.data.tasks import pad_batch
from minitf.data.text import read_utf8
from minitf.validate import check_ids, check_int, check_path

MAX_WORD_CHARS = 100                   # a longer "word" is [UNK] without trying
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")      # kept whole when typed
NEEDED_TOKENS = SPECIAL_TOKENS[:4]          # the ids the tokenizer itself writes (not [MASK])
_PACKAGE = os.path.join(str(Path(__file__).parents[1]), "")          # minitf/, as frames name it


def _user_stacklevel() -> int:
    """warnings.warn's stacklevel, for its caller, that points at the first frame outside minitf:
    a cut text is reported where the user's code asked for it (tokenizer.batch, similarity, …),
    not at the line of minitf that called encode."""
    frame, level = sys._getframe(2), 2              # 1 is the caller, which calls warn itself
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _check_text(text) -> None:
    if not isinstance(text, str):
        raise TypeError(f"WordPieceTokenizer: text is a {type(text).__name__}; wanted a str")


def check_texts(texts, name: str, where: str, blank: bool = True) -> list:
    """``texts`` as a list of one or more strings, or one line naming ``where`` and ``name``: a
    string alone would be read as its characters, and no texts left pad_batch to complain.
    ``blank=False`` refuses a text of no words too: embedded, it is [CLS] [SEP] alone."""
    if isinstance(texts, str) or not isinstance(texts, Iterable):
        got = "one string (wrap it in a list)" if isinstance(texts, str) else \
            type(texts).__name__
        raise TypeError(f"{where}: {name} must be a list of strings; got {got}")
    texts = list(texts)
    if not texts:
        raise ValueError(f"{where}: {name} must be a non-empty list of strings; got an empty one")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{where}: {name}[{i}] is a {type(text).__name__}; wanted a str")
        if not blank and not text.strip():
            raise ValueError(f"{where}: {name}[{i}] is {text!r}, no text; wanted some text to "
                             f"embed")
    return texts


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    """Unicode punctuation, and every ASCII non-letter, non-digit symbol ($, +, ^, `, …)."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(ch: str) -> bool:
    """A CJK ideograph: BERT puts spaces around each, so every one is a word of its own."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in (
        (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


class WordPieceTokenizer:
    """Text to ids and back, with BERT's special tokens.

    vocab: the tokens in id order (vocab.txt). [PAD] must be id 0 -- the model's padding id.
    max_len: the most tokens a text is cut to, [CLS] and [SEP] included: sentence-transformers'
    max_seq_length (load() reads it, 256 for all-MiniLM-L6-v2), at most the model's positions.
    encode(text) -> [CLS] pieces [SEP] as a list of ids;  batch(texts) -> padded (b, n) ids.
    """

    def __init__(self, vocab, max_len: int = 512):
        if not isinstance(vocab, Iterable) or isinstance(vocab, (str, bytes, os.PathLike)):
            # a str is iterable, as its characters: "vocab.txt" had "no [PAD] token"
            hint = (" (for a file: WordPieceTokenizer.from_file(path))"
                    if isinstance(vocab, (str, os.PathLike)) else "")
            raise TypeError(f"WordPieceTokenizer: vocab must be a list of tokens in id order (the "
                            f"lines of vocab.txt); got {type(vocab).__name__}{hint}")
        self.vocab = list(vocab)
        self.index = {token: i for i, token in enumerate(self.vocab)}
        for special in NEEDED_TOKENS:
            if special not in self.index:
                raise ValueError(f"WordPieceTokenizer: the vocabulary has no {special} token")
        self.pad_id, self.unk_id = self.index["[PAD]"], self.index["[UNK]"]
        self.cls_id, self.sep_id = self.index["[CLS]"], self.index["[SEP]"]
        if len(self.index) != len(self.vocab):        # two ids for one piece: one never read
            raise ValueError("WordPieceTokenizer: the vocabulary holds a token twice")
        # one capturing group: re.split puts each special token found between the texts around it
        self._specials = re.compile("(" + "|".join(
            re.escape(token) for token in SPECIAL_TOKENS if token in self.index) + ")")
        # [CLS] and [SEP] take two positions: fewer than three leave no room for the text
        check_int(max_len, "max_len", "WordPieceTokenizer", low=3,
                  what="the most tokens a text is cut to, [CLS] and [SEP] included")
        self.max_len = max_len

    @classmethod
    def from_file(cls, path, max_len: int = 512) -> "WordPieceTokenizer":
        """Read vocab.txt: one token a line, the line number its id."""
        check_path(path, "path", "WordPieceTokenizer.from_file")
        lines = read_utf8(path, "WordPieceTokenizer.from_file:").split("\n")
        vocab = [line.rstrip("\r") for line in lines if line.rstrip("\r")]
        missing = [token for token in NEEDED_TOKENS if token not in vocab]
        if missing:                     # an essay, or an empty file: named, with the file
            raise ValueError(f"WordPieceTokenizer.from_file: {path} has no {', '.join(missing)} "
                             f"line; wanted a BERT vocab.txt, one token a line")
        return cls(vocab, max_len)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def words(self, text: str) -> list:
        """Clean, lower-case, strip accents, split at whitespace and around punctuation."""
        _check_text(text)
        text = "".join(" " if _is_whitespace(ch) else ch for ch in text
                       if ord(ch) not in (0, 0xFFFD) and not _is_control(ch))
        text = "".join(f" {ch} " if _is_cjk(ch) else ch for ch in text)
        words = []
        for word in text.split():
            # NFD splits "é" into "e" + a combining accent (category Mn), which is then dropped.
            word = "".join(ch for ch in unicodedata.normalize("NFD", word.lower())
                           if unicodedata.category(ch) != "Mn")
            piece = ""
            for ch in word:                      # every punctuation character is a word of its own
                if _is_punctuation(ch):
                    words += [piece, ch] if piece else [ch]
                    piece = ""
                else:
                    piece += ch
            if piece:
                words.append(piece)
        return words

    def pieces(self, word: str) -> list:
        """WordPiece: the longest known prefix, then the longest known "##"-continuation, … ."""
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.index:
                    break
            else:                                # no prefix is known: the whole word is unknown
                return ["[UNK]"]
            pieces.append(piece)
            start = end
        return pieces

    def tokenize(self, text: str) -> list:
        """The text's pieces, without [CLS]/[SEP]:  "it's" -> ["it", "'", "s"]; a special token
        typed exactly so stays whole:  "a [MASK]." -> ["a", "[MASK]", "."]."""
        _check_text(text)
        parts = self._specials.split(text)          # text, special, text, special, …, text
        return [piece for i, part in enumerate(parts)
                for piece in ([part] if i % 2 else
                              [p for word in self.words(part) for p in self.pieces(word)])]

    def encode(self, text: str) -> list:
        """[CLS] pieces [SEP] as ids, cut to max_len tokens ([CLS] and [SEP] included), as
        sentence-transformers cuts a text to its max_seq_length."""
        ids = [self.index.get(piece, self.unk_id) for piece in self.tokenize(text)]
        if self.pad_id in ids:              # the model reads the id as padding: it would vanish
            raise ValueError(f"WordPieceTokenizer: text holds [PAD] typed out, id {self.pad_id}, "
                             f"which the model masks as padding; wanted a text without it")
        if len(ids) > self.max_len - 2:     # the rest would be missing from its embedding, unsaid
            # one message for every such text: Python shows it once, not once per text
            warnings.warn(f"WordPieceTokenizer: a text of more than {self.max_len - 2} pieces "
                          f"is cut to its first {self.max_len - 2} (max_len={self.max_len} "
                          f"tokens less [CLS] and [SEP])", stacklevel=_user_stacklevel())
        return [self.cls_id] + ids[:self.max_len - 2] + [self.sep_id]

    def batch(self, texts):
        """Several texts -> (b, n) int64 ids on the active backend, right-padded with [PAD]."""
        texts = check_texts(texts, "texts", "WordPieceTokenizer.batch")
        ids, _ = pad_batch([self.encode(text) for text in texts], self.pad_id)
        return to_device(ids)

    def tokens(self, ids) -> list:
        """The pieces of a list of ids (for labelling plots): [101, 2009] -> ["[CLS]", "it"]."""
        ids = to_numpy(ids).reshape(-1)                            # a list, or an array
        if ids.size:                      # -1 must not quietly read the last token, nor 1.7 the 2nd
            check_ids(ids, "ids", self.vocab_size, "WordPieceTokenizer.tokens")
        return [self.vocab[int(i)] for i in ids.tolist()]
