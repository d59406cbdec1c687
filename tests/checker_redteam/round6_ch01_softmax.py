"""Round 6 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Round 6 changed S03 to O_04 (see it); W_19 was A_19 until session 21 (float64 accuracy).
"""
# flake8: noqa
import torch
CHECK = "check_softmax"

def C_01_plain(scores):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)

def O_02_detached_max(scores):
    # the constant may be detached: its gradient cancels exactly
    c = scores.max(dim=-1, keepdim=True).values.detach()
    e = (scores - c).exp()
    return e / e.sum(-1, keepdim=True)

def O_03_logsumexp(scores):
    c = scores.amax(-1, keepdim=True)
    x = scores - c
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))

def W_01_global_max(scores):
    # one constant for the whole tensor: rows far below the max underflow to 0/0
    e = torch.exp(scores - scores.max())
    return e / e.sum(-1, keepdim=True)

def W_02_max_abs(scores):
    # c = max |x|: wrong (0/0) when a whole row is large and negative
    c = scores.abs().amax(-1, keepdim=True)
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)

def W_03_clamp_tail(scores):
    # drops exponents below -8 as "negligible": weights off by up to e^-8 ~ 3e-4
    x = (scores - scores.amax(-1, keepdim=True)).clamp_min(-8.0)
    e = torch.exp(x)
    e = torch.where(x <= -8.0, torch.zeros_like(e), e)
    return e / e.sum(-1, keepdim=True)

def W_04_upcast_float(scores):
    # computes in float32 and returns float32 for every input dtype
    x = scores.float()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

def W_05_max_dim1(scores):
    # max over dim 1 (right for 2-D input only)
    c = scores.amax(dim=1, keepdim=True) if scores.dim() > 1 else scores.amax()
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)

_C = {}
def W_06_constant_from_first_call(scores):
    # computes the shift once and reuses it: state between calls
    if "c" not in _C:
        _C["c"] = scores.detach().max().item()
    e = torch.exp(scores - _C["c"])
    return e / e.sum(-1, keepdim=True)

def W_07_mutates_via_reshape_view(scores):
    # reshape of a contiguous tensor is a view: sub_ writes into the caller's tensor
    n = scores.shape[-1]
    if scores.requires_grad:
        x = scores.reshape(-1, n) - scores.reshape(-1, n).amax(-1, keepdim=True)
    else:
        x = scores.reshape(-1, n)
        x.sub_(x.amax(-1, keepdim=True))
    e = x.exp()
    return (e / e.sum(-1, keepdim=True)).reshape(scores.shape)

def W_08_view_flatten(scores):
    # .view fails on non-contiguous input (e.g. a transposed tensor)
    n = scores.shape[-1]
    x = scores.view(-1, n)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).view(scores.shape)

def W_09_sum_detached(scores):
    # denominator detached: values right, gradients wrong
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True).detach()

def W_10_mean_shift(scores):
    # subtracts the row mean, not the max: overflows when a row spreads over > 88
    e = torch.exp(scores - scores.mean(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

def W_11_float64_internal_returned(scores):
    # computes in float64 for accuracy and forgets to cast back
    x = scores.double()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

def W_12_unsqueeze_wrong_axis(scores):
    # max without keepdim, re-inserted at axis 0: right for 1-D and for square 2-D? no: transposed
    c = scores.amax(-1)
    c = c.unsqueeze(-1) if scores.dim() <= 2 else c.unsqueeze(1)
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)

def W_13_nan_to_num_naive(scores):
    # naive softmax, NaN patched afterwards: overflowing rows come out wrong
    e = torch.exp(scores)
    return torch.nan_to_num(e / e.sum(-1, keepdim=True), nan=0.0)

def W_14_half_sum_in_exp_space_log(scores):
    # computes log-sum with a float16-range clamp: exp values clamped at 65504 before sum
    x = scores - scores.amax(-1, keepdim=True)
    e = torch.exp(x)
    s = e.sum(-1, keepdim=True)
    out = e / s
    return out.to(torch.float16).to(scores.dtype) if scores.dtype == torch.float32 else out

def W_15_inplace_exp_div(scores):
    # in-place exp_ and /= on an intermediate: values right, backward raises
    x = scores - scores.amax(-1, keepdim=True)
    x.exp_()
    x /= x.sum(-1, keepdim=True)
    return x

def W_16_1d_keeps_batch_axis(scores):
    # 1-D input promoted to (1, n) and never squeezed back
    if scores.dim() == 1:
        scores = scores.unsqueeze(0)
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

def W_17_max_over_finite_only(scores):
    # shift by the max of the finite entries only; -inf handled, but a row of +large and -inf ok;
    # wrong: uses nan_to_num on the scores, so -inf entries get a tiny positive weight? no: exp(min-max)=0
    x = torch.nan_to_num(scores, neginf=-1e4)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)

def W_18_sort_based_max_wrong_end(scores):
    # uses sort()[..., :1] (the MINIMUM) as the shift: overflows when a row spreads over > 88
    c = scores.sort(-1).values[..., :1]
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)

def S_01_torch_special_softmax(scores):
    # torch.special.softmax is torch.softmax under another name (forbidden in spirit)
    return torch.special.softmax(scores, dim=-1)

def S_02_nn_softmax_module(scores):
    return torch.nn.Softmax(dim=-1)(scores)

# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_19_float32_inside_cast_back(scores):
    # computes in float32 and casts back: float64 inputs lose precision (~1e-8 relative)
    x = scores.float()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)

# Written as S03, right: a log-sum-exp written by hand calls no softmax (the red team's
# report lists it as O).
def O_04_exp_of_log_softmax_manual(scores):
    # log-sum-exp trick written by hand: allowed (no softmax call)
    c = scores.amax(-1, keepdim=True)
    return torch.exp(scores - c - torch.log(torch.exp(scores - c).sum(-1, keepdim=True)))
