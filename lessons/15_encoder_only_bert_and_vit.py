"""
Encoder-only models: BERT and the Vision Transformer
====================================================

Drop the causal mask from a Transformer stack and every token sees every other token. That
stack cannot write text one token at a time, but it reads: it turns a whole input into vectors
that know their context. You will classify sentences from one extra token, [CLS]; see why a
bag of words cannot do the same; pretrain a small BERT by hiding words behind [MASK]; feed it
sentence pairs with segment ids; find that a Vision Transformer's patch embedding is a
convolution; and, leaving out the positions, read a set of points whose order means nothing.

Run it: ``minitf lesson 15`` (about 4 seconds), or as a plain script,
``python lessons/15_encoder_only_bert_and_vit.py``.
"""

# %%
import matplotlib.cm
import matplotlib.colors
import matplotlib.patches
import numpy as np

import minitf.functional as F
from minitf import backend, data, viz
from minitf.models import EncoderClassifier, EncoderLM, SetEncoder, VisionTransformer
from minitf.optim import AdamW, WarmupCosine
from minitf.train import Trainer

backend.precision("float64")      # exact arithmetic, so every printed digit can be checked
backend.seed(0)


def train(model, batches, steps, lr):
    """AdamW with a short warm-up and a cosine decay; then evaluation mode."""
    schedule = WarmupCosine(lr, 20, steps, lr / 10)
    Trainer(model, AdamW(model, lr), batches, schedule=schedule).fit(steps, progress=False)
    return model.eval()


def sampler(*arrays, batch_size=64):
    """Random mini-batches of the host arrays (inputs…, targets), moved to the device."""
    def batches():
        rows = backend.to_numpy(backend.randint(0, len(arrays[-1]), (batch_size,)))
        return tuple(backend.to_device(a[rows]) for a in arrays)
    return batches


# %% [markdown]
# One token that reads the whole sentence
# ---------------------------------------
#
# The lectures' sentiment examples are "My kid likes this movie" (positive), "My little kid
# likes this animated movie" (positive) and "My kid does not like this movie" (negative). A
# classifier needs one vector per sentence, not one per word. BERT's answer: put a learned
# token, [CLS], in front of the words, run the encoder, and read the label from the [CLS]
# position only::
#
#     h      = Enc([cls; E[ids]] + P)        (b, 1 + n, d_model)   no causal mask
#     logits = LayerNorm(h)[:, 0] W_head + b_head   (b, 2)          the [CLS] row only
#
# [CLS] has no meaning of its own; training makes its query ask for whatever decides the
# label. minitf's ``data.sentiment`` writes sentences from the same templates, with a twist:
# negation ("does not", "nobody") flips the label, so "like" alone says nothing.
#
# We train on the first 2500 of 3000 sentences and test on the last 500. The templates allow
# only so many sentences, and 338 of the 500 test sentences occur, word for word, among the
# training ones; the accuracy on all 500 is therefore partly recall. The one that measures
# reading is the accuracy on the other 162, sentences the classifier has never seen.

# %%
sentences, labels = data.sentiment(3000)
vocab = data.WordVocabulary(sentences)
ids, _ = vocab.encode(sentences)                        # (3000, n) word ids, 0 = padding
classifier = EncoderClassifier(vocab.vocab_size, 2, d_model=32, n_heads=2, n_layers=2,
                               d_ff=64, max_len=ids.shape[1])
train(classifier, sampler(ids[:2500], labels[:2500]), 200, 3e-3)
predicted = backend.to_numpy(classifier(backend.to_device(ids[2500:])).argmax(axis=-1))
right = predicted == labels[2500:]                      # (500,) one per test sentence
trained_on = set(sentences[:2500])
unseen = np.array([s not in trained_on for s in sentences[2500:]])
accuracy, unseen_accuracy = right.mean(), right[unseen].mean()
print(f"{vocab.vocab_size} words; test accuracy after 200 steps: {accuracy:.3f} on all 500, "
      f"{unseen_accuracy:.3f} on the {unseen.sum()} not in the training sentences")
assert unseen.sum() == 162, "338 of the 500 test sentences also occur among the training ones"
assert accuracy > 0.95, f"the CLS classifier should read negation (> 95 %); got {accuracy:.3f}"
assert unseen_accuracy > 0.95, \
    f"…on sentences it has never seen too (> 95 %); got {unseen_accuracy:.3f}"

# %% [markdown]
# Why not just count the words?
# -----------------------------
#
# A bag of words keeps the counts and throws away the order. A logistic regression on those
# counts is a linear function of them, and the label here is an XOR, (verb is positive) XOR
# (sentence is negated), which no linear function separates: at best three of the four
# (verb, negation) cases, 75 %. The encoder is not limited so, because attention lets "not"
# change what the [CLS] vector makes of "like".

# %%
counts = np.zeros((len(sentences), vocab.vocab_size + 1))
for row, sentence in zip(counts, sentences):
    for word in sentence.split():
        row[vocab.index[word]] += 1
counts[:, -1] = 1.0                                     # a bias feature
w = np.zeros(counts.shape[1])
for _ in range(2000):                                   # logistic regression, gradient descent
    p = 1 / (1 + np.exp(-counts @ w))
    w -= 0.5 * counts.T @ (p - labels) / len(labels)
bag_accuracy = ((counts @ w > 0) == labels).mean()
print(f"bag of words, fitted on all 3000 sentences: {bag_accuracy:.3f}")
assert bag_accuracy < 0.75, "XOR is not linearly separable: a bag of words stays under 75 %"

deck = ["my kid likes this movie", "my little kid likes this animated movie",
        "my kid does not like this movie"]
deck_ids, deck_lengths = vocab.encode(deck)
deck_labels = backend.to_numpy(classifier(backend.to_device(deck_ids)).argmax(axis=-1))
print("the lectures' three sentences ->", deck_labels.tolist())
assert deck_labels.tolist() == [1, 1, 0], \
    "the lectures' sentences are positive, positive, negative"
print("✓ [CLS] classifies beyond a bag of words, the lectures' three sentences included")

# %% [markdown]
# What does [CLS] look at? Each block keeps its attention weights; row 0 is the [CLS] query.
# Averaged over the two heads of the last block, it gives one weight per word (padding gets
# exactly zero: it is masked as a key). Attention maps are a hint of what a model uses, not a
# proof: the values and the other blocks matter too.

# %%
last = classifier.encoder.blocks[-1].self_attn.layer
cls_to_words = backend.to_numpy(last.probs)[:, :, 0].mean(axis=1)    # (3, 1 + n) over keys
for sentence, row, n in zip(deck, cls_to_words, deck_lengths):
    assert np.allclose(row[1 + n:], 0.0), "padding must get no attention"
    print(" ".join(f"{w}:{a:.2f}" for w, a in zip(["[CLS]"] + sentence.split(), row)))

# %% [markdown]
# Pretraining: "The cat sat on the [MASK]"
# ----------------------------------------
#
# Labels are scarce; text is not. BERT learns from unlabelled text first, with a fill-in-the-
# blank game: hide about 15 % of the words and ask the model for them. Of the chosen
# positions, 80 % show [MASK], 10 % a random word and 10 % the word itself, so that the model
# cannot trust any word it sees and must use the context everywhere. Only the chosen positions
# are scored; every other target is ``ignore_index``. ``data.mask_tokens`` does the hiding and
# ``models.EncoderLM`` is the model: the language model's stack without the causal mask, with
# an output head tied to the embedding. A decoder can only use the words to the left; here
# "[MASK] sat on the mat" must be solved from the right.
#
# A tiny world where each animal has its own place to rest makes the test easy to read. In the
# four corrupted sentences printed below, look for a [MASK], a word swapped for a random one,
# and a chosen word left as it was: each chosen position has a target, every other one a dot.
# Each word is chosen on its own with probability 0.15, so a sentence of six words has none
# chosen with probability 0.85⁶ ≈ 0.38: the third row is such a sentence, with no target at
# all, and adds nothing to the loss of its batch (only chosen positions are scored).

# %%
PLACES = {"cat": "mat", "dog": "rug", "bird": "branch", "fish": "rock"}
VERBS = ["sat", "slept", "lay", "waited"]
animal_ids, verb_ids = (backend.to_numpy(backend.randint(0, 4, (2000,))) for _ in range(2))
corpus = [f"the {a} {VERBS[v]} on the {PLACES[a]}"
          for a, v in zip(np.array(list(PLACES))[animal_ids], verb_ids)]
words = data.WordVocabulary(corpus, specials=("[MASK]",))
MASK, V = words.index["[MASK]"], words.vocab_size
corpus_ids, _ = words.encode(corpus)                    # (2000, 6)
inputs, targets = data.mask_tokens(corpus_ids[:4], MASK, V, special_ids=(0,), seed=3)
for row_in, row_target in zip(inputs, targets):
    print(" ".join(words.words[i] for i in row_in).ljust(34),
          "targets:", [words.words[t] if t >= 0 else "·" for t in row_target])
chosen = backend.to_numpy(targets) >= 0
shown, hidden = backend.to_numpy(inputs)[chosen], backend.to_numpy(targets)[chosen]
assert (shown == MASK).any() and ((shown != MASK) & (shown != hidden)).any() \
    and (shown == hidden).any(), "the four rows should show a [MASK], a swap and a word kept"
untouched = (backend.to_numpy(data.mask_tokens(corpus_ids, MASK, V, special_ids=(0,),
                                               seed=4)[1]) < 0).all(axis=1)
print(f"sentences with no word chosen: {untouched.mean():.3f} of {len(corpus_ids)} "
      f"(0.85⁶ = {0.85 ** 6:.3f})")
assert not chosen[2].any() and abs(untouched.mean() - 0.85 ** 6) < 0.05, \
    "each of the six words is chosen alone, with p = 0.15: about 38 % of sentences have none"

bert = EncoderLM(V, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=corpus_ids.shape[1])


def masked_batches():
    rows = backend.to_numpy(backend.randint(0, len(corpus_ids), (32,)))
    return tuple(backend.to_device(a) for a in
                 data.mask_tokens(corpus_ids[rows], MASK, V, special_ids=(0,)))


train(bert, masked_batches, 200, 1e-2)
queries = ["the cat sat on the [MASK]", "the [MASK] sat on the mat",
           "the dog slept on the [MASK]"]
top = {}
for query in queries:
    where = query.split().index("[MASK]")
    logits = backend.to_numpy(bert(backend.to_device(words.encode([query])[0])))[0, where]
    p = np.exp(logits - logits.max())
    p /= p.sum()
    best = np.argsort(-p)[:4]
    top[query] = [(words.words[i], p[i]) for i in best]
    print(f"{query:30} ->", ", ".join(f"{w} {q:.3f}" for w, q in top[query]))
assert [top[q][0][0] for q in queries] == ["mat", "cat", "rug"], \
    "after pretraining, the masked word should be the one this little world implies"
assert top[queries[1]][0][1] > 0.5, "'cat' is found from the words to its right"
print("✓ masked-LM pretraining: the model fills the blank from both sides")

fig, axes = viz.figure(1, 3, size=(11, 3.2))
for ax, query in zip(axes, queries):
    names, probs = zip(*top[query])
    ax.barh(range(4)[::-1], probs, color="tab:blue")
    ax.set_yticks(range(4)[::-1], names)
    for k, q in enumerate(probs):
        ax.text(q + 0.02, 3 - k, f"{q:.3f}", va="center", fontsize=9)
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("probability")
    ax.set_title(query.replace("[MASK]", "___"), fontsize=10)
fig.suptitle("EncoderLM after 200 masked-LM steps: its top guesses for the blank")
viz.save(fig, "15_masked_lm")

# %% [markdown]
# Two sentences at once: [SEP] and segments
# -----------------------------------------
#
# Some tasks read a pair: does the second sentence follow from the first, do two questions ask
# the same thing? BERT joins them as [CLS] a [SEP] b [SEP] and adds a third embedding to each
# token, the segment: S[0] for a and its [SEP], S[1] for b. The [SEP] marks the boundary once;
# the segment tells every token which side it is on. ``data.sentence_pairs`` asks whether two
# sentiment sentences agree;
# ``WordVocabulary.encode_pairs`` writes the ids and segments; the classifier adds its own
# [CLS] in front.

# %%
pairs, agree = data.sentence_pairs(4)
pair_vocab = data.WordVocabulary([s for pair in pairs for s in pair], specials=("[SEP]",))
pair_ids, segment_ids = pair_vocab.encode_pairs(pairs)
first = pair_ids[0][pair_ids[0] > 0]
print("ids     :", " ".join(pair_vocab.words[i] for i in first))
print("segment :", " ".join(str(s).center(len(pair_vocab.words[i]))
                            for i, s in zip(first, segment_ids[0])))
n_a = len(pairs[0][0].split())
assert pair_vocab.words[first[n_a]] == "[SEP]" and segment_ids[0][n_a] == 0, \
    "sentence a ends with [SEP], still in segment 0"
assert (segment_ids[0][n_a + 1:len(first)] == 1).all(), "sentence b and its [SEP] are segment 1"

pair_model = EncoderClassifier(pair_vocab.vocab_size, 2, d_model=16, n_heads=2, n_layers=1,
                               max_len=pair_ids.shape[1], n_segments=2)
ids_d, seg_d = backend.to_device(pair_ids), backend.to_device(segment_ids)
with_segments, without = pair_model(ids_d, seg_d), pair_model(ids_d, 0 * seg_d)
print(f"logits move by up to {np.abs(with_segments - without).max():.3f} when b is marked as b")
assert np.abs(with_segments - without).max() > 1e-3, \
    "the segment ids reach the logits (wired in; this untrained model shows no benefit yet)"
print("✓ [CLS] a [SEP] b [SEP], with segment ids 0 … 0 1 … 1")

# %% [markdown]
# Images: a patch is a word
# -------------------------
#
# The Vision Transformer cuts an image into p × p patches, flattens each into p·p·C numbers
# and maps it linearly to d_model: a "word" per patch ("an image is worth 16×16 words"). One
# deck remarks that this linear map is basically a convolution. It is exactly one: a kernel of
# size p moved with stride p, so the windows do not overlap. Below, the convolution is written
# out as loops over output positions and compared with the ViT's embedding.

# %%
p, C, size = 4, 1, 8
vit = VisionTransformer(size, p, 10, channels=C, d_model=32, n_heads=2, n_layers=2, d_ff=64)
images = backend.to_numpy(backend.randn(2, C, size, size))
tokens, _ = F.patches(images, p)                        # (2, 4, p·p·C): 2 × 2 patches each
embedded = vit.patch_emb(tokens)                        # (2, 4, d_model)

W = vit.patch_emb.W.data                                # (p·p·C, d_model), rows (i, j, c)
kernel = W.reshape(p, p, C, -1).transpose(3, 2, 0, 1)   # (d_model, C, p, p): a Conv2d weight
conv = np.zeros((2, W.shape[1], size // p, size // p))  # (b, d_model, rows, cols)
for r in range(size // p):
    for c in range(size // p):                          # stride p: the windows do not overlap
        window = images[:, :, r * p:(r + 1) * p, c * p:(c + 1) * p]      # (b, C, p, p)
        conv[:, :, r, c] = np.einsum("bcij,dcij->bd", window, kernel) + vit.patch_emb.b.data
as_tokens = conv.reshape(2, W.shape[1], -1).transpose(0, 2, 1)   # row by row of patches
error = np.abs(as_tokens - embedded).max()
print(f"patch embedding vs stride-{p} convolution: max difference {error:.1e}")
assert error < 1e-12, "the ViT patch embedding should equal a stride-p convolution"
print("✓ each flattened patch times one matrix: a convolution with its stride = its kernel size")
# the paper's title in numbers: a 224 × 224 RGB image in 16 × 16 patches
paper_words, _ = F.patches(np.zeros((1, 3, 224, 224)), 16)
print(f"a 224 × 224 RGB image, 16 × 16 patches: {paper_words.shape[1]} words of "
      f"{paper_words.shape[2]} numbers")
assert paper_words.shape == (1, 14 * 14, 16 * 16 * 3), "ViT: 196 patch words of 768 numbers each"

# %% [markdown]
# With patches as words, the rest is the text classifier: [CLS], learned positions, the
# encoder, a head on [CLS]. On scikit-learn's 8 × 8 digits, with 4 × 4 patches, an image is a
# sentence of four words. (The digits come with scikit-learn: ``pip install 'minitf[vision]'``.)

# %%
try:
    digit_images, digit_labels = data.digits()
except ImportError as missing:
    digit_images = None
    print(f"skipped: the Vision Transformer on digits needs scikit-learn ({missing})")
if digit_images is not None:
    digit_images = digit_images.astype("float64")
    train(vit, sampler(digit_images[:1500], digit_labels[:1500]), 200, 3e-3)
    guesses = backend.to_numpy(vit(backend.to_device(digit_images[1500:])).argmax(axis=-1))
    vit_accuracy = (guesses == digit_labels[1500:]).mean()
    print(f"ViT on {len(guesses)} held-out digits: {vit_accuracy:.3f}")
    assert vit_accuracy > 0.85, f"the ViT should read digits (> 85 %); got {vit_accuracy:.3f}"
    cls_row = backend.to_numpy(vit.encoder.blocks[-1].self_attn.layer.probs)[0, :, 0]
    cls_to_patches = cls_row[:, 1:]                     # (heads, 4) the digit's four patches
    cls_to_itself = cls_row[:, 0].mean()                # the rest of the row: [CLS] → [CLS]
    print(f"a held-out digit's [CLS]: {cls_to_patches.mean(axis=0).sum():.2f} to its 4 patches, "
          f"{cls_to_itself:.2f} to itself")
    print("✓ a Vision Transformer reads digits from four patch-words")

# %% [markdown]
# The figure puts the two [CLS] tokens side by side: first, how much the text [CLS] attends to
# each word of the lectures' three sentences; last, a digit and how much the image [CLS]
# attends to each of its four patches. Those four weights do not sum to 1: the rest of the
# softmax row goes to [CLS] itself, as it does in the text panels (the grey bars).

# %%
fig, axes = viz.figure(1, 4, size=(15, 3.6), gridspec_kw={"width_ratios": [6, 8, 8, 5]})
for ax, sentence, row, n, label in zip(axes, deck, cls_to_words, deck_lengths, deck_labels):
    tokens_shown = ["[CLS]"] + sentence.split()
    ax.bar(range(n + 1), row[:n + 1], color=["tab:gray"] + ["tab:blue"] * n)
    ax.set_xticks(range(n + 1), tokens_shown, rotation=45, ha="right", fontsize=9)
    ax.set_ylim(0, 1)
    ax.set_title(f"→ {'positive' if label else 'negative'}", fontsize=10)
axes[0].set_ylabel("[CLS] → token attention\n(last block, mean of heads)")
if digit_images is not None:
    grid = cls_to_patches.mean(axis=0).reshape(size // p, size // p)     # 2 × 2 patch grid
    axes[3].imshow(digit_images[1500, 0], cmap="gray_r", extent=(0, size, size, 0))
    # each patch framed in its weight's colour, the digit left as it is: a colour blended with
    # the dark strokes would match no colour of the bar
    weight_colour = matplotlib.cm.ScalarMappable(matplotlib.colors.Normalize(0, 1), "viridis")
    fig.colorbar(weight_colour, ax=axes[3], fraction=0.046, label="[CLS] → patch attention")
    for r in range(size // p):
        for c in range(size // p):
            axes[3].add_patch(matplotlib.patches.Rectangle(
                (c * p + 0.1, r * p + 0.1), p - 0.2, p - 0.2, fill=False, linewidth=3,
                edgecolor=weight_colour.to_rgba(grid[r, c])))
            # the weight in the patch's corner, small, so that the digit stays readable
            axes[3].text(c * p + 0.3, r * p + 0.3, f"{grid[r, c]:.2f}", ha="left", va="top",
                         fontsize=8, weight="bold",
                         bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=0.8))
    axes[3].set_title(f"a ViT's [CLS] on a digit {digit_labels[1500]}\n(patches "
                      f"{grid.sum():.2f}, [CLS] itself {cls_to_itself:.2f})", fontsize=10)
else:
    axes[3].text(0.5, 0.5, "needs scikit-learn", ha="center", va="center")
axes[3].set_xticks([])
axes[3].set_yticks([])
fig.suptitle("Where the [CLS] token looks: the lectures' three sentences, and a digit's four "
             "patches")
viz.save(fig, "15_cls_attention")

# %% [markdown]
# Sets: tokens without an order
# -----------------------------
#
# Words and patches come in an order, which is why both models add positions. Some inputs do
# not: the points of a point cloud, the items in a basket. Make each element a token with a
# linear map, leave out the positions, and nothing in the encoder can tell the first element
# from the last: attention weighs keys by content only, the feed-forward network treats each
# token alike, and reading [CLS] (or the mean) does not care where a token sits. Permute the
# elements and the output does not move. ``SetEncoder`` learns to tell circles, lines and
# blobs of 8 points apart; adding learned positions breaks the symmetry.

# %%
points, shapes = data.point_sets(1200)                  # (1200, 8, 2), labels 0 / 1 / 2
sets = SetEncoder(2, 3, d_model=16, n_heads=2, n_layers=1, d_ff=32)
train(sets, sampler(points[:1000].astype("float64"), shapes[:1000], batch_size=32), 150, 1e-2)
held_out = backend.to_device(points[1000:].astype("float64"))
set_accuracy = (backend.to_numpy(sets(held_out).argmax(axis=-1)) == shapes[1000:]).mean()
reordered = held_out[:, np.roll(np.arange(8), 1)]          # every point moves one place on
moved = np.abs(backend.to_numpy(sets(held_out) - sets(reordered))).max()
ordered = SetEncoder(2, 3, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_len=8)
ordered.pos_emb.W.data = backend.randn(*ordered.pos_emb.W.shape)   # as large as the points
moved_with_positions = np.abs(backend.to_numpy(ordered(held_out) - ordered(reordered))).max()
print(f"{' / '.join(data.SHAPES)}: held-out accuracy {set_accuracy:.3f}")
print(f"largest logit change when the points are reordered: {moved:.1e} without positions, "
      f"{moved_with_positions:.2f} with learned positions")
assert set_accuracy > 0.9, f"the set encoder should tell the shapes apart; got {set_accuracy:.3f}"
assert moved < 1e-12, "without positions the encoder must not see the order of a set"
assert moved_with_positions > 1e-3, "learned positions make the order visible"
print("✓ no positions: a permutation-invariant encoder for sets")

# %% [markdown]
# What to remember
# ----------------
#
# * An encoder-only model is the Transformer stack without the causal mask: every token reads
#   the whole input, so it understands rather than generates.
# * For one label per input, prepend [CLS] and read only its output vector; attention lets it
#   gather whatever the label needs, negation included, which no bag of words can.
# * BERT pretrains on unlabelled text by masking 15 % of the tokens (80 % [MASK], 10 % random,
#   10 % unchanged) and scoring only those; the blank is filled from both sides.
# * Sentence pairs are [CLS] a [SEP] b [SEP], with a segment embedding telling a from b.
# * A ViT's patch embedding is a convolution whose stride equals its kernel size; after it,
#   patches are words and the classifier is the same.
# * Without positions the encoder reads a set: its output ignores the order of the tokens.
#
# Next, lesson 16: attention heads that become a convolution.
