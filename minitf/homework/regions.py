"""Solution regions in plain Python files, and the edits that turn a reference into a starter.

A region is the lines between two comment lines of their own (the nbgrader and otter-grader
spelling, so an instructor can paste a region into either tool):

    def softmax_backward(dp, cache):
        '''…'''
        # BEGIN SOLUTION softmax_backward
        …the reference body…
        # END SOLUTION

The text after BEGIN SOLUTION names the exercise the region belongs to (default: the function
around it); several regions may share a name, e.g. a backward pass and the private helpers that
hold half of its work. The markers are comments, so the reference stays plain runnable Python.

The starter keeps both marker lines as a do-not-edit fence and puts a stub between them; nothing
else moves, except a docstring the caller asks to replace. Every change is an ``Edit`` (the
reference's text, the starter's text), so the reference comes back by undoing the edits in order.
"""
from __future__ import annotations

import ast
import difflib
import hashlib
import json
from dataclasses import dataclass

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
KEEP = ("# Your code replaces the next line. Keep the BEGIN/END SOLUTION lines: the grader "
        "reads them.")


@dataclass(frozen=True)
class Region:
    name: str        # the exercise it belongs to
    function: str    # the function around it, as a qualified name: "Residual.backward"
    begin: int       # index of the BEGIN line (0-based)
    end: int         # index of the END line
    indent: str


@dataclass(frozen=True)
class Edit:
    start: int       # the reference lines [start, stop) ...
    stop: int
    old: str         # ... whose text is ``old``, become ``new`` in the starter
    new: str
    body: bool = True   # a region's body (False: a docstring replaced)


def marker(line: str) -> str | None:
    """"begin" or "end" for a marker line, else None. Only a comment line of its own counts."""
    text = line.strip()
    if text == END:
        return "end"
    if text == BEGIN or text.startswith(BEGIN + " "):
        return "begin"
    return None


def _functions(tree) -> list:
    """(qualified name, node) for every function, classes' methods included, outermost first."""
    found = []

    def visit(nodes, prefix):
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                if not isinstance(node, ast.ClassDef):
                    found.append((name, node))
                visit(node.body, name + ".")
    visit(tree.body, "")
    return found


def _fences(lines: list, where: str) -> list[tuple[int, int]]:
    """(BEGIN line, END line), 0-based, of every region in order: found from the marker lines
    alone, so a file whose code does not parse (a student's half-written answer) has them too."""
    fences, opened = [], None
    for i, line in enumerate(lines):
        kind = marker(line)
        if kind == "begin":
            if opened is not None:
                raise ValueError(f"{where}, line {i + 1}: BEGIN SOLUTION inside the region "
                                 f"opened on line {opened + 1} (regions do not nest)")
            opened = i
        elif kind == "end":
            if opened is None:
                raise ValueError(f"{where}, line {i + 1}: END SOLUTION without a BEGIN SOLUTION")
            fences.append((opened, i))
            opened = None
    if opened is not None:
        raise ValueError(f"{where}, line {opened + 1}: BEGIN SOLUTION without an END SOLUTION")
    return fences


def find_regions(text: str, where: str) -> list[Region]:
    """Every region of a file's ``text``; ``where`` (its name) prefixes each error."""
    lines = text.splitlines()
    functions = _functions(ast.parse(text, filename=where))
    regions = []
    for begin, end in _fences(lines, where):
        around = [name for name, node in functions if node.lineno <= begin < node.end_lineno]
        if not around:
            raise ValueError(f"{where}, line {begin + 1}: a solution region must sit inside "
                             f"a function's body")
        begin_line = lines[begin]
        name = begin_line.strip()[len(BEGIN):].strip() or around[-1]
        regions.append(Region(name, around[-1], begin, end,
                              begin_line[:len(begin_line) - len(begin_line.lstrip())]))
    return regions


def stub(region: Region, message: str) -> str:
    """What the starter holds between the fences: a named, obvious failure (not ``pass``, which
    would return None and fail later, somewhere confusing)."""
    literal = json.dumps(message, ensure_ascii=False)   # a valid Python string literal
    return f"{region.indent}{KEEP}\n{region.indent}raise NotImplementedError({literal})\n"


def docstring_span(text: str, function: str) -> tuple[int, int] | None:
    """(first line index, stop index) of ``function``'s docstring in ``text``, or None."""
    node = dict(_functions(ast.parse(text)))[function]
    if ast.get_docstring(node) is None:
        return None
    return node.body[0].lineno - 1, node.body[0].end_lineno


def apply(text: str, edits: list[Edit]) -> str:
    """The starter: ``text`` with every edit made (edits may come in any order; none overlap)."""
    lines = text.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        lines[edit.start:edit.stop] = [edit.new]
    return "".join(lines)


def restore(starter: str, edits: list[Edit]) -> str:
    """The reference again: each edit undone, searched for after the previous one."""
    out, cursor = [], 0
    for edit in sorted(edits, key=lambda e: e.start):
        at = starter.index(edit.new, cursor)
        out += [starter[cursor:at], edit.old]
        cursor = at + len(edit.new)
    return "".join(out + [starter[cursor:]])


def splice(ours: str, theirs: str, where: str) -> str | None:
    """``ours`` (the homework's own file) with the insides of ``theirs``' regions put in, region
    by region: the student's answers in the instructor's frame, so that nothing outside the
    regions -- a check_<name>() that grades them included -- is the student's. Regions are paired
    in order; None when the two do not have as many (a BEGIN or END line added or removed)."""
    our_lines, their_lines = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
    try:
        our_fences, their_fences = _fences(our_lines, where), _fences(their_lines, where)
    except ValueError:
        return None
    if len(our_fences) != len(their_fences):
        return None
    spliced, cursor = [], 0
    for (begin, end), (their_begin, their_end) in zip(our_fences, their_fences):
        spliced += our_lines[cursor:begin + 1] + their_lines[their_begin + 1:their_end]
        cursor = end
    return "".join(spliced + our_lines[cursor:])


def _frame_lines(text: str, where: str) -> list[tuple[int, str]]:
    """(line number, line) of everything outside the regions' insides, fences included. The
    markers alone find them: an answer that does not parse has not moved the frame. Lines end
    at a newline only, as an editor counts them (str.splitlines also ends one at a form feed
    or U+2028, and the line numbers drifted)."""
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    inside = {i for begin, end in _fences(lines, where) for i in range(begin + 1, end)}
    return [(i + 1, line) for i, line in enumerate(lines) if i not in inside]


def frame(text: str, where: str) -> str:
    """A fingerprint of everything outside the regions, fences included: unchanged as long as
    only the regions' insides are edited."""
    return hashlib.sha256("".join(line for _, line in _frame_lines(text, where))
                          .encode("utf-8")).hexdigest()


def _short(line: str) -> str:
    return hashlib.sha256(line.encode("utf-8")).hexdigest()[:8]


def frame_lines(text: str, where: str) -> list[str]:
    """A short fingerprint of each line of the frame, in order: what first_edit compares."""
    return [_short(line) for _, line in _frame_lines(text, where)]


def first_edit(stored: list, text: str, where: str) -> str:
    """Where ``text``'s frame first departs from the one whose line fingerprints are ``stored``
    (frame_lines of the homework as it was made): "line N", or "" where none does."""
    numbered = _frame_lines(text, where)
    now = [_short(line) for _, line in numbered]
    for tag, _, _, start, stop in difflib.SequenceMatcher(None, stored, now,
                                                          autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if start == len(numbered):
            return "its end (lines removed)"
        if tag == "delete":
            return f"line {numbered[start][0]} (lines removed before it)"
        # the first line of the change that is not blank: where the alignment puts an added
        # blank line is arbitrary, the added code is not
        shown = next((i for i in range(start, stop) if numbered[i][1].strip()), start)
        return f"line {numbered[shown][0]}"
    return ""
