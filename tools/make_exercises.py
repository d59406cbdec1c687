"""Generate the learner notebooks exercises/NN_*.ipynb from the solution notebooks.

    python tools/make_exercises.py            # (re)write every learner copy
    python tools/make_exercises.py --check    # exit 1 if a learner copy is stale

Conventions in a solution notebook (exercises/solutions/NN_*.ipynb):
* In a code cell, the lines between `### BEGIN SOLUTION` and `### END SOLUTION` become a
  starter `raise NotImplementedError(...)`; text after `hint:` on the BEGIN line is the hint.
* A code or markdown cell tagged `solution` (a whole worked answer) becomes a short placeholder.
* Markdown cells that open or close a folded solution (```{solution-start}, ```{solution-end})
  are dropped.
* A sphinx-exercise ```{exercise} block, titled "N.k Title" with the option `:nonumber:` (the
  book's own numbering would count exercises across the whole book), becomes a plain
  "### Exercise N.k: Title" section.
* A code cell tagged `check` (it calls a `book.checks` checker) is tagged `raises-exception`
  in the learner copy: until the learner solves the exercise it fails, on purpose.
* MyST roles that JupyterLab (with jupyterlab-myst) cannot render become plain Markdown:
  {doc}`../../chapters/03_scoring_functions` (relative to exercises/solutions/, shown in
  JupyterLab as that raw path and linking nowhere) becomes a link from the learner copy's
  folder, [3. Attention scoring functions](../chapters/03_scoring_functions.ipynb), titled as
  the book titles it; {cite}`key` (shown as the bare key with a "not found" mark) becomes
  "(Author, year)" from references.bib. Relative Markdown links and images, written from
  exercises/solutions/, are rewritten to work from exercises/.
The learner copy is stored without outputs, in the form JupyterLab saves a notebook
(tools/normalise_notebooks.py), so that opening it in JupyterLab modifies nothing.
"""
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from normalise_notebooks import normalise, text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "exercises" / "solutions"
BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?:\s+hint:\s*(?P<hint>.*))?$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
GATE = re.compile(r"^\s*```\{solution-(start|end)\}")
DOC = re.compile(r"\{doc\}`(?:(?P<text>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`]+))`")
LINK = re.compile(r"(?P<open>!?\[[^\]]*\]\()(?P<target>(?![a-z][a-z0-9+.-]*:|#|/)[^)\s]+)\)")
CITE = re.compile(r"\{cite(?::(?P<kind>[pt]))?\}`(?P<keys>[^`]+)`")
EXERCISE = re.compile(r"^```\{exercise\}\s*(?P<title>.*?)\n(?P<options>(?::[^\n]*\n)*)(?P<body>.*?)\n?```\s*$", re.S)


def plain_exercise(markdown):
    """A sphinx-exercise directive as plain Markdown, which Jupyter and Colab render."""
    match = EXERCISE.match(markdown.strip())
    if not match:
        return markdown
    number, _, title = match["title"].partition(" ")  # "8.1 The 80/10/10 masking"
    return f"### Exercise {number}: {title}\n\n{match['body'].strip()}"


def title(path):
    """A document's title as the book shows it: its first `# ` heading."""
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        lines = [line for c in cells if c.cell_type == "markdown" for line in c.source.splitlines()]
    else:
        lines = path.read_text(encoding="utf-8").splitlines()
    return next((line[2:].strip() for line in lines if line.startswith("# ")), path.stem)


def doc_link(match, source_dir, target_dir, where):
    """{doc}`target` or {doc}`text <target>` as a Markdown link that works from target_dir."""
    target = (match["target"] or match["bare"]).strip()
    base = ROOT if target.startswith("/") else source_dir
    stem = (base / target.lstrip("/")).resolve()
    found = [stem.with_name(stem.name + suffix) for suffix in (".ipynb", ".md")
             if stem.with_name(stem.name + suffix).exists()]
    if not found:
        raise ValueError(f"{where}: {{doc}}`{target}` names no notebook or Markdown file "
                         f"(looked for {stem.relative_to(ROOT)}.ipynb and .md)")
    link = Path(os.path.relpath(found[0], target_dir)).as_posix()
    return f"[{(match['text'] or '').strip() or title(found[0])}]({link})"


@lru_cache(maxsize=1)
def bibliography():
    from pybtex.database import parse_file

    return parse_file(ROOT / "references.bib").entries


def author_year(key, where):
    entry = bibliography().get(key)
    if entry is None:
        raise ValueError(f"{where}: {{cite}}`{key}` is not in references.bib")
    names = [" ".join(p.last_names).replace("{", "").replace("}", "")
             for p in entry.persons.get("author", [])]
    who = (names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2
           else f"{names[0]} et al.") if names else key
    return who, entry.fields.get("year", "n.d.")


def citation(match, where):
    """{cite}`a,b` as "(A, 1964; B, 1964)"; {cite:t}`a` as "A (1964)"."""
    refs = [author_year(key.strip(), where) for key in match["keys"].split(",")]
    if match["kind"] == "t":
        return "; ".join(f"{who} ({year})" for who, year in refs)
    return "(" + "; ".join(f"{who}, {year}" for who, year in refs) + ")"


def moved_link(match, source_dir, target_dir, where):
    """A relative Markdown link or image, written from source_dir, as seen from target_dir."""
    target, _, fragment = match["target"].partition("#")
    found = (source_dir / target).resolve()
    if not found.exists():
        raise ValueError(f"{where}: the link ({match['target']}) names no file: "
                         f"{found.relative_to(ROOT) if found.is_relative_to(ROOT) else found}")
    moved = Path(os.path.relpath(found, target_dir)).as_posix() + (f"#{fragment}" if fragment else "")
    return f"{match['open']}{moved})"


def plain_roles(markdown, source_dir, target_dir, where):
    """The MyST roles JupyterLab cannot render ({doc}, {cite}) as plain Markdown, and relative
    links (written from source_dir) as they work from target_dir."""
    markdown = LINK.sub(lambda m: moved_link(m, source_dir, target_dir, where), markdown)
    markdown = DOC.sub(lambda m: doc_link(m, source_dir, target_dir, where), markdown)
    return CITE.sub(lambda m: citation(m, where), markdown)


def strip_solution(source, where):
    out, inside = [], False
    for line in source.splitlines():
        begin = BEGIN.match(line)
        if begin:
            if inside:
                raise ValueError(f"{where}: nested ### BEGIN SOLUTION")
            inside = True
            hint = (begin["hint"] or "write your solution here").strip()
            out.append(f"{begin['indent']}# Your code here")
            out.append(f"{begin['indent']}raise NotImplementedError({hint!r})")
        elif END.match(line):
            if not inside:
                raise ValueError(f"{where}: ### END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: ### BEGIN SOLUTION is never closed")
    return "\n".join(out)


SELF_LINK = re.compile(r"\. The learner copy\s+without\s+solutions\s+is\s+`exercises/[^`]+`\s*"
                       r"\(\[open it in Colab\]\([^)]*\)\)\.")


def learner_copy(solution_path):
    nb = nbformat.read(solution_path, as_version=4)
    relative = solution_path.relative_to(ROOT).as_posix()
    cells = [nbformat.v4.new_markdown_cell(
        f"*Learner copy, generated from `{relative}` by `tools/make_exercises.py`: "
        "fill in the cells that raise `NotImplementedError`, then run the check cell below each.*")]
    for index, cell in enumerate(nb.cells):
        tags = list(cell.metadata.get("tags", []))
        where = f"{relative}, cell {index}"
        if cell.cell_type == "markdown" and GATE.match(cell.source):
            continue
        if "solution" in tags:
            tags.remove("solution")
            placeholder = ("*Your answer here.*" if cell.cell_type == "markdown"
                           else "# Your code here: run an experiment that supports your answer.")
            new = (nbformat.v4.new_markdown_cell if cell.cell_type == "markdown"
                   else nbformat.v4.new_code_cell)(placeholder)
        elif cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(strip_solution(cell.source, where))
            if "check" in tags and "raises-exception" not in tags:
                tags.append("raises-exception")
        else:
            source = SELF_LINK.sub(".", cell.source)  # the learner copy need not point at itself
            new = nbformat.v4.new_markdown_cell(plain_roles(
                plain_exercise(source), solution_path.parent, ROOT / "exercises", where))
        if tags:
            new.metadata["tags"] = tags
        cells.append(new)
    learner = nbformat.v4.new_notebook(cells=cells)
    for i, cell in enumerate(learner.cells):  # stable ids, so regenerating gives the same file
        cell["id"] = f"cell-{i}"
    return text(normalise(learner))


def main(check=False):
    stale = []
    for solution in sorted(SOLUTIONS.glob("*.ipynb")):
        target = ROOT / "exercises" / solution.name
        text = learner_copy(solution)
        if check:
            if not target.exists() or target.read_text() != text:
                stale.append(target.relative_to(ROOT).as_posix())
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        sys.exit("stale learner copies (run `make exercises`): " + ", ".join(stale))


if __name__ == "__main__":
    main(check="--check" in sys.argv)
