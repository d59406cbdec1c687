"""Round 14 red team (writer E, issue 12), ch09_attention_step: check_attention_step; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round14/E/sols/ch09_attention_step.py (writer's note: Round 14, writer E, check_attention_step: one decoding step with a KV cache.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_13 (bfloat16 q, k, v cast to float16 on the way):
check_attention_step's bfloat16 case beyond float16's range now has values up to about
110,000 too (exact in bfloat16): the output is -inf, rejected. W_14/W_15/W_25 (grad mode,
manual_seed) are _core's. W_27 -> A_27 (bfloat16-rounded weights for float16: 2-7x a native
float16 step's error, no clear case).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F
CHECK = "check_attention_step"


def _wide(q):
    return torch.promote_types(q.dtype, torch.float32)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    out = torch.softmax(s, dim=-1) @ values.to(w)
    return out.to(q.dtype), keys, values


def C_02_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    out = F.scaled_dot_product_attention(q.to(w), keys.to(w), values.to(w))
    return out.to(q.dtype), keys, values


def O_03_manual_shift_no_grad_max(q, k, v, past_keys, past_values):
    """Max for the shift computed under no_grad (its gradient cancels anyway)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = (q.to(w) * keys.to(w)).sum(-1) / math.sqrt(q.shape[-1])      # (b, h, t+1)
    with torch.no_grad():
        m = s.max(dim=-1, keepdim=True).values
    e = torch.exp(s - m)
    a = e / e.sum(-1, keepdim=True)
    out = (a.unsqueeze(-1) * values.to(w)).sum(-2, keepdim=True)
    return out.to(q.dtype), keys, values


def O_04_default_dtype_set_and_restored(q, k, v, past_keys, past_values):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        scale = torch.tensor(q.shape[-1]).rsqrt()       # float64 under the new default
    finally:
        torch.set_default_dtype(old)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2)) * scale.item()
    out = torch.softmax(s, dim=-1) @ values.to(w)
    return out.to(q.dtype), keys, values


def O_05_inference_mode_for_shift_then_clone(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    with torch.inference_mode():
        m = s.amax(-1, keepdim=True)
    m = m.clone()
    e = (s - m).exp()
    out = (e / e.sum(-1, keepdim=True)) @ values.to(w)
    return out.to(q.dtype), keys, values


def O_06_online_softmax_loop_chunks(q, k, v, past_keys, past_values):
    """Flash-style online softmax over chunks of 37 keys (exact up to rounding)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    qq = q.to(w) / math.sqrt(q.shape[-1])
    m = None
    for i in range(0, keys.shape[2], 37):
        s = qq @ keys[:, :, i:i + 37].to(w).transpose(-1, -2)
        cm = s.amax(-1, keepdim=True)
        if m is None:
            m, l, acc = cm, torch.zeros_like(cm), torch.zeros_like(qq[..., :values.shape[-1]])
        new_m = torch.maximum(m, cm)
        l = l * torch.exp(m - new_m) + torch.exp(s - new_m).sum(-1, keepdim=True)
        acc = acc * torch.exp(m - new_m) + torch.exp(s - new_m) @ values[:, :, i:i + 37].to(w)
        m = new_m
    return (acc / l).to(q.dtype), keys, values


# ----------------------------------------------------------------------------- wrong

def W_10_global_max_shift(q, k, v, past_keys, past_values):
    """Max shift over the whole tensor (all batches/heads), not per row: a head whose scores
    are ~100 below another head's underflows to 0/0 = NaN in float32."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.max())
    out = (e / e.sum(-1, keepdim=True)) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_11_shift_by_newest_score(q, k, v, past_keys, past_values):
    """Shifts by the newest key's score instead of the row max: an earlier key scoring
    ~100 above the newest overflows exp to inf -> NaN (float32)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s[..., -1:])
    out = (e / e.sum(-1, keepdim=True)) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_12_shift_by_head_max(q, k, v, past_keys, past_values):
    """Max shift per batch element over all heads (amax over dims 1 and -1): heads whose
    scores differ by > ~100 underflow to NaN."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.amax(dim=(1, 2, 3), keepdim=True))
    out = (e / e.sum(-1, keepdim=True)) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_13_bf16_via_float16(q, k, v, past_keys, past_values):
    """bfloat16 inputs computed in float16: values/keys beyond 65504 become inf."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = torch.float16 if q.dtype == torch.bfloat16 else _wide(q)
    if w == torch.float16 and q.dtype == torch.bfloat16:
        s = (q.to(w).float() @ keys.to(w).float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
        out = torch.softmax(s, -1) @ values.to(w).float()
    else:
        s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
        out = torch.softmax(s, -1) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_14_grad_mode_leak(q, k, v, past_keys, past_values):
    """Builds the cache with grad off via set_grad_enabled(False) ... set_grad_enabled(True):
    leaves grad mode ON inside the caller's torch.no_grad() block."""
    torch.set_grad_enabled(False)
    with torch.enable_grad():
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
        w = _wide(q)
        s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
        out = torch.softmax(s, dim=-1) @ values.to(w)
    torch.set_grad_enabled(True)
    return out.to(q.dtype), keys, values


def W_15_manual_seed_reset(q, k, v, past_keys, past_values):
    """Calls torch.manual_seed(1234) 'for reproducibility': resets the caller's global generator
    (a deterministic function that changes the global RNG without drawing)."""
    torch.manual_seed(1234)
    return C_01_reference(q, k, v, past_keys, past_values)


def A_16_cached_scale_tensor_inference(q, k, v, past_keys, past_values):
    """Scale tensor made once under inference_mode and cached; multiplied into a grad path:
    backward fails ('Inference tensors cannot be saved for backward') only when q requires grad."""
    global _SCALE
    d = q.shape[-1]
    if _SCALE.get((d, q.dtype)) is None:
        with torch.inference_mode():
            _SCALE[(d, q.dtype)] = torch.tensor(1 / math.sqrt(d), dtype=_wide(q))
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = (q.to(w) @ keys.to(w).transpose(-1, -2))
    s = s * _SCALE[(d, q.dtype)].expand_as(s).clone() if not torch.is_inference_mode_enabled() else s * _SCALE[(d, q.dtype)]
    out = torch.softmax(s, dim=-1) @ values.to(w)
    return out.to(q.dtype), keys, values


_SCALE = {}


def W_17_detach_values_beyond_t_when_long(q, k, v, past_keys, past_values):
    """Gradient cut for past values only (keys keep it): grad never reaches past_values."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    vv = torch.cat([past_values.detach(), v], dim=2)
    out = torch.softmax(s, -1) @ vv.to(w)
    return out.to(q.dtype), keys, values


def W_18_scale_from_head_count(q, k, v, past_keys, past_values):
    """Scales by sqrt(heads * head_size) (the model width) instead of sqrt(head_size)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1] * q.shape[1])
    out = torch.softmax(s, -1) @ values.to(w)
    return out.to(q.dtype), keys, values


def A_19_float16_accumulate_weights_over_long_cache(q, k, v, past_keys, past_values):
    """float16: weights rounded to float16 then summed with a float16 running cumsum over
    positions (sequential accumulation in float16 over thousands of positions)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1)
    if q.dtype == torch.float16:
        prod = (a.transpose(-1, -2) * values.to(w)).half()      # (b, h, t+1, d)
        out = prod.cumsum(-2, dtype=torch.float16)[..., -1:, :]
    else:
        out = a @ values.to(w)
    return out.to(q.dtype), keys, values


def W_20_sdpa_is_causal(q, k, v, past_keys, past_values):
    """SDPA with is_causal=True: a 1-query causal mask is top-left aligned, sees key 0 only."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    out = F.scaled_dot_product_attention(q.to(w), keys.to(w), values.to(w), is_causal=True)
    return out.to(q.dtype), keys, values


def W_21_keys_in_wide_dtype(q, k, v, past_keys, past_values):
    """Returns the cache in float32 for float16/bfloat16 inputs (the cache doubles in size and
    changes dtype)."""
    w = _wide(q)
    keys = torch.cat([past_keys.to(w), k.to(w)], dim=2)
    values = torch.cat([past_values.to(w), v.to(w)], dim=2)
    s = q.to(w) @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    out = torch.softmax(s, -1) @ values
    return out.to(q.dtype), keys, values


def W_22_grad_identity_on_q(q, k, v, past_keys, past_values):
    """Forward right, but q's gradient passes through a straight-through trick on the
    scores (s.detach() + (q*k_new)...): the gradient w.r.t. q only sees the newest key."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s_full = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    s_new = q.to(w) @ k.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = torch.cat([s_full[..., :-1].detach() + (q.detach().to(w) @ past_keys.to(w).transpose(-1, -2)
                    / math.sqrt(q.shape[-1]) - (q.detach().to(w) @ past_keys.to(w).transpose(-1, -2)
                    / math.sqrt(q.shape[-1])).detach()), s_new], -1)
    out = torch.softmax(s, -1) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_23_squeeze_all(q, k, v, past_keys, past_values):
    """squeeze() drops batch/head dims of size 1 too: wrong broadcasting when batch == 1 and
    heads > 1 with t+1 == heads ... (crashes or mixes heads on shapes with 1s)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    qs = q.to(w).squeeze()                    # (b, h, d) or fewer
    ks = keys.to(w).squeeze()
    s = (qs.unsqueeze(-2) * ks).sum(-1) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1)
    out = (a.unsqueeze(-1) * values.to(w).squeeze()).sum(-2)
    return out.reshape(q.shape).to(q.dtype), keys, values


def W_24_float64_to_float32(q, k, v, past_keys, past_values):
    """Scores in float64 but softmax weights rounded to float32 before the value product."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1).float().to(w)
    out = a @ values.to(w)
    return out.to(q.dtype), keys, values


def W_25_grad_enabled_when_caller_in_inference(q, k, v, past_keys, past_values):
    """Leaves torch.set_grad_enabled(True) after the call: turns grad on in a caller's
    no_grad block (checks: is_grad_enabled inside no_grad after the call)."""
    prev = torch.is_grad_enabled()
    res = C_01_reference(q, k, v, past_keys, past_values)
    if not prev and not torch.is_inference_mode_enabled():
        torch.set_grad_enabled(True)
    return res




def A_27_softmax_dtype_half_for_bf16(q, k, v, past_keys, past_values):
    """Accepted (fixer, round 14; for the lead's ruling): for float16 inputs the weights rounded to bfloat16 are only 2-7x worse than a native float16 step (ruled right): batch 2, 2 heads, head size 4, 8 steps, values x 10, 8 seeds: native float16 0.006-0.022 max error, float32 0.004-0.007, this 0.027-0.067; no case separates them clearly (scores are float32 here, so close scores near 100 do not show it). bfloat16: softmax computed in float32 but the weights rounded to bfloat16 before the
    value product over thousands of positions (each weight ~ 2^-8 relative error)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q)
    s = q.to(w) @ keys.to(w).transpose(-1, -2) / math.sqrt(q.shape[-1])
    a = torch.softmax(s, -1)
    if q.dtype in (torch.bfloat16, torch.float16):
        a = a.to(torch.bfloat16).to(w)
    out = a @ values.to(w)
    return out.to(q.dtype), keys, values
