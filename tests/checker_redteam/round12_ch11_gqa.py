"""Round 12 red team (writer D, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round12/D/sols/ch11_gqa.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _check(Q, K):
    h, hkv = Q.shape[1], K.shape[1]
    if h % hkv:
        raise ValueError(f"num_kv_heads = {hkv} does not divide num_heads = {h}")
    return h // hkv


def _attn(Q, K, V):
    d = Q.shape[-1]
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    return (torch.softmax(s, -1) @ v).to(Q.dtype)


def C_01_repeat_interleave(Q, K, V):
    g = _check(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def O_02_group_queries(Q, K, V):
    """Queries of a group stacked along the query axis: (b, hkv, g*m, d), no K/V copies."""
    g = _check(Q, K)
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.reshape(b, hkv, g * m, d), K, V)
    return out.reshape(b, h, m, d)


def O_03_einsum_groups_float64_manual_softmax(Q, K, V):
    g = _check(Q, K)
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    q = q.reshape(b, hkv, g, m, d)
    s = torch.einsum("bkgqd,bknd->bkgqn", q, k) / math.sqrt(d)
    s = s - s.amax(-1, keepdim=True).detach()
    p = s.exp()
    p = p / p.sum(-1, keepdim=True)
    return torch.einsum("bkgqn,bknd->bkgqd", p, v).reshape(b, h, m, d).to(Q.dtype)


def W_04_repeat_tiles(Q, K, V):
    """K.repeat(1, g, 1, 1): head i gets kv head i % hkv."""
    g = _check(Q, K)
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def W_05_max_per_head(Q, K, V):
    """Softmax shifted by one maximum per (batch, head) instead of per query."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    s = s - s.amax((-2, -1), keepdim=True)
    p = s.exp()
    return ((p / p.sum(-1, keepdim=True)) @ v).to(Q.dtype)


def W_06_max_over_keys_axis_wrong(Q, K, V):
    """The shift taken over queries (dim -2): not a per-row constant."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    s = s - s.amax(-2, keepdim=True)
    p = s.exp()
    return ((p / p.sum(-1, keepdim=True)) @ v).to(Q.dtype)


def W_07_q_div_inplace(Q, K, V):
    """Q /= sqrt(d): scales the caller's Q in place."""
    g = _check(Q, K)
    if Q.requires_grad and Q.is_leaf:
        Q = Q * 1
    Q /= math.sqrt(Q.shape[-1])
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    return (torch.softmax(q @ k.transpose(-1, -2), -1) @ v).to(Q.dtype)


def W_08_transpose_back_wrong(Q, K, V):
    """Output computed as (b, m, h, d) then reshaped (not permuted) to (b, h, m, d)."""
    g = _check(Q, K)
    out = C_01_repeat_interleave(Q, K, V)
    b, h, m, d = out.shape
    return out.transpose(1, 2).contiguous().reshape(b, h, m, d)


def W_09_groups_from_wrong_view(Q, K, V):
    """Q.view(b, g, hkv, m, d): heads i, i + hkv, ... grouped (strided, not consecutive)."""
    g = _check(Q, K)
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    q = Q.reshape(b, g, hkv, m, d).transpose(1, 2).reshape(b, hkv, g * m, d)
    out = _attn(q, K, V).reshape(b, hkv, g, m, d).transpose(1, 2).reshape(b, h, m, d)
    return out


def W_10_scale_by_model_dim(Q, K, V):
    """Scaled by 1/sqrt(num_heads * head_size)."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q.float() @ K.float().transpose(-1, -2) / math.sqrt(Q.shape[1] * Q.shape[-1])
    return (torch.softmax(s, -1) @ V.float()).to(Q.dtype)


def W_11_only_checks_fewer_kv(Q, K, V):
    """Only refuses num_kv_heads > num_heads; 6 heads with 4 kv heads -> g = 1."""
    h, hkv = Q.shape[1], K.shape[1]
    if hkv > h:
        raise ValueError(f"num_kv_heads = {hkv} > num_heads = {h}")
    g = h // hkv
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_12_float16_softmax_no_shift(Q, K, V):
    """exp in the input dtype without subtracting the max."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    p = s.exp()
    return (p / p.sum(-1, keepdim=True)) @ V


def W_13_detach_kv_copies(Q, K, V):
    """repeat_interleave on K.detach(): no gradient reaches K and V."""
    g = _check(Q, K)
    return _attn(Q, K.detach().repeat_interleave(g, 1), V.detach().repeat_interleave(g, 1))


def W_14_expand_view_then_reshape_wrong_axis(Q, K, V):
    """K[:, None].expand(b, g, hkv, n, d).reshape(b, h, n, d): a tile, like repeat."""
    g = _check(Q, K)
    b, hkv, n, d = K.shape
    h = Q.shape[1]
    K2 = K[:, None].expand(b, g, hkv, n, d).reshape(b, h, n, d)
    V2 = V[:, None].expand(b, g, hkv, n, V.shape[-1]).reshape(b, h, n, V.shape[-1])
    return _attn(Q, K2, V2)


def W_15_softmax_float32_for_float64(Q, K, V):
    """softmax(..., dtype=torch.float32) always (known category, control)."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -1, dtype=torch.float32) @ V.float()).to(Q.dtype)


def W_16_batch_mixed_kv(Q, K, V):
    """K.reshape(b*hkv, n, d).repeat_interleave(g, 0).reshape(b, h, n, d): fine;
    but here the batch and head axes are swapped before repeating (b, hkv) -> (hkv, b)."""
    g = _check(Q, K)
    b, hkv, n, d = K.shape
    h = Q.shape[1]
    K2 = K.transpose(0, 1).reshape(hkv * b, n, d).repeat_interleave(g, 0).reshape(b, h, n, d)
    V2 = V.transpose(0, 1).reshape(hkv * b, n, -1).repeat_interleave(g, 0).reshape(b, h, n, -1)
    return _attn(Q, K2, V2)


def W_17_scale_uses_sqrt_of_num_keys(Q, K, V):
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q.float() @ K.float().transpose(-1, -2) / math.sqrt(K.shape[-2])
    return (torch.softmax(s, -1) @ V.float()).to(Q.dtype)


def O_18_half_softmax_in_half(Q, K, V):
    """All in the input dtype, torch.softmax with the max shift, P rounded to float16
    before P @ V (accepted? control)."""
    g = _check(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return torch.softmax(s, -1) @ V


def W_19_mqa_squeeze_broadcast(Q, K, V):
    """One kv head: K.squeeze(1) and let matmul broadcast; the batch axis of K then
    lines up with Q's head axis (right only for batch 1, crashes or is wrong otherwise)."""
    g = _check(Q, K)
    if K.shape[1] == 1:
        k, v = K.squeeze(1), V.squeeze(1)
        half = Q.dtype in (torch.float16, torch.bfloat16)
        q = Q.float() if half else Q
        k, v = (k.float(), v.float()) if half else (k, v)
        s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
        return (torch.softmax(s, -1) @ v).to(Q.dtype)
    return C_01_repeat_interleave(Q, K, V)


def W_20_view_groups_noncontiguous(Q, K, V):
    """O02 with Q.view(...): a transposed Q (from (b, m, h, d).transpose(1, 2)) raises."""
    g = _check(Q, K)
    b, h, m, d = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.view(b, hkv, g * m, d), K, V)
    return out.view(b, h, m, d)


def W_21_kv_heads_from_V(Q, K, V):
    """Group size from V's head count but K indexed by a cached expand keyed on shape."""
    g = _check(Q, K)
    key = (tuple(K.shape), K.dtype)
    if key not in _MEMO:
        _MEMO[key] = K.repeat_interleave(g, 1)
    return _attn(Q, _MEMO[key], V.repeat_interleave(g, 1))


_MEMO = {}
