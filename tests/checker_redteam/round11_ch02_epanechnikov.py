"""Round 11 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/ch02_epanechnikov.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W13 and W15 are A_13 and A_15 (the kernel sum clamped at 1e-12, or at float32's tiny, a
constant that rounds to 0 in float16, so a float16 empty window gives 0/0 = NaN). The
exercise asks for float32 and float64 (its text now says float16 is not asked for), and the
checker has never passed float16: round 7 accepted float16 returned as float32 (A_20), and
the round-11 brief lists "float16 Epanechnikov" among the decisions taken. A float16 empty
window (queries [0, 10], keys [0.2, 0.5, 1]) would also reject three entries accepted as
right (round 4 O_02, round 8 O_03 and O_06: F.normalize's 1e-12) and round 10's A_13.
"""
# flake8: noqa
import torch
CHECK = "check_epanechnikov_pool"


def _K(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return 0.75 * (1 - u ** 2).clamp_min(0)


def C_01_standard(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_02_no_three_quarters_relu(queries, keys, values, width=1.0):
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    s = K.sum(-1, keepdim=True)
    w = K / (s + (s == 0).to(s.dtype))
    return (w * values).sum(-1), w


def O_03_where_window(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    s = K.sum(dim=1, keepdim=True)
    w = K / torch.where(s == 0, torch.ones_like(s), s)
    return torch.mv(w, values), w


def W_01_where_after_division(queries, keys, values, width=1.0):
    # the where trap: forward fine, gradient NaN for empty windows
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_02_clamp_sum_1e_6(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp_min(1e-6)
    return w @ values, w


def W_03_add_eps_1e_6(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-6)
    return w @ values, w


def W_04_threshold_1e_8(queries, keys, values, width=1.0):
    # "empty" when the kernel sum is below 1e-8: a lone key near the window's edge
    # is dropped
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    ok = s > 1e-8
    w = K / torch.where(ok, s, torch.ones_like(s)) * ok
    return w @ values, w


def W_05_squeeze(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w @ values[:, None]).squeeze(), w.squeeze(0) if w.shape[0] == 1 else w


def W_06_width_multiplies(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) * width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_07_u_abs_then_square_clamped_u(queries, keys, values, width=1.0):
    # clamps u into [-1, 1] first: K(u) = 0 outside, but the gradient w.r.t. queries
    # is zero only by accident... and u = 1 exactly keeps K = 0: fine. Wrong part:
    # kernel 3/4 (1 - |u|) (triangular) instead of (1 - u^2)
    u = ((queries[:, None] - keys[None, :]) / width).abs()
    K = 0.75 * (1 - u).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_08_float32_constant_width(queries, keys, values, width=1.0):
    # width turned into a float32 tensor: float64 inputs divided by a float32-rounded width
    wt = torch.tensor(width, dtype=torch.float32)
    u = (queries[:, None] - keys[None, :]) / wt.to(queries.dtype)
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_09_count_guard_strict(queries, keys, values, width=1.0):
    # decides "empty" with |u| < 1 counted in float32 u for float64 input
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    inside = ((u.float().abs() < 1).sum(-1, keepdim=True) > 0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(inside, s, torch.ones_like(s))
    return w @ values, w


def W_10_mean_values_for_empty(queries, keys, values, width=1.0):
    # an empty window falls back to uniform weights (the mean of the values)
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    empty = s == 0
    K = torch.where(empty, torch.ones_like(K), K)
    s = K.sum(-1, keepdim=True)
    w = K / s
    return w @ values, w


def W_11_values_in_place_sort(queries, keys, values, width=1.0):
    # sorts keys (and values) in place "for speed": changes the caller's tensors
    order = keys.argsort()
    with torch.no_grad():
        keys.copy_(keys[order])
        values.copy_(values[order])
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_12_squared_distance_over_width_squared_float32(queries, keys, values, width=1.0):
    # computes u^2 with a float32 width**2 constant
    d2 = (queries[:, None] - keys[None, :]) ** 2
    u2 = d2 / torch.tensor(width ** 2, dtype=torch.float32)
    K = 0.75 * (1 - u2).clamp_min(0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return (w @ values.to(w.dtype)).to(queries.dtype), w.to(queries.dtype)


# accepted on purpose: float16 is not asked for (see the docstring); in float32 and
# float64 the clamp at 1e-12 is the round-10 ruling (F.normalize does the same)
def A_13_1e_12_clamp_in_float16(queries, keys, values, width=1.0):
    # guard by clamp at 1e-12: fine in float32 (accepted), but in float16 1e-12 is 0
    K = _K(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp_min(1e-12)
    return w @ values, w


def W_14_add_1e_8_float16(queries, keys, values, width=1.0):
    # additive eps guard: 1e-8 rounds to 0 in float16, so an empty window is 0/0
    K = _K(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-8)
    return w @ values, w


# accepted on purpose: float16 is not asked for (see the docstring); float32's tiny
# (1.2e-38) is below every float32 and float64 kernel sum that is not 0
def A_15_clamp_float32_tiny(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    return w @ values, w
