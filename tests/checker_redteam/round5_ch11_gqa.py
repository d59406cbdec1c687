"""Round 5 red team (writer R5-C, issue 12), ch11_gqa: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch11_gqa.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_01_repeat_interleave -> W_21_repeat_interleave,
O_02_group_reshape_broadcast -> W_22_group_reshape_broadcast, O_04_loop_over_heads ->
W_23_loop_over_heads, O_05_value_head_size_from_keys_was_W17 ->
W_24_value_head_size_from_keys_was_W17).
"""
# flake8: noqa
import math
import torch

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _attn(Q, K, V, scale=None):
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    return torch.softmax(Q @ K.transpose(-2, -1) * scale, -1) @ V


def W_21_repeat_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_22_group_reshape_broadcast(Q, K, V):
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.reshape(b, hk, h // hk, n, d)
    out = _attn(Qg, K[:, :, None], V[:, :, None])
    return out.reshape(b, h, n, V.shape[-1])


# Was O_: 11.2 now asks for a ValueError when num_kv_heads does not divide num_heads
# (round 9), and this returns a result for 6 query heads and 4 key-value heads.
def W_20_index_select_float64(Q, K, V):
    h, hk = Q.shape[1], K.shape[1]
    idx = torch.tensor([i * hk // h for i in range(h)], device=Q.device)
    Kr, Vr = K.index_select(1, idx).double(), V.index_select(1, idx).double()
    s = torch.einsum("bhqd,bhkd->bhqk", Q.double(), Kr) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -1) @ Vr).to(Q.dtype)


def W_23_loop_over_heads(Q, K, V):
    h, hk = Q.shape[1], K.shape[1]
    g = h // hk
    return torch.stack([_attn(Q[:, i], K[:, i // g], V[:, i // g]) for i in range(h)], 1)


def W_01_repeat_tiles(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def W_02_wrong_group_reshape(Q, K, V):
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.reshape(b, h // hk, hk, n, d)  # heads i and i + hk grouped
    out = _attn(Qg, K[:, None], V[:, None])
    return out.reshape(b, h, n, V.shape[-1])


def W_03_scale_by_model_size(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1),
                 1 / math.sqrt(Q.shape[1] * Q.shape[-1]))


def W_04_no_scale(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), 1.0)


def W_05_first_kv_head_for_all(Q, K, V):
    return _attn(Q, K[:, :1], V[:, :1])


def W_06_exp_without_max(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    e = torch.exp(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]))
    return e / e.sum(-1, keepdim=True) @ V


def W_07_detached_kv(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.detach().repeat_interleave(g, 1), V.detach().repeat_interleave(g, 1))


def W_08_causal_mask_added(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    n, m = s.shape[-2:]
    s = s.masked_fill(torch.ones(n, m, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ V


def W_09_batch_head_mixed(Q, K, V):
    b, h, n, d = Q.shape
    hk, m = K.shape[1], K.shape[2]
    g = h // hk
    Kf = K.transpose(0, 1).reshape(b * hk, m, d).repeat_interleave(g, 0)
    Vf = V.transpose(0, 1).reshape(b * hk, m, V.shape[-1]).repeat_interleave(g, 0)
    out = _attn(Q.reshape(b * h, n, d), Kf, Vf)
    return out.reshape(b, h, n, V.shape[-1])


def W_10_ceil_group_index(Q, K, V):
    h, hk = Q.shape[1], K.shape[1]
    g = h // hk
    idx = torch.tensor([min(math.ceil(i / g), hk - 1) for i in range(h)], device=Q.device)
    return _attn(Q, K[:, idx], V[:, idx])


def W_11_keys_interleaved_values_tiled(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat(1, g, 1, 1))


def W_12_mean_of_query_heads(Q, K, V):
    # one query per group: the mean of the group's query heads (a wrong "sharing")
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qm = Q.reshape(b, hk, h // hk, n, d).mean(2)
    return _attn(Qm, K, V).repeat_interleave(h // hk, 1)


def W_13_softmax_over_queries(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(s, -2) @ V


def W_14_float16_returns_float32(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q.float(), K.float().repeat_interleave(g, 1), V.float().repeat_interleave(g, 1))


def W_15_expand_in_place_on_K(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    Kr = K.repeat_interleave(g, 1)
    out = _attn(Q, Kr, V.repeat_interleave(g, 1))
    with torch.no_grad():
        Q.mul_(1.0000001)
    return out


def W_16_scale_by_num_keys(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1),
                 1 / math.sqrt(K.shape[2]))


def W_24_value_head_size_from_keys_was_W17(Q, K, V):
    # reshapes with K's last size: works only when V's head size equals K's
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.reshape(b, hk, h // hk, n, d)
    out = _attn(Qg, K[:, :, None], V[:, :, None])
    return out.reshape(b, h, n, d)


def W_18_group_index_i_over_num_kv_heads(Q, K, V):
    h, hk = Q.shape[1], K.shape[1]
    idx = torch.tensor([min(i // hk, hk - 1) for i in range(h)], device=Q.device)
    return _attn(Q, K[:, idx], V[:, idx])


def W_19_group_of_size_num_kv_heads(Q, K, V):
    # uses num_kv_heads as the group size: right when h / h_kv == h_kv
    hk = K.shape[1]
    return _attn(Q, K.repeat_interleave(hk, 1)[:, : Q.shape[1]],
                 V.repeat_interleave(hk, 1)[:, : Q.shape[1]])
