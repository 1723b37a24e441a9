"""``minitf train --resume`` from another folder than the run was started in, and a warm-up
that a --decay-steps ends before: each said in the words of the flags that were given."""
from minitf import cli

from test_run_directory import one_line, text, train  # noqa: F401  (text is a fixture)


def test_a_resume_from_another_folder_reads_the_text_the_run_was_trained_on(text, tmp_path,
                                                                              capsys, monkeypatch):
    """A relative --text was saved as given: resumed from another folder, it read a file of that
    name there (one of the same characters trained on without a word), or named a --text no one
    gave."""
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir(), there.mkdir()
    (here / "input.txt").write_text(open(text).read())
    (there / "input.txt").write_text(open(text).read()[::-1])          # the same characters
    monkeypatch.chdir(here)
    assert train("input.txt", "--steps", "10", "--out", str(tmp_path / "run")) == 0
    monkeypatch.chdir(there)
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(tmp_path / "run"), "--steps", "12"]) == 0
    assert f"text: {here / 'input.txt'}, " in capsys.readouterr().out
    (here / "input.txt").rename(here / "moved.txt")
    assert cli.main(["train", "--resume", str(tmp_path / "run"), "--steps", "14"]) == 2
    assert one_line(capsys).endswith(f"--resume {tmp_path / 'run'}: the run was trained on "
                                     f"{here / 'input.txt'}, which is not there now; wanted "
                                     f"--text PATH of that text (its characters are checked)")
    assert cli.main(["train", "--resume", str(tmp_path / "run"), "--steps", "14",
                     "--text", str(here / "moved.txt")]) == 0


def test_a_warmup_that_does_not_fit_is_one_line(text, tmp_path, capsys):
    assert train(text, "--steps", "10", "--decay-steps", "10", "--warmup", "10",
                 "--out", str(tmp_path / "run")) == 2
    assert "--warmup 10: wanted 0 ≤ warmup < --decay-steps 10" in one_line(capsys)
    # refused before the text is read, as the other flags are (a large --text takes a while)
    assert train(str(tmp_path / "no such text.txt"), "--steps", "10", "--decay-steps", "10",
                 "--warmup", "10", "--out", str(tmp_path / "run")) == 2
    assert "--warmup 10: wanted 0 ≤ warmup < --decay-steps 10" in one_line(capsys)
    # one no one gave is said to be --fast's, or the resumed run's (it named a --warmup 5)
    assert cli.main(["train", "--fast", "--decay-steps", "5", "--out", str(tmp_path / "f")]) == 2
    assert one_line(capsys).endswith("--decay-steps 5: --fast warms up for 5 steps; wanted "
                                     "--decay-steps > 5, or a smaller --warmup")
    assert train(text, "--steps", "4", "--warmup", "3", "--out", str(tmp_path / "r")) == 0
    assert cli.main(["train", "--resume", str(tmp_path / "r"), "--steps", "6",
                     "--decay-steps", "2"]) == 2
    assert one_line(capsys).endswith(f"--decay-steps 2: the run in {tmp_path / 'r'} warms up "
                                     f"for 3 steps; wanted --decay-steps > 3, or a smaller --warmup")
