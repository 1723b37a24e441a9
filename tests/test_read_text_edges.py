"""read_text's two limits at their edges: 100 characters is enough and 99 is not; two distinct
characters are something to predict and one is not -- named, from Python, by read_text's path."""
import pytest

from minitf import data


def test_a_text_of_exactly_100_characters_is_read_and_99_is_refused(tmp_path):
    """"At least 100": the 100th character is the first one too many to refuse."""
    (tmp_path / "100.txt").write_text("ab" * 50, encoding="utf-8")
    assert data.read_text(tmp_path / "100.txt") == "ab" * 50
    (tmp_path / "99.txt").write_text("ab" * 49 + "a", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        data.read_text(tmp_path / "99.txt")
    assert str(error.value) == (f"read_text: path {tmp_path / '99.txt'}: only 99 characters; "
                                f"wanted at least 100")


def test_two_distinct_characters_are_enough_to_train_on(tmp_path):
    """A text of "0" and "1" alone (a bit stream) has something to predict: it is read, not
    refused as a text of one character."""
    text = "0110" * 30
    (tmp_path / "bits.txt").write_text(text, encoding="utf-8")
    assert data.read_text(tmp_path / "bits.txt") == text


def test_one_distinct_character_is_refused_naming_the_path_and_the_character(tmp_path):
    """From Python the path is read_text's argument; the character is shown as repr, so a file
    of spaces or newlines reads ' ' or '\\n', not an invisible nothing."""
    (tmp_path / "blank.txt").write_text("\n" * 120, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        data.read_text(tmp_path / "blank.txt")
    assert str(error.value) == (f"read_text: path {tmp_path / 'blank.txt'}: one distinct "
                                f"character ('\\n'); wanted at least 2, or there is nothing to "
                                f"predict")
