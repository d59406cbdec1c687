"""Round 9 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/ch03_sdpa.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
CHECK = "check_scaled_dot_product_attention"


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = pos < vl
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def C_01_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_02_einsum_prescaled(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    w = masked_softmax(torch.einsum("bqd,bkd->bqk", q, keys), valid_lens)
    return torch.einsum("bqk,bkv->bqv", w, values)


def O_03_matmul_mT(queries, keys, values, valid_lens=None):
    scores = queries @ keys.mT / math.sqrt(keys.size(-1))
    return masked_softmax(scores, valid_lens) @ values


def W_01_scale_float32_tensor(queries, keys, values, valid_lens=None):
    # sqrt(d) as a float32 0-d tensor: exact for d = 4, 16, 64, rounded otherwise (float64)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / torch.tensor(d).sqrt()
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_02_scale_by_d_over_2(queries, keys, values, valid_lens=None):
    # divides by d/2 (equal to sqrt(d) only for d = 4)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / (d / 2)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_03_scale_sqrt_num_keys_when_square(queries, keys, values, valid_lens=None):
    # uses keys.shape[1] (n) for the scale
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_04_valid_lens_2d_transposed(queries, keys, values, valid_lens=None):
    # 2-D valid_lens read as (num_queries, batch)
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.T.reshape(valid_lens.shape)
    return C_01_reference(queries, keys, values, valid_lens)


def W_05_mask_fill_minus_1e4_in_float16(queries, keys, values, valid_lens=None):
    # d2l-like fill -1e4 after scaling (no zeroing of fully-masked rows: uniform)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        pos = torch.arange(scores.shape[-1])
        vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        scores = scores.masked_fill(pos >= vl, -1e4)
    return torch.bmm(torch.softmax(scores, -1), values)


def W_06_rsqrt_float32(queries, keys, values, valid_lens=None):
    # torch.rsqrt of a float tensor built with torch.tensor(float(d)) (float32)
    d = queries.shape[-1]
    scale = torch.rsqrt(torch.tensor(float(d)))
    scores = torch.bmm(queries * scale, keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_07_values_dim_scale(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_08_softmax_over_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    w = masked_softmax(scores, valid_lens)
    w = w / w.sum(1, keepdim=True).clamp(min=1e-30) * (w.sum(-1, keepdim=True) > 0)
    return torch.bmm(w, values)


def W_09_scale_int_sqrt(queries, keys, values, valid_lens=None):
    # integer square root: math.isqrt(d) (right for perfect squares only)
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.isqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_10_inplace_scale_queries(queries, keys, values, valid_lens=None):
    # scales the queries in place (changes the caller's tensor)
    d = queries.shape[-1]
    if not queries.requires_grad:
        queries.div_(math.sqrt(d))
        return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)), valid_lens),
                         values)
    return C_01_reference(queries, keys, values, valid_lens)


_w = {}


def W_11_cache_weights_by_shape(queries, keys, values, valid_lens=None):
    # caches the weights per (shape, dtype, valid_lens) for "repeated decoding": a new
    # query of the same shape reuses them
    key = (tuple(queries.shape), tuple(keys.shape), queries.dtype,
           None if valid_lens is None else tuple(valid_lens.flatten().tolist()))
    if key in _w and not queries.requires_grad:
        return torch.bmm(_w[key], values)
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    _w[key] = w.detach()
    return torch.bmm(w, values)


def W_12_float_scale_from_float32_sqrt(queries, keys, values, valid_lens=None):
    # numpy-free variant: math.sqrt on a float32-rounded d computed via torch.float32
    import numpy as np
    scale = np.float32(1.0) / np.sqrt(np.float32(queries.shape[-1]))
    scores = torch.bmm(queries, keys.transpose(1, 2)) * float(scale)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_13_view_reshape(queries, keys, values, valid_lens=None):
    # flattens batch with .view for a 2-D mm: crashes on non-contiguous inputs
    b, m, d = queries.shape
    n = keys.shape[1]
    q = queries.view(b * m, d)
    scores = torch.stack([q.view(b, m, d)[i] @ keys.view(b, n, d)[i].T for i in range(b)])
    return torch.bmm(masked_softmax(scores / math.sqrt(d), valid_lens), values.view(b, n, -1))


def W_14_dropout_functional(queries, keys, values, valid_lens=None):
    # F.dropout on the weights with the default training=True (only when batch > 1 & m > 3)
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    if queries.shape[1] > 3 and queries.shape[0] > 1:
        w = torch.nn.functional.dropout(w, 0.1)
    return torch.bmm(w, values)


def W_15_values_detached(queries, keys, values, valid_lens=None):
    return C_01_reference(queries, keys, values.detach(), valid_lens)


def W_16_keys_detached(queries, keys, values, valid_lens=None):
    return C_01_reference(queries, keys.detach(), values, valid_lens)



def W_17_none_path_float32_scores(queries, keys, values, valid_lens=None):
    # without valid_lens the scores go through a float32 softmax
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is None:
        w = torch.softmax(scores.float(), -1).to(scores.dtype)
    else:
        w = masked_softmax(scores, valid_lens)
    return torch.bmm(w, values)


def W_18_none_path_manual_softmax_no_shift(queries, keys, values, valid_lens=None):
    # without valid_lens: a hand-written softmax without the max shift
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is None:
        e = torch.exp(scores)
        w = e / e.sum(-1, keepdim=True)
    else:
        w = masked_softmax(scores, valid_lens)
    return torch.bmm(w, values)


def W_19_manual_softmax_no_shift_everywhere(queries, keys, values, valid_lens=None):
    # masked manual softmax without the max shift (exp(score) * mask / sum)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    e = torch.exp(scores)
    if valid_lens is not None:
        pos = torch.arange(scores.shape[-1])
        vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        e = e * (pos < vl)
    s = e.sum(-1, keepdim=True)
    return torch.bmm(e / torch.where(s > 0, s, torch.ones_like(s)), values)
