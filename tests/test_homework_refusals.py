"""What the homework commands refuse, and the one line each says: a submitted file that is a link
(to the reference's answers: it scored full marks), a folder or zip that cannot be written (a
full disk leaves nothing behind to block the rerun), a timeout Gradescope does not allow, an
instructor's file given twice; and the words a student reads for a file that is missing, not
UTF-8, or saved with a byte-order mark. A loop the autograder's budget stops is named, not
killed as a crash."""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minitf import cli, homework
from minitf.homework import autograder, handout, writing
from minitf.homework.guard import reading_refused
from minitf.homework.submission import find_submitted, what_it_holds

EXERCISES = ["linear_backward"]
LINEAR = "minitf/functional/linear.py"
REFERENCE = handout.PACKAGE.parent / LINEAR          # the reference's own answer
OPS = Path(__file__).with_name("homework_ops.py")   # an instructor's file


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the key), of one exercise: quick to grade."""
    root = tmp_path_factory.mktemp("refusals")
    return homework.make(root / "hw", EXERCISES), homework.make(root / "key", EXERCISES,
                                                                 solutions=True)


def _graded(hw, submission=None):
    outcome = homework.grade(hw, submission)[0]
    return outcome, homework.table([outcome]).splitlines()[2].split()[2]     # its verdict


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


# -- a link is no file of the student's ------------------------------------------------------------

def test_a_submitted_link_to_the_reference_s_file_is_refused_not_given_full_marks(made,
                                                                                  tmp_path):
    hw, key = made
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "linear.py").symlink_to(REFERENCE)             # uploaded one by one, as a link
    outcome, verdict = _graded(hw, linked)
    assert outcome.score == 0 and verdict == "refused"
    assert outcome.report == (f"{LINEAR}: the submission's linear.py is a symbolic link (to "
                              f"{REFERENCE}); wanted the file itself, not a link to one")
    folder = tmp_path / "folder"                  # a linked folder, the right answers inside
    folder.mkdir()
    (folder / "minitf").symlink_to(key / "minitf", target_is_directory=True)
    with pytest.raises(ValueError, match="the submission's minitf/functional/linear.py lies "
                                         "outside it, through a linked folder"):
        find_submitted(folder, LINEAR)
    copy = tmp_path / "copy"                          # the homework folder graded as it is
    shutil.copytree(key, copy)
    (copy / LINEAR).unlink()
    (copy / LINEAR).symlink_to(REFERENCE)
    assert _graded(copy)[1] == "refused"
    (linked / "linear.py").unlink()
    shutil.copy(REFERENCE, linked / "linear.py")                 # the same text, a file: graded
    assert _graded(hw, linked)[0].result.passed


def test_the_guard_counts_a_student_s_file_that_is_a_solution_file_as_read_it(tmp_path):
    """Its last line, behind the refusal above: the exemption of that case gave full marks."""
    link = tmp_path / "linear.py"
    link.symlink_to(REFERENCE)
    with reading_refused(link, [REFERENCE]) as read:
        assert read == [REFERENCE.resolve()]
    with reading_refused(tmp_path / "other.py", [REFERENCE]) as read:
        assert read == []


# -- the words a student reads ---------------------------------------------------------------------

def test_a_missing_file_an_unreadable_one_and_a_zip_in_the_zip_say_what_happened(made, tmp_path):
    hw, key = made
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _graded(hw, empty)[1] == "missing"
    (tmp_path / "utf16").mkdir()
    (tmp_path / "utf16" / "linear.py").write_text(REFERENCE.read_text(encoding="utf-8"),
                                                  encoding="utf-16")
    outcome, verdict = _graded(hw, tmp_path / "utf16")
    assert verdict == "unreadable" and "is not valid UTF-8" in outcome.report
    assert outcome.report in homework.failing_reports([outcome])     # shown, not only a word
    inner = tmp_path / "zipped" / "inner.zip"                     # a zip of the zip, unpacked
    inner.parent.mkdir()
    with zipfile.ZipFile(inner, "w") as archive:
        archive.write(key / LINEAR, LINEAR)
    assert what_it_holds(inner.parent) == ("holds no .py file, but the zip inner.zip, which "
                                           "is not unpacked; wanted the files themselves, or "
                                           "one zip of them")
    assert what_it_holds(empty) == "holds no .py file"


def test_a_byte_order_mark_is_no_edit_outside_the_regions(made, tmp_path):
    """Windows' Notepad writes one; Python skips it, and so does the comparison."""
    (tmp_path / "linear.py").write_bytes(b"\xef\xbb\xbf" + (made[1] / LINEAR).read_bytes())
    outcome, verdict = _graded(made[0], tmp_path)
    assert outcome.result.passed and not outcome.edited and verdict == "passed"


# -- writing: the flag, the path, what went wrong, what was wanted; nothing half-written -----------

def test_a_folder_that_cannot_be_made_is_named_by_its_flag(tmp_path, capsys):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert cli.main(["homework", "make", "--exercises", EXERCISES[0],
                     "--out", str(a_file / "hw")]) == 2
    assert one_line(capsys) == (f"minitf homework make: --out {a_file / 'hw'}: cannot be written "
                                f"(Not a directory); wanted a new folder you can write to, with "
                                f"room for a copy of minitf")
    assert cli.main(["exercise", "start", EXERCISES[0], "--dir", str(a_file / "ex")]) == 2
    assert one_line(capsys) == (f"minitf exercise start: --dir {a_file / 'ex'}: cannot be "
                                f"written (Not a directory); wanted a folder you can write the "
                                f"exercise file in")


def test_a_zip_that_cannot_be_written_is_named_by_its_flag(made, tmp_path, monkeypatch):
    out = tmp_path / "hw.zip"

    def refused(path, *args, **kwargs):       # a folder of someone else's (root ignores modes)
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setattr(autograder.zipfile, "ZipFile", refused)
    with pytest.raises(ValueError, match=rf"^--out {re.escape(str(out))}: cannot be written "
                                         rf"\(Permission denied\); wanted a new .zip file in "
                                         rf"a folder you can write to$"):
        autograder.build(made[0], out)
    assert not out.exists()


def test_an_error_reading_another_file_is_left_in_its_own_words(tmp_path):
    other = OSError(errno.EIO, "Input/output error", str(tmp_path / "elsewhere.py"))
    with pytest.raises(OSError) as raised, writing.os_errors_named("--out", tmp_path / "x", "y"):
        raise other
    assert raised.value is other


def _full_disk_after(writes: int, monkeypatch):
    """Path.write_bytes fails as a full disk does after ``writes`` files (the copy of minitf)."""
    write_bytes, done = Path.write_bytes, []

    def write(self, data):
        if len(done) == writes:
            raise OSError(errno.ENOSPC, "No space left on device")      # a write: no file name
        done.append(self)
        return write_bytes(self, data)
    monkeypatch.setattr(Path, "write_bytes", write)


@pytest.mark.parametrize("existed", ["nothing", "an empty folder"])
def test_a_homework_a_full_disk_stopped_leaves_nothing_to_block_the_rerun(tmp_path, monkeypatch,
                                                                          existed):
    parent = tmp_path / "course"
    parent.mkdir()
    (parent / "notes.txt").write_text("mine")                  # the instructor's: kept
    out = parent / "new" / "hw" if existed == "nothing" else parent / "hw"
    if existed != "nothing":
        out.mkdir()
    _full_disk_after(10, monkeypatch)
    with pytest.raises(ValueError, match=rf"^--out {re.escape(str(out))}: cannot be written "
                                         rf"\(No space left on device\); wanted a new folder"):
        homework.make(out, EXERCISES)
    assert sorted(p.name for p in parent.iterdir()) == (
        ["notes.txt"] if existed == "nothing" else ["hw", "notes.txt"])
    assert (parent / "notes.txt").read_text() == "mine" and not any(out.glob("*"))
    monkeypatch.undo()
    assert homework.manifest(homework.make(out, EXERCISES))["exercises"]   # the rerun: made


# -- refused before anything is written ------------------------------------------------------------

def test_a_timeout_longer_than_gradescope_allows_is_refused(made, tmp_path, capsys):
    assert autograder.MOST_TIMEOUT_MINUTES == 40          # Gradescope's longest timeout
    with pytest.raises(SystemExit):
        cli.main(["homework", "autograder", str(made[0]), "--out", str(tmp_path / "a.zip"),
                  "--timeout-minutes", "41"])
    assert "argument --timeout-minutes: got '41'; wanted a whole number of minutes ≥ 2" in \
        capsys.readouterr().err
    with pytest.raises(ValueError, match=r"timeout_minutes must be an integer in \[2, 40\], "
                                         r"the assignment's timeout on Gradescope.*; got 99999"):
        autograder.build(made[0], tmp_path / "b.zip", timeout_minutes=99999)
    assert not list(tmp_path.iterdir())


def test_an_instructor_s_file_given_twice_is_named(tmp_path):
    with pytest.raises(ValueError, match=rf"^--file {re.escape(str(OPS))}: given twice; "
                                         rf"wanted each"):
        homework.make(tmp_path / "hw", files=[OPS, OPS])
    namesake = tmp_path / "other" / OPS.name
    namesake.parent.mkdir()
    shutil.copy(OPS, namesake)
    with pytest.raises(ValueError, match=rf"^--file {re.escape(str(namesake))}: has the name "
                                         rf"of --file {re.escape(str(OPS))}"):
        homework.make(tmp_path / "hw", files=[OPS, namesake])
    assert not (tmp_path / "hw").exists()


# -- the autograder's budget stops a loop, by name, before the kill --------------------------------

def test_a_loop_the_budget_stops_is_named_not_killed_as_a_crash(made, tmp_path):
    """Python counts --budget from its own start, after run_autograder's: a kill at the budget
    landed first, and the loop was reported as a process that ended (os._exit(), a crash...)."""
    hw, key = made
    root = tmp_path / "autograder"
    with zipfile.ZipFile(autograder.build(hw, tmp_path / "hw.zip")) as archive:
        archive.extractall(root / "source")
    script = root / "source" / "run_autograder"
    text = script.read_text()
    assert "\nbudget=540\n" in text           # 11 s: past the 10 s a run is always given
    script.write_text(text.replace("\nbudget=540\n", "\nbudget=11\n"))
    (root / "submission").mkdir()
    loop = (key / LINEAR).read_text(encoding="utf-8").replace(
        "    x, W, has_bias = cache\n", "    while True:\n        pass\n")
    (root / "submission" / "linear.py").write_text(loop, encoding="utf-8")
    run = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "AUTOGRADER_ROOT": str(root),
                              "AUTOGRADER_PYTHON": sys.executable})
    assert run.returncode == 0 and "ended inside an exercise" not in run.stderr, run.stderr
    output = json.loads((root / "results" / "results.json").read_text())["tests"][0]["output"]
    assert "while True:" in output and "was stopped when the grading's budget of 11 s ran out" \
        in output


def test_os_exit_in_a_student_s_answer_costs_its_exercise_not_the_grading(made, tmp_path,
                                                                          monkeypatch):
    """os._exit(0) in an answer ended `homework grade` at once with exit status 0 and not a word
    (on Gradescope run_autograder took the rest up again; a local loop read the 0 as a pass)."""
    hw, key = made

    def real_exit(status):       # stands in for the real one, should the guard let a call by
        raise AssertionError("os._exit reached: it would have ended this test run with 0")
    monkeypatch.setattr(os, "_exit", real_exit)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "linear.py").write_text((key / LINEAR).read_text(encoding="utf-8").replace(
        "    x, W, has_bias = cache\n", "    import os\n    os._exit(0)\n"), encoding="utf-8")
    outcome, verdict = _graded(hw, tmp_path / "sub")
    assert verdict != "passed" and outcome.score == 0
    assert "ExitRefused: your code called os._exit(0)" in outcome.report, outcome.report


def test_a_syntax_error_in_the_copy_is_one_line_naming_the_file_and_line(made, tmp_path):
    """Mid-edit, `python -m minitf homework grade .` ended in Python's traceback through the
    package's import, five frames of runpy's first; an import from code of one's own keeps it."""
    hw = tmp_path / "hw"
    shutil.copytree(made[0], hw)
    path = hw / LINEAR
    text = path.read_text(encoding="utf-8")
    stub = text.split("# BEGIN SOLUTION linear_backward\n", 1)[1].split("    # END SOLUTION")[0]
    path.write_text(text.replace(stub, "    dx = (\n", 1), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index("    dx = (") + 1
    graded = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=hw,
                            capture_output=True, text=True, timeout=60)
    assert graded.returncode == 2 and graded.stdout == ""
    assert graded.stderr == (f"minitf: {LINEAR}, line {line}: '(' was never closed; wanted "
                             f"Python that parses (fix that line, then run the command "
                             f"again)\n"), graded.stderr
    imported = subprocess.run([sys.executable, "-c", "import minitf"], cwd=hw,
                              capture_output=True, text=True, timeout=60)
    assert imported.returncode == 1 and imported.stderr.startswith("Traceback")
    assert imported.stderr.rstrip().endswith("SyntaxError: '(' was never closed")


def test_a_file_that_cannot_be_graded_is_not_graded_with_its_word(made, tmp_path):
    """NotGraded carries the word the table shows first, and the line the report says."""
    from minitf.homework.submission import NotGraded, graded_file
    hw, _ = made
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NotGraded) as missing:
        graded_file(hw, empty, LINEAR, [LINEAR])
    assert missing.value.verdict == "missing" and str(missing.value).startswith(
        f"{LINEAR}: missing from the submission")
    (tmp_path / "latin").mkdir()
    (tmp_path / "latin" / "linear.py").write_bytes(b"x = '\xe9'\n")
    with pytest.raises(NotGraded) as unreadable:
        graded_file(hw, tmp_path / "latin", LINEAR, [LINEAR])
    assert unreadable.value.verdict == "unreadable" and "not valid UTF-8" in str(unreadable.value)
    assert isinstance(unreadable.value, ValueError)          # one line, as every refusal


@pytest.mark.parametrize("damage, shown", [
    (lambda d: d["exercises"][0].pop("file"), "{'name': 'linear_backward'"),
    (lambda d: d["exercises"].__setitem__(0, "linear_backward"), "reads 'linear_backward'"),
    (lambda d: d.__setitem__("exercises", {"linear_backward": 1}), "exercises are {"),
    (lambda d: d["exercises"][0].__setitem__("source", "mine"), "'source': 'mine'"),
    (lambda d: d["exercises"][0].__setitem__("file", "../../etc/passwd"), "../../etc/passwd"),
    (lambda d: d.__setitem__("frames", []), "its frames are []"),
    (lambda d: d.__setitem__("exercises", []), "lists no exercises; wanted one or more"),
    (lambda d: d.__setitem__("minitf homework", 99), "is of format 99; wanted 1"),
    (lambda d: d.pop("minitf homework"), "is of format None; wanted 1"),
], ids=["no file", "a string", "a dict", "another source", "outside the folder", "frames",
        "no exercises", "format 99", "no format"])
def test_a_damaged_homework_json_is_one_line_before_any_grading(made, tmp_path, capsys,
                                                                damage, shown):
    """An entry without its file was a KeyError, one that is a string an AttributeError; a list
    of no exercises graded as "score 0 of 0", exit status 0, a pass."""
    hw = tmp_path / "hw"
    shutil.copytree(made[0], hw)
    data = json.loads((hw / "homework.json").read_text(encoding="utf-8"))
    damage(data)
    (hw / "homework.json").write_text(json.dumps(data), encoding="utf-8")
    assert cli.main(["homework", "grade", str(hw)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{hw}/homework.json: " in err and shown in err, err
    assert "as 'minitf homework make' writes it" in err


def test_a_submission_graded_by_a_homework_copy_is_refused(made):
    """Run in the student directory, the minitf that grades is its copy, whose exercises are
    blank: the answer key graded there scored 2 of 9 ("relu_backward is not written yet")."""
    hw, key = made
    run = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", ".",
                          "--submission", str(key)], cwd=hw, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    assert run.stderr == (f"minitf homework grade: submission {key}: another's files are graded "
                          f"by the reference minitf, and the one running is a homework copy "
                          f"({hw / 'minitf'}); run it outside any homework directory\n")
    assert homework.grade(hw, key)[0].result.passed       # by the reference, as it should be


def test_a_homework_edited_after_make_is_refused(made, tmp_path, capsys):
    """Every student graded by its zip read "edited outside its regions, first at line 1" of the
    instructor's line, and a check_NAME() changed there graded with the change, never tried."""
    hw, _ = made
    edited = tmp_path / "hw"
    shutil.copytree(hw, edited)
    path = edited / LINEAR
    path.write_text("# a note of the instructor's\n" + path.read_text(encoding="utf-8"),
                    encoding="utf-8")
    out = tmp_path / "edited.zip"
    assert cli.main(["homework", "autograder", str(edited), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"minitf homework autograder: folder {edited}: {LINEAR} was edited after homework make "
        f"(first at line 1); wanted the directory as make wrote it: edit the source, then make "
        f"it again\n")
    assert not out.exists()
