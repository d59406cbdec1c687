"""Round 9 red team (writer D, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch11_gqa.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_01_reference -> W_21_reference, O_02_grouped_reshape_einsum ->
W_22_grouped_reshape_einsum, O_04_float16_softmax_manual_sum ->
W_23_float16_softmax_manual_sum).
"""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _wt(x):
    return torch.promote_types(x.dtype, torch.float32)


def _ref(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    g = h // hkv
    K = K.repeat_interleave(g, dim=1)
    V = V.repeat_interleave(g, dim=1)
    wt = _wt(Q)
    S = Q.to(wt) @ K.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ V.to(wt)).to(Q.dtype)


def W_21_reference(Q, K, V):
    return _ref(Q, K, V)


def W_22_grouped_reshape_einsum(Q, K, V):
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    g = h // hkv
    wt = _wt(Q)
    Qg = Q.to(wt).reshape(b, hkv, g, m, d)
    S = torch.einsum("bkgmd,bknd->bkgmn", Qg, K.to(wt)) / math.sqrt(d)
    A = S.softmax(-1)
    O = torch.einsum("bkgmn,bknd->bkgmd", A, V.to(wt))
    return O.reshape(b, h, m, d).to(Q.dtype)


def W_20_index_select_i_times_hkv_over_h(Q, K, V):
    """Was O03: right where num_kv_heads divides num_heads, but with 6 query heads and 4
    key-value heads it returns a result (head i reads i * 4 // 6) instead of an error;
    exercise 11.2 now asks for a ValueError there (round-9 fix of W16)."""
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h, device=Q.device) * hkv // h
    wt = _wt(Q)
    Kx, Vx = K.index_select(1, idx).to(wt), V.index_select(1, idx).to(wt)
    S = Q.to(wt) @ Kx.transpose(-1, -2) * (Q.shape[-1] ** -0.5)
    return torch.softmax(S, dim=-1).matmul(Vx).to(Q.dtype)


def S_01_sdpa_enable_gqa(Q, K, V):
    """Right output, but calls scaled_dot_product_attention, which the exercise forbids."""
    return F.scaled_dot_product_attention(Q, K, V, enable_gqa=True)


def W_01_no_max_subtraction(Q, K, V):
    """Hand-written softmax without subtracting the row maximum: overflows on large
    scores (exp(100) in float32 is fine, exp(89+) is inf)."""
    h, hkv = Q.shape[1], K.shape[1]
    g = h // hkv
    K = K.repeat_interleave(g, dim=1)
    V = V.repeat_interleave(g, dim=1)
    wt = _wt(Q)
    S = Q.to(wt) @ K.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    E = S.exp()
    return ((E / E.sum(-1, keepdim=True)) @ V.to(wt)).to(Q.dtype)


def W_02_detach_kv(Q, K, V):
    """Right values; the expanded keys and values are detached: no gradient reaches K, V."""
    g = Q.shape[1] // K.shape[1]
    Kx = K.detach().repeat_interleave(g, dim=1)
    Vx = V.detach().repeat_interleave(g, dim=1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_03_scales_Q_in_place(Q, K, V):
    """Q.mul_(scale): the caller's queries are changed."""
    g = Q.shape[1] // K.shape[1]
    if not Q.requires_grad:
        Q.mul_(1 / math.sqrt(Q.shape[-1]))
        Qs = Q
    else:
        Qs = Q / math.sqrt(Q.shape[-1])
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    return ((Qs.to(wt) @ Kx.to(wt).transpose(-1, -2)).softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_04_tile_instead_of_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    wt = _wt(Q)
    Kx, Vx = K.repeat(1, g, 1, 1).to(wt), V.repeat(1, g, 1, 1).to(wt)
    S = Q.to(wt) @ Kx.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx).to(Q.dtype)


def W_05_view_merges_batch_heads(Q, K, V):
    """Uses view(b*h, m, d): crashes on non-contiguous Q (e.g. from a transpose)."""
    b, h, m, d = Q.shape
    hkv, n = K.shape[1], K.shape[2]
    g = h // hkv
    Kx = K.repeat_interleave(g, 1).reshape(b * h, n, d)
    Vx = V.repeat_interleave(g, 1).reshape(b * h, n, V.shape[-1])
    wt = _wt(Q)
    S = torch.bmm(Q.view(b * h, m, d).to(wt), Kx.to(wt).transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(S.softmax(-1), Vx.to(wt)).view(b, h, m, -1).to(Q.dtype)


def W_06_group_index_i_div_hkv(Q, K, V):
    """Query head i uses key-value head i // h_kv (confuses the group size with h_kv);
    right when h = h_kv**2 or h_kv == h... clamps to stay in range."""
    h, hkv = Q.shape[1], K.shape[1]
    idx = (torch.arange(h) // hkv).clamp(max=hkv - 1)
    wt = _wt(Q)
    Kx, Vx = K[:, idx].to(wt), V[:, idx].to(wt)
    S = Q.to(wt) @ Kx.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx).to(Q.dtype)


def W_23_float16_softmax_manual_sum(Q, K, V):
    """float16 inputs: scores, softmax and weighted sum all in float16 by hand, with the
    max subtracted but the sum of exponentials kept in float16; fine for few keys."""
    if Q.dtype not in (torch.float16, torch.bfloat16):
        return _ref(Q, K, V)
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    S = (Q / math.sqrt(Q.shape[-1])) @ Kx.transpose(-1, -2)
    E = (S - S.amax(-1, keepdim=True)).exp()
    return (E @ Vx) / E.sum(-1, keepdim=True)


def W_08_scale_by_num_keys(Q, K, V):
    """Scales by 1/sqrt(num_keys) instead of 1/sqrt(head_size)."""
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(K.shape[-2])
    return (S.softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_09_batch_wide_max(Q, K, V):
    """Subtracts one maximum over the whole batch (not per row): underflow when rows differ."""
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    E = (S - S.max()).exp()
    return ((E / E.sum(-1, keepdim=True)) @ Vx.to(wt)).to(Q.dtype)


def W_10_float32_for_float64(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    S = Q.float() @ Kx.float().transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx.float()).to(Q.dtype)


def W_11_expand_then_view_kv_shared(Q, K, V):
    """Broadcast the groups: K[:, :, None] expanded to (b, hkv, g, n, d), then Q viewed as
    (b, g, hkv, m, d): groups strided, not consecutive."""
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    g = h // hkv
    wt = _wt(Q)
    Qg = Q.to(wt).reshape(b, g, hkv, m, d)
    S = Qg @ K.to(wt)[:, None].transpose(-1, -2) / math.sqrt(d)
    O = S.softmax(-1) @ V.to(wt)[:, None]
    return O.reshape(b, h, m, -1).to(Q.dtype)


def W_12_softmax_dim_minus2_when_square(Q, K, V):
    """Normalises over the queries (dim -2)."""
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-2) @ Vx.to(wt)).to(Q.dtype)


def W_13_nan_to_num_grad(Q, K, V):
    """Masks nothing but guards with nan_to_num after the softmax: values fine; gradients
    fine too... except it computes through log-softmax-exp with a detached lse."""
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    lse = torch.logsumexp(S, -1, keepdim=True).detach()
    return ((S - lse).exp() @ Vx.to(wt)).to(Q.dtype)


_KV = {}


def W_14_cache_expanded_kv_by_data_ptr(Q, K, V):
    """Caches the repeated K, V on (data_ptr, shape, group size): a KV cache updated in
    place (same storage) or a new K that reuses freed memory gets stale keys."""
    g = Q.shape[1] // K.shape[1]
    key = (K.data_ptr(), V.data_ptr(), tuple(K.shape), tuple(V.shape), g, K.dtype)
    if key not in _KV:
        _KV[key] = (K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    Kx, Vx = _KV[key]
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_15_float32_scale_tensor(Q, K, V):
    """The scale as torch.tensor(d).sqrt(): a float32 number, so float64 scores are scaled
    with float32 precision."""
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = Q.to(wt) @ Kx.to(wt).transpose(-1, -2) / torch.tensor(Q.shape[-1]).sqrt()
    return (S.softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_16_kv_heads_not_dividing_silently(Q, K, V):
    """Uses h // h_kv without checking: with 6 query heads and 4 kv heads it silently
    uses heads 0..3 (the remaining heads read truncated groups) instead of raising."""
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h) // max(h // hkv, 1)
    idx = idx.clamp(max=hkv - 1)
    wt = _wt(Q)
    Kx, Vx = K[:, idx].to(wt), V[:, idx].to(wt)
    S = Q.to(wt) @ Kx.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (S.softmax(-1) @ Vx).to(Q.dtype)


def W_17_mqa_squeeze(Q, K, V):
    """For one key-value head, squeeze() it away and let matmul broadcast: batch 1 works,
    batch == num_heads broadcasts batch against heads silently, other batches crash."""
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 1:
        wt = _wt(Q)
        Ks, Vs = K.squeeze().to(wt), V.squeeze().to(wt)
        S = Q.to(wt) @ Ks.transpose(-1, -2) / math.sqrt(Q.shape[-1])
        return (S.softmax(-1) @ Vs).to(Q.dtype)
    return _ref(Q, K, V)


def W_18_float32_scale_numpy(Q, K, V):
    """numpy float32 scale: np.float32(1 / sqrt(d))."""
    import numpy as np
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    wt = _wt(Q)
    S = (Q.to(wt) @ Kx.to(wt).transpose(-1, -2)) * float(np.float32(1 / math.sqrt(Q.shape[-1])))
    return (S.softmax(-1) @ Vx.to(wt)).to(Q.dtype)


def W_19_half_no_max_subtraction(Q, K, V):
    """float16/bfloat16 inputs: a hand-written softmax in the input dtype without the max
    subtracted; float16's exp overflows to inf above a score of 11.09 (inf / inf = NaN)."""
    if Q.dtype not in (torch.float16, torch.bfloat16):
        return _ref(Q, K, V)
    g = Q.shape[1] // K.shape[1]
    Kx, Vx = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    S = (Q / math.sqrt(Q.shape[-1])) @ Kx.transpose(-1, -2)
    E = S.exp()
    return (E / E.sum(-1, keepdim=True)) @ Vx
