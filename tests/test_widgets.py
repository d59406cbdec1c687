"""book.widgets: the static rendering answers without a kernel, the live one builds."""
import base64
import json
import re

import pytest

from book import widgets


def draw(fig, width, kind):
    ax = fig.add_subplot()
    ax.plot([0, width], [0, 1] if kind == "up" else [1, 0])
    return f"width={width} kind={kind}"


def frames_of(html):
    return json.loads(re.search(r'class="book-widget-data">(.*?)</script>', html).group(1))


def test_every_combination_is_precomputed_in_row_major_order():
    w = widgets.interact(draw, figsize=(2, 2), width=[1, 2, 3], kind=["up", "down"])
    assert w.shape == [3, 2]
    data = frames_of(w.to_html())
    assert data["shape"] == [3, 2]
    assert data["captions"] == [f"width={a} kind={b}" for a in (1, 2, 3) for b in ("up", "down")]
    images = [base64.b64decode(i) for i in data["images"]]
    assert all(i.startswith(b"\x89PNG") for i in images)
    assert len(set(data["images"])) == 6, "different values must give different frames"


def test_static_html_has_controls_a_script_and_no_external_resources():
    html = widgets.interact(draw, figsize=(2, 2), alt="a line", width=[1, 2, 3], kind=["up", "down"]).to_html()
    assert html.count('type="range"') == 1 and html.count("<select") == 1
    assert 'alt="a line"' in html and "<script>" in html
    assert "http://" not in html and "https://" not in html
    # the first frame shown is the one the controls start at: slider in the middle, drop-down first
    data = frames_of(html)
    assert f'src="data:image/png;base64,{data["images"][1 * 2 + 0]}"' in html


def test_ids_are_deterministic():
    a = widgets.interact(draw, figsize=(2, 2), width=[1, 2], kind=["up"]).to_html()
    b = widgets.interact(draw, figsize=(2, 2), width=[1, 2], kind=["up"]).to_html()
    assert a == b


def test_caption_only_widget_and_text_box():
    w = widgets.interact(lambda sentence: sentence.upper(), figsize=None,
                         sentence=widgets.TextBox(["a cat", "a dog"]))
    data = frames_of(w.to_html())
    assert data["captions"] == ["A CAT", "A DOG"] and data["images"] == ["", ""]


def test_mimebundle_carries_live_and_static_views():
    bundle = widgets.interact(draw, figsize=(2, 2), width=[1, 2], kind=["up"])._repr_mimebundle_()
    assert {"text/html", "text/plain", "application/vnd.jupyter.widget-view+json"} <= set(bundle)
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"]


def test_live_widget_has_one_control_per_parameter():
    import ipywidgets

    box = widgets.interact(draw, figsize=(2, 2), width=[1, 2, 3], kind=["up", "down"]).live()
    controls = box.children[0].children
    assert [type(c) for c in controls] == [ipywidgets.SelectionSlider, ipywidgets.Dropdown]
    assert controls[0].value == 2 and controls[1].value == "up"


@pytest.mark.parametrize("controls, message", [({}, "at least one control"), ({"x": []}, "no values")])
def test_bad_controls_are_rejected(controls, message):
    with pytest.raises(ValueError, match=message):
        widgets.interact(draw, **controls)


def test_draw_must_return_a_caption_or_none():
    w = widgets.interact(lambda fig, x: 42, figsize=(2, 2), x=[1])
    with pytest.raises(TypeError, match="caption"):
        w.frames()


def test_static_preview_says_it_is_one_until_its_script_runs():
    """Where the inline script cannot run (an untrusted notebook in JupyterLab before Run All),
    the controls do nothing: a visible note says so and tells the reader to run the cell. The
    script removes the note, so the HTML book (script runs) shows working controls without it."""
    html = widgets.interact(draw, figsize=(2, 2), width=[1, 2], kind=["up"]).to_html()
    note = re.search(r'<p class="book-widget-note"[^>]*>(.*?)</p>', html)
    assert note, "the static preview carries a note"
    text = re.sub(r"<[^>]+>", "", note.group(1))
    assert "Static preview" in text and "Run this cell" in text and "live controls" in text
    assert "display:none" not in note.group(0) and "hidden" not in note.group(0), "visible by default"
    assert html.index("book-widget-note") < html.index("book-widget-controls"), "seen before the controls"
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    assert "querySelector('.book-widget-note')" in script and "note.remove()" in script


def test_frames_keep_the_shades_of_a_colour_bar():
    """A heatmap of weights over 0..1 with its colour bar, mostly light (as an attention map is),
    loses no shade a reader could see: 64 colours merged 0.6-1.0 into one brown (error 155)."""
    import io

    import numpy as np
    from PIL import Image

    from book.plot import figure_to_png, new_figure

    fig = new_figure((3, 2.5))
    ax = fig.add_subplot()
    weights = np.full((16, 16), 0.02)
    weights[np.arange(16), np.arange(16)] = np.linspace(0.3, 1.0, 16)
    image = ax.imshow(weights, cmap="Reds", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax)
    png = figure_to_png(fig, 80)
    before = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)
    after = np.asarray(Image.open(io.BytesIO(widgets._compress(png))).convert("RGB"), dtype=int)
    error = np.abs(before - after).sum(axis=2)
    assert error.max() <= 15, f"a pixel's colour moved by {error.max()} (sum of |dRGB|)"
