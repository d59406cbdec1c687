"""Every page of the built book, in headless Chromium, from the file system with no network.

Run by `make browser` (after the book build) or tests/browser/check_book.sh, which set BOOK_HTML.
Per page of _toc.yml (so new chapters are covered as they land): no console error or warning,
no request off the machine and no missing file, math rendered, every image and font loaded,
no error output, every widget answers every control, every solution folded until clicked,
the Colab button opens this page's notebook, dark mode switches; a screenshot of each page
(light, full length) and its top in dark mode go to the screenshots folder.
"""
import json
import re
import time

import pytest

from book_pages import (CHECKS, LOCAL, NOT_LOCAL, book_html, book_pages,
                        plant_faults, prose, screenshots_dir, visit)

HTML = book_html()
pytestmark = pytest.mark.skipif(HTML is None, reason="set BOOK_HTML to a built book (make browser)")
PAGES = book_pages(HTML) if HTML else []


@pytest.fixture(scope="session")
def shots():
    folder = screenshots_dir(HTML)
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots: {folder}")
    return folder


@pytest.fixture(scope="session")
def reports(browser, shots):
    """One visit per page, made the first time a test asks for it."""
    cache = {}

    def report(page):
        if page.file not in cache:
            cache[page.file] = visit(browser, page, shots)
        return cache[page.file]

    yield report
    if cache:  # what was exercised, per page: printed, and kept beside the screenshots
        total = sum(r.facts.get("seconds", 0) for r in cache.values())
        summary = {r.page.file: {"facts": r.facts, "failures": {k: v for k, v in r.failures.items() if v}}
                   for r in cache.values()}
        (shots / "report.json").write_text(json.dumps(summary, indent=1))
        print(f"\n{len(cache)} pages visited in {total:.0f} s (details: {shots / 'report.json'})")
        for r in cache.values():
            print(f"  {r.page.file}: " + ", ".join(f"{k}={v}" for k, v in r.facts.items()
                                                   if k not in ("screenshot", "launch")))


def test_the_book_was_built():
    assert (HTML / "index.html").exists(), f"no built book at {HTML}: run the book build first"
    missing = [p.file for p in PAGES if not p.html.exists()]
    assert not missing, f"pages in _toc.yml that were not built: {missing}"


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("page", PAGES, ids=[p.file for p in PAGES])
def test_page(page, check, reports):
    failures = reports(page).failures[check]
    assert not failures, f"{page.file}: {check}:\n  " + "\n  ".join(failures)


def test_chapter_one_exercises_what_the_checks_claim(reports):
    """The checks above must have had something to check: chapter 1 has math, figures, a widget
    with three controls, and its solutions page folded solutions and a Colab button."""
    chapter = reports(next(p for p in PAGES if p.file == "chapters/01_attention_cues"))
    assert chapter.facts["math"] > 5 and chapter.facts["images"] >= 3
    assert chapter.facts["widgets"] >= 1 and chapter.facts["controls"] >= 3
    assert chapter.facts["frames_seen"] >= 6
    assert chapter.facts["launch"].endswith("/chapters/01_attention_cues.ipynb")
    solutions = reports(next(p for p in PAGES if p.file == "exercises/solutions/01_attention_cues"))
    assert solutions.facts["solutions"] >= 3


def test_every_check_reports_a_planted_fault(browser, tmp_path):
    """The checks can fail: on a copy of chapter 1's page with one fault planted for each check
    (book_pages.FAULTS, IN_HEAD, IN_MAIN), every check reports its fault."""
    report = visit(browser, plant_faults(HTML, tmp_path / "html"), tmp_path)
    silent = [c for c in CHECKS if c != "screenshot" and not report.failures[c]]
    assert not silent, f"checks that missed their planted fault: {silent}; report: {report.failures}"


def test_index_opens_the_book(browser):
    """_build/html/index.html, what the README tells readers to open, leads to the first page."""
    context = browser.new_context()
    remote = []
    context.route(NOT_LOCAL, lambda route: (remote.append(route.request.url), route.abort()))
    page = context.new_page()
    page.goto((HTML / "index.html").as_uri())
    page.wait_for_url(re.compile(r".*/intro\.html$"), timeout=10_000)
    page.wait_for_load_state("load")
    assert page.locator("main h1").count() >= 1 and not remote
    context.close()


def search(browser, words):
    """Type `words` into the book's search box and press Enter, as a reader would; return the
    result pages (toc file names) and the console errors seen on the way."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    problems = []
    context.route(NOT_LOCAL, lambda route: (problems.append(f"request {route.request.url}"), route.abort()))
    page = context.new_page()
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text[:200]}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}") if LOCAL.match(r.url) else None)
    page.goto((HTML / "intro.html").as_uri())
    page.locator(".search-button__button").filter(visible=True).first.click()
    box = page.locator("input[name='q']").filter(visible=True).first
    box.fill(words)
    box.press("Enter")
    page.wait_for_url(re.compile(r".*/search\.html\?q=.*"))
    page.wait_for_function("() => /Search finished|did not match/.test("
                           "(document.querySelector('#search-results') || {}).textContent || '')")
    hrefs = page.locator("#search-results ul.search li a").evaluate_all("as => as.map(a => a.href)")
    context.close()
    found = {h.split("#")[0].split("?")[0].removeprefix(HTML.as_uri() + "/").removesuffix(".html") for h in hrefs}
    return found, problems


def pages_saying(phrase):
    pattern = re.compile(r"\b" + r"\s+".join(map(re.escape, phrase.split())) + r"\b", re.I)
    return {p.file for p in PAGES if p.html.exists() and pattern.search(prose(p.html))}


def test_search_finds_softmax(browser):
    started = time.time()
    found, problems = search(browser, "softmax")
    assert not problems, problems
    assert "chapters/01_attention_cues" in found, f"search for softmax found {sorted(found)}"
    assert pages_saying("softmax") <= found, (
        f"pages whose text says softmax but search misses: {sorted(pages_saying('softmax') - found)}")
    print(f"\nsearch: {len(found)} pages for 'softmax' in {time.time() - started:.1f} s")


def test_search_finds_positional_encoding(browser):
    """Conditional: asserted once a page of the toc says "positional encoding" (chapter 6)."""
    expected = pages_saying("positional encoding")
    if not expected:
        pytest.skip("no page of the toc says 'positional encoding' yet (chapter 6 adds it)")
    found, problems = search(browser, "positional encoding")
    assert not problems, problems
    assert expected <= found, f"search misses {sorted(expected - found)} (found {sorted(found)})"
