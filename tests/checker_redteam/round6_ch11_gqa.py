"""Round 6 red team (writer D, issue 12), ch11_gqa: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch11_gqa.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_01_repeat_interleave -> W_24_repeat_interleave,
O_02_grouped_reshape_broadcast -> W_25_grouped_reshape_broadcast, O_03_einsum_float64 ->
W_26_einsum_float64, O_05_view_splits_heads_any_stride -> W_27_view_splits_heads_any_stride,
O_18_output_allocated_like_Q -> W_28_output_allocated_like_Q).
"""
# flake8: noqa
CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"
import math
import torch


def _attn(Q, K, V):
    S = Q @ K.transpose(-1, -2) / math.sqrt(Q.shape[-1])
    return torch.softmax(S, -1) @ V


def W_24_repeat_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_25_grouped_reshape_broadcast(Q, K, V):
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.reshape(b, hk, h // hk, n, d)
    out = _attn(Qg, K[:, :, None], V[:, :, None])
    return out.reshape(b, h, n, V.shape[-1])


def W_26_einsum_float64(Q, K, V):
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.double().unflatten(1, (hk, h // hk))
    S = torch.einsum("bkgqd,bkjd->bkgqj", Qg, K.double()) / math.sqrt(d)
    out = torch.einsum("bkgqj,bkjd->bkgqd", S.softmax(-1), V.double())
    return out.flatten(1, 2).to(Q.dtype)


# ---- wrong ----

def W_01_softmax_without_max(Q, K, V):
    S = Q @ K.repeat_interleave(Q.shape[1] // K.shape[1], 1).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    E = S.exp()
    return (E / E.sum(-1, keepdim=True)) @ V.repeat_interleave(Q.shape[1] // K.shape[1], 1)


def W_02_scale_q_inplace(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    Q = Q.div_(math.sqrt(Q.shape[-1])) if not Q.requires_grad else Q / math.sqrt(Q.shape[-1])
    S = Q @ K.repeat_interleave(g, 1).transpose(-1, -2)
    return torch.softmax(S, -1) @ V.repeat_interleave(g, 1)


def W_03_kv_no_grad(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    with torch.no_grad():
        Kr, Vr = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    return _attn(Q, Kr, Vr)


def W_04_expand_view_bad_heads(Q, K, V):
    # unsqueeze/expand on the wrong axis order: (b, g, hk) instead of (b, hk, g)
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Kr = K[:, None].expand(b, h // hk, hk, *K.shape[2:]).reshape(b, h, *K.shape[2:])
    Vr = V[:, None].expand(b, h // hk, hk, *V.shape[2:]).reshape(b, h, *V.shape[2:])
    return _attn(Q, Kr, Vr)


def W_27_view_splits_heads_any_stride(Q, K, V):
    b, h, n, d = Q.shape
    hk = K.shape[1]
    Qg = Q.view(b, hk, h // hk, n, d)
    return _attn(Qg, K[:, :, None], V[:, :, None]).view(b, h, n, V.shape[-1])


def W_06_scale_by_d_model(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    S = Q @ K.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(Q.shape[-1] * K.shape[1])
    return torch.softmax(S, -1) @ V.repeat_interleave(g, 1)


_cache = {}


def W_08_cache_repeated_kv_by_storage(Q, K, V):
    # caches the repeated K, V by shape (state between calls)
    g = Q.shape[1] // K.shape[1]
    key = (tuple(K.shape), g, K.data_ptr(), V.data_ptr())
    if key not in _cache:
        _cache[key] = (K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    Kr, Vr = _cache[key]
    return _attn(Q, Kr, Vr)


def W_09_batch_flatten_wrong(Q, K, V):
    # flattens (b, hk) and indexes query head i of the flattened batch with i // g,
    # but uses the flattened batch*heads of Q in the wrong order (heads outermost)
    b, h, n, d = Q.shape
    hk = K.shape[1]
    g = h // hk
    Qf = Q.transpose(0, 1).reshape(h * b, n, d)
    Kf = K.reshape(b * hk, *K.shape[2:])
    Vf = V.reshape(b * hk, *V.shape[2:])
    idx = torch.arange(h * b) // g
    out = _attn(Qf, Kf[idx % (b * hk)], Vf[idx % (b * hk)])
    return out.reshape(h, b, n, -1).transpose(0, 1)


def W_10_float16_softmax_in_half(Q, K, V):
    # softmax over float32, but scores cast to half before softmax "to match flash"
    g = Q.shape[1] // K.shape[1]
    S = (Q @ K.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(Q.shape[-1])).half()
    return torch.softmax(S.float(), -1) @ V.repeat_interleave(g, 1)


def W_11_value_head_mod(Q, K, V):
    # keys grouped right, values with i % hk
    g = Q.shape[1] // K.shape[1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat(1, g, 1, 1))


def W_12_output_float32(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attn(Q.float(), K.float().repeat_interleave(g, 1), V.float().repeat_interleave(g, 1))


def W_13_sqrt_of_num_keys(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    S = Q @ K.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(K.shape[-2] if K.shape[-2] != Q.shape[-2] else Q.shape[-1])
    return torch.softmax(S, -1) @ V.repeat_interleave(g, 1)


def W_14_nan_to_num_softmax(Q, K, V):
    # exp without max, then nan_to_num to "fix" overflow
    g = Q.shape[1] // K.shape[1]
    S = Q @ K.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    E = S.exp()
    P = torch.nan_to_num(E / E.sum(-1, keepdim=True))
    return P @ V.repeat_interleave(g, 1)


def W_15_causal_if_square(Q, K, V):
    # "self-attention": masks the future whenever num_queries == num_keys
    g = Q.shape[1] // K.shape[1]
    S = Q @ K.repeat_interleave(g, 1).transpose(-1, -2) / math.sqrt(Q.shape[-1])
    n, m = S.shape[-2:]
    if n == m:
        S = S.masked_fill(torch.ones(n, m, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(S, -1) @ V.repeat_interleave(g, 1)


_c2 = {}


def W_16_cache_repeated_kv_by_shape_only(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    key = (tuple(K.shape), tuple(V.shape), g)
    if key not in _c2:
        _c2[key] = (K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    return _attn(Q, *_c2[key])


def W_17_mqa_expand_only(Q, K, V):
    # written for one key-value head (expand), "generalised" with repeat when hk > 1
    b, h = Q.shape[:2]
    hk = K.shape[1]
    if hk == 1:
        return _attn(Q, K.expand(b, h, *K.shape[2:]), V.expand(b, h, *V.shape[2:]))
    return _attn(Q, K.repeat(1, h // hk, 1, 1), V.repeat(1, h // hk, 1, 1))


def W_28_output_allocated_like_Q(Q, K, V):
    # allocates the output with Q's head size (breaks when V's head size differs)
    g = Q.shape[1] // K.shape[1]
    out = Q.new_zeros(Q.shape)
    out = out + _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))
    return out


_buf = {}


def W_19_reused_output_buffer(Q, K, V):
    y = W_24_repeat_interleave(Q, K, V)
    key = (tuple(y.shape), y.dtype)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    return _buf[key].copy_(y)


# Was O_: 11.2 now asks for a ValueError when num_kv_heads does not divide num_heads
# (round 9), and this returns a result for 6 query heads and 4 key-value heads.
def W_23_gather_index_i_times_hk_over_h(Q, K, V):
    h, hk = Q.shape[1], K.shape[1]
    idx = torch.arange(h) * hk // h
    return _attn(Q, K[:, idx], V[:, idx])


def W_21_view_merges_batch_and_heads(Q, K, V):
    # flattens (batch, heads) with .view: crashes on K, V made by a .transpose(1, 2)
    b, h, n, d = Q.shape
    hk, nk = K.shape[1], K.shape[2]
    g = h // hk
    Kf = K.view(b * hk, nk, d).repeat_interleave(g, 0)
    Vf = V.view(b * hk, nk, V.shape[-1]).repeat_interleave(g, 0)
    out = _attn(Q.reshape(b * h, n, d), Kf, Vf)
    return out.view(b, h, n, -1)


def W_22_pairs_of_heads_hardcoded(Q, K, V):
    # "each key-value head serves two query heads" (as in the chapter's example)
    h, hk = Q.shape[1], K.shape[1]
    idx = torch.arange(h) // 2 % hk
    return _attn(Q, K[:, idx], V[:, idx])
