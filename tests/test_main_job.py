"""benchmarks/main_job.py: the README's table of `minitf train`, read from GNU time and the run's
saved figures. A smoke run (--fast, this interpreter) fills every row with numbers that agree
with each other; GNU time's report is read right. No speed is asserted."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCHMARKS / "main_job.py"
REPORT = """\tCommand being timed: "python -m minitf train"
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:09.52
\tMaximum resident set size (kbytes): 189440
\tExit status: 0
"""


@pytest.fixture(scope="module")
def main_job():
    sys.path.insert(0, str(BENCHMARKS))                 # its siblings: machine, sample_words
    try:
        spec = importlib.util.spec_from_file_location("main_job", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("clock, expected", [("1:09.52", 69.52), ("0:01.90", 1.9),
                                             ("1:02:03", 3723.0)])
def test_gnu_times_clock_is_read_as_seconds(main_job, clock, expected):
    assert main_job.seconds(clock) == pytest.approx(expected)


def test_gnu_times_report_is_read_field_by_field(main_job):
    assert main_job.gnu_time_field(REPORT, "Elapsed") == "1:09.52"
    assert main_job.gnu_time_field(REPORT, "Maximum resident set size") == "189440"
    with pytest.raises(SystemExit, match="main_job: GNU time printed no 'Page size' line"):
        main_job.gnu_time_field(REPORT, "Page size")


@pytest.mark.skipif(not os.access("/usr/bin/time", os.X_OK), reason="needs GNU time")
def test_a_smoke_run_fills_every_row_and_the_rows_agree():
    done = subprocess.run([sys.executable, str(SCRIPT), "--python", sys.executable,
                           "--train-args=--fast", "--samples", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", done.stdout, re.M))
    assert len(rows) == 9, rows                         # nine figures, one run
    number = {row: float(re.match(r"[\d.,]+", value).group().replace(",", ""))
              for row, value in rows.items()}
    held_out, bigram = number["held-out loss"], number["character-bigram model, same split"]
    change = number["Transformer vs bigram"] / 100 * (1 if "lower" in rows["Transformer vs bigram"]
                                                      else -1)
    assert change == pytest.approx(1 - held_out / bigram, abs=2e-3)    # both from 3-digit losses
    assert number["wall time, whole command"] >= number["training time (as printed)"] - 0.5
    assert number["training speed"] > 0 and number["peak memory (max RSS)"] > 10
    assert "CPU: " in done.stdout and "AVX-512: " in done.stdout


def test_bad_counts_are_named():
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "--runs and --samples: wanted at least 1; got 0 and 20" in done.stderr
