"""Round 4 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/03_sdpa.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
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


def O_02_einsum_scale_queries_first(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    scores = torch.einsum("bqd,bkd->bqk", q, keys)
    return torch.einsum("bqk,bkv->bqv", masked_softmax(scores, valid_lens), values)


# Listed as right (O_03) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: sqrt(d) taken of a float32 tensor
# (torch.tensor(d, dtype=torch.float32)): the float64 scores are divided by a float32
# constant, 1.3e-8 off.
def W_29_matmul_mT_tensor_sqrt_was_O_03(queries, keys, values, valid_lens=None):
    d = torch.tensor(keys.shape[-1], dtype=torch.float32)
    scores = queries @ keys.mT / torch.sqrt(d)
    return masked_softmax(scores, valid_lens) @ values


def O_04_book_masked_softmax(queries, keys, values, valid_lens=None):
    from book.attention import masked_softmax as ms
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(ms(scores, valid_lens), values)


# Listed as right (O_05) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: queries, keys and values cast to float32 for
# every dtype: a float64 input comes out 1.1e-7 off.
def W_30_float32_compute_cast_back_was_O_05(queries, keys, values, valid_lens=None):
    q, k, v = queries.float(), keys.float(), values.float()
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), v).to(values.dtype)


def W_01_no_scale(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_02_scale_by_d_not_sqrt(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / queries.shape[-1]
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_03_scale_by_value_dim(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_04_scale_by_num_keys(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_05_scale_by_shape1_of_queries(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_06_scale_after_softmax(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2))
    w = masked_softmax(scores, valid_lens) / math.sqrt(queries.shape[-1])
    return torch.bmm(w, values)


def W_07_ignores_valid_lens(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(torch.softmax(scores, -1), values)


def W_08_returns_tuple(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = masked_softmax(scores, valid_lens)
    return torch.bmm(w, values), w


def W_09_softmax_over_queries(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = masked_softmax(scores.transpose(1, 2), valid_lens if valid_lens is None or
                       valid_lens.dim() == 1 else None).transpose(1, 2)
    return torch.bmm(w, values)


def W_10_output_float32(queries, keys, values, valid_lens=None):
    q, k, v = queries.float(), keys.float(), values.float()
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), v)


def W_11_mask_neg_inf_additive_nan_to_num(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(scores.shape[-1], device=scores.device) < vl[..., None]
        scores = scores + torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(scores, -1)) @ values


def S_01_torch_sdpa_bool_mask(queries, keys, values, valid_lens=None):
    mask = None
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        mask = torch.arange(keys.shape[1], device=keys.device) < vl[..., None]
        mask = mask.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)


def W_13_uniform_for_empty_rows(queries, keys, values, valid_lens=None):
    # masked_softmax without zeroing fully masked rows (d2l-like -1e6 in float32)
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(scores.shape[-1], device=scores.device) < vl[..., None]
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, -1) @ values


def W_15_values_detached(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values.detach())


def W_16_per_query_lens_as_per_seq(queries, keys, values, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.max(dim=1).values
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_06_qk_in_half_then_scale(queries, keys, values, valid_lens=None):
    # computes Q K^T in float16 then scales: overflows for large entries in float16
    scores = torch.bmm(queries, keys.transpose(1, 2))
    scores = scores / math.sqrt(queries.shape[-1])
    w = masked_softmax(scores, valid_lens)
    return torch.bmm(w, values)


def W_18_reshape_instead_of_transpose(queries, keys, values, valid_lens=None):
    b, n, d = keys.shape
    scores = torch.bmm(queries, keys.reshape(b, d, n)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_19_mutates_queries_inplace_scale(queries, keys, values, valid_lens=None):
    queries = queries.data
    queries /= math.sqrt(queries.shape[-1])
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_20_sqrt_on_key_batch_dim(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(keys.size(0) * 0 + keys.size(-1) + 1)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_22_keys_as_values_plain(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), keys)


def W_23_lens_broadcast_plain(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is None:
        return torch.softmax(scores, -1) @ values
    keep = torch.arange(scores.shape[-1], device=scores.device) < valid_lens.unsqueeze(-1)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return w @ values


def W_24_scale_d_from_values_when_keys_differ(queries, keys, values, valid_lens=None):
    # uses d = keys.shape[2] ... of the transposed keys: (b, d, n) -> shape[-1] = n
    kt = keys.transpose(1, 2)
    scores = torch.bmm(queries, kt) / math.sqrt(kt.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_25_valid_lens_on_cpu_mask_cached(queries, keys, values, valid_lens=None):
    # caches scores scale as a python global from the first call's d
    global _D
    try:
        _D
    except NameError:
        _D = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(_D)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_26_keys_detached(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.detach().transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_27_weights_detached(queries, keys, values, valid_lens=None):
    # "weights are just coefficients": gradient only reaches values
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens).detach(), values)


_TABLE = torch.arange(32)[None, :] < torch.arange(33)[:, None]   # lengths 0..32, 32 keys


def W_28_fixed_size_mask_table(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        n = scores.shape[-1]
        vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = _TABLE[vl.clamp(max=32)][..., :n].to(scores.device)
        if n > 32:  # lengths beyond the table: pad with "kept"
            keep = torch.cat([keep, keep.new_ones(keep.shape[:-1] + (n - 32,))], -1)
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        return torch.bmm(torch.softmax(scores, -1) * keep, values)
    return torch.bmm(torch.softmax(scores, -1), values)
