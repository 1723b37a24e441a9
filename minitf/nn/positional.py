"""Positional modules. The first two add a position vector to each token's features; the third
produces a learned bias for the attention scores. (RoPE and ALiBi have no parameters: they are
options of MultiHeadAttention, which calls minitf.functional directly.)"""
import minitf.functional as F
from minitf.array_ops import sum_to_shape
from minitf.backend import get_array_module, is_int
from minitf.functional.positional import check_bucket_settings
from minitf.nn.module import Module
from minitf.nn.parameter import normal
from minitf.validate import check_float, check_int, check_real, plain_int


class SinusoidalPositionalEncoding(Module):
    """y = x + PE[offset : offset + n], the fixed sine/cosine table. No parameters.

    x: (..., n, d_model)  ->  y: (..., n, d_model).  Backward is the identity: PE is a constant.
    """

    def __init__(self, d_model: int, base: float = 10000.0):
        where = "SinusoidalPositionalEncoding"      # a bad one failed at the forward, unnamed
        check_int(d_model, "d_model", where, what="the width of each position's vector")
        check_real(base, "base", where, low=0)
        self.d_model, self.base = d_model, base

    def forward(self, x, offset: int = 0):
        self._check_input(x, "x", ("...", "n", ("d_model", self.d_model)))
        check_float(x, "x", type(self).__name__)     # no parameters to take the dtype from
        table = F.sinusoidal_table(x.shape[-2], self.d_model, offset=offset, base=self.base,
                                   dtype=x.dtype, xp=get_array_module(x))
        self._save(None)               # nothing to keep, but backward can tell a forward ran
        return x + table

    def backward(self, dy):
        self._pop_cache()
        return dy                      # the table is a constant: dy passes through unchanged


class LearnedPositionalEmbedding(Module):
    """y = x + P[offset : offset + n], with P a learned (max_len, d_model) table (GPT-2, BERT).

    x: (..., n, d_model)  ->  y: (..., n, d_model).  Positions beyond max_len have no vector.
    """

    def __init__(self, max_len: int, d_model: int, std: float = 0.02):
        where = "LearnedPositionalEmbedding"        # max_len 0 failed only at the forward
        check_int(max_len, "max_len", where, what="the number of positions it has vectors for")
        check_int(d_model, "d_model", where, what="the width of each vector")
        check_real(std, "std", where, low=0, low_open=False)
        self.max_len, self.d_model = max_len, d_model
        self.W = normal(max_len, d_model, std=std)

    def forward(self, x, offset: int = 0):
        self._check_input(x, "x", ("...", "n", ("d_model", self.d_model)))
        n = x.shape[-2]
        if not (is_int(offset) and 0 <= offset and offset + n <= self.max_len):
            check_int(plain_int(offset), "offset", "LearnedPositionalEmbedding", low=0,
                      what="the position of x's first token")
            raise ValueError(f"LearnedPositionalEmbedding: positions {offset}..{offset + n - 1} "
                             f"are outside the table; wanted positions below max_len="
                             f"{self.max_len}")
        self._save((offset, n))
        return x + self.W.data[offset:offset + n]

    def backward(self, dy):
        # BEGIN SOLUTION LearnedPositionalEmbedding.backward
        offset, n = self._pop_cache()
        # The same rows were added to every sequence of the batch: their gradients add up.
        self.W.grad[offset:offset + n] += sum_to_shape(dy, (n, self.d_model))
        return dy
        # END SOLUTION


class RelativePositionBias(Module):
    """T5's learned relative position bias: one number per head and distance bucket.

    forward(n_q, n_k) -> bias (h, n_q, n_k), to be added to the attention scores. It has no
    array input, so its backward(dbias) only fills the table's gradient and returns None.
    """

    def __init__(self, n_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True, std: float = 0.02):
        check_int(n_heads, "n_heads", "RelativePositionBias", what="the number of heads")
        check_bucket_settings(num_buckets, max_distance, bidirectional, "RelativePositionBias")
        self.n_heads, self.num_buckets = n_heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.table = normal(num_buckets, n_heads, std=std)

    def forward(self, n_q: int, n_k: int | None = None):
        buckets = F.relative_position_buckets(
            n_q, n_k, bidirectional=self.bidirectional, num_buckets=self.num_buckets,
            max_distance=self.max_distance, xp=get_array_module(self.table.data))
        bias, cache = F.relative_bias(self.table.data, buckets)
        self._save(cache)
        return bias

    def backward(self, dbias):
        self.table.grad += F.relative_bias_backward(dbias, self._pop_cache())
        return None
