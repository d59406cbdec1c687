"""Round 11 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_07 (the first row's maximum per example), W_15 (one maximum per example, over
every axis but the first) and W_17 (one maximum per matrix, over the last two axes) are each
row's own maximum in 1-D and 2-D, and every extreme-range case was 2-D. The checker now has a
(2, 2, 3) batch whose rows lie near 0 and near -800 inside one matrix and a (2, 2, 2, 3)
batch whose rows lie far apart across the matrices of one example and inside one matrix.

S_02 (+inf treated as masked) and S_03 (nan_to_num on the output, which changes only all
-inf rows): the text leaves +inf and all -inf rows open. O_04 and O_05 compute the sum or its
reciprocal in the half dtype, which the round-9 ruling allows.
"""
# flake8: noqa
import torch
CHECK = "check_softmax"
HALF = (torch.float16, torch.bfloat16)


def _up(x):
    return x.float() if x.dtype in HALF else x


def C_01_standard(scores):
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def O_02_logsumexp(scores):
    x = _up(scores)
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True)).to(scores.dtype)


def O_03_detached_max(scores):
    x = _up(scores)
    m = x.detach().max(dim=-1, keepdim=True).values
    e = torch.exp(x - m)
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_01_shift_only_positive_max(scores):
    # "the max is only needed to stop overflow": shift only when it is positive
    x = _up(scores)
    m = x.amax(dim=-1, keepdim=True).clamp_min(0)
    e = torch.exp(x - m)
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_02_clamp_exponent_min(scores):
    # clamps x - max at -80 "to avoid underflow": -inf keys get weight 1.8e-35, not 0
    x = _up(scores)
    z = (x - x.amax(dim=-1, keepdim=True)).clamp_min(-80.0)
    e = torch.exp(z)
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_03_view_needs_contiguous(scores):
    # flattens with .view: fails on a transposed (non-contiguous) input
    x = _up(scores)
    n = x.shape[-1]
    flat = x.view(-1, n)
    e = torch.exp(flat - flat.max(dim=1, keepdim=True).values)
    return (e / e.sum(dim=1, keepdim=True)).view(x.shape).to(scores.dtype)


def W_04_dim1_hardcoded(scores):
    x = _up(scores)
    if x.dim() == 1:
        x = x[None]
        e = torch.exp(x - x.max(dim=1, keepdim=True).values)
        return (e / e.sum(dim=1, keepdim=True))[0].to(scores.dtype)
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return (e / e.sum(dim=1, keepdim=True)).to(scores.dtype)


def W_05_detached_denominator(scores):
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True).detach()).to(scores.dtype)


def W_06_in_place_when_no_grad(scores):
    # saves memory when no gradient is needed: writes into the caller's tensor
    x = _up(scores)
    if not x.requires_grad:
        x.sub_(x.amax(dim=-1, keepdim=True))
        x.exp_()
        x.div_(x.sum(dim=-1, keepdim=True))
        return x.to(scores.dtype)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_07_max_over_unsqueeze_minus2(scores):
    # max per row, but broadcast back along the wrong axis for >2-D inputs
    x = _up(scores)
    m = x.max(dim=-1).values
    if x.dim() >= 2:
        m = m.reshape(m.shape[0], -1)[..., :1].reshape(*m.shape[:1], *([1] * (x.dim() - 1)))
    else:
        m = m.unsqueeze(-1)
    e = torch.exp(x - m)
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def S_02_where_isinf_zero(scores):
    # treats every infinite score as masked: +inf too gets weight 0; -inf via where
    x = _up(scores)
    finite = torch.isfinite(x)
    safe = torch.where(finite, x, torch.zeros_like(x))
    m = torch.where(finite, x, torch.full_like(x, -1e30)).amax(dim=-1, keepdim=True)
    e = torch.where(finite, torch.exp(safe - m), torch.zeros_like(x))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def O_04_sum_in_input_dtype_first(scores):
    # float64 ok, float16: exp in float32 but the sum divided in float16 after a cast
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True)).to(scores.dtype)
    s = e.sum(dim=-1, keepdim=True, dtype=torch.float16) if scores.dtype in HALF else \
        e.sum(dim=-1, keepdim=True)
    return (e / s).to(scores.dtype)


def W_10_max_from_first_row(scores):
    # uses the first row's max for every row (batch-0 shortcut)
    x = _up(scores)
    m = x.reshape(-1, x.shape[-1])[0].max()
    e = torch.exp(x - m)
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_11_returns_float32_for_bf16(scores):
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    out = e / e.sum(dim=-1, keepdim=True)
    return out.to(scores.dtype) if scores.dtype != torch.bfloat16 else out


def W_12_mean_shift(scores):
    # subtracts the row mean: fine for moderate spreads, overflows for a dominating score
    x = _up(scores)
    fin = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
    e = torch.exp(x - fin.mean(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def O_05_reciprocal_in_half(scores):
    # multiplies by the reciprocal of the sum computed in the input dtype (bf16: 3 digits)
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    r = (1.0 / e.sum(dim=-1, keepdim=True)).to(scores.dtype)
    return e.to(scores.dtype) * r


def S_03_nan_to_num_output(scores):
    # guards all-(-inf) rows by nan_to_num: hides NaN but also kills +inf rows/grad
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return torch.nan_to_num(e / e.sum(dim=-1, keepdim=True), nan=0.0).to(scores.dtype)


def W_15_max_per_example(scores):
    # "one max per example": over every axis but the first; per row for 2-D, per
    # matrix for a (batch, m, n) input -> rows far below their matrix's max underflow
    x = _up(scores)
    dims = tuple(range(1, x.dim())) if x.dim() >= 2 else (-1,)
    e = torch.exp(x - x.amax(dim=dims, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_16_clamp_scores_float16_range(scores):
    # clamps the scores into +-6e4 first "so float16 cannot overflow", every dtype
    x = _up(scores).clamp(-6e4, 6e4)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)


def W_17_max_over_last_two_axes(scores):
    # per-matrix max for >= 2-D inputs (an "attention matrix" max), per row for 1-D
    x = _up(scores)
    dims = (-2, -1) if x.dim() >= 3 else (-1,)
    e = torch.exp(x - x.amax(dim=dims, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(scores.dtype)
