"""Edges of a run directory's step directories: a step of more digits than the name's padding,
a never-current step directory that holds a file of the user's, a step directory or a save's
temporary that is a symbolic link, and one run directory spelled two ways on the command line."""
import os
import shutil
import warnings

import pytest

from minitf import checkpoint, cli
from test_checkpoint_faults import _intact_step, _save_step, _small
from test_run_directory import SMALL, one_line, text  # noqa: F401  (text is a fixture)
from test_run_signals import _stop_before_the_first_step


def _listed(directory) -> list:
    return (directory / checkpoint.INDEX).read_text().split()


def _contents(directory) -> list:
    return sorted(p.name for p in directory.iterdir())


# -- steps wider than the zero padding -------------------------------------------------------------

def test_a_step_of_more_digits_than_the_padding_is_named_listed_and_pruned(tmp_path):
    """Steps past six digits are named in full, listed newest first and pruned like the rest."""
    directory, trainer = tmp_path / "run", _small()
    for step in (100, 999_999, 1_000_000, 1_234_567, 1_234_568, 1_234_569):
        saved = _save_step_at(directory, trainer, step)
        assert saved == directory / (f"step-{step:06d}" if step < 10**6 else f"step-{step}")
    assert saved.name == "step-1234569" and not (directory / "step-000100").exists()
    assert _listed(directory) == ["step-1234569", "step-1234568", "step-1234567"]
    assert _contents(directory) == ["checkpoints.txt", "step-1234567", "step-1234568",
                                    "step-1234569"]
    assert _intact_step(directory) == 1_234_569
    assert _intact_step(directory / "step-1234567") == 1_234_567
    assert checkpoint.read_meta(directory)["step"] == 1_234_569
    _save_step(directory, trainer, 1_234_569)               # the same step again: a new name
    assert _listed(directory) == ["step-1234569-1", "step-1234569", "step-1234568"]
    assert not (directory / "step-1234567").exists()


def _save_step_at(directory, trainer, step):
    _save_step(directory, trainer, step)
    return checkpoint.find(directory)


def test_the_padding_is_six_digits(tmp_path):
    """step 1 is step-000001 and step 100 step-000100: the names earlier runs hold on disk."""
    directory, trainer = tmp_path / "run", _small()
    for step in (1, 100, 123_456):
        _save_step(directory, trainer, step)
    assert _listed(directory) == ["step-123456", "step-000100", "step-000001"]


def test_clean_removes_a_never_current_step_of_seven_digits_and_its_temporaries(tmp_path):
    """clean removes a killed save's never-current step-1234568 and temporaries, as for 6 digits."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1_234_567)
    shutil.copytree(directory / "step-1234567", directory / "step-1234568")
    (directory / ".checkpoints.txt.999.tmp").write_text("step-1234568\nstep-1234567\n")
    (directory / ".step-1234569.998.tmp").mkdir()                  # another save's staging
    checkpoint.clean(directory)
    assert _contents(directory) == ["checkpoints.txt", "step-1234567"]
    assert _intact_step(directory) == 1_234_567


def test_a_save_into_a_step_directory_of_seven_digits_is_refused(tmp_path):
    """A save into run/step-1234567 would hide that checkpoint: refused, as for six digits."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1_234_567)
    step = directory / "step-1234567"
    before = _contents(step)
    trainer.step = 1_234_568
    with pytest.raises(checkpoint.CheckpointError, match="is a step directory of the run"):
        checkpoint.save(step, trainer.model, trainer)
    assert _contents(step) == before


# -- a step directory holding a file of the user's -------------------------------------------------

@pytest.mark.parametrize("yours", ["notes.txt", "plots/loss.png"])
def test_clean_keeps_a_never_current_step_directory_that_holds_a_file_of_yours(tmp_path,
                                                                                yours):
    """A never-current step folder holding a file of yours stays: nothing the user saved is lost."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1)
    shutil.copytree(directory / "step-000001", directory / "step-000002")
    (directory / "step-000002" / yours).parent.mkdir(parents=True, exist_ok=True)
    (directory / "step-000002" / yours).write_text("mine")
    (directory / ".checkpoints.txt.999.tmp").write_text("step-000002\nstep-000001\n")
    checkpoint.clean(directory)
    assert _contents(directory) == ["checkpoints.txt", "step-000001", "step-000002"]
    assert (directory / "step-000002" / yours).read_text() == "mine"
    assert _intact_step(directory) == 1


# -- symbolic links --------------------------------------------------------------------------------

needs_symlinks = pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix",
                                    reason="symbolic links (POSIX)")


@needs_symlinks
def test_a_listed_step_directory_that_is_a_link_loads_and_outlives_the_pruning(tmp_path):
    """A step folder that is a link loads, and past KEEP is left, link and target, silently."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1)
    kept = tmp_path / "kept"
    shutil.move(directory / "step-000001", kept)
    (directory / "step-000001").symlink_to(kept, target_is_directory=True)
    assert _intact_step(directory) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # no "could not be removed" warning either
        for step in (2, 3, 4, 5):
            _save_step(directory, trainer, step)
    assert _listed(directory) == ["step-000005", "step-000004", "step-000003"]
    assert (directory / "step-000001").is_symlink()
    assert _intact_step(directory / "step-000001") == 1 and _intact_step(kept) == 1
    assert not (directory / "step-000002").exists()                # a real one went


@needs_symlinks
def test_clean_does_not_follow_a_link_into_deletion(tmp_path):
    """clean removes no link's target: a never-current step link, nor a staging-named link."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1)
    target, elsewhere = tmp_path / "target", tmp_path / "elsewhere"
    shutil.copytree(directory / "step-000001", target)
    elsewhere.mkdir()
    (elsewhere / "data.txt").write_text("mine")
    (directory / "step-000002").symlink_to(target, target_is_directory=True)
    (directory / ".checkpoints.txt.999.tmp").write_text("step-000002\nstep-000001\n")
    (directory / ".step-000003.998.tmp").symlink_to(elsewhere, target_is_directory=True)
    checkpoint.clean(directory)
    assert _contents(directory) == ["checkpoints.txt", "step-000001", "step-000002"]
    assert (directory / "step-000002").is_symlink() and _intact_step(target) == 1
    assert (elsewhere / "data.txt").read_text() == "mine"


# -- one run directory spelled two ways ------------------------------------------------------------

def test_resume_into_the_same_folder_spelled_differently_continues_the_run(text, tmp_path,
                                                                            monkeypatch,
                                                                            capsys):
    """runs/lm, /abs/runs/lm/ and runs/../runs/lm are one run: continued, not 'already holds'."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--text", text, *SMALL, "--steps", "20", "--out", "runs/lm"]) == 0
    absolute = f"{tmp_path / 'runs' / 'lm'}/"
    assert cli.main(["train", "--resume", "runs/lm", "--out", absolute, "--steps", "30",
                     "--no-progress"]) == 0
    assert checkpoint.read_meta("runs/lm")["step"] == 30
    assert cli.main(["train", "--resume", "./runs/lm", "--out", "runs/../runs/lm",
                     "--steps", "40", "--no-progress"]) == 0
    assert _listed(tmp_path / "runs" / "lm") == ["step-000040", "step-000030", "step-000020"]
    assert _contents(tmp_path / "runs") == ["lm"]                   # no runs/lm2 beside it
    capsys.readouterr()


def test_a_stop_at_once_into_the_same_folder_spelled_differently_saves_no_copy(
        text, tmp_path, monkeypatch, capsys):
    """Resumed into its folder spelled otherwise and stopped at once: no second copy of step 20."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--text", text, *SMALL, "--steps", "20", "--out", "runs/lm"]) == 0
    listed = _listed(tmp_path / "runs" / "lm")
    capsys.readouterr()
    _stop_before_the_first_step(monkeypatch)
    assert cli.main(["train", "--resume", "runs/lm", "--out", str(tmp_path / "runs" / "lm"),
                     "--steps", "30", "--no-progress"]) == 130
    assert "at step 20 of 30" in one_line(capsys)
    assert _listed(tmp_path / "runs" / "lm") == listed == ["step-000020"]
