"""The journal of ``homework grade --json``: results.json as it would stand if the grading
process ended before each exercise, and ``--resume``'s taking up of what such a process left
(run_autograder's loop around it is tested with the zip, in test_homework_autograder.py)."""
import json
import os
import shutil

import pytest

from minitf import cli, homework
from minitf.homework.journal import Journal

EXERCISES = ["softmax_backward", "layer_norm_backward"]
SOFTMAX = "minitf/functional/softmax.py"
RIGHT = "return p * (dp - row_dot(dp, p, axis))"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the key)."""
    root = tmp_path_factory.mktemp("journal")
    return (homework.make(root / "hw", EXERCISES),
            homework.make(root / "key", EXERCISES, solutions=True))


def _key_but(key, tmp_path, line: str):
    """A copy of the key whose softmax_backward runs ``line`` first, and returns as it should."""
    folder = tmp_path / "submission"
    shutil.copytree(key / "minitf", folder / "minitf")
    text = (key / SOFTMAX).read_text(encoding="utf-8")
    changed = text.replace(RIGHT, line + "\n    " + RIGHT)
    assert changed != text
    (folder / SOFTMAX).write_text(changed, encoding="utf-8")
    return folder


def test_results_json_stands_at_every_exercise_and_resume_takes_it_up(made, tmp_path, capsys):
    """What a process that ends inside an exercise leaves, and --resume's one-line refusals."""
    hw, _ = made
    out = tmp_path / "results.json"
    journal = Journal(out, EXERCISES)
    journal.starting(EXERCISES[0])                       # ... and the process ends here
    left = json.loads(out.read_text(encoding="utf-8"))
    assert [t["score"] for t in left["tests"]] == [0.0, 0.0] and left["score"] == 0
    assert "ended while it ran" in left["tests"][0]["output"]
    assert "was not graded: the grading process ended inside softmax_backward" in \
        left["tests"][1]["output"]
    progress = out.with_name("results.json.progress")
    assert json.loads(progress.read_text(encoding="utf-8"))["running"] == EXERCISES[0]

    taken = Journal(out, EXERCISES, resume=True)
    assert taken.graded == {EXERCISES[0]}
    assert taken.started == journal.started         # a --budget counts from the first run's start
    with pytest.raises(ValueError, match="ended outside any exercise"):   # it ended again,
        Journal(out, EXERCISES, resume=True)              # before the next exercise: no one to blame
    assert not progress.exists()
    progress.write_text('{"tests": [], "running": "attention_backward", "seconds": 0, '
                        '"note": "", "started": 0}')
    with pytest.raises(ValueError, match="not the progress of this homework's grading"):
        Journal(out, EXERCISES, resume=True)
    assert not progress.exists()
    assert Journal(out, EXERCISES, resume=True).graded == set()      # nothing left: grade all

    assert cli.main(["homework", "grade", str(hw), "--resume"]) == 2
    assert "--resume goes with --json" in capsys.readouterr().err


def test_resume_with_nothing_left_behind_says_it_grades_every_exercise(made, tmp_path, capsys):
    key = made[1]
    out = tmp_path / "results.json"
    assert cli.main(["homework", "grade", str(key), "--json", str(out), "--resume"]) == 0
    assert capsys.readouterr().err == (f"--resume: no {out}.progress was left behind (the last "
                                       f"grading finished, or none ran); grading every exercise\n")
    assert json.loads(out.read_text(encoding="utf-8"))["score"] == 2


@pytest.mark.parametrize("held", ["homework.json", "solution.py", "other.json", "binary",
                                  "pytest-report.json", "empty-report.json"])
def test_json_never_writes_over_a_file_that_is_not_a_grading_s_results(made, tmp_path, capsys,
                                                                        held):
    hw, key = made
    target = tmp_path / held
    if held == "homework.json":
        target.write_bytes((hw / "homework.json").read_bytes())     # the homework's own manifest
    else:
        target.write_bytes({"solution.py": b"def softmax_backward(dp, cache): ...\n",
                            "other.json": b'{"score": 3}', "binary": b"\xff\xfe",
                            "pytest-report.json": b'{"tests": [{"nodeid": "test_a.py::test_x", '
                                                  b'"outcome": "passed"}]}',
                            "empty-report.json": b'{"tests": []}'}[held])
    before = target.read_bytes()
    assert cli.main(["homework", "grade", str(key), "--json", str(target)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"minitf homework grade: --json {target}: already holds a file that is not a results.json a "
        f"grading wrote; wanted a new file name, or an earlier results file to replace")
    assert target.read_bytes() == before and not target.with_name(held + ".progress").exists()
    results = tmp_path / "results.json"                     # a grading's own is replaced
    for _ in range(2):
        assert cli.main(["homework", "grade", str(key), "--json", str(results)]) == 0
    assert json.loads(results.read_text(encoding="utf-8"))["score"] == 2


def test_json_takes_an_empty_file_and_gradescope_s_results_without_a_total(made, tmp_path,
                                                                           capsys, monkeypatch):
    """Nothing to lose in an empty file (--json "$(mktemp)"); Gradescope's format lets the tests
    carry the score without a total."""
    key = made[1]
    for held in ("", '{"tests": [{"name": "x", "score": 1}]}'):
        target = tmp_path / "results.json"
        target.write_text(held, encoding="utf-8")
        assert cli.main(["homework", "grade", str(key), "--json", str(target)]) == 0
        assert json.loads(target.read_text(encoding="utf-8"))["score"] == 2
    capsys.readouterr()
    relative = tmp_path / "notes.json"
    relative.write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)                         # named as typed, not made absolute
    assert cli.main(["homework", "grade", str(key), "--json", "notes.json"]) == 2
    assert "--json notes.json: already holds a file" in capsys.readouterr().err


def test_what_a_right_answer_prints_never_stops_the_writing(made, tmp_path, monkeypatch):
    """A lone surrogate (bytes that were not UTF-8, decoded with surrogateescape) in a print or
    an error message: UTF-8 cannot hold it, and results.json could not be written."""
    hw, key = made
    submission = _key_but(key, tmp_path, "print('dbg \\udc80')")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["homework", "grade", str(hw), "--submission", str(submission),
                     "--json", "results.json"]) == 0
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 2 and "dbg \ufffd" in results["tests"][0]["output"]


def test_a_relative_json_path_survives_the_student_s_chdir(made, tmp_path, monkeypatch):
    hw, key = made
    submission = _key_but(key, tmp_path, "import os; os.chdir(os.sep)")
    (tmp_path / "res").mkdir()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["homework", "grade", str(hw), "--submission", str(submission),
                     "--json", "res/r.json"]) == 0
    assert os.getcwd() == os.sep                      # moved, and the results went where asked
    results = json.loads((tmp_path / "res/r.json").read_text(encoding="utf-8"))
    assert results["score"] == 2 and not (tmp_path / "res/r.json.progress").exists()


@pytest.mark.parametrize("progress", [
    '{"tests": [{"name": "softmax_backward"}], "running": null, "seconds": 0, "note": "", '
    '"started": 0, "of": ""}',                                # a test without its score
    '{"tests": [], "running": "softmax_backward", "seconds": 0, "note": "", "started": NaN, '
    '"of": ""}',
    '{"tests": [], "running": "softmax_backward", "seconds": 0, "note": "", "started": 1e30, '
    '"of": ""}',
    '{"tests": [], "running": "softmax_backward", "seconds": 0, "note": "", "started": 0, '
    '"of": "another/submission"}',                   # another grading's
])
def test_a_progress_file_that_is_not_this_grading_s_is_refused_in_one_line(tmp_path, progress):
    out = tmp_path / "results.json"
    out.with_name("results.json.progress").write_text(progress, encoding="utf-8")
    with pytest.raises(ValueError, match="is not the progress of this homework's grading"):
        Journal(out, EXERCISES, resume=True)
    assert not out.with_name("results.json.progress").exists()


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("notes", ["my notes on the grading", "[" * 100_000, '{"tests": []}', ""])
def test_a_file_where_the_progress_goes_that_no_grading_wrote_is_kept(made, tmp_path, capsys,
                                                                      notes, resume):
    """Not a grading's progress (nested past the recursion limit, too): refused in one line and
    left as it was, where the grading would have written over it and removed it."""
    progress = tmp_path / "results.json.progress"
    progress.write_text(notes, encoding="utf-8")
    status = cli.main(["homework", "grade", str(made[1]), "--json", str(tmp_path / "results.json"),
                       *(["--resume"] if resume else [])])
    assert status == 2
    err = capsys.readouterr().err
    assert err.strip().endswith(f"--json: {progress}, where the grading keeps its progress, "
                                f"holds a file that no grading wrote; wanted it moved, or "
                                f"another --json name") and err.count("\n") == 1, err
    assert progress.read_text(encoding="utf-8") == notes
    assert not (tmp_path / "results.json").exists()


def test_a_resumed_grading_says_the_whole_score(made, tmp_path, capsys):
    """Its table holds its own exercises; the line under it counts those taken up too."""
    hw, key = made
    out = tmp_path / "results.json"
    Journal(out, EXERCISES, of=str(key.resolve())).starting(EXERCISES[0])   # ended in softmax
    assert cli.main(["homework", "grade", str(key), "--json", str(out), "--resume"]) == 1
    printed = capsys.readouterr().out
    # the 1 taken up is the one the process ended inside, not one it graded
    assert printed.rstrip().endswith(f"with the 1 taken up from the grading process that "
                                     f"ended (among them the one it ended inside, at 0): score "
                                     f"1 of 2 in all ({out})")
    results = json.loads(out.read_text(encoding="utf-8"))
    assert [t["score"] for t in results["tests"]] == [0.0, 1.0]
    assert results["tests"][0]["output"].endswith("; the grading went on in a new process")


@pytest.mark.parametrize("status, cause", [
    (137, "(exit status 137: killed (SIGKILL): its code held one call past the grading's time"),
    (124, "(exit status 124: its code caught the stop at its time limit and ran on"),
    (134, "(exit status 134: an abort in compiled code (SIGABRT))"),
    (143, "(exit status 143: ended by the signal SIGTERM)"),
    (250, "(exit status 250: ended by signal 122)"),          # no signal of that number
    (3, "(exit status 3: its code ended the process itself"),
])
def test_the_exit_status_run_autograder_saw_names_the_likely_cause(made, tmp_path, capsys,
                                                                   status, cause):
    """The six possible causes left a student to guess; the status run_autograder passes on
    (--ended-with) says which it most likely was, in the output and in the summary line."""
    key = made[1]
    out = tmp_path / "results.json"
    Journal(out, EXERCISES, of=str(key.resolve())).starting(EXERCISES[0])
    assert cli.main(["homework", "grade", str(key), "--json", str(out), "--resume",
                     "--ended-with", str(status)]) == 1
    results = json.loads(out.read_text(encoding="utf-8"))
    said = results["tests"][0]["output"]
    assert cause in said and "raised KeyboardInterrupt" not in said, said
    assert results["output"].endswith(f"ended inside softmax_backward (exit status {status})")


def test_ended_with_goes_with_resume_and_takes_an_exit_status(made, tmp_path, capsys):
    hw, out = made[0], str(tmp_path / "results.json")
    assert cli.main(["homework", "grade", str(hw), "--json", out, "--ended-with", "139"]) == 2
    assert "--ended-with 139 goes with --resume" in capsys.readouterr().err
    for bad in ("256", "-1", "x"):
        with pytest.raises(SystemExit):
            cli.main(["homework", "grade", str(hw), "--json", out, "--resume",
                      "--ended-with", bad])
        assert (f"argument --ended-with: got '{bad}'; wanted an exit status, an integer in "
                f"[0, 255]") in capsys.readouterr().err
