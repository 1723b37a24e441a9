"""What a training step of `minitf train`'s model costs with other settings, relative to the first.

    python benchmarks/config_cost.py default rope:positional=rope wide:d_ff=768,batch_size=40

Each argument is NAME or NAME:KEY=VALUE,…, with keys of ``minitf train`` (batch_size, context,
d_model, n_heads, n_layers, d_ff, positional) over its defaults. One step is forward, loss,
backward and AdamW on random windows of the default corpus's vocabulary size (103). The models'
steps alternate, round after round, in one process with one BLAS thread, so that a slow moment of
a shared machine slows them all; the table gives each one's median and its ratio to the first's.
Used to keep a new default as cheap as the one it replaces.
"""
import argparse
import os
import statistics
import time

from machine import THREAD_VARIABLES

# One BLAS thread, set before NumPy loads its BLAS (which reads these once, at load time).
os.environ.update(dict.fromkeys(THREAD_VARIABLES, "1"))

from minitf import backend  # noqa: E402
from minitf.char_lm import RunConfig, _build_model  # noqa: E402
from minitf.optim import AdamW  # noqa: E402

KEYS = {"batch_size", "context", "d_model", "n_heads", "n_layers", "d_ff", "positional"}
VOCAB = 103


def parse(spec: str) -> tuple:
    """'name:key=value,…' -> (name, RunConfig)."""
    name, _, settings = spec.partition(":")
    changes = {}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        if key not in KEYS:
            raise SystemExit(f"{spec}: unknown key {key!r}; wanted one of {sorted(KEYS)}")
        changes[key] = value if key == "positional" else int(value)
    return name, RunConfig(**changes)


def training_step(config: RunConfig):
    model = _build_model(config, VOCAB)
    optimizer = AdamW(model, 1e-3)
    ids = backend.randint(0, VOCAB, (config.batch_size, config.context + 1))

    def step():
        model.zero_grad()
        _, backward = model.loss(ids[:, :-1], ids[:, 1:])
        backward()
        optimizer.step()
    return step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="+", metavar="NAME[:KEY=VALUE,…]")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (3)")
    args = parser.parse_args()
    steps = {name: training_step(config) for name, config in map(parse, args.configs)}
    times = {name: [] for name in steps}
    for round_ in range(args.warmup + args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            if round_ >= args.warmup:
                times[name].append(time.perf_counter() - start)
    first = statistics.median(next(iter(times.values())))
    print("| config | ms per step, median | ratio to the first |\n|---|---|---|")
    for spec, (name, seconds) in zip(args.configs, times.items()):
        median = statistics.median(seconds)
        print(f"| `{spec}` | {1e3 * median:.1f} | {median / first:.3f} |")


if __name__ == "__main__":
    main()
