"""Text for language modelling: a character tokenizer, the default corpus, random-window batches,
and the character-bigram baseline a Transformer has to beat. Token ids live on the host (NumPy)
and move to the active backend one batch at a time."""
from __future__ import annotations

import contextlib
import gzip
import json
import os
import warnings
from pathlib import Path

import numpy as np

from minitf.backend import is_array, randint, to_device, to_numpy
from minitf.rundir import fsync_directory, write_durably
from minitf.validate import check_ids, check_int, check_path, check_probability, check_real


class CharTokenizer:
    """One token per distinct character: ids 0 … V−1 in sorted character order.

    tok = CharTokenizer.fit(text);  ids = tok.encode("hello");  tok.decode(ids) == "hello"
    """

    def __init__(self, chars: list[str]):
        # one character per token: a "token" of two would never match one character of a text
        if isinstance(chars, str) or not isinstance(chars, (list, tuple)) or not chars or \
                not all(isinstance(c, str) and len(c) == 1 for c in chars):
            raise ValueError(f"CharTokenizer: chars must be a non-empty list of single "
                             f"characters; got {str(chars)[:40]}")
        self.chars = list(chars)
        self.index = {c: i for i, c in enumerate(self.chars)}
        if len(self.index) != len(self.chars):
            twice = next(c for i, c in enumerate(self.chars) if c in self.chars[:i])
            raise ValueError(f"CharTokenizer: chars must be distinct; got {twice!r} more than once")

    @classmethod
    def fit(cls, text: str) -> "CharTokenizer":
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer.fit: text is a {type(text).__name__}; wanted a str "
                            f"(bytes: decode them first)")
        if not text:
            raise ValueError("CharTokenizer.fit: the text is empty; wanted at least one character")
        return cls(sorted(set(text)))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str):
        """str -> (len(text),) int64 host array. Unknown characters are an error, named."""
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer.encode: text is a {type(text).__name__}; wanted a str")
        try:
            return np.fromiter((self.index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as err:
            position = next(i for i, c in enumerate(text) if c not in self.index)
            raise ValueError(f"CharTokenizer.encode: character {err.args[0]!r} at position "
                             f"{position} is not in the vocabulary of {self.vocab_size} "
                             f"characters this tokenizer was fitted on") from None

    def decode(self, ids) -> str:
        """ids (n,), or one row (1, n) as generate returns for one prompt -> the text."""
        try:
            ids = np.asarray(to_numpy(ids))
        except ValueError:          # rows of different lengths, [[1, 2], [3]], make no array
            raise ValueError(f"CharTokenizer.decode: ids must be a sequence or an array of ids; "
                             f"got rows of different lengths, {str(ids)[:40]}") from None
        if ids.ndim > 1 and ids.size and ids.size != ids.shape[-1]:   # a batch joined into one
            raise ValueError(f"CharTokenizer.decode: ids has shape {ids.shape}, several rows; "
                             f"wanted one sequence: decode each row, [tok.decode(row) for row "
                             f"in ids]")
        ids = ids.reshape(-1)
        if ids.size:                     # -1 must not quietly read the last character
            check_ids(ids, "ids", self.vocab_size, "CharTokenizer.decode")
        return "".join(self.chars[i] for i in ids.tolist())

    def to_json(self) -> dict:
        return {"type": "char", "chars": self.chars}

    @classmethod
    def from_json(cls, saved: dict) -> "CharTokenizer":
        if (not isinstance(saved, dict) or saved.get("type") != "char"
                or not isinstance(saved.get("chars"), list)):
            raise ValueError(f"CharTokenizer.from_json: saved must be what to_json returns, "
                             f"{{'type': 'char', 'chars': [...]}}; got {str(saved)[:40]}")
        return cls(saved["chars"])

    def save(self, path) -> None:
        """Write the tokenizer as JSON to ``path``: a new file, or one that holds a saved
        tokenizer. Any other file there is the user's (an essay, a corpus), and is kept."""
        path = _path(path, "CharTokenizer.save")
        if path.is_file() and not _holds_a_tokenizer(path):
            raise FileExistsError(f"CharTokenizer.save: {path} already holds a file that is not "
                                  f"a saved tokenizer; wanted a new file name, or a tokenizer "
                                  f"file to replace")
        text = json.dumps(self.to_json(), ensure_ascii=False)
        write_utf8(path, text, "CharTokenizer.save:")

    @classmethod
    def load(cls, path) -> "CharTokenizer":
        text = read_utf8(_path(path, "CharTokenizer.load"), "CharTokenizer.load:")
        try:
            saved = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"CharTokenizer.load: {path} is not JSON ({err}); wanted a "
                             f"tokenizer that CharTokenizer.save wrote") from None
        if not isinstance(saved, dict):        # from_json would name itself, not the file
            raise ValueError(f"CharTokenizer.load: {path} holds a JSON {type(saved).__name__}; "
                             f"wanted a saved character tokenizer, {{'type': 'char', ...}}")
        try:
            return cls.from_json(saved)
        except ValueError as err:      # from_json's message names neither load nor the file
            raise ValueError(f"CharTokenizer.load: {path} holds no tokenizer that "
                             f"CharTokenizer.save wrote ({err})") from None


TOKENIZER_MOST_BYTES = 64 << 20    # every Unicode character's JSON, escaped, is 12-17 MiB


def _holds_a_tokenizer(path: Path) -> bool:
    """Whether save may replace ``path``: an empty file (a NamedTemporaryFile, a touch), or one
    CharTokenizer.load reads -- never a corpus of gigabytes read whole to find out."""
    size = path.stat().st_size
    if size == 0 or size > TOKENIZER_MOST_BYTES:
        return size == 0
    try:
        CharTokenizer.load(path)
    except (ValueError, OSError):
        return False
    return True


def _path(path, where: str) -> Path:
    """A file's path, checked: a str or a pathlib.Path (None is no file name)."""
    check_path(path, "path", where)
    return Path(path)


CORPUS_FILE = Path(__file__).with_name("python_docs.txt.gz")


def default_corpus() -> str:
    """Python's documentation topics, ~0.46 MB of English about Python, no download needed.

    The text is what ``pydoc_data.topics`` held in CPython 3.11 (its topics joined in sorted
    order; Python Software Foundation License), shipped with minitf rather than read from the
    running Python: each Python release regenerates those topics, and the same corpus on every
    machine is what makes the README's losses, the lessons' numbers and the train/validation
    split the same for everyone.
    """
    try:
        return gzip.decompress(CORPUS_FILE.read_bytes()).decode("utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"the default corpus ({CORPUS_FILE.name}, shipped with minitf) is "
                                f"missing from this installation; reinstall minitf, or pass a "
                                f"text file with --text PATH") from None


def read_utf8(path, where: str) -> str:
    """The text of a UTF-8 file, or one line that names ``where``, the file and what is wrong:
    no such file, a folder, bytes that are not UTF-8, a NUL (binary, or UTF-16)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{where} {path}: is a folder; wanted a text file")
    if not path.is_file():
        raise FileNotFoundError(f"{where} {path}: no such file" if not path.exists() else
                                f"{where} {path}: not a file of text (a device or a pipe)")
    raw = path.read_bytes()
    problem = not_utf8(raw)
    if problem:
        binary = ", not binary or UTF-16" if problem.endswith("NUL") else ""
        raise ValueError(f"{where} {path}: {problem}; wanted a UTF-8 text file{binary} (convert "
                         f"it, e.g. with iconv)")
    # A byte-order mark (Windows' Notepad writes one) marks the file, and is no character of it:
    # trained on, it became a token of the vocabulary and turned up in the samples.
    return raw.decode("utf-8").removeprefix("\ufeff")


def not_utf8(raw: bytes) -> str:
    """Why the bytes ``raw`` are not UTF-8 text -- the first byte that is not, in words -- or ''.
    A NUL counts: UTF-16 of ASCII text decodes as UTF-8, with NULs between."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"byte {err.start} (0x{raw[err.start]:02x}) is not valid UTF-8"
    return f"byte {raw.index(0)} is a NUL" if 0 in raw else ""


def check_file_name(path, where: str) -> Path:
    """A file about to be written, as far as can be told before writing: not a folder, and in a
    folder that exists. ``where`` names it in the error: a flag, or a function and a colon."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{where} {path} is a folder; wanted a file name")
    if not path.absolute().parent.is_dir():
        raise FileNotFoundError(f"{where} {path}: the folder {path.parent} does not exist; "
                                f"wanted a file in an existing folder")
    return path


def write_utf8(path, text: str, where: str) -> None:
    """Write ``text`` to the file ``path`` as UTF-8, whole or not at all: into a temporary file
    beside it, flushed to the disk, then renamed over it in one step, the rename synced too. A
    full disk or a run killed part-way leaves the file that was there as it was. One line that
    names ``where`` and the path when it cannot be written: a folder, a folder that is missing,
    no permission; a warning where the folder's sync alone fails (the file is written)."""
    path = check_file_name(path, where)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_durably(temporary, text.encode("utf-8"))    # whole before it takes the old one's place
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)      # the old file's permissions
        os.replace(temporary, path)
    except BaseException as err:         # a full disk, Ctrl-C: no temporary left behind
        with contextlib.suppress(OSError):   # (on a read-only disk this fails too: not the news)
            temporary.unlink(missing_ok=True)
        if not isinstance(err, OSError):
            raise
        refused = type(err)(f"{where} cannot write {path} ({err.strerror or err}); wanted a "
                            f"file in an existing folder you can write to")
        refused.errno = err.errno        # ENOSPC and the like, for a caller that asks
        raise refused from None
    try:                                 # written now: a failure past here is no failed write
        fsync_directory(path.absolute().parent)
    except OSError as err:
        warnings.warn(f"{where} {path} is written, but the system could not confirm its folder "
                      f"on the disk ({err.strerror})")


def read_text(path, flag: str | None = None) -> str:
    """A text to train on: a UTF-8 file of at least 100 characters, two of them different.
    ``flag``: how an error names the path, such as "--text" (default: read_text's path)."""
    path = _path(path, "read_text")
    where = flag or "read_text: path"
    text = read_utf8(path, where)
    if len(text) < 100:
        raise ValueError(f"{where} {path}: only {len(text)} characters; wanted at least 100")
    if len(set(text)) < 2:
        raise ValueError(f"{where} {path}: one distinct character ({text[0]!r}); wanted at "
                         f"least 2, or there is nothing to predict")
    return text


def _check_stream(ids, where: str, name: str = "ids") -> None:
    """One stream of integer token ids, (N,): a float id would index as a truncated integer."""
    if not is_array(ids) or ids.ndim != 1 or ids.dtype.kind not in "iu":
        got = (f"shape {tuple(ids.shape)} and dtype {ids.dtype}" if is_array(ids)
               else f"a {type(ids).__name__}")
        raise ValueError(f"{where}: {name} has {got}; wanted (N,) integer token ids, one stream")


def split(ids, validation_fraction: float = 0.1):
    """The first (1 − f) of the tokens for training, the last f held out for validation.
    A contiguous split: the held-out text is text the model has never seen, not shuffled windows."""
    check_probability(validation_fraction, "validation_fraction", "split")
    _check_stream(ids, "split")
    cut = int(len(ids) * (1 - validation_fraction))
    if cut < 1 or cut == len(ids):
        raise ValueError(f"split: {len(ids)} tokens with validation_fraction="
                         f"{validation_fraction} leave {cut} for training and {len(ids) - cut} "
                         f"held out; wanted at least one in each part")
    return ids[:cut], ids[cut:]


def random_windows(ids, batch_size: int, n: int):
    """b random windows of n + 1 consecutive tokens, as teacher-forcing pairs on the active backend:

        X = window[:, :-1]   (b, n)   the tokens seen
        Y = window[:, 1:]    (b, n)   the token to predict at each position
    Drawn from minitf's seeded generator, so a run (and a resumed run) sees the same batches.
    """
    check_int(batch_size, "batch_size", "random_windows", what="the number of windows")
    check_int(n, "n", "random_windows", what="the window's length")
    _check_stream(ids, "random_windows")
    if len(ids) < n + 1:
        raise ValueError(f"random_windows: {len(ids)} tokens are too few for a window of "
                         f"n + 1 = {n + 1}; wanted at least {n + 1} (a shorter context, "
                         f"or more text)")
    # A window starts at s = 0 … N − (n + 1), its last token ids[s + n] being the stream's last
    # at most: N − n starts in all, randint's high being exclusive.
    starts = randint(0, len(ids) - n, (batch_size,), like=ids)       # on the host, like ids
    windows = np.stack([ids[s:s + n + 1] for s in starts])       # (b, n + 1)
    return to_device(windows[:, :-1]), to_device(windows[:, 1:])


def bigram_loss(train_ids, eval_ids, vocab_size: int, alpha: float = 0.1) -> float:
    """Held-out cross-entropy (nats per token) of a character-bigram model p(next | current),
    counted on ``train_ids`` with add-α smoothing. The baseline: a model that looks one character
    back. Anything that attends further must beat it."""
    check_real(alpha, "alpha", "bigram_loss", low=0)
    check_int(vocab_size, "vocab_size", "bigram_loss", what="the number of tokens")
    train_ids, eval_ids = np.asarray(train_ids), np.asarray(eval_ids)
    for name, ids in (("train_ids", train_ids), ("eval_ids", eval_ids)):
        _check_stream(ids, "bigram_loss", name)
        check_ids(ids, name, vocab_size, "bigram_loss")
        if len(ids) < 2:           # no pair counted gives the uniform loss log V, not a bigram's
            raise ValueError(f"bigram_loss: {name} has {len(ids)} tokens; wanted at least 2, "
                             f"one pair")
    # Ids up to the largest that occurs, m: an id above it was never counted, so its column adds
    # α to each row's total and nothing else. An m × m table of the counts is the plain way while
    # it is small; past BIGRAM_TABLE numbers only the pairs that occur are counted (a 50,000-token
    # vocabulary's table is 20 GB, one id of 10⁶ made a 7 TiB one). The two agree to rounding:
    # a row of the table is summed number by number, c(a) + α·V is one addition.
    m = int(max(train_ids.max(), eval_ids.max())) + 1
    if m * m > BIGRAM_TABLE:
        return float(-_bigram_logp_of_pairs(train_ids, eval_ids, vocab_size, alpha).mean())
    counts = np.full((m, m), alpha)
    np.add.at(counts, (train_ids[:-1], train_ids[1:]), 1.0)
    logp = np.log(counts / (counts.sum(axis=1, keepdims=True) + alpha * (vocab_size - m)))
    return float(-logp[eval_ids[:-1], eval_ids[1:]].mean())


BIGRAM_TABLE = 2 ** 22        # numbers (32 MiB): the largest table bigram_loss makes, m ≤ 2048


def _bigram_logp_of_pairs(train_ids, eval_ids, vocab_size: int, alpha: float):
    """log (c(a b) + α) / (c(a) + α·V) of each pair a b of eval_ids, c counted on train_ids, in
    memory proportional to the tokens, whatever the ids. The ids are renumbered 0 … u − 1 in
    the order of their values (u ≤ the number of tokens), so that a pair is one number, a·u + b:
    np.unique counts those, a binary search finds each pair asked for."""
    both = np.concatenate([train_ids.astype(np.uint64), eval_ids.astype(np.uint64)])  # ids ≥ 0
    distinct, ranks = np.unique(both, return_inverse=True)
    u, train, held = len(distinct), ranks[:len(train_ids)], ranks[len(train_ids):]
    codes, counts = np.unique(train[:-1] * u + train[1:], return_counts=True)
    wanted = held[:-1] * u + held[1:]
    at = np.searchsorted(codes, wanted).clip(max=len(codes) - 1)
    pair = np.where(codes[at] == wanted, counts[at], 0)            # c(a b), 0 where never seen
    current = np.bincount(train[:-1], minlength=u)[held[:-1]]      # c(a)
    return np.log((pair + alpha) / (current + alpha * vocab_size))


def evaluation_windows(ids, n: int, max_windows: int | None = None):
    """Non-overlapping (X, Y) windows covering ``ids`` in order, for a deterministic held-out loss.
    ->  host arrays (w, n), (w, n)"""
    where = "evaluation_windows"
    check_int(n, "n", where, what="the window's length")
    if max_windows is not None:
        check_int(max_windows, "max_windows", where, what="the most windows to return")
    _check_stream(ids, where)
    w = (len(ids) - 1) // n
    if max_windows is not None:
        w = min(w, max_windows)
    if w < 1:
        raise ValueError(f"{where}: {len(ids)} tokens are fewer than a window of {n + 1}")
    x = ids[:w * n].reshape(w, n)
    y = ids[1:w * n + 1].reshape(w, n)
    return x, y


