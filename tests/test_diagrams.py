"""Architecture diagrams (book/figures/*.svg): valid SVG, accessible, legible in dark mode."""
import re
import xml.etree.ElementTree as ET

import pytest

from book import diagrams

NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("name", diagrams.names())
def test_diagram_is_valid_self_contained_svg_on_a_light_card(name):
    text = diagrams.svg_text(name)
    root = ET.fromstring(text)
    assert root.tag == NS + "svg" and root.get("viewBox"), f"{name}: an <svg> with a viewBox"
    title = root.find(NS + "title")
    assert title is not None and len(title.text.strip()) > 20, f"{name}: a <title> that describes it"
    assert not re.search(r'href="(https?:)?//', text), f"{name}: no external resources (offline book)"
    card = next(el for el in root if el.tag not in (NS + "title", NS + "desc", NS + "defs", NS + "style"))
    assert card.tag == NS + "rect" and card.get("width") == "100%" and card.get("height") == "100%", (
        f"{name}: the first shape must be a full-size background rect (legible in dark mode)")
    assert card.get("fill", "").lower() in {"#ffffff", "#fff", "white", "#fcfcfc", "#fafafa"}


def test_show_returns_the_svg_and_unknown_names_fail_clearly():
    for name in diagrams.names():
        assert diagrams.show(name).data.strip().endswith("</svg>")
    with pytest.raises(ValueError, match="no diagram"):
        diagrams.svg_text("no-such-diagram")
