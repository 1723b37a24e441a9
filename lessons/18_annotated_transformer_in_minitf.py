"""
The annotated Transformer, class by class, in minitf
====================================================

Two of the lecture decks walk through a well-known line-by-line re-implementation of the
original Transformer, one small PyTorch class at a time. This lesson takes those classes in
the same order and puts each next to the piece of minitf that does the same job, then checks
with numbers that the two really agree: the same outputs, the same parameter counts, and,
where they differ (a mask of −1e9 against −inf, a fused projection against four), exactly how.
At the end you build a block of the paper's base width (d_model 512, 8 heads, d_ff 2048) with
attention dropout and Xavier initialisation switched on, as that re-implementation trains it.

Run it: ``minitf lesson 18`` (a few seconds), or as a plain script,
``python lessons/18_annotated_transformer_in_minitf.py``.
"""

# %%
import math

import numpy as np

import minitf.functional as F
from minitf import backend, nn, viz
from minitf.models import Transformer

backend.precision("float64")      # exact arithmetic: "the same" below means equal to 1e-12
backend.seed(0)


def as_np(a):
    return backend.to_numpy(a)


# %% [markdown]
# Copies of a layer are not one layer
# -----------------------------------
#
# The re-implementation builds a stack of N identical layers by deep-copying one layer N
# times. The point of the copy is that the N layers start alike but *do not share* their
# weights: each block learns its own. minitf's ``Stack`` gets the same from a generator that
# builds N fresh blocks. Sharing does exist on purpose in one place: with
# ``share_embeddings=True`` the source and target embeddings are one ``Parameter`` object,
# looked up twice, whose gradient is the sum of both uses.

# %%
model = Transformer(40, 40, d_model=32, n_heads=4, n_layers=3, d_ff=64, dropout=0.1,
                    share_embeddings=True).eval()
blocks = model.encoder.blocks + model.decoder.blocks
ids_per_block = [{id(p) for p in block.parameters()} for block in blocks]
shared = [(i, j) for i in range(len(blocks)) for j in range(i)
          if ids_per_block[i] & ids_per_block[j]]
print(f"{len(blocks)} blocks, {sum(map(len, ids_per_block))} parameter arrays, shared pairs: "
      f"{shared}")
assert not shared, "no two blocks of a Stack may share a Parameter (decks 000/001: clones)"
assert model.src_emb.W is model.tgt_emb.W, "share_embeddings: one table, two lookups"
print("✓ every block owns its weights; the shared embedding is one object")

# %% [markdown]
# Embeddings × √d, plus the positional encoding
# ---------------------------------------------
#
# The embedding class of the walkthrough looks a token up and multiplies the vector by
# √d_model; the positional-encoding class then adds a table of sines and cosines and applies
# dropout. Why the factor: a minitf embedding table is drawn from N(0, 1/d), entries of size
# about 1/√d, while the sinusoids have an RMS of 1/√2 ≈ 0.7 (each sin², cos² pair sums to 1);
# scaled by √d the token's own vector has entries of size 1 and is not drowned by its position.
# (The walkthrough's tables are drawn otherwise, and smaller: see its initialisation at the
# end.) Its sinusoid table is built with the frequencies in log space,
# 10000^(−2i/d) = exp(−2i · ln 10000 / d), the same numbers minitf computes, once, for
# max_len = 5000 positions, and registered as a *buffer*: saved and moved with the model, but
# no parameter, so no optimiser ever changes it: fixed, not learned. minitf's
# ``SinusoidalPositionalEncoding`` holds no parameters either and computes the rows for the
# length at hand, so it has no max_len at all.
#
# Both decks that show this code (000 and 001) slice that table along the wrong axis, an
# erratum: ``[:, :, :n]`` keeps the first n *features* of every position instead of the first n
# *positions*. With a table of shape (1, max_len, d) the right cut is ``[:, :n]``. Below,
# ``Transformer.encode`` is recomputed by hand from these pieces.

# %%
d, n = 32, 7
frequencies = np.exp(-np.arange(0, d, 2) * math.log(10000.0) / d)           # (d/2,), log space
angles = np.outer(np.arange(n), frequencies)                                # (n, d/2)
# each (sin, cos) pair side by side, then the pairs laid out in a row: sin, cos, sin, cos, …
by_hand_table = np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(n, d)
table_error = np.abs(by_hand_table - as_np(F.sinusoidal_table(n, d))).max()
print(f"log-space sinusoids vs F.sinusoidal_table: max error {table_error:.1e}")
assert table_error < 1e-14, "the log-space frequencies give minitf's table"
pe_rms = np.sqrt((as_np(F.sinusoidal_table(6000, d)) ** 2).mean())       # past the 5000, too
print(f"sinusoids' RMS {pe_rms:.3f}; positional-encoding parameters: "
      f"{model.src_pos.num_parameters()}")
assert abs(pe_rms - 1 / math.sqrt(2)) < 1e-12 and model.src_pos.num_parameters() == 0, \
    "a fixed table of RMS 1/√2, not learned (the walkthrough's registered buffer)"

long_table = by_hand_table[None]                                           # (1, max_len, d)
print(f"slicing (1, {n}, {d}) for 5 tokens: right [:, :5] -> {long_table[:, :5].shape}, "
      f"wrong [:, :, :5] -> {long_table[:, :, :5].shape}")
x_5 = np.zeros((1, 5, d))                                                   # 5 tokens' embeddings
assert (x_5 + long_table[:, :5]).shape == (1, 5, d), "the position-axis slice adds to x"
try:
    x_5 + long_table[:, :, :5]
    wrong_adds = True
except ValueError:                                  # (1, 5, d) + (1, max_len, 5): no broadcast
    wrong_adds = False
assert not wrong_adds, "the feature-axis slice no longer adds to x"

src = np.array([[5, 9, 2, 17, 3, 0, 0], [8, 1, 1, 4, 12, 30, 6]])         # 0 = padding
x = as_np(model.src_emb.W.data)[src] * math.sqrt(d) + by_hand_table         # (2, 7, d)
pad = F.padding_mask_from_ids(src, 0)                                      # (2, 1, 1, 7)
manual_memory = as_np(model.encoder(x, mask=pad))
memory, _ = model.encode(src)
encode_error = np.abs(manual_memory - as_np(memory)).max()
print(f"encode by hand vs Transformer.encode: max error {encode_error:.1e}")
assert encode_error < 1e-12, "√d · E[src] + PE, then the encoder stack, is Transformer.encode"
print("✓ embedding × √d, sinusoids in log space, the slice along positions, encode recomputed")

# %% [markdown]
# Masking with −1e9 or with −inf
# ------------------------------
#
# The walkthrough's attention function *overwrites* masked scores with −1e9, "a large negative
# number"; minitf *adds* −inf. After the softmax both give a weight of exactly 0 wherever some
# key is allowed (e^(−1e9) underflows to 0). They part ways only on a row where *every* key is
# masked. Overwritten with −1e9 it is a constant row, and softmax turns it into uniform weights
# that average padding; minitf returns zeros for such a row (and no NaN). Beware a third way
# that looks alike: *adding* −1e9 to a fully masked row shifts all its scores equally, and
# softmax ignores a shift, so that row gets back its unmasked weights.

# %%
q, k, v = backend.randn(1, 3, 4), backend.randn(1, 3, 4), backend.randn(1, 3, 2)
keep = np.array([[True, True, False], [True, False, False], [False, False, False]])
scores = as_np(q @ k.swapaxes(-1, -2)) / math.sqrt(4)                      # (1, 3, 3)
filled, _ = F.softmax(np.where(keep, scores, -1e9))                        # the walkthrough's way
_, added = F.attention(q, k, v, mask=np.where(keep, 0.0, -1e9))           # −1e9 added
_, inf = F.attention(q, k, v, mask=keep)                                   # minitf: −inf added
unmasked, _ = F.softmax(scores)
for name, weights in (("−1e9 written in", filled), ("−1e9 added", as_np(added.probs)),
                      ("−inf added", as_np(inf.probs))):
    print(f"{name:>16}: " + "   ".join(" ".join(f"{w:.3f}" for w in row) for row in weights[0]))
assert np.array_equal(filled[0, :2], as_np(inf.probs)[0, :2]), \
    "rows with a visible key: −1e9 and −inf give the same weights"
assert np.allclose(filled[0, 2], 1 / 3) and not as_np(inf.probs)[0, 2].any(), \
    "a fully masked row: uniform ⅓ with −1e9 written in, zeros with −inf"
assert np.allclose(as_np(added.probs)[0, 2], unmasked[0, 2]), \
    "−1e9 added to a whole row changes nothing: softmax ignores a shift"
print("✓ −1e9 = −inf except on a row with nothing to see")

# %% [markdown]
# Four projections, or one fused W_qkv and W_o
# --------------------------------------------
#
# The walkthrough's multi-head class holds four d × d linear layers: three for queries, keys
# and values, one for the output. It reshapes each projection to (b, n, h, d_k), swaps the
# head axis forward and attends per head, with the same mask broadcast over all heads.
# minitf's ``MultiHeadAttention`` fuses the first three into one matrix W_qkv (d, 3d): the
# same numbers side by side, computed by one matmul. Loading four separate matrices into it
# gives the same output, with the same 4d² + 4d parameters.

# %%
d, h = 16, 4
four = [nn.Linear(d, d) for _ in range(4)]                                 # W_q, W_k, W_v, W_o
for layer in four:
    layer.b.data = backend.randn(d, std=0.1)                               # biases that matter
mha = nn.MultiHeadAttention(d, h, causal=True)
mha.W_qkv.W.data = np.concatenate([layer.W.data for layer in four[:3]], axis=1)   # (d, 3d)
mha.W_qkv.b.data = np.concatenate([layer.b.data for layer in four[:3]])
mha.W_o.W.data, mha.W_o.b.data = four[3].W.data, four[3].b.data

x = backend.randn(2, 5, d)
heads = [layer(x).reshape(2, 5, h, d // h).transpose(0, 2, 1, 3) for layer in four[:3]]
context, _ = F.attention(*heads, mask=F.causal_mask(5))                   # (b, h, n, d_k)
by_hand = four[3](context.transpose(0, 2, 1, 3).reshape(2, 5, d))
mha_error = np.abs(as_np(mha(x)) - as_np(by_hand)).max()
n_four = sum(layer.num_parameters() for layer in four)
print(f"four linears: {n_four} parameters, fused: {mha.num_parameters()}; "
      f"max error {mha_error:.1e}")
assert n_four == mha.num_parameters() == 4 * d * d + 4 * d == 1088, \
    "4d² + 4d = 1,088 parameters at d = 16, four linears or fused"
assert mha_error < 1e-12, "W_qkv + W_o compute what the four separate linears compute"
print("✓ four d×d linears = one fused W_qkv and W_o, parameter for parameter")

# %% [markdown]
# The sublayer wrapper, the stacks' final norm, and the generator
# ---------------------------------------------------------------
#
# The walkthrough wraps each sublayer as x + dropout(sublayer(norm(x))): the norm comes
# *first*, unlike the paper's figure, which normalises after the addition. That is minitf's
# ``Residual(pre_ln=True)``; and because the residual stream is then never normalised on its
# way out, each stack ends with one more LayerNorm (``Transformer(pre_ln=True)`` adds it). The
# generator class is a linear layer and a log-softmax; minitf's models return the logits and
# fuse the log-softmax into ``F.cross_entropy``, which is the same loss, computed stably.
#
# Its position-wise feed-forward class is w_2(dropout(relu(w_1(x)))): minitf's
# ``FeedForward``, whose two linears are ``W_1`` and ``W_2``. Its encoder layer is two such
# wrappers in a row, self-attention then the feed-forward: minitf's ``EncoderBlock(pre_ln=True)``,
# whose two ``Residual`` wrappers are ``self_attn`` and ``ffn``.

# %%
ffn = nn.FeedForward(d, 4 * d)
residual = nn.Residual(ffn, d, pre_ln=True)
x = backend.randn(2, 5, d)
wrapped = as_np(residual(x))
by_hand = as_np(x + ffn(residual.norm(x)))                                 # dropout 0: identity
assert np.abs(wrapped - by_hand).max() < 1e-12, \
    "x + sublayer(norm(x)) is Residual(pre_ln=True)"
W_1, W_2 = ffn.W_1, ffn.W_2
relu_ffn = np.maximum(as_np(x) @ as_np(W_1.W.data) + as_np(W_1.b.data), 0)   # (2, 5, 4d)
assert np.abs(as_np(ffn(x)) - (relu_ffn @ as_np(W_2.W.data) + as_np(W_2.b.data))).max() < 1e-12, \
    "the feed-forward is w_2(relu(w_1(x))): two linears, a ReLU between them"
layer = nn.EncoderBlock(d, h, 4 * d, pre_ln=True)
mid = x + layer.self_attn.layer(layer.self_attn.norm(x))      # sublayer 1: self-attention
out = mid + layer.ffn.layer(layer.ffn.norm(mid))              # sublayer 2: the feed-forward
assert np.abs(as_np(layer(x)) - as_np(out)).max() < 1e-12, \
    "the walkthrough's encoder layer is EncoderBlock(pre_ln=True): two norm-first sublayers"

logits = backend.randn(2, 5, 11)
targets = np.array([[1, 4, 0, 7, 10], [3, 3, 9, 2, 5]])
log_p, _ = F.log_softmax(logits)
picked = np.take_along_axis(as_np(log_p), targets[..., None], axis=-1)
loss, _ = F.cross_entropy(logits, targets)
print(f"−mean log_softmax[target] = {-picked.mean():.6f},  F.cross_entropy = {float(loss):.6f}")
assert abs(-picked.mean() - float(loss)) < 1e-12, "generator + NLL = the fused cross-entropy"
assert Transformer(9, 9, d_model=8, n_heads=2, pre_ln=True).encoder_norm is not None, \
    "a pre-LN stack ends with a LayerNorm"
print("✓ norm-first residual, the feed-forward and encoder layer unrolled, a final norm per "
      "stack, log-softmax inside the loss")

# %% [markdown]
# The base model's sizes, counted exactly
# ---------------------------------------
#
# The walkthrough's constructor takes N = 6 layers, d_model = 512, d_ff = 2048, h = 8 and a
# dropout of 0.1: the paper's base model. An encoder block holds one attention (4d² + 4d), a
# feed-forward network (2·d·d_ff + d_ff + d) and two LayerNorms (2d each); a decoder block one
# more attention and one more LayerNorm. Building one block of each counts the same numbers.
# The whole model below counts one embedding table shared by source and target, the 6 + 6
# blocks as minitf builds them by default (post-LN, so no LayerNorm closes either stack), and
# an output layer of its own, weights and bias. The walkthrough's make_model builds a bigger
# one: a table for each side, and a final LayerNorm per (norm-first) stack; we count it too.
#
# The paper also ties the output layer's weights to the shared table, and its table gives 65 M
# parameters for the base model, 1.9 M more than our tied count below. It gives no breakdown,
# so where the 1.9 M come from cannot be checked, and it gives the vocabulary only as "about
# 37000" tokens. The gap is as many numbers as about 3,700 more rows of the shared table (513 a
# row: 512 weights and an output bias), a vocabulary of about 40,700 rather than 37,000.

# %%
d, h, d_ff, N, vocab = 512, 8, 2048, 6, 37000
attention_count, ffn_count, norm_count = 4 * d * d + 4 * d, 2 * d * d_ff + d_ff + d, 2 * d
encoder_block = nn.EncoderBlock(d, h, d_ff).num_parameters()
decoder_block = nn.DecoderBlock(d, h, d_ff).num_parameters()
print(f"EncoderBlock: {encoder_block:,}   DecoderBlock: {decoder_block:,}")
assert encoder_block == attention_count + ffn_count + 2 * norm_count == 3_152_384, \
    "an encoder block at (512, 8, 2048) holds 3,152,384 parameters"
assert decoder_block == 2 * attention_count + ffn_count + 3 * norm_count == 4_204_032, \
    "a decoder block at (512, 8, 2048) holds 4,204,032 parameters"

parts = {"embeddings (shared)": vocab * d, "6 encoder blocks": N * encoder_block,
         "6 decoder blocks": N * decoder_block, "output layer": d * vocab + vocab}
total = sum(parts.values())
print(f"base model with one {vocab:,}-token vocabulary: {total:,} parameters")
assert total == 82_063_496, "the base configuration holds 82,063,496 parameters"
# the paper ties the output layer's weights to the embedding table: one d × vocab matrix less
tied = total - d * vocab
gap_rows = (65_000_000 - tied) / (d + 1)         # rows of 512 weights and one output bias
print(f"with the output layer tied to the embeddings, as the paper does: {tied:,} "
      f"(its table gives 65 M: {(65_000_000 - tied) / 1e6:.1f} M more, ≈ {gap_rows:,.0f} rows)")
make_model = total + vocab * d + 2 * nn.LayerNorm(d).num_parameters()    # 2nd table, 2 norms
print(f"make_model's own: a table per side and a final norm per stack: {make_model:,}")
assert make_model == 101_009_544, "make_model at V = 37,000 holds 101,009,544 parameters"

fig, (left, right) = viz.figure(1, 2, size=(10.5, 3.9))
left.barh(list(parts), [v / 1e6 for v in parts.values()], color="tab:blue")
for y, value in enumerate(parts.values()):
    left.text(value / 1e6, y, f" {value / 1e6:.1f} M", va="center", fontsize=8)
left.set(xlabel="parameters (millions)", xlim=(0, 32),
         title=f"base Transformer, one shared {vocab:,}-token table: {total:,}")
left.invert_yaxis()
inside = {"encoder block": (attention_count, 0, ffn_count, 2 * norm_count),
          "decoder block": (attention_count, attention_count, ffn_count, 3 * norm_count)}
starts = np.zeros(2)
for column, (name, colour) in enumerate((("self-attention", "tab:orange"),
                                         ("cross-attention", "tab:green"),
                                         ("feed-forward", "tab:purple"),
                                         (f"LayerNorms ({2 * norm_count:,}\nand "
                                          f"{3 * norm_count:,}: too\nthin to see)", "tab:gray"))):
    widths = np.array([counts[column] for counts in inside.values()]) / 1e6
    right.barh(list(inside), widths, left=starts, color=colour, label=name)
    starts += widths
for y, value in enumerate((encoder_block, decoder_block)):
    right.text(value / 1e6, y, f" {value:,}", va="center", fontsize=8)
right.set(xlabel="parameters (millions)", xlim=(0, 7.6),
          title="one block at d=512, h=8, d_ff=2048")
right.invert_yaxis()
right.legend(fontsize=8, loc="upper right")
viz.save(fig, "18_parameter_breakdown")
print("✓ 3,152,384 and 4,204,032 per block; 82,063,496 in all")

# %% [markdown]
# Attention dropout and Xavier initialisation, switched on
# --------------------------------------------------------
#
# Two details of the walkthrough go beyond the blocks. Its attention function applies dropout
# to the attention weights themselves, after the softmax and before they multiply the values:
# in training each query sees a random subset of the keys, each kept weight scaled by 1/(1 − p)
# so that the output is right *on average*. minitf's ``attn_dropout`` does exactly that, is off
# in evaluation, and the backward pass sends gradient only through the kept weights.
#
# And its constructor re-draws every weight matrix from Xavier's uniform distribution, noting
# that this mattered. Xavier picks the variance 2/(fan_in + fan_out), between what keeps
# activations steady on the way forward (1/fan_in) and gradients steady on the way back
# (1/fan_out): their harmonic mean, a compromise when the two differ. A uniform U(−a, a) has
# variance a²/3, so a = √(6/(fan_in + fan_out)). minitf's ``init="xavier"`` applies it to every
# linear layer, and draws the fused W_qkv as the three d × d maps it holds side by side, so each
# gets the bound √(6/2d) it would have had alone.
#
# One difference remains. The walkthrough's loop re-draws *every* parameter with more than one
# dimension, the embedding tables included; minitf re-draws only the Linear weights, and each
# embedding table keeps its N(0, 1/d). That changes the √d story above. A Xavier-drawn (V, d)
# table has std √(2/(V + d)): for the base model's 37,000 tokens and d = 512 that is 0.0073,
# and ×√512 only about 0.17, still well below the sinusoids' 0.71. So in the walkthrough the
# position outweighs the token at the start of training, and the factor √d narrows the gap
# rather than closing it. Below, one block at the base width (with a small vocabulary, to stay
# quick) is built with both switched on.

# %%
q, k, v = backend.randn(64, 4, 6), backend.randn(64, 6, 6), backend.randn(64, 6, 3)
plain, _ = F.attention(q, k, v)
runs = []
for _ in range(1000):
    out, cache = F.attention(q, k, v, dropout_p=0.1)
    runs.append(as_np(out))
dropped = 1 - (as_np(cache.dropout) > 0).mean()
drift = np.abs(np.mean(runs, axis=0) - as_np(plain)).mean() / np.abs(as_np(plain)).mean()
print(f"p = 0.1: {dropped:.3f} of the weights dropped; mean of 1000 dropped outputs is "
      f"{drift:.3f} (relative) from the output without dropout")
assert abs(dropped - 0.1) < 0.03, "about a fraction p of the attention weights is dropped"
assert drift < 0.02, "scaled by 1/(1 − p), attention dropout is right on average"

base = Transformer(1000, 1000, d_model=d, n_heads=h, n_layers=1, d_ff=d_ff, dropout=0.1,
                   attn_dropout=0.1, share_embeddings=True, init="xavier")
W_qkv = as_np(base.encoder.blocks[0].self_attn.layer.W_qkv.W.data)        # (512, 1536)
W_1 = as_np(base.encoder.blocks[0].ffn.layer.W_1.W.data)                  # (512, 2048)
for name, W in (("W_q", W_qkv[:, :d]), ("W_k", W_qkv[:, d:2 * d]), ("W_v", W_qkv[:, 2 * d:]),
                ("W_1", W_1)):
    fan_in, fan_out = W.shape
    print(f"{name} {W.shape}: variance {W.var():.3e} vs 2/(fan_in + fan_out) = "
          f"{2 / (fan_in + fan_out):.3e}; largest |w| {np.abs(W).max():.4f} ≤ "
          f"√(6/(fan_in + fan_out)) = {math.sqrt(6 / (fan_in + fan_out)):.4f}")
    assert abs(W.var() * (fan_in + fan_out) / 2 - 1) < 0.02, f"{name}: Xavier's variance"
    assert np.abs(W).max() <= math.sqrt(6 / (fan_in + fan_out)), f"{name}: Xavier's bound"
token_size = as_np(base.src_emb.W.data).std() * math.sqrt(d)             # minitf's table × √d
walkthrough_size = as_np(nn.xavier_uniform(vocab, d)).std() * math.sqrt(d)   # drawn, then × √d
pe_rms = np.sqrt((as_np(F.sinusoidal_table(5000, d)) ** 2).mean())       # now at d = 512
print(f"embedding entries × √{d}: minitf's table (left alone by init='xavier') {token_size:.2f}; "
      f"the walkthrough's Xavier-drawn {vocab:,} × {d} table {walkthrough_size:.2f}; "
      f"the sinusoids {pe_rms:.2f}")
assert abs(token_size - 1) < 0.02, "init='xavier' keeps the table's N(0, 1/d): × √d, size 1"
assert walkthrough_size < 0.2 < pe_rms, "a Xavier-drawn table × √d stays below the sinusoids"
assert base.config["init"] == "xavier" and base.config["attn_dropout"] == 0.1, \
    "both choices are saved in the config, so a checkpoint rebuilds the same model"
print("✓ attention dropout right on average; Xavier's variance and bound; both in the config")

# %% [markdown]
# What to remember
# ----------------
#
# * Copying a layer N times must give N sets of weights; minitf's ``Stack`` builds N fresh
#   blocks, and sharing (the embeddings) is one object on purpose.
# * Embeddings are scaled by √d before the sinusoids are added; the table is cut by position,
#   not by feature (the decks' slice is wrong). It is a fixed buffer there, never learned.
# * −1e9 and −inf mask alike, except on a row with nothing visible: uniform weights, or zeros.
# * Four d × d projections and one fused W_qkv with W_o are the same model, 4d² + 4d weights.
# * Norm-first residuals need a final norm per stack; the generator's log-softmax lives in the
#   cross-entropy.
# * At (512, 8, 2048): 3,152,384 weights per encoder block, 4,204,032 per decoder block.
# * Attention dropout drops weights after the softmax and rescales the rest; Xavier draws each
#   matrix with variance 2/(fan_in + fan_out): every one in the walkthrough, embedding tables
#   included (then √d·E is only about 0.17); in minitf only the Linear weights.
#
# Next, lesson 19: write a backward pass yourself and let minitf grade it.
