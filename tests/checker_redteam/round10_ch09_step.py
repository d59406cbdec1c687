"""Round 10 red team (writer C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd
but right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/C/sols/ch09_step.py with the names W01_x written W_01_x.
W_17 (the cache and attention built under torch.set_grad_enabled(q.requires_grad)) passed in
round 10, before the gradient case where q needs no gradient and the keys and values do.
W_16 (blocks of 512 keys, running output not rescaled) was told about a stale cache; it is
now told that its step, given the whole cache, is right on short caches and wrong on long
ones.
A_10 and A_15 (q / sqrt(d), or the weights, rounded to the half dtype) are accepted on
purpose: exercise 9.2 allows computing in the input's dtype. S_01 (everything in the half
dtype, max subtracted) passes too; S_ are not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_attention_step"
import math
import torch
from torch.nn import functional as F


def _attend(q, keys, values):
    dt = q.dtype
    cdt = torch.float32 if dt in (torch.float16, torch.bfloat16) else dt
    s = q.to(cdt) @ keys.to(cdt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=-1)
    return (w @ values.to(cdt)).to(dt)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_02_first_step_shortcut(q, k, v, past_keys, past_values):
    # t = 0: the softmax over one key is 1, so the output is v
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v.clone() + 0 * (q * k).sum(-1, keepdim=True), keys, values
    return _attend(q, keys, values), keys, values


def O_03_logsumexp_float64_einsum(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = torch.einsum("bhqd,bhkd->bhqk", q.to(cdt), keys.to(cdt)) * q.shape[-1] ** -0.5
    w = (s - torch.logsumexp(s, -1, keepdim=True)).exp()
    return torch.einsum("bhqk,bhkd->bhqd", w, values.to(cdt)).to(q.dtype), keys, values


def W_01_max_over_heads(q, k, v, past_keys, past_values):
    # one maximum per example (over heads and keys): a head with small scores underflows
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(cdt) @ keys.to(cdt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    m = s.amax(dim=(1, 3), keepdim=True)
    e = (s - m).exp()
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.to(cdt)).to(q.dtype), keys, values


def W_02_max_of_past_only(q, k, v, past_keys, past_values):
    # shift by the max over the past scores only (0 at t = 0): the new key can overflow
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    sc = 1 / math.sqrt(q.shape[-1])
    sp = q.to(cdt) @ past_keys.to(cdt).transpose(-1, -2) * sc
    sn = (q.to(cdt) * k.to(cdt)).sum(-1, keepdim=True) * sc
    m = sp.amax(-1, keepdim=True) if sp.shape[-1] else torch.zeros_like(sn)
    e = torch.cat([(sp - m).exp(), (sn - m).exp()], dim=-1)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.to(cdt)).to(q.dtype), keys, values


def W_03_past_detached(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys.detach(), k], dim=2)
    values = torch.cat([past_values.detach(), v], dim=2)
    return _attend(q, keys, values), keys, values


def W_04_squeeze_all(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    qs = q.squeeze().to(cdt)                       # (b, h, d) ... or less
    s = torch.einsum("...d,...kd->...k", qs, keys.squeeze().to(cdt)) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    out = torch.einsum("...k,...kd->...d", w, values.squeeze().to(cdt))
    return out.reshape(q.shape).to(q.dtype), keys, values


def W_05_bmm_wrong_fold(q, k, v, past_keys, past_values):
    # folds (b, h) into one dim with view, unfolds with the order swapped
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    T = keys.shape[2]
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    qq = q.reshape(b * h, 1, d).to(cdt)
    kk = keys.reshape(b * h, T, d).to(cdt)
    vv = values.reshape(b * h, T, d).to(cdt)
    w = torch.softmax(torch.bmm(qq, kk.transpose(1, 2)) / math.sqrt(d), -1)
    out = torch.bmm(w, vv).reshape(h, b, 1, d).transpose(0, 1)
    return out.to(q.dtype), keys, values


def W_06_scale_by_sqrt_model_dim(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    d_model = q.shape[1] * q.shape[-1]
    s = q.to(cdt) @ keys.to(cdt).transpose(-1, -2) / math.sqrt(d_model)
    return (torch.softmax(s, -1) @ values.to(cdt)).to(q.dtype), keys, values


def W_07_inplace_exp_div(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(cdt) @ keys.to(cdt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = s - s.amax(-1, keepdim=True)
    w = s.exp_()
    w /= w.sum(-1, keepdim=True)
    return (w @ values.to(cdt)).to(q.dtype), keys, values


def W_08_cache_in_compute_dtype(q, k, v, past_keys, past_values):
    # casts the cache to float32 for half inputs and returns it that way
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    keys = torch.cat([past_keys.to(cdt), k.to(cdt)], dim=2)
    values = torch.cat([past_values.to(cdt), v.to(cdt)], dim=2)
    s = q.to(cdt) @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return (torch.softmax(s, -1) @ values).to(q.dtype), keys, values


def W_09_window_1024(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys[:, :, -1024:], values[:, :, -1024:]), keys, values


# Accepted on purpose: q / sqrt(d) rounded to the half dtype before the upcast; exercise 9.2
# allows computing in q's dtype ("computed in that dtype, or in float32"), and this is within
# the half-precision tolerance.
def A_10_scale_folded_into_q_half(q, k, v, past_keys, past_values):
    # scales q in its own dtype before upcasting (bfloat16 rounding of q / sqrt(d))
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    qs = q / math.sqrt(q.shape[-1])
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = qs.to(cdt) @ keys.to(cdt).transpose(-1, -2)
    return (torch.softmax(s, -1) @ values.to(cdt)).to(q.dtype), keys, values


def W_11_keys_from_past_values(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    out = _attend(q, keys, values)
    return out, keys, torch.cat([past_values, v.detach()], dim=2)


def W_12_sdpa_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return F.scaled_dot_product_attention(q, keys, values, is_causal=True), keys, values


def W_13_cache_reversed_order(q, k, v, past_keys, past_values):
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def W_14_float16_scores_then_float32(q, k, v, past_keys, past_values):
    # scores matmul in the input dtype, softmax in float32 (bf16 scores lose precision)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q @ keys.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w @ values.float()).to(q.dtype), keys, values


# Accepted on purpose: the weights cast to the half dtype before @ values; the text allows the
# computation in q's dtype (as S_01 does entirely).
def A_15_weights_to_half_before_v(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    s = q.to(cdt) @ keys.to(cdt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1).to(q.dtype)
    return w @ values, keys, values


def O_04_first_step_returns_v(q, k, v, past_keys, past_values):
    # t = 0: output is v exactly (no graph to q or k: their gradient there is zero)
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if past_keys.shape[2] == 0:
        return v.clone(), keys, values
    return _attend(q, keys, values), keys, values


def S_01_all_in_half_with_shift(q, k, v, past_keys, past_values):
    # everything in the input dtype (the text allows it), max subtracted
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    s = (q / math.sqrt(q.shape[-1])) @ keys.transpose(-1, -2)
    e = (s - s.amax(-1, keepdim=True)).exp()
    return (e / e.sum(-1, keepdim=True)) @ values, keys, values


def W_16_online_blocks_no_rescale(q, k, v, past_keys, past_values):
    # flash-decoding over blocks of 512 keys, forgetting to rescale the running output
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    cdt = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    qq = q.to(cdt) / math.sqrt(q.shape[-1])
    m = l = acc = None
    for i in range(0, keys.shape[2], 512):
        s = qq @ keys[:, :, i:i + 512].to(cdt).transpose(-1, -2)
        bm = s.amax(-1, keepdim=True)
        if m is None:
            m = bm
            e = (s - m).exp()
            l, acc = e.sum(-1, keepdim=True), e @ values[:, :, i:i + 512].to(cdt)
        else:
            mn = torch.maximum(m, bm)
            e = (s - mn).exp()
            l = l * (m - mn).exp() + e.sum(-1, keepdim=True)
            acc = acc + e @ values[:, :, i:i + 512].to(cdt)   # missing * exp(m - mn)
            m = mn
    return (acc / l).to(q.dtype), keys, values


def W_17_no_grad_when_not_required(q, k, v, past_keys, past_values):
    # "inference only": builds the cache under no_grad unless q requires grad
    with torch.set_grad_enabled(q.requires_grad):
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values
