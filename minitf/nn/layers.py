"""The basic layers: each holds its parameters and calls a forward/backward pair from
minitf.functional, adding the parameter gradients into ``.grad``."""
import math

import minitf.functional as F
from minitf.array_ops import elementwise_in_blocks
from minitf.backend import get_array_module
from minitf.nn.module import Module, grad_enabled
from minitf.nn.parameter import normal, ones, zeros
from minitf.validate import (check_flags, check_float, check_int, check_probability, check_real,
                             check_segments, check_shape)


class Linear(Module):
    """y = x W + b.     x: (..., d_in)  ->  y: (..., d_out)

    W starts as N(0, 1/d_in): each output then has about the variance of one input feature.
    ``parts`` (an attribute, set by the layer that fuses maps, not a constructor argument): the
    widths of the separate maps a fused W holds side by side (W_qkv is q, k and v in one
    matrix); None for one map. Only an initialisation by fan-out (Xavier) reads it.
    """

    parts = None

    def __init__(self, d_in: int, d_out: int, bias: bool = True):
        check_flags("Linear", bias=bias)
        check_int(d_in, "d_in", "Linear", what="the width of its input")
        check_int(d_out, "d_out", "Linear", what="the width of its output")
        self.d_in, self.d_out = d_in, d_out
        self.W = normal(d_in, d_out, std=1.0 / math.sqrt(d_in))
        self.b = zeros(d_out) if bias else None

    def forward(self, x):
        self._check_input(x, "x", ("...", ("d_in", self.d_in)))
        y, cache = F.linear(x, self.W.data, None if self.b is None else self.b.data)
        self._save(cache)                                        # (x, W, has_bias)
        return y

    def rebuild_input_with(self, rebuild) -> None:
        """Let go of the x the last forward kept for the backward: ``rebuild()`` returns it again
        there, equal to the last bit. For the module that made x, when it keeps what x is remade
        from anyway (a GELU's x and Φ(x), for FeedForward's W_2): the widest array of a block is
        then not kept a third time. Only memory changes, never a gradient."""
        _, W, has_bias = self._peek_cache("rebuild_input_with")
        self._save((rebuild, W, has_bias))

    def backward(self, dy):
        x, W, has_bias = self._pop_cache()
        if callable(x):                                          # see rebuild_input_with
            x = x()
        dx, dW, db = F.linear_backward(dy, (x, W, has_bias))
        self.W.grad += dW
        if self.b is not None:
            self.b.grad += db
        return dx


class Embedding(Module):
    """y = W[ids]: a learned d-dimensional vector per token.   ids: (...)  ->  y: (..., d)

    Its backward returns None: integer ids have no gradient; the table's goes into W.grad.
    """

    def __init__(self, vocab_size: int, d: int, std: float | None = None):
        check_int(vocab_size, "vocab_size", "Embedding", what="the number of tokens")
        check_int(d, "d", "Embedding", what="the width of each vector")
        if std is not None:                     # else randn's words, which name no layer
            check_real(std, "std", "Embedding", low=0, low_open=False)
        self.vocab_size, self.d = vocab_size, d
        self.W = normal(vocab_size, d, std=std if std is not None else 1.0 / math.sqrt(d))

    def forward(self, ids):
        y, cache = F.embedding(ids, self.W.data)
        self._save(cache)
        return y

    def backward(self, dy):
        self.W.grad += F.embedding_backward(dy, self._pop_cache())
        return None


class TokenEmbedding(Embedding):
    """BERT's input embedding: a token's vector plus, for sentence pairs, its segment's vector.

        y = E[ids] + S[segment_ids]      ids, segment_ids: (b, n)  ->  y: (b, n, d)
    S is a small (n_segments, d) table: segment 0 for sentence A, 1 for sentence B. With
    n_segments = 0 there is no S and this is a plain Embedding (same parameter name, W); with
    segments but no segment_ids given, every token is in segment 0.
    """

    def __init__(self, vocab_size: int, d: int, n_segments: int = 0, std: float | None = None):
        super().__init__(vocab_size, d, std=std)
        check_int(n_segments, "n_segments", "TokenEmbedding", low=0,
                  what="the number of segments (0 for none)")
        self.n_segments = n_segments
        self.segment = Embedding(n_segments, d) if n_segments else None

    def forward(self, ids, segment_ids=None):
        check_segments(segment_ids, ids, self.n_segments, "TokenEmbedding")
        y = super().forward(ids)                                 # (b, n, d)
        if self.segment is not None:
            if segment_ids is None:
                segment_ids = get_array_module(ids).zeros_like(ids)
            y = y + self.segment(segment_ids)                    # (b, n, d)
        return y

    def backward(self, dy):
        # Both tables were added into y: each gets the whole dy at the rows it supplied.
        if self.segment is not None:
            self.segment.backward(dy)
        return super().backward(dy)


class ClassToken(Module):
    """Prepend one learned vector, the [CLS] token, to every sequence (BERT, ViT).

    Attention lets it gather from all tokens; a classifier then reads only its output.
    x: (b, n, d)  ->  y: (b, 1 + n, d).   Backward: the CLS rows' gradient goes to the vector.
    """

    def __init__(self, d: int, std: float = 0.02):
        check_int(d, "d", "ClassToken", what="the width of the token")
        check_real(std, "std", "ClassToken", low=0, low_open=False)     # (else randn's error)
        self.d = d
        self.cls = normal(d, std=std)

    def forward(self, x):
        self._check_input(x, "x", ("b", "n", ("d", self.d)))
        xp = get_array_module(x)
        cls = xp.broadcast_to(self.cls.data, (x.shape[0], 1, self.d))
        self._save(None)               # nothing to keep, but backward can tell a forward ran
        return xp.concatenate([cls, x], axis=1)

    def backward(self, dy):
        # BEGIN SOLUTION ClassToken.backward
        self._pop_cache()
        self.cls.grad += dy[:, 0].sum(axis=0)                   # one vector, used b times
        return dy[:, 1:]
        # END SOLUTION


class LayerNorm(Module):
    """y = γ ⊙ (x − μ) / √(σ² + ε) + β over the last axis.   x: (..., d)  ->  y: (..., d)"""

    def __init__(self, d: int, eps: float = 1e-5):
        check_int(d, "d", "LayerNorm", what="the width it normalises")
        check_real(eps, "eps", "LayerNorm", low=0, low_open=False)    # a model skips F's check
        self.d, self.eps = d, eps
        self.gamma = ones(d)
        self.beta = zeros(d)

    def forward(self, x):
        self._check_input(x, "x", ("...", ("d", self.d)))
        # under no_grad() nothing is kept, so y can be made over x̂ (keep_cache: layer_norm's)
        y, cache = F.layer_norm(x, self.gamma.data, self.beta.data, self.eps,
                                keep_cache=grad_enabled())
        self._save(cache)
        return y

    def backward(self, dy):
        dx, dgamma, dbeta = F.layer_norm_backward(dy, self._pop_cache())
        self.gamma.grad += dgamma
        self.beta.grad += dbeta
        return dx


class Dropout(Module):
    """Inverted dropout with rate p in training mode; the identity in evaluation mode."""

    def __init__(self, p: float = 0.0):
        check_probability(p, "p", "Dropout")
        self.p = p

    def forward(self, x):
        y, cache = F.dropout(x, self.p, training=self.training)
        self._save(cache)
        return y

    def backward(self, dy):
        return F.dropout_backward(dy, self._pop_cache())


class ReLU(Module):
    """y = max(x, 0)."""

    def forward(self, x):
        y, cache = F.relu(x)
        self._save(cache)
        return y

    def backward(self, dy):
        return F.relu_backward(dy, self._pop_cache())


class GELU(Module):
    """y = x Φ(x); ``approximate`` is "tanh" (GPT-2, the default) or "none" (exact, with erf)."""

    def __init__(self, approximate: str = "tanh"):
        if approximate not in ("tanh", "none"):
            raise ValueError(f"GELU: approximate must be 'tanh' or 'none'; got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        # under no_grad() nothing is kept, so y can be made over Φ (keep_cache: gelu's)
        y, cache = F.gelu(x, self.approximate, keep_cache=grad_enabled())
        self._save(cache)
        return y

    def backward(self, dy):
        x, cdf, approximate = self._pop_cache()
        # elementwise, so a block at a time: the backward's temporaries are then the size of a
        # block, not two more copies of the (b, n, d_ff) hidden layer at the step's peak
        return elementwise_in_blocks(
            lambda dy, x, cdf: F.gelu_backward(dy, (x, cdf, approximate)), dy, x, cdf)

    def output_rebuilder(self):
        """A function that returns y = x Φ(x) of the last forward again, by the same product from
        the x and Φ(x) that forward kept, so equal to the last bit: for a layer that reads y and
        need not keep a copy (Linear.rebuild_input_with). It holds those arrays itself, so it
        works before or after this layer's own backward."""
        x, cdf, _ = self._peek_cache("output_rebuilder")
        return lambda: x * cdf


class MeanPool(Module):
    """The average of the real tokens' vectors, one vector per sequence ("mean pooling"):

        s_b = Σ_i m_bi x_bi / Σ_i m_bi          m_bi = 1 for a real token, 0 for padding
        ∂L/∂x_bi = m_bi / Σ_j m_bj · ∂L/∂s_b     (each real token gets an equal share)

    A sequence with no real token (all padding) averages nothing: its s_b is 0, and so is its
    gradient (the sum Σ_i m_bi is taken as at least 1).
    forward(x, keep=None): x (b, n, d), keep (b, n) booleans (None: every token is real)
    -> (b, d);   backward(ds) -> dx (b, n, d)
    """

    def forward(self, x, keep=None):
        self._check_input(x, "x", ("b", "n", "d"))
        check_float(x, "x", "MeanPool")         # no parameters to take the dtype from: 1/n → 0
        if x.shape[1] == 0:
            raise ValueError(f"MeanPool: x has shape {tuple(x.shape)}, no positions; wanted at "
                             f"least one to average")
        xp = get_array_module(x)
        if keep is None:
            weights = xp.full(x.shape[:2], 1.0 / x.shape[1], dtype=x.dtype)        # (b, n)
        else:
            check_shape(keep, "keep", (("b", x.shape[0]), ("n", x.shape[1])), "MeanPool")
            if keep.dtype != bool:          # an additive mask's -inf averaged into -inf or NaN
                raise TypeError(f"MeanPool: keep has dtype {keep.dtype}; wanted bool (True = a "
                                f"real token); for a 0/1 mask with 1 = real, pass "
                                f"keep.astype(bool)")
            weights = keep.astype(x.dtype)
            weights /= xp.maximum(weights.sum(axis=1, keepdims=True), 1)      # rows sum to 1
        self._save(weights)
        return (weights[:, None, :] @ x)[:, 0]                   # (b, 1, n) @ (b, n, d) -> (b, d)

    def backward(self, ds):
        weights = self._pop_cache()                                             # (b, n)
        return weights[:, :, None] * ds[:, None, :]                            # (b, n, d)
