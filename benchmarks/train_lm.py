"""The figures of a full default `minitf train` run, as a table: wall time, losses, the bigram
baseline, tokens/s. Run from the repository root:

    python benchmarks/train_lm.py                 # the defaults, as `minitf train`
    python benchmarks/train_lm.py --steps 100     # any `minitf train` flag
"""
import sys
import tempfile
import time

from minitf import cli
from minitf.char_lm import RunConfig, run


def main(argv):
    out = tempfile.mkdtemp(prefix="minitf-bench-")       # a new run each time: none is replaced
    args = cli.build_parser().parse_args(["train", "--no-progress", "--out", out, *argv])
    if args.backend:
        from minitf import backend
        backend.use(args.backend)
    chosen = {k: v for k, v in vars(args).items() if k in RunConfig.__dataclass_fields__ and v is not None}
    chosen["progress"] = False
    start = time.perf_counter()
    figures = run(RunConfig(**chosen), log=lambda *a: None)
    wall = time.perf_counter() - start
    rows = [("wall time, whole command (s)", f"{wall:.0f}"),
            ("training time (s)", f"{figures['seconds']:.0f}"),
            ("steps", figures["steps"]),
            ("tokens/s (training)", f"{figures['tokens_per_second']:,}"),
            (f"train loss, last {min(figures['steps'], 20)} steps", f"{figures['train_loss']:.3f}"),
            ("validation loss (nats/char)", f"{figures['val_loss']:.3f}"),
            ("bigram validation loss", f"{figures['bigram_val_loss']:.3f}"),
            ("below the bigram by" if figures["improvement_over_bigram"] >= 0 else
             "ABOVE the bigram by", f"{100 * abs(figures['improvement_over_bigram']):.1f}%")]
    width = max(len(r[0]) for r in rows)
    print("\n".join(f"{a:<{width}}  {b}" for a, b in rows))


if __name__ == "__main__":
    main(sys.argv[1:])
