"""
Order: permutations, binary codes, sinusoids
============================================

Attention compares every token with every other token, and nothing in that comparison says which
token came first. This lesson proves it, asks which data really are sets, and then builds the
classic fix piece by piece: the raw index (a bad idea), a binary code, and the sine/cosine table of
the original Transformer, whose every fixed offset is a rotation. Three slips on the lectures'
slides are shown and corrected, and the add-versus-concatenate question gets an exact answer.

Run it: ``minitf lesson 8`` (a few seconds), or as a plain script,
``python lessons/08_order_and_sinusoids.py``.
"""

# %%
import math

import numpy as np

import minitf.functional as F
from minitf import backend, nn, viz

backend.precision("float64")
backend.seed(0)

# %% [markdown]
# Attention cannot see order
# --------------------------
#
# "my kid likes the movie" and "the movie likes my kid" hold the same five words. Feed both to a
# Transformer block that has no positional information and look at the output for "kid": it is
# the same vector in both sentences, only in another row. Shuffling the input rows shuffles the
# output rows the same way (the block is permutation *equivariant*), so anything that pools the
# outputs, a mean or a [CLS] summary, cannot tell the two sentences apart.

# %%
vocab = {w: i for i, w in enumerate(["my", "kid", "likes", "the", "movie"])}
first = np.array([vocab[w] for w in "my kid likes the movie".split()])
second = np.array([vocab[w] for w in "the movie likes my kid".split()])
order = np.array([3, 4, 2, 0, 1])                        # second == first[order]
assert (second == first[order]).all(), "setup: the second sentence is the first, reordered"

d = 16
embed = nn.Embedding(len(vocab), d)
block = nn.EncoderBlock(d, n_heads=2, d_ff=32)
y1, y2 = block(embed(first[None])), block(embed(second[None]))       # (1, 5, 16) each
gap = np.abs(y2 - y1[:, order]).max()
print(f"no positions:   max |block(shuffled) − shuffled(block)| = {gap:.1e}")
print(f"                mean-pooled outputs differ by {np.abs(y1.mean(1) - y2.mean(1)).max():.1e}")
assert gap < 1e-12, "without positions a block is permutation-equivariant (deck 003)"

pe = nn.SinusoidalPositionalEncoding(d)
z1, z2 = block(pe(embed(first[None]))), block(pe(embed(second[None])))
print(f"with sinusoids: mean-pooled outputs differ by {np.abs(z1.mean(1) - z2.mean(1)).max():.2f}")
assert np.abs(z1.mean(1) - z2.mean(1)).max() > 1e-2, "positions must separate the two sentences"
print("✓ {my, kid, likes, the, movie} is one set to a block without positions")

# %% [markdown]
# Deck 003 states the same fact for one attention layer with its queries held fixed: shuffle the
# keys and the values *together* and the output does not change at all, because the weighted sum
# Σ_j α_j v_j does not care in which order its terms come. Attention is a *set* operator.
# Shuffle the keys alone and the pairing of key j with value j is broken: the output changes.

# %%
q, k, v = (backend.randn(3, 8) for _ in range(3))            # 3 queries, 3 keys and values
perm = np.array([2, 0, 1])
out = F.attention(q, k, v)[0]
both = F.attention(q, k[perm], v[perm])[0]
keys_only = F.attention(q, k[perm], v)[0]
print(f"keys and values shuffled together: change {np.abs(both - out).max():.1e}")
print(f"keys shuffled alone:               change {np.abs(keys_only - out).max():.2f}")
assert np.abs(both - out).max() < 1e-14, "a joint K/V shuffle leaves attention unchanged (deck 003)"
assert np.abs(keys_only - out).max() > 1e-2, "shuffling keys alone must change the output"
print("✓ attention is a set operator over its (key, value) pairs")

# %% [markdown]
# Sometimes that is exactly right. Predicting tomorrow's power outages from the outages reported
# this week is a question about a *set*: the reports have no meaningful order. Language is not a
# set (the kid and the movie above), nor is speech, nor an image: cut a picture into patches and
# shuffle them, and you get another picture (the "visual anagrams" that read as a deer one way
# and as flowers the other). Point clouds sit in between: the points form a set, but each carries
# its coordinates, which is positional information of its own. For ordered data we must hand the
# model the positions.
#
# Option 1: the raw index
# -----------------------
#
# The simplest code adds the index p to every feature. Its size grows without bound: by position
# 50 the position vector is hundreds of times longer than a word vector and drowns it. Dividing by
# the last index fixes the size but breaks the meaning: position 5 becomes 5/10 = 0.5 in an
# 11-token sentence (positions 0 to 10) and 5/100 = 0.05 in a 101-token one. Deck 003's verdict,
# "bad idea, hard to interpret", is fair: we want bounded numbers that mean the same thing at any
# length.

# %%
word = backend.to_numpy(embed.W.data[vocab["kid"]])
raw_50 = np.full(d, 50.)                              # position 50 added to every feature
print(f"|word| = {np.linalg.norm(word):.2f},  |raw position 50| = {np.linalg.norm(raw_50):.0f}")
assert np.linalg.norm(raw_50) > 100 * np.linalg.norm(word), \
    "by position 50 the raw index should be hundreds of times longer than a word vector"
print(f"position 5 divided by the last index: {5 / (11 - 1):.2f} (n = 11) vs "
      f"{5 / (101 - 1):.2f} (n = 101)")

# %% [markdown]
# Option 2: a binary code
# -----------------------
#
# Decks 000 and 001 write position p in binary: 4 bits name 16 positions, each one uniquely. But
# the bits do not share the work: the last flips at every step, the first only once. Two
# neighbours differ in anything from 1 to 4 bits (one from 0 to 1, all four from 7 to 8), so the
# code has no sense of "nearby": the jump from 7 to 8 is the largest of all. For 0/1 vectors the
# squared Euclidean distance is the number of differing bits (the Hamming distance).

# %%
positions = np.arange(16)
binary = (positions[:, None] >> np.arange(3, -1, -1)) & 1             # (16, 4), first bit first
hamming = (binary[1:] != binary[:-1]).sum(axis=1)                   # neighbours p, p + 1
print("binary code of 5, 7, 8:", binary[5], binary[7], binary[8])
print("bits changed from p to p+1:", hamming.tolist())
assert (binary[13] == [1, 1, 0, 1]).all(), "13 is 1101 in the decks' table"
assert hamming.tolist() == [1, 2, 1, 3, 1, 2, 1, 4, 1, 2, 1, 3, 1, 2, 1], \
    "neighbour Hamming distances of the 4-bit code should be 1,2,1,3,…"
print("✓ 16 unique codes, but neighbours are 1 to 4 bits apart")

# %% [markdown]
# Option 3: sines and cosines
# ---------------------------
#
# The original Transformer smooths the binary idea into clocks. Feature pair k holds::
#
#     PE[p, 2k] = sin(ω_k p),   PE[p, 2k+1] = cos(ω_k p),   ω_k = 10000^(−2k/d)
#
# so the first pair turns fastest (like the last bit) and later pairs ever more slowly (like the
# higher bits). The quiz of decks 000/001: do the frequencies increase with the dimension?
# No: ω_0 = 1, and every later ω is smaller. We read the frequencies back from minitf's own
# table: since ω_k ≤ 1 < π/2, ω_k = arcsin(PE[1, 2k]).

# %%
d_model = 128
table = F.sinusoidal_table(50, d_model)                       # (50, 128): the 50 × 128 picture
omega = np.arcsin(table[1, 0::2])                            # (64,) the frequencies
power = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)      # the slide's formula
print(f"ω_0 = {omega[0]:.4f}, ω_1 = {omega[1]:.4f}, …, ω_63 = {omega[-1]:.3e}")
print(f"wavelengths 2π/ω: {2 * np.pi / omega[0]:.2f} to {2 * np.pi / omega[-1]:,.0f} positions")
assert np.allclose(omega, power, rtol=1e-12), "the table's frequencies are 10000^(−2k/d)"
assert (np.diff(omega) < 0).all(), "quiz: the frequencies DEcrease along the vector (decks 000/001)"
assert abs(omega[0] - 1) < 1e-15 and abs(omega[-1] - 1.15e-4) < 0.01e-4, "ω_0 = 1 and ω_63 ≈ 1.15e-4 at d = 128"
pairs = table[:, 0::2] ** 2 + table[:, 1::2] ** 2
assert np.allclose(pairs, 1.0), "each (sin, cos) pair is a clock hand on the unit circle"
print("✓ quiz answer: no, the frequencies decrease with the dimension")

# %% [markdown]
# The decks draw this table for positions 0–50 at d = 130 (and 50 positions at d = 128). Left
# columns flicker from row to row, right columns barely move: in the rightmost third of the
# dimensions every sine stays near 0 and every cosine near 1 for all the positions shown.

# %%
deck_table = F.sinusoidal_table(51, 130)                      # positions 0–50, d = 130
right = deck_table[:, 86:]                                    # dimensions 86–129, the last third
print(f"dimensions 86–129, positions 0–50: |sin| ≤ {np.abs(right[:, 0::2]).max():.3f}, "
      f"cos ≥ {right[:, 1::2].min():.3f}")
assert np.abs(right[:, 0::2]).max() < 0.12 and right[:, 1::2].min() > 0.99, \
    "the slow right third of the table should barely move over 51 positions"
fig, axes = viz.figure(1, 2, size=(11, 4.4), gridspec_kw={"width_ratios": [1.6, 1]})
viz.heatmap(axes[0], deck_table, xlabel="dimension i", ylabel="position p", cmap="RdBu_r",
            vmin=-1, vmax=1, colorbar="PE[p, i]", title="Sinusoidal encoding, 51 positions × 130")
axes[0].invert_yaxis()
viz.curves(axes[1], np.arange(51), {f"dimension {i}": deck_table[:, i] for i in (0, 6, 20, 60)},
           xlabel="position p", ylabel="value", title="Four columns: later ones turn slower",
           marker="")
axes[1].legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.15))
viz.save(fig, "08_sinusoidal_pe")

# %% [markdown]
# Why sinusoids beat bits: every step looks alike
# -----------------------------------------------
#
# Move from p to p + 1 and each clock hand turns by its own fixed angle ω_k, whatever p is. So
# the distance between neighbours is the same everywhere::
#
#     ‖PE[p+1] − PE[p]‖² = Σ_k (2 − 2 cos ω_k)
#
# The binary code, we saw, jumps by 1 to 2 (the square root of 1 to 4 bits).

# %%
step = np.linalg.norm(np.diff(table, axis=0), axis=1)                 # (49,)
small = F.sinusoidal_table(16, 4)                                     # 4 numbers, like 4 bits
step_small = np.linalg.norm(np.diff(small, axis=0), axis=1)
print(f"sinusoid d = 128: neighbour distance {step.min():.5f} … {step.max():.5f}")
print(f"sinusoid d = 4:   {step_small[0]:.5f};  binary: {np.sqrt(hamming).round(2).tolist()[:8]} …")
assert np.ptp(step) < 1e-12 and abs(step[0] - 1.95260) < 1e-5, \
    "the sinusoid's neighbour distance is the same at every position (1.95260 at d = 128)"
assert np.isclose(step[0] ** 2, np.sum(2 - 2 * np.cos(omega))), "|ΔPE|² = Σ (2 − 2 cos ω_k)"

fig, axes = viz.figure(1, 2, size=(9.5, 4.2), gridspec_kw={"width_ratios": [1, 2]})
viz.heatmap(axes[0], binary, x_labels=["bit 3", "bit 2", "bit 1", "bit 0"], y_labels=positions,
            xlabel="", ylabel="position", annotate=".0f", vmin=0, vmax=1,
            title="4-bit binary code")
viz.curves(axes[1], np.arange(15), {"binary, 4 bits": np.sqrt(hamming),
                                    "sinusoid, d = 4": step_small[:15],
                                    "sinusoid, d = 128": step[:15]},
           xlabel="position p", ylabel="|code[p+1] − code[p]|",
           title="Distance to the next position")
axes[1].set_ylim(0, 2.3)
viz.save(fig, "08_binary_vs_sinusoid")
print("✓ one step is the same distance everywhere for sinusoids, 1 to 2 for bits")

# %% [markdown]
# A fixed offset is a rotation
# ----------------------------
#
# Pair k at p + Δ is the pair at p turned by the angle ω_k Δ. Stack those 2 × 2 turns into one
# block-diagonal matrix R_Δ and, for *every* p, PE[p + Δ] = PE[p] R_Δᵀ: moving by Δ is one
# linear map, the same everywhere. That is what lets a layer read "three tokens back" with a
# matrix. It also makes PE[p] · PE[p + Δ] = Σ_k cos(ω_k Δ) depend on the offset alone, the seed
# of the relative schemes in lesson 09.

# %%
shift = 7                                                  # the offset Δ
R = np.zeros((d_model, d_model))
for kk, w in enumerate(omega):
    c, s = np.cos(w * shift), np.sin(w * shift)
    R[2 * kk:2 * kk + 2, 2 * kk:2 * kk + 2] = [[c, s], [-s, c]]   # acts on (sin, cos)
rotation_error = np.abs(table[:-shift] @ R.T - table[shift:]).max()
dots = np.einsum("pi,pi->p", table[:-shift], table[shift:])            # PE[p]·PE[p+7], all p
print(f"PE[p+7] vs PE[p] R_7ᵀ: max error {rotation_error:.1e} over {len(table) - shift} positions")
print(f"PE[p]·PE[p+7] = {dots[0]:.6f} for every p (spread {np.ptp(dots):.1e})")
assert rotation_error < 1e-12, "a fixed offset acts on the sinusoidal table as a rotation"
assert np.allclose(R @ R.T, np.eye(d_model)), "identity: R_Δ is made of 2 × 2 rotations"
assert np.ptp(dots) < 1e-10, "PE[p]·PE[p+Δ] depends only on Δ"
print("✓ PE[p + Δ] = PE[p] R_Δᵀ with one R_Δ for every p")

# %% [markdown]
# Three slips on the slides
# -------------------------
#
# *The annotated implementation* computes the frequencies "in log space",
# exp(−2k · ln 10000 / d): the same numbers as the power form, up to a few units in the last of
# float64's 16 digits. Its forward pass, however, slices ``pe[:, :, :n]``: the *feature* axis of
# the (1, max_len, d) buffer, not the positions. The right slice is ``pe[:, :n]``, which is what
# ``nn.SinusoidalPositionalEncoding`` adds (it computes exactly n rows, so it needs no max_len).

# %%
log_space = np.exp(-np.log(10000.0) * 2 * np.arange(d_model // 2) / d_model)  # e^(−2k ln 10⁴/d)
print(f"log-space vs power form: max relative difference {np.abs(log_space / power - 1).max():.1e}")
assert np.abs(log_space / power - 1).max() < 1e-14, "the log-space frequencies are the power form"

buffer = F.sinusoidal_table(5000, d_model)[None]                      # (1, max_len, d)
x = backend.randn(2, 10, d_model)                                     # (b, n, d)
print(f"pe[:, :, :n] has shape {buffer[:, :, :10].shape}; pe[:, :n] has {buffer[:, :10].shape}")
try:
    x + buffer[:, :, :10]
    raise AssertionError("slicing the feature axis should not broadcast against (2, 10, 128)")
except ValueError:
    print("x + pe[:, :, :n] fails to broadcast; x + pe[:, :n] is the intended sum")
assert np.allclose(nn.SinusoidalPositionalEncoding(d_model)(x), x + buffer[:, :10]), \
    "the positions axis, pe[:, :n], is what must be added"

# %% [markdown]
# *Deck 002's code* writes dimension j as sin or cos of pos / 10000^(2j/d), putting the
# dimension index j in the exponent, while the formula on the same slide uses 2i/d for both
# members of pair i. The two members then run at different speeds, sin² + cos² ≠ 1, and no
# rotation maps one position onto another. *Decks 000/001* list the vector from k = 1 to d/2:
# that drops the fastest clock (ω = 1) and appends one at ω = 1/10000; it is the standard table
# shifted by one pair.

# %%
j = np.arange(d_model)
angle = np.arange(50)[:, None] / 10000.0 ** (2 * j / d_model)
deck002 = np.where(j % 2 == 0, np.sin(angle), np.cos(angle))          # (50, 128)
pair_norms = deck002[:, 0::2] ** 2 + deck002[:, 1::2] ** 2
print(f"deck 002 code vs formula: max difference {np.abs(deck002 - table).max():.2f}; "
      f"its pair norms range {pair_norms.min():.2f}…{pair_norms.max():.2f}")
assert np.abs(deck002 - table).max() > 0.5, "the exponent-2j/d code is a different table"
assert np.ptp(pair_norms) > 0.5, "with mismatched speeds the pairs are no longer clock hands"

k1 = np.arange(1, d_model // 2 + 1)                                  # k = 1 … d/2
theta = np.arange(50)[:, None] / 10000.0 ** (2 * k1 / d_model)
from_one = np.stack([np.sin(theta), np.cos(theta)], axis=-1).reshape(50, d_model)
assert np.allclose(from_one[:, :-2], table[:, 2:], atol=1e-12), \
    "starting at k = 1 shifts the standard table by one pair"
print(f"k from 1: fastest ω = {10000 ** (-2 / d_model):.3f} instead of 1, slowest 1e-4")
print("✓ log-space = power form; slice the positions; one exponent per pair; k starts at 0")

# %% [markdown]
# Fixed, not learned
# ------------------
#
# The annotated code builds its table once, at construction, and stores it as a *buffer*: an
# array that travels with the model but is not a parameter, so no optimizer ever changes it. In
# its forward pass it adds the first n rows to the embeddings and then applies dropout to the
# sum. ``nn.SinusoidalPositionalEncoding`` has no parameters either, against the max_len × d of a
# learned table; and both ``Transformer`` and ``DecoderLM`` apply their dropout after the
# positions have been added.

# %%
fixed = nn.SinusoidalPositionalEncoding(d_model)
learned = nn.LearnedPositionalEmbedding(512, d_model)                 # max_len = 512
print(f"parameters: sinusoidal {fixed.num_parameters()}, learned table for 512 positions "
      f"{learned.num_parameters():,}")
assert fixed.num_parameters() == 0, "the sinusoidal table is fixed, not learned (decks 000/001)"
assert learned.num_parameters() == 512 * d_model, "a learned table has max_len × d parameters"
print("✓ the sinusoidal table has nothing to learn; a learned one grows with max_len")

# %% [markdown]
# Add, or concatenate and project?
# --------------------------------
#
# Decks 000/001 ask why the position is *added* to the word vector rather than concatenated and
# then projected. Projecting a concatenation with W = [A; B] gives e A + p B. Take B = A and
# that is (e + p) A: adding is a concatenation whose two halves share their weights. So
# concatenation is strictly more general; it also doubles the width every first-layer matrix
# reads, so it costs parameters.

# %%
e, p = backend.randn(5, d), F.sinusoidal_table(5, d)                  # 5 words, their positions
A = backend.randn(d, d)
via_concat = F.linear(np.concatenate([e, p], axis=1), np.vstack([A, A]))[0]
via_sum = F.linear(e + p, A)[0]
print(f"concat([e, p]) [A; A] vs (e + p) A: max difference {np.abs(via_concat - via_sum).max():.1e}")
print(f"weights of a first projection to d = {d}: {2 * d * d} (concat) vs {d * d} (sum)")
assert np.allclose(via_concat, via_sum, atol=1e-12), "adding is concat-then-project with tied halves"

# %% [markdown]
# Adding works because, in many dimensions, a word vector and a position vector are nearly
# orthogonal: the sum keeps both readable. Decks 000/001 picture it as each position's vector
# gathering a cloud of word vectors around itself. But the two must be of comparable size. minitf's
# ``nn.Embedding`` starts at std 1/√d, so a word has norm ≈ 1 against the table's √(d/2) = 8:
# the position drowns the word. The encoder–decoder ``Transformer`` therefore multiplies the
# embeddings by √d_model (as the annotated code does), giving std 1 against the table's RMS
# 1/√2 = 0.7071. We test both by reading 1,000 random (word, position) sums back with plain dot
# products: the position by argmax_q x·PE[q], the word by argmax_t x·E[t].

# %%
vocab_size, n_pos = 1000, 128
table = F.sinusoidal_table(n_pos, d_model)
token_emb = nn.Embedding(vocab_size, d_model)
ids, where = backend.randint(0, vocab_size, (1000,)), backend.randint(0, n_pos, (1000,))
found = {}
for label, factor in (("std 1/√d", 1.0), ("× √d_model", math.sqrt(d_model))):
    mixed = token_emb(ids) * factor + table[where]                    # (1000, 128)
    found[label] = ((mixed @ table.T).argmax(1) == where).mean(), \
        ((mixed @ token_emb.W.data.T).argmax(1) == ids).mean()
    print(f"embeddings {label:>10}: position read back {found[label][0]:6.1%}, "
          f"word read back {found[label][1]:6.1%}")
rms = np.sqrt((table ** 2).mean())
scaled_std = (token_emb.W.data * math.sqrt(d_model)).std()
print(f"std(√d · E) = {scaled_std:.3f},  RMS of the table = {rms:.4f}")
assert abs(rms - 1 / math.sqrt(2)) < 1e-12 and abs(scaled_std - 1) < 0.01, \
    "× √d gives the embeddings std 1 against the table's RMS 0.7071 (decks 000/001)"
assert found["std 1/√d"][0] == 1.0 and found["std 1/√d"][1] < 0.1, \
    "unscaled, the position is read perfectly and the word is lost"
assert 0.6 < found["× √d_model"][0] < 0.8 and found["× √d_model"][1] == 1.0, \
    "scaled, the word is read perfectly and the position about 2 times in 3"
print("✓ the √d_model scale trades position readability for word readability")

# %% [markdown]
# A trained model reads both far better than a single dot product does: it learns its own
# projections, and nearby positions, the usual confusion here, look alike by design.
#
# What to remember
# ----------------
#
# * Without positions, a block is permutation-equivariant and attention with fixed queries is a
#   set operator: right for sets (outages), wrong for language, speech and images.
# * The raw index grows without bound; a binary code is unique but lumpy (neighbours 1–4 bits
#   apart). Sinusoids are clocks: ω_k = 10000^(−2k/d) *decreases*, every step is the same
#   distance, and a fixed offset is one rotation for every position.
# * Adding is concatenate-then-project with tied halves; it works when word and position vectors
#   are of comparable size, which is what the √d_model scale is for.
#
# Next, lesson 09: encode the *offset* between tokens directly (T5 buckets, ALiBi, RoPE, Shaw).
