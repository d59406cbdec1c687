"""Serve MathJax from the built book itself, so pages render their math with no network.

MathJax 3 comes from the PyPI package `django-static-mathjax` (in requirements.txt; it installs a
plain `mathjax/static/mathjax` folder and needs no Django). At build time we copy the one bundle
we use (tex-chtml.js) and its fonts into `_build/html/_static/mathjax/` and point Sphinx at it.
"""
import shutil
from pathlib import Path

BUNDLE = "tex-chtml.js"


def mathjax_source():
    try:
        import mathjax  # from django-static-mathjax
    except ImportError as error:
        raise RuntimeError("MathJax for the offline book is missing: pip install -r requirements.txt "
                           "(package django-static-mathjax)") from error
    root = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (root / BUNDLE).exists():
        raise RuntimeError(f"{root / BUNDLE} not found: reinstall django-static-mathjax")
    return root


def copy_mathjax(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / BUNDLE, target / BUNDLE)
    shutil.copytree(source / "output" / "chtml" / "fonts" / "woff-v2", target / "output" / "chtml" / "fonts" / "woff-v2",
                    dirs_exist_ok=True)


def setup(app):
    mathjax_source()  # fail early, with the fix in the message
    app.config.mathjax_path = f"mathjax/{BUNDLE}"  # relative paths are relative to _static/
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
