"""Every notebook: teaching copies equal the package, stored outputs are clean and in order,
the setup cell is the same everywhere, and the learner copies are fresh."""
import importlib
import inspect
import re
import subprocess
import sys

import pytest
import yaml

from conftest import CHAPTERS, LEARNER_COPIES, ROOT, SOLUTIONS, code_cells, read_notebook, rel, source

EXECUTED = CHAPTERS + SOLUTIONS
MARKER = re.compile(r"^# Teaching copy of (?P<module>[\w.]+): (?P<names>[\w, ]+)$", re.M)
ids = lambda paths: [rel(p) for p in paths]  # noqa: E731


def teaching_copies(nb):
    for cell in code_cells(nb):
        match = MARKER.search(source(cell))
        if match:
            yield source(cell), match


@pytest.mark.parametrize("path", CHAPTERS, ids=ids(CHAPTERS))
def test_teaching_copies_equal_the_package_source(path):
    """A teaching-copy cell shows, after its marker line, exactly the named objects' source."""
    copies = list(teaching_copies(read_notebook(path)))
    for text, match in copies:
        module = importlib.import_module(match["module"])
        names = [n.strip() for n in match["names"].split(",")]
        expected = "\n\n".join(inspect.getsource(getattr(module, n)).rstrip() + "\n" for n in names)
        body = text[match.end():].strip("\n")
        assert body == expected.strip("\n"), (
            f"{rel(path)}: the teaching copy of {match['module']}: {', '.join(names)} differs from the package; "
            "copy the package source into the cell (or change both)")


def test_chapter_one_shows_its_components():
    shown = {n.strip() for text, m in teaching_copies(read_notebook(CHAPTERS[0])) for n in m["names"].split(",")}
    assert {"attention_pool", "dot_score", "show_heatmaps"} <= shown


def outputs(cell):
    return cell.get("outputs", [])


def raises_on_purpose(cell):
    return "raises-exception" in cell.get("metadata", {}).get("tags", []) or "NBVAL_RAISES_EXCEPTION" in source(cell)


@pytest.mark.parametrize("path", EXECUTED, ids=ids(EXECUTED))
def test_stored_outputs_are_clean_and_in_order(path):
    nb = read_notebook(path)
    cells = [c for c in code_cells(nb) if source(c).strip()]
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{rel(path)}: cells were not executed once, top to bottom (execution counts {counts}); "
        f"run `make execute NB={rel(path)}`")
    for i, cell in enumerate(cells):
        for out in outputs(cell):
            if out["output_type"] == "error":
                assert raises_on_purpose(cell), f"{rel(path)}, code cell {i}: stored error {out.get('ename')}"
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            for local in ("/work/", "/root/", "/home/", "/tmp/", "site-packages", "Warning:"):
                assert local not in text, f"{rel(path)}, code cell {i}: output contains {local!r}: {text[:200]}"


@pytest.mark.parametrize("path", CHAPTERS, ids=ids(CHAPTERS))
def test_chapters_have_the_parts_every_chapter_needs(path):
    nb = read_notebook(path)
    text = "\n".join(source(c) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert re.search(r"^## Summary", text, re.M) and re.search(r"^## Exercises", text, re.M)
    assert "$" in text, "the idea in math"
    cells = code_cells(nb)
    assert sum("# NBVAL_CHECK_OUTPUT" in source(c) for c in cells) >= 3, "claims checked by nbval"
    mimes = [m for c in cells for o in outputs(c) for m in o.get("data", {})]
    assert "image/png" in mimes, "at least one figure"
    assert "application/vnd.jupyter.widget-view+json" in mimes and "text/html" in mimes, "at least one widget"
    assert re.search(r"\([\u4e00-\u9fff]+\)", text), "Chinese terms beside key terms"


def repo_url():
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


@pytest.mark.parametrize("path", EXECUTED + LEARNER_COPIES, ids=ids(EXECUTED + LEARNER_COPIES))
def test_first_code_cell_sets_up_colab_and_the_device(path):
    first = source(code_cells(read_notebook(path))[0])
    assert 'if "google.colab" in sys.modules:' in first
    assert f'REPO_URL = "{repo_url()}"' in first, "the Colab install must use _config.yml's repository URL"
    assert '"--no-deps", "d2l==1.0.3"' in first
    assert not re.search(r"pip.*install.*\btorch\b", first), "never reinstall torch in Colab"
    assert "book.set_seed(" in first and "device = book.try_gpu()" in first


@pytest.mark.parametrize("path", EXECUTED + LEARNER_COPIES, ids=ids(EXECUTED + LEARNER_COPIES))
def test_colab_links_point_at_this_repository(path):
    text = "\n".join(source(c) for c in read_notebook(path)["cells"])
    for link in re.findall(r"https://colab\.research\.google\.com/github/[^\s)]+", text):
        assert link.startswith("https://colab.research.google.com/github/" + repo_url().split("github.com/")[1])
        target = link.split("/blob/main/")[1]
        assert (ROOT / target).exists(), f"{rel(path)} links to a notebook that does not exist: {target}"


def test_learner_copies_are_fresh():
    result = subprocess.run([sys.executable, "tools/make_exercises.py", "--check"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


def test_every_solution_has_a_learner_copy_with_checks_expected_to_fail():
    assert [p.name for p in SOLUTIONS] == [p.name for p in LEARNER_COPIES]
    for path in LEARNER_COPIES:
        nb = read_notebook(path)
        checks = [c for c in code_cells(nb) if "checks.check_" in source(c)]
        assert checks and all(raises_on_purpose(c) for c in checks)
        assert not any(outputs(c) for c in code_cells(nb)), "learner copies are stored without outputs"
        assert "### BEGIN SOLUTION" not in "".join(source(c) for c in nb["cells"])


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_solution_check_cells_pass(path):
    for cell in code_cells(read_notebook(path)):
        if "checks.check_" in source(cell):
            text = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in outputs(cell))
            assert "all checks passed" in text, f"{rel(path)}: a check cell did not pass"


@pytest.mark.parametrize("path", EXECUTED, ids=ids(EXECUTED))
def test_code_lines_fit_the_book_page(path):
    """The HTML book shows about 92 characters of code per line; longer lines hide their end."""
    for i, cell in enumerate(code_cells(read_notebook(path))):
        for line in source(cell).splitlines():
            assert len(line) <= 92, f"{rel(path)}, code cell {i}: line of {len(line)} characters: {line}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_exercises_are_numbered_within_their_chapter(path):
    """'8.1', '8.2', ... with :nonumber: (sphinx-exercise would count across the whole book)."""
    prefix = path.name.split("_")[0]
    chapter = prefix.upper() if prefix.startswith("a") else str(int(prefix))
    titles = [source(c).splitlines() for c in read_notebook(path)["cells"]
              if c["cell_type"] == "markdown" and source(c).startswith("```{exercise}")]
    assert titles, f"{rel(path)} has no exercise"
    for k, lines in enumerate(titles, start=1):
        assert lines[0].startswith(f"```{{exercise}} {chapter}.{k} "), (
            f"{rel(path)}: exercise {k} should be titled '{chapter}.{k} ...': {lines[0]}")
        assert ":nonumber:" in lines[1:3], f"{rel(path)}: {lines[0]} needs :nonumber:"


@pytest.mark.parametrize("path", EXECUTED, ids=ids(EXECUTED))
def test_every_figure_cell_has_alt_text(path):
    """Screen readers and the browser tests need it; caught here before a build."""
    for i, cell in enumerate(code_cells(read_notebook(path))):
        if any("image/png" in o.get("data", {}) for o in outputs(cell)):
            meta = cell.get("metadata", {}).get("mystnb", {})
            alt = meta.get("image", {}).get("alt") or meta.get("figure", {}).get("caption")
            assert alt, (f"{rel(path)}, code cell {i}: a figure without alt text; add the cell "
                         'metadata {"mystnb": {"image": {"alt": "what the figure shows"}}}')


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids(SOLUTIONS))
def test_every_solution_start_has_its_end(path):
    """sphinx-exercise stops the whole build on a solution-start without its solution-end."""
    gates = [m.group(1) for cell in read_notebook(path)["cells"] if cell["cell_type"] == "markdown"
             for m in re.finditer(r"```\{solution-(start|end)\}", source(cell))]
    assert gates == ["start", "end"] * (len(gates) // 2), (
        f"{rel(path)}: solution-start and solution-end must alternate, found {gates}")
