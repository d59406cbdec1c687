"""Round 7 red team (writer A, issue 12), ch02_epanechnikov: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/ch02_epanechnikov.py with the names W01_x
written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W04, W17 and W20 are A_ (see each); S_01 (float(width)) is right but not run.
O_04 (cdist) is W_04 since round 8 (see it).
"""
# flake8: noqa
import torch

CHECK = "check_epanechnikov_pool"


def _u(queries, keys, width):
    return (queries[:, None] - keys[None, :]) / width


def C_01_reference(queries, keys, values, width=1.0):
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def O_02_no_three_quarters_where_kernel(queries, keys, values, width=1.0):
    # the 3/4 cancels in the normalisation; kernel via where on |u| <= 1
    u = (keys[None, :] - queries[:, None]) / width
    K = torch.where(u.abs() <= 1, 1 - u * u, torch.zeros_like(u))
    S = K.sum(dim=1, keepdim=True)
    empty = S == 0
    w = K / S.masked_fill(empty, 1.0)
    out = (w * values[None, :]).sum(dim=1)
    return out, w


def O_03_inplace_guard_on_sum(queries, keys, values, width=1.0):
    # guards the sum in place before dividing (autograd allows it: sum saves nothing)
    u = _u(queries, keys, width)
    K = torch.relu(0.75 - 0.75 * u * u)
    S = K.sum(-1, keepdim=True)
    S[S == 0] = 1
    w = K / S
    return torch.einsum("qk,k->q", w, values), w


def W_01_where_after_division(queries, keys, values, width=1.0):
    # guards with where after dividing: NaN in the unused branch poisons the gradient
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = torch.where(S > 0, K / S, torch.zeros_like(K))
    return w @ values, w


def W_02_eps_in_denominator(queries, keys, values, width=1.0):
    # K / (S + 1e-6): fine for full windows, wrong when the only key is near the edge
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    w = K / (K.sum(-1, keepdim=True) + 1e-6)
    return w @ values, w


def W_03_clamp_min_denominator(queries, keys, values, width=1.0):
    # K / S.clamp_min(1e-4): a window holding only edge keys sums to less than 1
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    w = K / K.sum(-1, keepdim=True).clamp_min(1e-4)
    return w @ values, w


# Accepted on purpose (left): 3/4 (1 - u^2) * [|u| <= 1] gives inf * 0 = NaN only where
# u^2 overflows, |u| > 1.8e19 in float32 (a width of 1e-20, keys 2e19 away) or |u| > 256
# in float16, which the exercise does not ask for; a far-key float32 case would also
# reject the right O_19 ((1 - |u|).clamp(0) * (1 + |u|) is 0 * inf there).
def A_04_indicator_times_poly(queries, keys, values, width=1.0):
    # K = 3/4 (1 - u^2) * [|u| <= 1]: u^2 overflows to inf far away, inf * 0 = NaN
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2) * (u.abs() <= 1)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_05_width_multiplies(queries, keys, values, width=1.0):
    # u = (q - k) * width: the same as dividing only for width 1
    u = (queries[:, None] - keys[None, :]) * width
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_06_sorted_keys_window(queries, keys, values, width=1.0):
    # uses searchsorted to find each window: assumes the keys are sorted
    lo = torch.searchsorted(keys.contiguous(), (queries - width).contiguous())
    hi = torch.searchsorted(keys.contiguous(), (queries + width).contiguous(), right=True)
    idx = torch.arange(keys.shape[0], device=keys.device)
    inside = (idx[None, :] >= lo[:, None]) & (idx[None, :] < hi[:, None])
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2) * inside
    K = K.clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def S_01_width_to_float(queries, keys, values, width=1.0):
    # float(width): no gradient reaches a tensor width (the chapter learns its parameter)
    width = float(width)
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_08_float32_weights(queries, keys, values, width=1.0):
    # allocates the kernel matrix with torch.zeros (float32) and fills it
    u = _u(queries, keys, width)
    K = torch.zeros(u.shape)
    inside = u.abs() <= 1
    K[inside] = (0.75 * (1 - u[inside] ** 2)).float()
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values.float(), w


def W_09_empty_window_mean(queries, keys, values, width=1.0):
    # an empty window falls back to uniform weights (the mean of the values)
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    empty = S == 0
    K = torch.where(empty, torch.ones_like(K), K)
    w = K / K.sum(-1, keepdim=True)
    return w @ values, w


def W_10_abs_width(queries, keys, values, width=1.0):
    # divides by width ** 2 under the square: u^2 = (q - k)^2 / width (dimension slip)
    d2 = (queries[:, None] - keys[None, :]) ** 2 / width
    K = 0.75 * (1 - d2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_11_nan_to_num_gradient(queries, keys, values, width=1.0):
    # 0/0 then nan_to_num: the exercise forbids it (NaN gradient)
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    w = torch.nan_to_num(K / K.sum(-1, keepdim=True))
    return w @ values, w


def W_12_inplace_centre_queries(queries, keys, values, width=1.0):
    # centres the data in place for "numerical stability": mutates queries and keys
    with torch.no_grad():
        c = keys.mean()
        if not queries.requires_grad:
            queries.sub_(c)
        if not keys.requires_grad:
            keys.sub_(c)
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_13_strict_inside_plus_tol(queries, keys, values, width=1.0):
    # the window test |u| < 1 + 1e-3 then (1 - u^2) without clamping: keys just outside
    # get a small negative kernel value
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u ** 2) * (u.abs() < 1 + 1e-3)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S != 0, S, torch.ones_like(S))
    return w @ values, w


def W_14_transposed_square(queries, keys, values, width=1.0):
    # u built as (keys, queries) and transposed only when the shapes differ
    u = (keys[:, None] - queries[None, :]) / width
    if u.shape[0] != u.shape[1]:
        u = u.T
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


_CACHE = {}


def W_15_kernel_cached_by_shape(queries, keys, values, width=1.0):
    # caches the weight matrix per (num_queries, num_keys, width), e.g. for a training loop
    key = (queries.shape[0], keys.shape[0], float(width), queries.dtype)
    if key not in _CACHE:
        u = _u(queries, keys, width)
        K = 0.75 * (1 - u ** 2).clamp(min=0)
        S = K.sum(-1, keepdim=True)
        _CACHE[key] = K / torch.where(S > 0, S, torch.ones_like(S))
    w = _CACHE[key]
    return w @ values, w


def W_16_expanded_square(queries, keys, values, width=1.0):
    # (q - k)^2 = q^2 - 2qk + k^2 ("the matrix trick"): cancels catastrophically for
    # points far from 0
    d2 = queries[:, None] ** 2 - 2 * queries[:, None] * keys[None, :] + keys[None, :] ** 2
    K = 0.75 * (1 - d2 / width ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_17_float32_inside(queries, keys, values, width=1.0):
    # computes in float32 whatever the input, casts the results back
    q, k, v = queries.float(), keys.float(), values.float()
    u = (q[:, None] - k[None, :]) / width
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return (w @ v).to(queries.dtype), w.to(queries.dtype)


# Right until round 8; W_ since: torch.cdist computes the distances of more than 25
# points as sqrt(q^2 + k^2 - 2qk), which loses q - k far from 0 in float32 (round 8's
# case of 40 queries and 40 keys near 1000, width 0.5: weights off by about 1e-2).
def W_04_cdist(queries, keys, values, width=1.0):
    # |q - k| from torch.cdist on 1-D points
    d = torch.cdist(queries[:, None], keys[:, None])
    K = 0.75 * (1 - (d / width) ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_18_detached_keys(queries, keys, values, width=1.0):
    # no gradient to the keys
    u = _u(queries, keys.detach(), width)
    K = 0.75 * (1 - u ** 2).clamp(min=0)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def O_19_divide_by_inf_guard(queries, keys, values, width=1.0):
    # guards the empty windows with an infinite denominator: K / inf = 0, gradient 0
    u = _u(queries, keys, width)
    K = 0.75 * (1 - u.abs()).clamp(min=0) * (1 + u.abs())
    S = K.sum(-1, keepdim=True)
    w = K / S.masked_fill(S == 0, float("inf"))
    return w @ values, w


# Accepted on purpose: float16 returned as float32; the exercise never asks for
# float16 (the red team's report counts it as a note only).
def A_20_float16_returns_float32(queries, keys, values, width=1.0):
    if queries.dtype in (torch.float16, torch.bfloat16):
        out, w = C_01_reference(queries.float(), keys.float(), values.float(), width)
        return out, w
    return C_01_reference(queries, keys, values, width)


def W_21_float32_returns_float64(queries, keys, values, width=1.0):
    out, w = C_01_reference(queries, keys, values, width)
    if queries.dtype == torch.float32:
        return out.double(), w.double()
    return out, w


import functools


@functools.lru_cache(maxsize=8)
def _kernel_cached(queries, keys, width):
    u = _u(queries, keys, width)
    return 0.75 * (1 - u ** 2).clamp(min=0)


def W_22_lru_cache_kernel(queries, keys, values, width=1.0):
    # memoises the kernel matrix on (queries, keys, width) with lru_cache: tensors hash by
    # identity, so an in-place change of queries or keys returns stale weights
    K = _kernel_cached(queries, keys, width)
    S = K.sum(-1, keepdim=True)
    w = K / torch.where(S > 0, S, torch.ones_like(S))
    return w @ values, w


def W_23_detached_values(queries, keys, values, width=1.0):
    return C_01_reference(queries, keys, values.detach(), width)


def W_24_weights_detached_output_ok(queries, keys, values, width=1.0):
    # returns detached weights (output keeps its graph): weights carry no gradient
    out, w = C_01_reference(queries, keys, values, width)
    return out, w.detach()


def O_20_per_query_loop_item_guard(queries, keys, values, width=1.0):
    # one query at a time; a Python `if` on the window's sum (.item() only in the test)
    rows = []
    for q in queries:
        u = (q - keys) / width
        K = 0.75 * torch.clamp(1 - u * u, min=0)
        total = K.sum()
        rows.append(K / total if total.item() > 0 else torch.zeros_like(K))
    w = torch.stack(rows) if rows else keys.new_zeros(0, keys.shape[0])
    return w @ values, w
