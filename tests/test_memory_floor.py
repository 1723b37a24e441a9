"""The floor of a training step's memory is a floor: every model it prices holds at least that
much during a real step, and ``minitf train`` refuses, in one line, a step that cannot fit."""
import re
import tracemalloc

import numpy as np
import pytest

from minitf import cli, memory
from minitf.cost import (available_memory, decoder_window_numbers, recurrent_window_numbers,
                         training_memory_floor)
from minitf.models import DecoderLM, RNNLM

from test_run_directory import one_line, text  # noqa: F401  (text is a fixture)

DECODERS = {   # (vocab, d_model, n_heads, n_layers, d_ff, n) and DecoderLM's other settings
    "default": ((103, 128, 4, 2, 512, 64), {"positional": "rope"}),
    "learned, wide heads": ((103, 64, 2, 3, 128, 96), {}),
    "relu": ((50, 64, 4, 2, 128, 32), {"activation": "relu"}),
    "relative": ((50, 32, 4, 1, 64, 48), {"positional": "relative"}),
    "long context": ((30, 32, 2, 1, 64, 256), {"positional": "alibi"}),
    "no blocks": ((50, 32, 2, 0, 64, 32), {}),
}


def traced_peak(model, b, n, vocab):
    """NumPy's peak traced memory, beyond what was there before, during one training step."""
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, vocab, (b, n)), rng.integers(0, vocab, (b, n))
    model.loss(x, y)[1]()                        # a first step: lazily made arrays are made
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        model.loss(x, y)[1]()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_step_holds_at_least_its_floor(name):
    (vocab, d, h, L, d_ff, n), settings = DECODERS[name]
    model = DecoderLM(vocab, d, h, L, d_ff, max_len=n, **settings)
    floor = training_memory_floor(decoder_window_numbers(vocab, d, L, d_ff, h, n), 8, 0)
    peak = traced_peak(model, 8, n, vocab)
    assert floor <= peak <= 4 * floor, (floor, peak)        # a floor, and not a loose one


@pytest.mark.parametrize("cell", ["rnn", "lstm"])
def test_a_recurrent_step_holds_at_least_its_floor(cell):
    model = RNNLM(40, 48, d_hidden=64, cell=cell, max_len=32)
    floor = training_memory_floor(recurrent_window_numbers(40, 48, 64, cell, 32), 8, 0)
    peak = traced_peak(model, 8, 32, 40)
    assert floor <= peak <= 4 * floor, (floor, peak)


def test_the_floor_counts_the_weights_four_times_and_grows_with_the_batch():
    window = decoder_window_numbers(103, 128, 2, 512, 4, 64)
    assert training_memory_floor(window, 1, 0) == 4 * window
    assert training_memory_floor(window, 3, 10) == 4 * (3 * window + 40)
    assert training_memory_floor(window, 2, 0, bytes_per_number=8) == 16 * window


def test_available_memory_is_a_plausible_number():
    free = available_memory()
    assert free is None or 2**20 < free < 2**50
    try:                    # where the system says (Linux), it is read: None turned the check off
        with open("/proc/meminfo") as meminfo:
            stated = next(int(line.split()[1]) * 1024 for line in meminfo
                          if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return
    assert free is not None and abs(free - stated) <= 0.1 * stated, (free, stated)


MODEL_FLAGS = {"transformer": ["--d-model", "16", "--n-heads", "2", "--n-layers", "1"],
               "lstm": ["--model", "lstm", "--d-model", "16"]}


@pytest.mark.parametrize("model", MODEL_FLAGS)
def test_train_refuses_a_step_beyond_free_memory_in_one_line(text, tmp_path, monkeypatch, capsys,
                                                             model):
    def train(*flags):
        return cli.main(["train", "--text", text, *MODEL_FLAGS[model], "--context", "16",
                         "--eval-every", "10", "--no-progress", *flags])
    monkeypatch.setattr(memory, "available_memory", lambda: 3 * 2**20)     # 3 MiB free
    out = tmp_path / "run"
    assert train("--batch-size", "4000", "--out", str(out)) == 2
    err = one_line(capsys)
    assert err.startswith("minitf train: --batch-size 4000 × --context 16: a training step of "
                          "this model holds at least "), err
    assert "this machine has 0.0 GiB free; wanted a --batch-size of at most " in err
    assert not out.exists()                                  # a refused run leaves no folder
    advice = re.search(r"at most ([\d,]+), and ([\d,]+) or fewer by one window's step, measured "
                       r"now \([\d.]+ MiB\)$", err)
    fits, sure = (int(k.replace(",", "")) for k in advice.groups())
    assert 0 < sure < fits < 4000, (sure, fits)       # a real step holds more than its floor
    # the number it names is the largest batch the floor lets through
    assert train("--batch-size", str(fits), "--steps", "2",
                 "--out", str(out)) == 0
    capsys.readouterr()
    assert train("--batch-size", str(fits + 1), "--steps", "2",
                 "--out", str(tmp_path / "one more")) == 2
    assert "--batch-size of at most " in one_line(capsys)
    monkeypatch.setattr(memory, "available_memory", lambda: 1000)          # not the weights
    assert train("--out", str(tmp_path / "none")) == 2
    assert one_line(capsys).endswith("not one window fits: wanted a smaller model or --context")


def _refusal(model, batch_size, context) -> str:
    with pytest.raises(ValueError) as refused:
        memory.refuse_a_step_beyond_memory(model, batch_size, context)
    return str(refused.value)


def test_the_batch_it_advises_fits_where_the_floor_alone_would_not(monkeypatch):
    """Relative positions at n = 256 hold 7 × their floor: the largest batch by the floor ran out
    of memory. The advice is a step of one window, traced, and the batch it names fits."""
    n = 256
    model = DecoderLM(30, 16, 2, 1, 32, max_len=n, positional="relative")
    per_window = training_memory_floor(decoder_window_numbers(30, 16, 1, 32, 2, n), 1, 0)
    weights = training_memory_floor(1, 0, model.num_parameters())
    room = 40 * per_window
    monkeypatch.setattr(memory, "available_memory", lambda: weights + room)
    said = re.search(r"at most 40, and (\d+) or fewer by one window's step", _refusal(model, 64, n))
    sure = int(said.group(1))
    assert all(not p.grad.any() for p in model.parameters())          # the model as it was
    assert 0 < sure < 40 and traced_peak(model, sure, n, 30) <= room  # traced here, apart
    assert traced_peak(model, 40, n, 30) > room                       # the floor's 40 does not
    ids = np.random.default_rng(0).integers(0, 30, (1, n))
    monkeypatch.setattr(memory, "available_memory", lambda: weights + 2 * per_window)
    assert _refusal(model, 64, n).endswith(
        "at most 2, and not even 1 fits by one window's step, measured now ("
        f"{memory.step_peak_bytes(model, ids, ids) / 2**20:.1f} MiB): a smaller model "
        "or --context")
    monkeypatch.setattr(memory, "available_memory", lambda: weights + 64 * per_window)
    memory.refuse_a_step_beyond_memory(model, 64, n)               # 64 fit by the floor: let by


def test_a_window_whose_step_runs_out_of_memory_is_said_not_to_fit(monkeypatch):
    def out_of_memory(*args):
        raise MemoryError("Unable to allocate")
    model = DecoderLM(30, 16, 2, 1, 32, max_len=16)
    monkeypatch.setattr(memory, "available_memory",
                        lambda: training_memory_floor(10_000, 2, model.num_parameters()))
    monkeypatch.setattr(memory, "step_peak_bytes", out_of_memory)
    assert _refusal(model, 4000, 16).endswith(
        "not one window fits: wanted a smaller model or --context")


def test_where_the_machine_does_not_say_nothing_is_refused(text, tmp_path, monkeypatch):
    monkeypatch.setattr(memory, "available_memory", lambda: None)
    assert cli.main(["train", "--text", text, *MODEL_FLAGS["transformer"], "--context", "16",
                     "--batch-size", "64", "--steps", "2", "--no-progress",
                     "--out", str(tmp_path / "r")]) == 0


def test_measuring_a_step_leaves_the_gradients_and_the_random_stream_as_they_were():
    """Measured between a backward and the optimizer's step, it zeroed the gradients; with
    dropout it moved minitf's random stream; a model of another kind was an AttributeError."""
    from minitf import backend
    model = DecoderLM(30, 16, 2, 1, 32, max_len=8, dropout=0.1)
    ids = np.random.default_rng(0).integers(0, 30, (2, 8))
    model.loss(ids, ids)[1]()
    grads = [p.grad.copy() for p in model.parameters()]
    stream = backend.rng_state()
    assert memory.step_peak_bytes(model, ids, ids) > 0
    assert all(np.array_equal(p.grad, g) for p, g in zip(model.parameters(), grads))
    assert any(g.any() for g in grads) and backend.rng_state() == stream
    with pytest.raises(TypeError, match="^step_peak_bytes: model must be a minitf model, with "
                                        r"loss\(ids, targets\); got str$"):
        memory.step_peak_bytes("lm", ids, ids)
