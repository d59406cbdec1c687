"""Round 7 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/ch03_sdpa.py with the names W01_x written
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
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def C_01_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_02_einsum_scale_first(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    w = masked_softmax(torch.einsum("bqd,bkd->bqk", q, keys), valid_lens)
    return torch.einsum("bqk,bkv->bqv", w, values)


def O_03_torch_sdpa_bool_mask(queries, keys, values, valid_lens=None):
    # PyTorch's own kernel with a boolean mask; empty rows zeroed explicitly
    if valid_lens is None:
        return F.scaled_dot_product_attention(queries, keys, values)
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
    keep = keep.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=keep)
    return torch.where(keep.any(-1, keepdim=True), out, torch.zeros_like(out)).nan_to_num()


def W_01_scale_by_num_keys(queries, keys, values, valid_lens=None):
    # sqrt of num_keys instead of d (equal when n == d)
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_02_scale_by_value_dim(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_03_dropout_functional(queries, keys, values, valid_lens=None):
    # d2l's dropout copied as F.dropout: training=True by default
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(F.dropout(masked_softmax(scores, valid_lens), 0.1), values)


def W_04_inplace_scale_queries(queries, keys, values, valid_lens=None):
    # scales the queries in place (saves a copy) when they do not require grad
    d = queries.shape[-1]
    q = queries.div_(math.sqrt(d)) if not queries.requires_grad else queries / math.sqrt(d)
    return torch.bmm(masked_softmax(torch.bmm(q, keys.transpose(1, 2)), valid_lens), values)


def W_05_mask_on_queries_axis(queries, keys, values, valid_lens=None):
    # masks the rows (queries) beyond valid_len instead of the keys
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = torch.softmax(scores, -1)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 1 else valid_lens.max(-1).values
        keep = torch.arange(queries.shape[1], device=queries.device) < lens[:, None]
        w = w * keep[..., None]
    return torch.bmm(w, values)


def W_06_2d_lens_uses_first_query(queries, keys, values, valid_lens=None):
    # (batch, queries) lengths reduced to the first query's length
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return C_01_reference(queries, keys, values, valid_lens)


def W_07_detached_keys(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.detach().transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_08_uniform_empty_rows(queries, keys, values, valid_lens=None):
    # d2l's -1e6 fill: a query with no valid key averages all the values
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
        scores = scores.masked_fill(~keep, -1e4 if scores.dtype == torch.float16 else -1e6)
    return torch.bmm(torch.softmax(scores, -1), values)


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_09_float64_downcast(queries, keys, values, valid_lens=None):
    # float() everything, cast back
    out = C_01_reference(queries.float(), keys.float(), values.float(), valid_lens)
    return out.to(queries.dtype)


def W_10_additive_inf_mask_nan_to_num(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(keys.shape[1], device=keys.device) < lens[..., None]
        scores = scores + torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    return torch.bmm(torch.nan_to_num(torch.softmax(scores, -1)), values)


def W_11_batch_broadcast_matmul_keys_T(queries, keys, values, valid_lens=None):
    # keys.transpose(0, 2) instead of (1, 2): (d, n, b); works via matmul only when b == d..
    # falls back to a per-example loop that uses keys[0] for every example
    d = queries.shape[-1]
    outs = []
    for i in range(queries.shape[0]):
        s = queries[i] @ keys[0].T / math.sqrt(d)
        vl = None if valid_lens is None else valid_lens[i:i + 1]
        outs.append(masked_softmax(s[None], vl)[0] @ values[i])
    return torch.stack(outs)


def W_12_scale_after_softmax_temperature(queries, keys, values, valid_lens=None):
    # divides by sqrt(d) only when d > 1 ... and by d (not sqrt) otherwise: d = 1 and 4
    # both give 2 ... no: divides by sqrt(d) rounded down to an int
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / int(math.sqrt(d))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


_CACHE = {}


def W_13_cache_keys_T(queries, keys, values, valid_lens=None):
    # caches keys^T / sqrt(d) by shape (the keys are "fixed" in a decoder)
    key = tuple(keys.shape)
    if key not in _CACHE or keys.requires_grad:
        _CACHE[key] = keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(torch.bmm(queries, _CACHE[key]), valid_lens), values)


def W_14_unsqueeze_lens_in_place(queries, keys, values, valid_lens=None):
    # valid_lens.unsqueeze_(1) on the caller's tensor
    if valid_lens is not None and valid_lens.dim() == 1:
        valid_lens.unsqueeze_(1)
    return C_01_reference(queries, keys, values, valid_lens)


def W_15_view_as_transpose(queries, keys, values, valid_lens=None):
    # keys.reshape(b, d, n) instead of a transpose
    b, n, d = keys.shape
    scores = torch.bmm(queries, keys.reshape(b, d, n)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_16_inplace_scale_scores(queries, keys, values, valid_lens=None):
    # scales the fresh score tensor in place (bmm does not save its output)
    scores = torch.bmm(queries, keys.transpose(1, 2))
    scores /= math.sqrt(queries.shape[-1])
    return masked_softmax(scores, valid_lens) @ values


def W_16_float64_returns_float32(queries, keys, values, valid_lens=None):
    out = C_01_reference(queries, keys, values, valid_lens)
    return out.float() if out.dtype == torch.float64 else out


def W_17_float16_returns_float32(queries, keys, values, valid_lens=None):
    if queries.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(queries.float(), keys.float(), values.float(), valid_lens)
    return C_01_reference(queries, keys, values, valid_lens)


import functools


@functools.lru_cache(maxsize=8)
def _keys_T_scaled(keys):
    return keys.transpose(1, 2) / math.sqrt(keys.shape[-1])


def W_18_lru_cache_keys_T(queries, keys, values, valid_lens=None):
    # memoises K^T / sqrt(d) on the keys tensor (identity): stale after keys.add_(...)
    scores = torch.bmm(queries, _keys_T_scaled(keys))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


_C4 = {}


def W_19_cache_keys_T_shape_dtype_grad(queries, keys, values, valid_lens=None):
    # caches K^T / sqrt(d) per (shape, dtype, requires_grad, lens given)
    key = (tuple(keys.shape), keys.dtype, keys.requires_grad, valid_lens is None)
    if key not in _C4 or keys.requires_grad:
        _C4[key] = keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(torch.bmm(queries, _C4[key]), valid_lens), values)


def W_20_detached_values(queries, keys, values, valid_lens=None):
    return C_01_reference(queries, keys, values.detach(), valid_lens)


def O_21_float64_inside_matmul(queries, keys, values, valid_lens=None):
    q, k, v = queries.double(), keys.double(), values.double()
    w = masked_softmax(q @ k.mT / math.sqrt(q.shape[-1]), valid_lens)
    return (w @ v).to(queries.dtype)
