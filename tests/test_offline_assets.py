"""The book's Sphinx extension _ext/offline_assets.py: what it drops, adds and refuses (no build needed)."""
import sys
from types import SimpleNamespace

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "_ext"))
import offline_assets  # noqa: E402


@pytest.mark.parametrize("text", [
    '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>',
    '<script defer="defer" src="//unpkg.com/thebe@0.8.2/lib/index.js"></script>',
    '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato" />',
    '<link rel="preload" as="script" href="https://example.org/a.js" />',
    '<img alt="logo" src="https://example.org/logo.png">',
    '@import url("https://fonts.googleapis.com/css2?family=Noto+Sans+SC");',
    "src: url(https://example.org/font.woff2) format('woff2');",
])
def test_remote_assets_are_found(text):
    assert offline_assets.REMOTE_IN_HTML.search(text)


@pytest.mark.parametrize("text", [
    '<a href="https://colab.research.google.com/github/o/r/blob/main/x.ipynb">Colab</a>',
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"></svg>',
    '<img alt="a figure" src="../_images/abc.png" />',
    '<script src="../_static/mathjax/tex-chtml.js"></script>',
    "background: url(data:image/svg+xml;base64,AAAA)",
    '<link rel="canonical" href="https://example.org/page.html" />',
])
def test_local_assets_and_plain_links_pass(text):
    assert not offline_assets.REMOTE_IN_HTML.search(text)


def js(filename, **attributes):
    return SimpleNamespace(filename=filename, attributes=attributes)


def fake_app(thebe=False, ipywidgets_js=None):
    added = []
    config = SimpleNamespace(html_theme_options={"launch_buttons": {"thebe": thebe}}, thebe_config={},
                             nb_ipywidgets_js=ipywidgets_js or {})
    builder = SimpleNamespace(add_js_file=lambda name, **kw: added.append(js(name, **kw)))
    return SimpleNamespace(config=config, builder=builder), added


PAGE_SCRIPTS = [js("documentation_options.js"), js(None, body='const THEBE_JS_URL = "https://unpkg.com/x"'),
                js("sphinx-thebe.js", **{"async": "async"}),
                js(None, type="application/vnd.jupyter.widget-state+json", body="{}"), js("togglebutton.js")]


def test_unused_thebe_scripts_and_widget_state_are_dropped():
    app, _ = fake_app()
    context = {"script_files": list(PAGE_SCRIPTS)}
    offline_assets.adjust_page_scripts(app, "chapters/x", "page.html", context, None)
    assert [s.filename for s in context["script_files"]] == ["documentation_options.js", "togglebutton.js"]


def test_thebe_and_widget_state_stay_when_used():
    app, _ = fake_app(thebe=True, ipywidgets_js={"https://cdn/require.js": {}})
    context = {"script_files": list(PAGE_SCRIPTS)}
    offline_assets.adjust_page_scripts(app, "chapters/x", "page.html", context, None)
    assert len(context["script_files"]) == len(PAGE_SCRIPTS)


def test_search_page_lists_results_without_summaries_from_the_file_system():
    app, added = fake_app()
    offline_assets.adjust_page_scripts(app, "search", "search.html", {"script_files": []}, None)
    assert len(added) == 1 and 'location.protocol === "file:"' in added[0].attributes["body"]
    offline_assets.adjust_page_scripts(app, "intro", "page.html", {"script_files": []}, None)
    assert len(added) == 1


def test_mathjax_and_what_it_loads_on_demand_are_installed():
    root = offline_assets.mathjax_source()
    assert (root / offline_assets.BUNDLE).exists()
    assert (root / "input" / "tex" / "extensions" / "boldsymbol.js").exists()
