"""A path that starts with a '~' no shell expanded ('~/runs' in quotes, from a notebook or from
Python) made a folder called ~ in the working directory, whose obvious clean-up, rm -rf ~, is
of the home folder: refused at the flag, or where the function takes the path. A flag of a
symbolic link to nothing is refused too."""
import os

import pytest

from minitf import checkpoint, cli, data
from minitf.models import DecoderLM
from minitf.validate import check_path
from test_bad_input import raises

HOME = os.path.expanduser("~")


@pytest.mark.parametrize("argv, flag", [
    (["train", "--fast", "--steps", "1", "--out", "~/probe"], "--out"),
    (["generate", "--checkpoint", "~/probe"], "--checkpoint"),
    (["train", "--fast", "--steps", "1", "--text", "~/corpus.txt"], "--text"),
    (["homework", "grade", "~/hw1"], "DIR"),
])
def test_a_flag_of_a_path_with_a_literal_home_is_refused_and_nothing_made(argv, flag, tmp_path,
                                                                            monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:          # argparse's own exit
        cli.main(argv)
    assert exit_.value.code == 2
    path = argv[argv.index(flag) + 1] if flag.startswith("--") else argv[-1]
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        f"minitf {argv[0]}{' grade' if argv[0] == 'homework' else ''}: argument {flag}: got "
        f"{path!r}: it starts with a literal '~' that nothing expanded to a home folder; wanted "
        f"the path itself, e.g. {HOME}{path[1:]} (or {os.path.realpath(tmp_path)}/{path} for a "
        f"folder called ~ here)")         # the way to a ~ folder the old bug made: it is taken
    assert list(tmp_path.iterdir()) == []


def test_a_function_given_a_literal_home_says_so_and_makes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = DecoderLM(5, d_model=8, n_heads=2, n_layers=1, max_len=4)
    for call, where, name in [
            (lambda: checkpoint.save("~/run", model), "checkpoint.save", "directory"),
            (lambda: data.CharTokenizer.fit("ab").save("~/tok.json"), "CharTokenizer.save",
             "path")]:
        path = "~/run" if where == "checkpoint.save" else "~/tok.json"
        with raises(ValueError, f"{where}: {name} {path!r} starts with a literal '~' that nothing "
                                f"expanded to a home folder; wanted the path itself, e.g. "
                                f"{HOME}{path[1:]}"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_a_tilde_that_names_no_home_is_a_name_like_another():
    """'~draft' is no user's home (os.path.expanduser leaves it): a folder may be called so."""
    for path in ("~no-such-user-of-minitf/run", "drafts/~/run", "a~b"):
        check_path(path, "path", "here")


@pytest.mark.parametrize("argv", [
    ["train", "--fast", "--steps", "1", "--out", "link"],
    ["exercise", "start", "relu_backward", "--dir", "link"],
    ["train", "--fast", "--steps", "1", "--text", "link"]])
def test_a_flag_of_a_symbolic_link_to_nothing_is_refused(argv, tmp_path, monkeypatch, capsys):
    """--out of a dangling link said "cannot write there (File exists)", and named no link."""
    monkeypatch.chdir(tmp_path)
    os.symlink("nowhere/x", "link")
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert ": got 'link': a symbolic link to 'nowhere/x', which does not exist; wanted the link's "\
        "target made first, or another path" in capsys.readouterr().err.splitlines()[-1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_a_symbolic_link_to_nothing_on_the_way_is_refused_too(tmp_path, monkeypatch, capsys):
    """--out link/ and --out link/run got past a check of the last name alone."""
    monkeypatch.chdir(tmp_path)
    os.symlink("nowhere/x", "link")
    for out, where in (("link/", ""), ("link/run", "'link' in it is ")):
        with pytest.raises(SystemExit):
            cli.main(["train", "--fast", "--steps", "1", "--out", out])
        assert f"got {out!r}: {where}a symbolic link to 'nowhere/x', which does not exist" in \
            capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_a_text_passed_where_its_path_belongs_is_said_to_be_one(tmp_path, capsys):
    """read_text(open(f).read()) was the system's 'File name too long', the whole text in it."""
    from minitf import viz
    text = "the quick brown fox\n" * 200
    said = ("path is 4,000 characters on 201 lines, 'the quick brown fox\\n'…, too long for a "
            "file's name (the text itself?); wanted the path of a file")
    for where, call in [("read_text", lambda: data.read_text(text)),
                        ("CharTokenizer.load", lambda: data.CharTokenizer.load(text)),
                        ("plot_history", lambda: viz.plot_history({"loss": [2.0, 1.0]}, text))]:
        with raises(ValueError, f"{where}: {said}"):
            call()
    with pytest.raises(SystemExit):
        cli.main(["train", "--fast", "--text", "x" * 300])
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "minitf train: argument --text: got a path that is 300 characters, 'xxxxxxxxxxxxxxxxxxxx'…,"
        " too long for a file's name")
    (tmp_path / "t.txt").write_text(text)
    assert data.read_text(tmp_path / "t.txt") == text         # its path: read, as ever
