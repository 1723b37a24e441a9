"""What a checkpoint's checkpoint.json and weights must hold to load, checked in one place: by
``checkpoint.load`` on what it reads, and by ``checkpoint.save`` before it writes, so that a save
never makes current a checkpoint that load would refuse. Every refusal is a CheckpointError whose
one line names the file and the field, what it holds and what was wanted.
"""
from __future__ import annotations

import inspect
import json
import math

import numpy as np

from minitf.backend import seed
from minitf.data import CharTokenizer
from minitf.models import MODELS, Model
from minitf.nn.module import some_of
from minitf.validate import not_real_numbers


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete, corrupt, or does not fit the model."""


# What checkpoint.json must hold, (key, types, wanted): always, and in a checkpoint that resumes.
_MODEL_FIELDS = (("kind", str, "a model kind"), ("config", dict, "the model's settings"),
                 ("rng", dict, "a random-generator state"))
_RESUME_FIELDS = (("step", int, "the step count"), ("history", dict, "the loss history"),
                  ("optimizer", dict, "the optimizer's settings"))
_OPTIMIZER_FIELDS = (("type", str, "the optimizer's class"), ("t", int, "its step count"),
                     ("lr", (int, float), "its learning rate"))


def check_fields(mapping: dict, fields, where: str, prefix: str = "") -> None:
    """CheckpointError unless ``mapping`` holds each key of ``fields`` with a value of its type."""
    for key, types, wanted in fields:
        if key not in mapping:
            raise CheckpointError(f"{where}: no {prefix}{key}; wanted {wanted}")
        value = mapping[key]
        if isinstance(value, bool) or not isinstance(value, types):
            names = " or ".join(t.__name__ for t in
                                (types if isinstance(types, tuple) else (types,)))
            raise CheckpointError(f"{where}: {prefix}{key} is {str(repr(value))[:40]}; wanted "
                                  f"{wanted} ({names})")


def check_meta(meta: dict, where: str) -> None:
    """The parts of checkpoint.json that later code indexes into, checked once, here."""
    check_fields(meta, _MODEL_FIELDS, where)
    if any(key in meta for key, _, _ in _RESUME_FIELDS):      # saved with a trainer: all three
        check_fields(meta, _RESUME_FIELDS, where)
        check_fields(meta["optimizer"], _OPTIMIZER_FIELDS, where, "optimizer.")
        for key, count in (("step", meta["step"]), ("optimizer.t", meta["optimizer"]["t"])):
            if count < 0:               # a resume would ask a schedule for the rate at step -2
                raise CheckpointError(f"{where}: {key} is {count}; wanted the step count (an "
                                      f"integer ≥ 0)")
        lr = meta["optimizer"]["lr"]
        if not (math.isfinite(lr) and lr >= 0):
            raise CheckpointError(f"{where}: optimizer.lr is {lr}; wanted a finite number ≥ 0")
    try:
        np.random.default_rng().bit_generator.state = meta["rng"]      # a scratch generator
    except (TypeError, ValueError, KeyError, OverflowError) as err:
        raise CheckpointError(f"{where}: rng is not a random-generator state ({err})") from None
    if meta.get("tokenizer") is not None:
        try:
            tokenizer = CharTokenizer.from_json(meta["tokenizer"])
        except (TypeError, ValueError, AttributeError) as err:
            raise CheckpointError(f"{where}: tokenizer is corrupt ({err})") from None
        vocab = meta["config"].get("vocab_size")
        if vocab is not None and vocab != tokenizer.vocab_size:
            raise CheckpointError(f"{where}: the tokenizer has {tokenizer.vocab_size} characters; "
                                  f"wanted config.vocab_size = {vocab}")


def json_keeps(value) -> bool:
    """Whether JSON gives ``value`` back as it is: string keys and lists, all the way down."""
    if isinstance(value, dict):
        return all(isinstance(key, str) and json_keeps(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return isinstance(value, list) and all(map(json_keeps, value))
    return True


def rebuilt(meta: dict, arrays: dict, where: str, fits: str = "") -> Model:
    """The saved model, built from its kind and config and given its weights, as load builds
    it; CheckpointError where it cannot be."""
    if meta["kind"] not in MODELS:
        raise CheckpointError(f"{where}: unknown model kind {meta['kind']!r}")
    try:
        model = MODELS[meta["kind"]](**meta["config"])
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: its config does not build a {meta['kind']} model "
                              f"({err})") from None
    return with_weights(model, arrays, where, fits)


def with_weights(model: Model, arrays: dict, where: str, fits: str = "") -> Model:
    """``model`` given the saved weights; CheckpointError naming every key that does not fit."""
    state = _model_state(arrays)
    try:
        model.load_state_dict(state)
    except ValueError as err:
        what = f": {fits}" if fits else " does not fit this model"
        raise CheckpointError(f"{where}{what}: {str(err).split(': ', 2)[-1]}") from None
    return model


# What a model loaded into may set otherwise: the dropout rates change training only (trained
# weights in a model of other dropout is fine-tuning), and max_len only the longest input
# accepted (a table of learned positions, the one weight of its size, is checked by its shape;
# minitf train --resume may change --context)
_MAY_DIFFER = ("dropout", "attn_dropout", "max_len")


def check_same_model(model: Model, meta: dict, arrays: dict, where: str,
                     wanted: str = "or load(directory) to build it") -> None:
    """CheckpointError unless ``model`` is of the saved kind and config (but for _MAY_DIFFER).
    The weights alone do not tell: a rope model's fit an alibi model, a gelu model's a relu one,
    a causal model's one that sees the future -- and each then computed other logits from them,
    its config no longer the checkpoint's. Names every key that differs with both values, and
    every weight that does not fit."""
    if model.kind != meta["kind"]:
        saved = MODELS[meta["kind"]].__name__ if meta["kind"] in MODELS else "unknown"
        raise CheckpointError(f"{where} holds a {meta['kind']!r} model ({saved}); model is a "
                              f"{type(model).__name__} ({model.kind!r}); wanted a model of the "
                              f"saved kind, {wanted}")
    defaults = {name: p.default for name, p in inspect.signature(type(model)).parameters.items()}
    absent = object()              # a key an older checkpoint lacks: the constructor's default
    differ = []
    for key in dict.fromkeys([*meta["config"], *model.config]):
        saved, own = (c.get(key, defaults.get(key, absent)) for c in (meta["config"], model.config))
        if key not in _MAY_DIFFER and saved != own:
            differ.append(f"{key}: saved {_text(saved, absent)}, model {_text(own, absent)}")
    if differ:
        weights = model.misfits(_model_state(arrays))
        also = f"; and its weights: {some_of(weights)}" if weights else ""
        raise CheckpointError(f"{where} holds a model of another config: {'; '.join(differ)}"
                              f"{also}; wanted a {type(model).__name__} of the saved config "
                              f"({', '.join(_MAY_DIFFER)} may differ), {wanted}")


def check_same_run(model: Model, meta: dict, arrays: dict, current: dict, where: str) -> None:
    """CheckpointError unless a save of ``model`` (``meta``, ``arrays``) continues the run whose
    current checkpoint.json holds ``current``: the same kind and config, and a step not before
    its step. Else it would become current itself, and its saves push the run's checkpoints off
    the list, then off the disk: three saves of a model alone, step 0, into a run's directory
    took the place of steps 800, 845 and 900."""
    elsewhere = "or save it to a directory of its own"
    check_same_model(model, current, arrays, where, wanted=elsewhere)
    step, saved = meta.get("step", 0), current.get("step", 0)
    if isinstance(saved, int) and step < saved:
        raise CheckpointError(f"{where} is at step {saved}, and this save at step {step}: made "
                              f"current, it would push the later one off the list; wanted a "
                              f"save at step ≥ {saved} (a Trainer's that continues the run), "
                              f"{elsewhere}")


def _model_state(arrays: dict) -> dict:
    """The model's arrays of a checkpoint's, by the names its state_dict() gives them."""
    return {key[len("model/"):]: value for key, value in arrays.items() if key.startswith("model/")}


def _text(value, absent) -> str:
    return "nothing" if value is absent else repr(value)


def check_loadable(meta: dict, arrays: dict) -> None:
    """CheckpointError for a checkpoint that load would refuse, or that cannot be written: a
    save must never make an unreadable checkpoint the current one."""
    where = "checkpoint.save"
    check_meta(meta, where)         # a negative step or optimizer.t among what it refuses
    for key, value in arrays.items():
        if not_real_numbers(value):
            raise CheckpointError(f"{where}: {key} {not_real_numbers(value)}")
    try:
        json.dumps(meta)
    except (TypeError, ValueError) as err:
        raise CheckpointError(f"{where}: what rebuilds the run cannot be written as JSON "
                              f"({err}); extra must hold plain numbers, strings, lists and "
                              f"dicts") from None
    if not json_keeps(meta["extra"]):
        raise CheckpointError(f"{where}: extra is {str(meta['extra'])[:60]}, which would load "
                              f"back changed (a key 1 as '1', a tuple as a list); wanted string "
                              f"keys and lists")
    with seed(0):           # a config edited by hand; the build's draws leave the run's alone
        rebuilt(meta, arrays, where, fits="model.config does not describe the model's weights")
