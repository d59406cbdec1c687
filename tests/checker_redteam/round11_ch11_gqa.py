"""Round 11 red team (writer D, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round11/D/sols/ch11_gqa.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
S_03 (V's head count never compared with K's) is a gap of the exercise text, which
gives K and V the same shape: not tested."""
# flake8: noqa
import math
import torch
CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _attn(Q, K, V):
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q, k, v = (t.float() for t in (Q, K, V)) if half else (Q, K, V)
    s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -1) @ v).to(Q.dtype)


def _heads(Q, K):
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 0 or h % hkv:
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    return h // hkv


def C_01_reference(Q, K, V):
    g = _heads(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def O_02_grouped_reshape(Q, K, V):
    g = _heads(Q, K)
    b, h, nq, d = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.reshape(b, hkv, g * nq, d), K, V)
    return out.reshape(b, h, nq, V.shape[-1])


def O_03_index_select_mul_div(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 0 or h % hkv:
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    idx = torch.arange(h) * hkv // h
    return _attn(Q, K[:, idx], V[:, idx])


# Accepted on purpose (A_): with num_kv_heads = 0 it raises ZeroDivisionError, not
# ValueError. A layer with no key-value head cannot be built, the error is immediate and
# names a division by zero, and the solution notebook (`Q.shape[1] % K.shape[1]`) and
# every right entry of rounds 3 to 10 raise ZeroDivisionError there too: the checker
# does not try 0 heads.
def A_01_zero_kv_heads_zerodiv(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    if h % hkv:
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    g = h // hkv
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_02_interleaved_repeat(Q, K, V):
    g = _heads(Q, K)
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def S_03_V_heads_unchecked(Q, K, V):
    # checks K's heads only; V with other head count broadcasts/gets sliced
    g = _heads(Q, K)
    Vr = V.repeat_interleave(max(Q.shape[1] // V.shape[1], 1), 1)[:, : Q.shape[1]]
    return _attn(Q, K.repeat_interleave(g, 1), Vr)


def O_04_scale_by_value_size_equal_by_spec(Q, K, V):
    g = _heads(Q, K)
    q, k, v = Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    if half:
        q, k, v = q.float(), k.float(), v.float()
    s = q @ k.transpose(-1, -2) / math.sqrt(V.shape[-1])
    return (torch.softmax(s, -1) @ v).to(Q.dtype)


def W_05_batch_broadcast_K(Q, K, V):
    # no batch check: K of batch 1 broadcasts silently... plus max over whole tensor
    g = _heads(Q, K)
    k, v = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q = Q.float() if half else Q
    k = k.float() if half else k
    v = v.float() if half else v
    s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    s = s - s.amax(dim=(-1, -2), keepdim=True)  # per head max, not per row
    p = s.exp()
    return (p / p.sum(-1, keepdim=True) @ v).to(Q.dtype)


def W_06_softmax_in_half_no_upcast_exp(Q, K, V):
    # manual softmax in the input dtype without max shift
    g = _heads(Q, K)
    k, v = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    p = s.exp()
    return p / p.sum(-1, keepdim=True) @ v


def W_07_assert_not_valueerror(Q, K, V):
    assert Q.shape[1] % K.shape[1] == 0, "num_kv_heads must divide num_heads"
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_08_float64_via_default_dtype_scale(Q, K, V):
    # scale as a float32 tensor: float64 input loses accuracy
    g = _heads(Q, K)
    k, v = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q = Q.float() if half else Q
    s = (q @ (k.float() if half else k).transpose(-1, -2)) * torch.rsqrt(
        torch.tensor(float(Q.shape[-1])))
    return (torch.softmax(s, -1).to(v.dtype) @ v).to(Q.dtype)


def W_09_groups_by_kv_index_mod(Q, K, V):
    # head i uses kv head i // g computed with g = h_kv (confused)
    g = _heads(Q, K)
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h) // max(hkv, 1) % hkv
    return _attn(Q, K[:, idx], V[:, idx])


def O_10_h_over_hkv_float_check(Q, K, V):
    # float group size: wrong only when it is not an integer... checks via float
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 0 or (h / hkv) != int(h / hkv):
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    g = int(h / hkv)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_11_more_kv_than_q_heads_allowed(Q, K, V):
    # h_kv > h: takes the first h kv heads instead of raising
    h, hkv = Q.shape[1], K.shape[1]
    if hkv > h:
        return _attn(Q, K[:, :h], V[:, :h])
    return C_01_reference(Q, K, V)


def O_12_sliced_noop(Q, K, V):
    g = _heads(Q, K)
    k, v = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    half = Q.dtype in (torch.float16, torch.bfloat16)
    q = Q.float() if half else Q
    k = k.float() if half else k
    v = v.float() if half else v
    s = q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    p = torch.softmax(s, -1)
    return (p @ v).to(Q.dtype)[:, :, :, : V.shape[-1]]


def W_13_detach_kv_when_shared(Q, K, V):
    # treats the shared key-value head as a constant when g > 1
    g = _heads(Q, K)
    if g > 1:
        K, V = K.detach(), V.detach()
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_14_einsum_output_view_of_V_when_one_key(Q, K, V):
    g = _heads(Q, K)
    if K.shape[2] == 1:
        return V.repeat_interleave(g, 1).expand(-1, -1, Q.shape[2], -1).detach().clone()
    return C_01_reference(Q, K, V)


def W_15_float16_computed_no_upcast_bf16_via_half(Q, K, V):
    g = _heads(Q, K)
    if Q.dtype == torch.bfloat16:
        out = _attn(Q.half(), K.half().repeat_interleave(g, 1), V.half().repeat_interleave(g, 1))
        return out.to(torch.bfloat16)
    return C_01_reference(Q, K, V)


def W_16_no_head_check_index_map(Q, K, V):
    # no ValueError: head i reads kv head floor(i * hkv / h), whatever the counts
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h) * hkv // h
    return _attn(Q, K[:, idx], V[:, idx])


def W_17_typeerror_not_valueerror(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    if h % hkv:
        raise TypeError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    return C_01_reference(Q, K, V)


def W_18_softmax_over_queries(Q, K, V):
    g = _heads(Q, K)
    k, v = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q.float() @ k.float().transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -2) @ v.float()).to(Q.dtype)


def W_19_view_merge_groups(Q, K, V):
    # fails on a transposed (non-contiguous) Q such as (b, n, h, d).transpose(1, 2)
    g = _heads(Q, K)
    b, h, nq, d = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.view(b, hkv, g * nq, d), K, V)
    return out.view(b, h, nq, V.shape[-1])


def W_20_no_sharing_fast_path_no_max(Q, K, V):
    # g == 1: plain attention, softmax written out without the max shift
    g = _heads(Q, K)
    if g == 1:
        q, k, v = (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                   for t in (Q, K, V))
        p = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1]))
        return (p / p.sum(-1, keepdim=True) @ v).to(Q.dtype)
    return C_01_reference(Q, K, V)


def W_21_no_sharing_fast_path_float32(Q, K, V):
    g = _heads(Q, K)
    if g == 1:
        s = Q.float() @ K.float().transpose(-1, -2) / math.sqrt(Q.shape[-1])
        return (torch.softmax(s, -1) @ V.float()).to(Q.dtype)
    return C_01_reference(Q, K, V)


def W_22_mqa_fast_path_no_max(Q, K, V):
    # one key-value head (multi-query): broadcast, written-out softmax
    g = _heads(Q, K)
    if K.shape[1] == 1:
        q, k, v = (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                   for t in (Q, K, V))
        p = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(Q.shape[-1]))
        return (p / p.sum(-1, keepdim=True) @ v).to(Q.dtype)
    return C_01_reference(Q, K, V)
