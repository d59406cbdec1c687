"""Round 4 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/02_epanechnikov.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _K(u):
    return 0.75 * (1 - u ** 2) * (u.abs() <= 1)


def _finish(K, values):
    s = K.sum(dim=1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def C_01_reference(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    return _finish(_K(u), values)


def O_02_clamp_relu_no_threequarters(queries, keys, values, width=1.0):
    # the 3/4 cancels in the normalisation; relu(1-u^2) is the same kernel
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    s = K.sum(1, keepdim=True)
    w = K / s.clamp(min=1e-30)
    return w @ values, w


def O_03_inplace_fix_of_sum(queries, keys, values, width=1.0):
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = torch.clamp(1 - u ** 2, min=0) * 0.75
    s = K.sum(-1, keepdim=True)
    s[s == 0] = 1.0
    w = K / s
    return (w * values).sum(-1), w


def O_04_float64_inside(queries, keys, values, width=1.0):
    q, k, v = queries.double(), keys.double(), values.double()
    u = (q[:, None] - k[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w @ v).to(values.dtype), w.to(values.dtype)


def W_01_where_after_division(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_02_nan_to_num(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = torch.nan_to_num(K / K.sum(1, keepdim=True))
    return w @ values, w


def W_03_eps_in_denominator(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = K / (K.sum(1, keepdim=True) + 1e-6)
    return w @ values, w


def W_04_precedence_bug(queries, keys, values, width=1.0):
    u = queries[:, None] - keys[None, :] / width
    return _finish(_K(u), values)


def W_05_ignores_width(queries, keys, values, width=1.0):
    u = queries[:, None] - keys[None, :]
    return _finish(_K(u), values)


def W_06_transposed_weights(queries, keys, values, width=1.0):
    u = (queries[None, :] - keys[:, None]) / width   # (num_keys, num_queries)
    K = _K(u)
    s = K.sum(0, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return values @ w, w


def W_07_empty_window_uniform(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    empty = s == 0
    K = torch.where(empty, torch.ones_like(K), K)
    w = K / K.sum(1, keepdim=True)
    return w @ values, w


def W_08_inplace_zero_after_nan(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    w = K / K.sum(1, keepdim=True)
    w[torch.isnan(w)] = 0.0
    return w @ values, w


def W_09_sorts_keys(queries, keys, values, width=1.0):
    # sorts keys (and values) for a "cleaner" window, forgets to unsort the weights
    keys, order = keys.sort()
    values = values[order]
    u = (queries[:, None] - keys[None, :]) / width
    return _finish(_K(u), values)


def W_10_strict_window_open(queries, keys, values, width=1.0):
    # |u| < width instead of |u| < 1 (u already divided by width)
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= width)
    K = K.clamp(min=0) if width <= 1 else K
    return _finish(K, values)


def W_11_no_support_cut(queries, keys, values, width=1.0):
    # forgets "0 outside": negative kernel values outside the window
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w


def W_12_mean_output_for_empty(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    out = w @ values
    out = torch.where(s.squeeze(1) > 0, out, values.mean().expand_as(out))
    return out, w


def W_13_width_squared(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width ** 2
    return _finish(_K(u), values)


def W_14_values_detached(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values.detach(), w


def W_15_float32_output(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]).float() / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values.float(), w


def W_16_mask_from_sorted_keys(queries, keys, values, width=1.0):
    # window found with searchsorted: only valid when keys are sorted
    lo = torch.searchsorted(keys.contiguous(), (queries - width).contiguous())
    hi = torch.searchsorted(keys.contiguous(), (queries + width).contiguous(), right=True)
    idx = torch.arange(keys.shape[0], device=keys.device)
    inside = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * inside
    return _finish(K, values)


def W_17_output_keepdim(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values[:, None], w


def W_18_abs_u_kernel(queries, keys, values, width=1.0):
    # writes 1 - |u| (triangular) instead of 1 - u^2
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.relu(1 - u.abs())
    return _finish(K, values)


def O_05_strict_lt_mask(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() < 1)
    return _finish(K, values)


def O_06_where_kernel(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(1)
    safe = torch.where(s == 0, torch.ones_like(s), s)
    w = K / safe[:, None]
    return torch.einsum("qk,k->q", w, values), w


def W_19_unsqueeze_inplace(queries, keys, values, width=1.0):
    queries.unsqueeze_(1)
    u = (queries - keys[None, :]) / width
    out = _finish(_K(u), values)
    return out


_CACHE = {}


def W_20_cache_by_shape(queries, keys, values, width=1.0):
    # caches the weights between calls (e.g. for plotting): stale on new data
    key = (queries.shape, keys.shape, float(width), queries.dtype)
    if key not in _CACHE:
        u = (queries[:, None] - keys[None, :]) / width
        K = _K(u)
        s = K.sum(1, keepdim=True)
        _CACHE[key] = (K / torch.where(s > 0, s, torch.ones_like(s))).detach()
    w = _CACHE[key]
    return w @ values, w


def W_21_symmetric_window_via_broadcast_T(queries, keys, values, width=1.0):
    # builds u from keys - queries[:, None] but then takes the max of rows/cols for
    # "symmetry": right only when queries == keys
    u = (queries[:, None] - keys[None, :]) / width
    if u.shape[0] == u.shape[1]:
        u = torch.minimum(u.abs(), u.abs().T)
    return _finish(_K(u), values)


def W_22_width_default_ignored(queries, keys, values, width=1.0):
    # a learner who reads the fixed width from a global set for the chapter's plot
    u = (queries[:, None] - keys[None, :]) / (width if width != 1.0 else 0.5)
    return _finish(_K(u), values)


def S_01_calls_book_nadaraya_watson(queries, keys, values, width=1.0):
    from book import kernel_regression as kr
    return kr.nadaraya_watson(queries, keys, values, kernel=kr.epanechnikov, width=width)


def S_02_calls_book_kernel_only(queries, keys, values, width=1.0):
    from book.kernel_regression import epanechnikov
    K = epanechnikov((queries[:, None] - keys[None, :]) / width)
    return _finish(K, values)


def O_07_scaled_separately(queries, keys, values, width=1.0):
    u = queries[:, None] / width - keys[None, :] / width
    return _finish(_K(u), values)


def O_08_noncontiguous_outputs(queries, keys, values, width=1.0):
    u = (keys[:, None] - queries[None, :]) / width     # (keys, queries)
    K = _K(u)
    s = K.sum(0, keepdim=True)
    w = (K / torch.where(s > 0, s, torch.ones_like(s))).T  # non-contiguous view
    return w @ values, w


def W_23_keys_detached(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys.detach()[None, :]) / width
    return _finish(_K(u), values)


def W_24_weights_detached_outputs(queries, keys, values, width=1.0):
    # weights "are constants": detached before the weighted sum
    u = (queries[:, None] - keys[None, :]) / width
    o, w = _finish(_K(u), values)
    return w.detach() @ values, w
