"""benchmarks/cache_blocks.py: a row per function, the whole array beside each block size, the
sum of what blocks would change in a default step, and a memory speed per array size; its blocks
cover every row once, in order, and a result that blocks change is refused; bad block sizes are
named. No speed is asserted."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "cache_blocks.py"
ROW = re.compile(r"^\| ([a-zA-Z ,]+) \((\d+) × (\d+)\) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| "
                 r"([\d.]+) \| (\d+) \|$", re.M)
STEP = re.compile(r"take ([\d.]+) ms on whole arrays; the best block size of each would change "
                  r"that by ([+-][\d.]+) ms")


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(SCRIPT.parent))          # its own imports: machine, reductions
    try:
        spec = importlib.util.spec_from_file_location("cache_blocks", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def test_a_run_prints_a_row_per_function():
    done = run("--blocks", "4096,1048576", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    rows = ROW.findall(done.stdout)
    assert [row[0] for row in rows] == [f"{f}, {way}" for f in ("layer norm", "GELU", "softmax")
                                        for way in ("forward", "backward")]
    for name, _, _, whole, small, large, ratio, _ in rows:
        assert min(float(whole), float(small), float(large)) > 0
        assert float(ratio) == pytest.approx(min(float(small), float(large)) / float(whole),
                                             abs=0.02), name
    # a default step: 2 blocks of 2 layer norms and a final one, a GELU and a softmax each
    assert [int(row[-1]) for row in rows] == [5, 5, 2, 2, 2, 2]
    now, change = (float(v) for v in STEP.search(done.stdout).groups())
    calls = [int(row[-1]) for row in rows]
    assert now == pytest.approx(sum(c * float(row[3]) for c, row in zip(calls, rows)), abs=0.02)
    assert change == pytest.approx(sum(c * (min(float(row[4]), float(row[5])) - float(row[3]))
                                       for c, row in zip(calls, rows)), abs=0.02)
    assert "AVX-512" in done.stdout and "command: python" in done.stdout
    speeds = re.search(r"^\| `np.add\(a, b, out=o\)`, GB/s \|(.*)\|$", done.stdout, re.M)
    assert [float(v) > 0 for v in speeds.group(1).split("|")] == [True] * 6


def test_blocks_cover_every_row_once_in_order(script):
    a = np.arange(30.0).reshape(10, 3)
    b = np.arange(10.0)[:, None]
    assert np.array_equal(script.in_row_blocks(lambda a, b: a * 2 + b, [a, b], 4), a * 2 + b)
    # a function of the whole column gives another result in blocks: what main() refuses
    centred = script.in_row_blocks(lambda a: a - a.mean(axis=0), [a], 4)
    assert not np.allclose(centred, a - a.mean(axis=0))


def test_whole_means_whole_though_minitf_blocks_gelu_itself(script, monkeypatch):
    """F.gelu computes Φ a block at a time; inside whole_arrays() it is one call on the whole."""
    from minitf.functional import activation
    calls = []
    real = activation._gelu_tanh_cdf
    monkeypatch.setattr(activation, "_gelu_tanh_cdf", lambda x: calls.append(x.size) or real(x))
    h = np.ones((3328, 512), dtype=np.float32)
    with script.backend.use("numpy"), script.whole_arrays():
        script.F.gelu(h)
    assert calls == [h.size]
    script.F.gelu(h)                                             # and its blocks are back after
    assert len(calls) > 2


@pytest.mark.parametrize("blocks", ["0", "65536,x", "512", ""])
def test_a_bad_block_size_is_named(blocks):
    done = run("--blocks", blocks)
    assert done.returncode == 2 and "--blocks: wanted whole numbers of elements" in done.stderr
    assert repr(blocks) in done.stderr


def test_the_blas_line_names_the_library_and_the_variable_that_chose_its_kernels(script,
                                                                                   monkeypatch):
    """The header of cache_blocks.py and vs_torch.py: the library NumPy loaded and its threads
    (with the kernels threadpoolctl reads, where it is installed), and OPENBLAS_CORETYPE where
    it is set: the same CPU runs the products at up to twice the speed with other kernels."""
    machine = sys.modules["machine"]          # benchmarks/machine.py, as cache_blocks.py loaded it
    monkeypatch.delenv(machine.KERNEL_VARIABLE, raising=False)
    plain = machine.blas_line()
    assert "thread" in plain and "OPENBLAS_CORETYPE=Haswell" not in plain
    monkeypatch.setenv(machine.KERNEL_VARIABLE, "Haswell")
    assert "OPENBLAS_CORETYPE=Haswell" in machine.blas_line()
