"""Round 12 red team (writer A, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/ch03_sdpa.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_09 (2-D valid_lens read transposed when batch == num_queries: a matrix case
with batch 2 and 2 queries), W_16 (float16 through bfloat16) and W_17 (float16 softmax without
the max shift, already caught by the matrix): a float16 case with scores near 100 and 50 whose
two best are one number in bfloat16.
"""
# flake8: noqa
import math
import torch

CHECK = "check_scaled_dot_product_attention"


def _ms(X, valid_lens):
    """A correct masked softmax."""
    up = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    if valid_lens is None:
        return torch.softmax(up, -1).to(X.dtype)
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    keep = pos < vl
    Z = up.masked_fill(~keep, float("-inf"))
    Z = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return (torch.softmax(Z, -1) * keep).to(X.dtype)


# ---------------- correct / odd ----------------
def C_01_bmm(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(_ms(scores, valid_lens), values)


def O_02_einsum_scaled_queries(queries, keys, values, valid_lens=None):
    """Scale the queries first (d ** -0.5), einsum."""
    q = queries * queries.shape[-1] ** -0.5
    scores = torch.einsum("bmd,bnd->bmn", q, keys)
    return torch.einsum("bmn,bnv->bmv", _ms(scores, valid_lens), values)


def O_03_loop_over_batch(queries, keys, values, valid_lens=None):
    """One example at a time, stacked."""
    outs = []
    for i in range(queries.shape[0]):
        s = queries[i] @ keys[i].T / math.sqrt(queries.shape[-1])
        vl = None if valid_lens is None else valid_lens[i:i + 1]
        outs.append((_ms(s[None], vl) @ values[i:i + 1])[0])
    return torch.stack(outs)


# ---------------- wrong ----------------
def W_04_precedence_d_pow(queries, keys, values, valid_lens=None):
    """scores / d ** 1/2 is scores / (d / 2): right only for d = 4."""
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / d ** 1 / 2
    return torch.bmm(_ms(scores, valid_lens), values)


def W_05_single_key_ignores_mask(queries, keys, values, valid_lens=None):
    """With one key every weight is 1, so return values repeated (a new tensor): but a
    query with valid_len 0 must get 0, not the value."""
    if keys.shape[1] == 1:
        return values.repeat(1, queries.shape[1], 1) + 0 * queries.sum(-1, keepdim=True)
    return C_01_bmm(queries, keys, values, valid_lens)


def W_06_view_noncontig(queries, keys, values, valid_lens=None):
    """Flattens with .view(-1, d) for one big matmul: fails on non-contiguous inputs."""
    b, m, d = queries.shape
    n = keys.shape[1]
    q = queries.view(b * m, d)
    scores = torch.bmm(q.view(b, m, d), keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(_ms(scores, valid_lens), values)


def W_07_scale_in_place(queries, keys, values, valid_lens=None):
    """queries /= sqrt(d) in place (when no grad is needed): changes the caller's tensor."""
    d = queries.shape[-1]
    if not queries.requires_grad:
        queries /= math.sqrt(d)
        q = queries
    else:
        q = queries / math.sqrt(d)
    return torch.bmm(_ms(torch.bmm(q, keys.transpose(1, 2)), valid_lens), values)


def W_08_scale_by_value_dim(queries, keys, values, valid_lens=None):
    """sqrt of the values' size."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(_ms(scores, valid_lens), values)


def W_09_lens_1d_expand_over_keys_sq(queries, keys, values, valid_lens=None):
    """Treats 2-D valid_lens (batch, m) as per key when m == n... simplified: passes 2-D
    lengths transposed when square (valid_lens.T) "to line up with the keys"."""
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    if valid_lens is not None and valid_lens.dim() == 2 and valid_lens.shape[0] == \
            valid_lens.shape[1]:
        valid_lens = valid_lens.T
    return torch.bmm(_ms(scores, valid_lens), values)


def O_10_float16_scores_in_float32(queries, keys, values, valid_lens=None):
    """(Meant wrong, turned out right:) float16 scores and softmax in float32, weights cast
    back to float16 before the bmm with the values; output float16."""
    d = queries.shape[-1]
    scores = torch.bmm(queries.float(), keys.float().transpose(1, 2)) / math.sqrt(d) \
        if queries.dtype == torch.float16 else \
        torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    w = torch.softmax(scores.masked_fill(_mask(scores, valid_lens), float("-inf")), -1) \
        if valid_lens is not None and bool((valid_lens > 0).all()) else _ms(scores, valid_lens)
    return torch.bmm(w.to(values.dtype), values)


def _mask(scores, valid_lens):
    pos = torch.arange(scores.shape[-1])
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
    return ~(pos < vl)


def W_11_weights_global_attr(queries, keys, values, valid_lens=None):
    """Keeps the last weights in a module-level cache and reuses them when the shapes
    match and valid_lens is the same object (d2l's attention_weights habit gone wrong)."""
    st = W_11_weights_global_attr.__dict__.setdefault("st", {})
    key = (queries.shape, keys.shape, id(valid_lens) if valid_lens is not None else None)
    if key in st and not (queries.requires_grad or keys.requires_grad):
        w = st[key]
    else:
        d = queries.shape[-1]
        w = _ms(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
        st[key] = w.detach()
    return torch.bmm(w, values)


def O_12_scale_after_float16_qk_ruled(queries, keys, values, valid_lens=None):
    """Q K^T in float16 then / sqrt(d): the same as C01 (ruled acceptable in round 8)."""
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2))
    scores = scores / math.sqrt(d)
    return torch.bmm(_ms(scores, valid_lens), values)


def W_13_sqrt_of_float32_tensor(queries, keys, values, valid_lens=None):
    """d ** 0.5 computed from a float32 tensor of d and used via .item(): float32 rounding
    of sqrt(d) for float64 inputs (d = 3: 1.7320508 vs 1.7320508075688772)."""
    s = torch.tensor(float(queries.shape[-1]), dtype=torch.float32).sqrt().item()
    scores = torch.bmm(queries, keys.transpose(1, 2)) / s
    return torch.bmm(_ms(scores, valid_lens), values)


def W_14_valid_lens_none_uses_ones(queries, keys, values, valid_lens=None):
    """valid_lens None replaced by the number of queries (confusing m and n)."""
    if valid_lens is None:
        valid_lens = torch.full((queries.shape[0],), queries.shape[1])
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(_ms(scores, valid_lens), values)


def W_15_values_transposed_when_square(queries, keys, values, valid_lens=None):
    """bmm(weights, values) but values taken as (batch, d_v, n) and transposed back only
    when n != d_v (the learner 'fixes' a shape error)."""
    d = queries.shape[-1]
    w = _ms(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    v = values if values.shape[1] != values.shape[2] else values.transpose(1, 2)
    return torch.bmm(w, v)


def W_16_float16_through_bfloat16(queries, keys, values, valid_lens=None):
    """float16 inputs computed in bfloat16 ("no overflow") then cast back."""
    if queries.dtype == torch.float16:
        q, k, v = (t.to(torch.bfloat16) for t in (queries, keys, values))
        d = q.shape[-1]
        s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d)
        return torch.bmm(_ms(s, valid_lens), v).to(torch.float16)
    return C_01_bmm(queries, keys, values, valid_lens)


def W_17_half_manual_softmax_no_shift(queries, keys, values, valid_lens=None):
    """float16 inputs: a manual exp / sum in float16 (no max shift), masked by multiplying:
    NaN once a score exceeds ~11."""
    if queries.dtype != torch.float16:
        return C_01_bmm(queries, keys, values, valid_lens)
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    n = s.shape[-1]
    if valid_lens is None:
        keep = torch.ones_like(s, dtype=torch.bool)
    else:
        vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, :, None]
        keep = torch.arange(n) < vl
    e = torch.exp(s) * keep
    t = e.sum(-1, keepdim=True)
    return torch.bmm(e / torch.where(t > 0, t, torch.ones_like(t)), values)


def W_18_mask_from_valid_lens_max(queries, keys, values, valid_lens=None):
    """Truncates the keys to valid_lens.max() and ignores per-row lengths ('the batch is
    padded to the longest'): right only when all lengths are equal."""
    if valid_lens is None:
        return C_01_bmm(queries, keys, values)
    L = int(valid_lens.max().clamp(max=keys.shape[1]))
    if L == 0:
        return queries.new_zeros(queries.shape[0], queries.shape[1], values.shape[-1]) \
            + 0 * queries.sum()
    return C_01_bmm(queries, keys[:, :L], values[:, :L])


def W_19_half_returns_float32(queries, keys, values, valid_lens=None):
    """float16 inputs computed in float32 and returned in float32 (no cast back)."""
    if queries.dtype == torch.float16:
        return C_01_bmm(queries.float(), keys.float(), values.float(), valid_lens)
    return C_01_bmm(queries, keys, values, valid_lens)
