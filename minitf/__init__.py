"""minitf: a small, exact Transformer framework written from scratch in NumPy.

Every forward *and* backward pass is written by hand -- there is no autograd -- and every one is
checked against finite differences (``python -m minitf gradcheck``). The same code runs on NumPy
or, through ``minitf.backend``, on CuPy.

    minitf.backend      the array shim: NumPy or CuPy, float32 or float64, seeded randomness
    minitf.functional   the math as pure forward/backward pairs
    minitf.nn           layers with parameters: attention, blocks, positional encodings
    minitf.gradcheck    finite-difference checks of any op or module
"""
from minitf import backend, functional, nn
from minitf.backend import precision, seed, use

__version__ = "0.1.0"
__all__ = ["backend", "functional", "nn", "use", "precision", "seed", "__version__"]
