"""benchmarks/translate_decode.py: one row per config, greedy decoding's steps and its time per
step beside beam search's per sentence; a config it does not know is named. No speed is asserted."""
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "translate_decode.py"
ROW = re.compile(r"^\| tiny \| (\d+) \| ([\d.]+) \| ([\d.]+) \|$", re.M)


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300)


def test_a_run_prints_one_row_per_config():
    done = run("--configs", "tiny", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    steps, greedy_ms, beam_ms = ROW.search(done.stdout).groups()
    assert 1 <= int(steps) <= 32 and float(greedy_ms) > 0 and float(beam_ms) > 0
    assert "AVX-512" in done.stdout and "- BLAS: " in done.stdout


def test_an_unknown_config_is_named():
    done = run("--configs", "tiny,huge")
    assert done.returncode == 2 and "--configs: wanted some of" in done.stderr
    assert "'tiny,huge'" in done.stderr
