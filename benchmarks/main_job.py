"""The README's table for `minitf train`, measured as the README states it: a fresh install, the
whole command under `/usr/bin/time -v`.

    python benchmarks/main_job.py                       # one run, from a fresh install
    python benchmarks/main_job.py --runs 2              # two runs, one after the other
    python benchmarks/main_job.py --python .venv/bin/python    # an environment you already have

Makes a new virtual environment in a temporary directory and installs this checkout into it
(`pip install .`, the README's first command), then runs `python -m minitf train --no-progress`
there, in a temporary directory (so that the installed minitf is the one that runs), `--runs`
times. Reads the wall time and the peak memory from GNU time, the losses and the speed from the
figures the run saves with its checkpoint, and counts the real words in its samples
(sample_words.py). Prints a markdown table, a column per run, under the CPU, NumPy's version and
the commit. `--train-args` passes more flags to `minitf train` (`--train-args=--fast`, with the
"=", for a smoke run).
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import KERNEL_VARIABLE, THREAD_VARIABLES, cpu_line
from sample_words import real_word_share

from minitf import checkpoint                        # to read a run's saved figures

ROOT = Path(__file__).resolve().parents[1]
GNU_TIME = "/usr/bin/time"


def fail(message):
    raise SystemExit(f"main_job: {message}")


def fresh_python(into):
    """A new virtual environment in ``into`` with this checkout installed: its python."""
    subprocess.run([sys.executable, "-m", "venv", into], check=True)
    python = str(Path(into) / ("Scripts" if os.name == "nt" else "bin") / "python")
    install = subprocess.run([python, "-m", "pip", "install", "--quiet", str(ROOT)],
                             capture_output=True, text=True)
    if install.returncode != 0:
        fail(f"pip install . failed: {install.stderr.strip().splitlines()[-1]}")
    return python


def seconds(clock):
    """GNU time's "h:mm:ss" or "m:ss.ss" -> seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = 60 * total + float(part)
    return total


def gnu_time_field(report, label):
    """The value of one line of `/usr/bin/time -v`'s report, e.g. "Maximum resident set size"."""
    match = re.search(rf"^\s*{re.escape(label)}[^:]*(?:\([^)]*\))?: (\S+)$", report, re.M)
    if match is None:
        fail(f"GNU time printed no {label!r} line")
    return match.group(1)


def one_run(python, workdir, train_args, samples):
    """Times one `minitf train` in ``workdir``: {row: value} for the table."""
    out = os.path.join(workdir, f"run-{len(os.listdir(workdir))}")
    command = [GNU_TIME, "-v", python, "-m", "minitf", "train", "--no-progress", "--out", out,
               *train_args]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"minitf train exited with {done.returncode}:\n{done.stderr[-2000:]}")
    figures = checkpoint.load(out).meta["extra"]["figures"]
    real, total = real_word_share(out, samples, 300, "The ", 0.8)
    change = figures["improvement_over_bigram"]                       # 1 − held-out / bigram
    return {
        "wall time, whole command": f"{seconds(gnu_time_field(done.stderr, 'Elapsed')):.1f} s",
        "training time (as printed)": f"{figures['seconds']:.0f} s",
        "training speed": f"{figures['tokens_per_second']:,} characters/s",
        "peak memory (max RSS)":
            f"{int(gnu_time_field(done.stderr, 'Maximum resident set size')) / 1024:.0f} MiB",
        "train loss, last 20 steps": f"{figures['train_loss']:.3f} nats/char",
        "held-out loss": f"{figures['val_loss']:.3f} nats/char",
        "character-bigram model, same split": f"{figures['bigram_val_loss']:.3f} nats/char",
        "Transformer vs bigram": f"{abs(change):.1%} {'lower' if change >= 0 else 'higher'}",
        "sampled words that are real words of the text":
            f"{real / max(total, 1):.0%} ({real} of {total})",
    }


def header(python, args):
    numpy = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"],
                           capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    threads = ", ".join(f"{name}={os.environ[name]}" for name in THREAD_VARIABLES
                        if name in os.environ)
    kernels = os.environ.get(KERNEL_VARIABLE, "as OpenBLAS finds them")
    return [f"CPU: {cpu_line()}",
            f"NumPy {numpy}; BLAS threads: {threads or 'its default'}; BLAS kernels: {kernels}; "
            f"minitf at {commit}",
            f"{'a fresh install' if args.python is None else python}; command: python "
            f"benchmarks/main_job.py {shlex.join(sys.argv[1:])}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs, one after the other (1)")
    parser.add_argument("--python",
                        help="time this interpreter's minitf instead of a fresh install")
    parser.add_argument("--train-args", default="",
                        help="more flags for minitf train, e.g. --train-args=--fast")
    parser.add_argument("--samples", type=int, default=20,
                        help="samples for the real-word count, as sample_words.py (20)")
    args = parser.parse_args()
    if args.runs < 1 or args.samples < 1:
        parser.error(f"--runs and --samples: wanted at least 1; got {args.runs} and {args.samples}")
    if not os.access(GNU_TIME, os.X_OK):
        fail(f"needs GNU time at {GNU_TIME} (Debian and Ubuntu: apt install time)")
    with tempfile.TemporaryDirectory() as venv, tempfile.TemporaryDirectory() as workdir:
        python = args.python or fresh_python(venv)
        runs = [one_run(python, workdir, shlex.split(args.train_args), args.samples)
                for _ in range(args.runs)]
        lines = header(python, args)
    print("\n".join(f"- {line}" for line in lines))
    print("\n| | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |")
    print("|---|" + "---|" * len(runs))
    for row in runs[0]:
        print(f"| {row} | " + " | ".join(run[row] for run in runs) + " |")


if __name__ == "__main__":
    main()
