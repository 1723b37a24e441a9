"""Two versions of minitf timed on the same step, taking turns: what one change buys.

    python benchmarks/compare_revisions.py HEAD~1                 # HEAD~1 against the working tree
    python benchmarks/compare_revisions.py HEAD~1 --configs default,long --rounds 40 --threads 1
    python benchmarks/compare_revisions.py main HEAD --measure forward
    python benchmarks/compare_revisions.py HEAD~1 --configs default,ref --measure decode

A is the first revision, B the second (by default ".", the working tree as it is, uncommitted
changes included); a revision is a directory that holds a minitf tree (an unpacked release, a copy
with a patch applied; no git needed; a path is looked for first), or else anything git names (a
commit, a branch, HEAD~1), unpacked with `git archive` into a temporary directory. Each version
runs in a process of its own, imports its own minitf, and builds the same model with the same
weights (seed 0) and the same batch. Then the two take turns: each round times one step of A and
one of B, the order swapped every round, so a change in the machine's load hits both alike.
Printed: each side's median ms, and the median and min–max of the per-round ratio B/A (below 1: B
is faster).

Why: on a shared machine the same code timed in two separate runs differs by 10–30 %, far more
than most changes buy; alternating in one run is what tells a 2 % gain from noise. Steps as
vs_torch.py's: `train` (forward, cross-entropy, backward, AdamW with `minitf train`'s settings),
`forward` (the logits), or `decode` (greedy generation with the KV cache of DECODE_TOKENS tokens
after a one-token prompt, timed as a whole and reported in ms per token). Both revisions must have
DecoderLM, its ``loss``, AdamW and ``generate`` as today. With ``--backend cupy`` both run on the
GPU, and each timed step ends by waiting for the GPU to finish it: CuPy only queues the work, so
without the wait a step's time would be the time to queue it.
"""
import argparse
import contextlib
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from configs import BETAS, CONFIGS, LR, WEIGHT_DECAY
from machine import THREAD_VARIABLES, device_wait

ROOT = Path(__file__).resolve().parents[1]          # the checkout this script belongs to
DECODE_TOKENS = 256                                 # as vs_torch.py's decoding measure


# -- a worker: one version of minitf, one step per line it reads -----------------------------------

def worker(source, name, measure, vocab, backend_name):
    """Runs in the child process: builds the model, says its first loss, then times one step for
    every line on stdin and answers with the seconds it took."""
    sys.path.insert(0, source)                 # this version's minitf, before any installed one
    import numpy as np
    from minitf import backend
    from minitf.generate import generate
    from minitf.models import DecoderLM
    from minitf import nn
    from minitf.optim import AdamW
    no_grad = getattr(nn, "no_grad", contextlib.nullcontext)      # older revisions: none

    config = CONFIGS[name]
    backend.use(backend_name)
    wait = device_wait(backend_name)
    backend.seed(0)
    # Decoding needs room for its tokens after the prompt; the other steps keep the config's n.
    max_len = max(config.n, 1 + DECODE_TOKENS) if measure == "decode" else config.n
    model = DecoderLM(vocab, config.d_model, config.n_heads, config.n_layers, max_len=max_len,
                      positional=config.positional)
    optimizer = AdamW(model, LR, betas=BETAS, weight_decay=WEIGHT_DECAY)
    ids = np.random.default_rng(0).integers(0, vocab, (config.batch, config.n + 1))
    x, y = backend.to_device(ids[:, :-1]), backend.to_device(ids[:, 1:])

    def train():
        model.zero_grad()
        _, backward = model.loss(x, y)
        backward()
        optimizer.step()

    def forward():
        # as vs_torch.py's forward: under no_grad(), which keeps nothing for a backward (since
        # the thirty-first entry of benchmarks/RESULTS.md; a revision older than it keeps its caches)
        with no_grad():
            model(x)

    def decode():
        generate(model, x[:1, :1], DECODE_TOKENS, greedy=True)

    step, per = {"train": (train, 1), "forward": (forward, 1),
                 "decode": (decode, DECODE_TOKENS)}[measure]
    loss, _ = model.loss(x, y)
    strays = sorted(module.__file__ for module_name, module in sys.modules.items()
                    if module_name.split(".")[0] == "minitf" and getattr(module, "__file__", None)
                    and not Path(module.__file__).is_relative_to(source))
    if strays:                 # an installed minitf filled in what this version lacks: not its own
        raise SystemExit(f"compare_revisions: the worker for {source} imported minitf modules "
                         f"from elsewhere: {', '.join(strays)}")
    print(repr(float(loss)), flush=True)
    for _ in sys.stdin:
        start = time.perf_counter()
        step()
        wait()                                 # on a GPU: its work done, not only queued
        print((time.perf_counter() - start) / per, flush=True)      # seconds per step or token


# -- the parent: unpack, start both, alternate ----------------------------------------------------

def unpack(revision, into):
    """The source of ``revision`` as a directory: "." is this checkout itself, and a directory
    with a minitf package in it is that tree as it is."""
    if revision == ".":
        return str(ROOT)
    if os.path.isfile(os.path.join(revision, "minitf", "__init__.py")):
        return os.path.abspath(revision)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", revision],
                             capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"compare_revisions: revision {revision!r} is not one git knows here: "
                         f"{archive.stderr.decode().strip().splitlines()[-1]}")
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    if not os.path.isfile(os.path.join(into, "minitf", "__init__.py")):
        raise SystemExit(f"compare_revisions: revision {revision!r} has no minitf package "
                         f"(minitf/__init__.py) to time")
    return into


class Version:
    """A worker process for one source tree and config; ``step()`` returns one step's seconds."""

    def __init__(self, source, name, args, env):
        self.source = source
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", source, "--configs", name,
             "--measure", args.measure, "--vocab", str(args.vocab), "--backend", args.backend],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        first = self.process.stdout.readline()
        if not first:
            raise SystemExit(f"compare_revisions: the worker for {source} stopped before its "
                             f"first step (its error is above)")
        self.loss = float(first)

    def step(self):
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise SystemExit(f"compare_revisions: the worker for {self.source} stopped during a "
                             f"step (its error is above)")
        return float(answer)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def compare(name, sources, args, env):
    """One config: warm-up rounds, then ``args.rounds`` alternating rounds. -> a table row."""
    a, b = (Version(source, name, args, env) for source in sources)
    try:
        difference = abs(b.loss - a.loss) / abs(a.loss)
        print(f"{name}: first loss A {a.loss:.7f}, B {b.loss:.7f} (relative difference "
              f"{difference:.1e}{'; the versions compute different things' * (difference > 1e-5)})")
        for _ in range(args.warmup):
            a.step(), b.step()
        times_a, times_b = [], []
        for round_ in range(args.rounds):
            if round_ % 2:                                     # B first in every other round
                times_b.append(b.step()), times_a.append(a.step())
            else:
                times_a.append(a.step()), times_b.append(b.step())
    finally:
        a.close(), b.close()
    ratios = [tb / ta for ta, tb in zip(times_a, times_b)]
    digits = 3 if args.measure == "decode" else 2           # a token takes well under 1 ms
    ms_a, ms_b = (f"{1000 * median(times):.{digits}f}" for times in (times_a, times_b))
    return (f"| {name} | {ms_a} | {ms_b} | "
            f"{median(ratios):.3f} ({min(ratios):.3f}–{max(ratios):.3f}) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", nargs="?", help="revision A (the baseline)")
    parser.add_argument("b", nargs="?", default=".",
                        help='revision B (default ".", the working tree)')
    parser.add_argument("--configs", default="default", help="comma-separated, of: "
                        + ", ".join(CONFIGS) + " (default: default)")
    parser.add_argument("--measure", default="train", choices=("train", "forward", "decode"))
    parser.add_argument("--rounds", type=int, default=30, help="timed rounds (default 30)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    parser.add_argument("--vocab", type=int, default=100, help="vocabulary size (default 100)")
    parser.add_argument("--threads", type=int, help="BLAS threads of both (default: the BLAS's)")
    parser.add_argument("--backend", default="numpy", choices=("numpy", "cupy"),
                        help="where both run (default numpy; cupy: on the GPU)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.configs.split(",")
    if not set(names) <= set(CONFIGS):
        parser.error(f"--configs: wanted some of {list(CONFIGS)}; got {args.configs!r}")
    if args.worker:
        return worker(args.worker, names[0], args.measure, args.vocab, args.backend)
    if args.a is None:
        parser.error("the revision A to compare against is missing (e.g. HEAD~1)")
    for option in ("rounds", "warmup"):
        if getattr(args, option) < (option == "rounds"):
            parser.error(f"--{option}: wanted at least {int(option == 'rounds')}; "
                         f"got {getattr(args, option)}")
    sys.path.insert(0, str(ROOT))         # this checkout's minitf, installed or not; a worker
    from minitf.backend import cupy_available     # imports its own, so not at the top
    if args.backend == "cupy" and not cupy_available():
        parser.error("--backend: cupy needs CuPy and a GPU, and this machine lacks one; got 'cupy'")
    env = dict(os.environ)
    if args.threads:         # the BLAS reads these once, when NumPy loads: before the workers start
        env.update(dict.fromkeys(THREAD_VARIABLES, str(args.threads)))
    print(f"command: python benchmarks/compare_revisions.py {shlex.join(sys.argv[1:])}")
    print(f"A = {args.a}, B = {args.b}; {args.measure} steps, {args.rounds} rounds after "
          f"{args.warmup} warm-up rounds; BLAS threads: {args.threads or 'its default'}; backend: "
          f"{args.backend}{' (each step waits for the GPU)' * (args.backend == 'cupy')}")
    with tempfile.TemporaryDirectory() as dir_a, tempfile.TemporaryDirectory() as dir_b:
        sources = unpack(args.a, dir_a), unpack(args.b, dir_b)
        rows = [compare(name, sources, args, env) for name in names]
    unit = "ms per token" if args.measure == "decode" else "ms"
    print(f"\n| config | A ({unit}) | B ({unit}) | B/A, median (min–max) |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
