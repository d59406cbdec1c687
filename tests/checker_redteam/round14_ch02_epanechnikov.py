"""Round 14 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but right (O_)
and accepted (A_) solutions of check_epanechnikov_pool written from the exercise text alone; copied from
/work/redteam/round14/A/sols/ch02_epanechnikov.py.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: none in book/checks/ch02.py. W_10 (float32 path under no_grad), W_11 (grad mode
left on), W_16 (result requiring grad under no_grad), W_17 (TF32 flag) and W_18
(retain_grad on a non-leaf argument) are rejected by the lead's _core changes of round 14.
Renamed A_ by the lead's rulings: A_13 (NaN mapped to 0 by nan_to_num: NaN inputs are not
specified), A_15 (once_differentiable backward: second derivatives are not asked for);
A_12 (float(width)) is the writer's own A_ (the text only has float widths).
"""
import torch

CHECK = "check_epanechnikov_pool"


def _K(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return 0.75 * (1 - u**2) * (u.abs() <= 1)


def _div(K, values):
    S = K.sum(-1, keepdim=True)
    ok = S > 0
    w = K / torch.where(ok, S, torch.ones_like(S))
    return w @ values, w


def C_01_reference(queries, keys, values, width=1.0):
    return _div(_K(queries, keys, width), values)


def C_02_clamp_kernel(queries, keys, values, width=1.0):
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = 0.75 * (1 - u * u).clamp_min(0)
    S = K.sum(1, keepdim=True)
    w = K / S.masked_fill(S == 0, 1.0)
    return (w * values).sum(1), w


def O_03_add_indicator(queries, keys, values, width=1.0):
    """Guard S + (S == 0): exact, finite gradient."""
    K = _K(queries, keys, width)
    S = K.sum(-1, keepdim=True)
    w = K / (S + (S == 0).to(S.dtype))
    return w @ values, w


def O_04_sorted_keys(queries, keys, values, width=1.0):
    """Sorts the keys, computes on the sorted order, scatters the weight columns back."""
    order = keys.argsort()
    inv = order.argsort()
    K = _K(queries, keys[order], width)
    o, w = _div(K, values[order])
    return o, w[:, inv]


def O_05_no_grad_mask(queries, keys, values, width=1.0):
    """The window mask built under no_grad (it carries no gradient)."""
    u = (queries[:, None] - keys[None, :]) / width
    with torch.no_grad():
        inside = u.abs() <= 1
    K = torch.where(inside, 0.75 * (1 - u**2), torch.zeros_like(u))
    return _div(K, values)


def O_06_squared_distance_over_width_sq(queries, keys, values, width=1.0):
    d2 = (queries[:, None] - keys[None, :]) ** 2
    K = 0.75 * torch.relu(1 - d2 / width**2)
    return _div(K, values)


# ---------------------------------------------------------------- wrong
def W_07_cdist(queries, keys, values, width=1.0):
    """|q - k| via torch.cdist, whose default mode uses the matmul expansion for more than
    25 points: cancellation when coordinates are large (q, k ~ 1000, width 0.5, float32)."""
    d = torch.cdist(queries[:, None], keys[None, :].T)
    u = d / width
    K = 0.75 * (1 - u**2) * (u <= 1)
    return _div(K, values)


def W_08_eps_denominator(queries, keys, values, width=1.0):
    """K / (S + 1e-8): wrong when the only key in a window sits near its edge (S ~ 1e-8)."""
    K = _K(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-8)
    return w @ values, w


def W_09_threshold_guard(queries, keys, values, width=1.0):
    """Treats S < 1e-6 as an empty window: a query whose in-window keys are all near the edge
    gets zero weights instead of weights summing to 1."""
    K = _K(queries, keys, width)
    S = K.sum(-1, keepdim=True)
    ok = S > 1e-6
    w = torch.where(ok, K / torch.where(ok, S, torch.ones_like(S)), torch.zeros_like(K))
    return w @ values, w


def W_10_no_grad_fast_path(queries, keys, values, width=1.0):
    """Under plain torch.no_grad (not inference_mode) computes float64 inputs in float32."""
    if not torch.is_grad_enabled() and not torch.is_inference_mode_enabled() and queries.dtype == torch.float64:
        o, w = C_01_reference(queries.float(), keys.float(), values.float(), width)
        return o.double(), w.double()
    return C_01_reference(queries, keys, values, width)


def W_11_grad_mode_leak(queries, keys, values, width=1.0):
    """Mask under set_grad_enabled(False) then set_grad_enabled(True): under the caller's
    torch.no_grad, grad mode is left on after the call."""
    u = (queries[:, None] - keys[None, :]) / width
    torch.set_grad_enabled(False)
    inside = u.abs() <= 1
    torch.set_grad_enabled(True)
    return _div(torch.where(inside, 0.75 * (1 - u**2), torch.zeros_like(u)), values)


def A_12_float_width(queries, keys, values, width=1.0):
    """(A_: the checker and text use a float width.) float(width): a tensor width that requires grad (a learned width, as chapter 2 learns
    w) gets no gradient."""
    return C_01_reference(queries, keys, values, float(width))


def A_13_nan_to_num_output(queries, keys, values, width=1.0):
    """(A_ by the lead's round-14 ruling: NaN inputs are not specified by the exercise text, so what a NaN row maps to is not judged.) nan_to_num on the result: NaN values/queries come back as 0 instead of NaN."""
    o, w = C_01_reference(queries, keys, values, width)
    return torch.nan_to_num(o), torch.nan_to_num(w)


def W_14_reciprocal_width(queries, keys, values, width=1.0):
    """u = (q - k) * (1 / width) in float32 for float64 (reciprocal computed as a float32
    tensor): float64 accuracy lost."""
    r = torch.tensor(1.0 / width, dtype=torch.float32) if not torch.is_tensor(width) else 1 / width.float()
    u = (queries[:, None] - keys[None, :]) * r
    K = 0.75 * (1 - u**2) * (u.abs() <= 1)
    return _div(K, values)


def A_15_double_backward_lost(queries, keys, values, width=1.0):
    """(A_ by the lead's round-14 ruling: the exercise does not ask for second derivatives; first gradients are right.) Division through a once_differentiable Function: first gradients right, second
    derivatives not."""
    K = _K(queries, keys, width)
    S = K.sum(-1, keepdim=True)
    w = _SafeDiv.apply(K, S)
    return w @ values, w


class _SafeDiv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, K, S):
        Sg = torch.where(S > 0, S, torch.ones_like(S))
        ctx.save_for_backward(K, Sg)
        return K / Sg

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        K, Sg = ctx.saved_tensors
        return g / Sg, (-(g * K) / Sg**2).sum(-1, keepdim=True)


def W_16_output_requires_grad_always(queries, keys, values, width=1.0):
    """Adds a zero leaf requiring grad: outputs require grad even when no input does and
    under the caller's torch.no_grad."""
    c = torch.zeros((), dtype=values.dtype, requires_grad=True)
    with torch.enable_grad():
        return C_01_reference(queries, keys, values + c, width)


def W_17_tf32_left_on(queries, keys, values, width=1.0):
    """Leaves torch.backends.cuda.matmul.allow_tf32 = True (caller state)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    return C_01_reference(queries, keys, values, width)


def W_18_retain_grad_left(queries, keys, values, width=1.0):
    """Leaves values.retain_grad() from debugging: a non-leaf argument keeps its .grad."""
    if values.requires_grad and not values.is_leaf:
        values.retain_grad()
    return C_01_reference(queries, keys, values, width)


def W_19_strict_window_mask_on_distance(queries, keys, values, width=1.0):
    """Window test |q - k| < width in the *input* dtype but kernel from float32 u: mixes
    precisions; for float64 the kernel value loses accuracy."""
    d = queries[:, None] - keys[None, :]
    u = d.float() / float(width)
    K = (0.75 * (1 - u**2)).to(d.dtype) * (d.abs() < abs(float(width)))
    return _div(K, values)


def W_20_weights_half_sum(queries, keys, values, width=1.0):
    """Row sums in float16 'to save memory' (weights then divided in input dtype)."""
    K = _K(queries, keys, width)
    S = K.half().sum(-1, keepdim=True).to(K.dtype)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_21_torch_tensor_copy(queries, keys, values, width=1.0):
    """torch.tensor(keys) 'to make sure it is a tensor': a detached copy, so keys get no
    gradient (UserWarning aside)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keys = torch.tensor(keys)
    return C_01_reference(queries, keys, values, width)


def W_22_clamp_u(queries, keys, values, width=1.0):
    """Clamps u to [-1, 1] before the polynomial (instead of masking): outside keys get
    K = 0 too, but the gradient at... values equal; then normalises with S.clamp_min(1e-12)
    -- wrong: queries exactly at distance > width get K=0 fine; this one clamps 1 - u^2 at 0
    via abs(): K = 0.75 * |1 - u^2| for |u| > 1 is positive (a sign slip)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u**2).abs() * (u.abs() <= 1.5)
    return _div(K, values)


def O_23_cdist_exact_mode(queries, keys, values, width=1.0):
    """|q - k| via torch.cdist with the exact (no matmul) mode."""
    d = torch.cdist(queries[:, None], keys[:, None], compute_mode="donot_use_mm_for_euclid_dist")
    u = d / width
    K = 0.75 * (1 - u**2) * (u <= 1)
    return _div(K, values)


def O_24_transposed_weights(queries, keys, values, width=1.0):
    """Builds K key-major (n, q) and returns the transposed view of the weights."""
    u = (keys[:, None] - queries[None, :]) / width
    KT = 0.75 * (1 - u**2) * (u.abs() <= 1)
    S = KT.sum(0, keepdim=True)
    wT = KT / torch.where(S > 0, S, torch.ones_like(S))
    return values @ wT, wT.T
