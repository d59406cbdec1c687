"""Rewrite every teaching-copy cell from the `book` package source (keeps outputs).

    python tools/sync_teaching_copies.py [notebook.ipynb ...]   # default: every chapter

A teaching-copy cell contains a line `# Teaching copy of book.module: name1, name2`; everything
after that line is replaced by the named objects' source, as tests/test_notebooks.py expects.
Lines before the marker (imports the copy needs) are kept.
"""
import importlib
import inspect
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^# Teaching copy of (?P<module>[\w.]+): (?P<names>[\w, ]+)$", re.M)


def package_source(module_name, names):
    module = importlib.import_module(module_name)
    return "\n\n".join(inspect.getsource(getattr(module, n.strip())).rstrip() + "\n"
                       for n in names.split(",")).strip("\n")


def sync(path):
    nb = nbformat.read(path, as_version=4)
    changed = 0
    for cell in nb.cells:
        match = MARKER.search(cell.source) if cell.cell_type == "code" else None
        if match:
            new = cell.source[:match.end()] + "\n" + package_source(match["module"], match["names"])
            if new != cell.source:
                cell.source, changed = new, changed + 1
    if changed:
        nbformat.write(nb, path)
    return changed


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    paths = sys.argv[1:] or sorted((ROOT / "chapters").glob("*.ipynb"))
    for p in paths:
        print(f"{p}: {sync(p)} teaching copies updated")
