"""minitf.pretrained refuses, in one line naming the argument, what it cannot use: ids beyond
the vocabulary, a model folder that pads with another id or cannot be built, weights that do not
fit, a tokenizer's misreadings, fine-tuning's bad labels and arguments."""
import json
import warnings

import numpy as np
import pytest

import minitf.nn as nn
from minitf import backend, pretrained
from minitf.backend import to_numpy
from minitf.pretrained.loader import encoder_from_config

from test_pretrained import TINY, _model_folder, _published_tensors
from test_bad_input import raises

def test_bad_input_is_one_line_naming_the_argument():
    encoder = encoder_from_config(TINY)
    with pytest.raises(ValueError, match=r"BertEncoder.*ids.*vocab_size"):
        encoder(backend.to_device(np.array([[2, 11]])))
    with pytest.raises(ValueError, match=r"BertEncoder: ids has shape \(3,\); wanted \(b, n\)"):
        encoder(backend.to_device(np.array([2, 3, 4])))
    with pytest.raises(ValueError, match=r"MeanPool: keep has shape \(2, 4\)"):
        nn.MeanPool()(backend.randn(2, 3, 8), backend.to_device(np.ones((2, 4), bool)))
    tokenizer = pretrained.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with pytest.raises(TypeError, match="texts must be a list of strings; got one string"):
        tokenizer.batch("a a")
    with pytest.raises(ValueError, match=r"the vocabulary has no \[PAD\] token"):
        pretrained.WordPieceTokenizer(["[UNK]", "[CLS]", "[SEP]"])
    # a file's name, read as its characters, had "no [PAD] token" too
    with raises(TypeError, "WordPieceTokenizer: vocab must be a list of tokens in id order",
                "got str (for a file: WordPieceTokenizer.from_file(path))"):
        pretrained.WordPieceTokenizer("vocab.txt")


def test_a_model_folder_whose_tokenizer_pads_with_another_id_is_refused(tmp_path):
    """The tokenizer pads with its [PAD] id and the model masks config's pad_token_id: two ids
    made a padded sentence embed differently from itself alone, silently."""
    model, tokenizer = pretrained.load(_model_folder(tmp_path / "ok"))
    assert tokenizer.pad_id == 0 and tokenizer.vocab_size == TINY["vocab_size"]
    swapped = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", *"abcdefg"]
    with raises(ValueError, "load:", "[PAD] at id 1", "pad_token_id 0"):
        pretrained.load(_model_folder(tmp_path / "swapped", vocab=swapped))
    with raises(ValueError, "load:", "has 12 tokens", "vocab_size 11"):
        pretrained.load(_model_folder(tmp_path / "longer",
                                      vocab=["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefgh"]))
    broken = dict(TINY)
    del broken["intermediate_size"]
    with raises(ValueError, "load:", "config.json has no intermediate_size"):
        pretrained.load(_model_folder(tmp_path / "broken", config=broken))
    with raises(ValueError, "load:", "model.safetensors holds 2 blocks; config.json's "
                "num_hidden_layers is 1: wanted the same"):        # the first ran, silently
        pretrained.load(_model_folder(tmp_path / "fewer", config={**TINY, "num_hidden_layers": 1}))
    for key, value, wanted in [("hidden_size", "16", "an integer"),       # named BertEncoder's
                               ("layer_norm_eps", "1e-12", "a number")]:  # or LayerNorm's
        with raises(ValueError, "load:", f"config.json: {key} is {value!r}; wanted {wanted}"):
            pretrained.load(_model_folder(tmp_path / key, config={**TINY, key: value}))


def test_the_wordpiece_tokenizer_refuses_what_it_would_misread():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"]
    with raises(ValueError, "WordPieceTokenizer: max_len must be an integer ≥ 3", "got 1"):
        pretrained.WordPieceTokenizer(vocab, max_len=1)         # it still gave 5 ids
    with raises(ValueError, "WordPieceTokenizer: the vocabulary holds a token twice"):
        pretrained.WordPieceTokenizer(vocab + ["a"])
    tokenizer = pretrained.WordPieceTokenizer(vocab, max_len=5)
    with raises(ValueError, "WordPieceTokenizer.tokens: ids must lie in [0, vocab_size=6)"):
        tokenizer.tokens([-1])                                  # it read the last token
    with raises(TypeError, "WordPieceTokenizer.tokens: ids has dtype float64"):
        tokenizer.tokens([1.7])
    with pytest.warns(UserWarning, match=r"a text of more than 3 pieces is cut to its first 3 "):
        assert tokenizer.encode("a b a b a b") == [2, 4, 5, 4, 3], "cut to max_len, [SEP] kept"
    with warnings.catch_warnings():
        warnings.simplefilter("error")                          # a text that fits: no warning
        assert tokenizer.encode("a b a") == [2, 4, 5, 4, 3]


def test_fine_tuning_and_similarity_name_what_they_cannot_use(tmp_path):
    from minitf.pretrained.analysis import similarity
    from minitf.pretrained.finetune import accuracy, fine_tune

    model, tokenizer = pretrained.load(_model_folder(tmp_path / "m"))
    classifier = pretrained.SentenceClassifier(model.encoder, 2)
    with raises(ValueError, "accuracy: labels has shape (1,)", "wanted (2,) integers"):
        accuracy(classifier, tokenizer, ["a b", "c"], np.array([1]))      # it said 1.0
    with raises(ValueError, "accuracy: sentences must be a non-empty list of strings"):
        accuracy(classifier, tokenizer, [], np.array([], int))            # ZeroDivisionError
    with raises(ValueError, "fine_tune: steps must be a positive integer", "-1"):
        fine_tune(classifier, tokenizer, ["a b"], np.array([1]), -1)      # it returned [], []
    with raises(TypeError, "similarity: sentences must be a list of strings; got one string"):
        similarity(model, tokenizer, "a b")                               # one per character
    with raises(ValueError, "similarity: sentences must be a non-empty list of strings"):
        similarity(model, tokenizer, [])                                  # pad_batch: …
    with raises(ValueError, "similarity: sentences[0] is '', no text; wanted some text to embed"):
        similarity(model, tokenizer, ["", "a b"])                  # [CLS] [SEP] alone, unsaid
    with raises(ValueError, "fine_tune: sentences[1] is ' ', no text"):
        fine_tune(classifier, tokenizer, ["a b", " "], [1, 0], steps=1)
    with raises(ValueError, "fine_tune: lr must be a finite number ≥ 0 and ≤ 10; got 300000.0"):
        fine_tune(classifier, tokenizer, ["a b", "c"], [1, 0], steps=1, lr=3e5)   # for 3e-5
    losses, _ = fine_tune(classifier, tokenizer, ["a b", "c"], [1, 0], steps=1, batch_size=2)
    assert len(losses) == 1, "labels given as a list are taken"
    # the encoder inside, or the two swapped: an AttributeError ('BertEncoder' … 'embed')
    from minitf.pretrained.analysis import attention_maps, format_similarity
    with raises(TypeError, "similarity: model must be the SentenceEncoder that "
                "pretrained.load() returns first; got BertEncoder (the encoder inside it"):
        similarity(model.encoder, tokenizer, ["a", "b"])
    with raises(TypeError, "attention_maps: model must be the SentenceEncoder", "got "
                "WordPieceTokenizer (model and tokenizer swapped?)"):
        attention_maps(tokenizer, model, "a")
    with raises(TypeError, "attention_maps: sentence must be one str; got list"):
        attention_maps(model, tokenizer, ["a", "b"])             # texts[0], the tokenizer's words
    from minitf.pretrained.analysis import attention_figure
    probs, tokens = attention_maps(model, tokenizer, "a b")
    for wrong, got in ((tokens, "got list"), (probs[0], f"got shape {probs[0].shape}")):
        with raises(TypeError, "attention_figure: probs must be a (layers, h, n, n) array, as "
                    "attention_maps returns first", got):
            attention_figure(wrong, tokens)        # swapped: an AttributeError; one layer's: the
    attention_figure(probs, tokens)                # row_names, never given, were blamed
    with raises(ValueError, "format_similarity: matrix has shape (2, 2); wanted (3, 3)"):
        format_similarity(["a", "b", "c"], np.eye(2))                   # "c" was dropped
    assert format_similarity(["a", "b"], np.eye(2).tolist()) == format_similarity(["a", "b"],
                                                                                  np.eye(2))


def test_a_path_that_is_no_path_is_named(tmp_path):
    for call, where in ((pretrained.load, "load"), (pretrained.find_model_dir, "find_model_dir"),
                        (pretrained.read_safetensors, "read_safetensors")):
        for path, got in ((123, "got 123"), (["a"], "got a list"), (3.5, "got 3.5")):
            with raises(TypeError, f"{where}: path must be a path (a str or a pathlib.Path)", got):
                call(path)                   # expected str, bytes or os.PathLike object, not int
    with raises(TypeError, "read_safetensors: path must be a path", "got None"):
        pretrained.read_safetensors(None)
    with raises(FileNotFoundError, f"read_safetensors: {tmp_path / 'nope.st'}: No such file or "
                "directory; wanted a readable .safetensors file"):    # pathlib's, naming no one
        pretrained.read_safetensors(tmp_path / "nope.st")


def test_weights_that_do_not_fit_name_what_is_missing():
    tensors = _published_tensors(np.random.default_rng(3), TINY)
    encoder = encoder_from_config(TINY)
    del tensors["embeddings.LayerNorm.bias"]
    with raises(ValueError, "load_weights: the weights have no embeddings.LayerNorm.bias;",
                "do not fit"):
        pretrained.load_weights(encoder, tensors)                  # KeyError: '…bias'
    with raises(ValueError, "load_weights: the weights have no embeddings.word_embeddings.weight",
                "(37 in all)"):
        pretrained.load_weights(encoder, {})
    with raises(ValueError, "bert_weights: the weights have no encoder.layer.2.",
                "of 5 blocks", "hold 2"):
        pretrained.bert_weights(_published_tensors(np.random.default_rng(3), TINY), 5)
    assert len(pretrained.bert_weights(_published_tensors(np.random.default_rng(3), TINY), 1)) \
        < len(pretrained.bert_weights(_published_tensors(np.random.default_rng(3), TINY), 2))
    with raises(TypeError, "load_weights: tensors must be a dict", "got NoneType"):
        pretrained.load_weights(encoder, None)                     # no attribute 'items'
    with raises(TypeError, "load_weights: encoder must be a BertEncoder", "got NoneType"):
        pretrained.load_weights(None, tensors)                     # no attribute 'blocks'
    tensors = _published_tensors(np.random.default_rng(3), TINY)
    tensors["encoder.layer.1.output.dense.weight"][0, 0] = np.nan  # a damaged file
    with raises(ValueError, "load_weights: blocks.1.ffn.layer.W_2.W in the model file holds NaN"):
        pretrained.load_weights(encoder, tensors)                  # every output was NaN


def test_an_encoder_checks_its_sizes_and_padding_id():
    from minitf.pretrained.model import BertEncoder
    with raises(ValueError, "BertEncoder: n_layers must be an integer ≥ 0", "got -1"):
        BertEncoder(8, 4, 2, -1, 8)                                # no blocks, and no word
    with raises(ValueError, "BertEncoder: pad_id must be an integer in [0, 7], a token id",
                "got 99"):
        BertEncoder(8, 4, 2, 1, 8, pad_id=99)                      # no token was ever padding


def test_the_tokenizer_and_the_model_name_what_they_cannot_use():
    with raises(TypeError, "WordPieceTokenizer: vocab must be a list of tokens", "got NoneType"):
        pretrained.WordPieceTokenizer(None)                        # 'NoneType' not iterable
    tokenizer = pretrained.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"])
    with raises(TypeError, "WordPieceTokenizer.batch: texts must be a list of strings",
                "got NoneType"):
        tokenizer.batch(None)
    with raises(ValueError, "WordPieceTokenizer.batch: texts must be a non-empty list"):
        tokenizer.batch([])                                        # pad_batch: sequences …
    encoder = encoder_from_config(TINY)
    with raises(ValueError, "BertEncoder: ids has 8 tokens per row (shape (1, 8)); wanted at "
                "most max_len=7, the encoder's positions"):        # LearnedPositionalEmbedding
        pretrained.SentenceEncoder(encoder).embed(backend.to_device(np.full((1, 8), 4)))
    ids = backend.to_device(np.array([[2, 4, 3]]))
    with raises(ValueError, "BertEncoder: types has shape (1, 2); wanted (1, 3), the shape of ids"):
        encoder(ids, backend.to_device(np.array([[0, 1]])))        # operands could not broadcast
    encoder(ids)
    assert encoder.probs(-1).shape == (1, 2, 3, 3), "the last layer, counted from the end"
    for layer in (2, 0.5):                                        # IndexError, TypeError
        with raises(ValueError, "BertEncoder.probs: layer must be an integer in [-2, 1]",
                    f"got {layer}"):
            encoder.probs(layer)
    with raises(TypeError, "SentenceEncoder: encoder must be a BertEncoder", "got NoneType"):
        pretrained.SentenceEncoder(None)
    with raises(TypeError, "SentenceClassifier: encoder must be a BertEncoder",
                "got SentenceEncoder: pass its .encoder"):
        pretrained.SentenceClassifier(pretrained.SentenceEncoder(encoder), 2)  # no .config


def test_fine_tuning_refuses_bad_labels_and_arguments_before_any_step(tmp_path):
    """A label out of [0, n_classes) reached cross_entropy only in its batch, after the batches
    before it had moved the weights; accuracy counted it as a wrong answer."""
    from minitf.pretrained.finetune import accuracy, fine_tune

    model, tokenizer = pretrained.load(_model_folder(tmp_path / "m"))
    classifier = pretrained.SentenceClassifier(model.encoder, 2)
    before = [to_numpy(p.data).copy() for p in classifier.parameters()]
    for labels, got in (([0, 2], "from 0 to 2"), (np.array([-1, 0]), "from -1 to 0")):
        with raises(ValueError, "fine_tune: labels must lie in [0, n_classes=2)", got):
            fine_tune(classifier, tokenizer, ["a", "b"], labels, steps=2, batch_size=1)
        with raises(ValueError, "accuracy: labels must lie in [0, n_classes=2)", got):
            accuracy(classifier, tokenizer, ["a", "b"], labels)
    for args, kwargs, error, message in [
            ((model, tokenizer), {}, TypeError, "classifier must be a SentenceClassifier, such as "
             "pretrained.SentenceClassifier(model.encoder, n_classes); got SentenceEncoder"),
            ((classifier, None), {}, TypeError, "tokenizer must be a WordPieceTokenizer"),
            ((classifier, tokenizer), {"lr": -1}, ValueError, "lr must be a finite number ≥ 0"),
            ((classifier, tokenizer), {"head_lr": float("nan")}, ValueError, "head_lr must be")]:
        with raises(error, f"fine_tune: {message}"):         # AttributeError, AdamW: lr …
            fine_tune(*args, ["a", "b"], [0, 1], 1, **kwargs)
    assert all(np.array_equal(to_numpy(p.data), b)
               for p, b in zip(classifier.parameters(), before)), "no step was taken"
    for n_classes in (1, 0, 2.0):                # 1: every loss 0; 0, 2.0: named as Linear's
        with raises(ValueError, "SentenceClassifier: n_classes must be an integer ≥ 2",
                    f"got {n_classes}"):
            pretrained.SentenceClassifier(model.encoder, n_classes)



def test_a_model_folder_that_cannot_be_built_names_its_file(tmp_path):
    """config.json's num_attention_heads=7 was refused by "MultiHeadAttention: …", and a vocab.txt
    without [UNK] by "WordPieceTokenizer: …": neither named the file to fix."""
    folder = _model_folder(tmp_path / "heads")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_attention_heads": 7}))
    with raises(ValueError, f"load: {folder / 'config.json'} describes a model minitf cannot "
                "build: MultiHeadAttention: d_model=8 is not divisible by n_heads=7"):
        pretrained.load(folder)
    (folder / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    with raises(ValueError, f"load: {folder / 'config.json'} describes a model minitf cannot "
                "build: hidden_act='relu', "):                  # the file named once, not twice
        pretrained.load(folder)
    unknown = _model_folder(tmp_path / "unk", vocab=["[PAD]", "[CLS]", "[SEP]", *"abcdefgh"])
    with raises(ValueError, f"WordPieceTokenizer.from_file: {unknown / 'vocab.txt'} has no [UNK] "
                f"line; wanted a BERT vocab.txt, one token a line"):
        pretrained.load(unknown)


def test_a_vocab_file_without_the_special_tokens_is_named(tmp_path):
    """An essay, or an empty file, read as vocab.txt: 'the vocabulary has no [PAD] token',
    naming neither the file nor from_file."""
    essay = tmp_path / "essay.txt"
    essay.write_text("hello\nworld\n", encoding="utf-8")
    with raises(ValueError, f"WordPieceTokenizer.from_file: {essay} has no [PAD], [UNK], [CLS], "
                f"[SEP] line; wanted a BERT vocab.txt, one token a line"):
        pretrained.WordPieceTokenizer.from_file(essay)
