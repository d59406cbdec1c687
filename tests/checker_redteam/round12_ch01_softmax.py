"""Round 12 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_15 (float16 computed through bfloat16: a float16 case of close scores near
+-100, 100.25 and 99.75, one number in bfloat16) and W_16 (a result kept between calls, keyed
on the shape, the dtype and the first and last entries: a second call under no_grad with the
same ends and other values between them). Both are conditions of the matrix's call.
A_12 (finfo.min fill of -inf) is accepted on purpose (lead's ruling).
"""
# flake8: noqa
import torch

CHECK = "check_softmax"


def _ref(x):
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def _up(x):
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


# ---------------- correct / odd ----------------
def C_01_max_shift(scores):
    x = _up(scores)
    return _ref(x).to(scores.dtype)


def O_02_logsumexp(scores):
    """exp(x - logsumexp(x)): logsumexp is not forbidden, and it is stable."""
    x = _up(scores)
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True)).to(scores.dtype)


def O_03_detached_max_reciprocal(scores):
    """The shift constant is detached (the gradient does not depend on c); multiply by 1/sum."""
    x = _up(scores)
    m = x.detach().max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return (e * e.sum(-1, keepdim=True).reciprocal()).to(scores.dtype)


def O_04_reverse_all_dims(scores):
    """x.permute(reversed dims): the last axis becomes the first; reduce over dim 0."""
    x = _up(scores)
    t = x.permute(*reversed(range(x.dim())))
    e = torch.exp(t - t.max(dim=0, keepdim=True).values)
    w = e / e.sum(dim=0, keepdim=True)
    return w.permute(*reversed(range(x.dim()))).to(scores.dtype)


# ---------------- wrong ----------------
def W_05_shift_only_positive_max(scores):
    """Only shift when the max is positive (clamp(min=0)): a row of large negative scores
    underflows to 0/0 = NaN, e.g. [-1000., -1001.]."""
    x = _up(scores)
    m = x.amax(dim=-1, keepdim=True).clamp(min=0)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_06_max_ignoring_inf_filled_zero(scores):
    """Max over the finite entries, with -inf replaced by 0 for the max: a row
    [-inf, -1000, -1001] gets c = 0, everything underflows, NaN."""
    x = _up(scores)
    m = torch.where(torch.isinf(x), torch.zeros_like(x), x).amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_07_shift_by_abs_max(scores):
    """Subtract max |x| (so the largest exponent is <= 0 "whatever the sign"): a row
    [-1000, -1001] gets c = 1001, exp(-2001) = 0, NaN."""
    x = _up(scores)
    m = x.abs().amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_08_clamp_exponent_minus20(scores):
    """Clamp x - max at -20 "to avoid underflow": a -inf score gets e^-20 = 2e-9 instead of
    exactly 0 (text: 'gets weight exactly 0'); [0, -inf] gives [1-2e-9, 2e-9]."""
    x = _up(scores)
    z = (x - x.amax(dim=-1, keepdim=True)).clamp(min=-20)
    e = torch.exp(z)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_09_clamp_exponent_minus60(scores):
    """Same with -60 (weights e^-60 ~ 1e-26 where they should be 0 or e^-100); also the
    gradient below -60 is cut."""
    x = _up(scores)
    z = (x - x.amax(dim=-1, keepdim=True)).clamp(min=-60)
    e = torch.exp(z)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_10_eps_in_denominator(scores):
    """Adds 1e-6 to the sum "to be safe": every weight is off by a relative 1e-6, rows sum
    to 1 - 1e-6 (visible in float64)."""
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / (e.sum(-1, keepdim=True) + 1e-6)).to(scores.dtype)


def W_11_shift_only_if_large(scores):
    """Skip the shift when the largest score is below 80 (global test): rows of scores
    around -200 underflow to NaN."""
    x = _up(scores)
    if x.max() > 80:
        x = x - x.amax(dim=-1, keepdim=True)
    e = torch.exp(x)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


# Accepted on purpose (lead's ruling, round 12): finfo.min instead of -inf is wrong only when a
# finite score of the row lies near finfo.min itself (a row that already holds such a fill).
def A_12_inf_to_finfo_min(scores):
    """nan_to_num(-inf -> finfo.min) before the max shift: a row [-inf, -3.4e38] (finite
    max near finfo.min) gives the masked key weight 1/2 instead of 0."""
    x = _up(scores)
    x = torch.nan_to_num(x, neginf=torch.finfo(x.dtype).min)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_13_max_over_first_row_for_2d(scores):
    """Max taken over dim -1 but keepdim=False then unsqueezed at 0 when 2-D (shape trick that
    works for 1-D and for square inputs through broadcasting): c is per column for 2-D."""
    x = _up(scores)
    m = x.amax(dim=-1)
    if x.dim() >= 2:
        m = m.unsqueeze(-2) if x.shape[-1] == x.shape[-2] else m.unsqueeze(-1)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_14_sum_detached(scores):
    """The normaliser is computed under no_grad ("it is only a constant"): forward right,
    gradient wrong."""
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    with torch.no_grad():
        s = e.sum(-1, keepdim=True)
    return (e / s).to(scores.dtype)


def W_15_float16_via_bfloat16_sub(scores):
    """Keeps the dtype but for float16 computes the shift in bfloat16 (wider range,
    "safer"): 8-bit mantissa, weights off by ~1e-2."""
    x = scores
    if x.dtype == torch.float16:
        x = x.to(torch.bfloat16).float()
    x = _up(x)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_16_keeps_last_result(scores):
    """Memo keyed on (shape, dtype, first and last element): stale result for a second
    input that matches at those points."""
    key = (tuple(scores.shape), scores.dtype, float(scores.reshape(-1)[0]),
           float(scores.reshape(-1)[-1]))
    memo = W_16_keeps_last_result.__dict__.setdefault("memo", {})
    if key in memo and not scores.requires_grad:
        return memo[key].clone()
    x = _up(scores)
    out = _ref(x).to(scores.dtype)
    memo[key] = out.detach()
    return out


def W_17_exp2_base(scores):
    """Uses exp2 and log2(e) scaling like a fast kernel, but with the scale rounded to 1.4427
    (4 decimals): weights off by a relative ~1e-5 * |x - max|."""
    x = _up(scores)
    z = (x - x.amax(dim=-1, keepdim=True)) * 1.4427
    e = torch.exp2(z)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_18_zero_inf_in_place_on_exp(scores):
    """exp, then e[x == -inf] = 0 in place "to be sure": modifies exp's saved output,
    backward raises (only when scores has -inf and needs grad)."""
    x = _up(scores)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    e[torch.isneginf(x)] = 0
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_19_sub_then_add_back_in_place(scores):
    """Subtracts the max in place and adds it back afterwards "so the input is unchanged":
    (x - m) + m != x in floating point (e.g. 0.1 - 1000 + 1000 = 0.0999755859375 in
    float32), so the caller's tensor is silently changed."""
    if scores.requires_grad:
        return C_01_max_shift(scores)
    m = scores.amax(dim=-1, keepdim=True)
    scores.sub_(m)
    x = _up(scores)
    e = torch.exp(x)
    out = (e / e.sum(-1, keepdim=True)).to(scores.dtype)
    scores.add_(m)
    return out


def W_20_half_no_shift(scores):
    """float16/bfloat16 in float32 without the max shift ("float32 has range enough"):
    scores above ~88 overflow exp in float32 (float16 allows up to 65504)."""
    if scores.dtype in (torch.float16, torch.bfloat16):
        e = torch.exp(scores.float())
        return (e / e.sum(-1, keepdim=True)).to(scores.dtype)
    return C_01_max_shift(scores)


def W_21_view_flatten(scores):
    """Flattens with view(-1, n): raises on a non-contiguous input (a transposed matrix)."""
    n = scores.shape[-1]
    x = _up(scores).view(-1, n)
    return _ref(x).view(scores.shape).to(scores.dtype)


def W_22_half_exp_in_half_no_shift(scores):
    """float16: exp in float16 without the shift ("the values are small in float16"); other
    dtypes shifted: overflows for float16 scores above ~11."""
    if scores.dtype == torch.float16:
        e = torch.exp(scores)
        return e / e.sum(-1, keepdim=True)
    return C_01_max_shift(scores)
