"""Round 1 red team, chapter 2: check_epanechnikov_pool (exercise 2.1).

Entries: (checker_name, short_description, kind, callable). Written from the exercise
text alone: queries (n_q,), keys and values (n_k,), u = (q - k_i) / width,
K(u) = 3/4 (1 - u^2) on |u| <= 1, weights K / sum K, empty windows give zero weights.
"""
import numpy as np
import torch

C = "check_epanechnikov_pool"


def _kernel(queries, keys, width):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    return 0.75 * (1 - u ** 2).clamp_min(0)


# --------------------------------------------------------------------------- wrong

def epa_sorted_window(queries, keys, values, width=1.0):
    """Kind 3: finds each window with searchsorted, which assumes sorted keys."""
    lo = torch.searchsorted(keys.contiguous(), (queries - width).contiguous())
    hi = torch.searchsorted(keys.contiguous(), (queries + width).contiguous(), right=True)
    idx = torch.arange(keys.shape[0], device=keys.device)
    inside = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * inside
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_sorted_values_sorted(queries, keys, values, width=1.0):
    """Kind 3: sorts the keys 'for the window search' but not the values with them."""
    keys = keys.sort().values
    K = _kernel(queries, keys, width)
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_nan_empty(queries, keys, values, width=1.0):
    """Kind 5: no guard: an empty window gives 0/0 = NaN."""
    K = _kernel(queries, keys, width)
    weights = K / K.sum(-1, keepdim=True)
    return weights @ values, weights


def epa_nan_to_num(queries, keys, values, width=1.0):
    """Kind 1: kernel via a mask multiply, 0/0 then nan_to_num: right forward, NaN
    gradient for the queries of empty windows."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    weights = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return weights @ values, weights


def epa_where(queries, keys, values, width=1.0):
    """Kind 1: kernel via a mask multiply, then torch.where(total > 0, K / total, 0):
    the where-NaN gradient trap."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    total = K.sum(-1, keepdim=True)
    weights = torch.where(total > 0, K / total, torch.zeros_like(K))
    return weights @ values, weights


def epa_clamp_nan_to_num(queries, keys, values, width=1.0):
    """Right (by luck): clamp_min kernel, 0/0 then nan_to_num. The NaN of the
    division's backward is dropped by clamp_min's backward (it selects, it does not
    multiply), so the gradients equal the reference's."""
    K = _kernel(queries, keys, width)
    weights = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return weights @ values, weights


def epa_no_clamp(queries, keys, values, width=1.0):
    """Kind 5: forgets the support: K = 3/4 (1 - u^2) is negative outside |u| <= 1."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2)
    weights = K / K.sum(-1, keepdim=True)
    return weights @ values, weights


def epa_no_width(queries, keys, values, width=1.0):
    """Kind 3: forgets to divide by width (right only at width 1)."""
    u = queries[:, None] - keys[None, :]
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_width_squared(queries, keys, values, width=1.0):
    """Kind 3: divides u^2 by width instead of width^2 (right only at width 1)."""
    d = queries[:, None] - keys[None, :]
    K = 0.75 * (1 - d ** 2 / width).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_transposed(queries, keys, values, width=1.0):
    """Kind 3: builds u as keys - queries with shape (n_k, n_q) and reshapes it to
    (n_q, n_k) instead of transposing: right shape, wrong entries unless n_q == n_k
    (and then the rows/columns are swapped)."""
    u = (keys[:, None] - queries[None, :]) / width               # (n_k, n_q)
    K = (0.75 * (1 - u ** 2).clamp_min(0)).reshape(queries.shape[0], keys.shape[0])
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_numpy(queries, keys, values, width=1.0):
    """Kind 1: numpy round trip: right values, no gradient."""
    q, k, v = (t.detach().cpu().numpy() for t in (queries, keys, values))
    u = (q[:, None] - k[None, :]) / width
    K = 0.75 * np.maximum(1 - u ** 2, 0)
    total = K.sum(-1, keepdims=True)
    weights = np.divide(K, total, out=np.zeros_like(K), where=total > 0)
    w = torch.from_numpy(weights).to(queries.dtype)
    return w @ values.detach(), w


def epa_eps(queries, keys, values, width=1.0):
    """Kind 2: K / (sum + 1e-6): a query whose only key is near the window's edge
    (K ~ 1e-6) gets weight ~0.5 instead of 1."""
    K = _kernel(queries, keys, width)
    weights = K / (K.sum(-1, keepdim=True) + 1e-6)
    return weights @ values, weights


def epa_uniform_empty(queries, keys, values, width=1.0):
    """Kind 5: empty windows get uniform weights (adds a tiny constant to every K)."""
    K = _kernel(queries, keys, width) + 1e-12
    weights = K / K.sum(-1, keepdim=True)
    return weights @ values, weights


def epa_shape_col(queries, keys, values, width=1.0):
    """Kind 6: outputs of shape (n_q, 1) (values used as a column)."""
    K = _kernel(queries, keys, width)
    weights = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values.reshape(-1, 1), weights


def epa_float32_const(queries, keys, values, width=1.0):
    """Kind 6: builds the kernel with a float32 constant tensor: float64 inputs give
    float32 weights (and a float64 @ float32 crash)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.tensor(0.75) * (torch.tensor(1.0) - u.float() ** 2).clamp_min(0)
    weights = K / K.sum(-1, keepdim=True).clamp_min(1e-30)
    return weights @ values, weights


def epa_inplace_queries(queries, keys, values, width=1.0):
    """Kind 5: divides the queries by width in place (changes the caller's tensor)."""
    q = queries.detach()
    q /= width
    u = q[:, None] - keys[None, :] / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    weights = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_dense_only(queries, keys, values, width=1.0):
    """Kind 3: 'speeds up' by computing the kernel only for the first 32 keys (the
    chapter's examples were small)."""
    keys32, values32 = keys[:32], values[:32]
    K = _kernel(queries, keys32, width)
    weights32 = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
    weights = torch.zeros(queries.shape[0], keys.shape[0], dtype=K.dtype,
                          device=K.device)
    weights[:, :32] = weights32
    return weights32 @ values32, weights


# --------------------------------------------------------------------------- right

def epa_no_constant(queries, keys, values, width=1.0):
    """Right: drops the 3/4 (it cancels in the normalisation)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def epa_clamp_u(queries, keys, values, width=1.0):
    """Right: clamps u to [-1, 1] so K is 0 outside the window."""
    u = ((queries[:, None] - keys[None, :]) / width).clamp(-1, 1)
    K = 0.75 * (1 - u ** 2)
    total = K.sum(-1, keepdim=True)
    weights = K / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ values, weights


def epa_mask_mul(queries, keys, values, width=1.0):
    """Right: K * (|u| <= 1), safe division by replacing zero totals with 1."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    total = K.sum(-1, keepdim=True)
    safe = total + (total == 0).to(total.dtype)
    weights = K / safe
    return (weights * values[None, :]).sum(-1), weights


def epa_index_put(queries, keys, values, width=1.0):
    """Right: K[K < 0] = 0 in place on a fresh tensor (autograd tracks it)."""
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = 0.75 * (1 - u * u)
    K[K < 0] = 0
    total = K.sum(dim=1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return torch.mv(weights, values), weights


def epa_loop(queries, keys, values, width=1.0):
    """Right: one query at a time, then torch.stack."""
    outs, rows = [], []
    for q in queries:
        u = (q - keys) / width
        K = 0.75 * (1 - u ** 2).clamp_min(0)
        s = K.sum()
        w = K / s if s > 0 else torch.zeros_like(K)
        rows.append(w)
        outs.append(w @ values)
    return torch.stack(outs), torch.stack(rows)


WRONG = [
    (C, "window via searchsorted (assumes sorted keys)", 3, epa_sorted_window),
    (C, "sorts keys but not values", 3, epa_sorted_values_sorted),
    (C, "no guard: empty window is NaN", 5, epa_nan_empty),
    (C, "mask-multiply kernel, 0/0 then nan_to_num", 1, epa_nan_to_num),
    (C, "mask-multiply kernel, where(total > 0, K / total, 0)", 1, epa_where),
    (C, "no clamp: negative kernel outside the window", 5, epa_no_clamp),
    (C, "forgets to divide by width", 3, epa_no_width),
    (C, "divides u^2 by width, not width^2", 3, epa_width_squared),
    (C, "reshape instead of transpose of (n_k, n_q)", 3, epa_transposed),
    (C, "numpy round trip", 1, epa_numpy),
    (C, "K / (sum + 1e-6)", 2, epa_eps),
    (C, "empty window gives uniform weights", 5, epa_uniform_empty),
    (C, "outputs of shape (n_q, 1)", 6, epa_shape_col),
    (C, "float32 constants (float64 inputs)", 6, epa_float32_const),
    (C, "divides the queries in place", 5, epa_inplace_queries),
    (C, "only the first 32 keys", 3, epa_dense_only),
]

RIGHT_BUT_UNUSUAL = [
    (C, "without the 3/4 constant", 0, epa_no_constant),
    (C, "u clamped to [-1, 1], where-safe total", 0, epa_clamp_u),
    (C, "mask multiply, total + (total == 0)", 0, epa_mask_mul),
    (C, "K[K < 0] = 0 in place, torch.mv", 0, epa_index_put),
    (C, "python loop over queries, stack", 0, epa_loop),
    (C, "clamp_min kernel, 0/0 then nan_to_num (gradient safe)", 0, epa_clamp_nan_to_num),
]
