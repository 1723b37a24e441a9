"""The course site, checked in a real browser: Debian's Chromium, driven by playwright, reading the
built site from a server on 127.0.0.1 and refusing every request that would leave it.

Build the site first (the README's site command). Without a build, or without playwright or
Chromium, these tests skip; with MINITF_SITE_REQUIRED=1 (CI) they fail instead.

Every lesson is checked from the build's own run of it: sphinx-gallery's JUnit report (did it pass,
how long it took) and the folder each lesson saved its figures into, so no lesson runs twice.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import threading
import xml.etree.ElementTree as ET
from collections import deque
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest

from minitf import course

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("MINITF_SITE_BUILD", ROOT / "docs" / "_build"))
HTML = BUILD / "html"
JUNIT = BUILD / "sphinx-gallery-junit.xml"
FIGURES = ROOT / "docs" / "lessons" / "_figures"   # where each lesson saved its PNGs
ARTIFACTS = Path(os.environ.get("MINITF_SITE_ARTIFACTS", BUILD / "screenshots"))
CHROMIUM = os.environ.get("MINITF_CHROMIUM", "/usr/bin/chromium")
REQUIRED = os.environ.get("MINITF_SITE_REQUIRED") == "1"
LESSON_FILES = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py"))
SCREENSHOT_LESSON = "04_masks"

# The public API the reference page must list: every name each module exports.
API_MODULES = ("minitf.functional", "minitf.nn", "minitf.models", "minitf.exercises",
               "minitf.homework", "minitf.data", "minitf.pretrained")


def _unavailable(reason: str):
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        _unavailable(f"no built site in {HTML}: build it with the README's site command")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Browser:
    """One Chromium page; records every failed response, page error, console error and every
    request that tried to leave 127.0.0.1 (each one refused)."""

    def __init__(self, context, base: str):
        self.base = base
        self.page = context.new_page()
        self.problems: list[str] = []
        self.blocked: list[str] = []
        self.page.on("response", lambda r: r.status >= 400
                     and self.problems.append(f"{r.status} {r.url}"))
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("console", lambda m: m.type == "error"
                     and self.problems.append(f"console error: {m.text}"))
        context.route("**/*", self._route)

    def _route(self, route):
        host = urlsplit(route.request.url).hostname
        if host == "127.0.0.1":
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort()

    def visit(self, path: str):
        self.problems.clear()
        response = self.page.goto(urljoin(self.base, path), wait_until="load")
        assert response is not None and response.status == 200, f"{path}: {response and response.status}"
        self.page.evaluate(_LOAD_ALL_IMAGES)
        return self.page


# Lazy images load only when scrolled to: make every image eager and wait until each has
# loaded or failed.
_LOAD_ALL_IMAGES = """() => Promise.all([...document.images].map(img => {
    img.loading = 'eager';
    if (img.complete) return null;
    return new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); });
}))"""


@pytest.fixture(scope="module")
def browser(server):
    sync_api = pytest.importorskip("playwright.sync_api") if not REQUIRED else \
        __import__("playwright.sync_api", fromlist=["sync_playwright"])
    if not Path(CHROMIUM).exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox"])
        context = chromium.new_context(viewport={"width": 1400, "height": 1000})
        yield Browser(context, server)
        context.close()
        chromium.close()


def _junit_cases() -> dict[str, ET.Element]:
    if not JUNIT.exists():
        _unavailable(f"no JUnit report of the lessons' run at {JUNIT}")
    root = ET.parse(JUNIT).getroot()
    return {Path(case.get("file") or case.get("name")).stem: case for case in root.iter("testcase")}


def _code_cells(path: Path) -> int:
    """Code cells of a percent-format script: the `# %%` lines that do not start a prose cell."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines()
               if re.match(r"# %%(?!.*\[markdown\])", line))


def test_every_lesson_ran_once_in_the_build_and_passed():
    cases = _junit_cases()     # lessons the build ran (an incremental build skips unchanged ones)
    assert set(cases) <= {p.stem for p in LESSON_FILES}
    for stem, case in cases.items():
        failure = case.find("failure")
        failure = failure if failure is not None else case.find("error")
        assert failure is None, f"{stem} raised in the build:\n{failure.get('message')}"
        assert float(case.get("time")) > 0
    catalogued = {lesson.stem: lesson for lesson in course.LESSONS}
    for stem in (p.stem for p in LESSON_FILES):
        if stem in catalogued:     # a lesson still being written may not be catalogued yet
            saved = sorted(p.stem for p in (FIGURES / stem).glob("*.png"))
            assert saved == sorted(catalogued[stem].figures), f"{stem} saved {saved}"


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_each_lesson_page_shows_its_code_output_and_figures(browser, path):
    page = browser.visit(f"lessons/{path.stem}.html")
    if path.stem == SCREENSHOT_LESSON:
        _screenshot(page, "lesson")
    heading = page.locator("h1").first.inner_text()
    # Sphinx typesets apostrophes as ’ (smart quotes): the words are what must match
    assert heading.rstrip("#¶ \n").replace("’", "'") == course.title(path)
    code_blocks = page.locator("div.highlight-Python").count()
    assert code_blocks == _code_cells(path), "one code block per code cell"
    text = page.locator("article").inner_text()
    assert "Traceback" not in text
    assert page.locator(".sphx-glr-timing").count() == 1, "the page says how long the lesson ran"

    saved = sorted(p.stem for p in (FIGURES / path.stem).glob("*.png"))
    assert saved, f"{path.stem} saved no figure in the build"
    for name in saved:
        image = page.locator(f'img[alt="{name}"]')
        assert image.count() == 1, f"{name}.png is not on the page"
        assert image.evaluate("img => img.naturalWidth") > 0, f"{name}.png did not load"
    shown = page.locator("img.sphx-glr-single-img").evaluate_all("imgs => imgs.map(i => i.alt)")
    assert shown == sorted(saved, key=lambda n: (FIGURES / path.stem / f"{n}.png").stat().st_mtime_ns), \
        "figures appear in the order the lesson saved them"

    for suffix in (".py", ".ipynb"):
        link = page.locator(f'a.download[href$="{path.stem}{suffix}"]')
        assert link.count() >= 1, f"no download of the {suffix}"
        response = page.request.get(urljoin(page.url, link.first.get_attribute("href")))
        assert response.status == 200 and len(response.body()) > 1000
    assert browser.problems == []
    assert browser.blocked == []


def test_the_gallery_lists_the_lessons_in_course_order(browser):
    page = browser.visit("lessons/index.html")
    thumbnails = page.locator(".sphx-glr-thumbcontainer a.reference").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    stems = [re.sub(r"\.html$", "", Path(href).name) for href in thumbnails]
    assert stems == [p.stem for p in LESSON_FILES]
    assert page.locator(".sphx-glr-thumbcontainer img").evaluate_all(
        "imgs => imgs.every(i => i.naturalWidth > 0)")
    assert browser.problems == [] and browser.blocked == []


def test_every_internal_link_resolves_and_no_request_leaves(browser):
    """Crawl from the landing page: every page 200, every #fragment present, no error."""
    start = urljoin(browser.base, "index.html")
    queue, seen, fragments, pages, problems = deque([start]), {start}, [], 0, []
    ids: dict[str, set] = {}
    while queue:
        url = queue.popleft()
        page = browser.visit(url)
        pages += 1
        problems += [f"{url}: {p}" for p in browser.problems]
        ids[url] = set(page.evaluate(
            "() => [...document.querySelectorAll('[id], a[name]')].map(e => e.id || e.name)"))
        for href in page.locator("a[href]").evaluate_all("as => as.map(a => a.href)"):
            target, fragment = urldefrag(href)
            if not target.startswith(browser.base):
                continue
            if fragment:
                fragments.append((url, target, fragment))
            if target in seen:
                continue
            seen.add(target)
            if target.endswith(".html") or target.endswith("/"):
                queue.append(target)
            else:
                response = page.request.get(target)
                if response.status != 200:
                    problems.append(f"{url} links to {target}: {response.status}")
    for source, target, fragment in fragments:
        if target in ids and fragment not in ids[target]:
            problems.append(f"{source} links to {target}#{fragment}: no such id")
    assert problems == [], "\n".join(problems)
    assert browser.blocked == [], f"requests that tried to leave 127.0.0.1: {browser.blocked}"
    assert pages >= len(LESSON_FILES) + 5
    print(f"\ncrawled {pages} pages, {len(seen)} links, {len(fragments)} fragments; "
          f"{len(browser.blocked)} requests blocked")


def test_the_landing_page_introduces_minitf(browser):
    page = browser.visit("index.html")
    _screenshot(page, "landing")
    text = page.locator("article").inner_text()
    for words in ("Follow the lessons", "Do the exercises", "Make homework", "pip install"):
        assert words in text
    images = page.locator("article img").evaluate_all("imgs => imgs.map(i => i.naturalWidth)")
    assert images and all(width > 0 for width in images)
    assert browser.problems == [] and browser.blocked == []


def test_the_api_page_lists_the_public_api(browser):
    import importlib

    page = browser.visit("api.html")
    _screenshot(page, "api")
    ids = set(page.evaluate("() => [...document.querySelectorAll('[id]')].map(e => e.id)"))
    listed = [f"{module}.{name}" for module in API_MODULES
              for name in importlib.import_module(module).__all__
              if callable(getattr(importlib.import_module(module), name))]
    assert len(listed) > 50
    assert [name for name in listed if name not in ids] == []
    assert page.locator("text=Used in lessons").count() > 10, "API entries link to their lessons"
    assert browser.problems == [] and browser.blocked == []


def test_the_exercise_page_shows_a_failing_and_a_passing_report(browser):
    page = browser.visit("exercises.html")
    reports = page.locator("div.minitf-report pre").all_inner_texts()
    statuses = [re.search(r"\(exit status (\d+)\)", text).group(1) for text in reports]
    assert "0" in statuses and "1" in statuses
    assert any("FAIL" in text for text in reports)
    assert any("passes every check" in text for text in reports)
    assert browser.problems == [] and browser.blocked == []


def _screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_a_change_to_minitf_wipes_the_executed_lessons(tmp_path, monkeypatch):
    """sphinx-gallery skips a lesson whose file is unchanged; the site's extension wipes every
    executed lesson when minitf's source changed, so no stale page survives (no build needed)."""
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "docs" / "_ext"))
    site = __import__("minitf_site")
    gallery = tmp_path / "lessons"
    monkeypatch.setattr(site, "GALLERY", gallery)
    monkeypatch.setattr(site, "SOURCE_HASH", gallery / ".minitf-source-hash")
    monkeypatch.setattr(site, "GENERATED", tmp_path / "generated")
    page = gallery / "01_lesson.rst"
    gallery.mkdir()
    page.write_text("executed before the hash was recorded")
    site._invalidate_stale_gallery()
    assert not page.exists()
    page.write_text("executed with this minitf")
    site._invalidate_stale_gallery()
    assert page.exists(), "an unchanged minitf keeps the cache"
    monkeypatch.setattr(site, "_source_hash", lambda: "minitf changed")
    site._invalidate_stale_gallery()
    assert not page.exists(), "a changed minitf re-runs every lesson"
    sys.modules.pop("minitf_site", None)
