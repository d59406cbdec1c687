"""Round 9 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W04, W05 and W12 are A_04, A_05 and A_12 (the max, the exp or the sum in bfloat16/float16):
the exercise text allows computing in the input's dtype ("compute in float32 only for
float16 or bfloat16" permits, it does not require); their absolute errors match the
reference's (about 2e-3 on bfloat16 rows, against 2.4e-3).
"""
# flake8: noqa
import torch
CHECK = "check_softmax"


def _half(x):
    return x.dtype in (torch.float16, torch.bfloat16)


def C_01_reference(scores):
    x = scores.float() if _half(scores) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_02_detached_max(scores):
    # the shift is a constant for the gradient: detaching it is exact
    x = scores.float() if _half(scores) else scores
    m = x.detach().max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_03_logsumexp(scores):
    x = scores.float() if _half(scores) else scores
    return torch.exp(x - torch.logsumexp(x, -1, keepdim=True)).to(scores.dtype)


def W_01_eps_in_denominator(scores):
    # tiny epsilon: invisible in float32 (1 + 1e-8 == 1), wrong by 1e-8 in float64
    x = scores.float() if _half(scores) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / (e.sum(-1, keepdim=True) + 1e-8)).to(scores.dtype)


def W_02_shift_only_when_large(scores):
    # shift only to avoid overflow: rows of very negative scores underflow to 0/0
    x = scores.float() if _half(scores) else scores
    if x.max() > 50:
        x = x - x.amax(-1, keepdim=True)
    e = torch.exp(x)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_03_view_to_2d(scores):
    # flattens with .view: crashes on non-contiguous input
    n = scores.shape[-1]
    x = scores.float() if _half(scores) else scores
    x2 = x.view(-1, n)
    e = torch.exp(x2 - x2.max(1, keepdim=True).values)
    return (e / e.sum(1, keepdim=True)).view(scores.shape).to(scores.dtype)


# accepted on purpose: x - max in the half dtype is computing in the input's dtype,
# which the text allows; absolute error as the reference's
def A_04_subtract_in_half_then_upcast(scores):
    # x - max rounded in float16 before going to float32
    x = scores - scores.amax(-1, keepdim=True)
    x = x.float() if _half(scores) else x
    e = torch.exp(x)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


# accepted on purpose: the text allows computing in the input's dtype
def A_05_native_half(scores):
    # no float32 for float16/bfloat16: exp and the sum in the low precision
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_06_clamp_weights(scores):
    # keeps a floor on the weights to "avoid log(0) later": -inf keys get 1e-30, not 0
    x = scores.float() if _half(scores) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    w = e / e.sum(-1, keepdim=True)
    return w.clamp(min=1e-30).to(scores.dtype)


def W_07_neginf_to_big_negative(scores):
    # replaces -inf with -1e4 "to avoid NaN"
    x = scores.float() if _half(scores) else scores
    x = x.clamp(min=-1e4)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


_cache = {}


def W_08_cache_on_summary(scores):
    # caches on (shape, dtype, sum, max): a permutation of the same scores gets a stale answer
    key = (tuple(scores.shape), scores.dtype, float(scores.detach().double().sum()),
           float(scores.detach().double().max()))
    if key in _cache and not scores.requires_grad:
        return _cache[key].clone()
    out = C_01_reference(scores)
    _cache[key] = out.detach().clone()
    return out


def W_09_abs_max_shift(scores):
    # shifts by the largest |x|: a row of very negative scores underflows
    x = scores.float() if _half(scores) else scores
    e = torch.exp(x - x.abs().amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_10_float64_for_everything_returns_float64(scores):
    # computes in float64 and forgets to cast back
    x = scores.double()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_11_mean_shift_with_clamp(scores):
    # shifts by the mean and clamps the exponent at 80 to avoid overflow
    x = scores.float() if _half(scores) else scores
    z = (x - x.mean(-1, keepdim=True)).clamp(max=80)
    e = torch.exp(z)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


# accepted on purpose: the sum in the input's dtype is allowed by the text
def A_12_exp_minus_max_float32_sum_in_half(scores):
    # exp in float32, but the row sum back in the low precision
    x = scores.float() if _half(scores) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True)).to(scores.dtype)
    return e / e.sum(-1, keepdim=True)


def W_13_max_over_dim0_for_3d(scores):
    # uses dim=1 for the max (right for 2-D inputs only)
    x = scores.float() if _half(scores) else scores
    d = 1 if x.dim() >= 2 else 0
    e = torch.exp(x - x.amax(d, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_14_bf16_via_float16(scores):
    # "half types" upcast to float16 first: bfloat16 scores beyond 65504 become inf
    x = scores
    if scores.dtype == torch.bfloat16:
        x = scores.half().float()
    elif scores.dtype == torch.float16:
        x = scores.float()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_15_inplace_exp_on_fresh(scores):
    x = scores.float() if _half(scores) else scores
    e = (x - x.amax(-1, keepdim=True)).exp_()
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_16_size_one_axis_shortcut(scores):
    # "nothing to normalize" shortcut for a last axis of size 1: returns the scores
    if scores.shape[-1] == 1 if scores.dim() else True:
        return scores
    return C_01_reference(scores)


class _SM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = C_01_reference(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        yf, gf = y.float(), g.float()
        return (yf * (gf - (gf * yf).sum(-1, keepdim=True))).to(y.dtype)


def W_17_custom_backward_float32(scores):
    # hand-written backward computed in float32 (float64 gradients lose accuracy)
    return _SM.apply(scores)


def W_18_vector_fast_path(scores):
    # a "fast path" for 1-D inputs without the shift (overflows for a large 1-D vector)
    if scores.dim() == 1:
        e = torch.exp(scores.float() if _half(scores) else scores)
        return (e / e.sum()).to(scores.dtype)
    return C_01_reference(scores)
