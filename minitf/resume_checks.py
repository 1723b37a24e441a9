"""What ``minitf train --resume`` refuses before it trains: a checkpoint that is no run of
``minitf train``, a run already done, flags that would change the model's shape, and a text of
other characters than the run's. Each check says, in one line, the flag and what was wanted.
``config`` is the char_lm.RunConfig of the flags given, with the run's own settings for the rest.
"""
from __future__ import annotations

from minitf import data
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
        if config.steps == run.get("steps"):      # no --steps given: the run's own total
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
