"""Round 2 red team (writer R2), ch02_epan: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch02_epan.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch

CHECK = "check_epanechnikov_pool"


def _K(u):
    return 0.75 * (1 - u ** 2).clamp(min=0)


def Q_nan_to_num(queries, keys, values, width=1.0):
    """Right values (0/0 -> 0 by nan_to_num), NaN gradients in empty rows."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w


def Q_where_nan_grad(queries, keys, values, width=1.0):
    """torch.where(s > 0, K / s, 0): right values, the where trap gives NaN gradients."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_no_clamp(queries, keys, values, width=1.0):
    """Forgets the support: K = 3/4 (1 - u^2) is negative outside |u| <= 1."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return w @ values, w


def W_no_width(queries, keys, values, width=1.0):
    """Ignores width (right only for width=1)."""
    u = queries[:, None] - keys[None, :]
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_times_width(queries, keys, values, width=1.0):
    """Multiplies by the width instead of dividing."""
    u = (queries[:, None] - keys[None, :]) * width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_uniform_empty(queries, keys, values, width=1.0):
    """Empty windows get uniform weights (d2l's masked_softmax habit)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    empty = s == 0
    K = torch.where(empty, torch.ones_like(K), K)
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_normalise_queries(queries, keys, values, width=1.0):
    """Normalises over the queries axis."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(0, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_eps_denominator(queries, keys, values, width=1.0):
    """K / (s + 1e-8): biased when the window holds only keys near its edge."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = K / (K.sum(-1, keepdim=True) + 1e-8)
    return w @ values, w


def W_eps_1e3(queries, keys, values, width=1.0):
    """K / (s + 1e-3): a larger epsilon, visibly biased."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = K / (K.sum(-1, keepdim=True) + 1e-3)
    return w @ values, w


def W_unsqueeze_inplace(queries, keys, values, width=1.0):
    """Changes the caller's tensor shape with unsqueeze_."""
    q = queries.unsqueeze_(1)
    u = (q - keys[None, :]) / width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_float32_buffer(queries, keys, values, width=1.0):
    """Fills a float32 buffer: float64 inputs come back float32."""
    w = torch.zeros(len(queries), len(keys))
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    nz = (s > 0).squeeze(-1)
    w[nz] = (K[nz] / s[nz]).to(w.dtype)
    return w @ values.to(w.dtype), w


def W_triangular(queries, keys, values, width=1.0):
    """|u| instead of u^2 (triangular kernel)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u.abs()).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_python_loops(queries, keys, values, width=1.0):
    """Loops with .item(): right values, no gradient."""
    rows = []
    for q in queries.tolist():
        ks = [max(0.0, 0.75 * (1 - ((q - k) / width) ** 2)) for k in keys.tolist()]
        s = sum(ks)
        rows.append([x / s if s > 0 else 0.0 for x in ks])
    w = torch.tensor(rows, dtype=queries.dtype).reshape(len(queries), len(keys))
    return w @ values, w


def W_softmax_of_kernel(queries, keys, values, width=1.0):
    """Softmax of K instead of K / sum K."""
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = torch.softmax(K, dim=-1)
    return w @ values, w


def W_width_squared(queries, keys, values, width=1.0):
    """u = (q - k)^2 / width^2 used as u^2 ... but the square root forgotten: u = (q-k)/width^2."""
    u = (queries[:, None] - keys[None, :]) / width ** 2
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def C_clamp_min(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(dim=-1, keepdim=True)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    w = K / safe
    return w @ values, w


def O_strict_indicator(queries, keys, values, width=1.0):
    """Indicator |u| < 1 times the polynomial (the same function); float64 friendly."""
    u = (queries.unsqueeze(-1) - keys) / width
    K = 0.75 * (1 - u * u) * (u.abs() < 1).to(u.dtype)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w


def W_indicator_nan_to_num(queries, keys, values, width=1.0):
    """Indicator by multiplication and nan_to_num for empty windows: right values, but the
    gradient is NaN for any query with an empty window (NaN * 0 in the backward pass)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True), nan=0.0)
    return w @ values, w


def O_reversed_difference(queries, keys, values, width=1.0):
    """u = (k - q) / width: the kernel is even, same result; relu instead of clamp."""
    u = (keys[None, :] - queries[:, None]) / width
    K = 0.75 * torch.relu(1 - u ** 2)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return w @ values, w


def W_sorted_keys_searchsorted(queries, keys, values, width=1.0):
    """Assumes sorted keys: only keys between searchsorted bounds count."""
    lo = torch.searchsorted(keys.contiguous(), (queries - width).contiguous())
    hi = torch.searchsorted(keys.contiguous(), (queries + width).contiguous(), right=True)
    idx = torch.arange(len(keys))
    inwin = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp(min=0) * inwin
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return w @ values, w


def W_inplace_values(queries, keys, values, width=1.0):
    """Centres the values in place (when no grad), adds the mean back to the outputs: the
    output is right only for rows whose weights sum to 1; the caller's values change."""
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    if not values.requires_grad:
        m = values.mean()
        values -= m
        return w @ values + m * (s[:, 0] > 0), w
    return w @ values, w


def O_no_three_quarters(queries, keys, values, width=1.0):
    """Leaves out the constant 3/4: it cancels in the normalisation."""
    u = (queries[:, None] - keys[None, :]) / width
    K = (1 - u ** 2).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w
