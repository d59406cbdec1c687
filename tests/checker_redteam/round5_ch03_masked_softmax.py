"""Round 5 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch03_masked_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    return pos < valid_lens[..., None]          # (b, m or 1, n)


def C_01_standard(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    return w * keep


def O_02_manual_exp(X, valid_lens):
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens).expand_as(X)
    Xm = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    e = torch.exp(Xm - Xm.max(-1, keepdim=True).values) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def O_03_loop(X, valid_lens):
    out = torch.zeros_like(X)
    b, m, n = X.shape
    for i in range(b):
        for j in range(m):
            if valid_lens is None:
                L = n
            else:
                L = int(valid_lens[i] if valid_lens.dim() == 1 else valid_lens[i, j])
            if L > 0:
                out[i, j, :L] = torch.softmax(X[i, j, :L], dim=-1)
    return out


def O_04_float_valid_lens_view(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b = X.shape[0]
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens.reshape(b, -1, 1)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep, w, torch.zeros((), dtype=X.dtype, device=X.device)) if False \
        else torch.softmax(X.masked_fill(~keep, -60000.0 if X.dtype == torch.float16 else -1e30),
                           -1) * keep


def O_05_masked_fill_neg_inf_nan_to_num(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.nan_to_num(torch.softmax(X.masked_fill(~keep, float("-inf")), -1))


def W_02_d2l_minus_1e6(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e6), -1)


def W_03_inplace_fill(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens).expand_as(X)
    X[~keep] = -1e4
    return torch.softmax(X, -1) * keep


def W_04_view_b1m_square_only(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b = X.shape[0]
    keep = torch.arange(X.shape[-1], device=X.device)[None, None, :] < \
        valid_lens.reshape(b, 1, -1).transpose(1, 2) if valid_lens.dim() == 1 else \
        torch.arange(X.shape[-1], device=X.device)[None, None, :] < valid_lens.reshape(b, 1, -1)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_05_off_by_one(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(n, device=X.device) <= v[..., None]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_06_minus_1e9_float16(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, -1e9), -1)
    return w * keep


def W_07_inplace_zero_rows(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    w.mul_(keep)
    return w


def W_08_upcast_float32(X, valid_lens):
    return C_01_standard(X.float(), valid_lens)


def W_09_2d_first_column(X, valid_lens):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return C_01_standard(X, valid_lens)


def W_10_2d_max_per_row(X, valid_lens):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.max(-1).values
    return C_01_standard(X, valid_lens)


def W_11_additive_minus_1e4(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X - 1e4 * (~keep).to(X.dtype), -1)
    return w * keep


_cache = {}


def W_12_cached_mask(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    key = (tuple(X.shape), valid_lens.dim())
    if key not in _cache:
        _cache[key] = _keep(X, valid_lens)
    keep = _cache[key]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_13_none_returns_X(X, valid_lens):
    if valid_lens is None:
        return X
    return C_01_standard(X, valid_lens)


def O_06_masked_fill_neg_inf_where(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))


def W_15_exp_without_max(X, valid_lens):
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    e = torch.exp(X) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_16_max_includes_padding(X, valid_lens):
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    e = torch.exp(X - X.max(-1, keepdim=True).values) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_17_d2l_repeat_interleave_2d_bug(X, valid_lens):
    # d2l: repeat_interleave for 1-D; for 2-D flattens, fine; but fills in a reshaped copy
    if valid_lens is None:
        return torch.softmax(X, -1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.T.reshape(-1)     # transposed flatten: right only when b == 1
    Xf = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    w = torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
    return w.reshape(shape)


def W_18_float_mask_multiply_grad_detached(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return (w * keep).detach().requires_grad_()


def W_19_valid_lens_mutated(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    valid_lens.clamp_(max=X.shape[-1])
    return C_01_standard(X, valid_lens)


def W_20_softmax_in_float16_of_large(X, valid_lens):
    # masked with -inf via log of mask (log 0 = -inf) then nan_to_num on the output
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens).to(X.dtype)
    w = torch.softmax(X + torch.log(keep), -1)
    return torch.nan_to_num(w, nan=0.0)


def W_21_unsqueeze_inplace_valid_lens(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        valid_lens.unsqueeze_(-1)               # changes the caller's tensor's shape
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_22_additive_neg_inf_nan_to_num(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    bias = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(X + bias, -1))


def W_23_keep_as_float_mul_before_softmax(X, valid_lens):
    # zeroes the masked scores (not -inf): masked keys still get weight e^0, then zeroed and
    # NOT renormalised
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X * keep, -1) * keep


def W_24_view_needs_contiguous(X, valid_lens):
    b, m, n = X.shape
    Xf = X.view(b * m, n)
    if valid_lens is None:
        return torch.softmax(Xf, -1).view(b, m, n)
    v = valid_lens.repeat_interleave(m) if valid_lens.dim() == 1 else valid_lens.view(-1)
    keep = torch.arange(n, device=X.device) < v[:, None]
    w = torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
    return w.view(b, m, n)


def W_25_valid_lens_above_n_breaks(X, valid_lens):
    # one-hot mask via F.one_hot(valid_lens) cumsum: errors or wrong when valid_len == n
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    stop = torch.nn.functional.one_hot(v.clamp(max=n - 1), n).cumsum(-1).bool()
    keep = ~stop
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_26_one_hot_mask_breaks_above_n(X, valid_lens):
    # mask = 1 - cumsum(one_hot(valid_len)): raises for valid_len > num_keys
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = (1 - torch.nn.functional.one_hot(v.long(), n + 1).cumsum(-1)[..., :n]).bool()
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_27_repeat_not_interleave(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    v = valid_lens.repeat(m) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    keep = (torch.arange(n, device=X.device) < v[:, None]).reshape(b, m, n)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_28_none_path_float32(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1, dtype=torch.float32)
    return C_01_standard(X, valid_lens)


def W_29_squeeze_habit(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = (torch.arange(X.shape[-1], device=X.device) <
            valid_lens.reshape(X.shape[0], -1)[..., None]).squeeze()
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep


def W_30_float64_computed_in_float32(X, valid_lens):
    if X.dtype == torch.float64:
        X = X.float()
    return C_01_standard(X, valid_lens)


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_31_float64_roundtrip_through_float32(X, valid_lens):
    # keeps the dtype but loses float64 precision
    return C_01_standard(X.float(), valid_lens).to(X.dtype) if X.dtype == torch.float64 \
        else C_01_standard(X, valid_lens)
