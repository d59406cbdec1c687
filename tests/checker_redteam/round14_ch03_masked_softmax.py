"""Round 14 red team (writer B, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_masked_softmax; copied from
/work/redteam/round14/B/sols/ch03_masked_softmax.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_40 (positions compared in bfloat16, which holds the integers only up to 256:
a bfloat16 case of 300 keys with valid_lens [[257, 300]]).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

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
    Y = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    return Y * keep


def C_02_where_safe(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    anyk = keep.any(-1, keepdim=True)
    Xs = torch.where(anyk, X, torch.zeros_like(X))
    Y = torch.softmax(Xs.masked_fill(~keep & anyk, float("-inf")), dim=-1)
    return torch.where(anyk, Y, torch.zeros_like(Y))


def O_03_mask_under_no_grad(X, valid_lens):
    """Builds the index mask under no_grad (it is not differentiated)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    with torch.no_grad():
        keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_04_mask_under_inference_mode_cloned(X, valid_lens):
    """Mask built under inference_mode, then cloned into a normal tensor."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    with torch.inference_mode():
        keep = _keep(X, valid_lens)
    keep = keep.clone()
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_05_default_dtype_set_and_restored(X, valid_lens):
    """Sets the default dtype to float64 for a helper tensor, restores it in finally."""
    old = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        n = X.shape[-1]
        pos = torch.arange(n, device=X.device)
    finally:
        torch.set_default_dtype(old)
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = pos < vl[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_06_scratch_requires_grad(X, valid_lens):
    """Builds a zero tensor with requires_grad=True inside and adds it (harmless)."""
    z = torch.zeros((), dtype=X.dtype, device=X.device, requires_grad=True)
    Xz = X + z
    return C_01_reference(Xz, valid_lens)


def O_07_upcast_half(X, valid_lens):
    """float16/bfloat16 computed in float32 and cast back (more accurate)."""
    if X.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(X.float(), valid_lens).to(X.dtype)
    return C_01_reference(X, valid_lens)


def O_08_python_loop_lens(X, valid_lens):
    """Mask built from valid_lens.tolist() in a Python loop."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, m, n = X.shape
    vl = valid_lens.tolist()
    keep = torch.zeros(b, m, n, dtype=torch.bool, device=X.device)
    for i in range(b):
        for j in range(m):
            L = vl[i] if valid_lens.dim() == 1 else vl[i][j]
            keep[i, j, :max(0, min(int(L), n))] = True
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def O_09_log_softmax_exp(X, valid_lens):
    """exp(log_softmax) with the masked entries zeroed."""
    if valid_lens is None:
        return torch.log_softmax(X, dim=-1).exp()
    keep = _keep(X, valid_lens)
    return torch.log_softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1).exp() * keep


def O_10_non_contiguous_result(X, valid_lens):
    """Computes on a transposed copy and returns a non-contiguous (but new) tensor."""
    Y = C_01_reference(X, valid_lens)
    return Y.transpose(-1, -2).contiguous().transpose(-1, -2)


def O_11_set_grad_enabled_restored(X, valid_lens):
    """Uses torch.set_grad_enabled(False) around the mask, restored by the context."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    with torch.set_grad_enabled(False):
        keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


# ------------------------------------------------------------------ wrong
def W_20_global_max_shift(X, valid_lens):
    """Shift by the max over the whole tensor, not per row: float32 rows ~200 below another
    row's max underflow to 0/0 = NaN."""
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    e = torch.exp(X - X.max()) * keep
    s = e.sum(-1, keepdim=True)
    return torch.where(s > 0, e / s.clamp_min(torch.finfo(X.dtype).tiny), torch.zeros_like(e))


def W_21_renormalize_after_softmax(X, valid_lens):
    """softmax over all keys, zero the masked ones, renormalize: masked keys with scores
    ~120 above the valid ones make the valid ones underflow (0/0 -> zeros)."""
    Y = torch.softmax(X, dim=-1)
    if valid_lens is None:
        return Y
    keep = _keep(X, valid_lens)
    Y = Y * keep
    s = Y.sum(-1, keepdim=True)
    return Y / torch.where(s > 0, s, torch.ones_like(s))


def W_22_shift_by_zero_filled_max(X, valid_lens):
    """Max shift taken over X*keep (masked set to 0): valid scores all below -104 (float32)
    or -17 (float16) underflow to 0 and the row comes out zero."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    mx = (X * keep).max(-1, keepdim=True).values.detach()
    e = torch.exp(X - mx) * keep
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_23_mutates_valid_lens(X, valid_lens):
    """Clamps valid_lens in place (valid_len above num_keys): changes the caller's lens."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    valid_lens.clamp_(max=X.shape[-1])
    return C_01_reference(X, valid_lens)


def W_24_to_float64_aliases(X, valid_lens):
    """Y = X.to(float64) is X itself for a float64 input; masked_fill_ then writes into X."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Y = X.detach().to(torch.float64) if not X.requires_grad else X.to(torch.float64).clone()
    Y.masked_fill_(~keep, -1e300)
    return (torch.softmax(Y, -1) * keep).to(X.dtype) if not X.requires_grad else \
        C_01_reference(X, valid_lens)


def W_25_contiguous_aliases(X, valid_lens):
    """Xc = X.contiguous() is X itself for a contiguous input that needs no grad; masked_fill_
    writes the fill into the caller's X (only when X does not require grad)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    if X.requires_grad:
        return C_01_reference(X, valid_lens)
    Xc = X.contiguous()
    Xc.masked_fill_(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(Xc, -1) * keep


def W_26_positions_in_input_dtype(X, valid_lens):
    """positions = arange(n).to(X.dtype): bfloat16 rounds positions past 256 (key 257 vs
    valid_len 257), float16 past 2048."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    pos = torch.arange(X.shape[-1], device=X.device).to(X.dtype)
    keep = pos < vl[..., None].to(X.dtype)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_27_isqrt_free_fill_minus_max(X, valid_lens):
    """Fill = X.min() - 20 (data-dependent): a masked key gets weight exp(-20 - spread); for
    a row whose valid scores are all equal, weight ~2e-9 in float32, exp(-20)*... in float64
    visible at float64 accuracy."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    fill = (X.min() - 20).detach()
    return torch.softmax(torch.where(keep, X, fill), -1) * keep.any(-1, keepdim=True)


def W_28_swap_when_batch_eq_queries(X, valid_lens):
    """1-D valid_lens read as one length per query when batch == num_queries."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1 and X.shape[0] == X.shape[1]:
        valid_lens = valid_lens[None, :].expand(X.shape[0], -1)
    return C_01_reference(X, valid_lens)


def W_29_uint8_lens(X, valid_lens):
    """valid_lens cast to uint8 (lens >= 256 wrap: 300 -> 44)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return C_01_reference(X, valid_lens.to(torch.uint8))


def W_30_lens_float16(X, valid_lens):
    """valid_lens cast to float16 before comparing with float32 positions: 2049 -> 2048."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    pos = torch.arange(X.shape[-1], device=X.device, dtype=torch.float32)
    keep = pos < vl[..., None].to(torch.float16)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_31_straight_through_zero_rows(X, valid_lens):
    """Fully masked rows zeroed by Y - Y.detach(): forward 0, but their gradient is the
    softmax Jacobian of an additive-mask (nonzero) instead of 0."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Y = torch.softmax(X + (~keep).to(X.dtype) * -1e4 if X.dtype == torch.float16
                      else X + (~keep).to(X.dtype) * -1e30, -1)
    anyk = keep.any(-1, keepdim=True)
    return torch.where(anyk, Y, Y - Y.detach())


def W_32_detach_normalizer(X, valid_lens):
    """e / e.sum().detach(): forward exact, gradient wrong (misses the normalizer term)."""
    Xf = X if valid_lens is None else X.masked_fill(~_keep(X, valid_lens), torch.finfo(X.dtype).min)
    mx = Xf.max(-1, keepdim=True).values.detach()
    e = torch.exp(Xf - mx)
    if valid_lens is not None:
        e = e * _keep(X, valid_lens)
    s = e.sum(-1, keepdim=True).detach()
    return e / torch.where(s > 0, s, torch.ones_like(s))


def W_33_clamp_lens_to_n_minus_1(X, valid_lens):
    """Clamps valid_lens to num_keys - 1 ('index of the last key'): valid_len == num_keys
    masks the last key."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return C_01_reference(X, valid_lens.clamp(max=X.shape[-1] - 1))


def W_34_lens_first_query_only(X, valid_lens):
    """2-D valid_lens: uses each sequence's max length for all queries."""
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.max(dim=1).values
    return C_01_reference(X, valid_lens)


def W_35_global_rng_tiebreak(X, valid_lens):
    """Adds 0 * randn noise ("tie breaking"): draws from the global generator."""
    noise = torch.randn(X.shape, dtype=X.dtype, device=X.device) * 0
    return C_01_reference(X + noise, valid_lens)


def O_36_minus_inf_fill_where_zero_rows(X, valid_lens):
    """-inf fill, fully masked rows replaced by zeros through torch.where: right, since
    masked_fill's backward zeroes the NaN gradient at every masked position."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Y = torch.softmax(X.masked_fill(~keep, float("-inf")), -1)
    return torch.where(keep.any(-1, keepdim=True), Y, torch.zeros_like(Y))


def W_37_cache_mask_by_shape_and_lens_sum_max(X, valid_lens, _cache={}):
    """Mask cached on (shape, dim, lens.min(), lens.max()): a second call with other lens of
    the same min and max reuses a wrong mask."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    key = (tuple(X.shape), valid_lens.dim(), int(valid_lens.min()), int(valid_lens.max()))
    if key not in _cache:
        _cache[key] = _keep(X, valid_lens)
    keep = _cache[key]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_38_bool_lens_dim_check_by_numel(X, valid_lens):
    """Decides per-query vs per-sequence by numel == batch: for num_queries == 1 a (batch, 1)
    tensor is fine, but (batch,) lens with batch == batch*num_queries ... uses view(-1) and
    broadcasts (batch,) lens against queries when batch == 1."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, m, n = X.shape
    vl = valid_lens.reshape(-1)
    if vl.numel() == m:
        vl = vl.view(1, m).expand(b, m)
    else:
        vl = vl.view(b, 1).expand(b, m) if vl.numel() == b else vl.view(b, m)
    return C_01_reference(X, vl)


def W_39_fill_float16_min_for_all_dtypes(X, valid_lens):
    """Fill -65504 (float16's min, 'safe everywhere') in every dtype: float32 valid scores
    near -1e5 lose to the masked keys."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -65504.0), -1) * keep


def W_40_positions_bfloat16(X, valid_lens):
    """positions and lengths compared in X's dtype only for bfloat16 (float16 is upcast):
    bfloat16 rows longer than 256 keys (valid_len 257 reads as 256)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if X.dtype != torch.bfloat16:
        return C_01_reference(X, valid_lens)
    return W_26_positions_in_input_dtype(X, valid_lens)


def O_41_ones_for_single_key(X, valid_lens):
    """One key and no mask: every weight is 1, returned as a new ones tensor (its gradient
    is 0 anyway) -- kept connected to the graph with X * 0 + 1."""
    if valid_lens is None and X.shape[-1] == 1:
        return X * 0 + 1
    return C_01_reference(X, valid_lens)
