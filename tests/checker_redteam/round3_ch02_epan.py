"""Round 3 red team (writer R3, issue 12), ch02_epan: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch02_epan.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_epanechnikov_pool"
import torch

def _K(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return 0.75 * torch.clamp(1 - u ** 2, min=0)

def C_1_guarded_division(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def O_1_where_indicator_float64(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return (w * values[None, :]).sum(-1), w

def O_2_keys_minus_queries_clamp_tiny(queries, keys, values, width=1.0):
    u = (keys[None, :] - queries[:, None]) / width
    K = 0.75 * (1 - u * u).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp(min=torch.finfo(K.dtype).tiny)
    return w @ values, w

def W_01_nan_to_num(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w

def W_02_no_clamp(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w

def W_03_times_width(queries, keys, values, width=1.0):
    return C_1_guarded_division(queries, keys, values, 1.0 / width)

def W_04_eps_in_denominator(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-8)
    return w @ values, w

def W_05_where_after_division(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s == 0, torch.zeros_like(K), K / s)
    return w @ values, w

def W_06_normalise_over_queries(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(0, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_07_window_compares_u_to_width(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_08_weights_transposed(queries, keys, values, width=1.0):
    out, w = C_1_guarded_division(queries, keys, values, width)
    return out, w.T if w.shape[0] == w.shape[1] else w

def W_09_missing_three_quarters_unnormalised_output(queries, keys, values, width=1.0):
    # forgets to normalise: output = sum K v (weights K)
    K = _K(queries, keys, width)
    return K @ values, K

def W_10_gaussian_fallback_for_empty(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    u = (queries[:, None] - keys[None, :]) / width
    g = torch.softmax(-0.5 * u ** 2, -1)
    w = torch.where(s > 0, K / torch.where(s > 0, s, torch.ones_like(s)), g)
    return w @ values, w

def W_11_u_squared_width(queries, keys, values, width=1.0):
    u2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = 0.75 * torch.clamp(1 - u2, min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_12_indicator_times_nan_to_num(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w

def W_13_indicator_times_where_after_division(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1).to(u.dtype)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w

def O_3_keys_by_queries_table_normalised_over_keys(queries, keys, values, width=1.0):
    # builds the (keys, queries) table and normalises over keys (dim 0), then transposes back
    u = (keys[:, None] - queries[None, :]) / width            # (nk, nq)
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    s = K.sum(0, keepdim=True)
    w = (K / torch.where(s > 0, s, torch.ones_like(s))).T     # (nq, nk)
    return w @ values, w
