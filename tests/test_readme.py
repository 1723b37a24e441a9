"""The README's Python examples run as they are printed, in order, in one namespace (as a reader
pastes them into one session), and give what their comments say. The instructor's own-file
example is tested in test_homework_own_file.py."""
import re
from pathlib import Path

import numpy as np

from minitf import backend

README = Path(__file__).resolve().parent.parent / "README.md"


def _examples() -> dict:
    """{the heading above it: the code} for every ```python block of the README."""
    text = README.read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r"```python\n(.*?)```", text, flags=re.S):
        heading = re.findall(r"^## (.+)$", text[:match.start()], flags=re.M)[-1]
        found.setdefault(heading, []).append(match.group(1))
    return found


def test_the_readme_s_examples_run_and_do_what_their_comments_say(capsys):
    examples = _examples()
    layer = examples["A layer, forward and backward side by side"]
    models = examples["The models"]
    assert len(layer) == 2 and len(models) == 1, "an example was added or moved: test it here"
    backend.seed(0)
    session = {}
    exec(compile(layer[0], "README: a layer", "exec"), session)
    q, dq, dk, dv = (session[name] for name in ("q", "dq", "dk", "dv"))
    assert session["cache"].probs.shape == (2, 4, 5, 5)                   # "ready to plot"
    assert dq.shape == dk.shape == dv.shape == q.shape
    assert np.allclose(np.triu(session["cache"].probs, 1), 0)              # the causal mask

    exec(compile(layer[1], "README: a module", "exec"), session)
    block, x, dx = session["block"], session["x"], session["dx"]
    assert dx.shape == x.shape == session["y"].shape == (8, 32, 64)
    assert all(np.abs(p.grad).sum() > 0 for p in block.parameters())       # "fills every p.grad"

    exec(compile(models[0], "README: the models", "exec"), session)
    lm, tok = session["lm"], session["tok"]
    assert all(np.abs(p.grad).sum() > 0 for p in lm.parameters())
    assert session["ids"].shape == (1, 4 + 40)                              # the prompt, then 40
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("The ") and len(printed) >= 2
    beams = session["beam_search"](session["seq2seq"], session["src"], beam_size=4)
    assert len(beams) == len(session["src"]) and all(isinstance(b, list) for b in beams)
