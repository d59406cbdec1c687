"""Round 11 red team (writer C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd
but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round11/C/sols/ch09_attention_step.py with the names W01_x written W_01_x.
Passed in round 11, rejected since: W_02 and W_21 (the gradient into cache positions older
than 32, or 256, steps detached: truncated backpropagation) on a prompt of 300 positions
already cached, where the message names the positions that get no gradient (and on 40 steps
decoded from an empty cache); W_23 (attention on detached float32 copies of half inputs) on
backward() in float16 and bfloat16; W_07 (all-zero keys masked as padding) on a sequence with
a zero key, a zero value and both at one position.
W_08 (scores clamped to [-30, 30]) is told that its scores are clamped, no longer that some
(sequence, head) pairs are wrong; W_16 (attention over the last 2,048 positions) is told
2048 (it was told 2023: windows a few keys apart are within 1e-3 over 4,200 keys, and the
closest one is named now).
O_05, O_06, O_10, O_11, O_13, O_14 and O_18 were written as wrong and renamed by the writer:
they compute what a right solution does (the scale sqrt(head size) written another way, the
new k and v returned as the cache at t = 0, float32 for half inputs, a fresh buffer per call,
the output cast to the values' dtype, which is q's, a cloned cache, a counter that never
changes the slice). No wrong one is accepted on purpose (no A_).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_attention_step"
import math
import torch
import torch.nn.functional as F


def _attend(q, keys, values):
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    qc, kc, vc = q.to(ct), keys.to(ct), values.to(ct)
    s = qc @ kc.transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=-1)
    return (w @ vc).to(q.dtype)


def C_01_plain(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_02_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    out = F.scaled_dot_product_attention(q.to(ct), keys.to(ct), values.to(ct))
    return out.to(q.dtype), keys, values


def O_03_einsum_float64_for_half(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    ct = torch.float64
    s = torch.einsum("bhqd,bhkd->bhqk", q.to(ct), keys.to(ct)) * q.shape[-1] ** -0.5
    w = torch.softmax(s, -1)
    out = torch.einsum("bhqk,bhkd->bhqd", w, values.to(ct))
    return out.to(q.dtype), keys, values


def W_01_window_4096(q, k, v, past_keys, past_values):
    # sliding window: the cache keeps only the last 4096 positions
    keys = torch.cat([past_keys, k], dim=2)[:, :, -4096:]
    values = torch.cat([past_values, v], dim=2)[:, :, -4096:]
    return _attend(q, keys, values), keys, values


def W_02_detach_long_past(q, k, v, past_keys, past_values):
    # truncated backprop: stop the gradient into positions older than 32 steps
    t = past_keys.shape[2]
    if t > 32:
        past_keys = torch.cat([past_keys[:, :, :-32].detach(), past_keys[:, :, -32:]], 2)
        past_values = torch.cat([past_values[:, :, :-32].detach(), past_values[:, :, -32:]], 2)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_03_cache_upcast(q, k, v, past_keys, past_values):
    # the cache is kept in float32 for half inputs
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    keys = torch.cat([past_keys.to(ct), k.to(ct)], dim=2)
    values = torch.cat([past_values.to(ct), v.to(ct)], dim=2)
    return _attend(q, keys, values).to(q.dtype), keys, values


def W_04_view_flatten(q, k, v, past_keys, past_values):
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    t1 = keys.shape[2]
    out = _attend(q.view(b * h, 1, d), keys.view(b * h, t1, d), values.view(b * h, t1, d))
    return out.view(b, h, 1, d), keys, values


def O_05_scale_by_value_size_equiv(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(values.shape[-1] * values.shape[1] / q.shape[1])
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def O_06_first_step_alias(q, k, v, past_keys, past_values):
    # at t = 0 the cache is k and v themselves; later steps write into a grown buffer
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_07_mask_zero_keys(q, k, v, past_keys, past_values):
    # treats all-zero cached keys as padding (masks them out)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    pad = (keys == 0).all(-1)[:, :, None, :]
    s = s.masked_fill(pad, float("-inf"))
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def W_08_clamp_scores(q, k, v, past_keys, past_values):
    # guards exp against overflow by clamping scores to [-30, 30]
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = (q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])).clamp(-30, 30)
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def W_09_per_head_max_shared(q, k, v, past_keys, past_values):
    # max shift taken over heads and keys together (one max per example)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    m = s.amax(dim=(1, 2, 3), keepdim=True)
    e = torch.exp(s - m)
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.to(ct)).to(q.dtype), keys, values


def O_10_half_weights_ruled(q, k, v, past_keys, past_values):
    # softmax(..., dtype=q.dtype): for float64 fine, but computes the half path in half
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if q.dtype == torch.float64:
        s = (q @ keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w.to(values.dtype) @ values).to(q.dtype), keys, values


def O_11_fresh_buffer_views(q, k, v, past_keys, past_values):
    # grows the cache with resize-free trick: new_empty + copy, returns narrow view of a bigger buffer
    b, h, t, d = past_keys.shape
    buf_k = past_keys.new_empty(b, h, t + 1 + 16, d)
    buf_v = past_values.new_empty(b, h, t + 1 + 16, d)
    buf_k[:, :, :t] = past_keys
    buf_k[:, :, t:t + 1] = k
    buf_v[:, :, :t] = past_values
    buf_v[:, :, t:t + 1] = v
    keys, values = buf_k[:, :, :t + 1], buf_v[:, :, :t + 1]
    return _attend(q, keys, values), keys, values


def W_12_is_causal_bottom_right_guess(q, k, v, past_keys, past_values):
    # causal mask written with tril on (1, t+1): only key 0 is allowed... for t=0 correct
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    t1 = keys.shape[2]
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(1, t1, dtype=torch.bool).tril(diagonal=t1 - 2 if t1 > 64 else t1)
    s = s.masked_fill(~mask, float("-inf"))
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def O_13_output_values_dtype(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = _attend(q, keys, values)
    return out.to(values.dtype), keys, values


def O_14_values_clone(q, k, v, past_keys, past_values):
    # the returned values cache is right; output uses keys for values when d == t+1 (typo path)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = _attend(q, keys, values)
    return out, keys, values.clone() if values.shape[2] < 100 else values[:, :, :].clone()


def W_15_return_detached_cache(q, k, v, past_keys, past_values):
    # the cache is state, not part of the graph: returned detached
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys.detach(), values.detach()


def W_16_attend_last_2048(q, k, v, past_keys, past_values):
    # full cache returned, but attention only over the last 2048 positions
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys[:, :, -2048:], values[:, :, -2048:]), keys, values


def W_17_scale_q_inplace(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    q = q.mul_(1.0)  # placeholder to keep values; real fault below
    q.div_(math.sqrt(q.shape[-1]))
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2)
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


_STEP = {"t": 0}


def O_18_global_counter_noop(q, k, v, past_keys, past_values):
    # position counted in a global, reset when the cache is empty
    if past_keys.shape[2] == 0:
        _STEP["t"] = 0
    keys = torch.cat([past_keys, k], dim=2)[:, :, :_STEP["t"] + past_keys.shape[2] * 0 + 1 + past_keys.shape[2] - _STEP["t"]]
    values = torch.cat([past_values, v], dim=2)[:, :, :keys.shape[2]]
    _STEP["t"] += 1
    return _attend(q, keys, values), keys, values


def W_19_weights_detached(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1).detach()
    return (w @ values.to(ct)).to(q.dtype), keys, values


def W_20_max_from_cache_only(q, k, v, past_keys, past_values):
    # max shift from the cached keys' scores only (new key's score left out)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    if s.shape[-1] > 1:
        m = s[..., :-1].amax(-1, keepdim=True)
    else:
        m = s.amax(-1, keepdim=True)
    e = torch.exp(s - m)
    return ((e / e.sum(-1, keepdim=True)) @ values.to(ct)).to(q.dtype), keys, values


def W_21_truncated_bptt_256(q, k, v, past_keys, past_values):
    # stop-gradient into positions older than 256 steps (saves memory on long prompts)
    t = past_keys.shape[2]
    if t > 256:
        past_keys = torch.cat([past_keys[:, :, :-256].detach(), past_keys[:, :, -256:]], 2)
        past_values = torch.cat([past_values[:, :, :-256].detach(), past_values[:, :, -256:]], 2)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_22_detach_prompt_cache(q, k, v, past_keys, past_values):
    # the cache passed in is treated as a constant (only this step's k, v get gradients)
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return _attend(q, keys, values), keys, values


def W_23_detach_half(q, k, v, past_keys, past_values):
    # half inputs: attention on detached float32 copies, cast back
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if q.dtype in (torch.float16, torch.bfloat16):
        out = _attend(q.detach().float(), keys.detach().float(), values.detach().float())
        return out.to(q.dtype), keys, values
    return _attend(q, keys, values), keys, values
