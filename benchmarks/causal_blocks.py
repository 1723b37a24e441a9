"""Causal self-attention, forward and backward, in blocks of queries of several sizes.

    OPENBLAS_NUM_THREADS=1 python benchmarks/causal_blocks.py   # NumPy, one BLAS thread
    python benchmarks/causal_blocks.py --backend cupy    # CuPy, on a GPU

``F.causal_attention`` runs the attention ``block`` queries at a time, over the keys each block
can see, so the scores above the diagonal are never computed (``F.CAUSAL_BLOCK`` = 64 is what
``MultiHeadAttention`` uses). One block of all n queries is the whole masked attention: the
baseline. Each row is milliseconds per forward and backward, the best of five runs of 30 calls;
the last column divides by the baseline's time.
"""
import argparse

from configs import CONFIGS
from reductions import best_ms

from minitf import backend
from minitf import functional as F

DEFAULT = CONFIGS["default"]     # vs_torch.py's default config, `minitf train`'s model
SHAPES = {                      # (batch, heads, n, d_head) of a block's attention
    "default": (DEFAULT.batch, DEFAULT.n_heads, DEFAULT.n, DEFAULT.d_model // DEFAULT.n_heads),
    "long": (4, 4, 512, 64),    # vs_torch.py's long config
    "large": (32, 8, 512, 64),  # vs_torch_gpu.py's large config
}
BLOCKS = (32, 64, 128, 256)


def forward_backward(q, k, v, dout, block):
    out, cache = F.causal_attention(q, k, v, block=block)
    return F.causal_attention_backward(dout, cache)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=backend.BACKENDS)
    parser.add_argument("--shapes", nargs="+", default=["long", "large"], choices=list(SHAPES))
    args = parser.parse_args()
    with backend.use(args.backend):
        for name in args.shapes:
            shape = SHAPES[name]
            n = shape[2]
            q, k, v, dout = (backend.randn(*shape) for _ in range(4))
            whole = best_ms(lambda: forward_backward(q, k, v, dout, n), args.backend)
            print(f"\n{args.backend}, {name} {shape}, float32: forward + backward, ms per call")
            print(f"  {whole:8.2f} ms  {'one block of ' + str(n) + ' (the whole)':<32} 1.00")
            for block in (block for block in BLOCKS if block < n):
                ms = best_ms(lambda: forward_backward(q, k, v, dout, block), args.backend)
                label = f"blocks of {block} ({-(-n // block)} blocks)"
                print(f"  {ms:8.2f} ms  {label:<32} {ms / whole:.2f}")


if __name__ == "__main__":
    main()
