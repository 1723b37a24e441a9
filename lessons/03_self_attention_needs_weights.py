"""
Unweighted self-attention, the diagonal and the convex hull
===========================================================

Strip attention down to softmax(X Xᵀ) X, with no learned matrices at all, and see what it can't
do: it has nothing to learn, treats every feature alike, and (when the tokens have equal
length) makes every token attend most to itself. Learned W_Q ≠ W_K remove that limit. A second
limit stays: every output is a weighted average of the values, so it never leaves their convex
hull. A linear layer after attention would not change that; the nonlinear feed-forward network
that each Transformer block adds after attention does.

Run it: ``minitf lesson 3`` (a few seconds), or as a plain script,
``python lessons/03_self_attention_needs_weights.py``.
"""

# %%
import math

import numpy as np

import minitf.functional as F
from minitf import backend, nn, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# The simplest self-attention
# ---------------------------
#
# One lecture asks for the simplest self-attention you can think of, given the token vectors
# X (n × d). Use the tokens themselves as queries, keys and values::
#
#     Y = softmax(X Xᵀ / √d) X        (row-wise softmax; some slides leave out the √d)
#
# Score (i, j) is the dot product x_i · x_j. It works, but two things are missing.
#
# * Nothing is learned: there are no parameters, so training cannot change which token attends
#   to which. The only lever is X itself.
# * Every feature counts the same: x_i · x_j = Σ_f x_if x_jf, each feature with weight 1. Worse,
#   no *direction* of feature space is special: rotate every token by the same orthogonal
#   matrix R and all dot products stay put, so the weights cannot depend on any feature or
#   combination of features in particular.
#
# The six tokens below are random vectors standing in for embeddings.

# %%
words = ["the", "cat", "sat", "on", "a", "mat"]
n, d = len(words), 16
X = backend.to_numpy(backend.randn(n, d))              # (n=6, d=16): one row per token

Y, cache = F.attention(X, X, X)                        # queries = keys = values = X
by_hand = F.softmax(X @ X.T / math.sqrt(d))[0] @ X
R, _ = np.linalg.qr(backend.to_numpy(backend.randn(d, d)))   # a random rotation of features
_, rotated = F.attention(X @ R, X @ R, X @ R)
mha = nn.MultiHeadAttention(d, 1)                      # the learned version, one head

print(f"weights {cache.probs.shape}, output {Y.shape}")
print(f"parameters: unweighted self-attention 0, MultiHeadAttention({d}, 1) "
      f"{mha.num_parameters()}")
print(f"largest change of a weight when every token is rotated by R: "
      f"{np.abs(rotated.probs - cache.probs).max():.1e}")
assert np.allclose(Y, by_hand, atol=1e-14), "F.attention(X, X, X) should be softmax(X Xᵀ/√d) X"
assert np.allclose(rotated.probs, cache.probs, atol=1e-12), \
    "identity: (X R)(X R)ᵀ = X R Rᵀ Xᵀ = X Xᵀ for orthogonal R, so the weights cannot change " \
    "(the algebra behind deck 004's 'every feature plays an equal role')"
print("✓ softmax(X Xᵀ) X: nothing to learn, and blind to which features carry what")

# %% [markdown]
# Every token looks at itself
# ---------------------------
#
# Another deck points out a sharper problem. Expand (x_i − x_j) · (x_i − x_j) ≥ 0::
#
#     x_i · x_j  ≤  ½ (x_i · x_i + x_j · x_j)  ≤  max(x_i · x_i, x_j · x_j)
#
# No score is larger than both of the self-scores on its row and column. If all tokens have
# the same length r, every self-score is r², and the bound says more: in row i, nothing beats
# the diagonal, so the softmax (which keeps the order within a row) puts its largest weight on
# token i itself. Each token mostly copies itself.
#
# We test the bound on 500 random matrices whose rows have very different lengths, and the
# diagonal rule on 500 whose rows are normalised to the same length.

# %%
worst_slack, diagonal_wins = -np.inf, 0
for _ in range(500):
    Z = backend.to_numpy(backend.randn(n, d)) * np.exp(backend.to_numpy(backend.randn(n, 1)))
    S = Z @ Z.T / math.sqrt(d)                          # (n, n) scaled scores, unequal norms
    s = np.diag(S)
    slack = S - np.maximum(s[:, None], s[None, :])      # ≤ 0 everywhere; 0 on the diagonal
    worst_slack = max(worst_slack, slack[~np.eye(n, dtype=bool)].max())

    U = Z / np.linalg.norm(Z, axis=1, keepdims=True) * math.sqrt(d)   # every row of length 4
    _, equal = F.attention(U, U, U)
    diagonal_wins += np.array_equal(equal.probs.argmax(axis=1), np.arange(n))

print(f"largest S_ij − max(S_ii, S_jj), i ≠ j, over 500 matrices: {worst_slack:.3g} "
      f"(< 0: the bound holds)")
print(f"equal norms: the diagonal holds the largest weight of every row in {diagonal_wins} / 500")
assert worst_slack <= 1e-9, \
    "x_i·x_j ≤ max(x_i·x_i, x_j·x_j) should hold for every score (deck 003)"
assert diagonal_wins == 500, "with equal norms every row's largest weight should be its diagonal"
print("✓ scores never beat both self-scores; "
      "with equal norms every token attends most to itself")

# %% [markdown]
# A correction: the bound is about scores, not weights
# ----------------------------------------------------
#
# The same slide then moves the bound to the weights, claiming α_ij ≤ max(α_ii, α_jj) because
# "softmax preserves order", and concludes that the diagonal always wins. Softmax preserves
# order only *within* a row: α_ij and α_jj sit in different rows with different normalisers.
# With unequal lengths both conclusions fail. Three tokens in 2-D show it::
#
#     a = (1, 1)     short
#     b = (3, 0)     longer: a · b = 3 beats a's own score a · a = 2
#     c = (4, −3)    the longest: b · c = 12 beats b · b = 9, so b's own weight is small

# %%
names = ["a", "b", "c"]
T = np.array([[1.0, 1.0], [3.0, 0.0], [4.0, -3.0]])    # (3, 2)
_, small = F.attention(T, T, T)
S = T @ T.T / math.sqrt(2)                              # (3, 3) scaled scores
P = small.probs                                         # (3, 3) weights
s, p = np.diag(S), np.diag(P)
print("scores S = T Tᵀ/√2:\n", np.round(S, 3))
print("weights:\n", np.round(P, 3))
print(f"row a: the largest weight is on {names[P[0].argmax()]}; "
      f"α_ab = {P[0, 1]:.3f} > max(α_aa, α_bb) = max({p[0]:.3f}, {p[1]:.3f})")
assert np.all(S <= np.maximum(s[:, None], s[None, :]) + 1e-12), "the score bound still holds"
assert P[0].argmax() == 1, "with unequal norms row a's largest weight should sit off the diagonal"
assert P[0, 1] > max(p[0], p[1]), "α_ab > max(α_aa, α_bb): the slide's weight bound fails here"
print("✓ scores obey the bound, weights need not: the diagonal rule needs equal norms")

fig, axes = viz.figure(1, 2, size=(8.4, 3.6))
viz.heatmap(axes[0], S, x_labels=names, y_labels=names, xlabel="key", ylabel="query",
            annotate=".2f", colorbar="score", title="Scores x_i·x_j/√2: the bound holds")
viz.heatmap(axes[1], P, x_labels=names, y_labels=names, xlabel="key", ylabel="query",
            vmin=0, vmax=1, annotate=".2f", colorbar="attention weight",
            title="Weights: row a peaks at b")
fig.suptitle("Unequal norms: the diagonal does not always win")
viz.save(fig, "03_unequal_norms")

# %% [markdown]
# The fix: learned, different projections for queries and keys
# ------------------------------------------------------------
#
# Give queries and keys their own learned matrices: score (i, j) becomes (x_i W_Q) · (x_j W_K).
# This is no longer a dot product of a vector with itself, so the bound is gone, and the
# matrix W_Q W_Kᵀ can weight, mix and ignore features as training sees fit. (It has to be
# W_Q ≠ W_K: one shared W gives the Gram matrix of X W, and the bound comes back.) We take the
# equal-norm tokens, the case where the diagonal always won, and random initial weights.

# %%
X_eq = X / np.linalg.norm(X, axis=1, keepdims=True) * math.sqrt(d)   # (6, 16), rows of length 4
W_Q, W_K, W_V = (nn.Linear(d, d, bias=False) for _ in range(3))
_, plain = F.attention(X_eq, X_eq, X_eq)
_, learned = F.attention(W_Q(X_eq), W_K(X_eq), W_V(X_eq))
S_shared = W_Q(X_eq) @ W_Q(X_eq).T
_, learned_rotated = F.attention(W_Q(X_eq @ R), W_K(X_eq @ R), W_V(X_eq @ R))

print("row argmax, no weights:     ", plain.probs.argmax(axis=1))
print("row argmax, W_Q ≠ W_K:      ", learned.probs.argmax(axis=1))
seeds_off = 0
for trial in range(20):                                # fresh tokens and weights each time
    with backend.seed(100 + trial):
        Z = backend.to_numpy(backend.randn(n, d))
        Z = Z / np.linalg.norm(Z, axis=1, keepdims=True) * math.sqrt(d)
        Wq, Wk = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
    _, trial_cache = F.attention(Wq(Z), Wk(Z), Z)
    seeds_off += np.any(trial_cache.probs.argmax(axis=1) != np.arange(n))
print(f"random W_Q, W_K move some row's maximum off the diagonal in {seeds_off} / 20 draws")

assert np.array_equal(plain.probs.argmax(axis=1), np.arange(n)), "no weights: the diagonal wins"
assert np.any(learned.probs.argmax(axis=1) != np.arange(n)), \
    "with W_Q ≠ W_K some row's largest weight should leave the diagonal (deck 003's fix)"
assert seeds_off >= 18, \
    f"W_Q ≠ W_K should free the diagonal in nearly every draw, got {seeds_off} / 20"
sd = np.diag(S_shared)
assert np.all(S_shared <= np.maximum(sd[:, None], sd[None, :]) + 1e-9), \
    "with a shared W_Q = W_K the scores are a Gram matrix again, and the bound returns"
assert not np.allclose(learned_rotated.probs, learned.probs, atol=1e-3), \
    "learned projections should care which features carry what (rotation changes the weights)"
print("✓ learned W_Q ≠ W_K: the diagonal no longer wins, and features are no longer equal")

fig, axes = viz.figure(1, 2, size=(9.6, 4.0))
for ax, probs, title in ((axes[0], plain.probs, "softmax(X Xᵀ/√d): no weights"),
                         (axes[1], learned.probs, "softmax(X W_Q (X W_K)ᵀ/√d)")):
    image = viz.heatmap(ax, probs, x_labels=words, y_labels=words, xlabel="key",
                        ylabel="query", vmin=0, vmax=1, annotate=".2f", title=title)
fig.colorbar(image, ax=axes, label="attention weight", shrink=0.85)
fig.suptitle("Equal-norm tokens: the diagonal wins until queries and keys get their own W")
viz.save(fig, "03_diagonal")

# %% [markdown]
# Outputs never leave the hull of the values
# ------------------------------------------
#
# Each output is Σ_j α_ij v_j with α_ij ≥ 0 and Σ_j α_ij = 1: a convex combination of the value
# vectors, whatever the queries and keys are. With 4 values in 16 dimensions, every output lies
# in the 4-dimensional subspace they span, and inside that, in the region they enclose. Least
# squares confirms it: the outputs are rebuilt from the values with a residual at rounding
# level, and the coefficients it finds are the attention weights.
#
# Leaving that subspace by itself proves little: a generic learned map applied to each
# position, even a plain ``nn.Linear``, moves the outputs out of it. The sharper question is
# whether they are still averages of *something*. After a linear layer they are: since the
# weights sum to 1, (Σ_j α_ij v_j) W + b = Σ_j α_ij (v_j W + b), so attention followed by a
# linear map is just attention over linearly mapped values, with the same weights. The
# feed-forward network (``nn.FeedForward``: two linear layers with a ReLU between them) has no
# such identity; what it adds beyond a linear map is the nonlinearity, and that is what the
# deck asks for.

# %%
n_v = 4
Xv = backend.to_numpy(backend.randn(n_v, d))           # (4, 16)
V = W_V(Xv)                                             # (4, 16) values
out, span_cache = F.attention(W_Q(Xv), W_K(Xv), V)      # (4, 16)
alpha = span_cache.probs                                # (4, 4)
linear, ffn = nn.Linear(d, d), nn.FeedForward(d, 64)    # both applied position by position
linear.b.data[:] = backend.to_numpy(backend.randn(d))   # a non-zero bias, as after training


def residual(Y, V):
    """Relative distance of each row of Y from the span of the rows of V (least squares)."""
    coef, *_ = np.linalg.lstsq(V.T, Y.T, rcond=None)
    return np.linalg.norm(V.T @ coef - Y.T, axis=0) / np.linalg.norm(Y, axis=1), coef.T


res_att, coef = residual(out, V)
res_lin, _ = residual(linear(out), V)
res_lin_mapped, _ = residual(linear(out), linear(V))
res_ffn_mapped, _ = residual(ffn(out), ffn(V))
print("relative distance of the 4 outputs from a span (largest if they belong in it, "
      "smallest if not):")
print(f"  attention output           from span(V)              {res_att.max():.1e}")
print(f"  Linear(output)             from span(V)              {res_lin.min():.2f}")
print(f"  Linear(output)             from span(Linear(V))      {res_lin_mapped.max():.1e}")
print(f"  FeedForward(output)        from span(FeedForward(V)) {res_ffn_mapped.min():.2f}")
assert res_att.max() < 1e-10, "attention outputs should lie in the span of the values (deck 004)"
assert np.allclose(coef, alpha, atol=1e-10), "the least-squares coefficients should be the weights"
assert res_lin.min() > 1e-3, "a plain linear layer should already move the outputs out of span(V)"
assert np.allclose(linear(out), alpha @ linear(V), atol=1e-12), \
    "identity: weights that sum to 1 give (Σ α v) W + b = Σ α (v W + b)"
assert res_ffn_mapped.min() > 1e-3, \
    "the feed-forward outputs should not be averages of the mapped values: its ReLU is " \
    "the nonlinearity deck 004 adds after attention"
print("✓ attention outputs = weights × values; after a Linear they still are (of mapped values); "
      "after the MLP they are not")

# %% [markdown]
# The same in a picture: 5 values in 2-D, and 400 queries of every direction and size. Five
# values span the whole plane, so here the hull is what counts. The attention outputs fill the
# pentagon the values enclose and never step outside it. A linear layer moves the pentagon and
# everything in it together, so the outputs stay inside the image of the pentagon. The
# feed-forward network bends the plane, and many outputs land outside the hull of the mapped
# values. (minitf starts biases at zero, which puts every ReLU kink through the origin; random
# first-layer biases, as training would give, spread the kinks across the pentagon. A point is
# inside a convex polygon when it lies left of every edge, walked anticlockwise; ``hull`` finds
# those edges.) This is the deck's reason for a nonlinear MLP after attention in every block:
# attention moves information between positions, and the MLP transforms what arrived in ways no
# average of values can.

# %%
angles = np.sort(2 * np.pi * (np.arange(5) + 0.3 * backend.to_numpy(backend.rand(5))) / 5)
values = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # (5, 2), anticlockwise
queries = backend.to_numpy(backend.randn(400, 2)) * 4       # (400, 2)
points, _ = F.attention(queries, values, values)             # keys = values here
linear_2d, ffn_2d = nn.Linear(2, 2), nn.FeedForward(2, 32)
ffn_2d.W_1.b.data[:] = 0.5 * backend.to_numpy(backend.randn(32))   # move the ReLU kinks
stages = [("attention", points, values),                     # (outputs, what they average)
          ("attention, then nn.Linear", linear_2d(points), linear_2d(values)),
          ("attention, then nn.FeedForward", ffn_2d(points), ffn_2d(values))]


def hull(P):
    """The corners of the convex hull of the points P, anticlockwise (monotone chain)."""
    def turns_left(a, b, c):
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]) > 0

    def half(chain, pts):
        for p in pts:
            while len(chain) >= 2 and not turns_left(chain[-2], chain[-1], p):
                chain.pop()
            chain.append(p)
        return chain[:-1]
    pts = sorted(P, key=tuple)
    return np.array(half([], pts) + half([], pts[::-1]))


def inside(P, corners, tol=1e-9):
    """True where a point lies in the convex polygon with these anticlockwise corners."""
    edges = np.roll(corners, -1, axis=0) - corners                       # (c, 2)
    rel = P[:, None, :] - corners[None, :, :]                            # (m, c, 2)
    cross = edges[None, :, 0] * rel[..., 1] - edges[None, :, 1] * rel[..., 0]
    return np.all(cross >= -tol, axis=1)


share = [inside(p, hull(v)).mean() for _, p, v in stages]
for (name, _, _), frac in zip(stages, share):
    print(f"{name:<32} inside the hull of the values it averages: {frac:.0%}")
assert share[0] == 1.0, "every attention output should lie inside the hull of the values (deck 004)"
assert share[1] == 1.0, "identity: a linear map keeps weighted averages inside the mapped hull"
assert share[2] < 0.9, "many feed-forward outputs should land outside the hull of the mapped values"
print("✓ attention only averages, and a linear layer keeps it so; the MLP goes somewhere new")

fig, axes = viz.figure(1, 3, size=(13, 4.8))
for ax, (name, p, v), frac in zip(axes, stages, share):
    ins = inside(p, hull(v))
    ax.fill(*hull(v).T, color="tab:blue", alpha=0.12, label="hull of the (mapped) values")
    ax.scatter(*p[ins].T, s=6, color="tab:blue", label="output inside the hull")
    ax.scatter(*p[~ins].T, s=10, marker="x", lw=0.8, color="tab:red",
               label="output outside the hull")
    ax.scatter(*v.T, s=70, color="black", zorder=3, label="values (through the same map)")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("feature 1")
    ax.set_ylabel("feature 2")
    ax.set_title(f"{name}:\n{frac:.0%} of the outputs inside the hull", fontsize=10)
handles, labels = axes[2].get_legend_handles_labels()
fig.legend(handles, labels, fontsize=9, ncol=4, loc="outside lower center")
fig.suptitle("Attention outputs are averages of the values; only the nonlinear MLP escapes")
viz.save(fig, "03_convex_hull")

# %% [markdown]
# What to remember
# ----------------
#
# * softmax(X Xᵀ) X has no parameters and sees only lengths and angles between tokens.
# * Scores obey x_i · x_j ≤ max(x_i · x_i, x_j · x_j); with equal norms each token attends
#   most to itself. For weights the slide's bound needs equal norms: otherwise it can fail.
# * Learned W_Q ≠ W_K break the bound and let training decide who attends to whom.
# * Attention outputs are convex combinations of the values. A linear layer after attention
#   keeps them averages (of mapped values); the nonlinear MLP after attention is what can take
#   them somewhere new.
#
# Next, lesson 04: masks, to hide the future and the padding.
