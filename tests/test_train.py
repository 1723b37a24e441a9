"""Training: a resumed run is the same run, bit for bit; divergence is caught and named;
checkpoints are atomic, never unpickle, and refuse what does not fit."""
import json
import os
import signal
import warnings

import numpy as np
import pytest

from minitf import backend, checkpoint, data
from minitf.models import DecoderLM
from minitf.optim import SGD, AdamW, WarmupCosine, clip_grad_norm, grad_norm
from minitf.train import StoppedAtOnce, Trainer, TrainingDiverged, stop_on_signals

TEXT = np.arange(400) % 17


def _trainer(model=None):
    model = model or DecoderLM(17, 16, 2, 2, max_len=8, dropout=0.1)   # dropout: the RNG matters
    optimizer = AdamW(model, 1e-2)
    return Trainer(model, optimizer, lambda: data.random_windows(TEXT, 4, 8),
                   schedule=WarmupCosine(1e-2, 2, 10), evaluate=lambda: 0.0, eval_every=3)


def test_resume_continues_bit_for_bit(tmp_path):
    backend.seed(0)
    straight = _trainer()
    straight.fit(10, progress=False)

    backend.seed(0)
    first = _trainer()
    first.fit(5, progress=False)
    checkpoint.save(tmp_path / "run", first.model, first)
    backend.seed(123)                                  # whatever happens in between
    saved = checkpoint.load(tmp_path / "run")
    assert isinstance(saved, checkpoint.Checkpoint) and saved.meta["step"] == 5
    second = _trainer(saved.model)
    checkpoint.resume(saved, second)
    second.fit(10, progress=False)

    for (name, a), (_, b) in zip(straight.model.named_parameters(), second.model.named_parameters()):
        assert np.array_equal(backend.to_numpy(a.data), backend.to_numpy(b.data)), name
    assert second.history["loss"] == straight.history["loss"]
    # The first fit validated where it ended (step 5, off the grid of 3); as the run goes on,
    # that closing validation leaves the history, which is then the straight run's, all of it.
    assert first.history["val_step"] == [3, 5]
    assert second.history == straight.history and straight.history["val_step"] == [3, 6, 9, 10]


def test_a_nan_stops_training_naming_the_step_and_parameter():
    backend.seed(0)
    trainer = _trainer()
    trainer.fit(2, progress=False)
    w = trainer.model.blocks.blocks[1].ffn.layer.W_1.W
    w.data[0, 0] = np.nan
    # A NaN in the forward reaches every gradient below it; the first in model order is named.
    with pytest.raises(TrainingDiverged, match=r"at step 3: loss nan; the first parameter whose "
                                               r"gradient is not finite is tok_emb\.W \(17, 16\)"):
        trainer.fit(5, progress=False)


def _fit_quietly(lr, warmup, steps=40):
    """Train the tiny model at ``lr`` with NumPy's warnings as errors. -> the trainer"""
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8)
    trainer = Trainer(model, AdamW(model, lr), lambda: data.random_windows(TEXT, 4, 8),
                      schedule=WarmupCosine(lr, warmup, steps))
    with warnings.catch_warnings():
        warnings.simplefilter("error")             # an overflow warning would fail the test
        trainer.fit(steps, progress=False)
    return trainer


def test_a_loss_far_above_a_uniform_guess_after_warm_up_is_divergence():
    # lr 10 sends the loss into the thousands without ever reaching inf: the mean of steps 7-16,
    # the first window after 15 warm-up steps, is far above 3 × log 17 = 8.5.
    with pytest.raises(TrainingDiverged, match=r"at step 16: the mean loss of the last 10 steps is "
                                               r"\d+(\.\d+)?, more than 3 × log\(17\) = 8\.5"):
        _fit_quietly(10.0, warmup=15)


def test_an_overflowing_step_is_reported_without_numpy_warnings():
    # lr 1e6 overflows within a few steps: a loss or a gradient becomes inf or NaN (which comes
    # first depends on the order of the float operations), and that step is named, not warned.
    with pytest.raises(TrainingDiverged, match=r"training diverged at step [2-6]: loss "):
        _fit_quietly(1e6, warmup=2)


def test_a_healthy_run_is_not_divergence():
    trainer = _fit_quietly(1e-2, warmup=2)
    losses = trainer.history["loss"]
    assert len(losses) == 40 and losses[-1] < losses[0]


def test_history_records_every_step():
    backend.seed(0)
    trainer = _trainer()
    history = trainer.fit(4, progress=False)
    assert history["step"] == [1, 2, 3, 4] and len(history["loss"]) == 4
    assert history["lr"][0] == pytest.approx(5e-3)                 # warm-up: step 1 of 2
    assert history["val_step"] == [3, 4]


def test_each_step_moves_the_weights_at_its_own_scheduled_rate():
    """The lr set after optimizer.step() ran every step at the previous step's rate (step 1 at
    the full one: no warm-up), and the history, which records the rate set, said nothing."""
    backend.seed(0)
    trainer = _trainer()
    used, step = [], trainer.optimizer.step

    def recording():
        used.append(trainer.optimizer.lr)              # the rate the update is made with
        step()
    trainer.optimizer.step = recording
    trainer.fit(4, progress=False)
    assert used == pytest.approx([WarmupCosine(1e-2, 2, 10)(t) for t in (1, 2, 3, 4)])
    assert used == pytest.approx(trainer.history["lr"])


def _saved(tmp_path):
    """A run directory holding one checkpoint. -> the step directory of that checkpoint"""
    backend.seed(0)
    trainer = _trainer()
    trainer.fit(1, progress=False)
    return checkpoint.save(tmp_path / "run", trainer.model, trainer)


def test_checkpoints_leave_no_temporary_files_and_replace_atomically(tmp_path, monkeypatch):
    directory = _saved(tmp_path)
    run = directory.parent
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints.txt", "step-000001"]
    assert sorted(p.name for p in directory.iterdir()) == ["checkpoint.json", "weights.npz"]
    before = (run / "checkpoints.txt").read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(checkpoint.os, "replace", crash)
    trainer = _trainer()                      # the run's own, a step on: a save it allows
    trainer.step = 2
    with pytest.raises(OSError):
        checkpoint.save(run, trainer.model, trainer)
    monkeypatch.undo()
    assert (run / "checkpoints.txt").read_bytes() == before         # the old one is current
    assert checkpoint.load(run).meta["step"] == 1
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


def test_a_pickle_inside_the_weights_is_refused(tmp_path):
    directory = _saved(tmp_path)
    np.savez(directory / "weights.npz", **{"model/tok_emb.W": np.array([object()], dtype=object)})
    meta = json.loads((directory / "checkpoint.json").read_text())
    import hashlib
    meta["weights_sha256"] = hashlib.sha256((directory / "weights.npz").read_bytes()).hexdigest()
    (directory / "checkpoint.json").write_text(json.dumps(meta))
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(directory)


def test_missing_corrupt_and_altered_checkpoints(tmp_path):
    with pytest.raises(checkpoint.CheckpointError, match="nothing: no such folder; wanted a run"):
        checkpoint.load(tmp_path / "nothing")
    (tmp_path / "other").mkdir()          # a folder of something else: it, too, was "not found"
    with pytest.raises(checkpoint.CheckpointError, match="other: holds no checkpoint [(]no "
                                                         "checkpoints.txt, no checkpoint.json[)]"):
        checkpoint.load(tmp_path / "other")
    directory = _saved(tmp_path)
    (directory / "weights.npz").write_bytes(b"garbage")
    with pytest.raises(checkpoint.CheckpointError, match="does not match"):
        checkpoint.load(directory)
    (directory / "checkpoint.json").write_text("{not json")
    with pytest.raises(checkpoint.CheckpointError, match="corrupt"):
        checkpoint.load(directory)


def test_a_checkpoint_of_another_config_names_its_mismatches_and_counts_the_rest(tmp_path):
    directory = _saved(tmp_path)
    other = DecoderLM(17, 8, 2, 1, max_len=8)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(directory, other)
    message = str(err.value)
    assert "d_model: saved 16, model 8; n_layers: saved 2, model 1" in message
    assert "tok_emb.W: saved (17, 16), model (17, 8)" in message       # a shape, first
    weights = other.misfits(checkpoint.load(directory).model.state_dict())
    assert any(w.startswith("unexpected blocks.blocks.1.") for w in weights)
    assert message.endswith(f"; and {len(weights) - 6} more; wanted a DecoderLM of the saved "
                            f"config (dropout, attn_dropout, max_len may differ), or "
                            f"load(directory) to build it"), message


def test_a_model_of_ones_own_is_refused_before_anything_is_written(tmp_path):
    """A checkpoint rebuilds a model from its kind and config, which only minitf's models have:
    another Module is told how to save its weights instead, and no folder is left behind."""
    import minitf.nn as nn

    with pytest.raises(TypeError, match=r"^checkpoint.save: model is a Linear; wanted one of "
                                        r"minitf's models \(DecoderLM, .*state_dict\(\)"):
        checkpoint.save(tmp_path / "run", nn.Linear(2, 2))
    assert not (tmp_path / "run").exists()


def test_progress_written_to_a_file_is_a_line_per_validation_not_a_redrawn_bar(capsys):
    """`minitf train > log 2>&1` wrote the bar's every redraw, each after a carriage return:
    one line of thousands of characters. Off a terminal, progress is a line every eval_every
    steps (and at the last)."""
    backend.seed(0)
    _trainer().fit(7, progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert [line.split()[:2] for line in lines] == [["step", "3/7"], ["step", "6/7"],
                                                    ["step", "7/7"]], err
    assert all(" loss " in line and " lr " in line and " tok/s " in line and " val 0.000" in line
               for line in lines)


def test_divergence_is_declared_at_the_first_full_window():
    """With no warm-up, the first window of divergence_window losses is full at step 10: a run
    far above chance from its first step is stopped there. Counted one short (len(past) < n),
    it trained a step more and was named at step 11."""
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8)
    model.norm.gamma.data[...] = 100.0             # logits ×100: a loss far above log 17
    trainer = Trainer(model, SGD(model, lr=0.0), lambda: data.random_windows(TEXT, 4, 8))
    with pytest.raises(TrainingDiverged, match=r"^training diverged at step 10: the mean loss of "
                                               r"the last 10 steps is \d+(\.\d+)?, more than "
                                               r"3 × log\(17\) = 8\.5"):
        trainer.fit(20, progress=False)
    assert trainer.step == 10 and len(trainer.history["loss"]) == 9
    assert min(trainer.history["loss"]) > 8.5


def test_the_trainer_clips_the_gradients_to_clip():
    """clip=1e-3: the gradients the optimizer stepped on have a global norm of at most 1e-3.
    Had the trainer only measured the norm (grad_norm), they were used unclipped."""
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8)
    trainer = Trainer(model, AdamW(model, 1e-2), lambda: data.random_windows(TEXT, 4, 8),
                      clip=1e-3)
    trainer.train_step()
    assert grad_norm(model) <= 1e-3 * (1 + 1e-6)
    assert grad_norm(model) == pytest.approx(1e-3, rel=1e-4)          # it was far above


def test_without_a_schedule_the_history_records_the_optimizer_s_lr():
    """schedule=None keeps optimizer.lr, and history["lr"] holds it at every step (it held
    None, which the loss plot and the progress line cannot show)."""
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8)
    trainer = Trainer(model, AdamW(model, 3e-3), lambda: data.random_windows(TEXT, 4, 8))
    history = trainer.fit(4, progress=False)
    assert history["lr"] == [3e-3] * 4


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_a_second_ctrl_c_stops_at_once():
    """The first SIGINT inside stop_on_signals asks the trainer to stop after its step; the
    second raises KeyboardInterrupt at once (else a run stuck in one long step could not be
    stopped), and the previous handler is back afterwards."""
    trainer = _trainer()
    before = signal.getsignal(signal.SIGINT)
    with stop_on_signals(trainer):
        os.kill(os.getpid(), signal.SIGINT)
        assert trainer.stop_requested == signal.SIGINT
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_validation_runs_in_eval_mode():
    """validate() turns dropout off: with dropout 0.5 its loss is the eval-mode loss, the same
    on every call. Left in training mode (as train_step leaves the model), each call drew
    other dropout masks."""
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8, dropout=0.5)
    x, y = data.random_windows(TEXT, 4, 8)
    trainer = Trainer(model, AdamW(model, 1e-2), lambda: data.random_windows(TEXT, 4, 8),
                      evaluate=lambda: model.loss(x, y)[0])
    trainer.train_step()
    first, second = trainer.validate(), trainer.validate()
    model.eval()
    assert first == second == model.loss(x, y)[0]
    assert trainer.history["val_loss"] == [first, second]


def test_a_trainer_clips_the_gradients_norm_at_1_unless_told(monkeypatch):
    """Trainer(clip=None) by default passed every test: only clip=1e-3, given, was tested."""
    import minitf.train as train
    seen = []

    def recording(model, max_norm):
        seen.append((grad_norm(model), max_norm))                # before the clipping
        return clip_grad_norm(model, max_norm)
    monkeypatch.setattr(train, "clip_grad_norm", recording)
    backend.seed(0)
    model = DecoderLM(17, 16, 2, 2, max_len=8)
    updates = []
    optimizer = SGD(model, lr=0.0)
    step = optimizer.step
    optimizer.step = lambda: (updates.append(grad_norm(model)), step())
    Trainer(model, optimizer, lambda: data.random_windows(TEXT, 4, 8)).train_step()
    (raw, max_norm), = seen
    assert max_norm == 1.0 and raw > 1.0 and updates[0] == pytest.approx(1.0, rel=1e-5)


def test_a_second_signal_stops_at_once_naming_itself():
    """The first asks for a stop after the step under way; the second raises StoppedAtOnce, a
    KeyboardInterrupt that names the signal and carries its number (the exit status is 128 + it):
    it was a bare KeyboardInterrupt, "interrupted" and 130 even for a SIGTERM."""
    trainer = _trainer()
    with stop_on_signals(trainer):
        os.kill(os.getpid(), signal.SIGTERM)
        assert trainer.stop_requested == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt) as stopped:      # caught, whatever its kind
            os.kill(os.getpid(), signal.SIGTERM)
    assert type(stopped.value) is StoppedAtOnce and stopped.value.signum == signal.SIGTERM
    assert str(stopped.value) == "interrupted (SIGTERM) a second time: stopped at once"
