"""Where a minitf training step's time goes, function by function, on NumPy or on a GPU.

    python benchmarks/step_profile.py --config ref
    python benchmarks/step_profile.py --backend cupy --config large
    python benchmarks/step_profile.py --config default --forward --threads 1
    python benchmarks/step_profile.py --config default --forward --threads 1 --torch

Times every function of ``minitf.functional``, ``minitf.array_ops`` and the shim
(``minitf.backend``), and the optimizer's step, between two waits for the device, and prints each
one's time per training step *exclusive* of the minitf functions it calls (``linear`` is its
matrix product and bias add; ``attention`` does not count the ``softmax`` inside it). The waits
make every kernel finish inside the function that queued it, so a GPU's time lands where it is
spent; they also add a little to each call, so the attributed sum runs above the plain step time
printed first.

``--torch`` profiles torch's side of the same comparison instead (vs_torch.py's model, the same
weights), with torch's own profiler: each op's self time per step, to read beside minitf's table.
``--threads`` sets torch's and the BLAS's threads as vs_torch.py's does. It needs PyTorch either
way (``pip install torch==2.13.0``): minitf's model is vs_torch.py's, built beside torch's.
"""
import argparse
import collections
import os
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vs_torch  # noqa: E402

from minitf import backend  # noqa: E402
from minitf.optim import AdamW  # noqa: E402

# Bookkeeping of the shim, called everywhere and doing no array work: left unwrapped.
UNTIMED = {"get_array_module", "float_dtype", "backend_name", "float_errors_ignored", "_is_cupy",
           "_load_cupy", "is_array", "on_numpy"}


class Profile:
    """Inclusive and exclusive seconds and calls per function, over all the wrapped calls."""

    def __init__(self, wait):
        self.wait = wait
        self.exclusive, self.inclusive = collections.Counter(), collections.Counter()
        self.calls = collections.Counter()
        self.children = []        # one running total per open call: time spent in its callees

    def timed(self, function, label):
        def call(*args, **kwargs):
            self.wait()
            self.children.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.wait()
                spent = time.perf_counter() - start
                inside = self.children.pop()
                self.inclusive[label] += spent
                self.exclusive[label] += spent - inside
                self.calls[label] += 1
                if self.children:
                    self.children[-1] += spent
        return call

    def install(self):
        """Replace every timed function by its timed twin, in every minitf module that holds it,
        so calls from inside minitf (``attention`` calling ``softmax``) are caught too."""
        twins = {}
        for module in [m for name, m in sys.modules.items() if name.startswith("minitf") and m]:
            for name, value in list(vars(module).items()):
                if (isinstance(value, types.FunctionType) and name not in UNTIMED
                        and value.__module__.startswith(("minitf.functional", "minitf.array_ops",
                                                      "minitf.backend"))):
                    if id(value) not in twins:
                        label = f"{value.__module__.removeprefix('minitf.')}.{value.__name__}"
                        twins[id(value)] = self.timed(value, label)
                    setattr(module, name, twins[id(value)])
        AdamW.step = self.timed(AdamW.step, "optim.AdamW.step")


def torch_profile(run, steps, top):
    """Print torch's own account of ``steps`` calls of ``run``: each op's self CPU time per step
    (exclusive of the ops it calls, as minitf's table), its total, and its calls per step."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as recorded:
        for _ in range(steps):
            run()
    ops = sorted(recorded.key_averages(), key=lambda op: op.self_cpu_time_total, reverse=True)
    print("| torch op | ms per step, self | total | calls per step |\n|---|---|---|---|")
    for op in ops[:top]:                                        # the profiler counts µs
        print(f"| `{op.key}` | {op.self_cpu_time_total / 1e3 / steps:.2f} | "
              f"{op.cpu_time_total / 1e3 / steps:.2f} | {op.count // steps} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy", choices=backend.BACKENDS)
    parser.add_argument("--config", default="ref",
                        help=f"one of {', '.join(vs_torch.CONFIGS)}, or on a GPU also large")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (default 3)")
    parser.add_argument("--top", type=int, default=25, help="rows to print (default 25)")
    parser.add_argument("--forward", action="store_true",
                        help="profile the forward only (logits, no gradient), not a training step")
    parser.add_argument("--torch", action="store_true",
                        help="profile torch's side instead, with torch's profiler (CPU only)")
    parser.add_argument("--threads", type=int, help="torch and BLAS threads (default: theirs)")
    args = parser.parse_args()
    if args.torch and args.backend != "numpy":
        parser.error("--torch: profiles torch on the CPU only; wanted --backend numpy, got "
                     f"--backend {args.backend}")
    vs_torch.limit_threads(args.threads)
    configs, wait = dict(vs_torch.CONFIGS), lambda: None
    if args.backend == "cupy":                  # its twin imports CuPy: only where it is wanted
        import vs_torch_gpu
        configs, wait = {**configs, **vs_torch_gpu.CONFIGS}, vs_torch_gpu.sync
    if args.config not in configs:
        parser.error(f"--config: wanted one of {list(configs)}; got {args.config!r}")
    config = configs[args.config]
    with backend.use(args.backend):
        ours, theirs = vs_torch.build(config, 100)
        ids = backend.to_numpy(backend.randint(0, 100, (config.batch, config.n + 1)))
        what = "forward" if args.forward else "train"
        run, torch_run = vs_torch.steps(ours, theirs, ids[:, :-1], ids[:, 1:])[what]
        if args.torch:
            run = torch_run
        for _ in range(2):
            run()
        wait()
        start = time.perf_counter()
        for _ in range(args.steps):
            run()
        wait()
        plain = (time.perf_counter() - start) / args.steps
        step = "a forward (no gradient)" if args.forward else "a training step"
        if args.torch:
            print(f"{args.config} {config}, torch on the CPU: {step} takes {plain * 1e3:.2f} ms")
            return torch_profile(run, args.steps, args.top)
        profile = Profile(wait)
        profile.install()
        for _ in range(args.steps):
            run()
    per_step = 1e3 / args.steps
    print(f"{args.config} {config} on {args.backend}: {step} takes {plain * 1e3:.2f} ms; "
          f"attributed with the waits: {sum(profile.exclusive.values()) * per_step:.2f} ms")
    print("| function | ms per step, exclusive | inclusive | calls per step |\n|---|---|---|---|")
    for label, seconds in profile.exclusive.most_common(args.top):
        print(f"| `{label}` | {seconds * per_step:.2f} | {profile.inclusive[label] * per_step:.2f} | "
              f"{profile.calls[label] // args.steps} |")


if __name__ == "__main__":
    main()
