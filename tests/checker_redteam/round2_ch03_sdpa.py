"""Round 2 red team (writer R2), ch03_sdpa: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch03_sdpa.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import math

import torch
import torch.nn.functional as F

CHECK = "check_scaled_dot_product_attention"


def ms(X, valid_lens):
    """A correct masked softmax (as exercise 3.1)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) < vl[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_scale_dv(queries, keys, values, valid_lens=None):
    """Scales by sqrt of the value size."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(ms(s, valid_lens), values)


def W_scale_n(queries, keys, values, valid_lens=None):
    """Scales by sqrt of the number of keys."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    return torch.bmm(ms(s, valid_lens), values)


def W_scale_m(queries, keys, values, valid_lens=None):
    """Scales by sqrt(queries.shape[1]) (the number of queries, mistaken for d)."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[1])
    return torch.bmm(ms(s, valid_lens), values)


def W_scale_d(queries, keys, values, valid_lens=None):
    """Divides by d instead of sqrt(d)."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / queries.shape[-1]
    return torch.bmm(ms(s, valid_lens), values)


def W_no_scale(queries, keys, values, valid_lens=None):
    s = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(ms(s, valid_lens), values)


def W_softmax_queries_axis(queries, keys, values, valid_lens=None):
    """Masks/softmaxes the transposed scores: normalises over the queries."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = torch.softmax(s, dim=1)
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        w = w * (torch.arange(s.shape[-1], device=s.device) < vl[..., None])
    return torch.bmm(w, values)


def W_only_1d_lens(queries, keys, values, valid_lens=None):
    """Handles (batch,) lengths only; 2-D lengths use the first query's length for all."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return torch.bmm(ms(s, valid_lens), values)


def Q_fused_mask_nan(queries, keys, values, valid_lens=None):
    """torch's fused kernel with a bool mask: NaN (or garbage) for zero-length rows."""
    mask = None
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        mask = torch.arange(keys.shape[1], device=keys.device) < vl[..., None]
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)


def W_dropout_functional(queries, keys, values, valid_lens=None):
    """F.dropout(weights, 0.1) (training defaults to True): random outputs."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(F.dropout(ms(s, valid_lens), 0.1), values)


def W_returns_tuple(queries, keys, values, valid_lens=None):
    """Returns (output, weights)."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = ms(s, valid_lens)
    return torch.bmm(w, values), w


def W_d2l_uniform(queries, keys, values, valid_lens=None):
    """d2l masked softmax (-1e6 fill, no zeroing): zero-length rows average the padding."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(s.shape[-1], device=s.device) < vl[..., None]
        s = s.masked_fill(~keep, -1e4 if s.dtype == torch.float16 else -1e6)
    return torch.bmm(torch.softmax(s, dim=-1), values)


def W_inplace_scale_queries(queries, keys, values, valid_lens=None):
    """Scales the queries in place: changes the caller's tensor."""
    queries /= math.sqrt(queries.shape[-1])
    s = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(ms(s, valid_lens), values)


def W_values_transposed(queries, keys, values, valid_lens=None):
    """Weights times values along the wrong axes (right only when n == d_v, square case)."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = ms(s, valid_lens)
    if values.shape[1] == values.shape[2]:
        return torch.bmm(w, values.transpose(1, 2))
    return torch.bmm(w, values)


def W_batch_of_one(queries, keys, values, valid_lens=None):
    """Uses only the first valid length for the whole batch."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        valid_lens = valid_lens[:1].expand(valid_lens.shape)
    return torch.bmm(ms(s, valid_lens), values)


def C_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(ms(scores, valid_lens), values)


def O_scale_after_matmul_einsum(queries, keys, values, valid_lens=None):
    """einsum, scale applied to queries first, float64 fine."""
    q = queries * queries.shape[-1] ** -0.5
    s = torch.einsum("bmd,bnd->bmn", q, keys)
    return torch.einsum("bmn,bnv->bmv", ms(s, valid_lens), values)


def O_fused_with_empty_fix(queries, keys, values, valid_lens=None):
    """torch's fused kernel with a bool mask; empty rows attend anywhere then get zeroed."""
    if valid_lens is None:
        return F.scaled_dot_product_attention(queries, keys, values)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    mask = torch.arange(keys.shape[1], device=keys.device) < vl[..., None]
    mask = mask.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    empty = ~mask.any(-1, keepdim=True)
    out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask | empty)
    return out.masked_fill(empty, 0.0)


def W_inplace_values(queries, keys, values, valid_lens=None):
    """Scales the values in place and back (when no grad): float rounding changes the
    caller's tensor slightly."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = ms(s, valid_lens)
    if not values.requires_grad:
        values.mul_(3.0)
        out = torch.bmm(w, values) / 3.0
        return out
    return torch.bmm(w, values)


def W_additive_minus_1e4(queries, keys, values, valid_lens=None):
    """Additive -1e4 mask (float16-safe), zeroed empty rows: the padding wins when its scores
    are large."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is None:
        return torch.bmm(torch.softmax(s, -1), values)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(s.shape[-1], device=s.device) < vl[..., None]
    w = torch.softmax(s + (~keep) * -1e4, -1) * keep.any(-1, keepdim=True)
    return torch.bmm(w.to(values.dtype), values)


def W_fill_minus_1e9(queries, keys, values, valid_lens=None):
    """-1e9 fill: fine in float32, overflows masked_fill in float16."""
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is None:
        return torch.bmm(torch.softmax(s, -1), values)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(s.shape[-1], device=s.device) < vl[..., None]
    w = torch.softmax(s.masked_fill(~keep, -1e9), -1) * keep
    return torch.bmm(w, values)
