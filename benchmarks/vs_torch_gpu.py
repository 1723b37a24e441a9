"""minitf on CuPy against PyTorch eager on CUDA: the same model, identical weights, one process.

    python benchmarks/vs_torch_gpu.py                   # default and large, 10 rounds
    python benchmarks/vs_torch_gpu.py --configs large --pairs 20

The GPU twin of vs_torch.py, and built from its pieces: the same torch model, weight copy,
checks and tables. What differs is where the arrays live (CuPy, torch's "cuda" device) and the
clock: GPU work is queued, so every timed call ends by waiting for both devices to finish.
Float32 throughout, TF32 off on both sides (torch's default for float32 matrix products, and
CuPy's unless CUPY_TF32=1), so both do the same arithmetic.
Measures the training step (with AdamW), forward only, KV-cache decoding per token, and the
floor: CuPy alone doing the step's matrix products. Each row is printed as soon as it is measured,
the tables at the end.
"""
import shlex
import sys

try:
    import cupy
    import torch
except ImportError as missing:
    sys.exit(f"vs_torch_gpu.py: needs CuPy and PyTorch, on a GPU ({missing.name} is not "
             f"installed): pip install 'minitf[gpu,torch]'")

import vs_torch as cpu  # noqa: E402
from configs import Config  # noqa: E402
from minitf import backend  # noqa: E402

CONFIGS = {
    "default": cpu.CONFIGS["default"],          # `minitf train`'s model
    "large": Config(512, 8, 8, 512, 32),
}


def sync():
    """Wait until both devices have finished everything queued so far."""
    cupy.cuda.get_current_stream().synchronize()
    torch.cuda.synchronize()


def synced(step):
    """``step``, then wait for the GPU: the time measured is the time the work took."""
    def run():
        step()
        sync()
    return run


def environment(rounds, warmup, vocab):
    properties = cupy.cuda.runtime.getDeviceProperties(0)
    name = properties["name"].decode() if isinstance(properties["name"], bytes) else properties["name"]
    return [f"GPU: {name}, {properties['totalGlobalMem'] / 2**30:.0f} GiB; "
            f"CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}, driver "
            f"{cupy.cuda.runtime.driverGetVersion()}",
            f"CuPy {cupy.__version__}, torch {torch.__version__}, float32, TF32 off "
            f"(torch allow_tf32={torch.backends.cuda.matmul.allow_tf32}), vocabulary {vocab}",
            f"{rounds} timed rounds after {warmup} warm-up rounds",
            f"command: python {shlex.join(sys.argv)}"]


def measure(name, args, rows):
    config = CONFIGS[name]
    shape = cpu.label(name, config)
    with backend.use("cupy"):
        ours, theirs = cpu.build(config, args.vocab)
        theirs.to("cuda")
        ids = backend.to_numpy(backend.randint(0, args.vocab, (config.batch, config.n + 1)))
        x, y = ids[:, :-1], ids[:, 1:]
        prompt = backend.to_numpy(backend.randint(0, args.vocab, (1, 1)))
        print(f"{name}: {cpu.check_same_loss(ours, theirs, x, y)}")
        print(f"{name}: {cpu.check_same_decoding(ours, theirs, prompt)}")
        cpu.time_steps(ours, theirs, x, y, config, args.vocab, args.pairs, args.warmup, rows,
                       shape, wait=synced)
        cpu.print_latest(name, rows, "train", "forward")
        cpu.time_decoding(ours, theirs, prompt, args.pairs, args.warmup, rows, name, sync)
        cpu.print_latest(name, rows, "decode")


def main():
    parser = cpu.parser_for(__doc__.splitlines()[0], CONFIGS)
    args = parser.parse_args()
    names = args.configs.split(",")
    if not set(names) <= set(CONFIGS):
        parser.error(f"--configs: wanted some of {list(CONFIGS)}; got {names}")
    rows = {what: [] for what in ("train", "forward", "decode")}
    for name in names:
        measure(name, args, rows)
    print("\n" + "\n".join(f"- {line}" for line in environment(args.pairs, args.warmup,
                                                                 args.vocab)))
    for what in rows:
        title, columns = cpu.TABLES[what]
        print("\n" + cpu.table(title, columns, rows[what]))


if __name__ == "__main__":
    main()
