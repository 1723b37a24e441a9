"""The exercise catalogue, the cases that grade each exercise, the starter file, and the
'minitf exercise' command: list, start, check."""
import ast
import shlex

import pytest

from minitf import cli, exercises, gradcheck_cases
from minitf.backend import precision
from minitf.exercises import EXERCISES, find, grading_cases, starter_text, write_starter
from minitf.exercises.starter import FENCE, body_parts
from minitf.gradcheck import FunctionCase, run_backward

SLOW = {"DecoderLM.backward", "Transformer.backward"}   # 10-30 s of finite differences each


def _stub(*args, **kwargs):
    raise NotImplementedError("stub")


# -- the catalogue -------------------------------------------------------------------------------

def test_the_catalogue_holds_the_planned_exercises_easiest_first():
    names = [e.name for e in EXERCISES]
    assert names[0] == "relu_backward" and "DecoderLM.backward" in names
    for needed in ("softmax_backward", "layer_norm_backward", "attention_backward",
                   "MultiHeadAttention.backward", "Residual.backward", "Stack.backward"):
        assert needed in names
    assert len(EXERCISES) >= 18 and len(set(names)) == len(names)
    assert [e.level for e in EXERCISES] == sorted(e.level for e in EXERCISES)
    for e in EXERCISES:
        assert callable(e.reference) and e.teaches and e.mistake and e.hint and e.equation


def test_find_takes_any_case_and_the_file_name():
    assert find("SOFTMAX_BACKWARD").name == "softmax_backward"
    assert find("MultiHeadAttention_backward.py").name == "MultiHeadAttention.backward"
    with pytest.raises(ValueError, match="no exercise named 'nope'; see the names with "
                                         "'minitf exercise list'"):
        find("nope")


def test_grading_cases_are_traced_from_the_registry():
    assert grading_cases(find("relu_backward")) == ("relu", "ReLU")
    assert grading_cases(find("linear_backward")) == ("linear", "linear, rows (2-D x)", "Linear",
                                                      "Linear, no bias")
    assert grading_cases(find("relative_bias_backward")) == ("relative_bias",
                                                             "RelativePositionBias")
    mha = grading_cases(find("MultiHeadAttention.backward"))
    assert len(mha) >= 7 and all(name.startswith("MultiHeadAttention") for name in mha)
    for e in EXERCISES:
        assert grading_cases(e), f"no case grades {e.name}"
        assert set(grading_cases(e)) <= set(exercises.closure(e))


@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_the_traced_cases_are_exactly_those_that_call_the_exercise(exercise):
    """With a stub standing in, every case of the closure raises and every other case runs."""
    reached = set()
    with precision("float64"), exercises.standing_in(exercise, _stub):
        for name in gradcheck_cases.CASES:
            try:
                run_backward(gradcheck_cases.build(name))
            except NotImplementedError:
                reached.add(name)
    assert reached == set(exercises.closure(exercise))


def test_grading_cases_use_a_different_size_on_every_axis_a_batch_and_stay_off_relu_kinks():
    """Equal sizes let a swapped axis pass unnoticed: every tensor a grading case differentiates
    has a different size on every axis. And a batch of one hides a gradient not summed over the
    batch: the first input of every case holds more than one example."""
    found, unbatched = set(), set()
    with precision("float64"):
        for name in {n for e in EXERCISES for n in grading_cases(e)}:
            case = gradcheck_cases.build(name)
            wrt = case.wrt if isinstance(case, FunctionCase) else case.inputs
            for tensor in wrt:
                shape = case.inputs[tensor].shape
                if len(set(shape)) < len(shape):
                    found.add(name)
            first = next(iter(case.inputs.values()), None)     # None: only integer arguments
            if first is not None and (first.ndim < 2 or first.shape[0] < 2):
                unbatched.add(name)
    assert found == set(), f"cases that repeat a size on some axis: {sorted(found)}"
    assert unbatched == set(), f"cases whose first input is not a batch: {sorted(unbatched)}"
    for name in grading_cases(find("relu_backward")):
        with precision("float64"):
            x = gradcheck_cases.build(name).inputs["x"]
        assert float(abs(x).min()) > 1e-3, f"{name}: an input sits on ReLU's kink"


# -- the starter file ----------------------------------------------------------------------------

@pytest.mark.parametrize("exercise", EXERCISES, ids=lambda e: e.name)
def test_the_starter_has_the_signature_the_forward_and_no_body(exercise):
    text = starter_text(exercise)
    tree = ast.parse(text)
    function = next(node for node in tree.body if isinstance(node, ast.FunctionDef))
    assert function.name == exercise.attribute
    reference_args = exercise.reference.__code__.co_varnames[:exercise.reference.__code__.co_argcount]
    assert [a.arg for a in function.args.args] == list(reference_args)
    assert exercise.equation.split()[0] in ast.get_docstring(function)
    assert f'raise NotImplementedError("{exercise.name}: not written yet")' in text
    assert FENCE.format("START", exercise.name) in text and FENCE.format("END", exercise.name) in text
    assert f'EXERCISE = "{exercise.name}"' in text
    _, answer, _ = body_parts(exercise)
    answer = {line.strip() for line in answer if line.strip()}
    assert answer and not answer & {line.strip() for line in text.splitlines()}, "the answer leaked"


@pytest.mark.parametrize("name", ["attention_backward", "gelu_backward"])
def test_the_starter_imports_no_function_that_holds_part_of_the_answer(name):
    """attention_backward's two steps and tanh-GELU's slope are solution regions of their
    exercise: imported, they answered it in four lines. What they call is imported instead."""
    exercise = find(name)
    helpers = {"attention_backward": {"_values_backward", "_scores_backward"},
               "gelu_backward": {"_gelu_tanh_slope"}}[name]
    imported = {alias.name for node in ast.parse(starter_text(exercise)).body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert not helpers & imported
    if name == "attention_backward":          # as its hint says
        assert {"softmax_backward", "dropout_backward"} <= imported


@pytest.mark.parametrize("name, wanted", [("layer_norm_backward", {"row_sum", "get_array_module"}),
                                          ("relu_backward", {"get_array_module"})])
def test_the_starter_imports_the_array_helpers_of_the_forward_it_shows(name, wanted):
    """A body that took row_sum from the layer_norm forward the starter quotes raised NameError:
    only the reference backward's own names were imported. Not the random numbers dropout's
    forward draws, which would invite its classic mistake."""
    def imported(name):
        return {alias.name for node in ast.parse(starter_text(find(name))).body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert wanted <= imported(name)
    assert "rand" not in imported("dropout_backward")


def test_the_starter_shows_the_forward_and_not_the_derivation():
    text = starter_text(find("softmax_backward"))
    assert "def softmax(x, axis=-1, out=None):" in text           # the forward's source
    assert "exp(x_i) / Σ_j exp(x_j)" in text                      # its equation
    assert "dp - (dp * p).sum" not in text and "δ_ij" not in text  # not the answer
    assert ("Graded by: softmax; softmax, masked entries and a fully masked row; softmax, along "
            "axis 1 of three.") in " ".join(text.split())


def test_start_never_overwrites_an_edited_file(tmp_path):
    exercise = find("relu_backward")
    path = write_starter(exercise, tmp_path / "hw")
    assert path.read_text() == starter_text(exercise)
    assert write_starter(exercise, tmp_path / "hw") == path        # untouched: rewritten
    path.write_text(path.read_text().replace("raise NotImplementedError", "return dy  #"))
    edited = path.read_text()
    with pytest.raises(ValueError, match="already there and edited"):
        write_starter(exercise, tmp_path / "hw")
    assert path.read_text() == edited


# -- the command ---------------------------------------------------------------------------------

def test_exercise_list_prints_the_catalogue(capsys):
    assert cli.main(["exercise", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["#", "exercise", "level"]
    for e in EXERCISES:
        assert e.name in out
    assert "relu; ReLU" in out and "✗ dx = p ⊙ dp" in out


def test_exercise_start_writes_the_file_and_refuses_to_overwrite(tmp_path, capsys):
    assert cli.main(["exercise", "start", "softmax_backward", "--dir", str(tmp_path)]) == 0
    path = tmp_path / "softmax_backward.py"
    assert "def softmax_backward(dp, cache):" in path.read_text()
    assert f"minitf exercise check {path}" in capsys.readouterr().out
    spaced = tmp_path / "my work"                       # the command printed can be pasted
    assert cli.main(["exercise", "start", "softmax_backward", "--dir", str(spaced)]) == 0
    printed = capsys.readouterr().out.split("then run ", 1)[1]
    assert shlex.split(printed) == ["minitf", "exercise", "check",
                                    str(spaced / "softmax_backward.py")], printed
    path.write_text(path.read_text() + "# my notes\n")
    assert cli.main(["exercise", "start", "softmax_backward", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "already there and edited" in err
    assert path.read_text().endswith("# my notes\n")


def test_exercise_bad_names_are_one_line(tmp_path, capsys):
    assert cli.main(["exercise", "start", "nope"]) == 2
    assert capsys.readouterr().err.strip() == ("minitf exercise start: no exercise named 'nope'; see "
                                               "the names with 'minitf exercise list'")
    assert cli.main(["exercise", "check", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"FILE {tmp_path / 'missing.py'}: no such file" in err
    (tmp_path / "folder.py").mkdir()
    assert cli.main(["exercise", "check", str(tmp_path / "folder.py")]) == 2
    assert "folder.py: is a folder; wanted an exercise file" in capsys.readouterr().err


def test_exercise_check_exit_status_and_report(tmp_path, capsys):
    exercise = find("layer_norm_backward")
    path = write_starter(exercise, tmp_path)
    assert cli.main(["exercise", "check", str(path)]) == 1
    assert capsys.readouterr().out.strip() == ("layer_norm_backward.py: layer_norm_backward is "
                                               "not written yet (its body still raises "
                                               "NotImplementedError)")
    path.write_text(starter_text(exercise, solution=True))
    assert cli.main(["exercise", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "layer_norm_backward: passes every check" in out
    assert "9 of 9 tensors within 1e-06" in out and "FAIL" not in out

    right = starter_text(exercise, solution=True)
    wrong = right.replace("- x_hat * mean_dx_hat_x_hat", "- 0")
    assert wrong != right, "the layer_norm_backward line this test breaks has changed"
    path.write_text(wrong)
    assert cli.main(["exercise", "check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "6 of 9 tensors within 1e-06; 3 FAILED" in out
    assert "in case 'layer_norm', x: worst entry x[" in out
    assert "hint: perhaps the classic mistake here: μ or σ treated as constants" in out
    assert "in case 'LayerNorm', input x: worst entry" in out and "    hint: as above" in out
    assert out.rstrip().endswith("layer_norm_backward: not yet: see what went wrong above")


@pytest.mark.parametrize("exercise", [
    pytest.param(e, marks=pytest.mark.slow) if e.name in SLOW else e for e in EXERCISES],
    ids=lambda e: e.name)
def test_the_reference_passes_its_checks_through_the_learners_path(exercise, tmp_path):
    """The starter, answered with minitf's own body, imports what it needs and passes."""
    path = tmp_path / exercise.filename
    path.write_text(starter_text(exercise, solution=True))
    report, status = exercises.check_file(path)
    assert status == 0, report


def test_a_file_without_its_exercise_line_is_told_what_it_lacks(tmp_path, capsys):
    """It read "no exercise named 'fill'", a guess from the file's name; a homework's file, as
    lesson 19's reader tries it, "no exercise named 'softmax'; did you mean …"."""
    write_starter(find("relu_backward"), tmp_path)
    text = (tmp_path / "relu_backward.py").read_text()
    lost = tmp_path / "fill.py"
    lost.write_text("".join(line for line in text.splitlines(keepends=True)
                            if not line.startswith("EXERCISE = ")))
    assert cli.main(["exercise", "check", str(lost)]) == 2
    assert capsys.readouterr().err.strip() == (
        "minitf exercise check: fill.py has no EXERCISE line, and 'fill' is no exercise's name; "
        "wanted a file that 'minitf exercise start NAME' wrote (its EXERCISE line says which "
        "exercise it answers)")
    homework = tmp_path / "hw"
    (homework / "minitf" / "functional").mkdir(parents=True)
    (homework / "homework.json").write_text("{}")
    (homework / "minitf" / "functional" / "softmax.py").write_text("def f():\n    pass\n")
    assert cli.main(["exercise", "check", str(homework / "minitf/functional/softmax.py")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"minitf exercise check: softmax.py is a file of the homework in {homework}, which "
        f"grades it: run 'python -m minitf homework grade .' there")
