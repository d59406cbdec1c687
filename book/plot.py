"""One figure style for the whole book, and the heatmaps every chapter uses."""
import io

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

STYLE = {
    "figure.figsize": (5.0, 3.2),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 10.5,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "image.cmap": "Reds",
    "lines.linewidth": 1.8,
    "svg.hashsalt": "attention-course",  # reproducible SVG ids
}


def use_style():
    """Apply the book's figure style, and PNG output in notebooks (small, diff-stable text)."""
    matplotlib.rcParams.update(STYLE)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        if get_ipython() is not None:
            set_matplotlib_formats("png")
    except ImportError:  # plain Python: nothing to configure
        pass


def to_numpy(x):
    """A tensor (any device, with or without grad) or array-like as a NumPy array."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu", torch.float32).numpy()
    return np.asarray(x, dtype=np.float32)


def show_heatmaps(matrices, xlabel, ylabel, titles=None, figsize=(2.5, 2.5), cmap="Reds",
                  fig=None, xticklabels=None, yticklabels=None, vmin=0.0, vmax=1.0):
    """Draw a (rows, cols, queries, keys) grid of heatmaps with one shared colour bar.

    Same call as d2l's; unlike d2l's, all panels share one fixed colour scale, 0 to 1 for
    attention weights, so near-uniform weights look uniform and the colour bar is true for
    every panel and every widget frame. For other matrices pass vmin=None, vmax=None (the
    scale then spans the data). Rows of the grid are usually examples, columns heads. Pass
    `fig` to draw into that Figure, and tick labels to name the keys and queries.
    """
    M = to_numpy(matrices)
    if M.ndim != 4:
        raise ValueError(f"show_heatmaps expects a 4-D (rows, cols, queries, keys) array, "
                         f"got shape {tuple(M.shape)}; for one matrix use "
                         "weights.reshape(1, 1, num_queries, num_keys)")
    num_rows, num_cols = M.shape[:2]
    if titles is not None and len(titles) != num_cols:
        raise ValueError(f"titles has {len(titles)} entries for {num_cols} columns")
    if not np.isfinite(M).all():
        raise ValueError("show_heatmaps got NaN or infinite values; check the masking")
    own_figure = fig is None
    if own_figure:
        fig = plt.figure(figsize=figsize, layout="constrained")
    axes = fig.subplots(num_rows, num_cols, sharex=True, sharey=True, squeeze=False)
    low = float(M.min()) if vmin is None else vmin
    high = float(M.max()) if vmax is None else vmax
    if M.min() < low - 1e-6 or M.max() > high + 1e-6:
        raise ValueError(f"values span [{M.min():.3g}, {M.max():.3g}], outside the colour "
                         f"scale [{low:g}, {high:g}]; for matrices that are not attention "
                         "weights pass vmin=None, vmax=None")
    norm = Normalize(vmin=low, vmax=high if high > low else low + 1e-6)  # one shared scale
    for i in range(num_rows):
        for j in range(num_cols):
            ax = axes[i, j]
            image = ax.imshow(M[i, j], cmap=cmap, norm=norm, aspect="auto",
                              interpolation="nearest")
            ax.grid(False)
            if xticklabels is not None:
                ax.set_xticks(range(len(xticklabels)), xticklabels, rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(len(yticklabels)), yticklabels)
            if i == num_rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles is not None:
                ax.set_title(titles[j])
    fig.colorbar(image, ax=axes, shrink=0.6)
    return None if own_figure else fig


def smooth(values, width=20):
    """Moving average over `width` consecutive values (len(values) - width + 1 of them)."""
    values = torch.as_tensor(values, dtype=torch.float32)
    if not 1 <= width <= len(values):
        raise ValueError(f"width must be from 1 to len(values) = {len(values)}, got {width}")
    return values.unfold(0, width, 1).mean(dim=1)  # (len(values) - width + 1,)


def figure_to_png(fig, dpi=None):
    """Render a matplotlib Figure to PNG bytes (used by the widgets and the tests)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi or matplotlib.rcParams["savefig.dpi"])
    return buffer.getvalue()


def new_figure(figsize=None):
    """A Figure outside pyplot's state (nothing is shown until asked), in the book's style."""
    return Figure(figsize=figsize or matplotlib.rcParams["figure.figsize"], layout="constrained")


use_style()
