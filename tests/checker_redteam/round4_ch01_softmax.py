"""Round 4 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch
import numpy as np

CHECK = "check_softmax"


def C_01_reference(scores):
    m = scores.max(dim=-1, keepdim=True).values
    e = torch.exp(scores - m)
    return e / e.sum(dim=-1, keepdim=True)


def O_02_detached_max(scores):
    # the shift has zero gradient, so detaching it is still correct
    m = scores.detach().amax(dim=-1, keepdim=True)
    e = (scores - m).exp()
    return e / e.sum(-1, keepdim=True)


def O_03_logsumexp(scores):
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def O_04_float64_inside(scores):
    x = scores.double()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_05_flatten_reshape(scores):
    shape = scores.shape
    x = scores.reshape(-1, shape[-1])
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return (e / e.sum(dim=1, keepdim=True)).reshape(shape)


def W_01_naive_no_max(scores):
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_02_global_max(scores):
    # one constant for the whole tensor: rows far below the global max underflow to 0/0
    e = torch.exp(scores - scores.max())
    return e / e.sum(-1, keepdim=True)


def W_03_max_over_dim0(scores):
    m = scores.max(dim=0, keepdim=True).values
    e = torch.exp(scores - m)
    return e / e.sum(-1, keepdim=True)


def W_04_dim1_not_last(scores):
    # written for 2-D (rows, cols): dim=1 is the last axis only in 2-D
    if scores.dim() == 1:
        m = scores.max()
        e = torch.exp(scores - m)
        return e / e.sum()
    m = scores.max(dim=1, keepdim=True).values
    e = torch.exp(scores - m)
    return e / e.sum(dim=1, keepdim=True)


def W_05_inplace_sub(scores):
    m = scores.max(dim=-1, keepdim=True).values
    x = scores.data
    x -= m.data  # changes the caller's tensor
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_06_subtract_max_abs(scores):
    c = scores.abs().max(dim=-1, keepdim=True).values
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)


def W_07_subtract_mean(scores):
    e = torch.exp(scores - scores.mean(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_08_subtract_min(scores):
    e = torch.exp(scores - scores.min(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_09_shift_only_if_large(scores):
    # shift only when something would overflow: very negative rows underflow to 0/0
    if scores.max() > 80:
        scores = scores - scores.max(-1, keepdim=True).values
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_10_clamp_instead_of_shift(scores):
    e = torch.exp(scores.clamp(max=80))
    return e / e.sum(-1, keepdim=True)


def W_11_detached_denominator(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True).detach()


def W_12_numpy_roundtrip(scores):
    x = scores.detach().cpu().numpy()
    e = np.exp(x - x.max(-1, keepdims=True))
    return torch.from_numpy(e / e.sum(-1, keepdims=True)).to(scores.device)


def W_13_returns_float32(scores):
    x = scores.float()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_14_view_needs_contiguous(scores):
    shape = scores.shape
    x = scores.view(-1, shape[-1])
    e = torch.exp(x - x.max(dim=1, keepdim=True).values)
    return (e / e.sum(dim=1, keepdim=True)).view(shape)


def W_15_sum_over_all(scores):
    # max per row, but normalises by the sum over the whole tensor
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum()


def W_16_eps_in_denominator(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / (e.sum(-1, keepdim=True) + 1e-3)


def W_17_max_of_first_row(scores):
    # a learner's "batch" version: takes the max of the first row for everybody
    flat = scores.reshape(-1, scores.shape[-1])
    e = torch.exp(scores - flat[0].max())
    return e / e.sum(-1, keepdim=True)


def W_18_float16_exp_no_shift_in_half(scores):
    # shifts, but in float16 computes exp in float32 of the unshifted values first
    e = torch.exp(scores.float())
    out = e / e.sum(-1, keepdim=True)
    return out.to(scores.dtype)


def W_19_no_grad_body(scores):
    with torch.no_grad():
        e = torch.exp(scores - scores.max(-1, keepdim=True).values)
        return e / e.sum(-1, keepdim=True)


def W_20_nan_to_num(scores):
    # naive, then hide the NaNs
    e = torch.exp(scores)
    return torch.nan_to_num(e / e.sum(-1, keepdim=True))


def O_21_inplace_exp_on_temp(scores):
    e = scores - scores.amax(-1, keepdim=True)
    e.exp_()
    return e / e.sum(-1, keepdim=True)


def W_22_inplace_normalise(scores):
    # in-place division of exp's output: the forward is right, backward raises
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    e /= e.sum(-1, keepdim=True)
    return e


def O_22_two_d_mT(scores):
    # written for matrices: transposes to normalise columns
    m = scores.max(dim=-1, keepdim=True).values
    e = torch.exp(scores - m)
    return (e.mT / e.sum(-1).unsqueeze(-2)).mT if scores.dim() > 1 else e / e.sum()


def S_01_softmin_of_negative(scores):
    return torch.nn.functional.softmin(-scores, dim=-1)


def S_02_torch_special_softmax(scores):
    return torch.special.softmax(scores, dim=-1)


def S_03_categorical_probs(scores):
    return torch.distributions.Categorical(logits=scores).probs


def S_04_sigmoid_trick_for_two(scores):
    # not a trick: uses torch.nn.Softmax module
    return torch.nn.Softmax(dim=-1)(scores)


def O_23_movedim_noncontiguous_output(scores):
    x = scores.movedim(-1, 0)
    e = torch.exp(x - x.max(0, keepdim=True).values)
    return (e / e.sum(0, keepdim=True)).movedim(0, -1)
