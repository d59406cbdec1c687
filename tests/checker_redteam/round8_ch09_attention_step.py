"""Round 8 red team (writer C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/C/sols/ch09_attnstep.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_); there are no S_ entries. W_28 and W_29
(bfloat16 raises, bfloat16 gives zeros) were probes: they passed in round 8, when the
checker had no bfloat16 case; W_19 (the first call of the process taken as t = 0) passed
because the checker's first call had an empty cache.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_attention_step"
import math
import torch
from torch.nn import functional as F

_LOW = (torch.float16, torch.bfloat16)


def _attend(q, keys, values):
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=-1)
    return (w @ values.to(ct)).to(q.dtype)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_02_sdpa_no_mask(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    out = F.scaled_dot_product_attention(q.to(ct), keys.to(ct), values.to(ct))
    return out.to(q.dtype), keys, values


def O_03_einsum_logsumexp(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = torch.einsum("bhqd,bhkd->bhqk", q.to(ct), keys.to(ct)) * q.shape[-1] ** -0.5
    w = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return torch.einsum("bhqk,bhkd->bhqd", w, values.to(ct)).to(q.dtype), keys, values


def O_04_returns_k_at_first_step(q, k, v, past_keys, past_values):
    """At t = 0 returns k and v themselves as the cache (aliases the inputs)."""
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_01_scale_by_heads(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[1])
    return (torch.softmax(s.float(), -1).to(q.dtype) @ values), keys, values


def W_02_prepend_new(q, k, v, past_keys, past_values):
    """Puts the new key first: same output, cache out of order."""
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def W_03_values_reversed(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, torch.cat([past_values, v], dim=2)


def W_04_scale_by_length(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(keys.shape[-2])
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def W_05_no_max_subtraction(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = s.exp()
    return ((e / e.sum(-1, keepdim=True)) @ values.to(ct)).to(q.dtype), keys, values


def W_06_output_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values.to(ct), keys, values


def W_07_cache_detached(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2).detach()
    values = torch.cat([past_values, v], dim=2).detach()
    return _attend(q, torch.cat([past_keys, k], 2), torch.cat([past_values, v], 2)), keys, values


def W_08_softmax_wrong_dim(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.float() @ keys.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -2) @ values.float()).to(q.dtype), keys, values


def W_09_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    out = F.scaled_dot_product_attention(q.to(ct), keys.to(ct), values.to(ct), is_causal=True)
    return out.to(q.dtype), keys, values


_STATE = {}


def W_10_own_cache(q, k, v, past_keys, past_values):
    """Keeps its own cache (reset when past is empty), ignores past_keys' contents."""
    if past_keys.shape[2] == 0 or "k" not in _STATE:
        _STATE["k"], _STATE["v"] = past_keys, past_values
    keys = torch.cat([_STATE["k"], k], dim=2)
    values = torch.cat([_STATE["v"], v], dim=2)
    _STATE["k"], _STATE["v"] = keys, values
    return _attend(q, keys, values), keys, values


def W_11_heads_positions_mixed(q, k, v, past_keys, past_values):
    """Flattens (b, h) with a permute that mixes heads and positions: right with one head."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    b, h, T, d = keys.shape
    K = keys.permute(0, 2, 1, 3).reshape(b * h, T, d)
    Vv = values.permute(0, 2, 1, 3).reshape(b * h, T, d)
    Q = q.reshape(b * h, 1, d)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    w = torch.softmax(Q.to(ct) @ K.to(ct).transpose(1, 2) / math.sqrt(d), -1)
    return (w @ Vv.to(ct)).reshape(b, h, 1, d).to(q.dtype), keys, values


def W_12_einsum_sums_heads(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = torch.einsum("bhqd,bjkd->bhqk", q.to(ct), keys.to(ct)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return torch.einsum("bhqk,bhkd->bhqd", w, values.to(ct)).to(q.dtype), keys, values


def W_13_view_not_contiguous(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    b, h, T, d = keys.shape
    Q = q.view(b * h, 1, d)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    w = torch.softmax(Q.to(ct) @ keys.reshape(b * h, T, d).to(ct).transpose(1, 2) / math.sqrt(d), -1)
    return (w @ values.reshape(b * h, T, d).to(ct)).view(b, h, 1, d).to(q.dtype), keys, values


def W_14_scale_q_inplace(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    with torch.no_grad():
        q.mul_(1 / math.sqrt(q.shape[-1]))
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    w = torch.softmax(q.to(ct) @ keys.to(ct).transpose(-1, -2), -1)
    return (w @ values.to(ct)).to(q.dtype), keys, values


def W_15_squeeze_all(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = (q.to(ct) @ keys.to(ct).transpose(-1, -2)).squeeze() / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1).reshape(q.shape[0], q.shape[1], 1, -1)
    return (w @ values.to(ct)).to(q.dtype), keys, values


def W_16_inplace_softmax(q, k, v, past_keys, past_values):
    """exp_ and /= in place: right forward, backward raises."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s - s.amax(-1, keepdim=True)
    s.exp_()
    s /= s.sum(-1, keepdim=True)
    return (s @ values.to(ct)).to(q.dtype), keys, values


def W_17_max_detached_batchwide(q, k, v, past_keys, past_values):
    """Subtracts one maximum over the whole batch: fine unless rows differ a lot."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = (s - s.max()).exp()
    return ((e / e.sum(-1, keepdim=True)) @ values.to(ct)).to(q.dtype), keys, values


def W_18_only_last_window(q, k, v, past_keys, past_values):
    """Keeps at most 64 positions in the cache (a sliding window)."""
    keys = torch.cat([past_keys, k], dim=2)[:, :, -64:]
    values = torch.cat([past_values, v], dim=2)[:, :, -64:]
    return _attend(q, keys, values), keys, values


def W_19_first_call_ignores_past(q, k, v, past_keys, past_values):
    """Trusts past_keys only after its first call: the very first call of a session is taken as t = 0 (a prompt cached before it is ignored)."""
    if not hasattr(W_19_first_call_ignores_past, "n"):
        W_19_first_call_ignores_past.n = 0
    W_19_first_call_ignores_past.n += 1
    if W_19_first_call_ignores_past.n == 1:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_06_float16_scores_fp16_scale_after(q, k, v, past_keys, past_values):
    """Computes q @ k^T in the input dtype (float16), scales after: overflow at large scores."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = (q @ keys.transpose(-1, -2)).to(ct) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w @ values.to(ct)).to(q.dtype), keys, values


def W_21_values_from_keys(q, k, v, past_keys, past_values):
    """Right cache, but attends over keys as values when t = 0... (uses k for v at t=0)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    vals = keys if past_keys.shape[2] == 0 else values
    return _attend(q, keys, vals), keys, values


def W_22_returns_cache_views_of_buffer(q, k, v, past_keys, past_values):
    """Preallocates a 128-slot buffer per (shape, dtype) and returns views into it: the same
    buffer is overwritten by a second sequence decoded in turn."""
    b, h, t, d = past_keys.shape
    key = (b, h, d, q.dtype)
    buf = _BUF.get(key)
    if buf is None or buf[0].shape[2] < t + 1:
        buf = (torch.empty(b, h, 256, d, dtype=q.dtype), torch.empty(b, h, 256, d, dtype=q.dtype))
        _BUF[key] = buf
    with torch.no_grad():
        buf[0][:, :, :t] = past_keys
        buf[1][:, :, :t] = past_values
        buf[0][:, :, t] = k[:, :, 0]
        buf[1][:, :, t] = v[:, :, 0]
    keys, values = buf[0][:, :, :t + 1], buf[1][:, :, :t + 1]
    return _attend(q, torch.cat([past_keys, k], 2), torch.cat([past_values, v], 2)), keys, values


_BUF = {}


def O_05_t0_returns_v(q, k, v, past_keys, past_values):
    """With one key the softmax is 1: the output is v itself (returned as is)."""
    if past_keys.shape[2] == 0:
        return v, k.clone(), v.clone()
    return C_01_reference(q, k, v, past_keys, past_values)


def W_23_cache_upcast(q, k, v, past_keys, past_values):
    """Casts everything to float32 at the start and returns the float32 cache."""
    dt = q.dtype
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    q, k, v, past_keys, past_values = (x.to(ct) for x in (q, k, v, past_keys, past_values))
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values).to(dt), keys, values


def W_24_half_not_bf16(q, k, v, past_keys, past_values):
    """Casts back with .half(): a bfloat16 q gets a float16 output."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if q.dtype in _LOW:
        s = q.float() @ keys.float().transpose(-1, -2) / math.sqrt(q.shape[-1])
        return (torch.softmax(s, -1) @ values.float()).half(), keys, values
    return _attend(q, keys, values), keys, values


def W_25_output_past_detached(q, k, v, past_keys, past_values):
    """Attends over past_keys.detach(): right cache, no gradient from this output to the past."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = _attend(q, torch.cat([past_keys.detach(), k], 2), torch.cat([past_values.detach(), v], 2))
    return out, keys, values


def W_26_squeeze_q(q, k, v, past_keys, past_values):
    """q.squeeze(): right when batch is 1 (broadcasting), wrong with one head and batch > 1."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    qs = q.squeeze().to(ct)
    s = (keys.to(ct) @ qs.unsqueeze(-1)).squeeze(-1) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w.unsqueeze(-2) @ values.to(ct)).to(q.dtype), keys, values


def W_27_mean_over_heads_scale(q, k, v, past_keys, past_values):
    """Scales by sqrt(num_heads * head_size) (the model width), not sqrt(head_size)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    ct = torch.float32 if q.dtype in _LOW else q.dtype
    s = q.to(ct) @ keys.to(ct).transpose(-1, -2) / math.sqrt(q.shape[1] * q.shape[-1])
    return (torch.softmax(s, -1) @ values.to(ct)).to(q.dtype), keys, values


def W_28_bf16_raises(q, k, v, past_keys, past_values):
    """Probe: refuses bfloat16 (a learner who wrote `assert q.dtype != torch.bfloat16`)."""
    if q.dtype == torch.bfloat16:
        raise TypeError("bfloat16 not supported")
    return C_01_reference(q, k, v, past_keys, past_values)


def W_29_bf16_garbage(q, k, v, past_keys, past_values):
    """Probe: wrong (zeros) on bfloat16 only."""
    out, keys, values = C_01_reference(q, k, v, past_keys, past_values)
    if q.dtype == torch.bfloat16:
        out = torch.zeros_like(out)
    return out, keys, values


def O_07_float64_everywhere(q, k, v, past_keys, past_values):
    """Computes in float64 for every dtype, casts back to q's dtype."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.double() @ keys.double().transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values.double()).to(q.dtype), keys, values


def W_30_values_cache_prepended(q, k, v, past_keys, past_values):
    """Output right, but the returned values put the new position first."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, torch.cat([v, past_values], dim=2)


def W_31_q_detached(q, k, v, past_keys, past_values):
    """Scores from q.detach() (a learner who 'does not want to train the query')."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q.detach(), keys, values), keys, values


def W_32_new_value_detached(q, k, v, past_keys, past_values):
    """Detaches the newest value only in the output (cache keeps the graph)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, torch.cat([past_values, v.detach()], 2)), keys, values
