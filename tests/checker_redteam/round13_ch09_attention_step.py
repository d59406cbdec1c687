"""Round 13 red team (writer E, issue 12), ch09_attention_step: check_attention_step; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_attention_step.py (writer's note: right and wrong KV-cache decoding steps.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_06 (cached positions more than 2,048 back
detached), W_18 (a token whose k and v equal the last cached ones not appended) and W_15
(a no_grad cache of its own keyed on shape, dtype and first key). check_attention_step now
runs backward() over a prompt of 4,099 positions (one head of size 2), decodes a sequence in
which a token repeats, and decodes its two no_grad sequences with a shared first position:
all three rejected.
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F
CHECK = "check_attention_step"


def _wide(q):
    return torch.promote_types(q.dtype, torch.float32)


def _attend(q, keys, values, scale=None):
    w = _wide(q)
    d = q.shape[-1]
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(d)
    a = torch.softmax(s, dim=-1)
    return (a @ values.to(w)).to(q.dtype)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    return _attend(q, keys, values), keys, values


def C_02_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    out = F.scaled_dot_product_attention(q.to(w), keys.to(w), values.to(w))
    return out.to(q.dtype), keys, values


def O_03_first_step_is_v(q, k, v, past_keys, past_values):
    """At t = 0 the only key gets weight 1: output = v (the gradient to q and k is 0,
    which is the true gradient of a softmax over one entry)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    if past_keys.shape[-2] == 0:
        return v.clone() + 0 * (q * k).sum(-1, keepdim=True), keys, values
    return _attend(q, keys, values), keys, values


def W_04_softmax_denominator_detached(q, k, v, past_keys, past_values):
    """exp(s - max) / sum(...).detach(): the right output, but the gradient of the scores
    misses the -a * (a . g) term (any backward with a non-constant upstream gradient)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(-1, keepdim=True).detach())
    a = e / e.sum(-1, keepdim=True).detach()
    return (a @ values.to(w)).to(q.dtype), keys, values


def W_05_grad_window(q, k, v, past_keys, past_values):
    """Truncated backprop: cached positions more than 32 back are detached; the gradient
    does not reach position 0 of a 60-step decode."""
    t = past_keys.shape[-2]
    cut = max(t - 32, 0)
    pk = torch.cat([past_keys[..., :cut, :].detach(), past_keys[..., cut:, :]], -2)
    pv = torch.cat([past_values[..., :cut, :].detach(), past_values[..., cut:, :]], -2)
    keys = torch.cat([pk, k], dim=-2)
    values = torch.cat([pv, v], dim=-2)
    return _attend(q, keys, values), keys, values


def W_06_grad_window_2048(q, k, v, past_keys, past_values):
    """Like W_05 with a 2048-position gradient window: a prompt of thousands of positions
    gets no gradient at its first positions."""
    t = past_keys.shape[-2]
    cut = max(t - 2048, 0)
    pk = torch.cat([past_keys[..., :cut, :].detach(), past_keys[..., cut:, :]], -2)
    pv = torch.cat([past_values[..., :cut, :].detach(), past_values[..., cut:, :]], -2)
    keys = torch.cat([pk, k], dim=-2)
    values = torch.cat([pv, v], dim=-2)
    return _attend(q, keys, values), keys, values


def W_07_sliding_window_16384(q, k, v, past_keys, past_values):
    """Attends to the last 16384 keys only (a sliding window): wrong for t >= 16384."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    return _attend(q, keys[..., -16384:, :], values[..., -16384:, :]), keys, values


def W_08_softcap_50(q, k, v, past_keys, past_values):
    """Gemma-style soft-capping of the scores, 50 * tanh(s / 50): scores of 20 become 18.9."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = 50 * torch.tanh(s / 50)
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_09_clamp_scores_1e3(q, k, v, past_keys, past_values):
    """Clamps the scores to [-1000, 1000] 'against overflow': two keys with scores 1500 and
    1200 tie at 1000 and get 0.5 each instead of 1 and 0."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.clamp(-1000, 1000)
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_10_bf16_scores_in_fp16(q, k, v, past_keys, past_values):
    """Half precision means float16: bfloat16 q and keys are multiplied in float16 (scores
    above 65504, or q/k entries beyond float16's range, become inf -> NaN)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    if q.dtype == torch.bfloat16:
        s = (q.half() @ keys.half().transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
        a = torch.softmax(s, -1)
        return (a @ values.float()).to(q.dtype), keys, values
    return _attend(q, keys, values), keys, values


def W_11_cache_upcast(q, k, v, past_keys, past_values):
    """Returns the cache in float32 for float16/bfloat16 inputs (the next step then gets a
    float32 cache and a float16 q; the cache doubles in size)."""
    w = _wide(q)
    keys = torch.cat([past_keys.to(w), k.to(w)], dim=-2)
    values = torch.cat([past_values.to(w), v.to(w)], dim=-2)
    s = (q.to(w) @ keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values).to(q.dtype), keys, values


def W_12_scale_from_keys_dim_minus2(q, k, v, past_keys, past_values):
    """Scale 1/sqrt(size of the last dim of the transposed keys) = 1/sqrt(t+1): wrong
    whenever t + 1 != head_size."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    kt = keys.to(w).transpose(-1, -2)
    s = (q.to(w) @ kt) / math.sqrt(kt.shape[-1])
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_13_new_key_detached(q, k, v, past_keys, past_values):
    """Detaches only the newest key in the scores ('it is the one we just computed'): its
    gradient reaches values but not keys; k.grad is missing the score path."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    sk = torch.cat([past_keys, k.detach()], dim=-2)
    return _attend(q, sk, values), keys, values


def W_14_online_float16_max_from_new(q, k, v, past_keys, past_values):
    """Shifts the exponent by the newest key's score instead of the maximum: past scores
    well above the newest one overflow exp (float32: scores 100 above)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s[..., -1:])
    a = e / e.sum(-1, keepdim=True)
    return (a @ values.to(w)).to(q.dtype), keys, values


_STATE = {}


def W_15_cache_keyed_on_shape_and_first(q, k, v, past_keys, past_values):
    """Keeps its own running cache keyed on (shape, first cached key value) to avoid the
    cat: two continuations of the same cache (same shape, same first key) collide."""
    t = past_keys.shape[-2]
    key = (tuple(past_keys.shape), past_keys.dtype,
           float(past_keys.flatten()[0]) if t else None)
    if torch.is_grad_enabled() or t == 0 or key not in _STATE:
        keys = torch.cat([past_keys, k], dim=-2)
        values = torch.cat([past_values, v], dim=-2)
    else:
        pk, pv = _STATE[key]
        keys = torch.cat([pk, k], dim=-2)
        values = torch.cat([pv, v], dim=-2)
    if not torch.is_grad_enabled():
        _STATE[key] = (past_keys, past_values)
    return _attend(q, keys, values), keys, values


def W_16_float64_weights_float32(q, k, v, past_keys, past_values):
    """float64 scores but the softmax weights cast to float32 before @ values: float64 q
    loses float64 accuracy (1e-8 relative instead of 1e-16)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1).float()
    return (a @ values.float()).to(q.dtype), keys, values


def A_17_scale_in_bf16(q, k, v, past_keys, past_values):
    """Scales q by 1/sqrt(d) in the input dtype (bfloat16 rounds 1/sqrt(d) and q/sqrt(d)
    to 8 bits), then float32: the output of bfloat16 differs by 0.4% of the score."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    qs = q * (q.shape[-1] ** -0.5)
    s = qs.float() @ keys.float().transpose(-1, -2) if q.dtype != torch.float64 else \
        qs @ keys.transpose(-1, -2)
    a = torch.softmax(s, -1)
    return (a @ values.to(a.dtype)).to(q.dtype), keys, values


def W_18_dedup_identical_keys(q, k, v, past_keys, past_values):
    """Skips appending a key identical to the previous one ('repeated token, nothing new'):
    zero keys and values at every step keep a cache of length 1."""
    t = past_keys.shape[-2]
    if t and torch.equal(past_keys[..., -1:, :], k) and torch.equal(past_values[..., -1:, :], v):
        keys, values = past_keys.clone(), past_values.clone()
    else:
        keys = torch.cat([past_keys, k], dim=-2)
        values = torch.cat([past_values, v], dim=-2)
    return _attend(q, keys, values), keys, values


def A_19_denominator_in_input_dtype(q, k, v, past_keys, past_values):
    """Averages the values with the weights over t + 1 then multiplies by (t+1)/(t+1)...
    actually divides the output by the weights' sum computed in float16 for float16 q."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(-1, keepdim=True))
    num = e @ values.to(w)
    den = e.sum(-1, keepdim=True).to(q.dtype).to(w)
    return (num / den).to(q.dtype), keys, values


def W_20_max_over_heads(q, k, v, past_keys, past_values):
    """Shifts the scores by the maximum over all heads and the batch (one scalar): a head
    whose scores are 200 below another's underflows to 0/0 = NaN."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.max())
    a = e / e.sum(-1, keepdim=True)
    return (a @ values.to(w)).to(q.dtype), keys, values
