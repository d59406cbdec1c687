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
The learner copy is stored without outputs.
"""
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "exercises" / "solutions"
BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION(?:\s+hint:\s*(?P<hint>.*))?$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
GATE = re.compile(r"^\s*```\{solution-(start|end)\}")
EXERCISE = re.compile(r"^```\{exercise\}\s*(?P<title>.*?)\n(?P<options>(?::[^\n]*\n)*)(?P<body>.*?)\n?```\s*$", re.S)


def plain_exercise(markdown):
    """A sphinx-exercise directive as plain Markdown, which Jupyter and Colab render."""
    match = EXERCISE.match(markdown.strip())
    if not match:
        return markdown
    number, _, title = match["title"].partition(" ")  # "8.1 The 80/10/10 masking"
    return f"### Exercise {number}: {title}\n\n{match['body'].strip()}"


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
            new = nbformat.v4.new_markdown_cell(plain_exercise(cell.source))
        if tags:
            new.metadata["tags"] = tags
        cells.append(new)
    learner = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": nb.metadata.get("kernelspec", {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"}),
        "language_info": {"name": "python"}})
    for i, cell in enumerate(learner.cells):  # stable ids, so regenerating gives the same file
        cell["id"] = f"cell-{i}"
    return nbformat.writes(learner) + "\n"


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
