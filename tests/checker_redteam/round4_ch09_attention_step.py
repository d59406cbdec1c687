"""Round 4 red team (writer R4-C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch09_attention_step.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 7: check_attention_step now checks that float64 inputs get float64
accuracy (exercise 9.2 says so); the entries that compute float64 in float32 are W_.
"""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_attention_step"


def _attend(q, keys, values, scale=None):
    d = q.shape[-1]
    s = (q @ keys.transpose(-2, -1)) / math.sqrt(d) if scale is None else (q @ keys.transpose(-2, -1)) * scale
    return torch.softmax(s, -1) @ values


def C_01_cat_then_attend(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_27_float32_softmax_scale_q_first(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() / math.sqrt(q.shape[-1])) @ keys.float().transpose(-2, -1)
    w = torch.softmax(s, -1)
    return (w @ values.float()).to(q.dtype), keys, values


def O_01_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def O_02_einsum_float64(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", q.double(), keys.double()) / math.sqrt(q.shape[-1])
    out = torch.einsum("bhqk,bhkd->bhqd", s.softmax(-1), values.double())
    return out.to(q.dtype), keys, values


def W_28_manual_max_subtracted_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().mT) / math.sqrt(q.shape[-1])
    e = (s - s.amax(-1, keepdim=True)).exp()
    return ((e / e.sum(-1, keepdim=True)) @ values.float()).to(q.dtype), keys, values


def W_01_no_scale(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values, scale=1.0), keys, values


def W_02_scale_by_d(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values, scale=1.0 / q.shape[-1]), keys, values


def W_03_prepend_new_key(q, k, v, past_keys, past_values):
    # attention is order-free over keys, so the output is right, but the cache is reversed
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def W_04_attend_past_only(q, k, v, past_keys, past_values):
    if past_keys.shape[2] == 0:
        out = v.clone()
    else:
        out = _attend(q, past_keys, past_values)
    return out, torch.cat([past_keys, k], 2), torch.cat([past_values, v], 2)


def W_05_softmax_wrong_dim(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -2) @ values, keys, values


def W_06_exp_without_max(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    e = (q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])).exp()
    return (e / e.sum(-1, keepdim=True)) @ values, keys, values


def W_07_detach_cache(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return _attend(q, keys, values), keys, values


def W_08_returns_unextended_cache(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), past_keys, past_values


def W_09_reshape_instead_of_transpose(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    b, h, t, d = keys.shape
    s = q @ keys.reshape(b, h, d, t) / math.sqrt(d)
    return torch.softmax(s, -1) @ values, keys, values


_G = {}


def W_10_global_cache_ignores_past(q, k, v, past_keys, past_values):
    if past_keys.shape[2] == 0 or "k" not in _G:
        _G["k"], _G["v"] = k, v
    else:
        _G["k"] = torch.cat([_G["k"], k], 2)
        _G["v"] = torch.cat([_G["v"], v], 2)
    keys, values = _G["k"], _G["v"]
    return _attend(q, keys, values), keys, values


def W_11_float16_to_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.float() @ keys.float().mT / math.sqrt(q.shape[-1])
    return s.softmax(-1) @ values.float(), keys, values


def W_12_scale_by_sqrt_len(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values, scale=1 / math.sqrt(keys.shape[2])), keys, values


def W_13_triu_mask_on_single_row(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    t1 = keys.shape[2]
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(1, t1, dtype=torch.bool), diagonal=1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s, -1) @ values, keys, values


def W_14_sdpa_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def W_15_batch_head_mixed(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    b, h, t, d = keys.shape
    q2 = q.reshape(b * h, 1, d)
    k2 = keys.transpose(0, 1).reshape(b * h, t, d)
    v2 = values.transpose(0, 1).reshape(b * h, t, d)
    out = _attend(q2, k2, v2).reshape(b, h, 1, d)
    return out, keys, values


def W_16_value_dim_from_keys_scaling_after_softmax(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1)
    return torch.softmax(s, -1) @ values / math.sqrt(q.shape[-1]), keys, values


def W_29_scores_in_input_dtype_softmax_float32(q, k, v, past_keys, past_values):
    # computes q @ k^T in the input dtype then scales: overflows in float16 on large scores
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def O_05_split_and_rejoin_noop(q, k, v, past_keys, past_values):
    # writes the new key into the last slot of the given cache (thinks it is preallocated)
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys[:, :, 1:], k], 2)
        values = torch.cat([past_values[:, :, 1:], v], 2)
        keys = torch.cat([past_keys[:, :, :1], keys], 2)
        values = torch.cat([past_values[:, :, :1], values], 2)
    return _attend(q, keys, values), keys, values


def W_19_last_head_only_layout(q, k, v, past_keys, past_values):
    # attends with the head dimension squeezed: correct only for one head
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.softmax(s.mean(1, keepdim=True), -1)
    return w @ values, keys, values


def W_20_cache_upcast_to_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys.float(), k.float()], dim=2)
    values = torch.cat([past_values.float(), v.float()], dim=2)
    return _attend(q.float(), keys, values).to(q.dtype), keys, values


def W_21_scales_q_in_place(q, k, v, past_keys, past_values):
    q /= math.sqrt(q.shape[-1])
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return torch.softmax(q @ keys.mT, -1) @ values, keys, values


def W_22_squeeze_breaks_on_size_1(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    qs = q.squeeze()  # (b, h, d) -- unless b, h or d is 1
    s = torch.einsum("...d,...td->...t", qs, keys.reshape(*qs.shape[:-1], -1, qs.shape[-1]))
    w = torch.softmax(s / math.sqrt(q.shape[-1]), -1)
    out = torch.einsum("...t,...td->...d", w, values.reshape(*qs.shape[:-1], -1, v.shape[-1]))
    return out.reshape(q.shape), keys, values


def W_23_prefill_cache_ignored_first_call(q, k, v, past_keys, past_values):
    # keeps its own cache in a closure; past_keys only used to detect a new sequence (t == 0)
    return W_10_global_cache_ignores_past(q, k, v, past_keys, past_values)


_BUF = {}


def W_24_static_buffer_in_place(q, k, v, past_keys, past_values):
    # a preallocated cache (like a "static cache"): writes position t in place, returns views
    b, h, t, d = past_keys.shape
    key = (b, h, d, q.dtype)
    if t == 0 or key not in _BUF:
        _BUF[key] = (q.new_zeros(b, h, 128, d), q.new_zeros(b, h, 128, d))
    K, V = _BUF[key]
    K[:, :, t] = k[:, :, 0]
    V[:, :, t] = v[:, :, 0]
    keys, values = K[:, :, : t + 1], V[:, :, : t + 1]
    return _attend(q, keys, values), keys, values


def O_06_first_step_returns_v(q, k, v, past_keys, past_values):
    if past_keys.shape[2] == 0:
        return v.clone(), k, v
    return C_01_cat_then_attend(q, k, v, past_keys, past_values)


def W_25_manual_softmax_in_place_divide(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = (s - s.amax(-1, keepdim=True)).exp()
    e /= e.sum(-1, keepdim=True)
    return e @ values, keys, values


def W_26_view_flatten_past(q, k, v, past_keys, past_values):
    # merges batch and heads with .view: fails on a cache slice such as buffer[:, :, :t]
    b, h, t, d = past_keys.shape
    pk = past_keys.view(b * h, t, d)
    pv = past_values.view(b * h, t, d)
    keys = torch.cat([pk, k.reshape(b * h, 1, d)], 1)
    values = torch.cat([pv, v.reshape(b * h, 1, d)], 1)
    out = _attend(q.reshape(b * h, 1, d), keys, values)
    return out.view(b, h, 1, d), keys.view(b, h, t + 1, d), values.view(b, h, t + 1, d)
