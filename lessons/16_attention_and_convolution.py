"""
Attention can be a convolution; splitting wide
==============================================

A convolution applies one small kernel at every position; attention lets every position read
every other. They look like opposites, yet one deck states that multi-head attention with h
heads can do everything a √h × √h convolution does. This lesson builds that claim with minitf:
three heads reproduce a 1-D convolution of width 3, nine heads of ``nn.MultiHeadAttention`` a
3 × 3 convolution on a 5 × 5 grid, and one head cannot. It ends with the other cheap way to go
wide, splitting the input into k parts: k² fewer parameters, k times fewer FLOPs, and parts
that never talk to each other.

Run it: ``minitf lesson 16`` (a few seconds), or as a plain script,
``python lessons/16_attention_and_convolution.py``.
"""

# %%
import itertools
import time

import numpy as np

import minitf.functional as F
from minitf import backend, cost, nn, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# A convolution is a sum over fixed offsets
# -----------------------------------------
#
# A 1-D convolution of width 3 over a sequence of n vectors with C channels has one C × C matrix
# per tap, W₋₁, W₀ and W₊₁, and computes at every position t::
#
#     y_t = x_{t−1} W₋₁  +  x_t W₀  +  x_{t+1} W₊₁  +  c       (zero where t ± 1 is off the end)
#
# Read it as three lookups and a sum. Lookup k fetches the vector at offset k, which is what an
# attention head does when only one key is allowed: a mask that lets query t see key t + k and
# nothing else makes its softmax row one-hot, whatever the scores. So give head k the values
# x W_k, let it look at offset k only, and add the three heads. Adding is what concat · W_o
# does when W_o is three identity matrices stacked, [I; I; I]. At the two ends, the head whose
# offset falls off the sequence has no key at all; minitf returns zeros for such a fully masked
# row, which is exactly the convolution's zero padding.

# %%
n, C = 10, 4
offsets = (-1, 0, 1)
x = backend.randn(n, C)                                 # (n, C): one vector per position
W = backend.randn(3, C, C) / 2                          # the kernel: one C × C matrix per tap
c = backend.randn(C)                                    # its bias

padded = np.pad(x, ((1, 1), (0, 0)))                    # zero padding, for the reference only
conv = sum(padded[1 + k:1 + k + n] @ W[i] for i, k in enumerate(offsets)) + c

j_minus_i = np.arange(n)[None, :] - np.arange(n)[:, None]          # (n, n): key − query
masks = np.stack([j_minus_i == k for k in offsets])                # (3, n, n): True = look
q = np.zeros((3, n, 1))                                 # all scores 0: the mask alone decides
v = np.stack([x @ W[i] for i in range(3)])              # (3, n, C): head k's values are x W_k
heads, cache = F.attention(q, q, v, mask=masks)         # (3, n, C): one output per head
concat = F.merge_heads((heads[None],))[0]   # one part, (b=1, 3, n, C) -> (n, 3C): side by side
W_o = np.vstack([np.eye(C)] * 3)                        # (3C, C): [I; I; I] adds the heads
attn, _ = F.linear(concat, W_o, c)                      # (n, C)

error = np.abs(attn - conv).max()
print("head −1, rows 0-3:\n", cache.probs[0, :4, :5])
print(f"|3 heads − convolution| = {error:.1e}")
assert error < 1e-12, "three one-offset heads, summed by W_o, are a width-3 convolution (deck 003)"
assert not cache.probs[0, 0].any() and not cache.probs[2, -1].any(), \
    "off the ends, a head has no key: its row is all zeros, the convolution's zero padding"
assert np.allclose(cache.probs[1], np.eye(n)), "head 0 looks at its own position only"
print("✓ a width-3 convolution = 3 heads, each one-hot on one offset, added by W_o = [I; I; I]")

# %% [markdown]
# Why one head is not enough
# --------------------------
#
# One head has a single softmax row per query: it can pick one element, or average several
# (lesson 06 showed the same limit). Let one head see all three neighbours with equal scores:
# away from the ends it returns their mean, times its one value matrix M, which is a
# convolution whose three taps are all M / 3. Change the softmax weights and the taps become
# p₋₁·M, p₀·M, p₊₁·M: always multiples of *one* matrix. A general kernel has three unrelated
# matrices. Flatten each tap into a row of a 3 × C² table: one head can only produce tables of
# rank one, and the best rank-one table (from the SVD) still misses a large part of our kernel.

# %%
M = backend.randn(C, C)
one, _ = F.attention(q[:1], q[:1], (x @ M)[None], mask=np.abs(j_minus_i) <= 1)
equal_taps = sum(padded[1 + k:1 + k + n] @ (M / 3) for k in offsets)
print(f"one head, equal scores: |output − conv with taps M/3| = "
      f"{np.abs(one[0, 1:-1] - equal_taps[1:-1]).max():.1e} away from the ends")
singular = np.linalg.svd(W.reshape(3, C * C), compute_uv=False)
missed = np.sqrt((singular[1:] ** 2).sum() / (singular ** 2).sum())
print(f"our kernel's taps as a 3 × {C * C} table: singular values {np.round(singular, 2)}; "
      f"the best rank-one table misses {missed:.0%} of it")
assert np.abs(one[0, 1:-1] - equal_taps[1:-1]).max() < 1e-12, "one head averages: equal taps"
assert missed > 0.3, "one head cannot express a kernel with three independent taps"
print("✓ one head: taps that are multiples of one matrix; three heads: any three taps")

# %% [markdown]
# Nine heads make a 3 × 3 convolution
# -----------------------------------
#
# On an image the offsets are two-dimensional. A 3 × 3 kernel has nine taps, (Δi, Δj) with each
# of Δi, Δj in {−1, 0, 1}, so nine heads do it, one per offset: h heads give a √h × √h kernel.
# Cordonnier, Loukas and Jaggi (2020) prove the general statement the lectures quote: a
# multi-head layer with h heads and a relative-position term can express any √h × √h
# convolution, and since it can do other things too, it is *more* expressive.
#
# This time we use ``nn.MultiHeadAttention`` itself on a 5 × 5 grid of tokens (read row by row)
# with C = 4 channels, and put the kernel in a different place: every head's value matrix is
# the identity, so each head hands over its neighbour unchanged, and W_o, of shape (9·C, C),
# holds the nine taps stacked. Its row block for head h multiplies that head only (lesson 06),
# so concat · W_o = Σ_h neighbour_h · W_(Δi, Δj): the convolution again. The queries and keys
# are zero, and a per-head mask (9, 25, 25) lets each head see its one offset. Their width hardly
# matters, so ``d_head=1``; the values need all C channels, so ``d_v=C``. The fused projection
# W_qkv then has 9 query columns, 9 key columns and 9 × C value columns, in that order.

# %%
side, h = 5, 9
grid = [(i, j) for i in range(side) for j in range(side)]          # token t is pixel grid[t]
taps = list(itertools.product((-1, 0, 1), repeat=2))               # head h looks at taps[h]
rows, cols = np.array(grid).T
masks2d = np.stack([(rows[None, :] - rows[:, None] == di) & (cols[None, :] - cols[:, None] == dj)
                    for di, dj in taps])                            # (9, 25, 25): True = look
kernel = backend.randn(h, C, C) / 2                                 # one C × C matrix per tap
bias = backend.randn(C)

mha = nn.MultiHeadAttention(C, h, d_head=1, d_v=C)      # W_qkv (C, 9·(1 + 1 + C)), W_o (9C, C)
W_qkv = mha.W_qkv.W.data
W_qkv[:] = 0                                            # queries and keys: zero
values_start = 2 * h                                    # columns: 9 q | 9 k | 9 × C values
for head in range(h):                                   # values: the identity, in every head
    W_qkv[:, values_start + head * C:values_start + (head + 1) * C] = np.eye(C)
mha.W_qkv.b.data[:] = 0
mha.W_o.W.data[:] = kernel.reshape(h * C, C)            # the nine taps, stacked
mha.W_o.b.data[:] = bias

image = backend.randn(1, side * side, C)                # (b=1, 25 tokens, C)
attn2d = mha(image, mask=masks2d)[0].reshape(side, side, C)
padded2d = np.pad(image[0].reshape(side, side, C), ((1, 1), (1, 1), (0, 0)))
conv2d = sum(padded2d[1 + di:1 + di + side, 1 + dj:1 + dj + side] @ kernel[t]
             for t, (di, dj) in enumerate(taps)) + bias
error2d = np.abs(attn2d - conv2d).max()
empty_rows = (mha.probs[0].sum(-1) == 0).sum(-1)        # fully masked queries, per head
print(f"|9 heads of MultiHeadAttention − 3×3 convolution| = {error2d:.1e}")
print("queries with no key (image border), per head:", dict(zip(taps, empty_rows.tolist())))
assert error2d < 1e-12, "nine one-offset heads are a 3 × 3 convolution (deck 003; Cordonnier)"
assert empty_rows.tolist() == [9, 5, 9, 5, 0, 5, 9, 5, 9], \
    "off the border a head sees nothing: 5 pixels of a side, 9 for a corner offset"
print("✓ h = 9 heads express a √h × √h = 3 × 3 convolution, zero padding included")

fig, axes = viz.figure(3, 5, size=(12.5, 6.4))
centre = grid.index((2, 2))
for t, (di, dj) in enumerate(taps):
    ax = axes[di + 1, dj + 1]
    weights = viz.heatmap(ax, mha.probs[0, t, centre].reshape(side, side), vmin=0, vmax=1,
                          title=f"head {t}: Δrow {di:+d}, Δcol {dj:+d}")
    ax.title.set_fontsize(10)                                      # nine titles side by side
    ax.plot([1.5, 2.5, 2.5, 1.5, 1.5], [1.5, 1.5, 2.5, 2.5, 1.5], color="red", lw=2)
    ax.set_xticks(np.arange(side + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(side + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
    ax.set_aspect("equal")
fig.colorbar(weights, ax=axes[:, :3], label="attention weight of the centre pixel", shrink=0.8)
grid_spec = axes[0, 3].get_gridspec()
for ax in axes[:, 3:].ravel():
    ax.remove()
low, high = conv2d[..., 0].min(), conv2d[..., 0].max()
for column, (values, name) in enumerate(((conv2d, "3 × 3 convolution"),
                                         (attn2d, "9 attention heads"))):
    ax = fig.add_subplot(grid_spec[:, 3 + column])
    viz.heatmap(ax, values[..., 0], vmin=low, vmax=high, annotate=".1f", xlabel="column",
                ylabel="row" if column == 0 else "", title=f"{name}\n(output channel 0)",
                cmap="cividis")
    ax.set_aspect("equal")
fig.suptitle(f"Each head reads one neighbour of the query pixel (red box); together they are a "
             f"3 × 3 convolution (max difference {error2d:.0e})")
viz.save(fig, "16_conv_heads")

# %% [markdown]
# The masks above are hard-wired. A trained model has no such masks, but it can learn the same
# thing with a bias that depends only on the offset between query and key (the relative
# positions of lesson 09, here in two dimensions). Cordonnier et al. use, for head h, the bias
# −α‖δ − Δ_h‖², where δ is the offset of the key and Δ_h the head's chosen one: a bowl centred
# on Δ_h. The larger α, the closer each softmax row comes to one-hot. Away from the border the
# error falls like e^(−α); at the border a soft head still finds a nearest pixel, so padding is
# the one thing the mask does that the bias does not.

# %%
inner = [t for t, (i, j) in enumerate(grid) if 0 < i < side - 1 and 0 < j < side - 1]
di_grid = rows[None, :] - rows[:, None]                 # (25, 25): vertical offset of key
dj_grid = cols[None, :] - cols[:, None]
values = np.broadcast_to(image, (h, side * side, C))    # the identity values, per head
soft_errors = {}
for alpha in (1.0, 4.0, 16.0, 64.0):
    bowl = np.stack([-alpha * ((di_grid - di) ** 2 + (dj_grid - dj) ** 2) for di, dj in taps])
    soft, _ = F.attention(np.zeros((h, side * side, 1)), np.zeros((h, side * side, 1)), values,
                          bias=bowl)
    out, _ = F.linear(F.merge_heads((soft[None],))[0], kernel.reshape(h * C, C), bias)
    soft_errors[alpha] = np.abs(out[inner] - conv2d.reshape(-1, C)[inner]).max()
    print(f"α = {alpha:4.0f}: |soft heads − convolution| inside the border = "
          f"{soft_errors[alpha]:.1e}")
errors = list(soft_errors.values())
assert all(a > b for a, b in zip(errors, errors[1:])), "a sharper bowl, a closer convolution"
assert errors[-1] < 1e-12, "at α = 64 the learned-style bias gives the convolution exactly"
print("✓ an offset-only bias, made sharp, turns heads into convolution taps")

# %% [markdown]
# Splitting wide
# --------------
#
# Why make a network wide at all? Wider layers take larger inputs (more pixels, longer texts),
# hold larger intermediate representations and produce larger outputs, and wider models tend to
# perform better; language adds inputs and outputs of varying size. But a linear layer from D
# features to D features has D² weights and costs 2·D² FLOPs per input (a multiply and an add
# per weight), so width gets expensive fast.
#
# The deck's simple way out: cut the D features into k parts of D / k and run the *same* small
# network on each. One Linear(D/k, D/k) has (D/k)² = D² / k² weights, k² fewer; it runs k
# times, 2·k·(D/k)² = 2·D² / k FLOPs, k times fewer. (k *different* small networks would save
# FLOPs alike but only a factor k in parameters: the k² needs the weights to be shared.) As a
# D × D matrix the split layer is block-diagonal, and the blocks are what it cannot do: no
# weight connects part 1 to part 2. We count the weights of real minitf layers, the FLOPs with
# ``cost.matmul_cost`` on the products each way multiplies, and then time both at a larger width.

# %%
D, k = 64, 4
x = backend.randn(8, D)                                  # 8 inputs of D features
full = nn.Linear(D, D, bias=False)
shared = nn.Linear(D // k, D // k, bias=False)
separate = [nn.Linear(D // k, D // k, bias=False) for _ in range(k)]


def split_wide(x):
    """Run ``shared`` on each of the k parts: (b, D) -> (b, k, D/k) -> (b, D)."""
    return shared(x.reshape(len(x), k, D // k)).reshape(len(x), D)


y_full, y_split = full(x), split_wide(x)
block_diagonal = np.kron(np.eye(k), shared.W.data)       # (D, D): k copies on the diagonal
p_full, p_shared = full.num_parameters(), shared.num_parameters()
p_separate = sum(m.num_parameters() for m in separate)
f_full = cost.matmul_cost(len(x), D, D)["flops"]         # (8, D) · (D, D)
f_split = cost.matmul_cost(len(x) * k, D // k, D // k)["flops"]   # (8·k, D/k) · (D/k, D/k)
print(f"Linear({D}, {D}): {p_full:,} weights, {f_full:,} FLOPs for 8 inputs")
print(f"one shared Linear({D // k}, {D // k}) on {k} parts: {p_shared:,} weights "
      f"({p_full // p_shared}× fewer), {f_split:,} FLOPs ({f_full // f_split}× fewer)")
print(f"{k} separate Linear({D // k}, {D // k}): {p_separate:,} weights "
      f"({p_full // p_separate}× fewer)")
assert p_full == k ** 2 * p_shared, "splitting into k parts: k² fewer parameters (deck 003)"
assert f_full == k * f_split, "and k times fewer FLOPs (deck 003)"
assert p_full == k * p_separate, "with k different networks only k times fewer parameters"
assert np.allclose(y_split, x @ block_diagonal, atol=1e-14), "the split is a block-diagonal layer"

changed = x.copy()
changed[:, :D // k] = backend.randn(8, D // k)           # change part 1 only
moved_split = np.abs(split_wide(changed) - y_split).reshape(8, k, D // k).max(axis=(0, 2))
moved_full = np.abs(full(changed) - y_full).reshape(8, k, D // k).max(axis=(0, 2))
print("change part 1; largest change in each output part, split:", np.round(moved_split, 3))
print("                                           full Linear:", np.round(moved_full, 3))
assert moved_split[0] > 0 and (moved_split[1:] == 0).all(), \
    "split: parts 2-4 do not even notice that part 1 changed (deck 003: they don't communicate)"
assert (moved_full > 0.1).all(), "the full layer mixes every input feature into every output"


def fastest(run, repeats=7):
    """The best of a few wall-clock timings of run(), in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


with backend.seed(1), nn.no_grad():                     # D = 1024 in k = 4 parts, 256 inputs
    wide, narrow = nn.Linear(1024, 1024, bias=False), nn.Linear(256, 256, bias=False)
    xs = backend.randn(256, 1024)
    t_full, t_split = fastest(lambda: wide(xs)), fastest(lambda: narrow(xs.reshape(256, 4, 256)))
# printed, not asserted: a clock on a busy machine is no check (the counts above are)
print(f"timed at D = 1024, k = 4: Linear {t_full * 1e3:.1f} ms, split {t_split * 1e3:.1f} ms "
      f"({t_full / t_split:.1f}× faster; the FLOPs promise 4×)")
print("✓ k² fewer parameters, k× fewer FLOPs, and the parts never talk to each other")

# %% [markdown]
# The split layer is the token-level MLP of a Transformer: call each part a token, and the
# shared network is the feed-forward network, applied to every token on its own path (lesson
# 07). It is cheap, and it transforms each part where it stands, like a convolution of
# width 1. What it lacks, communication between the parts, is exactly what attention supplies,
# and with enough heads attention can even be a wider convolution. That is the layer the deck
# ends with: attention to mix the tokens, the shared MLP to process each one, with residuals
# and normalization around both.
#
# What to remember
# ----------------
#
# * A head whose mask allows a single offset copies one neighbour; k such heads, with the kernel
#   taps in the values or in W_o, add up to a convolution of k taps. The fully masked rows at the
#   border are the zero padding.
# * h heads can express a √h × √h convolution (nine heads, 3 × 3); one head cannot, because one
#   softmax row only picks or averages: its taps are all multiples of one matrix.
# * A relative-position bias that peaks at one offset reaches the same heads without masks.
# * Splitting D features into k parts with one shared network: k² fewer parameters, k× fewer
#   FLOPs (and about k× less time), and no communication between the parts, which attention
#   restores.
#
# Next, lesson 17: positional encodings beyond text, for the coordinates of an image.
