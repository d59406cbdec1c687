"""Round 3 red team (writer R3, issue 12), ch11_gqa: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch11_gqa.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_1_repeat_interleave -> W_14_repeat_interleave,
O_1_grouped_broadcast -> W_15_grouped_broadcast, O_2_expand_reshape_float64_ok ->
W_16_expand_reshape_float64_ok, O_3_index_select_group -> W_17_index_select_group,
O_4_fold_group_into_query_axis -> W_18_fold_group_into_query_axis,
O_5_reference_in_input_dtype -> W_19_reference_in_input_dtype).
"""
# flake8: noqa
CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"
import math, torch

def _attn(Q, K, V, scale_dim=None, causal=False, manual=False):
    d = scale_dim or Q.shape[-1]
    S = Q @ K.transpose(-1, -2) / math.sqrt(d)
    if causal:
        nq, nk = S.shape[-2:]
        S = S.masked_fill(torch.ones(nq, nk, dtype=torch.bool, device=S.device).triu(1), float("-inf"))
    if manual:
        E = torch.exp(S); W = E / E.sum(-1, keepdim=True)
    else:
        W = torch.softmax(S, -1)
    return W @ V

def W_14_repeat_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, dim=1), V.repeat_interleave(g, dim=1))

def W_15_grouped_broadcast(Q, K, V):
    b, h, nq, hs = Q.shape; hkv = K.shape[1]; g = h // hkv
    Qg = Q.reshape(b, hkv, g, nq, hs)
    S = Qg @ K[:, :, None].transpose(-1, -2) / math.sqrt(hs)
    return (torch.softmax(S, -1) @ V[:, :, None]).reshape(b, h, nq, hs)

def W_16_expand_reshape_float64_ok(Q, K, V):
    b, h, nq, hs = Q.shape; hkv, nk = K.shape[1], K.shape[2]; g = h // hkv
    Ke = K[:, :, None].expand(b, hkv, g, nk, hs).reshape(b, h, nk, hs)
    Ve = V[:, :, None].expand(b, hkv, g, nk, V.shape[-1]).reshape(b, h, nk, V.shape[-1])
    return _attn(Q, Ke, Ve)

def W_17_index_select_group(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h, device=Q.device) // (h // hkv)
    return _attn(Q, K[:, idx], V[:, idx])

def W_01_repeat_tiled(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))

def W_02_scale_by_model_dim(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale_dim=Q.shape[1] * Q.shape[-1])

def W_03_softmax_wrong_axis(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    S = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return torch.softmax(S, -2) @ V

def W_04_adds_causal_mask(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), causal=True)

def W_05_no_max_subtraction(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), manual=True)

def W_06_mqa_only_first_kv_head(Q, K, V):
    return _attn(Q, K[:, :1], V[:, :1])

def W_07_output_float32(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q.float(), K.repeat_interleave(g, 1).float(), V.repeat_interleave(g, 1).float())

def W_08_assumes_nk_eq_nq(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    nq = Q.shape[2]
    return _attn(Q, K.repeat_interleave(g, 1)[:, :, :nq], V.repeat_interleave(g, 1)[:, :, :nq])

def W_09_scales_Q_in_place(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    if not Q.requires_grad:
        Q.mul_(1 / math.sqrt(Q.shape[-1]))
        return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale_dim=1)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))

def W_10_transpose_scramble(Q, K, V):
    out = W_14_repeat_interleave(Q, K, V)  # (b, h, nq, hs)
    return out.transpose(1, 2).reshape(out.shape)

def W_11_group_by_modulo(Q, K, V):
    h, hkv = Q.shape[1], K.shape[1]
    idx = torch.arange(h, device=Q.device) % hkv
    return _attn(Q, K[:, idx], V[:, idx])

def W_12_scale_by_sqrt_num_keys(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale_dim=K.shape[2])

def W_18_fold_group_into_query_axis(Q, K, V):
    b, h, nq, hs = Q.shape; hkv = K.shape[1]; g = h // hkv
    Qf = Q.reshape(b, hkv, g * nq, hs)                       # consecutive heads -> one kv head
    out = torch.softmax(Qf @ K.transpose(-1, -2) / math.sqrt(hs), -1) @ V
    return out.reshape(b, h, nq, hs)

def W_13_fold_group_wrong_order(Q, K, V):
    b, h, nq, hs = Q.shape; hkv = K.shape[1]; g = h // hkv
    Qf = Q.transpose(1, 2).reshape(b, nq * g, hkv, hs).transpose(1, 2)   # mixes heads/positions
    out = torch.softmax(Qf @ K.transpose(-1, -2) / math.sqrt(hs), -1) @ V
    return out.transpose(1, 2).reshape(b, nq, h, hs).transpose(1, 2)

def W_19_reference_in_input_dtype(Q, K, V):
    # computes scores before scaling in the input dtype: fine in float32, overflows in float16
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    S = (Q @ K.transpose(-1, -2)) / math.sqrt(Q.shape[-1])
    return torch.softmax(S, -1) @ V
