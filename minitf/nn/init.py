"""Weight initialisation schemes, applied to a built module: one call re-draws its weight matrices.

    "normal"   what every layer draws when built: Linear's W ~ N(0, 1/d_in)   (kept as it is)
    "xavier"   Glorot & Bengio (2010), uniform:  W ~ U(−a, a),  a = √(6 / (fan_in + fan_out))

Why Xavier: a layer y = x W keeps the variance of its input in the forward pass when
Var(W) = 1/fan_in, and that of its gradient in the backward pass when Var(W) = 1/fan_out. Xavier
takes the compromise Var(W) = 2/(fan_in + fan_out); a uniform U(−a, a) has variance a²/3, hence
a = √(6/(fan_in + fan_out)). The original Transformer and its well-known annotated re-telling
start from it. Only the weight matrices of Linear layers are re-drawn (fan_in = d_in,
fan_out = d_out): biases stay 0, LayerNorm's γ, β stay 1, 0, and embedding tables keep theirs.
A fused projection such as W_qkv (d_model, 3·d_model) is drawn as the separate maps it holds
(``Linear.parts``): each of W_q, W_k, W_v gets the bound of a (d_model, d_model) layer, exactly
as if the three had been built apart.
"""
import math

from minitf.backend import get_array_module, rand
from minitf.nn.layers import Linear
from minitf.nn.module import Module
from minitf.validate import check_sizes

INITS = ("normal", "xavier")


def xavier_uniform(fan_in: int, fan_out: int):
    """(fan_in, fan_out) draws from U(−a, a), a = √(6 / (fan_in + fan_out)): variance
    2 / (fan_in + fan_out). From minitf's seeded generator, in the default float dtype."""
    check_sizes("xavier_uniform", fan_in=fan_in, fan_out=fan_out)
    bound = math.sqrt(6.0 / (fan_in + fan_out))
    return (2.0 * rand(fan_in, fan_out) - 1.0) * bound          # (fan_in, fan_out)


def check_init(init, where: str) -> None:
    """ValueError unless ``init`` names a scheme of INITS."""
    if init not in INITS:
        raise ValueError(f"{where}: init must be one of {INITS}; got {init!r}")


def initialize(module: Module, init: str = "normal") -> Module:
    """Re-draw the weight matrix of every Linear inside ``module`` by the scheme ``init``, in
    place (the Parameter objects are kept, so an optimizer built already still holds them).
    "normal" leaves the module as built. Returns the module."""
    check_init(init, "initialize")
    if not isinstance(module, Module):
        raise TypeError(f"initialize: module is a {type(module).__name__}; wanted a minitf module")
    if init == "xavier":
        for layer in module.modules():
            if isinstance(layer, Linear):
                xp = get_array_module(layer.W.data)
                blocks = [xavier_uniform(layer.d_in, width)                 # (d_in, width)
                          for width in (layer.parts or (layer.d_out,))]
                layer.W.data = xp.concatenate(blocks, axis=1).astype(layer.W.data.dtype,
                                                                     copy=False)
    return module
