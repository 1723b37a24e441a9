"""What a grading says of each exercise (minitf/homework/results.py), from outcomes built by hand so
every verdict is reached: passed, failed, error, a file's own word and a stub's; which reports are
printed under the table; and what Gradescope's results.json shows the student."""
import pytest

from minitf.exercises.grade import Result
from minitf.gradcheck import Row
from minitf.homework import results
from minitf.homework.autograde import Outcome

OK, BAD = Row("case", "dx", (2, 3), 0.0), Row("case", "dw", (3,), 1.0)


def _outcome(rows=(), stopped=None, kind=None, **fields) -> Outcome:
    fields = {"name": "softmax_backward", "report": "the report", "seconds": 0.5,
              "edited": False, **fields}
    return Outcome(result=Result(rows=list(rows), stopped=stopped, kind=kind), **fields)


def _row(outcome: Outcome) -> list[str]:
    """The table's row of ``outcome``: its columns, split where two spaces part them."""
    line = results.table([outcome]).splitlines()[2]
    return [column.strip() for column in line.split("  ") if column.strip()]


@pytest.mark.parametrize("outcome, verdict", [
    (_outcome([OK, OK]), "passed"),
    (_outcome([OK, BAD]), "failed"),
    (_outcome([], stopped="it raised before any tensor was checked"), "error"),
    (_outcome([OK], stopped="it raised in the second case"), "failed"),
    (_outcome([], stopped="softmax_backward is not written yet", kind="not written"),
     "not written"),
    (_outcome([], stopped="the file is not there", file_verdict="missing"), "missing"),
    (_outcome([], stopped="no time left", kind="not graded", file_verdict="missing"), "missing"),
], ids=["passed", "failed", "error", "raised-after-a-tensor", "stub", "file", "file-before-kind"])
def test_each_outcome_gets_its_verdict(outcome, verdict):
    """"error" is for code that raised before anything could be checked; one that raised after
    some tensors were compared ran and failed ("1/1" tensors ok, and still no points). A file's
    own word (missing, a link) comes before a stub's or the budget's: it says why at all."""
    assert _row(outcome)[2] == verdict


def test_the_row_counts_the_tensors_within_tolerance_and_says_where_a_file_was_edited():
    """"1/2": one of two tensors passed. An edit outside the regions is named with its first
    line where that is known, and without one where it is not."""
    row = _row(_outcome([OK, BAD], edited=True, edited_at="line 12", points=2.5, seconds=1.25))
    assert row == ["softmax_backward", "1/2",
                   "failed (file edited outside its regions, first at line 12)", "0/2.5", "1.2"]
    assert _row(_outcome([OK], edited=True))[2] == "passed (file edited outside its regions)"


def test_the_total_adds_the_scores_points_and_seconds():
    outcomes = [_outcome([OK], seconds=1.5), _outcome([BAD], points=2, seconds=2.25)]
    assert results.table(outcomes).splitlines()[-1] == "score 1 of 3 (3.8 s)"


def test_the_reports_under_the_table_are_those_of_exercises_that_ran_and_failed():
    """A passed exercise's report is not news; a blank one's says only "not written", which the
    table said already; a failed or erroring one's report is what the student fixes from."""
    outcomes = [_outcome([OK], report="passed report"),
                _outcome([], stopped="stub", kind="not written", report="blank report"),
                _outcome([OK, BAD], report="failed report"),
                _outcome([], stopped="raised", report="error report")]
    assert results.failing_reports(outcomes) == "failed report\n\nerror report"


def test_results_json_shows_the_status_and_everything_the_code_said():
    """Gradescope's status is the grading's, and the output the student reads holds the report,
    the edit, what the code printed and what it wrote to standard error, in that order."""
    passed = results.gradescope_test(_outcome([OK], points=2))
    assert (passed["status"], passed["score"], passed["max_score"]) == ("passed", 2, 2)
    failed = results.gradescope_test(_outcome([BAD], edited=True, edited_at="line 3",
                                              printed="hello\n", warned="a warning\n"))
    assert (failed["status"], failed["score"]) == ("failed", 0.0)
    assert failed["output"] == (
        "the report\n\nthis file was edited outside its solution regions, first at line 3"
        "\n\nyour code printed, while it was graded:\nhello\n"
        "\n\nyour code wrote to standard error (warnings among it), while it was graded:"
        "\na warning\n")
