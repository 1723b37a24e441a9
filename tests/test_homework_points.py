"""What exercises are worth: ``homework make --points A=N,...`` writes each exercise's points
into homework.json, and every grading scores by them (the table, results.json's max_score, the
journal's zeros); an exercise earns all its points or none. Before, every exercise was worth 1."""
import json
import shutil

import pytest

from minitf import cli, homework
from minitf.homework import graded_by
from minitf.homework.journal import Journal
from test_homework import OPS

NAMES = ["relu_backward", "softmax_backward"]
POINTS = {"softmax_backward": 2.5, "rmsnorm_backward": 4}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the students' folder, the key) of two catalogue exercises and an instructor's file."""
    root = tmp_path_factory.mktemp("points")
    hw = homework.make(root / "hw", NAMES, [OPS], points=POINTS)
    key = homework.make(root / "key", NAMES, [OPS], solutions=True, points=POINTS)
    return hw, key


def test_make_writes_every_exercises_points(made):
    hw, _ = made
    entries = homework.manifest(hw)["exercises"]
    assert {e["name"]: e["points"] for e in entries} == {
        "relu_backward": 1, "softmax_backward": 2.5, "rmsnorm_backward": 4}
    readme = (hw / "README.md").read_text(encoding="utf-8")
    assert "| `softmax_backward` | `minitf/functional/softmax.py` | 2.5 |" in readme
    assert "| `rmsnorm_backward` | `homework_ops.py` | 4 |" in readme


def test_the_grading_scores_by_the_points_all_or_nothing(made):
    hw, key = made
    passed = homework.grade(key)
    assert [o.score for o in passed] == [1, 2.5, 4]
    assert homework.table(passed).splitlines()[-1].startswith("score 7.5 of 7.5 (")
    results = homework.gradescope(passed)
    assert results["score"] == 7.5
    assert [t["max_score"] for t in results["tests"]] == [1, 2.5, 4]
    failed = homework.grade(hw)                              # nothing written: 0 of each
    assert [(o.score, o.points) for o in failed] == [(0, 1), (0, 2.5), (0, 4)]
    table = homework.table(failed)
    assert "0/2.5" in table and table.splitlines()[-1].startswith("score 0 of 7.5 (")
    assert [t["max_score"] for t in homework.gradescope(failed)["tests"]] == [1, 2.5, 4]


def test_the_journal_scores_an_exercise_it_never_finished_out_of_its_points(made, tmp_path):
    """results.json as it stands before an exercise runs: that one and the rest at 0 of their
    points (Gradescope's total would else be out of 3, not 7.5)."""
    names = [e["name"] for e in homework.manifest(made[0])["exercises"]]
    journal = Journal(tmp_path / "results.json", names, points=POINTS)
    journal.starting("relu_backward")
    written = json.loads((tmp_path / "results.json").read_text())
    assert [t["max_score"] for t in written["tests"]] == [1, 2.5, 4]
    assert written["score"] == 0


def test_a_total_of_tenths_is_written_as_the_number_it_is():
    """0.1 + 0.2 is 0.30000000000000004 in floats: results.json said so to the student."""
    from minitf.homework.results import gradescope_results
    tests = [{"score": 0.1}, {"score": 0.2}]
    assert gradescope_results(tests, 1.0)["score"] == 0.3


def test_the_summary_line_counts_exercises_in_words_that_agree():
    from minitf.homework.results import gradescope_results
    assert gradescope_results([{"score": 1}], 1.0)["output"].startswith("1 exercise, each graded")
    # shown as written, never as HTML that would drop a traceback's "<module>"
    assert gradescope_results([{"score": 1}], 1.0)["output_format"] == "text"
    assert gradescope_results([{"score": 1}], 1.0)["test_output_format"] == "text"
    assert gradescope_results([{"score": 1}] * 2, 1.0)["output"].startswith("2 exercises, each")


def test_a_homework_json_without_points_is_worth_one_each(made, tmp_path):
    key = tmp_path / "key"
    shutil.copytree(made[1], key)
    data = json.loads((key / homework.MANIFEST).read_text())
    for entry in data["exercises"]:
        del entry["points"]
    (key / homework.MANIFEST).write_text(json.dumps(data))
    assert [o.score for o in homework.grade(key)] == [1, 1, 1]


def test_points_homework_json_cannot_hold_are_refused_before_grading(made, tmp_path, capsys):
    hw = tmp_path / "hw"
    shutil.copytree(made[0], hw)
    data = json.loads((hw / homework.MANIFEST).read_text())
    data["exercises"][1]["points"] = -2
    (hw / homework.MANIFEST).write_text(json.dumps(data))
    assert cli.main(["homework", "grade", str(hw)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == (
        f"minitf homework grade: {hw}/homework.json: 'softmax_backward' is worth -2 points; "
        f"wanted a number > 0 and ≤ 1000, as 'minitf homework make --points' writes it")
    assert graded_by.KEY in data          # (the manifest otherwise as make wrote it)


@pytest.mark.parametrize("points, said", [
    ("nope=2", "--points: 'nope' is no exercise of this homework; wanted one of relu_backward, "
               "softmax_backward"),
    ("softmax_backward=0", "--points: softmax_backward=0; wanted NAME=N pairs"),   # as typed
    ("softmax_backward=-1", "--points: softmax_backward=-1; wanted NAME=N pairs"),  # not -1.0
    ("softmax_backward=nan", "--points: softmax_backward=nan; wanted NAME=N pairs"),
    ("softmax_backward=1e9", "--points: softmax_backward=1e9; wanted NAME=N pairs"),
    ("softmax_backward", "--points: 'softmax_backward' is no NAME=N; wanted NAME=N pairs"),
    ("softmax_backward=two", "--points: 'softmax_backward=two' is no NAME=N; wanted"),
    ("relu_backward=2,relu_backward=3", "--points: relu_backward is given twice; wanted each "
                                        "exercise once"),
    ("relu_backward=2,ReLU_backward=3", "--points: relu_backward is given twice; wanted each "
                                        "exercise once"),
])
def test_bad_points_are_one_line_and_nothing_is_written(points, said, tmp_path, capsys):
    out = tmp_path / "hw"
    assert cli.main(["homework", "make", "--exercises", ",".join(NAMES), "--points", points,
                     "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"minitf homework make: {said}"), err
    assert not out.exists()


def test_points_from_python_are_a_dict_of_numbers(tmp_path):
    with pytest.raises(TypeError, match=r"--points: points must be a dict \{exercise name: "):
        homework.make(tmp_path / "hw", NAMES, points=[("relu_backward", 2)])
    with pytest.raises(ValueError, match="relu_backward='2'; wanted NAME=N pairs"):
        homework.make(tmp_path / "hw", NAMES, points={"relu_backward": "2"})
    assert not (tmp_path / "hw").exists()


def test_points_name_an_exercise_as_exercises_does_in_any_case(tmp_path):
    """--exercises took Relu_Backward; --points refused it as no exercise of the homework."""
    out = tmp_path / "hw"
    assert cli.main(["homework", "make", "--exercises", "Relu_Backward,MultiHeadAttention.backward",
                     "--points", "RELU_backward=2,multiheadattention_backward=3",
                     "--out", str(out)]) == 0
    data = json.loads((out / "homework.json").read_text(encoding="utf-8"))
    assert {e["name"]: e["points"] for e in data["exercises"]} == {
        "relu_backward": 2.0, "MultiHeadAttention.backward": 3.0}
