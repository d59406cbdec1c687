"""Round 8 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/ch03_sdpa.py with the names W01_x written
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
    idx = torch.arange(X.shape[-1], device=X.device)
    keep = idx < (valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[..., None])
    Z = X.masked_fill(~keep, float("-inf"))
    Z = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return torch.softmax(Z, dim=-1) * keep


def C_01_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_02_fourth_root_both(queries, keys, values, valid_lens=None):
    d = keys.shape[-1]
    s = d ** 0.25
    scores = (queries / s) @ (keys / s).mT
    return masked_softmax(scores, valid_lens) @ values


def O_03_einsum_baddbmm(queries, keys, values, valid_lens=None):
    d = queries.size(-1)
    z = torch.zeros(queries.shape[0], queries.shape[1], keys.shape[1],
                    dtype=queries.dtype, device=queries.device)
    scores = torch.baddbmm(z, queries, keys.transpose(-1, -2), beta=0, alpha=d ** -0.5)
    return torch.einsum("bqk,bkv->bqv", masked_softmax(scores, valid_lens), values)


def W_01_isqrt(queries, keys, values, valid_lens=None):
    # math.isqrt: exact for d = 4, 16, 64; wrong for d = 2, 3, 5, ...
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.isqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_02_scale_by_value_size(queries, keys, values, valid_lens=None):
    d = values.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_03_inplace_scale_queries(queries, keys, values, valid_lens=None):
    q = queries.detach()
    q /= math.sqrt(queries.shape[-1])  # scales the caller's queries in place
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_04_scale_by_num_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_05_scale_after_softmax(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)), valid_lens) / math.sqrt(d)
    return torch.bmm(w, values)


def W_06_lens_as_float_mask_multiply(queries, keys, values, valid_lens=None):
    # masks by multiplying the scores by 0 (score 0 instead of -inf)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        idx = torch.arange(scores.shape[-1])
        keep = idx < (valid_lens[:, None, None] if valid_lens.dim() == 1
                      else valid_lens[..., None])
        scores = scores * keep
    return torch.bmm(torch.softmax(scores, -1), values)


def W_07_2d_lens_flattened_wrong(queries, keys, values, valid_lens=None):
    # (batch, m) lengths reshaped to (m, batch) order by a transpose
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.T.reshape(valid_lens.shape)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_08_lru_of_scale_tensor(queries, keys, values, valid_lens=None):
    # keeps the scale as a float32 tensor: promotes float16/bfloat16? (0-d: no) -> 1-d yes
    d = queries.shape[-1]
    scale = torch.tensor([1.0 / math.sqrt(d)])
    scores = torch.bmm(queries, keys.transpose(1, 2)) * scale
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_09_weights_detached(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    with torch.no_grad():
        w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    return torch.bmm(w, values)


def W_10_first_batch_lens(queries, keys, values, valid_lens=None):
    # one length for the whole batch
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        valid_lens = valid_lens[:1].expand_as(valid_lens)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_11_fully_masked_uniform(queries, keys, values, valid_lens=None):
    # d2l's masked_softmax (-1e6 fill): a row with valid_len 0 averages all values
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        idx = torch.arange(scores.shape[-1])
        keep = idx < (valid_lens[:, None, None] if valid_lens.dim() == 1
                      else valid_lens[..., None])
        scores = scores.masked_fill(~keep, -1e4 if scores.dtype == torch.float16 else -1e6)
    return torch.bmm(torch.softmax(scores, -1), values)


def W_12_keys_values_swapped_when_same_shape(queries, keys, values, valid_lens=None):
    # uses values for the scores when they have the same size as keys (a typo that
    # only works when the checker passes keys == values)
    d = queries.shape[-1]
    kk = values if values.shape == keys.shape else keys
    scores = torch.bmm(queries, kk.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_13_fp16_scores_via_float32_returned(queries, keys, values, valid_lens=None):
    # computes in float32 and forgets to cast back
    q, k, v = queries.float(), keys.float(), values.float()
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    out = torch.bmm(masked_softmax(scores, valid_lens), v)
    return out if queries.dtype != torch.bfloat16 else out.to(queries.dtype)


def W_14_keys_view_instead_of_transpose(queries, keys, values, valid_lens=None):
    b, n, d = keys.shape
    scores = torch.bmm(queries, keys.reshape(b, d, n)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_15_lens_decided_by_last_dim(queries, keys, values, valid_lens=None):
    # a (batch,) valid_lens with batch == num_queries is read as per-query lengths
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 1 and valid_lens.shape[0] == scores.shape[1]:
        valid_lens = valid_lens[None, :].expand(scores.shape[0], -1)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_16_inplace_scale_keys(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    kt = keys.transpose(1, 2)
    if not kt.requires_grad:
        kt.div_(math.sqrt(d))  # a view: divides the caller's keys
        scores = torch.bmm(queries, kt)
    else:
        scores = torch.bmm(queries, kt) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_17_keys_rebuilt_with_torch_tensor(queries, keys, values, valid_lens=None):
    keys = torch.tensor(keys)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_18_values_rebuilt_with_torch_tensor(queries, keys, values, valid_lens=None):
    values = torch.tensor(values)
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)

