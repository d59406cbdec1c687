"""Round 7 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W08 (float32 precision for a float64 input) is W_08 since the float64 decision.
"""
# flake8: noqa
import math
import torch

CHECK = "check_softmax"


def C_01_reference(scores):
    c = scores.max(dim=-1, keepdim=True).values
    e = torch.exp(scores - c)
    return e / e.sum(dim=-1, keepdim=True)


def O_02_logsumexp(scores):
    # exp(x - logsumexp(x)): another stable formulation, no torch.softmax
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def O_03_detached_max_amax(scores):
    # the constant c needs no gradient: softmax(x - c) does not depend on c
    c = scores.detach().amax(dim=-1, keepdim=True)
    e = (scores - c).exp()
    return e / e.sum(-1, keepdim=True)


def O_04_float64_inside(scores):
    x = scores.double()
    c = x.max(-1, keepdim=True).values
    e = torch.exp(x - c)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_01_global_max(scores):
    # subtracts the max of the whole tensor, not of each row: a row far below the global
    # maximum underflows to 0/0
    e = torch.exp(scores - scores.max())
    return e / e.sum(dim=-1, keepdim=True)


def W_02_shift_only_when_large(scores):
    # "optimisation": subtract the max only when overflow is possible; very negative rows
    # underflow to 0/0 = NaN
    c = scores.max(dim=-1, keepdim=True).values
    if (c > 80).any():
        scores = scores - c
    e = torch.exp(scores)
    return e / e.sum(dim=-1, keepdim=True)


def W_03_clamp_low_scores(scores):
    # clamps to avoid exp underflow: a -inf key gets a tiny weight, not exactly 0
    x = (scores - scores.max(-1, keepdim=True).values).clamp(min=-80)
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


def W_04_eps_in_denominator(scores):
    # adds an epsilon to the denominator: rows no longer sum to 1 exactly (1e-3 too big)
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / (e.sum(-1, keepdim=True) + 1e-3)


def W_05_detached_denominator(scores):
    # right values, wrong gradient
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True).detach()


def W_06_inplace_when_no_grad(scores):
    # writes into the input when it does not require grad (the max subtraction in place)
    c = scores.max(-1, keepdim=True).values
    if scores.requires_grad:
        x = scores - c
    else:
        x = scores.sub_(c)
    e = torch.exp(x)
    return e / e.sum(-1, keepdim=True)


def W_07_sum_over_dim1(scores):
    # max over last axis, but sums over axis 1: right for 2-D inputs only
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    if e.dim() == 1:
        return e / e.sum()
    return e / e.sum(dim=1, keepdim=True)


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_08_float64_downcast(scores):
    # computes in float32 whatever the input; casts back: float64 loses precision
    x = scores.float()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_09_half_upcast_keeps_float32(scores):
    # computes half/bfloat16 in float32 and forgets to cast back
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_10_numpy_roundtrip(scores):
    # right values through numpy, no gradient and CPU only
    import numpy as np
    a = scores.detach().cpu().numpy()
    e = np.exp(a - a.max(-1, keepdims=True))
    return torch.from_numpy(e / e.sum(-1, keepdims=True)).to(scores.device)


def W_11_nan_to_num_masked(scores):
    # replaces -inf by a finite number before the softmax: masked keys get weight > 0
    # only when every other score is also very low
    x = torch.nan_to_num(scores, neginf=-1e4)
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


_BUF = {}


def W_12_reused_output_buffer(scores):
    # keeps an output buffer per shape and returns it: the second call overwrites the first
    key = (tuple(scores.shape), scores.dtype, scores.device)
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    out = e / e.sum(-1, keepdim=True)
    if scores.requires_grad:
        return out
    buf = _BUF.setdefault(key, torch.empty_like(scores))
    buf.copy_(out)
    return buf


def W_13_mask_inf_grad_where(scores):
    # handles -inf by a where on the exponent: value right, but the -inf entries make
    # scores - c = nan for rows whose max is -inf ... and a where on exp(nan)
    finite = torch.isfinite(scores)
    x = torch.where(finite, scores, torch.zeros_like(scores))
    c = x.max(-1, keepdim=True).values
    e = torch.where(finite, torch.exp(x - c), torch.zeros_like(x))
    return e / e.sum(-1, keepdim=True)


def W_14_transpose_broadcast(scores):
    # forgets keepdim and broadcasts the row maxima along the last axis (right for 1-D,
    # and whenever the rows share the same max)
    c = scores.max(dim=-1).values
    if scores.dim() > 1 and c.shape[-1] == scores.shape[-1]:
        e = torch.exp(scores - c)
    else:
        e = torch.exp(scores - c.unsqueeze(-1))
    return e / e.sum(-1, keepdim=True)


def W_15_inplace_divide_breaks_backward(scores):
    # right values; the in-place division overwrites the exp() output that autograd saved
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    e /= e.sum(-1, keepdim=True)
    return e


def W_16_view_needs_contiguous(scores):
    # flattens with .view: fails on a non-contiguous input (a transposed matrix)
    shape = scores.shape
    x = scores.view(-1, shape[-1]) if scores.dim() > 0 else scores.view(1, 1)
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return (e / e.sum(-1, keepdim=True)).view(shape)


def W_17_1d_returns_row_matrix(scores):
    # promotes 1-D input to a (1, n) matrix and forgets to squeeze it back
    x = scores.unsqueeze(0) if scores.dim() == 1 else scores
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


# Renamed O_18 -> W_ after round 13: -inf mapped to -1e30: gives weight to -inf where the other scores lie below -1e30 (round 13's (1, 4099) row near -3.4e38; the same fault as round 13's W_23).
def W_18_masked_fill_inf_to_very_negative(scores):
    # maps -inf to -1e30 (exp gives exactly 0 after the shift), gradient 0 there
    x = scores.masked_fill(scores == float("-inf"), -1e30) if scores.dtype != torch.float16 \
        else scores
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def S_01_torch_special_softmax(scores):
    # torch.special.softmax is torch.softmax under another name (the text forbids it)
    return torch.special.softmax(scores, dim=-1)


def S_02_nn_softmax_module(scores):
    return torch.nn.Softmax(dim=-1)(scores)


def S_03_softmin_of_negation(scores):
    # softmin(-x) = softmax(x): a forbidden softmax in disguise
    return torch.nn.functional.softmin(-scores, dim=-1)


def S_04_exp_log_softmax_via_special(scores):
    # exp(x - logsumexp) is allowed (O02); this one calls torch.special.log_softmax
    return torch.special.log_softmax(scores, dim=-1).exp()


def O_19_work_on_axis0_transposed(scores):
    # moves the last axis to the front, works over axis 0, moves it back: a
    # non-contiguous result
    if scores.dim() == 0:
        return torch.ones_like(scores)
    x = scores.movedim(-1, 0)
    e = torch.exp(x - x.amax(0, keepdim=True))
    return (e / e.sum(0, keepdim=True)).movedim(0, -1)


def W_20_float64_returns_float32(scores):
    out = C_01_reference(scores)
    return out.float() if scores.dtype == torch.float64 else out


def W_21_bfloat16_returns_float32(scores):
    out = C_01_reference(scores.float() if scores.dtype == torch.bfloat16 else scores)
    return out
