"""Round 9 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd
but right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/ch02_epanechnikov.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W15 is A_15 (a width <= 0 is not refused, abs(width) used): the exercise text says nothing
about a width <= 0, and the checker never passes one.
"""
# flake8: noqa
import torch
CHECK = "check_epanechnikov_pool"


def _K(queries, keys, width):
    u = (queries[:, None] - keys[None, :]) / width
    return 0.75 * (1 - u ** 2).clamp(min=0)


def C_01_reference(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def O_02_no_three_quarters_relu(queries, keys, values, width=1.0):
    # the 3/4 cancels in the normalization; relu instead of clamp
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    s = K.sum(-1, keepdim=True)
    w = K / (s + (s == 0))
    return (w * values[None, :]).sum(-1), w


def O_03_mask_multiply(queries, keys, values, width=1.0):
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    s = K.sum(1, keepdim=True)
    w = K / s.masked_fill(s == 0, 1)
    return w @ values, w


def W_01_clamp_denominator(queries, keys, values, width=1.0):
    # guards the division with clamp(min=1e-8): wrong for a window whose only key is
    # right at its edge (sum below 1e-8)
    K = _K(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp(min=1e-8)
    return w @ values, w


def W_02_eps_denominator(queries, keys, values, width=1.0):
    # adds 1e-9 to every denominator: weights sum to 1 - 1e-9 (float64 accuracy lost)
    K = _K(queries, keys, width)
    w = K / (K.sum(-1, keepdim=True) + 1e-9)
    return w @ values, w


def W_03_threshold_on_sum(queries, keys, values, width=1.0):
    # treats "sum < 1e-6" as empty: a near-edge lone key gets weight 0 instead of 1
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    ok = s > 1e-6
    w = torch.where(ok, K / torch.where(ok, s, torch.ones_like(s)), torch.zeros_like(K))
    return w @ values, w


def W_04_distance_then_square_in_float32(queries, keys, values, width=1.0):
    # u computed in float32 for "speed"
    u = ((queries[:, None] - keys[None, :]).float() / width).to(queries.dtype)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_05_one_minus_abs_u_squared_wrong_kernel(queries, keys, values, width=1.0):
    # triangular-ish kernel: (1 - |u|)^2 instead of 1 - u^2
    u = (queries[:, None] - keys[None, :]) / width
    K = 0.75 * (1 - u.abs()).clamp(min=0) ** 2
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_06_width_squared_in_denominator_once(queries, keys, values, width=1.0):
    # u^2 = (q-k)^2 / width (forgot to square the width)
    d2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = 0.75 * (1 - d2).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_07_output_divides_separately(queries, keys, values, width=1.0):
    # outputs = (K @ v) / s with its own guard, weights returned unnormalized for empty rows OK
    K = _K(queries, keys, width)
    s = K.sum(-1)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    return (K @ values) / safe, K / safe[:, None].detach()


def W_08_strict_window_plus_eps(queries, keys, values, width=1.0):
    # window test |q - k| < width + 1e-6 with the kernel not clamped: a key just outside gets
    # a small negative weight
    d = queries[:, None] - keys[None, :]
    u = d / width
    K = 0.75 * (1 - u ** 2) * (d.abs() < width + 1e-6)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s != 0, s, torch.ones_like(s))
    return w @ values, w


def W_09_inplace_sort_keys(queries, keys, values, width=1.0):
    # sorts keys and values in place "for speed": changes the caller's tensors
    with torch.no_grad():
        order = keys.argsort()
        if not keys.requires_grad and not values.requires_grad:
            keys.copy_(keys[order]); values.copy_(values[order])
    return C_01_reference(queries, keys, values, width)


def W_10_width_from_keys_spacing(queries, keys, values, width=1.0):
    # ignores width when it is the default-looking float 1 and uses int(width)
    width = int(width) if width >= 1 else width
    return C_01_reference(queries, keys, values, width)


def W_11_nan_to_num_on_u(queries, keys, values, width=1.0):
    # guards the kernel with where on |u| <= 1 (NaN gradient of 0/0 is not the issue) but
    # normalizes with where(s > 0, K / s, 0): NaN gradient for empty windows
    K = _K(queries, keys, width)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_12_float_width_tensor_broadcast(queries, keys, values, width=1.0):
    # divides the query-key difference by width**2 and then squares again
    u = (queries[:, None] - keys[None, :]) / width ** 2
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    s = K.sum(-1, keepdim=True)
    w = K / torch.where(s > 0, s, torch.ones_like(s))
    return w @ values, w


def W_13_all_empty_shortcut_float32(queries, keys, values, width=1.0):
    # shortcut when no query has a key in its window: zeros in the default dtype, no graph
    K = _K(queries, keys, width)
    if not (K > 0).any():
        return torch.zeros(queries.shape[0]), torch.zeros(queries.shape[0], keys.shape[0])
    return C_01_reference(queries, keys, values, width)


def O_14_clamp_tiny(queries, keys, values, width=1.0):
    K = _K(queries, keys, width)
    w = K / K.sum(-1, keepdim=True).clamp(min=torch.finfo(K.dtype).tiny)
    return w @ values, w


# accepted on purpose: the text is silent about a width <= 0
def A_15_width_abs_ignored_sign(queries, keys, values, width=1.0):
    # a negative or zero width is not refused: width 0 gives NaN/inf, negative is silently used
    return C_01_reference(queries, keys, values, abs(width) if width != 0 else 1e-12)


def W_16_keys_detached(queries, keys, values, width=1.0):
    return C_01_reference(queries, keys.detach(), values, width)


def W_17_values_detached(queries, keys, values, width=1.0):
    return C_01_reference(queries, keys, values.detach(), width)


_wc = {}


def W_18_cache_by_shape_width(queries, keys, values, width=1.0):
    # caches the weight matrix per (shapes, width, dtype) when no gradient is needed
    key = (tuple(queries.shape), tuple(keys.shape), float(width), queries.dtype)
    if queries.requires_grad or keys.requires_grad or values.requires_grad:
        return C_01_reference(queries, keys, values, width)
    if key not in _wc:
        _wc[key] = C_01_reference(queries, keys, values, width)[1]
    w = _wc[key]
    return w @ values, w
