"""Round 10 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/02_epanechnikov.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W13 is A_13 (the kernel sum clamped at 1e-12): torch.nn.functional.normalize(K, p=1, dim=-1)
divides by the same max(sum, 1e-12), and round 8 accepted it as right (round8 O_06). The two
differ from the reference only in a float64 window whose whole kernel sum is below 1e-12 (a
lone key within about 7e-13 of the window's edge, u = 1 - 1e-13 gives weight 0.15, not 1);
in float32 no kernel value lies in (0, 1e-12). A case there would reject both.
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _kernel(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))


def _safe(K, values):
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return w @ values, w


def W_01_where_after_division(queries, keys, values, width=1.0):
    K = _kernel(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_02_nan_to_num(queries, keys, values, width=1.0):
    K = _kernel(queries, keys, width)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w


def W_03_eps_in_denominator(queries, keys, values, width=1.0):
    K = _kernel(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-8)
    return w @ values, w


def W_04_precedence_only_keys_scaled(queries, keys, values, width=1.0):
    u = queries[:, None] - keys[None, :] / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    return _safe(K, values)


def W_05_width_multiplied(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) * width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    return _safe(K, values)


def W_06_window_not_scaled(queries, keys, values, width=1.0):
    d = queries[:, None] - keys[None, :]
    u = d / width
    K = torch.where(d.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    return _safe(K, values)


def W_07_empty_rows_uniform(queries, keys, values, width=1.0):
    K = _kernel(queries, keys, width)
    empty = (K.sum(-1, keepdim=True) == 0)
    K = K + empty.to(K.dtype)
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_08_expanded_square(queries, keys, values, width=1.0):
    # (q-k)^2 = q^2 - 2qk + k^2: cancellation for coordinates far from 0
    q = queries[:, None]
    k = keys[None, :]
    u2 = (q * q - 2 * q * k + k * k) / width ** 2
    K = torch.where(u2 <= 1, 0.75 * (1 - u2), torch.zeros_like(u2))
    return _safe(K, values)


def W_09_weights_in_sorted_key_order(queries, keys, values, width=1.0):
    order = keys.argsort()
    keys, values = keys[order], values[order]
    K = _kernel(queries, keys, width)
    return _safe(K, values)


def W_10_normalise_over_queries(queries, keys, values, width=1.0):
    K = _kernel(queries, keys, width)
    s = K.sum(0, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return w @ values, w


def W_11_clamp_denominator_1e6(queries, keys, values, width=1.0):
    # clamps the sum at 1e-6: a query whose only key sits at the window's edge is wrong
    K = _kernel(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp(min=1e-6)
    return w @ values, w


def W_12_strict_inside_float32_width(queries, keys, values, width=1.0):
    # width converted to a float32 tensor: float64 inputs lose accuracy
    wt = torch.tensor(width, dtype=torch.float32)
    u = (queries[:, None] - keys[None, :]) / wt
    K = torch.where(u.abs() < 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    return _safe(K.to(queries.dtype), values)


def W_04_inplace_intermediates(queries, keys, values, width=1.0):
    # Renamed from O_04 after round 12 (lead's ruling): queries.detach().div_(1.0) writes into
    # the caller's tensor, and raises on an expanded (stride 0) argument: the matrix's
    # EXPANDED condition.
    q = queries.detach()
    q.div_(1.0)  # harmless
    u = queries[:, None] - keys[None, :]
    u /= width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    K.clamp_(min=0)
    return _safe(K, values)


def C_01_reference(queries, keys, values, width=1.0):
    return _safe(_kernel(queries, keys, width), values)


def O_02_relu_normalised_kernel(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * torch.relu(1 - u ** 2) / width
    s = K.sum(-1)
    out = (K @ values) / torch.where(s == 0, torch.ones_like(s), s)
    return out, K / torch.where(s == 0, torch.ones_like(s), s)[:, None]


def O_03_transposed_build(queries, keys, values, width=1.0):
    u = (keys[:, None] - queries[None, :]) / width
    K = (1 - u * u).clamp(min=0).T
    s = K.sum(1, keepdim=True)
    w = K / s.masked_fill(s == 0, 1)
    return w @ values, w


# accepted on purpose: F.normalize(K, p=1) (eps 1e-12) does the same, accepted as right in
# round 8 (O_06); only a float64 window whose whole kernel sum is below 1e-12 differs
def A_13_clamp_denominator_1e12(queries, keys, values, width=1.0):
    # wrong when the only key in a window has K < 1e-12 (float64, u within 1e-12 of 1)
    K = _kernel(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp(min=1e-12)
    return w @ values, w


def W_14_clamp_denominator_eps(queries, keys, values, width=1.0):
    # clamps at the dtype's eps: in float32 a lone key with K < 1.2e-7 gets weight < 1
    K = _kernel(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp(min=torch.finfo(K.dtype).eps)
    return w @ values, w


def W_15_empty_by_any_inside(queries, keys, values, width=1.0):
    # decides "empty" by |u| <= 1; a key exactly at |u| = 1 has K = 0 -> 0/0 NaN
    u = (queries[:, None] - keys[None, :]) / width
    inside = u.abs() <= 1
    K = torch.where(inside, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    nonempty = inside.any(-1, keepdim=True)
    w = K / torch.where(nonempty, s, torch.ones_like(s))
    return w @ values, w


def W_16_unsqueeze_inplace(queries, keys, values, width=1.0):
    # unsqueeze_ changes the caller's queries to shape (num_queries, 1)
    if not queries.requires_grad:
        queries.unsqueeze_(1)
        u = (queries - keys[None, :]) / width
    else:
        u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    return _safe(K, values)
