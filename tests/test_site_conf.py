"""The course site's configuration (docs/conf.py): which lessons sphinx-gallery runs."""
import re
import runpy
import sys
from pathlib import Path

import pytest

import minitf.pretrained

DOCS = Path(__file__).resolve().parent.parent / "docs"


def lesson(stem: str) -> str:
    return str(DOCS.parent / "lessons" / f"{stem}.py")


def _gallery_pattern(monkeypatch, model_dir) -> str:
    """docs/conf.py's filename_pattern where the pretrained files are (model_dir) or are not."""
    pytest.importorskip("sphinx_gallery", reason="the site's extras: pip install '.[docs]'")
    monkeypatch.setattr(minitf.pretrained, "default_model_dir", lambda: model_dir)
    monkeypatch.setattr(sys, "path", list(sys.path))           # conf.py adds docs/_ext to it
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MPLBACKEND"):
        monkeypatch.setenv(name, "1" if name != "MPLBACKEND" else "Agg")
    return runpy.run_path(str(DOCS / "conf.py"))["sphinx_gallery_conf"]["filename_pattern"]


def test_without_the_pretrained_files_lesson_20_is_shown_not_run(monkeypatch, tmp_path):
    """Lesson 20 stops at its first cell (SystemExit) without the model's files; run by
    sphinx-gallery inside the build, that ended the whole build with status 0 and no page."""
    pattern = _gallery_pattern(monkeypatch, None)
    assert not re.search(pattern, lesson("20_inside_a_pretrained_transformer"))
    assert re.search(pattern, lesson("19_your_first_exercise"))
    assert re.search(pattern, lesson("01_attention_by_hand"))
    pattern = _gallery_pattern(monkeypatch, tmp_path)                # the files are there
    assert re.search(pattern, lesson("20_inside_a_pretrained_transformer"))
