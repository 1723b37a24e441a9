"""Plots (host only): the loss curves of a run."""
from __future__ import annotations

from pathlib import Path


def plot_history(history: dict, path, baseline: float | None = None, title: str = "") -> Path:
    """Training loss per step and validation loss, with an optional horizontal baseline (e.g. the
    bigram model's held-out loss), saved as an image at ``path``."""
    import matplotlib
    matplotlib.use("Agg")                      # files only: no window, works on any machine
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(history["step"], history["loss"], lw=0.8, alpha=0.7, label="train")
    if history.get("val_step"):
        ax.plot(history["val_step"], history["val_loss"], "o-", label="validation")
    if baseline is not None:
        ax.axhline(baseline, color="gray", ls="--", label="bigram baseline")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
