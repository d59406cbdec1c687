"""Round 4 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/03_masked_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
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
    Y = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(Y, dim=-1) * keep


# Listed as right (O_02) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: X.float() for every dtype: a float64 input comes
# out 6.4e-8 off.
def W_31_manual_exp_masked_max_was_O_02(X, valid_lens):
    if valid_lens is None:
        keep = torch.ones_like(X, dtype=torch.bool)
    else:
        keep = _keep(X, valid_lens).expand_as(X)
    Xf = X.float()
    m = Xf.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp((Xf - m).masked_fill(~keep, float("-inf")))
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


# Listed as right by the writer, but it compares positions and lengths cast to X.dtype:
# in float16 a length of 2049 becomes 2048 (and position 4099 becomes 4100), so the
# float16 case with 4,100 keys drops the last valid key. The same fault as W_29.
def W_30_float_valid_lens_and_where(X, valid_lens):
    if valid_lens is None:
        return X.softmax(-1)
    vl = valid_lens.to(X.dtype) if valid_lens.dim() == 2 else valid_lens[:, None].to(X.dtype)
    pos = torch.arange(X.shape[-1], device=X.device, dtype=X.dtype)
    keep = pos < vl[..., None]
    Y = torch.where(keep, X, torch.full_like(X, -1e4 if X.dtype == torch.float16 else -1e30))
    w = torch.softmax(Y, -1)
    return torch.where(keep, w, torch.zeros_like(w))


def O_04_repeat_interleave_d2l_fixed(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    Xf = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    Xf = Xf.masked_fill(~mask, torch.finfo(X.dtype).min)
    w = torch.softmax(Xf, -1) * mask
    return w.reshape(shape)


def W_01_d2l_inplace_uniform(X, valid_lens):
    # d2l's version: writes into X and gives uniform weights to a fully masked row
    if valid_lens is None:
        return torch.softmax(X, -1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    Xf = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    Xf[~mask] = -1e6
    return torch.softmax(Xf.reshape(shape), -1)


def O_05_neg_inf_masked_fill_nan_to_num(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.nan_to_num(torch.softmax(X.masked_fill(~keep, float("-inf")), -1))


def W_03_fill_minus_1e6(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e6), -1) * keep


def W_04_fill_minus_1e4(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e4), -1) * keep


def W_05_no_zero_for_empty_rows(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)


def W_06_off_by_one_le(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    keep = torch.arange(X.shape[-1], device=X.device) <= valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_07_bad_broadcast_batch_lens(X, valid_lens):
    # (batch,) lengths compared as (batch, 1) against (batch, m, n): broadcasts as
    # (1, batch, n), i.e. query i of every example uses the length of example i
    if valid_lens is None:
        return torch.softmax(X, -1)
    pos = torch.arange(X.shape[-1], device=X.device)
    if valid_lens.dim() == 1:
        keep = pos < valid_lens[:, None]
        keep = keep.expand(X.shape[0], X.shape[1], X.shape[2]) if X.shape[1] == X.shape[0] \
            else keep[:, None, :]
        if X.shape[1] == X.shape[0]:
            keep = (pos < valid_lens[:, None])  # (b, n) broadcast against (b, m, n)
    else:
        keep = pos < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_08_per_query_lens_use_first(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[:, None, None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_09_multiplicative_no_max(X, valid_lens):
    e = torch.exp(X)
    if valid_lens is not None:
        e = e * _keep(X, valid_lens)
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_10_max_includes_padding(X, valid_lens):
    # shifts by the max over ALL keys, padding included: a huge padded score
    # makes every valid exp underflow
    e = torch.exp(X - X.amax(-1, keepdim=True))
    if valid_lens is not None:
        e = e * _keep(X, valid_lens)
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_11_float32_output(X, valid_lens):
    Xf = X.float()
    if valid_lens is None:
        return torch.softmax(Xf, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(Xf.masked_fill(~keep, -1e9), -1) * keep


def W_12_inplace_masked_fill_(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    X.data.masked_fill_(~keep.expand_as(X), torch.finfo(X.dtype).min)
    return torch.softmax(X, -1) * keep


def W_13_view_noncontiguous(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(b, m)
    Xf = X.view(b * m, n)
    keep = torch.arange(n, device=X.device)[None] < vl.reshape(-1, 1)
    return (torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep).view(b, m, n)


def W_14_zero_rows_by_index_only_batch(X, valid_lens):
    # zeroes rows with valid_len 0 through a python loop over the batch only
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    vl = valid_lens if valid_lens.dim() == 1 else valid_lens.min(dim=1).values
    out = []
    for i in range(X.shape[0]):
        out.append(torch.zeros_like(w[i]) if vl[i] == 0 else w[i])
    return torch.stack(out)


def W_15_detached_mask_result(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
    return w.detach().requires_grad_(X.requires_grad)


def W_16_none_means_zero(X, valid_lens):
    # treats valid_lens None as "no key valid"
    if valid_lens is None:
        return torch.zeros_like(X)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_17_clamp_lens_to_one(X, valid_lens):
    # avoids empty rows by giving them one key
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens.clamp(min=1))
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_18_fill_with_finfo_of_float32_in_half(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    Y = X.float().masked_fill(~keep, torch.finfo(torch.float32).min)
    return (torch.softmax(Y, -1) * keep).to(X.dtype) if X.dtype != torch.float16 \
        else (torch.softmax(Y.half(), -1) * keep)


def W_19_mask_on_queries_axis(X, valid_lens):
    # masks rows (queries) beyond valid_len instead of keys
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens if valid_lens.dim() == 1 else valid_lens.max(1).values
    keep = torch.arange(X.shape[1], device=X.device)[None, :, None] < vl[:, None, None]
    return torch.softmax(X, -1) * keep


def O_06_masked_max_exp_clamped_sum(X, valid_lens):
    # lengths cast to X.dtype: fine in float32, but float16 cannot hold lengths > 2048 ...
    # and here a bug: uses X.shape[1] (num_queries) for positions
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    pos = torch.arange(X.shape[-1], device=X.device)
    keep = pos[: X.shape[1]] if X.shape[1] < X.shape[-1] else pos
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    Y = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    w = torch.exp(Y - Y.amax(-1, keepdim=True))
    w = w * keep
    s = w.sum(-1, keepdim=True)
    return w / s.clamp(min=1e-6)


def W_21_additive_neg_inf_nan_to_num(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    mask = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(X + mask, -1))


def W_22_additive_neg_inf_where(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    mask = torch.where(keep, 0.0, float("-inf")).to(X.dtype)
    w = torch.softmax(X + mask, -1)
    return torch.where(torch.isnan(w), torch.zeros_like(w), w)


def W_23_unsqueeze_valid_lens_inplace(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        valid_lens.unsqueeze_(1)
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens.unsqueeze(-1)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


_MASKS = {}


def W_24_mask_cached_by_shape(X, valid_lens):
    # caches the boolean mask per (shape, kind of lens): stale for new lengths
    if valid_lens is None:
        return torch.softmax(X, -1)
    key = (tuple(X.shape), valid_lens.dim())
    if key not in _MASKS:
        _MASKS[key] = _keep(X, valid_lens)
    keep = _MASKS[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_07_lookup_table_clamped(X, valid_lens):
    # a lookup table of masks, indexed by the length: fine for lengths <= n
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    table = torch.arange(n, device=X.device)[None, :] < torch.arange(n + 1, device=X.device)[:, None]
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = table[vl.clamp(max=n)]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_26_min_fill_but_zero_rows_by_sum_check(X, valid_lens):
    # zeroes a row when its max weight is below 1/n + eps (uniform): also zeroes
    # valid rows whose scores are all equal
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    n = X.shape[-1]
    uniform = (w.amax(-1, keepdim=True) - 1.0 / n).abs() < 1e-3
    return w.masked_fill(uniform, 0.0)


# Was accepted on purpose while exercise 3.1 was silent on lengths above num_keys; the
# checker tests them since round 5 and the text now says that they make every key valid,
# so the IndexError it raises there is a fault (W_).
def W_27_lookup_table_unclamped(X, valid_lens):
    # the same lookup table without clamping: IndexError for a length > num_keys
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    table = torch.arange(n, device=X.device)[None, :] < torch.arange(n + 1, device=X.device)[:, None]
    vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = table[vl]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_28_python_loop_int_lens(X, valid_lens):
    # python loop with slicing: X[i, :, :L]; per-query lengths read as the first query's
    if valid_lens is None:
        return torch.softmax(X, -1)
    rows = []
    for i in range(X.shape[0]):
        L = int(valid_lens[i] if valid_lens.dim() == 1 else valid_lens[i, 0])
        w = torch.zeros_like(X[i])
        if L > 0:
            w = torch.cat([torch.softmax(X[i, :, :L], -1), w[:, L:]], -1)
        rows.append(w)
    return torch.stack(rows)


def W_29_float_lens_truncation(X, valid_lens):
    # casts lengths to X.dtype: float16 cannot hold 2049, rounds; here also rounds 2.5
    if valid_lens is None:
        return torch.softmax(X, -1)
    vl = valid_lens.to(X.dtype)
    if vl.dim() == 1:
        vl = vl[:, None]
    keep = torch.arange(X.shape[-1], device=X.device).to(X.dtype) < vl[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_08_noncontiguous_output(X, valid_lens):
    Xt = X.transpose(1, 2)  # (b, n, m)
    if valid_lens is None:
        return torch.softmax(Xt, dim=1).transpose(1, 2)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens   # (b, 1|m)
    keep = torch.arange(X.shape[-1], device=X.device)[None, :, None] < vl[:, None, :]
    w = torch.softmax(Xt.masked_fill(~keep, torch.finfo(X.dtype).min), dim=1) * keep
    return w.transpose(1, 2)


def S_01_calls_book_masked_softmax(X, valid_lens):
    from book.attention import masked_softmax
    return masked_softmax(X, valid_lens)
