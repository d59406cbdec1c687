"""Every notebook is stored as JupyterLab saves it, so opening one in JupyterLab changes nothing;
learner copies carry no MyST role that JupyterLab cannot render.

The form (tools/normalise_notebooks.py says how it was measured): the python3 kernelspec, the
kernel's full language_info, nbformat 4.5 with cell ids, nbformat's JSON with a final newline,
and the setup cell's comment pointing learners to `make lab`. tests/browser/test_lab_live.py
opens notebooks in a real JupyterLab and checks that none shows as modified.
"""
import copy
import re
import sys

import nbformat
import pytest

from conftest import CHAPTERS, LEARNER_COPIES, ROOT, SOLUTIONS, rel

sys.path.insert(0, str(ROOT / "tools"))
import make_exercises  # noqa: E402
import normalise_notebooks  # noqa: E402

NOTEBOOKS = CHAPTERS + SOLUTIONS + LEARNER_COPIES


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[rel(p) for p in NOTEBOOKS])
def test_notebook_is_in_the_form_jupyterlab_saves(path):
    stored = path.read_text(encoding="utf-8")
    nb = nbformat.reads(stored, as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", (
        f"{rel(path)} names no python3 kernel: JupyterLab guesses one and marks it modified")
    expected = normalise_notebooks.normalise(copy.deepcopy(nb))
    # The Python version is the one that ran the kernel; another Python may run these tests.
    version = nb.metadata.get("language_info", {}).get("version")
    if version:
        expected.metadata.language_info["version"] = version
    assert normalise_notebooks.text(expected) == stored, (
        f"{rel(path)} is not stored as JupyterLab saves it (opening it would modify it): "
        f"run `.venv/bin/python tools/normalise_notebooks.py {rel(path)}`")


@pytest.mark.parametrize("path", LEARNER_COPIES, ids=[rel(p) for p in LEARNER_COPIES])
def test_learner_copies_use_markdown_jupyterlab_renders(path):
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "markdown")
    roles = re.findall(r"\{(?:doc|cite|cite:p|cite:t|ref|numref)\}`[^`]*`", text)
    assert not roles, f"{rel(path)}: MyST roles JupyterLab shows raw or broken: {roles}"
    for target in re.findall(r"\]\((?!https?:|#)([^)\s]+)\)", text):
        assert (path.parent / target).resolve().exists(), f"{rel(path)}: link to a missing file {target}"


def test_doc_roles_become_links_from_the_learner_copy():
    where, source, target = "test", ROOT / "exercises" / "solutions", ROOT / "exercises"
    assert make_exercises.plain_roles("see {doc}`../../chapters/01_attention_cues`.", source, target,
                                      where) == (
        "see [1. Attention cues: queries, keys and values](../chapters/01_attention_cues.ipynb).")
    assert make_exercises.plain_roles("{doc}`the intro </intro>`", source, target, where) == (
        "[the intro](../intro.md)")
    with pytest.raises(ValueError, match=r"names no notebook.*exercises/nowhere\.ipynb"):
        make_exercises.plain_roles("{doc}`../nowhere`", source, target, where)


def test_relative_links_are_rewritten_for_the_learner_copy_folder():
    where, source, target = "test", ROOT / "exercises" / "solutions", ROOT / "exercises"
    text = "[ch 1](../../chapters/01_attention_cues.ipynb#two-kinds) [web](https://x.org/a) [up](#top)"
    assert make_exercises.plain_roles(text, source, target, where) == (
        "[ch 1](../chapters/01_attention_cues.ipynb#two-kinds) [web](https://x.org/a) [up](#top)")
    with pytest.raises(ValueError, match=r"names no file: exercises/nowhere\.ipynb"):
        make_exercises.plain_roles("[x](../nowhere.ipynb)", source, target, where)


def test_cite_roles_become_author_and_year():
    where, folder = "test", ROOT / "exercises"
    assert make_exercises.plain_roles("{cite}`nadaraya1964estimating,watson1964smooth`", folder,
                                      folder, where) == "(Nadaraya, 1964; Watson, 1964)"
    assert make_exercises.plain_roles("{cite:t}`vaswani2017attention`", folder, folder,
                                      where) == "Vaswani et al. (2017)"
    with pytest.raises(ValueError, match="not in references.bib"):
        make_exercises.plain_roles("{cite}`nobody2099`", folder, folder, where)


def test_the_normaliser_changes_nothing_else():
    """Only metadata, missing ids and the setup comment: sources and outputs stay as they were."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(normalise_notebooks.SETUP_OLD + "\nimport sys"),
        nbformat.v4.new_markdown_cell("text")])
    for cell in nb.cells:
        del cell["id"]
    nb.metadata["jupytext"] = {"main_language": "python"}
    out = normalise_notebooks.normalise(nb)
    assert out.cells[0].source == normalise_notebooks.SETUP_NEW + "\nimport sys"
    assert out.cells[1].source == "text" and [c.id for c in out.cells] == ["cell-0", "cell-1"]
    assert out.metadata.jupytext == {"main_language": "python"}
    assert out.metadata.kernelspec["name"] == "python3" and out.nbformat_minor == 5
    assert set(out.metadata.language_info) >= {"codemirror_mode", "file_extension", "mimetype", "name",
                                               "nbconvert_exporter", "pygments_lexer", "version"}
