"""Execute notebooks in place, deterministically, and store their outputs.

    python tools/execute.py chapters/01_attention_cues.ipynb [more.ipynb ...]

Each notebook runs in a fresh kernel from its own folder (as Jupyter, nbval and the book do).
Per-cell timing metadata is not recorded, so re-running an unchanged notebook gives the same file.
It is written in the form JupyterLab saves (tools/normalise_notebooks.py: the python3
kernelspec, the kernel's language_info, cell ids), so that opening it in JupyterLab modifies
nothing.
"""
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalise_notebooks import normalise, text  # noqa: E402


def execute(path, timeout=600):
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            store_widget_state=True, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nb.metadata.pop("papermill", None)
    path.write_text(text(normalise(nb)), encoding="utf-8")
    return seconds


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        print(f"{name}: executed in {execute(name):.1f} s", flush=True)
