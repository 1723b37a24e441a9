"""Elementwise nonlinearities and dropout.

    relu:     y = max(x, 0)
    gelu:     y = x Φ(x)           Φ the standard normal CDF (or its tanh approximation)
    dropout:  y = x m / (1 − p)    m_i ~ Bernoulli(1 − p), during training only
"""
import math

from minitf.array_ops import elementwise_in_blocks
from minitf.backend import erf, float_errors_ignored, get_array_module, rand
from minitf.validate import (at_the_boundary, check_array, check_flags, check_float,
                             check_probability)
from minitf.validate_gradients import gradient_of

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def relu(x):
    """y = max(x, 0).   x: (...)  ->  y: (...)"""
    check_array(x, "x", "relu")
    xp = get_array_module(x)
    return xp.maximum(x, 0), x > 0


@gradient_of("relu's y", lambda positive: positive.shape)
def relu_backward(dy, cache):
    """dx = dy where x > 0, else 0 (the slope is 1 or 0)."""
    # BEGIN SOLUTION relu_backward
    positive = cache
    return dy * positive
    # END SOLUTION


def gelu(x, approximate="tanh", keep_cache=True):
    """Gaussian Error Linear Unit: y = x Φ(x), the input weighted by how likely it is to be "on".

    approximate="none":  Φ(x) = ½ (1 + erf(x / √2))                      (exact; BERT)
    approximate="tanh":  Φ(x) ≈ ½ (1 + tanh(√(2/π) (x + 0.044715 x³)))    (GPT-2; no erf needed)
    x: (...)  ->  y: (...)
    The cache keeps Φ(x) in both cases, for the backward. (gelu_backward is the plain math on
    whole arrays; nn.GELU runs it a block at a time, as this runs tanh-GELU's forward.)
    keep_cache=False: no backward follows (nn.no_grad()), so Φ need not be kept and y is made
    over it in place: the same y, one array of x's size fewer, and the cache is None.
    """
    check_float(x, "x", "gelu")
    check_flags("gelu", keep_cache=keep_cache)
    if approximate == "none":
        cdf = 0.5 * (1.0 + erf(x * (1.0 / math.sqrt(2.0))))
        y = get_array_module(x).multiply(x, cdf, out=None if keep_cache else cdf)
        return y, ((x, cdf, approximate) if keep_cache else None)
    if approximate == "tanh":
        # Φ is seven passes over an array of x's size, and x Φ an eighth: a block at a time, all
        # but the first read the block from the core's own cache (array_ops.elementwise_in_blocks)
        if not keep_cache:
            return elementwise_in_blocks(_gelu_tanh_output, x), None
        cdf, y = elementwise_in_blocks(_gelu_tanh, x)
        return y, (x, cdf, approximate)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh'; got {approximate!r}")


def _gelu_tanh(x):
    """(Φ(x), x Φ(x)) for tanh-GELU: what its backward keeps, and the output.

    Φ comes first because elementwise_in_blocks makes its arrays in this order, and the heap
    fares better with the array that stays (Φ, until the backward) made before the one that soon
    goes (y, once W_2 has read it): the other way round, a training step of the model `minitf
    train` had when this was measured (52 windows) peaked at 88.7 MiB of RSS, not 79.0
    (benchmarks/RESULTS.md, twenty-first entry)."""
    cdf = _gelu_tanh_cdf(x)
    return cdf, x * cdf


def _gelu_tanh_output(x):
    """x Φ(x) for tanh-GELU alone, made over Φ in place (the same product as _gelu_tanh's)."""
    y = _gelu_tanh_cdf(x)
    y *= x
    return y


def _gelu_tanh_cdf(x):
    """Φ(x) ≈ ½ (1 + tanh u), u = √(2/π) (x + 0.044715 x³), built in one new array in place.

    ½ (1 + tanh u) is the logistic sigmoid 1 / (1 + e^(−2u)) -- the same number, as
    tanh u = (1 − e^(−2u)) / (1 + e^(−2u)) -- so one exp does it: tanh is several times slower
    than exp on some CPUs (an AMD EPYC without AVX-512, benchmarks/RESULTS.md, 2026-11-25).
    The constants are folded, −2u = x (−2√(2/π) − 2·0.044715·√(2/π) x²), so that the
    (b, n, d_ff) hidden layer is passed over seven times, not nine.
    x: (...)  ->  (...) in (0, 1)"""
    xp = get_array_module(x)
    z = x * x
    z *= -2.0 * _SQRT_2_OVER_PI * _GELU_CUBIC
    z += -2.0 * _SQRT_2_OVER_PI
    z *= x                                   # z = −2u
    with float_errors_ignored("over"):       # u ≪ 0: e^(−2u) = inf, and 1 / (1 + inf) = 0, exact
        xp.exp(z, out=z)
    z += 1.0
    # 1 / z by divide, not reciprocal: the same numbers, but NumPy runs divide in the CPU's
    # widest vectors and reciprocal in 128-bit ones only (1.3-1.8 x as long on the hidden
    # layer; benchmarks/RESULTS.md, tenth entry)
    return xp.divide(1.0, z, out=z)


@gradient_of("gelu's y", lambda cache: cache[0].shape)             # x's shape
def gelu_backward(dy, cache):
    """Derivative of y = x Φ(x) by the product rule.

    exact:  dy/dx = Φ(x) + x φ(x),   φ(x) = exp(−x²/2) / √(2π)
    tanh:   with u = √(2/π)(x + 0.044715 x³) and Φ = ½ (1 + tanh u), y = x Φ, so
            dy/dx = Φ + x (dΦ/du) (du/dx),   dΦ/du = ½ (1 − tanh² u) = 2 Φ (1 − Φ),
            du/dx = √(2/π) (1 + 3·0.044715 x²)
    """
    # BEGIN SOLUTION gelu_backward
    x, cdf, approximate = cache
    xp = get_array_module(x)
    if approximate == "none":
        pdf = xp.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
        return dy * (cdf + x * pdf)
    return dy * _gelu_tanh_slope(x, cdf)
    # END SOLUTION


def _gelu_tanh_slope(x, cdf):
    """dy/dx = Φ + 2 x Φ (1 − Φ) du/dx for tanh-GELU, built in two arrays in place, the constants
    folded: written as one expression it makes ten temporaries of the (b, n, d_ff) hidden layer.
    x, cdf: (...)  ->  (...)"""
    # BEGIN SOLUTION gelu_backward
    xp = get_array_module(x)
    slope = x * x
    slope *= 6.0 * _SQRT_2_OVER_PI * _GELU_CUBIC
    slope += 2.0 * _SQRT_2_OVER_PI                 # 2 du/dx, its constants folded
    slope *= x                                     # 2 x du/dx
    spread = cdf * cdf
    xp.subtract(cdf, spread, out=spread)           # Φ (1 − Φ), in place
    slope *= spread
    slope += cdf                                   # Φ + 2 x Φ (1 − Φ) du/dx
    return slope
    # END SOLUTION


@at_the_boundary
def _check_dropout(x, p, training):
    """dropout's arguments, as one check that a model's layers skip: a Dropout layer checked its p
    when it was made and passes its own mode, and a generated token passes nine dropouts."""
    check_float(x, "x", "dropout")
    check_probability(p, "p", "dropout")
    check_flags("dropout", training=training)       # 'no' is truthy: it would drop all the same


def dropout(x, p, training=True):
    """Inverted dropout: zero each entry with probability p and scale the rest by 1 / (1 − p).

    The scaling keeps E[y] = x during training, so at evaluation time (training=False) dropout is
    simply the identity. The mask is drawn from minitf's seeded generator (minitf.backend.seed).
    x: (...)  ->  y: (...)
    """
    _check_dropout(x, p, training)
    if not training or p == 0.0:
        return x, None
    keep = rand(*x.shape, dtype=x.dtype, like=x) >= p
    scale = keep * x.dtype.type(1.0 / (1.0 - p))      # (...) entries 0 or 1/(1-p)
    return x * scale, scale


@gradient_of("dropout's y", lambda scale: None if scale is None else scale.shape)
def dropout_backward(dy, cache):
    """y = x · scale elementwise, so dx = dy · scale (the same mask as the forward)."""
    # BEGIN SOLUTION dropout_backward
    scale = cache
    return dy if scale is None else dy * scale
    # END SOLUTION
