"""Round 10 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/03_masked_softmax.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    n = X.shape[-1]
    ar = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        return ar[None, None, :] < valid_lens[:, None, None]
    return ar[None, None, :] < valid_lens[:, :, None]


def _good(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, dim=-1) * keep


def W_01_softmax_then_mask_renorm(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X, -1) * keep
    s = w.sum(-1, keepdim=True)
    return w / torch.where(s == 0, torch.ones_like(s), s)


def W_02_repeat_not_interleave(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        lens = valid_lens.repeat(m)
    else:
        lens = valid_lens.reshape(-1)
    keep = (torch.arange(n, device=X.device)[None, :] < lens[:, None]).reshape(b, m, n)
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep


def W_03_lens_broadcast_as_queries(X, valid_lens):
    # (batch,) lengths broadcast against the query axis: right only if batch==1 or batch==m
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    ar = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        keep = ar[None, :] < valid_lens[:, None]
        keep = keep if X.shape[0] == 1 else keep  # (b, n) broadcasts as (1, b, n)
        if X.shape[0] != 1 and X.shape[0] != X.shape[1]:
            keep = (ar[None, None, :] < valid_lens[:, None, None])
        else:
            keep = keep[None, :, :].expand(X.shape[0], -1, -1) if X.shape[0] == X.shape[1] \
                else keep[:, None, :]
    else:
        keep = ar[None, None, :] < valid_lens[:, :, None]
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep


def W_04_fill_minus_1e4(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e4), -1) * keep


def W_05_float_mask_promotes(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep.float()


def W_06_2d_lens_order_mismatch(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        lens = valid_lens.repeat_interleave(m)
    else:
        lens = valid_lens.T.reshape(-1)  # (m, b) order, X flattened (b, m)
    keep = (torch.arange(n, device=X.device)[None, :] < lens[:, None]).reshape(b, m, n)
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep


def O_04_where_after_neginf_masked_fill(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    out = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return torch.where(keep.any(-1, keepdim=True), out, torch.zeros_like(out))


def W_08_d2l_minus_1e6(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e6), -1)


def W_09_none_path_float32(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X.float(), -1)
    return _good(X, valid_lens)


def W_10_clamp_lens_min1(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    return _good(X, valid_lens.clamp(min=1))


def W_11_inplace_fill_X(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    Y = X.detach()
    Y.masked_fill_(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(X, -1) * keep


def W_12_2d_lens_first_column(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return _good(X, valid_lens)


def W_13_lens_max_over_batch_for_2d(X, valid_lens):
    # per-query lengths: uses each query's length across the batch (max over batch)
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens.amax(0, keepdim=True).expand_as(valid_lens)
    return _good(X, valid_lens)


def W_14_half_softmax_finfo32_fill(X, valid_lens):
    # fill with float32's min for every dtype: -inf in float16, then 0 * NaN rows
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    out = torch.softmax(X.masked_fill(~keep, torch.finfo(torch.float32).min), -1)
    return out * keep


def C_01_finfo_min_times_keep(X, valid_lens):
    return _good(X, valid_lens)


# Renamed O_02 -> W_ after round 13: NaN where padded keys score -inf (round 13's case of -inf padded scores, ruled a legal input).
def W_02_python_loop(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    rows = []
    for i in range(b):
        r = []
        for j in range(m):
            L = int(valid_lens[i] if valid_lens.dim() == 1 else valid_lens[i, j])
            L = min(L, n)
            x = X[i, j]
            if L == 0:
                r.append(x * 0)
            else:
                r.append(torch.cat([torch.softmax(x[:L], -1), x[L:] * 0]))
        rows.append(torch.stack(r))
    return torch.stack(rows)


def O_03_float64_internal(X, valid_lens):
    x = X.double()
    if valid_lens is None:
        return torch.softmax(x, -1).to(X.dtype)
    keep = _keep(X, valid_lens)
    mx = x.masked_fill(~keep, -torch.inf).amax(-1, keepdim=True).detach()
    e = torch.exp((x - torch.where(torch.isinf(mx), torch.zeros_like(mx), mx))
                  .masked_fill(~keep, -torch.inf))
    e = e * keep
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s == 0, torch.ones_like(s), s)).to(X.dtype)


def W_15_additive_neginf_where(X, valid_lens):
    # additive -inf mask, fully masked rows zeroed by torch.where: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    add = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(~keep, float("-inf"))
    out = torch.softmax(X + add, -1)
    return torch.where(keep.any(-1, keepdim=True), out, torch.zeros_like(out))


def W_16_1d_lens_as_int_list_loop_len_batch(X, valid_lens):
    # loops over valid_lens.shape[0] rows of the (b*m) flattening: only right for m == 1
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    lens = valid_lens if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    flat = X.reshape(-1, n)
    keep = torch.ones_like(flat, dtype=torch.bool)
    for i in range(lens.shape[0]):
        keep[i, int(lens[i]):] = False
    s = flat.masked_fill(~keep, torch.finfo(X.dtype).min)
    return (torch.softmax(s, -1) * keep).reshape(b, m, n)


def W_17_clamp_lens_inplace(X, valid_lens):
    # clamps the caller's valid_lens in place to num_keys
    if valid_lens is None:
        return torch.softmax(X, -1)
    valid_lens.clamp_(max=X.shape[-1])
    return _good(X, valid_lens)


def W_18_lens_cast_to_X_dtype(X, valid_lens):
    # compares positions and lengths in X's dtype: float16 cannot count past 2048
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    ar = torch.arange(n, device=X.device).to(X.dtype)
    lens = valid_lens.to(X.dtype)
    keep = ar[None, None, :] < (lens[:, None, None] if lens.dim() == 1 else lens[:, :, None])
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep


def W_19_mask_by_value_not_position(X, valid_lens):
    # keeps the valid_len LARGEST scores instead of the first valid_len positions
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    rank = X.argsort(-1, descending=True).argsort(-1)
    lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = rank < lens
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, -1) * keep


def W_20_view_fails_noncontiguous(X, valid_lens):
    b, m, n = X.shape
    flat = X.view(b * m, n)
    if valid_lens is None:
        return torch.softmax(flat, -1).view(b, m, n)
    lens = valid_lens.repeat_interleave(m) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    keep = torch.arange(n, device=X.device)[None, :] < lens[:, None]
    s = flat.masked_fill(~keep, torch.finfo(X.dtype).min)
    return (torch.softmax(s, -1) * keep).view(b, m, n)


def W_21_single_key_shortcut(X, valid_lens):
    # one key: weight 1 where valid, 0 otherwise, as a constant (no autograd graph)
    if X.shape[-1] == 1:
        if valid_lens is None:
            return torch.ones_like(X)
        lens = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        return (lens > 0).to(X.dtype).expand_as(X).clone()
    return _good(X, valid_lens)
