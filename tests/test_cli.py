"""The ``minitf`` command: ``gradcheck`` prints its table and its exit status tells the truth."""
import subprocess
import sys

import pytest

from minitf import backend, cli, gradcheck_cases
from minitf.gradcheck import FunctionCase


def test_gradcheck_prints_a_table_and_succeeds(capsys):
    assert cli.main(["gradcheck", "--only", "layer"]) == 0
    out = capsys.readouterr().out
    assert "check" in out and "max rel error" in out and "result" in out
    assert "layer_norm" in out and "LayerNorm" in out and "FAIL" not in out


def test_gradcheck_exits_1_when_a_backward_is_wrong(capsys, monkeypatch):
    def broken():
        import minitf.functional as F
        return FunctionCase(F.relu, lambda dy, cache: dy, {"x": backend.randn(3, 4)}, ("x",))

    monkeypatch.setitem(gradcheck_cases.CASES, "relu, broken", broken)
    assert cli.main(["gradcheck", "--only", "relu, broken"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_gradcheck_with_nothing_to_run(capsys):
    assert cli.main(["gradcheck", "--only", "no such check"]) == 2
    assert "no check matches" in capsys.readouterr().err


@pytest.mark.skipif(backend.cupy_available(), reason="CuPy is available here")
def test_an_unavailable_backend_is_one_line(capsys):
    assert cli.main(["gradcheck", "--backend", "cupy"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "backend 'cupy' is not available" in err


def test_python_dash_m_minitf():
    result = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--only", "softmax"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "of" in result.stdout and "tensors within 1e-06" in result.stdout


def test_help_and_bad_flags():
    ok = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--help"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "central differences" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--bogus"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr
