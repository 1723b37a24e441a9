"""
Relative positions: T5 buckets, ALiBi, RoPE, Shaw
=================================================

Lesson 08 stamped each token with its absolute position. Often what matters is the *offset*:
"the word two to the left" means the same at position 5 and at position 500. This lesson builds
the four relative schemes of the lectures with minitf: a learned bias per distance bucket (T5), a
fixed distance penalty (ALiBi), rotated queries and keys (RoPE) and learned vectors per clipped
offset (Shaw et al.). It checks that each score depends on j − i only, corrects where one deck
puts the bias, and runs the gradient checks of the layers that use them.

Run it: ``minitf lesson 9`` (a few seconds), or as a plain script,
``python lessons/09_relative_positions.py``.
"""

# %%
import numpy as np

import minitf.functional as F
from minitf import backend, gradcheck, gradcheck_cases, nn, viz

backend.precision("float64")
backend.seed(0)

# %% [markdown]
# T5: one learned number per distance bucket
# ------------------------------------------
#
# T5 adds a number b to the score of query i and key j that depends only on the offset between
# them: B[i, j] = b(i − j). A matrix constant along its diagonals is a *Toeplitz* matrix, and it
# has far fewer free numbers than n²: one per offset. T5 goes further and groups offsets into
# buckets, set by two numbers: num_buckets (32) and max_distance (128), the distance at which
# T5's logarithmic scale runs out. A bidirectional model gives 16 buckets to keys at or before
# the query and 16 to keys after it. Distance 0 counts as "before", so the first bucket of the
# second half, bucket 16, is never used and the keys after the query start at 17. In each half,
# distances 0–7 get a bucket each and longer ones share logarithmically wider buckets, spaced so
# that the scale would reach a 17th bucket exactly at max_distance. A half has only 16, so its
# last one, bucket 15, takes every distance from 91 on (the scale reaches 15 at
# 8 · 16^(7/8) ≈ 90.5).
# Near tokens are told apart exactly, far ones coarsely.

# %%
buckets5 = F.relative_position_buckets(5, 5, bidirectional=True, num_buckets=32)
print("buckets for 5 tokens (query i = row, key j = column):\n", buckets5)
assert buckets5.tolist() == [[0, 17, 18, 19, 20], [1, 0, 17, 18, 19], [2, 1, 0, 17, 18],
                             [3, 2, 1, 0, 17], [4, 3, 2, 1, 0]], \
    "T5 buckets: past keys 0, 1, 2, …; future keys from 16 + 1 on"

n = 300
buckets = F.relative_position_buckets(n, n, bidirectional=True, num_buckets=32)
past = buckets[n - 1, ::-1]                                  # the last query, keys 0, 1, 2, … back
spans = {b: np.flatnonzero(past == b) for b in np.unique(past)}
print("keys behind the query: buckets 0–7 ← distances 0–7, one each")
for b, r in spans.items():
    if b >= 8:
        print(f"  bucket {b:2d} ← distances {r[0]}–{r[-1]}")
assert past[:8].tolist() == list(range(8)), "distances below 8 each have their own bucket"
assert [len(spans[b]) for b in range(8, 15)] == [4, 4, 7, 9, 14, 18, 27], \
    "beyond 8 the buckets widen roughly geometrically"
assert len(spans[15]) == n - 91 and len(np.unique(buckets)) == 31, \
    "every distance ≥ 91 shares bucket 15; 300 tokens use 31 buckets (16 is never used)"

# %% [markdown]
# A table of 32 × h learned numbers becomes the bias through ``F.relative_bias``, an embedding
# lookup. Whatever the sequence length, the model needs no new parameters: the 300-token bias
# above would come from the same 32 numbers per head as a 5-token one. That is why deck 003
# says such biases "generalize better to sequences of unseen lengths".

# %%
h = 2
table = backend.randn(32, h)                                 # (num_buckets, h), learned in practice
B, _ = F.relative_bias(table, buckets)                      # (h, 300, 300)
print(f"bias shape {B.shape} from {table.size} numbers")
assert np.array_equal(B[:, 1:, 1:], B[:, :-1, :-1]), "T5's bias is Toeplitz: B[i, j] = B[i+1, j+1]"
print("✓ T5: exact buckets near, logarithmic far, one Toeplitz bias per head")

# %% [markdown]
# Where does the bias go? (a correction)
# --------------------------------------
#
# Deck 003 writes softmax((Q Kᵀ + B) / √C) V: the bias inside the scale. minitf, like the ALiBi
# paper, adds it *after* scaling: softmax(Q Kᵀ / √C + B) V. (T5 uses no 1/√C scale at all; it
# folds that factor into the initialisation of its weights.) For a learned B the
# difference is a constant factor the training absorbs (the deck's B is minitf's B times √C).
# For ALiBi, whose B is fixed, it is not harmless: inside the scale, every slope shrinks by √C.

# %%
d_head = 64
q, k, v = backend.randn(h, 6, d_head), backend.randn(h, 6, d_head), backend.randn(h, 6, d_head)
Bn = B[:, :6, :6]
deck = F.softmax((q @ k.transpose(0, 2, 1) + Bn) / np.sqrt(d_head))[0] @ v   # as on the slide
minitf_out = F.attention(q, k, v, bias=Bn)[0]                                  # bias after scaling
print(f"bias inside vs after the scale: outputs differ by {np.abs(deck - minitf_out).max():.3f}")
assert np.allclose(deck, F.attention(q, k, v, bias=Bn / np.sqrt(d_head))[0], atol=1e-12), \
    "the slide's form equals minitf's with B divided by √C"
assert np.abs(deck - minitf_out).max() > 1e-3, "the two placements are different functions"
print(f"✓ for ALiBi at d_head = {d_head}, a slope of 1/4 (head 0 of 4) would act as "
      f"{1 / 4 / np.sqrt(d_head)} inside the scale")

# %% [markdown]
# ALiBi: a fixed penalty for distance
# -----------------------------------
#
# ALiBi learns nothing: it subtracts m_h times the distance ``|i − j|`` from the scores, a
# steeper slope for some heads than for others. With h heads the slopes are 2^(−8/h),
# 2^(−16/h), …, 2^(−8). Deck 003 draws one slope α and the causal, lower-triangular part; minitf
# builds the symmetric bias, −m_h ``|i − j|`` for every pair, and lets the causal mask remove the
# future. With no content at all (q = 0) the weights come
# from the bias alone: the steep head looks at its neighbours, the shallow one almost everywhere.

# %%
slopes = F.alibi_slopes(4)
alibi = F.alibi_bias(4, 12)                                  # (4, 12, 12)
i, j = np.indices((12, 12))
print("slopes for 4 heads:", slopes)
assert slopes == [1 / 4, 1 / 16, 1 / 64, 1 / 256], "ALiBi slopes for 4 heads are 1/4 … 1/256"
assert F.alibi_slopes(8) == [2.0 ** -s for s in range(1, 9)], "8 heads: 1/2, 1/4, …, 1/256"
assert np.allclose(alibi, -np.array(slopes)[:, None, None] * np.abs(i - j)), \
    "bias[h, i, j] = −m_h |i − j|"
assert np.array_equal(alibi[:, 1:, 1:], alibi[:, :-1, :-1]), "ALiBi is Toeplitz as well"

blank = np.zeros((4, 12, 1))                                 # q = k = 0: scores are the bias only
weights = F.attention(blank, blank, blank, mask=F.causal_mask(12), bias=alibi)[1].probs
for head in range(4):
    print(f"  head {head} (m = {slopes[head]:.4f}): last query's weight on its 3 nearest keys "
          f"{weights[head, -1, -3:].sum():.2f}")
assert weights[0, -1, -3:].sum() > 0.5 > weights[3, -1, -3:].sum(), "steep heads look near"
print("✓ ALiBi: −m_h |i − j|, no parameters, one slope per head")

# %% [markdown]
# RoPE: rotate the queries and the keys
# -------------------------------------
#
# RoPE changes q and k themselves. It cuts each d-dimensional vector into d/2 pairs and turns
# pair i by the angle m θ_i, with θ_i = 10000^(−2i/d) the clock speeds of lesson 08 (deck 003
# counts them from θ_1). As a matrix, R_m is block diagonal with 2 × 2 rotations. minitf never
# builds it (``F.rope`` rotates the pairs directly), so here we build it once and compare.
# Because R_mᵀ R_n = R_{n−m}, the score (R_m q)ᵀ (R_n k) = qᵀ R_{n−m} k depends on the positions
# only through their offset: RoPE stamps absolute positions on q and k, and the score reads a
# relative one.
#
# Deck 003 praises RoPE for extrapolating well: a model trained on short inputs should still
# work on longer ones, where a learned table of absolute positions has no row at all for a
# position it never saw. Lesson 10 puts that to the test on a small model and finds less: its
# loss rises past the training length. RoPE's relative score and its cost (no parameters, one
# rotation of q and k) are why LLaMA-family models use it. Deck 003 sums up that positional
# schemes, absolute or relative, are everywhere in large language models: attention without a
# mask cannot tell which token came first (lesson 08), and a causal mask alone gives a model
# only an indirect sense of order.

# %%
d = 16
cos, sin = F.rope_angles(40, d)                               # (40, 8) each, position × pair


def rotation(m):
    """The block-diagonal R_m of deck 003, built from minitf's angles at position m."""
    R = np.zeros((d, d))
    for pair in range(d // 2):
        c, s = cos[m, pair], sin[m, pair]
        R[2 * pair:2 * pair + 2, 2 * pair:2 * pair + 2] = [[c, -s], [s, c]]
    return R


x = backend.randn(40, d)                                      # one vector per position
rotated, _ = F.rope(x, cos, sin)
by_matrix = np.stack([rotation(m) @ x[m] for m in range(40)])
print(f"F.rope(x) vs R_m x:       max difference {np.abs(rotated - by_matrix).max():.1e}")
assert np.allclose(rotated, by_matrix, atol=1e-14), "F.rope applies the block-diagonal R_m"
assert np.allclose(rotation(5).T @ rotation(12), rotation(7), atol=1e-12), "R_mᵀ R_n = R_{n−m}"
assert np.allclose(np.linalg.norm(rotated, axis=1), np.linalg.norm(x, axis=1)), \
    "rotations preserve norms"

q, k = backend.randn(d), backend.randn(d)                     # fixed content
q_at, _ = F.rope(np.tile(q, (40, 1)), cos, sin)               # q placed at every position
k_at, _ = F.rope(np.tile(k, (40, 1)), cos, sin)
scores = q_at @ k_at.T                                        # scores[m, n] = q_mᵀ k_n
print(f"score(7, 3) = {scores[7, 3]:.10f},  score(14, 10) = {scores[14, 10]:.10f}")
assert abs(scores[7, 3] - scores[14, 10]) < 1e-12, "RoPE scores depend on m − n only (deck 003)"
assert np.allclose(scores[1:, 1:], scores[:-1, :-1], atol=1e-12), "RoPE's scores are Toeplitz"
print("✓ RoPE: F.rope == R_m x, R_mᵀR_n = R_{n−m}, norms kept, score(7,3) == score(14,10)")

# %% [markdown]
# Shaw: learned vectors on the keys and the values
# ------------------------------------------------
#
# Deck 003's third relative option (Shaw et al.) adds *vectors*, not numbers. Query i looks up
# two learned vectors for its offset to key j: a^K_ij is added to the key and a^V_ij to the
# value::
#
#     e_ij = q_i · (k_j + a^K_ij) / √d,     out_i = Σ_j α_ij (v_j + a^V_ij),    α = softmax(e)
#
# The offset j − i is clipped to ±K, so the tables have 2K + 1 rows, one per offset −K … K; the
# two end rows also serve every offset beyond −K or +K. Like T5's buckets, the
# parameter count does not depend on the sequence length. ``F.clipped_relative_positions`` gives
# each pair its row and ``F.relative_attention`` computes the formula; we check it pair by pair.

# %%
K, n_s, d_s = 3, 8, 4
rows_ij = F.clipped_relative_positions(n_s, n_s, max_relative=K)            # (8, 8) table rows
ii, jj = np.indices((n_s, n_s))
print("table row of each (i, j), K = 3:\n", rows_ij)
assert np.array_equal(rows_ij, np.clip(jj - ii, -K, K) + K), "row = clip(j − i, −K, K) + K"
assert np.array_equal(rows_ij[1:, 1:], rows_ij[:-1, :-1]), "the rows depend on j − i only"

qs, ks, vs = (backend.randn(2, n_s, d_s) for _ in range(3))                  # 2 heads
table_k, table_v = backend.randn(2 * K + 1, d_s), backend.randn(2 * K + 1, d_s)
out, _ = F.relative_attention(qs, ks, vs, rows_ij, table_k, table_v)
a_k, a_v = table_k[rows_ij], table_v[rows_ij]                                # (8, 8, 4) per pair
e = np.einsum("hid,hijd->hij", qs, ks[:, None] + a_k) / np.sqrt(d_s)         # e_ij, every head
by_hand = np.einsum("hij,hijd->hid", F.softmax(e)[0], vs[:, None] + a_v)
print(f"F.relative_attention vs the formula pair by pair: {np.abs(out - by_hand).max():.1e}")
assert np.allclose(out, by_hand, atol=1e-12), "relative_attention computes Shaw et al.'s formula"

plain = nn.MultiHeadAttention(16, 2).num_parameters()
for K_ in (2, 3, 8):
    shaw = nn.MultiHeadAttention(16, 2, positional="shaw", max_relative=K_, shaw_values=True)
    extra = shaw.num_parameters() - plain
    print(f"  K = {K_}: {extra} extra parameters = (2K+1)·(d_head + d_v) = {2 * K_ + 1}·(8 + 8)")
    assert extra == (2 * K_ + 1) * (shaw.d_head + shaw.d_v), "Shaw adds (2K+1)(d_head + d_v)"
assert shaw(backend.randn(1, 50, 16)).shape == (1, 50, 16), "the same tables serve any length"
print("✓ Shaw: clipped offsets, (2K+1)·(d_head + d_v) parameters for any length")

# %% [markdown]
# The schemes inside the real layer
# ---------------------------------
#
# ``nn.MultiHeadAttention(positional=…)`` accepts "rope", "alibi", "relative" (T5) and "shaw".
# Relative means blind to where the sequence starts: put 7 masked filler tokens in front and
# every real token sits 7 positions later, yet its output must not change. An absolute table
# added to the input fails that test. The gradient checks of lesson 05 then confirm each
# layer's hand-written backward pass, Shaw's two tables included.

# %%
backend.seed(1)
x = backend.randn(1, 6, 8)
filler = np.concatenate([backend.randn(1, 7, 8), x], axis=1)    # (1, 13, 8): 7 fillers first
keep = np.arange(13) >= 7                                       # keys 0–6 may not be attended
for scheme in ("rope", "alibi", "relative", "shaw"):
    layer = nn.MultiHeadAttention(8, 2, positional=scheme)
    moved = np.abs(layer(filler, mask=keep)[:, 7:] - layer(x)).max()
    print(f"  {scheme:>8}: shifted by 7 positions, outputs change by {moved:.1e}")
    assert moved < 1e-12, f"{scheme} must depend only on offsets"
layer, pe = nn.MultiHeadAttention(8, 2), nn.SinusoidalPositionalEncoding(8)
moved = np.abs(layer(pe(filler), mask=keep)[:, 7:] - layer(pe(x))).max()
print(f"  sinusoidal table added to the input: outputs change by {moved:.2f}")
assert moved > 1e-2, "an absolute encoding must see the shift"

rows = [row for name in ("MultiHeadAttention, RoPE", "MultiHeadAttention, ALiBi",
                         "MultiHeadAttention, relative bias",
                         "MultiHeadAttention, Shaw, keys and values, causal")
        for row in gradcheck_cases.run(name)]
print(gradcheck.format_table(rows))
assert all(row.passed for row in rows), "the positional layers' backward passes must pass"
print("✓ rope, alibi, relative and shaw layers ignore a shift; their backward passes check out")

# %% [markdown]
# A picture of the four relative schemes
# --------------------------------------
#
# Keys on x, queries on y. T5's bucket ids are constant along every diagonal. ALiBi's two heads
# draw the same pattern at slopes 16 times apart: each panel has its own colour scale, and head
# 1's penalties are 16 times smaller. Their upper triangles are blank on purpose: the bias itself
# is symmetric, but in a causal model the mask removes every future key j > i, so only the lower
# triangle ever reaches the softmax. RoPE's scores of a fixed q and k repeat along the diagonals
# too. When query and key carry the same content, the score peaks at offset 0 and falls off,
# with ripples, as the offset grows; for different contents it rises and falls with no special
# place at 0. Shaw's panel shows which row of its tables each pair (i, j) reads: j − i clipped
# to ±3 and shifted to 0 … 6, constant along the diagonals as well; every key more than three
# places before the query shares row 0, every key more than three after it row 6.

# %%
fig, axes = viz.figure(2, 3, size=(15, 8.4))
viz.heatmap(axes[0, 0], F.relative_position_buckets(12, 12), xlabel="key j", ylabel="query i",
            annotate=".0f", title="T5: bucket of each (i, j), 32 buckets")
two = F.alibi_bias(2, 12)
above = j > i                                                # the future: the causal mask's part
for head in range(2):                                        # each head its own colour scale
    viz.heatmap(axes[0, 1 + head], two[head], xlabel="key j", ylabel="query i",
                vmin=two[head].min(), vmax=0, hide=above, colorbar="bias (own scale)",
                title=f"ALiBi head {head}: −|i − j| / {1 / F.alibi_slopes(2)[head]:.0f}"
                      f"\n(j > i blank: removed by the causal mask)")
viz.heatmap(axes[1, 0], scores[:24, :24], xlabel="key position n", ylabel="query position m",
            colorbar="q_mᵀ k_n", title="RoPE: scores of fixed q, k at every position")
offsets = np.arange(-39, 40)
same, _ = F.rope(np.tile(q, (40, 1)), cos, sin)
viz.curves(axes[1, 1], offsets, {
    "same content (q = k)": [same[max(o, 0)] @ same[max(-o, 0)] for o in offsets],
    "different q and k": [q_at[max(o, 0)] @ k_at[max(-o, 0)] for o in offsets]},
    xlabel="offset m − n", ylabel="score", title="RoPE: the score depends on m − n",
    marker="")
viz.heatmap(axes[1, 2], F.clipped_relative_positions(12, 12, max_relative=3), xlabel="key j",
            ylabel="query i", annotate=".0f", title="Shaw: table row of each (i, j), K = 3")
viz.save(fig, "09_relative_biases")

# %% [markdown]
# What to remember
# ----------------
#
# * Relative schemes put the offset j − i into the score; every bias here is Toeplitz, and a
#   layer built with one ignores where the sequence starts.
# * T5 learns a number per head and distance bucket (exact near, logarithmic far); ALiBi fixes
#   −m_h ``|i − j|`` with geometric slopes. minitf adds both *after* the 1/√d scale, as ALiBi
#   does (T5 has no scale at all), not inside it as deck 003 writes.
# * RoPE rotates q and k by position-dependent angles; R_mᵀR_n = R_{n−m} turns absolute
#   rotations into a relative score, and norms are preserved. LLaMA-family models use it; the
#   lectures credit it with handling longer inputs than it was trained on, which lesson 10
#   tests and, on a small model, does not find.
# * Large language models carry positions in some form: without them, attention with no mask is
#   blind to order, and a causal one sees it only indirectly.
#
# Next, lesson 10: the lectures claim relative schemes cope better with lengths unseen in
# training; five small language models put that to the test.
