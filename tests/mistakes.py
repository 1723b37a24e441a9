"""Known-wrong backward passes, shared by the tests that prove a check can fail."""


def layer_norm_backward_without_variance(dy, cache):
    """layer_norm_backward with σ treated as a constant: only the path through μ is kept, so dx is
    wrong while dγ and dβ are right."""
    x_hat, rstd, gamma = cache
    dx_hat = dy * gamma
    dx = (dx_hat - dx_hat.mean(axis=-1, keepdims=True)) * rstd
    positions = tuple(range(dy.ndim - 1))
    return dx, (dy * x_hat).sum(axis=positions), dy.sum(axis=positions)
