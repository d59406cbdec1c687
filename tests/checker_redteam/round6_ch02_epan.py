"""Round 6 red team (writer A, issue 12), ch02_epan: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/ch02_epan.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W05, W15, W17, W21, W22 and W23 are right (the red team's report): O_ here; W15 (cdist)
is W_ again since round 8 (see it).
"""
# flake8: noqa
import torch
CHECK = "check_epanechnikov_pool"

def C_01_plain(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def O_02_no_three_quarters_relu(queries, keys, values, width=1.0):
    # the 3/4 cancels in the normalisation
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    s = K.sum(-1, keepdim=True)
    w = K / s.clamp_min(torch.finfo(K.dtype).tiny)
    return w @ values, w

def O_03_index_put_zero(queries, keys, values, width=1.0):
    u = (queries.unsqueeze(-1) - keys) / width
    K = 0.75 * (1 - u ** 2)
    K = K * (u.abs() < 1)
    s = K.sum(-1, keepdim=True)
    safe = s.masked_fill(s == 0, 1.0)
    w = K / safe
    return (w * values).sum(-1), w

def W_01_where_after_division(queries, keys, values, width=1.0):
    # where() picks the zeros, but the unselected 0/0 branch gives NaN gradients
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w

def W_02_eps_in_denominator(queries, keys, values, width=1.0):
    # K / (sum + 1e-6): visibly wrong when a query's window barely touches a key
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    w = K / (K.sum(-1, keepdim=True) + 1e-6)
    return w @ values, w

def W_03_mask_ignores_width(queries, keys, values, width=1.0):
    # window test |q - k| <= 1 instead of |u| <= 1 (right only for width 1)
    d = queries[:, None] - keys[None, :]
    u = d / width
    K = 0.75 * (1 - u ** 2) * (d.abs() <= 1)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w

def W_04_threshold_sum(queries, keys, values, width=1.0):
    # treats tiny sums as empty windows
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    ok = s > 1e-3
    w = torch.where(ok, K, torch.zeros_like(K)) / torch.where(ok, s, torch.ones_like(s))
    return w @ values, w

# Written as W05, right (the red team's report calls it borderline, not a hole): the
# exercise's width is a number (width=1.0), and float(width) of a number is that number.
def O_05_float_width(queries, keys, values, width=1.0):
    # float(width): cuts the gradient when width is a learnable tensor
    width = float(width)
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_06_weights_float32(queries, keys, values, width=1.0):
    # builds the kernel in a float32 buffer: float64 input comes back float32
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.zeros(u.shape)
    K = K + (0.75 * (1 - u ** 2)).clamp_min(0).float()
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values.float(), w

def W_07_width_squared(queries, keys, values, width=1.0):
    # u^2 = (q-k)^2 / width (forgot to square the width)
    d2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = (0.75 * (1 - d2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_08_nan_to_num(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w

def W_09_empty_uniform(queries, keys, values, width=1.0):
    # empty windows fall back to a uniform average
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    K = torch.where(s > 0, K, torch.ones_like(K))
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w

def W_10_mutates_queries(queries, keys, values, width=1.0):
    # scales the queries in place to save a tensor
    if not queries.requires_grad:
        queries /= width
        u = queries[:, None] - keys[None, :] / width
    else:
        u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_11_one_sided_window(queries, keys, values, width=1.0):
    # clamps only u <= 1 (missing abs): keys far on one side get negative kernel... then clamp
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2) * (u <= 1)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w

def W_12_triangle_weights_output_mean(queries, keys, values, width=1.0):
    # output = mean of values in window (box kernel on output, Epanechnikov weights returned)
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    box = (K > 0).to(K.dtype)
    n = box.sum(-1, keepdim=True)
    out = (box / torch.where(n > 0, n, torch.ones_like(n))) @ values
    return out, w

def W_13_sqrt_norm_grad(queries, keys, values, width=1.0):
    # |u| via sqrt(u^2): NaN gradient where q == k exactly
    u = (queries[:, None] - keys[None, :]) / width
    a = torch.sqrt(u * u)
    K = (0.75 * (1 - a * a)) * (a <= 1)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_14_values_2d_broadcast(queries, keys, values, width=1.0):
    # outputs keep a trailing axis: shape (num_queries, 1)
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values[:, None], w

# Written as W15, right (the red team's report): cdist's gradient at distance 0 is 0, and
# so is the kernel's (d/du u^2 = 0 at u = 0).
# Right until round 8; W_ since: torch.cdist computes the distances of more than 25
# points as sqrt(q^2 + k^2 - 2qk), which loses q - k far from 0 in float32 (round 8's
# case of 40 queries and 40 keys near 1000, width 0.5: weights off by about 1e-2).
def W_15_norm_distance(queries, keys, values, width=1.0):
    # distance via torch.cdist on (n, 1) columns
    d = torch.cdist(queries[:, None], keys[:, None])
    u = d / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def W_16_values_detached(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values.detach(), w

# Written as W17, right (the red team's report): K(+-1) = 0, so a strict window |u| < 1
# gives the same kernel; the guard s + (s == 0) never divides by 0.
def O_17_strict_window_and_sum_where(queries, keys, values, width=1.0):
    # mask |u| < 1 with a where on K after division by the unguarded sum of a clamp... guard by s + (s == 0)
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() < 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(-1, keepdim=True)
    w = K / (s + (s == 0).to(s.dtype))
    return w @ values, w

def W_18_weights_float_for_half_only(queries, keys, values, width=1.0):
    # works in float32 internally, casts outputs but not weights
    q, k, v = queries.float(), keys.float(), values.float()
    u = (q[:, None] - k[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w @ v).to(values.dtype), w

_W = {}
def W_19_kernel_cached_by_width(queries, keys, values, width=1.0):
    # caches the weight matrix per (width, shapes): new points of the same sizes reuse old weights
    key = (float(width), tuple(queries.shape), tuple(keys.shape), queries.dtype)
    if key not in _W:
        u = (queries[:, None] - keys[None, :]) / width
        K = (0.75 * (1 - u ** 2)).clamp_min(0)
        s = K.sum(-1, keepdim=True)
        _W[key] = K / torch.where(s > 0, s, torch.ones_like(s))
    w = _W[key]
    return w @ values, w

def W_20_keys_detached(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys.detach()[None, :]) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

# Written as W21, right (the red team's report): the backward of relu at 0 sends 0 (its
# mask is a where), so sqrt's 0/0 at 0 never reaches the inputs.
def O_21_sqrt_of_clamped_squared(queries, keys, values, width=1.0):
    # K = 3/4 * sqrt(relu(1 - u^2))^2: right values, NaN gradient at |u| = 1 exactly
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * torch.sqrt(torch.relu(1 - u ** 2)) ** 2
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

# Written as W22, right (the red team's report): .view(-1, 1) of a strided 1-D tensor
# only adds an axis of size 1, which is always a legal view.
def O_22_view_queries(queries, keys, values, width=1.0):
    # queries.view(-1, 1): raises on a non-contiguous (strided) queries vector
    u = (queries.view(-1, 1) - keys.view(1, -1)) / width
    K = (0.75 * (1 - u ** 2)).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w

def S_01_calls_book(queries, keys, values, width=1.0):
    from book import kernel_regression as kr
    return kr.nadaraya_watson(queries, keys, values, kernel=kr.epanechnikov, width=width)

# Written as W23, right (the red team's report): as W21, with clamp_min(0), whose
# backward also sends 0 at the clamped entries.
def O_23_sqrt_clamp_squared(queries, keys, values, width=1.0):
    # K = 3/4 * sqrt(clamp_min(1 - u^2, 0))^2: NaN gradient when |u| = 1 exactly
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0).sqrt() ** 2
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w
