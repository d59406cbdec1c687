"""Round 6 red team (writer R6-C, issue 12), ch09_attention_step: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise text
alone; copied from /work/redteam/round6/C/sols/ch09_step.py with the names W01_x written
W_01_x. A_04 is accepted on purpose (the comment above its def says why). The S_ entries are
right in value and not tested: S_10 returns the argument objects k, v as the cache at t =
0 (aliasing only); S_21 rounds the weights to the input dtype before the sum and S_23
computes bfloat16 in bfloat16 (both within half-precision noise: 60-step bfloat16 error
0.066 against 0.052 for C_01). tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass).
Renamed in round 7: check_attention_step now checks that float64 inputs get float64
accuracy (exercise 9.2 says so); the entries that compute float64 in float32 are W_.
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_attention_step"


def W_25_reference_float32(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    scores = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    w = torch.softmax(scores, dim=-1)
    return (w @ values.float()).to(q.dtype), keys, values


def W_26_sdpa_no_causal_float32(q, k, v, past_keys, past_values):
    """The single newest query may see every cached key: no mask needed."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = F.scaled_dot_product_attention(q.float(), keys.float(), values.float())
    return out.to(q.dtype), keys, values


def O_03_einsum_manual_stable(q, k, v, past_keys, past_values):
    """einsum, scale folded into q, manual softmax with a detached max, float64."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.einsum("bhqd,bhkd->bhqk", q.double() / math.sqrt(q.shape[-1]), keys.double())
    s = s - s.amax(-1, keepdim=True).detach()
    e = s.exp()
    w = e / e.sum(-1, keepdim=True)
    return torch.einsum("bhqk,bhkd->bhqd", w, values.double()).to(q.dtype), keys, values


def W_01_cache_detached(q, k, v, past_keys, past_values):
    """Detaches the old cache: no gradient reaches earlier steps' keys and values."""
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return W_25_reference_float32(q, k, v, past_keys.detach(), past_values.detach())[0], keys, values


def W_02_scale_by_heads(q, k, v, past_keys, past_values):
    """Divides by sqrt(q.shape[1]) (heads) instead of sqrt(head_size)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[1])
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_03_heads_mixed_with_batch(q, k, v, past_keys, past_values):
    """Folds (batch, heads) of q with a transpose but of keys without: rows mix when
    batch > 1 and heads > 1."""
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    qf = q.transpose(0, 1).reshape(b * h, 1, d)
    kf = keys.reshape(b * h, -1, d)
    vf = values.reshape(b * h, -1, d)
    s = (qf.float() @ kf.float().transpose(-2, -1)) / math.sqrt(d)
    out = (torch.softmax(s, -1) @ vf.float()).reshape(h, b, 1, d).transpose(0, 1)
    return out.to(q.dtype), keys, values


# Accepted on purpose: softmax(q @ keys^T / sqrt(d)) taken literally, in float16. Where q . k
# passes 65,504 its output is NaN, a loud failure (the chapter's own model and the solution
# notebook compute the same way, and so do round 2's Q_fp16_scale_after and the C_ entries of
# rounds 4 and 5); the checker rejects only a finite wrong answer there (W_14, nan_to_num).
def A_04_float16_scores_unscaled_first(q, k, v, past_keys, past_values):
    """All in the input dtype; q @ k^T before the scale (float16 overflow)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values, keys, values


def W_05_cache_in_float32(q, k, v, past_keys, past_values):
    """Upcasts for stability and returns the float32 cache for float16 inputs."""
    keys = torch.cat([past_keys.float(), k.float()], dim=2)
    values = torch.cat([past_values.float(), v.float()], dim=2)
    s = (q.float() @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values).to(q.dtype), keys, values


def W_06_inplace_scale_q(q, k, v, past_keys, past_values):
    """q /= sqrt(d) in place (when q needs no grad): changes the caller's q."""
    if not q.requires_grad:
        q /= math.sqrt(q.shape[-1])
    else:
        q = q / math.sqrt(q.shape[-1])
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = q.float() @ keys.float().transpose(-2, -1)
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


_STATE = {}


def W_07_own_cache_when_shapes_match(q, k, v, past_keys, past_values):
    """Keeps its own cache keyed by (batch, heads, head_size) and ignores past_* when
    the cached length matches t (two sequences decoded in turn with equal t mix)."""
    key = (q.shape[0], q.shape[1], q.shape[-1], q.dtype)
    t = past_keys.shape[2]
    if key in _STATE and _STATE[key][0].shape[2] == t and t > 0:
        past_keys, past_values = _STATE[key]
    out, keys, values = W_25_reference_float32(q, k, v, past_keys, past_values)
    _STATE[key] = (keys, values)
    return out, keys, values


def W_08_view_fold(q, k, v, past_keys, past_values):
    """.view() to fold batch and heads: fails on non-contiguous q/k/v."""
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    qf = q.view(b * h, 1, d)
    s = (qf.float() @ keys.view(b * h, -1, d).float().transpose(-2, -1)) / math.sqrt(d)
    out = torch.softmax(s, -1) @ values.view(b * h, -1, d).float()
    return out.view(b, h, 1, d).to(q.dtype), keys, values


def W_09_sdpa_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = F.scaled_dot_product_attention(q.float(), keys.float(), values.float(),
                                         is_causal=True)
    return out.to(q.dtype), keys, values


def S_10_returns_k_v_objects_when_t0(q, k, v, past_keys, past_values):
    """At t = 0 returns k, v themselves as the cache (aliasing the arguments)."""
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_11_scale_by_keys_dim(q, k, v, past_keys, past_values):
    """sqrt(keys.shape[-2]) (t + 1) instead of sqrt(head_size)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(keys.shape[-2])
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_12_no_grad_scores(q, k, v, past_keys, past_values):
    """Weights computed under no_grad (treated as constants): no gradient to q and keys."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    with torch.no_grad():
        s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        w = torch.softmax(s, -1)
    return (w @ values.float()).to(q.dtype), keys, values


def W_13_window_last_32(q, k, v, past_keys, past_values):
    """Sliding window: attends only to the last 32 keys (right for short sequences)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    kk, vv = keys[:, :, -32:], values[:, :, -32:]
    s = (q.float() @ kk.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ vv.float()).to(q.dtype), keys, values


def W_14_nan_to_num_scores(q, k, v, past_keys, past_values):
    """Float16 scores cleaned by nan_to_num (inf -> 65504): wrong on overflowing scores."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = torch.nan_to_num(q @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s.float(), -1) @ values.float()).to(q.dtype), keys, values


def W_15_first_batch_scale_sum(q, k, v, past_keys, past_values):
    """Max subtracted over the whole tensor (not per row): underflows when rows differ."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    e = (s - s.max().detach()).exp()
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.float()).to(q.dtype), keys, values


def W_16_cache_keys_values_swapped_order(q, k, v, past_keys, past_values):
    """Prepends the new position: right output, cache in the wrong order."""
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values.float()).to(q.dtype), keys, values


def W_17_returned_cache_detached(q, k, v, past_keys, past_values):
    """Output attached, but the returned cache is detached (later steps get no gradient
    into this step's k and v)."""
    out, keys, values = W_25_reference_float32(q, k, v, past_keys, past_values)
    return out, keys.detach(), values.detach()


def W_18_squeeze_all(q, k, v, past_keys, past_values):
    """q.squeeze() instead of q.squeeze(2): breaks for batch 1, one head or head size 1."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    qs = q.squeeze().unsqueeze(-1)                       # intended (b, h, d, 1)
    s = (keys.float() @ qs.float()).squeeze(-1) / math.sqrt(q.shape[-1])   # (b, h, T)
    w = torch.softmax(s, -1).unsqueeze(-2)
    return (w @ values.float()).to(q.dtype), keys, values


def W_27_t0_shortcut_float32(q, k, v, past_keys, past_values):
    """At t = 0 the output is v (one key, weight 1)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v.clone(), keys, values
    return W_25_reference_float32(q, k, v, past_keys, past_values)


def W_20_exp_without_max(q, k, v, past_keys, past_values):
    """exp(scores) / sum in float32 without subtracting the max."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    e = s.exp()
    return ((e / e.sum(-1, keepdim=True)) @ values.float()).to(q.dtype), keys, values


def S_21_weights_rounded_to_input_dtype(q, k, v, past_keys, past_values):
    """Weights rounded to the input dtype before the sum (float16 weights of 60 keys)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1).to(q.dtype)
    return w @ values, keys, values


def W_22_squeeze_inplace_on_q(q, k, v, past_keys, past_values):
    """q.squeeze_(2): changes the shape of the caller's q (an in-place view op)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if q.requires_grad:
        qs = q.squeeze(2)
    else:
        qs = q.squeeze_(2)                                  # (b, h, d)
    s = (keys.float() @ qs.float().unsqueeze(-1)).squeeze(-1) / math.sqrt(qs.shape[-1])
    w = torch.softmax(s, -1).unsqueeze(-2)
    return (w @ values.float()).to(values.dtype), keys, values


def S_23_bf16_computed_in_bf16(q, k, v, past_keys, past_values):
    """Computes in float32 for float16 only; bfloat16 stays bfloat16 throughout."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    c = (lambda t: t.float()) if q.dtype == torch.float16 else (lambda t: t)
    s = (c(q) @ c(keys).transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ c(values)).to(q.dtype), keys, values


def W_24_float64_to_float32(q, k, v, past_keys, past_values):
    """Always computes in float32 and returns float32 unless the input is half."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.float() @ keys.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    out = torch.softmax(s, -1) @ values.float()
    return (out.to(q.dtype) if q.dtype in (torch.float16, torch.bfloat16) else out), keys, values
