"""Bad input to the data functions (padding, vocabularies, tokenizers, masking): one line naming
the function, the argument, what it got and what was wanted -- not a len() of None, a "too many
values to unpack" or a NumPy error about inhomogeneous shapes."""
import json
import math

import numpy as np
import pytest

from minitf import backend, data
from minitf.pretrained import WordPieceTokenizer

from test_bad_input import raises, refused_in_one_line


def vocabulary(*specials):
    return data.WordVocabulary(["the cat sat", "a dog"], specials=specials)


def tokenizer():
    return data.CharTokenizer.fit("hello world")


# (the call, the error, fragments its one line must hold)
CASES = {
    "pad_batch of None": (lambda: data.pad_batch(None), TypeError,
                          ["pad_batch:", "sequences must be a list of id sequences",
                           "got NoneType"]),
    "pad_batch of one flat list": (lambda: data.pad_batch([1, 2, 3]), TypeError,
                                   ["pad_batch:", "got 1 among them", "wrap it in a list"]),
    "pad_batch of strings": (lambda: data.pad_batch(["ab", "c"]), TypeError,
                             ["pad_batch:", "sequences must be a list of id sequences",
                              "got 'ab' among them"]),
    "pad_batch of nested lists": (lambda: data.pad_batch([[[1, 2]], [[3, 4]]]), ValueError,
                                  ["pad_batch:", "sequences[0] has shape (1, 2)", "wanted (n,)"]),
    "pad_batch to a fractional length": (lambda: data.pad_batch([[1, 2], [3]], length=3.5),
                                         ValueError, ["pad_batch:", "length must be an integer",
                                                      "got 3.5"]),
    "pad_batch to a length in a string": (lambda: data.pad_batch([[1, 2], [3]], length="3"),
                                          ValueError, ["pad_batch:", "length must be", "'3'"]),
    "pad_batch to a negative length": (lambda: data.pad_batch([[1, 2], [3]], length=-1),
                                       ValueError, ["pad_batch:", "length must be an integer ≥ 0",
                                                    "got -1"]),
    # the padding mask would later hide the real 0 in [3, 0, 5]
    "pad_batch with a pad_id a sequence uses": (
        lambda: data.pad_batch([[3, 0, 5], [4]]), ValueError,
        ["pad_batch:", "sequences[0] holds the id 0 at position 1, and pad_id is 0",
         "wanted a pad_id that no sequence uses"]),
    # NumPy's "inhomogeneous shape" error, and an id past int64 wrapped to a negative one
    "pad_batch of a sequence with a list in it": (
        lambda: data.pad_batch([[1, [2, 3]]]), ValueError,
        ["pad_batch:", "sequences[0] nests lists in it", "wanted (n,), one flat sequence"]),
    "pad_batch of an id past int64": (
        lambda: data.pad_batch([[4], np.array([2 ** 63 + 5], np.uint64)]), ValueError,
        ["pad_batch:", "sequences[1] holds the id 9223372036854775813",
         "wanted ids that fit the int64 batch"]),
    "WordVocabulary of None": (lambda: data.WordVocabulary(None), TypeError,
                               ["WordVocabulary:", "sentences must be a list of strings",
                                "got NoneType"]),
    "WordVocabulary with specials None": (
        lambda: data.WordVocabulary(["a b"], specials=None), ValueError,
        ["WordVocabulary:", "specials must be distinct words", "got None"]),
    "encode of None": (lambda: vocabulary().encode(None), TypeError,
                       ["WordVocabulary.encode:", "sentences must be a list of strings",
                        "got NoneType"]),
    "encode of one string": (lambda: vocabulary().encode("the cat"), TypeError,
                             ["WordVocabulary.encode:", "got one string", "wrap it in a list"]),
    "encode to a float length": (lambda: vocabulary().encode(["the cat"], length=4.0),
                                 ValueError, ["WordVocabulary.encode:", "length must be",
                                              "got 4.0"]),
    "encode to a length in a string": (lambda: vocabulary().encode(["the cat"], length="4"),
                                       ValueError, ["WordVocabulary.encode:", "length must be",
                                                    "'4'"]),
    # these three were named pad_batch, a function the caller never called
    "encode of no sentences": (lambda: vocabulary().encode([]), ValueError,
                               ["WordVocabulary.encode:", "sentences is empty"]),
    "encode to a length too short": (
        lambda: vocabulary().encode(["a dog", "the cat sat"], length=2), ValueError,
        ["WordVocabulary.encode:", "sentences[1] has 3 words; wanted at most length=2"]),
    "encode of the padding word": (
        lambda: vocabulary().encode(["the <pad> cat"]), ValueError,
        ["WordVocabulary.encode:", "sentences[0] holds the word '<pad>', id 0, the padding"]),
    "encode_pairs of no pairs": (lambda: vocabulary("[SEP]").encode_pairs([]), ValueError,
                                 ["WordVocabulary.encode_pairs:", "pairs is empty"]),
    "encode_pairs to a length too short": (
        lambda: vocabulary("[SEP]").encode_pairs([("the cat", "a dog")], length=5), ValueError,
        ["WordVocabulary.encode_pairs:", "pairs[0] has 6 words with its two [SEP]; wanted at "
                                         "most length=5"]),
    "encode_pairs of sentences": (lambda: vocabulary("[SEP]").encode_pairs(["the cat"]),
                                  TypeError, ["WordVocabulary.encode_pairs:",
                                              "pairs must be a list of (sentence, sentence)",
                                              "got 'the cat' among them"]),
    "encode_pairs of None": (lambda: vocabulary("[SEP]").encode_pairs(None), TypeError,
                             ["WordVocabulary.encode_pairs:", "pairs must be", "got NoneType"]),
    "encode_pairs of triples": (
        lambda: vocabulary("[SEP]").encode_pairs([("the cat", "a dog", "a cat")]), TypeError,
        ["WordVocabulary.encode_pairs:", "pairs must be", "('the cat', 'a dog', 'a cat')"]),
    "split of None": (lambda: data.split(None), ValueError,
                      ["split:", "ids has a NoneType", "wanted (N,) integer token ids"]),
    "split of a number": (lambda: data.split(5, 0.1), ValueError,
                          ["split:", "ids has a int", "wanted (N,) integer token ids"]),
    "decode of a batch": (lambda: tokenizer().decode(np.array([[1, 2], [3, 4]])), ValueError,
                          ["CharTokenizer.decode:", "ids has shape (2, 2), several rows",
                           "[tok.decode(row) for row in ids]"]),     # was the rows joined
    "decode of ragged rows": (lambda: tokenizer().decode([[1, 2], [3]]), ValueError,
                              ["CharTokenizer.decode:", "ids must be a sequence or an array",
                               "rows of different lengths"]),
    "from_json of None": (lambda: data.CharTokenizer.from_json(None), ValueError,
                          ["CharTokenizer.from_json:", "saved must be what to_json returns",
                           "got None"]),
    "from_json of a list": (lambda: data.CharTokenizer.from_json([]), ValueError,
                            ["CharTokenizer.from_json:", "saved must be", "got []"]),
    "load of None": (lambda: data.CharTokenizer.load(None), TypeError,
                     ["CharTokenizer.load:", "path must be a path (a str or a pathlib.Path)",
                      "got None"]),
    "save to None": (lambda: tokenizer().save(None), TypeError,
                     ["CharTokenizer.save:", "path must be a path (a str or a pathlib.Path)",
                      "got None"]),
    "read_text of a number": (lambda: data.read_text(123), TypeError,
                              ["read_text:", "path must be a path (a str or a pathlib.Path)",
                               "got 123"]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_data_function_refuses_bad_input_in_one_line(case):
    refused_in_one_line(*CASES[case])


def test_load_names_a_file_that_holds_no_tokenizer(tmp_path):
    path = tmp_path / "list.json"
    path.write_text(json.dumps(["h", "e"]))
    with raises(ValueError, "CharTokenizer.load:", str(path), "holds a JSON list",
                "wanted a saved character tokenizer"):
        data.CharTokenizer.load(path)


def test_a_tokenizer_file_that_is_missing_binary_or_no_json_is_named(tmp_path):
    """Python's own '[Errno 2] No such file', 'Is a directory', a UnicodeDecodeError of a binary
    file or a JSONDecodeError named neither the function nor what it wanted."""
    binary = tmp_path / "weights.bin"
    binary.write_bytes(bytes([0x1f, 0x8b, 0x08, 0x00]))
    prose = tmp_path / "notes.txt"
    prose.write_text("just some notes")
    for read in (data.CharTokenizer.load, WordPieceTokenizer.from_file):
        where = read.__qualname__ + ":"
        for path, error, fragments in [
            (tmp_path / "missing.json", FileNotFoundError, ["missing.json: no such file"]),
            (tmp_path, IsADirectoryError, [f"{tmp_path}: is a folder; wanted a text file"]),
            (binary, ValueError, ["byte 1 (0x8b) is not valid UTF-8", "wanted a UTF-8 text"]),
        ]:
            with raises(error, where, *fragments) as caught:
                read(path)
            assert "\n" not in str(caught.value)
    with raises(ValueError, "CharTokenizer.load:", "notes.txt is not JSON",
                "wanted a tokenizer that CharTokenizer.save wrote"):
        data.CharTokenizer.load(prose)


def test_a_tokenizer_saved_where_it_cannot_be_is_named(tmp_path):
    """Python's own "[Errno 21] Is a directory" and "[Errno 2] No such file" named neither the
    function nor what it wanted."""
    for path, error, fragments in [
            (tmp_path, IsADirectoryError, [f"{tmp_path} is a folder", "wanted a file name"]),
            (tmp_path / "missing" / "tok.json", FileNotFoundError,
             ["missing/tok.json: the folder", "does not exist; wanted a file in an existing "
                                              "folder"])]:
        with raises(error, "CharTokenizer.save:", *fragments) as caught:
            tokenizer().save(path)
        assert "\n" not in str(caught.value)


def test_a_tokenizer_save_that_fails_part_way_leaves_the_saved_one(tmp_path, monkeypatch):
    """The file was opened for writing, so emptied, before the new text was in: a full disk or a
    kill part-way lost the tokenizer saved before. Now the old file stays until the new one is
    whole on the disk, and no temporary file is left."""
    path = tmp_path / "tok.json"
    data.CharTokenizer.fit("abc").save(path)
    path.chmod(0o600)
    saved = path.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("os.fsync", disk_full)
    with raises(OSError, "CharTokenizer.save:", "cannot write", "No space left on device") as err:
        tokenizer().save(path)
    assert err.value.errno == 28
    assert path.read_bytes() == saved and [p.name for p in tmp_path.iterdir()] == ["tok.json"]

    def interrupted(fd):
        raise KeyboardInterrupt
    monkeypatch.setattr("os.fsync", interrupted)          # Ctrl-C: no temporary left either
    with pytest.raises(KeyboardInterrupt):
        tokenizer().save(path)
    assert path.read_bytes() == saved and [p.name for p in tmp_path.iterdir()] == ["tok.json"]

    def read_only(*args, **kwargs):                     # the clearing up fails too: not the news
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr("os.fsync", read_only)
    monkeypatch.setattr("pathlib.Path.unlink", read_only)
    with raises(OSError, "CharTokenizer.save:", "cannot write", "(Read-only file system)"):
        tokenizer().save(path)
    monkeypatch.undo()
    for leftover in tmp_path.glob(".tok.json.*.tmp"):   # (the unlink that was made to fail)
        leftover.unlink()
    tokenizer().save(path)                              # a save that succeeds replaces it whole
    assert data.CharTokenizer.load(path).chars == tokenizer().chars
    assert path.stat().st_mode & 0o777 == 0o600         # with the permissions it had
    assert [p.name for p in tmp_path.iterdir()] == ["tok.json"]


@pytest.mark.parametrize("special_ids", [0, None, [0.5], [True], "0"])
def test_mask_tokens_wants_special_ids_as_a_sequence_of_ids(special_ids, backend_name):
    """0 and None were "not iterable"; 0.5 and True were read as ids 0 and 1, "0" as id 0."""
    ids = backend.randint(2, 10, (2, 4))
    with raises(TypeError, "mask_tokens:", "special_ids must be a sequence of token ids",
                repr(special_ids)):
        data.mask_tokens(ids, mask_id=1, vocab_size=10, special_ids=special_ids)


def test_large_vocabularies_and_what_callers_pass_go_through(backend_name):
    """A bigram loss over a vocabulary of 10⁶ tokens was a 7 TiB table; it is the add-α estimate
    (c(a b) + α) / (c(a) + α V). The lessons' and the library's calls still work: tuples, NumPy
    integers, a 2-D array of rows, an empty padded length."""
    train, held_out = np.array([0, 1, 2, 0, 1]), np.array([0, 1, 2])
    alpha, v = 0.1, 10 ** 6
    # pairs 01 (2 of the 2 after a 0) and 12 (1 of the 2 after a 1)
    want = -(math.log((2 + alpha) / (2 + alpha * v)) + math.log((1 + alpha) / (2 + alpha * v))) / 2
    assert data.bigram_loss(train, held_out, v, alpha) == pytest.approx(want)

    out, lengths = data.pad_batch(((5, 6), np.array([7], dtype=np.int32)))
    assert out.tolist() == [[5, 6], [7, 0]] and lengths.tolist() == [2, 1]
    assert data.pad_batch(np.array([[1, 2], [3, 4]]))[0].tolist() == [[1, 2], [3, 4]]
    assert data.pad_batch([[], []], length=0)[0].shape == (2, 0)
    words = data.WordVocabulary(("the cat", "a dog"), specials=("[SEP]",))
    ids, segments = words.encode_pairs([["the cat", "a dog"]], length=8)
    assert ids.shape == segments.shape == (1, 8)
    ids = backend.randint(2, 10, (2, 4))
    for special_ids in ((0,), [np.int64(0)], np.array([0, 2])):
        inputs, _ = data.mask_tokens(ids, 1, 10, special_ids=special_ids, seed=0)
        assert inputs.shape == (2, 4)


def test_a_stream_too_short_for_a_random_window_says_how_long_it_must_be():
    """It said '200 tokens cannot give windows of n + 1 = 200' and wanted 201: a stream of
    exactly one window was refused, its one window never drawn."""
    with raises(ValueError, "random_windows: 199 tokens are too few for a window of n + 1 = "
                            "200; wanted at least 200"):
        data.random_windows(np.arange(199) % 7, 4, 199)
    x, y = data.random_windows(np.arange(200) % 7, 4, 199)
    assert x.shape == y.shape == (4, 199)
    assert (backend.to_numpy(x) == np.arange(199) % 7).all()       # the one window there is


def test_load_names_a_file_whose_characters_repeat(tmp_path):
    """It said "CharTokenizer: chars must be distinct", naming neither load, the file nor the
    character."""
    path = tmp_path / "tok.json"
    path.write_text(json.dumps({"type": "char", "chars": ["a", "b", "a"]}))
    with raises(ValueError, "CharTokenizer.load:", str(path), "holds no tokenizer that "
                "CharTokenizer.save wrote", "chars must be distinct; got 'a' more than once"):
        data.CharTokenizer.load(path)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32])
def test_mask_tokens_of_narrow_ids_masks_as_int64_ids_do(dtype):
    """uint8 ids got uint8 targets, where the ignore index -100 wrapped to 156 (uint16: 65436):
    the loss scored all 64 positions, not the 11 chosen. Inputs and targets are int64, whatever
    the ids' dtype, and the draws are those of int64 ids."""
    ids = np.random.default_rng(0).integers(2, 200, (4, 16))
    wanted = data.mask_tokens(ids, 1, 200, seed=0)
    got = data.mask_tokens(ids.astype(dtype), 1, 200, seed=0)
    for array, want in zip(got, wanted):
        assert array.dtype == np.int64 and (array == want).all()
    assert (got[1] != -100).sum() == 11
    # a [MASK] id that uint8 cannot hold was a raw OverflowError
    inputs, _ = data.mask_tokens(ids.astype(np.uint8), 999, 1000, p=0.5, seed=0)
    assert (inputs == 999).any()


def test_bigram_loss_of_a_large_id_counts_only_the_pairs_that_occur(monkeypatch):
    """[0, 10⁶] made a table of (10⁶ + 1)² numbers, 7.28 TiB: a MemoryError, and a 50,000-token
    vocabulary's was 20 GB, a risk of the kernel killing the run. Past a small table the pairs
    are counted as they occur, to the table's estimate (within rounding)."""
    alpha, v = 0.1, 10 ** 7
    assert data.bigram_loss([0, 10 ** 6], [0, 1], v) == pytest.approx(
        -math.log(alpha / (1 + alpha * v)), rel=1e-12)           # 0 1 never seen, one pair from 0
    rng = np.random.default_rng(0)
    train, held_out = rng.integers(0, 300, 5000), rng.integers(0, 300, 1000).astype(np.uint16)
    table = data.bigram_loss(train, held_out, 500)
    monkeypatch.setattr("minitf.data.text.BIGRAM_TABLE", 0)     # no table at all
    assert data.bigram_loss(train, held_out, 500) == pytest.approx(table, rel=1e-12)


def test_pad_batch_takes_uint64_ids_that_fit_int64():
    out, _ = data.pad_batch([np.array([5, 2 ** 63 - 1], np.uint64)])
    assert out.dtype == np.int64 and out.tolist() == [[5, 2 ** 63 - 1]]


@pytest.mark.parametrize("call, message", [
    (lambda ids: data.evaluation_windows(4, ids), "evaluation_windows: n must be a positive "
     "integer, the window's length; got an int64 array of shape (50,)"),
    (lambda ids: data.bigram_loss(ids, ids, ids.astype(np.float64)), "bigram_loss: vocab_size "
     "must be a positive integer, the number of tokens; got a float64 array of shape (50,)"),
    (lambda ids: data.bigram_loss(ids, ids, ids.astype(np.uint8)), "bigram_loss: vocab_size "
     "must be a positive integer, the number of tokens; got a uint8 array of shape (50,)")])
def test_an_array_where_a_number_goes_is_said_in_one_line(call, message):
    """Two arguments swapped: the check printed the whole array, over many lines."""
    with pytest.raises(ValueError) as refused:
        call(np.arange(50))
    assert str(refused.value) == message


def test_a_file_too_large_for_a_tokenizer_is_kept_unread(tmp_path, monkeypatch):
    """Past the size of any vocabulary's JSON the file is a corpus, not read whole to find out."""
    from minitf.data import text
    saved = tmp_path / "tok.json"
    data.CharTokenizer.fit("abc").save(saved)
    monkeypatch.setattr(text, "TOKENIZER_MOST_BYTES", saved.stat().st_size - 1)
    monkeypatch.setattr(text.CharTokenizer, "load", None)                # never called
    with raises(FileExistsError, "already holds a file that is not a saved tokenizer"):
        data.CharTokenizer.fit("xyz").save(saved)


def test_a_tokenizer_is_never_saved_over_a_file_of_the_user_s(tmp_path):
    """save wrote over whatever was at its path: an essay was replaced by a vocabulary."""
    essay = tmp_path / "essay.txt"
    essay.write_text("my essay, not a tokenizer\n")
    binary = tmp_path / "corpus.gz"
    binary.write_bytes(bytes([0x1f, 0x8b, 0x08, 0x00]))
    for path in (essay, binary):
        before = path.read_bytes()
        with raises(FileExistsError, "CharTokenizer.save:", str(path),
                    "already holds a file that is not a saved tokenizer",
                    "wanted a new file name, or a tokenizer file to replace"):
            data.CharTokenizer.fit("hello world").save(path)
        assert path.read_bytes() == before
    saved = tmp_path / "tok.json"                       # a tokenizer saved before: replaced
    data.CharTokenizer.fit("abc").save(saved)
    data.CharTokenizer.fit("xyz").save(saved)
    assert data.CharTokenizer.load(saved).chars == ["x", "y", "z"]
    empty = tmp_path / "made.json"                      # a NamedTemporaryFile's, a touch's
    empty.touch()
    data.CharTokenizer.fit("abc").save(empty)
    assert data.CharTokenizer.load(empty).chars == ["a", "b", "c"]
