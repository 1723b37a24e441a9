"""Encoder-only models that read a whole input and output one label: text (CLS token) and images
(the Vision Transformer)."""
import minitf.functional as F
from minitf.backend import get_array_module
from minitf.models.base import Model
from minitf.models.encoder import cls_key_mask, token_inputs
from minitf.nn import (ClassToken, Dropout, EncoderBlock, LayerNorm, LearnedPositionalEmbedding,
                       Linear, MeanPool, Stack, TokenEmbedding, initialize)
from minitf.nn.blocks import check_activation
from minitf.nn.init import check_init
from minitf.validate import (check_block_settings, check_finite, check_int, check_sizes,
                             feed_forward_width)


class _PooledEncoder(Model):
    """What the classifiers share, once the input has become a sequence of vectors x:

        h      = Enc([cls; x] + P)                   (b, 1 + n, d_model)   pre-LN, not causal
        logits = LayerNorm(h)[:, 0] W_head + b_head  (b, n_classes)        the CLS position only
    positions=False leaves out P (a set has no order); pooling="mean" reads the mean of
    LayerNorm(h) over the tokens instead of a CLS token.
    """

    def _build_encoder(self, n_tokens, n_classes, d_model, n_heads, n_layers, d_ff, dropout,
                       activation, attn_dropout, init, positions=True, pooling="cls"):
        check_init(init, type(self).__name__)
        check_activation(activation, type(self).__name__)
        # one class has a softmax of 1 whatever the input: a loss of exactly 0, nothing to learn
        check_int(n_classes, "n_classes", type(self).__name__, low=2,
                  what="the number of classes to tell apart")
        self.cls = ClassToken(d_model) if pooling == "cls" else None
        self.pool = MeanPool() if pooling == "mean" else None
        n_positions = n_tokens + (self.cls is not None)
        self.pos_emb = LearnedPositionalEmbedding(n_positions, d_model) if positions else None
        self.drop = Dropout(dropout)
        self.encoder = Stack(EncoderBlock(d_model, n_heads, d_ff, dropout=dropout, pre_ln=True,
                                          activation=activation, attn_dropout=attn_dropout)
                             for _ in range(n_layers))
        self.norm = LayerNorm(d_model)
        self.head = Linear(d_model, n_classes)
        initialize(self, init)

    def _classify(self, x, mask=None):
        """x: (b, n, d_model) -> logits (b, n_classes)."""
        if self.cls is not None:
            x = self.cls(x)                                     # (b, 1 + n, d_model)
        if self.pos_emb is not None:
            x = self.pos_emb(x)
        h = self.norm(self.encoder(self.drop(x), mask=mask))
        self._save(h.shape)
        return self.head(h[:, 0] if self.cls is not None else self.pool(h))

    def _classify_backward(self, dlogits):
        """dlogits: (b, n_classes) -> dx (b, n, d_model)."""
        shape = self._pop_cache()
        xp = get_array_module(dlogits)
        dpooled = self.head.backward(dlogits)                   # (b, d_model)
        if self.cls is not None:
            dh = xp.zeros(shape, dtype=dlogits.dtype)
            dh[:, 0] = dpooled                                  # only the CLS position was read
        else:                                                   # the mean: 1/n to every token
            dh = self.pool.backward(dpooled)
        dx = self.drop.backward(self.encoder.backward(self.norm.backward(dh)))
        dx = dx if self.pos_emb is None else self.pos_emb.backward(dx)     # P was added
        return dx if self.cls is None else self.cls.backward(dx)


class EncoderClassifier(_PooledEncoder):
    """Text classification (BERT-style): token embeddings, a CLS token, an encoder, a head on CLS.

    Tokens equal to pad_id are masked as keys, so padding does not change the prediction.
    n_segments ≥ 1 adds a segment embedding for sentence pairs, [CLS] a [SEP] b [SEP]: segment 0
    for a (and its [SEP]), 1 for b (see minitf.data.sentence_pairs).
    forward(ids, segment_ids=None) -> logits;  ids: (b, n) with n ≤ max_len  ->  (b, n_classes)
    """

    kind = "classifier"

    def __init__(self, vocab_size: int, n_classes: int, d_model: int = 64, n_heads: int = 4,
                 n_layers: int = 2, d_ff: int | None = None, max_len: int = 64,
                 dropout: float = 0.0, pad_id: int = 0, activation: str = "gelu",
                 n_segments: int = 0, attn_dropout: float = 0.0, init: str = "normal"):
        check_sizes("EncoderClassifier", vocab_size=vocab_size, n_classes=n_classes,
                    d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=max_len)
        check_block_settings("EncoderClassifier", d_model, n_heads, dropout, attn_dropout)
        check_int(pad_id, "pad_id", "EncoderClassifier", low=0, high=vocab_size - 1,
                  what="the id of the padding token")
        d_ff = feed_forward_width(d_ff, d_model, "EncoderClassifier")
        check_int(n_segments, "n_segments", "EncoderClassifier", low=0,
                  what="the number of segments (0 for none)")
        self.config = dict(vocab_size=vocab_size, n_classes=n_classes, d_model=d_model,
                           n_heads=n_heads, n_layers=n_layers, d_ff=d_ff, max_len=max_len,
                           dropout=dropout, pad_id=pad_id, activation=activation,
                           attn_dropout=attn_dropout, init=init)
        if n_segments:            # only then: the configs of earlier checkpoints stay the same
            self.config["n_segments"] = n_segments
        self.vocab_size, self.max_len, self.pad_id = vocab_size, max_len, pad_id
        self.tok_emb = TokenEmbedding(vocab_size, d_model, n_segments)
        self._build_encoder(max_len, n_classes, d_model, n_heads, n_layers, d_ff, dropout,
                            activation, attn_dropout, init)

    def forward(self, ids, segment_ids=None):
        x, keep = token_inputs(self, ids, segment_ids)          # (b, n, d_model), (b, n)
        mask = F.as_additive_mask(cls_key_mask(keep), self.tok_emb.W.data.dtype)   # CLS: kept
        return self._classify(x, mask)

    def backward(self, dlogits):
        return self.tok_emb.backward(self._classify_backward(dlogits))


class VisionTransformer(_PooledEncoder):
    """ViT (Dosovitskiy et al.): an image is a sequence of p×p patches, each linearly embedded.

        x = patches(images) W_patch + b      (b, (H/p)·(W/p), d_model)
    then a CLS token, learned positions and the encoder, as for text.
    forward(images) -> logits;  images: (b, C, H, W)  ->  (b, n_classes);  backward -> dimages
    """

    kind = "vit"

    def __init__(self, image_size: int, patch_size: int, n_classes: int, channels: int = 1,
                 d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = None, dropout: float = 0.0, activation: str = "gelu",
                 attn_dropout: float = 0.0, init: str = "normal"):
        check_sizes("VisionTransformer", image_size=image_size, patch_size=patch_size,
                    n_classes=n_classes, channels=channels, d_model=d_model, n_heads=n_heads,
                    n_layers=n_layers)
        check_block_settings("VisionTransformer", d_model, n_heads, dropout, attn_dropout)
        if image_size % patch_size:
            raise ValueError(f"VisionTransformer: image_size={image_size} is not a multiple of "
                             f"patch_size={patch_size}")
        d_ff = feed_forward_width(d_ff, d_model, "VisionTransformer")
        self.config = dict(image_size=image_size, patch_size=patch_size, n_classes=n_classes,
                           channels=channels, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=d_ff, dropout=dropout, activation=activation,
                           attn_dropout=attn_dropout, init=init)
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        self.patch_emb = Linear(patch_size * patch_size * channels, d_model)
        self._build_encoder((image_size // patch_size) ** 2, n_classes, d_model, n_heads,
                            n_layers, d_ff, dropout, activation, attn_dropout, init)

    def forward(self, images):
        size = self.image_size
        self._check_input(images, "images", ("b", ("C", self.channels), ("H", size), ("W", size)))
        check_finite(images, "images", type(self).__name__)
        tokens, patch_cache = F.patches(images, self.patch_size)   # (b, N, p·p·C)
        # the images' shape and p, no array: kept beside the module's cache, which _classify
        # fills itself
        self._patch_cache = patch_cache
        return self._classify(self.patch_emb(tokens))

    def backward(self, dlogits):
        dtokens = self.patch_emb.backward(self._classify_backward(dlogits))
        return F.patches_backward(dtokens, self._patch_cache)


class SetEncoder(_PooledEncoder):
    """An encoder over a set of continuous vectors (points of a cloud, items of a basket):

        x      = points W_in + b                (b, n, d_model)   one token per element
        logits = head(pool(Enc(x)))             (b, n_classes)    pool: CLS token or the mean
    With no positions (max_len=None, the default) nothing tells the encoder which element came
    first: attention and the feed-forward network treat every token alike, and both poolings
    are symmetric, so permuting the elements leaves the logits unchanged. max_len=N adds learned
    positions, for inputs whose order matters.
    forward(points) -> logits;  points: (b, n, d_in)  ->  (b, n_classes);  backward -> dpoints
    """

    kind = "set"

    def __init__(self, d_in: int, n_classes: int, d_model: int = 64, n_heads: int = 4,
                 n_layers: int = 2, d_ff: int | None = None, pooling: str = "cls",
                 max_len: int | None = None, dropout: float = 0.0, activation: str = "gelu",
                 attn_dropout: float = 0.0, init: str = "normal"):
        if pooling not in ("cls", "mean"):
            raise ValueError(f"SetEncoder: pooling must be 'cls' or 'mean'; got {pooling!r}")
        if max_len is not None:
            check_int(max_len, "max_len", "SetEncoder", what="the largest set, for positions")
        check_sizes("SetEncoder", d_in=d_in, n_classes=n_classes, d_model=d_model,
                    n_heads=n_heads, n_layers=n_layers)
        check_block_settings("SetEncoder", d_model, n_heads, dropout, attn_dropout)
        d_ff = feed_forward_width(d_ff, d_model, "SetEncoder")
        self.config = dict(d_in=d_in, n_classes=n_classes, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=d_ff, pooling=pooling, max_len=max_len,
                           dropout=dropout, activation=activation, attn_dropout=attn_dropout,
                           init=init)
        self.d_in, self.max_len = d_in, max_len
        self.embed = Linear(d_in, d_model)
        self._build_encoder(max_len or 0, n_classes, d_model, n_heads, n_layers, d_ff, dropout,
                            activation, attn_dropout, init, positions=max_len is not None,
                            pooling=pooling)

    def forward(self, points):
        where = type(self).__name__
        self._check_input(points, "points", ("b", "n", ("d_in", self.d_in)))
        check_finite(points, "points", where)
        if self.max_len is not None and points.shape[1] > self.max_len:
            raise ValueError(f"{where}: points has {points.shape[1]} elements; wanted at most "
                             f"max_len={self.max_len}")
        if points.shape[1] == 0 and self.config["pooling"] == "mean":
            raise ValueError(f"{where}: points has 0 elements; wanted at least one (mean pooling "
                             f"averages them)")
        return self._classify(self.embed(points))

    def backward(self, dlogits):
        return self.embed.backward(self._classify_backward(dlogits))
