"""``minitf homework make``: the directory an instructor hands out.

It holds a runnable copy of minitf in which the chosen exercises' regions are stubs, the
instructor's own files (``--file``) blanked the same way, ``homework.json`` (what to grade, the
registry cases that grade each catalogue exercise, and a fingerprint of every blanked file
outside its regions) and a README for students. Everything is written in a fixed order from the
reference alone, so two runs give identical directories.

Where the regions come from is minitf's own source: every catalogue exercise's body is marked
with ``# BEGIN SOLUTION <name>`` / ``# END SOLUTION`` (see minitf.homework.regions). The docstring
of a catalogue exercise is replaced by the one 'minitf exercise start' writes -- the forward's
equation, the shapes, a hint -- because minitf's own docstrings state the derivation.
"""
from __future__ import annotations

import ast
import importlib
import importlib.machinery
import json
import os
import sys
import textwrap
from pathlib import Path

import minitf
from minitf.exercises import EXERCISES, find
from minitf.exercises.grade import read_python
from minitf.exercises.starter import _docstring
from minitf.exercises.time_limit import seconds_for
from minitf.homework import points as P
from minitf.homework import regions as R
from minitf.homework.writing import os_errors_named, removed_if_unfinished
from minitf.validate import check_flags, check_path

MANIFEST = "homework.json"
FORMAT, FORMAT_VERSION = "minitf homework", 1     # homework.json's first field: its format
PACKAGE = Path(minitf.__file__).parent
SKIP = {"__pycache__"}


def package_files():
    """(path, its path inside the package) of each file of the minitf running, compiled
    copies left out: what a homework copies, and an autograder zip carries as the reference."""
    for path in sorted(PACKAGE.rglob("*")):
        relative = path.relative_to(PACKAGE)
        if path.is_file() and not SKIP & set(relative.parts) and path.suffix != ".pyc":
            yield path, relative


def is_a_homework_copy() -> bool:
    """Whether the minitf running is a homework folder's copy (a student's), not the reference."""
    return (PACKAGE.parent / MANIFEST).is_file()


def refuse_a_homework_copy() -> None:
    """One line when the minitf running is a homework folder's copy, not the reference: its
    exercises are blanked, so a key made from it would hold stubs, and a grader would grade
    against them."""
    if is_a_homework_copy():
        raise ValueError(f"the minitf running this is a homework copy ({PACKAGE}); wanted the "
                         f"reference, so run the command outside any homework directory")


# What a student's grading can import: the student README asks for NumPy alone, and the
# autograder's setup.sh installs minitf's dependencies and nothing else
GRADING_IMPORTS = {"minitf", "numpy"}


def _local_imports(path: Path, tree: ast.Module) -> None:
    """One line when the instructor's file imports what a student's grading cannot: a module of
    their own folder (the homework copies the file alone), or a package beyond NumPy and Python's
    own (setup.sh installs none, and a student grades with NumPy alone): the import that works
    here fails for every student."""
    here = {Path.cwd().resolve(), path.resolve().parent}
    nodes = list(ast.walk(tree))
    tops = {alias.name.split(".")[0] for node in nodes if isinstance(node, ast.Import)
            for alias in node.names}
    tops |= {node.module.split(".")[0] for node in nodes
             if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
    for top in sorted(tops - GRADING_IMPORTS):
        for entry in sys.path:      # the entry Python would find it in: the first that has it
            if importlib.machinery.PathFinder.find_spec(top, [entry or "."]) is not None:
                folder = Path(entry or ".").resolve()
                if folder in here:
                    raise ValueError(f"--file {path}: it imports {top} from {folder}, which the "
                                     f"homework does not copy (every student's grading would "
                                     f"fail); wanted imports of minitf, NumPy and Python's "
                                     f"standard library only (copy what it uses from {top} "
                                     f"into the file)")
                break
        if top not in sys.stdlib_module_names:
            raise ValueError(f"--file {path}: it imports {top}, which a student's grading does "
                             f"not have (the autograder installs minitf's dependencies alone, "
                             f"and a student grades with NumPy); wanted imports of minitf, NumPy "
                             f"and Python's standard library only")


def check_name(name: str) -> str:
    """The function a --file exercise is graded by: check_<name>, dots as underscores."""
    return "check_" + name.replace(".", "_")


def _message(exercise, region: R.Region) -> str:
    if exercise is None:                    # an instructor's function: it may have no docstring
        if region.function != region.name:  # a helper of theirs that holds part of the answer
            return f"{region.name}: {region.function} is part of this exercise"
        return f"{region.name}: not written yet"
    if region.function != exercise.name:     # a helper that holds part of the exercise's work
        return (f"{exercise.name}: {region.function} is part of this exercise; its docstring "
                f"says what it returns")
    return f"{exercise.name}: {' '.join(exercise.hint.split())}"    # one line: no docstring wrap


def plan(text: str, where: str, names: set, catalogue: bool) -> list[R.Edit]:
    """The edits that blank the regions named in ``names`` (and, for catalogue exercises,
    replace their docstrings) in one file's ``text``."""
    lines = text.splitlines(keepends=True)
    edits = []
    for region in R.find_regions(text, where):
        if region.name not in names:
            continue
        exercise = find(region.name) if catalogue else None
        edits.append(R.Edit(region.begin + 1, region.end,
                            "".join(lines[region.begin + 1:region.end]),
                            R.stub(region, _message(exercise, region))))
        if exercise is not None and region.function == exercise.name:
            # a function without a docstring gets one, just above its region
            start, stop = R.docstring_span(text, region.function) or (region.begin,) * 2
            new = "".join(region.indent + line if line.strip() else line
                          for line in _docstring(exercise).splitlines(keepends=True))
            edits.append(R.Edit(start, stop, "".join(lines[start:stop]), new + "\n", False))
    return edits


def _catalogue_files(names: list[str]) -> dict:
    """{path inside the package: the exercise names whose regions it holds} for the chosen
    catalogue exercises; an exercise without a region in its module is an error."""
    files = {}
    for name in names:
        exercise = find(name)
        path = Path(importlib.import_module(exercise.module).__file__)
        text = path.read_text(encoding="utf-8")
        if not any(r.name == exercise.name for r in R.find_regions(text, path.name)):
            raise ValueError(f"{exercise.name}: no '# BEGIN SOLUTION {exercise.name}' region in "
                             f"{exercise.module}")
        files.setdefault(path.relative_to(PACKAGE).as_posix(), set()).add(exercise.name)
    return files


def _own_file(path: Path) -> tuple[str, list]:
    """An instructor's file: its text and its exercises, each with its check_<name> function."""
    if not path.is_file():
        got = ("is a folder" if path.is_dir() else "is not a regular file" if path.exists() else
               "no such file")
        raise ValueError(f"--file {path}: {got}; wanted an instructor's own Python file with "
                         f"marked regions")
    text = read_python(path, "--file", "an instructor's own Python file with marked regions")
    try:
        found = R.find_regions(text, f"--file {path}")     # its errors name the flag and path
    except SyntaxError as err:
        raise ValueError(f"--file {path}: line {err.lineno}: {err.msg}") from None
    names = sorted({r.name for r in found})
    if not names:
        raise ValueError(f"--file {path}: no '# BEGIN SOLUTION' region to blank")
    tree = ast.parse(text)
    _local_imports(path, tree)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in names:
        if check_name(name) not in defined:
            raise ValueError(f"--file {path}: exercise {name} has no {check_name(name)}() to "
                             f"grade it (see 'minitf homework make --help')")
    return text, names


def _readme(entries: list, solutions: bool) -> str:
    rows = "\n".join(f"| `{e['name']}` | `{e['file']}` | {e['points']:g} |" for e in entries)
    files = sorted({e["file"] for e in entries})
    names = [Path(f).name for f in files]
    shared = sorted({n for n in names if names.count(n) > 1})
    own = any(e["source"] == "file" for e in entries)        # an instructor's file, at the top
    catalogue = any(e["source"] == "minitf" for e in entries)
    longest = max((find(e["name"]).seconds for e in entries if e["source"] == "minitf"),
                  default=seconds_for(None))               # a whole model's limit is longer
    folder = "this whole folder" if own else "the folder `minitf` itself"
    # Gradescope cannot hold two uploaded files of one name side by side: only a folder can
    upload = (f"Two of them share a name ({', '.join(f'`{n}`' for n in shared)}): upload "
              f"{folder} (or a zip of it), not the files one by one, or the grader cannot tell "
              f"them apart." if shared else
              f"Upload {'them one by one' if len(files) > 1 else 'it'}, or {folder} (or a zip "
              f"of it).")
    what = f"the {len(files)} files of the table's second column" if len(files) > 1 else \
        f"`{files[0]}`"
    hand_in = textwrap.fill(f"What to hand in: {what}, with your bodies. {upload}", width=99)
    if not own:
        stands_in = "minitf's own"
    elif not catalogue:
        stands_in = "your instructor's, in the checks their file defines"
    else:
        stands_in = "minitf's own (or, in your instructor's file, theirs)"
    graded = textwrap.fill(
        "Each exercise is graded by minitf's gradient checks (float64, central differences, a "
        f"random upstream gradient; each case once more in float32, for the dtypes), with your "
        f"function standing in for {stands_in}"
        f"; one that runs for more than {seconds_for(None):g} seconds "
        f"{f'({longest:g} for a composite one, level 5) ' if longest > seconds_for(None) else ''}"
        f"is stopped and fails." +
        (" What each of minitf's exercises teaches, and its classic mistake:" if catalogue
         else ""), width=99)
    listing = "\n    python -m minitf exercise list\n" if catalogue else ""
    regions = textwrap.fill(
        "Each body sits between a `# BEGIN SOLUTION` and an `# END SOLUTION` line. Keep those "
        "two lines as they are and change nothing outside them: the grader reads them, and "
        "reports a file edited elsewhere, and the line where it was first changed. " +
        ("The docstring above each body says what comes in and what must come out." if not own
         else "The docstring above each body, where there is one, and your instructor say what "
              "comes in and what must come out."), width=99)
    key = ("\n**The key**: every body below is answered, and the folder passes every check. Keep "
           "it from the students; what follows is what their copy says.\n" if solutions else "")
    # an exercise whose answer is split over helpers (attention_backward's two steps): they are
    # blanked and graded with it, and an answer written without them would not do
    helped = [(e["name"], find(e["name"]).helpers) for e in entries if e["source"] == "minitf"]
    helpers = "".join(
        "\n" + textwrap.fill(
            f"`{name}` includes {' and '.join(f'`{h}`' for h in found)}, beside it in its file: "
            f"write {'their bodies' if len(found) > 1 else 'its body'} too, as "
            f"{'they are' if len(found) > 1 else 'it is'} graded with it.",
            width=99) + "\n"
        for name, found in helped if found)
    return f"""# Homework
{key}
Write the body of each function below, in place of its `raise NotImplementedError(...)`:

| exercise | file | points |
|---|---|---|
{rows}

An exercise earns its points when every one of its checks passes, and none otherwise.
{helpers}
{regions}

{hand_in}

Check your work from this folder (it holds its own copy of minitf; you need NumPy):

    python -m minitf homework grade .

{graded}
{listing}
Here the rest of minitf is your copy: an exercise that calls another one is graded with your
version of it, so a wrong answer can fail an exercise that calls it (whose report then names it,
when it comes earlier in the table): pass them in the table's order. Your instructor grades the
same way, against minitf's reference, so there each exercise is graded on its own; what your
code prints there, and the warnings it gives, are shown under its exercise's result.
"""


def _starter(text: str, where: str, names: set, catalogue: bool, solutions: bool) -> str:
    edits = plan(text, where, names, catalogue)
    return R.apply(text, [e for e in edits if not (solutions and e.body)])


def _copy_package(out: Path, blank: dict, solutions: bool) -> dict:
    """Copy minitf into out/minitf, blanking the chosen regions; {file: its fingerprint}."""
    frames = {}
    for path, relative in package_files():
        target = out / "minitf" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        names = blank.get(relative.as_posix())
        if names is None:
            target.write_bytes(path.read_bytes())
            continue
        text = path.read_text(encoding="utf-8")
        starter = _starter(text, path.name, names, True, solutions)
        target.write_text(starter, encoding="utf-8")
        frames["minitf/" + relative.as_posix()] = R.frame(starter, path.name)
    return frames


def refuse_answers_inside_a_homework(out, what: str) -> None:
    """One line when ``out``, which will hold the answers (``what``), lies inside a homework
    folder: that folder is what students receive, and zipped whole it would carry them too."""
    for folder in Path(out).absolute().parents:
        if (folder / MANIFEST).is_file():
            raise ValueError(f"--out {out}: inside the homework folder {folder}, which students "
                             f"receive, and {what}; wanted a path outside it")


def _check_make(out, exercises, files, solutions) -> None:
    """make's arguments from Python (the command line's are its flags'): a yes/no that is no
    bool, such as 'no', would write the answers into the students' copy."""
    where = "homework.make"
    check_path(out, "out", where)
    check_flags(where, solutions=solutions)
    for name, given in (("exercises", exercises), ("files", files)):
        if isinstance(given, (str, os.PathLike)) or not hasattr(given, "__iter__"):
            hint = " (one: wrap it in a list)" if isinstance(given, (str, os.PathLike)) else ""
            raise TypeError(f"{where}: {name} must be a list; got {given!r}{hint}")
    for name in exercises:
        if not isinstance(name, str):
            raise TypeError(f"{where}: exercises must be a list of names; got {name!r} among "
                            f"them")
    for path in files:
        check_path(path, "files", where)


def make(out, exercises=(), files=(), solutions=False, points=None) -> Path:
    """Write the homework directory ``out``: the catalogue ``exercises`` by name, and every
    region of each instructor's file in ``files``. Checks everything before writing anything,
    and removes what it wrote if the writing fails (a full disk): a rerun finds ``out`` as it was.
    ``solutions``: the same directory with the bodies answered (the instructor's key).
    ``points``: {exercise: points} for those not worth 1 (minitf.homework.points)."""
    _check_make(out, exercises, files, solutions)
    out = Path(out)
    if solutions:
        refuse_answers_inside_a_homework(out, "the key holds every answer")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        got = "is a file" if not out.is_dir() else "already exists and is not empty"
        raise ValueError(f"--out {out}: {got}; wanted a new folder")
    if not exercises and not files:
        raise ValueError("nothing to blank: give --exercises NAME,... or --file FILE.py")
    refuse_a_homework_copy()
    for name in exercises:
        if len(name.split()) > 1:
            raise ValueError(f"--exercises: {name!r} holds a space; wanted names separated by "
                             f"commas, e.g. relu_backward,softmax_backward")
    try:
        names = list(dict.fromkeys(find(n).name for n in exercises))
    except ValueError as err:
        raise ValueError(f"--exercises: {err}") from None
    blank = _catalogue_files(names)
    own = [(Path(f), *_own_file(Path(f))) for f in files]
    _names_of_their_own([path for path, _, _ in own])
    taken = set(names)                      # an exercise is a row of the results, by its name
    for path, _, own_names in own:
        twice = sorted(taken & set(own_names))
        if twice:
            raise ValueError(f"--file {path}: its exercise {twice[0]} has the name of another "
                             f"exercise of this homework; wanted each name once (rename one)")
        taken |= set(own_names)
    worth = P.check({} if points is None else points,
                    [*names, *(n for _, _, own_names in own for n in own_names)], "--points")
    from minitf.homework.autograde import check_own_file    # (they import this module)
    from minitf.homework import graded_by
    for path, _, own_names in own:
        check_own_file(path, own_names)

    # in the catalogue's order, easiest first, whatever the order asked for (the same exercises
    # make the same directory): the README's table, the grader's and the results follow it
    file_of = {n: f for f, ns in blank.items() for n in ns}
    entries = [{"name": e.name, "file": "minitf/" + file_of[e.name], "source": "minitf"}
               for e in EXERCISES if e.name in file_of]
    # the cases that grade each exercise, traced here, from the reference: traced inside a
    # student's copy they would be cut short by its stubs (minitf.homework.graded_by)
    graded_by_cases = graded_by.reference()
    # a failure half-way (a full disk) leaves no half a homework, which the rerun would refuse
    with os_errors_named("--out", out, "a new folder you can write to, with room for a copy of "
                                       "minitf"), removed_if_unfinished(out):
        out.mkdir(parents=True, exist_ok=True)
        frames = _copy_package(out, blank, solutions)
        for path, text, own_names in own:
            starter = _starter(text, path.name, set(own_names), False, solutions)
            (out / path.name).write_text(starter, encoding="utf-8")
            frames[path.name] = R.frame(starter, path.name)
            entries += [{"name": n, "file": path.name, "source": "file"} for n in own_names]
        for entry in entries:
            entry["points"] = worth[entry["name"]]
        (out / "README.md").write_text(_readme(entries, solutions), encoding="utf-8")
        # each frame line's own fingerprint too: a file edited outside its regions is told where
        lines = {file: R.frame_lines((out / file).read_text(encoding="utf-8"), Path(file).name)
                 for file in sorted(frames)}
        manifest = {FORMAT: FORMAT_VERSION, "exercises": entries, graded_by.KEY: graded_by_cases,
                    "frames": dict(sorted(frames.items())), "frame_lines": lines}
        if solutions:               # the key: an autograder zip is built from the blank copy
            manifest["key"] = True
        (out / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
    return out


def _names_of_their_own(paths: list) -> None:
    """One line naming an instructor's file given twice, or whose name another --file or the
    homework's own (minitf, its README, its manifest) has: the homework holds them side by side,
    so one would overwrite the other."""
    taken = {"minitf": "the homework's copy of minitf", "README.md": "the homework's README",
             MANIFEST: "the homework's manifest"}
    for path in paths:
        if path.name in taken:
            other = taken[path.name]
            got = (f"has the name of {other}" if isinstance(other, str) else
                   "given twice" if other.resolve() == path.resolve() else
                   f"has the name of --file {other}")
            raise ValueError(f"--file {path}: {got}; wanted each instructor's file once, each "
                             f"with a name of its own (the homework holds them side by side)")
        taken[path.name] = path
