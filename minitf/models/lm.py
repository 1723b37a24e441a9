"""A decoder-only language model (GPT-style), trained to predict the next token."""
import minitf.functional as F
from minitf.models.base import Model
from minitf.nn import (Dropout, Embedding, EncoderBlock, KVCache, LayerNorm,
                       LearnedPositionalEmbedding, Linear, SinusoidalPositionalEncoding, Stack,
                       initialize)
from minitf.nn.blocks import check_activation
from minitf.nn.init import check_init
from minitf.validate import (check_block_settings, check_flags, check_ids, check_int,
                             check_rope_width, check_shape, feed_forward_width)

POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "relative")


class DecoderLM(Model):
    """GPT in one screen: embeddings, L pre-LN blocks with causal self-attention, a final norm.

        x      = E[ids] (+ P[0..n−1])          (b, n, d_model)   token (+ position) embeddings
        x      = block_L(… block_1(x))          (b, n, d_model)   each block: causal MHA, then FFN
        logits = LayerNorm(x) W_head            (b, n, vocab)     W_head = Eᵀ when tied

    Trained by teacher forcing: on a text window, X = text[:, :-1] and Y = text[:, 1:], and
    position t is scored on predicting token t+1 having seen tokens ≤ t only (the causal mask).

    positional: "learned" or "sinusoidal" (added to the embeddings), "rope", "alibi" or
    "relative" (inside every attention layer).  tie_weights: the output layer reuses the token
    embedding E, transposed; E's gradient is then the sum of its two uses.
    causal=False drops the causal mask: position t then sees token t+1, the very token it is
    scored on (data leakage; a demonstration, never a language model). pre_ln=False builds
    post-LN blocks (the original GPT), which end in a LayerNorm already: no final norm then.
    attn_dropout: dropout on the attention weights (training only).  init: "normal" (each layer's
    own) or "xavier" (Glorot uniform on every Linear's W; see minitf.nn.init).
    forward(ids, cache=None) -> logits;  backward(dlogits) -> None (ids have no gradient)
    """

    kind = "lm"

    def __init__(self, vocab_size: int, d_model: int = 128, n_heads: int = 4, n_layers: int = 4,
                 d_ff: int | None = None, max_len: int = 256, positional: str = "learned",
                 tie_weights: bool = True, dropout: float = 0.0, activation: str = "gelu",
                 causal: bool = True, pre_ln: bool = True, attn_dropout: float = 0.0,
                 init: str = "normal"):
        where = type(self).__name__          # an EncoderLM's errors are named as its own
        if positional not in POSITIONAL:
            raise ValueError(f"{where}: positional must be one of {POSITIONAL}; got {positional!r}")
        check_init(init, where)
        check_flags(where, tie_weights=tie_weights, causal=causal, pre_ln=pre_ln)
        for name, value, what in (("vocab_size", vocab_size, "the number of tokens"),
                                  ("d_model", d_model, "the model width"),
                                  ("max_len", max_len, "the longest context")):
            check_int(value, name, where, what=what)
        check_int(n_layers, "n_layers", where, low=0, what="the number of blocks")
        # checked here too: with n_layers=0 no block would, and the config keeps what it is given
        check_int(n_heads, "n_heads", where, what="the number of heads")
        check_block_settings(where, d_model, n_heads, dropout, attn_dropout)
        check_rope_width(positional, d_model // n_heads, where)
        check_activation(activation, where)
        d_ff = feed_forward_width(d_ff, d_model, where)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=d_ff, max_len=max_len, positional=positional,
                           tie_weights=tie_weights, dropout=dropout, activation=activation,
                           causal=causal, pre_ln=pre_ln, attn_dropout=attn_dropout, init=init)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = Embedding(vocab_size, d_model)
        if positional == "learned":
            self.pos_emb = LearnedPositionalEmbedding(max_len, d_model)
        elif positional == "sinusoidal":
            self.pos_emb = SinusoidalPositionalEncoding(d_model)
        else:
            self.pos_emb = None
        in_attention = positional if positional in ("rope", "alibi", "relative") else None
        self.drop = Dropout(dropout)
        self.blocks = Stack(EncoderBlock(d_model, n_heads, d_ff, dropout=dropout, pre_ln=pre_ln,
                                         activation=activation, causal=causal,
                                         positional=in_attention, attn_dropout=attn_dropout)
                            for _ in range(n_layers))
        self.norm = LayerNorm(d_model) if pre_ln else None
        self.head = None if tie_weights else Linear(d_model, vocab_size, bias=False)
        initialize(self, init)

    def new_cache(self) -> list:
        """An empty KV cache: one KVCache per block."""
        return [KVCache() for _ in self.blocks.blocks]

    def _head_weight(self):
        """W_head, (d_model, vocab): the embedding table transposed when the weights are tied."""
        return self.tok_emb.W.data.T if self.head is None else self.head.W.data

    def forward(self, ids, cache=None):
        """ids: (b, n) token ids -> logits (b, n, vocab). With a cache, ids are the new tokens."""
        where = type(self).__name__
        check_shape(ids, "ids", ("b", "n"), where)
        check_ids(ids, "ids", self.vocab_size, where)
        self._check_cache(cache, where)
        offset = cache[0].length if cache else 0                # position of ids[:, 0]
        if offset + ids.shape[1] > self.max_len:
            # cropping the input helps where there is no cache; a cache's tokens stay in it
            crop = (f"start a new_cache() and feed it the last {self.max_len} tokens or fewer, as "
                    f"generate does" if offset else
                    f"crop the input to its last {self.max_len} tokens")
            held = f"the cache holds {offset} tokens, ids {ids.shape[1]} more: " if offset else ""
            raise ValueError(f"{where}: {held}positions {offset}..{offset + ids.shape[1] - 1} "
                             f"exceed the context; wanted at most max_len={self.max_len} tokens "
                             f"({crop})")
        return self._logits(self.tok_emb(ids), offset=offset, cache=cache)

    def _logits(self, x, offset: int = 0, mask=None, cache=None):
        """The stack above the token embeddings x (b, n, d_model) -> logits (b, n, vocab); mask:
        an extra attention mask over the keys, boolean (True: attend) or additive (0 or −inf):
        the bidirectional EncoderLM's padding, as a (b, 1, 1, n) boolean."""
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset=offset)
        x = self.blocks(self.drop(x), mask=mask, cache=cache)   # (b, n, d_model)
        h = x if self.norm is None else self.norm(x)
        # One F.linear for both heads, tied or not (self.head is never called): logits = h W_head
        # either way, and only where W_head's gradient goes differs (see backward)
        logits, head_cache = F.linear(h, self._head_weight())   # (b, n, vocab)
        self._save(head_cache)
        return logits

    def backward(self, dlogits):
        # BEGIN SOLUTION DecoderLM.backward
        dh, dW_head, _ = F.linear_backward(dlogits, self._pop_cache())
        if self.head is None:
            self.tok_emb.W.grad += dW_head.T                    # the embedding's second use
        else:
            self.head.W.grad += dW_head
        dx = dh if self.norm is None else self.norm.backward(dh)
        dx = self.drop.backward(self.blocks.backward(dx))
        if self.pos_emb is not None:
            dx = self.pos_emb.backward(dx)
        return self.tok_emb.backward(dx)
        # END SOLUTION
