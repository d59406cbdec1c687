"""Round 2 red team (writer R2), ch01_softmax: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch01_softmax.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import numpy as np
import torch

CHECK = "check_softmax"


def W_naive(scores):
    """No max subtraction: exp(1000) = inf."""
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_global_max(scores):
    """Subtracts the max of the whole tensor, not of each row: rows far below it underflow."""
    e = torch.exp(scores - scores.max())
    return e / e.sum(-1, keepdim=True)


def W_max_dim0(scores):
    """Max over the first axis (columns): a different constant per entry of a row."""
    e = torch.exp(scores - scores.max(dim=0, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_inplace(scores):
    """Right values, but subtracts in place: changes the caller's tensor."""
    scores -= scores.max(-1, keepdim=True).values
    e = torch.exp(scores)
    return e / e.sum(-1, keepdim=True)


def W_no_keepdim(scores):
    """max/sum without keepdim: broadcasts along the wrong axis (silently right shape if square)."""
    m = scores.max(-1).values
    e = torch.exp((scores.transpose(-1, -2) - m).transpose(-1, -2)) if scores.dim() > 1 else torch.exp(scores - m)
    s = e.sum(-1)
    return e / s  # (..., n) / (...,): aligns the row sums with the last axis


def W_dim1(scores):
    """Hard-codes dim=1: right for 2-D inputs only."""
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
    return e / e.sum(dim=1, keepdim=True)


def W_sum_all(scores):
    """Normalises by the sum of the whole tensor."""
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum()


def W_method_softmax(scores):
    """Calls the forbidden softmax as a tensor method."""
    return scores.softmax(-1)


def W_functional_softmax(scores):
    """Calls the forbidden softmax through torch.nn.functional."""
    return torch.nn.functional.softmax(scores, dim=-1)


def W_nan_to_num(scores):
    """Naive softmax patched with nan_to_num: overflow rows become 0, not the right weights."""
    e = torch.exp(scores)
    return torch.nan_to_num(e / e.sum(-1, keepdim=True))


def W_clamp(scores):
    """Clamps the scores into exp's range: ties the large ones."""
    e = torch.exp(scores.clamp(-80, 80))
    return e / e.sum(-1, keepdim=True)


def W_detach_sum(scores):
    """Right values; detaching the normaliser breaks the gradient."""
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True).detach()


def W_numpy(scores):
    """Right values via numpy: no gradient, float64 -> dtype of numpy result."""
    x = scores.detach().cpu().numpy()
    e = np.exp(x - x.max(-1, keepdims=True))
    return torch.from_numpy(e / e.sum(-1, keepdims=True)).to(scores.dtype)


def W_float32_always(scores):
    """Computes and returns float32 whatever the input dtype."""
    x = scores.float()
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def W_minus_mean(scores):
    """Subtracts the mean instead of the max: still overflows when the spread is large."""
    e = torch.exp(scores - scores.mean(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def C_max(scores):
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def C_detached_max(scores):
    """Detaching the max is fine: softmax does not depend on c."""
    m = scores.max(dim=-1, keepdim=True).values.detach()
    e = (scores - m).exp()
    return e / e.sum(dim=-1, keepdim=True)


def O_logsumexp(scores):
    """A different valid algorithm: exp(x - logsumexp(x))."""
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def O_flatten_rows(scores):
    """Reshapes to 2-D, loops over rows, reshapes back."""
    flat = scores.reshape(-1, scores.shape[-1])
    rows = []
    for r in flat:
        e = torch.exp(r - r.max())
        rows.append(e / e.sum())
    return torch.stack(rows).reshape(scores.shape) if rows else scores.clone()


def W_inplace_div(scores):
    """Right values; e /= e.sum() modifies exp's output in place: backward raises."""
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    e /= e.sum(-1, keepdim=True)
    return e


def W_abs_max(scores):
    """Subtracts max |x|: rows of large negative scores underflow to 0/0."""
    e = torch.exp(scores - scores.abs().amax(-1, keepdim=True))
    return e / e.sum(-1, keepdim=True)


def O_inplace_exp_intermediate(scores):
    """exp_ in place on the (fresh) shifted tensor: safe for autograd."""
    e = scores - scores.amax(-1, keepdim=True)
    e.exp_()
    return e / e.sum(-1, keepdim=True)
