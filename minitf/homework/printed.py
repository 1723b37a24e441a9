"""What a submission's code prints while it is graded: passed through to the terminal (on
Gradescope, the grading's log) for its first lines, and a copy of its first lines kept for
results.json, which is all a student sees there: their print() calls went to the grader's own
output. However much is printed, both stay small. Standard error is kept the same way, apart:
the warnings NumPy gives a student's code (an overflow in exp) are often the clue to its bug.
"""
from __future__ import annotations

import io
import os
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout

from minitf.homework.handout import PACKAGE

# The folder that holds the minitf grading (the reference, or a student's copy of it)
_GRADER = str(PACKAGE.parent) + os.sep

# What results.json keeps of what an exercise's code printed: on Gradescope a student sees
# results.json alone, never the grader's own output, where their print() calls went.
PRINTED_LINES = 40
PRINTED_LINE_CHARS = 200
PASSED_THROUGH = 1_000  # to the terminal: 700,000 lines took 28 s to print, and buried the log
PASSED_THROUGH_CHARS = 1_000_000   # and a million characters: one endless line is cut too


class Printed(io.TextIOBase):
    """Standard output (or error) that still reaches the terminal, with a copy of its first
    lines kept: what a submitted file prints (or warns) while it is graded, for its test's
    output in results.json.
    The copy holds at most PRINTED_LINES lines of PRINTED_LINE_CHARS (+1, to know one was cut),
    however much is printed; the lines after them are only counted. The terminal gets the first
    PASSED_THROUGH lines (or PASSED_THROUGH_CHARS characters, whichever comes first), then one
    saying that the rest is only counted."""

    def __init__(self, through):
        self.through, self.head, self.partial, self.lines = through, [], "", 0
        self.chars = 0                          # passed through to the terminal so far

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.lines < PASSED_THROUGH and self.chars < PASSED_THROUGH_CHARS:
            piece = text[:PASSED_THROUGH_CHARS - self.chars]
            self.through.write(piece)
            self.chars += len(piece)
            if self.lines + piece.count("\n") >= PASSED_THROUGH:     # the lines that went
                self.through.write(f"\n[minitf: {PASSED_THROUGH:,} lines printed; the rest is "
                                   f"counted, not shown]\n")
            elif self.chars >= PASSED_THROUGH_CHARS:
                self.through.write(f"\n[minitf: {PASSED_THROUGH_CHARS:,} characters printed; "
                                   f"the rest is counted, not shown]\n")
        *ended, rest = text.split("\n")                 # the lines this text ends, then the rest
        for piece in ended:
            if len(self.head) < PRINTED_LINES:
                self.head.append((self.partial + piece)[:PRINTED_LINE_CHARS + 1])
            self.partial, self.lines = "", self.lines + 1
        self.partial = (self.partial + rest)[:PRINTED_LINE_CHARS + 1]
        return len(text)

    def flush(self) -> None:
        self.through.flush()

    def shown(self) -> str:
        """The first PRINTED_LINES lines, each cut to PRINTED_LINE_CHARS, and how many more."""
        lines = (self.head + [self.partial] if self.partial else self.head)[:PRINTED_LINES]
        total = self.lines + bool(self.partial)          # a last line without its newline
        cut = [line if len(line) <= PRINTED_LINE_CHARS else line[:PRINTED_LINE_CHARS] + " …"
               for line in lines]
        more = f"\n… and {total - len(cut)} more lines" if total > len(cut) else ""
        return "\n".join(cut) + more


@contextmanager
def kept(out: Printed, err: Printed):
    """While the block runs, what it prints goes to ``out``, and what it writes to standard
    error to ``err``: Python's warnings too, each shown once for each line that gives it (the
    default filter, whatever an earlier exercise or the student's own code set). A warning
    raised in the grader's own minitf is named by its file and line, relative to the package,
    without the line's source: that line may be the reference's answer to another exercise."""
    def show(message, category, filename, lineno, file=None, line=None):
        ours = filename.startswith(_GRADER)
        err.write(warnings.formatwarning(message, category, filename[len(_GRADER):] if ours
                                         else filename, lineno, "" if ours else line))

    with redirect_stdout(out), redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show         # to err, even where a caller records warnings
        yield
