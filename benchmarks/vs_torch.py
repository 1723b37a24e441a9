"""minitf against PyTorch (CPU, eager), on the same model with identical weights, in one process.

    python benchmarks/vs_torch.py                       # every config, 10 pairs
    python benchmarks/vs_torch.py --threads 1           # one BLAS thread and one torch thread
    python benchmarks/vs_torch.py --configs ref,long --pairs 20
    python benchmarks/vs_torch.py --quick               # smoke run: tiny only, 2 pairs, < 1 min

The model is a DecoderLM (pre-LN, tanh-GELU, tied head), float32, with learned positions, or at
the `default` config `minitf train`'s own model, with RoPE. Torch runs the same model built from
its own layers, with minitf's weights copied in (same_model.py). Measures: training step (with
AdamW), forward only, KV-cache decoding per token, peak memory of training (fresh process each),
and the BLAS floor: NumPy alone doing the step's matrix products. Timing alternates minitf, torch
and the floor, round after round; nothing is timed unless both models give the same loss and
the same decoding logits. Each row is printed as soon as it is measured (a run stopped by a time
limit keeps those), the tables at the end; benchmarks/RESULTS.md explains every column.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # its siblings, also when loaded
from configs import CONFIGS  # noqa: E402
from machine import THREAD_VARIABLES, blas_line, contention_line, cpu_line  # noqa: E402

# --threads must reach the BLAS before NumPy loads it: OpenBLAS and MKL read these variables
# once, at load time. threadpoolctl (if installed) then also sets the pool at run time and
# reports what the BLAS really uses; torch.set_num_threads sets torch's own pool.


def threads_in_argv():
    """The N of --threads N (or --threads=N), read before argparse runs: see above."""
    for i, arg in enumerate(sys.argv[:-1]):
        if arg == "--threads":
            return sys.argv[i + 1]
    return next((arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--threads=")), None)


if threads_in_argv():
    os.environ.update(dict.fromkeys(THREAD_VARIABLES, threads_in_argv()))

import numpy as np  # noqa: E402
try:
    import torch  # noqa: E402
except ImportError:
    sys.exit(f"{os.path.basename(sys.argv[0])}: needs PyTorch, the other side of the comparison "
             f"and the model its weights are copied into: pip install 'minitf[torch]'")

from minitf import backend  # noqa: E402
from minitf.generate import generate  # noqa: E402
from minitf.nn import no_grad  # noqa: E402

from same_model import (check_same_decoding, check_same_loss, no_sync,  # noqa: E402
                        on_device_of, optimizers, torch_decode)
import same_model  # noqa: E402

try:
    import threadpoolctl
except ImportError:
    threadpoolctl = None

DECODE_CONFIGS = ("ref", "default")
DECODE_AT = (64, 256)      # report the time per token near these tokens
WINDOW = 8                 # ... as the median of the WINDOW tokens ending there (one is too noisy)
# A decoding round is short (256 tokens, well under a second each) and one stall of a shared
# machine moves a whole window, so decoding gets this many times the rounds of the steps.
DECODE_ROUNDS_PER_PAIR = 3


def build(config, vocab):
    """minitf's model and torch's, identical weights, long enough for the decoding measure."""
    return same_model.build(config, vocab, max_len=max(config.n, 1 + DECODE_AT[-1]))


# -- the measured steps --------------------------------------------------------------------------

def steps(ours, theirs, x, y):
    """{measure: (minitf step, torch step)} for a teacher-forcing batch x, y (b, n), host arrays
    moved to each model's device."""
    tx, ty = on_device_of(theirs, x, y)
    x, y = backend.to_device(x), backend.to_device(y)
    optimizer, torch_optimizer = optimizers(ours, theirs)

    def minitf_train():
        ours.zero_grad()
        _, backward = ours.loss(x, y)
        backward()
        optimizer.step()

    def torch_train():
        torch_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(theirs(tx).flatten(0, 1), ty.flatten()).backward()
        torch_optimizer.step()

    def minitf_forward():              # as torch's: an inference forward, keeping nothing
        with no_grad():
            ours(x)

    @torch.no_grad()
    def torch_forward():
        theirs(tx)

    return {"train": (minitf_train, torch_train), "forward": (minitf_forward, torch_forward)}


def minitf_decode(ours, prompt, n_tokens, sync=no_sync):
    """Seconds per new token of minitf's cached greedy generation, (n_tokens,). ``sync`` waits
    for the device, so that each token is stamped when it is done, not when it is queued."""
    stamps = [time.perf_counter()]

    def stamp(ids):
        sync()
        stamps.append(time.perf_counter())
    generate(ours, backend.to_device(prompt), n_tokens, greedy=True, on_token=stamp)
    return np.diff(stamps)


def per_token_at(seconds):
    """{k: the median time of the WINDOW tokens ending at token k} for k in DECODE_AT."""
    return {k: median(seconds[k - WINDOW:k]) for k in DECODE_AT}


# -- the BLAS floor ------------------------------------------------------------------------------

def matmul_shapes(config, vocab, backward=True):
    """(a, b) shapes of every product a @ b of one step: per block q,k,v; q kᵀ; P v; W_o; W_1;
    W_2; then the head. Each has two in the backward, dA = dY Bᵀ and dB = Aᵀ dY."""
    d, h, n, m = config.d_model, config.n_heads, config.n, config.batch * config.n
    heads = (config.batch, h)
    block = [((m, d), (d, 3 * d)), ((*heads, n, d // h), (*heads, d // h, n)),
             ((*heads, n, n), (*heads, n, d // h)), ((m, d), (d, d)), ((m, d), (d, 4 * d)),
             ((m, 4 * d), (4 * d, d))]
    forward = block * config.n_layers + [((m, d), (d, vocab))]
    if not backward:
        return forward
    back = []
    for (*batch, i, k), (*_, j) in forward:
        back += [((*batch, i, j), (*batch, j, k)), ((*batch, k, i), (*batch, i, j))]
    return forward + back


def floor_step(shapes, torch_device=None, shared=False):
    """A step of matrix products alone, on random float32 operands made once, written into `out`:
    by minitf's array module (NumPy, or CuPy when it is active), or with ``torch_device``
    ("cpu", "cuda") by torch's own, whose matrix library is not NumPy's. The operands are drawn
    where they are used. Each product has its own, as each of the step's reads fresh arrays;
    ``shared`` draws them once per distinct shape instead: on a GPU, where a large config's
    would otherwise be tens of GiB, and its 50 MB cache is no help either way."""
    if torch_device is None:
        xp = backend.get_array_module()
        rng, matmul = xp.random.default_rng(0), xp.matmul

        def draw(shape):
            return rng.standard_normal(shape, dtype=xp.float32)
    else:
        rng, matmul = torch.Generator(torch_device).manual_seed(0), torch.matmul

        def draw(shape):
            return torch.randn(shape, generator=rng, device=torch_device)
    made = {}
    operands = []
    for a, b in shapes:
        if not shared or (a, b) not in made:
            A, B = draw(a), draw(b)
            made[a, b] = (A, B, A @ B)
        operands.append(made[a, b])

    def step():
        for a, b, out in operands:
            matmul(a, b, out=out)
    return step


# -- running and reporting -----------------------------------------------------------------------

def alternate(contestants, rounds, warmup):
    """Run the contestants in turn, warmup + rounds times; -> {name: [its result per round]}.
    A contestant returns its own measurement, or None to be timed whole (seconds)."""
    results = {name: [] for name in contestants}
    for r in range(warmup + rounds):
        for name, run in contestants.items():
            start = time.perf_counter()
            value = run()
            if r >= warmup:
                results[name].append(time.perf_counter() - start if value is None else value)
    return results


def compare(ours, theirs):
    """Cells: minitf's and torch's median in ms, and the ratio minitf/torch, median (min–max)."""
    ratios = [a / b for a, b in zip(ours, theirs)]
    return [f"{1e3 * median(ours):.2f}", f"{1e3 * median(theirs):.2f}",
            f"{median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"]


def rss_kib(field):
    """VmRSS (the RSS now) or VmHWM (its peak since the last reset), KiB; Linux only."""
    with open("/proc/self/status") as status:
        return int(dict(line.split(":", 1) for line in status)[field].split()[0])


def memory_child(framework, name, vocab):
    """In a fresh process: print the extra RSS (MiB) that two training steps of one framework
    need, above the RSS with both models built, just before the first step."""
    config = CONFIGS[name]
    ours, theirs = build(config, vocab)
    ids = backend.to_numpy(backend.randint(0, vocab, (config.batch, config.n + 1)))
    step = steps(ours, theirs, ids[:, :-1], ids[:, 1:])["train"][framework == "torch"]
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")          # reset the peak to now: importing torch peaked higher already
    before = rss_kib("VmRSS")
    step()
    step()                                                         # now with optimizer state
    print(json.dumps((rss_kib("VmHWM") - before) / 1024))


def peak_memory(framework, name, args):
    argv = [sys.executable, __file__, "--memory-child", framework, name, "--vocab", str(args.vocab)]
    argv += ["--threads", str(args.threads)] if args.threads else []
    return float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)


def environment(rounds, warmup, vocab):
    contention = contention_line(torch.get_num_threads())
    return [f"CPU: {cpu_line()}",
            f"NumPy {np.__version__}, torch {torch.__version__}, float32, vocabulary {vocab}",
            f"threads: torch {torch.get_num_threads()}; BLAS: {blas_line()}",
            *([f"note: {contention}"] if contention else []),
            f"{rounds} timed rounds after {warmup} warm-up rounds "
            f"({DECODE_ROUNDS_PER_PAIR * rounds} for decoding)",
            f"command: python {shlex.join(sys.argv)}"]


def time_steps(ours, theirs, x, y, config, vocab, rounds, warmup, rows, shape, wait=None):
    """Time the training step and the forward of both models beside both floors (the same
    matrix products by minitf's array module and by torch); append a row to rows["train"] and
    rows["forward"]. ``wait`` (GPU) makes each timed call wait for the device to finish."""
    device = str(theirs.tok.weight.device).split(":")[0]
    for what, (ours_step, theirs_step) in steps(ours, theirs, x, y).items():
        ours.train(what == "train")
        theirs.train(what == "train")
        shapes = matmul_shapes(config, vocab, backward=what == "train")
        shared = device != "cpu"
        contestants = {"minitf": ours_step, "torch": theirs_step,
                       "floor": floor_step(shapes, shared=shared),
                       "torch floor": floor_step(shapes, torch_device=device, shared=shared)}
        if wait is not None:
            contestants = {name: wait(run) for name, run in contestants.items()}
        times = alternate(contestants, rounds, warmup)
        t = {name: median(seconds) for name, seconds in times.items()}
        rows[what].append([shape, *compare(times["minitf"], times["torch"]),
                           f"{1e3 * t['floor']:.2f}", f"{1e3 * t['torch floor']:.2f}",
                           f"{t['minitf'] / t['floor']:.1f}", f"{t['torch'] / t['floor']:.1f}"])


def time_decoding(ours, theirs, prompt, rounds, warmup, rows, name, sync=no_sync):
    """Time cached greedy decoding of DECODE_AT[-1] tokens by both; append a row to
    rows["decode"]: each one's time per token near each of DECODE_AT, and the ratio."""
    n_tokens = DECODE_AT[-1]
    t = alternate({"minitf": lambda: per_token_at(minitf_decode(ours, prompt, n_tokens, sync)),
                   "torch": lambda: per_token_at(torch_decode(theirs, prompt, n_tokens,
                                                              sync=sync)[0])},
                  rounds, warmup)
    rows["decode"].append([name] + [cell for k in DECODE_AT for cell in
                                    compare([r[k] for r in t["minitf"]],
                                            [r[k] for r in t["torch"]])])


def label(name, config):
    """A config's row label: its name and shape, and RoPE where it rotates q and k."""
    rope = ", RoPE" if config.positional == "rope" else ""
    return (f"{name}: d {config.d_model}, {config.n_layers}×{config.n_heads} heads, "
            f"{config.batch} × {config.n}{rope}")


def measure(name, args, rounds, warmup, decode, rows):
    """Check, then time one config; append its row to each table of ``rows``."""
    config = CONFIGS[name]
    shape = label(name, config)
    ours, theirs = build(config, args.vocab)
    ids = backend.to_numpy(backend.randint(0, args.vocab, (config.batch, config.n + 1)))
    x, y = ids[:, :-1], ids[:, 1:]
    prompt = backend.to_numpy(backend.randint(0, args.vocab, (1, 1)))
    print(f"{name}: {check_same_loss(ours, theirs, x, y)}")
    if decode:
        print(f"{name}: {check_same_decoding(ours, theirs, prompt)}")
    time_steps(ours, theirs, x, y, config, args.vocab, rounds, warmup, rows, shape)
    print_latest(name, rows, "train", "forward")
    if decode:
        time_decoding(ours, theirs, prompt, DECODE_ROUNDS_PER_PAIR * rounds, warmup, rows, name)
        print_latest(name, rows, "decode")
    ours_mib, theirs_mib = (peak_memory(framework, name, args) for framework in ("minitf", "torch"))
    rows["memory"].append([shape, f"{ours_mib:.1f}", f"{theirs_mib:.1f}",
                           f"{ours_mib / theirs_mib:.2f}"])
    print_latest(name, rows, "memory")


def print_latest(name, rows, *measures):
    """The row just measured of each of ``measures``, at once: a run stopped by a time limit
    keeps what it measured (the tables come at the end)."""
    for what in measures:
        print(f"{name}: {what}: " + " | ".join(rows[what][-1][1:]), flush=True)


def table(title, header, rows):
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


TIMED = ["config", "minitf (ms)", "torch (ms)", "minitf/torch, median (min–max)",
         "floor (ms)", "torch's matmuls (ms)", "minitf/floor", "torch/floor"]
TABLES = {  # measure: (title, header)
    "train": ("Training step: forward, loss, backward, AdamW", TIMED),
    "forward": ("Forward only: logits, no gradient", TIMED),
    "decode": (f"KV-cache decoding, batch 1, greedy: ms per token, median of the {WINDOW} tokens "
               f"up to token k", ["config"] + [f"{what} @ {k}" for k in DECODE_AT
                                               for what in ("minitf", "torch", "minitf/torch")]),
    "memory": ("Peak memory of training: peak RSS over two steps minus RSS before the first, "
               "fresh process each", ["config", "minitf (MiB)", "torch (MiB)", "minitf/torch"]),
}


def limit_threads(threads):
    """torch's pool, and the BLAS's at run time too with threadpoolctl (see the top), to
    ``threads``; None leaves both to their defaults."""
    if threads:
        torch.set_num_threads(threads)
        if threadpoolctl is not None:
            threadpoolctl.threadpool_limits(threads)


def parser_for(description, configs):
    """The options this script and vs_torch_gpu.py share: which configs, rounds, vocabulary."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--configs", default=",".join(configs),
                        help="comma-separated, of: " + ", ".join(configs))
    parser.add_argument("--pairs", type=int, default=10, help="timed rounds (default 10)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first (default 3)")
    parser.add_argument("--vocab", type=int, default=100, help="vocabulary size (default 100)")
    return parser


def main():
    parser = parser_for(__doc__.splitlines()[0], CONFIGS)
    parser.add_argument("--threads", type=int, help="torch and BLAS threads (default: theirs)")
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny only, 2 rounds")
    parser.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit_threads(args.threads)
    if args.memory_child:
        return memory_child(*args.memory_child, args.vocab)
    names = ["tiny"] if args.quick else args.configs.split(",")
    if not set(names) <= set(CONFIGS):
        parser.error(f"--configs: wanted some of {list(CONFIGS)}; got {names}")
    rounds, warmup = (2, 1) if args.quick else (args.pairs, args.warmup)
    header = environment(rounds, warmup, args.vocab)
    rows = {what: [] for what in TABLES}
    for name in names:
        measure(name, args, rounds, warmup, args.quick or name in DECODE_CONFIGS, rows)
    print("\n" + "\n".join(f"- {line}" for line in header))
    for what, (title, columns) in TABLES.items():
        print("\n" + table(title, columns, rows[what]))


if __name__ == "__main__":
    main()
