"""Ctrl-C is one line too: a command stopped by it says so (a bare KeyboardInterrupt's text is
empty, and "minitf gradcheck: " was all it printed), and a grading says which exercise it was
inside and what to do next."""
import re

import pytest

from minitf import cli, homework


def test_a_command_stopped_by_ctrl_c_says_it_was_interrupted(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_gradcheck", interrupted)
    assert cli.main(["gradcheck"]) == 130
    assert capsys.readouterr().err == "minitf gradcheck: interrupted\n"


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A homework of softmax_backward, and a submission whose answer is stopped by Ctrl-C (it
    raises KeyboardInterrupt, as Python does where the key is pressed)."""
    hw = homework.make(tmp_path_factory.mktemp("hw") / "hw", ["softmax_backward"])
    submission = tmp_path_factory.mktemp("submission")
    text = (hw / "minitf" / "functional" / "softmax.py").read_text(encoding="utf-8")
    stub = re.search(r"\n( +)raise NotImplementedError\(\"softmax_backward.*\n", text)
    (submission / "softmax.py").write_text(
        text.replace(stub.group(0), f"\n{stub.group(1)}raise KeyboardInterrupt\n"),
        encoding="utf-8")
    return hw, submission


@pytest.mark.parametrize("json", [False, True])
def test_a_grading_stopped_by_ctrl_c_names_the_exercise_and_says_to_run_it_again(
        stopped, tmp_path, capsys, json):
    hw, submission = stopped
    flags = ["--json", str(tmp_path / "results.json")] if json else []
    assert cli.main(["homework", "grade", str(hw), "--submission", str(submission), *flags]) == 130
    err = capsys.readouterr().err
    kept = f"; {tmp_path / 'results.json'} holds what was graded before it, and 0 for the rest"
    assert err == (f"minitf homework grade: interrupted (Ctrl-C) while grading softmax_backward"
                   f"{kept if json else ''}; run the same command again to grade every "
                   f"exercise\n")


def test_a_resumed_grading_stopped_by_ctrl_c_says_to_run_it_without_resume(stopped, tmp_path,
                                                                         capsys):
    """It said "run the same command again", and the same command, --resume, scored the
    exercise it stopped in 0."""
    hw, submission = stopped
    results = tmp_path / "results.json"
    assert cli.main(["homework", "grade", str(hw), "--submission", str(submission), "--json",
                     str(results), "--resume"]) == 130
    assert capsys.readouterr().err.endswith(
        "; run the same command again without --resume to grade every exercise\n")
