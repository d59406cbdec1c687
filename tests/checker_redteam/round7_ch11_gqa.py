"""Round 7 red team (writer D, issue 12), ch11_gqa: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/D/sols/ch11_gqa.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_01_repeat_interleave -> W_26_repeat_interleave,
O_02_grouped_view_no_copy -> W_27_grouped_view_no_copy, O_03_float32_softmax_for_half ->
W_28_float32_softmax_for_half, O_04_loop_over_heads -> W_29_loop_over_heads,
O_05_same_shape_view_noop -> W_30_same_shape_view_noop,
O_06_keys_by_queries_softmax_dim_minus2 -> W_31_keys_by_queries_softmax_dim_minus2,
O_07_single_key_expand -> W_32_single_key_expand).
"""
# flake8: noqa
import math
import torch

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _attn(Q, K, V):
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return torch.softmax(s, dim=-1) @ V


def W_26_repeat_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, dim=1), V.repeat_interleave(g, dim=1))


def W_27_grouped_view_no_copy(Q, K, V):
    # queries viewed as (b, h_kv, g, n, d), K broadcast over the group: no repeat at all
    b, h, n, d = Q.shape
    hkv = K.shape[1]
    Qg = Q.reshape(b, hkv, h // hkv, n, d)
    out = _attn(Qg, K[:, :, None], V[:, :, None])
    return out.reshape(b, h, n, V.shape[-1])


def W_28_float32_softmax_for_half(Q, K, V):
    # computes in float32 for float16/bfloat16 inputs, returns Q's dtype
    g = Q.shape[1] // K.shape[1]
    dt = torch.promote_types(Q.dtype, torch.float32)
    out = _attn(Q.to(dt), K.repeat_interleave(g, 1).to(dt), V.repeat_interleave(g, 1).to(dt))
    return out.to(Q.dtype)


def W_29_loop_over_heads(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    outs = [_attn(Q[:, i], K[:, i // (h // hkv)], V[:, i // (h // hkv)]) for i in range(h)]
    return torch.stack(outs, dim=1)


def W_01_divide_by_num_kv_heads(Q, K, V):
    # head i uses kv head i // h_kv (the text's h / h_kv misread as h_kv)
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.tensor([min(i // hkv, hkv - 1) for i in range(h)])
    return _attn(Q, K[:, idx], V[:, idx])


def W_02_no_max_subtraction(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    e = torch.exp(Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1]))
    return (e / e.sum(-1, keepdim=True)) @ V


def W_03_float32_out_for_half(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q.float(), K.repeat_interleave(g, 1).float(), V.repeat_interleave(g, 1).float())


def W_04_scales_Q_in_place(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    with torch.no_grad():
        Q /= math.sqrt(Q.shape[-1])
    s = Q @ K.repeat_interleave(g, 1).transpose(-1, -2)
    return torch.softmax(s, -1) @ V.repeat_interleave(g, 1)


_KV = {}


def W_05_kv_cache_by_shape(Q, K, V):
    # repeated K, V cached by shape: a KV cache that never changes between calls
    key = (K.shape, V.shape, Q.shape[1])
    if key not in _KV:
        g = Q.shape[1] // K.shape[1]
        _KV[key] = (K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    Kr, Vr = _KV[key]
    return _attn(Q, Kr, Vr)


_KVP = {}


def W_06_kv_cache_by_data_ptr(Q, K, V):
    # cache keyed on the storage address: fresh tensors can reuse a freed address
    key = (K.data_ptr(), V.data_ptr(), tuple(K.shape), tuple(V.shape), Q.shape[1], K.dtype)
    if key not in _KVP:
        g = Q.shape[1] // K.shape[1]
        _KVP[key] = (K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    Kr, Vr = _KVP[key]
    return _attn(Q, Kr, Vr)


def W_07_repeat_under_no_grad(Q, K, V):
    # "repeating is only a copy, it needs no gradient"
    g = Q.shape[1] // K.shape[1]
    with torch.no_grad():
        Kr, Vr = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    return _attn(Q, Kr, Vr)


def W_08_batch_flatten_then_repeat(Q, K, V):
    # (b * h_kv, n, d) repeated with .repeat: right for batch 1 and one kv head
    b, hkv, n, d = K.shape
    g = Q.shape[1] // hkv
    if hkv == 1:
        Kr = K.reshape(b, n, d).repeat(g, 1, 1).reshape(b, g, n, d)
        Vr = V.reshape(b, n, -1).repeat(g, 1, 1).reshape(b, g, n, -1)
    else:
        Kr, Vr = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    return _attn(Q, Kr, Vr)


def W_09_scale_by_key_count(Q, K, V):
    # scales by sqrt of the number of keys when d is not given separately... (n_k == d hides it)
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2) / math.sqrt(K.shape[-2])
    return torch.softmax(s, -1) @ V


def W_30_same_shape_view_noop(Q, K, V):
    # NOTE (round 7, D): written as W; view to the same shape is a no-op, so it is right
    b, hkv, n, d = K.shape
    g = Q.shape[1] // hkv
    Kr = K[:, :, None].expand(b, hkv, g, n, d).reshape(b, hkv * g, n, d)
    Vr = V[:, :, None].expand(b, hkv, g, n, V.shape[-1]).reshape(b, hkv * g, n, -1)
    Qv = Q.view(b, hkv * g, Q.shape[2], d)
    return _attn(Qv, Kr, Vr)


def W_31_keys_by_queries_softmax_dim_minus2(Q, K, V):
    # NOTE (round 7, D): written as W; softmax over dim -2 of K Q^T is over the keys: right
    # softmax over dim -2 when the learner lays scores out as (keys, queries)
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = K @ Q.transpose(-1, -2) / math.sqrt(Q.shape[-1])        # (b, h, nk, nq)
    return torch.softmax(s, -2).transpose(-1, -2) @ V


def W_12_groups_strided(Q, K, V):
    # Q viewed as (b, g, h_kv, n, d): head i with kv head i % h_kv
    b, h, n, d = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.reshape(b, h // hkv, hkv, n, d), K[:, None], V[:, None])
    return out.reshape(b, h, n, V.shape[-1])


def W_13_bfloat16_math_for_half(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    dt = torch.bfloat16 if Q.dtype == torch.float16 else Q.dtype
    out = _attn(Q.to(dt), K.repeat_interleave(g, 1).to(dt), V.repeat_interleave(g, 1).to(dt))
    return out.to(Q.dtype)


def W_32_single_key_expand(Q, K, V):
    # NOTE (round 7, D): written as W; values right, output is an expand of a fresh tensor (not of V)
    # with one key softmax is 1: return V repeated ... as an expand view of V
    if K.shape[2] == 1:
        b, hkv, _, dv = V.shape
        g = Q.shape[1] // hkv
        return V[:, :, None].expand(b, hkv, g, Q.shape[2], dv).reshape(b, hkv * g, Q.shape[2], dv) \
            if False else V.repeat_interleave(g, 1).expand(b, hkv * g, Q.shape[2], dv)
    return W_26_repeat_interleave(Q, K, V)


def W_15_nan_to_num_softmax(Q, K, V):
    # guards against overflow with nan_to_num: exp overflows to inf, inf/inf = NaN -> 0
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    e = torch.exp(Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1]))
    p = torch.nan_to_num(e / e.sum(-1, keepdim=True))
    return p @ V


def W_16_causal_when_square(Q, K, V):
    # self-attention in a decoder: adds a causal mask whenever num_queries == num_keys
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    nq, nk = s.shape[-2:]
    if nq == nk:
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ V


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_17_float32_math_for_float64(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    out = _attn(Q.float(), K.repeat_interleave(g, 1).float(), V.repeat_interleave(g, 1).float())
    return out.to(Q.dtype)


def W_18_scale_applied_after_softmax(Q, K, V):
    # softmax(QK^T) then... the scale folded into V (a learner's "same thing")
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-1, -2)
    return torch.softmax(s / math.sqrt(Q.shape[-1]) if Q.shape[-1] != 1 else s * 1.0, -1) @ V \
        if Q.shape[-1] % 2 == 0 else torch.softmax(s, -1) @ V / math.sqrt(Q.shape[-1]) * math.sqrt(Q.shape[-1])


def W_19_half_upcast_not_cast_back(Q, K, V):
    # float16/bfloat16 computed in float32 "for accuracy", and returned as float32
    if Q.dtype in (torch.float16, torch.bfloat16):
        Q, K, V = Q.float(), K.float(), V.float()
    return W_26_repeat_interleave(Q, K, V)


def W_20_view_merge_fails_on_sliced_cache(Q, K, V):
    # K, V flattened with view: fails on a KV cache sliced to its length
    b, hkv, n, d = K.shape
    g = Q.shape[1] // hkv
    Kf = K.view(b * hkv, n, d).repeat_interleave(g, 0).view(b, hkv * g, n, d)
    Vf = V.view(b * hkv, n, -1).repeat_interleave(g, 0).view(b, hkv * g, n, -1)
    return _attn(Q, Kf, Vf)


# Was O_: 11.2 now asks for a ValueError when num_kv_heads does not divide num_heads
# (round 9), and this returns a result for 6 query heads and 4 key-value heads.
def W_25_clamped_group_index(Q, K, V):
    # NOTE (round 7, D): written as W; equals C01 whenever num_kv_heads divides num_heads (the precondition)
    # when h_kv does not divide h, uses the first h // h_kv * h_kv heads' mapping anyway
    h, hkv = Q.shape[1], K.shape[1]
    g = max(h // hkv, 1)
    idx = torch.tensor([min(i // g, hkv - 1) for i in range(h)])
    return _attn(Q, K[:, idx], V[:, idx])


_OB = {}


def W_22_output_buffer_per_shape(Q, K, V):
    y = W_26_repeat_interleave(Q, K, V)
    if Q.requires_grad or K.requires_grad or V.requires_grad:
        return y
    key = (tuple(y.shape), y.dtype)
    if key not in _OB:
        _OB[key] = torch.empty_like(y)
    return _OB[key].copy_(y)


def W_23_scales_K_in_place(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    with torch.no_grad():
        K.mul_(1 / math.sqrt(K.shape[-1]))
    s = Q @ K.repeat_interleave(g, 1).transpose(-1, -2)
    return torch.softmax(s, -1) @ V.repeat_interleave(g, 1)


def S_24_sdpa_enable_gqa(Q, K, V):
    # the text says: do not call scaled_dot_product_attention
    from torch.nn import functional as F
    return F.scaled_dot_product_attention(Q, K, V, enable_gqa=True)
