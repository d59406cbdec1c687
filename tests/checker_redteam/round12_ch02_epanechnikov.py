"""Round 12 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/ch02_epanechnikov.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Hole fixed: W_15 (a kernel matrix kept between calls, keyed on the shapes, the width,
sum(queries) and keys[0]): a second call under no_grad with the same queries and first key
but the other keys moved (a condition of the matrix's call).
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _K(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return 0.75 * (1 - u ** 2).clamp(min=0)


# ---------------- correct / odd ----------------
def C_01_guarded_division(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(dim=1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_02_no_three_quarters(queries, keys, values, width=1.0):
    """The 3/4 cancels in the normalisation; relu(1 - u^2)."""
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    s = K.sum(dim=1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w * values).sum(1), w


def O_03_factored_inplace_mask(queries, keys, values, width=1.0):
    """(1-u)(1+u), outside-window entries zeroed by an in-place masked assignment."""
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = 0.75 * (1 - u) * (1 + u)
    K[u.abs() >= 1] = 0
    s = K.sum(1, keepdim=True)
    w = K / s.masked_fill(s == 0, 1)
    return torch.mv(w, values), w


# ---------------- wrong ----------------
def W_04_where_after_division(queries, keys, values, width=1.0):
    """torch.where(s > 0, K / s, 0): forward right, NaN gradient on empty windows."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_05_index_assign_nan_rows(queries, keys, values, width=1.0):
    """Divide, then overwrite the empty rows with zeros in place: NaN gradient."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = K / s
    w[(s == 0).squeeze(1)] = 0
    return w @ values, w


def W_06_denominator_plus_eps(queries, keys, values, width=1.0):
    """K / (sum + 1e-6): every weight off by a relative 1e-6 / sum; a window holding only
    one key near its edge (sum ~ 1e-6) gets weight 0.5 instead of 1."""
    K = _K(queries, keys, width)
    w = K / (K.sum(1, keepdim=True) + 1e-6)
    return w @ values, w


def W_07_tiny_sum_treated_empty(queries, keys, values, width=1.0):
    """Windows with sum < 1e-6 judged empty "to avoid dividing by tiny numbers": a query
    whose only key sits at u = 0.9999999 (K ~ 1.5e-7) gets weight 0 instead of 1."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    ok = s > 1e-6
    w = torch.where(ok, K, torch.zeros_like(K)) / torch.where(ok, s, torch.ones_like(s))
    return w @ values, w


def W_08_unsqueeze_inplace(queries, keys, values, width=1.0):
    """queries.unsqueeze_(1) changes the caller's tensor to shape (num_queries, 1)."""
    q = queries.unsqueeze_(1) if not queries.requires_grad else queries.unsqueeze(1)
    u = (q - keys) / width
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_09_width_squared_in_u(queries, keys, values, width=1.0):
    """u^2 = (q-k)^2 / width (forgot to square the width)."""
    d2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = 0.75 * (1 - d2).clamp(min=0)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_10_empty_window_nearest_key(queries, keys, values, width=1.0):
    """An empty window falls back to the nearest key's value (a "sensible" default), not
    the zero the exercise asks for."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    near = (queries[:, None] - keys[None, :]).abs().argmin(1)
    onehot = torch.nn.functional.one_hot(near, keys.shape[0]).to(K.dtype)
    w = torch.where(s > 0, w, onehot)
    return w @ values, w


def W_11_clamp_kernel_detached_mask(queries, keys, values, width=1.0):
    """Multiplies by a mask computed... from u.detach() > ... fine, but uses
    (1 - u.detach()**2) in K: no gradient to queries/keys."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u.detach() ** 2).clamp(min=0)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_12_float32_constant_table(queries, keys, values, width=1.0):
    """Width turned into a float32 tensor first (torch.tensor(width)): a float64 input is
    divided by a float32 width (promotion keeps float64, but width=0.1 is rounded)."""
    wt = torch.tensor(width)
    u = (queries[:, None] - keys[None, :]) / wt
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_13_nan_to_num_outputs_only(queries, keys, values, width=1.0):
    """Guards the weights with nan_to_num but the output is computed from K/s directly
    with nansum... gives right values, NaN gradient."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = torch.nan_to_num(K / s, nan=0.0)
    return w @ values, w


def W_14_values_sorted_with_keys(queries, keys, values, width=1.0):
    """Sorts the keys "so the window is contiguous" but forgets to reorder the values (and
    returns weights in sorted order)."""
    ks, _ = keys.sort()
    K = _K(queries, ks, width)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_15_memo_on_keys_shape(queries, keys, values, width=1.0):
    """Caches the kernel matrix per (queries shape, keys shape, width): a second call with
    other keys of the same shape reuses the old kernel."""
    memo = W_15_memo_on_keys_shape.__dict__.setdefault("memo", {})
    key = (tuple(queries.shape), tuple(keys.shape), float(width), queries.dtype,
           float(queries.sum()), float(keys[0]))
    if key not in memo or queries.requires_grad or keys.requires_grad:
        memo[key] = _K(queries, keys, width)
    K = memo[key]
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_16_width_abs(queries, keys, values, width=1.0):
    """Boundary: keeps keys with |q-k| <= width but u computed with width rounded to
    float32 via .item() of a float32 tensor... (float64 off by 1e-8)."""
    wf = float(torch.tensor(width, dtype=torch.float32))
    K = _K(queries, keys, wf)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_17_memo_on_shapes_width(queries, keys, values, width=1.0):
    """Caches the weights per (shapes, width, dtype) when no gradient is needed (a learner
    "speeding up" the width sweep of exercise 2.2): other data of the same shape reuse the
    old weights."""
    memo = W_17_memo_on_shapes_width.__dict__.setdefault("memo", {})
    key = (tuple(queries.shape), tuple(keys.shape), float(width), queries.dtype)
    if queries.requires_grad or keys.requires_grad or key not in memo:
        K = _K(queries, keys, width)
        s = K.sum(1, keepdim=True)
        w = K / torch.where(s > 0, s, torch.ones_like(s))
        memo[key] = w.detach()
    else:
        w = memo[key]
    return w @ values, w


def W_18_squeeze_outputs(queries, keys, values, width=1.0):
    """(w @ values[:, None]).squeeze(): shape () instead of (1,) for one query, and
    weights (num_keys,) instead of (1, num_keys)."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w @ values[:, None]).squeeze(), w.squeeze()


def O_19_clamp_u_to_unit(queries, keys, values, width=1.0):
    """u clamped to [-1, 1] first: K = 0 outside, gradient 0 outside (correct, odd)."""
    u = ((queries[:, None] - keys[None, :]) / width).clamp(-1, 1)
    K = 0.75 * (1 - u ** 2)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_21_values_detached(queries, keys, values, width=1.0):
    """outputs = w @ values.detach() ('values are data, not parameters'): no gradient to
    values."""
    K = _K(queries, keys, width)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values.detach(), w
