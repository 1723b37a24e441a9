"""The file a learner edits: minitf's own function with its body cut out.

Everything in it is derived from the reference and its catalogue entry, so it cannot drift from
what the check grades: the signature is the reference's, the imports are the names the reference
body uses, the forward it differentiates is quoted from minitf's source. The body sits between two
fence lines that a later tool can find again (the CS231n "START OF YOUR CODE" convention):

    # *** START OF YOUR CODE (softmax_backward) -- do not edit this line ***
    raise NotImplementedError("softmax_backward: not written yet")
    # *** END OF YOUR CODE (softmax_backward) -- do not edit this line ***

``solution=True`` puts the reference body between the fences instead: the same file, answered.
"""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import textwrap
import types
from pathlib import Path

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


def _import_lines(exercise: Exercise) -> list[str]:
    """Import statements for the module-level names the reference body uses, each taken from
    where it is defined when that module exports it, else from the reference's own module."""
    home = importlib.import_module(exercise.module)
    plain, from_module = [], {}
    for name in sorted(_names_used(exercise.reference.__code__)):
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


def reference_body(exercise: Exercise) -> str:
    """The reference's body without its docstring, dedented."""
    source = textwrap.dedent(inspect.getsource(exercise.reference))
    node = ast.parse(source).body[0]
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    lines = source.splitlines()[body[0].lineno - 1:body[-1].end_lineno]
    return textwrap.dedent("\n".join(lines))


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
        "central differences, a random upstream gradient); everything else is minitf's own.",
        textwrap.fill("Graded by: " + "; ".join(cases) + ".", 96),
        '"""',
        f'EXERCISE = "{exercise.name}"   # which exercise this file answers: keep this line',
    ])
    body = reference_body(exercise) if solution else \
        f'raise NotImplementedError("{exercise.name}: not written yet")'
    signature = f"def {exercise.attribute}{inspect.signature(exercise.reference)}:"
    forward = textwrap.indent(_forward_source(exercise), "#     ", lambda line: True)
    forward = "\n".join(line.rstrip() for line in forward.splitlines())
    function = "\n".join([signature, textwrap.indent(_docstring(exercise), "    "),
                          "    " + FENCE.format("START", exercise.name),
                          textwrap.indent(body, "    "),
                          "    " + FENCE.format("END", exercise.name)])
    imports = "\n".join(_import_lines(exercise))
    return "\n\n\n".join([header + ("\n\n" + imports if imports else ""),
                          f"# The forward, as minitf writes it ({source_file}):\n#\n{forward}",
                          function]) + "\n"


def write_starter(exercise: Exercise, folder: Path) -> Path:
    """Write the starter into ``folder``. A file already there is replaced only if it is still
    the untouched starter: a learner's work is never overwritten."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--dir {folder}: is a file; wanted a folder for the exercise file")
    path = folder / exercise.filename
    text = starter_text(exercise)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        raise ValueError(f"{path}: already there and edited, so left as it is (to start over, "
                         f"move it away first)")
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
