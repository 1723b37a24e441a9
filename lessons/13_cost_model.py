"""
Counting parameters, FLOPs, IO and memory
=========================================

Before training a Transformer you can say on paper how big it is, how much arithmetic one pass
costs, how many numbers it moves through memory, and how much memory its attention matrices
take. This lesson counts all four with ``minitf.cost``, checks every count against a real
minitf module or a stopwatch, and ends with the reason attention replaced recurrence: more
arithmetic, but no chain of sequential steps.

Run it: ``minitf lesson 13`` (about 2 seconds), or as a plain script,
``python lessons/13_cost_model.py``.
"""

# %%
import os
import time

# One BLAS thread, set before NumPy loads it: the timings below then measure arithmetic, not
# threads waiting for each other on a busy machine.
for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(threads, "1")

import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

import minitf.functional as F  # noqa: E402
from minitf import backend, cost, cost_families, nn, viz  # noqa: E402

backend.precision("float64")      # exact arithmetic for the counts; timings switch to float32
backend.seed(0)


def best_times(fns, rounds=5):
    """Seconds of each function: the fastest of ``rounds`` runs, taken in turns, so that a burst
    of other work on the machine slows every contender rather than one."""
    times = np.full((rounds, len(fns)), np.inf)
    for r in range(rounds):
        for i, fn in enumerate(fns):
            tic = time.perf_counter()
            fn()
            times[r, i] = time.perf_counter() - tic
    return times.min(axis=0)


# %% [markdown]
# Parameters: 4d² for attention, 2·d·d_ff for the feed-forward
# ------------------------------------------------------------
#
# Self-attention has h heads, each with three d × d/h projections (query, key, value), plus
# the d × d output projection W_o: 3 · (d · d/h) · h + d² = 4d². The feed-forward network maps
# d to d_ff and back, 2 · d · d_ff. A block therefore holds about 4d² + 2·d·d_ff weights. The
# formula leaves out the biases and the two LayerNorms (γ and β); ``block_parameters`` gives
# both numbers, and a real ``nn.EncoderBlock`` settles which one is exact.
#
# None of these counts contains n or b: the same weights take a batch of one sentence or of a
# thousand, and a sequence of any length (a learned position table stops at its max_len, and
# whether a model *works* past its training length is another matter: lesson 10).

# %%
d, d_ff, h = 512, 2048, 8                               # the base configuration of the lectures
counts = cost.block_parameters(d, d_ff)
block = nn.EncoderBlock(d, h, d_ff)
print(f"4d² + 2·d·d_ff          = {counts['formula']:,}")
print(f"with biases and norms   = {counts['exact']:,}")
print(f"EncoderBlock(512, 8, 2048).num_parameters() = {block.num_parameters():,}")
assert counts["formula"] == 3_145_728, "deck 000: 4·512² + 2·512·2048 = 3,145,728 weights"
assert block.num_parameters() == counts["exact"] == 3_152_384, \
    "the exact count adds 4608 biases and 2048 LayerNorm numbers to the formula"

for mult in (2, 4, 8):                                  # d_ff = 2d, 4d, 8d
    # counted on the layers themselves, weights only (bias=False), as the deck counts them
    attention_weights = nn.MultiHeadAttention(d, h, bias=False).num_parameters()
    ffn_weights = nn.FeedForward(d, mult * d, bias=False).num_parameters()
    ratio = attention_weights / ffn_weights
    print(f"d_ff = {mult}d: attention / FFN parameters = {ratio:.3f} = 2d/d_ff")
    assert ratio == 2 / mult, "deck 000: the SA/FFN ratio is 2d/d_ff (1, ½, ¼)"
print("✓ a block holds 4d² + 2·d·d_ff weights; with d_ff = 4d the FFN holds two thirds")

# %% [markdown]
# FLOPs and IO of one matrix product
# ----------------------------------
#
# Multiplying A (n × m) by B (m × k) fills n·k outputs, each a sum of m products: about m
# multiplications and m additions, so 2·n·m·k floating-point operations (FLOPs). Arithmetic is
# not the only cost: the numbers have to come from memory and go back. The product reads A
# (n·m numbers) and B (m·k) and writes AB (n·k), so its IO is n·m + m·k + n·k.
#
# **Erratum.** One slide writes the third term as "n × m (writing AB)". AB is n × k: the two
# agree only when m = k.
#
# Applied to the first step of attention, x W_q with x of shape (b, n, d): per head
# W_q,i is d × d/h, so the product costs 2·b·n·d·d/h FLOPs and moves b·n·d + d·d/h + b·n·d/h
# numbers. Over all h heads that is 2·b·n·d² FLOPs; the lectures' IO of O(2bnd + d²) assumes x
# is read once for all heads, which is exactly what one fused d × d matrix does.

# %%
n_, m_, k_ = 1024, 512, 64
ab = cost.matmul_cost(n_, m_, k_)
print(f"A {n_}×{m_} · B {m_}×{k_}: {ab['flops']:,} FLOPs, {ab['io']:,} numbers moved")
assert ab["flops"] == 2 * n_ * m_ * k_, "deck 000: AB costs ≈ 2·n·m·k FLOPs"
assert ab["io"] == n_ * m_ + m_ * k_ + n_ * k_, "IO of AB: read A, read B, write the n×k AB"
slide = n_ * m_ + m_ * k_ + n_ * m_                 # the erratum: n×m written for AB's n×k
print(f"the slide's third term, n×m, would count {slide:,}: {slide - ab['io']:,} numbers too many")
assert cost.matmul_cost(n_, m_, 1)["flops"] == 2 * n_ * m_, \
    "deck 000: a matrix-vector product costs 2·n·m FLOPs"

b, n = 8, 1024
per_head = cost.matmul_cost(b * n, d, d // h)           # x W_q,i for one head
fused = cost.matmul_cost(b * n, d, d)                   # x W_q for all heads at once
assert h * per_head["flops"] == fused["flops"] == 2 * b * n * d * d, "all heads: O(b·n·d²)"
assert fused["io"] == 2 * b * n * d + d * d, "all heads, x read once: 2·b·n·d + d² (deck 000)"
assert per_head["io"] == b * n * d + d * (d // h) + b * n * (d // h), \
    "one head: read x and W_q,i, write its (b·n, d/h) queries"
print(f"x W_q: per head {per_head['io']:,} numbers; all heads fused {fused['io']:,} "
      f"(h separate reads of x would move {h * per_head['io']:,})")

with backend.precision("float32"):                       # what a real run would use
    x32, W32 = backend.randn(2048, d), backend.randn(d, d)
    seconds, = best_times([lambda: F.linear(x32, W32)])
rate = cost.matmul_cost(2048, d, d)["flops"] / seconds      # FLOPs per second, one core
print(f"F.linear (2048×512)·(512×512), float32: {rate / 1e9:.1f} GFLOP/s "
      f"on one core of this machine")
print("✓ 2·n·m·k FLOPs and n·m + m·k + n·k numbers moved; the slide's n×m is n×k")

# %% [markdown]
# The cost table of one block
# ---------------------------
#
# Counting every product of a block the same way gives the lectures' table. ``attention_table``
# lists the rows (biases, residuals, norms and ReLU are left out, as in the lectures) with a
# third column that matters as much as the first two: **arithmetic intensity**, FLOPs per
# number moved. A processor does many FLOPs in the time it takes to fetch one number from
# memory, so an operation with low intensity waits for memory however fast its arithmetic is.
# That is the second bottleneck of the lectures. For a data-centre accelerator of a few years
# ago, 312 TFLOP/s in 16-bit arithmetic against 2 TB/s of memory (10¹² 16-bit numbers a
# second), the balance lies near 300 FLOPs per number; newer chips need more. The figure's
# colours turn at that threshold: blue waits for memory, red for arithmetic.
#
# For the whole sequence the totals are O(b·n·d² + b·n²·d) FLOPs and O(b·n·d + b·h·n² + d²)
# IO. The projections (8·b·n·d²) and the FFN (16·b·n·d² with d_ff = 4d) have high intensity.
# Softmax has almost none: it reads and writes every one of the b·h·n² scores for a handful of
# FLOPs each. QKᵀ and PV are matrix products, yet at about 114 FLOPs per number (a head is only
# d/h = 64 wide) they fall short of the threshold too.
#
# Generating one token with a KV cache (lesson 12), every cell loses one factor of n: the new
# query meets n cached keys, O(b·d² + b·n·d) FLOPs. The matmuls become matrix-vector products
# that read every weight for a single use, and the intensity collapses.
#
# The last line of each printed table counts the attention matrix as b·h·q·n numbers, where q
# is the number of query positions: q = n for the whole sequence, q = 1 for the next token.

# %%
full = cost.attention_table(b, n, d, h, d_ff)
step = cost.attention_table(b, n, d, h, d_ff, decoding=True)
print(cost.format_table(full), "\n")
print(cost.format_table(step), "\n")
rows = {r["operation"]: r for r in full["rows"]}
matmul_flops = sum(r["flops"] for r in full["rows"] if r["matmul"])
per_token = cost.lm_cost(1, d, 1, d_ff, context=n, n_heads=h)["forward_flops_per_token"] - 2 * d
assert matmul_flops == b * n * per_token, "the table's matmuls add up to lm_cost's b·n tokens"
assert rows["FFN Y W_1"]["flops"] + rows["FFN φ(·) W_2"]["flops"] == 16 * b * n * d * d, \
    "deck 000: the FFN costs 16·b·n·d² FLOPs with d_ff = 4d"
assert min(full["rows"], key=lambda r: r["intensity"])["operation"].startswith("softmax"), \
    "softmax should have the lowest arithmetic intensity: it only moves numbers"
assert matmul_flops == n * sum(r["flops"] for r in step["rows"] if r["matmul"]), \
    "deck 000: decoding with a KV cache has one less n in every cell"
assert step["intensity"] < full["intensity"] / 10, "one token at a time is memory-bound"
assert (full["attention_numbers"], step["attention_numbers"]) == (b * h * n * n, b * h * 1 * n), \
    "the attention matrix holds b·h·q·n numbers: q = n queries for the sequence, q = 1 decoding"
assert rows["softmax(S / √(d/h))"]["io"] == 2 * b * h * n * n, \
    "softmax reads and writes every one of the b·h·n² scores"

RIDGE = 300                     # FLOPs per number at which such an accelerator's two limits meet
assert rows["scores Q Kᵀ"]["intensity"] < RIDGE < rows["FFN Y W_1"]["intensity"], \
    "QKᵀ and PV fall short of ~300 FLOPs per number; the feed-forward clears it"

fig, axes = viz.figure(2, 1, size=(7.5, 7.2))
for ax, table, title in ((axes[0], full, f"one block, whole sequence (b={b}, n={n}, d={d}, "
                                         f"h={h}, d_ff={d_ff})"),
                         (axes[1], step, f"one block, next token with a KV cache of n={n}")):
    scale = viz.cost_table(ax, table, title, ridge=RIDGE, highest=1000)    # blue | red at RIDGE
bar = fig.colorbar(scale, ax=axes, shrink=0.7,
                   orientation="horizontal", fraction=0.035, pad=0.02)
bar.set_ticks(np.log10(ticks := [1, 3, 10, 30, 100, RIDGE, 1000]), labels=map(str, ticks))
bar.ax.axvline(np.log10(RIDGE), color="black", lw=2)
bar.set_label(f"FLOPs per number moved: below {RIDGE} (blue) an accelerator waits for memory, "
              "above (red) for arithmetic", fontsize=8)
viz.save(fig, "13_cost_table")
print(f"✓ the table's FLOPs match lm_cost; softmax, QKᵀ, PV and decoding stay under {RIDGE} "
      "FLOPs per number: limited by memory, not math")

# %% [markdown]
# Which term leads: n against d
# -----------------------------
#
# d is fixed by the architecture, n by the input, and which term leads depends on n against d. Per
# token a block spends 24·d² FLOPs on its matrices (8·d² in the projections, 16·d² in the FFN at
# d_ff = 4d) and 4·n·d on QKᵀ and PV, so the n² terms overtake at n = 6d, 3,072 for d = 512 (for a
# decoded token too: lesson 12 meets the same 6d). When n ≫ d they dominate the time: the lectures'
# **bottleneck #1**. Memory turns much earlier: the b·h·n² attention weights outgrow a b·n·d
# activation once n > d/h. At n = 1024 the table above is on the d² side for FLOPs, not for memory.
#
# What a decoded token moves is O(b·m·n + b·n·d + d²) numbers with m heads (deck 000): each head's
# scores and weights over the cache, the cached keys and values, and the block's weights, 12·d²
# numbers at d_ff = 4d, which outweigh the cache's 2·b·n·d only while b·n < 6d.

# %%
def n2_and_d2(table):
    """(FLOPs of the n² products QKᵀ and PV, FLOPs of the other matrix products) of a table."""
    n2 = sum(r["flops"] for r in table["rows"] if r["operation"].startswith(("scores", "heads")))
    return n2, sum(r["flops"] for r in table["rows"] if r["matmul"]) - n2


for name, table in (("whole sequence", full), ("next token", step)):
    n2, d2 = n2_and_d2(table)
    print(f"{name:>14}, n = {n}: QKᵀ and PV are {n2 / (n2 + d2):.0%} of the matrix FLOPs")
    assert n2 * 6 * d == d2 * n, "4·n·d against 24·d² a token: the n² terms are n/6d of the d² ones"
at_6d = n2_and_d2(cost.attention_table(b, 6 * d, d, h, d_ff))
assert at_6d[0] == at_6d[1], "bottleneck #1: the n² terms catch up at n = 6d; past it they lead"
q = k = v = backend.randn(b, h, d // h, d // h)            # n = d/h = 64 tokens, in h heads
_, kept = F.attention(q, k, v)                            # the cache a backward would read
assert kept.probs.size == b * (d // h) * d == cost.attention_table(b, d // h, d, h, d_ff)[
    "attention_numbers"], "memory turns at n = d/h: the h weight matrices hold one (b, n, d)'s worth"

decode_io = [cost.attention_table(b, m, d, h, d_ff, decoding=True)["io"] for m in (n, 2 * n, 4 * n)]
cache_io, fixed_io = decode_io[1] - decode_io[0], 2 * decode_io[0] - decode_io[1]   # ∝ n; no n
print(f"a decoded token moves {fixed_io:,} numbers whatever n is (the weights, mostly) and "
      f"{cache_io:,} for its n = {n} cached positions")
assert decode_io[2] - decode_io[1] == 2 * cache_io, "linear in n: each cached key, value read once"
assert cache_io == n * (2 * b * d + 4 * b * h), \
    "deck 000's b·n·d and b·m·n: per position its key and value, each head's score and weight twice"
assert fixed_io == 12 * d * d + 20 * b * d, "12·d² weights a block (and b·d-sized activations)"
assert cache_io > fixed_io, "at b·n = 8·1024 > 6d the cache, not the weights, is the larger read"
print("✓ n against d: attention's n² terms lead past n = 6d (time) and n = d/h (memory)")

# %% [markdown]
# Time and memory grow with n²
# ----------------------------
#
# Below, one attention call (b = 1, h = 4 heads of 32) runs forward and backward for n from 128 to
# 1024, in float32. Doubling n multiplies the work by 4, so on log–log axes the time should follow
# a line of slope 2. A stopwatch is noisier than a count: fixed overheads flatten the small sizes,
# and once the b·h·n² weights no longer fit in the processor's cache every pass goes out to main
# memory, which can make the measured slope steeper than 2 (the IO column of the table, showing up
# as time). So the check only asks that time(1024) / time(512) exceeds 2.5. The probabilities kept
# for the backward, b·h·n² numbers of 4 bytes each, grow by exactly 4.

# %%
lengths = np.array([128, 256, 512, 1024])


def forward_backward(q, k, v, attend=F.attention, **options):
    """One attention call (F.attention, or F.causal_attention below) and its backward."""
    out, attn = attend(q, k, v, **options)
    F.attention_backward(np.ones_like(out), attn)
    return out, attn


with backend.precision("float32"):
    inputs = [[backend.randn(1, 4, int(n_keys), 32) for _ in range(3)] for n_keys in lengths]
    seconds = best_times([lambda qkv=qkv: forward_backward(*qkv) for qkv in inputs])
    nbytes = np.array([forward_backward(*qkv)[1].probs.nbytes for qkv in inputs])
for n_keys, nb in zip(lengths, nbytes):
    assert nb == 4 * 1 * 4 * n_keys ** 2, "float32 attention weights take 4·b·h·n² bytes"
    assert nb == cost.attention_table(1, int(n_keys), 128, 4)["attention_bytes"], \
        "attention_table's attention_bytes should be the real probs.nbytes"
slope = np.polyfit(np.log(lengths), np.log(seconds), 1)[0]
for n_keys, s, nb in zip(lengths, seconds, nbytes):
    print(f"n = {n_keys:4d}: forward + backward {1e3 * s:7.1f} ms, probs {nb / 1e6:6.2f} MB")
print(f"log–log slope of time vs n: {slope:.2f} (ideal 2); "
      f"time(1024)/time(512) = {seconds[-1] / seconds[-2]:.1f} (ideal 4)")
assert seconds[-1] / seconds[-2] > 2.5, "doubling n should multiply attention's time by ≈ 4"

fig, axes = viz.figure(1, 2, size=(9.5, 3.8))
guide = (lengths / lengths[-1]) ** 2                    # n², drawn through the n = 1024 point
panels = [(1e3 * seconds, "F.attention forward + backward", "time (ms)",
           f"time vs n: log–log slope {slope:.2f} (n² would give 2)"),
          (nbytes / 1e6, "probs.nbytes", "MB", "attention weights kept: 4·b·h·n² bytes")]
for ax, (values, label, unit, title) in zip(axes, panels):
    # a broad pale band, so that it still shows where the data lie exactly on it (memory)
    ax.plot(lengths, values[-1] * guide, color="gray", lw=6, alpha=0.35, label="n² guide")
    viz.curves(ax, lengths, {label: values}, xlabel="sequence length n", ylabel=unit,
               logx=True, logy=True, title=title)
    ax.set_xticks(lengths, [str(n_keys) for n_keys in lengths])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
viz.save(fig, "13_attention_scaling")
print("✓ attention's time and memory are quadratic in n")

# %% [markdown]
# A causal mask throws half of it away
# ------------------------------------
#
# In a decoder, query i may look at keys 0 … i only: the causal mask sets every score above the
# diagonal to −inf, and the softmax turns each into a weight of exactly 0. Computing those scores
# is wasted work, and keeping their zeros for the backward is wasted memory.
# ``F.causal_attention`` cuts the queries into blocks of ``CAUSAL_BLOCK`` = 64: the queries
# start … end − 1 run an ordinary attention over the keys 0 … end − 1 only, with the causal mask
# of their own corner. Block i of k sees i·n/k keys, so the k blocks compute
# (n/k)² · (1 + 2 + … + k) = n² (k + 1)/(2k) scores: 56 % of them at n = 512 (k = 8), and a share
# that falls towards one half as n grows. Only those are kept for the backward. A causal
# ``MultiHeadAttention`` takes this path whenever the causal mask is all it has to apply.
# (On a GPU it takes all n queries as one block: there each block launches the same kernels
# again, and that costs more time than the skipped scores save.)

# %%
n_keys = 512
k_blocks = n_keys // F.CAUSAL_BLOCK                   # 8 blocks of 64 queries
with backend.precision("float32"):
    qkv = [backend.randn(1, 4, n_keys, 32) for _ in range(3)]
    ways = [lambda: forward_backward(*qkv, mask=F.causal_mask(n_keys)),
            lambda: forward_backward(*qkv, attend=F.causal_attention)]       # whole, in blocks
    (whole_out, whole), (blocked_out, blocked) = (way() for way in ways)
    seconds = best_times(ways)
kept = sum(attn.probs.size for _, _, attn in blocked.blocks)   # each block: (end − start, end)
print(f"n = {n_keys} in {k_blocks} blocks of {F.CAUSAL_BLOCK} queries: {kept:,} of the "
      f"{whole.probs.size:,} weights ({kept / whole.probs.size:.1%})\n"
      f"forward + backward: {1e3 * seconds[0]:.1f} ms whole, {1e3 * seconds[1]:.1f} ms in blocks")
assert kept / whole.probs.size == (k_blocks + 1) / (2 * k_blocks), "(k + 1)/(2k) of the n² scores"
assert np.allclose(backend.to_numpy(blocked_out), backend.to_numpy(whole_out), atol=1e-5), \
    "the blocks compute the same attention"
assert np.allclose(backend.to_numpy(blocked.probs), backend.to_numpy(whole.probs), atol=1e-6), \
    "and the same weights, zeros above the diagonal included"
print("✓ a causal attention needs only the scores on and below the diagonal")

# %% [markdown]
# More arithmetic, fewer steps: attention against recurrence
# ----------------------------------------------------------
#
# A recurrent layer reads the sequence one position at a time, h_t = tanh(x_t W_x + h_(t−1)
# W_h + b) (``minitf.nn.RNN``): about 4·n·d² FLOPs, fewer than attention's 4·n²·d when n > d.
# But step t needs step t − 1, so the n steps run one after another, and a word k positions
# back reaches the current one through k steps of the recurrence: the first word of n reaches
# the last through n − 1. Attention computes every output in one batched product, and any two
# positions are one step apart. The lectures' comparison, which ``cost_families.layer_comparison``
# counts (its path is the longest one, first word to last)::
#
#     layer            FLOPs per layer    sequential steps    path between two positions
#     self-attention   O(n²·d)            O(1)                O(1)
#     recurrent        O(n·d²)            O(n)                O(n)
#
# That is why the lectures ask whether LSTMs are still needed: the sequential chain, not the
# arithmetic, is what stops them using parallel hardware. Below, one ``nn.RNN`` layer and one
# attention call race over the same 256 positions of one sequence, forward only, on one core. The
# recurrence does 8× fewer FLOPs and still takes longer, and the stopwatch is not timing arithmetic:
# at ``F.linear``'s rate (timed again beside it), its FLOPs take a small part of its time. It
# times a fixed cost of microseconds that every operation Python hands to NumPy pays, whatever its
# size: the recurrence pays it at each of 256 steps, for (1, 32) · (32, 32) products; attention a
# handful of times, for products 256 rows tall. That is the chain of steps as one core feels it; a
# parallel device feels it more, as no step can start before the last one ends and each fills a
# sliver of the chip. (Lesson 11's recurrent language model, trained on batches of 16 beside a
# Transformer, has a short chain next to the work around it, forward and backward through
# projections, feed-forward and norms: there, on a CPU, the RNN's step is the quicker.)

# %%
n_rnn, d_rnn = 256, 32
table = cost_families.layer_comparison(n_rnn, d_rnn)
for layer, row in table.items():
    print(f"{layer:>14}: {row['flops'] / 1e6:5.1f} MFLOPs, {row['sequential_steps']:3d} "
          f"sequential steps, path {row['path_length']} steps")
with backend.precision("float32"):
    xs = backend.randn(1, n_rnn, d_rnn)                  # (1, n, d): one sequence
    rnn_layer = nn.RNN(d_rnn, d_rnn)
    # F.linear's rate is timed again, in turns with the two: a busy spell slows all three alike
    rnn_seconds, attention_seconds, linear_seconds = best_times(
        [lambda: rnn_layer(xs), lambda: F.attention(xs, xs, xs), lambda: F.linear(x32, W32)], 10)
rate = cost.matmul_cost(2048, d, d)["flops"] / linear_seconds
arithmetic = table["recurrent"]["flops"] / rate              # its FLOPs at F.linear's rate
print(f"recurrent: {1e3 * rnn_seconds:.2f} ms ({1e6 * rnn_seconds / n_rnn:.1f} µs a step; its "
      f"FLOPs alone, {1e6 * arithmetic:.0f} µs);  attention: {1e3 * attention_seconds:.2f} ms")
assert table["recurrent"]["flops"] * 8 == table["self-attention"]["flops"], \
    "n = 8d: the recurrence does 8× fewer FLOPs"
assert (table["recurrent"]["sequential_steps"], table["recurrent"]["path_length"]) == \
    (n_rnn, n_rnn - 1) and table["self-attention"]["path_length"] == 1, "O(n) steps vs O(1)"
assert attention_seconds < rnn_seconds, \
    "decks 000/001: with O(1) sequential steps attention should beat the O(n)-step recurrence"
assert rnn_seconds > 10 * arithmetic, "the recurrence's time is its 256 steps, not its FLOPs"
print("✓ 8× the arithmetic, and attention still finishes first: the recurrence pays per step")

# %% [markdown]
# What to remember
# ----------------
#
# * A block holds 4d² + 2·d·d_ff weights (plus small bias and norm terms), independent of n
#   and b; attention has 2d/d_ff times as many weights as the feed-forward network.
# * A·B with A n × m and B m × k costs 2·n·m·k FLOPs and moves n·m + m·k + n·k numbers (not
#   n·m twice, as one slide has it).
# * A block costs O(b·n·d² + b·n²·d) FLOPs and O(b·n·d + b·h·n² + d²) IO; with a KV cache one
#   token costs O(b·d² + b·n·d). ``minitf info --table`` prints both tables for a model.
# * Arithmetic intensity, FLOPs per number moved, tells whether an operation waits for math or
#   for memory: softmax and one-token decoding wait for memory.
# * A causal mask makes about half of the n² scores zeros; ``F.causal_attention`` computes and
#   keeps only the (k + 1)/(2k) of them that its k blocks of queries can see.
# * Past n = 6d the n² terms dominate the FLOPs (bottleneck #1), past n = d/h the memory.
# * Attention's time and its b·h·n² stored weights grow with n²; a recurrence does less
#   arithmetic but needs n steps in a row, each paying its own fixed cost, and its path between
#   two positions is n steps long (lesson 11 shows its gradient fading along that path).
#
# Next, lesson 14: the full encoder–decoder Transformer and its three attentions.
