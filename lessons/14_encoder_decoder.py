"""
The full Transformer: three attentions, O(N²) + O(M²) + O(NM), teacher forcing
==============================================================================

The original Transformer has two halves: an encoder that reads the whole input and a decoder
that writes the output one token at a time, reading the encoder as it goes (either half alone
is one of the two other kinds of Transformer). We train a small one to reverse sequences,
check that teacher forcing computes every step of the decoding in one pass, count the
attention scores of its three kinds of attention (the lectures' cost quiz), check which encoder
layer the decoder reads (the wiring quiz), and look at what the decoder learned to read.

Run it: ``minitf lesson 14`` (about 4 seconds: one short training), or as a plain script,
``python lessons/14_encoder_decoder.py``.
"""

# %%
import numpy as np

import minitf.functional as F
from minitf import backend, cost_families, data, viz
from minitf.generate import beam_search, greedy_decode
from minitf.models import DecoderLM, EncoderLM, Transformer
from minitf.nn import MultiHeadAttention
from minitf.optim import AdamW, WarmupCosine
from minitf.train import Trainer

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)

# %% [markdown]
# Two stacks and three attentions
# -------------------------------
#
# This is the model of Vaswani et al. (2017), whose diagram the lectures show again and again:
# a stack of encoder blocks on the left, a stack of decoder blocks on the right. The encoder
# reads the source, N tokens, and the decoder writes the target, M tokens. Their lengths need
# not match: a translation is rarely as long as its sentence, and a summary is far shorter than
# its article. Attention appears in three forms:
#
# * **encoder self-attention**: every source token looks at every source token, in both
#   directions (only padding is masked);
# * **masked decoder self-attention**: each target token looks at the target tokens before it,
#   never after (the causal mask of lesson 04);
# * **cross-attention** (encoder–decoder attention): each target token sends a query, and the
#   keys and values come from the encoder's output. Queries from one set, keys and values from
#   another: that is all that separates it from self-attention.
#
# Each decoder block holds the last two, each encoder block the first, plus the feed-forward
# network and the residual connections of lesson 07.
#
# Keep one half and you have the other two kinds of Transformer. A **decoder-only** model
# (GPT, minitf's ``DecoderLM``) has only the masked self-attention: it predicts each next token
# from the ones before, autoregressively, and generates by feeding its guesses back. An
# **encoder-only** model (BERT and ViT, lesson 15) has only the two-way self-attention: it
# predicts no next token but builds a representation of the whole input, for classifying or
# comparing it (it "understands"). The **encoder–decoder** keeps both, for turning one sequence
# into another. The token can be anything embedded as a vector: a word or sub-word from a
# tokenizer (lesson 20), an image patch (lesson 15), a discrete symbol (this lesson's), or a
# continuous value (``SetEncoder`` embeds points of real numbers). Each attention layer of small
# models of the three kinds, by its mask:

# %%
def attentions(net):
    return ["cross" if a.cross else "causal" if a.causal else "both ways"
            for a in net.modules() if isinstance(a, MultiHeadAttention)]


with backend.seed(1):                                       # leaves the seed-0 draws below alone
    kinds_of = {"decoder-only": DecoderLM(11, d_model=8, n_heads=2, n_layers=2),
                "encoder-only": EncoderLM(11, d_model=8, n_heads=2, n_layers=2),
                "encoder–decoder": Transformer(11, 11, d_model=8, n_heads=2, n_layers=2)}
for kind, net in kinds_of.items():
    print(f"{kind:>15} ({type(net).__name__}): {attentions(net)}")
assert set(attentions(kinds_of["decoder-only"])) == {"causal"} and \
    set(attentions(kinds_of["encoder-only"])) == {"both ways"}, "one masked, one two-way (deck 003)"
assert attentions(kinds_of["encoder–decoder"]) == ["both ways"] * 2 + ["causal", "cross"] * 2, \
    "the encoder's two-way layers, then in each decoder block its masked one and the cross one"

# %% [markdown]
# The task: reverse a sequence of 3 to 6 symbols. The decoder's input is the target shifted
# right behind a start token, BOS; its label at each position is the next target token, and
# the last label is EOS, "stop here". We train ``Transformer`` (2 + 2 post-LN blocks, d_model 32,
# 2 heads) for 300 steps of 64 examples with AdamW and a warm-up.

# %%
src, tgt_in, tgt_out = data.seq2seq_task("reverse", 3000, n_symbols=8, min_len=3, max_len=6)
names = ["PAD", "BOS", "EOS"] + list("abcdefgh")            # ids 0, 1, 2, then symbols 3–10


def show(ids):
    return " ".join(names[i] for i in ids if i != data.PAD)


print(f"source  {show(src[0]):<22} decoder input  {show(tgt_in[0]):<22} labels  "
      f"{show(tgt_out[0])}")
shifted = tgt_in[:, 1:] != data.PAD                         # where the shifted input is a token
assert (tgt_in[:, 0] == data.BOS).all() and data.BOS == 1, "the decoder starts from BOS = 1"
assert (tgt_in[:, 1:][shifted] == tgt_out[:, :-1][shifted]).all(), \
    "the decoder input is the label sequence shifted right by one (deck 003, teacher forcing)"

model = Transformer(11, 11, d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0)
train = (src[:2800], tgt_in[:2800], tgt_out[:2800])         # the last 200 are not trained on


def batch():
    picked = backend.to_numpy(backend.randint(0, 2800, (64,)))
    return tuple(a[picked] for a in train)


trainer = Trainer(model, AdamW(model, 5e-3), batch, schedule=WarmupCosine(5e-3, 20, 300, 5e-4))
trainer.fit(300, progress=False)
model.eval()
print(f"{model.num_parameters():,} parameters; training loss {trainer.history['loss'][0]:.2f} "
      f"→ {np.mean(trainer.history['loss'][-20:]):.4f} (mean of the last 20 steps)")

# %% [markdown]
# One deck starts the decoder with ``<EOS>``, reading it as "start of translation". That works
# (the model only needs *some* fixed first token), but it gives one id two jobs. minitf keeps a
# separate start token, BOS = 1, and EOS = 2 only ends the output.
#
# Teacher forcing: every step in one pass
# ---------------------------------------
#
# At test time the decoder must run step by step: predict y₁ from BOS, feed y₁ back, predict
# y₂, and so on until EOS. Training that way would be slow, M sequential passes per example.
# Teacher forcing conditions every position on the *true* previous tokens instead, so the whole
# decoder input is known in advance and all M predictions come out of one forward pass. The
# causal mask makes that legal: position t cannot see the tokens after it, so its output is
# exactly what a step-by-step run would compute at step t. We check: feed the same tokens one
# at a time, with the KV cache, and compare the logits.

# %%
held_src, held_in, held_out = src[2800:], tgt_in[2800:], tgt_out[2800:]
full = (held_src != data.PAD).all(axis=1)                   # the held-out sources of length 6
s6, in6 = held_src[full], held_in[full]
memory, memory_mask = model.encode(s6)                      # (b, N=6, 32): run once
together = model.decode(in6, memory, memory_mask)          # (b, M=7, 11): teacher forcing
cache = model.new_cache()
steps = [model.decode(in6[:, t:t + 1], memory, memory_mask, cache) for t in range(in6.shape[1])]
one_by_one = np.concatenate(steps, axis=1)                  # the same, one token per call
error = np.abs(together - one_by_one).max()
print(f"{len(s6)} sources of length 6: max |teacher-forced − step-by-step logits| = {error:.1e}")
print(f"caches after {in6.shape[1]} steps: self-attention keys "
      f"{[c[0].length for c in cache]}, cross-attention keys {[c[1].length for c in cache]}")
assert error < 1e-12, "one masked pass should give every step's logits (deck 003: in parallel)"
assert all(c[0].length == 7 and c[1].length == 6 for c in cache), \
    "the self-attention cache grows by one per step; the encoder's keys are computed once"
print("✓ teacher forcing = every decoding step at once; the encoder's output is reused")

# %% [markdown]
# The cache also shows why generating is cheap on the encoder side. The encoder ran once, and
# the cross-attention projected its output to keys and values on the first step and reuses them
# on every later one: each new token costs one query against N stored keys and t earlier target
# keys, linear work rather than a full quadratic recomputation.
#
# Now decode for real, from BOS until EOS. **Greedy** decoding takes the most likely token at
# every step and never goes back, so a token that looks best now can lead into a worse whole
# sequence. **Beam search** with a beam of k keeps the k most likely prefixes (with their summed
# log-probabilities): each step extends every prefix by each of the V tokens and prunes the
# k·V candidates back to the k best, setting aside those that end in EOS, which compete at the end
# (with a length penalty, so short outputs do not win by default). We decode the 200 held-out
# sources greedily, and 20 of them with a beam of 3.
#
# These 200 examples were never trained on, but short sequences repeat: there are only
# 8³ = 512 sequences of three symbols and 8⁴ = 4096 of four, so 42 of the 200 sources also occur
# among the 2800 training ones (36 of length 3, 6 of length 4). The greedy match is printed for
# the other 158 as well. The harder test of generalization is the next one: a length never
# trained on.

# %%
wanted = [list(s[s != data.PAD][::-1]) for s in held_src]
greedy = greedy_decode(model, held_src, max_len=8)
beams = beam_search(model, held_src[:20], beam_size=3, max_len=8)
greedy_right = np.array([g == w for g, w in zip(greedy, wanted)])    # (200,) per example
greedy_match = greedy_right.mean()
beam_match = np.mean([b == w for b, w in zip(beams, wanted)])
trained_on = {tuple(s) for s in train[0]}
unseen = np.array([tuple(s) not in trained_on for s in held_src])    # not among the 2800
print(f"{show(held_src[0])} → {show(greedy[0])} (greedy), {show(beams[0])} (beam)")
print(f"exact match: greedy {greedy_match:.1%} of {len(wanted)} "
      f"({greedy_right[unseen].mean():.1%} of the {unseen.sum()} not in training), "
      f"beam {beam_match:.1%} of 20")
seen_lengths = np.bincount((held_src[~unseen] != data.PAD).sum(axis=1), minlength=7)[3:]
assert (~unseen).sum() == 42 and seen_lengths.tolist() == [36, 6, 0, 0], \
    "42 of the 200 held-out sources also occur in training: 36 of length 3, 6 of length 4"
assert greedy_match > 0.9 and beam_match > 0.9, "the trained model should reverse held-out inputs"
assert greedy_right[unseen].mean() > 0.9, "…including the sources that training never showed"

# %% [markdown]
# The lectures grant that teacher forcing differs from generation, where the model feeds on
# its own guesses, and call it fine in practice. Both sides show on inputs of 7 symbols, longer
# than any in training. With teacher forcing each prediction is rescued by the true prefix;
# generating, the first wrong token is fed back and the errors compound. The whole output is
# right in the same cases either way, and that is no finding but a necessity of argmax
# decoding: if every teacher-forced guess is right, greedy's prefix is the true one at every
# step, so it picks the same tokens; if greedy is right, its prefixes were the true ones, and
# its picks the teacher-forced guesses. The check only confirms that the two ways of running
# the decoder agree.

# %%
with backend.seed(1):
    s7, in7, out7 = data.seq2seq_task("reverse", 200, n_symbols=8, min_len=7, max_len=7)
forced = model(s7, in7).argmax(axis=-1) == out7             # (200, 8): each guess, true prefix
free = greedy_decode(model, s7, max_len=9)
free_tokens = np.mean([[i < len(g) and g[i] == w for i, w in enumerate(o[:-1])]
                       for g, o in zip(free, out7)])
free_right = np.array([g == list(o[:-1]) for g, o in zip(free, out7)])   # (200,) per example
print(f"length 7 (unseen): tokens right, teacher-forced {forced[:, :-1].mean():.1%}, generated "
      f"{free_tokens:.1%}; whole outputs right {forced.all(axis=1).mean():.1%} and "
      f"{free_right.mean():.1%}")
assert forced[:, :-1].mean() > free_tokens + 0.1, "feeding back its own errors should cost tokens"
assert np.array_equal(forced.all(axis=1), free_right), \
    "argmax decoding: all teacher-forced guesses right ⇔ greedy right (else the decoders differ)"
assert free_right.mean() < 0.2 and free_tokens < 0.5, "it should fail on a length it never saw"
print("✓ generation meets its own mistakes, teacher forcing never does")

# %% [markdown]
# And the model fails the test: at length 7 only about one output in fifteen comes out whole,
# and fewer than half the generated tokens are right. It learned to reverse the lengths it was
# shown, 3 to 6, not reversal as a rule that carries over to a longer input.
#
# Three attentions, three sizes: the cost quiz
# --------------------------------------------
#
# The lectures' quiz: a model writes a Wikipedia article from its sources, found by searching
# the web for each section title (about ten pages a search), so the passage is long. For a
# passage of N tokens and a summary of M, how much work is attention? The choices::
#
#     (a) O(N) + O(M)               (b) O(N) + O(M) + O(NM)
#     (c) O(N²) + O(M²) + O(NM)     (d) O(N²) + O(M²)
#
# Count instead of guessing: run the trained model on a source of N = 20 symbols and a decoder
# input of M = 7 tokens, and read the shape of every attention matrix, ``probs``, which is
# (batch, heads, queries, keys). Then ask ``cost_families.seq2seq_cost``, which counts the
# same three terms from the configuration alone, summed over heads and layers.

# %%
N, M = 20, 7
x20 = backend.randint(3, 11, (1, N))
y7 = np.concatenate([[[data.BOS]], backend.randint(3, 11, (1, M - 1))], axis=1)
model(x20, y7)
kinds = {"encoder self-attention": [blk.self_attn.layer.probs for blk in model.encoder.blocks],
         "decoder self-attention": [blk.self_attn.layer.probs for blk in model.decoder.blocks],
         "cross-attention": [blk.cross_attn.layer.probs for blk in model.decoder.blocks]}
entries = {}
for kind, probs in kinds.items():
    entries[kind] = {p.shape[-2] * p.shape[-1] for p in probs}
    print(f"{kind:>23}: probs {[p.shape for p in probs]} → {entries[kind]} scores per head "
          f"per layer")
assert entries == {"encoder self-attention": {N * N}, "decoder self-attention": {M * M},
                   "cross-attention": {N * M}}, \
    "per head and layer: N² = 400, M² = 49 and N·M = 140 scores (deck 000's three terms)"
predicted = cost_families.seq2seq_cost_of(model.config, N, M)["attention_scores"]
print("seq2seq_cost, without running the model: "
      + ", ".join(f"{kind} {count}" for kind, count in predicted.items()), "(b·h·L·…)")
assert predicted == {kind: sum(p.size for p in probs) for kind, probs in kinds.items()}, \
    "the cost model's three terms, b·h·L·N², b·h·L·M² and b·h·L·M·N, are the models' scores"
causal = kinds["decoder self-attention"][-1][0, 0]
assert (causal[np.triu_indices(M, 1)] == 0).all(), "the decoder never attends to later tokens"
print("✓ the answer is (c): O(N²) encoder self + O(M²) decoder self + O(NM) cross")

# %% [markdown]
# (a) fails because every source token attends to every other: each of the N scores all N, so
# the encoder alone does N² work. (d) forgets the cross-attention, where each of the M target
# tokens scores all N source tokens. (b) keeps the cross term but still misses the two squares.
# The causal mask halves the work the decoder *needs* (M(M+1)/2 scores), but the masked scores
# are computed all the same here (a decoder given a padding mask scores every key; lesson 13's
# causal blocks skip most of them), and either way the order stays M².
#
# When the passage is long and the summary short, N² is most of the bill. The figure counts
# the three terms with M = N/4: the summary's own M² is the smallest, and the cross term NM
# grows as N² too, since M grows with N. (a)'s N + M hardly leaves the axis.

# %%
sizes = np.array([64, 128, 192, 256, 320, 384, 448, 512])
counts = {"N² (encoder self)": [], "NM (cross)": [], "M² (decoder self)": []}
for n in sizes:
    model(backend.randint(3, 11, (1, n)), backend.randint(3, 11, (1, n // 4)))
    for name, p in zip(counts, (model.encoder.blocks[0].self_attn.layer.probs,
                                model.decoder.blocks[0].cross_attn.layer.probs,
                                model.decoder.blocks[0].self_attn.layer.probs)):
        counts[name].append(p[0, 0].size)                     # one head of one layer
counts = {name: np.array(c) for name, c in counts.items()}
assert (counts["N² (encoder self)"] == sizes ** 2).all() and \
    (counts["NM (cross)"] == sizes * (sizes // 4)).all(), "N² and N·M scores at every N"
share = {name: c[-1] / sum(c[-1] for c in counts.values()) for name, c in counts.items()}
print(f"N = {sizes[-1]}, M = {sizes[-1] // 4}: "
      + ", ".join(f"{name} {part:.0%}" for name, part in share.items()))

fig, ax = viz.figure(size=(7, 4.2))
bottom = np.zeros(len(sizes))
for name, c in counts.items():
    ax.bar(sizes, c, width=40, bottom=bottom, label=name)
    bottom += c
ax.plot(sizes, sizes + sizes // 4, "k--", lw=1.2, label="N + M, the O(N) + O(M) answer")
ax.set_xticks(sizes, labels=[f"{n}\n{n // 4}" for n in sizes])
ax.set(xlabel="source length N (top) and target length M = N/4 (bottom)",
       ylabel="attention scores per head per layer",
       title="Encoder–decoder attention: N² + M² + NM scores")
handles, labels = ax.get_legend_handles_labels()
ax.legend(handles[::-1], labels[::-1], fontsize=8)          # in the order of the stack
ax.grid(alpha=0.3, axis="y")
viz.save(fig, "14_enc_dec_cost")

# %% [markdown]
# Which encoder layer does the decoder read?
# ------------------------------------------
#
# The other quiz shows two wirings of a stack of encoder and decoder layers. In the wrong one,
# decoder layer i reads encoder layer i. In the right one, *every* decoder layer reads the
# output of the *top* encoder layer: the decoder attends to the encoder's finished product.
# Each cross-attention takes its queries from the decoder's own stream, just under it. Check it on
# minitf's model: every decoder block's cached cross-attention keys should be its own W_kv
# applied to the top encoder output, not to the output of the first encoder block.

# %%
x = model.src_pos(model.src_emb(s6) * np.sqrt(model.d_model))   # embeddings + positions
first = model.encoder.blocks[0](x, mask=memory_mask)             # after encoder block 1
top = model.encoder.blocks[1](first, mask=memory_mask)           # after encoder block 2
for i, (blk, (_, cross)) in enumerate(zip(model.decoder.blocks, cache)):
    attn = blk.cross_attn.layer
    from_top = F.split_heads(attn.W_kv(top), attn.n_heads, parts=(attn.d_head, attn.d_v))[0]
    from_first = F.split_heads(attn.W_kv(first), attn.n_heads, parts=(attn.d_head, attn.d_v))[0]
    print(f"decoder block {i + 1}: keys {cross.k.shape}; |keys − W_kv(top)| = "
          f"{np.abs(cross.k - from_top).max():.0e}, |keys − W_kv(block 1)| = "
          f"{np.abs(cross.k - from_first).max():.2f}")
    assert cross.k.shape[2] == 6 and np.abs(cross.k - from_top).max() < 1e-12, \
        "every decoder block attends to the TOP encoder output, all N positions (decks 000, 004)"
    assert np.abs(cross.k - from_first).max() > 0.1, "…and not to a lower encoder layer"
assert np.abs(top - memory).max() < 1e-12, "the memory is the top encoder block's output"
print("✓ every decoder block reads the top of the encoder: the quiz's 'correct' wiring")

# %% [markdown]
# What the decoder reads
# ----------------------
#
# To reverse, the decoder must emit the last source symbol first. Its cross-attention shows
# how: the query that predicts output t should look at source position N − 1 − t, an
# anti-diagonal. Below, one held-out source: keys are the source symbols; each query row is
# labelled with the decoder's input and the token it predicts there. In the top decoder block
# both heads draw the anti-diagonal. The bottom block's queries know only the target tokens so
# far, not where the source ends; its keys, from the top of the encoder, can carry that, so it
# finds N − 1 − t about half the time (counted below) and attends more loosely. The top block's
# queries have already read the source once, and find it almost always.

# %%
pick = next(i for i, s in enumerate(s6) if len(set(s)) == 6)     # six different symbols
model.decode(in6[pick:pick + 1], memory[pick:pick + 1], memory_mask[pick:pick + 1])
cross = np.stack([blk.cross_attn.layer.probs[0] for blk in model.decoder.blocks])  # (2, h, M, N)
queries = [f"{names[a]}→{names[b]}" for a, b in zip(in6[pick], held_out[full][pick])]
fig = viz.attention_grid(cross, queries=queries, keys=[names[i] for i in s6[pick]],
                         row_names=["block 1", "block 2 (top)"], panel_size=3.0,
                         title="Decoder cross-attention, reversing " + show(s6[pick]))
for ax in fig.axes[:4]:                                     # the four panels (then the colorbar)
    ax.set_xlabel("source token (key)" if ax.get_xlabel() else "")
    ax.set_ylabel("decoder input→output (query)" if ax.get_ylabel() else "")
viz.save(fig, "14_cross_attention")

model(held_src, held_in)                                    # all 200 held-out examples
hits = {}
for i, blk in enumerate(model.decoder.blocks):
    p = blk.cross_attn.layer.probs                          # (200, h, M, N)
    hits[i] = np.mean([p[b, h, t, :n].argmax() == n - 1 - t
                       for b, n in enumerate((held_src != data.PAD).sum(axis=1))
                       for h in range(p.shape[1]) for t in range(n)])
print(f"argmax of the cross-attention on source N − 1 − t: bottom block {hits[0]:.1%}, "
      f"top block {hits[1]:.1%} of (example, head, position)")
assert hits[1] >= 0.8, f"the top block's cross-attention should be anti-diagonal: {hits[1]:.3f}"
assert hits[1] > hits[0], "the top block should be more anti-diagonal than the bottom one"
print("✓ the decoder learned to read the source backwards, sharpest in the top block")

# %% [markdown]
# What to remember
# ----------------
#
# * The encoder–decoder Transformer has three attentions: encoder self-attention (both ways),
#   masked decoder self-attention, and cross-attention (queries from the decoder, keys and
#   values from the encoder).
# * Every decoder block reads the *top* encoder output; its queries come from the decoder layer
#   below.
# * Teacher forcing feeds the true previous tokens, starting from a start token (BOS in
#   minitf), so one masked pass trains every position at once. Generation feeds back its own
#   guesses, one token at a time, reusing the encoder's keys and values.
# * Attention costs O(N²) + O(M²) + O(NM): the two self-attentions and the cross term.
# * The three kinds of Transformer: decoder-only (masked, predicts the next token),
#   encoder-only (every token sees every other, and the output describes the input rather
#   than continuing it), and encoder–decoder (this lesson). Their tokens can be words,
#   sub-words, image patches, discrete or continuous.
#
# Next, lesson 15: encoder-only models, with a classification token, for text and for images.
