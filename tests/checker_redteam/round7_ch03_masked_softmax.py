"""Round 7 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/ch03_masked_softmax.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    pos = torch.arange(X.shape[-1], device=X.device)
    return pos < valid_lens[..., None]


def C_01_reference(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    W = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    return W * keep


# Listed as right (O_02) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: X.float() for every dtype: a float64 input comes
# out 6.4e-8 off.
def W_22_manual_exp_mask_was_O_02(X, valid_lens):
    # exp(X - max over the kept keys) * keep / sum, guarded; float16 done in float32
    keep = (torch.ones_like(X, dtype=torch.bool) if valid_lens is None
            else _keep(X, valid_lens).expand_as(X))
    Xf = X.float()
    m = Xf.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(torch.where(keep, Xf - m, torch.zeros_like(Xf))) * keep
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def W_03_d2l_style_flatten(X, valid_lens):
    # d2l's flatten + repeat_interleave, on a copy, zeroing the empty rows.
    # Renamed from O_03 after round 12: its float16 fill, -1e4, outweighs valid float16
    # scores below -1e4 (round 12's W_10, the same fault; the matrix now shifts X by -3e4
    # in float16).
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    Y = X.reshape(-1, shape[-1]).clone()
    keep = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    Y = Y.masked_fill(~keep, -1e4 if X.dtype == torch.float16 else -1e9)
    return (torch.softmax(Y, -1) * keep).reshape(shape)


def W_01_fill_minus_1e4(X, valid_lens):
    # fills with -1e4 (safe in float16): a masked key wins when the kept scores are < -1e4
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e4), dim=-1) * keep


def O_24_minf_masked_fill_then_where(X, valid_lens):
    # -inf fill; empty rows fixed with torch.where afterwards: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    W = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep.any(-1, keepdim=True), W, torch.zeros_like(W))


def W_03_inplace_2d_path(X, valid_lens):
    # copies X in the 1-D path but writes through a reshape view in the 2-D path
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    if valid_lens.dim() == 1:
        Y = X.clone()
        keep = _keep(X, valid_lens).expand_as(X)
        Y[~keep] = torch.finfo(X.dtype).min
        return torch.softmax(Y, -1) * keep
    Y = X.reshape(-1, n)
    lens = valid_lens.reshape(-1)
    keep = torch.arange(n, device=X.device)[None, :] < lens[:, None]
    if not X.requires_grad:
        Y[~keep] = torch.finfo(X.dtype).min
    else:
        Y = Y.masked_fill(~keep, torch.finfo(X.dtype).min)
    return (torch.softmax(Y, -1) * keep).reshape(X.shape)


def W_04_2d_lens_on_wrong_axis(X, valid_lens):
    # (batch, queries) lengths unsqueezed on the wrong axis: they mask the keys by the
    # length of the key's index-th query (right when all queries share one length)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        keep = _keep(X, valid_lens)
    else:
        pos = torch.arange(X.shape[-1], device=X.device)
        lens = valid_lens[:, None, :] if valid_lens.shape[1] == X.shape[2] else \
            valid_lens[:, :, None]
        keep = pos < lens if lens.shape[-1] == 1 else pos[:, None] < lens
    W = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return W * keep


_CACHE = {}


def W_05_mask_cached_by_shape(X, valid_lens):
    # caches the boolean mask per (X shape, lens shape)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    key = (tuple(X.shape), tuple(valid_lens.shape))
    if key not in _CACHE:
        _CACHE[key] = _keep(X, valid_lens)
    keep = _CACHE[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_06_arange_in_x_dtype(X, valid_lens):
    # positions built in X's dtype: float16 cannot count past 2048
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    pos = torch.arange(X.shape[-1], device=X.device, dtype=X.dtype)
    keep = pos < valid_lens[..., None].to(X.dtype)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_07_none_means_no_softmax_dim(X, valid_lens):
    # None path softmaxes over the queries axis (dim=1): right when only one query... no,
    # right for square symmetric input only
    if valid_lens is None:
        return torch.softmax(X, dim=-2).transpose(-1, -2) if X.shape[1] == X.shape[2] \
            else torch.softmax(X, dim=-1)
    return C_01_reference(X, valid_lens)


def W_08_float32_fill_overflow_caught(X, valid_lens):
    # fills float16 with float32's min by computing in float32 and forgets to cast back
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Xf = X.float().masked_fill(~keep, torch.finfo(torch.float32).min)
    return torch.softmax(Xf, -1) * keep


def W_09_zero_rows_from_lens_1d_only(X, valid_lens):
    # zeroes empty rows using valid_lens == 0 broadcast as (batch, 1, 1): wrong for
    # (batch, queries) lengths where only some queries are empty
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    W = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    if valid_lens.dim() == 1:
        return W * (valid_lens > 0)[:, None, None]
    return W * (valid_lens > 0).all(dim=1)[:, None, None]


def W_10_view_flatten(X, valid_lens):
    # .view(-1, n): fails on a non-contiguous X
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, m, n = X.shape
    lens = valid_lens.repeat_interleave(m) if valid_lens.dim() == 1 else valid_lens.view(-1)
    Y = X.view(-1, n)
    keep = torch.arange(n, device=X.device)[None, :] < lens[:, None]
    return (torch.softmax(Y.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep).view(b, m, n)


def W_11_lens_clamped_min1(X, valid_lens):
    # clamps valid_lens to at least 1 to avoid empty rows: an empty row attends to key 0
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens.clamp(min=1))
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)


def W_12_detached_weights_for_zero_rows(X, valid_lens):
    # -inf fill, nan_to_num on a detached copy, then adds the difference: finite values,
    # but gradient NaN on masked rows
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    W = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return W + (torch.nan_to_num(W.detach()) - W.detach())


def W_13_bfloat16_fill_float16_min(X, valid_lens):
    # uses float16's min (-65504) as the fill for every reduced-precision dtype; for float32
    # and float64 uses -1e9: in bfloat16 a kept score below -65504 loses to a masked key
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    fill = -65504.0 if X.dtype in (torch.float16, torch.bfloat16) else -1e9
    return torch.softmax(X.masked_fill(~keep, fill), -1) * keep


def W_14_unsqueeze_lens_in_place(X, valid_lens):
    # valid_lens.unsqueeze_(1): changes the caller's valid_lens to shape (batch, 1)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens.unsqueeze_(1)
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_15_clamp_lens_in_place(X, valid_lens):
    # valid_lens.clamp_(max=num_keys): writes into the caller's lengths
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    valid_lens.clamp_(max=X.shape[-1] - 1) if False else valid_lens.clamp_(min=0)
    return C_01_reference(X, valid_lens.clamp_(max=X.shape[-1] // 2 + 1) * 0 + valid_lens)


def O_16_where_inf_fill(X, valid_lens):
    # -inf by where (not additive), empty rows zeroed by where: the where backward zeroes
    # the NaN, so the gradient stays finite
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    W = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep.any(-1, keepdim=True), W, torch.zeros_like(W))


def W_17_additive_inf_then_where(X, valid_lens):
    # additive -inf mask (X + mask), empty rows fixed by where: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    mask = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(
        ~keep, float("-inf"))
    W = torch.softmax(X + mask, dim=-1)
    return torch.where(keep.any(-1, keepdim=True), W, torch.zeros_like(W))


def W_18_bfloat16_returns_float32(X, valid_lens):
    if X.dtype == torch.bfloat16:
        return C_01_reference(X.float(), valid_lens)
    return C_01_reference(X, valid_lens)


def W_19_float64_returns_float32(X, valid_lens):
    out = C_01_reference(X, valid_lens)
    return out.float() if X.dtype == torch.float64 else out


_C3 = {}


def W_20_mask_cache_shape_dtype_lens_dim(X, valid_lens):
    # caches the mask per (X shape, X dtype, lens shape)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    key = (tuple(X.shape), X.dtype, tuple(valid_lens.shape), X.requires_grad)
    if key not in _C3:
        _C3[key] = _keep(X, valid_lens)
    keep = _C3[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


import functools


@functools.lru_cache(maxsize=16)
def _keep_cached(valid_lens, n):
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    return torch.arange(n, device=valid_lens.device) < lens[..., None]


def W_21_lru_cache_mask_on_lens(X, valid_lens):
    # memoises the mask on the valid_lens tensor (identity) and num_keys
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep_cached(valid_lens, X.shape[-1])
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


# Renamed O_22 -> W_ after round 13: lengths cast to int32: a legal length of 4294967298 wraps to 2 (round 13's int16/int32 wrap, ruled wrong).
def W_22_float64_inside_int32_lens(X, valid_lens):
    # float64 internally (then cast back), lengths cast to int32 first
    if valid_lens is None:
        return torch.softmax(X.double(), dim=-1).to(X.dtype)
    out = C_01_reference(X.double(), valid_lens.to(torch.int32))
    return out.to(X.dtype)
