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
import shutil
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


def test_a_run_directory_keeps_the_last_few_checkpoints_and_names_the_current(tmp_path):
    directory = tmp_path / "run"
    trainer = _small()
    for step in range(1, 6):
        _save_step(directory, trainer, step)
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["checkpoints.txt", "step-000003", "step-000004", "step-000005"]
    assert (directory / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]
    assert _intact_step(directory) == 5 and _intact_step(directory / "step-000003") == 3
    _save_step(directory, trainer, 5)          # the same step again: a new name, both kept
    assert (directory / "checkpoints.txt").read_text().split()[:2] == [
        "step-000005-1", "step-000005"]


def test_leftovers_of_a_crashed_save_are_cleaned(tmp_path):
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / ".step-000009.998.tmp").mkdir()          # another save, killed while writing
    shutil.copytree(directory / "step-000001", directory / "step-000002")  # killed before
    #                                                        checkpoints.txt moved over the old
    (directory / ".checkpoints.txt.999.tmp").write_text("step-000002\n")
    (directory / "loss.png").write_bytes(b"not ours")
    # a user's own files that merely look alike are never removed, by clean or by a save
    (directory / "step-notes.txt").write_text("mine")
    (directory / "step-by-step").mkdir()
    (directory / "step-000003").mkdir()
    (directory / "step-000003" / "notes.txt").write_text("mine too")
    (directory / ".notes.tmp").write_text("mine as well")
    checkpoint.clean(directory)
    assert sorted(p.name for p in directory.iterdir()) == [
        ".notes.tmp", "checkpoints.txt", "loss.png", "step-000001", "step-000003", "step-by-step",
        "step-notes.txt"]
    assert _intact_step(directory) == 1
    for step in (4, 5, 6, 7):                   # past KEEP: the save removes step-000004 only
        _save_step(directory, trainer, step)
    assert sorted(p.name for p in directory.iterdir()) == [
        ".notes.tmp", "checkpoints.txt", "loss.png", "step-000003", "step-000005", "step-000006",
        "step-000007", "step-by-step", "step-notes.txt"]
    assert (directory / "step-000003" / "notes.txt").read_text() == "mine too"


def test_a_checkpoint_that_checkpoints_txt_does_not_name_is_never_removed(tmp_path, capsys):
    """clean removed every complete step directory that checkpoints.txt did not name: one copied
    into a new folder went at the first save there, and a run whose checkpoints.txt was edited
    lost its checkpoints to the very `minitf train --out` that then refused to overwrite it."""
    from minitf import cli
    run = tmp_path / "run"
    trainer = _small()
    for step in (1, 2):
        _save_step(run, trainer, step)
    mine = tmp_path / "mine"
    shutil.copytree(run / "step-000002", mine / "step-000002")           # no checkpoints.txt
    checkpoint.clean(mine)
    for step in (2, 3, 4, 5):               # a new run there, past KEEP, the same step among them
        _save_step(mine, trainer, step)
    assert sorted(p.name for p in mine.iterdir()) == [
        "checkpoints.txt", "step-000002", "step-000003", "step-000004", "step-000005"]
    assert (mine / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]          # step-000002-1 went past KEEP
    assert _intact_step(mine / "step-000002") == 2
    (run / "checkpoints.txt").write_text("step-000099\n")     # edited by hand
    assert cli.main(["train", "--fast", "--no-progress", "--out", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert _intact_step(run / "step-000001") == 1 and _intact_step(run / "step-000002") == 2


def test_a_save_interrupted_after_its_rename_leaves_the_previous_checkpoint_current(
        tmp_path, monkeypatch):
    """Ctrl-C between the rename of the new step directory and the replace of checkpoints.txt:
    the new directory is not current, and goes with the save's temporaries."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)

    def interrupted(source, target):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _save_step(directory, trainer, 2)
    monkeypatch.undo()
    assert sorted(p.name for p in directory.iterdir()) == ["checkpoints.txt", "step-000001"]
    assert _intact_step(directory) == 1

    replace = os.replace                  # Ctrl-C just after the replace: the new one is current

    def interrupted_after(source, target):
        replace(source, target)
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted_after)
    with pytest.raises(KeyboardInterrupt):
        _save_step(directory, trainer, 2)
    monkeypatch.undo()
    assert _intact_step(directory) == 2


def test_pruning_removes_only_this_run_s_step_directories(tmp_path):
    """An edited checkpoints.txt naming ../best, or a name twice, had it removed past KEEP."""
    directory, best = tmp_path / "run", tmp_path / "best"
    trainer = _small()
    _save_step(directory, trainer, 1)
    shutil.copytree(directory / "step-000001", best)
    (directory / "checkpoints.txt").write_text("step-000001\n../best\nstep-000001\n")
    for step in (2, 3, 4):
        _save_step(directory, trainer, step)
    assert _intact_step(best) == 1
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoints.txt", "step-000002", "step-000003", "step-000004"]


def test_a_save_killed_before_its_rename_leaves_a_step_directory_of_that_name_alone(tmp_path):
    """Killed after writing its new list and before the rename, a save leaves its staging
    directory and that list: a step directory of the listed name, put there since (a copy, or
    the staging directory recovered by hand), is not the save's, and stays."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / ".step-000002.997.tmp").mkdir()                       # the save's staging
    (directory / ".checkpoints.txt.997.tmp").write_text("step-000002\nstep-000001\n")
    shutil.copytree(directory / "step-000001", directory / "step-000002")   # yours
    checkpoint.clean(directory)
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoints.txt", "step-000001", "step-000002"]


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
    with raises(checkpoint.CheckpointError, "trainer.step is -3"):
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


def test_a_listed_checkpoint_holding_a_file_of_yours_outlives_the_pruning(tmp_path):
    """Past KEEP a save removes the oldest listed step directory: one that holds a notes.txt of
    the user's besides the checkpoint is kept, file and all (with the check of what a folder
    holds gone, it was removed whole, and no test saw it)."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / "step-000001" / "notes.txt").write_text("mine")
    for step in (2, 3, 4, 5):
        _save_step(directory, trainer, step)
    assert (directory / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]
    assert (directory / "step-000001" / "notes.txt").read_text() == "mine"
    assert _intact_step(directory / "step-000001") == 1
    assert not (directory / "step-000002").exists()                # the plain one went


def test_a_stale_temporary_naming_a_listed_checkpoint_removes_nothing(tmp_path):
    """A leftover .checkpoints.txt.<pid>.tmp whose first line names a step directory that
    checkpoints.txt lists (the current one, here): clean must not take it for a save's
    never-current rename."""
    directory = tmp_path / "run"
    trainer = _small()
    for step in (1, 2):
        _save_step(directory, trainer, step)
    (directory / ".checkpoints.txt.4242.tmp").write_text("step-000002\nstep-000001\n")
    checkpoint.clean(directory)
    assert _intact_step(directory) == 2 and _intact_step(directory / "step-000001") == 1
    assert not (directory / ".checkpoints.txt.4242.tmp").exists()
