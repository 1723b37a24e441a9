"""The Gradescope autograder zip: laid out as Gradescope unpacks it and run as Gradescope runs it
(/autograder/source, /autograder/submission, /autograder/results/results.json), in a folder of
the test's own."""
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minitf import cli, homework
from minitf.homework import autograder, handout
from minitf.homework.submission import find_submitted

EXERCISES = ["softmax_backward", "layer_norm_backward"]
FILES = ["minitf/functional/softmax.py", "minitf/functional/layer_norm.py"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the key, the autograder zip)."""
    root = tmp_path_factory.mktemp("gradescope")
    hw = homework.make(root / "hw", EXERCISES)
    key = homework.make(root / "key", EXERCISES, solutions=True)
    return hw, key, autograder.build(hw, root / "hw.zip")


def _run_autograder(zip_path: Path, tmp_path: Path, submit, python=sys.executable, cwd=None):
    """Unpack the zip into an /autograder-like folder, let ``submit(folder)`` place the student's
    files, and run run_autograder as Gradescope does: (its process, the folder). Relative paths
    (``python``, the folder given as "autograder") are read from ``cwd``, as typed there."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    submit(root / "submission")
    where = root if cwd is None else os.path.relpath(root, cwd)
    env = {**os.environ, "AUTOGRADER_ROOT": str(where), "AUTOGRADER_PYTHON": python}
    run = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True,
                         text=True, timeout=300, cwd=cwd)
    return run, root


def _run(zip_path: Path, tmp_path: Path, submit) -> dict:
    """run_autograder's results.json for the files ``submit(folder)`` places."""
    run, root = _run_autograder(zip_path, tmp_path, submit)
    assert run.returncode == 0, run.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def test_the_readme_s_local_try_works_with_relative_paths(made, tmp_path):
    """`AUTOGRADER_ROOT=ag AUTOGRADER_PYTHON=.venv/bin/python bash ag/source/run_autograder`, typed
    in the folder that holds both: the script moves into the root, so it reads them first."""
    key = made[1]
    venv_python = os.path.relpath(sys.executable, tmp_path)
    run, root = _run_autograder(made[2], tmp_path, lambda folder: shutil.copytree(
        key / "minitf", folder / "minitf"), python=venv_python, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == len(EXERCISES)


def test_a_grader_that_cannot_start_fails_the_autograder_run(made, tmp_path):
    """A failed exercise is a score in results.json and exit status 0; a grader that wrote no
    results.json at all (here its Python is missing) is an autograder error, said in one line."""
    run, root = _run_autograder(made[2], tmp_path, lambda folder: None,
                                python=str(tmp_path / "no-python"))
    assert run.returncode == 1 and not (root / "results" / "results.json").exists()
    assert "run_autograder: 'minitf homework grade' wrote no results.json" in run.stderr


def _scores(results: dict) -> dict:
    return {t["name"]: t["score"] for t in results["tests"]}


def test_the_zip_has_setup_and_run_at_its_root_and_is_the_same_each_time(made, tmp_path):
    hw, _, zip_path = made
    with zipfile.ZipFile(zip_path) as archive:
        entries = {e.filename: e for e in archive.infolist()}
        setup = archive.read("setup.sh").decode()
    for script in ("setup.sh", "run_autograder"):
        assert entries[script].external_attr >> 16 & 0o111, f"{script} is not executable"
    assert {f"homework/{f}" for f in FILES + ["homework.json", "README.md"]} <= set(entries)
    assert "reference/minitf/functional/softmax.py" in entries
    assert '"numpy>=' in setup and "/autograder/venv" in setup
    again = autograder.build(hw, tmp_path / "again.zip")
    assert again.read_bytes() == zip_path.read_bytes()


def test_the_homework_part_of_the_zip_holds_no_solution(made):
    hw, key, zip_path = made
    with zipfile.ZipFile(zip_path) as archive:
        for file in FILES:
            starter = archive.read(f"homework/{file}")
            assert starter == (hw / file).read_bytes()
            assert starter != (key / file).read_bytes()


def test_a_correct_submission_scores_full_however_it_was_uploaded(made, tmp_path):
    _, key, zip_path = made

    def side_by_side(folder):              # files uploaded one by one
        for file in FILES:
            shutil.copy(key / file, folder / Path(file).name)

    results = _run(zip_path, tmp_path / "flat", side_by_side)
    assert results["score"] == 2 and _scores(results) == dict.fromkeys(EXERCISES, 1.0)
    assert all({"name", "score", "max_score", "output"} <= set(t) for t in results["tests"])

    def a_folder(folder):                  # a directory (or a repository) uploaded whole
        shutil.copytree(key, folder / "hw1-main")

    assert _run(zip_path, tmp_path / "tree", a_folder)["score"] == 2


def test_a_wrong_or_missing_file_scores_zero_for_its_exercise_only(made, tmp_path):
    _, key, zip_path = made

    def wrong_softmax(folder):             # and prints, as a student debugging it does
        text = (key / FILES[0]).read_text(encoding="utf-8")
        wrong = text.replace("return p * (dp - row_dot(dp, p, axis))",
                             "print('my dp:', dp.shape); return p * dp")
        assert wrong != text, "the softmax_backward line this test breaks has changed"
        (folder / "softmax.py").write_text(wrong, encoding="utf-8")

    results = _run(zip_path, tmp_path / "wrong", wrong_softmax)
    assert _scores(results) == {"softmax_backward": 0.0, "layer_norm_backward": 0.0}
    outputs = {t["name"]: t["output"] for t in results["tests"]}
    assert "missing from the submission" in outputs["layer_norm_backward"]
    assert "softmax_backward" in outputs["softmax_backward"]
    assert "missing from the submission" not in outputs["softmax_backward"]
    assert "FAIL" in outputs["softmax_backward"] or "failed" in outputs["softmax_backward"]
    # Gradescope shows a student results.json alone: their prints are in their exercise's output
    printed = outputs["softmax_backward"].split("\n\nyour code printed, while it was graded:\n")
    assert len(printed) == 2 and printed[1].startswith("my dp: ("), outputs["softmax_backward"]
    assert "printed" not in outputs["layer_norm_backward"]


def test_two_files_of_one_name_are_one_clear_error(tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "softmax.py").write_text("")
    with pytest.raises(ValueError, match=r"2 files called softmax.py \(a/softmax.py, "
                                         r"b/softmax.py\); wanted one"):  # which, too
        find_submitted(tmp_path, FILES[0])
    assert find_submitted(tmp_path, FILES[1]) is None


def test_a_zip_a_student_uploaded_grades_as_gradescope_unpacks_it(made, tmp_path, capsys,
                                                                  monkeypatch):
    """The student README says to upload the folder or a zip of it: Gradescope unpacks the zip,
    and --submission FILE.zip does the same, into a folder of its own, removed afterwards."""
    hw, key, _ = made
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for file in FILES:                                   # under a folder of its own, as zipped
            archive.write(key / file, "my_homework/" + file)
        archive.writestr("../outside.py", "print('escaped')")   # a name that would leave the folder
    assert cli.main(["homework", "grade", str(hw), "--submission", str(upload)]) == 0
    assert "score 2 of 2" in capsys.readouterr().out
    assert not (tmp_path.parent / "outside.py").exists() and not (tmp_path / "outside.py").exists()
    for bad, got in ((tmp_path / "text.zip", "is not a zip archive"),
                     (tmp_path / "none.zip", "no such file")):
        if bad.name == "text.zip":
            bad.write_text("not a zip")
        assert cli.main(["homework", "grade", str(hw), "--submission", str(bad)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"minitf homework grade: --submission {bad}: {got}; wanted the folder of a student's "
            f"files, or a .zip of them")
    from minitf.homework import submission
    monkeypatch.setattr(submission, "UNPACKED_LIMIT", 100)     # a zip bomb, in small
    assert cli.main(["homework", "grade", str(hw), "--submission", str(upload)]) == 2
    assert "unpacks to" in capsys.readouterr().err


def test_a_folder_named_zip_is_a_folder_and_an_ended_grading_s_unpacking_is_removed(
        made, tmp_path, capsys, monkeypatch):
    hw, key, _ = made
    folder = tmp_path / "sub.zip"                       # a folder of that name: graded as one
    for file in FILES:
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(key / file, folder / file)
    assert cli.main(["homework", "grade", str(hw), "--submission", str(folder)]) == 0
    from minitf.homework import submission
    monkeypatch.setattr(submission.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()                                        # a process id that no process holds
    left = tmp_path / "tmp" / f"minitf-submission-{child.pid}-abc"
    (left / "minitf").mkdir(parents=True)               # what a grading that ended left behind
    mine = tmp_path / "tmp" / f"minitf-submission-{os.getpid()}-xyz"
    mine.mkdir()                                        # a running grading's: kept
    upload = tmp_path / "upload.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        for file in FILES:
            archive.write(key / file, file)
    assert cli.main(["homework", "grade", str(hw), "--submission", str(upload)]) == 0
    assert not left.exists() and mine.exists()
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [mine.name]
    capsys.readouterr()


def test_bad_autograder_requests_get_one_line(made, tmp_path, capsys, monkeypatch):
    hw, _, zip_path = made
    assert cli.main(["homework", "autograder", str(hw), "--out", str(zip_path)]) == 2
    assert ": already exists; wanted a new file ending in .zip" in capsys.readouterr().err
    assert cli.main(["homework", "autograder", str(hw), "--out", str(tmp_path / "hw.tar")]) == 2
    assert ": does not end in .zip; wanted a new file" in capsys.readouterr().err
    assert cli.main(["homework", "autograder", str(tmp_path), "--out",
                     str(tmp_path / "x.zip")]) == 2
    assert "not a homework directory" in capsys.readouterr().err
    key = made[1]                       # its copy in the zip would hold every answer
    assert cli.main(["homework", "autograder", str(key), "--out", str(tmp_path / "k.zip")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"minitf homework autograder: folder {key}: is the answer key (made with --solutions); "
        f"wanted the blank homework directory the students were given (the zip holds the "
        f"reference, which grades them)")
    assert not (tmp_path / "k.zip").exists()
    for inside in (hw / "ag.zip", hw / "minitf" / "ag.zip"):    # zipped with the handout
        assert cli.main(["homework", "autograder", str(hw), "--out", str(inside)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"minitf homework autograder: --out {inside}: inside the homework folder {hw}, which "
            f"students receive, and the zip holds the reference minitf, every answer; wanted a "
            f"path outside it")
        assert not inside.exists()
    assert cli.main(["homework", "make", "--exercises", "relu_backward", "--solutions",
                     "--out", str(hw / "key")]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"inside the homework folder {hw}, which students receive, and the key holds every "
        f"answer; wanted a path outside it")
    assert not (hw / "key").exists()
    missing = tmp_path / "missing" / "hw.zip"                  # was Python's Errno 2
    assert cli.main(["homework", "autograder", str(hw), "--out", str(missing)]) == 2
    assert f"--out {missing}: the folder {missing.parent} does not exist" in capsys.readouterr().err

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    with monkeypatch.context() as patch:                       # part-way through the zip
        patch.setattr(autograder, "_add", disk_full)
        assert cli.main(["homework", "autograder", str(hw), "--out", str(tmp_path / "z.zip")]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert not (tmp_path / "z.zip").exists(), "half a zip, which the next try would refuse"
    monkeypatch.setattr(handout, "PACKAGE", hw / "minitf")         # run from inside a copy
    assert cli.main(["homework", "autograder", str(hw), "--out", str(tmp_path / "y.zip")]) == 2
    assert "is a homework copy" in capsys.readouterr().err


def test_the_requirements_are_read_from_a_checkout_that_was_never_installed(monkeypatch, tmp_path):
    """Run from a source tree on PYTHONPATH there is no package metadata: pyproject.toml, the
    same list, is read instead; and with neither, one line says what to do."""
    import importlib.metadata

    installed = autograder.requirements()

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    assert autograder.requirements() == installed and "numpy>=1.24" in installed
    monkeypatch.setattr(autograder, "__file__", str(tmp_path / "minitf" / "homework" / "x.py"))
    with pytest.raises(RuntimeError, match=r"it is not installed, and .*pyproject.toml gave "
                                           r"FileNotFoundError; install it \(pip install \.\)"):
        autograder.requirements()


def test_the_handout_says_what_to_upload_and_warns_of_two_files_of_one_name(tmp_path):
    """Two exercise files called positional.py uploaded one by one cannot both arrive: the one
    that did was graded for both exercises (an AttributeError, a KeyError)."""
    shared = homework.make(tmp_path / "shared", ["rope_backward",
                                                 "LearnedPositionalEmbedding.backward"])
    text = " ".join((shared / "README.md").read_text(encoding="utf-8").split())
    assert ("What to hand in: the 2 files of the table's second column, with your bodies. Two of "
            "them share a name (`positional.py`): upload the folder `minitf` itself") in text
    alone = homework.make(tmp_path / "alone", ["softmax_backward"])
    text = " ".join((alone / "README.md").read_text(encoding="utf-8").split())
    assert "What to hand in: `minitf/functional/softmax.py`, with your bodies. Upload it" in text
    assert "one that runs for more than 60 seconds is stopped and fails" in text


def test_a_relative_submission_folder_shows_the_student_s_own_lines(made, tmp_path, monkeypatch):
    """A file loaded by a relative path runs under its absolute name: the report lost the
    student's lines, and an exit they called was blamed on minitf ("after it returned")."""
    hw, key, _ = made
    text = (key / FILES[0]).read_text(encoding="utf-8")
    exits = text.replace("return p * (dp - row_dot(dp, p, axis))", "raise SystemExit(0)")
    assert exits != text
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "softmax.py").write_text(exits, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    report = homework.grade(hw, "sub")[0].report
    assert "softmax.py, line" in report and "    raise SystemExit(0)" in report, report
    assert "after it returned" not in report


ENDS_THE_PROCESS = {
    # os._exit itself raises inside a student's code (ExitRefused); the posix module's does not
    "posix._exit": "import posix; posix._exit(0)",   # status 0: only the progress file tells
    "a segfault": "import ctypes; ctypes.string_at(0)",
    "KeyboardInterrupt": "raise KeyboardInterrupt",   # not an error of theirs to catch: Ctrl-C
}
# what the student reads of each: the exit status run_autograder saw, and its likely cause
ENDED_AS = {"posix._exit": "(exit status 0: its code ended the process itself",
            "a segfault": "(exit status 139: a crash in compiled code (SIGSEGV",
            "KeyboardInterrupt": "(exit status 130: a KeyboardInterrupt or Ctrl-C (SIGINT))"}


@pytest.mark.parametrize("how", ENDS_THE_PROCESS)
def test_code_that_ends_the_grading_process_costs_its_own_exercise(made, tmp_path, how):
    """On Gradescope, a process that never wrote results.json scored every exercise 0: each one
    is now written down before it runs, and the exercises after the one that ended the process
    are graded in a new one."""
    _, key, zip_path = made

    def crashing_softmax(folder):
        for file in FILES:
            shutil.copy(key / file, folder / Path(file).name)
        text = (folder / "softmax.py").read_text(encoding="utf-8")
        crashing = text.replace("return p * (dp - row_dot(dp, p, axis))",
                                ENDS_THE_PROCESS[how] + "\n    return p * (dp - row_dot(dp, p, axis))")
        assert crashing != text
        (folder / "softmax.py").write_text(crashing, encoding="utf-8")

    run, root = _run_autograder(zip_path, tmp_path, crashing_softmax)
    assert run.returncode == 0, run.stderr
    assert "the grading process ended inside an exercise" in run.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert _scores(results) == {"softmax_backward": 0.0, "layer_norm_backward": 1.0}
    assert results["score"] == 1 and [t["name"] for t in results["tests"]] == EXERCISES
    assert "the grading process ended while it ran" in results["tests"][0]["output"]
    assert ENDED_AS[how] in results["tests"][0]["output"], results["tests"][0]["output"]
    assert "ended inside softmax_backward (exit status " in results["output"]
    assert not (root / "results" / "results.json.progress").exists()


def test_the_zip_s_budget_is_a_minute_under_the_assignment_s_timeout(made, tmp_path, capsys):
    hw = made[0]
    with zipfile.ZipFile(made[2]) as archive:
        assert "\nbudget=540\n" in archive.read("run_autograder").decode()       # 10 minutes
    assert cli.main(["homework", "autograder", str(hw), "--out", str(tmp_path / "40.zip"),
                     "--timeout-minutes", "40"]) == 0
    with zipfile.ZipFile(tmp_path / "40.zip") as archive:
        run = archive.read("run_autograder").decode()
    assert "\nbudget=2340\n" in run and '--budget "$budget"' in run
    with pytest.raises(SystemExit):
        cli.main(["homework", "autograder", str(hw), "--out", str(tmp_path / "1.zip"),
                  "--timeout-minutes", "1"])
    assert "argument --timeout-minutes: got '1'; wanted a whole number of minutes ≥ 2" in \
        capsys.readouterr().err
    with pytest.raises(ValueError, match="timeout_minutes must be an integer in \\[2, 40\\]"):
        autograder.build(hw, tmp_path / "one.zip", timeout_minutes=1)


def test_a_resumed_grading_that_changes_nothing_ends_the_loop(made, tmp_path):
    """Each resumed run must blame one more exercise; one that could not write its progress
    (a full disk) would leave it as it was, run after run, until Gradescope's timeout."""
    stuck = tmp_path / "python"
    stuck.write_text('#!/usr/bin/env bash\n'        # the same progress, whatever it is asked
                     'while [ $# -gt 0 ]; do [ "$1" = --json ] && json=$2; shift; done\n'
                     'echo "{}" > "$json"; echo "stuck" > "$json.progress"; exit 2\n')
    stuck.chmod(0o755)
    run, root = _run_autograder(made[2], tmp_path, lambda folder: None, python=str(stuck))
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("grading the rest in a new one") == 1
    assert "run_autograder: a resumed grading changed nothing (exit status 2); stopping" in \
        run.stderr


@pytest.mark.slow
def test_one_call_past_the_budget_is_killed_and_the_rest_said(made, tmp_path):
    """A single NumPy call runs on past every alarm; run_autograder kills it when the budget is
    spent (at the least 10 s a run, to write the rest), and the journal says what happened. The
    budget leaves the call seconds to start before the alarm, however slow the start-up."""
    _, key, zip_path = made

    def one_long_call(folder):
        script = folder.parent / "run_autograder"
        script.write_text(script.read_text().replace(   # one BLAS thread: no alarm stops it
            "\nbudget=540\n", "\nbudget=8\nexport OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1\n"))
        shutil.copytree(key / "minitf", folder / "minitf")
        path = folder / FILES[0]
        text = path.read_text(encoding="utf-8")
        # one C loop of 600⁴ multiply-adds, minutes long whatever the CPU and its threads (a
        # 10,000² matrix product, the call used before, ended inside the budget on a fast one)
        path.write_text(text.replace("return p * (dp - row_dot(dp, p, axis))",
                                     "import numpy; a = numpy.ones((600, 600))\n"
                                     "    numpy.einsum('ij,jk,kl->il', a, a, a, optimize=False)\n"
                                     "    return p * (dp - row_dot(dp, p, axis))"),
                        encoding="utf-8")

    run, root = _run_autograder(zip_path, tmp_path, one_long_call)
    assert run.returncode == 0, run.stderr
    assert "ended inside an exercise (exit status 137)" in run.stderr          # killed
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert _scores(results) == {"softmax_backward": 0.0, "layer_norm_backward": 0.0}
    assert "(exit status 137: killed (SIGKILL): its code held one call past the grading's time" \
        in results["tests"][0]["output"]
    assert "was not graded: the grading's budget of 8 s ran out" in results["tests"][1]["output"]
