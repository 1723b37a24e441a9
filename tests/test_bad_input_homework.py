"""Bad input to homework make and grade from Python and from the command line: one line naming
the argument or flag, before anything is written or graded."""
import pytest

from minitf import cli

from test_bad_input import raises
from test_bad_input_cli import one_line


def test_homework_from_python_names_what_the_flags_would_have_refused(tmp_path):
    """From a script, solutions='no' (truthy) wrote the answers into the students' copy, one
    name as a string was read letter by letter ("no exercise named 'r'"), and None for a path
    was pathlib's TypeError."""
    from minitf import homework
    from minitf.exercises import find
    from minitf.homework.autograder import build
    out = tmp_path / "hw"
    with raises(ValueError, "homework.make: solutions must be True or False; got 'no'"):
        homework.make(out, ["relu_backward"], solutions="no")
    with raises(TypeError, "homework.make: exercises must be a list; got 'relu_backward'",
                "wrap it in a list"):
        homework.make(out, "relu_backward")
    with raises(TypeError, "homework.make: exercises must be a list of names; got None"):
        homework.make(out, [None])
    with raises(TypeError, "homework.make: files must be a list; got 'ops.py'"):
        homework.make(out, files="ops.py")
    with raises(TypeError, "homework.make: out must be a path", "got None"):
        homework.make(None, ["relu_backward"])
    assert not out.exists(), "nothing was written"
    with raises(TypeError, "homework.grade: folder must be a path", "got None"):
        homework.grade(None)
    with raises(TypeError, "homework.grade: submission must be a path", "got 5"):
        homework.grade(tmp_path, submission=5)
    with raises(TypeError, "autograder.build: folder must be a path", "got None"):
        build(None, tmp_path / "hw.zip")
    with raises(TypeError, "exercises.find: name must be an exercise's name, a str; got None"):
        find(None)


def test_homework_make_refuses_names_with_spaces_and_a_homework_copy(tmp_path, capsys,
                                                                      monkeypatch):
    """"relu_backward softmax_backward" was answered with "did you mean 'log_softmax_backward'";
    make run inside a student folder took its blanked copy as the reference and wrote a "key" of
    stubs, as autograder already refused to."""
    from minitf.homework import handout
    out = tmp_path / "hw"
    assert cli.main(["homework", "make", "--exercises", "relu_backward softmax_backward",
                     "--out", str(out)]) == 2
    assert ("--exercises: 'relu_backward softmax_backward' holds a space; wanted names "
            "separated by commas") in capsys.readouterr().err
    student = handout.make(tmp_path / "student", ["relu_backward"])
    monkeypatch.setattr(handout, "PACKAGE", student / "minitf")        # run from inside it
    assert cli.main(["homework", "make", "--exercises", "relu_backward", "--solutions",
                     "--out", str(out)]) == 2
    assert "the minitf running this is a homework copy" in capsys.readouterr().err
    assert not out.exists(), "nothing was written"


@pytest.mark.parametrize("where, wanted", [
    ("folder", "is a folder; wanted a file name"),
    ("missing/results.json", "does not exist; wanted a file in an existing folder")])
def test_homework_grade_refuses_a_json_it_could_not_write_before_grading(where, wanted, capsys,
                                                                         tmp_path, monkeypatch):
    """The results were written after grading, which takes a while: a --json in a folder that
    does not exist was Python's "[Errno 2] No such file" once the grading was done."""
    from minitf import homework

    def grade(*args):
        raise AssertionError("graded before --json was checked")
    monkeypatch.setattr(homework, "grade", grade)
    (tmp_path / "folder").mkdir()
    path = tmp_path / where
    assert cli.main(["homework", "grade", str(tmp_path), "--json", str(path)]) == 2
    err = one_line(capsys)
    assert f"--json {path}" in err and wanted in err, err
