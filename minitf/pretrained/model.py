"""A BERT-family encoder (all-MiniLM-L6-v2 is one) built from minitf's own layers, with its
hand-written backward, and the two heads that use it: sentence embeddings and classification.

    x_0 = LayerNorm(E_word[ids] + P[0 … n−1] + E_type[types])         (b, n, d_model)
    x_l = EncoderBlock_l(x_{l−1}, padding mask)     l = 1 … L        post-LN, exact GELU
    sentence = mean of x_L over the real (non-padding) tokens           (b, d_model)

Every piece is a minitf.nn module: Embedding, LearnedPositionalEmbedding, LayerNorm (ε = 1e-12,
as BERT was trained), EncoderBlock (post-LN, "gelu_exact", the same ε). Nothing here re-implements
attention, layer norm or pooling (the mean over real tokens is nn.MeanPool).
"""
from __future__ import annotations

import minitf.functional as F
from minitf.backend import get_array_module
from minitf.nn import (EncoderBlock, Embedding, LayerNorm, LearnedPositionalEmbedding, Linear,
                       MeanPool, Module, no_grad)
from minitf.validate import check_array, check_ids, check_int, check_shape, check_sizes


class BertEncoder(Module):
    """The BERT encoder: embeddings, their LayerNorm, then L post-LN encoder blocks.

    Sizes come from the model's config.json (see minitf.pretrained.loader): all-MiniLM-L6-v2 has
    vocab_size 30522, d_model 384, 12 heads, 6 layers, d_ff 1536, 512 positions, eps 1e-12.
    Token id pad_id is padding: masked as a key in every attention, left out of the mean.

    forward(ids, types=None) -> the last hidden state (b, n, d_model); after it, ``hidden``
    holds all L + 1 hidden states (the embeddings' output first) and ``keep`` the (b, n) real
    tokens. ``probs(l)`` is layer l's attention weights (b, h, n, n).
    backward(dy) -> None (integer ids have no gradient); every parameter's .grad is filled.
    """

    def __init__(self, vocab_size: int, d_model: int, n_heads: int, n_layers: int, d_ff: int,
                 max_len: int = 512, type_vocab_size: int = 2, eps: float = 1e-12,
                 pad_id: int = 0):
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=d_ff, max_len=max_len,
                           type_vocab_size=type_vocab_size, eps=eps, pad_id=pad_id)
        where = type(self).__name__
        check_sizes(where, vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                    n_layers=n_layers, d_ff=d_ff, max_len=max_len, type_vocab_size=type_vocab_size)
        check_int(pad_id, "pad_id", where, low=0, high=vocab_size - 1, what="a token id")
        self.pad_id = pad_id
        self.word = Embedding(vocab_size, d_model)
        self.position = LearnedPositionalEmbedding(max_len, d_model)
        self.token_type = Embedding(type_vocab_size, d_model)
        self.norm = LayerNorm(d_model, eps)
        self.blocks = [EncoderBlock(d_model, n_heads, d_ff, activation="gelu_exact", eps=eps)
                       for _ in range(n_layers)]
        self.hidden, self.keep = [], None

    def forward(self, ids, types=None):
        where = type(self).__name__
        check_shape(ids, "ids", ("b", "n"), where)
        check_ids(ids, "ids", self.word.vocab_size, where)
        if ids.shape[1] > self.position.max_len:    # else named by the position table inside
            raise ValueError(f"{where}: ids has {ids.shape[1]} tokens per row (shape "
                             f"{tuple(ids.shape)}); wanted at most max_len="
                             f"{self.position.max_len}, the encoder's positions (the tokenizer "
                             f"cuts a text to fit)")
        xp = get_array_module(ids)
        if types is None:
            types = xp.zeros_like(ids)                              # one sentence: all type 0
        else:                                  # one type per token: else a broadcast error
            check_array(types, "types", where)
            if tuple(types.shape) != tuple(ids.shape):
                raise ValueError(f"{where}: types has shape {tuple(types.shape)}; wanted "
                                 f"{tuple(ids.shape)}, the shape of ids")
            check_ids(types, "types", self.token_type.vocab_size, where,
                      size_name="type_vocab_size")
        self.keep = ids != self.pad_id                                          # (b, n)
        mask = F.padding_mask_from_ids(ids, self.pad_id)                       # (b, 1, 1, n)
        x = self.norm(self.position(self.word(ids)) + self.token_type(types))  # (b, n, d)
        self.hidden = [x]
        for block in self.blocks:
            x = block(x, mask=mask)
            self.hidden.append(x)
        return x

    def backward(self, dy):
        for block in reversed(self.blocks):
            dy = block.backward(dy)
        dy = self.norm.backward(dy)
        self.token_type.backward(dy)                 # x = word + position + type: dy to each
        self.word.backward(self.position.backward(dy))
        return None

    def probs(self, layer: int):
        """Layer ``layer``'s attention weights from the last forward, (b, h, n, n)."""
        n = len(self.blocks)                       # negative counts from the end, as in a list
        check_int(layer, "layer", "BertEncoder.probs", low=-n, high=n - 1,
                  what=f"one of the {n} block{'s' * (n != 1)}")
        return self.blocks[layer].self_attn.layer.probs


def _check_encoder(encoder, where: str) -> None:
    """TypeError unless ``encoder`` is a BertEncoder; the likeliest slip, the SentenceEncoder
    that load() returns, is told where its encoder is."""
    if not isinstance(encoder, BertEncoder):
        hint = ": pass its .encoder" if isinstance(encoder, SentenceEncoder) else ""
        raise TypeError(f"{where}: encoder must be a BertEncoder, such as model.encoder after "
                        f"model, tokenizer = pretrained.load(); got {type(encoder).__name__}{hint}")


class SentenceEncoder(Module):
    """Sentence embeddings: the BertEncoder's mean-pooled last hidden state, and (embed) its
    L2-normalised form, whose dot products are cosine similarities.

    forward(ids) -> (b, d_model) mean-pooled;  backward(ds) -> None
    """

    def __init__(self, encoder: BertEncoder):
        _check_encoder(encoder, type(self).__name__)
        self.encoder = encoder
        self.pool = MeanPool()

    def forward(self, ids, types=None):
        x = self.encoder(ids, types)
        return self.pool(x, self.encoder.keep)

    def backward(self, ds):
        return self.encoder.backward(self.pool.backward(ds))

    def embed(self, ids):
        """Unit-length sentence vectors (b, d_model): s / ‖s‖, as sentence-transformers gives."""
        with no_grad():                          # an inference-only forward: nothing to keep
            s = self.forward(ids)
        xp = get_array_module(s)
        return s / xp.maximum(xp.sqrt((s * s).sum(axis=-1, keepdims=True)), 1e-12)


class SentenceClassifier(Module):
    """A classification head on the pooled sentence vector, for fine-tuning:

        logits = MeanPool(BertEncoder(ids)) W + b         (b, n_classes)
    The whole model trains: backward runs through the head, the pooling and all L blocks.
    forward(ids) -> logits;  backward(dlogits) -> None
    """

    def __init__(self, encoder: BertEncoder, n_classes: int):
        where = type(self).__name__
        _check_encoder(encoder, where)
        # one class would make every loss 0 (softmax over one logit is 1): nothing to learn
        check_int(n_classes, "n_classes", where, low=2, what="the number of classes")
        self.n_classes = n_classes
        self.sentence = SentenceEncoder(encoder)
        self.head = Linear(encoder.config["d_model"], n_classes)

    def forward(self, ids):
        return self.head(self.sentence(ids))

    def backward(self, dlogits):
        return self.sentence.backward(self.head.backward(dlogits))

    def loss(self, ids, targets):
        """Mean cross-entropy; returns (loss as a float, backward) as minitf's models do."""
        loss, cache = F.cross_entropy(self.forward(ids), targets)
        return float(loss), lambda: self.backward(F.cross_entropy_backward(1.0, cache))
