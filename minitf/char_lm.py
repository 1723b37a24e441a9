"""The main job: train a character-level language model on a text and show what it learned.

    text -> CharTokenizer -> ids -> 90 % train / 10 % validation (contiguous)
    DecoderLM (or, with --model rnn / lstm, the recurrent baseline RNNLM) trained by teacher
    forcing on random windows, AdamW, warm-up + cosine
    at the end: held-out loss beside a character-bigram model's, a few samples, a checkpoint
Run it as ``minitf train``; every setting is a flag (``minitf train --help``).

A run is its output directory: checked before training, locked while one run writes it, never
overwritten by another run. A checkpoint is saved every ``--save-every`` steps and at the end;
Ctrl-C saves one and says how to continue. The learning-rate schedule is fixed by
``--warmup`` and ``--decay-steps``, never by ``--steps``: so ``--resume`` continues an interrupted
run bit for bit, and a finished run of 20 steps continued with ``--resume --steps 40`` ends with
exactly the weights of one run of 40 steps.
"""
from __future__ import annotations

import shlex
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import minitf.functional as F
from minitf import checkpoint, data, rundir
from minitf.backend import backend_name, seed, to_device
from minitf.generate import generate
from minitf.memory import refuse_a_step_beyond_memory
from minitf.models import DecoderLM, RNNLM
from minitf.nn import no_grad
from minitf.optim import AdamW, WarmupCosine
from minitf.resume_checks import (check_resume, check_same_characters,
                                  refuse_a_folder_of_other_files, refuse_a_step_directory,
                                  refuse_to_overwrite)
from minitf.train import STOPPING_SIGNALS, StoppedAtOnce, Trainer, stop_on_signals
from minitf.validate import check_int, check_path, check_probability, check_real

DEFAULT_OUT = "runs/lm"
FAST_OUT = "runs/fast"          # --fast's own: a smoke run beside the main job is not refused
MODEL_CHOICES = ("transformer", "rnn", "lstm")


@dataclass
class RunConfig:
    """Everything that defines a run (the defaults are the measured ones in the README).

    A field is the ``minitf train`` flag of its name (``--d-model`` sets ``d_model``,
    ``--no-progress`` clears ``progress``); ``weight_decay``, ``clip``, ``samples`` and
    ``sample_length`` have no flag and are set here only. ``run(RunConfig(steps=200))`` is
    ``minitf train --steps 200`` from Python."""
    text: str | None = None          # a text file; None: the default corpus
    steps: int = 800
    batch_size: int = 32
    context: int = 64
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int | None = None
    positional: str = "rope"
    model: str = "transformer"       # or "rnn", "lstm": RNNLM, d_model wide (heads, blocks unused)
    dropout: float = 0.0
    lr: float = 5e-3
    warmup: int | None = None        # None: min(50, decay_steps // 10)
    decay_steps: int = 800           # where the cosine reaches lr / 10 (and stays): not --steps
    weight_decay: float = 0.1
    clip: float = 1.0
    eval_every: int = 100
    save_every: int = 100            # a checkpoint every N steps (0: only at the end)
    seed: int = 0
    out: str | None = None           # None: the --resume directory, else runs/lm
    resume: str | None = None
    samples: int = 2
    sample_length: int = 240
    progress: bool = True

    def __post_init__(self):
        """Each number checked as its flag is, in its own name: from Python, RunConfig(samples=-1)
        or n_layers=0 was taken, and a bad sample_length was refused by generate after training."""
        where = "RunConfig"
        for name in ("steps", "batch_size", "context", "d_model", "n_heads", "n_layers",
                     "decay_steps", "eval_every", "d_ff", "warmup", "save_every", "seed",
                     "samples", "sample_length"):
            value = getattr(self, name)
            if not (value is None and name in ("d_ff", "warmup")):
                low = 0 if name in ("warmup", "save_every", "seed", "samples",
                                    "sample_length") else 1
                check_int(value, name, where, low=low)
        for name, low, low_open in (("lr", 0, True), ("weight_decay", 0, False),
                                    ("clip", 0, True)):
            if not (name == "clip" and self.clip is None):       # None: no clipping (Trainer)
                check_real(getattr(self, name), name, where, low=low, low_open=low_open)
        check_probability(self.dropout, "dropout", where)
        for name in ("text", "out", "resume"):
            if getattr(self, name) is not None:
                check_path(getattr(self, name), name, where)

    @classmethod
    def fast(cls, **overrides) -> "RunConfig":
        """A smoke run of a few seconds: the whole pipeline, at toy size, saved in runs/fast."""
        small = dict(steps=30, batch_size=8, context=32, d_model=32, n_heads=2, n_layers=1,
                     eval_every=15, warmup=5, decay_steps=30, sample_length=60, samples=1,
                     out=None if overrides.get("resume") else FAST_OUT)   # resumed: saved there
        return cls(**{**small, **overrides})

    @classmethod
    def resuming(cls, directory, **overrides) -> "RunConfig":
        """The settings of the run saved in ``directory``, but for ``overrides`` (the flags
        given): ``minitf train --resume DIR`` alone finishes the run as it was started."""
        saved = checkpoint.read_meta(directory).get("extra", {}).get("run", {})
        inherited = {f.name for f in fields(cls)} - {"out", "resume", "progress"}
        settings = {key: value for key, value in saved.items() if key in inherited}
        if "decay_steps" not in saved and "steps" in saved:   # saved before --decay-steps:
            settings["decay_steps"] = saved["steps"]         # its cosine ended at its total
        return cls(**{**settings, **overrides, "resume": str(directory)})


def _held_out_loss(model, x, y, batch_size: int = 32) -> float:
    """Mean cross-entropy over all (x, y) windows, in chunks (every window has n targets)."""
    total = 0.0
    for i in range(0, len(x), batch_size):
        with no_grad():                           # no backward follows: the layers keep nothing
            logits = model(to_device(x[i:i + batch_size]))
        loss, _ = F.cross_entropy(logits, to_device(y[i:i + batch_size]))
        total += float(loss) * len(x[i:i + batch_size])
    return total / len(x)


def _spread(count: int, k: int) -> list[int]:
    """k indices spread evenly over range(count), first and last included; all of them if
    count ≤ k."""
    if count <= k:
        return list(range(count))
    return [i * (count - 1) // (k - 1) for i in range(k)]


def run(config: RunConfig, log=print) -> dict:
    """Train, evaluate, save and sample. -> the run's figures (also saved in the checkpoint)."""
    refuse_a_step_directory(config)
    _check_flags(config)
    out = Path(config.out or config.resume or DEFAULT_OUT)
    new = [p for p in (out, *out.parents) if not p.exists()]    # what probe creates, deepest first
    try:
        rundir.probe(out)                                               # fail before training
        # before a run already there is refused: a mistyped --text is named as such
        text = data.read_text(config.text, "--text") if config.text else data.default_corpus()
        refuse_a_folder_of_other_files(out)
        with rundir.RunLock(out):
            checkpoint.clean(out)                # what a run killed mid-save left behind
            refuse_to_overwrite(out, config.resume)
            return _train(config, text, out, log)
    except BaseException:
        for folder in new:                   # a refused run leaves no folder, nor its parents
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        raise


def _save(out: Path, model, trainer, tokenizer, extra: dict) -> None:
    """checkpoint.save, with a disk that filled up during the run said in the words of the run
    directory (the save leaves any earlier checkpoint there whole)."""
    try:
        checkpoint.save(out, model, trainer, tokenizer, extra=extra)
    except OSError as err:
        raise rundir.RunDirectoryError(
            f"the run directory {out} (--out): could not save the checkpoint of step "
            f"{trainer.step} ({err.strerror}); any earlier checkpoint there is untouched") from None


@contextmanager
def _saying_what_was_saved(out: Path):
    """A second Ctrl-C or SIGTERM stops at once, whatever ran (a step, the held-out loss, the
    last save): its line says which checkpoint is the run's now (it said "interrupted")."""
    try:
        yield
    except StoppedAtOnce as err:
        try:
            step = checkpoint.read_meta(out)["step"]
            saved = (f"the last checkpoint saved is step {step}'s, in {out}/ (to continue: "
                     f"minitf train --resume {shlex.quote(str(out))})")
        except (checkpoint.CheckpointError, OSError, KeyError):
            saved = f"no checkpoint was saved in {out}/"
        stopped = KeyboardInterrupt(f"{err}; {saved}")
        stopped.signum = err.signum
        raise stopped from None


def _stopped(trainer, when: str, out: Path, hint: str) -> KeyboardInterrupt:
    """The one line a run stopped by Ctrl-C or SIGTERM ends with; the exit status is 128 + the
    signal's number."""
    how = STOPPING_SIGNALS.get(trainer.stop_requested, "stop_requested")
    stopped = KeyboardInterrupt(f"interrupted ({how}) {when}; checkpoint saved to {out}/; {hint}")
    stopped.signum = trainer.stop_requested
    return stopped


# The Transformer's own: the recurrent baseline reads only --d-model and --context of these
TRANSFORMER_ONLY = ("n_heads", "n_layers", "d_ff", "positional", "dropout")


def check_model_flags(d_model: int, n_heads: int, positional: str) -> None:
    """A DecoderLM that --d-model, --n-heads and --positional cannot build, said in the flags'
    names (``minitf train`` and ``minitf info`` both ask this before any work)."""
    if d_model % n_heads:
        raise ValueError(f"--d-model {d_model} is not divisible by --n-heads {n_heads}; "
                         f"wanted d_model = n_heads · d_head")
    if positional == "rope" and (d_model // n_heads) % 2:       # features rotate in pairs
        raise ValueError(f"--positional rope needs an even head width; got --d-model "
                         f"{d_model} / --n-heads {n_heads} = {d_model // n_heads}")


def _check_flags(config: RunConfig) -> None:
    """The settings that cannot make the run, refused before the text is read."""
    if config.resume:
        check_resume(config, checkpoint.read_meta(config.resume))
    if config.model == "transformer":
        check_model_flags(config.d_model, config.n_heads, config.positional)
    if not 0 <= _warmup(config) < config.decay_steps:
        raise ValueError(f"--warmup {_warmup(config)}: wanted 0 ≤ warmup < --decay-steps "
                         f"{config.decay_steps}")


def _warmup(config: RunConfig) -> int:
    """The warm-up steps: --warmup, else a tenth of the decay, at most 50."""
    return min(50, config.decay_steps // 10) if config.warmup is None else config.warmup


def _train(config: RunConfig, text: str, out: Path, log) -> dict:
    seed(config.seed)
    tokenizer = data.CharTokenizer.fit(text)
    if config.resume:           # the rest of the resume was checked before the text was read
        check_same_characters(config, checkpoint.read_meta(config.resume), tokenizer)
    warmup = _warmup(config)
    # what --resume reads back: the text as an absolute path, so that a resume run from another
    # folder reads the same file, not a file of that name there (or says that none is there)
    text_path = str(Path(config.text).resolve()) if config.text else None
    settings = asdict(replace(config, out=str(out), warmup=warmup, text=text_path))
    train_ids, val_ids = data.split(tokenizer.encode(text))
    if len(val_ids) < config.context + 1:          # the held-out tenth must hold one window
        text_flag = f"--text {config.text}" if config.text else "the default corpus"
        raise ValueError(f"{text_flag}: {len(text):,} characters hold out "
                         f"{len(val_ids):,} for validation, less than one window of --context "
                         f"{config.context} + 1; wanted at least {10 * (config.context + 1):,} "
                         f"characters, or a smaller --context")
    source = config.text or "the default corpus (the Python documentation)"
    log(f"text: {source}, {len(text):,} characters, "
        f"vocabulary {tokenizer.vocab_size}; {len(train_ids):,} train / {len(val_ids):,} validation")

    model = _build_model(config, tokenizer.vocab_size)
    refuse_a_step_beyond_memory(model, config.batch_size, config.context)
    optimizer = AdamW(model, config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    val_x, val_y = data.evaluation_windows(val_ids, config.context)
    # Periodic validation on 64 windows spread over the held-out text, always the same ones: under
    # 1 % of a run's time, and within about 0.06 of the loss on all of them (a window's loss
    # varies by about 0.5 around their mean; the first 16 alone, the hardest part, read 0.26 high).
    quick = _spread(len(val_x), 64)
    trainer = Trainer(
        model, optimizer, lambda: data.random_windows(train_ids, config.batch_size, config.context),
        schedule=WarmupCosine(config.lr, warmup, config.decay_steps, config.lr / 10),
        evaluate=lambda: _held_out_loss(model, val_x[quick], val_y[quick]),
        eval_every=config.eval_every, clip=config.clip,
        save=lambda: _save(out, model, trainer, tokenizer, extra={"run": settings}),
        save_every=config.save_every)
    if config.resume:
        checkpoint.resume(checkpoint.load(config.resume, model), trainer)
        if Path(config.resume).resolve() == out.resolve():     # its checkpoint is there already
            trainer.saved_step = trainer.step
        log(f"resumed from {config.resume} at step {trainer.step} of {config.steps}")
    if config.steps > config.decay_steps:
        log(f"the learning rate reaches its lowest, {config.lr / 10:.2g}, at step "
            f"{config.decay_steps} (--decay-steps) and stays there until step {config.steps}")
    # The signals are caught from before "model:" is printed (what a script waits for before it
    # signals) until the last checkpoint is saved: a SIGTERM while the held-out loss was measured
    # (a second or two) killed the run with its steps since a periodic save unsaved. One then
    # waits for that checkpoint, and the report and samples are skipped.
    with _saying_what_was_saved(out), stop_on_signals(trainer):
        log(f"model: {_describe(model)}, on {backend_name()}")
        # said once, so that the progress's val and the held-out loss at the end are not taken
        # for one number that moved (they differ by up to about 0.06)
        log(f"val: the loss on {len(quick)} of the {len(val_x):,} held-out windows, every "
            f"{config.eval_every} steps; all of them at the end")
        start = time.perf_counter()
        trainer.fit(config.steps, progress=config.progress)
        seconds = time.perf_counter() - start
        if trainer.step < config.steps:                           # Ctrl-C or SIGTERM
            if trainer.saved_step != trainer.step:  # not just saved (a stop before step 1: step 0)
                _save(out, model, trainer, tokenizer, extra={"run": settings})
            raise _stopped(trainer, f"at step {trainer.step} of {config.steps}", out,
                           f"to continue: minitf train --resume {shlex.quote(str(out))}")

        model.eval()
        val_loss = _held_out_loss(model, val_x, val_y)
        bigram = data.bigram_loss(train_ids, val_ids[:val_x.size + 1], tokenizer.vocab_size)
        last_losses = trainer.history["loss"][-LAST_STEPS:]
        figures = {"steps": trainer.step, "seconds": round(seconds, 1),
                   "tokens_per_second": round(trainer.tokens_per_second),
                   "train_loss": round(sum(last_losses) / len(last_losses), 4),
                   "val_loss": round(val_loss, 4), "bigram_val_loss": round(bigram, 4),
                   "improvement_over_bigram": round(1 - val_loss / bigram, 4) if bigram else None}
        # Saved before the samples draw from the random generator: the state in the checkpoint is
        # the one the training loop left, which a run continued with --resume must start from.
        _save(out, model, trainer, tokenizer, extra={"run": settings, "figures": figures})
    try:               # before the samples: a run stopped as they print has its plot too,
        from minitf.viz import plot_history        # and one stopped as its loss was measured
        plot_history(trainer.history, out / "loss.png", baseline=bigram, title="character LM")
    except ImportError:
        pass
    if trainer.stop_requested:                  # asked for while the held-out loss was measured
        raise _stopped(trainer, f"after its last step ({trainer.step} of {config.steps}), with a "
                       f"held-out loss of {val_loss:.3f}", out,
                       f"to sample it: minitf generate --checkpoint {shlex.quote(str(out))}")
    _report(config, figures, model, tokenizer, text[len(text) - len(val_ids):], val_x.size, log)
    # a prompt the model knows every character of: 'def ' for Python's docs, else the text's
    # first word (the text may lack d, e or f: the hint then failed as printed)
    prompt = "def " if set("def ") <= set(tokenizer.chars) else (text.split() or [text])[0][:8]
    log(f"\ncheckpoint saved to {out}/  (minitf generate --checkpoint {shlex.quote(str(out))} "
        f"--prompt {shlex.quote(prompt)})")
    return figures


def _build_model(config: RunConfig, vocab_size: int):
    """The DecoderLM the flags describe, or the recurrent baseline for --model rnn / lstm; one
    line naming the size flags should its weights alone not fit in memory."""
    if config.model not in MODEL_CHOICES:
        raise ValueError(f"--model {config.model!r}: wanted one of {MODEL_CHOICES}")
    try:
        if config.model != "transformer":
            return RNNLM(vocab_size, config.d_model, cell=config.model, max_len=config.context)
        return DecoderLM(vocab_size, config.d_model, config.n_heads, config.n_layers,
                         config.d_ff, max_len=config.context, positional=config.positional,
                         dropout=config.dropout)
    except MemoryError as err:          # NumPy's words name an array's shape, not a flag
        sizes = (["d_model"] if config.model != "transformer" else
                 ["d_model", "n_layers"] + ["d_ff"] * (config.d_ff is not None))
        given = ", ".join(f"--{name.replace('_', '-')} {getattr(config, name)}" for name in sizes)
        raise ValueError(f"{given}: the model's weights alone do not fit in this machine's "
                         f"memory ({err}); wanted a smaller model") from None


def _describe(model) -> str:
    c = model.config
    if isinstance(model, RNNLM):
        return (f"RNNLM, {model.num_parameters():,} parameters (one {c['cell']} layer, "
                f"d_model={c['d_model']}, d_hidden={c['d_hidden']})")
    blocks = f"{c['n_layers']} block{'s' if c['n_layers'] != 1 else ''}"
    return (f"DecoderLM, {model.num_parameters():,} parameters ({blocks}, "
            f"d_model={c['d_model']}, {c['n_heads']} heads, {c['positional']} positions)")


LAST_STEPS = 20          # the training loss reported: the mean of the last 20 steps' losses


def _last(steps: int) -> str:
    """'20 steps', or as many as ran ('1 step' of --steps 1)."""
    k = min(steps, LAST_STEPS)
    return f"{k} step{'s' * (k != 1)}"


def _report(config, figures, model, tokenizer, held_out: str, n_val: int, log) -> None:
    """The held-out loss beside the bigram model's, and a few samples."""
    change = figures["improvement_over_bigram"]
    # a text the bigram model all but predicts ("abab…"): a ratio to its ~0 loss says nothing
    versus = ("the bigram model all but predicts this text: no ratio to compare"
              if figures["bigram_val_loss"] < 0.01 else
              f"{100 * abs(change):.1f}% {'lower' if change >= 0 else 'HIGHER'} than the "
              f"bigram model")
    log(f"\nheld-out loss (nats/char) on {n_val:,} validation characters:\n"
        f"  {'Transformer' if config.model == 'transformer' else config.model.upper():<11}  "
        f"{figures['val_loss']:.3f}\n  bigram       {figures['bigram_val_loss']:.3f}\n"
        f"  {versus}\n"
        f"train loss (last {_last(figures['steps'])}) {figures['train_loss']:.3f}; "
        f"{figures['seconds']:.0f} s, "
        f"{figures['tokens_per_second']:,} tokens/s")
    # at most the model's context: a longer prompt of minitf's own would warn that it is cropped
    prompt = ("The " if set("The ") <= set(tokenizer.chars) else held_out[:24])[-config.context:]
    for i in range(config.samples):
        ids = generate(model, tokenizer.encode(prompt), config.sample_length, temperature=0.8)
        log(f"\n--- sample {i + 1} (prompt {prompt!r}, temperature 0.8) ---\n"
            f"{tokenizer.decode(ids[0])}")
