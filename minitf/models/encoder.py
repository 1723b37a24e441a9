"""BERT's encoder-only language model, and what it shares with the CLS classifier: reading a batch
of token ids (with their segments) and masking the padding as keys."""
from minitf.backend import get_array_module
from minitf.models.lm import DecoderLM
from minitf.nn import TokenEmbedding
from minitf.validate import check_ids, check_int, check_segments, check_shape


def token_inputs(model, ids, segment_ids=None):
    """Check ids (b, n) and segment_ids against ``model`` (its vocab_size, max_len, n_segments),
    embed them, and say which tokens are real:

        x    = E[ids] + S[segment_ids]      (b, n, d_model)
        keep = ids ≠ pad_id                 (b, n)   False at padding: masked as keys
    """
    where = type(model).__name__
    check_shape(ids, "ids", ("b", "n"), where)
    check_ids(ids, "ids", model.vocab_size, where)
    check_segments(segment_ids, ids, model.tok_emb.n_segments, where)
    if ids.shape[1] > model.max_len:
        raise ValueError(f"{where}: ids has {ids.shape[1]} tokens; wanted at most "
                         f"max_len={model.max_len}")
    return model.tok_emb(ids, segment_ids), ids != model.pad_id


class EncoderLM(DecoderLM):
    """BERT: the language model's stack without the causal mask, trained on masked tokens.

        x      = E[ids] + S[segment_ids] + P[0..n−1]   (b, n, d_model)  token, segment, position
        x      = block_L(… block_1(x))                  (b, n, d_model)  each token sees them all
        logits = LayerNorm(x) Eᵀ                        (b, n, vocab)    a guess at every position

    Every position sees the whole input, so a position cannot be asked for its own token: the
    input hides some tokens behind [MASK] (minitf.data.mask_tokens) and only those are scored;
    the targets elsewhere are ignore_index. Tokens equal to pad_id are masked as keys.
    forward(ids, segment_ids=None) -> logits;  backward(dlogits) -> None (ids have no gradient)
    loss(ids, targets, segment_ids=None) -> (loss, backward)
    The backward is DecoderLM's (models/lm.py), unchanged: the head, the blocks, then the
    embeddings (tok_emb embeds the segments too, and its backward gives S its share).
    """

    kind = "mlm"

    def __init__(self, vocab_size: int, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_ff: int | None = None, max_len: int = 64, n_segments: int = 0,
                 dropout: float = 0.0, pad_id: int = 0, activation: str = "gelu"):
        check_int(n_segments, "n_segments", "EncoderLM", low=0,
                  what="the number of segments (0 for none)")
        super().__init__(vocab_size, d_model, n_heads, n_layers, d_ff, max_len,
                         positional="learned", tie_weights=True, dropout=dropout,
                         activation=activation, causal=False, pre_ln=True)
        check_int(pad_id, "pad_id", "EncoderLM", low=0, high=vocab_size - 1,
                  what="the id of the padding token")
        self.tok_emb = TokenEmbedding(vocab_size, d_model, n_segments)   # E, and S if any
        self.config = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads,
                           n_layers=n_layers, d_ff=self.config["d_ff"], max_len=max_len,
                           n_segments=n_segments, dropout=dropout, pad_id=pad_id,
                           activation=activation)
        self.pad_id = pad_id

    def forward(self, ids, segment_ids=None):
        """ids, segment_ids: (b, n) -> logits (b, n, vocab)."""
        x, keep = token_inputs(self, ids, segment_ids)
        return self._logits(x, mask=keep[:, None, None, :])     # mask: (b, 1, 1, n) keys

    def loss(self, ids, targets, segment_ids=None):
        """Cross-entropy at the positions whose target is not ignore_index (the masked ones)."""
        return super().loss(ids, segment_ids, targets)

    def new_cache(self):
        raise TypeError("EncoderLM: a bidirectional encoder has no KV cache; every token's "
                        "vectors change when a token is added")


def cls_key_mask(keep):
    """keep (b, n) -> (b, 1, 1, 1 + n): the CLS token, then the tokens, as attention keys."""
    xp = get_array_module(keep)
    return xp.concatenate([xp.ones((keep.shape[0], 1), dtype=bool), keep], axis=1)[:, None, None]
