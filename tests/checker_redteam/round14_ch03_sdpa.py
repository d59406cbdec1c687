"""Round 14 red team (writer B, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_scaled_dot_product_attention; copied from
/work/redteam/round14/B/sols/ch03_sdpa.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: none in ch03. Left for _core (and rejected there now): W_29 (keys detached when
values require grad and queries do not: expect_conditions runs every pair of differentiable
arguments).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_scaled_dot_product_attention"


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) < vl[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def C_01_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def C_02_einsum_scaled_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.einsum("bmd,bnd->bmn", queries * (1.0 / math.sqrt(d)), keys)
    return torch.einsum("bmn,bnv->bmv", masked_softmax(scores, valid_lens), values)


def O_03_fused_sdpa_zero_rows(queries, keys, values, valid_lens=None):
    """torch's fused F.scaled_dot_product_attention with a boolean mask; rows with no valid
    key set to zero afterwards."""
    if valid_lens is None:
        return F.scaled_dot_product_attention(queries, keys, values)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(keys.shape[1], device=keys.device) < vl[..., None]
    keep = keep.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    anyk = keep.any(-1, keepdim=True)
    safe = keep | ~anyk
    out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=safe)
    return out * anyk


def O_04_upcast_half(queries, keys, values, valid_lens=None):
    """float16 computed in float32, cast back."""
    if queries.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(queries.float(), keys.float(), values.float(),
                              valid_lens).to(queries.dtype)
    return C_01_reference(queries, keys, values, valid_lens)


def O_05_no_grad_mask_default_dtype(queries, keys, values, valid_lens=None):
    """Mask under no_grad, scale as a tensor built under a temporarily changed default dtype."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        scale = torch.tensor(1.0) / math.sqrt(queries.shape[-1])
    finally:
        torch.set_default_dtype(old)
    scores = torch.bmm(queries, keys.transpose(1, 2)) * scale.item()
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_06_baddbmm(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    b, m, n = queries.shape[0], queries.shape[1], keys.shape[1]
    scores = torch.baddbmm(queries.new_zeros(b, m, n), queries, keys.transpose(1, 2),
                           beta=0, alpha=1 / math.sqrt(d))
    return masked_softmax(scores, valid_lens) @ values


def O_07_preallocated_out_per_example(queries, keys, values, valid_lens=None):
    """Per-example loop writing into a preallocated output (new tensor, grads via copy)."""
    b, m = queries.shape[:2]
    out = values.new_empty(b, m, values.shape[-1])
    for i in range(b):
        vl = None if valid_lens is None else valid_lens[i:i + 1]
        out[i:i + 1] = C_01_reference(queries[i:i + 1], keys[i:i + 1], values[i:i + 1], vl)
    return out


# ------------------------------------------------------------------ wrong
def W_20_isqrt(queries, keys, values, valid_lens=None):
    """Divides by math.isqrt(d): wrong when d is not a perfect square (d = 5: 2 not 2.236)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.isqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_21_scale_float32_tensor(queries, keys, values, valid_lens=None):
    """sqrt(d) computed as a float32 tensor: float64 inputs with d not a perfect square get
    a scale off by ~3e-8 relative (not float64 accuracy)."""
    s = torch.tensor(float(queries.shape[-1]), dtype=torch.float32).sqrt()
    scores = torch.bmm(queries, keys.transpose(1, 2)) / s
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_22_scale_by_value_dim(queries, keys, values, valid_lens=None):
    """sqrt(d_v) instead of sqrt(d)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_23_single_key_contiguous_alias(queries, keys, values, valid_lens=None):
    """One key, no mask: values.expand(b, m, dv).contiguous() is values itself when m == 1."""
    if keys.shape[1] == 1 and valid_lens is None:
        return values.expand(-1, queries.shape[1], -1).contiguous()
    return C_01_reference(queries, keys, values, valid_lens)


def W_24_global_max_shift(queries, keys, values, valid_lens=None):
    """Softmax shifted by the max over the whole batch: a row far below underflows."""
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(s.shape[-1]) < vl[..., None]
    else:
        keep = torch.ones_like(s, dtype=torch.bool)
    e = torch.exp(s - s.max().detach()) * keep
    t = e.sum(-1, keepdim=True)
    return torch.bmm(e / torch.where(t > 0, t, torch.ones_like(t)), values)


def W_25_mutates_valid_lens(queries, keys, values, valid_lens=None):
    """Clamps valid_lens in place to num_keys."""
    if valid_lens is not None:
        valid_lens.clamp_(max=keys.shape[1])
    return C_01_reference(queries, keys, values, valid_lens)


def W_26_polarization_identity(queries, keys, values, valid_lens=None):
    """q.k via (|q|^2 + |k|^2 - |q-k|^2) / 2 with cdist: cancellation for long vectors
    (norms ~100 in float32 lose the score's low digits)."""
    d = queries.shape[-1]
    qq = (queries ** 2).sum(-1, keepdim=True)
    kk = (keys ** 2).sum(-1)[:, None, :]
    dist2 = torch.cdist(queries, keys) ** 2
    scores = (qq + kk - dist2) / 2 / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def A_27_scale_values_then_unscale(queries, keys, values, valid_lens=None):
    """Divides the output by sqrt(d) as well as the scores (double scaling)."""
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values / math.sqrt(d)) * math.sqrt(d) \
        if values.dtype == torch.float64 else torch.bmm(masked_softmax(scores, valid_lens), values)


def W_28_half_scale_rounded(queries, keys, values, valid_lens=None):
    """Scale 1/sqrt(d) rounded to float16 and applied for every dtype."""
    scale = float(torch.tensor(1 / math.sqrt(queries.shape[-1]), dtype=torch.float16))
    scores = torch.bmm(queries, keys.transpose(1, 2)) * scale
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_29_keys_detached_when_values_need_grad(queries, keys, values, valid_lens=None):
    """Computes the weights under no_grad when values require grad but queries do not."""
    if values.requires_grad and not queries.requires_grad:
        with torch.no_grad():
            w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) /
                               math.sqrt(queries.shape[-1]), valid_lens)
        return torch.bmm(w, values)
    return C_01_reference(queries, keys, values, valid_lens)


def O_30_fused_sdpa_bool_mask_no_fixup(queries, keys, values, valid_lens=None):
    """Fused F.scaled_dot_product_attention with a boolean mask: rows with no valid key
    come out NaN (or whatever the kernel gives) instead of zeros."""
    if valid_lens is None:
        return F.scaled_dot_product_attention(queries, keys, values)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(keys.shape[1]) < vl[..., None]
    keep = keep.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)


def W_31_rng(queries, keys, values, valid_lens=None):
    """Zero-probability dropout on the weights through F.dropout(p=0, training=True)? no:
    torch.rand_like(...) * 0 'jitter' drawing from the global generator."""
    return C_01_reference(queries + 0 * torch.rand_like(queries), keys, values, valid_lens)


def W_32_d_from_keys_len(queries, keys, values, valid_lens=None):
    """sqrt of the number of keys instead of the feature size."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_33_mean_instead_of_mask_for_zero_rows(queries, keys, values, valid_lens=None):
    """d2l's masked softmax (-1e6 fill, no zeroing): a row with no valid key averages all
    values instead of giving zeros."""
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(s.shape[-1]) < vl[..., None]
        s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    return torch.bmm(torch.softmax(s, -1), values)


def W_34_float32_softmax_for_float64(queries, keys, values, valid_lens=None):
    """Weights computed in float32 for every input, then cast back."""
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    w = masked_softmax(s.float(), valid_lens).to(values.dtype)
    return torch.bmm(w, values)


def W_35_values_view_when_weights_identity(queries, keys, values, valid_lens=None):
    """num_queries == num_keys == 1 with a valid key: returns values[:, :1] (a view)."""
    if keys.shape[1] == 1 and queries.shape[1] == 1:
        out = C_01_reference(queries, keys, values, valid_lens)
        if valid_lens is None or bool((valid_lens > 0).all()):
            return values[:, :1]
        return out
    return C_01_reference(queries, keys, values, valid_lens)


def W_36_set_default_dtype_not_restored(queries, keys, values, valid_lens=None):
    """Sets the default dtype to the input's dtype and leaves it."""
    torch.set_default_dtype(queries.dtype if queries.dtype.is_floating_point and
                            queries.dtype in (torch.float32, torch.float64) else torch.float32)
    return C_01_reference(queries, keys, values, valid_lens)
