"""
Multi-head attention: split, concatenate, W_o
=============================================

One attention head gives each query one set of weights. Multi-head attention runs several
heads side by side, each with its own projections, concatenates what they return and mixes it
with one more matrix, W_o. You will reproduce the shapes of the lectures' PyTorch demo, cut
features into heads exactly as the annotated implementation does, recompute every head of
``nn.MultiHeadAttention`` by hand, build a task that two heads solve and one head cannot, and
compare full-width heads with the usual reduced ones.

Run it: ``minitf lesson 6`` (a few seconds), or as a plain script,
``python lessons/06_multi_head_attention.py``.
"""

# %%
import numpy as np

import minitf.functional as F
from minitf import backend, nn, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# Several heads, one output
# -------------------------
#
# A head is the attention of lessons 01-04 with its own learned projections. With h heads::
#
#     head_i = softmax(x W_i^q (x W_i^k)ᵀ / √d_k) · x W_i^v        (n, d_v) for each head
#     MHA(x) = concat(head_1, …, head_h) W_o                     (n, h·d_v) · (h·d_v, d) = (n, d)
#
# Each head can look somewhere else ("tense" in one, "vocabulary" in another, as one deck puts
# it), a little like an ensemble. The usual choice is d_k = d_v = d / h, so that concat(…) is d
# wide again and W_o is d × d.
#
# The lectures run ``torch.nn.MultiheadAttention`` with a batch of 2 sequences of 8 tokens, 16
# features and 4 heads. Here is the same experiment in minitf.

# %%
b, n, d, h = 2, 8, 16, 4
mha = nn.MultiHeadAttention(d, h)
x = backend.rand(b, n, d)                               # (2, 8, 16), uniform in [0, 1) as there
out = mha(x)
probs = mha.probs                                       # (b, h, n, n): one weight matrix per head
print(f"input {x.shape} -> output {out.shape}")
print(f"per-head weights {probs.shape}; averaged over the heads {probs.mean(axis=1).shape}")
print(f"W_qkv.W {mha.W_qkv.W.shape} (q | k | v side by side),  W_o.W {mha.W_o.W.shape}")
assert out.shape == (2, 8, 16), "the output has the input's shape [2, 8, 16] (deck 002's printout)"
assert probs.shape == (2, 4, 8, 8), "one (8, 8) weight matrix per sequence and per head"
assert probs.mean(axis=1).shape == (2, 8, 8), "the head average has PyTorch's shape [2, 8, 8]"
assert np.allclose(probs.mean(axis=1).sum(-1), 1), "an average of softmax rows still sums to 1"
assert mha.W_o.W.shape == (16, 16), "W_o is 16 × 16, as out_proj.weight in the demo"
print("✓ the demo's shapes: out [2, 8, 16], weights [2, 8, 8] after averaging, W_o [16, 16]")

# %% [markdown]
# A nuance in that printout: PyTorch's ``attn_weights`` of shape [2, 8, 8] is the *average over
# the 4 heads*, because ``average_attn_weights=True`` is its default; pass ``False`` and you get
# [2, 4, 8, 8]. minitf always keeps every head, since the heads are the interesting part. Also,
# PyTorch stores ``out_proj.weight`` as (out, in) and computes x Wᵀ, minitf stores W as (in, out)
# and computes x W: the same 16 × 16 numbers, transposed.
#
# The parameters: W_qkv holds the three d × d projections of all heads, W_o one more d × d, and
# each has a bias: 4d² + 4d = 1,088 for d = 16, whatever the number of heads. Splitting into
# heads changes how the features are *grouped*, not how many weights there are.

# %%
counts = {heads: nn.MultiHeadAttention(d, heads).num_parameters() for heads in (1, 2, 4, 8, 16)}
print("parameters for h = 1, 2, 4, 8, 16:", list(counts.values()))
assert mha.num_parameters() == 4 * d * d + 4 * d == 1_088, "4d² weights (deck 000) plus 4d biases"
assert set(counts.values()) == {1_088}, "the parameter count does not depend on h"
print("✓ 4d² + 4d = 1,088 parameters for d = 16, for any number of heads")

# %% [markdown]
# The lectures also quote the original Transformer's sizes: 6 layers, h = 8 heads,
# d_model = 512, a feed-forward width d_ff = 2048 and dropout 0.1. Each head is then
# d_head = 512 / 8 = 64 wide, and one attention layer of that model has
# 4 · 512² + 4 · 512 = 1,050,624 parameters.
# (The feed-forward network and the rest of the block come in lesson 07.)

# %%
original = nn.MultiHeadAttention(512, 8)                    # d_model = 512, h = 8
print(f"MultiHeadAttention(512, 8): d_head = {original.d_head}, "
      f"{original.num_parameters():,} parameters")
assert original.d_head == 64, "the original Transformer: d_model = 512 over h = 8 heads, d_head 64"
assert original.num_parameters() == 1_050_624, "4 · 512² + 4 · 512 = 1,050,624 parameters"
print("✓ the original Transformer's attention layer: 8 heads of 64, 1,050,624 parameters")

# %% [markdown]
# Cutting the features into heads
# -------------------------------
#
# The annotated implementation in the lectures projects x with a d × d matrix, then writes
# ``view(b, -1, h, d_k).transpose(1, 2)``: the d features of each token are cut into h blocks of
# d_k = d / h *consecutive* features, and the head axis is moved in front of the token axis so
# that one batched matmul runs all heads at once. ``F.split_heads`` is exactly that reshape and
# transpose. Label every feature by its index and look: with d = 16 and h = 2, head 0 holds
# features 0-7 and head 1 features 8-15.

# %%
y = np.broadcast_to(np.arange(16.0), (1, 3, 16)).copy()     # (b=1, n=3, 16): feature j holds j
heads = F.split_heads(y, 2)[0]                              # (b, h=2, n, d_k=8)
annotated = y.reshape(1, 3, 2, 8).transpose(0, 2, 1, 3)     # view(b, -1, h, d_k).transpose(1, 2)
print("head 0 reads features", heads[0, 0, 0].astype(int))
print("head 1 reads features", heads[0, 1, 0].astype(int))
assert np.array_equal(heads, annotated), "split_heads should be the annotated reshape + transpose"
assert np.array_equal(heads[0, 0, 0], np.arange(8)), "d = 16, h = 2: head 0 gets features 0-7"
assert np.array_equal(F.merge_heads(heads[None]), y), "merge_heads puts the heads back in order"
print("✓ split_heads = view(b, -1, h, d_k).transpose(1, 2); merge_heads is its inverse")

# %% [markdown]
# One deck draws the split one step earlier: head 0 reads X[:, :8] and head 1 reads X[:, 8:]
# *before* any projection, each with its own d_h × d_h matrices. minitf (like PyTorch and the
# annotated code) projects first, so each head's queries, keys and values are built from all 16
# input features, and only the *projection* is cut. The deck's version is the special case in
# which W_qkv is zero outside the diagonal blocks: then changing x[:, 8:] cannot move head 0.

# %%
split_first = nn.MultiHeadAttention(16, 2)
W = split_first.W_qkv.W.data                                # (16, 48): q | k | v, 2 heads each
for part in range(3):                                       # x[:, :8] → head 0, x[:, 8:] → head 1
    W[8:, part * 16:part * 16 + 8] = 0
    W[:8, part * 16 + 8:part * 16 + 16] = 0
x1 = backend.randn(1, 5, 16)
x2 = x1.copy()
x2[..., 8:] = backend.randn(1, 5, 8)                        # change only the second half of x
split_first(x1)
p1 = split_first.probs.copy()
split_first(x2)
p2 = split_first.probs
print(f"change x[:, 8:]: head 0 moves by {np.abs(p2[0, 0] - p1[0, 0]).max():.1e}, "
      f"head 1 by {np.abs(p2[0, 1] - p1[0, 1]).max():.2f}")
assert np.array_equal(p1[0, 0], p2[0, 0]) and not np.allclose(p1[0, 1], p2[0, 1]), \
    "with a block-diagonal W_qkv, head 0 reads only x[:, :8] (deck 002's split)"
print("✓ the deck's split-then-project is project-then-split with a block-diagonal W_qkv")

# %% [markdown]
# Every head by hand
# ------------------
#
# Now undo the fused projection. Columns 0-15 of W_qkv are the queries of all heads, 16-31 the
# keys and 32-47 the values; inside each, head i owns columns i·d_k … (i+1)·d_k − 1. Compute
# each head with ``F.attention`` from its own slices, concatenate, apply W_o, and compare with
# the module. In float64 the two agree to the last bit or nearly so.
#
# The concatenation hides a simple sum: row block i of W_o multiplies head i only, so
# concat(head_1, …, head_h) W_o = Σ_i head_i · W_o[rows of head i]. Each head writes into the
# output through its own d_k × d slice of W_o.

# %%
Wqkv, bqkv = mha.W_qkv.W.data, mha.W_qkv.b.data
d_k = d // h
by_hand, weights = [], []
for i in range(h):
    cols = [part * d + np.arange(i * d_k, (i + 1) * d_k) for part in range(3)]   # q, k, v columns
    q, k, v = (x @ Wqkv[:, c] + bqkv[c] for c in cols)                            # (b, n, d_k) each
    head, cache = F.attention(q, k, v)
    by_hand.append(head)
    weights.append(cache.probs)
concat = np.concatenate(by_hand, axis=-1)                   # (b, n, h·d_k) = (2, 8, 16)
manual = concat @ mha.W_o.W.data + mha.W_o.b.data
summed = sum(by_hand[i] @ mha.W_o.W.data[i * d_k:(i + 1) * d_k] for i in range(h)) + mha.W_o.b.data
out = mha(x)
print(f"head shapes {by_hand[0].shape} × {h} -> concat {concat.shape} -> · W_o {manual.shape}")
print(f"|by hand - module| = {np.abs(manual - out).max():.1e}, "
      f"|sum over heads - module| = {np.abs(summed - out).max():.1e}")
assert np.abs(manual - out).max() < 1e-12, "the heads computed from slices of W_qkv give the module"
assert np.allclose(np.stack(weights, axis=1), mha.probs, atol=1e-14), "and the same weights"
assert np.abs(summed - out).max() < 1e-12, "concat · W_o = Σ head_i · (its rows of W_o)"
print("✓ MHA = concat(head_1 … head_4) W_o, each head from its own d_k columns of W_qkv")

# %% [markdown]
# What the heads look at
# ----------------------
#
# Feed one sentence through the layer and draw each head's weights. The weights are untrained,
# yet each head already has its own pattern, because each has its own W^q and W^k. Such
# heatmaps are the usual way to "explain" a Transformer; keep in mind that a weight shows where
# a head looked, not why the model decided. One detail is worth spotting: "the" occurs twice,
# and with no position information (lesson 08) both copies have the same query and the same
# key, so their rows and their columns are identical in every head.

# %%
words = "the cat sat on the mat and slept".split()
vocab = sorted(set(words))
embed = nn.Embedding(len(vocab), d, std=2.0)        # large enough for clear patterns
sentence = embed(np.array([[vocab.index(w) for w in words]]))     # (1, 8, 16)
mha(sentence)
sentence_probs = mha.probs[0]                                     # (h, n, n)
assert np.allclose(sentence_probs[:, :, 0], sentence_probs[:, :, 4]), "the two 'the' keys match"
assert np.allclose(sentence_probs[:, 0], sentence_probs[:, 4]), "and so do the two 'the' queries"
print(f"largest weight in each head: {np.round(sentence_probs.max(axis=(1, 2)), 2)}")
fig = viz.attention_grid(sentence_probs, queries=words, keys=words,
                         title="MultiHeadAttention(16, 4), untrained: each head its own pattern")
viz.save(fig, "06_heads")

# %% [markdown]
# Why more than one head: a job one head cannot do
# ------------------------------------------------
#
# One softmax row makes one weighted average: it can point at a single token, or smear its
# weight over several, but it cannot hand over two tokens side by side. Take the job "at
# position t, hand over both x_{t−1} and x_{t−2}". Two heads do it exactly: head 0 may only look
# one step back, head 1 only two steps back (per-head offset masks), so each softmax gives its
# one allowed key weight 1, and the concatenation is [x_{t−1}, x_{t−2}]. (Where a head has
# nothing that far back -- both heads at position 0, head 1 at position 1 -- its row is fully
# masked and returns zeros.)

# %%
n, d = 8, 4
t_minus = np.arange(n)[:, None] - np.arange(n)[None, :]           # (n, n): i − j
offset_masks = np.stack([t_minus == 1, t_minus == 2])             # (h=2, n, n): True = look
xs = backend.randn(2000, n, d)                                    # 2000 random sequences
q = np.zeros((2000, 2, n, 1))                                     # all scores 0: the mask decides
two, two_cache = F.attention(q, q, np.stack([xs, xs], axis=1), mask=offset_masks)
two = F.merge_heads(two[None])                                    # (2000, n, 2d): [head 0 | head 1]
target = np.concatenate([xs[:, 1:-1], xs[:, :-2]], axis=-1)       # [x_{t−1}, x_{t−2}] for t ≥ 2
print(f"two heads: |output - [x_(t-1), x_(t-2)]| = {np.abs(two[:, 2:] - target).max():.1e}")
assert np.abs(two[:, 2:] - target).max() < 1e-12, "two offset heads copy both neighbours exactly"
assert (two[:, 0] == 0).all() and (two[:, 1, d:] == 0).all(), "nothing before the start: zeros"
print("✓ two heads: x_(t−1) in one half of the output, x_(t−2) in the other")

# %% [markdown]
# A single head sees both keys but has one softmax row: it returns p·x_{t−1} + (1 − p)·x_{t−2},
# one point on the segment between them, and any projections after it (W^v, W_o) are linear maps
# of that one d-vector. So its output always lies in a fixed subspace of dimension at most d,
# while the targets [x_{t−1}, x_{t−2}] fill all 2d dimensions: no weights, however chosen, can
# do the job. Measure it: for several p, fit the best possible linear map from the head's output
# to the target (least squares over the 2000 sequences) and see how much of the target is lost.
# With random inputs the answer is the same for every p: half, the d dimensions out of 2d that
# one mixture cannot carry. (Position 1 has a key one step back but none two back, so its row
# puts weight 1 on key 0 whatever p is: the one cell at full weight in the figure's third panel.)

# %%
lost, single = {}, {}
for p in (0.5, 0.7, 0.9, 0.99):
    scores = np.full((n, n), -np.inf)
    scores[t_minus == 1], scores[t_minus == 2] = np.log(p), np.log(1 - p)
    one, one_cache = F.attention(q[:, 0], q[:, 0], xs, mask=scores)          # (2000, n, d)
    mixture = one[:, 2:].reshape(-1, d)
    goal = target.reshape(-1, 2 * d)
    best = np.linalg.lstsq(mixture, goal, rcond=None)[0]                      # (d, 2d)
    lost[p] = ((goal - mixture @ best) ** 2).sum() / (goal ** 2).sum()
    single[p] = one_cache.probs[0]
    print(f"one head, weights ({p}, {1 - p:.2f}): best fit loses {lost[p]:.3f} of the target")
assert all(abs(f - 0.5) < 0.03 for f in lost.values()), \
    "one head loses half of [x_(t-1), x_(t-2)] whatever its weights (deck 003: it can only average)"
assert all(P[1, 0] == 1 for P in single.values()), "query 1's only allowed key gets weight 1"
lost_two = ((two[:, 2:] - target) ** 2).sum() / (target ** 2).sum()
print("✓ one head: d numbers out, 2d needed, half the target is lost for every p")

fig, axes = viz.figure(1, 4, size=(14, 3.5))
positions = [str(i) for i in range(n)]
panels = ((two_cache.probs[0, 0], "head 0: one step back"),
          (two_cache.probs[0, 1], "head 1: two steps back"),
          (single[0.7], "one head: 0.7 back 1, 0.3 back 2\n(query 1 has only key 0: weight 1)"))
for ax, (P, title) in zip(axes, panels):
    image = viz.heatmap(ax, P, x_labels=positions, y_labels=positions, xlabel="key position",
                        ylabel="query position", title=title, vmin=0, vmax=1, hide=P == 0)
fig.colorbar(image, ax=axes[2], label="attention weight", shrink=0.9)
axes[3].plot(list(lost), list(lost.values()), "o-", label="one head, best linear read-out")
axes[3].axhline(lost_two, color="C1", linestyle="--", label=f"two heads (no p): {lost_two:.0f}")
axes[3].set(xlabel="weight p on x_(t−1)", ylabel="fraction of the target lost", ylim=(-0.05, 0.7),
            title="Copying x_(t−1) and x_(t−2)")
axes[3].legend(fontsize=8)
axes[3].grid(alpha=0.3)
fig.suptitle("Two offset heads copy both neighbours; one head can only mix them")
viz.save(fig, "06_copy_heads")

# %% [markdown]
# Full-width heads ("v1") or reduced heads?
# ------------------------------------------
#
# Deck 002 builds multi-head attention in numbered steps. In its "v1" every head has the full
# width: W_i^q, W_i^k, W_i^v are d × d, the concatenation is h·d wide and W_o is h·d × d.
# Reduced heads give each head d / h features, the way everyone builds it: each W_i^q is
# d × d/h (the "W_i^q ∈ R^{d×d/m}" of deck 000), and h of them cost what *one* full-width head
# costs, as deck 002 says of its own split. (That split, its "v1.5", cuts x before projecting:
# the block-diagonal case of the section above, with fewer weights still.)
# ``nn.MultiHeadAttention`` takes the head widths as arguments: ``d_head`` for queries and keys,
# ``d_v`` for values. Build both, and a single full-width head to compare with, and run each on
# one sentence of 8 tokens. Then count the FLOPs (2 per multiply-add) of the four matmuls from
# the shapes the modules really used: x · W_qkv and concat · W_o from the weight matrices, q kᵀ
# and probs · v from the weights ``probs`` (b, h, n, n) and the widths of all heads' queries and
# values together, which the weights give too (W_qkv has h(2d_k + d_v) columns, W_o h·d_v rows).

# %%
def matmul_flops(module):
    """FLOPs of the last forward's four matmuls, read off the shapes the module used."""
    d_in, qkv_width = module.W_qkv.W.shape                  # (d, h·(2 d_k + d_v))
    v_width, d_out = module.W_o.W.shape                     # (h·d_v, d)
    k_width = (qkv_width - v_width) // 2                    # h·d_k
    b, _, n_q, n_k = module.probs.shape                     # (b, h, n, n)
    return {"x W_qkv": 2 * b * n_q * d_in * qkv_width, "q kᵀ": 2 * b * n_q * n_k * k_width,
            "probs v": 2 * b * n_q * n_k * v_width, "concat W_o": 2 * b * n_q * v_width * d_out}


def weights_only(module):
    return module.W_qkv.W.data.size + module.W_o.W.data.size


n, d, h = 8, 16, 4
one_sentence = backend.randn(1, n, d)
modules = {"v1": nn.MultiHeadAttention(d, h, d_head=d),    # 4 heads of width 16
           "reduced": nn.MultiHeadAttention(d, h),         # 4 heads of width 4
           "1 full head": nn.MultiHeadAttention(d, 1)}     # 1 head of width 16
cost = {}
for name, m in modules.items():
    m(one_sentence)
    cost[name] = matmul_flops(m)
    print(f"{name:>11}: W_qkv {m.W_qkv.W.shape}, W_o {m.W_o.W.shape}, probs {m.probs.shape}, "
          f"{m.num_parameters():,} parameters, {sum(cost[name].values()):,} FLOPs")
v1, reduced = modules["v1"], modules["reduced"]
total = {name: sum(c.values()) for name, c in cost.items()}
assert v1.W_o.W.shape == (h * d, d), "v1: W_o is [h·d, d] (deck 002)"
assert weights_only(v1) == h * weights_only(reduced), "full-width heads have h times the weights"
assert total["v1"] == h * total["reduced"], "and cost h times the FLOPs"
assert cost["reduced"] == cost["1 full head"], \
    "reduced heads run the same four matmul sizes as one full-width head (about the same cost)"
# deck 002's v1.5: split first, as split_first above but with h heads; count what is left
blockwise, w = nn.MultiHeadAttention(d, h), d // h
W = blockwise.W_qkv.W.data                                  # (d, 3d): q | k | v, h heads each
for part in range(3):
    for i in range(h):                                      # head i reads only x[:, i·w:(i+1)·w]
        cols = slice(part * d + i * w, part * d + (i + 1) * w)
        W[:i * w, cols] = 0
        W[(i + 1) * w:, cols] = 0
split_first_weights = np.count_nonzero(W) + np.count_nonzero(blockwise.W_o.W.data)
print(f"✓ v1 has {weights_only(v1) // weights_only(reduced)} = h times the weights (with biases "
      f"{v1.num_parameters() / reduced.num_parameters():.2f}×); reduced heads cost what one full "
      f"head costs, {total['reduced']:,} FLOPs; deck 002's split-first v1.5 has "
      f"{split_first_weights} weights, 3d²/h + d², against v1's {weights_only(v1):,}")
assert split_first_weights == 3 * d * d // h + d * d

# %% [markdown]
# Queries and keys must share a width (they meet in a dot product), values need not: one deck
# writes W_{V,h} ∈ R^{C × d_v} next to W_{K,h} ∈ R^{C × d_k}. Give each of 4 heads 2-wide queries
# and keys and 6-wide values and follow the shapes.

# %%
odd = nn.MultiHeadAttention(16, 4, d_head=2, d_v=6)
x = backend.randn(2, 8, 16)
q, k, v = F.split_heads(odd.W_qkv(x), 4, parts=(2, 2, 6))
out = odd(x)
print(f"x {x.shape}: W_qkv {odd.W_qkv.W.shape} -> q {q.shape}, k {k.shape}, v {v.shape}")
print(f"weights {odd.probs.shape}; concat (2, 8, {4 * 6}) · W_o {odd.W_o.W.shape} "
      f"-> out {out.shape}")
assert q.shape == k.shape == (2, 4, 8, 2) and v.shape == (2, 4, 8, 6), "d_k = 2, d_v = 6 per head"
assert odd.W_o.W.shape == (24, 16) and out.shape == x.shape, "N×h·d_v times h·d_v×d gives N×d"
print("✓ d_v ≠ d_k: the weights stay (n × n) per head, the output width is set by W_o")

# %% [markdown]
# What to remember
# ----------------
#
# * MHA = concat(head_1, …, head_h) W_o; each head is ordinary attention with its own
#   projections, and W_o mixes what the heads found (a sum of one slice of W_o per head).
# * ``split_heads`` is a reshape and a transpose: head i owns d_k consecutive features of the
#   projection. With d_k = d / h the layer has 4d² + 4d parameters whatever h is, and costs what
#   one full-width head costs.
# * One softmax row hands over one weighted average; several heads hand over several, which is
#   why two heads can copy two neighbours and one cannot.
# * PyTorch averages the heads' weights by default; minitf keeps all of them in ``probs``.
#
# Next, lesson 07: the rest of the block, feed-forward network, residuals and LayerNorm.
