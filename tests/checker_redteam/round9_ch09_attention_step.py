"""Round 9 red team (writer C, issue 12), ch09_attention_step: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/C/sols/ch09_kvstep.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). W_01 (a sliding window of 256), W_21 (bfloat16
computed in float16) and W_22 (the cache a prefix view of a buffer written in place under
no_grad) passed in round 9, before the 4,200-position prompt, the bfloat16 case beyond
float16's range and the fork under torch.no_grad(). S_01 (q @ K^T in the input dtype, then
the softmax in float32) is accepted (round 8's ruling); S_ are not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_attention_step"


def _cdt(q):
    return torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype


def _attend(q, keys, values):
    dt = _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=-1)
    return (w @ values.to(dt)).to(q.dtype)


def C_01_reference(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def O_01_sdpa_no_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    out = F.scaled_dot_product_attention(q.to(dt), keys.to(dt), values.to(dt))
    return out.to(q.dtype), keys, values


def O_02_elementwise(q, k, v, past_keys, past_values):
    """Broadcast products and sums instead of matmul, max subtracted by hand."""
    keys = torch.cat([past_keys, k], dim=-2)
    values = torch.cat([past_values, v], dim=-2)
    dt = _cdt(q)
    s = (q.to(dt) * keys.to(dt)).sum(-1) * q.shape[-1] ** -0.5       # (b, h, t+1)
    s = s - s.amax(-1, keepdim=True).detach()
    e = s.exp()
    w = e / e.sum(-1, keepdim=True)
    out = (w[..., None] * values.to(dt)).sum(-2, keepdim=True)
    return out.to(q.dtype), keys, values


def O_03_first_step_shortcut(q, k, v, past_keys, past_values):
    """At t = 0 the output is v itself (one key: weight 1)."""
    if past_keys.shape[2] == 0:
        return v.clone(), k.clone(), v.clone()
    return C_01_reference(q, k, v, past_keys, past_values)


def W_01_sliding_window_256(q, k, v, past_keys, past_values):
    """Keeps only the last 256 positions in the cache (text: every position, however many)."""
    keys = torch.cat([past_keys, k], dim=2)[:, :, -256:]
    values = torch.cat([past_values, v], dim=2)[:, :, -256:]
    return _attend(q, keys, values), keys, values


def W_02_cache_upcast(q, k, v, past_keys, past_values):
    """The cache is returned in float32 for float16/bfloat16 inputs."""
    dt = _cdt(q)
    keys = torch.cat([past_keys.to(dt), k.to(dt)], dim=2)
    values = torch.cat([past_values.to(dt), v.to(dt)], dim=2)
    return _attend(q, keys, values), keys, values


def W_03_cache_detached(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2).detach()
    values = torch.cat([past_values, v], dim=2).detach()
    return _attend(q, keys, values), keys, values


def W_04_global_max(q, k, v, past_keys, past_values):
    """exp(s - max over all batch and heads): a head far below underflows to 0/0."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.max())
    w = e / e.sum(-1, keepdim=True)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_05_inplace_softmax(q, k, v, past_keys, past_values):
    """exp_ and /= in place: breaks backward."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2)
    s /= math.sqrt(q.shape[-1])
    w = (s - s.amax(-1, keepdim=True)).exp_()
    w /= w.sum(-1, keepdim=True)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_06_sdpa_is_causal(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    out = F.scaled_dot_product_attention(q.to(dt), keys.to(dt), values.to(dt),
                                         is_causal=True)
    return out.to(q.dtype), keys, values


def W_07_cache_newest_first(q, k, v, past_keys, past_values):
    """Prepends the new position: the same output, the cache in the wrong order."""
    keys = torch.cat([k, past_keys], dim=2)
    values = torch.cat([v, past_values], dim=2)
    return _attend(q, keys, values), keys, values


def W_08_no_scale(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    w = torch.softmax(q.to(dt) @ keys.to(dt).transpose(-1, -2), -1)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_09_output_not_cast_back(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    w = torch.softmax(q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1]), -1)
    return w @ values.to(dt), keys, values


def W_10_scale_by_num_heads(q, k, v, past_keys, past_values):
    """sqrt(d) taken from the wrong axis: q.shape[1] (heads)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    w = torch.softmax(q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[1]), -1)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_11_no_max_subtraction(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    e = torch.exp(q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1]))
    return ((e / e.sum(-1, keepdim=True)) @ values.to(dt)).to(q.dtype), keys, values


_BUF = {}


def W_12_shared_buffer(q, k, v, past_keys, past_values):
    """A growing buffer per (shape, dtype): the cache returned is a view into it, so two
    sequences of the same shape overwrite each other; ignores past_keys when cached."""
    b, h, t, d = past_keys.shape
    key = (b, h, d, q.dtype)
    buf = _BUF.get(key)
    if buf is None or t == 0 or buf[2] != t:
        K = torch.empty(b, h, 4096, d, dtype=k.dtype)
        V = torch.empty(b, h, 4096, d, dtype=v.dtype)
        with torch.no_grad():
            K[:, :, :t] = past_keys
            V[:, :, :t] = past_values
        buf = [K, V, t]
    K, V, _ = buf
    with torch.no_grad():
        K[:, :, t] = k[:, :, 0]
        V[:, :, t] = v[:, :, 0]
    buf[2] = t + 1
    _BUF[key] = buf
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, K[:, :, :t + 1], V[:, :, :t + 1]), keys, values


def O_04_half_weights_matmul(q, k, v, past_keys, past_values):
    """Scores and softmax in float32, the weights-values product in float16 for half."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    w = torch.softmax(q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1]), -1)
    w = w.to(q.dtype) if q.dtype in (torch.float16, torch.bfloat16) else w
    return (w.to(values.dtype) @ values).to(q.dtype), keys, values


def W_14_keys_only_grad_missing_through_values(q, k, v, past_keys, past_values):
    """values taken with .data (no gradient to v through the cache)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values.data, v.data], dim=2)
    return _attend(q, keys, values), keys, values


def W_15_bf16_in_half(q, k, v, past_keys, past_values):
    """float16 inputs computed in bfloat16 (fewer mantissa bits)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = torch.bfloat16 if q.dtype == torch.float16 else _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, -1)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_16_mean_over_heads_scores(q, k, v, past_keys, past_values):
    """Softmax over keys of scores averaged... no: softmax over dim=-2 (size 1 -> all 1)
    when t + 1 == 1, else over keys: right only at the first step? Softmax on dim 1."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s, dim=1)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def O_05_alias_at_t0(q, k, v, past_keys, past_values):
    """At t = 0 the cache returned is k and v themselves (no copy)."""
    if past_keys.shape[2] == 0:
        keys, values = k, v
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def W_17_no_grad(q, k, v, past_keys, past_values):
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    with torch.no_grad():
        out = _attend(q, keys, values)
    return out, keys, values


def W_18_heads_batch_mixed(q, k, v, past_keys, past_values):
    """Folds (batch, heads) with a transpose on one side: right when batch or heads is 1."""
    b, h, _, d = q.shape
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    Q = q.reshape(b * h, 1, d).to(dt)
    K = keys.transpose(0, 1).reshape(b * h, -1, d).to(dt)
    V = values.transpose(0, 1).reshape(b * h, -1, d).to(dt)
    w = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(d), -1)
    return (w @ V).reshape(b, h, 1, d).to(q.dtype), keys, values


def W_19_new_key_normalised(q, k, v, past_keys, past_values):
    """The new key is normalised to unit norm first (a 'QK-norm' slip)."""
    kn = k / k.norm(dim=-1, keepdim=True)
    keys = torch.cat([past_keys, kn], dim=2)
    values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


def S_01_scores_in_input_dtype_then_float(q, k, v, past_keys, past_values):
    """bfloat16 / float16 product q @ K^T, then softmax in float32 (rounded scores)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = _cdt(q)
    s = (q @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])).to(dt)
    w = torch.softmax(s, -1)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_21_bf16_computed_in_half(q, k, v, past_keys, past_values):
    """bfloat16 inputs computed in float16 (the text: float32)."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    dt = torch.float16 if q.dtype == torch.bfloat16 else _cdt(q)
    s = q.to(dt) @ keys.to(dt).transpose(-1, -2) / math.sqrt(q.shape[-1])
    w = torch.softmax(s.float() if dt == torch.float16 else s, -1).to(dt)
    return (w @ values.to(dt)).to(q.dtype), keys, values


def W_22_inplace_growing_buffer(q, k, v, past_keys, past_values):
    """Inference fast path: when nothing needs a gradient, the cache is a prefix view of a
    preallocated buffer and the new key is written into it in place. Two calls from the
    same cache (a fork, beam search) overwrite each other's newest position."""
    t = past_keys.shape[2]
    needs_grad = torch.is_grad_enabled() and any(
        x.requires_grad for x in (q, k, v, past_keys, past_values))
    base_k, base_v = past_keys._base, past_values._base
    if (not needs_grad and base_k is not None and base_v is not None
            and getattr(base_k, "_is_kv_buf", False) and base_k.shape[2] > t
            and past_keys.data_ptr() == base_k.data_ptr()):
        base_k[:, :, t] = k[:, :, 0]
        base_v[:, :, t] = v[:, :, 0]
        keys, values = base_k[:, :, :t + 1], base_v[:, :, :t + 1]
    elif not needs_grad:
        cap = max(64, 2 * (t + 1))
        b, h, _, d = k.shape
        base_k = torch.empty(b, h, cap, d, dtype=k.dtype)
        base_v = torch.empty(b, h, cap, d, dtype=v.dtype)
        base_k._is_kv_buf = base_v._is_kv_buf = True
        base_k[:, :, :t] = past_keys
        base_v[:, :, :t] = past_values
        base_k[:, :, t] = k[:, :, 0]
        base_v[:, :, t] = v[:, :, 0]
        keys, values = base_k[:, :, :t + 1], base_v[:, :, :t + 1]
    else:
        keys = torch.cat([past_keys, k], dim=2)
        values = torch.cat([past_values, v], dim=2)
    return _attend(q, keys, values), keys, values


_OUT = {}


def W_23_output_buffer_reused_no_grad(q, k, v, past_keys, past_values):
    """Without gradients, the output is written into one buffer per shape (out=): the
    previous step's output changes when the next step runs."""
    keys = torch.cat([past_keys, k], dim=2)
    values = torch.cat([past_values, v], dim=2)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, past_keys,
                                                                  past_values)):
        return _attend(q, keys, values), keys, values
    key = (q.shape, q.dtype)
    if key not in _OUT:
        _OUT[key] = torch.empty(q.shape, dtype=q.dtype)
    _OUT[key].copy_(_attend(q, keys, values))
    return _OUT[key], keys, values
