"""
Attention by hand
=================

Work through one attention step with numbers small enough to check on paper: a query is
compared with every key, the scores become weights that sum to one, and the output is the
weighted average of the values. By the end you will have computed how much "The" attends to
"The cat sat on", and reproduced the lectures' "Thinking Machines" quiz and the Hello / I / love
/ you weight matrix, all with minitf's own ``F.attention``.

Run it: ``minitf lesson 1`` (about a second), or as a plain script,
``python lessons/01_attention_by_hand.py``.
"""

# %%
import numpy as np

import minitf.functional as F
from minitf import backend, nn, viz

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# The question attention answers
# ------------------------------
#
# Take a sentence such as "The animal didn't cross the street because it was too tired". To
# build a better vector for "it", the model wants to borrow from "animal" (change "tired" to
# "wide" and it should borrow from "street" instead). Attention makes that borrowing a
# computation. Every token emits three vectors:
#
# * a **query** q: what this token is looking for,
# * a **key** k: what this token offers, to be matched against queries,
# * a **value** v: what this token hands over once it is chosen.
#
# A library catalogue is a fair picture: what you ask the librarian is the query, the card of
# each book (its title and subject) is the key, and the book on the shelf is the value. The
# difference is that attention does not fetch one book: it hands over a blend of all of them,
# each weighted by how well its card matches the question.
#
# For one query the recipe is::
#
#     score_j  = q · k_j / √d_k         how well key j matches
#     weight_j = softmax(score)_j       positive, and summing to 1 over the keys
#     output   = Σ_j weight_j · v_j     a weighted average of the values
#
# (Resolving "it" needs a model that has actually learned English; here we build the
# mechanism itself with numbers we choose.)

# %% [markdown]
# Where queries, keys and values come from
# ----------------------------------------
#
# A token does not arrive with a query, a key and a value: it arrives as one embedding x_i,
# and three learned matrices turn it into the three roles, q_i = x_i W_Q, k_i = x_i W_K and
# v_i = x_i W_V. The lectures draw this for the four tokens "The cat sat on" and ask how much
# "The" should attend to each position. The answer is one row of weights::
#
#     α̂_1,i = softmax_i( q_1 · k_i / √d )        for i = 1, …, 4
#
# (The deck calls the score inside, q_1 · k_i / √d, α_1,i and its softmax α̂_1,i; the hat
# marks the weights, which are what the code below calls ``alpha``.)
# Below, the embeddings and the matrices are random (nothing has been trained, so the row says
# nothing about English yet), but every step is the real one. The figure shows the row as a
# 1 × 4 strip of the weight matrix: keys across, the one query down.

# %%
sentence = ["The", "cat", "sat", "on"]
d = 8
with backend.seed(1):                                   # its own seed: later cells are unchanged
    x = backend.to_numpy(backend.randn(len(sentence), d))   # (n=4, d=8): one embedding per token
    W_Q, W_K, W_V = (nn.Linear(d, d, bias=False) for _ in range(3))
queries, keys4, values4 = W_Q(x), W_K(x), W_V(x)        # (4, 8) each: row i is q_i, k_i, v_i
z_the, the = F.attention(queries[:1], keys4, values4)   # only the query of "The"
alpha = the.probs[0]                                    # (4,) α̂_1,i over the four positions

dots = keys4 @ queries[0] / np.sqrt(d)                  # the slide's recipe, written out in NumPy
by_hand = np.exp(dots) / np.exp(dots).sum()
for word, score, a in zip(sentence, dots, alpha):
    print(f"α_1,i = q_1·k_i/√d for {word!r:6}= {score:+.3f}   α̂_1,i = {a:.3f}")
print(f"sum of the row = {alpha.sum():.6f}")
assert np.allclose(alpha, by_hand, atol=1e-14), \
    "F.attention's row for 'The' should be softmax_i(q_1·k_i/√d), the lectures' formula"
assert np.allclose(z_the[0], alpha @ values4), "z_1 should be Σ_i α̂_1,i v_i"
assert np.isclose(alpha.sum(), 1) and (alpha > 0).all(), \
    "softmax's defining property: the weights are positive and sum to 1"
print("✓ 'The' attends to The / cat / sat / on with one softmax row; its output blends the v_i")

fig, ax = viz.figure(size=(6.0, 2.0))
viz.heatmap(ax, alpha[None, :], x_labels=sentence, y_labels=["The"], xlabel="key",
            ylabel="query", vmin=0, vmax=1, colorbar="attention weight", annotate=".2f",
            title='How much "The" attends to each position (random W_Q, W_K)')
viz.save(fig, "01_the_cat_sat_on")

# %% [markdown]
# Thinking Machines
# -----------------
#
# The lectures' worked example has two tokens, "Thinking" and "Machines", with d_k = 64. The
# query of "Thinking" scores 112 against its own key and 96 against the key of "Machines". It
# comes as a quiz: what is the output vector for "Thinking"? The four choices are::
#
#     (a) 0.5·v_1 + 0.5·v_2        (b) 0.54·v_1 + 0.46·v_2
#     (c) 0.88·v_1 + 0.12·v_2      (d) 0.12·v_1 + 0.88·v_2
#
# Decide before you run the cell. We build vectors that give exactly those dot products: q is
# all ones, so q · k is just the sum of k's entries.

# %%
d_k = 64
q = np.ones((1, d_k))                                   # (n_q=1, d_k): the query of "Thinking"
k = np.stack([np.full(d_k, 112 / d_k),                  # (n_k=2, d_k): keys of the two tokens
              np.full(d_k, 96 / d_k)])
v = np.array([[1.0, 0.0],                               # (n_k=2, d_v=2): v_1 and v_2 as the
              [0.0, 1.0]])                              #   unit vectors, so out = the weights

out, cache = F.attention(q, k, v)                       # softmax(q kᵀ / √d_k) v
raw = (q @ k.T)[0]                                      # (2,)  the scores before scaling
scaled = raw * cache.scale                              # (2,)
weights = cache.probs[0]                                # (2,)  one row: the query's weights

print(f"q·k_1, q·k_2          = {raw[0]:.0f}, {raw[1]:.0f}")
print(f"scale = 1/√d_k        = {cache.scale}  (√64 = 8)")
print(f"scaled scores         = {scaled[0]:.0f}, {scaled[1]:.0f}")
print(f"softmax               = {weights[0]:.4f}, {weights[1]:.4f}")
print(f"output z_1            = {out[0, 0]:.4f}·v_1 + {out[0, 1]:.4f}·v_2")

assert np.allclose(raw, [112, 96]), f"the scores should be 112 and 96 (deck 004), got {raw}"
assert cache.scale == 1 / 8, f"d_k = 64 should scale by 1/8, got {cache.scale}"
assert np.allclose(scaled, [14, 12]), f"112/8 and 96/8 should be 14 and 12, got {scaled}"
assert np.allclose(weights, [0.8808, 0.1192], atol=1e-4), \
    f"softmax(14, 12) should be 0.88 / 0.12 as in deck 004's table, got {weights}"
assert np.allclose(out[0], weights), "with v_1, v_2 the unit vectors the output is the weights"
print("✓ 112, 96 → 14, 12 → 0.88, 0.12: the quiz's answer is (c), z_1 = 0.88·v_1 + 0.12·v_2")

# %% [markdown]
# Only the *difference* of the scores matters: softmax(14, 12) = softmax(2, 0), and
# e² / (e² + 1) = 0.8808. Without the division by 8 the difference would be 16, and the
# weights would be 0.9999999 and 0.0000001: "Machines" would vanish from the output. Lesson 02
# shows why that is bad for learning, not only for the blend.

# %%
unscaled = F.softmax(raw)[0]
print(f"softmax(112, 96) without the scale = {unscaled[0]:.7f}, {unscaled[1]:.1e}")
assert unscaled[1] < 1e-6, "without scaling, the second weight should all but vanish"
assert np.isclose(weights[0], np.exp(2) / (np.exp(2) + 1)), "softmax(14, 12) = e²/(e²+1)"

fig, axes = viz.figure(1, 3, size=(10, 3.2))
tokens = ["Thinking", "Machines"]
for ax, values, name, ylabel, fmt in zip(axes, (raw, scaled, weights),
                                         ("score q·k", "score / √d_k", "softmax weight"),
                                         ("raw score", "scaled score", "attention weight"),
                                         ("{:.0f}", "{:.0f}", "{:.2f}")):
    bars = ax.bar(tokens, values, color=["tab:blue", "tab:orange"])
    ax.bar_label(bars, labels=[fmt.format(x) for x in values])
    ax.set_title(name)
    ax.set_xlabel("key")
    ax.set_ylabel(ylabel)                               # each panel its own quantity
    ax.set_ylim(0, max(values) * 1.18)
fig.suptitle('Thinking Machines, the query "Thinking": raw scores → scaled scores → weights')
viz.save(fig, "01_thinking_machines")

# %% [markdown]
# Attention is a soft dictionary lookup
# -------------------------------------
#
# A Python dictionary returns the value whose key *equals* the query. Attention returns a blend
# of all values, weighted by how *similar* each key is. Make the keys one-hot "addresses" and
# the query a scaled copy of address 2: the larger the query, the sharper the softmax, and the
# closer the output gets to the value stored under key 2. At query size 0 every key matches
# equally well and the output is the plain mean of the values.

# %%
n_keys, d_v = 5, 3
keys = np.eye(n_keys)                                   # (5, 5): key j is the address e_j
values = backend.to_numpy(backend.randn(n_keys, d_v))   # (5, 3): what is stored at each address
sizes = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0])   # the query's size (its norm)
lookups = []
for s in sizes:
    query = s * keys[2:3]                               # (1, 5): "give me what is at address 2"
    found, lookup = F.attention(query, keys, values, scale=1.0)
    lookups.append((found[0], lookup.probs[0]))

for s, (found, w) in zip(sizes, lookups):
    print(f"query size {s:>4.1f}: weights {np.round(w, 3)}  "
          f"distance to values[2] = {np.linalg.norm(found - values[2]):.2e}")
assert np.allclose(lookups[0][0], values.mean(0)), "at query size 0 the output is the mean"
assert np.linalg.norm(lookups[-1][0] - values[2]) < 1e-6, \
    "a query of size 32 should return the value stored under its key"
print("✓ a soft lookup: mean of the values at query size 0, values[2] itself at size 32")

fig, ax = viz.figure(size=(5.2, 3.8))
viz.heatmap(ax, np.array([w for _, w in lookups]), x_labels=[f"key {j}" for j in range(n_keys)],
            y_labels=[f"{s:g}" for s in sizes], xlabel="key (address)",
            ylabel="query size", vmin=0, vmax=1, colorbar="attention weight",
            annotate=".2f", title="Querying address 2: from a blend to a lookup")
viz.save(fig, "01_soft_lookup")

# %% [markdown]
# Every query at once: the weight matrix
# --------------------------------------
#
# With n tokens, every token is a query and every token is a key, so the weights form an
# n × n matrix: row i holds query i's weights over all keys, and softmax runs along each row.
# Stacking the queries as the rows of Q, the keys of K and the values of V, the whole layer is
# one formula, ``softmax(Q Kᵀ / √d_k) V``, and every output row is computed at the same time.
#
# That is what the recurrent networks used before Transformers could not do. An RNN reads a
# sentence one token at a time, folding each into a hidden state, so n tokens take n steps that
# must run in order, and information from the first word reaches the last only after passing
# through every state in between. Along that path long contexts fade, and the gradient, pushed
# back through the same steps, tends to vanish or explode. Attention connects any two positions
# in a single step, and since no row waits for another, all positions run in parallel.
#
# The lectures show such a matrix for "Hello I love you". Entry [0, 2] = 0.05 says how much
# "Hello" draws from "love". Its rows sum to 1, as softmax rows must. Can minitf produce
# exactly that matrix? Softmax is undone by a logarithm up to a constant per row (it only sees
# differences within a row), and these rows already sum to 1, so scores of log P give back P.

# %%
words = ["Hello", "I", "love", "you"]
P = np.array([[0.80, 0.10, 0.05, 0.05],                 # (n_q=4, n_k=4), from deck 002
              [0.10, 0.60, 0.20, 0.10],
              [0.05, 0.20, 0.65, 0.10],
              [0.20, 0.10, 0.10, 0.60]])
probs, _ = F.softmax(np.log(P))                         # row-wise, over the keys
print("softmax(log P) =\n", np.round(probs, 4))
print("row sums      =", probs.sum(axis=1))
print(f"weights {probs.shape}: [seq_len, seq_len]")
assert np.allclose(P.sum(axis=1), 1.0), "every row of deck 002's matrix should sum to 1"
assert (P > 0).all(), "every weight in deck 002's matrix should be positive, as softmax gives"
assert np.allclose(probs, P), \
    "identity: softmax(log P) = P for a matrix whose rows sum to 1 (log undoes softmax up to a " \
    "per-row constant)"
print("✓ the Hello / I / love / you matrix: positive rows that sum to 1, "
      "so each output is a weighted average of the values")

fig, ax = viz.figure(size=(4.8, 4.0))
viz.heatmap(ax, probs, x_labels=words, y_labels=words, xlabel="key", ylabel="query",
            vmin=0, vmax=1, colorbar="attention weight", annotate=".2f",
            title="Hello / I / love / you: each row sums to 1")
viz.save(fig, "01_hello_i_love_you")

# %% [markdown]
# Because the weights are non-negative and sum to one, each output is a *convex combination*
# of the values: it lies inside the convex hull of the values and can never leave it. (Lesson
# 03 shows what that costs and why the block adds a feed-forward network after attention.)
#
# Queries and keys need not come from the same sequence: with M queries and N keys the weight
# matrix is M × N and the output is M × d_v. A decoder attending to an encoder does exactly
# this. The batched call also equals a loop over the queries, one at a time: each row depends
# only on its own query, so all rows can be computed at once.

# %%
M, N, d, d_v = 3, 5, 4, 2
Q, K, V = (backend.to_numpy(backend.randn(*shape)) for shape in ((M, d), (N, d), (N, d_v)))
out, cache = F.attention(Q, K, V)                       # (3, 2) from (3, 4), (5, 4), (5, 2)
one_by_one = np.concatenate([F.attention(Q[i:i + 1], K, V)[0] for i in range(M)])
print(f"Q {Q.shape}, K {K.shape}, V {V.shape} -> weights {cache.probs.shape}, out {out.shape}")
assert out.shape == (M, d_v) and cache.probs.shape == (M, N), "M×N weights, M×d_v output"
assert np.allclose(out, one_by_one, atol=1e-15), \
    "the batched call should equal a loop over the queries: each row needs only its own query"

X = backend.to_numpy(backend.randn(2, 6, 8))            # (b=2, n=6, d=8): a batch of sequences
out, cache = F.attention(X, X, X)
assert cache.probs.shape == (2, 6, 6), "a batch of sequences gives (b, n, n) weights"
print(f"batched: x {X.shape} -> weights {cache.probs.shape}, out {out.shape}")
print("✓ M queries, N keys: M×N weights; a batch adds a leading axis; all rows at once")

# %% [markdown]
# What to remember
# ----------------
#
# * Queries, keys and values are learned linear maps of the token embeddings.
# * Scores are dot products of queries with keys, divided by √d_k; softmax turns each row into
#   weights that are positive and sum to one; the output is the weighted average of the values.
# * The weight matrix has one row per query and one column per key; ``cache.probs`` holds it,
#   ready to plot.
# * Attention is a lookup that blends: sharp scores pick one value, flat scores average them.
# * Any two positions are one step apart, and all rows are computed at once: no recurrence.
#
# Next, lesson 02: why divide by √d_k at all?
