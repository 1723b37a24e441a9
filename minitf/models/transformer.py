"""The encoder–decoder Transformer of Vaswani et al. (2017), for sequence-to-sequence tasks."""
import math

import minitf.functional as F
from minitf.models.base import Model
from minitf.nn import (DecoderBlock, Dropout, Embedding, EncoderBlock, KVCache, LayerNorm, Linear,
                       SinusoidalPositionalEncoding, Stack, initialize)
from minitf.nn.blocks import check_activation
from minitf.nn.init import check_init
from minitf.validate import (check_block_settings, check_finite, check_flags, check_ids,
                             check_int, check_shape, check_sizes, feed_forward_width)


class Transformer(Model):
    """Encoder and decoder joined by cross-attention.

        encoder:  s = Enc(√d · E_src[src] + PE)                 (b, m, d_model)   "memory"
        decoder:  y = Dec(√d · E_tgt[tgt] + PE, s)              (b, n, d_model)
        logits = y W_out + b_out                                 (b, n, tgt_vocab)

    The encoder sees the whole source (only padding is masked); each decoder block masks its
    self-attention causally and then attends to the memory. Post-LN blocks as in the paper, or
    pre-LN (pre_ln=True, with a final LayerNorm after each stack). Embeddings are multiplied by
    √d_model so that the unit-size sinusoidal encodings do not drown them. share_embeddings: one
    table for source and target (same vocabulary); its gradient is the sum of both uses.
    Tokens equal to pad_id are padding: masked as keys (target ones only in training batches, see
    decode), and not scored as targets. attn_dropout: dropout on the attention weights of every
    attention layer (training only).  init: "normal" (each layer's own) or "xavier" (Glorot
    uniform on every Linear's W, as the paper's well-known annotated re-telling does; that
    re-telling also re-draws the embedding tables, which here keep their own draws).

    forward(src, tgt) -> logits;   backward(dlogits) -> None
    Training: tgt = the target with BOS in front, targets = the target with EOS at the end.
    """

    kind = "seq2seq"

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, d_model: int = 64,
                 n_heads: int = 4, n_layers: int = 2, d_ff: int | None = None,
                 dropout: float = 0.1, pre_ln: bool = False, share_embeddings: bool = False,
                 pad_id: int = 0, activation: str = "relu", attn_dropout: float = 0.0,
                 init: str = "normal"):
        check_init(init, "Transformer")
        check_activation(activation, "Transformer")
        check_flags("Transformer", pre_ln=pre_ln, share_embeddings=share_embeddings)
        check_sizes("Transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                    d_model=d_model, n_heads=n_heads, n_layers=n_layers)
        check_block_settings("Transformer", d_model, n_heads, dropout, attn_dropout)
        check_int(pad_id, "pad_id", "Transformer", low=0,
                  high=min(src_vocab_size, tgt_vocab_size) - 1,
                  what="the id of the padding token, in both vocabularies")
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(f"Transformer: share_embeddings needs one vocabulary; got "
                             f"src_vocab_size={src_vocab_size}, tgt_vocab_size={tgt_vocab_size}")
        d_ff = feed_forward_width(d_ff, d_model, "Transformer")
        self.config = dict(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                           d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
                           dropout=dropout, pre_ln=pre_ln, share_embeddings=share_embeddings,
                           pad_id=pad_id, activation=activation, attn_dropout=attn_dropout,
                           init=init)
        self.d_model, self.pad_id, self.ignore_index = d_model, pad_id, pad_id
        self.src_emb = Embedding(src_vocab_size, d_model)
        self.tgt_emb = Embedding(tgt_vocab_size, d_model)
        if share_embeddings:
            self.tgt_emb.W = self.src_emb.W                     # one Parameter, two lookups
        self.src_pos = SinusoidalPositionalEncoding(d_model)
        self.tgt_pos = SinusoidalPositionalEncoding(d_model)
        self.src_drop, self.tgt_drop = Dropout(dropout), Dropout(dropout)
        block = dict(dropout=dropout, pre_ln=pre_ln, activation=activation,
                     attn_dropout=attn_dropout)
        self.encoder = Stack(EncoderBlock(d_model, n_heads, d_ff, **block) for _ in range(n_layers))
        self.decoder = Stack(DecoderBlock(d_model, n_heads, d_ff, **block) for _ in range(n_layers))
        # Pre-LN stacks end un-normalised (each block adds to the residual stream, and nothing
        # rescales it): normalise once at the end.
        self.encoder_norm = LayerNorm(d_model) if pre_ln else None
        self.decoder_norm = LayerNorm(d_model) if pre_ln else None
        self.out = Linear(d_model, tgt_vocab_size)
        initialize(self, init)

    def new_cache(self) -> list:
        """An empty KV cache for decoding: (self-attention, cross-attention) per decoder block."""
        return [(KVCache(), KVCache()) for _ in self.decoder.blocks]

    def _check(self, ids, name, embedding):
        check_shape(ids, name, ("b", "n"), type(self).__name__)
        if ids.shape[1] == 0:               # attention over no tokens: a softmax of nothing
            raise ValueError(f"{type(self).__name__}: {name} has shape {tuple(ids.shape)}; "
                             f"wanted at least one token per row")
        check_ids(ids, name, embedding.vocab_size, type(self).__name__)

    def encode(self, src):
        """src: (b, m) -> (memory (b, m, d_model), memory_mask (b, 1, 1, m))."""
        self._check(src, "src", self.src_emb)
        memory_mask = F.padding_mask_from_ids(src, self.pad_id)
        x = self.src_pos(self.src_emb(src) * math.sqrt(self.d_model))
        memory = self.encoder(self.src_drop(x), mask=memory_mask)
        if self.encoder_norm is not None:
            memory = self.encoder_norm(memory)
        return memory, memory_mask

    def decode(self, tgt, memory, memory_mask, cache=None, mask_padding: bool = True):
        """tgt: (b, n) -> logits (b, n, tgt_vocab). With a cache, tgt holds the new tokens only.

        mask_padding: tokens of tgt equal to pad_id are padding, masked as keys -- right for a
        training batch, padded by the data. Decoding passes False: a generated token is never
        padding, even one that happens to equal pad_id: masking it would hide part of the prefix
        from the decoder. With a cache (generation only) nothing is masked either.
        """
        self._check(tgt, "tgt", self.tgt_emb)
        check_flags(f"{type(self).__name__}.decode", mask_padding=mask_padding)
        if isinstance(memory, tuple):            # encode's whole return, mask and all
            raise TypeError(f"{type(self).__name__}.decode: memory is a tuple; wanted the "
                            f"(b, m, d_model) array: encode returns (memory, memory_mask), "
                            f"unpack it")
        check_shape(memory, "memory", ("b", "m", "d_model"), type(self).__name__)
        check_finite(memory, "memory", type(self).__name__)
        if memory.shape[0] != tgt.shape[0]:      # else a Residual deep inside named the shapes
            raise ValueError(f"{type(self).__name__}: tgt holds {tgt.shape[0]} sequences and "
                             f"memory {memory.shape[0]}; wanted one source per target (src and "
                             f"tgt of the same batch size)")
        self._check_cache(cache, type(self).__name__)
        offset = cache[0][0].length if cache else 0
        padding = mask_padding and not cache
        mask = F.padding_mask_from_ids(tgt, self.pad_id) if padding else None
        y = self.tgt_pos(self.tgt_emb(tgt) * math.sqrt(self.d_model), offset=offset)
        y = self.decoder(self.tgt_drop(y), memory, mask=mask, memory_mask=memory_mask, cache=cache)
        if self.decoder_norm is not None:
            y = self.decoder_norm(y)
        return self.out(y)

    def forward(self, src, tgt):
        memory, memory_mask = self.encode(src)
        return self.decode(tgt, memory, memory_mask)

    def backward(self, dlogits):
        # BEGIN SOLUTION Transformer.backward
        sqrt_d = math.sqrt(self.d_model)            # the forward multiplied the embeddings by it
        dy = self.out.backward(dlogits)
        if self.decoder_norm is not None:
            dy = self.decoder_norm.backward(dy)
        dy, dmemory = self.decoder.backward(dy)                 # dmemory: summed over the blocks
        self.tgt_emb.backward(self.tgt_pos.backward(self.tgt_drop.backward(dy)) * sqrt_d)
        if self.encoder_norm is not None:
            dmemory = self.encoder_norm.backward(dmemory)
        dx = self.src_drop.backward(self.encoder.backward(dmemory))
        return self.src_emb.backward(self.src_pos.backward(dx) * sqrt_d)
        # END SOLUTION
