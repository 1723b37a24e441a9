"""The sums a backward pass takes, each written several ways, timed at a training step's shapes.

    python benchmarks/reductions.py                      # NumPy
    python benchmarks/reductions.py --backend cupy       # CuPy, on a GPU

minitf.array_ops' ``sum_over_positions`` (a bias's or a layer norm's gradient, summed over positions),
``row_sum`` (Σ_i a_i of every row: layer norm's mean, softmax's denominator) and ``row_dot``
(Σ_i a_i b_i of every row: layer norm and softmax backward) chose their spelling from these
figures, and ``row_max`` (the maximum of every row: softmax's shift) too. Milliseconds per call,
the best of five runs of 30 calls.
"""
import argparse
import time

from configs import CONFIGS
from machine import device_wait

from minitf import array_ops, backend

DEFAULT = CONFIGS["default"]     # `minitf train`'s model: its activations, scores, logits over
B, N = DEFAULT.batch, DEFAULT.n  # about 100 characters; then other models' shapes
SHAPES = [(B, N, DEFAULT.d_model), (B, DEFAULT.n_heads, N, N), (B, N, 100), (16, 4, 64, 128),
          (16, 128, 1024), (32, 512, 512), (32, 512, 2048), (32, 8, 512, 512)]


def best_ms(call, backend_name, calls=30):
    """Milliseconds per call of ``call()``: the best of five runs of ``calls`` calls, after one to
    warm up. On CuPy each run ends by waiting for the GPU, so the time is the work's, not the
    queue's."""
    wait = device_wait(backend_name)
    call()
    best = float("inf")
    for _ in range(5):
        wait()
        start = time.perf_counter()
        for _ in range(calls):
            call()
        wait()
        best = min(best, (time.perf_counter() - start) / calls * 1e3)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=backend.BACKENDS)
    args = parser.parse_args()
    with backend.use(args.backend):
        xp = backend.get_array_module()
        for shape in SHAPES:
            a, b = backend.randn(*shape), backend.randn(*shape)
            d = shape[-1]
            rows_a, rows_b = a.reshape(-1, d), b.reshape(-1, d)
            ones = xp.ones(rows_a.shape[0], dtype=a.dtype)
            ways = {
                "Σ over positions: a.sum(axis=0) of (positions, d)": lambda: rows_a.sum(axis=0),
                "Σ over positions: ones @ a  (sum_over_positions)": lambda: ones @ rows_a,
                "Σ over positions of a⊙b: (a * b).sum(axis=0)": lambda: (rows_a * rows_b).sum(0),
                "Σ over positions of a⊙b: ones @ (a * b)": lambda: ones @ (rows_a * rows_b),
                "row sums: a.sum(-1, keepdims=True)": lambda: a.sum(-1, keepdims=True),
                "row sums: a @ ones((d, 1))": lambda: a @ xp.ones((d, 1), dtype=a.dtype),
                "row sums: row_sum (minitf's choice)": lambda: array_ops.row_sum(a),
                "row dots: (a * b).sum(-1, keepdims=True)": lambda: (a * b).sum(-1, keepdims=True),
                "row dots: einsum('...i,...i->...')": lambda: xp.einsum("...i,...i->...", a, b),
                "row dots: a[..., None, :] @ b[..., :, None]": lambda: a[..., None, :] @ b[..., :, None],
                "row dots: row_dot (minitf's choice)": lambda: array_ops.row_dot(a, b),
                "row maxima: a.max(-1, keepdims=True)": lambda: a.max(-1, keepdims=True),
                "row maxima: row_max (minitf's choice)": lambda: array_ops.row_max(a),
                "one elementwise product a * b, for scale": lambda: a * b,
            }
            print(f"\n{args.backend}, {shape}, float32")
            for name, call in ways.items():
                print(f"  {best_ms(call, args.backend):8.3f} ms  {name}")


if __name__ == "__main__":
    main()
