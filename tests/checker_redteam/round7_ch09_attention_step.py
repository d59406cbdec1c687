"""Round 7 red team (writer R7-C, issue 12), ch09_attention_step: wrong (W_), right (C_),
odd but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round7/C/sols/ch09_attnstep.py with the names W01_x written W_01_x.
Renamed after the round: the writer's C01 (the same code as W_05: float64 inputs computed in
float32 and cast back, 1.2e-7 off), O04 and O06 (both right in what they are named for, the
cache aliasing k and v at t = 0 and a tril mask that keeps every key, but computing float64
in float32 too) are wrong since round 7, when float64 inputs must be computed in float64
(within 1e-10 of the reference): they are W_26, W_27 and W_28. No wrong one is accepted on
purpose (no A_). tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_
and O_ entry (must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_attention_step"


# The writer's C01 (the same computation as W_05): float64 computed in float32.
def W_26_reference_style_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    scores = q.float() @ keys.float().transpose(-2, -1) / math.sqrt(q.shape[-1])
    w = torch.softmax(scores, dim=-1)
    return (w @ values.float()).to(q.dtype), keys, values


def O_02_sdpa_no_mask(q, k, v, past_keys, past_values):
    """The newest query may see every key: no mask at all is needed."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def O_03_native_dtype_scaled_first_einsum(q, k, v, past_keys, past_values):
    """Scale q first, compute in the input dtype with einsum; manual stable softmax with
    the max detached (the shift cancels in the gradient)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", q * q.shape[-1] ** -0.5, keys)
    s = s - s.amax(-1, keepdim=True).detach()
    e = s.exp()
    w = e / e.sum(-1, keepdim=True)
    return torch.einsum("bhqk,bhkd->bhqd", w, values), keys, values


# The writer's O04: the aliasing at t = 0 is right; float64 is computed in float32.
def W_27_first_step_aliases_k_float32(q, k, v, past_keys, past_values):
    """At t = 0 the cache is k and v themselves (as book.gpt.KVCache does)."""
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    w = torch.softmax((q @ keys.transpose(2, 3)).float() / math.sqrt(q.shape[-1]), -1)
    return (w.to(values.dtype) @ values), keys, values


def W_01_past_detached(q, k, v, past_keys, past_values):
    """'The cache needs no gradient': the earlier keys/values are detached."""
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return W_26_reference_style_float32(q, k, v, past_keys.detach(), past_values.detach())[0], \
        keys, values


def W_02_cache_built_under_no_grad(q, k, v, past_keys, past_values):
    """The returned cache is built under no_grad (attention itself uses live tensors):
    the next step's keys carry no gradient back to this step's k and v."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = W_26_reference_style_float32(q, k, v, past_keys, past_values)[0]
    with torch.no_grad():
        keys_c = torch.cat([past_keys, k], dim=2)
        values_c = torch.cat([past_values, v], dim=2)
    return out, keys_c, values_c


def W_03_scale_by_heads(q, k, v, past_keys, past_values):
    """sqrt of q.shape[1] (the heads) instead of the head size: right when they are equal."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = torch.softmax((q.float() @ keys.float().transpose(2, 3)) / math.sqrt(q.shape[1]), -1)
    return (w @ values.float()).to(q.dtype), keys, values


def W_04_global_max_shift(q, k, v, past_keys, past_values):
    """Manual softmax shifted by the max over the whole tensor (all batches and heads)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(2, 3)) / math.sqrt(q.shape[-1])
    e = (s - s.max()).exp()
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.float()).to(q.dtype), keys, values


def W_05_softmax_in_float32_for_float64(q, k, v, past_keys, past_values):
    """Always computes in float32 ('fp16-safe'), also for float64 inputs."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(2, 3)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w @ values.float()).to(q.dtype), keys, values


def O_07_fp16_native_unscaled_product(q, k, v, past_keys, past_values):
    """Computes q @ K^T in the input dtype and divides afterwards: overflows in float16."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(2, 3)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=-1)
    return w @ values, keys, values


_BUF = {}


def W_07_preallocated_cache_per_shape(q, k, v, past_keys, past_values):
    """A preallocated (b, h, 64, d) buffer per shape; returns slices of it."""
    b, h, t, d = past_keys.shape
    key = (b, h, d, q.dtype)
    if key not in _BUF:
        _BUF[key] = (q.new_zeros(b, h, 64, d), q.new_zeros(b, h, 64, d))
    K, V = _BUF[key]
    if t + 1 > K.shape[2]:
        K = torch.cat([K, K.new_zeros(b, h, t + 1, d)], 2)
        V = torch.cat([V, V.new_zeros(b, h, t + 1, d)], 2)
        _BUF[key] = (K, V)
    with torch.no_grad():
        K[:, :, :t] = past_keys
        V[:, :, :t] = past_values
        K[:, :, t:t + 1] = k
        V[:, :, t:t + 1] = v
    keys, values = K[:, :, :t + 1], V[:, :, :t + 1]
    out = W_26_reference_style_float32(q, k, v, past_keys, past_values)[0]
    return out, keys, values


def W_08_keys_prepended(q, k, v, past_keys, past_values):
    """New key/value put first: the output is the same (attention ignores order) but the
    cache is out of order."""
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return W_26_reference_style_float32(q, k, v, past_keys, past_values)[0], keys, values


def W_09_output_float32_for_half(q, k, v, past_keys, past_values):
    """Computes in float32 and forgets to cast back."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = torch.softmax(q.float() @ keys.float().transpose(2, 3) / math.sqrt(q.shape[-1]), -1)
    return w @ values.float(), keys, values


def W_10_exp_no_max(q, k, v, past_keys, past_values):
    """Manual softmax without subtracting the max."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    e = (q.float() @ keys.float().transpose(2, 3) / math.sqrt(q.shape[-1])).exp()
    return ((e / e.sum(-1, keepdim=True)) @ values.float()).to(q.dtype), keys, values


def W_11_is_causal_true(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def W_12_bmm_with_view(q, k, v, past_keys, past_values):
    """Folds batch and heads with .view: fails on a non-contiguous cache (a prompt cache
    made by transpose)."""
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    t1 = keys.shape[2]
    s = torch.bmm(q.view(b * h, 1, d).float(), keys.view(b * h, t1, d).float().transpose(1, 2))
    w = torch.softmax(s / math.sqrt(d), -1)
    out = torch.bmm(w, values.view(b * h, t1, d).float()).view(b, h, 1, d)
    return out.to(q.dtype), keys, values


def W_13_heads_batch_mixed(q, k, v, past_keys, past_values):
    """Folds with reshape(h * b, ...) after a permute that mixes batch and heads for the
    keys only when b > 1 and h > 1 differ ... (reshape of a (b,h) layout as (h,b))."""
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    t1 = keys.shape[2]
    Q = q.reshape(b * h, 1, d).float()
    K = keys.transpose(0, 1).reshape(h * b, t1, d).float()   # (h, b) order: wrong
    V = values.transpose(0, 1).reshape(h * b, t1, d).float()
    w = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(d), -1)
    out = (w @ V).reshape(h, b, 1, d).transpose(0, 1)
    return out.to(q.dtype).contiguous(), keys, values


# The writer's O06: the mask is right (it keeps every key); float64 is computed in float32.
def W_28_tril_mask_all_keys_kept_float32(q, k, v, past_keys, past_values):
    """A causal mask for the one query row, tril with diagonal t: keeps every key."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    t1 = keys.shape[2]
    mask = torch.ones(1, t1, dtype=torch.bool).tril(diagonal=max(t1 - 1, 0))
    s = q.float() @ keys.float().transpose(2, 3) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_16_output_with_heads_merged(q, k, v, past_keys, past_values):
    """Returns (batch, 1, heads * head_size) like a layer would."""
    out, keys, values = W_26_reference_style_float32(q, k, v, past_keys, past_values)
    b, h, _, d = q.shape
    return out.transpose(1, 2).reshape(b, 1, h * d), keys, values


def W_17_scale_by_cache_length(q, k, v, past_keys, past_values):
    """Divides by sqrt(d_k) where d_k is read from keys.shape[-2] (the length!)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.float() @ keys.float().transpose(2, 3) / math.sqrt(keys.shape[-2])
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_20_softmax_of_detached_scores(q, k, v, past_keys, past_values):
    """Scores detached before the softmax ('weights are just coefficients')."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(2, 3) / math.sqrt(q.shape[-1])).detach()
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_21_squeeze_everything(q, k, v, past_keys, past_values):
    """.squeeze() on the scores: at the first step (one key) the key axis disappears and
    the softmax runs over the heads."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(2, 3)).squeeze(2).squeeze(-1) \
        / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1).reshape(q.shape[0], q.shape[1], 1, keys.shape[2])
    return (w @ values.float()).to(q.dtype), keys, values


def W_22_scales_q_in_place(q, k, v, past_keys, past_values):
    """q.mul_(1/sqrt(d)) 'to save memory': changes the caller's q (when it needs no grad)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if q.requires_grad:
        q = q / math.sqrt(q.shape[-1])
    else:
        q.mul_(1 / math.sqrt(q.shape[-1]))
    w = torch.softmax((q.float() @ keys.float().transpose(2, 3)), -1)
    return (w @ values.float()).to(q.dtype), keys, values


_STEP = [0]


def W_23_global_step_counter(q, k, v, past_keys, past_values):
    """Keeps its own step counter and attends over the first `step` keys of the cache:
    right for one sequence decoded from t = 0, wrong when sequences interleave."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        _STEP[0] = 0
    _STEP[0] += 1
    n = max(_STEP[0], 1)
    n = min(n, keys.shape[2])
    K, V = keys[:, :, -n:], values[:, :, -n:]
    w = torch.softmax(q.float() @ K.float().transpose(2, 3) / math.sqrt(q.shape[-1]), -1)
    return (w @ V.float()).to(q.dtype), keys, values


def W_24_cache_window_64(q, k, v, past_keys, past_values):
    """Keeps at most the last 64 positions in the cache ('the model's block size'):
    exact up to 64 positions, then the oldest keys are dropped."""
    keys = torch.cat([past_keys, k], dim=2)[:, :, -64:]
    values = torch.cat([past_values, v], dim=2)[:, :, -64:]
    w = torch.softmax(q.float() @ keys.float().transpose(2, 3) / math.sqrt(q.shape[-1]), -1)
    return (w @ values.float()).to(q.dtype), keys, values


def W_25_window_32_attention_only(q, k, v, past_keys, past_values):
    """Returns the full cache, but attends only over the last 32 keys (sliding window)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    K, V = keys[:, :, -32:], values[:, :, -32:]
    w = torch.softmax(q.float() @ K.float().transpose(2, 3) / math.sqrt(q.shape[-1]), -1)
    return (w @ V.float()).to(q.dtype), keys, values
