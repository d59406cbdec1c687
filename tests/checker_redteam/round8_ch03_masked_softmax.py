"""Round 8 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/ch03_masked_softmax.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    n = X.shape[-1]
    idx = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        return idx < valid_lens[:, None, None]
    return idx < valid_lens[..., None]


def C_01_reference(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Z = X.masked_fill(~keep, float("-inf"))
    Zs = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    w = torch.softmax(Zs, dim=-1)
    return w * keep


def O_02_uniform_times_zero(X, valid_lens):
    # d2l's -1e6 fill (in float32), then zero the fully masked rows by multiplying
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    dt = torch.promote_types(X.dtype, torch.float32)
    Z = X.to(dt).masked_fill(~keep, -1e30)
    w = torch.softmax(Z, -1) * keep.any(-1, keepdim=True)
    return w.to(X.dtype)


def W_00_exp_and_divide_inf_times_zero(X, valid_lens):
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    m = X.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(X - m) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_01_2d_lens_first_query(X, valid_lens):
    # per-query lengths reduced to the first query's
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return C_01_reference(X, valid_lens)


def W_02_2d_lens_max_per_sequence(X, valid_lens):
    # per-query lengths reduced to the longest in the sequence
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 2:
        valid_lens = valid_lens.amax(1)
    return C_01_reference(X, valid_lens)


def W_03_mutates_valid_lens(X, valid_lens):
    # clamps the caller's valid_lens in place (a view of it)
    if valid_lens is None:
        return torch.softmax(X, -1)
    v = valid_lens.view(-1)
    v.clamp_(max=X.shape[-1] - 1)
    return C_01_reference(X, valid_lens)


def W_04_view_flatten(X, valid_lens):
    # d2l's reshape done with view: raises on a non-contiguous X
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat_interleave(m)
    else:
        valid_lens = valid_lens.reshape(-1)
    flat = X.view(-1, n)
    keep = torch.arange(n, device=X.device) < valid_lens[:, None]
    w = torch.softmax(flat.masked_fill(~keep, float("-inf")).masked_fill(
        ~keep.any(-1, keepdim=True), 0.0), -1) * keep
    return w.view(b, m, n)


def O_05_fill_minus_inf_where_after(X, valid_lens):
    # -inf fill, softmax, then torch.where to zero the NaN rows: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))


def W_06_mask_valid_as_le(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens + 1)
    return C_01_reference(X, valid_lens + 1)


def W_07_softmax_then_mask_renorm(X, valid_lens):
    # softmax over all keys, zero the masked ones and renormalise: underflows when a
    # masked key's score dominates
    w = torch.softmax(X, -1)
    if valid_lens is None:
        return w
    keep = _keep(X, valid_lens)
    w = w * keep
    s = w.sum(-1, keepdim=True)
    return w / torch.where(s > 0, s, torch.ones_like(s))


def W_08_valid_lens_ignored_when_2d_batch1(X, valid_lens):
    # squeeze() to "handle" (batch, 1) lengths; breaks batch 1
    if valid_lens is None:
        return torch.softmax(X, -1)
    v = valid_lens.squeeze()
    if v.dim() == 0:
        v = v.expand(X.shape[0])
    if v.dim() == 1 and valid_lens.dim() == 2 and valid_lens.shape[1] != 1:
        pass
    return C_01_reference(X, v)


def W_09_fill_minus_1e9_float32_compute_no_zero_rows(X, valid_lens):
    # -1e9 fill in float32: a fully masked row comes out uniform, not zero
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.float().masked_fill(~keep, -1e9), -1).to(X.dtype)


def W_10_arange_in_float16(X, valid_lens):
    # arange built in X's dtype: float16 cannot represent odd integers above 2048
    if valid_lens is None:
        return torch.softmax(X, -1)
    idx = torch.arange(X.shape[-1], device=X.device, dtype=X.dtype)
    v = valid_lens.to(X.dtype)
    keep = idx < (v[:, None, None] if v.dim() == 1 else v[..., None])
    Z = X.masked_fill(~keep, float("-inf"))
    Z = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return torch.softmax(Z, -1) * keep


def W_11_mask_queries_axis(X, valid_lens):
    # lengths applied along the query axis (dim 1) as well as the key axis
    if valid_lens is None:
        return torch.softmax(X, -1)
    w = C_01_reference(X, valid_lens)
    if valid_lens.dim() == 1:
        q = torch.arange(X.shape[1], device=X.device) < valid_lens[:, None]
        w = w * q[..., None]
    return w


def W_12_inplace_fill_on_input(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    Xd = X.detach()
    Xd.masked_fill_(~keep, -1e4)  # writes into X's storage
    return C_01_reference(X, valid_lens)


def W_13_float_lens_rounded(X, valid_lens):
    # casts lengths to int with .int() after dividing ... (plain cast to uint8)
    if valid_lens is None:
        return torch.softmax(X, -1)
    return C_01_reference(X, valid_lens.to(torch.uint8))


def W_14_additive_inf_where_after(X, valid_lens):
    # additive -inf mask, softmax, torch.where to zero the NaN rows: NaN gradient
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    add = torch.zeros_like(X).masked_fill(~keep, float("-inf"))
    w = torch.softmax(X + add, -1)
    return torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))


def W_15_view_valid_lens(X, valid_lens):
    # flattens valid_lens with view: fails on non-contiguous lengths (e.g. a transpose)
    if valid_lens is None:
        return torch.softmax(X, -1)
    b, m, n = X.shape
    v = valid_lens.view(-1)
    if valid_lens.dim() == 1:
        v = v.repeat_interleave(m)
    keep = (torch.arange(n, device=X.device) < v[:, None]).reshape(b, m, n)
    Z = X.masked_fill(~keep, float("-inf"))
    Z = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return torch.softmax(Z, -1) * keep


def O_06_reshape_lens_both_cases(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    v = valid_lens.reshape(X.shape[0], -1, 1)
    keep = torch.arange(X.shape[-1], device=X.device) < v
    Z = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(Z, -1) * keep


def W_16_decide_by_last_dim(X, valid_lens):
    # "per-query lengths have one entry per query": a (batch,) tensor with batch ==
    # num_queries is taken for per-query lengths
    if valid_lens is None:
        return torch.softmax(X, -1)
    idx = torch.arange(X.shape[-1], device=X.device)
    if valid_lens.shape[-1] == X.shape[1]:
        keep = idx < valid_lens[..., None]
    else:
        keep = idx < valid_lens[:, None, None]
    keep = keep.expand_as(X)
    Z = X.masked_fill(~keep, float("-inf"))
    Z = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return torch.softmax(Z, -1) * keep


def S_01_calls_book_attention(X, valid_lens):
    # against "without looking at book.attention"
    from book.attention import masked_softmax
    return masked_softmax(X, valid_lens)
