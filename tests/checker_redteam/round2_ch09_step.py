"""Round 2 red team (writer R2), ch09_step: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch09_step.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import math

import torch
import torch.nn.functional as F

CHECK = "check_attention_step"


def _att(q, keys, values, scale=None):
    d = q.shape[-1]
    s = q @ keys.transpose(-1, -2) / (scale if scale is not None else math.sqrt(d))
    return torch.softmax(s, dim=-1) @ values


def C_cat(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _att(q, keys, values), keys, values


def O_sdpa_no_causal(q, k, v, past_keys, past_values):
    """The fused kernel without is_causal: one query sees every cached key (correct)."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    return F.scaled_dot_product_attention(q, keys, values), keys, values


def O_float64_einsum(q, k, v, past_keys, past_values):
    """Computes in float64 with einsum and casts back."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", q.double(), keys.double()) / math.sqrt(q.shape[-1])
    out = torch.einsum("bhqk,bhkd->bhqd", torch.softmax(s, -1), values.double())
    return out.to(q.dtype), keys, values


def W_attend_before_append(q, k, v, past_keys, past_values):
    """Attends over the past only, then appends."""
    if past_keys.shape[2] == 0:
        out = v.clone()
    else:
        out = _att(q, past_keys, past_values)
    return out, torch.cat([past_keys, k], 2), torch.cat([past_values, v], 2)


def W_scale_t(q, k, v, past_keys, past_values):
    """Scales by sqrt(t + 1), the number of keys."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values, math.sqrt(keys.shape[2])), keys, values


def W_cat_dim1(q, k, v, past_keys, past_values):
    """Concatenates along the heads axis."""
    keys = torch.cat([past_keys, k], dim=1)
    values = torch.cat([past_values, v], dim=1)
    return _att(q, keys, values), keys, values


def W_prepend(q, k, v, past_keys, past_values):
    """Puts the newest key first: outputs right, the cache in the wrong order."""
    keys = torch.cat([k, past_keys], 2)
    values = torch.cat([v, past_values], 2)
    return _att(q, keys, values), keys, values


def W_naive_softmax(q, k, v, past_keys, past_values):
    """Own softmax without max subtraction: large scores overflow."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    s = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = torch.exp(s)
    return (e / e.sum(-1, keepdim=True)) @ values, keys, values


def Q_fp16_scale_after(q, k, v, past_keys, past_values):
    """Own softmax with max subtraction, but the float16 product is formed before scaling and
    summed in float16 via elementwise multiply (may overflow for large scores)."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    s = (q * keys).sum(-1, keepdim=True).transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values, keys, values


def W_detach_cache(q, k, v, past_keys, past_values):
    """Detaches the past cache: gradients stop at each step."""
    keys = torch.cat([past_keys.detach(), k], 2)
    values = torch.cat([past_values.detach(), v], 2)
    return _att(q, keys, values), keys, values


def W_is_causal(q, k, v, past_keys, past_values):
    """is_causal=True with one query: top-left aligned, sees only the first key."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def W_softmax_dim_minus2(q, k, v, past_keys, past_values):
    """Softmax over the (size-1) queries axis: all weights 1."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    s = q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -2) @ values, keys, values


def W_values_not_extended(q, k, v, past_keys, past_values):
    """Returns the old values cache."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values), keys, past_values


def W_scale_d(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values, q.shape[-1]), keys, values


def W_float32_out(q, k, v, past_keys, past_values):
    """Upcasts and forgets to cast back."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q.float(), keys.float(), values.float()), keys, values


def W_keys_values_swapped(q, k, v, past_keys, past_values):
    """Attends with the values as keys (same shapes)."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, values, keys), keys, values


def W_window_8(q, k, v, past_keys, past_values):
    """Keeps only the last 8 positions in the cache (a sliding window): right for short runs."""
    keys = torch.cat([past_keys, k], 2)[:, :, -8:]
    values = torch.cat([past_values, v], 2)[:, :, -8:]
    return _att(q, keys, values), keys, values


def W_head_size_from_heads(q, k, v, past_keys, past_values):
    """Scales by sqrt(q.shape[1]) (heads), right when heads == head_size."""
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values, math.sqrt(q.shape[1])), keys, values


def W_detach_new(q, k, v, past_keys, past_values):
    """Stores detached copies of the new key and value in the cache (to save memory)."""
    keys = torch.cat([past_keys, k.detach()], 2)
    values = torch.cat([past_values, v.detach()], 2)
    return _att(q, keys, values), keys, values


def W_inplace_scale_q(q, k, v, past_keys, past_values):
    """q /= sqrt(d) in place when it does not require grad."""
    if not q.requires_grad:
        q /= math.sqrt(q.shape[-1])
    else:
        q = q / math.sqrt(q.shape[-1])
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values, 1.0), keys, values


def Q_inplace_past_noop(q, k, v, past_keys, past_values):
    """Scales the new key in place by 1/sqrt(d) before caching it (when no grad): the returned
    cache then holds scaled keys; later steps rescale... (wrong cache content)."""
    if not k.requires_grad:
        k.mul_(1.0)  # a no-op in value, but an in-place write on the argument
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values), keys, values


def W_inplace_k_scaled(q, k, v, past_keys, past_values):
    """Pre-scales the new key in place by 1/sqrt(d) and attends without scale (when no grad):
    outputs right, but the caller's k and the returned cache hold scaled keys."""
    if not k.requires_grad:
        k /= math.sqrt(k.shape[-1])
        keys = torch.cat([past_keys, k], 2)
        values = torch.cat([past_values, v], 2)
        # past keys were scaled too at earlier steps (cache holds scaled keys)
        return _att(q, keys, values, 1.0), keys, values
    keys = torch.cat([past_keys, k], 2)
    values = torch.cat([past_values, v], 2)
    return _att(q, keys, values), keys, values
