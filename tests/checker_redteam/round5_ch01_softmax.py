"""Round 5 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch01_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch
import numpy as np

CHECK = "check_softmax"


def C_01_standard(scores):
    e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return e / e.sum(dim=-1, keepdim=True)


def O_02_detached_max(scores):
    m = scores.detach().amax(dim=-1, keepdim=True)
    e = (scores - m).exp()
    return e / e.sum(-1, keepdim=True)


def O_03_logsumexp(scores):
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def O_04_flatten_rows(scores):
    x = scores.reshape(-1, scores.shape[-1])
    e = torch.exp(x - x.max(1, keepdim=True).values)
    return (e / e.sum(1, keepdim=True)).reshape(scores.shape)


def W_01_naive_no_max(scores):
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_02_global_max(scores):
    # one max for the whole tensor: rows far below it underflow to 0/0
    e = torch.exp(scores - scores.max())
    return e / e.sum(-1, keepdim=True)


def W_03_dim1_not_last(scores):
    # right for 2-D inputs only
    dim = 1 if scores.dim() > 1 else 0
    e = torch.exp(scores - scores.max(dim, keepdim=True).values)
    return e / e.sum(dim, keepdim=True)


def W_04_inplace_input(scores):
    scores -= scores.max(-1, keepdim=True).values.detach()
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_05_inplace_div_breaks_backward(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    e /= e.sum(-1, keepdim=True)
    return e


def W_06_detached_result(scores):
    x = scores.detach()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_07_numpy(scores):
    x = scores.detach().cpu().numpy()
    e = np.exp(x - x.max(-1, keepdims=True))
    return torch.from_numpy(e / e.sum(-1, keepdims=True)).to(scores.device)


def W_08_sum_whole_tensor(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum()


def W_09_float32_out(scores):
    x = scores.float()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_10_float64_always(scores):
    x = scores.double()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_11_subtract_mean(scores):
    e = torch.exp(scores - scores.mean(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def W_12_clamp_scores(scores):
    # "avoid overflow" by clamping: wrong when scores are large but close, e.g. [1000, 999]
    e = torch.exp(scores.clamp(-80, 80))
    return e / e.sum(-1, keepdim=True)


def W_13_max_without_keepdim(scores):
    # broadcasts the max along the wrong axis; no error for square or 1-D inputs
    m = scores.max(-1).values
    if scores.dim() > 1 and m.shape[-1] != scores.shape[-1]:
        m = m.unsqueeze(-1)
    e = torch.exp(scores - m)
    return e / e.sum(-1, keepdim=True)


_cache = {}


def W_14_cached_max(scores):
    # computes the shift once and reuses it (state between calls)
    if "m" not in _cache:
        _cache["m"] = scores.max().item()
    e = torch.exp(scores - _cache["m"])
    return e / e.sum(-1, keepdim=True)


def W_15_view_needs_contiguous(scores):
    x = scores.view(-1, scores.shape[-1])
    e = torch.exp(x - x.max(1, keepdim=True).values)
    return (e / e.sum(1, keepdim=True)).view(scores.shape)


def W_16_eps_in_denominator(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / (e.sum(-1, keepdim=True) + 1e-3)


def W_17_squeeze(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return (e / e.sum(-1, keepdim=True)).squeeze()


def W_18_exp_in_float16_sum(scores):
    # sums in float16 even for float32 input (lossy) -> wrong dtype path
    e = torch.exp(scores - scores.max(-1, keepdim=True).values).half()
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_19_max_of_abs(scores):
    # subtracts the largest |x|: for very negative rows everything underflows
    e = torch.exp(scores - scores.abs().max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_20_max_without_keepdim_plain(scores):
    # errors on non-square inputs, silently wrong on square ones
    e = torch.exp(scores - scores.max(-1).values)
    return e / e.sum(-1, keepdim=True)


def W_21_max_over_rows_of_square(scores):
    # per-column max (dim=-2) on matrices, right for 1-D inputs and constant columns
    if scores.dim() < 2:
        return C_01_standard(scores)
    e = torch.exp(scores - scores.max(-2, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def S_01_torch_special_softmax(scores):
    return torch.special.softmax(scores, dim=-1)


def S_02_nn_Softmax_module(scores):
    return torch.nn.Softmax(dim=-1)(scores)


def S_03_exp_of_log_softmax_via_special(scores):
    return torch.special.log_softmax(scores, -1).exp()


def S_04_softmin_of_negative(scores):
    return torch.nn.functional.softmin(-scores, dim=-1)


def S_05_aten_softmax(scores):
    return torch.ops.aten._softmax(scores, -1, False)


def S_06_sigmoid_for_two(scores):
    # sneaky: torch.sigmoid-based via exp-normalisation through logsumexp is allowed (O03);
    # this one uses torch.nn.functional.gumbel_softmax with tau=1 and hard=False? no: random.
    # uses torch.distributions.Categorical(logits=...).probs instead
    return torch.distributions.Categorical(logits=scores).probs


def W_22_float64_in_float32_out(scores):
    x = scores.float() if scores.dtype == torch.float64 else scores
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)
