"""The course site's own Sphinx extension.

* ``saved_figures_scraper``: sphinx-gallery only sees figures still open in pyplot; minitf's lessons
  draw on ``Figure`` objects and save them with ``minitf.viz.save`` into ``$MINITF_FIGURES``. After
  every cell the scraper puts each PNG saved during that cell on the page, in the order saved.
* ``reset_before_lesson``: gives each lesson an empty figures folder of its own.
* A stale page never survives a change to minitf: sphinx-gallery re-runs a lesson only when the
  lesson's file changed, so the generated gallery is wiped whenever minitf's source changed.
* Generated pages (``docs/_generated/``): the lesson table and the landing page's figures from
  ``minitf.course``, the README's commands, the exercise catalogue and real reports of a failing and
  a passing check, run at build time.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from minitf import course
from minitf.viz import FIGURES_ENV

DOCS = Path(__file__).resolve().parent.parent
ROOT = DOCS.parent
LESSONS = ROOT / "lessons"
GALLERY = DOCS / "lessons"                    # sphinx-gallery's output (git-ignored)
GENERATED = DOCS / "_generated"               # this extension's output (git-ignored)
FIGURES = GALLERY / "_figures"                # each lesson's saved PNGs, kept with its cached page
SOURCE_HASH = GALLERY / ".minitf-source-hash"

_seen: dict[str, float] = {}                  # figures already put on the page, this lesson


# --------------------------------------------------------------------------------------------
# Running the lessons

def reset_before_lesson(gallery_conf, fname, when="before"):
    """Before each lesson: an empty figures folder of its own, pointed to by $MINITF_FIGURES."""
    folder = FIGURES / Path(fname).stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    os.environ[FIGURES_ENV] = str(folder)
    os.environ.setdefault("MPLBACKEND", "Agg")
    _seen.clear()


def saved_figures_scraper(block, block_vars, gallery_conf):
    """Put on the page every PNG the cell just saved (oldest first), and keep a copy by name
    in ``_generated/figures`` for the landing page."""
    from sphinx_gallery.scrapers import figure_rst

    folder = Path(os.environ[FIGURES_ENV])
    new = sorted((p for p in folder.glob("*.png")
                  if _seen.get(p.name) != p.stat().st_mtime_ns),
                 key=lambda p: p.stat().st_mtime_ns)
    by_name = GENERATED / "figures"
    by_name.mkdir(parents=True, exist_ok=True)
    rst = ""
    for png in new:
        _seen[png.name] = png.stat().st_mtime_ns
        target = Path(next(block_vars["image_path_iterator"]))
        shutil.copyfile(png, target)
        shutil.copyfile(png, by_name / png.name)
        # One image each, its alt text the name the lesson saved it under (the browser test
        # finds every catalogued figure by it).
        rst += figure_rst([str(target)], gallery_conf["src_dir"], fig_titles=png.stem)
    return rst


def _source_hash() -> str:
    """A hash of minitf's source: a change anywhere in it invalidates every executed lesson
    (sphinx-gallery itself only compares each lesson file's own hash)."""
    package = Path(course.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _invalidate_stale_gallery() -> None:
    current = _source_hash()
    if GALLERY.exists() and (not SOURCE_HASH.exists() or SOURCE_HASH.read_text() != current):
        shutil.rmtree(GALLERY)
        shutil.rmtree(GENERATED / "backreferences", ignore_errors=True)
    GALLERY.mkdir(exist_ok=True)
    SOURCE_HASH.write_text(current)


# --------------------------------------------------------------------------------------------
# Generated pages

def _run(args, cwd) -> tuple[int, str]:
    env = course.lesson_environment(MPLBACKEND="Agg", COLUMNS="110")
    result = subprocess.run([sys.executable, "-m", "minitf", *args], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, (result.stdout + result.stderr).rstrip()


def _literal(command: str, rc: int, output: str) -> str:
    body = "\n".join("   " + line if line.strip() else "" for line in
                     [f"$ {command}", *output.splitlines(), f"(exit status {rc})"])
    return f".. code-block:: text\n   :class: minitf-report\n\n{body}\n"


WRONG = """    p, axis = cache
    return p * dp
"""
RIGHT = """    p, axis = cache
    return p * (dp - (dp * p).sum(axis=axis, keepdims=True))
"""


def _fill(path: Path, body: str) -> None:
    text = path.read_text(encoding="utf-8")
    filled = re.sub(r'(# \*\*\* START OF YOUR CODE.*\n)\s*raise NotImplementedError\(.*\)\n',
                    lambda m: m.group(1) + body, text)
    assert filled != text, "the starter's fence was not found"
    path.write_text(filled, encoding="utf-8")


def exercise_reports() -> str:
    """Run the student's and the instructor's loop for real and return them as reST."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        steps = [("exercise-list", ["exercise", "list"]),
                 ("exercise-start", ["exercise", "start", "softmax_backward"]),
                 ("exercise-unwritten", ["exercise", "check", "softmax_backward.py"])]
        for key, args in steps:
            out.append((key, args, *_run(args, tmp)))
        _fill(tmp / "softmax_backward.py", WRONG)
        out.append(("exercise-wrong", ["exercise", "check", "softmax_backward.py"],
                    *_run(["exercise", "check", "softmax_backward.py"], tmp)))
        (tmp / "softmax_backward.py").unlink()
        _run(["exercise", "start", "softmax_backward"], tmp)
        _fill(tmp / "softmax_backward.py", RIGHT)
        out.append(("exercise-right", ["exercise", "check", "softmax_backward.py"],
                    *_run(["exercise", "check", "softmax_backward.py"], tmp)))
        chosen = "softmax_backward,layer_norm_backward,attention_backward"
        for key, args in [
                ("homework-make", ["homework", "make", "--exercises", chosen, "--out", "hw1"]),
                ("homework-grade-starter", ["homework", "grade", "hw1"]),
                ("homework-key", ["homework", "make", "--exercises", chosen, "--out", "key1",
                                  "--solutions"]),
                ("homework-grade-key", ["homework", "grade", "key1"])]:
            out.append((key, args, *_run(args, tmp)))
    expect_fail = {"exercise-unwritten", "exercise-wrong", "homework-grade-starter"}
    for key, args, rc, _ in out:
        if (rc != 0) != (key in expect_fail):
            raise RuntimeError(f"minitf {' '.join(args)} exited {rc}: the exercise page would lie")
    blocks = {key: _literal("minitf " + " ".join(args), rc, text) for key, args, rc, text in out}
    blocks["wrong-body"] = ".. code-block:: python\n\n" + WRONG
    blocks["right-body"] = ".. code-block:: python\n\n" + RIGHT
    return blocks


def readme_commands() -> str:
    """The README's first code block (install and train; install and test), verbatim."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("```")[1].split("\n", 1)[1]
    return ".. code-block:: sh\n\n" + "".join("   " + line + "\n" for line in
                                                block.strip().splitlines())


def lesson_table() -> str:
    """The course in numbers, from minitf.course: one row per lesson, linked to its page."""
    rows = [".. list-table::", "   :header-rows: 1", "   :widths: 4 30 40 8", "",
            "   * - #", "     - lesson", "     - what it teaches", "     - runtime"]
    for lesson in course.LESSONS:
        rows += [f"   * - {lesson.number:02d}",
                 f"     - :ref:`sphx_glr_lessons_{lesson.stem}.py`",
                 f"     - {_escape(lesson.teaches)}",
                 f"     - {lesson.seconds:.0f} s" if lesson.seconds >= 1.5 else "     - 1 s"]
    return "\n".join(rows) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("|", "\\|").replace("`", "\\`")


LANDING_FIGURES = ("04_masking", "02_sqrt_dk", "07_pre_vs_post_ln", "09_relative_biases")


def landing_figures() -> str:
    """The most telling figures, each linked to its lesson (only those of catalogued lessons)."""
    owner = {name: lesson for lesson in course.LESSONS for name in lesson.figures}
    parts = []
    for name in LANDING_FIGURES:
        if name in owner:
            lesson = owner[name]
            parts.append(f".. figure:: /_generated/figures/{name}.png\n"
                         f"   :alt: {name}\n   :width: 100%\n\n"
                         f"   From :ref:`sphx_glr_lessons_{lesson.stem}.py`.\n")
    return "\n".join(parts)


def write_generated(app) -> None:
    """builder-inited, after sphinx-gallery ran the lessons: write docs/_generated/*.rst."""
    GENERATED.mkdir(exist_ok=True)
    pages = {"lesson_table.rst": lesson_table(), "landing_figures.rst": landing_figures(),
             "readme_commands.rst": readme_commands()}
    for key, block in exercise_reports().items():
        pages[f"report-{key}.rst"] = block
    for name, text in pages.items():
        path = GENERATED / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


# --------------------------------------------------------------------------------------------
# The API reference: each entry links to the lessons that use it

_EXAMPLE_REF = re.compile(r":doc:`/lessons/(\d\d_\w+)`")


def lessons_using(name: str, obj) -> list[str]:
    """The lessons that use ``name``, from sphinx-gallery's backreferences (recorded under the
    documented path, or under ``minitf.<qualname>`` when a lesson reached it another way)."""
    stems = set()
    for key in (name, f"minitf.{getattr(obj, '__qualname__', '')}"):
        path = GENERATED / "backreferences" / f"{key}.examples"
        if path.exists():
            stems.update(_EXAMPLE_REF.findall(path.read_text(encoding="utf-8")))
    return sorted(stems)


def verbatim_docstring(app, what, name, obj, options, lines) -> None:
    """autodoc-process-docstring: show minitf's docstrings as written, in a monospaced block.

    They are written for ``help()`` and a terminal: equations in Unicode (``|a − b|``, ``Σ_j``)
    and shapes in aligned columns, which reST would read as substitutions and block quotes.
    Verbatim, every column stays aligned and no docstring can break the strict build.
    """
    if what in ("attribute", "property", "data"):
        return                    # one-line field notes, which napoleon rewrites as markup
    if any(line.strip() for line in lines):
        body = ["   " + line if line.strip() else "" for line in lines]
        lines[:] = [".. code-block:: text", "   :class: minitf-docstring", "", *body, ""]


def link_lessons(app, what, name, obj, options, lines) -> None:
    """autodoc-process-docstring: append "Used in lessons: …" to each documented entry."""
    if what not in ("function", "class", "method"):
        return
    stems = lessons_using(name, obj)
    if stems:
        refs = ", ".join(f":ref:`sphx_glr_lessons_{stem}.py`" for stem in stems)
        lines += ["", f"**Used in lessons:** {refs}", ""]


def setup(app):
    _invalidate_stale_gallery()
    # sphinx-gallery connects its own builder-inited first (it is listed earlier in conf.py).
    app.connect("builder-inited", write_generated, priority=900)
    # Sphinx re-reads a page only when its own source changed; the API page is made of minitf's
    # docstrings and the lessons' backreferences, so read it on every build.
    app.connect("env-get-outdated", lambda app, env, added, changed, removed: ["api"])
    app.connect("autodoc-process-docstring", verbatim_docstring, priority=100)
    app.connect("autodoc-process-docstring", link_lessons, priority=800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
