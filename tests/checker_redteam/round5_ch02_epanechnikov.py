"""Round 5 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch02_epanechnikov.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

O_08 (cdist) is W_08 since round 8 (see it).
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _K(u):
    return 0.75 * torch.clamp(1 - u ** 2, min=0)


def C_01_standard(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_02_reversed_difference_no_3_4(queries, keys, values, width=1.0):
    u = (keys.unsqueeze(0) - queries.unsqueeze(1)) / width
    K = torch.relu(1 - u * u)                  # 3/4 cancels in the ratio
    s = K.sum(1, keepdim=True)
    w = K / (s + (s == 0).to(s.dtype))
    return (w * values).sum(1), w


def O_03_where_window(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp(min=torch.finfo(s.dtype).tiny)
    return w @ values, w


def O_04_loop_over_queries(queries, keys, values, width=1.0):
    rows = []
    for q in queries:
        K = _K((q - keys) / width)
        s = K.sum()
        rows.append(K / s if s > 0 else K * 0)
    w = torch.stack(rows)
    return w @ values, w


def W_01_nan_to_num_after(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w


def W_02_triangular(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.clamp(1 - u.abs(), min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_03_no_window(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w


def W_04_ignores_width(queries, keys, values, width=1.0):
    return C_01_standard(queries, keys, values, 1.0)


def W_05_width_squared(queries, keys, values, width=1.0):
    u2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = 0.75 * torch.clamp(1 - u2, min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_06_multiply_width(queries, keys, values, width=1.0):
    # the parametric model's habit: (q - k) * w
    u = (queries[:, None] - keys[None, :]) * width
    K = _K(u)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_07_eps_1e_6(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    w = K / (K.sum(-1, keepdim=True) + 1e-6)
    return w @ values, w


def W_08_no_guard(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_09_clamp_sum_to_1(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    w = K / K.sum(-1, keepdim=True).clamp(min=1)
    return w @ values, w


def W_10_sorted_keys_searchsorted(queries, keys, values, width=1.0):
    # finds each window with searchsorted: right only when keys are sorted
    lo = torch.searchsorted(keys.detach().contiguous(), (queries - width).detach().contiguous())
    hi = torch.searchsorted(keys.detach().contiguous(), (queries + width).detach().contiguous(),
                            right=True)
    idx = torch.arange(len(keys), device=keys.device)
    inwin = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(inwin, 0.75 * (1 - u ** 2), torch.zeros_like(u)).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_11_where_after_division(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))   # NaN gradient
    return w @ values, w


def W_12_normalise_over_queries(queries, keys, values, width=1.0):
    K = _K((keys[:, None] - queries[None, :]) / width)    # (keys, queries)
    s = K.sum(-1, keepdim=True)
    w = (K / torch.where(s > 0, s, torch.ones_like(s))).T
    return w @ values, w


def W_13_mutates_inputs(queries, keys, values, width=1.0):
    queries /= width
    keys /= width
    K = _K(queries[:, None] - keys[None, :])
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_14_python_floats(queries, keys, values, width=1.0):
    out, W = [], []
    for q in queries.tolist():
        row = [max(0.0, 0.75 * (1 - ((q - k) / width) ** 2)) for k in keys.tolist()]
        s = sum(row)
        row = [r / s if s > 0 else 0.0 for r in row]
        W.append(row)
        out.append(sum(r * v for r, v in zip(row, values.tolist())))
    return (torch.tensor(out, dtype=values.dtype, device=values.device),
            torch.tensor(W, dtype=values.dtype, device=values.device))


def W_15_keepdim_output(queries, keys, values, width=1.0):
    out, w = C_01_standard(queries, keys, values, width)
    return out[:, None], w


def W_16_float32_buffer(queries, keys, values, width=1.0):
    out = torch.zeros(len(queries))
    K = _K((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    out[:] = w @ values
    return out, w.float()


def W_17_strict_inside_uses_abs_lt(queries, keys, values, width=1.0):
    # window |u| < 1 with the kernel 1 - |u|^2 / 2: wrong kernel shape
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() < 1, 1 - u ** 2 / 2, torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_18_empty_window_uniform(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1, keepdim=True)
    K = torch.where(s > 0, K, torch.ones_like(K))
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_19_u_over_2width(queries, keys, values, width=1.0):
    # treats width as the window's full length (half on each side)
    return C_01_standard(queries, keys, values, width / 2)


def W_20_detached_sum(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1, keepdim=True).detach()
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_05_strict_window(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() < 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_06_indicator_product(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_07_float64_inside(queries, keys, values, width=1.0):
    out, w = C_01_standard(queries.double(), keys.double(), values.double(), width)
    return out.to(values.dtype), w.to(values.dtype)


def W_21_counts_not_kernel_sum(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    n_in = (K > 0).sum(-1, keepdim=True).to(K.dtype)
    w = K / torch.where(n_in > 0, n_in, torch.ones_like(n_in)) / 0.75 * 1.0
    return w @ values, w


def W_22_squared_distance_in_width_units_wrong_sign(queries, keys, values, width=1.0):
    # kernel 3/4 (1 + u^2) inside the window (sign slip)
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 + u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


# Right until round 8; W_ since: torch.cdist computes the distances of more than 25
# points as sqrt(q^2 + k^2 - 2qk), which loses q - k far from 0 in float32 (round 8's
# case of 40 queries and 40 keys near 1000, width 0.5: weights off by about 1e-2).
def W_08_cdist(queries, keys, values, width=1.0):
    dist = torch.cdist(queries[:, None], keys[:, None])      # |q - k|
    K = _K(dist / width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def S_01_calls_book_kernel_regression(queries, keys, values, width=1.0):
    from book import kernel_regression as kr
    return kr.nadaraya_watson(queries, keys, values, kernel=kr.epanechnikov, width=width)


def S_02_uses_book_kernel_only(queries, keys, values, width=1.0):
    from book import kernel_regression as kr
    K = kr.epanechnikov((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_23_squeeze_habit(queries, keys, values, width=1.0):
    out, w = C_01_standard(queries, keys, values, width)
    return out.squeeze(), w.squeeze()


def W_24_keys_detached(queries, keys, values, width=1.0):
    return C_01_standard(queries, keys.detach(), values, width)


def W_25_values_detached(queries, keys, values, width=1.0):
    return C_01_standard(queries, keys, values.detach(), width)


def W_26_output_from_unguarded_division(queries, keys, values, width=1.0):
    K = _K((queries[:, None] - keys[None, :]) / width)
    s = K.sum(-1)
    w = K / torch.where(s > 0, s, torch.ones_like(s))[:, None]
    return (K @ values) / s, w          # NaN output for an empty window


def W_27_empty_window_mean_of_values(queries, keys, values, width=1.0):
    out, w = C_01_standard(queries, keys, values, width)
    empty = w.sum(-1) == 0
    return torch.where(empty, values.mean(), out), w
