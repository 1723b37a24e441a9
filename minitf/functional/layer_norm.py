"""Layer normalization: each position's feature vector rescaled to mean 0 and variance 1.

    y = γ ⊙ (x − μ) / √(σ² + ε) + β
"""
from minitf.array_ops import row_dot, row_sum, sum_over_positions
from minitf.backend import get_array_module
from minitf.validate import at_the_boundary, check_flags, check_float, check_real, check_shape
from minitf.validate_gradients import gradient_of


@at_the_boundary
def _check_layer_norm(x, gamma, beta, eps, keep_cache):
    """layer_norm's arguments, skipped as one call inside a model (see linear's)."""
    check_real(eps, "eps", "layer_norm", low=0, low_open=False)     # ε < 0: rows blow up
    check_flags("layer_norm", keep_cache=keep_cache)
    check_float(x, "x", "layer_norm")                               # integers: a float64 copy
    check_shape(gamma, "gamma", ("d",), "layer_norm")
    check_shape(x, "x", ("...", ("d", gamma.shape[0])), "layer_norm")
    check_shape(beta, "beta", (("d", gamma.shape[0]),), "layer_norm")


def layer_norm(x, gamma, beta, eps=1e-5, keep_cache=True):
    """Normalize over the last axis, then scale by γ and shift by β.

    μ and σ² are the mean and the *biased* variance (divide by d, not d − 1) of the d features;
    ε sits inside the square root, so a constant vector gives 0 rather than 0/0 (for ε > 0;
    ε = 0 is allowed, and a constant vector then gives NaN). Below, s names that root,
    s = √(σ² + ε), so that σ keeps its meaning (the root of the variance, without ε).
    x: (..., d)   gamma, beta: (d,)   ->   y: (..., d)
    keep_cache=False: no backward follows (nn.no_grad()), so x̂ need not be kept and γ, β are
    applied over it in place: the same y, one array of x's size fewer, and the cache is None.
    """
    _check_layer_norm(x, gamma, beta, eps, keep_cache)
    xp = get_array_module(x)
    mu = row_sum(x) / x.shape[-1]                         # (..., 1)   mean of x
    x_c = x - mu                                          # (..., d)   x − μ, centred
    var = row_dot(x_c, x_c) / x.shape[-1]                 # (..., 1)   σ², the mean of (x − μ)²
    rstd = 1.0 / xp.sqrt(var + eps)                       # (..., 1)   1/s
    x_hat = xp.multiply(x_c, rstd, out=x_c)               # (..., d)   x̂ = (x − μ)/s, over x_c
    y = xp.multiply(x_hat, gamma, out=None if keep_cache else x_hat)    # (..., d)   γ x̂
    y += beta                                             # in place: one array, not two
    return y, ((x_hat, rstd, gamma) if keep_cache else None)


@gradient_of("layer_norm's y", lambda cache: cache[0].shape)     # x̂'s shape
def layer_norm_backward(dy, cache):
    """Gradients of y = γ x̂ + β, x̂ = (x − μ) / s,  s = √(σ² + ε).

    μ and s depend on every x_i of the row: ∂μ/∂x_i = 1/d, and ∂σ²/∂x_i = 2(x_i − μ)/d (the
    term through μ, −2/d · Σ_j (x_j − μ) · ∂μ/∂x_i, is 0: deviations from the mean sum to 0), so
    ∂s/∂x_i = x̂_i/d. Hence ∂x̂_j/∂x_i = (δ_ij − 1/d − x̂_j x̂_i/d) / s, and with dx̂ = dy ⊙ γ,
    dx_i = Σ_j dx̂_j ∂x̂_j/∂x_i:
        dx = (dx̂ − mean(dx̂) − x̂ ⊙ mean(dx̂ ⊙ x̂)) / s
    The first mean is the path through μ, the second the path through s (through σ²).
        dγ = Σ_positions dy ⊙ x̂,     dβ = Σ_positions dy
    """
    # BEGIN SOLUTION layer_norm_backward
    x_hat, rstd, gamma = cache
    d = x_hat.shape[-1]
    dy_x_hat = dy * x_hat                                     # (..., d)   dγ's summand
    dgamma = sum_over_positions(dy_x_hat)                     # (d,)
    dbeta = sum_over_positions(dy)                            # (d,)
    # With dx̂ = dy ⊙ γ both means are rows against the one vector γ, which needs no dx̂ ⊙ x̂:
    #   Σ_i dx̂_i = Σ_i dy_i γ_i,   Σ_i dx̂_i x̂_i = Σ_i (dy ⊙ x̂)_i γ_i
    mean_dx_hat = row_dot(dy, gamma) / d                      # (..., 1)
    mean_dx_hat_x_hat = row_dot(dy_x_hat, gamma) / d          # (..., 1)
    dx = (dy * gamma - mean_dx_hat - x_hat * mean_dx_hat_x_hat) * rstd    # dy ⊙ γ is dx̂
    return dx, dgamma, dbeta
    # END SOLUTION
