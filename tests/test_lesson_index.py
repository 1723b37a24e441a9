"""lessons/README.md's links to lessons all lead somewhere, and its topic index ("Where each topic
is taught") names every lesson of the catalogue at least once."""
import re
from pathlib import Path

from minitf import course

LESSONS = Path(__file__).resolve().parent.parent / "lessons"
README = LESSONS / "README.md"
INDEX_HEADING = "## Where each topic is taught"

# A Markdown link whose target is a lesson file: [text](NN_name.py), optionally with ./ or lessons/
LESSON_LINK = re.compile(r"\]\(\s*((?:\./|lessons/)?(\d\d_[^)\s#]*\.py))(?:#[^)\s]*)?\s*\)")
# Anything that looks like a link to a .py file, so a misspelt lesson name cannot slip past
PY_LINK = re.compile(r"\]\(\s*([^)\s]+\.py)(?:#[^)\s]*)?\s*\)")


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _index_section(text: str) -> str:
    start = text.index(INDEX_HEADING)
    end = text.find("\n## ", start + len(INDEX_HEADING))
    return text[start:] if end == -1 else text[start:end]


def _target(link: str) -> Path:
    return (LESSONS / link).resolve() if not link.startswith("lessons/") else \
        (LESSONS.parent / link).resolve()


def test_every_link_to_a_python_file_is_a_lesson_that_exists():
    links = PY_LINK.findall(_readme())
    assert len(links) >= len(course.LESSONS), "the README should link every lesson at least once"
    missing = sorted({link for link in links if not _target(link).is_file()})
    assert not missing, f"lessons/README.md links to lesson files that do not exist: {missing}"
    not_lessons = sorted({link for link in links if not LESSON_LINK.search(f"]({link})")})
    assert not not_lessons, f"links to .py files that are not lessons (NN_name.py): {not_lessons}"


def test_every_lesson_link_names_a_catalogued_lesson():
    stems = {lesson.stem for lesson in course.LESSONS}
    linked = {Path(path).stem for _, path in LESSON_LINK.findall(_readme())}
    unknown = sorted(linked - stems)
    assert not unknown, f"lessons/README.md links to lessons missing from course.LESSONS: {unknown}"


def test_the_index_sits_between_the_table_and_adding_a_lesson():
    text = _readme()
    assert INDEX_HEADING in text, f"lessons/README.md needs a section {INDEX_HEADING!r}"
    table = text.index(course.table(LESSONS))
    index = text.index(INDEX_HEADING)
    adding = text.index("## Adding a lesson")
    assert table < index < adding, "the topic index goes after the lesson table, before 'Adding'"


def test_every_lesson_appears_in_the_topic_index():
    section = _index_section(_readme())
    linked = {Path(path).stem for _, path in LESSON_LINK.findall(section)}
    absent = [lesson.stem for lesson in course.LESSONS if lesson.stem not in linked]
    assert not absent, f"lessons never named in {INDEX_HEADING!r}: {absent}"


def test_the_index_link_text_is_the_lesson_number():
    section = _index_section(_readme())
    for text, target in re.findall(r"\[([^\]]*)\]\(\s*(\d\d_[^)\s]*\.py)\s*\)", section):
        assert text == target[:2], f"[{text}]({target}): the link text should be {target[:2]!r}"
