"""A file that is not what a command reads -- a name that does not end in .py, bytes that are not
UTF-8, a run directory's checkpoints.txt that no save wrote -- is one line naming the argument,
the file, what is wrong and what was wanted, and the file is left as it was."""
import shutil
from pathlib import Path

import pytest

from minitf import checkpoint, cli, exercises
from minitf.models import DecoderLM
from minitf.optim import AdamW
from minitf.train import Trainer

from test_bad_input import raises

OPS = Path(__file__).with_name("homework_ops.py")      # an instructor's RMSNorm
STARTED = "the exercise file 'minitf exercise start NAME' wrote"


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def _in_cp1252(source: Path, target: Path) -> int:
    """``source`` with one 'é' in a comment, saved as Windows' cp1252 does: the é's offset."""
    raw = source.read_bytes() + "# café\n".encode("cp1252")
    target.write_bytes(raw)
    return raw.index(0xe9)


# -- minitf exercise check FILE ------------------------------------------------------------------

@pytest.mark.parametrize("name, hint", [
    ("relu_backward.py.txt", "rename it relu_backward.py"),    # Notepad's, its .txt hidden
    ("relu_backward.txt", "rename it relu_backward.py"),
    ("relu_backward.PY", "rename it relu_backward.py"),
    ("relu_backward.ipynb", "export the notebook's code as relu_backward.py"),
])
def test_an_exercise_file_not_named_py_is_one_line(tmp_path, capsys, name, hint):
    """importlib finds no loader for such a name: a 20-line AttributeError traceback."""
    path = exercises.write_starter(exercises.find("relu_backward"), tmp_path).rename(
        tmp_path / name)
    assert cli.main(["exercise", "check", str(path)]) == 2
    message = one_line(capsys)
    for fragment in ("minitf exercise check: FILE", name, "not a .py file", STARTED, hint):
        assert fragment in message, message
    with raises(ValueError, "FILE", name, "not a .py file"):
        exercises.load(path)


def test_an_exercise_file_that_is_not_utf8_is_named(tmp_path, capsys):
    """Python's codec error alone named no file: '... can't decode byte 0xe9 in position ...'."""
    started = exercises.write_starter(exercises.find("relu_backward"), tmp_path / "mine")
    path = tmp_path / "relu_backward.py"
    at = _in_cp1252(started, path)
    before = path.read_bytes()
    assert cli.main(["exercise", "check", str(path)]) == 2
    message = one_line(capsys)
    for fragment in ("minitf exercise check: FILE", str(path.resolve()),
                     f"byte {at} (0xe9) is not valid UTF-8", "wanted a UTF-8 text file"):
        assert fragment in message, message
    assert path.read_bytes() == before


# -- minitf homework make --file FILE.py ---------------------------------------------------------

def test_a_homework_file_that_is_not_utf8_is_named_and_nothing_is_written(tmp_path, capsys):
    path, out = tmp_path / "my_ops.py", tmp_path / "hw"
    at = _in_cp1252(OPS, path)
    assert cli.main(["homework", "make", "--file", str(path), "--out", str(out)]) == 2
    message = one_line(capsys)
    for fragment in (f"--file {path}", f"byte {at} (0xe9) is not valid UTF-8",
                     "wanted a UTF-8 text file"):
        assert fragment in message, message
    assert not out.exists()


def test_a_homework_file_not_named_py_is_one_line(tmp_path, capsys):
    """It was graded as its own check and 'failed' with importlib's AttributeError."""
    path, out = tmp_path / "my_ops.py.txt", tmp_path / "hw"
    shutil.copy(OPS, path)
    assert cli.main(["homework", "make", "--file", str(path), "--out", str(out)]) == 2
    message = one_line(capsys)
    for fragment in (f"--file {path}: not a .py file", "rename it my_ops.py"):
        assert fragment in message, message
    assert not out.exists()


# -- a run directory's checkpoints.txt -----------------------------------------------------------

def _run(directory: Path) -> Path:
    model = DecoderLM(11, 8, 2, 1, max_len=4)
    trainer = Trainer(model, AdamW(model, 1e-3), batches=None)
    trainer.step = 3
    checkpoint.save(directory, model, trainer)
    (directory / "loss.png").write_bytes(b"\x89PNG")         # a file beside the step directory
    return directory


CORRUPT = [                          # what checkpoints.txt holds, what the one line says of it
    pytest.param(b"step-\x97000003\n",
                 "checkpoints.txt is corrupt (byte 5 (0x97) is not valid UTF-8)", id="not-utf8"),
    pytest.param(bytes(40), "checkpoints.txt is corrupt (byte 0 is a NUL)",
                 id="zeroed"),                                     # what a crash can leave
]
NAMING_NO_CHECKPOINT = [
    pytest.param(b"", "checkpoints.txt names nothing", id="empty"),
    pytest.param(b"\n\n", "checkpoints.txt names nothing", id="blank-lines"),
    pytest.param(b"loss.png\nstep-000003\n", "checkpoints.txt names loss.png, a file",
                 id="a-file-first"),
]


@pytest.mark.parametrize("content, fragment", CORRUPT + NAMING_NO_CHECKPOINT)
def test_a_checkpoints_txt_that_no_save_wrote_is_blamed_on_the_run_directory(
        tmp_path, capsys, content, fragment):
    """It was a UnicodeDecodeError, [Errno 20] Not a directory, 'embedded null byte', or 'not
    found (holding checkpoints.txt)' of a run directory that holds one."""
    run = _run(tmp_path / "run")
    (run / checkpoint.INDEX).write_bytes(content)
    files = sorted((p.relative_to(run), p.read_bytes() if p.is_file() else None)
                   for p in run.rglob("*"))
    for read in (checkpoint.find, checkpoint.load, checkpoint.read_meta):
        with raises(checkpoint.CheckpointError, f"checkpoint {run}: ", fragment):
            read(run)
    for command in (["generate", "--checkpoint", str(run)], ["info", "--checkpoint", str(run)]):
        assert cli.main(command) == 2
        message = one_line(capsys)
        assert f"checkpoint {run}: {fragment}" in message and "wanted" in message, message
    assert sorted((p.relative_to(run), p.read_bytes() if p.is_file() else None)
                  for p in run.rglob("*")) == files


@pytest.mark.parametrize("content, fragment", CORRUPT)
def test_a_save_never_writes_over_a_checkpoints_txt_it_cannot_read(tmp_path, content, fragment):
    run = _run(tmp_path / "run")
    (run / checkpoint.INDEX).write_bytes(content)
    model = DecoderLM(11, 8, 2, 1, max_len=4)
    with raises(checkpoint.CheckpointError, f"checkpoint {run}: ", fragment):
        checkpoint.save(run, model)
    assert (run / checkpoint.INDEX).read_bytes() == content
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints.txt", "loss.png", "step-000003"]


def test_a_checkpoints_txt_that_is_a_folder_is_one_line(tmp_path, capsys):
    run = _run(tmp_path / "run")
    (run / checkpoint.INDEX).unlink()
    (run / checkpoint.INDEX).mkdir()
    with raises(checkpoint.CheckpointError, f"checkpoint {run}: checkpoints.txt is a folder"):
        checkpoint.load(run)
    assert cli.main(["generate", "--checkpoint", str(run)]) == 2
    assert f"checkpoint {run}: checkpoints.txt is a folder; wanted" in one_line(capsys)
