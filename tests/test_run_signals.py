"""``minitf train`` stopped by a signal: Ctrl-C and SIGTERM save the run and say where it is
(at any moment: before the first step, between saves, as the held-out loss is measured, as the
samples print), a second signal stops at once, and the run resumed is the uninterrupted run."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from minitf import char_lm, checkpoint, cli
from minitf.train import Trainer

from test_run_directory import SMALL, one_line, text, train  # noqa: F401  (text is a fixture)

def _interrupt_at(monkeypatch, step):
    """Press Ctrl-C (a real SIGINT to this process) as training finishes ``step``."""
    train_step = Trainer.train_step

    def pressing_ctrl_c(self):
        result = train_step(self)
        if self.step == step:
            os.kill(os.getpid(), signal.SIGINT)
        return result
    monkeypatch.setattr(Trainer, "train_step", pressing_ctrl_c)


def test_an_interrupted_and_resumed_run_is_the_uninterrupted_run(text, tmp_path, monkeypatch,
                                                                 capsys):
    straight, split = tmp_path / "straight", tmp_path / "split"
    assert train(text, "--steps", "40", "--out", str(straight)) == 0   # short runs work: warm-up 4

    _interrupt_at(monkeypatch, 20)
    assert train(text, "--steps", "40", "--out", str(split)) == 130
    monkeypatch.undo()
    assert one_line(capsys) == (f"minitf train: interrupted (Ctrl-C) at step 20 of 40; "
                                f"checkpoint saved to {split}/; to continue: minitf train "
                                f"--resume {split}")
    assert checkpoint.read_meta(split)["step"] == 20

    assert cli.main(["train", "--resume", str(split), "--no-progress"]) == 0   # the printed command
    a, b = checkpoint.load(straight), checkpoint.load(split)
    assert b.meta["step"] == 40 and a.arrays.keys() == b.arrays.keys()
    for key in a.arrays:                                   # weights and optimizer state
        assert np.array_equal(a.arrays[key], b.arrays[key]), key
    assert a.meta["rng"] == b.meta["rng"]
    assert a.meta["history"]["loss"] == b.meta["history"]["loss"]

    # The saved random state is the one training left, not what sampling made of it afterwards.
    settings = {**a.meta["extra"]["run"], "out": str(tmp_path / "no-samples"), "samples": 0}
    char_lm.run(char_lm.RunConfig(**settings), log=lambda *args: None)
    assert checkpoint.read_meta(tmp_path / "no-samples")["rng"] == a.meta["rng"]


def test_ctrl_c_after_a_step_that_saved_saves_no_second_copy_of_it(text, tmp_path,
                                                                    monkeypatch, capsys):
    """The step's checkpoint is the run's newest: another would push out an older one."""
    run = tmp_path / "run"
    _interrupt_at(monkeypatch, 20)
    assert train(text, "--steps", "40", "--save-every", "10", "--out", str(run)) == 130
    assert (run / checkpoint.INDEX).read_text().split() == ["step-000020", "step-000010"]
    assert "checkpoint saved to" in one_line(capsys)


def _stop_before_the_first_step(monkeypatch):
    """Ctrl-C as fit() sets up (its tqdm import, say): stop_requested before any step."""
    fit = Trainer.fit

    def stopped_at_once(self, *args, **kwargs):
        self.stop_requested = signal.SIGINT
        return fit(self, *args, **kwargs)
    monkeypatch.setattr(Trainer, "fit", stopped_at_once)


def test_a_stop_before_any_step_saves_what_it_says_it_saved(text, tmp_path, monkeypatch,
                                                            capsys):
    """Stopped at step 0, a new run said 'checkpoint saved' and saved nothing; a run resumed
    into its own directory and stopped at once adds no copy; resumed into another --out, that
    one gets the checkpoint it is told of."""
    run, other = tmp_path / "run", tmp_path / "other"
    _stop_before_the_first_step(monkeypatch)
    assert train(text, "--steps", "40", "--save-every", "10", "--out", str(run)) == 130
    assert "at step 0 of 40; checkpoint saved to" in one_line(capsys)
    assert checkpoint.read_meta(run)["step"] == 0
    monkeypatch.undo()
    _interrupt_at(monkeypatch, 20)
    assert cli.main(["train", "--resume", str(run), "--no-progress"]) == 130
    monkeypatch.undo()
    capsys.readouterr()
    listed = (run / checkpoint.INDEX).read_text().split()
    assert listed[0] == "step-000020"
    _stop_before_the_first_step(monkeypatch)
    assert cli.main(["train", "--resume", str(run), "--no-progress"]) == 130
    assert (run / checkpoint.INDEX).read_text().split() == listed       # no second step 20
    assert cli.main(["train", "--resume", str(run), "--out", str(other), "--no-progress"]) == 130
    assert f"at step 20 of 40; checkpoint saved to {other}/" in capsys.readouterr().err
    assert checkpoint.read_meta(other)["step"] == 20



@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_saves_and_a_second_run_on_the_same_directory_is_refused(text, tmp_path, capsys,
                                                                        signum):
    """SIGTERM too (timeout, docker stop and Slurm send it): it killed the run unsaved."""
    run = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-m", "minitf", "train", "--text", text, *SMALL, "--steps", "100000",
         "--out", str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        while not child.stdout.readline().startswith("model:"):   # printed as training starts
            assert child.poll() is None, child.stderr.read()
        time.sleep(0.3)                                           # a few steps
        assert train(text, "--steps", "10", "--out", str(run)) == 2
        assert f"--out {run} is in use by another minitf train (pid {child.pid})" in one_line(capsys)
        child.send_signal(signum)
        stdout, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signum, stderr
    step = checkpoint.load(run).meta["step"]
    name = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}[signum]
    assert stderr.strip().splitlines()[-1] == (
        f"minitf train: interrupted ({name}) at step {step} of 100000; checkpoint saved to "
        f"{run}/; to continue: minitf train --resume {run}")
    assert 0 < step < 100000
    assert not (run / "lock").exists()


@pytest.fixture
def sigterm_reaches_the_test():
    """SIGTERM, sent by a test to its own process, raises here unless minitf train catches it:
    Python's default would end the whole test session."""
    def uncaught(signum, frame):
        raise AssertionError("a SIGTERM reached the test: minitf train did not catch it")
    previous = signal.signal(signal.SIGTERM, uncaught)
    yield
    signal.signal(signal.SIGTERM, previous)


def _sigterms_at_the_end(monkeypatch, count: int) -> list:
    """``count`` SIGTERMs as the held-out loss of all 70 windows is measured, after the last step
    (the progress's are of 64). -> the sizes the held-out loss was called with"""
    held_out_loss, calls = char_lm._held_out_loss, []

    def sigterms(model, x, y):
        calls.append(len(x))
        for _ in range(count if len(x) > 64 else 0):
            os.kill(os.getpid(), signal.SIGTERM)
        return held_out_loss(model, x, y)
    monkeypatch.setattr(char_lm, "_held_out_loss", sigterms)
    return calls


def test_a_sigterm_while_the_held_out_loss_is_measured_waits_for_the_last_checkpoint(
        text, tmp_path, monkeypatch, capsys, sigterm_reaches_the_test):
    """After the last step, the held-out loss takes a second or two: a SIGTERM there killed the
    run, and the steps since its last periodic save were lost."""
    calls = _sigterms_at_the_end(monkeypatch, 1)
    run = tmp_path / "run"
    assert train(text, "--steps", "25", "--save-every", "10", "--out", str(run)) == 128 + 15
    assert calls[-1] == 70 and calls.count(70) == 1
    saved = checkpoint.read_meta(run)
    assert saved["step"] == 25 and saved["extra"]["figures"]["steps"] == 25
    out, err = capsys.readouterr()
    assert "sample 1" not in out and not (run / "lock").exists()
    assert (run / "loss.png").is_file()                 # drawn, as a run stopped in its samples
    assert err.strip() == (
        f"minitf train: interrupted (SIGTERM) after its last step (25 of 25), with a held-out "
        f"loss of {saved['extra']['figures']['val_loss']:.3f}; checkpoint saved to {run}/; to "
        f"sample it: minitf generate --checkpoint {run}")


def test_a_second_sigterm_stops_at_once_and_names_the_checkpoint_that_is_left(
        text, tmp_path, monkeypatch, capsys, sigterm_reaches_the_test):
    """It ended in a bare "minitf train: interrupted", status 130 for a SIGTERM, the steps since
    the last periodic save gone and the checkpoint that was left unnamed."""
    _sigterms_at_the_end(monkeypatch, 2)
    run = tmp_path / "run"
    assert train(text, "--steps", "25", "--save-every", "10", "--out", str(run)) == 128 + 15
    assert checkpoint.read_meta(run)["step"] == 20
    assert one_line(capsys) == (
        f"minitf train: interrupted (SIGTERM) a second time: stopped at once; the last "
        f"checkpoint saved is step 20's, in {run}/ (to continue: minitf train --resume {run})")


def test_a_sigterm_as_model_is_printed_is_caught(text, tmp_path, sigterm_reaches_the_test):
    """A script waits for "model:" before it signals; the handlers were set after it, and one
    sent just then killed the run without a word."""
    def log(line):
        if line.startswith("model:"):
            os.kill(os.getpid(), signal.SIGTERM)
    config = char_lm.RunConfig(text=text, steps=30, d_model=16, n_heads=2, n_layers=1,
                               context=16, batch_size=4, progress=False, out=str(tmp_path / "r"))
    with pytest.raises(KeyboardInterrupt) as stopped:
        char_lm.run(config, log=log)
    assert str(stopped.value).startswith("interrupted (SIGTERM) at step 0 of 30; checkpoint "
                                         f"saved to {tmp_path / 'r'}/")
    assert stopped.value.signum == signal.SIGTERM


def test_a_run_stopped_while_its_samples_print_has_its_plot(text, tmp_path, monkeypatch):
    """The last checkpoint is saved before the samples; the loss plot is drawn before them too."""
    def ctrl_c(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(char_lm, "_report", ctrl_c)
    run = tmp_path / "run"
    assert train(text, "--steps", "10", "--out", str(run)) == 130
    assert (run / "loss.png").is_file() and checkpoint.read_meta(run)["step"] == 10
