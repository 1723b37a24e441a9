"""Parameter: a learnable array and the gradient accumulated into it, and the three ways
minitf's layers make one (drawn from a normal distribution, zeros, ones).
"""
from __future__ import annotations

from minitf.backend import float_dtype, get_array_module, is_array, randn


class Parameter:
    """A learnable array ``data`` and the gradient ``grad`` accumulated into it (same shape)."""

    def __init__(self, data):
        if not is_array(data) or data.dtype.kind != "f":
            got = f"dtype {data.dtype}" if is_array(data) else f"a {type(data).__name__}"
            raise TypeError(f"Parameter: data has {got}; wanted a float array (e.g. "
                            f"minitf.backend.randn(d_in, d_out))")
        self.data = data
        self.grad = get_array_module(data).zeros_like(data)

    @property
    def shape(self):
        return self.data.shape

    def __repr__(self):
        return f"Parameter(shape={tuple(self.data.shape)}, dtype={self.data.dtype})"


def normal(*shape: int, std: float) -> Parameter:
    """A parameter drawn from N(0, std²) by minitf's seeded host generator."""
    return Parameter(randn(*shape, std=std))


def zeros(*shape: int) -> Parameter:
    """A parameter of zeros (biases, β) in the default float dtype."""
    return Parameter(get_array_module().zeros(shape, dtype=float_dtype()))


def ones(*shape: int) -> Parameter:
    """A parameter of ones (γ) in the default float dtype."""
    return Parameter(get_array_module().ones(shape, dtype=float_dtype()))
