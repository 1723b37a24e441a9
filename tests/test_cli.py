"""The ``minitf`` command: ``gradcheck`` prints its table and its exit status tells the truth."""
import re
import os
import subprocess
import sys
import warnings

import pytest

from minitf import backend, checkpoint, cli, cli_flags, gradcheck_cases
from minitf.data import CharTokenizer
from minitf.gradcheck import FunctionCase


def test_gradcheck_prints_a_table_and_succeeds(capsys):
    assert cli.main(["gradcheck", "--only", "layer"]) == 0
    out = capsys.readouterr().out
    assert "check" in out and "max rel error" in out and "result" in out
    assert "layer_norm" in out and "LayerNorm" in out and "FAIL" not in out


def test_gradcheck_exits_1_when_a_backward_is_wrong(capsys, monkeypatch):
    def broken():
        import minitf.functional as F
        return FunctionCase(F.relu, lambda dy, cache: dy, {"x": backend.randn(3, 4)}, ("x",))

    monkeypatch.setitem(gradcheck_cases.CASES, "relu, broken", broken)
    assert cli.main(["gradcheck", "--only", "relu, broken"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_gradcheck_with_nothing_to_run(capsys):
    assert cli.main(["gradcheck", "--only", "no such check"]) == 2
    assert "no check matches" in capsys.readouterr().err


@pytest.mark.skipif(backend.cupy_available(), reason="CuPy is available here")
def test_an_unavailable_backend_is_one_line(capsys):
    assert cli.main(["gradcheck", "--backend", "cupy"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "backend 'cupy' is not available" in err


def test_python_dash_m_minitf():
    result = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--only", "softmax"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "of" in result.stdout and "tensors within 1e-06" in result.stdout


def test_help_and_bad_flags():
    ok = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--help"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "central differences" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "minitf", "gradcheck", "--bogus"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr
    assert bad.stderr.strip().count("\n") == 0 and "--help)" in bad.stderr


def test_a_reader_that_stops_early_gets_no_error_message():
    """`minitf exercise list | head -1`: the pipe is closed before minitf writes (here from the
    start); minitf ends quietly with exit status 1, not with '[Errno 32] Broken pipe'."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([sys.executable, "-m", "minitf", "exercise", "list"],
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.returncode == 1 and result.stderr == ""


# -- train, generate, info -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def fast_run(tmp_path_factory):
    """One `minitf train --fast` run, shared by the tests below."""
    out = tmp_path_factory.mktemp("runs") / "lm"
    result = subprocess.run([sys.executable, "-m", "minitf", "train", "--fast", "--no-progress",
                             "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return out, result.stdout


def test_generate_without_flags_is_generate_with_the_defaults_its_help_states(fast_run, capsys):
    """--max-new-tokens 30 or --seed 1 as the defaults, the help still saying 300 and 0, passed
    every test (the help's defaults were checked for train only)."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.choices and "generate" in a.choices)
    helps = {a.dest: a.help for a in commands.choices["generate"]._actions}
    stated = {flag: re.search(r"\(([0-9.]+)[;)]", helps[flag]).group(1)
              for flag in ("max_new_tokens", "temperature", "seed")}
    assert stated == {"max_new_tokens": "300", "temperature": "0.8", "seed": "0"}, stated
    run = ["generate", "--checkpoint", str(fast_run[0]), "--prompt", "The "]
    assert cli.main(run) == 0
    plain = capsys.readouterr().out
    assert cli.main([*run, *(f"--{flag.replace('_', '-')}={value}"
                             for flag, value in stated.items())]) == 0
    assert capsys.readouterr().out == plain and len(plain.rstrip("\n")) >= 300


def test_train_fast_reports_against_the_bigram_and_saves(fast_run):
    out, stdout = fast_run
    assert "held-out loss" in stdout and "bigram" in stdout and "--- sample 1" in stdout
    assert (out / "checkpoints.txt").read_text() == "step-000030\n"
    assert {p.name for p in (out / "step-000030").iterdir()} == {"weights.npz", "checkpoint.json"}
    assert (out / "loss.png").is_file()


def test_the_periodic_validation_reads_windows_spread_over_the_held_out_text():
    from minitf.char_lm import _spread
    assert _spread(726, 64)[:3] == [0, 11, 23] and _spread(726, 64)[-1] == 725
    assert len(set(_spread(726, 64))) == 64 and _spread(65, 64)[-2:] == [62, 64]
    assert _spread(10, 64) == list(range(10))


def test_generate_continues_a_prompt(fast_run, capsys):
    out, _ = fast_run
    assert cli.main(["generate", "--checkpoint", str(out), "--prompt", "The ",
                     "--max-new-tokens", "20", "--top-k", "5"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("The ") and len(text.rstrip("\n")) >= 24


def test_resume_with_another_config_is_one_line(fast_run, capsys, tmp_path):
    out, _ = fast_run
    code = cli.main(["train", "--no-progress", "--d-model", "16", "--steps", "40",
                     "--resume", str(out), "--out", str(tmp_path / "other")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0
    assert f"--d-model 16: the run in {out} was trained with 32" in err
    assert "a model's shape cannot change as it resumes" in err


def test_generate_errors_are_one_line(capsys, tmp_path):
    assert cli.main(["generate", "--checkpoint", str(tmp_path), "--prompt", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "holds no checkpoint" in err
    (tmp_path / "checkpoint.json").write_text("{")
    (tmp_path / "weights.npz").write_bytes(b"")
    assert cli.main(["generate", "--checkpoint", str(tmp_path), "--prompt", "x"]) == 2
    assert "corrupt" in capsys.readouterr().err


def test_a_prompt_with_unknown_characters_is_one_line(fast_run, capsys, tmp_path):
    out, _ = fast_run
    assert cli.main(["generate", "--checkpoint", str(out), "--prompt", "naïve ☃"]) == 2
    assert "is not in the vocabulary" in capsys.readouterr().err
    # the default prompt, a newline, on a run whose text had none: named as the default, not as
    # a flag the user gave
    saved = checkpoint.load(out)
    chars = [c for c in saved.tokenizer.chars if c != "\n"] + ["¤"]        # as many characters
    checkpoint.save(tmp_path / "no-newline", saved.model, tokenizer=CharTokenizer(chars))
    assert cli.main(["generate", "--checkpoint", str(tmp_path / "no-newline")]) == 2
    assert capsys.readouterr().err.strip() == (
        "minitf generate: --prompt '\\n' (the default): character '\\n' at position 0 is not in "
        f"the vocabulary of {len(chars)} characters this tokenizer was fitted on; "
        "wanted characters of the text the run was trained on")


def test_info_prints_the_cost_model(capsys, fast_run):
    assert cli.main(["info", "--d-model", "64", "--n-layers", "2", "--context", "32"]) == 0
    out = capsys.readouterr().out
    assert "parameters (exact)" in out and "KV cache" in out and "2·L·b·n·d = 8,192" in out
    assert "KV cache at full context           32.77kB" in out, out    # 4 bytes (float32) each
    assert cli.main(["info", "--checkpoint", str(fast_run[0])]) == 0


def test_info_table_prints_one_blocks_rows(capsys):
    assert cli.main(["info", "--d-model", "64", "--context", "32", "--table"]) == 0
    out = capsys.readouterr().out
    assert "full sequence" in out and "next token, KV cache" in out and "softmax" in out
    assert "b·h·q·n = 4,096 numbers" in out                      # 1 · 4 heads · 32 · 32


@pytest.mark.parametrize("command", ["train", "generate", "gradcheck", "info"])
def test_every_command_has_help(command):
    result = subprocess.run([sys.executable, "-m", "minitf", command, "--help"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and "usage: minitf " + command in result.stdout


@pytest.mark.parametrize("field", ["steps", "batch_size", "context", "d_model", "n_heads",
                                   "n_layers", "lr", "decay_steps", "eval_every", "save_every",
                                   "seed"])
def test_train_help_states_the_run_defaults(field):
    """`minitf train --help` writes each default out by hand: it must be RunConfig's (which the
    README measures), not the one before the defaults were last tuned."""
    from minitf.char_lm import RunConfig
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.choices and "train" in a.choices)
    helps = {a.dest: a.help for a in commands.choices["train"]._actions}
    stated = re.search(r"\(default ([0-9.e-]+)", helps[field])
    assert stated and float(stated.group(1)) == getattr(RunConfig(), field), helps[field]


def test_fast_is_a_small_version_of_the_default_run():
    from minitf.char_lm import RunConfig
    default, fast = RunConfig(), RunConfig.fast(seed=3)
    assert fast.steps < default.steps and fast.d_model < default.d_model and fast.seed == 3
    assert fast.positional == default.positional
    # saved beside the main job's run, not refused by it (the README's next command after it)
    assert (default.out, fast.out) == (None, "runs/fast") and RunConfig.fast(out="x").out == "x"
    assert RunConfig.fast(resume="r").out is None     # a resumed run saves where it was


def test_a_learning_rate_far_too_high_exits_1_naming_the_step(capsys, tmp_path):
    """lr 10: the loss climbs into the thousands; it never becomes NaN, and once exited 0."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # and no NumPy warning buries the message
        code = cli.main(["train", "--fast", "--lr", "10", "--no-progress",
                         "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and err.count("\n") == 0
    assert re.fullmatch(r"minitf train: training diverged at step \d+: the mean loss of the last 10 "
                        r"steps is .* more than 3 × log\(103\) = 13\.9, .*", err), err


def test_a_missing_text_file_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # the default --out, runs/lm, may hold a run where run
    assert cli.main(["train", "--fast", "--text", str(tmp_path / "none.txt")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no such file" in err
    assert cli.main(["train", "--fast", "--text", str(tmp_path)]) == 2     # was "no such file"
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--text {tmp_path}: is a folder; wanted a text file" in err


@pytest.mark.parametrize("flag, value, wanted", [
    ("--d-model", "0", "an integer ≥ 1"), ("--n-heads", "0", "an integer ≥ 1"),
    ("--batch-size", "0", "an integer ≥ 1"), ("--context", "-4", "an integer ≥ 1"),
    ("--d-ff", "0", "an integer ≥ 1"), ("--n-layers", "0", "an integer ≥ 1"),
    ("--steps", "0", "an integer ≥ 1"), ("--eval-every", "0", "an integer ≥ 1"),
    ("--d-model", "8.5", "an integer ≥ 1"), ("--seed", "-1", "an integer ≥ 0"),
    ("--warmup", "-1", "an integer ≥ 0"), ("--lr", "nan", "a finite number > 0"),
    ("--lr", "inf", "a finite number > 0"), ("--lr", "0", "a finite number > 0"),
    ("--lr", "-0.001", "a finite number > 0"), ("--lr", "fast", "a finite number > 0"),
    ("--lr", "1e308", "a finite number > 0 and ≤ 10"),      # overflowed in the warm-up
])
def test_a_bad_train_flag_is_one_line_naming_it(flag, value, wanted, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        # (a missing --text: were the flag let through, the run would stop there, not train)
        cli.main(["train", "--text", str(tmp_path / "none.txt"), flag, value,
                  "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2 and err.count("\n") == 0
    assert f"argument {flag}: got {value!r}; wanted {wanted}" in err
    assert not (tmp_path / "run").exists()                  # refused before anything ran


def test_train_model_rnn_runs_the_same_loop_and_its_checkpoint_generates(tmp_path, capsys):
    from minitf.char_lm import MODEL_CHOICES as trained
    from minitf.models.lm import POSITIONAL
    assert cli.MODEL_CHOICES == trained and cli_flags.POSITIONAL == POSITIONAL  # copies: a fast --help
    out = tmp_path / "rnn"
    assert cli.main(["train", "--fast", "--model", "lstm", "--no-progress", "--steps", "10",
                     "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "model: RNNLM" in stdout and "one lstm layer" in stdout and "LSTM " in stdout
    assert cli.main(["generate", "--checkpoint", str(out), "--prompt", "The ",
                     "--max-new-tokens", "10"]) == 0
    assert capsys.readouterr().out.startswith("The ")
    assert cli.main(["info", "--checkpoint", str(out)]) == 0
    assert "sequential steps" in capsys.readouterr().out


def test_a_bad_model_choice_is_one_line(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--model", "gru"])
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--model" in err and "'gru'" in err


def test_gradcheck_to_a_file_says_every_10_checks_how_far_it_is(capsys, monkeypatch):
    """No bar where standard error is no terminal (a bar there is one endless line), and then a
    run of minutes printed nothing until its table: a line every 10 checks, none after the last."""
    import minitf.functional as F

    def relu():
        return FunctionCase(F.relu, F.relu_backward, {"x": backend.randn(3, 4)}, ("x",))

    for i in range(25):
        monkeypatch.setitem(gradcheck_cases.CASES, f"relu, copy {i:02d}", relu)
    assert cli.main(["gradcheck", "--only", "relu, copy"]) == 0
    err = capsys.readouterr().err
    assert re.fullmatch(r"gradcheck: 10 of 25 checks done in \d+ s\n"
                        r"gradcheck: 20 of 25 checks done in \d+ s\n", err), err
