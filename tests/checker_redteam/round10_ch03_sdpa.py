"""Round 10 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/03_sdpa.py with the names W01_x written
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
    ar = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        keep = ar[None, None, :] < valid_lens[:, None, None]
    else:
        keep = ar[None, None, :] < valid_lens[:, :, None]
    s = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(s, dim=-1) * keep


def _sdpa(q, k, v, valid_lens, scale):
    scores = torch.bmm(q, k.transpose(1, 2)) / scale
    return torch.bmm(masked_softmax(scores, valid_lens), v)


def W_01_scale_value_dim(queries, keys, values, valid_lens=None):
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(values.shape[-1]))


def W_02_scale_num_keys(queries, keys, values, valid_lens=None):
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(keys.shape[1]))


def W_03_scale_num_queries(queries, keys, values, valid_lens=None):
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(queries.size(1)))


def W_04_ignore_2d_lens(queries, keys, values, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = None
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(queries.shape[-1]))


def W_05_cross_batch(queries, keys, values, valid_lens=None):
    # flattens the batch: every query sees every example's keys
    b, m, d = queries.shape
    n = keys.shape[1]
    scores = queries.reshape(-1, d) @ keys.reshape(-1, d).T / math.sqrt(d)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(b, m)
        keep = torch.arange(b * n, device=scores.device)[None, :] < lens.reshape(-1, 1)
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        w = torch.softmax(scores, -1) * keep
    else:
        w = torch.softmax(scores, -1)
    return (w @ values.reshape(-1, values.shape[-1])).reshape(b, m, -1)


def W_06_float32_out(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries.float(), keys.float().transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values.float())


def O_04_masked_fill_neginf_then_nan_to_num(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None:
        n = scores.shape[-1]
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(n, device=scores.device)[None, None, :] < lens[:, :, None]
        scores = scores.masked_fill(~keep, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores, -1))
    return torch.bmm(w, values)


def W_08_repeat_lens(queries, keys, values, valid_lens=None):
    b, m, _ = queries.shape
    if valid_lens is not None and valid_lens.dim() == 1:
        valid_lens = valid_lens.repeat(m).reshape(b, m)
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(queries.shape[-1]))


def W_09_inplace_scale_queries(queries, keys, values, valid_lens=None):
    q = queries.detach()
    q /= math.sqrt(queries.shape[-1])
    return _sdpa(queries, keys, values, valid_lens, 1.0)


_SCALE = {}


def W_10_scale_cached_first_call(queries, keys, values, valid_lens=None):
    if "s" not in _SCALE:
        _SCALE["s"] = math.sqrt(queries.shape[-1])
    return _sdpa(queries, keys, values, valid_lens, _SCALE["s"])


def W_11_softmax_over_queries(queries, keys, values, valid_lens=None):
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = masked_softmax(scores.transpose(1, 2), None).transpose(1, 2)
    if valid_lens is not None:
        w = masked_softmax(scores, valid_lens)
    return torch.bmm(w, values)


def W_12_mask_fill_minus_1e6_uniform_rows(queries, keys, values, valid_lens=None):
    # d2l's masked softmax: rows with valid_len 0 get uniform weights (mean of all values)
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        n = scores.shape[-1]
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(n, device=scores.device)[None, None, :] < lens[:, :, None]
        scores = scores.masked_fill(~keep, -1e6)
    return torch.bmm(torch.softmax(scores, -1), values)


def W_13_scale_by_keys_numel(queries, keys, values, valid_lens=None):
    # d from keys.shape[-1] of the transposed tensor: n when transposed first
    kt = keys.transpose(1, 2)
    d = kt.shape[-1]
    return torch.bmm(masked_softmax(torch.bmm(queries, kt) / math.sqrt(d), valid_lens),
                     values)


def C_01_reference(queries, keys, values, valid_lens=None):
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(queries.shape[-1]))


def O_02_prescaled_einsum(queries, keys, values, valid_lens=None):
    q = queries * queries.shape[-1] ** -0.5
    scores = torch.einsum("bmd,bnd->bmn", q, keys)
    return torch.einsum("bmn,bnv->bmv", masked_softmax(scores, valid_lens), values)


def O_03_float64_inside(queries, keys, values, valid_lens=None):
    out = _sdpa(queries.double(), keys.double(), values.double(), valid_lens,
                math.sqrt(queries.shape[-1]))
    return out.to(queries.dtype)


def W_14_clamp_lens_inplace(queries, keys, values, valid_lens=None):
    if valid_lens is not None:
        valid_lens.clamp_(max=keys.shape[1])
    return _sdpa(queries, keys, values, valid_lens, math.sqrt(queries.shape[-1]))


def W_15_arange_num_queries(queries, keys, values, valid_lens=None):
    # positions counted along the queries axis: only right when m == n
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        m = queries.shape[1]
        n = keys.shape[1]
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        pos = torch.arange(m, device=scores.device)
        pos = torch.cat([pos, pos.new_full((max(n - m, 0),), n)])[:n] if n >= m else pos[:n]
        keep = pos[None, None, :] < lens[:, :, None]
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
        return torch.bmm(torch.softmax(scores, -1) * keep, values)
    return torch.bmm(torch.softmax(scores, -1), values)


def W_16_half_scores_scaled_after_overflow_upcast_late(queries, keys, values, valid_lens=None):
    # float16: Q K^T in float16, then divides by d (not sqrt d) only for float16 to
    # "avoid overflow"
    d = queries.shape[-1]
    scale = d if queries.dtype == torch.float16 else math.sqrt(d)
    return _sdpa(queries, keys, values, valid_lens, scale)


def W_17_view_fails_noncontiguous(queries, keys, values, valid_lens=None):
    b, m, d = queries.shape
    n = keys.shape[1]
    q2 = queries.view(b * m, d)
    scores = torch.stack([q2[i * m:(i + 1) * m] @ keys[i].T for i in range(b)]) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_05_batch_one_2d_path(queries, keys, values, valid_lens=None):
    if queries.shape[0] == 1:
        s = queries[0] @ keys[0].T / math.sqrt(queries.shape[-1])
        return (masked_softmax(s[None], valid_lens)[0] @ values[0])[None]
    return C_01_reference(queries, keys, values, valid_lens)


def W_18_transpose_inplace(queries, keys, values, valid_lens=None):
    # transpose_ changes the caller's keys to (batch, d, n)
    if not keys.requires_grad:
        kt = keys.transpose_(1, 2)
    else:
        kt = keys.transpose(1, 2)
    scores = torch.bmm(queries, kt) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_19_single_key_returns_values_view(queries, keys, values, valid_lens=None):
    # one key and no mask: returns values expanded, a view aliasing the input
    if keys.shape[1] == 1 and valid_lens is None:
        return values.expand(queries.shape[0], queries.shape[1], values.shape[-1])
    return C_01_reference(queries, keys, values, valid_lens)
