"""The main job: train a character-level language model on a text and show what it learned.

    text -> CharTokenizer -> ids -> 90 % train / 10 % validation (contiguous)
    DecoderLM trained by teacher forcing on random windows, AdamW, warm-up + cosine
    at the end: held-out loss beside a character-bigram model's, a few samples, a checkpoint
Run it as ``minitf train``; every setting is a flag (``minitf train --help``).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

import minitf.functional as F
from minitf import checkpoint, data
from minitf.backend import backend_name, seed, to_device
from minitf.generate import generate
from minitf.models import DecoderLM
from minitf.optim import AdamW, WarmupCosine
from minitf.train import Trainer


@dataclass
class RunConfig:
    """Everything that defines a run (the defaults are the measured ones in the README)."""
    text: str | None = None          # a text file; None: the default corpus
    steps: int = 500
    batch_size: int = 32
    context: int = 128
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int | None = None
    positional: str = "learned"
    dropout: float = 0.0
    lr: float = 6e-3
    warmup: int = 50
    weight_decay: float = 0.1
    clip: float = 1.0
    eval_every: int = 100
    seed: int = 0
    out: str = "runs/lm"
    resume: str | None = None
    samples: int = 2
    sample_length: int = 240
    progress: bool = True

    @classmethod
    def fast(cls, **overrides) -> "RunConfig":
        """A smoke run of a few seconds: the whole pipeline, at toy size."""
        small = dict(steps=30, batch_size=8, context=32, d_model=32, n_heads=2, n_layers=1,
                     eval_every=15, warmup=5, sample_length=60, samples=1)
        return cls(**{**small, **overrides})


def _held_out_loss(model, x, y, batch_size: int = 32) -> float:
    """Mean cross-entropy over all (x, y) windows, in chunks (every window has n targets)."""
    total = 0.0
    for i in range(0, len(x), batch_size):
        logits = model(to_device(x[i:i + batch_size]))
        loss, _ = F.cross_entropy(logits, to_device(y[i:i + batch_size]))
        total += float(loss) * len(x[i:i + batch_size])
    return total / len(x)


def run(config: RunConfig, log=print) -> dict:
    """Train, evaluate, sample and save. -> the figures of the run (also saved in the checkpoint)."""
    seed(config.seed)
    text = data.read_text(config.text) if config.text else data.default_corpus()
    tokenizer = data.CharTokenizer.fit(text)
    train_ids, val_ids = data.split(tokenizer.encode(text))
    log(f"text: {config.text or 'the default corpus (pydoc_data.topics)'}, {len(text):,} characters, "
        f"vocabulary {tokenizer.vocab_size}; {len(train_ids):,} train / {len(val_ids):,} validation")

    model = DecoderLM(tokenizer.vocab_size, config.d_model, config.n_heads, config.n_layers,
                      config.d_ff, max_len=config.context, positional=config.positional,
                      dropout=config.dropout)
    optimizer = AdamW(model, config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    val_x, val_y = data.evaluation_windows(val_ids, config.context)
    quick = slice(0, 16)          # periodic validation on the first 16 windows: fast, always the same
    trainer = Trainer(
        model, optimizer, lambda: data.random_windows(train_ids, config.batch_size, config.context),
        schedule=WarmupCosine(config.lr, config.warmup, config.steps, config.lr / 10),
        evaluate=lambda: _held_out_loss(model, val_x[quick], val_y[quick]),
        eval_every=config.eval_every, clip=config.clip)
    if config.resume:
        checkpoint.resume(checkpoint.load(config.resume, model), trainer)
        log(f"resumed from {config.resume} at step {trainer.step}")
    log(f"model: DecoderLM, {model.num_parameters():,} parameters ({config.n_layers} blocks, "
        f"d_model={config.d_model}, {config.n_heads} heads, {config.positional} positions), "
        f"on {backend_name()}")

    start = time.perf_counter()
    trainer.fit(config.steps, progress=config.progress)
    seconds = time.perf_counter() - start

    model.eval()
    val_loss = _held_out_loss(model, val_x, val_y)
    bigram = data.bigram_loss(train_ids, val_ids[:val_x.size + 1], tokenizer.vocab_size)
    last_losses = trainer.history["loss"][-20:]
    figures = {"steps": trainer.step, "seconds": round(seconds, 1),
               "tokens_per_second": round(trainer.tokens_per_second),
               "train_loss": round(sum(last_losses) / len(last_losses), 4),
               "val_loss": round(val_loss, 4), "bigram_val_loss": round(bigram, 4),
               "improvement_over_bigram": round(1 - val_loss / bigram, 4)}
    change = figures["improvement_over_bigram"]
    log(f"\nheld-out loss (nats/char) on {val_x.size:,} validation characters:\n"
        f"  Transformer  {val_loss:.3f}\n  bigram       {bigram:.3f}\n"
        f"  {100 * abs(change):.1f}% {'lower' if change >= 0 else 'HIGHER'} than the bigram model\n"
        f"train loss (last 20 steps) {figures['train_loss']:.3f}; {seconds:.0f} s, "
        f"{figures['tokens_per_second']:,} tokens/s")

    held_out = text[len(text) - len(val_ids):]
    prompt = "The " if set("The ") <= set(tokenizer.chars) else held_out[:24]
    for i in range(config.samples):
        ids = generate(model, tokenizer.encode(prompt), config.sample_length, temperature=0.8)
        log(f"\n--- sample {i + 1} (prompt {prompt!r}, temperature 0.8) ---\n"
            f"{tokenizer.decode(ids[0])}")

    out = Path(config.out)
    checkpoint.save(out, model, trainer, tokenizer, extra={"run": asdict(config), "figures": figures})
    try:
        from minitf.viz import plot_history
        plot_history(trainer.history, out / "loss.png", baseline=bigram, title="character LM")
    except ImportError:
        pass
    log(f"\ncheckpoint saved to {out}/  (minitf generate --checkpoint {out} --prompt 'def ')")
    return figures
