"""
Generating text, and the KV cache
=================================

A language model predicts one next token; generating text means asking it again and again, each
time with its own last answer appended. This lesson picks the next token from the output the way
the lectures' "am" example does, compares greedy choice, temperature, top-k and top-p on one
distribution, and then makes generation cheap: a KV cache keeps the keys and values of earlier
tokens, gives exactly the same logits, needs 2·L·b·n·d numbers, and turns a step that costs
O(n²) into one that costs O(n).

Run it: ``minitf lesson 12`` (about 4 seconds), or as a plain script,
``python lessons/12_generation_and_kv_cache.py``.
"""

# %%
import os
import time

# One BLAS thread, set before NumPy loads it (as lesson 13 does): the step timings below then
# measure arithmetic, not two threads waiting for each other on a busy machine.
for threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(threads, "1")

import numpy as np  # noqa: E402

import minitf.functional as F  # noqa: E402
from minitf import backend, cost, course, data, models, nn, optim, viz  # noqa: E402
from minitf.generate import generate, sample_next  # noqa: E402

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# One token at a time, until the end token
# ----------------------------------------
#
# A decoder reads the tokens so far and returns, at its last position, one score (a logit) for
# every word of the vocabulary. Softmax turns the scores into probabilities; the simplest rule
# takes the index of the largest one (argmax) and looks that index up in the vocabulary. The
# lectures show this for a translation into "I am a student": the highest cell of the output is
# number 5, and word 5 of the vocabulary is "am". The chosen word is appended to the input and
# the model runs again: with one more token to read, every probability is revised. Generation
# stops when the model picks the end-of-sequence token (``generate`` runs a fixed number of
# steps, so below we cut its output at the first ``<eos>``).
#
# A model that has seen just this one sentence is enough to watch the loop. Sorting its words
# puts "am" at index 5, as on the slide.

# %%
vocab = data.WordVocabulary(["<bos> I am a student <eos>"])
sentence, _ = vocab.encode(["<bos> I am a student <eos>"])          # (1, 6) word ids
print("vocabulary:", dict(enumerate(vocab.words)))
word_lm = models.DecoderLM(vocab.vocab_size, d_model=16, n_heads=2, n_layers=1, max_len=8)
adam = optim.Adam(word_lm, lr=0.03)
for _ in range(60):                                   # teacher forcing: predict each next word
    word_lm.zero_grad()
    loss, backward = word_lm.loss(sentence[:, :-1], sentence[:, 1:])
    backward()
    adam.step()
print(f"loss after 60 steps: {loss:.4f}")

ids, logits = generate(word_lm, sentence[0, :1], 7, greedy=True, return_logits=True)
words = [vocab.words[i] for i in ids[0]]
for step in range(5):
    p = F.softmax(logits[0, step])[0]
    top = np.argsort(-p)[:2]
    print(f"step {step + 1}: reads {' '.join(words[:step + 1]):26} -> "
          + ", ".join(f"{vocab.words[i]} {p[i]:.3f}" for i in top))
probs = F.softmax(logits[0, 1])[0]                   # step 2: the distribution after "<bos> I"
index = int(sample_next(logits[:, 1], greedy=True)[0])
print(f"after '<bos> I': argmax = {index} -> {vocab.words[index]!r} (p = {probs[index]:.4f})")
assert vocab.words[5] == "am", "sorted, the vocabulary puts 'am' at index 5, as in deck 004"
assert index == 5 == probs.argmax(), "the highest cell of the output is number 5 (deck 004)"
text = words[:words.index("<eos>") + 1]
print("greedy, cut at <eos>:", " ".join(text))
assert text == "<bos> I am a student <eos>".split(), "fed back word by word, it ends at <eos>"
print("✓ softmax → argmax → index 5 → 'am'; each chosen word is fed back; <eos> stops it")

# %% [markdown]
# A model of characters
# ---------------------
#
# For the rest of the lesson we want distributions with some spread, so we take lesson 11's
# character model of Python's own documentation (CPython 3.11's pydoc topics, which come with
# minitf): ``course.train_char_lm`` trains it again with the same seed, so it is the same model,
# two blocks, d = 48, RoPE positions, 300 steps on 32-character windows. It trains in float32,
# which is faster (half the bytes to move), and comes back in float64 for the exact checks. A
# few seconds of training already beat the character-bigram baseline, which looks one character
# back. (Its held-out loss differs from lesson 11's in the second decimal: scored here on 64
# windows, not 512.)

# %%
corpus = data.default_corpus()
tok = data.CharTokenizer.fit(corpus)
train_ids, val_ids = data.split(tok.encode(corpus))
lm = course.train_char_lm(train_ids, tok.vocab_size)     # lesson 11's model, the same seed
val_x, val_y = data.evaluation_windows(val_ids, 32, max_windows=64)
held_out = lm.loss(val_x, val_y)[0]
bigram = data.bigram_loss(train_ids, val_ids[:val_x.size + 1], tok.vocab_size)  # same characters
print(f"{tok.vocab_size} characters; held-out loss {held_out:.3f} nats vs bigram {bigram:.3f}")
assert held_out < bigram, "300 steps should already beat the one-character-back baseline"
prompt = tok.encode("The value of the ")
print("greedy:", repr(tok.decode(generate(lm, prompt, 50, greedy=True)[0])))
print("✓ a few seconds of training: better than the bigram, and words begin to appear")

# %% [markdown]
# Greedy, temperature, top-k, top-p
# ---------------------------------
#
# Always taking the argmax is deterministic and soon repeats itself (look at the greedy line
# above). Sampling from the distribution instead gives variety, and three knobs shape what is
# sampled. With logits z and probabilities p = softmax(z)::
#
#     greedy          the argmax of z, every time
#     temperature τ   sample from softmax(z / τ): τ < 1 sharpens the distribution, τ > 1 flattens
#     top-k           keep the k most likely tokens, renormalize, sample among them
#     top-p           keep the most likely tokens until they add up to p, renormalize, sample
#
# Top-p (nucleus sampling) adapts to the shape: when the model is sure, few tokens reach p; when
# it hesitates, many do. Below, each rule is applied to the model's next-character distribution
# after "The value of the ", and ``sample_next`` (what ``generate`` calls at every step) draws
# 20,000 samples with each rule so that its frequencies can be compared with the rule.

# %%
_, step_logits = generate(lm, prompt, 1, greedy=True, return_logits=True)
z = step_logits[0, 0]                                       # (V,): the next character's logits
p = F.softmax(z)[0]
order = np.argsort(-p)                                      # most likely first
kept_k = np.zeros_like(p, dtype=bool)
kept_k[order[:5]] = True
kept_p = np.zeros_like(p, dtype=bool)
kept_p[order] = np.cumsum(p[order]) - p[order] < 0.6        # the tokens ahead of it add up to < p
rules = {"greedy (argmax)": (dict(greedy=True), np.eye(len(p))[order[0]]),
         "temperature τ = 0.5": (dict(temperature=0.5), F.softmax(z / 0.5)[0]),
         "temperature τ = 2": (dict(temperature=2.0), F.softmax(z / 2.0)[0]),
         "top-k, k = 5": (dict(top_k=5), p * kept_k / p[kept_k].sum()),
         "top-p, p = 0.6": (dict(top_p=0.6), p * kept_p / p[kept_p].sum())}
many = np.repeat(z[None], 20_000, axis=0)                   # (20000, V): one row per draw
freq = {}
for name, (kwargs, target) in rules.items():
    draws = sample_next(many, **kwargs)
    freq[name] = np.bincount(draws, minlength=len(p)) / len(draws)
    print(f"{name:20}: {int((target > 0).sum()):3} characters possible, "
          f"max |frequency − rule| = {np.abs(freq[name] - target).max():.4f}")
    assert np.abs(freq[name] - target).max() < 0.02, f"sample_next should follow the {name} rule"

sharpened = {tau: F.softmax(z / tau)[0] for tau in (0.5, 1.0, 2.0)}
entropy = {tau: float(-(q * np.log(q)).sum()) for tau, q in sharpened.items()}
print("entropy (nats) at τ = 0.5, 1, 2:", [round(e, 2) for e in entropy.values()])
assert freq["greedy (argmax)"][order[0]] == 1.0, "greedy always picks the argmax"
assert set(np.flatnonzero(freq["top-k, k = 5"])) <= set(order[:5]), "top-k never leaves the top 5"
assert freq["top-p, p = 0.6"][~kept_p].sum() == 0, "top-p never leaves the nucleus"
assert entropy[0.5] < entropy[1.0] < entropy[2.0], "a higher temperature flattens the distribution"
print(f"✓ greedy = {tok.chars[order[0]]!r}; top-p keeps {kept_p.sum()} characters, top-k 5; "
      f"temperature trades certainty for variety")

shown = order[:16]
labels = [{" ": "␣", "\n": "↵"}.get(tok.chars[i], tok.chars[i]) for i in shown]
fig, axes = viz.figure(2, 3, size=(13, 6.4))
panels = [("the model: softmax(z)", p, None)] + [(n, t, freq[n]) for n, (_, t) in rules.items()]
for ax, (name, target, observed) in zip(axes.ravel(), panels):
    ax.bar(range(16), p[shown], color="lightgray", label="model, τ = 1")
    ax.bar(range(16), target[shown], width=0.55, color="tab:blue", label="after the rule")
    if observed is not None:
        ax.plot(range(16), observed[shown], "k.", ms=7, label="20,000 draws")
    ax.set_xticks(range(16), labels=labels)
    ax.set(title=name, ylim=(0, 1.02) if "greedy" in name else (0, 0.3), ylabel="probability")
for ax in axes[1]:
    ax.set_xlabel("next character")
axes[0, 1].legend(fontsize=8)
fig.suptitle('The next character after "The value of the ", reshaped by each decoding rule '
             '(the 16 most likely characters)')
viz.save(fig, "12_sampling")

# %% [markdown]
# Why keys and values can be cached
# ---------------------------------
#
# Generating token n + 1 naively runs the model on all n tokens again. But under the causal mask
# (lesson 04) no token ever sees a later one, so the keys and values of tokens 1 … n are exactly
# what they were at the previous step. Only the newest token needs computing: its query, key and
# value. Its key and value are appended to the ones kept from earlier steps, and its query
# attends to all of them. In the lectures' picture, the query of the next token meets the cached
# keys and values of "The cat sat on the". (An encoder–decoder caches twice: its decoder's own
# keys and values, and the cross-attention's, projected once from the encoder's output; lesson
# 14 checks both.)
#
# Deck 000's KV-cache slide writes the new key as ``k_new = W_k x[:, :, -1]``. The index is
# right in the column convention that the deck also uses, Q = W^q x, where each token is a
# column: a batch x of shape (b, d, n) keeps the positions on its last axis, and x[:, :, -1] is
# the newest token. But the same slide writes Q = x W^q, the row convention, where x has shape
# (b, n, d); there the index takes the last *feature* of every token, a (b, n) array. The slip
# is mixing the two conventions on one slide. minitf uses rows: the newest token is
# ``x[:, -1]``, of shape (b, d), and its key is ``x[:, -1] W_k``. With n ≠ d the slip fails
# loudly, as (b, n) cannot meet a (d, d) matrix; with n = d it runs, and only the model's own
# cache shows that the key it gives belongs to no token.
#
# Deck 000 has a second slip, on its matrix-notation slides. They give Q, K and V a width that
# they call h, then call the output (n × d) and divide the scores by √d. Below we call that width
# w, because in minitf h counts heads. With V of width w the output is (n × w), and the scale is
# √w, the width of the queries and keys. Check both on one attention layer with a ``KVCache``.

# %%
b, n, d, h = 2, 5, 8, 2
x = backend.randn(b, n, d)
print(f"x {x.shape}: x[:, :, -1] is {x[:, :, -1].shape}, x[:, -1] is {x[:, -1].shape}; with "
      f"tokens as columns, {x.transpose(0, 2, 1).shape}, the last one is [:, :, -1]")
layer = nn.MultiHeadAttention(d, h, causal=True)
W_k, b_k = layer.W_qkv.W.data[:, d:2 * d], layer.W_qkv.b.data[d:2 * d]   # the key columns


def key(tokens):
    """(b, d) tokens -> their keys, (b, h, d_head), as the layer computes them."""
    return (tokens @ W_k + b_k).reshape(len(tokens), h, d // h)


full = layer(x)                                          # every position, no cache
kv = nn.KVCache()
layer(x[:, :-1], cache=kv)                               # the first n − 1 tokens
newest = layer(x[:, -1:], cache=kv)                      # then only the last one
print(f"cache: k {kv.k.shape}, v {kv.v.shape}")
assert np.allclose(kv.k[:, :, -1], key(x[:, -1]), atol=1e-14), "the cached key is x[:, -1] W_k"
assert np.allclose(newest[:, 0], full[:, -1], atol=1e-14), "one cached step = the full output"
try:
    x[:, :, -1] @ W_k
    raise AssertionError("x[:, :, -1] should not even fit W_k when n ≠ d")
except ValueError:
    print("n ≠ d: x[:, :, -1] @ W_k fails, (b, n) features cannot meet a (d, d) matrix")
square, kv_square = backend.randn(b, d, d), nn.KVCache()           # n = d = 8 tokens
layer(square, cache=kv_square)
slip = np.abs(key(square[:, :, -1]) - kv_square.k[:, :, -1]).max()
print(f"n = d: x[:, :, -1] W_k runs, and its key is off the cached one by up to {slip:.2f}")
assert np.allclose(key(square[:, -1]), kv_square.k[:, :, -1], atol=1e-14) and slip > 0.1, \
    "with n = d only x[:, -1] gives the cached key; x[:, :, -1] silently gives another"
w = 3                                                     # the slides' width, ≠ d = 8
Q, K, V = (x[0] @ backend.randn(d, w) for _ in range(3))   # (n, w) each
out, att = F.attention(Q, K, V)
assert out.shape == (n, w) and att.scale == 1 / np.sqrt(w), "(n × w) out, scaled by 1/√w"
print("✓ the new key comes from the last position, x[:, -1] in rows; one cached step = a full "
      "pass")

# %% [markdown]
# What the cache costs in memory
# ------------------------------
#
# The lectures leave the quiz "how much memory does the KV cache need?" open. Each of the L layers
# keeps a key and a value, d numbers each, for every one of the n tokens of the b sequences::
#
#     KV cache = 2 · L · b · n · d numbers        (× 4 bytes in float32)
#
# Count it on the cache that ``model.new_cache()`` fills, compare with ``cost.lm_cost``, and then
# evaluate the formula for the original Transformer's sizes (L = 6, d = 512) at n = 1024.

# %%
text_ids = generate(lm, prompt, 60, greedy=True)          # (1, 17 + 60): a whole sequence
cache = lm.new_cache()
lm(text_ids, cache=cache)                                # fill the cache with it
L, d_model, n_ctx = lm.config["n_layers"], lm.config["d_model"], text_ids.shape[1]
numbers = sum(c.k.size + c.v.size for c in cache)
ours = cost.lm_cost(tok.vocab_size, d_model, L, context=n_ctx, positional="rope")
print(f"our model: {L} layers × 2 × {n_ctx} tokens × {d_model} = {numbers:,} numbers "
      f"({sum(c.k.nbytes + c.v.nbytes for c in cache):,} bytes in float64)")
assert numbers == 2 * L * 1 * n_ctx * d_model == ours["kv_cache_numbers"], "2·L·b·n·d numbers"

base = cost.lm_cost(37_000, d_model=512, n_layers=6, d_ff=2048, context=1024, batch_size=1)
print(f"L = 6, d = 512, n = 1024, b = 1: {base['kv_cache_numbers']:,} numbers = "
      f"{base['kv_cache_bytes']:,} bytes = {base['kv_cache_bytes'] / 2**20:.0f} MiB in float32")
big = cost.lm_cost(37_000, d_model=512, n_layers=6, d_ff=2048, context=4096, batch_size=32)
print(f"the same model serving b = 32 sequences of n = 4096: {big['kv_cache_bytes'] / 1e9:.1f} GB")
assert base["kv_cache_numbers"] == 2 * 6 * 1 * 1024 * 512 == 6_291_456, "2·L·b·n·d"
assert base["kv_cache_bytes"] == 25_165_824, "6,291,456 float32 numbers are 25,165,824 bytes"
print("✓ the KV cache: 2·L·b·n·d numbers; 24 MiB for the base model at n = 1024")

# %% [markdown]
# What the cache saves in time
# ----------------------------
#
# Without the cache, step n runs every layer on all n tokens: O(n·d²) for the projections and
# the feed-forward, O(n²·d) for attention, so N steps cost O(N²·d²) + O(N³·d) in all. With the
# cache, step n runs one token: O(d²) for its projections plus O(n·d) for its query against n
# cached keys, "one less n" in every entry of the lectures' cost table (per token
# O(b·d² + b·n·d), a time linear in n), and N steps cost O(N·d²) + O(N²·d). Which term leads
# depends on n against d. With d_ff = 4d a block spends 24·d² FLOPs a token on its matrices and
# 4·n·d on attention, so attention leads only past n = 6d (lesson 13 counts this, and what a
# token moves through memory). Our model has d = 48, and the steps timed below reach n = 216,
# short of 6d = 288: the d² terms still lead, so the totals grow mostly as N² without the cache
# and as N with it.
#
# Then we measure: 200 steps, the cached and the uncached forward timed side by side at every
# step, so that a busy machine slows both alike. Timings vary by machine; only their ratio is
# asserted, with a wide margin. ``generate`` uses the cache by default, and ``use_cache=False``
# recomputes everything at every step; the loop below does both by hand, and so also checks
# that the cache is a saving, not an approximation: in float64 every step's logits agree to
# rounding, and so does every greedy token.

# %%
flops = {n: cost.lm_cost(tok.vocab_size, d_model, L, context=n, positional="rope")
         for n in (64, 128, 256)}
for n, c in flops.items():
    print(f"n = {n:3}: next token {c['decode_flops_cached']:>10,} FLOPs with the cache, "
          f"{c['decode_flops_uncached']:>12,} without")
assert all(c["decode_flops_uncached"] == n * c["decode_flops_cached"] for n, c in flops.items()), \
    "without the cache a step re-runs all n tokens: n × the cached cost (deck 000)"
step_flops = [flops[n]["decode_flops_cached"] for n in (64, 128, 256)]
assert step_flops[2] - step_flops[1] == 2 * (step_flops[1] - step_flops[0]), \
    "with the cache the cost of a step is linear in n: O(bd² + bnd) (deck 000's decoding table)"

longest = len(prompt) + 200 - 1                           # the last context timed below: 216
last, bare = (cost.lm_cost(tok.vocab_size, d_model, L, context=m, positional="rope")
              ["decode_flops_cached"] for m in (longest, 0))                  # with, without keys
print(f"the last step timed, n = {longest} < 6d = {6 * d_model}: attention is "
      f"{(last - bare) / last:.0%} of its FLOPs")
assert last - bare < bare, "at n < 6d the d² terms lead: N² without the cache, N with it"

steps = 200
seq = generate(lm, prompt, steps, greedy=True)           # (1, 17 + 200): the text to replay
start = len(prompt)
cache = lm.new_cache()
lm(seq[:, :start - 1], cache=cache)                      # the prompt, all but its last token
ms_cached, ms_uncached, gaps, step_logits, tokens = [], [], [], [], []
for t in range(start, start + steps):                    # predict token t from tokens < t
    tic = time.perf_counter()
    one = lm(seq[:, t - 1:t], cache=cache)[0, -1]        # cached: one new token
    tac = time.perf_counter()
    every = lm(seq[:, :t])[0, -1]                        # uncached: all t tokens again
    toc = time.perf_counter()
    ms_cached.append(1e3 * (tac - tic))
    ms_uncached.append(1e3 * (toc - tac))
    gaps.append(np.abs(one - every).max())
    step_logits.append(one)
    tokens.append(int(every.argmax()))                    # greedy, from the uncached logits
ms_cached, ms_uncached = np.array(ms_cached), np.array(ms_uncached)
total_c, total_u = ms_cached.sum() / 1e3, ms_uncached.sum() / 1e3
# the fastest of 50 steps: load only adds time, and most to the longer, uncached ones
early = ms_uncached[:50].min() / ms_cached[:50].min()
late = ms_uncached[-50:].min() / ms_cached[-50:].min()
print(f"200 tokens: {total_c:.2f} s with the cache, {total_u:.2f} s without "
      f"({total_u / total_c:.1f}×); the fastest of the first 50 steps {early:.1f}× "
      f"quicker with it, of the last 50 {late:.1f}×; max |cached − uncached logits| = {max(gaps):.1e}")
assert max(gaps) <= 1e-9, "every replayed step gives the same logits with and without the cache"
assert tokens == list(seq[0, start:]), "and the uncached logits pick the text generate wrote"
assert total_u > 1.5 * total_c, "for 200 new tokens the uncached loop should be clearly slower"
assert late > 1.5 * early, "the longer the context, the more the cache saves"
print("✓ cached steps stay cheap; uncached ones grow with n, their total as N² + N³ (mostly N² "
      "at n < 6d)")

generated = np.arange(steps)                             # 0 … 199; the context is start + this
window = 11                                              # a running median hides load spikes
smooth = {name: np.median(np.lib.stride_tricks.sliding_window_view(ms, window), axis=1)
          for name, ms in (("without cache (re-run all n)", ms_uncached),
                           ("with KV cache (one token)", ms_cached))}
fig, axes = viz.figure(1, 2, size=(11, 3.9))
for ms, colour in ((ms_uncached, "tab:blue"), (ms_cached, "tab:orange")):
    axes[0].plot(generated, ms, ".", color=colour, ms=3, alpha=0.35)
viz.curves(axes[0], generated[window // 2:-(window // 2)], smooth, marker="",
           xlabel=f"tokens generated so far (context = {start} + this)",
           ylabel="ms per step",
           title="One step (dots; lines: running median of 11)")
axes[0].set_ylim(0, np.percentile(ms_uncached, 98) * 1.1)
viz.curves(axes[1], generated, {"without cache": np.cumsum(ms_uncached) / 1e3,
                                "with KV cache": np.cumsum(ms_cached) / 1e3}, marker="",
           xlabel="tokens generated so far", ylabel="total seconds",
           title="All steps: mostly N² vs mostly N (n < 6d)")
fig.suptitle(f"Greedy generation, 2 layers, d = 48, timed on this machine: timings vary by "
             f"machine and load (here {total_u / total_c:.1f}× faster with the cache)")
viz.save(fig, "12_kv_cache")

# %% [markdown]
# Training does not pay this price. With teacher forcing the whole text is known in advance,
# so one forward pass over it scores every position at once, in parallel; the causal mask makes
# each position's logits the ones generation would see. Generation cannot do that: token t + 1
# depends on token t, so the steps run one after another, however fast each one is.

# %%
tic = time.perf_counter()
parallel = lm(seq[:, :-1])[0, start - 1:]                # (200, V): all 200 predictions at once
one_pass = time.perf_counter() - tic
print(f"one forward over the whole text: {1e3 * one_pass:.0f} ms for all 200 positions")
assert np.abs(parallel - np.array(step_logits)).max() <= 1e-9, \
    "one parallel pass gives the 200 steps' logits: the causal mask hides what came later"
assert np.array_equal(parallel.argmax(-1), seq[0, start:]), "and so every greedy token"
print("✓ teacher forcing scores all positions in one pass; generation must go step by step")

# %% [markdown]
# What to remember
# ----------------
#
# * Generation appends one token at a time: logits → softmax → a rule picks an index → the
#   vocabulary gives the token, which is fed back; an end token stops it.
# * Greedy takes the argmax; temperature sharpens (τ < 1) or flattens (τ > 1); top-k and top-p
#   sample only among the most likely tokens, a fixed number or a fixed share of probability.
# * Under a causal mask, earlier keys and values never change, so they are cached: the logits are
#   identical, a step costs O(b·d² + b·n·d) instead of re-running all n tokens, and the cache
#   holds 2·L·b·n·d numbers (25,165,824 bytes for L = 6, b = 1, d = 512, n = 1024 in float32).
# * With tokens as rows, x of shape (b, n, d), the newest token is ``x[:, -1]``; ``x[:, :, -1]``
#   is the last position only when tokens are columns, (b, d, n).
#
# Next, lesson 13: parameters, FLOPs and memory for the whole model, and attention against
# recurrence.
