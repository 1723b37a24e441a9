"""An instructor's own op, for 'minitf homework make --file': RMSNorm, with its backward marked as
a solution region and the check that grades it (check_<name> returns gradient-check cases)."""
from minitf.backend import get_array_module, randn
from minitf.gradcheck import FunctionCase


def rmsnorm(x, gamma, eps=1e-6):
    """y = γ ⊙ x̂,   x̂ = x / √(mean(x²) + ε), the mean over the last axis.

    x: (..., d)   gamma: (d,)   ->   y: (..., d), and the cache (x̂, 1/√(mean(x²) + ε), γ)
    """
    xp = get_array_module(x)
    rinv = 1.0 / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    x_hat = x * rinv
    return gamma * x_hat, (x_hat, rinv, gamma)


def rmsnorm_backward(dy, cache):
    """dy: (..., d);  cache: (x̂ (..., d), 1/√(mean(x²) + ε) (..., 1), γ (d,))
    ->  dx (..., d), dγ (d,)
    """
    # BEGIN SOLUTION
    x_hat, rinv, gamma = cache
    dx_hat = dy * gamma                       # the rms depends on every x_i: one path through it
    dx = (dx_hat - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True)) * rinv
    dgamma = (dy * x_hat).reshape(-1, dy.shape[-1]).sum(axis=0)
    return dx, dgamma
    # END SOLUTION


def check_rmsnorm_backward():
    """A different size on every axis, so a swapped axis raises instead of broadcasting."""
    def case(*shape):
        inputs = {"x": randn(*shape), "gamma": randn(shape[-1])}
        return FunctionCase(rmsnorm, rmsnorm_backward, inputs, ("x", "gamma"))
    return {"rows (4, 5)": case(4, 5), "batch (2, 3, 5)": case(2, 3, 5)}
