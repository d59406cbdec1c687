"""book.device and book.plot."""
import matplotlib
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import book
from book import plot


def test_try_gpu_falls_back_to_cpu_like_d2l():
    from d2l import torch as d2l

    assert book.try_gpu() == d2l.try_gpu()
    assert book.try_gpu(10_000) == torch.device("cpu")  # a GPU that does not exist
    # d2l 1.0.3 returns [] without a GPU; we return [cpu], as the d2l book's text describes,
    # so that `devices[0]` works everywhere. With GPUs both list the same devices.
    assert book.try_all_gpus() == (d2l.try_all_gpus() or [torch.device("cpu")])
    assert all(isinstance(d, torch.device) for d in book.try_all_gpus())


def test_set_seed_repeats_torch_numpy_and_python():
    import random

    book.set_seed(3)
    first = (torch.randn(4), np.random.rand(2), random.random())
    book.set_seed(3)
    second = (torch.randn(4), np.random.rand(2), random.random())
    assert torch.equal(first[0], second[0]) and np.array_equal(first[1], second[1]) and first[2] == second[2]
    with pytest.raises(TypeError, match="int"):
        book.set_seed(1.5)


def test_style_is_applied_on_import():
    assert matplotlib.rcParams["axes.spines.top"] is False
    assert matplotlib.rcParams["svg.hashsalt"] == "attention-course"


def test_show_heatmaps_draws_one_panel_per_matrix_with_a_shared_scale():
    weights = torch.rand(2, 3, 4, 5)
    weights[1, 2] *= 10  # one panel with a much larger range
    fig = plot.show_heatmaps(weights, "keys", "queries", titles=["a", "b", "c"], fig=Figure(),
                             vmin=None, vmax=None)
    images = [im for ax in fig.axes for im in ax.images]
    assert len(images) == 6
    limits = {im.get_clim() for im in images}
    assert len(limits) == 1, "every panel must share one colour scale"
    assert limits.pop() == pytest.approx((weights.min().item(), weights.max().item()))
    assert len(fig.axes) == 7  # six panels and one colour bar
    np.testing.assert_allclose(images[-1].get_array(), weights[1, 2].numpy())


def test_show_heatmaps_uses_a_fixed_zero_to_one_scale_for_weights():
    """Near-uniform weights must look uniform: the scale is 0..1 whatever the data span."""
    weights = torch.full((1, 2, 3, 8), 0.125)
    weights[0, 1, 0, 0] = 0.128
    fig = plot.show_heatmaps(weights, "keys", "queries", fig=Figure())
    assert {im.get_clim() for ax in fig.axes for im in ax.images} == {(0.0, 1.0)}
    with pytest.raises(ValueError, match="vmin=None, vmax=None"):
        plot.show_heatmaps(torch.full((1, 1, 2, 2), 3.0), "k", "q", fig=Figure())


def test_smooth_is_a_moving_average():
    torch.testing.assert_close(plot.smooth([1.0, 2.0, 3.0, 4.0], width=2),
                               torch.tensor([1.5, 2.5, 3.5]))
    with pytest.raises(ValueError, match="width"):
        plot.smooth([1.0, 2.0], width=3)


def test_show_heatmaps_matches_d2l_call_and_shows_a_pyplot_figure():
    import matplotlib.pyplot as plt

    plt.close("all")
    assert plot.show_heatmaps(torch.eye(3).reshape(1, 1, 3, 3), xlabel="k", ylabel="q") is None
    assert len(plt.get_fignums()) == 1
    plt.close("all")


@pytest.mark.parametrize("bad, message", [
    (torch.rand(3, 3), "4-D"),
    (torch.full((1, 1, 2, 2), float("nan")), "NaN"),
])
def test_show_heatmaps_rejects_bad_input_clearly(bad, message):
    with pytest.raises(ValueError, match=message):
        plot.show_heatmaps(bad, "k", "q", fig=Figure())


def test_show_heatmaps_checks_titles_and_accepts_tick_labels():
    with pytest.raises(ValueError, match="titles"):
        plot.show_heatmaps(torch.rand(1, 2, 2, 2), "k", "q", titles=["only one"], fig=Figure())
    fig = plot.show_heatmaps(torch.rand(1, 1, 2, 3), "k", "q", fig=Figure(),
                             xticklabels=["a", "b", "c"], yticklabels=["x", "y"])
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["a", "b", "c"]


def test_to_numpy_handles_grad_and_dtype():
    x = torch.ones(2, requires_grad=True, dtype=torch.float64) * 2
    assert plot.to_numpy(x).dtype == np.float32


def test_figure_to_png_is_a_png():
    fig = plot.new_figure((2, 2))
    fig.add_subplot().plot([0, 1])
    assert plot.figure_to_png(fig).startswith(b"\x89PNG")
