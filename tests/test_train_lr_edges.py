"""An infinite learning rate, wherever it can be given (the --lr flag, RunConfig, an optimizer, a
schedule, an optimizer's saved state, a checkpoint's metadata), is refused in one line naming
it: inf passes every "> 0" test, so only the check for a finite number stands in its way."""
import json
import math

import numpy as np
import pytest

from minitf import backend, char_lm, checkpoint, cli, data, optim
from minitf.checkpoint_format import CheckpointError, check_meta
from minitf.models import DecoderLM
from minitf.nn import Linear
from minitf.train import Trainer
from test_checkpoint_faults import _save_step, _small

INF = math.inf


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity", "1e309"])
def test_the_lr_flag_refuses_infinity_in_one_line(value, capsys, tmp_path):
    """Every spelling of ±inf float() reads is refused naming --lr (-inf given as --lr=-inf)."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--text", str(tmp_path / "none.txt"), f"--lr={value}",
                  "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0, err
    assert f"argument --lr: got {value!r}; wanted a finite number > 0 and ≤ 10" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("field, value, wanted", [
    ("lr", INF, "RunConfig: lr must be a finite number > 0; got inf"),
    ("lr", -INF, "RunConfig: lr must be a finite number > 0; got -inf"),
    ("weight_decay", INF, "RunConfig: weight_decay must be a finite number ≥ 0; got inf"),
    ("clip", INF, "RunConfig: clip must be a finite number > 0; got inf")])
def test_a_run_config_refuses_an_infinite_rate_naming_the_field(field, value, wanted):
    """RunConfig(lr=inf) from Python is refused when made, as the flag is, not at step 1."""
    with pytest.raises(ValueError) as refused:
        char_lm.RunConfig(**{field: value})
    assert str(refused.value).startswith(wanted), refused.value


@pytest.mark.parametrize("name, build", [
    ("SGD", lambda ps: optim.SGD(ps, lr=INF)), ("Adam", lambda ps: optim.Adam(ps, lr=INF)),
    ("AdamW", lambda ps: optim.AdamW(ps, lr=INF)), ("Constant", lambda ps: optim.Constant(INF)),
    ("WarmupCosine", lambda ps: optim.WarmupCosine(INF, 10, 100))])
def test_an_optimizer_or_schedule_refuses_lr_inf_when_made(name, build):
    """Each is named with its own class and the value it got."""
    with pytest.raises(ValueError) as refused:
        build(Linear(3, 2))
    assert str(refused.value) == f"{name}: lr must be a finite number ≥ 0; got inf"


def test_an_lr_set_to_inf_by_hand_is_refused_at_the_step_and_no_weight_moves():
    """optimizer.lr = inf set by hand is refused at step() before any weight moves."""
    layer = Linear(3, 2)
    optimizer = optim.AdamW(layer, 1e-3)
    layer.W.grad = backend.to_device(np.ones((3, 2), dtype=layer.W.data.dtype))
    layer.b.grad = backend.to_device(np.ones(2, dtype=layer.b.data.dtype))
    before = [backend.to_numpy(p.data).copy() for p in layer.parameters()]
    optimizer.lr = INF
    with pytest.raises(ValueError, match="^AdamW.step: lr must be a finite number ≥ 0; got "
                                         "inf"):
        optimizer.step()
    assert optimizer.t == 0
    for old, p in zip(before, layer.parameters()):
        np.testing.assert_array_equal(backend.to_numpy(p.data), old)


def test_a_schedule_that_returns_inf_is_refused_before_the_step_is_counted():
    """The Trainer names the schedule and the step it was asked for."""
    model = DecoderLM(10, d_model=16, n_heads=2, n_layers=1, max_len=16)
    ids = np.arange(200) % 10
    trainer = Trainer(model, optim.AdamW(model, 1e-3), lambda: data.random_windows(ids, 4, 8),
                      schedule=lambda step: INF)
    with pytest.raises(ValueError, match=r"^Trainer: schedule\(1\) must be a finite number ≥ 0; "
                                         r"got inf"):
        trainer.train_step()
    assert trainer.step == 0 and trainer.history["loss"] == []


def test_an_optimizer_state_with_lr_inf_is_refused():
    """A saved state whose rate is inf would load, and the first step ruin every weight."""
    optimizer = optim.AdamW(Linear(3, 2))
    saved = optimizer.state_dict()
    saved["lr"] = INF
    with pytest.raises(ValueError, match="^AdamW.load_state_dict: lr must be a finite "
                                         "number ≥ 0; got inf"):
        optimizer.load_state_dict(saved)
    assert optimizer.lr == 1e-3


def test_a_checkpoint_whose_optimizer_lr_is_inf_is_refused(tmp_path):
    """JSON writes inf as Infinity, and reads it back: check_meta refuses it in one line."""
    directory = tmp_path / "run"
    _save_step(directory, _small(), 1)
    found = checkpoint.find(directory)
    meta = json.loads((found / checkpoint.META).read_text())
    check_meta(meta, "here")
    meta["optimizer"]["lr"] = INF
    with pytest.raises(CheckpointError) as refused:
        check_meta(meta, "here")
    assert str(refused.value) == "here: optimizer.lr is inf; wanted a finite number ≥ 0"
    (found / checkpoint.META).write_text(json.dumps(meta))
    assert "Infinity" in (found / checkpoint.META).read_text()
    with pytest.raises(CheckpointError) as refused:
        checkpoint.load(directory)
    assert str(refused.value) == (f"checkpoint {found}: {checkpoint.META}: optimizer.lr is inf; "
                                  f"wanted a finite number ≥ 0")


@pytest.mark.parametrize("value", ["inf", "1e309"])
def test_the_temperature_flag_refuses_infinity_too(value, capsys, tmp_path):
    """--temperature shares the finite-number type of its own: inf passes its "> 0" alone."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["generate", "--checkpoint", str(tmp_path / "run"), "--temperature", value])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0, err
    assert f"argument --temperature: got {value!r}; wanted a finite number > 0" in err
