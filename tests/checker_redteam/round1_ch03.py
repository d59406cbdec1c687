"""Round 1 red team, chapter 3: check_masked_softmax (3.1) and
check_scaled_dot_product_attention (3.2).

Entries: (checker_name, short_description, kind, callable). Written from the exercise
text alone. The SDPA entries call a correct masked softmax (the reference of 3.1, copied
below as `_masked_softmax`) unless the entry is about the masking itself.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

MS = "check_masked_softmax"
SD = "check_scaled_dot_product_attention"


def _keep(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    positions = torch.arange(X.shape[-1], device=X.device)
    return positions < valid_lens[..., None]


def _masked_softmax(X, valid_lens):
    """The exercise's reference (a right solution), used by the SDPA entries."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    X = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(X, dim=-1) * keep


# ------------------------------------------------------------- 3.1 masked softmax: wrong

def ms_inf_nan_to_num(X, valid_lens):
    """Kind 1: an additive -inf mask (X + mask), then nan_to_num for the fully masked
    rows: right forward, NaN gradient for those rows (the issue's example)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    mask = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(
        ~keep, float("-inf"))
    return torch.nan_to_num(torch.softmax(X + mask, dim=-1))


def ms_inf_where(X, valid_lens):
    """Kind 1: additive -inf mask, then where(row has a valid key, softmax, 0)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    mask = torch.zeros(keep.shape, dtype=X.dtype, device=X.device).masked_fill(
        ~keep, float("-inf"))
    weights = torch.softmax(X + mask, dim=-1)
    return torch.where(keep.any(-1, keepdim=True), weights, torch.zeros_like(weights))


def ms_fill_inf_nan_to_num(X, valid_lens):
    """Right (by luck): masked_fill with -inf, then nan_to_num. In a fully masked row
    every entry is filled, and masked_fill's backward zeroes the gradient there, so
    the NaN of the softmax's backward never reaches X."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.nan_to_num(torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1))


def ms_inf_plain(X, valid_lens):
    """Kind 5: -inf fill, no special case: fully masked rows are NaN."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, float("-inf")), dim=-1)


def ms_d2l(X, valid_lens):
    """Kind 5/6: d2l's version: -1e6 written into X in place; fully masked rows are
    uniform; float16 cannot hold -1e6."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    X = X.reshape(-1, shape[-1])
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    X[~mask] = -1e6
    return torch.softmax(X.reshape(shape), dim=-1)


def ms_minus_1e9_times_keep(X, valid_lens):
    """Kind 6: fills with -1e9 (out of float16's range) and multiplies by keep."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e9), dim=-1) * keep


def ms_minus_1e4_times_keep(X, valid_lens):
    """Kind 2: fills with -1e4 (fits float16) and multiplies by keep: wrong when the
    valid scores are themselves below -1e4 or a masked score dominates."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e4), dim=-1) * keep


def ms_additive_mask(X, valid_lens):
    """Kind 2: additive mask X - 1e4 * (~keep), then times keep: a masked key whose
    score exceeds the valid ones by 1e4 still steals the weight."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X - 1e4 * (~keep).to(X.dtype), dim=-1) * keep


def ms_repeat(X, valid_lens):
    """Kind 3: one length per sequence repeated with .repeat (tiles) instead of
    repeat_interleave: right for batch 1 or equal lengths."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, q, k = X.shape
    if valid_lens.dim() == 1:
        lens = valid_lens.repeat(q)
    else:
        lens = valid_lens.reshape(-1)
    keep = (torch.arange(k, device=X.device)[None, :] < lens[:, None]).reshape(b, q, k)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def ms_off_by_one(X, valid_lens):
    """Kind 5: keeps positions <= valid_len (one key too many)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    keep = torch.arange(X.shape[-1], device=X.device) <= valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def ms_float32_out(X, valid_lens):
    """Kind 6: computes in float32 for stability and returns float32 for float16 in."""
    X = X.float()
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e30), dim=-1) * keep


def ms_naive_exp(X, valid_lens):
    """Kind 2: exp(X) * keep / sum, no max subtraction; zero rows guarded."""
    e = torch.exp(X)
    if valid_lens is not None:
        e = e * _keep(X, valid_lens)
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)


def ms_detach(X, valid_lens):
    """Kind 1: right values, detached."""
    return _masked_softmax(X, valid_lens).detach()


def ms_no_grad_fill(X, valid_lens):
    """Kind 1: builds the filled copy under torch.no_grad() ('the mask needs no
    gradient'), which cuts the graph to X."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    with torch.no_grad():
        filled = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(filled, dim=-1) * keep


def ms_inplace(X, valid_lens):
    """Kind 5: masked_fill_ in place: changes X (and fails on a leaf with grad)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    X.masked_fill_(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(X, dim=-1) * keep


def ms_arange_queries(X, valid_lens):
    """Kind 3: arange over X.shape[1] (queries) instead of the keys: right only when
    num_queries == num_keys (it crashes otherwise)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    keep = torch.arange(X.shape[1], device=X.device) < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def ms_truthy_none(X, valid_lens):
    """Kind 3: `if not valid_lens` tests the tensor's truth value: a batch of one
    with valid_len 0 is treated as 'no mask' (and larger batches crash)."""
    if valid_lens is None or (valid_lens.numel() == 1 and not valid_lens):
        return torch.softmax(X, dim=-1)
    return _masked_softmax(X, valid_lens)


def ms_numpy(X, valid_lens):
    """Kind 1: numpy round trip (right values, no gradient)."""
    x = torch.from_numpy(X.detach().cpu().numpy())
    lens = None if valid_lens is None else torch.from_numpy(valid_lens.cpu().numpy())
    return _masked_softmax(x, lens).to(X.device)


def ms_2d_only_1d(X, valid_lens):
    """Kind 3: handles only (batch,) lengths: a (batch, queries) tensor is indexed
    as if it were (batch,), giving a wrong broadcast for the 2-D case."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens.reshape(-1, 1, 1)[
        : X.shape[0]]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


# ------------------------------------------------------------- 3.1 masked softmax: right

def ms_right_where_finite(X, valid_lens):
    """Right: torch.where with the dtype's min, and zeros via where on a finite tensor."""
    if valid_lens is None:
        return X.softmax(-1)
    keep = _keep(X, valid_lens)
    w = torch.where(keep, X, torch.finfo(X.dtype).min).softmax(-1)
    return torch.where(keep, w, 0.0)


def ms_right_manual(X, valid_lens):
    """Right: manual stable softmax over the kept keys, zero rows via clamp_min."""
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else \
        _keep(X, valid_lens).expand_as(X)
    low = torch.finfo(X.dtype).min
    m = X.masked_fill(~keep, low).amax(-1, keepdim=True)
    m = m.masked_fill(~keep.any(-1, keepdim=True), 0)       # empty rows: shift by 0
    e = torch.exp((X - m).masked_fill(~keep, low))          # masked: exp(min) = 0
    return e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)


def ms_right_float32_inside(X, valid_lens):
    """Wrong since round 8 (float64 rule): computes in float32 and casts back to X's dtype,
    so a float64 X loses float64 accuracy."""
    return _masked_softmax(X.float(), valid_lens).to(X.dtype)


def ms_right_lens_float(X, valid_lens):
    """Right: converts the lengths to float and compares (works for int and float)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    lens = valid_lens.to(torch.float32)
    lens = lens[:, None, None] if lens.dim() == 1 else lens[..., None]
    keep = torch.arange(X.shape[-1], device=X.device, dtype=torch.float32) < lens
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


# ------------------------------------------------------------------------ 3.2 SDPA: wrong

def sdpa_div_d(queries, keys, values, valid_lens=None):
    """Kind 5: divides by d instead of sqrt(d)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / queries.shape[-1]
    return torch.bmm(_masked_softmax(scores, valid_lens), values)


def sdpa_sqrt_v(queries, keys, values, valid_lens=None):
    """Kind 3: scales by sqrt of the value size (right when v == d)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(_masked_softmax(scores, valid_lens), values)


def sdpa_sqrt_n(queries, keys, values, valid_lens=None):
    """Kind 3: scales by sqrt(queries.shape[1]) (the number of queries)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[1])
    return torch.bmm(_masked_softmax(scores, valid_lens), values)


def sdpa_reshape_keys(queries, keys, values, valid_lens=None):
    """Kind 3: keys.reshape(b, d, m) instead of a transpose (right shape)."""
    b, m, d = keys.shape
    scores = torch.bmm(queries, keys.reshape(b, d, m)) / math.sqrt(d)
    return torch.bmm(_masked_softmax(scores, valid_lens), values)


def sdpa_no_mask(queries, keys, values, valid_lens=None):
    """Kind 5: ignores valid_lens."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(torch.softmax(scores, dim=-1), values)


def sdpa_float64(queries, keys, values, valid_lens=None):
    """Kind 6: computes in float64 and returns float64."""
    q, k, v = queries.double(), keys.double(), values.double()
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(_masked_softmax(scores, valid_lens), v)


def sdpa_scale_after(queries, keys, values, valid_lens=None):
    """Kind 5: divides the weights, not the scores, by sqrt(d)."""
    scores = torch.bmm(queries, keys.transpose(1, 2))
    weights = _masked_softmax(scores, valid_lens) / math.sqrt(queries.shape[-1])
    return torch.bmm(weights, values)


def sdpa_inf_nan_to_num(queries, keys, values, valid_lens=None):
    """Kind 1: its own additive -inf mask plus nan_to_num for empty rows."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    if valid_lens is not None:
        keep = _keep(scores, valid_lens)
        scores = scores + torch.zeros(keep.shape, dtype=scores.dtype).masked_fill(
            ~keep, float("-inf"))
    return torch.bmm(torch.nan_to_num(torch.softmax(scores, dim=-1)), values)


def sdpa_fused_bool_mask(queries, keys, values, valid_lens=None):
    """Right on torch 2.14 (the course's pin): torch's fused kernel with a boolean mask.
    Rows with no valid key come out as zeros with zero gradients there (older torch
    versions gave NaN). It does not use the learner's masked_softmax, as asked."""
    mask = None if valid_lens is None else _keep(
        torch.empty(queries.shape[0], queries.shape[1], keys.shape[1],
                    device=queries.device), valid_lens)
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)


def sdpa_detach(queries, keys, values, valid_lens=None):
    """Kind 1: detaches the weights ('they are only for plotting')."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = _masked_softmax(scores, valid_lens).detach()
    return torch.bmm(weights, values)


def sdpa_naive_softmax(queries, keys, values, valid_lens=None):
    """Kind 2: its own softmax without max subtraction."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    e = torch.exp(scores)
    if valid_lens is not None:
        e = e * _keep(scores, valid_lens)
    return torch.bmm(e / e.sum(-1, keepdim=True).clamp_min(1e-30), values)


def sdpa_squeeze_batch(queries, keys, values, valid_lens=None):
    """Kind 3: squeezes everything 'to get matrices': a batch of 1 loses its axis."""
    q, k, v = queries.squeeze(), keys.squeeze(), values.squeeze()
    scores = q @ k.transpose(-1, -2) / math.sqrt(queries.shape[-1])
    if scores.dim() == 2:
        scores = scores[None]
    w = _masked_softmax(scores, valid_lens)
    return (w @ values).squeeze()


def sdpa_numpy(queries, keys, values, valid_lens=None):
    """Kind 1: computes the scores in numpy."""
    s = np.matmul(queries.detach().cpu().numpy(),
                  keys.detach().cpu().numpy().transpose(0, 2, 1)) / math.sqrt(
        queries.shape[-1])
    scores = torch.from_numpy(s).to(queries.device)
    return torch.bmm(_masked_softmax(scores, valid_lens), values)


def sdpa_tuple(queries, keys, values, valid_lens=None):
    """Kind 6: returns (output, weights) like d2l's layer keeps them."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    weights = _masked_softmax(scores, valid_lens)
    return torch.bmm(weights, values), weights


def sdpa_d2l_inplace(queries, keys, values, valid_lens=None):
    """Kind 5/6: uses d2l's in-place -1e6 masked softmax (uniform empty rows)."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(ms_d2l(scores, valid_lens), values)


def sdpa_fill_1e4(queries, keys, values, valid_lens=None):
    """Kind 2: masks with a -1e4 fill (the float16-safe constant seen online) and
    multiplies by the mask: wrong when the scores are of that size."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[-1])
    return torch.bmm(ms_minus_1e4_times_keep(scores, valid_lens), values)


# ------------------------------------------------------------------------ 3.2 SDPA: right

def sdpa_scale_queries(queries, keys, values, valid_lens=None):
    """Right: scales the queries before the product; matmul and transpose(-1, -2)."""
    q = queries / math.sqrt(queries.shape[-1])
    return _masked_softmax(q @ keys.transpose(-1, -2), valid_lens) @ values


def sdpa_einsum(queries, keys, values, valid_lens=None):
    """Right: einsum."""
    scores = torch.einsum("bnd,bmd->bnm", queries, keys) * queries.shape[-1] ** -0.5
    return torch.einsum("bnm,bmv->bnv", _masked_softmax(scores, valid_lens), values)


def sdpa_float64_inside(queries, keys, values, valid_lens=None):
    """Right: computes in float64, casts back."""
    q, k, v = queries.double(), keys.double(), values.double()
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(_masked_softmax(scores, valid_lens), v).to(queries.dtype)


WRONG = [
    (MS, "additive -inf mask then nan_to_num", 1, ms_inf_nan_to_num),
    (MS, "additive -inf mask then where(any valid, w, 0)", 1, ms_inf_where),
    (MS, "-inf fill, empty rows NaN", 5, ms_inf_plain),
    (MS, "d2l's in-place -1e6 (uniform empty rows)", 5, ms_d2l),
    (MS, "-1e9 fill times keep (float16 overflow)", 6, ms_minus_1e9_times_keep),
    (MS, "-1e4 fill times keep", 2, ms_minus_1e4_times_keep),
    (MS, "additive -1e4 mask times keep", 2, ms_additive_mask),
    (MS, ".repeat instead of repeat_interleave", 3, ms_repeat),
    (MS, "positions <= valid_len", 5, ms_off_by_one),
    (MS, "float16 in, float32 out", 6, ms_float32_out),
    (MS, "exp without max subtraction", 2, ms_naive_exp),
    (MS, "detached result", 1, ms_detach),
    (MS, "fill under torch.no_grad()", 1, ms_no_grad_fill),
    (MS, "masked_fill_ in place on X", 5, ms_inplace),
    (MS, "arange over queries, not keys", 3, ms_arange_queries),
    (MS, "tensor truthiness: [0] treated as no mask", 3, ms_truthy_none),
    (MS, "numpy round trip", 1, ms_numpy),
    (MS, "(batch, queries) lengths treated as (batch,)", 3, ms_2d_only_1d),
    # Listed as right until round 8: under issue 12's float64 rule (a float64 input asks
    # for float64 accuracy) computing a float64 X in float32 is wrong (6.4e-8 off).
    (MS, "float32 inside, cast back", 0, ms_right_float32_inside),
    (SD, "divides by d, not sqrt(d)", 5, sdpa_div_d),
    (SD, "scales by sqrt(value size)", 3, sdpa_sqrt_v),
    (SD, "scales by sqrt(number of queries)", 3, sdpa_sqrt_n),
    (SD, "keys.reshape(b, d, m) instead of transpose", 3, sdpa_reshape_keys),
    (SD, "ignores valid_lens", 5, sdpa_no_mask),
    (SD, "returns float64", 6, sdpa_float64),
    (SD, "divides the weights by sqrt(d)", 5, sdpa_scale_after),
    (SD, "own additive -inf mask + nan_to_num", 1, sdpa_inf_nan_to_num),
    (SD, "detached weights", 1, sdpa_detach),
    (SD, "softmax without max subtraction", 2, sdpa_naive_softmax),
    (SD, "squeeze (batch of 1 loses its axis)", 3, sdpa_squeeze_batch),
    (SD, "scores via numpy", 1, sdpa_numpy),
    (SD, "returns (output, weights)", 6, sdpa_tuple),
    (SD, "d2l's in-place -1e6 masked softmax", 5, sdpa_d2l_inplace),
    (SD, "masked softmax with a -1e4 fill", 2, sdpa_fill_1e4),
]

RIGHT_BUT_UNUSUAL = [
    (MS, "where with finfo.min, where(keep, w, 0.0)", 0, ms_right_where_finite),
    (MS, "manual stable softmax over kept keys", 0, ms_right_manual),
    (MS, "lengths compared as floats", 0, ms_right_lens_float),
    (MS, "masked_fill(-inf) then nan_to_num (gradient safe)", 0, ms_fill_inf_nan_to_num),
    (SD, "queries scaled first, matmul", 0, sdpa_scale_queries),
    (SD, "einsum", 0, sdpa_einsum),
    (SD, "float64 inside, cast back", 0, sdpa_float64_inside),
    (SD, "torch's fused kernel with a bool mask (torch >= 2.5 gives 0 for empty rows)", 0,
     sdpa_fused_bool_mask),
]
