"""WordPiece on small hand-made vocabularies: a word with a known start but no full split, and a
vocab.txt written with Windows line ends."""
from minitf.pretrained import WordPieceTokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def test_a_word_whose_start_is_known_but_not_its_rest_is_one_unk():
    """"cats" splits into cat ##s; "catx" has the known start "cat" but no "##x": the whole word
    is [UNK], not cat followed by [UNK] (BERT's reference WordPiece)."""
    tokenizer = WordPieceTokenizer(SPECIALS + ["cat", "##s", "x"])
    assert tokenizer.tokenize("cats") == ["cat", "##s"]
    assert tokenizer.tokenize("catx cats") == ["[UNK]", "cat", "##s"]
    assert tokenizer.encode("catx") == [2, 1, 3]


def test_a_vocab_file_with_windows_line_ends_reads_the_same_ids(tmp_path):
    """vocab.txt saved with CRLF line ends gives each token without its carriage return, at the
    same ids as with LF: "cat" is id 4 and found, not "cat\\r"."""
    tokens = SPECIALS + ["cat", "##s"]
    (tmp_path / "crlf.txt").write_bytes(("\r\n".join(tokens) + "\r\n").encode("utf-8"))
    tokenizer = WordPieceTokenizer.from_file(tmp_path / "crlf.txt")
    assert tokenizer.vocab == tokens
    assert tokenizer.encode("cats") == [2, 4, 5, 3]
