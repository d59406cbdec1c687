"""Chapter 2: attention pooling as Nadaraya-Watson kernel regression.

The data (y = 2 sin(x) + x^0.8 + noise), three kernels, non-parametric pooling
`nadaraya_watson`, the parametric `NWKernelRegression` with a learnable w trained on
leave-one-out keys, its loss for many w at once (`loss_curve`), the effective number of keys
of a row of weights, and the widget's function `fit`.
Inputs are scalars, so queries, keys and values are 1-D tensors.
"""
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from torch import nn

from .attention import entropy
from .plot import show_heatmaps

# Reds with its colour proportional to sqrt(weight): one fixed 0..1 scale on which the
# weights of about 1/50 that 50 keys share are still visible (plain Reds leaves them near
# white).
SQRT_REDS = ListedColormap(plt.get_cmap("Reds")(np.sqrt(np.linspace(0, 1, 256))),
                           name="Reds_sqrt")


# -- The data --------------------------------------------------------------------------

def true_function(x):
    """The function the regression should recover: f(x) = 2 sin(x) + x^0.8."""
    return 2 * torch.sin(x) + x ** 0.8


def make_data(n_train=50, noise=0.5, seed=0):
    """Noisy training pairs on [0, 5), x sorted, and 50 test inputs on a grid.

    Returns x_train, y_train (n_train,) and x_test, y_test (50,). y_test = f(x_test) is
    noise-free, so a test loss measures how far the fitted curve is from f itself.
    """
    g = torch.Generator().manual_seed(seed)    # its own random stream: the same data
    x_train = torch.sort(torch.rand(n_train, generator=g) * 5).values     # (n_train,)
    y_train = true_function(x_train) + noise * torch.randn(n_train, generator=g)
    x_test = torch.arange(0, 5, 0.1)                                       # (50,)
    return x_train, y_train, x_test, true_function(x_test)


# -- Kernels and non-parametric pooling ------------------------------------------------

def gaussian(u):
    """Gaussian kernel exp(-u^2 / 2); the constant 1/sqrt(2 pi) cancels in the ratio."""
    return torch.exp(-u ** 2 / 2)


def boxcar(u):
    """Boxcar kernel: 1 inside the window |u| <= 1, 0 outside (a moving average)."""
    return (u.abs() <= 1).to(u.dtype)


def epanechnikov(u):
    """Epanechnikov kernel 3/4 (1 - u^2) inside |u| <= 1, 0 outside."""
    return 0.75 * (1 - u ** 2).clamp_min(0)


KERNELS = {"gaussian": gaussian, "boxcar": boxcar, "epanechnikov": epanechnikov}


def nadaraya_watson(queries, keys, values, kernel=gaussian, width=1.0):
    """f(q) = sum_i K((q - k_i) / width) v_i / sum_j K((q - k_j) / width).

    queries: (num_queries,); keys and values: (num_keys,), shared by every query, or
    (num_queries, num_keys), one row per query. Returns (outputs (num_queries,), weights
    (num_queries, num_keys)). A query with no key inside a compact kernel's window gets
    all-zero weights and output 0, not NaN.
    """
    diffs = queries.reshape(-1, 1) - keys                     # (num_queries, num_keys)
    K = kernel(diffs / width)                                 # (num_queries, num_keys)
    total = K.sum(dim=-1, keepdim=True)                       # (num_queries, 1)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)  # rows sum to 1 (or 0)
    return (weights * values).sum(dim=-1), weights            # (num_queries,), weights


# -- Parametric pooling ----------------------------------------------------------------

class NWKernelRegression(nn.Module):
    """Parametric Nadaraya-Watson pooling: weights softmax(-((q - k_i) w)^2 / 2).

    w is learned. w = 1 is the non-parametric Gaussian model; a larger w is a narrower
    kernel (width 1/w).
    """

    def __init__(self, w=1.0):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(float(w)))

    def forward(self, queries, keys, values):
        # keys and values: (num_keys,), shared by every query, or (num_queries, num_keys)
        diffs = queries.reshape(-1, 1) - keys                   # (num_queries, num_keys)
        scores = -((diffs * self.w) ** 2) / 2                   # (num_queries, num_keys)
        self.attention_weights = torch.softmax(scores, dim=-1)  # (num_queries, num_keys)
        return (self.attention_weights * values).sum(dim=-1)    # (num_queries,)


def leave_one_out(x_train, y_train):
    """Keys and values for training query i: every training pair except pair i."""
    n = len(x_train)
    others = ~torch.eye(n, dtype=torch.bool, device=x_train.device)  # (n, n), i != j
    keys = x_train.expand(n, n)[others].reshape(n, n - 1)             # (n, n - 1)
    values = y_train.expand(n, n)[others].reshape(n, n - 1)           # (n, n - 1)
    return keys, values


def train(model, x_train, y_train, num_epochs=50, lr=3.0):
    """Fit `model` by full-batch SGD on the squared error with leave-one-out keys.

    One epoch is one gradient step on all training points. Returns the epoch losses.
    """
    keys, values = leave_one_out(x_train, y_train)                    # (n, n - 1) each
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(num_epochs):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x_train, keys, values), y_train)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def loss_curve(ws, queries, keys, values, targets):
    """The mean squared error of NWKernelRegression(w) for every w in `ws` at once.

    Shapes as in NWKernelRegression.forward; targets: (num_queries,). Returns (len(ws),),
    in the dtype of the queries (pass float64 tensors to locate a minimum on a fine grid).
    """
    w = torch.as_tensor(ws, dtype=queries.dtype, device=queries.device).reshape(-1, 1, 1)
    diffs = queries.reshape(-1, 1) - keys                         # (num_queries, num_keys)
    weights = torch.softmax(-((diffs * w) ** 2) / 2, dim=-1)     # (len(ws), queries, keys)
    predictions = (weights * values).sum(dim=-1)                 # (len(ws), num_queries)
    return ((predictions - targets) ** 2).mean(dim=-1)           # (len(ws),)


# -- Measuring and drawing -------------------------------------------------------------

def mse(prediction, target):
    """Mean squared error, as a Python float."""
    return nn.functional.mse_loss(prediction, target).item()


def effective_keys(weights):
    """How many keys each row of weights spreads over: 1 / sum_i alpha_i^2, per row.

    k for weights spread evenly over k keys, 1 for all weight on one key; 0 for an empty
    row (a compact kernel's window with no key in it).
    """
    squares = (weights ** 2).sum(dim=-1)                            # (num_queries,)
    return torch.where(squares > 0, 1 / squares.clamp_min(1e-30), 0.0)  # (num_queries,)


def fit(width, kernel="gaussian", data=None):
    """Non-parametric pooling of the test inputs at one kernel width (for the widget).

    Returns (predictions (num_queries,), weights (num_queries, num_keys), test loss, mean
    entropy): the test inputs are the queries, the training inputs the keys.
    """
    x_train, y_train, x_test, y_test = make_data() if data is None else data
    y_hat, weights = nadaraya_watson(x_test, x_train, y_train, KERNELS[kernel], width)
    return y_hat, weights, mse(y_hat, y_test), entropy(weights).mean().item()


def plot_fit(ax, data, predictions, title=""):
    """The training data, the true function and one or more fitted curves."""
    x_train, y_train, x_test, y_test = (t.cpu() for t in data)
    ax.plot(x_test, y_test, color="k", linestyle="--", label="truth f(x)")
    for label, y_hat in predictions.items():
        ax.plot(x_test, y_hat.detach().cpu(), label=label)
    ax.plot(x_train, y_train, "o", color="C7", alpha=0.5, markersize=3,
            label="training data")
    ax.set(xlabel="x", ylabel="y", xlim=(0, 5), ylim=(-1.5, 6), title=title)
    ax.legend(fontsize=8, loc="upper right")  # above the data on the right: covers none


def draw_fit(fig, width, kernel="gaussian"):
    """One widget frame: the fitted curve (left) and its attention heatmap (right)."""
    data = make_data()
    y_hat, weights, loss, mean_entropy = fit(width, kernel, data)
    left, right = fig.subfigures(1, 2, width_ratios=[1.25, 1])
    plot_fit(left.subplots(), data, {f"{kernel}, width {width:g}": y_hat},
             title=f"test loss {loss:.3f}")
    show_heatmaps(weights.reshape(1, 1, *weights.shape), titles=["attention weights"],
                  xlabel="training inputs (sorted)", ylabel="test inputs (sorted)",
                  fig=right, cmap=SQRT_REDS)
    filled = weights.sum(dim=-1) > 0                     # rows with a key in the window
    keys_in_use = effective_keys(weights[filled]).mean().item()
    caption = (f"width {width:g}, {kernel} kernel: test loss {loss:.3f}; per query, about "
               f"{keys_in_use:.1f} of the 50 keys in use, "
               f"mean entropy {mean_entropy:.2f} nats")
    if not filled.all():
        caption += (f"\n{int((~filled).sum())} test inputs have no key in their window: "
                    "weights all 0, prediction 0")
    return caption
