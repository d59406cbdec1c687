"""Generate the glossary page (glossary.md) from the key terms of the chapters.

    python tools/make_glossary.py            # (re)write glossary.md
    python tools/make_glossary.py --check    # exit 1 if glossary.md is stale or terms conflict

A key term is written in a chapter's markdown, where it first appears, as
`**attention pooling (注意力汇聚)**`. The glossary lists every term once, with its Chinese name,
linked to the section of the chapter where it first appears (chapters in the order of _toc.yml).
The same English term must have the same Chinese name everywhere.
"""
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
TERM = re.compile(r"\*\*([^*\n]+?) \(([^)\n]*[\u4e00-\u9fff][^)\n]*)\)\*\*")  # the name holds a Chinese character
HEADING = re.compile(r"^(#{1,3}) (.+)$", re.M)
SLUG_CLEAN = re.compile(r"[^\w\u4e00-\u9fff\- ]")  # myst-parser's default_slugify


def slugify(title):
    """The anchor MyST gives a heading (myst_heading_anchors): its text, GitHub style."""
    text = re.sub(r"\$[^$]*\$", "", title)                  # math is not part of the anchor
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)    # a link counts by its text
    text = re.sub(r"[*_]{1,2}([^*_]+)[*_]{1,2}", r"\1", text).replace("`", "")
    return SLUG_CLEAN.sub("", text.lower().replace(" ", "-"))


def chapters():
    """The chapter notebooks in the order of the table of contents."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    for part in toc["parts"]:
        for entry in part["chapters"]:
            if entry["file"].startswith("chapters/"):
                yield ROOT / (entry["file"] + ".ipynb")


def first_appearances():
    """{english (lower case): (English, 中文, chapter path, chapter title, section, anchor)}."""
    terms, names = {}, {}
    for path in chapters():
        nb = json.loads(path.read_text())
        title, section, anchor, slugs = path.stem, None, "", set()
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            events = [(m.start(), "h", m) for m in HEADING.finditer(text)]
            events += [(m.start(), "t", m) for m in TERM.finditer(text)]
            for _, kind, m in sorted(events, key=lambda e: e[0]):
                if kind == "h":
                    slug = base = slugify(m.group(2))
                    i = 1
                    while slug in slugs:
                        slug, i = f"{base}-{i}", i + 1
                    slugs.add(slug)
                    if len(m.group(1)) == 1:
                        title = m.group(2).strip()
                    section, anchor = m.group(2).strip(), slug
                    continue
                english = m.group(1).strip()
                chinese = re.split(r"[,;，]", m.group(2))[0].strip()  # "掩蔽语言模型, MLM"
                key = singular(english.lower())
                names.setdefault(key, {}).setdefault(chinese, []).append(path.stem)
                if key not in terms:
                    terms[key] = (english, chinese, path, title, section, anchor)
    conflicts = {k: v for k, v in names.items() if len(v) > 1}
    return terms, conflicts


PROPER = {"Gaussian", "Epanechnikov", "Nadaraya-Watson", "Bahdanau", "Transformer", "BERT", "GPT"}


def singular(term):
    """'attention weights' and 'attention weight' are one term."""
    last = term.split()[-1]
    if last.endswith("s") and not last.endswith(("ss", "us", "is", "as")):
        return term[:-1]
    return term


def display(english):
    """'Multi-head attention' at the start of a sentence is 'multi-head attention' here."""
    first = english.split()[0]
    if first not in PROPER and first[:1].isupper() and first[1:] == first[1:].lower():
        return english[0].lower() + english[1:]
    return english


def glossary():
    terms, conflicts = first_appearances()
    lines = [
        "# Glossary (术语表)",
        "",
        "Every key term of the course with its Chinese name, linked to where it first appears.",
        "This page is generated from the chapters by `tools/make_glossary.py`; a test keeps the",
        "two equal.",
        "",
        "| term | 中文 | first appears in |",
        "|---|---|---|",
    ]
    for key in sorted(terms, key=lambda k: display(terms[k][0]).lower()):
        english, chinese, path, title, section, anchor = terms[key]
        target = path.relative_to(ROOT).as_posix()
        where = f"{title}, {section}" if section and section != title else title
        where = re.sub(r"\$[^$]*\$", "", where).replace("|", "\\|")
        lines.append(f"| {display(english)} | {chinese} | [{where}]({target}#{anchor}) |")
    return "\n".join(lines) + "\n", conflicts


def main(check=False):
    text, conflicts = glossary()
    if conflicts:
        sys.exit("one English term, several Chinese names: " + "; ".join(
            f"{k}: " + ", ".join(f"{c} ({', '.join(sorted(set(p)))})" for c, p in v.items())
            for k, v in conflicts.items()))
    target = ROOT / "glossary.md"
    if check:
        if not target.exists() or target.read_text() != text:
            sys.exit("glossary.md is stale: run `python tools/make_glossary.py`")
    else:
        target.write_text(text)
        print(f"wrote glossary.md ({text.count(chr(10)) - 8} terms)")


if __name__ == "__main__":
    main(check="--check" in sys.argv)
