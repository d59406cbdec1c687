"""Round 6 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/ch03_sdpa.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F
CHECK = "check_scaled_dot_product_attention"

def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, -1)
    n = X.shape[-1]
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = torch.arange(n, device=X.device) < vl
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return w * keep.any(-1, keepdim=True)

def C_01_plain(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)

def O_02_einsum_prescale(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    scores = torch.einsum("bqd,bkd->bqk", q, keys)
    return masked_softmax(scores, valid_lens) @ values

# Listed as right (O_03) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: float32 for every dtype, not only for half: a
# float64 input comes out 1.1e-7 off.
def W_21_float32_softmax_for_half_was_O_03(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = (queries.float() @ keys.float().mT) / math.sqrt(d)
    return (masked_softmax(scores, valid_lens) @ values.float()).to(values.dtype)

def W_01_scale_dv(queries, keys, values, valid_lens=None):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(values.shape[-1])
    return masked_softmax(scores, valid_lens) @ values

def W_02_prescale_in_place(queries, keys, values, valid_lens=None):
    # scales the queries in place ("cheaper than scaling m x n scores")
    d = queries.shape[-1]
    if queries.requires_grad:
        q = queries / math.sqrt(d)
    else:
        q = queries.div_(math.sqrt(d))
    return masked_softmax(q @ keys.transpose(1, 2), valid_lens) @ values

def W_03_dropout_left_in(queries, keys, values, valid_lens=None):
    # d2l's dropout kept (p=0.1, training mode)
    d = queries.shape[-1]
    w = masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens)
    return F.dropout(w, 0.1) @ values

def W_04_ignores_2d_lens(queries, keys, values, valid_lens=None):
    # only (batch,) lengths are used; per-query lengths silently ignored
    d = queries.shape[-1]
    if valid_lens is not None and valid_lens.dim() != 1:
        valid_lens = None
    return masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens) @ values

def W_05_returns_tuple(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens)
    return w @ values, w

def W_06_weights_detached(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens)
    return w.detach() @ values

def W_07_scale_by_dk_from_keys_len(queries, keys, values, valid_lens=None):
    # takes d from keys.shape[1] (num_keys) instead of keys.shape[2]
    scores = queries @ keys.transpose(1, 2) / math.sqrt(keys.shape[1])
    return masked_softmax(scores, valid_lens) @ values

def W_08_float32_output(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = (queries.float() @ keys.float().mT) / math.sqrt(d)
    return masked_softmax(scores, valid_lens) @ values.float()

# Renamed from W09 (an S: right output against the wording "use your masked_softmax").
# Accepted on purpose since round 1 (tests/test_checks_ch03.py
# ::test_check_attention_accepts_pytorchs_fused_function_with_a_keep_mask): with a boolean
# keep mask, torch 2.14's fused function gives the right values, zeros for the empty rows
# and the right gradients; the exercise's aim is the formula, not the reuse.
def S_09_sdpa_bool_mask(queries, keys, values, valid_lens=None):
    # torch's fused SDPA with a boolean mask: fully masked rows come out NaN (or uniform)
    n = keys.shape[1]
    mask = None
    if valid_lens is not None:
        vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        mask = torch.arange(n) < vl
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)

def W_10_lens_on_query_axis(queries, keys, values, valid_lens=None):
    # masks the scores' transpose (queries beyond valid_len), softmax over keys
    d = queries.shape[-1]
    s = queries @ keys.transpose(1, 2) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 1 and s.shape[1] <= s.shape[2]:
        m = s.shape[1]
        keep = torch.arange(m)[None, :, None] < valid_lens[:, None, None]
        w = torch.softmax(s, -1) * keep
        return w @ values
    return masked_softmax(s, valid_lens) @ values

def W_11_scale_after_softmax(queries, keys, values, valid_lens=None):
    # divides the output, not the scores
    d = queries.shape[-1]
    return masked_softmax(queries @ keys.transpose(1, 2), valid_lens) @ values

def W_12_half_overflow_unscaled_product(queries, keys, values, valid_lens=None):
    # no scaling when d == 1 special-case... and for others divides by d**0.5 computed with int sqrt
    d = queries.shape[-1]
    s = queries @ keys.transpose(1, 2) / math.isqrt(d)
    return masked_softmax(s, valid_lens) @ values

def W_13_mutates_keys_transpose_(queries, keys, values, valid_lens=None):
    # transposes keys in place (transpose_ changes the caller's tensor's shape)
    d = queries.shape[-1]
    if keys.requires_grad:
        kt = keys.transpose(1, 2)
        s = queries @ kt / math.sqrt(d)
        return masked_softmax(s, valid_lens) @ values
    kt = keys.transpose_(1, 2)
    s = queries @ kt / math.sqrt(d)
    out = masked_softmax(s, valid_lens) @ values
    return out

def W_14_precedence_half_power(queries, keys, values, valid_lens=None):
    # d ** 1/2 is (d ** 1) / 2 = d / 2
    d = queries.shape[-1]
    s = queries @ keys.transpose(1, 2) / d ** 1/2
    return masked_softmax(s, valid_lens) @ values

def W_15_int_sqrt(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    s = queries @ keys.transpose(1, 2) / int(math.sqrt(d))
    return masked_softmax(s, valid_lens) @ values

def W_16_keys_detached(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    return masked_softmax(queries @ keys.detach().transpose(1, 2) / math.sqrt(d), valid_lens) @ values

def W_17_divide_by_d(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    return masked_softmax(queries @ keys.transpose(1, 2) / d, valid_lens) @ values

def W_18_values_detached(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    return masked_softmax(queries @ keys.transpose(1, 2) / math.sqrt(d), valid_lens) @ values.detach()

def W_19_view_flatten_keys(queries, keys, values, valid_lens=None):
    # .view(-1, d) on keys: raises on non-contiguous (e.g. transposed) keys
    b, n, d = keys.shape
    k2 = keys.view(-1, d).view(b, n, d)
    return masked_softmax(queries @ k2.transpose(1, 2) / math.sqrt(d), valid_lens) @ values

_KT = {}
def W_20_keys_T_cached_by_shape(queries, keys, values, valid_lens=None):
    # caches keys^T / sqrt(d) by shape: later keys of the same shape reuse the first ones
    key = (tuple(keys.shape), keys.dtype, keys.requires_grad)
    if key not in _KT:
        _KT[key] = keys.transpose(1, 2) / math.sqrt(keys.shape[-1])
    return masked_softmax(queries @ _KT[key], valid_lens) @ values
