"""A run whose newest checkpoint was damaged after it was saved (a file deleted or cut short, its
folder removed) points back to its newest whole one, and a save whose only trouble is an old
checkpoint it cannot remove is not a failed save."""
import re
import shutil
import warnings

import pytest

from minitf import char_lm, checkpoint
from test_checkpoint_faults import _intact_step, _save_step, _small
from test_run_directory import one_line, text, train  # noqa: F401  (text is a fixture)


@pytest.fixture
def run(tmp_path):
    """A run of three checkpoints, steps 1 to 3, the newest current."""
    directory, trainer = tmp_path / "run", _small()
    for step in (1, 2, 3):
        _save_step(directory, trainer, step)
    return directory


DAMAGE = {
    "weights deleted": lambda step: (step / checkpoint.WEIGHTS).unlink(),
    "weights cut short": lambda step: (step / checkpoint.WEIGHTS).write_bytes(
        (step / checkpoint.WEIGHTS).read_bytes()[:100]),
    "metadata emptied": lambda step: (step / checkpoint.META).write_text(""),
    "folder removed": shutil.rmtree,
}


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("damaged, whole", [(3, 2), (2, 1)], ids=["newest", "two newest"])
def test_a_damaged_current_checkpoint_names_the_newest_whole_one(run, damage, damaged, whole):
    """The newest whole checkpoint is named: the one just before the damaged one (skipping it
    would resume a step further back), or the oldest when the next one is damaged too."""
    for step in range(3, damaged - 1, -1):
        DAMAGE[damage](run / f"step-00000{step}")
    named = run / f"step-00000{whole}"
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load(run)
    message = str(caught.value)
    assert message.startswith(f"checkpoint {run / 'step-000003'}: ")
    assert message.endswith(f"; the run's newest whole checkpoint is {named}: load it by its own "
                            f"path (minitf train --resume {named} --out NEW_DIR continues the run "
                            f"from it)")
    if damage == "folder removed":
        assert "the folder, which checkpoints.txt names, is missing" in message
    if damage in ("metadata emptied", "folder removed"):     # read_meta reads no weights
        with pytest.raises(checkpoint.CheckpointError,
                           match=re.escape(f"newest whole checkpoint is {named}:")):
            checkpoint.read_meta(run)                     # the metadata alone says the same
    assert _intact_step(named) == whole                  # as it says
    assert checkpoint.is_whole(named) and not checkpoint.is_whole(run / f"step-00000{damaged}")


def test_with_no_whole_checkpoint_left_the_error_is_the_current_one_s(run):
    for step in (1, 2, 3):
        (run / f"step-00000{step}" / checkpoint.WEIGHTS).unlink()
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load(run)
    assert str(caught.value) == f"checkpoint {run / 'step-000003'}: weights.npz is missing"
    with pytest.raises(checkpoint.CheckpointError, match=r"step-000002: weights.npz is missing$"):
        checkpoint.load(run / "step-000002")            # by its own path: only its own error


def test_a_save_that_cannot_remove_an_old_checkpoint_warns_and_is_current(run, monkeypatch):
    removing = shutil.rmtree

    def read_only(path, *args, **kwargs):
        if path.name == "step-000001":
            raise PermissionError(13, "Permission denied", str(path))
        return removing(path, *args, **kwargs)
    monkeypatch.setattr(shutil, "rmtree", read_only)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _save_step(run, _small(), 4)
    assert [str(w.message) for w in caught] == [
        f"checkpoint.save: the old checkpoint {run / 'step-000001'}, off the list now, could not "
        f"be removed (Permission denied); the new one, step-000004, is saved and current"]
    assert _intact_step(run) == 4 and (run / "step-000001").is_dir()


def test_resume_from_a_step_of_a_run_whose_current_does_not_load_says_so(text, tmp_path, capsys):
    run = tmp_path / "run"
    assert train(text, "--steps", "20", "--save-every", "10", "--out", str(run)) == 0
    capsys.readouterr()
    assert train(text, "--steps", "30", "--resume", str(run / "step-000010")) == 2
    assert one_line(capsys).endswith("continue from it into a new --out DIR, or continue the run "
                                     f"itself with --resume {run.resolve()} --steps 120")  # finished
    (run / "step-000020" / checkpoint.WEIGHTS).unlink()
    assert train(text, "--steps", "30", "--resume", str(run / "step-000010")) == 2
    assert one_line(capsys).endswith("continue from it into a new --out DIR (the run's current "
                                     "checkpoint, step-000020, does not load)")
    assert train(text, "--steps", "30", "--resume", str(run / "step-000010"),
                 "--out", str(tmp_path / "new")) == 0                  # the way it names
    assert char_lm.checkpoint.read_meta(tmp_path / "new")["step"] == 30


def test_a_save_into_a_step_directory_or_an_empty_path_is_refused_and_writes_nothing(
        run, tmp_path, monkeypatch):
    """A save into step-000003 put a checkpoints.txt there, and a load of it by its own path (the
    way a damaged run's message names) then read the new one; '' saved into the working
    directory."""
    step = run / "step-000003"
    before = sorted(p.name for p in step.iterdir())
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(
            f"checkpoint.save: {step} is a step directory of the run {run} (it holds "
            f"checkpoint.json), which a save there would hide; wanted the run directory")):
        _save_step(step, _small(), 4)
    assert sorted(p.name for p in step.iterdir()) == before and _intact_step(step) == 3
    monkeypatch.chdir(tmp_path)
    for call in (lambda: checkpoint.save("", _small().model), lambda: checkpoint.load(" ")):
        with pytest.raises(ValueError, match="checkpoint.(save|load): directory is ' ?'; wanted a "
                                             "path"):
            call()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_save_the_disk_refuses_names_the_run_directory_and_why(run, monkeypatch):
    """On a read-only disk the save's clearing up failed too (unlink: EROFS), and its error
    replaced the save's; the one left named a hidden temporary."""
    import errno
    import os
    import pathlib

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))
    monkeypatch.setattr(checkpoint, "write_durably", read_only)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only)
    with pytest.raises(OSError) as err:
        _save_step(run, _small(), 4)
    monkeypatch.undo()
    assert err.value.errno == errno.EROFS and str(err.value) == (
        f"checkpoint.save: could not write to {run} (Read-only file system); any earlier "
        f"checkpoint there is untouched")
    assert _intact_step(run) == 3


def test_train_refuses_to_save_into_a_step_directory_before_it_trains(text, tmp_path, capsys):
    """--out a step directory trained every step, then failed at the save."""
    run = tmp_path / "run"
    assert train(text, "--steps", "10", "--out", str(run)) == 0
    capsys.readouterr()
    step = run / "step-000010"
    for flags in (["--resume", str(step)], []):
        assert train(text, "--steps", "20", *flags, "--out", str(step)) == 2
        message = one_line(capsys)
        assert message.endswith(f"--out {step} is one checkpoint of the run in {run.resolve()}, "
                                f"which a save there would hide; wanted a new --out DIR, or "
                                f"continue the run itself with --resume {run.resolve()} --steps "
                                f"110")                  # finished: --resume alone is refused
    assert sorted(p.name for p in step.iterdir()) == ["checkpoint.json", "weights.npz"]


def test_a_save_made_current_is_no_failed_save_if_the_last_fsync_fails(run, monkeypatch):
    """The fsync after the replace that made it current failed, and the save raised NotSaved:
    "any earlier checkpoint there is untouched", while checkpoints.txt named the new one."""
    from minitf import rundir
    real, calls = rundir.fsync_directory, []

    def fails_after_the_replace(path):
        calls.append(path)
        if len(calls) == 3:                # staging, the rename, then the replace's
            raise OSError(5, "Input/output error")
        real(path)
    monkeypatch.setattr(checkpoint, "fsync_directory", fails_after_the_replace)
    with pytest.warns(UserWarning, match="is saved and current, but the system could not "
                                         "confirm its folder on the disk"):
        _save_step(run, _small(), 4)
    monkeypatch.undo()
    assert _intact_step(run) == 4                                   # current, and whole
    assert len((run / checkpoint.INDEX).read_text().split()) == 3   # the list cut to KEEP


def test_a_garbled_list_names_the_newest_whole_step_directory_it_does_not_list(run):
    """checkpoints.txt overwritten with a word: the step directories are all there, unlisted, and
    the newest whole one is named, by its number (step-1000000 after step-999999, not as text)."""
    shutil.copytree(run / "step-000002", run / "step-999999")
    shutil.copytree(run / "step-000001", run / "step-1000000")
    (run / checkpoint.INDEX).write_text("garbage\n")
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load(run)
    named = run / "step-1000000"
    assert str(caught.value) == (
        f"checkpoint {run / 'garbage'}: the folder, which checkpoints.txt names, is missing; "
        f"the run's newest whole checkpoint is {named}: load it by its own path (minitf train "
        f"--resume {named} --out NEW_DIR continues the run from it)")


def test_a_garbled_list_with_no_whole_checkpoint_says_what_the_list_should_be(run):
    """Nothing whole to point to: the message says what checkpoints.txt should hold."""
    for step in (1, 2, 3):
        shutil.rmtree(run / f"step-00000{step}")
    (run / checkpoint.INDEX).write_text("garbage\n")
    with pytest.raises(checkpoint.CheckpointError) as caught:
        checkpoint.load(run)
    assert str(caught.value) == (
        f"checkpoint {run / 'garbage'}: the folder, which checkpoints.txt names, is missing; "
        f"checkpoints.txt is not minitf's: wanted the list minitf train writes there, its step "
        f"directories' names, newest first, one a line (or load a step directory by its own "
        f"path)")
