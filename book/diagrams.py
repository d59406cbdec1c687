"""Architecture diagrams: hand-written SVG files in `book/figures/`, shown in a notebook cell.

The SVG text is the source (kept in the repository, reviewed like code). Each diagram draws
on its own light card, so it reads the same in the book's light and dark modes.
"""
from importlib import resources


def names():
    """The diagrams that exist, e.g. ['multihead_attention', ...]."""
    folder = resources.files("book") / "figures"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".svg"))


def svg_text(name):
    """The SVG source of diagram `name`."""
    if name not in names():
        raise ValueError(f"no diagram {name!r}; choose from {names()}")
    return (resources.files("book") / "figures" / f"{name}.svg").read_text(encoding="utf-8")


def show(name):
    """Display diagram `name` (an IPython SVG object: the last line of a cell shows it)."""
    from IPython.display import SVG

    return SVG(data=svg_text(name))
