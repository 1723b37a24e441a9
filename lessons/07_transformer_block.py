"""
The Transformer block: feed-forward, residuals, LayerNorm
=========================================================

Attention (lessons 01-06) is only half of a Transformer layer. Here we assemble the rest: a
feed-forward network applied to every position on its own, a residual connection around each
sublayer, and a LayerNorm. We recompute a block from its four equations, watch which positions
a gradient reaches, measure what a stack of blocks keeps for its backward, stack blocks deep with
and without residuals, and train the same six-layer Transformer twice: once with the original
post-LN blocks, once with pre-LN blocks.

Run it: ``minitf lesson 7`` (about 4 seconds: two short trainings), or as a plain script,
``python lessons/07_transformer_block.py``.
"""

# %%
import contextlib
import tracemalloc

import numpy as np

import minitf.functional as F
from minitf import backend, data, nn, viz
from minitf.models import Transformer
from minitf.optim import Adam

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# One block, four equations
# -------------------------
#
# The encoder block of the original Transformer is two sublayers, each wrapped the same way::
#
#     a   = MultiHeadAttention(x)          tokens look at each other
#     z   = LayerNorm(x + a)               residual, then normalise
#     f   = ReLU(z W₁ + b₁) W₂ + b₂        the feed-forward network, W₁: d × d_ff, W₂: d_ff × d
#     out = LayerNorm(z + f)
#
# The LayerNorm comes *after* the residual sum, so this is called **post-LN**. The hidden layer
# of the feed-forward network is wider than the model: the lectures give d_ff as usually 2 to 8
# times d, and the original Transformer uses 4d (2048 for d = 512). ``nn.EncoderBlock`` builds
# exactly that; below we take its own parameters and redo every step by hand. The attention
# sublayer is lesson 06; the rest is written out with ``F.linear``, ``F.relu`` and
# ``F.layer_norm``.

# %%
d, h, d_ff = 16, 4, 64                                  # d_ff = 4d, as in the original
block = nn.EncoderBlock(d, h, d_ff, pre_ln=False)
x = backend.randn(2, 6, d)                              # (b=2, n=6, d=16)

out = block(x)
attn, ln1 = block.self_attn.layer, block.self_attn.norm
ffn, ln2 = block.ffn.layer, block.ffn.norm
a = attn(x)                                             # (2, 6, 16)
z, _ = F.layer_norm(x + a, ln1.gamma.data, ln1.beta.data)
hidden, _ = F.relu(F.linear(z, ffn.W_1.W.data, ffn.W_1.b.data)[0])       # (2, 6, 64)
f, _ = F.linear(hidden, ffn.W_2.W.data, ffn.W_2.b.data)                  # (2, 6, 16)
by_hand, _ = F.layer_norm(z + f, ln2.gamma.data, ln2.beta.data)

error = np.abs(by_hand - out).max()
print(f"x {x.shape} -> out {out.shape};  |by hand - EncoderBlock| = {error:.1e}")
print(f"each output row: mean {np.abs(out.mean(-1)).max():.1e}, variance {out.var(-1).mean():.5f}")
assert error < 1e-12, f"the four post-LN equations (decks 000, 004) should give the block: {error}"
assert out.shape == x.shape, "a block maps (b, n, d) to (b, n, d)"
assert np.allclose(out.mean(-1), 0) and np.allclose(out.var(-1), 1, atol=1e-4), \
    "a post-LN block's output rows have mean 0 and variance 1 (γ = 1, β = 0 at the start)"

pre = nn.EncoderBlock(d, h, d_ff, pre_ln=True)          # y = x + MHA(LN(x)); out = y + FFN(LN(y))
y = x + pre.self_attn.layer(pre.self_attn.norm(x))
pre_by_hand = y + pre.ffn.layer(pre.ffn.norm(y))
assert np.abs(pre(x) - pre_by_hand).max() < 1e-12, "pre-LN: normalise the input of each sublayer"
print("✓ post-LN: out = LN(z + FFN(z)), z = LN(x + MHA(x)); pre-LN: x + MHA(LN(x)), then the same")

# %% [markdown]
# The asserts above checked one shape above all: (b, n, d) in, (b, n, d) out. A block changes
# what each of the n vectors says, never how many there are or how long each is -- it
# *transforms* them, hence the name. That kept shape is what makes the residual sums x + a and
# z + f possible at all (they need matching dimensions), and lets blocks stack as deep as we
# like.
#
# The feed-forward network: the same small net at every position
# --------------------------------------------------------------
#
# Attention's outputs are weighted averages of values, so they stay inside the span of those
# values (lesson 03). The feed-forward network post-processes each position with a nonlinear
# map. It is *one* network shared by all positions: running it on the whole sequence equals
# running it on each token separately, and its parameter count, 2·d·d_ff + d_ff + d, has no n in
# it. (Deck 003 calls this the token-level MLP: the "split the input into parts and run one
# small net on each part" recipe for scaling wide, with one part per token.)

# %%
ffn = nn.FeedForward(d, d_ff)
short, long = backend.randn(1, 3, d), backend.randn(1, 300, d)
per_token = np.stack([ffn(long[:, t]) for t in range(300)], axis=1)     # one token at a time
print(f"FeedForward({d}, {d_ff}): {ffn.num_parameters()} parameters for n = 3 and for n = 300; "
      f"outputs {ffn(short).shape} and {ffn(long).shape}")
assert ffn.num_parameters() == 2 * d * d_ff + d_ff + d == 2_128, "FFN: 2·d·d_ff + d_ff + d"
assert np.abs(ffn(long) - per_token).max() < 1e-12, "the FFN acts on each position independently"
print("✓ one FFN for every position; its size does not depend on the sequence length")

# %% [markdown]
# Each token flows along its own path
# -----------------------------------
#
# Which inputs does one output depend on? Put a loss on position t = 3 only and send its gradient
# back. Through the feed-forward network the gradient reaches x₃ and nothing else: no position
# talks to another there. Through self-attention it reaches every position, in one step. That
# is the "path length O(1)": information from token 0 reaches token 5 through a single layer,
# where a recurrent network would pass it through 5 sequential steps.

# %%
t, n = 3, 6
x = backend.randn(1, n, d)
dy = np.zeros((1, n, d))
dy[0, t] = backend.randn(d)                             # dL/dout: nonzero at position t only

ffn(x)
dx_ffn = np.linalg.norm(ffn.backward(dy)[0], axis=-1)           # (n,) size of dL/dx_s
attn = nn.MultiHeadAttention(d, h)
attn(x)
dx_attn = np.linalg.norm(attn.backward(dy)[0], axis=-1)
print("|dL/dx_s| through the FFN:      ", np.round(dx_ffn, 3))
print("|dL/dx_s| through self-attention:", np.round(dx_attn, 3))
assert dx_ffn[t] > 0 and (np.delete(dx_ffn, t) == 0).all(), \
    "the FFN's input gradient should be exactly zero away from the loss position (deck 004)"
assert (dx_attn > 1e-3).all(), "self-attention should pass the gradient to every position at once"
print("✓ FFN: each token its own path; attention: every token reaches every other in one step")

fig, axes = viz.figure(1, 2, size=(9, 3.2))
for ax, sizes, name in zip(axes, (dx_ffn, dx_attn), ("feed-forward", "self-attention")):
    bars = ax.bar(range(n), sizes, color=["tab:red" if s == t else "tab:blue" for s in range(n)])
    ax.bar_label(bars, labels=[f"{s:.2f}" if s else "0" for s in sizes], fontsize=8)
    ax.set_xticks(range(n))
    ax.set_xlabel("input position s")
    ax.set_ylim(0, 1.2 * max(dx_ffn.max(), dx_attn.max()))
    ax.set_title(f"{name}: loss on position {t} only")
axes[0].set_ylabel("|dL / dx_s|")
viz.save(fig, "07_token_paths")

# %% [markdown]
# Stacking: N blocks, N sets of parameters
# ----------------------------------------
#
# A Transformer stacks N blocks built alike, and no two of them share a weight. The code
# the lectures walk through builds them with a ``clones`` helper that deep-copies one layer N
# times, and warns that the clones must not share parameters. ``nn.Stack`` takes freshly built
# blocks, so nothing is shared. The classic mistake, repeating one object N times, gives a deep
# network that has the parameters of one block.

# %%
stack = nn.Stack(nn.EncoderBlock(d, h, d_ff) for _ in range(6))
ids = [id(p) for blk in stack.blocks for p in blk.parameters()]
one = nn.EncoderBlock(d, h, d_ff)
repeated = nn.Stack([one] * 6)                          # the mistake: one block, six times
print(f"one block {one.num_parameters():,}; six built blocks {stack.num_parameters():,}; "
      f"one block repeated six times {repeated.num_parameters():,}")
assert len(set(ids)) == len(ids), "no Parameter object should appear in two blocks (deck 000)"
assert stack.num_parameters() == 6 * one.num_parameters(), "six blocks, six sets of weights"
assert repeated.num_parameters() == one.num_parameters(), "a repeated object is one set of weights"
assert stack(x).shape == x.shape, "a stack of blocks still maps (b, n, d) to (b, n, d)"
print("✓ six blocks, six independent sets of weights; (b, n, d) in, (b, n, d) out")

# %% [markdown]
# What a forward keeps for its backward
# -------------------------------------
#
# Every backward above read numbers its forward had kept, as ``F.softmax_backward`` read the
# cache ``F.softmax`` handed back in lesson 05. In a block each layer keeps its own: a Linear
# its input x (dW = xᵀ dy needs it); the feed-forward's ReLU only where its input was positive,
# a boolean mask of the (b, n, d_ff) hidden layer, one byte an entry; each LayerNorm
# x̂ = (x − μ)/s and the 1/s of every row, s = √(σ² + ε); the attention its cache, q, k, v and
# the (b, h, n, n) weights. That memory is the price of the backward pass, and it is why
# training needs more memory than predicting (a framework with automatic differentiation keeps
# tensors of the same kind and of similar size). A forward that no backward follows
# (evaluation, generation) needs none of it: under ``nn.no_grad()`` minitf's layers keep
# nothing for a backward, and refuse one. Only each attention layer still holds its last
# attention cache, q, k, v and the weights, from which ``probs`` reads the weights.
#
# Below, two copies of a stack of four post-LN blocks, ``nn.EncoderBlock(d, h, d_ff=d_ff)``
# with d = 64 and d_ff = 4d = 256 (one seed, so the same weights), each run a forward on 8
# sequences of 128 vectors, as in training and under ``no_grad()``. Python's ``tracemalloc``,
# which NumPy reports its arrays to, says how much memory each holds afterwards beyond the
# output. The difference is what ``no_grad()`` frees, and we account for all of it: per block
# the inputs of W_qkv, W_o, W_1 (each b·n·d) and W_2 (b·n·d_ff), the ReLU's mask, and two
# LayerNorms' x̂ and 1/s. (The first block's W_qkv keeps x itself, which we hold anyway.) At
# n = 128 the attention weights are the largest part of what is left.

# %%
b, n, d, h, d_ff, layers = 8, 128, 64, 4, 256, 4       # d_ff = 4d, as in the original


def held_after_forward(free: bool):
    """(the stack, its output, the bytes held beyond it) after one forward of a new stack."""
    backend.seed(0)
    blocks = nn.Stack(nn.EncoderBlock(d, h, d_ff=d_ff) for _ in range(layers))
    x = backend.randn(b, n, d)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    with nn.no_grad() if free else contextlib.nullcontext():     # keep nothing, or as usual
        out = blocks(x)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return blocks, out, after - before - out.nbytes


refusal = ""
with backend.use("numpy"), backend.precision("float32"):      # host memory: what tracemalloc sees
    (_, trained_out, kept), (free_blocks, free_out, held) = (
        held_after_forward(free) for free in (False, True))
    try:
        free_blocks.backward(np.ones_like(free_out))
    except RuntimeError as err:
        refusal = str(err)
MiB, f32 = 2**20, 4                                     # bytes: a MiB, a float32
linear_bytes = ((3 * layers - 1) * b * n * d + layers * b * n * d_ff) * f32
relu_bytes = layers * b * n * d_ff                      # one byte (a bool) per hidden entry
norm_bytes = 2 * layers * (b * n * d + b * n) * f32     # x̂ (b, n, d) and 1/s (b, n, 1), twice
attention_bytes = layers * (3 * b * n * d + b * h * n * n) * f32     # q, k, v and the weights
freed = kept - held
print(f"held after a training forward:  {kept / MiB:5.2f} MiB\n"
      f"held after a no_grad() forward: {held / MiB:5.2f} MiB "
      f"(attention caches: {attention_bytes / MiB:.2f})\n"
      f"freed {freed / MiB:.2f} MiB = Linear inputs {linear_bytes / MiB:.2f} + ReLU masks "
      f"{relu_bytes / MiB:.2f} + LayerNorms' x̂ and 1/s {norm_bytes / MiB:.2f}\n"
      f"then a backward: {refusal}")
assert np.array_equal(trained_out, free_out), "the same output, to the last bit"
assert abs(freed - (linear_bytes + relu_bytes + norm_bytes)) < 2**16, \
    "no_grad() frees the Linear inputs, the ReLU masks and the x̂, 1/s (and a few Python objects)"
assert 0 <= held - attention_bytes < 2**16, \
    "no_grad() holds each attention layer's last cache (and a few Python objects), no more"
assert refusal.startswith("Stack.backward(): the last forward ran under"), "refused"
print("✓ a forward that no backward follows keeps nothing for it, but the attention caches")

# %% [markdown]
# Going deep: residuals keep the gradient alive
# ---------------------------------------------
#
# Deck 003 says it plainly: in a deep plain network, gradients and activations vanish. Stack
# FeedForward(32, 128) layers and send a gradient back from the top. Each ReLU layer shrinks
# the signal by a roughly constant factor, so after 24 layers almost nothing is left. Wrap the
# same layers as pre-LN residuals, x + FFN(LN(x)), and the identity path carries the gradient
# down untouched: every layer only *adds* to it. Post-LN residuals re-normalise after every sum,
# which keeps the activations at size 1 and the gradients of order 1 too.

# %%
depths = np.arange(1, 25)
d, d_ff = 32, 128
stacks = {"plain FFN stack": lambda: nn.FeedForward(d, d_ff),
          "pre-LN residual: x + FFN(LN(x))":
              lambda: nn.Residual(nn.FeedForward(d, d_ff), d, pre_ln=True),
          "post-LN residual: LN(x + FFN(x))": lambda: nn.Residual(nn.FeedForward(d, d_ff), d)}
grad_size, act_size = {}, {}
for name, make in stacks.items():
    grad_size[name], act_size[name] = [], []
    for depth in depths:
        backend.seed(0)                      # the same inputs, and the same first layers, at every depth
        x, g = backend.randn(4, 8, d), backend.randn(4, 8, d)
        net = nn.Stack(make() for _ in range(depth))
        act_size[name].append(net(x).std())
        grad_size[name].append(np.abs(net.backward(g)).mean())
plain, residual = grad_size["plain FFN stack"], grad_size["pre-LN residual: x + FFN(LN(x))"]
post, post_act = grad_size["post-LN residual: LN(x + FFN(x))"], act_size["post-LN residual: LN(x + FFN(x))"]
for depth in (1, 8, 16, 24):
    print(f"depth {depth:>2}: mean |dL/dx| plain {plain[depth - 1]:.1e}, "
          f"pre-LN residual {residual[depth - 1]:.2f}, post-LN residual {post[depth - 1]:.2f} "
          f"(its output's std {post_act[depth - 1]:.2f})")
assert plain[-1] < 1e-3 and residual[-1] > 1.0, "24 plain layers vanish, residual ones do not"
assert plain[-1] < 1e-3 * residual[-1], "at depth 24 the plain stack's gradient is > 1000× smaller"
assert all(0.1 < g < 10 and abs(a - 1) < 0.05 for g, a in zip(post, post_act)), \
    "post-LN re-normalises after every sum: activations of size 1, gradients of order 1"
print("✓ without residuals the gradient vanishes with depth; the identity path keeps it")

fig, axes = viz.figure(1, 2, size=(10, 3.8))
viz.curves(axes[0], depths, grad_size, xlabel="depth (number of FFN layers)",
           ylabel="mean |dL/dx| at the input", logy=True, title="Gradient reaching the input")
viz.curves(axes[1], depths, act_size, xlabel="depth (number of FFN layers)",
           ylabel="std of the output", logy=True, title="Size of the activations")
viz.save(fig, "07_depth_gradients")

# %% [markdown]
# Post-LN or pre-LN?
# ------------------
#
# The original Transformer puts LayerNorm after the residual sum; most models since put it
# before the sublayer, where it leaves the residual stream itself untouched. One deck reports
# that pre-LN trains more stably and tolerates larger learning rates.
#
# The annotated implementation the lectures walk through is, in fact, pre-LN. Its residual
# wrapper normalises the sublayer's *input* and adds the result back,
# x + dropout(sublayer(LN(x))), and a comment in it owns up that the norm was moved first to keep
# the code simple. As nothing normalises the sum any more, the residual stream grows freely, so
# its encoder and decoder stacks each end with one last LayerNorm. In minitf that wrapper is
# ``nn.Residual(layer, d, pre_ln=True)``, and ``Transformer(pre_ln=True)`` adds the two final
# norms.
#
# We test the stability claim: the same six-layer encoder-decoder, the same initial weights, the
# same batches, 120 steps of Adam at lr 3e-3 on 32 examples each, with no learning-rate warm-up,
# learning to reverse sequences of 3-6 symbols. Float32 is plenty here.
#
# Before training, look at the gradient each decoder block receives: post-LN's grows toward the
# output, pre-LN's stays level. Xiong et al. (2020), whose layer diagram one deck shows, found the
# same uneven scale in post-LN and made it their explanation for why post-LN needs a small
# learning rate at the start (a warm-up) while pre-LN does not.

# %%
def train(pre_ln, steps=120, batch=32):
    """Train one Transformer on the reverse task; return losses, initial block gradients, model."""
    backend.seed(0)
    src, tgt_in, tgt_out = data.seq2seq_task("reverse", 2000, n_symbols=8, min_len=3, max_len=6)
    model = Transformer(11, 11, d_model=32, n_heads=2, n_layers=6, d_ff=64, dropout=0.0,
                        pre_ln=pre_ln)
    start, optimizer, losses = model.state_dict(), Adam(model, lr=3e-3), []
    for step in range(steps):
        rows = backend.to_numpy(backend.randint(0, len(src), (batch,)))
        model.zero_grad()
        loss, backward = model.loss(src[rows], tgt_in[rows], tgt_out[rows])
        backward()
        if step == 0:
            first = [np.sqrt(sum(float((p.grad ** 2).sum()) for p in blk.parameters()))
                     for blk in model.decoder.blocks]
        optimizer.step()
        losses.append(loss)
    return np.array(losses), np.array(first), start, model


with backend.precision("float32"):
    post_losses, post_grads, post_state, post_model = train(pre_ln=False)
    pre_losses, pre_grads, pre_state, pre_model = train(pre_ln=True)
post_final, pre_final = post_losses[-20:].mean(), pre_losses[-20:].mean()
same_start = all(np.array_equal(w, pre_state[name]) for name, w in post_state.items())
extra = pre_model.num_parameters() - post_model.num_parameters()
print(f"parameters: post-LN {post_model.num_parameters():,}, pre-LN {pre_model.num_parameters():,} "
      f"(+{extra} = two final LayerNorms, each a γ and a β of size {post_model.d_model})")
print("gradient norm per decoder block at step 0 (bottom → top):")
print("  post-LN", np.round(post_grads, 2), "\n  pre-LN ", np.round(pre_grads, 2))
print(f"mean of the last 20 losses: post-LN {post_final:.3f}, pre-LN {pre_final:.3f}")
assert same_start, "both models should start from the same weights (pre-LN only adds two norms)"
assert extra == 2 * 2 * post_model.d_model and pre_model.encoder_norm is not None, \
    "a pre-LN encoder and decoder each end with one final LayerNorm (the annotated code, deck 000)"
assert post_grads[-1] > 2 * post_grads[0], "post-LN: the top decoder block gets the most gradient"
assert pre_grads.max() < 2 * pre_grads.min(), "pre-LN: every decoder block gets a similar gradient"
assert pre_final < 0.5 * post_final, \
    f"pre-LN should train faster without warm-up (deck 002): {pre_final:.3f} vs {post_final:.3f}"
print("✓ same start, same data: without warm-up pre-LN is far ahead after 120 steps")

fig, axes = viz.figure(1, 2, size=(10, 3.8))
steps = np.arange(1, len(post_losses) + 1)
viz.curves(axes[0], steps, {"post-LN (original)": post_losses, "pre-LN": pre_losses},
           xlabel="step", ylabel="training loss (cross-entropy)", marker="",
           title="6-layer Transformer, Adam 3e-3, no warm-up")
blocks = np.arange(1, len(post_grads) + 1)
axes[1].bar(blocks - 0.2, post_grads, width=0.4, label="post-LN")
axes[1].bar(blocks + 0.2, pre_grads, width=0.4, label="pre-LN")
axes[1].set(xlabel="decoder block (1 = bottom, 6 = top)", ylabel="gradient norm at step 0",
            title="Gradient per decoder block at step 0")
axes[1].legend(fontsize=8)
viz.save(fig, "07_pre_vs_post_ln")

# %% [markdown]
# Post-LN is not broken (the original Transformer used it), but it wants a gentler start than
# the one we gave it here. Pre-LN asks for less care, which is why most models since use it.
#
# What to remember
# ----------------
#
# * A block is attention, then a position-wise feed-forward network, each inside a residual
#   connection with a LayerNorm: post-LN normalises after the sum, pre-LN before the sublayer.
# * The FFN is one small net shared by all positions: no token talks to another there, and its
#   parameters do not depend on n. Attention is where tokens meet, all of them in one step.
# * Blocks map (b, n, d) to (b, n, d), so they stack; each block has its own parameters.
# * Residuals give the gradient an identity path: a 24-layer residual stack still passes a
#   gradient of order 1 to its input, where a plain stack's has all but vanished (measured at
#   initialisation above); pre-LN keeps that path clean and trains without warm-up.
#
# Next, lesson 08: attention ignores order, so where do positions come in?
