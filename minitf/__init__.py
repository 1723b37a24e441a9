"""minitf: a small, exact Transformer framework written from scratch in NumPy.

Every forward *and* backward pass is written by hand -- there is no autograd -- and every one is
checked against finite differences (``python -m minitf gradcheck``). The same code runs on NumPy
or, through ``minitf.backend``, on CuPy.

    minitf.backend      the array shim: NumPy or CuPy, float32 or float64, seeded randomness
    minitf.functional   the math as pure forward/backward pairs
    minitf.nn           layers with parameters: attention, blocks, positional encodings
    minitf.gradcheck    finite-difference checks of any op or module
"""
import sys

try:
    from minitf import backend, functional, nn
except SyntaxError as err:          # a file of minitf being edited: a homework's, say
    if sys.argv[:1] != ["-m"]:      # an import by code of one's own: Python's own traceback
        raise
    # `python -m minitf …` (argv[0] is "-m" while the package loads): the file, the line and
    # what is wrong there in one line, not five frames of runpy's first
    import os
    print(f"minitf: {os.path.relpath(err.filename or '?')}, line {err.lineno}: {err.msg}; "
          f"wanted Python that parses (fix that line, then run the command again)",
          file=sys.stderr)
    raise SystemExit(2) from None
from minitf.backend import precision, seed, use  # noqa: E402

__version__ = "0.1.0"
__all__ = ["backend", "functional", "nn", "use", "precision", "seed", "__version__"]
