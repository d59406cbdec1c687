"""Every number the prose states is computed in a cell and checked.

A number in a chapter's text (a decimal such as 0.428, a percentage such as 97.5%, or a
grouped count such as 236,367) must appear either in the stored output of a cell that nbval
compares (`# NBVAL_CHECK_OUTPUT`), or in the source of a code cell (the bound of an assert,
a constant the code uses; a percentage may appear as a fraction, 95% as 0.95). Numbers quoted from the literature are declared in the cell that
quotes them with an HTML comment, invisible in the book: `<!-- cited: 3.3, 110, 128,000 -->`
(a comma and a space separate the numbers).
Math ($...$), inline code, fenced code blocks and link targets are not prose and are skipped.
"""
import re

import pytest

from conftest import CHAPTERS, SOLUTIONS, code_cells, read_notebook, rel, source

NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+\.\d+|\d+(?=\s?%))(?![\w])")
CITED = re.compile(r"<!--\s*cited:(.*?)-->", re.S)
SKIP = [re.compile(p, re.S | re.M) for p in (
    r"^```\{exercise\}[^\n]*$", r"^```(?!\{)[^\n]*\n.*?^```", r"^#+ [^\n]*$", r"<!--.*?-->", r"\$\$.*?\$\$", r"\$[^$\n]*\$",
    r"\{[a-z]+\}`[^`]*`", r"`[^`\n]*`", r"\]\([^)]*\)", r"https?://\S+",
    r"(?i)\b(exercises?|solutions?|sections?|chapters?)\s+\d+(\.\d+)?"
    r"(\s*(and|or|to|,|-|–)\s*\d+(\.\d+)?)*")]


def prose_numbers(markdown):
    text = markdown
    for pattern in SKIP:
        text = pattern.sub(" ", text)
    return {m.group(1) for m in NUMBER.finditer(text)}


def checked_text(nb):
    """What a number may be backed by: checked outputs and every code cell's source."""
    parts = []
    for cell in code_cells(nb):
        parts.append(source(cell))
        if "# NBVAL_CHECK_OUTPUT" in source(cell):
            for out in cell.get("outputs", []):
                parts.append("".join(out.get("text", "")))
                parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def unbacked(path):
    nb = read_notebook(path)
    backing = checked_text(nb)
    missing = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = source(cell)
        # "3.3, 110, 128,000": a comma and a space separate numbers; a grouped count keeps its commas
        cited = {n.strip() for c in CITED.findall(text) for n in re.split(r",\s+|,$", c.strip())}
        for number in sorted(prose_numbers(text)):
            if number in cited or any(re.search(rf"(?<![\d.]){re.escape(form)}(?![\d])", backing)
                                      for form in forms(number)):
                continue
            missing.append(number)
    return sorted(set(missing))


def forms(number):
    """How code may write a prose number: 236,367 as 236367; 95% as 0.95; 97.5% as 0.975."""
    bare = number.replace(",", "")
    yield from {number, bare}
    if re.fullmatch(r"\d+(\.\d+)?", bare) and float(bare) <= 100:
        fraction = f"{float(bare) / 100:.6f}".rstrip("0")
        yield fraction + ("0" if fraction.endswith(".") else "")


def test_a_percentage_may_be_backed_by_its_fraction():
    assert set(forms("95")) == {"95", "0.95"} and "0.975" in set(forms("97.5"))
    assert set(forms("236,367")) == {"236,367", "236367"}


def test_prose_numbers_finds_decimals_percentages_and_grouped_counts():
    text = ("loss 0.428 and 97.5% (or 42 %), 236,367 parameters; $x^{0.8}$, `1e-6`, 2024 and 3 "
            "heads, as exercises 7.4 and 7.5 and section 11.9 show\n```python\nlr = 0.005\n```\n")
    assert prose_numbers(text) == {"0.428", "97.5", "42", "236,367"}


@pytest.mark.parametrize("path", CHAPTERS + SOLUTIONS, ids=[rel(p) for p in CHAPTERS + SOLUTIONS])
def test_every_number_in_the_prose_is_computed_and_checked(path):
    missing = unbacked(path)
    assert not missing, (
        f"{rel(path)}: numbers in the prose that no checked output or code cell states: {missing}. "
        "Print them in a # NBVAL_CHECK_OUTPUT cell, assert a bound in code, or, for a number "
        "quoted from the literature, declare it with <!-- cited: ... --> in that cell.")
