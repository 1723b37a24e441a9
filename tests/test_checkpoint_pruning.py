"""A run directory keeps its last few checkpoints and names the current one in checkpoints.txt;
pruning and the clean-up of a crashed save remove only this run's own step directories, never
one that checkpoints.txt does not name, nor one holding a file of yours."""
import os
import shutil

import pytest

from minitf import checkpoint

from test_checkpoint_faults import _intact_step, _save_step, _small

def test_a_run_directory_keeps_the_last_few_checkpoints_and_names_the_current(tmp_path):
    directory = tmp_path / "run"
    trainer = _small()
    for step in range(1, 6):
        _save_step(directory, trainer, step)
    names = sorted(p.name for p in directory.iterdir())
    assert names == ["checkpoints.txt", "step-000003", "step-000004", "step-000005"]
    assert (directory / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]
    assert _intact_step(directory) == 5 and _intact_step(directory / "step-000003") == 3
    _save_step(directory, trainer, 5)          # the same step again: a new name, both kept
    assert (directory / "checkpoints.txt").read_text().split()[:2] == [
        "step-000005-1", "step-000005"]


def test_leftovers_of_a_crashed_save_are_cleaned(tmp_path):
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / ".step-000009.998.tmp").mkdir()          # another save, killed while writing
    shutil.copytree(directory / "step-000001", directory / "step-000002")  # killed before
    #                                                        checkpoints.txt moved over the old
    (directory / ".checkpoints.txt.999.tmp").write_text("step-000002\n")
    (directory / "loss.png").write_bytes(b"not ours")
    # a user's own files that merely look alike are never removed, by clean or by a save
    (directory / "step-notes.txt").write_text("mine")
    (directory / "step-by-step").mkdir()
    (directory / "step-000003").mkdir()
    (directory / "step-000003" / "notes.txt").write_text("mine too")
    (directory / ".notes.tmp").write_text("mine as well")
    checkpoint.clean(directory)
    assert sorted(p.name for p in directory.iterdir()) == [
        ".notes.tmp", "checkpoints.txt", "loss.png", "step-000001", "step-000003", "step-by-step",
        "step-notes.txt"]
    assert _intact_step(directory) == 1
    for step in (4, 5, 6, 7):                   # past KEEP: the save removes step-000004 only
        _save_step(directory, trainer, step)
    assert sorted(p.name for p in directory.iterdir()) == [
        ".notes.tmp", "checkpoints.txt", "loss.png", "step-000003", "step-000005", "step-000006",
        "step-000007", "step-by-step", "step-notes.txt"]
    assert (directory / "step-000003" / "notes.txt").read_text() == "mine too"


def test_a_checkpoint_that_checkpoints_txt_does_not_name_is_never_removed(tmp_path, capsys):
    """clean removed every complete step directory that checkpoints.txt did not name: one copied
    into a new folder went at the first save there, and a run whose checkpoints.txt was edited
    lost its checkpoints to the very `minitf train --out` that then refused to overwrite it."""
    from minitf import cli
    run = tmp_path / "run"
    trainer = _small()
    for step in (1, 2):
        _save_step(run, trainer, step)
    mine = tmp_path / "mine"
    shutil.copytree(run / "step-000002", mine / "step-000002")           # no checkpoints.txt
    checkpoint.clean(mine)
    for step in (2, 3, 4, 5):               # a new run there, past KEEP, the same step among them
        _save_step(mine, trainer, step)
    assert sorted(p.name for p in mine.iterdir()) == [
        "checkpoints.txt", "step-000002", "step-000003", "step-000004", "step-000005"]
    assert (mine / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]          # step-000002-1 went past KEEP
    assert _intact_step(mine / "step-000002") == 2
    (run / "checkpoints.txt").write_text("step-000099\n")     # edited by hand
    assert cli.main(["train", "--fast", "--no-progress", "--out", str(run)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert _intact_step(run / "step-000001") == 1 and _intact_step(run / "step-000002") == 2


def test_a_save_interrupted_after_its_rename_leaves_the_previous_checkpoint_current(
        tmp_path, monkeypatch):
    """Ctrl-C between the rename of the new step directory and the replace of checkpoints.txt:
    the new directory is not current, and goes with the save's temporaries."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)

    def interrupted(source, target):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _save_step(directory, trainer, 2)
    monkeypatch.undo()
    assert sorted(p.name for p in directory.iterdir()) == ["checkpoints.txt", "step-000001"]
    assert _intact_step(directory) == 1

    replace = os.replace                  # Ctrl-C just after the replace: the new one is current

    def interrupted_after(source, target):
        replace(source, target)
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted_after)
    with pytest.raises(KeyboardInterrupt):
        _save_step(directory, trainer, 2)
    monkeypatch.undo()
    assert _intact_step(directory) == 2


def test_pruning_removes_only_this_run_s_step_directories(tmp_path):
    """An edited checkpoints.txt naming ../best, or a name twice, had it removed past KEEP."""
    directory, best = tmp_path / "run", tmp_path / "best"
    trainer = _small()
    _save_step(directory, trainer, 1)
    shutil.copytree(directory / "step-000001", best)
    (directory / "checkpoints.txt").write_text("step-000001\n../best\nstep-000001\n")
    for step in (2, 3, 4):
        _save_step(directory, trainer, step)
    assert _intact_step(best) == 1
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoints.txt", "step-000002", "step-000003", "step-000004"]


def test_a_save_killed_before_its_rename_leaves_a_step_directory_of_that_name_alone(tmp_path):
    """Killed after writing its new list and before the rename, a save leaves its staging
    directory and that list: a step directory of the listed name, put there since (a copy, or
    the staging directory recovered by hand), is not the save's, and stays."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / ".step-000002.997.tmp").mkdir()                       # the save's staging
    (directory / ".checkpoints.txt.997.tmp").write_text("step-000002\nstep-000001\n")
    shutil.copytree(directory / "step-000001", directory / "step-000002")   # yours
    checkpoint.clean(directory)
    assert sorted(p.name for p in directory.iterdir()) == [
        "checkpoints.txt", "step-000001", "step-000002"]


def test_a_listed_checkpoint_holding_a_file_of_yours_outlives_the_pruning(tmp_path):
    """Past KEEP a save removes the oldest listed step directory: one that holds a notes.txt of
    the user's besides the checkpoint is kept, file and all (with the check of what a folder
    holds gone, it was removed whole, and no test saw it)."""
    directory = tmp_path / "run"
    trainer = _small()
    _save_step(directory, trainer, 1)
    (directory / "step-000001" / "notes.txt").write_text("mine")
    for step in (2, 3, 4, 5):
        _save_step(directory, trainer, step)
    assert (directory / "checkpoints.txt").read_text().split() == [
        "step-000005", "step-000004", "step-000003"]
    assert (directory / "step-000001" / "notes.txt").read_text() == "mine"
    assert _intact_step(directory / "step-000001") == 1
    assert not (directory / "step-000002").exists()                # the plain one went


def test_a_stale_temporary_naming_a_listed_checkpoint_removes_nothing(tmp_path):
    """A leftover .checkpoints.txt.<pid>.tmp whose first line names a step directory that
    checkpoints.txt lists (the current one, here): clean must not take it for a save's
    never-current rename."""
    directory = tmp_path / "run"
    trainer = _small()
    for step in (1, 2):
        _save_step(directory, trainer, step)
    (directory / ".checkpoints.txt.4242.tmp").write_text("step-000002\nstep-000001\n")
    checkpoint.clean(directory)
    assert _intact_step(directory) == 2 and _intact_step(directory / "step-000001") == 1
    assert not (directory / ".checkpoints.txt.4242.tmp").exists()
