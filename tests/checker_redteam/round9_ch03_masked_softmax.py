"""Round 9 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/ch03_masked_softmax.py with the names W01_x written
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


def C_01_reference(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    fill = torch.finfo(X.dtype).min
    w = torch.softmax(X.masked_fill(~keep, fill), dim=-1)
    return w * keep


def O_02_manual_where(X, valid_lens):
    # manual softmax with max over the kept keys; empty rows guarded before the division
    if valid_lens is None:
        keep = torch.ones_like(X, dtype=torch.bool)
    else:
        keep = _keep(X, valid_lens).expand_as(X)
    x = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    neg = torch.full_like(x, float("-inf"))
    m = torch.where(keep, x, neg).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.where(keep, torch.exp(torch.where(keep, x - m, torch.zeros_like(x))),
                    torch.zeros_like(x))
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def W_01_clamps_valid_lens_inplace(X, valid_lens):
    # clamps the caller's valid_lens in place to num_keys
    if valid_lens is not None:
        valid_lens.clamp_(max=X.shape[-1])
    return C_01_reference(X, valid_lens)


def W_02_view_flatten(X, valid_lens):
    # d2l-style flatten with .view: fails on non-contiguous X
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        vl = torch.repeat_interleave(valid_lens, shape[1])
    else:
        vl = valid_lens.reshape(-1)
    X2 = X.view(-1, shape[-1])
    keep = torch.arange(shape[-1], device=X.device)[None, :] < vl[:, None]
    w = torch.softmax(X2.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
    return w.view(shape)


_cache = {}


def W_03_cache_mask_on_sum(X, valid_lens):
    # caches the mask keyed on (shape, sum of valid_lens): [1, 3] and [3, 1] share it
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    key = (tuple(X.shape), tuple(valid_lens.shape), int(valid_lens.sum()))
    if key not in _cache:
        _cache[key] = _keep(X, valid_lens)
    keep = _cache[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_04_fill_min_of_X(X, valid_lens):
    # fills with (min of X) - 20 "just below every score": not enough below for a small range?
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    fill = (X.detach().min() - 20).item()
    return torch.softmax(X.masked_fill(~keep, fill), -1) * keep


def W_05_valid_lens_int_cast_float(X, valid_lens):
    # converts valid_lens to X's dtype: float16 cannot hold large lengths exactly, and
    # a fractional float length is truncated differently
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens.to(X.dtype)
    keep = _keep(X, vl)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_06_zero_rows_by_valid_lens_only_1d(X, valid_lens):
    # zeroes rows with valid_len 0 by looking at valid_lens, not at the mask: for 2-D lens
    # it uses valid_lens[:, 0] for the whole example
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    vl = valid_lens if valid_lens.dim() == 1 else valid_lens[:, 0]
    w = w * keep
    return w * (vl > 0)[:, None, None]


def W_07_softmax_float32_back(X, valid_lens):
    # computes in float32 for every dtype and casts back (float64 accuracy lost is known;
    # this one also uses -1e9 fill)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.float().masked_fill(~keep, -1e9), -1) * keep
    return w.to(X.dtype)


def W_08_returns_same_tensor_when_none(X, valid_lens):
    # valid_lens None: softmax written into a buffer shared between calls
    global _buf
    w = C_01_reference(X, valid_lens)
    if valid_lens is None:
        if "_buf" not in globals() or _buf.shape != w.shape or _buf.dtype != w.dtype or w.requires_grad:
            _buf = w.detach().clone()
            return w
        _buf.copy_(w)
        return _buf
    return w


def O_04_keep_with_dead_clause(X, valid_lens):
    # writes zeros into the softmax output in place with the mask (autograd ok), but masks
    # positions > valid_len instead of >= (off by one only for valid_len 0 rows handled)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = (pos < vl) | ((pos == vl) & (vl == n))
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


# Accepted on purpose: the exercise says nothing about negative valid_lens (no length is
# negative in any input it describes), so abs() of one is not a fault the text rules out.
def A_10_neg_valid_lens_as_zero_by_abs(X, valid_lens):
    # uses abs(valid_lens) "to be safe": a negative length silently becomes a positive one
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return C_01_reference(X, valid_lens.abs())


def W_11_row_max_from_unmasked(X, valid_lens):
    # manual softmax: max over all keys (masked ones included), masked exp zeroed: a masked
    # key far above the valid ones underflows the valid row to 0/0 -> guarded to 0
    if valid_lens is None:
        keep = torch.ones_like(X, dtype=torch.bool)
    else:
        keep = _keep(X, valid_lens).expand_as(X)
    x = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    e = torch.exp(x - x.amax(-1, keepdim=True)) * keep
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def O_05_rows_zeroed_before_softmax(X, valid_lens):
    # -inf mask, but fully masked rows replaced by 0 before the softmax, then * keep
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    X2 = X.masked_fill(~keep, float("-inf"))
    X2 = torch.where(keep.any(-1, keepdim=True), X2, torch.zeros_like(X2))
    return torch.softmax(X2, dim=-1) * keep


def W_12_none_path_float32(X, valid_lens):
    # the no-mask path computes in float32 and keeps it (dtype lost only when valid_lens is None)
    if valid_lens is None:
        return torch.softmax(X.float(), dim=-1)
    return C_01_reference(X, valid_lens)


def W_13_none_path_native_half_manual(X, valid_lens):
    # the no-mask path: manual softmax without the max shift
    if valid_lens is None:
        e = torch.exp(X)
        return e / e.sum(-1, keepdim=True)
    return C_01_reference(X, valid_lens)
