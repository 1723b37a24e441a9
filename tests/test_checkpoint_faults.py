"""A save is one atomic step: a process killed at any instant of a save, or a disk that fills
during one, leaves the previous checkpoint loadable and whole.

Every save here writes weights that encode its step (every parameter equals the step number), so
a checkpoint that loads can be checked against the save that wrote it."""
import builtins
import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from minitf import backend, checkpoint, rundir
from minitf.data import CharTokenizer
from minitf.models import DecoderLM
from minitf.optim import AdamW
from minitf.train import Trainer
from test_bad_input import raises

# A host that imports minitf once and, for each line on its stdin, forks a saver: a process that
# saves back to back from the step of the checkpoint there, printing its pid and then each step it
# has saved. The test SIGKILLs the saver; the host prints "dead" once it is gone. (Forking spares
# each of the many kills the start-up of Python and NumPy.)
HOST = """
import os, sys
from minitf import checkpoint
from minitf.models import DecoderLM
from minitf.optim import AdamW
from minitf.train import Trainer

directory = sys.argv[1]
for _ in sys.stdin:
    pid = os.fork()
    if pid == 0:
        model = DecoderLM(11, 8, 2, 1, max_len=4)   # small: the time goes to the file system
        trainer = Trainer(model, AdamW(model, 1e-3), batches=None)
        print(os.getpid(), flush=True)
        try:
            trainer.step = checkpoint.load(directory).meta["step"]
        except checkpoint.CheckpointError:
            pass
        while True:
            trainer.step += 1
            for p in model.parameters():
                p.data[...] = trainer.step
            checkpoint.save(directory, model, trainer)
            print(trainer.step, flush=True)
    os.waitpid(pid, 0)
    print("dead", flush=True)
"""
KILLS = 30


def _small():
    model = DecoderLM(11, 8, 2, 1, max_len=4)
    return Trainer(model, AdamW(model, 1e-3), batches=None)


def _save_step(directory, trainer, step):
    trainer.step = step
    for p in trainer.model.parameters():
        p.data[...] = step
    checkpoint.save(directory, trainer.model, trainer)


def _intact_step(directory):
    """The step of the checkpoint that loads, after checking its weights are that save's."""
    saved = checkpoint.load(directory)
    step = saved.meta["step"]
    for name, value in saved.model.state_dict().items():
        assert np.all(value == step), f"{name} holds weights of another save than step {step}"
    return step


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork and SIGKILL (POSIX)")
def test_killing_the_process_at_random_moments_never_loses_the_checkpoint(tmp_path):
    directory, rng = tmp_path / "run", random.Random(0)
    host = subprocess.Popen([sys.executable, "-c", HOST, str(directory)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lost, regressed = [], []
    try:
        for kill in range(KILLS):
            host.stdin.write("save\n")
            host.stdin.flush()
            saver = int(host.stdout.readline())
            host.stdout.readline()                  # one save completed: now aim at the next
            time.sleep(rng.uniform(0.0, 0.03))
            os.kill(saver, signal.SIGKILL)
            lines = []
            while not lines or not lines[-1].endswith("dead"):
                lines.append(host.stdout.readline().rstrip("\n"))
            # A line cut short by the kill runs into "dead"; the full lines before are saves.
            completed = [int(line) for line in lines[:-1]]
            try:
                step = _intact_step(directory)
            except (checkpoint.CheckpointError, AssertionError):
                lost.append(kill)
                continue
            if completed and step < completed[-1]:
                regressed.append(kill)              # a save reported complete was not kept
    finally:
        host.kill()
        host.communicate()
    assert lost == [], f"{len(lost)} of {KILLS} kills lost the checkpoint"
    assert regressed == [], f"{len(regressed)} of {KILLS} kills lost a completed save"


class FullDisk:
    """``open`` whose files accept ``budget`` bytes in all, then fail with ENOSPC."""

    def __init__(self, budget):
        self.left = budget

    def open(self, path, mode="r", *args, **kwargs):
        f = builtins.open(path, mode, *args, **kwargs)
        return _Filling(f, self) if any(c in mode for c in "wax") else f


class _Filling:
    def __init__(self, f, disk):
        self.f, self.disk = f, disk

    def write(self, data):
        n = min(len(data), self.disk.left)
        self.f.write(data[:n])
        self.disk.left -= n
        if n < len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return n

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_a_disk_that_fills_during_a_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    lost, leftovers = [], set()
    for budget in [0, 1, 100, size // 4, size // 2, size - 100, size - 1]:
        # every file a save writes goes through rundir.write_durably
        monkeypatch.setattr(rundir, "open", FullDisk(budget).open, raising=False)
        with pytest.raises(OSError) as err:
            _save_step(directory, trainer, 2)
        monkeypatch.undo()
        assert err.value.errno == errno.ENOSPC
        try:
            assert _intact_step(directory) == 1
        except (checkpoint.CheckpointError, AssertionError):
            lost.append(budget)
        leftovers |= {p.name for p in directory.iterdir() if p.name.endswith(".tmp")}
    assert lost == [], f"a disk full after these many bytes lost the checkpoint: {lost}"
    assert leftovers == set()                              # a failed save cleans up after itself
    _save_step(directory, trainer, 2)                      # room again: saving works
    assert _intact_step(directory) == 2


def test_a_save_that_load_would_refuse_is_refused_before_anything_is_written(tmp_path):
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    before = sorted(p.name for p in directory.iterdir())
    model = trainer.model
    for call, fragments in [
        (lambda: checkpoint.save(directory, model, tokenizer=CharTokenizer.fit("abc")),
         ["the tokenizer has 3 characters", "config.vocab_size = 11"]),
        (lambda: checkpoint.save(directory, model, rng="abc"), ["rng is 'abc'"]),
        (lambda: checkpoint.save(directory, model, extra={"x": {1, 2}}),
         ["cannot be written as JSON", "set"]),
        # JSON would give these back changed: extra[1] as extra["1"], a tuple as a list
        (lambda: checkpoint.save(directory, model, extra={"epochs": {1: 0.5}}),
         ["extra is {'epochs': {1: 0.5}}", "wanted string keys and lists"]),
        (lambda: checkpoint.save(directory, model, extra={"best": [{"at": (3, 1.2)}]}),
         ["extra is {'best': [{'at': (3, 1.2)}]}", "a tuple as a list"]),
    ]:
        with raises(checkpoint.CheckpointError, "checkpoint.save:", *fragments):
            call()
    trainer.step = -3
    with raises(checkpoint.CheckpointError, "checkpoint.save: step is -3; wanted the step count"):
        checkpoint.save(directory, model, trainer)
    trainer.step, trainer.optimizer.lr = 2, float("nan")
    with raises(checkpoint.CheckpointError, "optimizer.lr is nan"):
        checkpoint.save(directory, model, trainer)
    trainer.optimizer.lr = 1e-3
    model.parameters()[0].data[0] = np.nan
    with raises(checkpoint.CheckpointError, "model/", "NaN"):
        checkpoint.save(directory, model, trainer)
    with raises(TypeError, "checkpoint.save: tokenizer is a str"):
        checkpoint.save(directory, model, tokenizer="abc")
    with raises(ValueError, "checkpoint.load:", "is a file; wanted a run directory"):
        checkpoint.load(directory / "checkpoints.txt")
    with raises(TypeError, "checkpoint.resume: checkpoint is a NoneType"):
        checkpoint.resume(None, trainer)
    with raises(TypeError, "checkpoint.resume: trainer is a NoneType"):
        checkpoint.resume(checkpoint.load(directory), None)
    # a Trainer of a model built first and a checkpoint loaded on its own: the run went on from
    # the trainer's untrained weights with the saved optimizer state, step and generator
    other = _small()
    with raises(ValueError, "checkpoint.resume: trainer trains another model than the one",
                "wanted load(directory, trainer.model), then resume"):
        checkpoint.resume(checkpoint.load(directory), other)
    assert other.step == 0 and other.optimizer.t == 0               # nothing was put back
    assert sorted(p.name for p in directory.iterdir()) == before and _intact_step(directory) == 1


def test_a_checkpoint_of_the_earlier_layout_still_loads(tmp_path):
    trainer = _small()
    _save_step(tmp_path / "run", trainer, 7)
    old = tmp_path / "old"                    # weights.npz and checkpoint.json in the directory
    (tmp_path / "run" / "step-000007").rename(old)
    assert _intact_step(old) == 7


def test_a_config_edited_by_hand_is_refused_at_save_and_the_save_draws_nothing(tmp_path):
    """model.config set by hand to what builds no model, or another model than its weights,
    was saved as the current checkpoint, which load then refused."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    before = sorted(p.name for p in directory.iterdir())
    model = trainer.model
    for key, value, fragments in [
        ("vocab_size", "ten", ["its config does not build a lm model", "got 'ten'"]),
        ("d_model", 4, ["model.config does not describe the model's weights", "tok_emb.W"]),
    ]:
        kept, model.config[key] = model.config[key], value
        with raises(checkpoint.CheckpointError, "checkpoint.save:", *fragments):
            checkpoint.save(directory, model, trainer)
        model.config[key] = kept
    assert sorted(p.name for p in directory.iterdir()) == before and _intact_step(directory) == 1
    state = backend.rng_state()                 # building the model to check it draws weights:
    checkpoint.save(directory, model, trainer)  # from a generator of its own, not the run's
    assert backend.rng_state() == state


def test_resume_refuses_a_history_that_lacks_a_key(tmp_path):
    """A checkpoint.json edited by hand, its history without val_loss (weights.npz untouched, so
    its hash still matches): resume said nothing, and the trainer's next validation failed with
    KeyError: 'val_loss'."""
    directory = tmp_path / "run"
    _save_step(directory, _small(), 2)
    meta_file = directory / "step-000002" / checkpoint.META
    meta = json.loads(meta_file.read_text())
    del meta["history"]["val_loss"]
    meta_file.write_text(json.dumps(meta))
    saved = checkpoint.load(directory)                      # it loads: the weights are whole
    trainer = Trainer(saved.model, AdamW(saved.model, 1e-3), batches=None)
    message = f"checkpoint {directory}: the history has no val_loss"    # the path it was loaded by
    with pytest.raises(checkpoint.CheckpointError, match=f"^{re.escape(message)}$"):
        checkpoint.resume(saved, trainer)
    assert trainer.step == 0 and trainer.optimizer.t == 0 and "val_loss" in trainer.history


def test_resume_refuses_a_checkpoint_of_another_optimizer(tmp_path):
    """An AdamW run resumed by an Adam trainer: their states have the same names (m.i, v.i), so
    they loaded, and the run went on without its weight decay, unsaid."""
    from minitf.optim import Adam
    directory = tmp_path / "run"
    _save_step(directory, _small(), 2)
    saved = checkpoint.load(directory)
    trainer = Trainer(saved.model, Adam(saved.model, 1e-3), batches=None)
    message = f"checkpoint {directory} was trained with AdamW, not Adam"
    with pytest.raises(checkpoint.CheckpointError, match=f"^{re.escape(message)}$"):
        checkpoint.resume(saved, trainer)
    assert trainer.step == 0 and trainer.optimizer.t == 0


def test_a_trainer_whose_lr_is_zero_saves_and_resumes(tmp_path):
    """lr = 0.0 is where a schedule may end (WarmupCosine's min_lr defaults to 0): such a run is
    saved, loads, and resumes with lr 0.0 (refused, the run's closing save failed)."""
    directory = tmp_path / "run"
    trainer = _small()
    trainer.optimizer.lr = 0.0
    _save_step(directory, trainer, 4)
    saved = checkpoint.load(directory)
    assert saved.meta["optimizer"]["lr"] == 0.0 and _intact_step(directory) == 4
    again = Trainer(saved.model, AdamW(saved.model, 1e-3), batches=None)
    checkpoint.resume(saved, again)
    assert again.step == 4 and again.optimizer.lr == 0.0
