"""Round 5 red team (writer R5-C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch09_attention_step.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Renamed in round 7: check_attention_step now checks that float64 inputs get float64
accuracy (exercise 9.2 says so); the entries that compute float64 in float32 are W_.
"""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_attention_step"


def _attend(q, keys, values):
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s.float(), -1).to(q.dtype) @ values


def W_21_cat_then_softmax_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_02_sdpa_without_mask(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def O_03_scale_query_first_float64(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    qs = q.double() / q.shape[-1] ** 0.5
    w = torch.softmax(qs @ keys.double().transpose(-1, -2), dim=-1)
    return (w @ values.double()).to(q.dtype), keys, values


def O_04_einsum_scale_after_fp16(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", q, keys) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values, keys, values


def W_01_scale_by_d(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / q.shape[-1]
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def W_02_new_key_first_in_cache(q, k, v, past_keys, past_values):
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def W_03_attends_only_to_past(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v.clone(), keys, values
    return _attend(q, past_keys, past_values), keys, values


def W_04_exp_without_max(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    e = torch.exp(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    return (e / e.sum(-1, keepdim=True)) @ values, keys, values


def W_05_detached_past(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return _attend(q, keys, values), keys, values


_CACHE = {}


def W_06_own_global_cache(q, k, v, past_keys, past_values):
    # keeps its own cache and only looks at past_* to know when a sequence starts
    if past_keys.shape[2] == 0 or "k" not in _CACHE:
        _CACHE["k"], _CACHE["v"] = past_keys, past_values
    keys = torch.cat([_CACHE["k"], k], dim=2)
    values = torch.cat([_CACHE["v"], v], dim=2)
    _CACHE["k"], _CACHE["v"] = keys, values
    return _attend(q, keys, values), keys, values


def W_07_causal_triu_mask_from_zero(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.triu(torch.ones(1, keys.shape[2], dtype=torch.bool, device=q.device), 1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def W_08_mixes_batch_and_heads(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    b, h, t, d = keys.shape
    qf = q.reshape(b * h, 1, d)
    kf = keys.transpose(0, 1).reshape(b * h, t, d)
    vf = values.transpose(0, 1).reshape(b * h, t, d)
    w = torch.softmax((qf @ kf.transpose(1, 2) / math.sqrt(d)).float(), -1).to(q.dtype)
    return (w @ vf).reshape(b, h, 1, d), keys, values


def W_09_sdpa_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def W_10_returns_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.float() @ keys.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values.float(), keys, values


def W_11_no_scale(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1)
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def W_12_scale_by_sqrt_length(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(keys.shape[2])
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def W_13_softmax_over_heads(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    b, h, _, t = s.shape
    w = torch.softmax(s.float().transpose(1, 2).reshape(b, 1, h * t), -1)
    w = w.reshape(b, 1, h, t).transpose(1, 2).to(q.dtype) * h
    return w @ values, keys, values


def W_14_keys_values_swapped_in_return(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), values, keys


def W_15_output_without_head_split(q, k, v, past_keys, past_values):
    # averages the scores over heads (one attention pattern shared by all heads)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])).mean(1, keepdim=True)
    return torch.softmax(s.float(), -1).to(q.dtype) @ values, keys, values


def W_16_float16_scores_no_upcast_no_max(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.mean(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)) @ values, keys, values


def W_17_nan_to_num_softmax(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.nan_to_num(torch.exp(s) / torch.exp(s).sum(-1, keepdim=True))
    return w @ values, keys, values


def W_22_first_step_returns_v_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v * 1, keys, values
    return _attend(q, keys, values), keys, values


def W_18_caches_scaled_keys(q, k, v, past_keys, past_values):
    k = k / math.sqrt(k.shape[-1])
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = torch.softmax((q @ keys.transpose(-2, -1)).float(), -1).to(q.dtype)
    return w @ values, keys, values


def W_19_detached_new_key_in_cache(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = _attend(q, keys, values)
    return out, torch.cat([past_keys, k.detach()], 2), torch.cat([past_values, v.detach()], 2)


def W_20_cache_upcast_to_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys.float(), k.float()], dim=2)
    values = torch.cat([past_values.float(), v.float()], dim=2)
    w = torch.softmax(q.float() @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return (w @ values).to(q.dtype), keys, values
