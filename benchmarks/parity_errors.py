"""The worst relative errors of minitf against PyTorch, as the README states them.

Runs the parity tests (tests/test_parity_torch*.py, which need the ``torch`` extra) with every
comparison's error written down, and prints, per test and per group of the README, how many
comparisons there were and the worst error in float64 and in float32. The tests themselves only
say pass or fail; this says by how much they pass.

    python benchmarks/parity_errors.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The README's groups: a test belongs to the first group whose fragment its name holds.
GROUPS = (("DecoderLM, whole model", ("decoder_lm",)),
          ("EncoderLM (BERT), whole model", ("encoder_lm",)),
          ("recurrent layers and RNNLM", ("test_parity_torch_rnn",)),
          ("layers, attention and blocks", ("",)))


def group_of(test: str) -> str:
    return next(name for name, fragments in GROUPS if any(f in test for f in fragments))


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "errors.tsv"
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              *sorted(str(p) for p in (ROOT / "tests").glob("test_parity_torch*.py"))],
                             cwd=ROOT, env={**os.environ, "MINITF_PARITY_LOG": str(log)},
                             capture_output=True, text=True)
        print(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr)
        if run.returncode != 0 or not log.exists():
            print("the parity tests did not all pass (or torch is missing): no figures")
            return 1
        rows = [line.split("\t") for line in log.read_text(encoding="utf-8").splitlines()]
    worst = defaultdict(dict)                       # test or group -> dtype -> [count, worst]
    for test, _what, dtype, error in rows:
        name = test.split("[")[0]
        for key in (name, group_of(name)):
            count, most = worst[key].get(dtype, (0, 0.0))
            worst[key][dtype] = (count + 1, max(most, float(error)))
    print("\n| test or group | comparisons | worst, float64 | worst, float32 |\n|---|---|---|---|")
    names = sorted(k for k in worst if "::" in k) + [name for name, _ in GROUPS if name in worst]
    for key in names:
        label = key.split("::")[-1] if "::" in key else f"**{key}**"
        n = sum(count for count, _ in worst[key].values())
        errors = [f"{worst[key][d][1]:.1e}" if d in worst[key] else "—"   # not run in that dtype
                  for d in ("float64", "float32")]
        print(f"| {label} | {n} | {' | '.join(errors)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
