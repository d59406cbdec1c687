"""Round 11 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/ch03_sdpa.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
CHECK = "check_scaled_dot_product_attention"


def _keep(X, valid_lens):
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        return pos[None, None, :] < valid_lens[:, None, None]
    return pos[None, None, :] < valid_lens[:, :, None]


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def C_01_standard(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_02_scale_queries_first(queries, keys, values, valid_lens=None):
    q = queries * (1.0 / math.sqrt(queries.shape[-1]))
    return masked_softmax(q @ keys.mT, valid_lens) @ values


def O_03_einsum(queries, keys, values, valid_lens=None):
    s = torch.einsum("bmd,bnd->bmn", queries, keys) / queries.shape[-1] ** 0.5
    return torch.einsum("bmn,bnv->bmv", masked_softmax(s, valid_lens), values)


def W_01_d2l_masked_softmax(queries, keys, values, valid_lens=None):
    # d2l's masked_softmax: -1e6 fill, so a valid_len of 0 gives uniform weights
    def d2l_ms(X, valid_lens):
        if valid_lens is None:
            return torch.softmax(X, dim=-1)
        shape = X.shape
        if valid_lens.dim() == 1:
            valid_lens = torch.repeat_interleave(valid_lens, shape[1])
        else:
            valid_lens = valid_lens.reshape(-1)
        X = X.reshape(-1, shape[-1])
        mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
        X = X.masked_fill(~mask, -1e6 if X.dtype != torch.float16 else -6e4)
        return torch.softmax(X.reshape(shape), dim=-1)
    d = queries.shape[-1]
    return torch.bmm(d2l_ms(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                            valid_lens), values)


def W_02_scale_by_value_dim(queries, keys, values, valid_lens=None):
    d = values.shape[-1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens), values)


def W_03_squeeze(queries, keys, values, valid_lens=None):
    return C_01_standard(queries, keys, values, valid_lens).squeeze()


def W_04_only_1d_lens(queries, keys, values, valid_lens=None):
    if valid_lens is not None and valid_lens.dim() != 1:
        valid_lens = valid_lens.max(dim=1).values
    return C_01_standard(queries, keys, values, valid_lens)


def W_05_scale_by_num_keys(queries, keys, values, valid_lens=None):
    d = keys.shape[1]
    return torch.bmm(masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d),
                                    valid_lens), values)


def W_06_float32_sqrt_tensor(queries, keys, values, valid_lens=None):
    d = torch.tensor(float(queries.shape[-1]))
    s = torch.bmm(queries, keys.transpose(1, 2)) / d.sqrt().to(queries.dtype)
    return torch.bmm(masked_softmax(s, valid_lens), values)


def W_07_keys_viewed_not_transposed(queries, keys, values, valid_lens=None):
    # reshape instead of transpose: right only when n == 1 or d == 1
    b, n, d = keys.shape
    s = torch.bmm(queries, keys.reshape(b, d, n)) / math.sqrt(d)
    return torch.bmm(masked_softmax(s, valid_lens), values)


def W_08_weights_cached(queries, keys, values, valid_lens=None, _memo={}):
    key = (queries.shape, keys.shape)
    if key not in _memo:
        _memo[key] = masked_softmax(
            torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1]), valid_lens)
    return torch.bmm(_memo[key], values)


def W_09_scores_float16_overflow_guard_clamp(queries, keys, values, valid_lens=None):
    # clamps the scores into the float16 range for every dtype "to be safe"
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    s = s.clamp(-6e4, 6e4)
    return torch.bmm(masked_softmax(s, valid_lens), values)


def W_10_valid_lens_in_place_clamp(queries, keys, values, valid_lens=None):
    if valid_lens is not None:
        valid_lens.clamp_(max=keys.shape[1])
    return C_01_standard(queries, keys, values, valid_lens)


def W_11_mask_applied_after_scale_with_minus_1e9_float16(queries, keys, values, valid_lens=None):
    # masking with a finite fill in float32 then casting: fine except float16 where it
    # is done in the input dtype and -1e9 becomes -inf
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is None:
        w = torch.softmax(s, -1)
    else:
        keep = _keep(s, valid_lens)
        w = torch.softmax(s.masked_fill(~keep, -1e4), -1) * keep
    return torch.bmm(w, values)


def O_04_one_key_expand_masked(queries, keys, values, valid_lens=None):
    # for a single key the output is that value for each query, unless it is masked
    if keys.shape[1] == 1:
        out = values.expand(-1, queries.shape[1], -1)
        if valid_lens is not None:
            keep = _keep(torch.empty(queries.shape[0], queries.shape[1], 1), valid_lens)
            out = out * keep
        return out + 0 * queries.sum() + 0 * keys.sum()
    return C_01_standard(queries, keys, values, valid_lens)


def W_13_dropout_in_sdpa(queries, keys, values, valid_lens=None):
    # adds d2l's dropout (p=0.1) though the exercise has none
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    w = torch.nn.functional.dropout(masked_softmax(s, valid_lens), 0.1,
                                    training=torch.is_grad_enabled())
    return torch.bmm(w, values)


def W_14_one_key_clone_ignores_mask(queries, keys, values, valid_lens=None):
    # one key: every weight is 1, so return a copy of the value (ignores valid_len 0)
    if keys.shape[1] == 1:
        return values.expand(-1, queries.shape[1], -1).clone()
    return C_01_standard(queries, keys, values, valid_lens)


def W_15_scale_queries_in_place_no_grad(queries, keys, values, valid_lens=None):
    # scales the queries in place to save a (b, m, d) copy (autograd forbids it on a
    # leaf that requires grad, so only then a copy): changes the caller's queries
    d = queries.shape[-1]
    q = queries.div_(math.sqrt(d)) if not queries.requires_grad else queries / math.sqrt(d)
    return torch.bmm(masked_softmax(torch.bmm(q, keys.transpose(1, 2)), valid_lens), values)


def W_16_valid_lens_float_mask_in_X_dtype(queries, keys, values, valid_lens=None):
    # builds the mask by comparing float positions in the scores' dtype
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is None:
        return torch.bmm(torch.softmax(s, -1), values)
    pos = torch.arange(s.shape[-1], dtype=s.dtype)
    vl = valid_lens.to(s.dtype)
    keep = pos < (vl[:, None, None] if vl.dim() == 1 else vl[:, :, None])
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    return torch.bmm(w, values)


def W_17_float16_returns_float32(queries, keys, values, valid_lens=None):
    # computes in float32 for half inputs and forgets to cast back
    if queries.dtype in (torch.float16, torch.bfloat16):
        queries, keys, values = queries.float(), keys.float(), values.float()
    return C_01_standard(queries, keys, values, valid_lens)


def W_18_max_per_matrix_softmax(queries, keys, values, valid_lens=None):
    # own masked softmax with one max per example (over all its queries and keys)
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    keep = torch.ones_like(s, dtype=torch.bool) if valid_lens is None else _keep(s, valid_lens)
    z = s.masked_fill(~keep, float("-inf"))
    m = z.amax(dim=(1, 2), keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(z - m)
    t = e.sum(-1, keepdim=True)
    return torch.bmm(e / torch.where(t > 0, t, torch.ones_like(t)), values)


def W_19_weights_detached(queries, keys, values, valid_lens=None):
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(masked_softmax(s, valid_lens).detach(), values)


def W_20_additive_inf_nan_to_num(queries, keys, values, valid_lens=None):
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        keep = _keep(s, valid_lens)
        s = s + torch.zeros_like(s).masked_fill(~keep, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    return torch.bmm(w, values)
