"""Round 13 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but
right (O_) and accepted (A_) solutions of check_epanechnikov_pool written from the exercise
text alone; copied from /work/redteam/round13/A/sols/ch02_epanechnikov.py.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed (book/checks/ch02.py, _epanechnikov_cases_round13): W_10 (u from the
reciprocal of the width, not clamped): query 0.85, keys 0, 5 and 9, width 0.85 (float32
0.85 * (1 / 0.85) > 1); size-keyed paths W_28/W_30 (float64 in float32 above 2^16 or 2^10
pairs), W_29 (chunks of 64 queries dropping a tail of one), W_31 (uniform weights for empty
windows above 16 keys) and W_32 (0/0 replaced afterwards above 16 queries): 65 queries
(three with empty windows) and 4099 keys in random order, in float32 and float64.
"""
import torch

CHECK = "check_epanechnikov_pool"


def _finish(K, values):
    total = K.sum(-1, keepdim=True)
    safe = torch.where(total > 0, total, torch.ones_like(total))
    weights = K / safe
    return (weights * values).sum(-1), weights


def C_01_reference(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    return _finish(K, values)


def C_02_where(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u * u), torch.zeros_like(u))
    total = K.sum(-1, keepdim=True)
    weights = K / (total + (total == 0).to(total.dtype))
    return weights @ values, weights


def O_03_no_three_quarters(queries, keys, values, width=1.0):
    """The 3/4 cancels in the ratio."""
    u = (queries[:, None] - keys) / width
    return _finish(torch.relu(1 - u ** 2), values)


def O_04_factored(queries, keys, values, width=1.0):
    """(1 - u)(1 + u): more accurate near the window's edge than 1 - u^2."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * ((1 - u) * (1 + u)).clamp_min(0)
    return _finish(K, values)


def O_05_transposed(queries, keys, values, width=1.0):
    """Built as (num_keys, num_queries) and transposed (u^2 is symmetric)."""
    u = (keys[:, None] - queries[None, :]) / width
    K = (0.75 * (1 - u ** 2).clamp_min(0)).T
    return _finish(K, values)


def O_06_squared_distance(queries, keys, values, width=1.0):
    """u^2 = (q - k)^2 / width^2."""
    d2 = (queries[:, None] - keys) ** 2
    K = 0.75 * (1 - d2 / width ** 2).clamp_min(0)
    return _finish(K, values)


# ---------------------------------------------------------------- wrong
def W_07_cdist(queries, keys, values, width=1.0):
    """|q - k| from torch.cdist, whose matmul path (> 25 rows) computes q^2 + k^2 - 2qk:
    catastrophic cancellation for inputs far from 0 (queries/keys near 1000, width 0.5)."""
    d = torch.cdist(queries[:, None], keys[:, None])
    u = d / width
    return _finish(0.75 * (1 - u ** 2).clamp_min(0), values)


def W_08_additive_eps(queries, keys, values, width=1.0):
    """K / (sum K + 1e-6): a query whose only key sits near the window edge (K ~ 1e-7)
    gets weight 0.09 instead of 1."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    weights = K / (K.sum(-1, keepdim=True) + 1e-6)
    return (weights * values).sum(-1), weights


def W_09_clamp_1e6(queries, keys, values, width=1.0):
    """total.clamp_min(1e-6): rows whose kernel sum is below 1e-6 do not sum to 1."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    weights = K / K.sum(-1, keepdim=True).clamp_min(1e-6)
    return (weights * values).sum(-1), weights


def W_10_reciprocal_width_edge(queries, keys, values, width=1.0):
    """Window from |q - k| <= width, polynomial from u = (q - k) * (1 / width) NOT clamped:
    where the product rounds above 1 for a key exactly at the edge, K is a tiny negative
    number and a lone edge key gets weight 1 instead of an empty window."""
    d = queries[:, None] - keys
    u = d * (1.0 / width)
    K = 0.75 * (1 - u ** 2) * (d.abs() <= abs(width))
    return _finish_signed(K, values)


def _finish_signed(K, values):
    total = K.sum(-1, keepdim=True)
    safe = torch.where(total != 0, total, torch.ones_like(total))
    weights = K / safe
    return (weights * values).sum(-1), weights


def W_11_triangular(queries, keys, values, width=1.0):
    """Triangular kernel 1 - |u| instead of 1 - u^2."""
    u = (queries[:, None] - keys) / width
    return _finish((1 - u.abs()).clamp_min(0), values)


def W_12_width_squared_once(queries, keys, values, width=1.0):
    """u^2 = (q - k)^2 / width (width not squared): wrong for width != 1."""
    d2 = (queries[:, None] - keys) ** 2
    return _finish(0.75 * (1 - d2 / width).clamp_min(0), values)


def W_13_nan_to_num_after(queries, keys, values, width=1.0):
    """0/0 replaced after the division: NaN gradient for queries with an empty window."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    weights = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return (weights * values).sum(-1), weights


def W_14_float32_distance(queries, keys, values, width=1.0):
    """q - k in float32 for speed, the rest in float64: float32 rounding in u."""
    d = (queries.float()[:, None] - keys.float()).to(queries.dtype)
    u = d / width
    return _finish(0.75 * (1 - u ** 2).clamp_min(0), values)


def W_15_unsqueeze_inplace(queries, keys, values, width=1.0):
    """queries.unsqueeze_(1) to broadcast: the caller's queries become (num_queries, 1)."""
    if not queries.requires_grad:
        queries.unsqueeze_(1)
    u = (queries.reshape(-1, 1) - keys) / width
    return _finish(0.75 * (1 - u ** 2).clamp_min(0), values)


def W_16_empty_uniform(queries, keys, values, width=1.0):
    """Empty windows get uniform weights over all keys (the d2l habit), not zeros."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    K = torch.where(total > 0, K, torch.ones_like(K))
    weights = K / K.sum(-1, keepdim=True)
    return (weights * values).sum(-1), weights


def A_17_log_exp_kernel(queries, keys, values, width=1.0):
    """Kernel as exp(log(1 - u^2)) clamped: log of 0 at |u| = 1, gradient inf*0 = NaN for
    a key exactly at the window's edge."""
    u = (queries[:, None] - keys) / width
    inside = (u.abs() < 1)
    K = 0.75 * torch.exp(torch.log((1 - u ** 2).clamp_min(0))) * inside
    return _finish(K, values)


def A_18_softmax_of_log(queries, keys, values, width=1.0):
    """weights = softmax(log K) (attention as a softmax of scores): an empty row is NaN,
    replaced by zeros afterwards; gradient NaN there."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    w = torch.softmax(torch.log(K), -1)
    w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
    return (w * values).sum(-1), w


def W_19_values_float32_sum(queries, keys, values, width=1.0):
    """Output summed in float32 (weights float64): float32 accuracy of the outputs."""
    u = (queries[:, None] - keys) / width
    out, w = _finish(0.75 * (1 - u ** 2).clamp_min(0), values)
    return (w.float() * values.float()).sum(-1).to(values.dtype), w


def W_20_width_from_keys_spacing(queries, keys, values, width=1.0):
    """Default width ignored when width == 1.0 and replaced by the mean key spacing."""
    if width == 1.0 and keys.numel() > 1:
        width = (keys.max() - keys.min()).item() / (keys.numel() - 1) * 3
    u = (queries[:, None] - keys) / width
    return _finish(0.75 * (1 - u ** 2).clamp_min(0), values)


def W_21_grad_through_where_total(queries, keys, values, width=1.0):
    """torch.where(total > 0, K / total, 0): the division still runs on empty rows and its
    0/0 NaN leaks into the gradient."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    w = torch.where(total > 0, K / total, torch.zeros_like(K))
    return (w * values).sum(-1), w


def W_22_biweight(queries, keys, values, width=1.0):
    """Biweight (1 - u^2)^2: wrong weights when a window holds keys at different u."""
    u = (queries[:, None] - keys) / width
    return _finish(((1 - u ** 2).clamp_min(0)) ** 2, values)


def W_23_sorted_keys_assumed(queries, keys, values, width=1.0):
    """Sorts the keys for a 'window search' and forgets to permute the values with them:
    wrong for unsorted keys."""
    ks, _ = keys.sort()
    u = (queries[:, None] - ks) / width
    return _finish(0.75 * (1 - u ** 2).clamp_min(0), values)


def W_24_detach_total(queries, keys, values, width=1.0):
    """Denominator detached: forward right, gradient w.r.t. queries and keys wrong."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True).detach()
    w = K / torch.where(total > 0, total, torch.ones_like(total))
    return (w * values).sum(-1), w


def O_25_strict_indicator(queries, keys, values, width=1.0):
    """Indicator |u| < 1 (strict) times the polynomial: same values; at an edge key the
    gradient is 0 (the one-sided derivative from outside) instead of -1.5u."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() < 1)
    return _finish(K, values)


def O_26_inplace_fix_total(queries, keys, values, width=1.0):
    """total[total == 0] = 1 in place on the (non-leaf) sum, then divide."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    total = K.sum(-1, keepdim=True)
    total[total == 0] = 1
    w = K / total
    return w @ values, w


def W_27_clamp_machine_eps(queries, keys, values, width=1.0):
    """total.clamp_min(finfo.eps) (2.2e-16 / 1.2e-7): a float32 query whose only key sits
    at u^2 = 1 - 6e-8 (K = 4.5e-8) gets weight 0.37, not 1."""
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    w = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).eps)
    return (w * values).sum(-1), w


def W_28_big_inputs_float32(queries, keys, values, width=1.0):
    """Inputs with more than 2^16 query-key pairs computed in float32 'to save memory':
    float64 accuracy lost for 300 queries x 300 keys."""
    if queries.dtype == torch.float64 and queries.numel() * keys.numel() > 2 ** 16:
        out, w = C_01_reference(queries.float(), keys.float(), values.float(), width)
        return out.double(), w.double()
    return C_01_reference(queries, keys, values, width)


def W_29_chunked_queries_drop_tail(queries, keys, values, width=1.0):
    """Queries processed in chunks of 64; a final partial chunk of ONE query is dropped
    (range(0, n - 1, 64)): 65 queries return outputs for 64 ... padded with zeros."""
    n = queries.shape[0]
    outs, ws = [], []
    for i in range(0, max(n - 1, 1), 64):
        o, w = C_01_reference(queries[i:i + 64], keys, values, width)
        outs.append(o)
        ws.append(w)
    out, w = torch.cat(outs), torch.cat(ws)
    if out.shape[0] < n:
        pad = n - out.shape[0]
        out = torch.cat([out, out.new_zeros(pad)])
        w = torch.cat([w, w.new_zeros(pad, w.shape[1])])
    return out, w


def W_30_many_pairs_float32_small(queries, keys, values, width=1.0):
    """As W_28 with the switch at 2^10 pairs (e.g. 40 x 40 in float64)."""
    if queries.dtype == torch.float64 and queries.numel() * keys.numel() > 2 ** 10:
        out, w = C_01_reference(queries.float(), keys.float(), values.float(), width)
        return out.double(), w.double()
    return C_01_reference(queries, keys, values, width)


def W_31_many_keys_uniform_empty(queries, keys, values, width=1.0):
    """More than 16 keys: empty windows get a uniform average (d2l habit) instead of 0."""
    if keys.shape[0] <= 16:
        return C_01_reference(queries, keys, values, width)
    return W_16_empty_uniform(queries, keys, values, width)


def W_32_many_queries_nan_to_num(queries, keys, values, width=1.0):
    """More than 16 queries: kernel as torch.where(|u| <= 1, ...) and 0/0 replaced after
    the division: a query whose empty window has a key exactly at its edge (q = 20, key 21,
    width 1) gets a NaN gradient."""
    if queries.shape[0] <= 16:
        return C_02_where(queries, keys, values, width)
    u = (queries[:, None] - keys) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u * u), torch.zeros_like(u))
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return (w * values).sum(-1), w


def W_33_sort_keys_inplace_many(queries, keys, values, width=1.0):
    """More than 16 keys: sorts the caller's keys and values in place (window search), so
    their order changes after the call."""
    if keys.shape[0] > 16 and not keys.requires_grad and not values.requires_grad:
        order = keys.argsort()
        keys.data.copy_(keys.data[order])
        values.data.copy_(values.data[order])
    return C_01_reference(queries, keys, values, width)
