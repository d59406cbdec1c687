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
