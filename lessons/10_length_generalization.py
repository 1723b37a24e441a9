"""
Which positional scheme survives longer inputs?
===============================================

A Transformer's weights do not depend on the sequence length, so nothing stops a model trained
on 32 characters from reading 256. Whether it still *works* there depends on how it was told
about positions. Here we train five tiny character language models that differ only in their
positional scheme (learned, sinusoidal, RoPE, ALiBi, T5 buckets), all on windows of 32
characters, and measure their held-out loss on positions they never saw in training.

Run it: ``minitf lesson 10`` (about 12 seconds: five short trainings), or as a plain script,
``python lessons/10_length_generalization.py``.
"""

# %%
import numpy as np

import minitf.functional as F
from minitf import backend, data, viz
from minitf.models import DecoderLM
from minitf.optim import AdamW, WarmupCosine
from minitf.train import Trainer

backend.precision("float64")
backend.seed(0)

# %% [markdown]
# The weights do not know n
# -------------------------
#
# One deck counts the parameters of a block, 4d² for the attention and 2·d·d_ff for the
# feed-forward network, and points out that neither the sequence length n nor the batch size
# enters the count: nothing in the weights limits how long an input may be. Whether a model
# stays *good* at lengths it never trained on is another matter, which the deck leaves for
# later and this lesson measures.
#
# Check the first half with minitf's ``DecoderLM``. Its ``max_len`` is the longest input it
# accepts. For four schemes it is only a guard: sinusoids are computed on the fly, RoPE and ALiBi
# are formulas inside attention, and T5's table has one entry per distance *bucket*, not per
# position. Only the learned scheme stores a vector for each position, so only its size grows
# with ``max_len``.

# %%
SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "relative")
text = data.default_corpus()
tok = data.CharTokenizer.fit(text)
V, d = tok.vocab_size, 32


def make(positional, max_len):
    return DecoderLM(V, d_model=d, n_heads=4, n_layers=2, max_len=max_len, positional=positional)


counts = {s: (make(s, 32).num_parameters(), make(s, 4096).num_parameters()) for s in SCHEMES}
for scheme, (short, long) in counts.items():
    print(f"{scheme:>10}: {short:,} parameters at max_len 32, {long:,} at max_len 4096")
assert all(short == long for s, (short, long) in counts.items() if s != "learned"), \
    "without a learned table the parameter count does not depend on the length (deck 000)"
assert counts["learned"][1] - counts["learned"][0] == (4096 - 32) * d, \
    "the learned table adds one d-vector per position: (4096 − 32) · 32 more"
print("✓ only the learned table grows with the length; every other model runs at any n")

# %% [markdown]
# The experiment
# --------------
#
# The text is the Python documentation that comes with minitf, split into the first 90 % for
# training and the last 10 % held out. Each model (d_model 32, 4 heads, 2 pre-LN blocks, about
# 29,000 parameters) starts from the same seed and sees the same 300 batches of 16 random
# windows of 32 characters, with AdamW, a warm-up and a cosine decay. The learned model gets a
# table of exactly 32 positions; the others accept up to 256. Float32 is plenty here.
#
# Then every model reads the first 16,384 held-out characters, cut into windows of 32, 64, 128
# and 256. At n = 32 we score every position: that is the model on familiar ground. At
# n > 32 we score only the positions from 32 on, the ones it has never seen.

# %%
train_ids, held_out = data.split(tok.encode(text))
eval_ids = held_out[:16_384 + 1]
N, LENGTHS = 32, (32, 64, 128, 256)


def train(positional, batches, lr=1e-2):
    backend.seed(0)
    model = make(positional, N if positional == "learned" else LENGTHS[-1])
    batch = iter(batches)                                     # every model: the same batches
    trainer = Trainer(model, AdamW(model, lr), lambda: next(batch),
                      schedule=WarmupCosine(lr, 30, len(batches), lr / 10))
    trainer.fit(len(batches), progress=False)
    return model.eval()


def position_losses(model, n):
    """Held-out loss at every position of windows of n characters: (n,), averaged over windows."""
    x, y = data.evaluation_windows(eval_ids, n)
    logp, _ = F.log_softmax(model(x))                         # (windows, n, V)
    return -np.take_along_axis(logp, y[..., None], axis=-1)[..., 0].mean(axis=0)


batches = [data.random_windows(train_ids, 16, N) for _ in range(300)]   # (x, y): (16, 32) each
with backend.precision("float32"):
    models = {scheme: train(scheme, batches) for scheme in SCHEMES}
    curves = {scheme: {n: position_losses(model, n) for n in LENGTHS
                       if scheme != "learned" or n <= N}
              for scheme, model in models.items()}

unseen = {s: [c[N].mean()] + [c[n][N:].mean() for n in LENGTHS[1:] if n in c]
          for s, c in curves.items()}
print("held-out loss (nats/char): at n = 32, then on positions ≥ 32 for n = 64, 128, 256")
for scheme, losses in unseen.items():
    print(f"{scheme:>10}: " + "  ".join(f"{x:.3f}" for x in losses))
bigram = data.bigram_loss(train_ids, eval_ids, V)
print(f"character bigram model on the same split: {bigram:.3f}")
assert all(losses[0] < bigram for losses in unseen.values()), \
    f"at the training length every model should beat the bigram's {bigram:.3f}: {unseen}"

# %% [markdown]
# Positions 32 and beyond
# -----------------------
#
# At the training length all five models are close, and all beat a character bigram model:
# they have learned something beyond "which letter follows which". Past it, they part ways.
#
# The learned model cannot even be asked. A learned table (the Vision Transformer uses one, for
# its fixed number of patches) has rows for positions 0–31 and nothing else, so a window of 64
# is refused with an error rather than answered with garbage. The lectures name this as the
# learned table's weakness: performance drops when the lengths in training and at test differ.
# Here it does not drop; it is undefined.
#
# In the figure below (right panel) the sinusoidal model's loss jumps as soon as the window
# passes position 32: every stretch of 8 positions beyond it is worse than any stretch before
# it, all the way to position 255. How the curve wanders out there (where it peaks, whether it
# falls back) is not a property of sinusoids: train with another seed and it changes.

# %%
x64, _ = data.evaluation_windows(eval_ids, 64)
try:
    with backend.precision("float32"):
        models["learned"](x64)
    raised = None
except ValueError as err:
    raised = err
print(f"learned model on 64 characters: ValueError: {raised}")
assert raised is not None and "max_len=32" in str(raised), \
    "a learned table has no vector for position 32 and beyond: the model must refuse (deck 003)"

ratio = {s: losses[-1] / losses[0] for s, losses in unseen.items() if len(losses) > 1}
worst_alibi = max(unseen["alibi"][1:]) / unseen["alibi"][0]
ratios = ",  ".join(f"{s} {r:.2f}" for s, r in ratio.items())
print(f"loss on positions 32–255 of a 256 window ÷ loss at the training length:\n   {ratios}")
assert all(np.isfinite(c[n]).all() for c in curves.values() for n in c), "every loss is finite"
assert worst_alibi <= 1.01, \
    f"ALiBi should stay flat past the training length (deck 003): {worst_alibi:.3f}"
assert ratio["sinusoidal"] >= 1.2, f"sinusoids should degrade on unseen positions: {ratios}"
assert ratio["rope"] >= 1.2, f"RoPE should degrade too in this experiment: {ratios}"
assert ratio["alibi"] < ratio["relative"] < min(ratio["sinusoidal"], ratio["rope"]), \
    f"T5 buckets should degrade, but less than sinusoids and RoPE, ALiBi least: {ratios}"
print("✓ ALiBi stays flat; sinusoids and RoPE degrade, T5 less; the learned table refuses")

fig, axes = viz.figure(1, 2, size=(11, 4.2))
colour = dict(zip(SCHEMES, ("C4", "C1", "C2", "C3", "C0")))
name = {"learned": "learned (only n = 32)", "sinusoidal": "sinusoidal", "rope": "RoPE",
        "alibi": "ALiBi", "relative": "T5 (relative)"}                    # the prose's names
for scheme, losses in unseen.items():
    axes[0].plot(LENGTHS[:len(losses)], losses, marker="*" if scheme == "learned" else "o",
                 ms=13 if scheme == "learned" else 5, lw=1.6, color=colour[scheme],
                 zorder=4 if scheme == "learned" else 3,
                 label=name[scheme])
axes[0].axvline(N, color="gray", ls="--", lw=1, label="training length 32")
axes[0].set_xscale("log", base=2)
axes[0].set_xticks(LENGTHS, labels=[str(n) for n in LENGTHS])
axes[0].set(xlabel="evaluation length n (characters)",
            ylabel="held-out loss on positions ≥ 32 (nats/char)",
            title="Loss on unseen positions (at n = 32: all positions)")
axes[0].grid(alpha=0.3)
axes[0].legend(fontsize=8)
bins = np.arange(0, 256, 8)
for scheme in SCHEMES[1:]:
    axes[1].plot(bins + 4, curves[scheme][256].reshape(-1, 8).mean(1), lw=1.4,
                 color=colour[scheme], label=name[scheme])
axes[1].axvline(N, color="gray", ls="--", lw=1, label="training length 32")
axes[1].set(xlabel="position in a window of 256 (mean over 8 positions)",
            ylabel="held-out loss (nats/char)", title="Where the loss goes up, n = 256")
axes[1].grid(alpha=0.3)
axes[1].legend(fontsize=8)
viz.save(fig, "10_length_generalization")

sinusoid = curves["sinusoidal"][256].reshape(-1, 8).mean(1)             # the right panel's curve
inside, beyond = sinusoid[:N // 8], sinusoid[N // 8:]                   # positions < 32, ≥ 32
print(f"sinusoidal, n = 256, mean over 8 positions: at most {inside.max():.2f} before "
      f"position 32, at least {beyond.min():.2f} from 32 on (highest {beyond.max():.2f})")
assert beyond.min() > inside.max(), \
    "past position 32 every stretch of the sinusoidal model's loss is worse than any before it"

# %% [markdown]
# Why some schemes break
# ----------------------
#
# Every scheme that fails meets, past position 31, an input it was never trained on:
#
# * **Sinusoids.** Position 100 is a vector no training window contained. The slow dimensions
#   had barely moved in 32 positions, and now they take values the first layer has never seen.
# * **T5 buckets.** In a window of 32 the largest distance is 31, which falls in bucket 21 (of
#   32, with max_distance 128). The rows for buckets 22–31 never received a gradient, so they
#   are still the small random numbers they started as: the model meets untrained biases.
# * **RoPE.** The score depends on the offset only, but an offset of 200 is still new: a pair
#   that turns 0.1 radians per position covered at most 3.1 radians in training, less than
#   half a turn, and at offset 200 it has turned about three times round.
# * **ALiBi.** The bias −m·distance is a rule, not a table. At distance 200 it is a larger
#   penalty of the same kind, and the softmax just makes far keys weigh less.

# %%
pe = F.sinusoidal_table(256, d)                               # (256, 32): the fixed table
nearest = np.linalg.norm(pe[:, None] - pe[None, :N], axis=-1).min(axis=1)
print(f"sinusoids: distance between neighbours {np.linalg.norm(pe[1] - pe[0]):.2f}; from "
      f"position 64 / 255 to the nearest training position {nearest[64]:.2f} / {nearest[255]:.2f}")

trained_buckets = np.unique(F.relative_position_buckets(N, N, bidirectional=False))
long_buckets = np.unique(F.relative_position_buckets(256, 256, bidirectional=False))
with backend.precision("float32"):
    backend.seed(0)
    start = make("relative", 256)                             # the same initial weights as trained
untouched = [b for b in long_buckets if b not in trained_buckets]
same = all(np.array_equal(new.self_attn.layer.relative_bias.table.data[untouched],
                          old.self_attn.layer.relative_bias.table.data[untouched])
           for new, old in zip(models["relative"].blocks.blocks, start.blocks.blocks))
print(f"T5: buckets used by 32 tokens {trained_buckets.min()}–{trained_buckets.max()}, by 256 "
      f"tokens {long_buckets.min()}–{long_buckets.max()}; rows {untouched[0]}–{untouched[-1]} "
      f"unchanged by training: {same}")

cos, sin = F.rope_angles(2, 8)                                # d_head = 32 / 4 heads = 8
omega = np.arctan2(sin[1], cos[1])                            # radians per position, per pair
print("RoPE: turn per position", np.round(omega, 4), "\n      at offset 31 ",
      np.round(31 * omega, 2), "\n      at offset 255", np.round(255 * omega, 2))
assert nearest[64] > 2 * np.linalg.norm(pe[1] - pe[0]), \
    "position 64's sinusoid should be far from every training position's"
assert trained_buckets.max() == 21 and long_buckets.max() == 31 and same, \
    "T5: 256 tokens reach buckets 22–31, whose rows no gradient ever touched"
assert 31 * omega[1] < np.pi < 255 * omega[1], \
    "RoPE: the 0.1 rad/position pair covers under half a turn in training, several beyond"
print("✓ past 31, sinusoids, T5 rows and RoPE angles are new to the model; ALiBi's rule is not")

# %% [markdown]
# A fair caveat: these models are tiny and briefly trained, and the lectures' praise of RoPE
# ("great extrapolation") is not what we measure here. Long-context models that use RoPE do
# not rely on it to extrapolate by itself: they are trained on long windows, or stretch the
# angles so that the long input lands in the range seen in training. ALiBi was designed for
# exactly this test, train short and read long, and passes it.
#
# What to remember
# ----------------
#
# * No parameter depends on n (except a learned position table), so any length *runs*;
#   whether it *works* depends on the positional scheme.
# * A learned table has nothing for positions past its end: the model refuses.
# * Sinusoids, T5 buckets and RoPE all meet something new beyond the training length (a new
#   vector, an untrained bucket, an unseen angle) and their loss rises.
# * ALiBi's distance penalty is a rule that keeps applying: its loss on positions 32–255 is
#   within a percent of its loss at the training length.
# * Which scheme a model uses decides what it can do past its training length: here only the
#   one whose positions are a rule about distance, not a vector per position, held its loss.
#
# Next, lesson 11: a decoder-only language model trained properly, and what it learns.
