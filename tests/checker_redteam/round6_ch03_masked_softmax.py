"""Round 6 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/ch03_masked_softmax.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch
CHECK = "check_masked_softmax"

def _keep(X, valid_lens):
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        vl = valid_lens[:, None, None]
    else:
        vl = valid_lens[:, :, None]
    return torch.arange(n, device=X.device) < vl

def C_01_plain(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)
    return torch.where(keep.any(-1, keepdim=True), w.nan_to_num(0.0), torch.zeros_like(w)) if False else \
        torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep.any(-1, keepdim=True)

def O_02_loop_slices(X, valid_lens):
    # per-row slicing, zero padding
    b, m, n = X.shape
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(b, m)
    rows = []
    for i in range(b):
        for j in range(m):
            L = int(min(int(vl[i, j]), n))
            r = X.new_zeros(n)
            if L > 0:
                r = torch.cat([torch.softmax(X[i, j, :L], -1), X.new_zeros(n - L)])
            rows.append(r)
    return torch.stack(rows).reshape(b, m, n)

def O_03_exp_mask_with_rowmax_of_valid(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    Xm = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    e = torch.exp(Xm - Xm.amax(-1, keepdim=True).detach()) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))

def W_01_fill_minus_1e4(X, valid_lens):
    # -1e4 fits in float16 but is not small enough when scores are themselves near -1e4
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, -1e4), -1)
    return w * keep.any(-1, keepdim=True)

def W_02_tile_not_interleave(X, valid_lens):
    # d2l-style flattening with repeat (tile) instead of repeat_interleave
    b, m, n = X.shape
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens.repeat(m) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    keep = (torch.arange(n) < vl[:, None]).reshape(b, m, n)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_03_multiplicative_mask_global_max(X, valid_lens):
    # exp(X - max over ALL keys) * mask: valid keys underflow when padding holds large scores
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    e = torch.exp(X - X.amax(-1, keepdim=True)) * keep
    s = e.sum(-1, keepdim=True)
    return e / s.clamp_min(torch.finfo(X.dtype).tiny)

def W_04_no_mask_path_upcast(X, valid_lens):
    # the None branch computes in float32
    if valid_lens is None:
        return torch.softmax(X.float(), -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_05_mutates_in_2d_branch(X, valid_lens):
    # writes the fill into a reshaped view of X in the per-query branch only
    b, m, n = X.shape
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    if valid_lens.dim() == 2 and not X.requires_grad:
        Y = X.reshape(-1, n)
        Y[~keep.reshape(-1, n)] = torch.finfo(X.dtype).min
        w = torch.softmax(Y, -1).reshape(b, m, n)
    else:
        w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

_cache = {}
def W_06_mask_cached_by_shape(X, valid_lens):
    # caches the mask by X's shape: a new valid_lens with the same shape reuses the old mask
    if valid_lens is None:
        return torch.softmax(X, -1)
    key = (tuple(X.shape), valid_lens.dim())
    if key not in _cache:
        _cache[key] = _keep(X, valid_lens)
    keep = _cache[key]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_07_lens_batch_axis_as_query_axis(X, valid_lens):
    # (batch,) lens broadcast as [:, None]: lines batch index up with the query axis
    b, m, n = X.shape
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        keep = torch.arange(n) < valid_lens[:, None]
        if b != m and b != 1:
            keep = torch.arange(n) < valid_lens[:, None, None]
    else:
        keep = torch.arange(n) < valid_lens[..., None]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

# Renamed from W08 (the writer's own correction): the backward of masked_fill zeroes the
# NaN of a fully masked row, so the gradient is finite and equals the reference's.
def O_08_zero_rows_nan_grad(X, valid_lens):
    # -inf fill, then where() to zero the NaN rows: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))

def W_09_zero_rows_detached(X, valid_lens):
    # zero rows handled by replacing the whole output in no_grad: gradient of other rows lost
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    any_ = keep.any(-1, keepdim=True)
    if not bool(any_.all()):
        w = (w * any_).detach()
    return w

def W_10_lens_clamped_in_place(X, valid_lens):
    # clamps valid_lens in place to num_keys (changes the caller's tensor)
    n = X.shape[-1]
    if valid_lens is None:
        return torch.softmax(X, -1)
    valid_lens.clamp_(max=n - 1) if valid_lens.dtype != torch.bool else None
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_11_float_min_uniform_zero_rows(X, valid_lens):
    # finfo.min fill but forgets zero rows: valid_len 0 gives uniform weights
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)

def W_12_half_via_float32_return(X, valid_lens):
    # masked branch computes in float32 and returns float32
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    Xf = X.float()
    w = torch.softmax(Xf.masked_fill(~keep, -1e9), -1)
    return w * keep.any(-1, keepdim=True)

def W_13_lens_as_float_floor(X, valid_lens):
    # converts lens with .to(X.dtype): float16 cannot hold large lens exactly, and <= mixup at .5
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    vl = valid_lens.to(X.dtype)
    vl = vl[:, None, None] if vl.dim() == 1 else vl[:, :, None]
    keep = torch.arange(n, dtype=X.dtype) <= vl - 1
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_14_no_mask_returns_X_alias_when_one_key(X, valid_lens):
    # shortcut: one key -> returns ones via in-place on X
    if X.shape[-1] == 1:
        return X.detach().fill_(1.0) if valid_lens is None else X.detach().fill_(1.0) * (valid_lens.reshape(X.shape[0], -1)[..., None] > 0)
    return C_01_plain(X, valid_lens)

def W_15_additive_neg_inf_nan_to_num(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    add = torch.zeros(keep.shape, dtype=X.dtype).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(X + add, -1), nan=0.0)

def W_16_shift_by_max_with_zero_fill(X, valid_lens):
    # shift = max over keys with padding filled by 0: valid scores far below 0 underflow
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    c = X.masked_fill(~keep, 0).amax(-1, keepdim=True)
    e = torch.exp(X - c) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))

def W_17_valid_lens_float_index(X, valid_lens):
    # builds the mask with valid_lens cast to X's dtype and compared with <: float16 rounds 2049 -> 2048
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    vl = valid_lens.to(X.dtype)
    vl = vl[:, None, None] if vl.dim() == 1 else vl[:, :, None]
    keep = torch.arange(n, dtype=X.dtype) < vl
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

# Renamed from W18 (the writer's own correction): every squeezed shape is lined up again
# with the batch and query axes, so the values and gradients are right.
def O_18_one_query_lens_squeezed(X, valid_lens):
    # squeezes valid_lens: a (batch, 1) per-query tensor becomes (batch,), fine; but batch 1 (1,) -> ()
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens.squeeze()
    n = X.shape[-1]
    if vl.dim() == 0:
        vl = vl.reshape(1, 1, 1)
    elif vl.dim() == 1:
        vl = vl[:, None, None] if vl.shape[0] == X.shape[0] else vl[None, :, None]
    else:
        vl = vl[:, :, None]
    keep = torch.arange(n) < vl
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def W_19_one_hot_cumsum_mask(X, valid_lens):
    # mask from one_hot(valid_lens, n + 1).cumsum: raises when a length exceeds num_keys
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    vl = valid_lens[:, None] .expand(X.shape[0], X.shape[1]) if valid_lens.dim() == 1 else valid_lens
    keep = (1 - torch.nn.functional.one_hot(vl.long(), n + 1).cumsum(-1)[..., :n]).bool()
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def O_04_float_lens(X, valid_lens):
    # works with integer or float lengths alike
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[..., None]
    keep = torch.arange(X.shape[-1], device=X.device) < vl
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep.any(-1, keepdim=True)

def W_20_view_flatten(X, valid_lens):
    # d2l-style X.view(-1, n): raises on non-contiguous X
    b, m, n = X.shape
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens.repeat_interleave(m) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    Xf = X.view(-1, n)
    keep = torch.arange(n) < vl[:, None]
    w = torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep.any(-1, keepdim=True)
    return w.view(b, m, n)
