"""The course's commands of ``minitf``: ``lesson``, ``exercise`` and ``homework``, each one's
parser beside what it runs. minitf.cli adds them to the one ``minitf`` command."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

from minitf.cli_flags import EXIT_STATUS, PATH, POSITIVE_REAL, TIMEOUT_MINUTES, add_backend


def _lesson(args) -> int:
    from minitf import course

    folder = course.lessons_dir()
    if args.table and args.name is not None:    # the table was printed, the lesson not run
        raise ValueError(f"--table prints the table of every lesson; got a lesson too "
                         f"({args.name!r}); wanted one of the two")
    if args.table:
        print(course.table(folder))
        return 0
    if args.name is None:
        print(course.listing(folder))
        print("\nrun one with 'minitf lesson N' (a number or part of its name)")
        return 0
    return course.run(course.find(args.name), folder)


def _exercise(args) -> int:
    from minitf import exercises

    if args.action == "list":
        print(exercises.table())
        return 0
    if args.action == "start":
        exercise = exercises.find(args.name)
        path = exercises.write_starter(exercise, Path(args.dir))
        print(f"wrote {path}: write the body of {exercise.attribute}, then run "
              f"minitf exercise check {shlex.quote(str(path))}")
        return 0
    report, status = exercises.check_file(args.file)
    print(report)
    return status


def _homework(args) -> int:
    from minitf import homework
    from minitf.data.text import check_file_name

    if args.action == "make":
        from minitf.homework import points
        names = [n for n in (args.exercises or "").split(",") if n.strip()]
        out = homework.make(args.out, names, args.file, args.solutions,
                            points.parse(args.points))
        graded = [e["name"] + (f" ({e['points']:g} points)" if e["points"] != 1 else "")
                  for e in homework.manifest(out)["exercises"]]
        print(f"wrote {out}: {', '.join(graded)} " + ("answered (the key)" if args.solutions else
              "blank; students run 'python -m minitf homework grade .' inside it"))
        return 0
    if args.action == "autograder":
        from minitf.homework import autograder
        out = autograder.build(args.dir, args.out, args.timeout_minutes)
        print(f"wrote {out}: upload it as the assignment's autograder on Gradescope (setup.sh "
              f"and run_autograder at its root; it holds the reference, so keep it private)")
        return 0
    journal = None
    if args.resume and not args.json:
        raise ValueError("--resume goes with --json: it takes up the grading that a --json run "
                         "left unfinished")
    if args.ended_with is not None and not args.resume:
        raise ValueError(f"--ended-with {args.ended_with} goes with --resume: it says how the "
                         f"grading process that --resume takes up ended")
    if args.json:                   # before grading, which takes a while: not after it
        from minitf.homework.journal import Journal, progress_file
        check_file_name(args.json, "--json")
        from minitf.homework.points import of as points_of
        entries = homework.manifest(args.dir)["exercises"]
        names = [entry["name"] for entry in entries]
        if args.resume and not progress_file(Path(args.json)).exists():
            print(f"--resume: no {progress_file(Path(args.json))} was left behind (the last "
                  f"grading finished, or none ran); grading every exercise", file=sys.stderr)
        graded = [str(Path(f).resolve()) for f in (args.dir, args.submission) if f is not None]
        journal = Journal(args.json, names, resume=args.resume, of=" ".join(graded),
                          points={e["name"]: points_of(e, args.dir) for e in entries},
                          ended_with=args.ended_with)
    try:
        outcomes = homework.grade(args.dir, args.submission, journal, args.budget)
    except KeyboardInterrupt as err:
        # the next run grades every exercise again: --resume would score this one 0, as for a
        # grading process that its code ended. (No words: stopped before any exercise began.)
        kept = (f"; {args.json} holds what was graded before it, and 0 for the rest"
                if journal is not None and str(err) else "")
        again = "the same command again" + (" without --resume" if args.resume else "")
        raise KeyboardInterrupt(f"{str(err) or 'interrupted (Ctrl-C)'}{kept}; run {again} to "
                                f"grade every exercise") from None
    reports = homework.failing_reports(outcomes)
    print(reports + "\n\n" if reports else "", end="")     # what to fix first, the summary last
    print(homework.table(outcomes))
    if journal is None:
        return 0 if all(o.result.passed for o in outcomes) else 1
    journal.close()                 # every exercise's, those a process that ended had graded too
    taken_up = len(journal.tests) - len(outcomes)
    if taken_up:                    # the table above holds this process's exercises alone
        print(f"with the {taken_up} taken up from the grading process that ended (among them "
              f"the one it ended inside, at 0): score "
              f"{sum(test['score'] for test in journal.tests):g} of "
              f"{sum(test['max_score'] for test in journal.tests):g} in all "
              f"({args.json})")
    return 0 if all(test["status"] == "passed" for test in journal.tests) else 1


# said by both 'homework --help' and 'homework make --help', which a --file's refusal points to
_OWN_FILE = ("A --file marks its own regions the same way as minitf's ('# BEGIN SOLUTION NAME' / "
             "'# END SOLUTION', NAME the exercise, by default the enclosing function) and "
             "defines, for each exercise NAME, a function check_NAME() that returns a "
             "minitf.gradcheck FunctionCase or ModuleCase (or a dict of them) built from the "
             "file's own functions; make refuses a file whose own answers fail them (the README "
             "has an example).")


def add_course_commands(commands) -> None:
    """Add lesson, exercise and homework to ``commands`` (the subcommands of ``minitf``)."""
    lesson = commands.add_parser(
        "lesson", help="list the lessons, or run one",
        description="The course: lesson scripts in lessons/, each a story with printed numbers, "
                    "checks of the lectures' numbers and figures. Without NAME, list them with "
                    "their runtimes; with NAME (a number or part of a name), run that lesson. "
                    "Run from the root of the minitf repository.")
    lesson.add_argument("name", nargs="?", metavar="NAME", help="e.g. 4, 04 or masks")
    lesson.add_argument("--table", action="store_true",
                        help="print the lessons as the Markdown table of lessons/README.md")
    lesson.set_defaults(run=_lesson)

    exercise = commands.add_parser(
        "exercise", help="write minitf's backward passes yourself, and check them",
        description="Exercises drawn from minitf's own backward passes, easiest first. 'start' "
                    "writes a file with the function's signature, its forward and a hint, and "
                    "no body; 'check' grades your file by minitf's gradient checks, with your "
                    "function standing in for minitf's own (exit status 0 only when all pass).")
    actions = exercise.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="the exercises, the checks that grade them, what they teach")
    start = actions.add_parser("start", help="write the file for exercise NAME")
    start.add_argument("name", metavar="NAME", help="e.g. softmax_backward (see 'list')")
    start.add_argument("--dir", default=".", metavar="DIR", type=PATH,
                       help="where to write it (default .)")
    grade = actions.add_parser("check", help="grade your file")
    grade.add_argument("file", metavar="FILE", type=PATH, help="a file written by 'start', e.g. "
                                                     "softmax_backward.py")
    add_backend(grade)
    exercise.set_defaults(run=_exercise)

    homework = commands.add_parser(
        "homework", help="make a student directory with exercises left blank; grade it",
        description="'make' writes a self-contained student directory: a copy of minitf whose "
                    "chosen exercises (and every region of each --file) are stubs between their "
                    "'# BEGIN SOLUTION' / '# END SOLUTION' lines, a README and homework.json. "
                    + _OWN_FILE + " "
                    "'grade' grades each exercise on its own by gradient checks, with the "
                    "directory's function standing in for the reference (exit status 0 only "
                    "when all pass).")
    steps = homework.add_subparsers(dest="action", required=True, metavar="ACTION")
    make = steps.add_parser("make", help="write a student directory", description=_OWN_FILE)
    make.add_argument("--exercises", metavar="A,B,...",
                      help="catalogue exercises to blank, e.g. softmax_backward,attention_backward")
    make.add_argument("--file", action="append", default=[], metavar="FILE.py", type=PATH,
                      help="an instructor's own file with marked regions (may be repeated)")
    make.add_argument("--out", required=True, metavar="DIR", type=PATH,
                      help="a new (or empty) folder")
    make.add_argument("--points", metavar="A=N,...",
                      help="what exercises are worth, where not 1, e.g. attention_backward=3 "
                           "(all or nothing: an exercise passes every check, or scores 0)")
    make.add_argument("--solutions", action="store_true",
                      help="keep the reference bodies: the answered directory (the key)")
    mark = steps.add_parser("grade", help="grade a homework directory (a submission)")
    mark.add_argument("dir", metavar="DIR", type=PATH, help="a directory written by 'make'")
    mark.add_argument("--json", metavar="FILE", type=PATH,
                      help="also write Gradescope's results.json here, kept up to date before "
                           "each exercise (a FILE.progress beside it while grading runs)")
    mark.add_argument("--resume", action="store_true",
                      help="with --json, take up a grading whose process ended inside an "
                           "exercise (FILE.progress left behind): that exercise scores 0, the "
                           "ones already graded are kept, the rest are graded")
    mark.add_argument("--ended-with", metavar="STATUS", type=EXIT_STATUS,
                      help="with --resume, the exit status of the grading process that ended "
                           "(run_autograder passes it): the 0 of the exercise it ended inside "
                           "then names the likely cause, a crash or a kill, not every one")
    mark.add_argument("--budget", metavar="SECONDS", type=POSITIVE_REAL,
                      help="stop grading after this long in all (counted from the start of the "
                           "run --resume takes up): each exercise gets its time limit or what is "
                           "left, and those reached after are not graded (run_autograder passes "
                           "a minute under Gradescope's timeout)")
    mark.add_argument("--submission", metavar="DIR", type=PATH,
                      help="take each exercise's file from this folder (a student's upload: the "
                           "same paths, or the files side by side), or from a .zip of it, "
                           "unpacked as Gradescope does, instead of from DIR")
    add_backend(mark)
    ship = steps.add_parser("autograder", help="write a Gradescope autograder zip for a "
                                               "homework directory")
    ship.add_argument("dir", metavar="DIR", type=PATH, help="a directory written by 'make'")
    ship.add_argument("--out", required=True, metavar="FILE.zip", type=PATH, help="a new .zip file")
    ship.add_argument("--timeout-minutes", metavar="M", type=TIMEOUT_MINUTES,
                      help="the assignment's autograder timeout on Gradescope, as set in its "
                           "autograder settings (default: Gradescope's own default): the "
                           "grading stops a minute before it, so a student whose answers never "
                           "return still gets their scores")
    homework.set_defaults(run=_homework)
