"""Round 11 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/ch03_masked_softmax.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch
CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        return pos[None, None, :] < valid_lens[:, None, None]
    return pos[None, None, :] < valid_lens[:, :, None]


def C_01_standard(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w)) if False else \
        torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def O_02_d2l_flatten(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    Xf = X.reshape(-1, shape[-1])
    keep = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    w = torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep
    return w.reshape(shape)


def O_03_float32_compute(X, valid_lens):
    Y = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    if valid_lens is None:
        return torch.softmax(Y, -1).to(X.dtype)
    keep = _keep(X, valid_lens)
    z = Y.masked_fill(~keep, float("-inf"))
    m = z.amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(z - m)
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def W_01_arange_in_X_dtype(X, valid_lens):
    # d2l's arange(..., dtype=float32) adapted to X.dtype: float16 positions above
    # 2048 round (2049 -> 2048), so odd lengths beyond 2048 mask the wrong key
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    pos = torch.arange(n, dtype=X.dtype, device=X.device)
    vl = valid_lens.to(X.dtype)
    keep = pos < (vl[:, None, None] if vl.dim() == 1 else vl[:, :, None])
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_02_clamps_valid_lens_in_place(X, valid_lens):
    # "valid_len above num_keys makes every key valid": clamps the caller's tensor
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    valid_lens.clamp_(max=X.shape[-1])
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


# Right (first named W03): the softmax of an all -inf row is NaN and torch.where hides it;
# in the backward masked_fill zeroes the gradient of every filled position, so no NaN
# reaches X (the checker's gradient cases with empty rows pass).
def O_05_where_on_nan_rows(X, valid_lens):
    # -inf fill, softmax, then torch.where picks zeros for the empty rows:
    # forward right, NaN gradient through the unselected branch
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))


def W_04_valid_lens_float_cast_int32(X, valid_lens):
    # valid_lens turned to int32 via float16 (X's dtype) before comparing
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens.to(X.dtype).to(torch.int32)
    keep = _keep(X, vl)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_05_mask_cached_by_shape(X, valid_lens, _memo={}):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    key = (tuple(X.shape), tuple(valid_lens.shape))
    if key not in _memo:
        _memo[key] = _keep(X, valid_lens)
    keep = _memo[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_06_2d_lens_via_view(X, valid_lens):
    # .view(-1) on the (batch, num_queries) lengths: fails on a non-contiguous tensor
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        vl = valid_lens[:, None].expand(b, m).reshape(-1)
    else:
        vl = valid_lens.view(-1)
    keep = (torch.arange(n)[None, :] < vl[:, None]).view(b, m, n)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_07_fill_min_of_X_minus_1(X, valid_lens):
    # fill with one below the smallest score: fine unless that is not representable
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    fill = X.detach().min() - 1
    return torch.softmax(torch.where(keep, X, fill), dim=-1) * keep


def W_08_mult_by_keep_then_renorm(X, valid_lens):
    # softmax over all keys, zero the masked ones, renormalise with a +1e-6 guard
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.float(), dim=-1) * keep
    return (w / (w.sum(-1, keepdim=True) + 1e-6)).to(X.dtype)


def W_09_lens_zero_made_uniform_then_zeroed_by_mul_nan(X, valid_lens):
    # -1e9 fill (finite in float32, -inf in float16) then * keep
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e9), dim=-1) * keep


def W_10_softmax_float32_returned(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X.float(), dim=-1).to(X.dtype)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.float().masked_fill(~keep, -1e30), dim=-1) * keep
    return w if X.dtype == torch.float16 else w.to(X.dtype)


def O_04_1d_lens_two_paths(X, valid_lens):
    # 1-D lengths broadcast as valid_lens[:, None] -> works for batch 1 or batch == m
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    if valid_lens.dim() == 1:
        keep = (torch.arange(n)[None, :] < valid_lens[:, None]).unsqueeze(0) \
            if X.shape[0] == 1 else (torch.arange(n)[None, :] < valid_lens[:, None])
        keep = keep.expand_as(X) if keep.shape[0] == 1 else keep[:, None, :].expand_as(X)
    else:
        keep = torch.arange(n)[None, None, :] < valid_lens[:, :, None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_12_valid_lens_gt_n_means_none(X, valid_lens):
    # "valid_len above num_keys": only checks the first length
    if valid_lens is None or int(valid_lens.reshape(-1)[0]) >= X.shape[-1]:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_13_keep_from_lens_minus_one(X, valid_lens):
    # pos <= valid_len - 1, with valid_len = 0 in uint8 arithmetic? uses valid_lens - 1
    # after a cast to X's dtype (fine), but compares positions in bfloat16/float16
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device).to(X.dtype)
    last = (valid_lens - 1).to(X.dtype)
    keep = pos <= (last[:, None, None] if last.dim() == 1 else last[:, :, None])
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_14_clamp_scores_float16_range(X, valid_lens):
    # clamps X into the float16 range (+-6e4) first, for every dtype
    X = X.clamp(-6e4, 6e4)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_15_subtract_valid_max_detached_then_exp_float16(X, valid_lens):
    # manual masked softmax in the input dtype with a max shift, but the max is taken
    # over ALL keys (pre-mask) -> valid keys far below a masked huge score underflow
    m = X.amax(-1, keepdim=True).detach()
    e = torch.exp(X - m)
    if valid_lens is not None:
        e = e * _keep(X, valid_lens)
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_16_fill_in_place_no_grad(X, valid_lens):
    # writes the fill into X when no gradient is needed (d2l's habit)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Y = X.masked_fill_(~keep, torch.finfo(X.dtype).min) if not X.requires_grad else \
        X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(Y, dim=-1) * keep


def W_17_max_per_matrix(X, valid_lens):
    # manual masked softmax, shift by one max per example (over queries and keys,
    # after masking): rows far below their matrix's max underflow to all-zero
    Y = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    z = Y.masked_fill(~keep, float("-inf"))
    m = z.amax(dim=(1, 2), keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(z - m)
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)
