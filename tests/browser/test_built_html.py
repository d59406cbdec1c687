"""The built book, read as files (no browser): a clean build that needs nothing from the network.

Per page of _toc.yml: every figure has alt text or a caption, every internal link and local asset
resolves (fragments included), every link into the course's repository names a file that exists.
For the whole book: no page or style sheet loads anything from another host, MathJax is there.
Run after the book build with BOOK_HTML set (make browser, tests/browser/check_book.sh).
"""
import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from book_pages import ROOT, book_html, book_pages, config, plant_faults

sys.path.insert(0, str(ROOT / "_ext"))
from offline_assets import BUNDLE, REMOTE_IN_HTML  # noqa: E402

HTML = book_html()
pytestmark = pytest.mark.skipif(HTML is None, reason="set BOOK_HTML to a built book (make browser)")
PAGES = [p for p in book_pages(HTML) if p.html.exists()] if HTML else []
ids = [p.file for p in PAGES]

IMG = re.compile(r"<img\b[^>]*>", re.S)
FIGURE = re.compile(r"<figure\b.*?</figure>", re.S)
ATTR = re.compile(r"""\s([\w-]+)=(?:"([^"]*)"|'([^']*)')""")
PICTURE = re.compile(r"(?:^|/)_images/|\.(?:png|jpe?g|gif|svg|webp)$", re.I)


def attrs(tag):
    return {m[1]: m[2] if m[2] is not None else m[3] for m in ATTR.finditer(tag)}


def main(text):
    start, end = text.find("<main"), text.rfind("</main>")
    return text[start:end] if start >= 0 < end else text


def figure_cells(page):
    """image file name -> 'code cell N (first line)' for a notebook page, to say where to fix."""
    where = {}
    if not page.notebook:
        return where
    cells = [c for c in json.loads((ROOT / f"{page.file}.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    for n, cell in enumerate(cells, 1):
        first = "".join(cell["source"]).strip().splitlines()[:1]
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                name = hashlib.sha256(base64.b64decode("".join(png))).hexdigest() + ".png"
                where[name] = f"code cell {n} ({first[0][:60] if first else ''})"
    return where


def figures_without_alt(page):
    """Images in the page's main part with neither alt text (not just a file name) nor a caption."""
    text = main(page.html.read_text(encoding="utf-8"))
    bad = []
    for figure in FIGURE.findall(text):
        caption = re.search(r"<figcaption\b.*?</figcaption>", figure, re.S)
        if not (caption and re.sub(r"<[^>]+>|\s", "", caption[0])):
            bad += [attrs(t).get("src", "?") for t in IMG.findall(figure)]
    for tag in IMG.findall(FIGURE.sub("", text)):
        a = attrs(tag)
        alt, src = (a.get("alt") or "").strip(), a.get("src", "")
        if not alt or alt == src or PICTURE.search(alt):
            bad.append(src)
    where = figure_cells(page)
    return [where.get(Path(src).name, src[:100]) for src in bad]


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_every_figure_has_alt_text_or_a_caption(page):
    bad = figures_without_alt(page)
    assert not bad, (
        f"{page.file}: figures without alt text or caption: {bad}. Give each figure cell the metadata "
        '{"mystnb": {"image": {"alt": "what the figure shows"}}} (or a caption: '
        '{"mystnb": {"figure": {"caption": "..."}}}); book.widgets.interact takes alt="...".')


LINK = re.compile(r"""<(a|link|script|img|source)\b[^>]*?\s(href|src)=["']([^"']+)["']""", re.S)


def ids_of(path, cache={}):
    if path not in cache:
        cache[path] = {unquote(m) for m in re.findall(r"""\sid=["']([^"']+)["']""", path.read_text(encoding="utf-8"))}
    return cache[path]


def broken_links(page, html_dir):
    """Local links and assets of a page that lead to no file, or to no such id in the file."""
    text = re.sub(r"<pre\b.*?</pre>", "", page.html.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for tag, attr, url in LINK.findall(text):
        parts = urlsplit(url)
        if parts.scheme or url.startswith("//"):
            continue  # external: see the repository links below and the offline checks
        target = page.html if not parts.path else (page.html.parent / unquote(parts.path)).resolve()
        if target.is_dir():
            target = target / "index.html"
        if not target.exists() or html_dir.resolve() not in target.parents:
            broken.append(f"<{tag} {attr}={url}>: no file {target}")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in ids_of(target):
            broken.append(f"<{tag} {attr}={url}>: no id {parts.fragment!r} in {target.name}")
    return broken


def bad_repository_links(page):
    """Colab and GitHub links into this course's repository that name no existing file."""
    repo = config()["repository"]
    branch_expected = repo.get("branch", "main")
    owner_name = repo["url"].removeprefix("https://github.com/").strip("/")
    pattern = re.compile(r"https://(?:colab\.research\.google\.com/github|github\.com)/"
                         + re.escape(owner_name) + r"/(?:blob|tree)/([^/\"'#?]+)/([^\"'#?<\s]+)")
    bad = []
    for branch, path in sorted(set(pattern.findall(page.html.read_text(encoding="utf-8")))):
        if branch != branch_expected:
            bad.append(f"{path} on branch {branch!r}, not {branch_expected!r}")
        elif not (ROOT / repo.get("path_to_book", "") / unquote(path)).exists():
            bad.append(f"{path}: no such file in the repository")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_internal_links_and_assets_resolve(page):
    broken = broken_links(page, HTML)
    assert not broken, f"{page.file}:\n  " + "\n  ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_links_into_the_repository_name_files_that_exist(page):
    """Say a chapter's link to its learner copy in Colab: the file must exist, on the configured branch."""
    bad = bad_repository_links(page)
    assert not bad, f"{page.file}: {bad}"


def test_no_page_or_style_sheet_loads_from_another_host():
    files = sorted(HTML.rglob("*.html")) + sorted((HTML / "_static").rglob("*.css"))
    remote = []
    for path in files:
        text = re.sub(r"<pre\b.*?</pre>", "", path.read_text(encoding="utf-8", errors="replace"), flags=re.S)
        remote += [f"{path.relative_to(HTML)}: {text[m.start():m.start() + 120]}" for m in REMOTE_IN_HTML.finditer(text)]
    assert len(files) > 5 and not remote, remote


def test_the_book_carries_its_own_mathjax_and_fonts():
    mathjax = HTML / "_static" / "mathjax"
    assert (mathjax / BUNDLE).stat().st_size > 500_000
    assert len(list((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff")) ) > 10
    assert (mathjax / "input" / "tex" / "extensions" / "boldsymbol.js").exists()
    assert list((HTML / "_static").rglob("fa-solid-900.woff2")), "the theme's icon font"
    size = subprocess.run(["du", "-sh", str(HTML)], capture_output=True, text=True).stdout.split()[0]
    print(f"\nbuilt book: {size} in {sum(1 for _ in HTML.rglob('*') if _.is_file())} files "
          f"({len(list(HTML.rglob('*.html')))} HTML pages)")


def test_every_file_check_reports_a_planted_fault(tmp_path):
    """The checks above can fail: see book_pages.plant_faults."""
    mutant = plant_faults(HTML, tmp_path / "html")
    assert any("logo_colab" in f for f in figures_without_alt(mutant))
    broken = " ".join(broken_links(mutant, tmp_path / "html"))
    assert "no-such-section" in broken and "no-such-figure.png" in broken
    assert any("01_renamed.ipynb" in b for b in bad_repository_links(mutant))
