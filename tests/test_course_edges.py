"""Edges of the course catalogue (minitf/course.py) that the lesson tests leave open: which lesson a
query names, where ``lessons/`` is found, how ``minitf lesson`` lines its list up, and what
``minitf lesson N`` says after a lesson ran -- passed, failed or redrew the figures it had."""
import os
import re
import textwrap
from pathlib import Path

import pytest

from minitf import course

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "lessons"
FAKE = course.Lesson("01_fake", "a lesson for a test", "nothing", ("01_a", "01_b"), 1.0)
OLD = 10 ** 18                          # 2001 in nanoseconds: a figure drawn by an earlier run


# -- find: the lesson a query names ----------------------------------------------------------------

@pytest.mark.parametrize("query", ["4", " 04 ", "MASKS", "04_masks.py", "04_Masks.PY"])
def test_find_reads_a_query_as_typed(query):
    """``minitf lesson ' 04 '``, ``MASKS`` and the file name with .py all name lesson 04: a shell
    quote's spaces, the case and the suffix are not part of the name."""
    assert course.find(query).stem == "04_masks"


def test_find_refuses_a_query_that_names_several_lessons():
    """"attention" is in four file names: the first was run, silently, where the student may
    have meant lesson 06; the message lists all four and asks for a number."""
    with pytest.raises(course.LessonError) as error:
        course.find("attention")
    assert str(error.value) == (
        "'attention' names 4 lessons (01_attention_by_hand, 03_self_attention_needs_weights, "
        "06_multi_head_attention, 16_attention_and_convolution); give its number")


@pytest.mark.parametrize("query", ["", "   ", ".py", "0", "21", "²"])
def test_find_refuses_a_query_that_names_no_lesson(query):
    """An empty name is in every file name: it named all twenty lessons as ambiguous, not as
    no lesson at all. The range in the message is the catalogue's, first to last. '²' is a
    digit to str.isdigit, and int() refused it: "invalid literal for int() with base 10"."""
    shown = query.strip().removesuffix(".py")
    with pytest.raises(course.LessonError) as error:
        course.find(query)
    assert str(error.value) == (f"no lesson {shown!r}; the lessons are 01–20, by number or by "
                                f"name (see 'minitf lesson')")


# -- lessons_dir and title -------------------------------------------------------------------------

def _course(root: Path) -> Path:
    """A folder with the course's lessons/ in it (its first lesson is how it is recognized)."""
    (root / "lessons").mkdir(parents=True)
    (root / "lessons" / f"{course.LESSONS[0].stem}.py").write_text('"""A lesson"""\n')
    return root / "lessons"


def test_lessons_dir_is_found_from_a_folder_below_the_repository(tmp_path, monkeypatch):
    """``minitf lesson`` run from docs/ of the repository finds the lessons/ beside it; a
    lessons/ folder of another project on the way up (no lesson 01 in it) is not taken."""
    lessons = _course(tmp_path / "repo")
    (tmp_path / "repo" / "docs" / "lessons").mkdir(parents=True)       # not the course's
    monkeypatch.chdir(tmp_path)
    assert course.lessons_dir(tmp_path / "repo" / "docs") == lessons.resolve()
    assert course.lessons_dir(tmp_path / "repo" / "lessons") == lessons.resolve()


def test_lessons_dir_names_the_folder_it_searched(tmp_path, monkeypatch):
    """The message names the folder the search started from, which need not be the working
    directory."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "searched").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(course.LessonError) as error:
        course.lessons_dir(tmp_path / "searched")
    assert str(error.value) == (
        f"no lessons/ folder in {(tmp_path / 'searched').resolve()} or above it; run 'minitf "
        f"lesson' from the root of the minitf repository, where the lessons are")


def test_a_lesson_without_a_docstring_is_titled_by_its_file_name(tmp_path):
    """Its title in the listing is then its file name, not an empty column."""
    (tmp_path / "21_untitled.py").write_text("x = 1\n")
    (tmp_path / "22_blank.py").write_text('"""\n\n   """\nx = 1\n')
    (tmp_path / "23_spaced.py").write_text('"""\n\n  A title\n\nThe rest.\n"""\n')
    assert course.title(tmp_path / "21_untitled.py") == "21_untitled"
    assert course.title(tmp_path / "22_blank.py") == "22_blank"
    assert course.title(tmp_path / "23_spaced.py") == "A title"


def test_a_lesson_that_does_not_parse_is_titled_by_its_file_name_and_the_others_listed(
        tmp_path, monkeypatch, capsys):
    """A student's edit that left lesson 02 unparsable (or not UTF-8) made 'minitf lesson' a
    traceback of ast.parse, naming no file, and listed no lesson at all: the listing now shows
    that lesson by its file name, and running it shows Python's own error, with its line."""
    from minitf import cli
    folder = tmp_path / "lessons"
    folder.mkdir()
    for lesson in course.LESSONS:
        (folder / f"{lesson.stem}.py").write_text(f'"""Title of {lesson.number}"""\n')
    broken, latin1 = course.LESSONS[1], course.LESSONS[2]
    (folder / f"{broken.stem}.py").write_text('"""Why √d_k"""\ndef f(:\n')
    (folder / f"{latin1.stem}.py").write_bytes('"""Caf\xe9"""\n'.encode("latin-1"))
    monkeypatch.chdir(tmp_path)
    for flags in ([], ["--table"]):
        assert cli.main(["lesson", *flags]) == 0
        shown = capsys.readouterr().out
        assert f"Title of {course.LESSONS[0].number}" in shown and broken.stem in shown
        assert f"Title of {course.LESSONS[-1].number}" in shown and latin1.stem in shown
    assert course.title(folder / f"{broken.stem}.py") == broken.stem
    assert course.title(folder / "gone.py") == "gone"


# -- the listing and the runtimes --------------------------------------------------------------------

def test_the_listing_lines_up_its_columns():
    """``minitf lesson``: a two-digit number, the runtime right-aligned in five places, the file,
    and every title starting in the same column, however long the file name before it."""
    lines = course.listing(LESSONS).splitlines()
    assert len(lines) == len(course.LESSONS)
    starts = set()
    for line, lesson in zip(lines, course.LESSONS):
        title = course.title(LESSONS / f"{lesson.stem}.py")
        assert re.fullmatch(rf"{lesson.number:02d}  [ \d]{{2}}\d s  lessons/{lesson.stem}\.py +"
                            rf"{re.escape(title)}", line), line
        starts.add(len(line) - len(title))          # the title is last
    assert len(starts) == 1, "the titles start in different columns"


@pytest.mark.parametrize("seconds, shown", [(0.3, "1 s"), (1.4, "1 s"), (1.5, "2 s"),
                                            (11.5, "12 s"), (14.9, "15 s")])
def test_a_runtime_is_whole_seconds_and_never_zero(seconds, shown):
    """lessons/README.md's runtime column: a lesson of under half a second reads "1 s", not
    "0 s", which says it takes no time at all."""
    assert course._runtime(seconds) == shown


# -- lesson_environment ------------------------------------------------------------------------------

def test_every_blas_library_gets_one_thread_and_a_callers_setting_wins(monkeypatch):
    """OpenBLAS, OpenMP and MKL builds of NumPy each read their own variable: all three default
    to one thread. What the caller passes (the tests' MPLBACKEND=Agg) overrides the user's own
    environment, or a lesson run by a test would open windows on a desktop."""
    for name in course.BLAS_THREADS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MPLBACKEND", "TkAgg")
    env = course.lesson_environment(MPLBACKEND="Agg")
    assert {name: env[name] for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                         "MKL_NUM_THREADS")} == dict.fromkeys(
        ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    assert env["MPLBACKEND"] == "Agg"


# -- run: what minitf lesson N says after the lesson -------------------------------------------------

def _lesson(root: Path, body: str, lesson=FAKE) -> Path:
    """A lesson script ``body`` in root/lessons/; its figures go to root/out (MINITF_FIGURES)."""
    (root / "lessons").mkdir(exist_ok=True)
    (root / "lessons" / f"{lesson.stem}.py").write_text(
        '"""A fake lesson"""\nimport os, sys\nfrom pathlib import Path\n'
        + textwrap.dedent(body), encoding="utf-8")
    return root / "lessons"


def _draw(*names: str) -> str:
    return "".join(f"(Path(os.environ['MINITF_FIGURES']) / '{name}.png').write_bytes(b'png')\n"
                   for name in names)


def test_only_the_figures_the_run_drew_are_listed(tmp_path, monkeypatch, capfd):
    """01_b.png was left by an earlier run and not redrawn this time: listing it would say the
    lesson made it now."""
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "01_b.png").write_bytes(b"old")
    os.utime(tmp_path / "out" / "01_b.png", ns=(OLD, OLD))
    folder = _lesson(tmp_path, _draw("01_a"))
    assert course.run(FAKE, folder) == 0
    out = capfd.readouterr().out
    assert out.rstrip().endswith(
        f"lesson 01 passed its checks; figures in {tmp_path / 'out'}: 01_a.png"), out


def test_a_figure_redrawn_the_same_counts_as_drawn(tmp_path, monkeypatch, capfd):
    """Figures are byte-stable: a second run of a lesson rewrites PNGs of the same size. It
    drew them, so it passed; it is not the lesson 20 case of drawing nothing."""
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    for name in FAKE.figures:
        (tmp_path / "out" / f"{name}.png").write_bytes(b"png")     # what the lesson writes
        os.utime(tmp_path / "out" / f"{name}.png", ns=(OLD, OLD))
    assert course.run(FAKE, _lesson(tmp_path, _draw(*FAKE.figures))) == 0
    out = capfd.readouterr().out
    assert "passed its checks" in out and "01_a.png, 01_b.png" in out and "skipped" not in out


@pytest.mark.parametrize("draws", [(), ("01_a",)], ids=["before-drawing", "after-one-figure"])
def test_a_failing_lesson_is_reported_failed_on_stderr_with_its_status(draws, tmp_path,
                                                                      monkeypatch, capfd):
    """A check that fails exits 1: minitf lesson returns that status and says so on stderr,
    neither "passed" nor "skipped", whether or not a figure was drawn before the check."""
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "out"))
    (tmp_path / "out").mkdir()
    folder = _lesson(tmp_path, _draw(*draws) + "sys.exit(3)\n")
    assert course.run(FAKE, folder) == 3
    captured = capfd.readouterr()
    assert captured.err.strip().endswith(
        "lesson 01 stopped with exit status 3: a check above failed"), captured.err
    assert "passed" not in captured.out and "skipped" not in captured.out


def test_a_lesson_runs_from_the_repository_root_with_one_blas_thread(tmp_path, monkeypatch,
                                                                    capfd):
    """As a student runs ``python lessons/NN.py`` from the root: relative paths start there,
    and NumPy's BLAS is given one thread unless the user chose a number."""
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "out"))
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    (tmp_path / "out").mkdir()
    folder = _lesson(tmp_path, "print('cwd', os.getcwd())\n"
                               "print('threads', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
                               + _draw(*FAKE.figures))
    assert course.run(FAKE, folder) == 0
    out = capfd.readouterr().out
    assert f"cwd {tmp_path.resolve()}\n" in out or f"cwd {tmp_path}\n" in out, out
    assert "threads 1\n" in out, out


def test_without_minitf_figures_the_figures_are_looked_for_beside_lessons(tmp_path, monkeypatch,
                                                                         capfd):
    """viz.save puts a lesson's figures in figures/ beside lessons/, not inside lessons/: the
    run looks there, or it would report a lesson that drew everything as skipped."""
    monkeypatch.delenv("MINITF_FIGURES", raising=False)
    folder = _lesson(tmp_path, "from minitf import viz\n"
                               "for name in ('01_a', '01_b'):\n"
                               "    (viz.figures_dir() / f'{name}.png').write_bytes(b'png')\n")
    (tmp_path / "figures").mkdir()
    assert course.run(FAKE, folder) == 0
    out = capfd.readouterr().out
    assert f"figures in {tmp_path / 'figures'}: 01_a.png, 01_b.png" in out, out


def test_a_lesson_with_no_figures_that_exits_0_passed(tmp_path, monkeypatch, capfd):
    """"Skipped" means it drew none of the figures it should have; a lesson that has none to
    draw and exits 0 passed."""
    plain = course.Lesson("01_plain", "no figures", "nothing", (), 1.0)
    monkeypatch.setenv("MINITF_FIGURES", str(tmp_path / "out"))
    assert course.run(plain, _lesson(tmp_path, "print('ok')\n", plain)) == 0
    out = capfd.readouterr().out
    assert "lesson 01 passed its checks" in out and "skipped" not in out
