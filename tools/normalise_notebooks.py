"""Write notebooks in the form JupyterLab saves them, so that opening one changes nothing.

    python tools/normalise_notebooks.py                   # every notebook of the course
    python tools/normalise_notebooks.py chapters/01_*.ipynb
    python tools/normalise_notebooks.py --check [paths]   # exit 1 if one is not in that form

What JupyterLab 4.5 does to a notebook, measured by opening each kind (chapter, solution,
learner copy) in it, waiting for the kernel, saving and comparing the bytes
(tests/browser/test_lab_live.py checks it on every run):
* It starts the kernel the notebook names and writes that kernel's spec into
  `metadata.kernelspec` as {display_name, language, name}. With no kernelspec it guesses
  (console: "No exact match found for python3") and the notebook is modified as it opens.
* When the kernel answers, it writes the kernel's `language_info` (codemirror_mode,
  file_extension, mimetype, name, nbconvert_exporter, pygments_lexer, version) into the
  metadata: a shorter `language_info`, like the learner copies' {"name": "python"}, is
  modified as it opens too.
* Saving writes what `nbformat.write` writes: nbformat 4.5, JSON with indent 1 and sorted
  keys, non-ASCII characters as they are, a final newline; cell ids, outputs, the widget
  state and other metadata (jupytext, tags, mystnb) are kept as they were.
So this script sets the kernelspec and the language_info that the course's kernel (ipykernel
in .venv) reports, gives every cell an id, and writes with nbformat. It changes no cell
source except one line: the setup cell's comment, which told learners that `make book` had
installed the course when the README sends them to `make lab` (SETUP_OLD -> SETUP_NEW).
tools/execute.py and tools/make_exercises.py write this form themselves.

The language_info version is the Python that runs the kernel: a learner whose Python differs
from the one that stored the notebook sees it modified (only that line) when it opens.
"""
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SETUP_OLD = "# (Colab already has torch, which is never reinstalled); locally `make book` has done it."
SETUP_NEW = "# (Colab already has torch, which is never reinstalled); locally `make lab` has done it."


def kernelspec():
    """The course kernel as JupyterLab writes it into a notebook it opened with that kernel."""
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    spec = get_kernel_dict()
    return {"display_name": spec["display_name"], "language": spec["language"], "name": KERNEL_NAME}


def language_info():
    """What the course kernel (ipykernel, this Python) answers in its kernel_info reply."""
    from ipykernel.ipkernel import IPythonKernel

    return {key: (dict(value) if isinstance(value, dict) else value)
            for key, value in sorted(IPythonKernel.language_info.items())}


def normalise(nb):
    """Put a notebook (a NotebookNode, nbformat 4) in JupyterLab's saved form; return it."""
    nb.nbformat, nb.nbformat_minor = 4, max(5, nb.get("nbformat_minor", 5))
    nb.metadata["kernelspec"] = kernelspec()
    nb.metadata["language_info"] = language_info()
    taken = {cell.get("id") for cell in nb.cells}
    for index, cell in enumerate(nb.cells):
        if not cell.get("id"):
            new, k = f"cell-{index}", 0
            while new in taken:
                k += 1
                new = f"cell-{index}-{k}"
            cell["id"] = new
            taken.add(new)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if code and SETUP_OLD in code[0].source:
        code[0].source = code[0].source.replace(SETUP_OLD, SETUP_NEW)
    return nb


def text(nb):
    """The bytes JupyterLab's save (jupyter_server, nbformat.write) gives for `nb`."""
    out = nbformat.writes(nb)
    return out if out.endswith("\n") else out + "\n"


def course_notebooks():
    return sorted([*ROOT.glob("chapters/*.ipynb"), *ROOT.glob("exercises/*.ipynb"),
                   *ROOT.glob("exercises/solutions/*.ipynb")])


def main(argv):
    check = "--check" in argv
    paths = [Path(a) for a in argv if a != "--check"] or course_notebooks()
    stale = []
    for path in paths:
        before = path.read_text(encoding="utf-8")
        after = text(normalise(nbformat.reads(before, as_version=4)))
        if after == before:
            continue
        if check:
            stale.append(str(path))
        else:
            path.write_text(after, encoding="utf-8")
            print(f"normalised {path}")
    if stale:
        sys.exit("not in JupyterLab's saved form (run `python tools/normalise_notebooks.py`): "
                 + ", ".join(stale))


if __name__ == "__main__":
    main(sys.argv[1:])
