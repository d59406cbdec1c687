"""Round 12 red team (writer C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/C/sols/ch09_attnstep.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
The red team's snapshot accepted W_14 and W_21 (their own cache reused under torch.no_grad()
when its shape matches past_keys) and W_23 (a cache capped at 8,192 positions); the checker now
decodes two other sequences in turn under torch.no_grad() and has a prompt of 16,400 positions:
all three rejected.
"""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_attention_step"


def _wide(dt):
    return dt if dt in (torch.float32, torch.float64) else torch.float32


def _attend(q, keys, values):
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, dim=-1) @ values.to(w)).to(q.dtype)


def C_01_reference_like(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_02_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    out = F.scaled_dot_product_attention(q.to(w), keys.to(w), values.to(w))
    return out.to(q.dtype), keys, values


def O_03_logsumexp_float64(q, k, v, past_keys, past_values):
    """Everything in float64 through logsumexp, cast back."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q.double() @ keys.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    wts = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return (wts @ values.double()).to(q.dtype), keys, values


def W_01_no_max_shift(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    e = torch.exp(q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1]))
    return ((e / e.sum(-1, keepdim=True)) @ values.to(w)).to(q.dtype), keys, values


def W_02_sliding_window_4096(q, k, v, past_keys, past_values):
    """Keeps only the last 4,096 positions in the cache (a Mistral-style window)."""
    keys = torch.cat([past_keys, k], dim=2)[:, :, -4096:]
    values = torch.cat([past_values, v], dim=2)[:, :, -4096:]
    return _attend(q, keys, values), keys, values


def W_03_sliding_window_attention_1024(q, k, v, past_keys, past_values):
    """The cache is full, but attention looks only at the last 1,024 positions."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys[:, :, -1024:], values[:, :, -1024:]), keys, values


def W_04_cache_upcast(q, k, v, past_keys, past_values):
    """Casts everything to float32 first: the returned cache is float32 for half inputs."""
    w = _wide(q.dtype)
    q, k, v, past_keys, past_values = (x.to(w) for x in (q, k, v, past_keys, past_values))
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ values
    return out.to(q.dtype), keys, values


def W_05_output_in_float32_for_half(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ values.to(w), keys, values


def W_06_scale_by_num_keys(q, k, v, past_keys, past_values):
    """Scales by sqrt(t + 1) (the number of keys) instead of sqrt(head_size)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(keys.shape[-1])
    s = s * math.sqrt(keys.shape[-1]) / math.sqrt(keys.shape[2] if keys.shape[2] > 1 else
                                                   keys.shape[-1])
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_07_one_max_for_batch(q, k, v, past_keys, past_values):
    """Subtracts one maximum for the whole batch before exp."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.max())
    return ((e / e.sum(-1, keepdim=True)) @ values.to(w)).to(q.dtype), keys, values


def W_08_past_detached(q, k, v, past_keys, past_values):
    """Detaches the old cache (thinks the past needs no gradient)."""
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return _attend(q, keys, values), keys, values


def W_09_zero_keys_as_padding(q, k, v, past_keys, past_values):
    """Masks keys that are all zeros (takes them for padding)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])
    pad = (keys == 0).all(-1)[:, :, None, :]
    s = s.masked_fill(pad & ~pad.all(-1, keepdim=True), float("-inf"))
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_10_growing_buffer(q, k, v, past_keys, past_values):
    """A global buffer that grows by doubling; returns slices (views) of it."""
    g = W_10_growing_buffer.__dict__
    t = past_keys.shape[2]
    buf = g.get("buf")
    if buf is None or buf[0].shape[:2] != k.shape[:2] or buf[0].shape[-1] != k.shape[-1] \
            or buf[0].dtype != k.dtype or g.get("t") != t or buf[0].shape[2] < t + 1:
        cap = max(2 * (t + 1), 16)
        kb = k.new_zeros(k.shape[0], k.shape[1], cap, k.shape[-1])
        vb = v.new_zeros(v.shape[0], v.shape[1], cap, v.shape[-1])
        kb[:, :, :t] = past_keys
        vb[:, :, :t] = past_values
        buf = g["buf"] = (kb, vb)
    kb, vb = buf
    if torch.is_grad_enabled() and (k.requires_grad or past_keys.requires_grad
                                    or q.requires_grad):
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
        g["buf"] = None
        return _attend(q, keys, values), keys, values
    kb[:, :, t] = k[:, :, 0]
    vb[:, :, t] = v[:, :, 0]
    g["t"] = t + 1
    keys, values = kb[:, :, :t + 1], vb[:, :, :t + 1]
    return _attend(q, keys, values), keys, values


def W_11_keys_prepended(q, k, v, past_keys, past_values):
    """The new position goes first in the cache (attention does not care, the cache does)."""
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def O_12_single_key_shortcut(q, k, v, past_keys, past_values):
    """At t = 0 the weight is 1: returns v (as a new tensor) without touching q or k."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v.clone(), keys, values
    return _attend(q, keys, values), keys, values


def W_13_scale_as_float32_tensor(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = (q.to(w) @ keys.to(w).transpose(-2, -1)) / torch.tensor(q.shape[-1] ** 0.5,
                                                                 dtype=torch.float32)
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_14_memo_on_past_length(q, k, v, past_keys, past_values):
    """Remembers the cache per (batch, heads, t): two sequences decoded in turn mix."""
    memo = W_14_memo_on_past_length.__dict__.setdefault("memo", {})
    key = (tuple(past_keys.shape), past_keys.dtype)
    if key in memo and past_keys.shape[2] > 0 and not torch.is_grad_enabled():
        pk, pv = memo[key]
    else:
        pk, pv = past_keys, past_values
    keys = torch.cat([pk, k], dim=2)
    values = torch.cat([pv, v], dim=2)
    memo[(tuple(keys.shape), keys.dtype)] = (keys, values)
    return _attend(q, keys, values), keys, values


def W_15_half_scores_clamped(q, k, v, past_keys, past_values):
    """Clamps the scores to [-30, 30] 'against overflow' before the softmax."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = (q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])).clamp(-30, 30)
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_16_batch_heads_swapped_einsum(q, k, v, past_keys, past_values):
    """Mixes up batch and heads of the cache (right when batch == heads or one is 1...
    only where the cache is symmetric)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    kk = keys.to(w).reshape(keys.shape[1], keys.shape[0], *keys.shape[2:]).transpose(0, 1)
    vv = values.to(w).reshape(values.shape[1], values.shape[0],
                              *values.shape[2:]).transpose(0, 1)
    if keys.shape[0] == 1 or keys.shape[1] == 1:
        kk, vv = keys.to(w), values.to(w)
    s = q.to(w) @ kk.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ vv).to(q.dtype), keys, values


def O_17_softmax_over_size1_dim_when_t0_one_head(q, k, v, past_keys, past_values):
    """Takes the softmax over dim=1 when there is one key (thinks it 'normalises heads')."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / math.sqrt(q.shape[-1])
    dim = 1 if keys.shape[2] == 1 and keys.shape[1] == 1 else -1
    return (torch.softmax(s, dim) @ values.to(w)).to(q.dtype), keys, values


def O_18_view_same_shape(q, k, v, past_keys, past_values):
    """Casts the new key/value to q's dtype... and the cache to k's: fine unless mixed; but
    also makes the cache contiguous by .view on a reshape of past (breaks non-contiguous)."""
    b, h, t, d = past_keys.shape
    pk = past_keys.view(b, h, t, d)
    pv = past_values.view(b, h, t, d)
    keys = torch.cat([pk, k], dim=2)
    values = torch.cat([pv, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_19_view_fold_batch_heads(q, k, v, past_keys, past_values):
    """Folds batch and heads with .view for bmm: fails on a non-contiguous cache, such as
    the GPT's split_heads output (a transpose) that a prompt leaves at the first call."""
    b, h, t, d = past_keys.shape
    pk = past_keys.view(b * h, t, d)
    pv = past_values.view(b * h, t, d)
    kk = torch.cat([pk, k.reshape(b * h, 1, d)], dim=1)
    vv = torch.cat([pv, v.reshape(b * h, 1, d)], dim=1)
    keys, values = kk.view(b, h, t + 1, d), vv.view(b, h, t + 1, d)
    return _attend(q, keys, values), keys, values


def W_20_precedence_d_pow_half(q, k, v, past_keys, past_values):
    """scores / d ** 1/2, which Python reads as (d ** 1) / 2: right for head size 4 only."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    d = q.shape[-1]
    s = q.to(w) @ keys.to(w).transpose(-2, -1) / d ** 1/2
    return (torch.softmax(s, -1) @ values.to(w)).to(q.dtype), keys, values


def W_21_memo_under_no_grad_natural(q, k, v, past_keys, past_values):
    """Under no_grad (generation) keeps its own cache and only checks its length matches:
    decoding two sequences in turn without gradients mixes them."""
    st = W_21_memo_under_no_grad_natural.__dict__
    if torch.is_grad_enabled():
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
        return _attend(q, keys, values), keys, values
    mine = st.get("cache")
    if mine is not None and mine[0].shape == past_keys.shape and past_keys.shape[2] > 0 \
            and mine[0].dtype == past_keys.dtype:
        past_keys, past_values = mine
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    st["cache"] = (keys, values)
    return _attend(q, keys, values), keys, values


def W_22_q_scaled_in_place(q, k, v, past_keys, past_values):
    """q = q.to(dtype) is q itself for float32/float64, so q /= sqrt(d) changes the caller's
    query (float16 q gets a copy and is safe)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = _wide(q.dtype)
    qq = q.to(w)
    if not qq.requires_grad or not qq.is_leaf:
        try:
            qq /= math.sqrt(q.shape[-1])
        except RuntimeError:
            qq = qq / math.sqrt(q.shape[-1])
    else:
        qq = qq / math.sqrt(q.shape[-1])
    out = torch.softmax(qq @ keys.to(w).transpose(-2, -1), -1) @ values.to(w)
    return out.to(q.dtype), keys, values


def W_23_cache_capped_8192(q, k, v, past_keys, past_values):
    """A cache capped at 8,192 positions (the model's context), oldest dropped."""
    keys = torch.cat([past_keys, k], dim=2)[:, :, -8192:]
    values = torch.cat([past_values, v], dim=2)[:, :, -8192:]
    return _attend(q, keys, values), keys, values
