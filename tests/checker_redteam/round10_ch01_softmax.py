"""Round 10 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W17 is A_17 (raises on a 0-d tensor): the exercise text now says "a tensor of any shape
with at least one axis"; a softmax over the last axis of a 0-d tensor has no axis to run
over, and attention scores always have a keys axis.

S_01 (the row maximum computed in NumPy) gives the right values and gradients (the shift is
a constant); "keep every step in PyTorch" is asked for the gradients' sake, which it keeps.
Refusing Tensor.numpy would change the messages of the earlier NumPy round trips, which are
told the real fault (no gradient). S_02 to S_04 (softmin(-x), torch.special.softmax,
nn.Softmax) are refused as softmaxes of PyTorch; S_02's message names softmin.
"""
# flake8: noqa
import math
import torch

CHECK = "check_softmax"


def _ref(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_01_abs_max_shift(scores):
    # shifts by the largest |score|: very negative rows underflow to 0/0
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    c = x.abs().masked_fill(torch.isinf(x), 0).amax(-1, keepdim=True)
    e = torch.exp(x - c)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_02_first_element_shift(scores):
    # shifts by the first score of each row, not the maximum
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    c = x[..., :1]
    c = torch.where(torch.isinf(c), x.amax(-1, keepdim=True), c)
    e = torch.exp(x - c)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_03_max_over_dim1(scores):
    # max over axis 1 (right for 2-D only): c varies along the last axis for 3-D input
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    c = x.amax(1 if x.dim() > 1 else 0, keepdim=True)
    e = torch.exp(x - c)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_04_view_fails_noncontiguous(scores):
    # view() raises on a non-contiguous (e.g. transposed) input
    shape = scores.shape
    x = scores.view(-1, shape[-1])
    x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype).view(shape)


def W_05_len1_shortcut(scores):
    # one key: weight 1, but no autograd graph (and -inf single rows give 1, not NaN)
    if scores.shape[-1] == 1:
        return torch.ones_like(scores)
    return _ref(scores)


def W_06_neginf_to_minus_1e9(scores):
    # -inf replaced by -1e9: a row of finite scores below -1e9 then favours the masked key
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    x = torch.nan_to_num(x, neginf=-1e9)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_07_pow_approx_e(scores):
    # 2.71828 ** x instead of exp: relative error ~ 6.6e-7 * |x - max|
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.pow(2.71828, x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_08_exp2_truncated_log2e(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp2((x - x.amax(-1, keepdim=True)) * 1.4427)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_09_detached_denominator(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True).detach()).to(scores.dtype)


def W_10_clamp_exponent(scores):
    # clamps the shifted scores at -80 to 'avoid underflow': -inf keys get e^-80, not 0
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp((x - x.amax(-1, keepdim=True)).clamp(min=-80.0))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_11_inplace_via_to(scores):
    # .to(float32) returns the input itself for float32: sub_ and exp_ change the input
    x = scores.to(torch.float32) if scores.dtype != torch.float64 else scores.clone()
    x.sub_(x.amax(-1, keepdim=True).detach())
    x.exp_()
    return (x / x.sum(-1, keepdim=True)).to(scores.dtype)


def W_12_flatten_by_transpose(scores):
    # reshapes (..., n) to (n, -1): rows mix up unless the leading size equals n
    n = scores.shape[-1]
    x = scores.reshape(n, -1)
    x = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = torch.exp(x - x.amax(0, keepdim=True))
    return (e / e.sum(0, keepdim=True)).to(scores.dtype).reshape(scores.shape)


def W_13_sum_over_dim1(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(1 if x.dim() > 1 else 0, keepdim=True)).to(scores.dtype)


def W_14_eps_in_denominator(scores):
    # + 1e-9 in the denominator: no longer float64-accurate
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / (e.sum(-1, keepdim=True) + 1e-9)).to(scores.dtype)


def C_01_reference(scores):
    return _ref(scores)


def O_02_logsumexp(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    return torch.exp(x - torch.logsumexp(x, -1, keepdim=True)).to(scores.dtype)


def O_03_detached_max_float64_always(scores):
    x = scores.double()
    e = torch.exp(x - x.amax(-1, keepdim=True).detach())
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_15_inplace_div_of_exp_output(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    e /= e.sum(-1, keepdim=True)
    return e.to(scores.dtype)


def W_16_half_for_any_low_precision(scores):
    if scores.dtype in (torch.float16, torch.bfloat16):
        x = scores.float()
        e = torch.exp(x - x.amax(-1, keepdim=True))
        return (e / e.sum(-1, keepdim=True)).half()
    return _ref(scores)


# accepted on purpose: the text asks for at least one axis (0-d has no last axis)
def A_17_fails_on_0d(scores):
    n = scores.shape[-1]
    x = scores.reshape(-1, n)
    return _ref(x).reshape(scores.shape)


def W_18_inplace_float64_path(scores):
    # float64 "needs no copy": shifts the caller's tensor in place when it has no grad
    if scores.dtype == torch.float64 and not scores.requires_grad:
        scores.sub_(scores.amax(-1, keepdim=True))
        e = scores.exp()
        return e / e.sum(-1, keepdim=True)
    return _ref(scores)


def W_19_inplace_when_3d(scores):
    if scores.dim() >= 3 and not scores.requires_grad:
        scores.sub_(scores.amax(-1, keepdim=True))
        x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
        e = x.exp()
        return (e / e.sum(-1, keepdim=True)).to(scores.dtype)
    return _ref(scores)


def O_04_float32_max_for_float64(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    m = x.float().amax(-1, keepdim=True).to(x.dtype)
    m = torch.where(torch.isinf(m), x.amax(-1, keepdim=True), m)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def S_01_numpy_max(scores):
    # the shift constant computed in numpy (a constant: values and gradients are right,
    # but not "every step in PyTorch", and it fails for CUDA tensors)
    import numpy as np
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    c = torch.from_numpy(np.max(x.detach().cpu().numpy(), axis=-1, keepdims=True)).to(x.device)
    c = torch.where(torch.isinf(c), torch.zeros_like(c), c)
    e = torch.exp(x - c)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_20_inplace_replace_neginf(scores):
    # "make -inf safe" in place: changes the caller's tensor when it holds -inf
    if not scores.requires_grad:
        scores.masked_fill_(scores == float("-inf"), torch.finfo(scores.dtype).min)
    return _ref(scores)


def S_02_softmin_of_negated(scores):
    # softmin(-x) == softmax(x): a forbidden softmax in disguise
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    return torch.nn.functional.softmin(-x, dim=-1).to(scores.dtype)


def S_03_torch_special_softmax(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    return torch.special.softmax(x, dim=-1).to(scores.dtype)


def S_04_nn_Softmax_module(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    return torch.nn.Softmax(dim=-1)(x).to(scores.dtype)
