"""The file a learner edits: minitf's own function with its body cut out.

Everything in it is derived from the reference and its catalogue entry, so it cannot drift from
what the check grades: the signature is the reference's, the imports are the names the reference
body uses (never a helper that holds part of the answer), the forward it differentiates is quoted
from minitf's source. The answer sits between two fence lines that a later tool can find again
(the CS231n "START OF YOUR CODE" convention); lines of the body outside its solution region stay
outside them:

    # *** START OF YOUR CODE (softmax_backward) -- do not edit this line ***
    raise NotImplementedError("softmax_backward: not written yet")
    # *** END OF YOUR CODE (softmax_backward) -- do not edit this line ***

``solution=True`` puts the reference's answer between the fences instead, and its helpers below:
the same file, answered.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import textwrap
import types
from pathlib import Path

from minitf.data.text import write_utf8
from minitf.exercises.catalogue import LEVELS, Exercise
from minitf.exercises.tracing import grading_cases

FENCE = "# *** {} OF YOUR CODE ({}) -- do not edit this line ***"


def _names_used(code: types.CodeType) -> set:
    """Every global name a function's code (and the code nested in it) looks up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_used(const)
    return names


def _regions():
    """minitf.homework.regions (the BEGIN/END SOLUTION lines), imported when first used: the
    homework package imports this module, so importing it here at the top would be circular."""
    from minitf.homework import regions
    return regions


# The array helpers a forward calls that a backward may want too (row_sum, get_array_module);
# not the shim's random numbers, which would invite dropout's classic mistake
def _an_array_helper(obj) -> bool:
    module = getattr(obj, "__module__", None)
    return module == "minitf.array_ops" or (module == "minitf.backend"
                                            and getattr(obj, "__name__", "") == "get_array_module")


def _import_lines(exercise: Exercise) -> list[str]:
    """Import statements for the module-level names the reference body and its answer helpers
    use (the helpers themselves left out), and the shim's and array_ops' that the forward shown
    above it uses (a body that took row_sum from it raised NameError), each taken from where it
    is defined when that module exports it, else from the reference's own module."""
    home = importlib.import_module(exercise.module)
    helpers = exercise.helpers
    used = set().union(*(_names_used(f.__code__) for f in [exercise.reference, *helpers.values()]))
    for forward in exercise.forwards:
        code = inspect.unwrap(getattr(exercise.owner, forward)).__code__
        used |= {name for name in _names_used(code) if _an_array_helper(vars(home).get(name))}
    plain, from_module = [], {}
    for name in sorted(used - set(helpers)):
        if name not in vars(home) or hasattr(builtins, name):
            continue
        obj = vars(home)[name]
        if isinstance(obj, types.ModuleType):
            alias = obj.__name__.rsplit(".", 1)[-1]
            plain.append(f"import {obj.__name__}" + ("" if alias == name else f" as {name}"))
            continue
        source = getattr(obj, "__module__", None)
        if source is None or getattr(importlib.import_module(source), name, None) is not obj:
            source = exercise.module
        from_module.setdefault(source, []).append(name)
    return sorted(plain) + [f"from {source} import {', '.join(names)}"
                            for source, names in sorted(from_module.items())]


def _forward_source(exercise: Exercise) -> str:
    """The forward(s) the exercise differentiates, as minitf writes them."""
    owner = exercise.owner
    return "\n\n".join(textwrap.dedent(inspect.getsource(getattr(owner, name)))
                       for name in exercise.forwards).rstrip()


def body_parts(exercise: Exercise) -> tuple[list, list, list]:
    """The reference's body without its docstring, dedented, as lines: those before its solution
    region (attention_backward's dispatch of a causal cache), those in it (the answer, without
    the BEGIN/END SOLUTION lines), those after it. A region that starts with the body has no
    BEGIN line in it, one that ends with it no END line: the body runs from statement to
    statement, and those lines are comments around it."""
    source = textwrap.dedent(inspect.getsource(exercise.reference))
    node = ast.parse(source).body[0]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    marker = _regions().marker
    lines = textwrap.dedent("\n".join(
        source.splitlines()[body[0].lineno - 1:body[-1].end_lineno])).splitlines()
    begin = next((i for i, line in enumerate(lines) if marker(line) == "begin"), None)
    end = next((i for i, line in enumerate(lines) if marker(line) == "end"), None)
    before = [] if begin is None else lines[:begin]
    after = [] if end is None else lines[end + 1:]
    return before, lines[0 if begin is None else begin + 1:len(lines) if end is None else end], after


def _docstring(exercise: Exercise) -> str:
    owner = exercise.name.split(".")[0] + "." if exercise.is_method else exercise.module + "."
    equation = textwrap.fill(f"Forward:  {exercise.equation}", 92, subsequent_indent=" " * 10)
    lines = [f"{exercise.name}: the backward pass of {owner}{exercise.forwards[-1]}.", "",
             equation, "", *exercise.arguments.splitlines(), "",
             textwrap.fill(f"Hint: {exercise.hint}", 92)]
    return '"""' + "\n".join(lines) + '\n"""'


def starter_text(exercise: Exercise, solution: bool = False) -> str:
    """The learner's file for ``exercise`` (with ``solution``: the answered one)."""
    cases = grading_cases(exercise)
    source_file = exercise.module.replace(".", "/") + ".py"
    what = exercise.attribute + (f" ({exercise.name})" if exercise.is_method else "")
    header = "\n".join([
        '"""' + textwrap.fill(f"Exercise {exercise.name} (level {exercise.level}, "
                              f"{LEVELS[exercise.level]}): {exercise.teaches}.", 96), "",
        f"Write the body of {what} below, then grade it with", "",
        f"    minitf exercise check {exercise.filename}", "",
        "Your function stands in for minitf's own while minitf's gradient checks run (float64,",
        "central differences, a random upstream gradient; each case once more in float32, for",
        "the dtypes); everything else is minitf's own.",
        textwrap.fill("Graded by: " + "; ".join(cases) + ".", 96),
        '"""',
        f'EXERCISE = "{exercise.name}"   # which exercise this file answers: keep this line',
    ])
    # Only the answer is cut out: lines of the reference around its solution region (a dispatch,
    # a check) stay outside the fences, as minitf runs them.
    before, answer, after = body_parts(exercise)
    body = answer if solution else [f'raise NotImplementedError("{exercise.name}: not written yet")']
    signature = f"def {exercise.attribute}{inspect.signature(exercise.reference)}:"
    forward = textwrap.indent(_forward_source(exercise), "#     ", lambda line: True)
    forward = "\n".join(line.rstrip() for line in forward.splitlines())
    lines = [*before, FENCE.format("START", exercise.name), *body,
             FENCE.format("END", exercise.name), *after]
    function = "\n".join([signature, textwrap.indent(_docstring(exercise), "    "),
                          textwrap.indent("\n".join(lines), "    ")])
    imports = "\n".join(_import_lines(exercise))
    # answered, the file needs the helpers it calls (never imported: see Exercise.helpers)
    helpers = [_without_markers(inspect.getsource(f)) for f in exercise.helpers.values()]
    return "\n\n\n".join([header + ("\n\n" + imports if imports else ""),
                          f"# The forward, as minitf writes it ({source_file}):\n#\n{forward}",
                          function, *(helpers if solution else [])]) + "\n"


def _without_markers(source: str) -> str:
    """A function's source without its BEGIN/END SOLUTION lines, dedented."""
    return textwrap.dedent("\n".join(line for line in source.splitlines()
                                     if not _regions().marker(line))).rstrip()


def write_starter(exercise: Exercise, folder: Path) -> Path:
    """Write the starter into ``folder``. A file already there is replaced only if it is still
    the untouched starter: a learner's work is never overwritten."""
    from minitf.homework.writing import os_errors_named     # (it imports minitf.exercises)

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--dir {folder}: is a file; wanted a folder for the exercise file")
    path = folder / exercise.filename
    text = starter_text(exercise)
    with os_errors_named("--dir", folder, "a folder you can write the exercise file in"):
        if path.exists() and path.read_text(encoding="utf-8") != text:
            raise ValueError(f"{path}: already there and edited, so left as it is (to start "
                             f"over, move it away first)")
        folder.mkdir(parents=True, exist_ok=True)
    write_utf8(path, text, "--dir")     # whole or not at all: half a file would be 'edited'
    return path
