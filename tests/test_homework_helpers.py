"""An exercise's helpers (Exercise.helpers: attention_backward's two steps) are graded with it.

A homework blanks them with the exercise, and minitf's relative attention calls them itself. So
the cases of relative attention grade attention_backward in a homework, and a submitted file's
own helpers stand in for minitf's while it is graded. Before, an answer written inline, its
helpers left blank, got full marks, and the student's copy then failed relative attention."""
import shutil
import subprocess
import sys

import pytest

from minitf import homework
from minitf.exercises import find, tracing
from minitf.homework import graded_by

ATTENTION = "minitf/functional/attention.py"
RELATIVE = "relative_attention (Shaw), keys and values"

# attention_backward written inline, without its helpers
INLINE = """\
    q, k, v, probs, scale, bias_shape, D = cache
    weights = probs if D is None else probs * D
    dv = weights.swapaxes(-1, -2) @ dout
    dscores = softmax_backward(dropout_backward(dout @ v.swapaxes(-1, -2), D), (probs, -1))
    dbias = None if bias_shape is None else sum_to_shape(dscores, bias_shape)
    return (dscores @ k) * scale, (dscores.swapaxes(-1, -2) @ q) * scale, dv, dbias
"""


def _region(text: str, nth: int) -> str:
    """The body of the nth attention_backward region of the file (0: the function itself,
    1: _values_backward, 2: _scores_backward)."""
    return text.split("# BEGIN SOLUTION attention_backward\n")[nth + 1].split("# END SOLUTION")[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the reference's answered attention.py) of attention_backward."""
    root = tmp_path_factory.mktemp("helpers")
    hw = homework.make(root / "hw", ["attention_backward"])
    key = homework.make(root / "key", ["attention_backward"], solutions=True)
    return hw, (key / ATTENTION).read_text(encoding="utf-8")


def _submit(tmp_path, text: str):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "attention.py").write_text(text, encoding="utf-8")
    return folder


def _inline(hw) -> str:
    """The student's file with attention_backward answered inline, the helpers still blank."""
    text = (hw / ATTENTION).read_text(encoding="utf-8")
    return text.replace(_region(text, 0), INLINE + "    ", 1)


def test_relative_attention_grades_attention_backward_in_a_homework_only():
    exercise = find("attention_backward")
    plain, in_homework = tracing.traced_grading_cases(exercise), \
        tracing.homework_grading_cases(exercise)
    assert RELATIVE not in plain            # outside a homework, minitf's own helpers run there
    assert RELATIVE in in_homework and set(plain) < set(in_homework)
    assert graded_by.reference()["attention_backward"] == list(in_homework)
    # no other exercise has helpers that other code calls: its cases are the same everywhere
    assert graded_by.reference()["gelu_backward"] == list(
        tracing.traced_grading_cases(find("gelu_backward")))


def test_an_answer_written_inline_with_its_helpers_blank_fails(made, tmp_path):
    hw, _ = made
    outcome, = homework.grade(hw, _submit(tmp_path, _inline(hw)))
    assert not outcome.result.passed
    assert outcome.result.stopped.startswith(
        "attention_backward's helper _values_backward is not written yet: it is part of the "
        "exercise (case 'relative_"), outcome.result.stopped
    assert outcome.result.stopped.endswith("; write its body too")
    assert {row.check for row in outcome.result.rows} >= {"attention", "attention, learned bias"}
    assert all(row.error <= 1e-6 for row in outcome.result.rows)    # the inline answer is right
    # the table says why every tensor of it is ok and it still fails
    row, = [line.split() for line in homework.results.table([outcome]).splitlines()
            if line.startswith("attention_backward")]
    assert row[1:5] == ["19/19", "helper", "not", "written"], row


def test_the_submitted_files_helpers_are_the_ones_graded(made, tmp_path):
    """The reference grades a submission: a wrong helper fails through relative attention,
    which the reference's own attention module calls, even where the inline answer is right."""
    hw, key = made
    wrong = key.replace("dq = (dscores @ k) * scale", "dq = dscores @ k", 1)
    assert wrong != key
    text = wrong.replace(_region(wrong, 0), INLINE + "    ", 1)
    outcome, = homework.grade(hw, _submit(tmp_path, text))
    assert not outcome.result.passed
    failed = {row.check for row in outcome.result.rows if not row.error <= 1e-6}
    assert failed and all(name.startswith("relative_attention") for name in failed), failed


def test_a_guessed_hint_never_counts_a_case_that_ran_the_helpers_alone_as_passing(made,
                                                                                 tmp_path):
    """Written wrongly inline, its helpers right: relative attention's cases, which run only the
    helpers, pass, and the guess said "but case 'relative_attention …' and 2 more pass"."""
    hw, key = made
    wrong = INLINE.replace("(dscores @ k) * scale,", "(dscores @ k) * scale + 0.1 * q,")
    assert wrong != INLINE
    text = key.replace(_region(key, 0), wrong + "    ", 1)
    outcome, = homework.grade(hw, _submit(tmp_path, text))
    hints = "\n".join(line for _, lines in outcome.result.problems for line in lines)
    assert not outcome.result.passed and "perhaps the classic mistake" in hints, hints
    assert "relative_attention" not in hints.split("perhaps the classic mistake")[1]


def test_the_references_answer_passes_every_case_relative_attention_included(made, tmp_path):
    hw, key = made
    outcome, = homework.grade(hw, _submit(tmp_path, key))
    assert outcome.result.passed, outcome.text
    assert RELATIVE in {row.check for row in outcome.result.rows}


def test_inside_the_copy_the_inline_answer_fails_too(made, tmp_path):
    hw = tmp_path / "hw"
    shutil.copytree(made[0], hw)
    (hw / ATTENTION).write_text(_inline(made[0]), encoding="utf-8")
    graded = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=hw,
                            capture_output=True, text=True, timeout=120)
    assert graded.returncode == 1, graded.stderr
    assert "helper _values_backward is not written yet" in graded.stdout, graded.stdout
    assert graded.stdout.splitlines()[-1].startswith("score 0 of 1 (")


def test_the_student_readme_names_the_helpers_to_write(made):
    """The stubs said so inside the file; the README's table named attention_backward alone."""
    readme = " ".join((made[0] / "README.md").read_text(encoding="utf-8").split())
    assert ("`attention_backward` includes `_values_backward` and `_scores_backward`, beside it "
            "in its file: write their bodies too, as they are graded with it.") in readme


def _changed(key: str, *changes) -> str:
    for old, new in changes:
        assert old in key, old
        key = key.replace(old, new, 1)
    return key


def test_a_case_that_calls_only_the_helpers_says_so(made, tmp_path):
    """Relative attention calls _values_backward itself, not attention_backward: a helper that
    returns its two gradients the other way round (and an attention_backward that unpacks them
    so) passed every attention case and then failed, blamed on attention_backward with the
    shapes of what it had returned in an earlier case."""
    hw, key = made
    swapped = _changed(key, ("    dv, dweights = _values_backward(dout, cache)\n",
                             "    dweights, dv = _values_backward(dout, cache)\n"),
                       ("    return dv, dweights\n", "    return dweights, dv\n"))
    outcome, = homework.grade(hw, _submit(tmp_path, swapped))
    stopped = outcome.result.stopped
    assert stopped.startswith("in case 'relative_attention (Shaw), keys and values', minitf's "
                              "code called your _values_backward, _scores_backward (not your "
                              "attention_backward) and raised an error:"), stopped
    assert "hint: each must return what its docstring says\n(not run after it: cases " in stopped
    assert stopped.endswith("; run the check again once this one passes)"), stopped
    assert "returned (a tuple" not in stopped                    # nothing of an earlier case's
    assert all(row.error <= 1e-6 for row in outcome.result.rows)


def test_a_helper_that_fails_only_in_relative_attention_is_named(made, tmp_path):
    """attention_backward undoing the dropout itself, _scores_backward not: right for attention,
    wrong where relative attention calls _scores_backward directly, and the hint spoke of
    attention_backward alone."""
    hw, key = made
    moved = _changed(key, ("    dq, dk, dscores = _scores_backward(dweights, cache)\n",
                           "    dq, dk, dscores = _scores_backward(dropout_backward(dweights, "
                           "cache.dropout), cache)\n"),
                     ("    dprobs = dropout_backward(dweights, D)", "    dprobs = dweights"))
    outcome, = homework.grade(hw, _submit(tmp_path, moved))
    assert not outcome.result.passed and outcome.result.stopped is None
    failed = {case for case, _ in outcome.result.problems}
    assert failed == {"relative_attention (Shaw), keys and values, attention dropout"}, failed
    assert all(lines[0] == "(this case checks your _values_backward, _scores_backward, which "
                           "minitf's code calls itself, not your attention_backward)"
               for _, lines in outcome.result.problems)


def test_in_the_copy_another_exercise_that_only_the_case_calls_is_named_by_the_case(tmp_path):
    """Relative attention calls embedding_backward: blank in the student's copy, it was said
    to be called by attention_backward, which never calls it."""
    hw = homework.make(tmp_path / "hw", ["embedding_backward", "attention_backward"])
    key = homework.make(tmp_path / "key", ["attention_backward"], solutions=True)
    shutil.copy(key / ATTENTION, hw / ATTENTION)
    graded = subprocess.run([sys.executable, "-m", "minitf", "homework", "grade", "."], cwd=hw,
                            capture_output=True, text=True, timeout=120)
    assert graded.returncode == 1, graded.stderr
    assert (f"embedding_backward is not written yet, and case '{RELATIVE}' calls it"
            in graded.stdout), graded.stdout
