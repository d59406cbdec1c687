"""Round 8 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W20 is A_20 (float16 computed in float16: a row of over 65504 equal scores sums to inf).
"""
# flake8: noqa
import torch

CHECK = "check_softmax"


def C_01_reference(scores):
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    return e / e.sum(dim=-1, keepdim=True)


def O_02_detached_max(scores):
    # subtracting a constant: its gradient cancels, so detaching the max is fine
    m = scores.max(dim=-1, keepdim=True).values.detach()
    e = torch.exp(scores - m)
    return e / e.sum(dim=-1, keepdim=True)


def O_03_logsumexp(scores):
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def O_04_reciprocal_times(scores):
    e = (scores - scores.max(-1, keepdim=True)[0]).exp()
    return e * e.sum(-1, keepdim=True).reciprocal()


def W_01_clamp_exponent_at_minus60(scores):
    # "avoid underflow": masked (-inf) keys get exp(-60) ~ 1e-26 instead of exactly 0
    z = (scores - scores.amax(-1, keepdim=True)).clamp(min=-60)
    e = torch.exp(z)
    return e / e.sum(-1, keepdim=True)


def W_02_subtract_row_mean(scores):
    # stable only while the spread within a row stays small (float16: spread > ~11 overflows)
    finite = torch.where(torch.isfinite(scores), scores, torch.zeros_like(scores))
    c = finite.mean(-1, keepdim=True)
    e = torch.exp(scores - c)
    return e / e.sum(-1, keepdim=True)


def W_03_subtract_first_score(scores):
    # softmax(x - c) for c = x_0: fine unless x_0 is -inf or far below the max
    e = torch.exp(scores - scores[..., :1])
    return e / e.sum(-1, keepdim=True)


def W_04_subtract_max_abs(scores):
    # all exponents <= 0, but rows of very negative scores underflow to 0/0
    e = torch.exp(scores - scores.abs().amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_05_dim1_everywhere(scores):
    # written for 2-D (queries, keys) tensors: wrong axis for 3-D, fails for 1-D
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def W_06_subtract_max_only_above_80(scores):
    # "exp overflows above 88 in float32": forgets that float16 overflows above 11
    if scores.max() > 80:
        scores = scores - scores.amax(-1, keepdim=True)
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_07_global_max_of_last_axis_for_batch(scores):
    # max over the whole tensor: rows far below the global max underflow to 0/0
    e = torch.exp(scores - scores.max())
    return e / e.sum(-1, keepdim=True)


def W_08_clamp_scores_minus_1e4(scores):
    # map -inf to something finite for float16 safety; changes finite scores below -1e4
    s = scores.clamp(min=-1e4)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_09_view_2d(scores):
    # reshape with view: raises on a non-contiguous input (e.g. a transposed score matrix)
    n = scores.shape[-1]
    s = scores.view(-1, n)
    e = torch.exp(s - s.max(1, keepdim=True).values)
    return (e / e.sum(1, keepdim=True)).view(scores.shape)


def W_10_sum_without_keepdim(scores):
    # e / e.sum(-1): broadcasts along the wrong axis; "works" for square matrices? no: shape
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1)


def W_11_inplace_on_exp_of_input_view(scores):
    # subtracts max in place on the input (after "copying" with a view)
    x = scores.view_as(scores)
    x -= x.amax(-1, keepdim=True).clone()
    e = x.exp()
    return e / e.sum(-1, keepdim=True)


def W_12_float32_sum_for_half(scores):
    # exp in the input dtype but the result of the division promoted to float32 for halves
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.float().sum(-1, keepdim=True)


def O_05_nan_to_num_for_all_masked_rows(scores):
    # a fully -inf row gives NaN; "fixes" it with nan_to_num, also replaces... (grad NaN?)
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return torch.nan_to_num(e / e.sum(-1, keepdim=True))


def W_14_max_over_last_two_axes(scores):
    # one constant per matrix (batch of score matrices) instead of per row
    if scores.dim() >= 2:
        m = scores.amax(dim=(-2, -1), keepdim=True)
    else:
        m = scores.amax(-1, keepdim=True)
    e = torch.exp(scores - m)
    return e / e.sum(-1, keepdim=True)


def W_15_inplace_division_breaks_backward(scores):
    # e /= sum: exp's backward needs e, so backward() raises (forward is right)
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    e /= e.sum(-1, keepdim=True)
    return e


def W_16_sum_detached(scores):
    # treats the normaliser as a constant: right values, wrong gradient
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True).detach()


def O_06_cumsum_normaliser(scores):
    # cumulative sum in the input dtype to get the normaliser (last element of cumsum):
    # float16 / bfloat16 rows of many similar scores lose the sum's low bits
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    s = e.cumsum(-1)[..., -1:]
    return e / s


def W_18_1d_comes_back_2d(scores):
    # promotes a 1-D input to (1, n) and forgets to squeeze it back
    if scores.dim() == 1:
        scores = scores[None]
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_19_half_for_low_precision(scores):
    # computes low-precision inputs in float32 and returns .half(): bfloat16 becomes float16
    if scores.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(scores.float()).half()
    return C_01_reference(scores)


# A_ (accepted on purpose, lead's decision): computing a float16 input in float16 is what
# the exercise asks (keep the input's dtype). Only a row of more than 65504 equal scores
# makes the float16 sum inf, so every weight is 0 where torch.softmax gives 1/n (on
# zeros(2, 70000, float16): 0 against 1.43e-5). Rows that long are not this first
# exercise's subject, and the text does not ask for a float32 accumulation.
def A_20_float16_sum_overflows_on_rows_over_65504(scores):
    # the textbook solution computed in float16: a row of > 65504 equal scores sums to inf
    # in float16, so every weight is 0 (torch.softmax gives 1/n); debatable, see report
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def S_01_torch_special_softmax(scores):
    # the same kernel as torch.softmax under another name
    return torch.special.softmax(scores, dim=-1)


def S_02_nn_softmax_module(scores):
    return torch.nn.Softmax(dim=-1)(scores)


def S_03_categorical_probs(scores):
    return torch.distributions.Categorical(logits=scores, validate_args=False).probs


def S_04_exp_of_special_log_softmax(scores):
    return torch.special.log_softmax(scores, dim=-1).exp()


def S_05_private_torch_softmax(scores):
    return torch._softmax(scores, -1, False)


def S_06_aten_op(scores):
    return torch.ops.aten.softmax.int(scores, -1)


def S_07_softmin_of_negated(scores):
    return torch.nn.functional.softmin(-scores, dim=-1)


def S_08_aten_private_op(scores):
    return torch.ops.aten._softmax(scores, -1, False)


def S_09_aten_op_packet(scores):
    return torch.ops.aten.softmax(scores, -1)


def S_10_c_variable_functions(scores):
    return torch._C._VariableFunctions.softmax(scores, -1)


def S_11_c_log_softmax_exp(scores):
    return torch._C._VariableFunctions.log_softmax(scores, -1).exp()
