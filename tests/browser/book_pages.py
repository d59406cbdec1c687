"""The built book as a reader meets it: its pages (from _toc.yml) and one visit per page in Chromium.

`visit(browser, page, shots)` opens a page from the file system (file://, as a reader opening
`_build/html/index.html` would), watches the console and every request, and runs every check of
the page once; the tests in this folder assert on the report. Nothing may leave the machine:
any request that is not file:, data:, blob: or about: is stopped and recorded as a failure, and
Chromium resolves no host names at all (--host-resolver-rules).
"""
import html.parser
import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# TOOLCHAIN.md's headless flags (Playwright adds --headless), and no DNS for any host.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND"]
LOCAL = re.compile(r"^(?:file|data|blob|about):")
NOT_LOCAL = re.compile(r"^(?!(?:file|data|blob|about):)")
CHECKS = ["console", "requests", "math", "images", "fonts", "error_outputs", "widgets", "solutions",
          "launch", "dark_mode", "screenshot"]


def book_html():
    """The built book to test: $BOOK_HTML (set by `make browser` and tests/browser/check_book.sh)."""
    path = os.environ.get("BOOK_HTML")
    return Path(path).resolve() if path else None


def screenshots_dir(html_dir):
    """Where the screenshots go: $SCREENSHOTS, else `screenshots/` beside the `html/` folder."""
    return Path(os.environ.get("SCREENSHOTS") or html_dir.parent / "screenshots").resolve()


def config():
    return yaml.safe_load((ROOT / "_config.yml").read_text())


def toc_files(toc_path=None):
    """Every page of the toc, in reading order: the root, then each chapter and its sections."""
    toc = yaml.safe_load(Path(toc_path or os.environ.get("BOOK_TOC") or ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return [f.removesuffix(".ipynb").removesuffix(".md") for f in files]


@dataclass
class BookPage:
    file: str  # as in _toc.yml, without suffix
    html: Path

    @property
    def notebook(self):
        return (ROOT / f"{self.file}.ipynb").exists()

    @property
    def url(self):
        return self.html.as_uri()

    @property
    def slug(self):
        return self.file.replace("/", "__")

    def colab_url(self):
        """The Colab URL the launch button must open: this page's .ipynb in the configured repository."""
        repo = config()["repository"]
        owner_name = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+?)(?:\.git)?/?", repo["url"])[1]
        path = "/".join(p for p in [repo.get("path_to_book", "").strip("/"), f"{self.file}.ipynb"] if p)
        return f"https://colab.research.google.com/github/{owner_name}/blob/{repo.get('branch', 'main')}/{path}"


def book_pages(html_dir):
    return [BookPage(f, html_dir / f"{f}.html") for f in toc_files()]


class _Text(html.parser.HTMLParser):
    """The prose of a built page: the article's text without code, scripts or styles."""
    SKIP = {"script", "style", "pre", "code", "nav", "svg"}

    def __init__(self):
        super().__init__()
        self.depth, self.skip, self.parts = 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.depth += 1
        elif tag in self.SKIP:
            self.skip += 1

    def handle_endtag(self, tag):
        if tag == "article":
            self.depth -= 1
        elif tag in self.SKIP:
            self.skip = max(0, self.skip - 1)

    def handle_data(self, data):
        if self.depth and not self.skip:
            self.parts.append(data)


def prose(html_path):
    parser = _Text()
    parser.feed(Path(html_path).read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", " ".join(parser.parts))


# -- one visit ---------------------------------------------------------------------------------
@dataclass
class Report:
    page: BookPage
    failures: dict = field(default_factory=lambda: {c: [] for c in CHECKS})
    facts: dict = field(default_factory=dict)  # what was exercised: counts, for the summary

    def fail(self, check, message):
        self.failures[check].append(message)


WAIT_FOR_MATHJAX = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  return !!(window.MathJax && MathJax.startup);
}"""

MATH = r"""() => {
  const maths = [...document.querySelectorAll('main .math')];
  const unrendered = maths.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80));
  const errors = [...document.querySelectorAll('mjx-merror')].map(e => e.getAttribute('data-mjx-error') || e.textContent);
  const main = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT, {acceptNode(n) {
    const p = n.parentElement;
    return p && p.closest('pre, code, script, style, textarea, mjx-container, .highlight')
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT; }});
  const raw = [];
  const tex = /\\\(|\\\)|\\\[|\\\]|\$\$|\\begin\{|(^|[^\\$])\$[^\s$][^$]{0,80}?[^\s$\\]\$/;
  while (walker.nextNode()) { const t = walker.currentNode.nodeValue; if (tex.test(t)) raw.push(t.trim().slice(0, 120)); }
  return {count: maths.length, rendered: document.querySelectorAll('main mjx-container').length, unrendered, errors, raw};
}"""

ERROR_OUTPUTS = """() => [...document.querySelectorAll('main .cell')]
  .filter(c => !c.classList.contains('tag_raises-exception') &&
               !(c.querySelector('.cell_input') || {textContent: ''}).textContent.includes('NBVAL_RAISES_EXCEPTION'))
  .flatMap(c => [...c.querySelectorAll('.cell_output .output')]
    .filter(o => o.matches('.traceback, .error') || o.textContent.includes('Traceback (most recent call last)'))
    .map(o => o.textContent.trim().split('\\n').slice(-1)[0].slice(0, 160)))"""

IMAGES = """async () => {
  const imgs = [...document.images];
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return imgs.map(i => ({src: (i.getAttribute('src') || '').slice(0, 90), ok: i.complete && i.naturalWidth > 0}));
}"""

FONTS = """async () => { await document.fonts.ready;
  return [...document.fonts].map(f => ({family: f.family, status: f.status})); }"""

WIDGET_STATE = """(root) => ({
  src: (root.querySelector('img') || {}).src || null,
  caption: root.querySelector('.book-widget-caption').textContent,
  values: [...root.querySelectorAll('[data-k]')].sort((a, b) => a.dataset.k - b.dataset.k).map(e => +e.value),
  outputs: [...root.querySelectorAll('[data-k]')].map(e => {
    const o = e.parentNode.querySelector('output'); return o ? [+e.dataset.k, o.textContent] : null; }),
})"""

BACKGROUND = """() => { const c = getComputedStyle(document.body).backgroundColor.match(/[\\d.]+/g).map(Number);
  return {theme: document.documentElement.dataset.theme, mode: document.documentElement.dataset.mode,
          luminance: (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]) / 255}; }"""


def _flat(values, shape):
    flat = 0
    for v, n in zip(values, shape):
        flat = flat * n + v
    return flat


def check_widgets(page, report):
    """Move every control of every static widget through all its values, as a reader would."""
    widgets = page.locator("main .book-widget")
    report.facts["widgets"], report.facts["controls"], report.facts["frames_seen"] = widgets.count(), 0, 0
    for w in range(widgets.count()):
        root = widgets.nth(w)
        root.scroll_into_view_if_needed()
        data = json.loads(root.locator(".book-widget-data").text_content())
        shape, images, captions, labels = data["shape"], data["images"], data["captions"], data["labels"]
        controls = root.locator("[data-k]")

        def state():
            return root.evaluate(WIDGET_STATE)

        def expect_frame(where):
            s = state()
            flat = _flat(s["values"], shape)
            if images[flat] and s["src"] != "data:image/png;base64," + images[flat]:
                report.fail("widgets", f"widget {w + 1}: after {where} the image is not frame {flat}")
            if s["caption"] != captions[flat]:
                report.fail("widgets", f"widget {w + 1}: after {where} the caption is {s['caption']!r}, "
                                       f"expected {captions[flat]!r}")
            for k, text in filter(None, s["outputs"]):
                if text != labels[k][s["values"][k]]:
                    report.fail("widgets", f"widget {w + 1}: after {where} control {k} reads {text!r}")
            return s["src"], s["caption"]

        for c in range(controls.count()):
            control = controls.nth(c)
            k, tag = int(control.get_attribute("data-k")), control.evaluate("e => e.tagName")
            name = control.get_attribute("aria-label") or f"control {k}"
            start, n = int(control.input_value()), shape[k]
            report.facts["controls"] += 1
            seen = {expect_frame("loading")}
            for target in list(range(n)) + [start]:  # every value, then back where it started
                if tag == "SELECT":
                    control.select_option(index=target)
                else:  # a range input: the keyboard, as a reader without a mouse would
                    control.focus()
                    page.keyboard.press("Home")
                    for _ in range(target):
                        page.keyboard.press("ArrowRight")
                seen.add(expect_frame(f"setting {name!r} to value {target}"))
            report.facts["frames_seen"] += len(seen)
            if n > 1 and len(seen) < 2:
                report.fail("widgets", f"widget {w + 1}: moving {name!r} through its {n} values changes "
                                       "neither the figure nor the caption")
        if root.locator("img").count() and not (root.locator("img").get_attribute("alt") or "").strip():
            report.fail("widgets", f"widget {w + 1}: its <img> has no alt text")


def check_solutions(page, report):
    """Every exercise solution is folded until the reader clicks it, and shown after the click."""
    solutions = page.locator("main div.solution")
    report.facts["solutions"] = solutions.count()
    for s in range(solutions.count()):
        sol = solutions.nth(s)
        title = sol.locator(".admonition-title").first.inner_text().strip()[:60]
        body = sol.locator(":scope > :not(.admonition-title)")
        if body.count() == 0:
            report.fail("solutions", f"solution {s + 1} ({title}) is empty")
            continue
        if any(body.nth(i).is_visible() for i in range(body.count())):
            report.fail("solutions", f"solution {s + 1} ({title}) is visible before any click "
                                     "(fold it with `:class: dropdown`)")
            continue
        sol.locator("button.toggle-button").first.click()
        page.wait_for_timeout(150)
        if not all(body.nth(i).is_visible() for i in range(body.count())):
            report.fail("solutions", f"solution {s + 1} ({title}) stays hidden after a click")


def check_launch(page, context, report, launched):
    """The rocket button's Colab entry opens this page's notebook in the configured repository."""
    if not report.page.notebook:
        report.facts["launch"] = "no notebook"
        return
    expected = report.page.colab_url()
    links = page.locator(".dropdown-launch-buttons a[href*='colab.research.google.com']")
    if links.count() != 1:
        report.fail("launch", f"{links.count()} Colab launch links, expected 1")
        return
    if links.first.get_attribute("href") != expected:
        report.fail("launch", f"Colab link is {links.first.get_attribute('href')}, expected {expected}")
    page.locator(".dropdown-launch-buttons button").first.click()
    launched[:] = [None]
    with context.expect_page() as popup:
        links.first.click()
    popup = popup.value
    deadline = time.time() + 10
    while launched[0] is None and time.time() < deadline:
        popup.wait_for_timeout(50)
    popup.close()
    opened = launched.pop()
    if opened != expected:
        report.fail("launch", f"clicking Colab requested {opened}, expected {expected}")
    report.facts["launch"] = expected
    page.keyboard.press("Escape")


def check_dark_mode(page, report, shots):
    before = page.evaluate(BACKGROUND)
    button = page.locator(".theme-switch-button").filter(visible=True).first
    for _ in range(3):
        if page.evaluate(BACKGROUND)["theme"] == "dark":
            break
        button.click()
        page.wait_for_timeout(100)
    after = page.evaluate(BACKGROUND)
    if after["theme"] != "dark" or not after["luminance"] < 0.3 < 0.7 < before["luminance"]:
        report.fail("dark_mode", f"theme switch: before {before}, after clicking {after}")
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(shots / f"{report.page.slug}.dark.png"))


def visit(browser, book_page, shots):
    """Open one page and run every check on it; return the Report."""
    report = Report(book_page)
    started = time.time()
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme="light")
    launched = []  # set to a list by check_launch while it clicks the Colab button

    def stop(route):  # nothing leaves the machine; the Colab click the test makes is noted, then stopped
        url = route.request.url
        if launched and launched[0] is None and url.startswith("https://colab.research.google.com/"):
            launched[0] = url
        else:
            report.fail("requests", f"request to another host: {url[:160]}")
        route.abort()

    context.route(NOT_LOCAL, stop)
    page = context.new_page()
    page.set_default_timeout(60_000)  # a loaded 2-core machine can take 10 s for a long page
    page.on("console", lambda m: report.fail("console", f"{m.type}: {m.text[:300]}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: report.fail("console", f"uncaught: {str(e)[:300]}"))
    page.on("requestfailed", lambda r: report.fail("requests", f"failed: {r.url[:160]} ({r.failure})")
            if LOCAL.match(r.url) else None)
    page.on("websocket", lambda ws: report.fail("requests", f"websocket: {ws.url}"))
    if not book_page.html.exists():
        report.fail("console", f"{book_page.html} was not built")
        context.close()
        return report
    page.goto(book_page.url, wait_until="load")
    has_mathjax = page.evaluate(WAIT_FOR_MATHJAX)

    math = page.evaluate(MATH)
    report.facts["math"] = math["count"]
    if math["count"] and not has_mathjax:
        report.fail("math", f"{math['count']} formulas but MathJax did not load")
    for text in math["unrendered"]:
        report.fail("math", f"formula not rendered: {text}")
    for text in math["errors"]:
        report.fail("math", f"MathJax error: {text}")
    for text in math["raw"]:
        report.fail("math", f"raw TeX left in the text: {text}")

    page.screenshot(path=str(shots / f"{book_page.slug}.png"), full_page=True)
    report.facts["screenshot"] = f"{book_page.slug}.png"
    if (shots / f"{book_page.slug}.png").stat().st_size < 1000:
        report.fail("screenshot", "the screenshot is empty")

    for text in page.evaluate(ERROR_OUTPUTS):
        report.fail("error_outputs", f"error output: {text}")
    check_widgets(page, report)
    check_solutions(page, report)

    images = page.evaluate(IMAGES)
    report.facts["images"] = len(images)
    for img in images:
        if not img["ok"]:
            report.fail("images", f"image did not load: {img['src']}")
    for font in page.evaluate(FONTS):
        if font["status"] == "error":
            report.fail("fonts", f"font {font['family']} failed to load")

    check_launch(page, context, report, launched)
    check_dark_mode(page, report, shots)
    page.wait_for_timeout(100)  # late console messages
    context.close()
    report.facts["seconds"] = round(time.time() - started, 1)
    return report


# -- planted faults: the checks can fail ------------------------------------------------------
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
FAULTS = {  # replacements in the page; the first two make the widget show frame 0 whatever the controls say
    "cap.textContent=d.captions[flat]": "cap.textContent=d.captions[0]",
    "img.src='data:image/png;base64,'+d.images[flat]": "img.src='data:image/png;base64,'+d.images[0]",
    "blob/main/chapters/01_attention_cues.ipynb": "blob/main/chapters/01_renamed.ipynb",
    "</head>": IN_HEAD + "</head>",
}



def plant_faults(html_dir, dest):
    """Copy the built book to `dest` and plant one fault for each check in chapter 1's page."""
    shutil.copytree(html_dir, dest)
    page = BookPage(CHAPTER, Path(dest) / f"{CHAPTER}.html")
    text = page.html.read_text(encoding="utf-8")
    for old, new in FAULTS.items():
        assert old in text, f"the planted fault needs {old!r} in the page"
        text = text.replace(old, new)
    at = text.index("</article>")
    page.html.write_text(text[:at] + IN_MAIN + text[at:], encoding="utf-8")
    return page
