"""House rule: array math goes through minitf/backend.py. No other file under minitf/ imports
NumPy, CuPy or SciPy -- except host-only modules (plots, file I/O), which must be named here."""
import ast
from pathlib import Path

import minitf

PACKAGE = Path(minitf.__file__).parent
SHIM = PACKAGE / "backend.py"
ARRAY_LIBRARIES = {"numpy", "cupy", "cupyx", "scipy"}
HOST_ONLY = {"checkpoint.py", "checkpoint_format.py",                # host arrays only: files,
             "data/text.py", "data/tasks.py",                        # ids
             "pretrained/safetensors.py", "pretrained/loader.py",   # model files, read on the host
             "viz.py", "viz_inputs.py"}                           # and plots


def _imported_roots(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module.split(".")[0]


def test_only_the_shim_imports_array_libraries():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if path == SHIM or relative in HOST_ONLY:
            continue
        found = ARRAY_LIBRARIES & set(_imported_roots(path))
        if found:
            offenders[relative] = sorted(found)
    assert offenders == {}, f"import these through minitf.backend instead: {offenders}"


def test_the_rule_would_catch_an_offender(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import numpy as np\n    from cupyx import scatter_add\n")
    assert {"numpy", "cupyx"} <= set(_imported_roots(bad))


def test_the_shim_itself_is_where_numpy_is_imported():
    assert "numpy" in set(_imported_roots(SHIM))
