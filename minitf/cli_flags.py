"""The types of minitf's flags, for argparse's ``type=``: each turns the text into a value or
refuses it in the one line argparse prints, "argument --flag: got '…'; wanted …". Shared by the
commands of cli.py, cli_info.py and cli_course.py.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from minitf import backend
from minitf.validate import MOST_EXACT, literal_home, not_a_name


def checked(convert, accept, wanted: str):
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


# A count or size past 2^53 is no array's (and no float's exact integer): --context 1e160 was a
# traceback of info's arithmetic, --d-model 1e21 NumPy's "Maximum allowed dimension exceeded"
MOST = MOST_EXACT
POSITIVE = checked(int, lambda n: 1 <= n <= MOST, f"an integer ≥ 1 (and ≤ 2^53 = {MOST})")
NON_NEGATIVE = checked(int, lambda n: 0 <= n <= MOST, f"an integer ≥ 0 (and ≤ 2^53 = {MOST})")
EXIT_STATUS = checked(int, lambda n: 0 <= n <= 255, "an exit status, an integer in [0, 255]")
POSITIVE_REAL = checked(float, lambda x: math.isfinite(x) and x > 0, "a finite number > 0")
MAX_NEW_TOKENS = 100_000
NEW_TOKENS = checked(int, lambda n: 0 <= n <= MAX_NEW_TOKENS,
                     f"an integer in [0, {MAX_NEW_TOKENS}]")
# AdamW moves each weight by about lr a step: past 10 every weight is noise after one, and
# 1e308 overflowed in the warm-up ("Trainer: schedule(2) must be a finite number")
LEARNING_RATE = checked(float, lambda x: math.isfinite(x) and 0 < x <= 10,
                        "a finite number > 0 and ≤ 10 (AdamW's peak rate; 5e-3 by default)")
PROBABILITY = checked(float, lambda p: 0 < p <= 1, "a number in (0, 1]")
DROPOUT = checked(float, lambda p: 0 <= p < 1, "a number in [0, 1)")
# a homework's autograder stops grading a minute before the assignment's timeout on Gradescope,
# which allows at most 40 (autograder.build refuses more too)
MOST_TIMEOUT_MINUTES = 40
TIMEOUT_MINUTES = checked(int, lambda n: 2 <= n <= MOST_TIMEOUT_MINUTES,
                          f"a whole number of minutes ≥ 2 (the grading stops a minute before "
                          f"it) and ≤ {MOST_TIMEOUT_MINUTES}, the longest Gradescope allows")


def a_path(accept, wanted: str):
    """``checked`` for a path, which refuses first one that starts with a literal '~', and a
    symbolic link to nothing (to write there was "cannot write there (File exists)")."""
    plain = checked(str, accept, wanted)

    def parse(text: str):
        home = literal_home(text) if text else None
        if home is not None:
            raise argparse.ArgumentTypeError(f"got {text!r}: it {home}")
        long = not_a_name(text) if text else None
        if long is not None:
            raise argparse.ArgumentTypeError(f"got a path that {long}")
        # the link may be any folder on the way: --out link/ and --out link/run too
        link = next((p for p in (Path(text), *Path(text).parents)
                     if p.is_symlink() and not p.exists()), None) if text else None
        if link is not None:
            where = "" if link == Path(text) else f"{str(link)!r} in it is "
            raise argparse.ArgumentTypeError(f"got {text!r}: {where}a symbolic link to "
                                             f"{os.readlink(link)!r}, which does not exist; "
                                             f"wanted the link's target made first, or another "
                                             f"path")
        return plain(text)
    return parse


# "" is no path: --text "$CORPUS" with CORPUS unset trained on the default corpus, --resume ""
# started a new run, --out "" wrote to runs/lm
PATH = a_path(lambda text: text != "", "a path (a file or folder name)")
# a file there was checkpoint.load's words, "checkpoint.load: README.md is a file"
RUN = a_path(lambda text: text != "" and not os.path.isfile(text),
             "a run directory, the folder minitf train wrote (not a file)")
# "" is in every name: --only "$CHECK" with CHECK unset ran all 800-odd checks
SOME_TEXT = checked(str, lambda text: text.strip() != "", "some text of a check's name")


def add_backend(parser) -> None:
    """A command's --backend flag."""
    parser.add_argument("--backend", choices=backend.BACKENDS, default=None,
                        help="array backend (default: numpy, or $MINITF_BACKEND)")


# A copy of minitf.models.lm's, so that --help need not import the models; a test keeps them equal.
POSITIONAL = ("learned", "sinusoidal", "rope", "alibi", "relative")
# The flags of the model minitf train builds, and minitf info prices: written once, for both.
# Their defaults are None, so that a flag given can be told from one left out (RunConfig's
# then; a test holds the help's figures to RunConfig's).
MODEL_FLAGS = ("context", "d_model", "n_heads", "n_layers", "d_ff", "positional")


def add_model_flags(parser) -> None:
    """The model flags of minitf train and minitf info."""
    parser.add_argument("--context", type=POSITIVE,
                        help="characters per window, max_len (default 64)")
    parser.add_argument("--d-model", type=POSITIVE, help="model width (default 128)")
    parser.add_argument("--n-heads", type=POSITIVE, help="attention heads (default 4)")
    parser.add_argument("--n-layers", type=POSITIVE, help="blocks (default 2)")
    parser.add_argument("--d-ff", type=POSITIVE, help="feed-forward width (default 4·d_model)")
    parser.add_argument("--positional", choices=POSITIONAL,
                        help="positional scheme (default rope)")
