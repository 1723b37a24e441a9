"""``minitf train`` and its run directory: a bad --out is found before training, one run writes a
directory at a time and never replaces another's, and --resume is exact (a run stopped by a
signal: test_run_signals.py)."""
import errno
import json
import os
import random
import shlex
import signal
import subprocess
import sys

import numpy as np
import pytest

from minitf import char_lm, checkpoint, cli, rundir
from minitf.data import CharTokenizer
from minitf.models import DecoderLM, Transformer

SMALL = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--context", "16",
         "--batch-size", "4", "--eval-every", "10", "--no-progress"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    words = "The quick brown fox jumps over a lazy dog and then some more".split()
    rng = random.Random(0)
    path = tmp_path_factory.mktemp("text") / "words.txt"
    path.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(200)))
    return str(path)


def train(text, *flags):
    return cli.main(["train", "--text", text, *SMALL, *flags])


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_resume_refuses_a_finished_run_and_another_text(text, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(text, "--steps", "20", "--out", str(run)) == 0
    assert cli.main(["train", "--resume", str(run)]) == 2       # it named a --steps 20 no one gave
    assert one_line(capsys).endswith(f"--resume {run}: the run there has done all its 20 steps; "
                                     f"to train on, give a larger total, e.g. --steps 120")
    assert cli.main(["train", "--resume", str(run), "--steps", "15"]) == 2
    err = one_line(capsys)
    assert err.endswith(f"--steps 15: the run in {run} has already done 20 steps; --steps is the "
                        f"run's total, so ask for more, e.g. --steps 120")

    other = tmp_path / "other.txt"
    other.write_text(open(text).read() + " Zebra!\n")
    assert cli.main(["train", "--resume", str(run), "--steps", "30", "--text", str(other)]) == 2
    err = one_line(capsys)
    assert f"--text {other}" in err and "(2 new: '!Z')" in err and "trained on" in err

    # the same shapes re-read as another model (2 heads as 4), or a long list of mismatches
    before = sorted(p.name for p in run.iterdir())
    for flag, value, trained in [("--n-heads", "4", "2"), ("--positional", "alibi", "rope"),
                                 ("--d-model", "64", "16"), ("--n-layers", "2", "1"),
                                 ("--d-ff", "32", "64"), ("--model", "lstm", "transformer")]:
        assert cli.main(["train", "--resume", str(run), "--steps", "30", flag, value]) == 2
        err = one_line(capsys)
        assert f"{flag} {value}: the run in {run} was trained with {trained}" in err, err
        assert "a model's shape cannot change as it resumes" in err
    # another seed, or --fast, would be recorded and change nothing: the run's generator goes on
    assert cli.main(["train", "--resume", str(run), "--steps", "30", "--seed", "5"]) == 2
    assert one_line(capsys).endswith(f"--seed 5: the run in {run} (--seed 0) goes on with the "
                                     f"random generator its checkpoint saved; leave --seed out")
    assert cli.main(["train", "--resume", str(run), "--steps", "30", "--fast"]) == 2
    assert one_line(capsys).endswith(f"--fast starts a new smoke run, and --resume {run} "
                                     f"continues the run there; wanted one of them")
    assert sorted(p.name for p in run.iterdir()) == before
    # the same model is no change: d_ff given as the default it was (4 · 16), the seed it had
    assert cli.main(["train", "--resume", str(run), "--steps", "22", "--d-ff", "64",
                     "--seed", "0"]) == 0
    # an RNN has no heads: the flag would change nothing, and is refused, not recorded
    lstm = tmp_path / "lstm"
    assert cli.main(["train", "--text", text, "--d-model", "16", "--context", "16",
                     "--batch-size", "4", "--no-progress", "--steps", "2", "--model", "lstm",
                     "--out", str(lstm)]) == 0
    capsys.readouterr()                                  # what the runs above printed
    assert cli.main(["train", "--resume", str(lstm), "--steps", "3", "--n-heads", "4",
                     "--no-progress"]) == 2
    assert f"--n-heads 4: the run in {lstm} is --model lstm" in one_line(capsys)
    assert cli.main(["train", "--resume", str(lstm), "--steps", "3", "--no-progress"]) == 0



def _same_run(a_dir, b_dir):
    """Bit-identical weights, optimizer state, random generator and history in two run
    directories."""
    a, b = checkpoint.load(a_dir), checkpoint.load(b_dir)
    assert a.meta["step"] == b.meta["step"] and a.arrays.keys() == b.arrays.keys()
    for key in a.arrays:
        assert np.array_equal(a.arrays[key], b.arrays[key]), key
    assert a.meta["rng"] == b.meta["rng"]
    assert a.meta["history"] == b.meta["history"]


def test_a_finished_run_continued_to_40_steps_is_one_run_of_40(text, tmp_path):
    """--steps says how far to train, never how the learning rate moves, so extending a finished
    run lands exactly where one longer run does (warm-up and cosine come from --decay-steps)."""
    once, twice = tmp_path / "once", tmp_path / "twice"
    flags = ["--decay-steps", "60", "--warmup", "5"]
    assert train(text, "--steps", "40", "--out", str(once), *flags) == 0
    assert train(text, "--steps", "20", "--out", str(twice), *flags) == 0
    assert cli.main(["train", "--resume", str(twice), "--steps", "40", "--no-progress"]) == 0
    _same_run(once, twice)
    # the defaults too: the schedule is the same whatever --steps says
    default_once, default_twice = tmp_path / "default_once", tmp_path / "default_twice"
    assert train(text, "--steps", "12", "--out", str(default_once)) == 0
    assert train(text, "--steps", "6", "--out", str(default_twice)) == 0
    assert cli.main(["train", "--resume", str(default_twice), "--steps", "12",
                     "--no-progress"]) == 0
    _same_run(default_once, default_twice)


def test_checkpoints_are_saved_during_training_and_resume_exactly(text, tmp_path, capsys,
                                                                  monkeypatch):
    run, straight = tmp_path / "run", tmp_path / "straight"
    assert train(text, "--steps", "25", "--save-every", "10", "--out", str(run)) == 0
    assert sorted(p.name for p in run.glob("step-*")) == ["step-000010", "step-000020",
                                                          "step-000025"]
    # a run killed after step 20 would resume from step-000020: do that by hand
    (run / "checkpoints.txt").write_text("step-000020\n")
    for name in ("step-000025", "step-000010"):
        for f in (run / name).iterdir():
            f.unlink()
        (run / name).rmdir()
    # one step directory of it, without --out: its saves would go inside that directory
    assert cli.main(["train", "--resume", str(run / "step-000020"), "--no-progress"]) == 2
    assert f"--resume {run / 'step-000020'} is one checkpoint of the run in {run}" in (
        capsys.readouterr().err)
    with monkeypatch.context() as inside:                         # and from inside it, as .
        inside.chdir(run / "step-000020")
        assert cli.main(["train", "--resume", ".", "--no-progress"]) == 2
    assert f"is one checkpoint of the run in {run.resolve()}" in capsys.readouterr().err
    assert sorted(p.name for p in (run / "step-000020").iterdir()) == ["checkpoint.json",
                                                                     "weights.npz"]
    assert cli.main(["train", "--resume", str(run / "step-000020"), "--out",
                     str(tmp_path / "branch"), "--no-progress"]) == 0             # into a new one
    assert cli.main(["train", "--resume", str(run), "--no-progress"]) == 0
    assert train(text, "--steps", "25", "--save-every", "0", "--out", str(straight)) == 0
    assert [p.name for p in straight.glob("step-*")] == ["step-000025"]
    _same_run(run, straight)


def test_a_checkpoint_saved_before_decay_steps_resumes_on_its_own_schedule(text, tmp_path):
    run = tmp_path / "run"
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    meta = checkpoint.read_meta(run)
    old = {k: v for k, v in meta["extra"]["run"].items() if k != "decay_steps"}
    (run / "checkpoints.txt").write_text("step-000010\n")
    path = run / "step-000010" / "checkpoint.json"
    data = json.loads(path.read_text())
    data["extra"]["run"] = old
    path.write_text(json.dumps(data))
    assert char_lm.RunConfig.resuming(run, steps=20).decay_steps == 10


def test_a_run_directory_holding_a_run_is_not_overwritten(text, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    before = {p.name: p.stat().st_mtime_ns for p in run.rglob("*")}
    assert train(text, "--steps", "10", "--out", str(run)) == 2
    err = one_line(capsys)
    # finished: --resume alone is refused, so the way it offers asks for more steps
    assert err.endswith(f"--out {run} already holds a run (step 10, finished); continue it with "
                        f"--resume {run} --steps 110, or start another with --out {run}2")
    (tmp_path / "run2").mkdir()                              # the name it offers is a free one
    assert train(text, "--steps", "10", "--out", str(run)) == 2
    assert one_line(capsys).endswith(f"or start another with --out {run}3")
    assert train(text, "--steps", "10", "--out", str(tmp_path / "run9")) == 0
    assert train(text, "--steps", "10", "--out", str(tmp_path / "run9")) == 2
    assert one_line(capsys).endswith(f"or start another with --out {run}10")    # not run92
    for name, offered in (("run007", "run008"), ("a\nb", "a\nb2")):   # as wide; a newline
        assert train(text, "--steps", "10", "--out", str(tmp_path / name)) == 0
        capsys.readouterr()
        assert train(text, "--steps", "10", "--out", str(tmp_path / name)) == 2
        assert capsys.readouterr().err.rstrip().endswith(
            f"or start another with --out {shlex.quote(str(tmp_path / offered))}")
    assert train(str(tmp_path / "typo.txt"), "--out", str(run)) == 2     # named before the run
    assert f"--text {tmp_path / 'typo.txt'}: no such file" in one_line(capsys)
    assert {p.name: p.stat().st_mtime_ns for p in run.rglob("*")} == before


def test_an_unusable_out_fails_before_anything_else(tmp_path, capsys, monkeypatch):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    missing_text = str(tmp_path / "none.txt")      # never read: --out is checked first
    assert train(missing_text, "--out", str(a_file)) == 2
    assert f"--out {a_file} is a file; wanted a directory" in one_line(capsys)
    assert train(missing_text, "--out", str(a_file / "sub")) == 2
    assert f"--out {a_file / 'sub'}: cannot write there" in one_line(capsys)

    for code in (errno.ENOSPC, errno.EACCES):
        def failing_open(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(rundir, "open", failing_open, raising=False)
        assert train(missing_text, "--out", str(tmp_path / "out")) == 2
        assert f"cannot write there ({os.strerror(code)})" in one_line(capsys)
    assert not (tmp_path / "out").exists()              # the folder the probe made is gone


def test_a_refused_run_leaves_no_folder_behind_and_a_full_disk_names_the_run(text, tmp_path,
                                                                              capsys, monkeypatch):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert train(str(empty), "--out", str(tmp_path / "new")) == 2
    assert "only 0 characters" in one_line(capsys) and not (tmp_path / "new").exists()
    # nor the parents it made: a/ and a/b/ of --out a/b/c, runs/ of the default runs/lm
    assert train(str(empty), "--out", str(tmp_path / "a" / "b" / "c")) == 2
    monkeypatch.chdir(tmp_path)
    assert train(str(empty)) == 2
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]

    write_durably = checkpoint.write_durably

    def full_disk_at_step_10(path, data):              # the probe fit, and step 5's checkpoint
        if "step-000010" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        write_durably(path, data)
    monkeypatch.setattr(checkpoint, "write_durably", full_disk_at_step_10)
    assert train(text, "--steps", "10", "--save-every", "5", "--out", str(tmp_path / "run")) == 2
    assert one_line(capsys).endswith(
        f"the run directory {tmp_path / 'run'} (--out): could not save the checkpoint of step 10 "
        f"(No space left on device); any earlier checkpoint there is untouched")
    assert checkpoint.load(tmp_path / "run").meta["step"] == 5           # step 5's, whole
    assert [p.name for p in (tmp_path / "run").iterdir() if p.name.startswith(".")] == []


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_left_by_a_dead_run_is_taken_over(text, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "lock").write_text(f"{_dead_pid()}\n")
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    assert not (run / "lock").exists()                   # released at the end


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix", reason="POSIX signals")
def test_a_folder_of_other_files_is_refused_and_left_as_it_was(text, tmp_path, capsys):
    """A run writes loss.png, checkpoints.txt and a lock: never over files that are not its own."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "loss.png").write_bytes(b"my own figure")
    (mine / "notes.txt").write_text("my notes")
    assert train(text, "--steps", "10", "--out", str(mine)) == 2
    assert one_line(capsys).endswith(f"--out {mine} holds files that are not a minitf run's "
                                     f"(loss.png, notes.txt); wanted a new or empty folder, or a "
                                     f"run directory")
    assert (mine / "loss.png").read_bytes() == b"my own figure"
    assert sorted(p.name for p in mine.iterdir()) == ["loss.png", "notes.txt"]

    locked = tmp_path / "locked"                  # a file named lock that holds no process number
    locked.mkdir()
    (locked / "lock").write_text("my own lock file")
    assert train(text, "--steps", "10", "--out", str(locked)) == 2
    assert one_line(capsys).endswith(f"--out {locked}: its file lock is not a minitf run's lock "
                                     f"(a process number), and is left as it is; wanted another "
                                     f"--out, or that file moved away")
    assert (locked / "lock").read_text() == "my own lock file"

    run = tmp_path / "run"                           # a run directory: its own files are replaced
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    (run / "notes.txt").write_text("beside the run")
    assert train(text, "--steps", "20", "--resume", str(run)) == 0
    assert (run / "notes.txt").read_text() == "beside the run"
    (run / "lock").write_bytes(b"\xff not a number")
    assert train(text, "--steps", "30", "--resume", str(run)) == 2
    assert "its file lock is not a minitf run's lock" in one_line(capsys)
    assert (run / "lock").read_bytes() == b"\xff not a number"


def test_a_smoke_run_after_the_main_job_is_saved_beside_it(tmp_path, monkeypatch, capsys):
    """--fast after `minitf train` was refused: both went to runs/lm, which held the main run."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--fast", "--no-progress", "--steps", "4", "--out", "runs/lm"]) == 0
    assert cli.main(["train", "--fast", "--no-progress", "--steps", "4"]) == 0
    assert checkpoint.read_meta("runs/fast")["step"] == 4 and "runs/fast" in capsys.readouterr().out
    assert checkpoint.read_meta("runs/lm")["step"] == 4


def test_a_run_s_own_folder_hidden_files_and_a_lock_of_nuls(text, tmp_path, capsys, monkeypatch):
    """--out . holding a run (its name is empty: there was no sibling to offer), a folder of
    Finder's and an editor's hidden files, and a lock a power cut left as NULs."""
    run = tmp_path / "run"
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    monkeypatch.chdir(run)
    assert train(text, "--steps", "10", "--out", ".") == 2
    assert one_line(capsys).endswith(f"--out . already holds a run (step 10, finished); continue "
                                     f"it with --resume . --steps 110, or start another with "
                                     f"--out {run}2")
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for name in (".DS_Store", ".gitkeep"):
        (hidden / name).write_text("")
    (hidden / "lock").write_bytes(b"\0" * 8)
    assert train(text, "--steps", "10", "--out", str(hidden)) == 0
    assert (hidden / ".DS_Store").exists() and not (hidden / "lock").exists()


def test_the_commands_a_run_suggests_can_be_pasted(tmp_path, capsys):
    """A path with a space was printed as it is, and the hint's --prompt 'def ' was printed for a
    text without an f: pasted, neither command ran."""
    text = tmp_path / "no f.txt"
    text.write_text("the cat sat on the mat, and the dog sat on the log.\n" * 40)
    run = tmp_path / "my runs" / "rün 1"
    assert train(str(text), "--steps", "4", "--out", str(run)) == 0
    hint = capsys.readouterr().out.strip().splitlines()[-1]
    command = shlex.split(hint.split("(", 1)[1].rstrip(")"))
    assert command[:4] == ["minitf", "generate", "--checkpoint", str(run)], hint
    assert command[4:] == ["--prompt", "the"], hint
    assert cli.main([*command[1:], "--max-new-tokens", "3"]) == 0
    capsys.readouterr()
    assert train(str(text), "--steps", "4", "--out", str(run)) == 2
    refusal = one_line(capsys)
    resume = shlex.split(refusal.split("continue it with ", 1)[1].split(", or", 1)[0])
    another = shlex.split(refusal.split("start another with ", 1)[1])
    assert resume == ["--resume", str(run), "--steps", "104"], refusal      # finished: more steps
    assert another == ["--out", str(run.with_name("rün 2"))], refusal     # counts on from 1
    # a step directory as --out: the run it offers to continue, quoted (and with more steps)
    assert train(str(text), "--steps", "8", "--out", str(run / "step-000004")) == 2
    offered = shlex.split(one_line(capsys).split("continue the run itself with ", 1)[1])
    assert offered == ["--resume", str(run), "--steps", "104"]
    # a run of 800 steps saved without its settings' total: --resume alone (--steps then the
    # default, 800) named a --steps 800 no one gave
    meta_path = next(run.glob("step-*/checkpoint.json"))
    meta = json.loads(meta_path.read_text())
    del meta["extra"]["run"]["steps"]
    meta_path.write_text(json.dumps(dict(meta, step=800)))
    assert train(str(text), "--resume", str(run)) == 2
    assert one_line(capsys).endswith(f"--resume {run}: the run there has done all its 800 steps; "
                                     f"to train on, give a larger total, e.g. --steps 1000")


@pytest.mark.parametrize("saved, said", [
    (lambda: (Transformer(11, 11, d_model=8, n_heads=2, n_layers=1),), "the model saved there "
     "is a Transformer;"),
    (lambda: (DecoderLM(11, d_model=8, n_heads=2, n_layers=1),), "it was saved without a "
     "tokenizer;"),
    (lambda: (DecoderLM(11, d_model=8, n_heads=2, n_layers=1), None,
              CharTokenizer(list("abcdefghijk"))),
     "it was saved without a trainer: no step or optimizer state to go on from;"),
])
def test_resume_of_a_checkpoint_minitf_train_did_not_write_is_one_line(text, tmp_path, capsys,
                                                                        saved, said):
    """It said the text's characters differed from the run's, or, for another family, what
    load says to the API ("or load(directory) to build it")."""
    checkpoint.save(tmp_path / "run", *saved())
    assert train(text, "--resume", str(tmp_path / "run")) == 2
    assert one_line(capsys) == (f"minitf train: --resume {tmp_path / 'run'}: {said} wanted a "
                                f"run that minitf train wrote (a DecoderLM or RNNLM, its "
                                f"tokenizer and its trainer)")


def test_a_text_the_bigram_model_predicts_gets_no_ratio_to_it(tmp_path, capsys):
    """"abab…": the bigram's held-out loss is 0.001, and the report said "2961.0% HIGHER"."""
    text = tmp_path / "ab.txt"
    text.write_text("ab" * 400)
    assert train(str(text), "--steps", "4", "--out", str(tmp_path / "run")) == 0
    out = capsys.readouterr().out
    assert "the bigram model all but predicts this text: no ratio to compare" in out, out
    assert "than the bigram model" not in out
