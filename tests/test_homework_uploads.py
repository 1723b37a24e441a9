"""What a student uploaded, as ``homework grade --submission`` finds it: two homework files of one
name told apart only by their folders, a file missing, a file that is no UTF-8 (two
of one name: test_homework_autograder.py)."""
import shutil

import pytest

from minitf import homework

EXERCISES = ["softmax_backward", "rope_backward", "LearnedPositionalEmbedding.backward"]
SOFTMAX, ROPE, LEARNED = ("minitf/functional/softmax.py", "minitf/functional/positional.py",
                          "minitf/nn/positional.py")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(the student directory, the key): two files called positional.py."""
    root = tmp_path_factory.mktemp("uploads")
    return (homework.make(root / "hw", EXERCISES),
            homework.make(root / "key", EXERCISES, solutions=True))


def graded(made, folder) -> dict:
    return {o.name: o for o in homework.grade(made[0], folder)}


def test_a_lone_file_whose_name_two_homework_files_share_is_not_graded_as_either(made, tmp_path):
    """Uploaded one by one, functional/positional.py was graded as nn/positional.py too (an
    AttributeError on a class it does not hold, and 'edited outside its regions')."""
    key = made[1]
    for file in (ROPE, SOFTMAX):
        shutil.copy(key / file, tmp_path)
    outcomes = graded(made, tmp_path)
    assert outcomes["softmax_backward"].result.passed
    for name, file, other in (("rope_backward", ROPE, LEARNED),
                              ("LearnedPositionalEmbedding.backward", LEARNED, ROPE)):
        assert outcomes[name].report == (
            f"{file}: the submission's positional.py is not in {file.rsplit('/', 1)[0]}/, and "
            f"the homework has another positional.py ({other}); wanted each in its folder: "
            f"upload the homework's folder, or a zip of it")
        assert not outcomes[name].edited
    shutil.copytree(key / "minitf", tmp_path / "folder" / "minitf")      # in their folders: both
    assert all(o.result.passed for o in graded(made, tmp_path / "folder").values())


def test_a_missing_file_says_what_the_submission_holds(made, tmp_path):
    shutil.copy(made[1] / SOFTMAX, tmp_path / "softmax (1).py")       # a browser's second copy
    report = graded(made, tmp_path)["softmax_backward"].report
    assert report == f"{SOFTMAX}: missing from the submission, which holds softmax (1).py"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert graded(made, empty)["softmax_backward"].report.endswith(", which holds no .py file")


def test_a_file_that_is_not_utf8_is_said_so_not_a_syntax_error(made, tmp_path):
    text = (made[1] / SOFTMAX).read_text(encoding="utf-8")
    (tmp_path / "softmax.py").write_text(text, encoding="utf-16")     # Windows' "Unicode"
    outcome = graded(made, tmp_path)["softmax_backward"]
    assert outcome.report == (f"{SOFTMAX}: the submission's {tmp_path / 'softmax.py'}: byte 0 "
                              f"(0xff) is not valid UTF-8; wanted a UTF-8 text file (convert it, "
                              f"e.g. with iconv)")
    assert not outcome.edited and outcome.score == 0


def _zip_of(path, text: bytes, method=None, flags=0):
    """A zip of one softmax.py, its central directory's method and flag bits then set by hand
    (zipfile writes neither encrypted nor Deflate64 members): what a student's zip tool made."""
    import struct
    import zipfile
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(SOFTMAX, text)
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")                  # the central directory's entry
    flag, old = struct.unpack_from("<HH", data, at + 8)
    struct.pack_into("<HH", data, at + 8, flag | flags, old if method is None else method)
    path.write_bytes(bytes(data))
    return path


def test_a_zip_that_cannot_be_unpacked_is_one_line_naming_its_file(made, tmp_path, capsys):
    """A zip with a password (7-Zip's AES is one), one compressed by Deflate64, or one damaged
    ended in zipfile's traceback (RuntimeError, NotImplementedError, BadZipFile) and no
    results.json."""
    from minitf import cli
    body = (made[1] / SOFTMAX).read_bytes()
    damaged = tmp_path / "damaged.zip"
    _zip_of(damaged, body)
    damaged.write_bytes(damaged.read_bytes().replace(b"def softmax", b"def softmaX", 1))
    for zip_, why in ((_zip_of(tmp_path / "password.zip", body, flags=0x1),
                       "it is encrypted (the zip was made with a password)"),
                      (_zip_of(tmp_path / "aes.zip", body, method=99, flags=0x1),   # 7-Zip's AES
                       "it is encrypted (the zip was made with a password)"),
                      (_zip_of(tmp_path / "deflate64.zip", body, method=9),         # Windows'
                       "it is compressed by method 9, which Python's zipfile cannot read "
                       "(Deflate64 is 9, PPMd 98): zip it again with the usual Deflate"),
                      (damaged, f"the zip is damaged (Bad CRC-32 for file '{SOFTMAX}')")):
        assert cli.main(["homework", "grade", str(made[0]), "--submission", str(zip_)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"minitf homework grade: --submission {zip_}: its {SOFTMAX} cannot be unpacked: "
            f"{why}; wanted the folder of a student's files, or a .zip of them")
