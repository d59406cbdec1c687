"""book.widgets' static preview in Chromium, with its script and without it.

With the script (the HTML book, Colab's stored outputs): the "Static preview" note is gone and
the controls answer. Without it (JupyterLab shows an untrusted notebook's HTML with its scripts
stripped, before Run All): the note is visible. tests/browser/test_lab_live.py checks the same
in JupyterLab itself. No network: the page is a file.
"""
import pytest

from book import widgets
from book_pages import NOT_LOCAL


def draw(fig, width):
    fig.add_subplot().plot([0, width], [0, 1])
    return f"width={width}"


@pytest.fixture(scope="module")
def page_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("widget") / "widget.html"
    html = widgets.interact(draw, figsize=(2, 2), alt="a line", width=[1, 2, 3]).to_html()
    path.write_text(f"<!doctype html><html><body>{html}</body></html>", encoding="utf-8")
    return path


@pytest.mark.parametrize("script", [True, False], ids=["script runs", "script blocked"])
def test_the_note_shows_exactly_when_the_controls_cannot_work(browser, page_file, script):
    context = browser.new_context(java_script_enabled=script)
    try:
        remote = []
        context.route(NOT_LOCAL, lambda route: (remote.append(route.request.url), route.abort()))
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_file.as_uri())
        note = page.locator(".book-widget-note")
        caption = page.locator(".book-widget-caption")
        if script:
            assert note.count() == 0, "the script must remove the note"
            assert caption.text_content() == "width=2"
            page.locator("input[type=range]").fill("0")
            assert caption.text_content() == "width=1", "the controls answer without a kernel"
        else:
            assert note.is_visible() and "Run this cell" in note.text_content()
        assert not errors and not remote
    finally:
        context.close()
