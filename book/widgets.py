"""Widgets that answer the reader with a kernel (live ipywidgets) and without one (the HTML book).

`interact(draw, **controls)` returns an object whose display carries both:

* `application/vnd.jupyter.widget-view+json`: live ipywidgets sliders in Jupyter and Colab;
* `text/html`: the same controls in plain HTML over frames precomputed for every combination
  of control values, swapped by a few lines of inline JavaScript (no kernel, no CDN). The
  book's `_config.yml` tells myst-nb to prefer this one for the HTML builder. It carries a
  visible note, "Static preview: ... run this cell for live controls", that the inline script
  hides: where the script cannot run (an untrusted notebook in JupyterLab or Jupyter before
  the cell is run, where the controls would do nothing), the note tells the reader why.

`draw(fig, **values)` draws one frame into a fresh matplotlib Figure and may return a caption
(a string shown under the figure). Keep `draw` thin: it should call a plain compute function
that the tests call without a browser.
"""
import base64
import hashlib
import html
import io
import itertools
import json
import numbers

from .plot import figure_to_png, new_figure


class TextBox:
    """A free-text control: a text box with a kernel, a choice among `presets` without one."""

    def __init__(self, presets):
        self.presets = [str(p) for p in presets]
        if not self.presets:
            raise ValueError("TextBox needs at least one preset text for the static book")

    def __iter__(self):
        return iter(self.presets)


def _compress(png, colors=256):
    """Quantise a PNG to a palette of `colors`: a frame shrinks about 2x and keeps every shade of
    a colour bar (the default median cut with 64 colours merged weights 0.6-1.0 into one brown;
    maximum coverage with 256 moves no pixel by more than a few levels)."""
    from PIL import Image

    out = io.BytesIO()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image = image.quantize(colors=colors, method=Image.Quantize.MAXCOVERAGE)
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def _start(values):
    """Where a control starts: the middle of a slider, the first entry of a drop-down or text box."""
    values = list(values)
    numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)
    return len(values) // 2 if numeric and len(values) > 1 else 0


def _format(value):
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


class Interactive:
    """A figure (and/or caption) driven by controls; see the module docstring."""

    def __init__(self, draw, controls, figsize=(6.0, 3.0), dpi=80, alt="interactive figure"):
        if not controls:
            raise ValueError("interact needs at least one control, e.g. interact(draw, width=[0.5, 1, 2])")
        self.draw, self.figsize, self.dpi, self.alt = draw, figsize, dpi, alt
        self.controls = {}
        for name, values in controls.items():
            values = values if isinstance(values, TextBox) else list(values)
            if len(list(values)) == 0:
                raise ValueError(f"control {name!r} has no values")
            self.controls[name] = values
        self._frames = None

    @property
    def shape(self):
        return [len(list(v)) for v in self.controls.values()]

    def frame(self, **values):
        """Render one frame: (PNG bytes or None, caption or None)."""
        fig = new_figure(self.figsize) if self.figsize else None
        caption = self.draw(fig, **values) if fig is not None else self.draw(**values)
        png = _compress(figure_to_png(fig, self.dpi)) if fig is not None else None
        if caption is not None and not isinstance(caption, str):
            raise TypeError(f"draw() must return a caption string or None, got {type(caption).__name__}")
        return png, caption

    def frames(self):
        """Every frame, in row-major order over the controls (the last control varies fastest)."""
        if self._frames is None:
            names = list(self.controls)
            self._frames = [self.frame(**dict(zip(names, combo)))
                            for combo in itertools.product(*[list(v) for v in self.controls.values()])]
        return self._frames

    # -- without a kernel -------------------------------------------------------------------
    def to_html(self):
        frames = self.frames()
        images = [base64.b64encode(png).decode("ascii") if png else "" for png, _ in frames]
        captions = [caption or "" for _, caption in frames]
        uid = "bw-" + hashlib.sha1("".join(images + captions).encode()).hexdigest()[:10]
        inputs = []
        for k, (name, values) in enumerate(self.controls.items()):
            values = list(values)
            start = _start(values)
            label = html.escape(name)
            if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values) and len(values) > 1:
                inputs.append(
                    f'<label>{label} <input type="range" min="0" max="{len(values) - 1}" step="1" '
                    f'value="{start}" data-k="{k}" aria-label="{label}"> '
                    f'<output>{html.escape(_format(values[start]))}</output></label>')
            else:
                options = "".join(f'<option value="{i}"{" selected" if i == start else ""}>'
                                  f"{html.escape(_format(v))}</option>" for i, v in enumerate(values))
                inputs.append(f'<label>{label} <select data-k="{k}" aria-label="{label}">{options}</select></label>')
        labels = [[_format(v) for v in values] for values in self.controls.values()]
        data = json.dumps({"images": images, "captions": captions, "shape": self.shape, "labels": labels})
        starts = [_start(v) for v in self.controls.values()]
        first = _index(starts, self.shape)
        img = (f'<img src="data:image/png;base64,{images[first]}" alt="{html.escape(self.alt)}" '
               f'style="max-width:100%">' if images[first] else "")
        return (
            f'<div class="book-widget" id="{uid}">'
            f'<p class="book-widget-note" style="{_NOTE_STYLE}">{_NOTE}</p>'
            f'<div class="book-widget-controls" style="display:flex;flex-wrap:wrap;gap:1.2em;'
            f'margin-bottom:.4em">{"".join(inputs)}</div>{img}'
            f'<pre class="book-widget-caption" style="margin-top:.3em">{html.escape(captions[first])}</pre>'
            f'<script type="application/json" class="book-widget-data">{data}</script>'
            f"<script>{_SCRIPT % json.dumps(uid)}</script></div>")

    # -- with a kernel ------------------------------------------------------------------------
    def live(self):
        """The ipywidgets version: controls plus an Output that redraws on every change."""
        import ipywidgets as w
        from IPython.display import Image, display

        controls = {}
        for name, values in self.controls.items():
            if isinstance(values, TextBox):
                controls[name] = w.Text(value=values.presets[0], description=name,
                                        continuous_update=False, layout=w.Layout(width="32em"))
                continue
            values = list(values)
            start = values[_start(values)]
            if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values) and len(values) > 1:
                controls[name] = w.SelectionSlider(options=[(_format(v), v) for v in values], value=start,
                                                   description=name, continuous_update=False)
            else:
                controls[name] = w.Dropdown(options=[(_format(v), v) for v in values], value=start,
                                            description=name)

        def show(**values):
            png, caption = self.frame(**values)
            if png:
                display(Image(data=png, format="png"))
            if caption:
                print(caption)

        output = w.interactive_output(show, controls)
        return w.VBox([w.HBox(list(controls.values())), output])

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {}
        try:  # the widget view, written out so that ipywidgets 7 (older Colab) and 8 both work
            live = self.live()
            bundle["application/vnd.jupyter.widget-view+json"] = {
                "version_major": 2, "version_minor": 0, "model_id": live.model_id}
        except Exception:  # no ipywidgets or no kernel: the static rendering still answers
            pass
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = f"<interactive figure: {' x '.join(map(str, self.shape))} frames over {list(self.controls)}>"
        return bundle


def _index(indices, shape):
    flat = 0
    for i, n in zip(indices, shape):
        flat = flat * n + i
    return flat


# Shown where the inline script cannot run; the script removes it (see the module docstring).
_NOTE = ("<strong>Static preview:</strong> these controls do nothing until the cell runs. "
         "Run this cell (Shift+Enter), or Run All, for live controls.")
_NOTE_STYLE = ("margin:.3em 0;padding:.3em .6em;border-left:3px solid #c47f00;"
               "background:#fff6e0;color:#4a3200;font-size:.9em")

_SCRIPT = """(function(){var root=document.getElementById(%s);if(!root)return;
var note=root.querySelector('.book-widget-note');if(note)note.remove();
var d=JSON.parse(root.querySelector('.book-widget-data').textContent);
var inputs=root.querySelectorAll('[data-k]');var img=root.querySelector('img');
var cap=root.querySelector('.book-widget-caption');
function update(){var flat=0;inputs.forEach(function(el){var k=+el.dataset.k;flat=flat*d.shape[k]+(+el.value);
var out=el.parentNode.querySelector('output');if(out)out.textContent=d.labels[k][+el.value];});
if(img&&d.images[flat])img.src='data:image/png;base64,'+d.images[flat];cap.textContent=d.captions[flat];}
inputs.forEach(function(el){el.addEventListener('input',update);el.addEventListener('change',update);});})();"""


def interact(draw, figsize=(6.0, 3.0), dpi=80, alt="interactive figure", **controls):
    """Make `draw(fig, **values)` interactive over the listed values of each control.

    Example: `interact(draw, figsize=(6, 3), width=[0.25, 0.5, 1, 2])`. Numbers give a slider,
    other values a drop-down, `TextBox(presets)` a text box. With `figsize=None`, `draw(**values)`
    only returns a caption. Every combination is rendered once for the static book, so keep
    the grid small (tens of frames).
    """
    return Interactive(draw, controls, figsize=figsize, dpi=dpi, alt=alt)
