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
                                     f"itself with --resume {run.resolve()}")
    (run / "step-000020" / checkpoint.WEIGHTS).unlink()
    assert train(text, "--steps", "30", "--resume", str(run / "step-000010")) == 2
    assert one_line(capsys).endswith("continue from it into a new --out DIR (the run's current "
                                     "checkpoint, step-000020, does not load)")
    assert train(text, "--steps", "30", "--resume", str(run / "step-000010"),
                 "--out", str(tmp_path / "new")) == 0                  # the way it names
    assert char_lm.checkpoint.read_meta(tmp_path / "new")["step"] == 30
