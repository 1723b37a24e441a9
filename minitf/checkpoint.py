"""Checkpoints that never lose a run and never run code.

One checkpoint is a directory of two files:
    weights.npz       every array: the model's parameters ("model/…") and the optimizer's state
                      ("optimizer/…"); read back with allow_pickle=False, so loading a file cannot
                      execute anything
    checkpoint.json   what rebuilds the run: model kind and config, step, optimizer settings,
                      the random generator's state, loss history, tokenizer, and the SHA-256 of
                      weights.npz (a half-written or altered weights file is caught, not loaded)

A run directory keeps its last few checkpoints and names the current one:
    runs/lm/checkpoints.txt    the step directories holding complete checkpoints, newest first;
                               the first line is the one that loads
    runs/lm/step-000500/       weights.npz + checkpoint.json
    runs/lm/step-000250/       an earlier one (the newest KEEP are kept)

A save is one atomic step. Both files are written and fsynced inside a new hidden directory, which
is renamed to step-NNNNNN; only then does one os.replace put a new checkpoints.txt over the old.
A process killed, or a disk that fills, at any instant before that replace leaves checkpoints.txt
naming the previous checkpoint, whose files no save touches; after it, the new one is whole.
What an interrupted save leaves behind (its hidden temporaries, and a step directory it renamed
but never made current) is removed by the next save, or by ``clean``; a checkpoint that
checkpoints.txt does not name for any other reason (one you copied in) is never removed. A
directory holding weights.npz and checkpoint.json itself (a step directory, or a run saved by an
earlier minitf) loads too. What checkpoint.json must hold, and the CheckpointError that says what
it lacks, are minitf.checkpoint_format's; reading checkpoints.txt, and removing what an interrupted
save left, minitf.checkpoint_index's.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import json
import os
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minitf.backend import rng_state, set_rng_state
# the run directory's list of checkpoints; find, clean and the three file names are public here too
from minitf.checkpoint_index import (INDEX, LISTING, META, STEP, WEIGHTS, clean, find,
                                     holds_only_a_checkpoint, listed_steps,
                                     refuse_a_list_of_someone_else, run_directory)
from minitf.checkpoint_format import (CheckpointError, check_loadable, check_meta,
                                      check_same_model, check_same_run, rebuilt, with_weights)
from minitf.data import CharTokenizer
from minitf.models import MODELS, Model
from minitf.optim import Optimizer
from minitf.rundir import fsync_directory, write_durably
from minitf.validate import check_path, not_real_numbers

FORMAT = "minitf-checkpoint"
VERSION = 1
KEEP = 3                  # checkpoints kept in a run directory


def save(directory, model: Model, trainer=None, tokenizer: CharTokenizer | None = None,
         extra: dict | None = None, rng: dict | None = None) -> Path:
    """Write ``model`` (and, for resuming, ``trainer``: its optimizer, step and history, plus the
    random generator's state -- ``rng``, or the current one) as the new current checkpoint of
    ``directory``, atomically. -> the directory of the new checkpoint"""
    if getattr(model, "kind", None) not in MODELS:      # checked before anything is written
        raise TypeError(f"checkpoint.save: model is a {type(model).__name__}; wanted one of "
                        f"minitf's models ({', '.join(c.__name__ for c in MODELS.values())}), which "
                        f"a checkpoint can rebuild; for a model of your own, save its "
                        f"state_dict() (numpy.savez) and load it with load_state_dict()")
    for name, value, wanted in (("tokenizer", tokenizer, CharTokenizer), ("extra", extra, dict)):
        if value is not None and not isinstance(value, wanted):
            raise TypeError(f"checkpoint.save: {name} is a {type(value).__name__}; wanted a "
                            f"{wanted.__name__} or None")
    resumable = ("optimizer", "step", "history")
    if trainer is not None and not all(hasattr(trainer, a) for a in resumable):
        raise TypeError(f"checkpoint.save: trainer is a {type(trainer).__name__}; wanted a "
                        f"minitf.train.Trainer (its optimizer, step and history are saved)")
    if trainer is not None and getattr(trainer, "model", None) is not model:
        # A's weights with B's optimizer state, step and history: resume took it as one run
        raise ValueError("checkpoint.save: trainer trains another model than model; wanted "
                         "save(directory, trainer.model, trainer)")
    directory = run_directory(directory, "checkpoint.save")
    if (STEP.fullmatch(directory.name) and (directory / META).is_file()
            and (directory.parent / INDEX).is_file() and not (directory / INDEX).exists()):
        # a checkpoints.txt written into it would hide that checkpoint from load by its path
        raise CheckpointError(f"checkpoint.save: {directory} is a step directory of the run "
                              f"{directory.parent} (it holds {META}), which a save there would "
                              f"hide; wanted the run directory, or another one")
    arrays = {f"model/{name}": value for name, value in model.state_dict().items()}
    meta = {"format": FORMAT, "version": VERSION, "kind": model.kind, "config": model.config,
            "rng": rng or rng_state(), "tokenizer": tokenizer.to_json() if tokenizer else None,
            "extra": extra or {}}
    if trainer is not None:
        saved = trainer.optimizer.state_dict()
        arrays.update({f"optimizer/{key}": value for key, value in saved["arrays"].items()})
        # a NumPy number (an lr set to np.float32(1e-3)) is written as the plain number it is
        plain = [x.item() if isinstance(x, np.generic) else x
                 for x in (trainer.step, saved["t"], saved["lr"])]
        meta.update(step=plain[0], history=trainer.history,
                    optimizer={"type": type(trainer.optimizer).__name__, "t": plain[1],
                               "lr": plain[2]})
    check_loadable(meta, arrays)       # what load would refuse, refused before anything is written
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    weights = buffer.getvalue()
    meta["weights_sha256"] = hashlib.sha256(weights).hexdigest()

    listed = listed_steps(directory)
    refuse_a_list_of_someone_else(directory, listed)       # a save rewrites it, and cuts it
    try:                        # the save continues the run there, or is refused
        current = _meta_at(directory / listed[0]) if listed else None
    except CheckpointError:     # unreadable: no run to keep, and a save is how it recovers
        current = None
    if current is not None:
        check_same_run(model, meta, arrays, current,
                       f"checkpoint.save: the current checkpoint of {directory} ({listed[0]})")
    try:
        directory.mkdir(parents=True, exist_ok=True)      # only now: a refused save makes no folder
        clean(directory)            # what a save killed earlier left, should it be in the way
        step = f"step-{meta.get('step', 0):06d}"
        candidates = itertools.chain([step], (f"{step}-{i}" for i in itertools.count(1)))
        name = next(n for n in candidates                  # a step saved twice: a new name
                    if n not in listed and not (directory / n).exists())
        new_list = [name, *listed][:KEEP]
        _make_current(directory, name, new_list, weights, meta)
    except OSError as err:          # named by the run directory, not a hidden temporary in it
        raise NotSaved(err.errno, err.strerror or str(err), str(directory)) from None
    # The checkpoints beyond KEEP, which this save took off the list: step directories of this
    # run only (an edited line may name '../best'). A process killed here leaves one on the
    # disk, unlisted: it loads by its own path, and is never removed.
    for old in dict.fromkeys(listed):
        if (old not in new_list and STEP.fullmatch(old)
                and holds_only_a_checkpoint(directory / old)):
            try:
                shutil.rmtree(directory / old)
            except OSError as err:     # the save is done and current: this is no failure of it
                warnings.warn(f"checkpoint.save: the old checkpoint {directory / old}, off the "
                              f"list now, could not be removed ({err.strerror}); the new one, "
                              f"{name}, is saved and current")
    return directory / name


class NotSaved(OSError):
    """A save the disk refused (full, read-only, no permission): the current checkpoint, if any,
    is the one before it, untouched. ``errno`` and ``strerror`` are the system's."""

    def __str__(self):
        return (f"checkpoint.save: could not write to {self.filename} ({self.strerror}); any "
                f"earlier checkpoint there is untouched")


def _make_current(directory: Path, name: str, new_list: list, weights: bytes, meta: dict) -> None:
    """The one atomic step of a save: step directory ``name`` written whole, then named first
    in a new checkpoints.txt by one os.replace. Whatever stops it before that replace (a full
    disk, Ctrl-C) leaves the previous checkpoint current and nothing of this one behind; after
    it, the new one is current, and a last fsync that fails is a warning."""
    staging = directory / f".{name}.{os.getpid()}.tmp"
    index_temporary = directory / f".{INDEX}.{os.getpid()}.tmp"
    try:
        staging.mkdir()
        write_durably(staging / WEIGHTS, weights)
        write_durably(staging / META, json.dumps(meta, indent=1).encode())
        fsync_directory(staging)
        # the new list first: killed after the rename, it names what clean may remove
        write_durably(index_temporary, "".join(f"{n}\n" for n in new_list).encode())
        os.rename(staging, directory / name)
        fsync_directory(directory)          # the step directory exists before it is named
        os.replace(index_temporary, directory / INDEX)       # the one step that makes it current
    except BaseException:
        # the clearing up never hides why the save failed (on a read-only disk it fails too)
        shutil.rmtree(staging, ignore_errors=True)
        # renamed (the name was free before) but not made current: never current, so it goes;
        # read from the disk, as a Ctrl-C may land just after the replace that made it current
        with contextlib.suppress(OSError, CheckpointError):
            if (directory / name).exists() and listed_steps(directory)[:1] != [name]:
                shutil.rmtree(directory / name, ignore_errors=True)
        with contextlib.suppress(OSError):
            index_temporary.unlink(missing_ok=True)
        raise
    try:                # current now: a failure past here is no failed save
        fsync_directory(directory)
    except OSError as err:
        warnings.warn(f"checkpoint.save: {directory / name} is saved and current, but the "
                      f"system could not confirm its folder on the disk ({err.strerror})")


@dataclass
class Checkpoint:
    """What ``load`` read: the rebuilt model, the tokenizer, the JSON metadata, the arrays."""
    model: Model
    tokenizer: CharTokenizer | None
    meta: dict
    arrays: dict = field(repr=False)
    path: Path | None = None             # the directory it was read from, for error messages


def _located(directory) -> Path:
    found = find(directory)
    if found is None:           # a folder of something else (a typo'd path) or none at all
        what = (f"holds no checkpoint (no {INDEX}, no {META})" if Path(directory).is_dir()
                else "no such folder")
        raise CheckpointError(f"checkpoint {directory}: {what}; wanted a run directory written "
                              f"by minitf train (holding {INDEX}), or one holding {META} and "
                              f"{WEIGHTS}")
    return found


def read_meta(directory) -> dict:
    """The JSON metadata of the current checkpoint in ``directory``, weights not read."""
    found = _located(directory)
    return _pointing_back(directory, found, _meta_at)


def _pointing_back(directory, found: Path, read):
    """``read(found)``; should the current checkpoint of a run be damaged (a file deleted or cut
    short), the error names the newest of the run's earlier checkpoints that is whole."""
    try:
        return read(found)
    except CheckpointError as err:
        directory = Path(directory)
        if found == directory:
            raise                                   # a step directory, loaded by its own path
        listed = listed_steps(directory)
        # then the step directories checkpoints.txt does not name (an edited or garbled list),
        # newest first: step-1000000 after step-999999, as numbers, not as text
        unlisted = sorted((path.name for path in directory.iterdir()
                           if STEP.fullmatch(path.name) and path.name not in listed),
                          key=lambda name: [int(n) for n in name[len("step-"):].split("-")],
                          reverse=True)
        for whole in (directory / name for name in listed[1:] + unlisted):
            if not is_whole(whole):
                continue
            raise CheckpointError(f"{err}; the run's newest whole checkpoint is {whole}: load "
                                  f"it by its own path (minitf train --resume {whole} --out "
                                  f"NEW_DIR continues the run from it)") from None
        if not STEP.fullmatch(listed[0]) and not (directory / listed[0]).exists():
            # a line no save wrote, naming nothing (not an edit to ../best): say what was meant
            raise CheckpointError(f"{err}; {INDEX} is not minitf's: {LISTING}") from None
        raise


def is_whole(step_directory) -> bool:
    """Whether the checkpoint in ``step_directory`` loads: its files there, and whole."""
    check_path(step_directory, "step_directory", "checkpoint.is_whole")
    try:
        _read_at(Path(step_directory))
    except CheckpointError:
        return False
    return True


def _meta_at(found: Path) -> dict:
    where = f"checkpoint {found}"
    try:
        with open(found / META, "rb") as f:
            meta = json.loads(f.read().decode())
    except FileNotFoundError:
        what = META if found.is_dir() else f"the folder, which {INDEX} names,"
        raise CheckpointError(f"{where}: {what} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{where}: {META} is corrupt ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"{where}: {META} is not a minitf checkpoint")
    version = meta.get("version")
    if type(version) is not int or version != VERSION:     # true and 1.0 equal 1 in Python
        raise CheckpointError(f"{where}: format version {version!r}; this minitf "
                              f"reads version {VERSION}")
    check_meta(meta, f"{where}: {META}")
    return meta


def _read(directory):
    found = _located(directory)            # once: a save may make another one current meanwhile
    return _pointing_back(directory, found, _read_at)


def _read_at(found: Path):
    meta = _meta_at(found)
    where = f"checkpoint {found}"
    try:
        with open(found / WEIGHTS, "rb") as f:
            weights = f.read()
    except FileNotFoundError:
        raise CheckpointError(f"{where}: {WEIGHTS} is missing") from None
    if hashlib.sha256(weights).hexdigest() != meta.get("weights_sha256"):
        raise CheckpointError(f"{where}: {WEIGHTS} does not match {META} (incomplete or altered)")
    try:
        with np.load(io.BytesIO(weights), allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files}
    except (ValueError, OSError) as err:
        raise CheckpointError(f"{where}: {WEIGHTS} is corrupt ({err})") from None
    for key, value in arrays.items():
        if not_real_numbers(value):
            raise CheckpointError(f"{where}: {WEIGHTS}: {key} {not_real_numbers(value)}")
    return meta, arrays


def load(directory, model: Model | None = None) -> Checkpoint:
    """Read a checkpoint. Without ``model``, build one from the saved kind and config; with one,
    load into it -- a model of another kind or config is refused with every mismatched key and
    shape (but for the dropout rates and max_len: see checkpoint_format.check_same_model)."""
    directory = run_directory(directory, "checkpoint.load")
    if model is not None and not isinstance(model, Model):
        raise TypeError(f"checkpoint.load: model is a {type(model).__name__}; wanted a minitf "
                        f"model to load into, or None to build the saved one")
    meta, arrays = _read(directory)
    where = f"checkpoint {directory}"
    if model is None:
        model = rebuilt(meta, arrays, where)
    else:                                 # its kind and config first: the weights alone may fit
        check_same_model(model, meta, arrays, where)
        with_weights(model, arrays, where)
    tokenizer = CharTokenizer.from_json(meta["tokenizer"]) if meta.get("tokenizer") else None
    return Checkpoint(model, tokenizer, meta, arrays, directory)


def resume(checkpoint: Checkpoint, trainer) -> None:
    """Put ``trainer`` (built around checkpoint.model) back where the saved run stopped: step,
    history, optimizer state, and the random generator -- the next batch and dropout mask are the
    ones the uninterrupted run would have drawn."""
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"checkpoint.resume: checkpoint is a {type(checkpoint).__name__}; "
                        f"wanted what checkpoint.load returned")
    if not isinstance(getattr(trainer, "optimizer", None), Optimizer):
        raise TypeError(f"checkpoint.resume: trainer is a {type(trainer).__name__}; wanted a "
                        f"minitf.train.Trainer")
    meta, where = checkpoint.meta, f"checkpoint {checkpoint.path or ''}".rstrip()
    if getattr(trainer, "model", None) is not checkpoint.model:
        # the optimizer state, step and random generator would go on with the trainer's own,
        # untrained weights: a run "resumed" from its start
        raise ValueError(f"checkpoint.resume: trainer trains another model than the one {where} "
                         f"was loaded into; wanted load(directory, trainer.model), then resume")
    if "step" not in meta:
        raise CheckpointError(f"{where} holds weights only; it cannot resume training")
    optimizer: Optimizer = trainer.optimizer
    if meta["optimizer"]["type"] != type(optimizer).__name__:
        raise CheckpointError(f"{where} was trained with {meta['optimizer']['type']}, "
                              f"not {type(optimizer).__name__}")
    missing = sorted(set(trainer.history) - set(meta["history"]))
    if missing:
        raise CheckpointError(f"{where}: the history has no {', '.join(missing)}")
    saved = {key[len("optimizer/"):]: value for key, value in checkpoint.arrays.items()
             if key.startswith("optimizer/")}
    try:
        optimizer.load_state_dict({"arrays": saved, "t": meta["optimizer"]["t"],
                                   "lr": meta["optimizer"]["lr"]})
    except ValueError as err:
        raise CheckpointError(f"{where}: {err}") from None
    trainer.step, trainer.history = meta["step"], meta["history"]
    set_rng_state(meta["rng"])
