"""What a graded submission prints and warns: the first lines reach the terminal (Gradescope's
log), a bounded copy reaches results.json (all a student sees there), warnings apart from the
prints, and none of the grading minitf's own source lines."""
from minitf import homework
from minitf.homework import handout

from test_homework_autograder import FILES, made  # noqa: F401  (made is a fixture)


def _key_with(made, tmp_path, line: str):
    """The grading of a submission of the key's softmax.py with ``line`` run before its
    backward's return."""
    hw, key, _ = made
    text = (key / FILES[0]).read_text(encoding="utf-8")
    answer = "return p * (dp - row_dot(dp, p, axis))"
    assert answer in text
    submission = tmp_path / "submission"
    (submission / "minitf/functional").mkdir(parents=True)
    (submission / FILES[0]).write_text(text.replace(answer, f"{line}\n    {answer}"),
                                       encoding="utf-8")
    return homework.grade(hw, submission)


def test_a_print_in_a_loop_keeps_its_first_lines_in_results_json(made, tmp_path, capsys):
    """Printed lines still reach the grader's output (up to PASSED_THROUGH of them: a test
    below); results.json keeps the first 40, each cut to 200 characters, and counts the rest."""
    outcomes = _key_with(made, tmp_path, "[print(i, 'x' * 300) for i in range(100)]; "
                                         "print('last', end='')")
    terminal = capsys.readouterr().out
    assert terminal.startswith("0 " + "x" * 300 + "\n1 x") and terminal.endswith("last")
    output = homework.gradescope(outcomes)["tests"][0]["output"]
    shown = output.split("your code printed, while it was graded:\n")[1].splitlines()
    assert outcomes[0].result.passed                                   # the prints broke nothing
    assert shown[0] == "0 " + "x" * 198 + " …" and shown[39].startswith("39 x")
    assert len(shown) == 41 and shown[40].startswith("… and ") and shown[40].endswith(" more lines")
    calls = terminal.count("last")          # a call's unended last line runs into the next's
    assert int(shown[40].split()[2]) + 40 == 100 * calls + 1 == terminal.count("\n") + 1


def test_warnings_and_standard_error_reach_results_json_apart_from_the_prints(made, tmp_path,
                                                                          capsys):
    """A student on Gradescope sees results.json alone: NumPy's RuntimeWarning of an overflow in
    their code, often the clue to its bug, went to the grader's log, and not to them."""
    outcomes = _key_with(made, tmp_path, "import sys, numpy; numpy.exp(numpy.float64(1e4)); "
                                         "sys.stderr.write('to stderr\\n')")
    assert outcomes[0].result.passed and "to stderr" in capsys.readouterr().err   # passed on
    output = homework.gradescope(outcomes)["tests"][0]["output"]
    assert "your code printed" not in output                         # nothing on stdout
    kept = output.split("your code wrote to standard error (warnings among it), while it was "
                        "graded:\n")[1]
    assert "RuntimeWarning: overflow encountered in exp" in kept and "to stderr" in kept, kept
    assert "your code wrote" not in homework.gradescope(outcomes)["tests"][1]["output"]


def test_a_warning_inside_the_grading_minitf_shows_no_line_of_its_source(made, tmp_path):
    """A student's inf handed to minitf's own code warns there, and the warning quoted the line
    it was raised at: softmax_backward's is `return p * (dp - row_dot(dp, p, axis))`, the
    reference's answer to another exercise of the homework."""
    outcomes = _key_with(made, tmp_path, "import numpy; from minitf.array_ops import row_dot; "
                                         "row_dot(numpy.full((2, 3), numpy.inf), "
                                         "numpy.zeros((2, 3)))")
    output = homework.gradescope(outcomes)["tests"][0]["output"]
    kept = output.split("while it was graded:\n")[1]
    assert "RuntimeWarning" in kept and "minitf/array_ops.py:" in kept, kept
    # no source line, no path
    assert "return" not in kept and str(handout.PACKAGE.parent) not in kept, kept


def test_prints_without_a_newline_keep_a_bounded_copy():
    """print(x, end="") in a loop is one line that never ends: the copy stops growing all the
    same, and results.json shows that line cut to 200 characters."""
    import io

    from minitf.homework.printed import PRINTED_LINE_CHARS, Printed
    copy = Printed(io.StringIO())
    for _ in range(100_000):
        copy.write("ab")
    assert copy.head == [] and len(copy.partial) == PRINTED_LINE_CHARS + 1
    assert copy.shown() == "ab" * (PRINTED_LINE_CHARS // 2) + " …"


def test_what_reaches_the_terminal_stops_after_its_first_thousand_lines():
    """A submission printing in a loop: the terminal (Gradescope's log) gets the first
    PASSED_THROUGH lines and one line saying the rest is only counted; the copy still counts
    every line for results.json."""
    import io

    from minitf.homework.printed import PASSED_THROUGH, PRINTED_LINES, Printed
    terminal = io.StringIO()
    copy = Printed(terminal)
    for i in range(5 * PASSED_THROUGH):
        copy.write(f"line {i}\n")
    shown = terminal.getvalue().splitlines()
    assert shown[:PASSED_THROUGH] == [f"line {i}" for i in range(PASSED_THROUGH)]
    assert shown[PASSED_THROUGH:] == ["", f"[minitf: {PASSED_THROUGH:,} lines printed; the rest "
                                      f"is counted, not shown]"]
    assert copy.shown().endswith(f"… and {5 * PASSED_THROUGH - PRINTED_LINES} more lines")


def test_one_endless_line_reaches_the_terminal_cut_too():
    """print(x, end='') in a loop is one line, however long: the line count never stopped it."""
    import io

    from minitf.homework.printed import PASSED_THROUGH_CHARS, Printed
    terminal = io.StringIO()
    copy = Printed(terminal)
    for _ in range(3 * PASSED_THROUGH_CHARS // 999):       # the cut falls inside a write
        copy.write("x" * 999)
    assert terminal.getvalue() == "x" * PASSED_THROUGH_CHARS + (
        f"\n[minitf: {PASSED_THROUGH_CHARS:,} characters printed; the rest is counted, not "
        f"shown]\n")
    assert copy.shown().startswith("x" * 200) and copy.shown().endswith(" …")


def test_lines_cut_off_by_the_character_cap_are_not_said_to_have_passed():
    """2,000 lines of 1,200 characters in one write: a million characters reach the terminal, not
    the 1,000 lines the message would claim."""
    import io

    from minitf.homework.printed import PASSED_THROUGH_CHARS, Printed
    terminal = io.StringIO()
    Printed(terminal).write(("x" * 1199 + "\n") * 2000)        # 833 lines in a million
    assert terminal.getvalue().endswith(f"[minitf: {PASSED_THROUGH_CHARS:,} characters printed; "
                                        f"the rest is counted, not shown]\n")
