"""Round 14 red team (writer C, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round14/C/sols/ch05_transpose_output.py (Round 14, writer C, check_transpose_output: undo transpose_qkv (heads back into features).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: none in the checker. W_13 (backward detached, no
second derivative) renamed A_13 (the lead's ruling: double backward is not asked for). The
global-state entries (W_15-W_19, W_22, W_23) are rejected by _core on main.
"""
# flake8: noqa
import random

import numpy as np
import torch

CHECK = "check_transpose_output"


def _ref(X, h):
    X = X.reshape(-1, h, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def C_02_unflatten_transpose(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_03_cat_heads(X, num_heads):
    """Concatenate the heads along the features: exact."""
    Y = X.unflatten(0, (-1, num_heads))                  # (b, h, n, p)
    return torch.cat(Y.unbind(1), dim=-1)


def O_04_gather_rows_index_under_no_grad(X, num_heads):
    """Row index (b, h) built under no_grad, then advanced indexing: exact."""
    bh, n, p = X.shape
    b = bh // num_heads
    with torch.no_grad():
        rows = torch.arange(bh, device=X.device).reshape(b, num_heads)
    Y = X[rows]                                          # (b, h, n, p)
    return Y.permute(0, 2, 1, 3).reshape(b, n, num_heads * p)


def O_05_sets_and_restores_default_dtype(X, num_heads):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return _ref(X, num_heads)
    finally:
        torch.set_default_dtype(old)


def O_06_movedim(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, num_heads, n, p).movedim(1, 2).reshape(bh // num_heads, n, -1)


def O_07_preallocate_and_copy(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    out = X.new_empty(b, n, num_heads * p)
    Y = X.reshape(b, num_heads, n, p)
    for i in range(num_heads):
        out[:, :, i * p:(i + 1) * p] = Y[:, i]
    return out


def O_08_inference_mode_for_shape_only(X, num_heads):
    """Computes the target shape under inference_mode (only ints come out): exact."""
    with torch.inference_mode():
        shape = tuple(int(s) for s in torch.tensor(X.shape))
    bh, n, p = shape
    return _ref(X, num_heads).reshape(bh // num_heads, n, num_heads * p)


# ---------------------------------------------------------------- wrong
def W_10_head_major_batch(X, num_heads):
    """Reads the rows as (head, batch) instead of (batch, head): any batch > 1."""
    X = X.reshape(num_heads, -1, X.shape[1], X.shape[2]).permute(1, 2, 0, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def W_11_no_permute(X, num_heads):
    """Reshape only: (b*h, n, p) -> (b, n, h*p) straight, no permute: any n > 1."""
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, h):
        ctx.shape = X.shape
        return _ref(X, h).clone()

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


def W_12_custom_function_wrong_backward(X, num_heads):
    """Right values; hand-written backward reshapes the gradient back without the permute:
    dL/dX wrong for n > 1, h > 1."""
    return _WrongBackward.apply(X, num_heads)


class _OnceBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, h):
        ctx.h, ctx.shape = h, X.shape
        return _ref(X, h).clone()

    @staticmethod
    def backward(ctx, g):
        bh, n, p = ctx.shape
        b = bh // ctx.h
        return g.reshape(b, n, ctx.h, p).permute(0, 2, 1, 3).reshape(bh, n, p).detach(), None


def A_13_backward_detached_second_order(X, num_heads):
    """Right values and right first gradient, but the backward detaches: a second derivative
    through it (e.g. a gradient penalty, create_graph=True) is silently 0 / not connected.
    A_ (the lead's ruling for round 14): the exercise does not ask for second derivatives."""
    return _OnceBackward.apply(X, num_heads)


def A_14_view_fails_non_contiguous(X, num_heads):
    """.view instead of reshape. A_: it never fails here (splits one axis only, then a
    contiguous copy)."""
    bh, n, p = X.shape
    b = bh // num_heads
    return X.view(b, num_heads, n, p).transpose(1, 2).contiguous().view(b, n, -1)


def W_15_forces_grad_mode_on(X, num_heads):
    """torch.set_grad_enabled(True) inside: under the caller's no_grad the result of an X that
    requires grad requires grad, and the caller's block records graphs afterwards."""
    torch.set_grad_enabled(True)
    return _ref(X, num_heads)


def W_16_numpy_global_rng_self_test(X, num_heads):
    """A self-test on a probe from NumPy's global generator: advances the caller's stream."""
    h = num_heads
    probe = torch.from_numpy(np.random.rand(2 * h, 3, 2))
    assert _ref(probe, h).shape == (2, 3, 2 * h)
    return _ref(X, num_heads)


def W_17_python_random_self_test(X, num_heads):
    """Same with Python's `random`: advances the caller's seeded stream."""
    k = random.randint(1, 2)
    assert _ref(torch.zeros(k * num_heads, 2, 2), num_heads).shape[0] == k
    return _ref(X, num_heads)


def W_18_rewinds_torch_generator(X, num_heads):
    """Draws a probe from torch's generator, then reseeds with initial_seed() to 'undo' it: the
    caller's generator is rewound to its seed (later draws repeat earlier ones)."""
    torch.rand(2)
    torch.manual_seed(torch.initial_seed())
    return _ref(X, num_heads)


def W_19_retain_grad_on_argument(X, num_heads):
    """X.retain_grad() left behind: a non-leaf X of the caller keeps a .grad after backward."""
    if X.requires_grad:
        X.retain_grad()
    return _ref(X, num_heads)


def W_20_float_cast(X, num_heads):
    """Casts to float first ('attention outputs are float'): float64 X rounded to float32."""
    return _ref(X.float(), num_heads).to(X.dtype)




def W_22_anomaly_mode_left_on(X, num_heads):
    """Debugging left in: anomaly detection on for the caller; its backward raising on NaN."""
    torch.autograd.set_detect_anomaly(True)
    return _ref(X, num_heads)


def W_23_flush_denormal(X, num_heads):
    """Turns flush-denormal on for the caller and leaves it: 1e-40 * 1 == 0 afterwards."""
    torch.set_flush_denormal(True)
    return _ref(X, num_heads)


def A_24_keeps_reference_of_input_for_stats(X, num_heads):
    """Keeps every X in a module-level list (for 'statistics'): the caller's tensors (and their
    graphs) are never freed. A_-like: memory only."""
    _KEEP.append(X)
    return _ref(X, num_heads)


_KEEP = []
