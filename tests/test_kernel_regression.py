"""Chapter 2: the data, the kernels, Nadaraya-Watson pooling (non-parametric and parametric),
leave-one-out keys, the entropy helper and the widget's compute function."""
import math

import pytest
import torch

from book import kernel_regression as kr
from book.attention import attention_pool, entropy, gaussian_score
from book.plot import new_figure


@pytest.fixture(scope="module")
def data():
    return kr.make_data()


def test_data_is_deterministic_sorted_and_follows_the_formula(data):
    x_train, y_train, x_test, y_test = data
    again = kr.make_data()
    assert all(torch.equal(a, b) for a, b in zip(data, again))
    assert x_train.shape == y_train.shape == (50,) and x_test.shape == y_test.shape == (50,)
    assert torch.all(x_train[1:] >= x_train[:-1]) and 0 <= x_train.min() and x_train.max() < 5
    torch.testing.assert_close(y_test, 2 * torch.sin(x_test) + x_test ** 0.8)
    noise = y_train - kr.true_function(x_train)
    assert 0.35 < noise.std().item() < 0.65, "noise with standard deviation 0.5"
    assert not torch.equal(kr.make_data(seed=1)[0], x_train)


def test_kernels_match_their_formulas():
    u = torch.tensor([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    torch.testing.assert_close(kr.gaussian(u), torch.exp(-u ** 2 / 2))
    assert kr.boxcar(u).tolist() == [0, 1, 1, 1, 1, 1, 0]
    torch.testing.assert_close(kr.epanechnikov(u),
                               torch.tensor([0, 0, 0.5625, 0.75, 0.5625, 0, 0]))


def test_gaussian_pooling_is_the_softmax_of_gaussian_scores(data):
    x_train, y_train, x_test, _ = data
    y_hat, weights = kr.nadaraya_watson(x_test, x_train, y_train, kr.gaussian)
    y_attn, w_attn = attention_pool(x_test[:, None], x_train[:, None], y_train[:, None],
                                    gaussian_score)
    torch.testing.assert_close(weights, w_attn, atol=1e-6, rtol=0)
    torch.testing.assert_close(y_hat, y_attn[:, 0], atol=1e-5, rtol=0)
    # the width h is the score -(q - k)^2 / (2 h^2)
    _, narrow = kr.nadaraya_watson(x_test, x_train, y_train, kr.gaussian, width=0.5)
    scores = -((x_test[:, None] - x_train[None, :]) ** 2) / (2 * 0.5 ** 2)
    torch.testing.assert_close(narrow, torch.softmax(scores, -1), atol=1e-6, rtol=0)


@pytest.mark.parametrize("kernel", list(kr.KERNELS))
def test_weights_are_on_the_simplex_and_empty_windows_give_zeros(kernel):
    keys, values = torch.arange(0.0, 4.0, 0.5), torch.arange(8.0)
    queries = torch.tensor([0.2, 1.7, 3.9, 50.0])          # 50: far from every key
    outputs, weights = kr.nadaraya_watson(queries, keys, values, kr.KERNELS[kernel], 0.6)
    assert weights.shape == (4, 8) and outputs.shape == (4,)
    assert torch.isfinite(weights).all() and (weights >= 0).all()
    torch.testing.assert_close(weights[:3].sum(-1), torch.ones(3))
    torch.testing.assert_close(outputs, weights @ values)
    if kernel != "gaussian":  # compact support: the far query has no key in its window
        assert weights[3].sum() == 0 and outputs[3] == 0


def test_per_query_keys_and_the_parametric_model_agree_with_the_kernel_form(data):
    x_train, y_train, x_test, _ = data
    model = kr.NWKernelRegression(w=2.0)
    with torch.no_grad():
        y_model = model(x_test, x_train, y_train)
    y_kernel, w_kernel = kr.nadaraya_watson(x_test, x_train, y_train, kr.gaussian, width=0.5)
    torch.testing.assert_close(model.attention_weights, w_kernel, atol=1e-6, rtol=0)
    torch.testing.assert_close(y_model, y_kernel, atol=1e-5, rtol=0)
    keys, values = kr.leave_one_out(x_train, y_train)
    with torch.no_grad():
        y_loo = model(x_train, keys, values)
    y_kernel_loo, _ = kr.nadaraya_watson(x_train, keys, values, kr.gaussian, width=0.5)
    torch.testing.assert_close(y_loo, y_kernel_loo, atol=1e-5, rtol=0)


def test_leave_one_out_drops_exactly_the_query_itself():
    x, y = torch.tensor([0.0, 1.0, 2.0, 3.0]), torch.tensor([10.0, 11.0, 12.0, 13.0])
    keys, values = kr.leave_one_out(x, y)
    assert keys.tolist() == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]
    assert values.tolist() == [[11, 12, 13], [10, 12, 13], [10, 11, 13], [10, 11, 12]]


def test_training_is_deterministic_and_finds_a_width_near_the_best_leave_one_out(data):
    x_train, y_train, x_test, y_test = data
    runs = []
    for _ in range(2):
        model = kr.NWKernelRegression(1.0)
        losses = kr.train(model, x_train, y_train, num_epochs=50, lr=3.0)
        runs.append((model.w.item(), losses))
    assert runs[0] == runs[1], "same data, same start, same steps: same result"
    w, losses = runs[0]
    assert losses[-1] < losses[0] and all(b <= a + 1e-6 for a, b in zip(losses, losses[1:]))
    # the leave-one-out loss on a grid of w is lowest near the learned w
    keys, values = kr.leave_one_out(x_train, y_train)
    grid = torch.linspace(1, 10, 91)
    with torch.no_grad():
        loo = [kr.mse(kr.NWKernelRegression(g)(x_train, keys, values), y_train) for g in grid]
    assert abs(grid[min(range(91), key=loo.__getitem__)].item() - w) < 0.3
    # the chapter's claims: lower test loss and sharper weights than w = 1
    with torch.no_grad():
        trained = kr.NWKernelRegression(w)
        y_param = trained(x_test, x_train, y_train)
        y_one = kr.NWKernelRegression(1.0)(x_test, x_train, y_train)
    assert kr.mse(y_param, y_test) < kr.mse(y_one, y_test)


def test_without_leave_one_out_a_larger_w_always_looks_better(data):
    x_train, y_train, _, _ = data
    with torch.no_grad():
        own = [kr.mse(kr.NWKernelRegression(w)(x_train, x_train, y_train), y_train)
               for w in (1.0, 4.0, 16.0, 64.0, 256.0)]
    assert all(b < a for a, b in zip(own, own[1:])) and own[-1] < 0.01


def test_entropy_of_uniform_one_hot_and_zero_rows():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0, 0, 0], [0, 0, 0, 0]])
    torch.testing.assert_close(entropy(weights), torch.tensor([math.log(4), 0.0, 0.0]))


def test_fit_is_the_widgets_compute_function(data):
    y_hat, weights, loss, mean_entropy = kr.fit(0.3, "gaussian", data)
    assert y_hat.shape == (50,) and weights.shape == (50, 50)
    assert loss == pytest.approx(kr.mse(y_hat, data[3]))
    assert mean_entropy == pytest.approx(entropy(weights).mean().item())
    wide, narrow = kr.fit(4.0)[3], kr.fit(0.05)[3]
    assert narrow < mean_entropy < wide < math.log(50)
    assert kr.fit(0.3)[2] < kr.fit(4.0)[2], "a good width beats a width near average pooling"
    with pytest.raises(KeyError):
        kr.fit(1.0, "cosine")


def test_draw_fit_draws_a_curve_and_a_heatmap_and_returns_a_caption():
    fig = new_figure((7.5, 2.8))
    caption = kr.draw_fit(fig, 0.5, "epanechnikov")
    assert "test loss" in caption and "entropy" in caption and "keys in use" in caption
    axes = fig.get_axes()
    assert len(axes) == 3  # the curve, the heatmap, its colour bar
    image = next(im for ax in axes for im in ax.get_images())
    assert image.get_clim() == (0.0, 1.0), "one fixed 0..1 scale in every frame"
    assert "no key in their window" in kr.draw_fit(new_figure((7.5, 2.8)), 0.05, "boxcar")


def test_effective_keys_counts_the_keys_a_row_spreads_over():
    weights = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0, 0, 0], [0.5, 0.5, 0, 0],
                            [0, 0, 0, 0]])
    torch.testing.assert_close(kr.effective_keys(weights), torch.tensor([4.0, 1.0, 2.0, 0.0]))
    # wider kernels spread over more keys; the chapter's numbers at w = 1 and at its learned w
    data = kr.make_data()
    at = {w: kr.effective_keys(kr.fit(w, "gaussian", data)[1]).mean().item()
          for w in (0.05, 0.25, 1.0, 4.0)}
    assert at[0.05] < at[0.25] < at[1.0] < at[4.0] <= 50
    assert 28 < at[1.0] < 29 and 8 < at[0.25] < 10


def test_the_sqrt_colour_map_is_monotone_and_spans_reds():
    import numpy as np
    rgb = kr.SQRT_REDS(np.linspace(0, 1, 11))[:, :3]
    assert (np.diff(rgb.sum(axis=1)) <= 1e-9).all(), "darker as the weight grows"
    assert kr.SQRT_REDS(0.02)[1] < 0.9, "a weight of 1/50 is visibly coloured, not white"


def test_leave_one_out_loss_is_the_error_against_f_plus_the_noise(data):
    """Chapter 2: the leave-one-out loss estimates the test loss plus the noise variance."""
    x_train, y_train, x_test, y_test = data
    keys, values = kr.leave_one_out(x_train, y_train)
    f_train = kr.true_function(x_train)
    noise = kr.mse(y_train, f_train)
    with torch.no_grad():
        model = kr.NWKernelRegression(4.0)
        y_loo = model(x_train, keys, values)
        test = kr.mse(model(x_test, x_train, y_train), y_test)
    loo, clean = kr.mse(y_loo, y_train), kr.mse(y_loo, f_train)
    assert abs(loo - (clean + noise)) < 0.02 and loo > 5 * test and abs(clean - test) < 0.02


def test_the_estimate_is_pulled_into_the_data_at_the_boundary(data):
    x_train, y_train, x_test, y_test = data
    _, weights = kr.nadaraya_watson(x_test, x_train, y_train)
    centres = weights @ x_train                       # weighted centre of the keys
    assert centres[0] > 0.5 and abs(centres[25] - 2.5) < 0.3 and centres[49] < 4.5


def test_loss_curve_equals_the_model_at_each_w(data):
    x_train, y_train, x_test, y_test = data
    ws = [0.3, 1.0, 3.9, 40.0]
    keys, values = kr.leave_one_out(x_train, y_train)
    curve = kr.loss_curve(ws, x_train, keys, values, y_train)              # leave-one-out
    test = kr.loss_curve(ws, x_test, x_train, y_train, y_test)             # shared keys
    assert curve.shape == test.shape == (4,)
    for w, loo, t in zip(ws, curve, test):
        model = kr.NWKernelRegression(w)
        with torch.no_grad():
            assert math.isclose(loo.item(), kr.mse(model(x_train, keys, values), y_train),
                                rel_tol=1e-5)
            assert math.isclose(t.item(), kr.mse(model(x_test, x_train, y_train), y_test),
                                rel_tol=1e-5)
    double = kr.loss_curve(ws, *(t.double() for t in (x_test, x_train, y_train, y_test)))
    assert double.dtype == torch.float64
    torch.testing.assert_close(double.float(), test, rtol=1e-5, atol=1e-7)
