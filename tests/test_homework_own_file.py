"""An instructor's own file for 'minitf homework make --file': its regions blanked, each
exercise graded by the file's own check_<name>(), and a file whose own answers fail those checks
refused before anything is written."""
import re
from pathlib import Path

import pytest

from minitf import homework
from minitf.cli import main
from test_homework import OPS, _answered


@pytest.fixture(scope="module")
def hw2(tmp_path_factory):
    return homework.make(tmp_path_factory.mktemp("hw") / "hw2", files=[OPS])


def test_an_instructors_file_is_blanked_and_graded_by_its_checks(hw2, tmp_path):
    text = (hw2 / OPS.name).read_text(encoding="utf-8")
    assert 'raise NotImplementedError("rmsnorm_backward: not written yet' in text
    assert "def check_rmsnorm_backward():" in text and (hw2 / "minitf/__init__.py").is_file()
    folder = _answered(hw2, tmp_path)
    path = folder / OPS.name
    path.write_text(path.read_text(encoding="utf-8").replace("return dx, dgamma",
                                                             "return 2 * dx, dgamma"))
    outcome = homework.grade(folder)[0]
    assert outcome.score == 0.0 and "2 of 4 tensors within 1e-06" in outcome.report
    assert "your gradient is 2 times the right one" in outcome.report
    # a wrong answer no signature fits: no classic mistake is known for an instructor's exercise
    # (it read "perhaps the classic mistake here: none known; compare …")
    path.write_text(path.read_text(encoding="utf-8").replace("return 2 * dx, dgamma",
                                                             "return dx + 1, dgamma"))
    report = homework.grade(folder)[0].report
    assert "hint: perhaps a slip no hint knows: compare each line with your derivation" in report
    assert "classic mistake" not in report, report


def test_an_instructors_file_needs_a_check_per_exercise(tmp_path, capsys):
    bare = tmp_path / "bare.py"
    bare.write_text("def f(x):\n    # BEGIN SOLUTION\n    return x\n    # END SOLUTION\n")
    with pytest.raises(ValueError, match=r"exercise f has no check_f\(\) to grade it") as err:
        homework.make(tmp_path / "out", files=[bare])
    assert not (tmp_path / "out").exists()
    # the help it points to says what a check_NAME() is (it once said nothing of --file's rules)
    pointed = re.search(r"see '(minitf [a-z ]+) --help'", str(err.value)).group(1)
    with pytest.raises(SystemExit):
        main(pointed.split()[1:] + ["--help"])
    shown = " ".join(capsys.readouterr().out.split())       # as one line, argparse's wrap undone
    assert "check_NAME() that returns a minitf.gradcheck" in shown, shown


def test_the_readme_s_own_file_example_makes_a_homework_its_key_passes(tmp_path):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    example = readme.split("Your own ops work too.", 1)[1].split("```python\n", 1)[1]
    (tmp_path / "my_ops.py").write_text(example.split("```", 1)[0], encoding="utf-8")
    key = homework.make(tmp_path / "key", files=[tmp_path / "my_ops.py"], solutions=True)
    student = homework.make(tmp_path / "hw", files=[tmp_path / "my_ops.py"])
    assert [(o.name, o.score) for o in homework.grade(key)] == [("softsign_backward", 1.0)]
    assert [(o.name, o.score) for o in homework.grade(student)] == [("softsign_backward", 0.0)]


@pytest.mark.parametrize("change, why", [
    (('("x", "gamma"))', '("x", "z"))'),                                   # a wrt of no input
     "wrt must be a tuple of distinct names among the inputs ('x', 'gamma'), at least one; got ('x', 'z')"),
    (('return {"rows (4, 5)": case(4, 5), "batch (2, 3, 5)": case(2, 3, 5)}', "return 42"),
     "check_rmsnorm_backward() returned 42; wanted a FunctionCase or a ModuleCase"),
    (("return dx, dgamma", "return 2 * dx, dgamma"), "worst entry"),        # a wrong answer key
    # a case of no numbers passed every answer; one of float32 failed the right one, blamed on it
    (('"x": randn(*shape)', '"x": randn(*shape)[:0]'),
     "inputs['x'] is an empty array of shape (0, 5); wanted a float array of at least one number"),
    (('"gamma": randn(shape[-1])', '"gamma": randn(shape[-1]).astype("float32")'),
     "its input 'gamma' has dtype float32; wanted float64"),
])
def test_an_instructors_file_whose_own_answer_fails_its_check_is_refused(tmp_path, change, why):
    """Every student would be marked down for the check's fault: make refuses, writing nothing."""
    bad = tmp_path / OPS.name
    text = OPS.read_text(encoding="utf-8")
    assert change[0] in text
    bad.write_text(text.replace(*change), encoding="utf-8")
    # the answer failed, or the file's own code raised (its case(), building a bad case: named
    # with its line)
    with pytest.raises(ValueError, match=r"(its own rmsnorm_backward fails check_rmsnorm_backward"
                                         r"\(\), so every answer would: |graded with its own "
                                         r"answers, its case\(\) raised )") as err:
        homework.make(tmp_path / "out", files=[bad])
    assert why in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_submission_is_graded_by_the_instructors_frame_not_its_own_copy(hw2, tmp_path):
    """The submitted file supplied the forward and the check_rmsnorm_backward() that grade its
    answer: a student who doubled the forward (outside the regions) got full marks for an answer
    twice too large, flagged only as an edit; with a region added, still."""
    submission = tmp_path / "upload"
    submission.mkdir()
    text = (_answered(hw2, tmp_path) / OPS.name).read_text(encoding="utf-8")
    wrong = text.replace("return dx, dgamma", "return 2 * dx, 2 * dgamma")
    gamed = wrong.replace("return gamma * x_hat, (x_hat, rinv, gamma)",
                          "return 2 * gamma * x_hat, (x_hat, rinv, gamma)")
    assert text != wrong != gamed
    padded = gamed + "\n\ndef _pad():\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION\n"
    for answer, score in [(wrong, 0.0), (gamed, 0.0), (padded, 0.0), (text, 1.0)]:
        (submission / OPS.name).write_text(answer, encoding="utf-8")
        outcome = homework.grade(hw2, submission=submission)[0]
        assert outcome.score == score, outcome.report
        assert outcome.edited == (answer in (gamed, padded))
        # one more region (or one fewer) cannot be spliced: not graded in the student's frame
        assert ("its solution regions are not the homework's" in outcome.report) == (
            answer is padded)


def test_a_file_that_imports_a_module_of_its_own_folder_is_refused(tmp_path, monkeypatch):
    """Graded where it was written, `from helpers import denom` found helpers.py beside it and
    the key passed; the homework copies the file alone, so every student scored 0."""
    (tmp_path / "helpers.py").write_text("def denom():\n    return 2.0\n")
    ops = tmp_path / "withhelper.py"
    ops.write_text(OPS.read_text(encoding="utf-8").replace(
        "from minitf.backend import", "from helpers import denom  # noqa\nfrom minitf.backend "
        "import", 1))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))             # python -m minitf, run from there
    with pytest.raises(ValueError, match=r"--file .*withhelper.py: it imports helpers from "
                                         r".*, which the homework does not copy \(every "
                                         r"student's grading would fail\)"):
        homework.make(tmp_path / "out", files=[ops])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line", ["import torch", "from scipy import special", "import tqdm"])
def test_a_file_that_imports_a_package_beyond_numpy_is_refused(tmp_path, line):
    """`import torch` in an instructor's file was taken: setup.sh installs minitf's dependencies
    alone, so on Gradescope every student scored 0 with ModuleNotFoundError (and a student
    grading locally has NumPy alone)."""
    ops = tmp_path / "withtorch.py"
    ops.write_text(OPS.read_text(encoding="utf-8").replace(
        "from minitf.backend import", f"{line}  # noqa\nfrom minitf.backend import", 1))
    top = line.split()[1].split(".")[0]
    with pytest.raises(ValueError, match=rf"^--file .*withtorch.py: it imports {top}, which a "
                                         r"student's grading does not have .*; wanted imports "
                                         r"of minitf, NumPy and Python's standard library only$"):
        homework.make(tmp_path / "out", files=[ops])
    assert not (tmp_path / "out").exists()
    ops.write_text(OPS.read_text(encoding="utf-8").replace(         # Python's own are fine
        "from minitf.backend import", "import math, itertools  # noqa\nfrom minitf.backend import", 1))
    homework.make(tmp_path / "fine", files=[ops])


def test_an_exercise_name_given_twice_is_refused(tmp_path):
    """Two rows called relu_backward in the results, which no one could tell apart."""
    twin = tmp_path / "twin.py"
    twin.write_text(OPS.read_text(encoding="utf-8").replace("rmsnorm_backward", "relu_backward"))
    with pytest.raises(ValueError, match=r"--file .*twin.py: its exercise relu_backward has the "
                                         r"name of another exercise of this homework"):
        homework.make(tmp_path / "out", ["relu_backward"], files=[twin])


def test_the_readme_of_a_homework_with_an_instructors_file_says_to_upload_the_folder(hw2):
    """The file sits beside minitf/, not in it: uploading minitf/ alone, as the README said,
    left it out; and minitf's exercise list holds none of the instructor's exercises."""
    text = " ".join((hw2 / "README.md").read_text(encoding="utf-8").split())
    assert f"What to hand in: `{OPS.name}`, with your bodies. Upload it, or this whole folder" \
        in text
    assert "standing in for your instructor's, in the checks their file defines" in text
    assert "exercise list" not in text and "folder `minitf`" not in text


@pytest.mark.parametrize("change, who", [
    (("def check_rmsnorm_backward():\n",
      "def check_rmsnorm_backward():\n    raise RuntimeError('boom')\n"),
     "its check_rmsnorm_backward() raised RuntimeError: boom"),
    (("from minitf.backend", "import math\nmath.sqrt(-1)\nfrom minitf.backend"),
     "importing it raised ValueError"),
])
@pytest.mark.parametrize("name", [OPS.name, "my ops.py"])      # a space: the line was lost
def test_a_file_that_raises_says_where_not_that_every_answer_would_fail(tmp_path, change, who,
                                                                        name):
    """A check_<name>() that raised, or an import that raised, was worded "its own
    rmsnorm_backward fails check_rmsnorm_backward(), so every answer would": the answer blamed,
    and no line to look at."""
    bad = tmp_path / name
    bad.write_text(OPS.read_text(encoding="utf-8").replace(*change, 1), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        homework.make(tmp_path / "out", files=[bad])
    said = str(err.value)
    assert said.startswith(f"--file {bad}: graded with its own answers, {who}"), said
    assert f"({name}, line " in said and "every answer" not in said and "\n" not in said
    assert not (tmp_path / "out").exists()


HELPED = '''from minitf.backend import randn
from minitf.gradcheck import FunctionCase


def softsign(x):
    return x / (1 + abs(x)), x


def _denom(x):
    # BEGIN SOLUTION softsign_backward
    return (1 + abs(x)) ** 2
    # END SOLUTION


def softsign_backward(dy, x):
    # BEGIN SOLUTION softsign_backward
    return dy / _denom(x)
    # END SOLUTION


def check_softsign_backward():
    return FunctionCase(softsign, softsign_backward, {"x": randn(3, 4) + 0.5}, wrt=("x",))
'''


def test_an_instructors_helper_region_is_named_as_part_of_its_exercise(tmp_path):
    """A helper of the instructor's, holding part of the answer, was stubbed "not written yet",
    as if it were the exercise: a student who wrote the exercise read that it was unwritten."""
    source = tmp_path / "helped.py"
    source.write_text(HELPED, encoding="utf-8")
    hw = homework.make(tmp_path / "hw", files=[source])
    text = (hw / "helped.py").read_text(encoding="utf-8")
    assert 'raise NotImplementedError("softsign_backward: _denom is part of this exercise")' in text
    answered = text.replace('    raise NotImplementedError("softsign_backward: not written yet")',
                            "    return dy / _denom(x)", 1)
    (hw / "helped.py").write_text(answered, encoding="utf-8")
    outcome = homework.grade(hw)[0]
    assert outcome.result.stopped == ("softsign_backward's helper _denom is not written yet: it "
                                      "is part of the exercise (case 'softsign_backward' calls "
                                      "it, and an answer written without it does not stand in "
                                      "for it); write its body too"), outcome.result.stopped
    # and the table says so, in its word (it read "error")
    assert homework.table([outcome]).splitlines()[2].split()[2:5] == ["helper", "not", "written"]
