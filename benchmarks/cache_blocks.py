"""Would work that passes over an array several times be faster a block of rows at a time, here?

    python benchmarks/cache_blocks.py
    python benchmarks/cache_blocks.py --blocks 16384,65536 --rounds 10

A layer norm, a GELU or a softmax is several NumPy calls, and each call is a pass over the whole
array. Where one core reads memory outside its own cache slowly (about 21 GB/s on the Intel Xeon
of the fifteenth entry of benchmarks/RESULTS.md, against 110 GB/s on the AMD EPYCs), every pass
pays that price. Done a block of rows at a time, a block small enough to stay in the core's own
cache, only a block's first pass reads from memory and the rest from the cache; but every block
makes all the calls again, which costs Python time.

This script times minitf's own functions at the default model's shapes (`minitf train`'s, as
benchmarks/configs.py gives them, d_ff 4 · d_model), forward and backward, once on the whole array
and once on blocks of rows of each size given (in elements: a block of 65,536 float32 is 256 KiB),
each block's result written into one output array. Each call checks its arguments again, as a layer
called on each block would, and a blocked implementation would not: the blocks here are, if
anything, a little slower than they could be; a block as large as the array times that harness alone
(the copy into the output). One thread; milliseconds per call, the best of five runs of `--rounds`
calls. Only NumPy: on a GPU blocks do not pay (see ``array_ops.blocks_pay_off``). The last column
counts each function's calls in one training step of the default model, and the line under the table
adds up what the best block size of each would change in such a step (GELU's forward and backward
already run in blocks of ``array_ops.ELEMENTWISE_BLOCK`` there; here they are timed whole and in the
script's blocks). A second table says why, or why not: how fast one core adds two arrays into a
third, from arrays that fit in its own cache to arrays that fit in none. A caution: called again and
again, an array stays in a large L3 between calls, which a training step, passing over its other
arrays in between, does not allow; on such a CPU this script leans against blocks, and a step timed
with compare_revisions.py decides (benchmarks/RESULTS.md, nineteenth entry).
"""
import argparse
import shlex
import sys

import numpy as np
from configs import CONFIGS
from machine import blas_line, cpu_line
from reductions import best_ms

import minitf.functional as F
from minitf import array_ops, backend

DEFAULT = CONFIGS["default"]
POSITIONS, N = DEFAULT.batch * DEFAULT.n, DEFAULT.n
D_MODEL, D_FF, HEADS = DEFAULT.d_model, 4 * DEFAULT.d_model, DEFAULT.n_heads
LAYERS = DEFAULT.n_layers     # each block: two layer norms, one GELU, one attention softmax
MEMORY_SIZES_KIB = (64, 256, 1024, 4096, 16384, 65536)          # one array of float32


def in_row_blocks(fn, arrays, rows):
    """fn applied to ``rows`` rows of every array at a time, its results in one array."""
    out = None
    for start in range(0, arrays[0].shape[0], rows):
        part = fn(*(a[start:start + rows] for a in arrays))
        if out is None:
            out = np.empty((arrays[0].shape[0], *part.shape[1:]), dtype=part.dtype)
        out[start:start + rows] = part
    return out


class whole_arrays:
    """``with whole_arrays():`` minitf's own blocks off (array_ops.ELEMENTWISE_BLOCK larger than any
    array), so that "whole" times the whole array and the blocks are only the script's."""

    def __enter__(self):
        self.block, array_ops.ELEMENTWISE_BLOCK = array_ops.ELEMENTWISE_BLOCK, sys.maxsize

    def __exit__(self, *exc_info):
        array_ops.ELEMENTWISE_BLOCK = self.block


def cases():
    """(name, fn, arrays, calls): fn takes rows of the arrays and returns one array of results;
    calls: how many times a training step of the default model runs it (a final layer norm too)."""
    x = backend.randn(POSITIONS, D_MODEL)                                  # a block's input
    gamma, beta = backend.randn(D_MODEL), backend.randn(D_MODEL)
    _, (x_hat, rstd, _) = F.layer_norm(x, gamma, beta)
    h = backend.randn(POSITIONS, D_FF)                                     # the hidden layer
    _, (_, cdf, _) = F.gelu(h)
    scores = backend.randn(POSITIONS * HEADS, N)                           # one query per row
    probs, _ = F.softmax(scores)
    dy = {d: backend.randn(POSITIONS * (HEADS if d == N else 1), d) for d in (D_MODEL, D_FF, N)}
    return [
        ("layer norm, forward", lambda x: F.layer_norm(x, gamma, beta)[0], [x], 2 * LAYERS + 1),
        ("layer norm, backward", lambda dy, x_hat, rstd: F.layer_norm_backward(
            dy, (x_hat, rstd, gamma))[0], [dy[D_MODEL], x_hat, rstd], 2 * LAYERS + 1),
        ("GELU, forward", lambda h: F.gelu(h)[0], [h], LAYERS),
        ("GELU, backward", lambda dy, h, cdf: F.gelu_backward(dy, (h, cdf, "tanh")),
         [dy[D_FF], h, cdf], LAYERS),
        ("softmax, forward", lambda s: F.softmax(s)[0], [scores], LAYERS),
        ("softmax, backward", lambda dp, p: F.softmax_backward(dp, (p, -1)), [dy[N], probs],
         LAYERS),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", default="16384,65536,262144,1048576",
                        help="block sizes in elements, comma-separated")
    parser.add_argument("--rounds", type=int, default=20, help="calls per timed run (20)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (1)")
    args = parser.parse_args()
    try:
        blocks = [int(b) for b in args.blocks.split(",")]
    except ValueError:
        blocks = []
    if not blocks or min(blocks) < 1024:
        parser.error(f"--blocks: wanted whole numbers of elements, each 1024 or more; got "
                     f"{args.blocks!r}")
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(args.threads)
    except ImportError:
        print("(threadpoolctl is not installed: the BLAS keeps its own threads)")
    print(f"- CPU: {cpu_line()}\n- NumPy {np.__version__}, float32; BLAS: {blas_line()}; the "
          f"best of five runs of {args.rounds} calls\n"
          f"- command: python {shlex.join(sys.argv)}\n")
    print("| function (rows × width) | whole (ms) | " + " | ".join(
        f"blocks of {b:,} (ms)" for b in blocks) + " | best / whole | calls per step |")
    print("|---|---|" + "---|" * len(blocks) + "---|---|")
    change, now = 0.0, 0.0                     # ms per default step: what blocks would change
    with backend.use("numpy"), backend.seed(0), whole_arrays():
        for name, fn, arrays, calls in cases():
            whole = fn(*arrays)
            times = [best_ms(lambda: fn(*arrays), "numpy", args.rounds)]
            for block in blocks:
                rows = max(1, block // arrays[0].shape[1])
                blocked = in_row_blocks(fn, arrays, rows)
                if not np.allclose(blocked, whole, rtol=1e-5, atol=1e-6):
                    raise SystemExit(f"{name}: in blocks of {block} the result differs")
                times.append(best_ms(lambda: in_row_blocks(fn, arrays, rows), "numpy",
                                     args.rounds))
            shape = " × ".join(str(n) for n in arrays[0].shape)
            print(f"| {name} ({shape}) | " + " | ".join(f"{t:.3f}" for t in times)
                  + f" | {min(times[1:]) / times[0]:.2f} | {calls} |", flush=True)
            change += calls * (min(times[1:]) - times[0])
            now += calls * times[0]
    print(f"\nIn a training step of the default model these calls take {now:.2f} ms on whole "
          f"arrays; the best block size of each would change that by {change:+.2f} ms.")
    print_memory_speed(args.rounds)


def print_memory_speed(rounds):
    """How fast one core adds two arrays into a third, by their size: the speed drops where three
    arrays no longer fit in a cache, and what it drops to is what every pass over a larger array
    runs at. GB/s counts the bytes read and written, 3 × the array's."""
    print("\n| one array (KiB) | " + " | ".join(f"{kib:,}" for kib in MEMORY_SIZES_KIB) + " |")
    print("|---|" + "---|" * len(MEMORY_SIZES_KIB))
    speeds = []
    for kib in MEMORY_SIZES_KIB:
        a, b, out = (np.ones(kib * 256, dtype=np.float32) for _ in range(3))
        seconds = best_ms(lambda: np.add(a, b, out=out), "numpy", rounds) / 1e3
        speeds.append(3 * a.nbytes / seconds / 1e9)
    print("| `np.add(a, b, out=o)`, GB/s | " + " | ".join(f"{v:.0f}" for v in speeds) + " |")


if __name__ == "__main__":
    main()
