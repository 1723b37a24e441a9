"""
Causal and padding masks
========================

A language model that reads "the cat sat" must predict "sat" without seeing it. A mask makes
that rule part of the computation: it is added to the scores before the softmax, so forbidden
keys get weight exactly 0 and the allowed ones share the whole weight. You will mask the
lectures' 12 × 12 score table, see why the mask is added rather than multiplied, pad a batch of
sentences of different lengths, and check in a real attention layer that no information flows
from the future.

Run it: ``minitf lesson 4`` (a few seconds), or as a plain script, ``python lessons/04_masks.py``.
"""

# %%
import numpy as np

import minitf.functional as F
import minitf.nn as nn
from minitf import backend, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# Why a language model needs a mask
# ---------------------------------
#
# A decoder is trained on all positions of a sentence at once: position t reads tokens 0 … t
# and is asked for token t + 1. Self-attention, left alone, lets every position read every
# other one, so position t could simply look up token t + 1 and copy it: a perfect training
# loss, and a model that has learned nothing it can use when generating, where the future does
# not exist yet. The fix is a rule on the weights: query i may attend to key j only if j ≤ i.
# Written out, with M the mask::
#
#     scores = Q Kᵀ / √d_k + M        M_ij = 0 if j ≤ i,  −∞ if j > i
#     weights = softmax(scores)       e^−∞ = 0: a forbidden key gets weight exactly 0
#
# The lectures show a 12 × 12 table that they call only "attention raw scores". We treat it as
# the scaled scores Q Kᵀ / √d_k, take it as it is, and let minitf mask it.

# %%
S = np.array([                                           # (n_q=12, n_k=12), from deck 000
    [-0.08, 1.24, 0.69, -0.98, 1.43, -0.60, 0.70, 0.16, 0.93, 1.28, -1.61, -1.10],
    [-0.09, -0.00, -0.70, 0.06, 0.25, 0.23, 0.26, 0.18, 0.78, -0.21, -1.01, 1.01],
    [0.86, 1.19, 1.59, 0.86, -0.13, -0.15, -2.13, -0.98, -0.87, -1.72, 1.87, -0.72],
    [0.12, -0.03, -0.02, 0.88, -0.46, -0.70, 0.54, -0.42, -1.89, -0.38, 0.04, -0.84],
    [0.51, 0.17, 0.13, -1.64, 0.24, -0.02, 1.68, -0.36, 0.64, 0.36, 0.27, 0.66],
    [0.24, -1.44, 0.43, 0.74, 0.96, -1.21, -0.31, 1.54, 1.66, 1.14, 0.58, -1.44],
    [0.26, -0.10, 0.93, 0.72, -0.38, 1.65, 0.47, -0.96, -0.17, -0.90, -1.57, 0.22],
    [-0.55, 0.81, 0.71, 1.70, -0.80, -1.14, -0.32, 1.78, -0.70, -0.04, 1.54, 0.81],
    [0.74, -0.76, -0.44, -0.08, -1.38, -0.13, 1.25, -1.37, 1.84, 0.30, 0.57, 0.74],
    [-0.97, -0.91, 0.15, 0.35, -0.81, 0.11, 1.14, -1.52, 1.06, 1.87, 0.50, -0.30],
    [1.56, 0.90, 0.39, 1.46, 1.44, -1.05, 0.90, -0.73, 0.36, -0.67, -0.62, -0.43],
    [0.32, 0.74, 0.44, -0.10, 1.19, 0.83, 0.29, 2.06, 0.51, -0.26, 1.51, 0.11]])
n = S.shape[0]
M = F.causal_mask(n)                                     # (12, 12): 0 on and below, −inf above
P, _ = F.softmax(S + M)                                  # row-wise, over the keys
future = np.triu(np.ones((n, n), bool), k=1)             # True where j > i

np.set_printoptions(precision=4, suppress=True, linewidth=110)
print("mask, top-left corner:\n", M[:4, :4])
print("row 0 :", P[0, :1], "  row 1 :", P[1, :2], "  row 2 :", P[2, :3])
print(f"row 11: argmax key {P[11].argmax()} (score {S[11, 7]}) with weight {P[11].max():.4f}")

assert (M[future] == -np.inf).all() and (M[~future] == 0).all(), "−inf above the diagonal, else 0"
assert (P[future] == 0).all(), "every weight above the diagonal should be exactly 0"
assert np.allclose(P.sum(axis=1), 1.0), "each masked row still sums to 1"
assert P[0, 0] == 1.0, "query 0 sees only itself, so its single weight is 1"
assert np.allclose(P[1, :2], [0.4775, 0.5225], atol=5e-5), f"row 1 (deck 000): {P[1, :2]}"
assert np.allclose(P[2, :3], [0.2239, 0.3115, 0.4646], atol=5e-5), f"row 2 (deck 000): {P[2, :3]}"
assert P[11].argmax() == 7, "row 11's largest weight sits at key 7, where its score is 2.06"
assert abs(P[11, 7] - 0.2727) < 5e-5, f"row 11, key 7 should get 0.2727, got {P[11, 7]:.4f}"
print("✓ the deck's 12×12 table: upper triangle exactly 0, rows 1, 2 and 11 as measured")

fig, axes = viz.figure(1, 3, size=(19, 6.2))
positions = list(range(n))
common = dict(x_labels=positions, y_labels=positions, xlabel="key position j",
              ylabel="query position i", annotate=".2f")
viz.heatmap(axes[0], S, cmap="cividis", vmin=-2.2, vmax=2.2, colorbar="score",
            title="1. the deck's raw scores, taken as Q Kᵀ / √d_k", **common)
viz.heatmap(axes[1], S, cmap="cividis", vmin=-2.2, vmax=2.2, colorbar="score", hide=future,
            title="2. + causal mask: −∞ above the diagonal (empty)", **common)
viz.heatmap(axes[2], P, vmin=0, vmax=1, colorbar="attention weight", hide=P == 0,
            title="3. softmax: each row sums to 1 over j ≤ i", **common)
fig.suptitle("The causal mask on the lectures' 12 × 12 scores: keys on x, queries on y")
viz.save(fig, "04_masking")

# %% [markdown]
# A mask moves every weight of the row: the softmax renormalizes
# --------------------------------------------------------------
#
# One could imagine masking as "compute the softmax over all 12 keys, then zero the future
# ones". That is not what happens, and the difference matters. Masking *before* the softmax
# removes the future keys from the normalization too, so the allowed keys share all the
# weight: row 1's two weights become 0.48 and 0.52, not the 0.06 and 0.07 they had among
# twelve. Zeroing afterwards leaves rows that no longer sum to 1: the early queries, which see
# few keys, throw most of their weight away. Masking equals zeroing, then renormalizing.

# %%
full, _ = F.softmax(S)                                   # no mask: every key competes
zeroed = np.where(future, 0.0, full)                     # zeroing after the softmax
renormalized = zeroed / zeroed.sum(axis=1, keepdims=True)
print("row sums after zeroing:", zeroed.sum(axis=1).round(3))
print(f"row 1: zeroed {zeroed[1, :2].round(4)}  vs  masked {P[1, :2].round(4)}")
assert np.allclose(renormalized, P, atol=1e-15), "masking = zeroing, then renormalizing each row"
assert not np.allclose(zeroed, P), "zeroing after the softmax is not masking"
assert zeroed.sum(axis=1)[1] < 0.2, "zeroed row 1 keeps under a fifth of its weight"
print("✓ the mask renormalizes over the allowed keys; zeroing afterwards does not")

# %% [markdown]
# Added, not multiplied (a correction)
# ------------------------------------
#
# The mask slides draw the mask as a matrix of 1.0 and −inf placed next to the scores with a
# "×" between them. Read literally, that is wrong: multiplying a negative score by −∞ gives
# +∞, which would hand the weight to the *future* keys, and 0 × −∞ is not even a number.
# The mask is **added** (one deck writes softmax(QKᵀ/√C + M) with M of 0s and −∞s), or, in
# code, the forbidden scores are overwritten with a large negative number. Curiously, the 1.0s
# do no harm when added: softmax ignores a constant added to a whole row, so a 1.0/−∞ mask
# added to the scores gives the same weights as a 0/−∞ one. (One rendition of that mask also
# has −inf on row 11's diagonal, a transcription slip: the last token always sees itself.
# Another deck's "raw attention scores" matrix, 1.14 on the diagonal and 0.07 everywhere
# else, is also garbled; only the first table above is used here.)

# %%
deck_mask = np.where(future, -np.inf, 1.0)               # the slides' 1.0 / −inf picture
with np.errstate(invalid="ignore"):
    multiplied = S * deck_mask                           # what "×" would mean
    weights_multiplied, _ = F.softmax(multiplied)
added, _ = F.softmax(S + deck_mask)
infinite_rows = (multiplied == np.inf).any(axis=1)
print(f"S × mask has {int((multiplied == np.inf).sum())} cells of +inf, in "
      f"{int(infinite_rows.sum())} rows; the softmax gives those rows' whole weight to their +inf "
      f"cells (the limit of ever larger scores), all of them future keys")
assert (multiplied == np.inf).any(), "negative scores × −inf become +inf"
assert np.allclose((weights_multiplied * future).sum(axis=1)[infinite_rows], 1.0), \
    "a multiplied mask hands the weight to the future"
assert np.allclose(added, P, atol=1e-15), "adding 1.0/−inf gives the same weights as 0/−inf"
print("✓ the mask is added: 1.0 or 0 on allowed cells makes no difference, × makes nonsense")

# %% [markdown]
# −∞ or −1e9?
# -----------
#
# Popular code fills the masked scores with "a large negative number", −1e9, instead of −∞.
# On any row with at least one allowed key the two give the same weights, bit for bit: e^−1e9
# underflows to exactly 0. They differ only on a row where *every* key is masked, which happens
# in practice (an empty sequence in a padded batch). With −1e9 every score is equal, and the
# softmax spreads the weight uniformly over keys the query was not allowed to see. minitf uses
# −∞ and defines the result of such a row as all zeros: the query reads nothing, and its
# gradient is zero.

# %%
filled = np.where(future, -1e9, S)                       # masked_fill(mask == 0, −1e9)
P_fill, _ = F.softmax(filled)
assert np.array_equal(P_fill, P), "−1e9 and −inf agree exactly when some key is allowed"

scores = np.array([[0.3, -1.2, 2.0]])                    # one query, three keys, all masked
empty = F.padding_mask(np.array([0]), 3)[0, 0]           # (1, 3): a sequence of length 0
with_inf, _ = F.softmax(scores + empty)
with_fill, _ = F.softmax(np.where(empty == 0, scores, -1e9))
print(f"fully masked row: −inf → {with_inf[0]},  −1e9 → {with_fill[0].round(4)}")
assert (with_inf == 0).all(), "with −inf a fully masked row gets zeros (not NaN)"
assert np.allclose(with_fill, 1 / 3), "with −1e9 a fully masked row gets uniform weights"
print("✓ −1e9 ≡ −inf on ordinary rows; on a fully masked row: uniform 1/3 vs zeros")

# %% [markdown]
# Padding: a batch of sentences of different lengths
# --------------------------------------------------
#
# Images come in a fixed size; sentences do not. To put sentences of lengths 6, 3 and 5 in one
# (b, n, d) array, the short ones are filled up with a padding token. The padding must then be
# invisible: a **padding mask** puts −∞ on the keys at positions ≥ each sentence's length.
# ``F.padding_mask`` has shape (b, 1, 1, n), so it broadcasts over the heads and the queries;
# ``F.combine_masks`` adds it to a causal mask for a decoder. The test that matters: each
# sentence's outputs must be exactly what the layer gives that sentence on its own.
#
# In the figure below, each row of panels is one sentence, labelled with its own tokens, and
# each panel one head. Look for the empty ``<pad>`` columns on the right: no query of a short
# sentence puts any weight there, while the ``<pad>`` rows still attend to the real words
# (their outputs are simply ignored later).

# %%
sentences = ["the cat sat on the mat", "dogs bark loudly", "birds fly south in winter"]
PAD = "<pad>"
words = [s.split() for s in sentences]
lengths = np.array([len(w) for w in words])              # (3,) = 6, 3, 5
width = lengths.max()
padded = [w + [PAD] * (width - len(w)) for w in words]
vocab = {tok: i for i, tok in enumerate(sorted({t for w in padded for t in w}))}
ids = np.array([[vocab[t] for t in w] for w in padded])  # (b=3, n=6)

d_model, n_heads = 8, 2
embed = nn.Embedding(len(vocab), d_model, std=2.0)   # large enough for visible preferences
attn = nn.MultiHeadAttention(d_model, n_heads)           # bidirectional, as in an encoder
pad_mask = F.padding_mask(lengths, width)                # (3, 1, 1, 6)
out = attn(embed(ids), mask=pad_mask)                    # (3, 6, 8)
probs = attn.probs                                       # (3, 2, 6, 6)
print("lengths", lengths, "→ padding mask", pad_mask.shape, "→ weights", probs.shape)

for b, w in enumerate(words):
    alone = attn(embed(ids[b:b + 1, :len(w)]))           # (1, len, 8): no padding, no mask
    assert np.allclose(out[b, :len(w)], alone[0], atol=1e-12), f"padding changed sentence {b}"
    assert (probs[b, :, :, len(w):] == 0).all(), f"sentence {b} attends to its padding"
assert np.array_equal(pad_mask, F.padding_mask_from_ids(ids, vocab[PAD])), "same mask from ids"

both = F.combine_masks(F.causal_mask(width), pad_mask)   # (3, 1, 6, 6): a decoder's mask
attn(embed(ids), mask=both)
allowed = (np.arange(width)[None, :] <= np.arange(width)[:, None])[None, None] \
    & (np.arange(width) < lengths[:, None])[:, None, None, :]
assert both.shape == (3, 1, width, width), f"combined mask shape {both.shape}"
assert ((attn.probs == 0) == ~allowed).all(), "causal + padding: zero exactly where either blocks"
print("✓ padded sentences give the same outputs as unpadded ones; padding keys get weight 0")

names = [f"sentence {b}, length {m}" for b, m in enumerate(lengths)]
fig = viz.attention_grid(probs, row_names=names, panel_size=3.0,
                         title="Encoder self-attention on a padded batch: <pad> keys are empty")
for b, w in enumerate(padded):                           # each row has its own tokens
    for h in range(n_heads):
        ax = fig.axes[b * n_heads + h]
        ax.set_xticks(range(width), labels=w, rotation=45, ha="right", rotation_mode="anchor")
        if h == 0:
            ax.set_yticks(range(width), labels=w)
viz.save(fig, "04_padding")

# %% [markdown]
# The point of masking: no access to the future
# ---------------------------------------------
#
# The lectures' quiz asks what masking is for during training: (A) speed, by computing less;
# (B) keeping every prediction from seeing future tokens; (C) highlighting important tokens.
# The answer is **B**, and we can check both halves of it on a real layer. (C describes what
# the attention weights themselves do; a mask only forbids.)
#
# *No information flows back in time.* Put a loss on one output position t of a causal
# ``nn.MultiHeadAttention`` and run its backward pass: the gradient on every input after t is
# exactly 0. Equivalently, change the tokens after t, and the outputs up to t do not move.
#
# *The mask saves no time.* It is added to scores already computed: ``F.attention`` with
# ``F.causal_mask`` computes all n × n dot products and then masks about half of them. Poison
# one future key with NaN: even query 0, which may not look at it, returns NaN, because
# q_0 · k_11 was computed and NaN + (−∞) is still NaN. (Skipping work takes more than a mask:
# a causal ``nn.MultiHeadAttention`` calls ``F.causal_attention``, which on NumPy cuts a long
# sequence into blocks of 64 queries and never computes a block's scores against the keys after
# its last query; lesson 13 measures what that saves. Inside a block, the masked scores are still
# computed.)

# %%
T, d_model = 12, 16
x = backend.randn(1, T, d_model)
causal = nn.MultiHeadAttention(d_model, 4, causal=True)
open_attn = nn.MultiHeadAttention(d_model, 4)            # the same layer without the mask
open_attn.W_qkv, open_attn.W_o = causal.W_qkv, causal.W_o

reach = {}                                               # |∂ out_t / ∂ x_s| for every t, s
for name, layer in (("causal", causal), ("no mask", open_attn)):
    grid = np.zeros((T, T))
    for t in range(T):
        dy = np.zeros((1, T, d_model))
        dy[0, t] = backend.randn(d_model)                # a loss on position t alone
        layer(x)
        grid[t] = np.abs(layer.backward(dy)[0]).sum(axis=1)
    reach[name] = grid
assert (reach["causal"][future] == 0).all(), "a causal layer leaks no gradient into the future"
assert (reach["causal"][~future] > 0).all(), "every past position does get gradient"
assert (reach["no mask"] > 0).all(), "without the mask every position reaches every output"

t = 5
x_new = x.copy()
x_new[:, t + 1:] = backend.randn(1, T - t - 1, d_model)  # rewrite the future only
change = np.abs(causal(x_new) - causal(x))[0].max(axis=1)
leak = np.abs(open_attn(x_new) - open_attn(x))[0].max(axis=1)
print(f"positions ≤ {t}: causal, largest change {change[:t + 1].max():.1e}; "
      f"no mask, smallest change {leak[:t + 1].min():.2f}")
assert change[:t + 1].max() < 1e-14, "with a causal mask the past outputs ignore the future"
assert leak[:t + 1].min() > 1e-3, "without it, every earlier output changes"

q_, k_, v_ = (backend.randn(T, 4) for _ in range(3))
k_[T - 1] = np.nan                                       # a broken key at the last position
out_nan, _ = F.attention(q_, k_, v_, mask=F.causal_mask(T))
print(f"NaN in key {T - 1}: {int(np.isnan(out_nan).any(axis=1).sum())} of {T} outputs are NaN")
assert np.isnan(out_nan[0]).all(), "query 0's masked score was computed anyway"
print(f"✓ quiz answer B: no gradient or change flows from the future; all {T * T} scores "
      f"are computed, {int(future.sum())} of them only to be masked")

fig, axes = viz.figure(1, 2, size=(10, 4.4))
for ax, (name, grid) in zip(axes, reach.items()):
    viz.heatmap(ax, grid / grid.max(axis=1, keepdims=True), vmin=0, vmax=1, hide=grid == 0,
                xlabel="input position s", ylabel="output position t (the loss)",
                colorbar="|∂out_t/∂x_s|, row-normalized" if name == "no mask" else None,
                title=f"{name}: which inputs get gradient")
fig.suptitle("A loss on output t sends gradient only to inputs s ≤ t when the layer is causal")
viz.save(fig, "04_no_future")

# %% [markdown]
# What to remember
# ----------------
#
# * A mask is an additive matrix, 0 where a query may look and −∞ where it may not; the
#   softmax then gives forbidden keys weight exactly 0 and renormalizes over the rest.
# * Causal masks keep a decoder from reading the future (quiz answer B). A mask saves no work
#   by itself: every score is computed, then masked (skipping scores takes blocks, lesson 13).
# * Padding masks hide the filler tokens of short sentences: a padded sentence gives the same
#   outputs as the sentence alone. ``F.combine_masks`` adds masks together.
# * −1e9 and −∞ agree except on a fully masked row: uniform weights with −1e9, zeros in minitf.
#
# Next, lesson 05: how do we know a hand-written backward pass, like the one above, is right?
