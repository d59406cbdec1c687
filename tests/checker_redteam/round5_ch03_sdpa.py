"""Round 5 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch03_sdpa.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_scaled_dot_product_attention"


def masked_softmax(X, valid_lens, fill=None):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) < v[..., None]
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min if fill is None else fill),
                      dim=-1)
    return w * keep


def C_01_standard(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_02_scale_queries_first_einsum(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    scores = torch.einsum("bmd,bnd->bmn", q, keys)
    return torch.einsum("bmn,bnv->bmv", masked_softmax(scores, valid_lens), values)


def O_03_transposed_product(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = (keys @ queries.transpose(-1, -2)).transpose(-1, -2) / d ** 0.5
    return masked_softmax(scores, valid_lens) @ values


def O_04_book_masked_softmax(queries, keys, values, valid_lens=None):
    from book.attention import masked_softmax as ms
    d = queries.shape[-1]
    return torch.bmm(ms(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens),
                     values)


def W_01_scale_by_d(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / d, valid_lens),
                     values)


def W_02_scale_by_value_dim(queries, keys, values, valid_lens=None):
    d = values.shape[-1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens), values)


def W_03_scale_by_num_keys(queries, keys, values, valid_lens=None):
    d = keys.shape[1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens), values)


def W_04_no_scale(queries, keys, values, valid_lens=None):
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)), valid_lens), values)


def W_05_scale_by_num_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens), values)


def W_06_softmax_over_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 1:
        w = masked_softmax(s.transpose(1, 2), None).transpose(1, 2)
        keep = torch.arange(s.shape[-1], device=s.device) < valid_lens[:, None, None]
        w = w * keep
    else:
        w = masked_softmax(s.transpose(1, 2), None).transpose(1, 2)
    return torch.bmm(w, values)


def W_07_ignores_valid_lens(queries, keys, values, valid_lens=None):
    return C_01_standard(queries, keys, values, None)


def W_08_d2l_minus_1e6(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens, fill=-1e6) if valid_lens is None else
                     _uniform_zero_rows(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                        valid_lens), values)


def _uniform_zero_rows(X, valid_lens):
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) < v[..., None]
    return torch.softmax(X.masked_fill(~keep, -1e4 if X.dtype == torch.float16 else -1e6), -1)


def W_09_no_grad_scores(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    with torch.no_grad():
        w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    return torch.bmm(w, values)


def W_10_upcast_float32(queries, keys, values, valid_lens=None):
    return C_01_standard(queries.float(), keys.float(), values.float(), valid_lens)


def W_11_inplace_scale_queries(queries, keys, values, valid_lens=None):
    queries /= math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)), valid_lens), values)


def W_12_mask_values_not_weights(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = torch.softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), -1)
    if valid_lens is not None:
        v = valid_lens if valid_lens.dim() == 1 else valid_lens.max(-1).values
        keep = torch.arange(keys.shape[1], device=keys.device) < v[:, None]
        values = values * keep[..., None]
    return torch.bmm(w, values)


def W_13_dropout_left_in(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    return torch.bmm(F.dropout(w, 0.1), values)


def W_14_batch_one(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    s = (queries[0] @ keys[0].T / math.sqrt(d)).unsqueeze(0).expand(queries.shape[0], -1, -1)
    return torch.bmm(masked_softmax(s, valid_lens), values)


def W_15_masked_softmax_square_only(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 2:
        keep = torch.arange(s.shape[-1], device=s.device) < valid_lens[:, None, :]
        w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    else:
        w = masked_softmax(s, valid_lens)
    return torch.bmm(w, values)


def W_16_keys_T_reverses_batch(queries, keys, values, valid_lens=None):
    # keys.mT is right; keys.transpose(0, 2).transpose(0, 1) scrambles unless b == 1? (permute bug)
    d = queries.shape[-1]
    kt = keys.permute(0, 2, 1) if keys.shape[0] == 1 else keys.reshape(keys.shape[0], d, -1)
    return torch.bmm(masked_softmax(torch.bmm(queries, kt) / math.sqrt(d), valid_lens), values)


def W_17_float16_scale_after_product_overflow(queries, keys, values, valid_lens=None):
    # computes Q K^T in float16 unscaled then exp manually without max subtraction
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    e = torch.exp(s)
    if valid_lens is not None:
        v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        e = e * (torch.arange(s.shape[-1], device=s.device) < v[..., None])
    z = e.sum(-1, keepdim=True)
    return torch.bmm(e / torch.where(z > 0, z, torch.ones_like(z)), values)


def W_18_view_needs_contiguous(queries, keys, values, valid_lens=None):
    b, m, d = queries.shape
    n = keys.shape[1]
    q2 = queries.view(b * m, d)
    s = torch.stack([q2.view(b, m, d)[i] @ keys[i].T for i in range(b)]) / math.sqrt(d)
    return torch.bmm(masked_softmax(s, valid_lens), values.view(b, n, -1))


def O_05_conditional_zeroing(queries, keys, values, valid_lens=None):
    # builds the mask with valid_lens.long() only when it is a float tensor: an int32 tensor
    # goes through .tolist() and a python loop... but zero rows become uniform
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is None:
        return torch.bmm(torch.softmax(s, -1), values)
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(s.shape[-1], device=s.device) < v[..., None]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    w = w * keep if bool((v == 0).any()) else w
    return torch.bmm(w, values).contiguous()


def W_20_returns_weights_too(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    return torch.bmm(w, values), w


def W_21_always_float64(queries, keys, values, valid_lens=None):
    return C_01_standard(queries.double(), keys.double(), values.double(), valid_lens)


# Listed as right (O_06) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: the softmax in float32 for every dtype: a
# float64 input comes out 7.4e-8 off.
def W_29_float32_softmax_inside_was_O_06(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is None:
        return torch.bmm(torch.softmax(s, -1), values)
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(s.shape[-1], device=s.device) < v[..., None]
    w = torch.softmax(s.float().masked_fill(~keep, -3.0e38), -1).to(s.dtype) * keep
    return torch.bmm(w, values)


def W_23_masks_queries_not_keys(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    w = torch.softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), -1)
    if valid_lens is not None:
        v = valid_lens if valid_lens.dim() == 1 else valid_lens.max(-1).values
        w = w * (torch.arange(w.shape[1], device=w.device) < v[:, None])[..., None]
    return torch.bmm(w, values)


def W_24_global_max_len(queries, keys, values, valid_lens=None):
    if valid_lens is not None:
        valid_lens = torch.full(valid_lens.shape[:1], int(valid_lens.max()),
                                device=valid_lens.device)
    return C_01_standard(queries, keys, values, valid_lens)


def S_01_torch_sdpa(queries, keys, values, valid_lens=None):
    if valid_lens is None:
        return F.scaled_dot_product_attention(queries, keys, values)
    v = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(keys.shape[1], device=keys.device) < v[..., None]
    keep = keep.expand(queries.shape[0], queries.shape[1], keys.shape[1])
    out = F.scaled_dot_product_attention(queries, keys, values,
                                         attn_mask=keep | ~keep.any(-1, keepdim=True))
    return out * keep.any(-1, keepdim=True)


def W_25_none_path_float32(queries, keys, values, valid_lens=None):
    if valid_lens is None:
        return C_01_standard(queries.float(), keys.float(), values.float(), None)
    return C_01_standard(queries, keys, values, valid_lens)


def W_26_float64_computed_in_float32(queries, keys, values, valid_lens=None):
    if queries.dtype == torch.float64:
        queries, keys, values = queries.float(), keys.float(), values.float()
    return C_01_standard(queries, keys, values, valid_lens)


def W_27_keys_detached(queries, keys, values, valid_lens=None):
    return C_01_standard(queries, keys.detach(), values, valid_lens)


def W_28_values_detached(queries, keys, values, valid_lens=None):
    return C_01_standard(queries, keys, values.detach(), valid_lens)
