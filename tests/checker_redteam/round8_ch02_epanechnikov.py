"""Round 8 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd
but right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/ch02_epanechnikov.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run.
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _guard(K):
    s = K.sum(-1, keepdim=True)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    return K / safe


def C_01_reference(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    w = _guard(K)
    return w @ values, w


def O_02_relu_no_constant(queries, keys, values, width=1.0):
    # 3/4 cancels in the ratio; relu(1 - u^2) is the kernel up to that constant
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.relu(1 - u * u)
    w = _guard(K)
    return w @ values, w


def O_03_clamp_min_1e_minus_30(queries, keys, values, width=1.0):
    u = (queries.unsqueeze(1) - keys.unsqueeze(0)) / width
    K = (0.75 * (1 - u.pow(2))).clamp(min=0)
    w = K / K.sum(1, keepdim=True).clamp(min=1e-30)
    return (w * values).sum(1), w


def W_01_eps_1e_minus_6_clamp(queries, keys, values, width=1.0):
    # "avoid 0/0": a query whose only key sits near the edge of its window gets weight << 1
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = K / K.sum(-1, keepdim=True).clamp(min=1e-6)
    return w @ values, w


def W_02_threshold_guard(queries, keys, values, width=1.0):
    # treats sums below 1e-3 as empty windows
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    s = K.sum(-1, keepdim=True)
    ok = s > 1e-3
    w = torch.where(ok, K, torch.zeros_like(K)) / torch.where(ok, s, torch.ones_like(s))
    return w @ values, w


def W_03_precedence(queries, keys, values, width=1.0):
    u = queries[:, None] - keys[None, :] / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def W_04_divide_square_by_width(queries, keys, values, width=1.0):
    d = queries[:, None] - keys[None, :]
    K = 0.75 * torch.clamp(1 - d ** 2 / width, min=0)
    w = _guard(K)
    return w @ values, w


def W_05_where_after_division(queries, keys, values, width=1.0):
    # forward right, gradient NaN for empty windows (where does not stop 0/0 in backward)
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    s = K.sum(-1, keepdim=True)
    w = torch.where(s > 0, K / s, torch.zeros_like(K))
    return w @ values, w


def W_06_searchsorted_window(queries, keys, values, width=1.0):
    # finds each window with searchsorted: assumes keys are sorted
    lo = torch.searchsorted(keys.detach().contiguous(), (queries - width).detach().contiguous())
    hi = torch.searchsorted(keys.detach().contiguous(), (queries + width).detach().contiguous(),
                            right=True)
    idx = torch.arange(keys.shape[0], device=keys.device)
    inside = (idx >= lo[:, None]) & (idx < hi[:, None])
    u = (queries[:, None] - keys) / width
    K = torch.where(inside, 0.75 * (1 - u ** 2), torch.zeros_like(u)).clamp(min=0)
    w = _guard(K)
    return w @ values, w


def W_07_window_ignores_width(queries, keys, values, width=1.0):
    d = queries[:, None] - keys
    u = d / width
    K = torch.where(d.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    w = _guard(K.clamp(min=0))
    return w @ values, w


def W_08_cdist(queries, keys, values, width=1.0):
    # cdist on (n, 1) points: uses the matmul form |q|^2 + |k|^2 - 2qk for > 25 points,
    # which cancels catastrophically for large coordinates
    d = torch.cdist(queries[:, None], keys[:, None])
    u = d / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def S_03_float_width(queries, keys, values, width=1.0):
    # float(width): drops the gradient with respect to a tensor width
    width = float(width)
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def W_10_nan_to_num(queries, keys, values, width=1.0):
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w


def W_11_uniform_for_empty(queries, keys, values, width=1.0):
    # empty window: falls back to the mean of all values (uniform weights), not zeros
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    s = K.sum(-1, keepdim=True)
    K = torch.where(s > 0, K, torch.ones_like(K))
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_12_add_eps_to_kernel(queries, keys, values, width=1.0):
    # + 1e-12 inside the kernel "so the sum is never 0": empty windows become uniform
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0) + 1e-12
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def O_04_float_mask_strict(queries, keys, values, width=1.0):
    # |u| < 1 strictly and the kernel value detached outside (grad of where ok) - but
    # multiplies by a float mask computed from u, and uses u.abs() ** 2 (grad at u=0 fine)
    u = (queries[:, None] - keys) / width
    K = 0.75 * (1 - u.abs() ** 2) * (u.abs() < 1).to(u.dtype)
    w = _guard(K)
    return w @ values, w


def W_14_half_width(queries, keys, values, width=1.0):
    # treats width as the window's diameter: |q - k| <= width / 2
    u = 2 * (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def W_15_expanded_square(queries, keys, values, width=1.0):
    # (q - k)^2 = q^2 - 2qk + k^2 "vectorised" with an outer product: cancels for
    # coordinates far from 0
    q, k = queries[:, None], keys[None, :]
    u2 = (q * q - 2 * q * k + k * k) / width ** 2
    K = 0.75 * torch.clamp(1 - u2, min=0)
    w = _guard(K)
    return w @ values, w


def W_16_empty_outputs_mean(queries, keys, values, width=1.0):
    # zero weights for empty windows, but their output falls back to the mean of values
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    empty = K.sum(-1) == 0
    out = torch.where(empty, values.mean(), w @ values)
    return out, w


def W_17_mask_computed_in_float16_u(queries, keys, values, width=1.0):
    # window test on u rounded to float16 "to save memory": keys just outside |u| = 1
    # (u = 1.0002) round to 1 and... get K = 0 anyway; keys just inside round out
    u = (queries[:, None] - keys) / width
    inside = u.half().abs() < 1
    K = torch.where(inside, 0.75 * (1 - u ** 2), torch.zeros_like(u))
    w = _guard(K)
    return w @ values, w


def W_18_window_from_numpy(queries, keys, values, width=1.0):
    # kernel computed in NumPy "for speed", turned back into a tensor: no gradient at all
    import numpy as np
    q = queries.detach().cpu().numpy()[:, None]
    k = keys.detach().cpu().numpy()[None, :]
    u = (q - k) / float(width)
    K = torch.from_numpy(0.75 * np.clip(1 - u ** 2, 0, None)).to(values.dtype)
    w = _guard(K)
    return w @ values, w


def W_19_squeeze_output(queries, keys, values, width=1.0):
    # outputs via (m, n) @ (n, 1) then .squeeze(): one query gives a 0-d tensor
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return (w @ values[:, None]).squeeze(), w


def W_20_values_rebuilt_with_torch_tensor(queries, keys, values, width=1.0):
    # torch.tensor(values) "to be sure it is a tensor": a detached copy
    values = torch.tensor(values)
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def W_21_keys_rebuilt_with_torch_tensor(queries, keys, values, width=1.0):
    keys = torch.tensor(keys)
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def O_05_divide_then_subtract(queries, keys, values, width=1.0):
    # u = q / width - k / width: two roundings of large numbers, then a cancellation
    u = queries[:, None] / width - keys[None, :] / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = _guard(K)
    return w @ values, w


def S_01_calls_book_nadaraya_watson(queries, keys, values, width=1.0):
    # against "from scratch (without calling book.kernel_regression)"
    from book import kernel_regression as kr
    return kr.nadaraya_watson(queries, keys, values, kr.epanechnikov, width)


def S_02_uses_book_kernel_only(queries, keys, values, width=1.0):
    from book.kernel_regression import KERNELS
    K = KERNELS["epanechnikov"]((queries[:, None] - keys) / width)
    w = _guard(K)
    return w @ values, w


def O_06_F_normalize_l1(queries, keys, values, width=1.0):
    # F.normalize(p=1) divides by max(sum |K|, 1e-12): an empty window stays all zeros
    import torch.nn.functional as F
    u = (queries[:, None] - keys) / width
    K = 0.75 * torch.clamp(1 - u ** 2, min=0)
    w = F.normalize(K, p=1, dim=-1)
    return w @ values, w
