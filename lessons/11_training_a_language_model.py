"""
Training a language model
=========================

Train a decoder-only Transformer to predict the next token, and see what that takes: the text
shifted by one to make inputs and targets, a loss at every position, a sum or a mean of those
losses, and the causal mask that keeps the answer out of sight (without it the model scores almost
perfectly and learns nothing, which we measure). Then: what training changes (the lectures' quiz),
what one training step does, a small character model against the bigram baseline, and a recurrent
language model beside a Transformer.

Run it: ``minitf lesson 11`` (about 5 seconds), or as a plain script,
``python lessons/11_training_a_language_model.py``.
"""

# %%
import math
import time

import numpy as np

import minitf.functional as F
from minitf import backend, cost, cost_families, course, data, models, nn, optim, viz
from minitf.train import Trainer

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# Inputs and targets: the same text, shifted by one
# -------------------------------------------------
#
# A language model learns, at each position of a text, to guess what comes one step later.
# No labels have to be written: the text is its own answer key. Cut one copy of the text
# without its last token and one without its first::
#
#     X = text[:, :-1]      the cat sat on  the mat          what the model reads
#     Y = text[:, 1:]       cat sat on  the mat </s>         what each position must predict
#
# Position t reads X_0 … X_t and is scored on Y_t, the token that follows in the text. At every
# position but the last that token is the next input, Y_t = X_(t+1); at the last it is the text's
# final token, which X leaves out. </s>, the end, is a target like any other: a model learns to stop.

# %%
vocab = data.WordVocabulary(["the cat sat on the mat </s>"])
text, _ = vocab.encode(["the cat sat on the mat </s>"])            # (1, 7) word ids
X, Y = text[:, :-1], text[:, 1:]                                  # (1, 6) each
for t in range(X.shape[1]):
    print(f"position {t}: reads {' '.join(vocab.words[i] for i in X[0, :t + 1]):22} "
          f"-> target {vocab.words[Y[0, t]]!r}")
assert [vocab.words[i] for i in Y[0]] == "cat sat on the mat </s>".split(), \
    "the targets are the text from its second token on, </s> last (deck 000)"
assert [vocab.words[i] for i in X[0]] == "the cat sat on the mat".split(), \
    "the inputs are the text without its last token: Y_t = X_(t+1) until the last position"

corpus = data.default_corpus()                       # Python's documentation, shipped with minitf
tok = data.CharTokenizer.fit(corpus)                 # characters as tokens
train_ids, val_ids = data.split(tok.encode(corpus))
x, y = data.random_windows(train_ids, 4, 24)         # 4 random windows of 24 + 1 characters
print(f"a character window: X = {tok.decode(x[0])!r}\n"
      f"                    Y = {tok.decode(y[0])!r}")
assert (y[:, :-1] == x[:, 1:]).all(), "random_windows returns X and Y shifted by one"
print("✓ X = text[:, :-1], Y = text[:, 1:]: every position has a target, no labelling needed")

# %% [markdown]
# A distribution and a loss at every position
# -------------------------------------------
#
# The model maps the (b, n) input ids to (b, n, V) logits: one score per vocabulary entry at every
# position. A softmax over the last axis turns each row into a distribution over the next token,
# and each position pays its own cross-entropy::
#
#     L_t = −log p_t(Y_t)                the surprise of position t at the true next token
#
# The lectures then **sum** the position losses into one global loss, L = L_cat + L_sat + …,
# while ``F.cross_entropy`` (and every minitf model's ``loss``) takes the **mean** by default.
# The two differ by the factor N, the number of scored positions, and so do their gradients:
# minimizing either finds the same parameters, but with plain SGD the sum needs a learning rate
# N times smaller. The mean keeps the loss on the same scale (nats per token) whatever the batch
# and window size, which is why it is the usual default. ``reduction="sum"`` gives the lectures'
# version. An untrained model knows nothing, but it is no uniform guess either (that would pay
# exactly log V at every position): its random weights tilt each row, so its L_t scatter, some
# below log V and most above, and on average a tilted guess pays more than the uniform one.

# %%
lm = models.DecoderLM(vocab.vocab_size, d_model=16, n_heads=2, n_layers=1, max_len=8)
logits = lm(X)                                                    # (1, 6, V)
probs, _ = F.softmax(logits)
log_p, _ = F.log_softmax(logits)
per_position = -np.take_along_axis(log_p, Y[..., None], axis=-1)[0, :, 0]      # (6,) L_t
mean, mean_cache = F.cross_entropy(logits, Y)
total, sum_cache = F.cross_entropy(logits, Y, reduction="sum")
N = Y.size
print(f"logits {logits.shape}; V = {vocab.vocab_size}, log V = {math.log(vocab.vocab_size):.3f}")
print("L_t =", np.round(per_position, 3))
print(f"sum = {float(total):.4f}   mean = {float(mean):.4f}   N × mean = {N * float(mean):.4f}")
assert np.allclose(probs.sum(axis=-1), 1.0), "each position's output is a distribution over V"
assert math.isclose(float(total), per_position.sum(), rel_tol=1e-12), \
    "the global loss is the sum of the position losses (deck 000)"
assert math.isclose(float(total), N * float(mean), rel_tol=1e-12), "sum = N × mean"
assert np.allclose(F.cross_entropy_backward(1.0, sum_cache),
                   N * F.cross_entropy_backward(1.0, mean_cache), rtol=1e-12), \
    "the summed loss's gradient is N times the mean's"
log_V = math.log(vocab.vocab_size)
assert per_position.min() < log_V < per_position.max() and float(mean) > log_V, \
    "an untrained model's L_t scatter around log V, and on average pay more than a uniform guess"
print("✓ one distribution and one loss per position; the sum is N × the mean, gradients too "
      "(the lectures sum, minitf averages by default)")

# %% [markdown]
# What do we optimize?
# --------------------
#
# The lectures ask which of these training changes: (1) X and q, (2) W_K and W_V, (3) the
# softmax, (4) the sine/cosine positional encodings, (5) the embedding matrix. Training changes
# exactly the tensors a model lists as parameters, so we can read the answer off one. X is the
# data and q = x W_Q is computed from it; the softmax is a fixed function; the sinusoidal
# encoding is a formula with nothing to learn. minitf packs W_Q, W_K and W_V side by side in
# one matrix ``W_qkv`` of shape (d, 3d), whose middle and last thirds are W_K and W_V.

# %%
gpt = models.DecoderLM(50, d_model=16, n_heads=2, n_layers=1, max_len=8, positional="sinusoidal")
names = [name for name, _ in gpt.named_parameters()]
print("\n".join(f"  {name:40} {tuple(p.shape)}" for name, p in gpt.named_parameters()))
assert "tok_emb.W" in names, "the embedding matrix is learned (answer 5)"
assert "blocks.blocks.0.self_attn.layer.W_qkv.W" in names, "W_Q, W_K, W_V are learned (answer 2)"
assert nn.SinusoidalPositionalEncoding(16).num_parameters() == 0, \
    "the sinusoidal encoding has no parameters (not answer 4)"
assert not any("softmax" in name or "pos" in name for name in names), \
    "neither the softmax nor the sinusoidal positions appear among the parameters"
print("✓ the quiz: answers 2 (W_K, W_V inside W_qkv) and 5 (tok_emb.W); not X, q, softmax, PE")

# %% [markdown]
# Without the mask, the model copies
# ----------------------------------
#
# "What is the problem with this?", the lectures ask of this recipe run without the causal mask:
# position t then attends to all of X, and X_(t+1) *is* its target. The model can copy the answer
# instead of predicting it. To see that it does, train on **random** tokens (V = 16, windows of
# n = 16): there is nothing to predict, so no honest model can do better than a uniform guess,
# log 16 = 2.773 nats. The stream has 100,000 tokens; training draws its windows from the first
# 90,000, and every loss below is measured on 64 windows cut from the last 10,000, which no
# training batch contains. We train the same small model twice, once causal and once with
# ``causal=False``, and score the leaky one two ways (the causal one sees X_0 … X_t at position t
# either way, so it has one curve):
#
# * **teacher-forced**: the whole window at once, as in training (the future is in view);
# * **prefix-only**: position t sees only X_0 … X_t, as at generation time, when the next token
#   does not exist yet.
#
# Each training step in ``train_on_noise`` is the lectures' "backprop, then update the parameters",
# in four calls: ``zero_grad()`` clears every ``.grad`` (a backward adds into it); ``loss(x, y)``
# runs the forward and returns the loss with a function that runs its backward; ``backward()``
# sends ∂L/∂logits back through each layer's hand-written backward (lesson 05 checks them), leaving
# ∂L/∂θ in every ``.grad``; ``step()`` moves each parameter against its gradient (AdamW: lr times
# the gradient's running average over the root of its square's, plus a pull of the weights to 0).
#
# How close to log 16 must the causal model stay? The test tokens are independent of all it
# has seen, so its expected loss is log 16 plus a KL divergence (≥ 0) of its guesses from
# uniform. It can fall below log 16 only by the luck of the 1,024 test tokens, a few standard
# errors of their mean, and rise above by what 200 steps of fitting noise leave: ≤ 0.05 nats.

# %%
V, n, STEPS, EVERY = 16, 16, 200, 20
noise = backend.to_numpy(backend.randint(0, V, (100_000,)))       # i.i.d. uniform tokens
noise_train, noise_test = data.split(noise)                       # the first 90 %, the last 10 %
test_x, test_y = data.evaluation_windows(noise_test, n, max_windows=64)   # (64, 16), held out
assert (len(noise_train), len(noise_test)) == (90_000, 10_000), "90,000 to train, 10,000 to test"


def position_losses(model, x, y):
    """Teacher-forced loss at each position, averaged over the windows: (n,)."""
    log_p, _ = F.log_softmax(model(x))                                          # (b, n, V)
    return -np.take_along_axis(log_p, y[..., None], axis=-1)[..., 0].mean(axis=0)


def prefix_only(model, x, y):
    """Loss at each position t given X_0 … X_t only, as when generating: (n,)."""
    return np.array([float(F.cross_entropy(model(x[:, :t + 1])[:, -1], y[:, t])[0])
                     for t in range(x.shape[1])])


def train_on_noise(causal):
    """200 AdamW steps on random windows; -> the model and its loss curves (each EVERY steps)."""
    backend.seed(1)                                     # both models: same weights and batches
    model = models.DecoderLM(V, d_model=32, n_heads=2, n_layers=1, max_len=n, causal=causal)
    adamw, history = optim.AdamW(model, lr=1e-2), {"teacher-forced": [], "prefix-only": []}
    for step in range(1, STEPS + 1):
        model.zero_grad()
        _, backward = model.loss(*data.random_windows(noise_train, 16, n))
        backward()
        adamw.step()
        if step % EVERY == 0:
            history["teacher-forced"].append(model.loss(test_x, test_y)[0])
            history["prefix-only"].append(prefix_only(model, test_x, test_y).mean())
    return model, history


with backend.precision("float32"):                                # faster; ample here
    causal, causal_history = train_on_noise(True)
    leaky, leaky_history = train_on_noise(False)
causal.to(dtype="float64"), leaky.to(dtype="float64")
causal_loss = causal.loss(test_x, test_y)[0]
causal_tokens = -np.take_along_axis(F.log_softmax(causal(test_x))[0], test_y[..., None], -1)
sem = causal_tokens.std() / math.sqrt(causal_tokens.size)          # of the 1,024 losses' mean
leaky_forced, leaky_prefix = leaky.loss(test_x, test_y)[0], prefix_only(leaky, test_x, test_y)
print(f"log V = {math.log(V):.3f};  causal {causal_loss:.3f} (standard error {sem:.3f});  "
      f"leaky teacher-forced {leaky_forced:.3f}, prefix-only {leaky_prefix.mean():.3f}")
assert math.log(V) - 4 * sem < causal_loss < math.log(V) + 0.05, \
    "on noise the causal model stays at log 16: no better than chance, hardly worse"
assert leaky_forced < 0.5 * math.log(V), "without the mask the training loss collapses (copying)"
assert leaky_prefix.mean() > math.log(V), \
    "the leaky model, denied the future, is worse than a uniform guess: all it learned was to copy"
print("✓ leakage: a near-perfect training loss on pure noise, worse than chance at generation")

steps = np.arange(EVERY, STEPS + 1, EVERY)
fig, ax = viz.figure(size=(6.4, 4.0))
viz.curves(ax, steps, {"causal": causal_history["teacher-forced"],
                       "leaky, teacher-forced": leaky_history["teacher-forced"],
                       "leaky, prefix-only": leaky_history["prefix-only"]},
           hline=(math.log(V), "log V (uniform guess)"), xlabel="training step",
           ylabel="held-out loss (nats/token)",
           title="Random tokens (V = 16): leakage fakes a low loss")
viz.save(fig, "11_leakage")

# %% [markdown]
# Where the leak is
# -----------------
#
# Scored position by position, the leaky model's teacher-forced loss is near 0 everywhere but at
# the last position: its target, the token after the window, is not in X, so there is nothing
# to copy, and it pays the full log V. A window of n positions therefore costs about log V / n =
# 0.173 on average, the floor the curve above settles on. Given only the prefix, the copier has
# no next token to look at, and its confident guesses cost more than guessing uniformly.

# %%
forced_by_position = position_losses(leaky, test_x, test_y)                     # (n,)
print("leaky, teacher-forced, by position:", np.round(forced_by_position, 1))
assert forced_by_position[:-1].max() < 0.1 * math.log(V), "every position but the last copies"
assert abs(forced_by_position[-1] / math.log(V) - 1) < 0.1, "the last position cannot copy"
assert abs(leaky_forced / (math.log(V) / n) - 1) < 0.15, "the leaky loss ≈ log V / n"
print("✓ the leak is X_(t+1) in view: all positions but the last are free")

# %% [markdown]
# A character model against the bigram baseline
# ---------------------------------------------
#
# Now the honest model on real text: a causal ``DecoderLM`` over characters (two blocks, d = 48,
# RoPE), trained by ``course.train_char_lm`` (lesson 12 reuses it) for 300 steps on 32-character
# windows of Python's documentation. Its loop is the one above plus two lines for a steadier
# descent: ``optim.clip_grad_norm`` scales all the gradients down together when their joint norm
# passes 1, so one odd batch cannot throw the weights far, and a warm-up + cosine schedule sets each
# step's learning rate. Its competitor is the oldest language model there is, the n-gram: a
# character **bigram** that predicts the next character from the current one by counting pairs in
# the training text. Both are scored on the same 16,384 held-out characters. Position 0 sees one
# character, as the bigram does, so there it can at best match the bigram. Three or four more
# characters bring the loss down fast; then it levels off, positions 4–15 and 16–31 alike.

# %%
char_lm = course.train_char_lm(train_ids, tok.vocab_size)   # 300 float32 steps, seed 2; float64
val_x, val_y = data.evaluation_windows(val_ids, 32, max_windows=512)        # (512, 32) each
char_by_position = position_losses(char_lm, val_x, val_y)                     # (32,)
held_out, early, late = (char_by_position[i:j].mean() for i, j in ((0, 32), (4, 16), (16, 32)))
bigram = data.bigram_loss(train_ids, val_ids[:val_x.size + 1], tok.vocab_size)  # same characters
print(f"{tok.vocab_size} characters: held-out loss {held_out:.3f} nats vs bigram {bigram:.3f}; "
      f"position 0 {char_by_position[0]:.3f}, positions 4-15 {early:.3f}, 16-31 {late:.3f}")
assert held_out < bigram, "a few seconds of training beat the one-character-back baseline"
assert late < char_by_position[0] - 0.2 and abs(early - late) < 0.1, "falls, then levels off"

fig, (left, right) = viz.figure(1, 2, size=(11, 4.0))
viz.curves(left, np.arange(n), {"causal": position_losses(causal, test_x, test_y),
                                "leaky, teacher-forced": forced_by_position,
                                "leaky, prefix-only": leaky_prefix},
           hline=(math.log(V), "log V"), xlabel="position in the window",
           ylabel="mean loss (nats/token)", title="Random tokens: a leak at all but the last")
viz.curves(right, np.arange(32), {"character DecoderLM": char_by_position},
           hline=(bigram, "character bigram"), xlabel="position in the window",
           ylabel="held-out loss (nats/char)", title="Text: falls for 3–4 positions, then flat")
viz.save(fig, "11_per_position_loss")
print("✓ the character model beats the bigram; its loss falls for 3–4 positions, then is flat")

# %% [markdown]
# A recurrent language model against a Transformer
# ------------------------------------------------
#
# Before attention, neural language models were recurrent. One reads the text a position at a
# time and carries a state h_t, of width d_h, from each step to the next::
#
#     h_t = tanh(x_t W_x + h_(t−1) W_h + b)          logits_t = h_t W_out + b_out
#
# with x_t the embedding of token t. h_t has read tokens ≤ t only, so the model is causal by
# construction, and it needs no positional encoding: order lives in the recurrence.
# ``models.RNNLM`` is such a model (an embedding, one RNN layer, a linear head) with the same
# ``loss(x, y)`` as ``DecoderLM``. Below, a one-block Transformer and an RNN of about the same
# size train in the same ``Trainer``, which runs the step above (zero_grad, forward, backward,
# clipping, AdamW), on the very same 120 batches of 16 windows of 64 characters.

# %%
n_chars, rnn_steps = 64, 120
backend.seed(0)                      # the batches both models see, from a seed of their own
batches = [data.random_windows(train_ids, 16, n_chars) for _ in range(rnn_steps)]
builders = {"Transformer": lambda: models.DecoderLM(tok.vocab_size, 48, 2, 1, max_len=n_chars),
            "RNN": lambda: models.RNNLM(tok.vocab_size, 64, 96, max_len=n_chars)}
counted = {"Transformer": cost.lm_cost(tok.vocab_size, 48, 1, context=n_chars, batch_size=16,
                                       n_heads=2),
           "RNN": cost_families.rnn_cost(tok.vocab_size, 64, 96, context=n_chars, batch_size=16)}
runs = {}
for name, build in builders.items():
    backend.seed(1)
    with backend.precision("float32"):
        lm, feed = build(), iter(batches)
        trainer = Trainer(lm, optim.AdamW(lm, 3e-3, weight_decay=0.0), lambda: next(feed))
        tic = time.perf_counter()
        trainer.fit(rnn_steps, progress=False)
    runs[name] = dict(model=lm, loss=trainer.history["loss"],
                      ms_per_step=1e3 * (time.perf_counter() - tic) / rnn_steps)
final = {name: float(np.mean(run["loss"][-10:])) for name, run in runs.items()}
flops = {name: counted[name]["training_flops_per_step"] for name in runs}
for name, run in runs.items():
    print(f"{name:>11}: {run['model'].num_parameters():,} parameters, loss {run['loss'][0]:.2f} "
          f"→ {final[name]:.2f}, {flops[name] / 1e6:.0f} MFLOPs, {run['ms_per_step']:.0f} ms/step")
sizes = [counted[name]["parameters"] for name in runs]
assert sizes == [run["model"].num_parameters() for run in runs.values()], "counted exactly"
assert max(sizes) < 1.25 * min(sizes), "the two models should be of about the same size"
assert all(loss < math.log(tok.vocab_size) - 1.5 for loss in final.values()), \
    "both models should learn far below chance, log V, in 120 steps"
assert final["RNN"] <= final["Transformer"] + 0.1, \
    f"at this size the RNN should learn as well as the Transformer: {final}"
assert flops["Transformer"] > flops["RNN"], "the Transformer's step does more arithmetic"
print(f"✓ same data, same loop, similar size: both learn; the RNN's {n_chars} steps run in a row")

# %% [markdown]
# At this size the recurrence is no handicap, and its step may even be the quicker (compare the
# two times printed above). The stopwatch times a whole training step: forward and backward through the
# Transformer's embedding, projections, attention, feed-forward and three LayerNorms, more
# arithmetic than the RNN's (counted above), against 64 recurrent steps that each multiply a
# batch of 16 states, (16, 96) · (96, 96), and back: a short chain of fair-sized products.
# Lesson 13 races one layer of each on a single sequence, where each of 256 recurrent steps is a
# tiny product and the fixed cost of handing each to NumPy is most of the time: there attention
# finishes first. On a parallel device the chain weighs more still: a Transformer's step is a
# few large products that keep thousands of cores busy; the RNN's steps wait in turn.
#
# The chain has a second cost that no hardware removes: the path between two positions. It shows
# in the gradient. Below, a random vector g is set as the gradient at the last position's output
# (zero elsewhere) and sent back into each trained model's inputs: at position t that gives
# gᵀ ∂out_n/∂x_t, how much token t can still be learned from. Through the recurrence it passes
# n − t times through W_hᵀ and the tanh slopes, and fades; through attention it arrives in one
# step, with no trend in distance (the last token gets more: the residual path carries it too).

# %%
window, _ = data.random_windows(train_ids, 1, n_chars)
reach = {}
with backend.precision("float32"):
    for name, run in runs.items():
        lm = run["model"].eval()
        x = lm.tok_emb(window)                             # (1, n, d): the token embeddings
        # the layer, and its input as in training: the Transformer's blocks see positions too
        layer, x = (lm.rnn, x) if name == "RNN" else (lm.blocks, lm.pos_emb(x))
        y = layer(x)
        dy = np.zeros_like(y)
        dy[:, -1] = backend.randn(y.shape[-1])             # a gradient at the last position only
        dx = layer.backward(dy)
        dx = dx[0] if isinstance(dx, tuple) else dx        # the RNN also returns dh0
        reach[name] = np.linalg.norm(dx[0], axis=-1)[::-1]   # by distance n − t = 0 … n − 1
far, near = slice(32, None), slice(0, 4)
for name, r in reach.items():
    print(f"{name:>11}: |dx| at distance 0–3 {r[near].mean():.2e}, at 32–63 {r[far].mean():.2e}")
assert reach["RNN"][far].mean() < 1e-3 * reach["RNN"][near].mean(), \
    "deck 001: through n − t recurrent steps the gradient from a far token should vanish"
assert reach["Transformer"][far].mean() > 1e-2 * reach["Transformer"][near].mean(), \
    "attention reaches every earlier token in one step: no such decay"
print("✓ the recurrence's gradient fades with distance; attention's does not")

fig, axes = viz.figure(1, 2, size=(11, 4))
viz.curves(axes[0], np.arange(1, rnn_steps + 1), {name: run["loss"] for name, run in runs.items()},
           xlabel="training step", ylabel="loss (nats per character)", marker="",
           hline=(math.log(tok.vocab_size), "chance, log V"),
           title=f"Same {rnn_steps} batches, {min(sizes) // 1000}–{max(sizes) // 1000}k parameters")
viz.curves(axes[1], np.arange(n_chars), reach, xlabel="distance back from the last position",
           ylabel="‖gᵀ ∂outₙ/∂xₜ‖, g random", logy=True, marker="",
           title="How far back the gradient reaches")
viz.save(fig, "11_rnn_vs_transformer")

# %% [markdown]
# What to remember
# ----------------
#
# * Inputs and targets come from one text shifted by one: X = text[:, :-1], Y = text[:, 1:].
# * The model outputs a distribution over the vocabulary at every position, and every position
#   pays −log p(next token). Summed (the lectures) or averaged (minitf's default) they differ by
#   N, and so do the gradients; ``F.cross_entropy(..., reduction="sum")`` gives the sum.
# * Training changes the parameters only: the embedding matrix and the projections W_Q, W_K,
#   W_V (and the rest), never the data, the softmax or a sinusoidal encoding.
# * Without the causal mask the model copies the next token: a training loss near log V / n on
#   pure noise, and worse than chance when it has to generate. A loss that looks too good is a
#   leak until proven otherwise.
# * A small Transformer trained for seconds already beats the character bigram.
# * A recurrent LM, h_t = tanh(x_t W_x + h_(t−1) W_h + b), learns as well at this size, but its
#   n steps run in a row and its gradient from a far token fades over the n − t steps between.
#
# Next, lesson 12: generating text with the trained model, and the KV cache that makes it fast.
