"""Bad input to the ``minitf`` command is one line on stderr -- naming the flag, file or argument,
what it got and what was wanted -- and exit status 2; a forged or damaged checkpoint is blamed on
the checkpoint, never a KeyError deep inside."""
import hashlib
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from minitf import backend, checkpoint, cli
from minitf.data import CharTokenizer
from minitf.models import DecoderLM, RNNLM
from minitf.optim import AdamW
from minitf.train import Trainer

from test_bad_input import raises


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


# -- --text ----------------------------------------------------------------------------------------

ENGLISH = "the cat sat on the mat, and the dog sat on the log. " * 20          # 1,040 characters


@pytest.mark.parametrize("content, fragments", [
    (("café " * 40).encode("latin-1"), ("byte 3 (0xe9) is not valid UTF-8", "wanted a UTF-8")),
    (ENGLISH.encode("utf-16"), ("byte 0 (0xff) is not valid UTF-8",)),
    (ENGLISH.encode("utf-16-le"), ("byte 1 is a NUL", "not binary or UTF-16")),
    (bytes(range(256)) * 2, ("byte 128 (0x80) is not valid UTF-8",)),
    (b"a" * 500, ("one distinct character ('a')", "wanted at least 2")),
    (ENGLISH[:200].encode(), ("200 characters hold out 20 for validation",
                              "less than one window of --context 32 + 1",
                              "wanted at least 330 characters, or a smaller --context")),
])
def test_a_text_that_cannot_train_is_refused_naming_the_file(content, fragments, capsys,
                                                             tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    assert cli.main(["train", "--fast", "--no-progress", "--text", str(path),
                     "--out", str(tmp_path / "run")]) == 2
    err = one_line(capsys)
    assert f"--text {path}: " in err and all(f in err for f in fragments), err
    assert checkpoint.find(tmp_path / "run") is None


# -- generate and info flags -----------------------------------------------------------------------

@pytest.mark.parametrize("command, flag, value, wanted", [
    ("generate", "--max-new-tokens", "-1", "an integer in [0, 100000]"),
    ("generate", "--max-new-tokens", "100001", "an integer in [0, 100000]"),
    ("generate", "--temperature", "nan", "a finite number > 0"),
    ("generate", "--temperature", "0", "a finite number > 0"),
    ("generate", "--temperature", "-1", "a finite number > 0"),
    ("generate", "--top-p", "0", "a number in (0, 1]"),
    ("generate", "--top-p", "1.5", "a number in (0, 1]"),
    ("generate", "--top-p", "nan", "a number in (0, 1]"),
    ("generate", "--top-k", "0", "an integer ≥ 1"),
    ("generate", "--top-k", "2.5", "an integer ≥ 1"),
    ("info", "--d-model", "-64", "an integer ≥ 1"),
    ("info", "--n-layers", "-1", "an integer ≥ 1"),
    ("info", "--vocab-size", "0", "an integer ≥ 1"),
    ("info", "--bytes", "0", "an integer ≥ 1"),
    ("info", "--context", "1" + "0" * 160, "an integer ≥ 1 (and ≤ 2^53"),   # OverflowError
    ("train", "--d-model", str(10 ** 21), "an integer ≥ 1 (and ≤ 2^53"),      # NumPy's words
    ("train", "--dropout", "1.5", "a number in [0, 1)"),     # was DecoderLM's, after the reading
    ("train", "--dropout", "-0.1", "a number in [0, 1)"),
    ("gradcheck", "--only", "", "some text of a check's name"),     # ran all 800-odd checks
    ("gradcheck", "--only", " ", "some text of a check's name"),
])
def test_a_bad_number_flag_is_one_line_naming_it(command, flag, value, wanted, capsys,
                                                   tmp_path):
    extra = ["--checkpoint", str(tmp_path)] if command == "generate" else []
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, *extra, f"{flag}={value}"])
    assert exit_.value.code == 2
    assert f"argument {flag}: got {value!r}; wanted {wanted}" in one_line(capsys)


def test_info_refuses_heads_that_do_not_divide_the_width(capsys, run):
    assert cli.main(["info", "--d-model", "10", "--n-heads", "3"]) == 2
    assert "--d-model 10 is not divisible by --n-heads 3" in one_line(capsys)
    # a model that cannot be built was priced; flags a checkpoint overrides were refused
    assert cli.main(["info", "--positional", "rope", "--d-model", "6", "--n-heads", "2"]) == 2
    assert "--positional rope needs an even head width; got --d-model 6 / --n-heads 2 = 3" in (
        one_line(capsys))
    assert cli.main(["info", "--checkpoint", str(run), "--batch-size", "8"]) == 0
    assert capsys.readouterr().out.startswith("DecoderLM vocab_size=")


def test_info_refuses_a_context_its_checkpoint_fixes(capsys, run):
    """--context 8 and --context 100000000 printed the same DecoderLM table: its max_len set
    the context, and the flag was taken and ignored."""
    assert cli.main(["info", "--checkpoint", str(run), "--context", "8"]) == 2
    assert one_line(capsys).startswith(
        "minitf info: --context 8: the checkpoint's DecoderLM is priced at its own context, "
        "max_len=")


def test_info_refuses_flags_its_checkpoint_would_ignore(capsys, run, tmp_path):
    """They were ignored: the table priced the saved model, d_model=32, for --d-model 64."""
    assert cli.main(["info", "--checkpoint", str(run), "--d-model", "7", "--n-heads", "2",
                     "--vocab-size", "9", "--untied"]) == 2
    assert one_line(capsys) == (
        f"minitf info: --checkpoint {run}: its model is priced as saved, so --d-model 7, "
        f"--n-heads 2, --vocab-size 9, --untied would be ignored; wanted --checkpoint alone (with "
        f"--batch-size, --bytes for a DecoderLM, and --context for an encoder–decoder or a set), "
        f"or the flags without it")
    with backend.seed(0):
        rnn = RNNLM(11, d_model=8, d_hidden=8)
    checkpoint.save(tmp_path / "rnn", rnn)
    assert cli.main(["info", "--checkpoint", str(tmp_path / "rnn"), "--table"]) == 2
    assert one_line(capsys) == ("minitf info: --table: one block's table is a DecoderLM's; the "
                                "checkpoint holds a RNNLM (leave out --table)")
    assert cli.main(["info", "--checkpoint", str(tmp_path / "rnn"), "--bytes", "2"]) == 2
    assert one_line(capsys) == ("minitf info: --bytes 2: the checkpoint's RNNLM is priced in "
                                "parameters and FLOPs, no bytes (a DecoderLM's KV cache has "
                                "them); leave out --bytes")        # the same table as --bytes 4
    assert cli.main(["info", "--checkpoint", str(tmp_path / "rnn")]) == 0
    assert cli.main(["info", "--checkpoint", str(run), "--bytes", "2"]) == 0
    assert "KV cache" in capsys.readouterr().out


def test_a_model_that_rope_cannot_turn_is_named_by_the_model():
    with raises(ValueError, "DecoderLM: positional='rope' needs an even d_head", "got d_head=3"):
        DecoderLM(10, d_model=6, n_heads=2, positional="rope")     # was MultiHeadAttention's


# -- MINITF_BACKEND --------------------------------------------------------------------------------

def _minitf(env_value, *arguments, code=None):
    env = dict(os.environ, MINITF_BACKEND=env_value)
    command = ["-c", code] if code else ["-m", "minitf", *arguments]
    return subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("value, message", [
    ("garbage", "backend 'garbage' does not exist; wanted one of ('numpy', 'cupy')"),
    pytest.param("cupy", "backend 'cupy' is not available: CuPy is not installed (install it "
                 "with: pip install 'minitf[gpu]'), or unset MINITF_BACKEND to use numpy",
                 marks=pytest.mark.skipif(backend.cupy_available(), reason="CuPy works here")),
])
def test_a_bad_minitf_backend_is_one_line_and_import_and_help_still_work(value, message):
    assert _minitf(value, code="import minitf, minitf.nn").returncode == 0
    assert _minitf(value, "--help").returncode == 0
    result = _minitf(value, "info")
    assert result.returncode == 2
    err = result.stderr.strip()
    assert err.count("\n") == 0 and err.startswith(f"minitf info: MINITF_BACKEND={value}: {message}")
    assert _minitf(value, "gradcheck", "--only", "relu", "--backend", "numpy").returncode == 0


# -- forged and damaged checkpoints ----------------------------------------------------------------

@pytest.fixture
def run(tmp_path):
    """A real saved run of a tiny model, to be damaged by each test."""
    tokenizer = CharTokenizer.fit(ENGLISH)
    with backend.seed(0):
        model = DecoderLM(tokenizer.vocab_size, 8, 2, 1, max_len=16)
    checkpoint.save(tmp_path / "run", model, Trainer(model, AdamW(model, 1e-3), batches=None),
                    tokenizer)
    return tmp_path / "run"


def forge(run, edit_meta=None, edit_arrays=None) -> None:
    """Edit the run's checkpoint.json and/or weights.npz (keeping the hash right, as a forger
    would, so that the edit itself is what gets caught)."""
    found = checkpoint.find(run)
    meta = json.loads((found / "checkpoint.json").read_text())
    if edit_arrays:
        with np.load(found / "weights.npz") as npz:
            arrays = dict(npz)
        edit_arrays(arrays)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        (found / "weights.npz").write_bytes(buffer.getvalue())
        meta["weights_sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    if edit_meta:
        edit_meta(meta)
    (found / "checkpoint.json").write_text(json.dumps(meta))


def _set_nan(arrays):
    arrays["model/tok_emb.W"][0, 0] = np.nan


@pytest.mark.parametrize("edit_meta, edit_arrays, fragments", [
    (lambda m: m.pop("config"), None, ("checkpoint.json: no config; wanted the model's settings",)),
    (lambda m: m["config"].pop("vocab_size"), None, ("its config does not build a lm model",
                                                      "vocab_size")),
    (lambda m: m.pop("optimizer"), None, ("checkpoint.json: no optimizer",)),
    (lambda m: m.pop("history"), None, ("checkpoint.json: no history",)),
    (lambda m: m["optimizer"].pop("lr"), None, ("no optimizer.lr",)),
    (lambda m: m.update(step="5"), None, ("step is '5'; wanted the step count (int)",)),
    (lambda m: m.update(step=-3), None, ("step is -3; wanted the step count (an integer ≥ 0)",)),
    (lambda m: m["optimizer"].update(t=-1), None, ("optimizer.t is -1; wanted the step count",)),
    (lambda m: m["tokenizer"]["chars"].pop(), None,
     ("the tokenizer has 14 characters; wanted config.vocab_size = 15",)),
    (lambda m: m["tokenizer"].update(chars="ab"), None, ("tokenizer is corrupt",)),
    (lambda m: m.update(rng={"bit_generator": "PCG64", "state": 7}), None,
     ("rng is not a random-generator state",)),
    (lambda m: m.update(rng=[1, 2]), None, ("rng is [1, 2]; wanted a random-generator state",)),
    (None, lambda a: a.update({"model/tok_emb.W": a["model/tok_emb.W"].astype(str)}),
     ("weights.npz: model/tok_emb.W dtype <U", "wanted real numbers")),
    (None, lambda a: a.update({"model/tok_emb.W": a["model/tok_emb.W"].astype(complex)}),
     ("weights.npz: model/tok_emb.W dtype complex128",)),
    (None, _set_nan, ("weights.npz: model/tok_emb.W holds NaN or infinite values",)),
])
def test_a_forged_checkpoint_is_one_line_blaming_it(run, edit_meta, edit_arrays, fragments,
                                                    capsys):
    forge(run, edit_meta, edit_arrays)
    assert cli.main(["generate", "--checkpoint", str(run), "--max-new-tokens", "2"]) == 2
    err = one_line(capsys)
    assert f"checkpoint {run}" in err and all(f in err for f in fragments), err


def test_a_history_missing_a_series_cannot_resume(run):
    forge(run, lambda m: m["history"].pop("loss"))
    saved = checkpoint.load(run)
    trainer = Trainer(saved.model, AdamW(saved.model, 1e-3), batches=None)
    with pytest.raises(checkpoint.CheckpointError, match=f"checkpoint {run}: the history has no "
                                                         f"loss"):
        checkpoint.resume(saved, trainer)


def test_generate_prints_each_character_as_it_is_drawn(run, capsys):
    from minitf.generate import generate
    saved = checkpoint.load(run)
    drawn = []
    ids = generate(saved.model, saved.tokenizer.encode("the "), 5,
                   on_token=lambda new: drawn.append(int(new[0])))
    assert drawn == [int(i) for i in ids[0, 4:]]
    assert cli.main(["generate", "--checkpoint", str(run), "--prompt", "the ",
                     "--max-new-tokens", "5"]) == 0
    assert len(capsys.readouterr().out) == len("the ") + 5 + 1


@pytest.mark.parametrize("argv", [
    ["train", "--fast", "--text", ""], ["train", "--fast", "--out", ""], ["train", "--resume", ""],
    ["generate", "--checkpoint", ""], ["info", "--checkpoint", ""], ["embed", "--model", ""],
    ["exercise", "start", "relu_backward", "--dir", ""], ["exercise", "check", ""],
    ["homework", "make", "--exercises", "relu_backward", "--out", ""], ["homework", "grade", ""],
    ["homework", "grade", ".", "--json", ""], ["homework", "autograder", ".", "--out", ""]])
def test_an_empty_path_is_refused_not_taken_as_none_or_here(argv, capsys, tmp_path,
                                                            monkeypatch):
    """--text "$CORPUS" with CORPUS unset trained on the default corpus; --resume "" started a
    new run and --out "" wrote to runs/lm; info --checkpoint "" printed the flags' model."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    err = one_line(capsys)
    wanted = ("a run directory, the folder minitf train wrote"
              if argv[1] in ("--resume", "--checkpoint") else "a path (a file or folder name)")
    assert f"got ''; wanted {wanted}" in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_default_corpus_too_short_for_the_context_is_named_as_such(capsys, tmp_path):
    """Without --text, the line began "--text None: 464,970 characters hold out ..."."""
    assert cli.main(["train", "--fast", "--no-progress", "--context", "100000",
                     "--out", str(tmp_path / "run")]) == 2
    err = one_line(capsys)
    assert err.startswith("minitf train: the default corpus: ") and "--context 100000" in err
    assert "characters hold out 46,497 for validation" in err          # (it said 46497)


def test_a_warning_is_one_line_and_minitf_s_own_sample_prompt_gives_none(run, capsys, tmp_path):
    """A prompt longer than the context was Python's two lines, the file and line of the warning
    and its source; and a run with a context shorter than its own sample prompt ("The ") warned
    about a prompt the user never gave."""
    assert cli.main(["generate", "--checkpoint", str(run), "--prompt", "the cat " * 4,
                     "--max-new-tokens", "2"]) == 0
    assert one_line(capsys) == ("minitf generate: warning: the prompt has 32 tokens, more than the "
                                "model's context of max_len=16; only its last 16 tokens are used")
    text = tmp_path / "text.txt"
    text.write_text(ENGLISH)
    assert cli.main(["train", "--fast", "--no-progress", "--text", str(text), "--context", "2",
                     "--steps", "2", "--out", str(tmp_path / "short")]) == 0
    assert capsys.readouterr().err == ""


def test_a_warning_for_python_s_own_frame_names_no_place(capsys, monkeypatch):
    """One raised for the caller of `python -m minitf embed` pointed at '<frozen runpy>, line 88'."""
    import warnings

    from minitf import cli_info
    monkeypatch.setattr(cli_info, "_info", lambda args: warnings.warn_explicit(
        "the text is cut", UserWarning, "<frozen runpy>", 88) or 0)
    assert cli.main(["info"]) == 0
    assert one_line(capsys) == "minitf info: warning: the text is cut"


def test_sizes_beyond_the_machine_are_one_line(capsys, tmp_path):
    """NumPy's MemoryError came as a 47-line traceback."""
    # the first table alone hundreds of TiB, beyond any address space: refused at once, even
    # where memory is overcommitted (a size that merely exceeds the memory could be granted)
    assert cli.main(["train", "--fast", "--no-progress", "--d-model", str(10**12), "--n-heads", "1",
                     "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()              # the flags named, not an array's shape
    assert err.count("\n") == 0 and err.startswith(
        f"minitf train: --d-model {10**12}, --n-layers 1: the model's weights alone do not fit "
        f"in this machine's memory (Unable to allocate"), err
    assert err.endswith("; wanted a smaller model") and not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["generate", "--checkpoint"], ["info", "--checkpoint"],
                                     ["train", "--resume"]])
def test_a_file_where_a_run_directory_is_wanted_is_named_by_its_flag(command, tmp_path, capsys):
    """It was checkpoint.load's words: "checkpoint.load: README.md is a file"; and a folder of
    something else was "not found"."""
    (tmp_path / "README.md").write_text("notes\n")
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, str(tmp_path / "README.md")])
    assert exit_.value.code == 2 and one_line(capsys).startswith(
        f"minitf {command[0]}: argument {command[1]}: got '{tmp_path / 'README.md'}'; wanted a "
        f"run directory, the folder minitf train wrote (not a file)")
    assert cli.main([*command, str(tmp_path)]) == 2
    assert one_line(capsys).startswith(f"minitf {command[0]}: checkpoint {tmp_path}: holds no "
                                       f"checkpoint (no checkpoints.txt, no checkpoint.json)")


@pytest.mark.parametrize("argv, said", [
    (["train", "--stesp", "20"], "minitf train: unrecognized arguments: --stesp 20; did you mean "
                                 "--steps? (see minitf train --help)"),
    (["homework", "grade", "hw", "--jsn", "r.json"], "minitf homework grade: unrecognized "
     "arguments: --jsn r.json; did you mean --json? (see minitf homework grade --help)"),
    (["generate", "--checkpoint", "x", "--top_k=3"], "minitf generate: unrecognized arguments: "
     "--top_k=3; did you mean --top-k? (see minitf generate --help)"),
    (["train", "corpus.txt"], "minitf train: unrecognized arguments: corpus.txt (see minitf train "
                              "--help)"),
    # given before the command: minitf's own; and no "did you mean --out?" from the dashes alone
    (["--bogus", "train"], "minitf: unrecognized arguments: --bogus (see minitf --help)"),
    (["train", "--bogus"], "minitf train: unrecognized arguments: --bogus (see minitf train --help)")])
def test_an_unknown_flag_is_refused_by_its_command_with_the_nearest_one(argv, said, capsys):
    """It was argparse's "minitf: unrecognized arguments: --stesp 20 (see minitf --help)": the
    top-level command named, its help pointed at, and no word of --steps."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and one_line(capsys) == said
