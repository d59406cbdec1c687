"""Shared helpers for the tests: where things are, and how to read notebooks."""
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "exercises" / "solutions").glob("*.ipynb"))
LEARNER_COPIES = sorted((ROOT / "exercises").glob("*.ipynb"))


def read_notebook(path):
    return json.loads(Path(path).read_text())


def source(cell):
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def rel(path):
    return Path(path).relative_to(ROOT).as_posix()


@pytest.fixture(scope="session")
def root():
    return ROOT


def pytest_collection_modifyitems(config, items):
    """`make unit` runs the tests under pytest-xdist (-n auto --dist loadgroup): the tests of
    one file run in one worker, so that a module-scoped fixture (a trained model) is built
    once, while the red-team tables, thousands of independent checks, are spread over all
    workers."""
    for item in items:
        if item.path.name != "test_checks_redteam.py":
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
