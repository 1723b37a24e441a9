"""A character-level recurrent language model: the baseline the Transformer is compared with."""
from minitf.models.base import Model
from minitf.nn import LSTM, RNN, Embedding, Linear
from minitf.validate import check_ids, check_int, check_shape

CELLS = {"rnn": RNN, "lstm": LSTM}


class RNNState:
    """The recurrent "cache" for generation: the last state (h, and c for an LSTM) and how many
    tokens it has read. Unlike a KV cache it does not grow: d_hidden numbers per sequence
    (2·d_hidden for an LSTM: h and c), whatever the length -- everything the model remembers
    must fit in it."""

    def __init__(self):
        self.h, self.c, self.length = None, None, 0


class RNNLM(Model):
    """Embedding, one recurrent layer, a linear head: the same loss(x, y) as DecoderLM.

        x      = E[ids]                       (b, n, d_model)
        H      = RNN(x)  or  LSTM(x)          (b, n, d_hidden)   h_t has read tokens ≤ t only
        logits = H W_head + b_head            (b, n, vocab)

    Causal by construction: h_t is computed from tokens 1 … t, so no mask is needed. There are no
    positions either: order is in the recurrence itself. ``max_len`` is the window generation
    feeds (the context it was trained on); the model itself has no limit.
    forward(ids, cache=None) -> logits;  backward(dlogits) -> None (ids have no gradient)
    """

    kind = "rnn"

    def __init__(self, vocab_size: int, d_model: int = 64, d_hidden: int | None = None,
                 cell: str = "rnn", max_len: int = 256):
        if cell not in CELLS:
            raise ValueError(f"RNNLM: cell must be one of {tuple(CELLS)}; got {cell!r}")
        d_hidden = d_model if d_hidden is None else d_hidden
        for name, value, what in (("vocab_size", vocab_size, "the number of tokens"),
                                  ("d_model", d_model, "the embedding width"),
                                  ("d_hidden", d_hidden, "the width of the state"),
                                  ("max_len", max_len, "the longest window")):
            check_int(value, name, "RNNLM", what=what)
        self.config = dict(vocab_size=vocab_size, d_model=d_model, d_hidden=d_hidden, cell=cell,
                           max_len=max_len)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = Embedding(vocab_size, d_model)
        self.rnn = CELLS[cell](d_model, d_hidden)
        self.head = Linear(d_hidden, vocab_size)

    def new_cache(self) -> list:
        """An empty state, in a one-element list as DecoderLM's per-block caches are."""
        return [RNNState()]

    def forward(self, ids, cache=None):
        """ids: (b, n) token ids -> logits (b, n, vocab). With a cache, ids continue its text."""
        check_shape(ids, "ids", ("b", "n"), "RNNLM")
        check_ids(ids, "ids", self.vocab_size, "RNNLM")
        self._check_cache(cache, "RNNLM")
        state = cache[0] if cache else RNNState()
        if state.h is not None and state.h.shape[0] != ids.shape[0]:    # as a KVCache says it
            held = state.h.shape[0]
            raise ValueError(f"RNNLM: cache holds the state of {held} sequence"
                             f"{'s' * (held != 1)}; ids has {ids.shape[0]} rows; wanted "
                             f"new_cache() for another batch")
        lstm = not isinstance(self.rnn, RNN)
        if state.h is not None and (state.h.shape[-1] != self.config["d_hidden"]
                                    or (state.c is not None) != lstm):
            # another model's: NumPy's matmul error, or an RNN's state whose cell an LSTM
            # silently started again from 0
            cell = "an LSTM's" if state.c is not None else "an RNN's"
            raise ValueError(f"RNNLM: cache holds {cell} state of width {state.h.shape[-1]}; "
                             f"this model is {'an LSTM' if lstm else 'an RNN'} of d_hidden="
                             f"{self.config['d_hidden']}; wanted this model's new_cache()")
        x = self.tok_emb(ids)                                   # (b, n, d_model)
        states = (state.h,) if isinstance(self.rnn, RNN) else (state.h, state.c)
        H = self.rnn(x, *states)                                # (b, n, d_hidden)
        if cache:
            state.h, state.length = H[:, -1], state.length + ids.shape[1]
            state.c = getattr(self.rnn, "last_cell", None)
        return self.head(H)                                     # (b, n, vocab)

    def backward(self, dlogits):
        dH = self.head.backward(dlogits)                        # (b, n, d_hidden)
        # (b, n, d_model), and the gradients of the zero initial states, which nothing learns
        dx, *_ = self.rnn.backward(dH)
        self.tok_emb.backward(dx)
