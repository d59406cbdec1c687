"""The built book reads with no network: every asset a page loads comes from the book itself.

* MathJax 3 comes from the PyPI package `django-static-mathjax` (in requirements.txt; it installs
  a plain `mathjax/static/mathjax` folder and needs no Django). At build time we copy the bundle
  we use (tex-chtml.js), its fonts, and the parts it loads on demand (TeX packages such as
  `boldsymbol` or `cancel` that it autoloads; the accessibility explorer of its menu, with the
  MathML input and speech rule engine it needs) into
  `_build/html/_static/mathjax/`, and point Sphinx at it. (The explorer's speech rules are JSON
  files that a browser refuses to XHR from `file://` pages: that menu item works once the book
  is served over HTTP, even a local `python -m http.server`; everything else works from files.)
* sphinx-thebe (switched on by Jupyter Book, unused here: the launch buttons name Colab only)
  puts `const THEBE_JS_URL = "https://unpkg.com/..."` into every page twice, which is a
  JavaScript error ("Identifier 'THEBE_JS_URL' has already been declared"), and its loader
  fetches thebe from a CDN when called. Without a thebe launch button we drop both scripts.
* With `nb_ipywidgets_js: {}` nothing reads the ipywidgets state that myst-nb embeds in a page
  (the book shows each widget's static HTML rendering instead), so we drop that dead payload.
* Search works from the file system: Sphinx lists the results from `searchindex.js`, then
  fetch()es each result page for a summary, which a browser refuses for `file://` pages (a console
  error and an uncaught "Failed to fetch" per result). Opened from the file system, the search
  page lists its results without summaries; served over HTTP it shows them as usual.
* Fonts: the theme's icon font (Font Awesome) and MathJax's fonts are files under `_static/`;
  text uses the reader's system fonts (Chinese terms the reader's own CJK font): no web font
  is fetched from anywhere.
* After the build, every page and style sheet is scanned: a script, style sheet, image, font,
  frame or CSS `@import`/`url()` that names another host is a build warning (an error with -W).
"""
import re
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

BUNDLE = "tex-chtml.js"
# What tex-chtml.js loads at run time, relative to the MathJax root (es5/).
MATHJAX_PARTS = ["output/chtml/fonts/woff-v2", "input/tex/extensions", "input/mml.js", "input/mml", "ui",
                 "a11y", "sre"]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SEARCH_FROM_FILES = ('if (window.location.protocol === "file:") '
                     "{ DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false; }  /* _ext/offline_assets.py */")

# Attributes that make the browser fetch something when the page loads or is styled.
REMOTE_IN_HTML = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*?\ssrc=["']?(?:https?:)?//"""
    r"""|<link\b(?=[^>]*\srel=["']?(?:stylesheet|preload|modulepreload|icon|prefetch))"""
    r"""[^>]*\shref=["']?(?:https?:)?//"""
    r"""|@import\s+(?:url\()?["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//""", re.I)


def mathjax_source():
    try:
        import mathjax  # from django-static-mathjax
    except ImportError as error:
        raise RuntimeError("MathJax for the offline book is missing: pip install -r requirements.txt "
                           "(package django-static-mathjax)") from error
    root = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    missing = [p for p in [BUNDLE, *MATHJAX_PARTS] if not (root / p).exists()]
    if missing:
        raise RuntimeError(f"{root} lacks {missing}: reinstall django-static-mathjax")
    return root


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / BUNDLE, target / BUNDLE)
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def thebe_enabled(app):
    launch = (app.config.html_theme_options or {}).get("launch_buttons", {}) or {}
    return bool(launch.get("thebe")) or bool((app.config.thebe_config or {}).get("always_load"))


def adjust_page_scripts(app, pagename, templatename, context, doctree):
    """Per page: leave out the thebe scripts (no thebe button) and the unread widget state;
    on the search page, no result summaries when opened from the file system."""
    if context.get("script_files") is None:
        return
    if pagename == "search":
        app.builder.add_js_file(None, body=SEARCH_FROM_FILES, priority=300)  # after documentation_options.js
    scripts = context["script_files"]
    drop_thebe = hasattr(app.config, "thebe_config") and not thebe_enabled(app)
    drop_state = not app.config.nb_ipywidgets_js

    def unused(js):
        name = str(getattr(js, "filename", "") or "")
        attributes = getattr(js, "attributes", {}) or {}
        if drop_thebe and (name.endswith("sphinx-thebe.js") or "THEBE_JS_URL" in attributes.get("body", "")):
            return True
        return drop_state and attributes.get("type") == WIDGET_STATE

    context["script_files"] = [js for js in scripts if not unused(js)]


def check_no_remote_assets(app, exception):
    """Fail the build (with -W) if a page or style sheet would fetch anything from another host."""
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    files = sorted(outdir.rglob("*.html")) + sorted((outdir / "_static").rglob("*.css"))
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        text = re.sub(r"<pre\b.*?</pre>", "", text, flags=re.S)  # code shown to the reader
        for match in REMOTE_IN_HTML.finditer(text):
            snippet = text[match.start():match.start() + 160].replace("\n", " ")
            logger.warning(f"{path.relative_to(outdir)} loads an asset from another host "
                           f"(the book must work offline): {snippet}", type="offline_assets")


def setup(app):
    mathjax_source()  # fail early, with the fix in the message
    app.config.mathjax_path = f"mathjax/{BUNDLE}"  # relative paths are relative to _static/
    app.connect("html-page-context", adjust_page_scripts, priority=900)  # after myst-nb adds its own
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", check_no_remote_assets, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
