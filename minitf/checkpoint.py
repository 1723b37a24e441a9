"""Checkpoints that never lose a run and never run code.

A checkpoint is a directory of two files:
    weights.npz       every array: the model's parameters ("model/…") and the optimizer's state
                      ("optimizer/…"); read back with allow_pickle=False, so loading a file cannot
                      execute anything
    checkpoint.json   what rebuilds the run: model kind and config, step, optimizer settings,
                      the random generator's state, loss history, tokenizer, and the SHA-256 of
                      weights.npz (a half-written or altered weights file is caught, not loaded)
Each file is written to a temporary name and renamed into place (an atomic step on POSIX), and
the JSON last: a crash mid-save leaves the previous checkpoint whole.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minitf.backend import rng_state, set_rng_state
from minitf.data import CharTokenizer
from minitf.models import MODELS, Model
from minitf.optim import Optimizer

FORMAT = "minitf-checkpoint"
VERSION = 1
WEIGHTS, META = "weights.npz", "checkpoint.json"


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete, corrupt, or does not fit the model."""


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)          # readers see the old file or the new one, never half


def save(directory, model: Model, trainer=None, tokenizer: CharTokenizer | None = None,
         extra: dict | None = None) -> Path:
    """Write ``model`` (and, for resuming, ``trainer``: its optimizer, step and history, plus the
    random generator's state) to ``directory``. -> the directory"""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"model/{name}": value for name, value in model.state_dict().items()}
    meta = {"format": FORMAT, "version": VERSION, "kind": model.kind, "config": model.config,
            "rng": rng_state(), "tokenizer": tokenizer.to_json() if tokenizer else None,
            "extra": extra or {}}
    if trainer is not None:
        saved = trainer.optimizer.state_dict()
        arrays.update({f"optimizer/{key}": value for key, value in saved["arrays"].items()})
        meta.update(step=trainer.step, history=trainer.history,
                    optimizer={"type": type(trainer.optimizer).__name__, "t": saved["t"],
                               "lr": saved["lr"]})
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    weights = buffer.getvalue()
    meta["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    _write_atomically(directory / WEIGHTS, weights)
    _write_atomically(directory / META, json.dumps(meta, indent=1).encode())
    return directory


@dataclass
class Checkpoint:
    """What ``load`` read: the rebuilt model, the tokenizer, the JSON metadata, the arrays."""
    model: Model
    tokenizer: CharTokenizer | None
    meta: dict
    arrays: dict = field(repr=False)


def _read(directory: Path):
    where = f"checkpoint {directory}"
    if not (directory / META).is_file() or not (directory / WEIGHTS).is_file():
        raise CheckpointError(f"{where}: not found; wanted a directory holding {META} and "
                              f"{WEIGHTS} (written by minitf train)")
    try:
        meta = json.loads((directory / META).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{where}: {META} is corrupt ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{where}: {META} is not a minitf checkpoint")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{where}: format version {meta.get('version')}; this minitf "
                              f"reads version {VERSION}")
    weights = (directory / WEIGHTS).read_bytes()
    if hashlib.sha256(weights).hexdigest() != meta.get("weights_sha256"):
        raise CheckpointError(f"{where}: {WEIGHTS} does not match {META} (incomplete or altered)")
    try:
        with np.load(io.BytesIO(weights), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (ValueError, OSError) as err:
        raise CheckpointError(f"{where}: {WEIGHTS} is corrupt ({err})") from None
    return meta, arrays


def load(directory, model: Model | None = None) -> Checkpoint:
    """Read a checkpoint. Without ``model``, build one from the saved kind and config; with one,
    load into it -- a model of another config is refused with every mismatched key and shape."""
    directory = Path(directory)
    meta, arrays = _read(directory)
    if model is None:
        if meta.get("kind") not in MODELS:
            raise CheckpointError(f"checkpoint {directory}: unknown model kind {meta.get('kind')!r}")
        model = MODELS[meta["kind"]](**meta["config"])
    state = {key[len("model/"):]: value for key, value in arrays.items() if key.startswith("model/")}
    try:
        model.load_state_dict(state)
    except ValueError as err:
        raise CheckpointError(f"checkpoint {directory} does not fit this model: "
                              f"{str(err).split(': ', 2)[-1]}") from None
    tokenizer = CharTokenizer.from_json(meta["tokenizer"]) if meta.get("tokenizer") else None
    return Checkpoint(model, tokenizer, meta, arrays)


def resume(checkpoint: Checkpoint, trainer) -> None:
    """Put ``trainer`` (built around checkpoint.model) back where the saved run stopped: step,
    history, optimizer state, and the random generator -- the next batch and dropout mask are the
    ones the uninterrupted run would have drawn."""
    meta = checkpoint.meta
    if "step" not in meta:
        raise CheckpointError("this checkpoint holds weights only; it cannot resume training")
    optimizer: Optimizer = trainer.optimizer
    if meta["optimizer"]["type"] != type(optimizer).__name__:
        raise CheckpointError(f"the checkpoint was trained with {meta['optimizer']['type']}, "
                              f"not {type(optimizer).__name__}")
    saved = {key[len("optimizer/"):]: value for key, value in checkpoint.arrays.items()
             if key.startswith("optimizer/")}
    optimizer.load_state_dict({"arrays": saved, "t": meta["optimizer"]["t"],
                               "lr": meta["optimizer"]["lr"]})
    trainer.step, trainer.history = meta["step"], meta["history"]
    set_rng_state(meta["rng"])
