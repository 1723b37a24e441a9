"""Edges of a checkpoint's checkpoint.json and of a save's durability: a format version other
than this minitf's is refused in one line, a metadata missing one required key names that key,
and a save fsyncs each file and each folder it writes before checkpoints.txt names them."""
import json
import os

import pytest

from minitf import checkpoint, cli, rundir
from minitf.checkpoint_format import CheckpointError, check_meta
from test_checkpoint_faults import _intact_step, _save_step, _small
from test_run_directory import one_line


@pytest.fixture
def run(tmp_path):
    """A run of one checkpoint, step 1, saved with its trainer (so it can resume)."""
    directory = tmp_path / "run"
    _save_step(directory, _small(), 1)
    return directory


def _edit_meta(run, **changes):
    """Rewrite the current checkpoint.json with ``changes`` (the weights' hash is unchanged)."""
    path = checkpoint.find(run) / checkpoint.META
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))
    return checkpoint.find(run)


# -- the format version ----------------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 0, 7, "1", None, True, 1.0])
def test_a_checkpoint_of_another_format_version_is_refused_in_one_line(run, version):
    """Any version but the integer 1, newer, older or of another type, is refused in one line."""
    found = _edit_meta(run, version=version)
    wanted = f"checkpoint {found}: format version {version!r}; this minitf reads version 1"
    for read in (checkpoint.load, checkpoint.read_meta):
        with pytest.raises(CheckpointError) as refused:
            read(run)
        assert str(refused.value) == wanted
    assert not checkpoint.is_whole(found)


def test_a_checkpoint_without_a_version_is_refused_and_version_1_loads(run):
    """No version at all is no checkpoint of this format; the version saves write, 1, loads."""
    assert checkpoint.VERSION == 1 and checkpoint.read_meta(run)["version"] == 1
    assert _intact_step(run) == 1
    path = checkpoint.find(run) / checkpoint.META
    meta = json.loads(path.read_text())
    del meta["version"]
    path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="format version None; this minitf reads "
                                              "version 1$"):
        checkpoint.load(run)


def test_minitf_info_names_a_newer_format_version_in_one_line(run, capsys):
    """What a user sees of a checkpoint from a later minitf: one line naming both versions."""
    found = _edit_meta(run, version=2)
    assert cli.main(["info", "--checkpoint", str(run)]) == 2
    err = one_line(capsys)
    assert err.endswith(f"checkpoint {found}: format version 2; this minitf reads version 1"), err


# -- check_meta with only some of its required keys ------------------------------------------------

REQUIRED = [("kind", "a model kind"), ("config", "the model's settings"),
            ("rng", "a random-generator state"), ("step", "the step count"),
            ("history", "the loss history"), ("optimizer", "the optimizer's settings")]
OPTIMIZER = [("type", "the optimizer's class"), ("t", "its step count"),
             ("lr", "its learning rate")]


@pytest.fixture
def meta(run):
    """A whole checkpoint.json of a resumable checkpoint, as a dict."""
    return checkpoint.read_meta(run)


@pytest.mark.parametrize("key, wanted", REQUIRED)
def test_a_meta_missing_one_required_key_names_it(meta, key, wanted):
    """Each required key, missing alone, is named in one line, not met later as a KeyError."""
    check_meta(dict(meta), "here")                   # whole: accepted
    del meta[key]
    with pytest.raises(CheckpointError) as refused:
        check_meta(meta, "here")
    assert str(refused.value) == f"here: no {key}; wanted {wanted}"


@pytest.mark.parametrize("key, wanted", OPTIMIZER)
def test_an_optimizer_missing_one_setting_names_it_with_its_prefix(meta, key, wanted):
    """The optimizer's own fields are named as optimizer.<key>."""
    del meta["optimizer"][key]
    with pytest.raises(CheckpointError) as refused:
        check_meta(meta, "here")
    assert str(refused.value) == f"here: no optimizer.{key}; wanted {wanted}"


@pytest.mark.parametrize("kept, missing", [(("step",), "history"), (("history",), "step"),
                                           (("optimizer",), "step"),
                                           (("step", "history"), "optimizer")])
def test_a_meta_with_only_some_of_the_resume_keys_names_the_first_missing(meta, kept, missing):
    """One resume key present means all three are required: half a resume state is named."""
    for key in {"step", "history", "optimizer"} - set(kept):
        del meta[key]
    with pytest.raises(CheckpointError, match=f"^here: no {missing}; "):
        check_meta(meta, "here")


def test_a_meta_with_none_of_the_resume_keys_is_a_weights_only_checkpoint(meta):
    """Saved without a trainer: no step, history nor optimizer, and accepted as such."""
    for key in ("step", "history", "optimizer"):
        del meta[key]
    check_meta(meta, "here")


# -- durable writes: every file and folder of a save is fsynced ------------------------------------

def _identity(path) -> tuple:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def test_write_durably_fsyncs_the_whole_file(tmp_path, monkeypatch):
    """At the fsync the file holds all its bytes (flushed first), so the disk gets them all."""
    synced, real = [], os.fsync

    def recording(fd):
        st = os.fstat(fd)
        synced.append(((st.st_dev, st.st_ino), st.st_size))
        real(fd)
    monkeypatch.setattr(os, "fsync", recording)
    path, data = tmp_path / "file.bin", bytes(range(256)) * 10
    rundir.write_durably(path, data)
    assert synced == [(_identity(path), len(data))]
    assert path.read_bytes() == data


def _recording_fsyncs_and_replaces(monkeypatch) -> list:
    """Record, in order, each os.fsync (the file's identity and its size then) and os.replace
    (the target's name), both still done. -> the list they are recorded into"""
    events, real_fsync, real_replace = [], os.fsync, os.replace

    def recording_fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino), st.st_size))
        real_fsync(fd)

    def recording_replace(source, target):
        events.append(("replace", os.path.basename(target), None))
        real_replace(source, target)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return events


@pytest.mark.skipif(os.name != "posix", reason="only POSIX has directory handles to fsync")
def test_a_save_fsyncs_its_files_its_step_directory_and_the_run_directory(tmp_path,
                                                                          monkeypatch):
    """Files, step folder and list are synced, the run folder before and after the replace."""
    directory, trainer = tmp_path / "run", _small()
    _save_step(directory, trainer, 1)
    events = _recording_fsyncs_and_replaces(monkeypatch)
    _save_step(directory, trainer, 2)
    monkeypatch.undo()

    step = directory / "step-000002"
    synced = [identity for kind, identity, _ in events if kind == "fsync"]
    for path in (step / checkpoint.WEIGHTS, step / checkpoint.META, step,
                 directory / checkpoint.INDEX):
        assert _identity(path) in synced, f"{path.name} was never fsynced"
    sizes = {identity: size for kind, identity, size in events if kind == "fsync"}
    for name in (checkpoint.WEIGHTS, checkpoint.META):          # synced whole, not empty
        assert sizes[_identity(step / name)] == (step / name).stat().st_size > 0
    assert sizes[_identity(directory / checkpoint.INDEX)] == len("step-000002\nstep-000001\n")
    replaced = events.index(("replace", checkpoint.INDEX, None))
    run_syncs = [i for i, (kind, identity, _) in enumerate(events)
                 if kind == "fsync" and identity == _identity(directory)]
    assert any(i < replaced for i in run_syncs), "the run directory unsynced before the replace"
    assert any(i > replaced for i in run_syncs), "the run directory unsynced after the replace"
    step_sync = synced.index(_identity(step))
    assert synced.index(_identity(step / checkpoint.WEIGHTS)) < step_sync
    assert synced.index(_identity(step / checkpoint.META)) < step_sync
    assert _intact_step(directory) == 2


def test_write_utf8_syncs_the_new_file_whole_before_it_takes_the_old_one_s_place(tmp_path,
                                                                                  monkeypatch):
    """write_utf8 fsyncs its whole temporary before os.replace, and its folder after it (a power
    cut could otherwise lose the rename of a tokenizer, a results.json, a starter file)."""
    from minitf.data.text import write_utf8
    path = tmp_path / "tok.json"
    path.write_text("old")
    events = _recording_fsyncs_and_replaces(monkeypatch)
    text = "{\"chars\": \"abcé\"}"
    write_utf8(path, text, "here:")
    monkeypatch.undo()
    assert path.read_text(encoding="utf-8") == text
    assert events[0] == ("fsync", _identity(path), len(text.encode("utf-8")))
    assert events[1] == ("replace", "tok.json", None)
    assert events[2][:2] == ("fsync", _identity(tmp_path)) and len(events) == 3


def test_a_folder_that_cannot_be_synced_leaves_the_file_written_and_warns(tmp_path, monkeypatch):
    """Some mounts refuse to fsync a folder (EINVAL): the file is in place, so no 'cannot write'."""
    import errno
    import stat

    from minitf.data.text import write_utf8
    real_fsync = os.fsync

    def folders_refused(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", folders_refused)
    path = tmp_path / "notes.json"
    with pytest.warns(UserWarning, match=f"here: {path} is written, but the system could not "
                                         f"confirm its folder on the disk \\(Invalid argument\\)"):
        write_utf8(path, "new", "here:")
    assert path.read_text(encoding="utf-8") == "new"
