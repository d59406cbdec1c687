"""The checks of this folder can fail: on a copy of chapter 1's page with one fault planted for each
check, every check reports its fault. (A check that cannot fail would pass a broken book.)"""
import shutil

import pytest

from book_pages import CHECKS, BookPage, book_html, visit
from test_book_in_browser import browser  # noqa: F401 (the session's Chromium)
from test_built_html import bad_repository_links, broken_links, figures_without_alt

HTML = book_html()
pytestmark = pytest.mark.skipif(HTML is None, reason="set BOOK_HTML to a built book (make browser)")
CHAPTER = "chapters/01_attention_cues"

IN_HEAD = """<style>html[data-theme=dark] body { background: #fff !important; }
@font-face { font-family: "Missing Font"; src: url(../_static/missing-font.woff2); }</style>"""
IN_MAIN = r"""<p>Raw TeX that MyST did not parse: $x^2$ (MathJax leaves single dollars alone).</p>
<p style="font-family: 'Missing Font'">A paragraph in a font that is not there.</p>
<img alt="a remote picture" src="https://example.org/pixel.png">
<img alt="a missing figure" src="../_images/no-such-figure.png">
<img alt="../_images/nameless.png" src="../_static/images/logo_colab.png">
<a href="#no-such-section">a link to nowhere</a>
<div class="cell docutils container"><div class="cell_output docutils container">
<div class="output traceback highlight-ipythontb notranslate"><pre>Traceback (most recent call last)
ValueError: planted</pre></div></div></div>
<div class="solution admonition" id="planted-solution"><p class="admonition-title">Solution to Exercise 9</p>
<section><p>An answer shown before any click.</p></section></div>
<script>window.noSuchFunction();</script>
"""
FAULTS = {  # what to replace in the page: the widget shows frame 0 whatever the controls say
    "cap.textContent=d.captions[flat]": "cap.textContent=d.captions[0]",
    "img.src='data:image/png;base64,'+d.images[flat]": "img.src='data:image/png;base64,'+d.images[0]",
    "blob/main/chapters/01_attention_cues.ipynb": "blob/main/chapters/01_renamed.ipynb",
    "</head>": IN_HEAD + "</head>",
}


@pytest.fixture(scope="module")
def mutant(tmp_path_factory):
    book = tmp_path_factory.mktemp("mutant") / "html"
    shutil.copytree(HTML, book)
    page = BookPage(CHAPTER, book / f"{CHAPTER}.html")
    text = page.html.read_text(encoding="utf-8")
    for old, new in FAULTS.items():
        assert old in text, f"the planted fault needs {old!r} in the page"
        text = text.replace(old, new)
    at = text.index("</article>")
    page.html.write_text(text[:at] + IN_MAIN + text[at:], encoding="utf-8")
    return page


def test_every_browser_check_reports_its_planted_fault(browser, mutant, tmp_path):  # noqa: F811
    report = visit(browser, mutant, tmp_path)
    silent = [c for c in CHECKS if c != "screenshot" and not report.failures[c]]
    assert not silent, f"checks that missed their planted fault: {silent}; report: {report.failures}"


def test_every_file_check_reports_its_planted_fault(mutant):
    assert any("nameless" in f or "logo_colab" in f for f in figures_without_alt(mutant))
    broken = " ".join(broken_links(mutant, mutant.html.parents[1]))
    assert "no-such-section" in broken and "no-such-figure.png" in broken
    assert any("01_renamed.ipynb" in b for b in bad_repository_links(mutant))
