"""
Why divide by √d_k
==================

Measure what the 1/√d_k in softmax(Q Kᵀ / √d_k) V is for. Dot products of longer vectors are
larger: their variance grows as d_k. Fed raw to a softmax, large scores pick a single key with
weight close to 1, and the gradient that learning needs dies out. Divided by √d_k, the scores
keep unit variance at every width, and the weights and gradients stay the same.

Run it: ``minitf lesson 2`` (a few seconds), or as a plain script,
``python lessons/02_why_sqrt_dk.py``.
"""

# %%
import math

import numpy as np

import minitf.functional as F
from minitf import backend, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# How large is a dot product?
# ---------------------------
#
# Suppose the entries of a query q and a key k are independent, with mean 0 and variance 1 (what
# a well-initialised layer produces). Their dot product q · k = Σ_i q_i k_i is a sum of d_k
# independent terms, each with mean 0 and variance E[q_i²] E[k_i²] = 1. Variances of independent
# terms add, so::
#
#     var(q · k) = d_k        and its standard deviation is √d_k.
#
# Dividing by √d_k brings the variance back to 1, whatever d_k is. That is the whole argument;
# the rest of the lesson measures it, and then asks why a variance of 1 matters.
#
# A slip in deck 004: its slide on scaling names q and **v** where it means q and **k**. The
# arithmetic is not what is wrong (q · v would have variance d_k too, under the same
# assumptions); the slip is about *which* dot product gets scaled. The scores are q · k, and the
# values only enter afterwards, averaged with the softmax's weights.
#
# We draw 4,000 query rows for each width d_k ∈ {4, 16, 64, 256, 1024}: 250 independent blocks
# of 16 queries against 16 keys, so every row is one query's softmax over 16 keys.

# %%
widths = [4, 16, 64, 256, 1024]
blocks, n = 250, 16                                     # 250 blocks × 16 queries = 4,000 rows
stats = {name: [] for name in ("var_raw", "var_scaled", "max_raw", "max_scaled",
                               "grad_raw", "grad_scaled", "median_raw", "one_hot_raw")}
keep = {}                                               # scores at d_k = 1024, for the figures

for d_k in widths:
    Q = backend.to_numpy(backend.randn(blocks, n, d_k))     # (250, 16, d_k) queries
    K = backend.to_numpy(backend.randn(blocks, n, d_k))     # (250, 16, d_k) keys
    V = backend.to_numpy(backend.randn(blocks, n, 8))       # (250, 16, 8)   values
    raw = Q @ K.swapaxes(-1, -2)                            # (250, 16, 16): every q · k
    scaled = raw / math.sqrt(d_k)

    p_raw, cache_raw = F.softmax(raw)                       # row-wise over the 16 keys
    p_scaled, cache_scaled = F.softmax(scaled)
    _, att = F.attention(Q, K, V)                           # minitf's layer scales by itself
    assert np.allclose(att.probs, p_scaled, atol=1e-14), "F.attention should divide q·k by √d_k"
    # the deck's slip (q and v): other values leave the weights as they were; only q·k scales
    assert np.array_equal(F.attention(Q, K, 2 * V + 1)[1].probs, att.probs), \
        "the weights come from q and k alone: v enters only after the softmax"

    # Backward: a random upstream gradient dp, pushed through the softmax's Jacobian.
    dp = backend.to_numpy(backend.randn(blocks, n, n))
    g_raw = np.abs(F.softmax_backward(dp, cache_raw)).mean(axis=-1)        # (250, 16) per row
    g_scaled = np.abs(F.softmax_backward(dp, cache_scaled)).mean(axis=-1)

    for name, value in (("var_raw", raw.var()), ("var_scaled", scaled.var()),
                        ("max_raw", p_raw.max(-1).mean()), ("max_scaled", p_scaled.max(-1).mean()),
                        ("grad_raw", g_raw.mean()), ("grad_scaled", g_scaled.mean()),
                        ("median_raw", np.median(g_raw)),
                        ("one_hot_raw", (p_raw.max(-1) > 0.99).mean())):
        stats[name].append(value)
    if d_k == widths[-1]:
        keep = {"raw": raw[0, 0], "dp": dp[0, 0]}
stats = {name: np.array(values) for name, values in stats.items()}

print(" d_k   var(q·k)  var(q·k/√d_k)")
for i, d_k in enumerate(widths):
    print(f"{d_k:>4}  {stats['var_raw'][i]:>9.1f}  {stats['var_scaled'][i]:>13.3f}")

assert np.allclose(stats["var_raw"] / widths, 1, rtol=0.1), \
    f"var(q·k) should be ≈ d_k (deck 004), got {np.round(stats['var_raw'], 1)}"
assert np.allclose(stats["var_scaled"], 1, rtol=0.1), \
    f"var(q·k / √d_k) should be ≈ 1 at every width, got {np.round(stats['var_scaled'], 3)}"
print("✓ var(q·k) ≈ d_k, and ≈ 1 after dividing by √d_k")

# %% [markdown]
# What large scores do to the softmax
# -----------------------------------
#
# Softmax only looks at differences between scores, and those differences scale with the
# standard deviation √d_k. At d_k = 1024 the raw scores have a standard deviation of 32, so even
# the two largest of 16 are typically about 15 apart (half a standard deviation), and
# e^(−15) ≈ 3·10⁻⁷: the largest score takes everything. Two things go wrong.
#
# * The blend disappears: each query copies one value instead of mixing several.
# * Learning stops. The softmax's backward pass (``F.softmax_backward``) is
#   dx = p ⊙ (dp − Σ_j p_j dp_j). When p is one-hot, the winner's entry is
#   1 · (dp_w − dp_w) = 0 and every other entry is multiplied by p_j ≈ 0. Whatever gradient dp
#   arrives from above, almost nothing passes back to the queries and keys.
#
# We measure both per row: the largest weight (1/16 = 0.0625 would be uniform, 1 is one-hot) and
# the mean absolute entry of dx (``mean |dx|`` in the table) for a random upstream gradient dp.
# The mean over rows hides how bad a *typical* row is, so the median is printed too.

# %%
print(" d_k   max weight: raw  scaled   rows > 0.99 (raw)   mean |dx|: raw    scaled"
      "   median |dx|: raw")
for i, d_k in enumerate(widths):
    print(f"{d_k:>4}  {stats['max_raw'][i]:>15.3f}  {stats['max_scaled'][i]:>6.3f}"
          f"  {stats['one_hot_raw'][i]:>17.1%}  {stats['grad_raw'][i]:>15.4f}"
          f"  {stats['grad_scaled'][i]:>8.4f}  {stats['median_raw'][i]:>17.1e}")

fall = stats["grad_raw"][0] / stats["grad_raw"][-1]
median_fall = stats["median_raw"][0] / stats["median_raw"][-1]
print(f"unscaled, d_k 4 → 1024: mean |dx| falls {fall:.1f}×, median |dx| {median_fall:.1e}×"
      f"  (saturated rows' 1/√d_k law: {math.sqrt(widths[-1] / widths[0]):.0f}×)")

assert np.all(np.diff(stats["max_raw"]) > 0) and stats["max_raw"][-1] > 0.95, \
    f"unscaled, the largest weight should climb towards 1, got {np.round(stats['max_raw'], 3)}"
assert stats["max_raw"][0] < 0.5, "at d_k = 4 the unscaled softmax should still blend"
assert stats["max_scaled"].max() / stats["max_scaled"].min() < 1.1, \
    f"scaled, the largest weight should stay flat, got {np.round(stats['max_scaled'], 3)}"
assert fall >= 8, f"unscaled, the softmax gradient should fall ≥ 8× by d_k = 1024 (deck 002: " \
                  f"'vanishing gradients when d is large'), it fell {fall:.1f}×"
assert stats["grad_scaled"].max() / stats["grad_scaled"].min() < 1.05, \
    f"scaled, the gradient size should stay within 5 %, got {np.round(stats['grad_scaled'], 4)}"
assert median_fall > 1e4, "for a typical row the unscaled gradient should all but vanish"
print(f"✓ raw scores saturate (max weight {stats['max_raw'][0]:.2f} → "
      f"{stats['max_raw'][-1]:.2f}) and starve the gradient; scaled ones keep both steady")

# %% [markdown]
# Why compare with 1/√d_k? Once rows saturate, a row passes a real gradient only if its two
# largest raw scores lie within about 1 of each other, and with scores spread by σ = √d_k the
# chance of such a near-tie shrinks like 1/σ: so the mean gradient of saturated rows falls like
# 1/√d_k, 16× from d_k = 4 to 1024. It falls only about 10× here because at d_k = 4 the raw rows
# are not saturated yet (their largest weight is under 0.5): the start of the range sits below
# the line the law draws. The mean is carried by those few near-tied rows; the median row tells
# the real story: its gradient drops by more than four orders of magnitude.
#
# "Exponentially small"
# ---------------------
#
# Deck 004 says the softmax's gradients become *exponentially* small for large inputs. Take one
# row at d_k = 1024 and walk from the scaled scores (multiplier t = 1) to the raw ones
# (t = √1024 = 32) in steps of 0.25: the scores' shape stays the same, only their size grows. At
# first a sharper softmax is, if anything, *more* sensitive: for this row the gradient peaks
# between t = 2 and t = 3 (near t = 2.5) and stays above its t = 1 size until t ≈ 4. Past t ≈ 6,
# with a log y axis, it falls along a straight line: decay like e^(−t·gap), where the gap is the
# distance between the row's two largest scaled scores. The runner-up's weight is about
# e^(−t·gap), and it carries most of what is left of the gradient.

# %%
row = keep["raw"] / math.sqrt(widths[-1])               # (16,) one query's scaled scores
multipliers = np.arange(0, 129) / 4                  # 0, 0.25, …, 32; 1 = scaled, 32 = raw
path_grad, path_max = [], []
for t in multipliers:
    p, cache = F.softmax(t * row)
    path_grad.append(np.abs(F.softmax_backward(keep["dp"], cache)).mean())
    path_max.append(p.max())
path_grad, path_max = np.array(path_grad), np.array(path_max)
at = {t: i for i, t in enumerate(multipliers)}      # multiplier → its index in the grid
for t in (0, 1, 2, 2.5, 3, 4, 6, 8, 16, 24, 32):
    print(f"t = {t:>4}: max weight {path_max[at[t]]:.6f}   mean |dx| {path_grad[at[t]]:.1e}")
peak = multipliers[path_grad.argmax()]
still_above = multipliers[path_grad >= path_grad[at[1]]].max()
print(f"the gradient peaks at t = {peak} and is at least its t = 1 size up to t = {still_above}")
assert 2 < peak < 3, \
    f"a sharper softmax should first be more sensitive: peak between t = 2 and 3, got t = {peak}"
assert 4 <= still_above < 5, \
    f"the gradient should stay at least its t = 1 size until t ≈ 4, got up to t = {still_above}"
top_two = np.sort(row)[-2:]
gap = top_two[1] - top_two[0]
rate = np.log(path_grad[at[24]] / path_grad[at[32]]) / (32 - 24)
print(f"gap between the two largest scaled scores = {gap:.4f}; "
      f"decay rate of the gradient for t = 24 → 32 = {rate:.4f} per unit of t")

assert path_grad[at[32]] < 1e-6 * path_grad[at[1]], \
    "from t = 1 to t = 32 this row's gradient should shrink by more than a million"
assert path_max[at[32]] > 1 - 1e-6, "at the raw scale the row should be one-hot"
assert abs(rate / gap - 1) < 0.02, \
    f"the gradient should decay like e^(−t·gap) (deck 004: 'exponentially small'): " \
    f"rate {rate:.4f}, gap {gap:.4f}"
shrink = path_grad[at[1]] / path_grad[at[32]]
print(f"✓ one row, scaled → raw: the gradient shrinks {shrink:.0e}×, "
      f"exponentially at the rate of the top-two gap, and the weights turn one-hot")

# %% [markdown]
# The figures
# -----------
#
# The first figure puts the three measurements side by side. On log–log axes the raw variance
# is the line var = d_k; the scaled one is flat at 1. The raw largest weight climbs to 1 and the
# raw gradient sinks (its median by more than four orders); the scaled curves do not move.

# %%
fig, axes = viz.figure(1, 3, size=(13, 3.8))
viz.curves(axes[0], widths, {"q·k (raw)": stats["var_raw"],
                             "q·k / √d_k (scaled)": stats["var_scaled"]},
           xlabel="d_k", ylabel="variance of the scores", logx=True, logy=True,
           title="Score variance grows as d_k")
viz.curves(axes[1], widths, {"raw": stats["max_raw"], "scaled": stats["max_scaled"]},
           xlabel="d_k", ylabel="mean largest weight (16 keys)", logx=True,
           hline=(1 / n, "uniform, 1/16"), title="Raw scores saturate the softmax")
axes[1].set_ylim(0, 1.02)
viz.curves(axes[2], widths, {"raw, mean": stats["grad_raw"], "scaled, mean": stats["grad_scaled"],
                             "raw, median": stats["median_raw"]},
           xlabel="d_k", ylabel="|∂ softmax| per entry", logx=True, logy=True,
           title="…and the gradient vanishes")
fig.suptitle("Why divide by √d_k: 4,000 random query rows per width")
viz.save(fig, "02_sqrt_dk")

# %% [markdown]
# The second figure looks at the single row: on the left its 16 weights at d_k = 1024, raw and
# scaled; on the right the walk from scaled to raw, with two curves on a log scale: the mean
# gradient, and 1 − the largest weight, which is what the other 15 keys still receive (mostly
# the runner-up's weight, about e^(−t·gap)). Both fall at the same exponential rate.

# %%
fig, axes = viz.figure(1, 2, size=(11, 3.8))
p_row_raw = F.softmax(keep["raw"])[0]
p_row_scaled = F.softmax(row)[0]
keys = np.arange(n)
axes[0].bar(keys - 0.2, p_row_raw, width=0.4, label="raw q·k")
axes[0].bar(keys + 0.2, p_row_scaled, width=0.4, label="q·k / √d_k")
axes[0].set_xticks(keys)
axes[0].set_xlabel("key")
axes[0].set_ylabel("attention weight")
axes[0].set_ylim(0, 1.05)
axes[0].set_title("One query, d_k = 1024: one-hot vs a blend")
axes[0].legend(fontsize=8)
viz.curves(axes[1], multipliers, {"mean |∂ softmax|": path_grad, "1 − largest weight":
                                  np.maximum(1 - path_max, 1e-17)},
           xlabel="multiplier t on the scaled scores", ylabel="size (log scale)", logy=True,
           title="Same row, growing scores: exponential collapse", marker="")
for t, name, y, va in ((1, "scaled, t = 1", 0.03, "bottom"), (32, "raw, t = 32", 0.97, "top")):
    axes[1].axvline(t, color="gray", ls=":", lw=1)
    axes[1].text(t, y, name, rotation=90, va=va, ha="right", fontsize=8,
                 transform=axes[1].get_xaxis_transform())
viz.save(fig, "02_saturation")

# %% [markdown]
# What to remember
# ----------------
#
# * With unit-variance entries, var(q · k) = d_k; the slide that says "q and v" means q and k.
# * Large scores make the softmax one-hot, and a one-hot softmax passes back almost no gradient:
#   its Jacobian diag(p) − p pᵀ is zero at a one-hot p.
# * Dividing by √d_k keeps the scores at unit variance, so the weights and their gradients look
#   the same whether a head is 4 or 1024 wide.
#
# Next, lesson 03: what attention without learned weights can and cannot do.
