"""The encoder–decoder's decoding, timed: greedy_decode and beam_search on a Transformer of one of
the benchmark configs' shapes, one source sentence of 16 tokens, at most 32 output tokens.

    OMP_NUM_THREADS=1 python benchmarks/translate_decode.py --configs tiny,ref --rounds 20

The model is untrained: its translations are nonsense, but the same nonsense on every run (seed
0), and a decoding step costs the same whatever the tokens. Printed per config: how many steps
greedy decoding took, its median ms per step (the source's encoding included, spread over the
steps), and beam search's median ms per sentence (beam 4). On a CPU with few cores, set the
BLAS's threads (OMP_NUM_THREADS) when comparing two runs: it reads them when NumPy loads.
"""
import argparse
import time
from statistics import median

import numpy as np

from configs import CONFIGS
from machine import blas_line, cpu_line
from minitf import backend
from minitf.generate import beam_search, greedy_decode
from minitf.models import Transformer

SOURCE_LENGTH, MAX_LEN, BEAM = 16, 32, 4


def time_config(name, rounds, vocab):
    """-> (steps, ms per greedy step, ms per beam-search sentence), medians over ``rounds``."""
    config = CONFIGS[name]
    backend.seed(0)
    model = Transformer(vocab, vocab, config.d_model, config.n_heads, config.n_layers, dropout=0.0)
    src = backend.to_device(np.random.default_rng(0).integers(3, vocab, (1, SOURCE_LENGTH)))
    _, logits = greedy_decode(model, src, MAX_LEN, return_logits=True)
    steps = logits.shape[1]
    greedy, beam = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        greedy_decode(model, src, MAX_LEN)
        middle = time.perf_counter()
        beam_search(model, src, BEAM, MAX_LEN)
        greedy.append((middle - start) / steps)
        beam.append(time.perf_counter() - middle)
    return steps, 1000 * median(greedy), 1000 * median(beam)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="tiny,ref",
                        help="comma-separated, of: " + ", ".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=20, help="timed rounds (default 20)")
    parser.add_argument("--vocab", type=int, default=100, help="vocabulary size (default 100)")
    args = parser.parse_args()
    names = args.configs.split(",")
    if not set(names) <= set(CONFIGS):
        parser.error(f"--configs: wanted some of {list(CONFIGS)}; got {args.configs!r}")
    if args.rounds < 1:
        parser.error(f"--rounds: wanted at least 1; got {args.rounds}")
    time_config(names[0], 1, args.vocab)                          # warm-up: imports, caches
    print(f"- CPU: {cpu_line()}\n- NumPy {np.__version__}, float32, vocabulary {args.vocab}, "
          f"{args.rounds} rounds\n- BLAS: {blas_line()}\n")
    print("| config | greedy steps | greedy, ms per step | beam search (4), ms per sentence |\n"
          "|---|---|---|---|")
    for name in names:
        steps, greedy_ms, beam_ms = time_config(name, args.rounds, args.vocab)
        print(f"| {name} | {steps} | {greedy_ms:.3f} | {beam_ms:.2f} |")


if __name__ == "__main__":
    main()
