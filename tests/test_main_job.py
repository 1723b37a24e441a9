"""benchmarks/main_job.py: the README's table of `minitf train`, read from GNU time and the run's
saved figures. A smoke run (--fast, this interpreter) fills every row with numbers that agree
with each other; GNU time's report is read right. No speed is asserted. The figures the table
reads are checked at their source too: a tiny run of minitf train (char_lm) and its settings."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "main_job.py"
REPORT = """\tCommand being timed: "python -m minitf train"
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:09.52
\tMaximum resident set size (kbytes): 189440
\tExit status: 0
"""


@pytest.fixture(scope="module")
def main_job():
    sys.path.insert(0, str(BENCHMARKS))                 # its siblings: machine, sample_words
    try:
        spec = importlib.util.spec_from_file_location("main_job", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("clock, expected", [("1:09.52", 69.52), ("0:01.90", 1.9),
                                             ("1:02:03", 3723.0)])
def test_gnu_times_clock_is_read_as_seconds(main_job, clock, expected):
    assert main_job.seconds(clock) == pytest.approx(expected)


def test_gnu_times_report_is_read_field_by_field(main_job):
    assert main_job.gnu_time_field(REPORT, "Elapsed") == "1:09.52"
    assert main_job.gnu_time_field(REPORT, "Maximum resident set size") == "189440"
    with pytest.raises(SystemExit, match="main_job: GNU time printed no 'Page size' line"):
        main_job.gnu_time_field(REPORT, "Page size")


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="needs GNU time")
def test_a_smoke_run_fills_every_row_and_the_rows_agree():
    done = subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable,
                           "--train-args=--fast", "--samples", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", done.stdout, re.M))
    assert len(rows) == 9, rows                         # nine figures, one run
    number = {row: float(re.match(r"[\d.,]+", value).group().replace(",", ""))
              for row, value in rows.items()}
    held_out, bigram = number["held-out loss"], number["character-bigram model, same split"]
    change = number["Transformer vs bigram"] / 100 * (1 if "lower" in rows["Transformer vs bigram"]
                                                      else -1)
    assert change == pytest.approx(1 - held_out / bigram, abs=2e-3)    # both from 3-digit losses
    assert number["wall time, whole command"] >= number["training time (as printed)"] - 0.5
    assert number["training speed"] > 0 and number["peak memory (max RSS)"] > 10
    assert "CPU: " in done.stdout and "AVX-512: " in done.stdout


def test_bad_counts_are_named():
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--runs and --samples: wanted at least 1; got 0 and 20" in done.stderr


# minitf train itself (minitf/char_lm.py): the figures the table is read from, and the settings
# that make them. One tiny run serves the tests below.

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A --fast-sized run of 22 steps past --decay-steps 20, warm-up left to its default, with
    the Trainer (its optimizer, schedule and history) and the text kept to look at."""
    import random

    from minitf import char_lm, checkpoint

    words = "The quick brown fox jumps over a lazy dog and then some more".split()
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("tiny_run")
    text = "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(100))
    (folder / "words.txt").write_text(text)
    trainers = []

    class KeptTrainer(char_lm.Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            trainers.append(self)

    config = char_lm.RunConfig.fast(text=str(folder / "words.txt"), out=str(folder / "run"),
                                    steps=22, decay_steps=20, warmup=None, context=16,
                                    d_model=16, batch_size=4, eval_every=11, samples=0,
                                    progress=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(char_lm, "Trainer", KeptTrainer)
        figures = char_lm.run(config, log=lambda *args: None)
    (trainer,) = trainers
    return dict(config=config, figures=figures, trainer=trainer, text=text,
                meta=checkpoint.read_meta(folder / "run"))


def test_the_default_warmup_is_a_tenth_of_decay_steps(tiny_run):
    """--warmup unset is min(50, decay_steps // 10): 2 steps for --decay-steps 20 (a fifth,
    4, was saved and used)."""
    assert tiny_run["meta"]["extra"]["run"]["warmup"] == 2
    assert tiny_run["trainer"].schedule.warmup == 2
    assert tiny_run["trainer"].history["lr"][:2] == [0.0025, 0.005]     # then the cosine


def test_the_learning_rate_ends_at_a_tenth_of_lr_past_decay_steps(tiny_run):
    """The cosine reaches lr / 10 at --decay-steps and stays there: steps 20 to 22 trained at
    0.0005, not at 0 (which froze the model for every step past decay_steps)."""
    lr = tiny_run["trainer"].history["lr"]
    assert len(lr) == 22 and lr[19:] == [0.0005] * 3
    assert tiny_run["trainer"].schedule.min_lr == 0.0005


def test_the_optimizer_is_adamw_with_betas_0_9_and_0_95(tiny_run):
    """The settings every figure of the README's table was measured with: AdamW, β = (0.9,
    0.95), weight decay 0.1; another β2 changes every run's losses and samples."""
    optimizer = tiny_run["trainer"].optimizer
    assert type(optimizer).__name__ == "AdamW" and optimizer.betas == (0.9, 0.95)
    assert optimizer.weight_decay == 0.1
    assert tiny_run["trainer"].clip == 1.0        # no flag sets it: only a test sees it change


def test_the_samples_at_the_end_are_drawn_at_the_temperature_they_print(tmp_path, monkeypatch):
    """The README and the sample's header say 0.8; the call could say another."""
    from minitf import char_lm
    drawn, lines = [], []

    def recording(*args, **kwargs):
        drawn.append(kwargs.get("temperature"))
        return generate(*args, **kwargs)
    generate = char_lm.generate
    monkeypatch.setattr(char_lm, "generate", recording)
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat. " * 60)
    char_lm.run(char_lm.RunConfig.fast(text=str(text), out=str(tmp_path / "r"), steps=4,
                                       progress=False), log=lines.append)
    headers = [line for line in lines if "--- sample" in line]
    assert drawn == [0.8] and len(headers) == 1 and "temperature 0.8)" in headers[0]


def test_the_train_loss_is_the_mean_of_the_last_20_steps(tiny_run):
    """figures["train_loss"], printed as "train loss (last 20 steps)": the last step's loss
    alone was reported."""
    losses = tiny_run["trainer"].history["loss"]
    assert len(losses) == 22
    assert tiny_run["figures"]["train_loss"] == round(sum(losses[-20:]) / 20, 4)
    assert round(losses[-1], 4) != tiny_run["figures"]["train_loss"]


def test_a_run_shorter_than_20_steps_says_how_many_its_train_loss_is_the_mean_of():
    """--steps 1 reported "train loss (last 20 steps)"."""
    from minitf.char_lm import _last
    assert (_last(1), _last(7), _last(20), _last(800)) == ("1 step", "7 steps", "20 steps",
                                                           "20 steps")


def test_the_bigram_baseline_is_scored_on_the_same_characters_as_the_model(tiny_run):
    """The held-out loss covers the validation windows, val_x.size + 1 characters; the bigram
    model beside it must be scored on exactly those, not on the whole held-out tenth (whose
    tail the windows leave out)."""
    from minitf import data

    tokenizer = data.CharTokenizer.fit(tiny_run["text"])
    train_ids, val_ids = data.split(tokenizer.encode(tiny_run["text"]))
    val_x, _ = data.evaluation_windows(val_ids, 16)
    assert len(val_ids) > val_x.size + 1                      # a tail the windows leave out
    same = round(data.bigram_loss(train_ids, val_ids[:val_x.size + 1], tokenizer.vocab_size), 4)
    every = round(data.bigram_loss(train_ids, val_ids, tokenizer.vocab_size), 4)
    assert same != every and tiny_run["figures"]["bigram_val_loss"] == same


def test_the_held_out_loss_weighs_every_window_alike_across_chunks():
    """7 windows in chunks of 3 are chunks of 3, 3 and 1: the mean of the three chunks' means
    counted the last window three times over. Token-weighted, it is the loss of all 7 at once."""
    import numpy as np

    import minitf.functional as F
    from minitf import backend, char_lm
    from minitf.models import DecoderLM
    from minitf.nn import no_grad

    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 7, (7, 5)), rng.integers(0, 7, (7, 5))
    with backend.precision("float64"), backend.seed(0):
        model = DecoderLM(7, 8, 2, 1, max_len=5)
        with no_grad():
            whole, _ = F.cross_entropy(model(backend.to_device(x)), backend.to_device(y))
        chunked = char_lm._held_out_loss(model, x, y, batch_size=3)
    assert chunked == pytest.approx(float(whole), rel=1e-12)
