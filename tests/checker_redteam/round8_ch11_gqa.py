"""Round 8 red team (writer D, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round8/D/sols/ch11_gqa.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 11: check_grouped_query_attention now asks for the ValueError of exercise
11.2 (4 key-value heads for 6 query heads, and for 2); these entries compute the right
attention but stop with the RuntimeError or IndexError of a broadcast, a reshape or an
index, so they are W_ (C_01_repeat_interleave -> W_23_repeat_interleave,
O_02_fold_group_into_queries -> W_24_fold_group_into_queries, O_03_broadcast_5d ->
W_25_broadcast_5d, O_07_view_split_heads -> W_26_view_split_heads).
Renamed in round 12: A_09_half_scores_unscaled_first -> W_27_half_scores_unscaled_first
(no ValueError: for the same reason; its half-precision path, the reason it was A_, is
still accepted when the function raises the ValueError).
"""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _wd(x):
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


def _attend(Q, K, V):
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    s = q @ k.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -1) @ v).to(Q.dtype)


def _expand(K, g):
    return K.repeat_interleave(g, dim=1)


# ---------------------------------------------------------------- correct / odd
def W_23_repeat_interleave(Q, K, V):
    g = Q.shape[1] // K.shape[1]
    return _attend(Q, _expand(K, g), _expand(V, g))


def W_24_fold_group_into_queries(Q, K, V):
    """Stacks the g query heads of a group along the query axis: one (g*m, n) score
    matrix per key-value head, no copy of K or V."""
    b, h, m, s = Q.shape
    hkv, n = K.shape[1], K.shape[2]
    g = h // hkv
    q = Q.reshape(b, hkv, g * m, s)
    out = _attend(q, K, V)
    return out.reshape(b, h, m, V.shape[-1])


def W_25_broadcast_5d(Q, K, V):
    """(b, hkv, g, m, s) queries against (b, hkv, 1, n, s) keys, by broadcasting."""
    b, h, m, s = Q.shape
    hkv = K.shape[1]
    q = Q.reshape(b, hkv, h // hkv, m, s)
    out = _attend(q, K.unsqueeze(2), V.unsqueeze(2))
    return out.reshape(b, h, m, V.shape[-1])


# ---------------------------------------------------------------- wrong
def W_01_repeat_tiles(Q, K, V):
    """K.repeat(1, g, 1, 1): head i uses key-value head i % hkv."""
    g = Q.shape[1] // K.shape[1]
    return _attend(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def W_02_no_max_subtraction(Q, K, V):
    """exp(scores) / sum: overflows on large scores."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1) / math.sqrt(Q.shape[-1])
    e = torch.exp(s)
    return ((e / e.sum(-1, keepdim=True)) @ V.to(wd)).to(Q.dtype)


def W_03_causal_when_square(Q, K, V):
    """Adds a causal mask whenever num_queries == num_keys (habit from chapter 9)."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1) / math.sqrt(Q.shape[-1])
    m, n = s.shape[-2:]
    if m == n:
        s = s.masked_fill(torch.ones(m, n, dtype=torch.bool).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ V.to(wd)).to(Q.dtype)


def W_04_repeat_interleave_by_hkv(Q, K, V):
    """repeat_interleave(num_kv_heads) instead of (num_heads // num_kv_heads): right only
    when num_heads == num_kv_heads ** 2."""
    hkv = K.shape[1]
    return _attend(Q, _expand(K, hkv), _expand(V, hkv))


def W_05_detach_kv(Q, K, V):
    """Expands K and V under no_grad ('only an index copy'): no gradient to K, V."""
    g = Q.shape[1] // K.shape[1]
    with torch.no_grad():
        Ke, Ve = _expand(K, g), _expand(V, g)
    return _attend(Q, Ke, Ve)


def W_06_inplace_softmax(Q, K, V):
    """Manual softmax with sub_/exp_/div_ in place: right forward, backward raises."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1)
    s.div_(math.sqrt(Q.shape[-1]))
    s.sub_(s.amax(-1, keepdim=True))
    s.exp_()
    s.div_(s.sum(-1, keepdim=True))
    return (s @ V.to(wd)).to(Q.dtype)


def W_26_view_split_heads(Q, K, V):
    """Q.view(b, hkv, g, m, s): splitting a dim is a view at any strides, so this is right
    (I first wrote it as wrong)."""
    b, h, m, s = Q.shape
    hkv = K.shape[1]
    q = Q.view(b, hkv, h // hkv, m, s)
    out = _attend(q, K.unsqueeze(2), V.unsqueeze(2))
    return out.view(b, h, m, V.shape[-1])


def W_08_float32_output(Q, K, V):
    """Computes in float32 and returns float32 for float16/bfloat16 inputs."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return torch.softmax(s, -1) @ V.to(wd)


# Was A_ (accepted on purpose): float16 scores overflow only when an unscaled q.k exceeds
# 65504 (Q = K = 40 everywhere, head size 64); such scores are unrealistic, and the
# writer judged it no hole (round 8 lead's decision). W_ since round 12: no ValueError.
def W_27_half_scores_unscaled_first(Q, K, V):
    """Works in the input dtype and scales after the product: float16 scores overflow
    to inf when q.k exceeds 65504 though q.k / sqrt(d) does not. Wrong since round 11:
    4 key-value heads for 6 query heads stop with a broadcast's RuntimeError, not the
    ValueError exercise 11.2 asks."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    if Q.dtype in (torch.float16, torch.bfloat16):
        s = (Q @ K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
        return torch.softmax(s.float(), -1).to(Q.dtype) @ V
    return _attend(Q, K, V)


def W_10_scale_by_num_kv_heads(Q, K, V):
    """Scales by 1/sqrt(head_size * num_kv_heads / num_kv_heads)... no: by
    1/sqrt(num_heads * head_size / num_heads) is right; this uses 1/sqrt(d_model)
    with d_model = num_heads * head_size."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1) / math.sqrt(Q.shape[1] * Q.shape[-1])
    return (torch.softmax(s, -1) @ V.to(wd)).to(Q.dtype)


def W_11_mean_of_group_queries(Q, K, V):
    """Averages the g query heads of a group, attends once and repeats the result."""
    b, h, m, s = Q.shape
    hkv = K.shape[1]
    g = h // hkv
    q = Q.reshape(b, hkv, g, m, s).mean(2)
    out = _attend(q, K, V)
    return out.repeat_interleave(g, dim=1)


def W_12_group_of_head_by_round(Q, K, V):
    """kv head of query head i = round(i / g) (clamped), not floor."""
    h, hkv = Q.shape[1], K.shape[1]
    g = h // hkv
    idx = torch.tensor([min(round(i / g), hkv - 1) for i in range(h)], device=Q.device)
    return _attend(Q, K[:, idx], V[:, idx])


def W_13_squeeze_for_decoding(Q, K, V):
    """Squeezes every size-1 dimension 'for the decoding step' and restores with
    reshape(b, h, m, s) in the wrong order when batch is 1 and... builds on a
    (h, b, m, s) layout: right only for batch 1."""
    b, h, m, s = Q.shape
    g = h // K.shape[1]
    q = Q.transpose(0, 1).reshape(h, b, m, s)
    k = _expand(K, g).transpose(0, 1)
    v = _expand(V, g).transpose(0, 1)
    out = _attend(q, k, v)          # (h, b, m, s)
    return out.reshape(b, h, m, V.shape[-1])


def W_14_value_head_from_query_shape(Q, K, V):
    """Softmax over the query axis (dim=-2)."""
    g = Q.shape[1] // K.shape[1]
    K, V = _expand(K, g), _expand(V, g)
    wd = _wd(Q)
    s = Q.to(wd) @ K.to(wd).transpose(-2, -1) / math.sqrt(Q.shape[-1])
    return (torch.softmax(s, -2) @ V.to(wd)).to(Q.dtype)


_cache = {}


def W_15_cache_expanded_kv_by_shape(Q, K, V):
    """Caches the expanded K, V per (shape, data_ptr): a K overwritten in place (a KV cache
    buffer that grows) keeps the old values."""
    key = (tuple(K.shape), K.data_ptr(), V.data_ptr())
    g = Q.shape[1] // K.shape[1]
    if key not in _cache:
        _cache[key] = (_expand(K, g), _expand(V, g))
    Ke, Ve = _cache[key]
    return _attend(Q, Ke, Ve)


def W_16_view_fold_batch_heads(Q, K, V):
    """Folds batch and heads with .view(b * h, m, s): a RuntimeError on non-contiguous
    inputs, e.g. Q = X.transpose(1, 2) for X of shape (b, m, h, s), the usual way
    heads are split off a projection."""
    b, h, m, s = Q.shape
    hkv, n = K.shape[1], K.shape[2]
    g = h // hkv
    q = Q.view(b * h, m, s)
    k = K.view(b * hkv, n, s).repeat_interleave(g, 0)
    v = V.view(b * hkv, n, V.shape[-1]).repeat_interleave(g, 0)
    return _attend(q, k, v).view(b, h, m, V.shape[-1])


def W_17_scales_Q_in_place(Q, K, V):
    """Q /= sqrt(head_size): changes the caller's Q (and raises on a leaf that requires
    grad)."""
    Q /= math.sqrt(Q.shape[-1])
    g = Q.shape[1] // K.shape[1]
    wd = _wd(Q)
    s = Q.to(wd) @ _expand(K, g).to(wd).transpose(-2, -1)
    return (torch.softmax(s, -1) @ _expand(V, g).to(wd)).to(Q.dtype)


_head_index = {}


def W_18_head_index_cached_on_num_heads(Q, K, V):
    """Caches the query-head -> kv-head index per num_heads, built with the first
    num_kv_heads seen."""
    h, hkv = Q.shape[1], K.shape[1]
    if h not in _head_index:
        _head_index[h] = torch.arange(h) // (h // hkv)
    idx = _head_index[h].clamp(max=hkv - 1)
    return _attend(Q, K[:, idx], V[:, idx])


def S_19_sdpa_enable_gqa(Q, K, V):
    """F.scaled_dot_product_attention(..., enable_gqa=True): forbidden by the text."""
    return F.scaled_dot_product_attention(Q, K, V, enable_gqa=True)


def W_20_bfloat16_returns_float32(Q, K, V):
    """Upcasts bfloat16 inputs and forgets to cast back (float16 handled)."""
    g = Q.shape[1] // K.shape[1]
    out = _attend(Q.float() if Q.dtype == torch.bfloat16 else Q,
                  _expand(K, g).to(torch.float32 if Q.dtype == torch.bfloat16 else K.dtype),
                  _expand(V, g).to(torch.float32 if Q.dtype == torch.bfloat16 else V.dtype))
    return out


def W_21_mqa_branch_unscaled(Q, K, V):
    """A special branch for one key-value head (multi-query attention) that forgets the
    1/sqrt(head_size) scale."""
    if K.shape[1] == 1:
        wd = _wd(Q)
        s = Q.to(wd) @ K.to(wd).transpose(-2, -1)
        return (torch.softmax(s, -1) @ V.to(wd)).to(Q.dtype)
    return W_23_repeat_interleave(Q, K, V)


def W_22_mha_branch_unscaled(Q, K, V):
    """A special branch for num_kv_heads == num_heads (plain multi-head) without the scale."""
    if K.shape[1] == Q.shape[1]:
        wd = _wd(Q)
        s = Q.to(wd) @ K.to(wd).transpose(-2, -1)
        return (torch.softmax(s, -1) @ V.to(wd)).to(Q.dtype)
    return W_23_repeat_interleave(Q, K, V)
