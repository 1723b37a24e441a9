"""What ``minitf train`` refuses of its run directory and of ``--resume`` before it trains: a step
directory as --out, a folder of other files, a run it would overwrite; a checkpoint that is no
run of ``minitf train``, a run already done, flags that would change the model's shape, and a
text of other characters than the run's. Each check says, in one line, the flag and what was
wanted. ``config`` is the char_lm.RunConfig of the flags given, with the run's own settings for
the rest.
"""
from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

from minitf import checkpoint, data, rundir
from minitf.models import MODELS

# The settings that make the model what it is: the same on --resume, or it is another model.
SHAPE = ("model", "d_model", "n_heads", "n_layers", "d_ff", "positional")


def more_steps(done: int) -> int:
    """A total to suggest for continuing a run that has done ``done`` steps: a quarter more, at
    least 100 (800 → 1000)."""
    return done + max(100, done // 4)


def check_resume(config, saved: dict) -> None:
    """One line, before anything is read or built, for a resume that cannot continue the run."""
    kind = saved.get("kind")
    problem = (f"the model saved there is a {getattr(MODELS.get(kind), '__name__', repr(kind))}"
               if kind not in ("lm", "rnn") else
               "it was saved without a tokenizer" if not saved.get("tokenizer") else
               "it was saved without a trainer: no step or optimizer state to go on from"
               if "step" not in saved else None)
    if problem:             # it failed later: on the text's characters, or in load's API words
        raise ValueError(f"--resume {config.resume}: {problem}; wanted a run that minitf "
                         f"train wrote (a DecoderLM or RNNLM, its tokenizer and its trainer)")
    run = dict(saved.get("extra", {}).get("run", {}))
    done = saved.get("step", 0)
    if done >= config.steps:
        more = f"--steps {more_steps(done)}"
        # no --steps given: the run's own total (a run saved without it: its steps done)
        if config.steps == run.get("steps", done):
            raise ValueError(f"--resume {config.resume}: the run there has done all its {done} "
                             f"steps; to train on, give a larger total, e.g. {more}")
        raise ValueError(f"--steps {config.steps}: the run in {config.resume} has already done "
                         f"{done} steps; --steps is the run's total, so ask for more, e.g. {more}")
    asked = {name: getattr(config, name) for name in SHAPE + ("context",)}
    for settings in (run, asked):   # d_ff as the model has it: None is 4 · d_model
        if "d_model" in settings and settings.get("d_ff") is None:
            settings["d_ff"] = 4 * settings["d_model"]
    recurrent = run.get("model", "transformer") != "transformer"
    fixed = ("model", "d_model") if recurrent else SHAPE          # an RNN is its width alone
    # learned positions are a table of max_len rows: the only weights the context shapes (RoPE,
    # ALiBi, sinusoids and T5's buckets have none of its size, nor has the RNN)
    if not recurrent and run.get("positional") == "learned":
        fixed += ("context",)
    for name in fixed:
        if name in run and asked[name] != run[name]:
            what = ("the table of its learned positions, a vector for each position of the "
                    "context," if name == "context" else "a model's shape")
            raise ValueError(f"--{name.replace('_', '-')} {asked[name]}: the run in "
                             f"{config.resume} was trained with {run[name]}, and {what} "
                             f"cannot change as it resumes; leave the flag out, or start a new "
                             f"run with --out")


def check_same_characters(config, saved: dict, tokenizer) -> None:
    """A resumed run's text must have the characters its embedding table was made for."""
    before = data.CharTokenizer.from_json(saved["tokenizer"]).chars if saved["tokenizer"] else []
    if before != tokenizer.chars:
        now = tokenizer.chars
        new, gone = sorted(set(now) - set(before)), sorted(set(before) - set(now))
        differences = ", ".join(f"{len(chars)} {what}: {''.join(chars[:10])!r}"
                                for chars, what in ((new, "new"), (gone, "missing")) if chars)
        raise ValueError(f"--text {config.text or '(the default corpus)'}: its characters differ "
                         f"from those the run in {config.resume} was trained on ({differences}); "
                         f"resume with the text the run was trained on")


def refuse_a_step_directory(config) -> None:
    """The run's saves go to --out, or without it to --resume's directory: a step directory of
    a run would get them inside it, among the run's own, hiding its checkpoint (refused there,
    but only after the training)."""
    flag, path = ("--out", config.out) if config.out else ("--resume", config.resume)
    if not path or not one_step_of_a_run(Path(path).resolve()):
        return
    run_dir = Path(path).resolve().parent
    current = checkpoint.find(run_dir)
    itself = (f", or continue the run itself with {continuing(run_dir)[2]}"
              if checkpoint.is_whole(current) else
              f" (the run's current checkpoint, {current.name}, does not load)")
    if flag == "--resume":
        raise ValueError(f"--resume {path} is one checkpoint of the run in {run_dir}; "
                         f"continue from it into a new --out DIR{itself}")
    raise ValueError(f"--out {path} is one checkpoint of the run in {run_dir}, which a save "
                     f"there would hide; wanted a new --out DIR{itself}")


def continuing(run_dir: Path) -> tuple:
    """(the step of the run's current checkpoint, None where it does not read; whether the run
    is finished; the flags that continue it, to paste): --resume DIR, and for a finished run a
    larger --steps, as --resume alone is refused there."""
    resume = f"--resume {shlex.quote(str(run_dir))}"
    try:
        meta = checkpoint.read_meta(run_dir)
        step, total = meta["step"], meta.get("extra", {}).get("run", {}).get("steps")
    except (checkpoint.CheckpointError, KeyError, AttributeError):
        return None, False, resume
    finished = step == total
    return step, finished, resume + (f" --steps {more_steps(step)}" if finished else "")


def one_step_of_a_run(path: Path) -> bool:
    """Whether ``path`` is a step directory of a run directory: a checkpoint's files, and a
    checkpoints.txt beside it."""
    return (path / checkpoint.META).is_file() and (path.parent / checkpoint.INDEX).is_file()


def refuse_a_folder_of_other_files(out: Path) -> None:
    """A folder that holds no run may hold only what a run of minitf left there before its first
    save (its lock, a save's hidden temporaries, a step directory never made current) and hidden
    files: a run writes loss.png, checkpoints.txt and step directories, and would replace files
    of those names."""
    if checkpoint.find(out) is not None:
        return
    # hidden names are never a run's to replace: a save's temporaries, Finder's .DS_Store, …
    others = sorted(p.name for p in out.iterdir() if not (
        p.name == rundir.LOCK or p.name.startswith(".")
        or (p.name.startswith("step-") and p.is_dir())))
    if others:
        shown = ", ".join(others[:3]) + (", …" if len(others) > 3 else "")
        raise rundir.RunDirectoryError(f"--out {out} holds files that are not a minitf run's "
                                       f"({shown}); wanted a new or empty folder, or a run "
                                       f"directory")


def refuse_to_overwrite(out: Path, resume: str | None) -> None:
    """A run directory holding a checkpoint is continued (--resume), never silently replaced."""
    if checkpoint.find(out) is None or (resume and Path(resume).resolve() == out.resolve()):
        return
    step, finished, resume = continuing(out)
    named = out if out.name else out.resolve()         # '.' has no name to add a number to
    # runs/lm -> runs/lm2; a name that ends in a number counts on from it, as wide: runs/f1 ->
    # runs/f2, run007 -> run008 (DOTALL: a name may hold a newline)
    stem, number = re.fullmatch(r"(.*?)(\d*)", named.name, re.DOTALL).groups()
    siblings = (named.with_name(f"{stem}{i:0{len(number)}d}")
                for i in itertools.count(int(number or 1) + 1))
    free = next(other for other in siblings if not other.exists())
    held = "" if step is None else f" (step {step}{', finished' if finished else ''})"
    raise rundir.RunDirectoryError(f"--out {out} already holds a run{held}; continue it with "
                                   f"{resume}, or start another with --out "
                                   f"{shlex.quote(str(free))}")
