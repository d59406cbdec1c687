"""Round 1 red team, chapter 1: check_softmax and check_topk_attention_pool.

Written from the exercise text alone (exercises/solutions/01_attention_cues.ipynb, 1.1 and
1.2), without reading the checkers. Each entry is
(checker_name, short_description, kind, callable); kinds follow issue 12:
1 gradients, 2 numerically fragile, 3 right only on easy inputs, 4 randomness,
5 not what the exercise asks, 6 crashes / types.
"""
import numpy as np
import torch


# ---------------------------------------------------------------- 1.1 softmax: wrong

def softmax_naive(scores):
    """Kind 2: the textbook formula, no max subtraction (exp(1000) = inf)."""
    exps = torch.exp(scores)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_global_max(scores):
    """Kind 2/3: subtracts the max of the whole tensor, not of each row; rows far below
    the global max underflow to 0/0 = NaN."""
    exps = torch.exp(scores - scores.max())
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_clamp(scores):
    """Kind 2: avoids overflow by clamping the scores at 80, which flattens every
    score above 80 (e.g. [1000, 999] gives 0.5/0.5 instead of 0.73/0.27)."""
    exps = torch.exp(scores.clamp(max=80.0))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_mean_shift(scores):
    """Kind 2: subtracts the row mean instead of the row max: still overflows when the
    spread within a row is large."""
    exps = torch.exp(scores - scores.mean(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_dim1(scores):
    """Kind 3: hard-codes dim=1 (right for 2-D inputs only)."""
    shifted = scores - scores.amax(dim=1, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=1, keepdim=True)


def softmax_inplace(scores):
    """Kind 5: subtracts the max in place, so the caller's tensor changes (and autograd
    refuses a leaf that requires grad)."""
    scores -= scores.amax(dim=-1, keepdim=True)
    exps = torch.exp(scores)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_inplace_exp(scores):
    """Kind 1: fresh tensor, then exp_ and div_ in place: the forward is right, but
    div_ overwrites the output that exp_ saved for its backward."""
    exps = (scores - scores.amax(dim=-1, keepdim=True)).exp_()
    exps /= exps.sum(dim=-1, keepdim=True)
    return exps


def softmax_numpy(scores):
    """Kind 1: a numpy round trip: right values, no gradient."""
    x = scores.detach().cpu().numpy()
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(scores.device)


def softmax_no_grad(scores):
    """Kind 1: computes the shift under torch.no_grad() 'because the max is a constant',
    but also the exp, so the result has no graph."""
    with torch.no_grad():
        exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_detach_out(scores):
    """Kind 1: right values, returns a detached tensor."""
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return (exps / exps.sum(dim=-1, keepdim=True)).detach()


def softmax_no_keepdim(scores):
    """Kind 3/6: forgets keepdim in the sum; broadcasting makes square inputs
    silently wrong and others crash."""
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1)


def softmax_float32_out(scores):
    """Kind 6: computes in float32 for accuracy and forgets to cast back (float16 in,
    float32 out)."""
    x = scores.float()
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_float64_out(scores):
    """Kind 6: computes in float64 and returns float64 for every input."""
    x = scores.double()
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_squeeze(scores):
    """Kind 3: squeezes 'to be safe': a batch of 1 or a single key changes the shape."""
    x = scores.squeeze()
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_item_max(scores):
    """Kind 2/3: max as a Python float via .item() (global, like softmax_global_max)."""
    exps = torch.exp(scores - scores.max().item())
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_builtin(scores):
    """Kind 5: calls torch.softmax, which the exercise forbids."""
    return torch.softmax(scores, dim=-1)


def softmax_tuple(scores):
    """Kind 6: returns (weights, exps) 'for debugging'."""
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exps / exps.sum(dim=-1, keepdim=True), exps


# ---------------------------------------------------------------- 1.1 softmax: right

def softmax_detached_max(scores):
    """Right: detaching the max is harmless (softmax is shift invariant), the gradient
    is exact."""
    shifted = scores - scores.amax(dim=-1, keepdim=True).detach()
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_logsumexp(scores):
    """Right: exp(x - logsumexp(x))."""
    return torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))


def softmax_max_values(scores):
    """Right: scores.max(dim=-1, keepdim=True).values, division via reciprocal."""
    exps = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
    return exps * exps.sum(dim=-1, keepdim=True).reciprocal()


def softmax_float64_inside(scores):
    """Right: computes in float64 and casts back to the input dtype."""
    x = scores.double()
    exps = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (exps / exps.sum(dim=-1, keepdim=True)).to(scores.dtype)


def softmax_movedim(scores):
    """Right: moves the last axis first, computes, moves it back (non-contiguous out)."""
    x = scores.movedim(-1, 0)
    exps = torch.exp(x - x.amax(dim=0, keepdim=True))
    return (exps / exps.sum(dim=0, keepdim=True)).movedim(0, -1)


# ----------------------------------------------------------- 1.2 top-k pooling: wrong

def topk_score_swapped(queries, keys, values, score, k):
    """Kind 3: calls score(keys, queries).T; only right when the score is symmetric."""
    scores = score(keys, queries).T
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_no_renorm(queries, keys, values, score, k):
    """Kind 5: softmax over all keys, then zero the others: rows no longer sum to 1."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores, dim=-1) * (scores >= kth)
    return weights @ values, weights


def topk_strict(queries, keys, values, score, k):
    """Kind 5: masks scores <= the k-th best: keeps only k - 1 keys."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores <= kth, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_sort_off_by_one(queries, keys, values, score, k):
    """Kind 5: sorted(descending)[:, k] is the (k+1)-th best: keeps k + 1 keys."""
    scores = score(queries, keys)
    kth = scores.sort(dim=-1, descending=True).values[:, k:k + 1]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_dim0(queries, keys, values, score, k):
    """Kind 3: topk along dim 0 (over queries); crashes or is wrong unless shapes agree."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=0).values[-1:, :]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_abs(queries, keys, values, score, k):
    """Kind 3: ranks the keys by |score| ('largest in magnitude'); right while every
    score is positive, wrong for negative ones (e.g. Gaussian scores)."""
    scores = score(queries, keys)
    idx = scores.abs().topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_naive_exp(queries, keys, values, score, k):
    """Kind 2: its own softmax without max subtraction: overflows on large scores."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    exps = torch.exp(scores) * (scores >= kth)
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return weights @ values, weights


def topk_detach(queries, keys, values, score, k):
    """Kind 1: detaches the weights 'because topk is not differentiable'."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    weights = weights.detach()
    return weights @ values, weights


def topk_global_threshold(queries, keys, values, score, k):
    """Kind 5: one threshold for all queries (the k * num_queries best scores overall)."""
    scores = score(queries, keys)
    kth = scores.flatten().topk(k * scores.shape[0]).values[-1]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    weights = torch.nan_to_num(weights)
    return weights @ values, weights


def topk_smallest(queries, keys, values, score, k):
    """Kind 5: largest=False ('top' read as rank 1, 2, ...): the k worst keys."""
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1, largest=False).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_swapped_return(queries, keys, values, score, k):
    """Kind 6: returns (weights, outputs)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights, weights @ values


def topk_finfo32_fill(queries, keys, values, score, k):
    """Kind 6: fills with float32's most negative number: fine in float32, crashes in
    float16 (value does not fit), and gives -inf in no other dtype."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    masked = scores.masked_fill(scores < kth, torch.finfo(torch.float32).min)
    weights = torch.softmax(masked, dim=-1)
    return weights @ values, weights


def topk_minus_1e4(queries, keys, values, score, k):
    """Kind 2: hides the other keys with -1e4 instead of -inf: wrong once the scores
    themselves are of that size (a dominating score, or all scores around -1e4)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, -1e4), dim=-1)
    return weights @ values, weights


def topk_subtract_1e4(queries, keys, values, score, k):
    """Kind 6: subtracts 1e4 from the hidden scores (an additive mask). The values are
    right (a hidden score ends at least 1e4 below the best one), but `1e4 * bool`
    is a float32 tensor, so float16 inputs give float32 weights and outputs."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores - 1e4 * (scores < kth), dim=-1)
    return weights @ values, weights


def topk_ties_index(queries, keys, values, score, k):
    """Kind 3: gathers the top-k values and softmaxes them, then puts them back with
    weights[:, idx] (advanced indexing over every row): right for one query only."""
    scores = score(queries, keys)
    top = scores.topk(k, dim=-1)
    weights = torch.zeros_like(scores)
    for row in range(scores.shape[0]):
        weights[:, top.indices[row]] = torch.softmax(top.values[row], dim=-1)
    return weights @ values, weights


# ----------------------------------------------------------- 1.2 top-k pooling: right

def topk_scatter(queries, keys, values, score, k):
    """Right: softmax over the k best scores, scattered into a zero matrix."""
    scores = score(queries, keys)
    top = scores.topk(k, dim=-1)
    weights = torch.zeros_like(scores).scatter(-1, top.indices,
                                               torch.softmax(top.values, dim=-1))
    return weights @ values, weights


def topk_renorm(queries, keys, values, score, k):
    """Right: softmax over the kept keys via exp(x - max) * keep / sum."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores >= kth
    exps = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * keep
    weights = exps / exps.sum(dim=-1, keepdim=True)
    return weights @ values, weights


def topk_where_inf(queries, keys, values, score, k):
    """Right: torch.where with -inf, indices from argsort."""
    scores = score(queries, keys)
    idx = scores.argsort(dim=-1, descending=True)[:, :k]
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    weights = torch.softmax(torch.where(keep, scores, float("-inf")), dim=-1)
    return weights @ values, weights


def topk_tuple_list(queries, keys, values, score, k):
    """Right: computes with the reference but returns a list [outputs, weights]."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return [weights @ values, weights]


WRONG = [
    ("check_softmax", "exp without max subtraction", 2, softmax_naive),
    ("check_softmax", "subtracts the global max, not each row's", 2, softmax_global_max),
    ("check_softmax", "clamps scores at 80 instead of shifting", 2, softmax_clamp),
    ("check_softmax", "subtracts the row mean instead of the max", 2, softmax_mean_shift),
    ("check_softmax", "hard-coded dim=1 (right for 2-D only)", 3, softmax_dim1),
    ("check_softmax", "in-place `scores -= max` (changes the input)", 5, softmax_inplace),
    ("check_softmax", "exp_ / div_ in place on the output (backward error)", 1,
     softmax_inplace_exp),
    ("check_softmax", "numpy round trip", 1, softmax_numpy),
    ("check_softmax", "shift and exp under torch.no_grad()", 1, softmax_no_grad),
    ("check_softmax", "returns a detached tensor", 1, softmax_detach_out),
    ("check_softmax", "sum without keepdim (broadcasts wrong on square inputs)", 3,
     softmax_no_keepdim),
    ("check_softmax", "float16 in, float32 out", 6, softmax_float32_out),
    ("check_softmax", "returns float64 for every input", 6, softmax_float64_out),
    ("check_softmax", "squeezes the input (size-1 axes vanish)", 3, softmax_squeeze),
    ("check_softmax", "global max via .item()", 2, softmax_item_max),
    ("check_softmax", "calls torch.softmax (forbidden)", 5, softmax_builtin),
    ("check_softmax", "returns a tuple (weights, exps)", 6, softmax_tuple),
    ("check_topk_attention_pool", "score(keys, queries).T (argument order)", 3,
     topk_score_swapped),
    ("check_topk_attention_pool", "softmax over all keys, zero the rest, no renorm", 5,
     topk_no_renorm),
    ("check_topk_attention_pool", "`<=` k-th best: keeps k-1 keys", 5, topk_strict),
    ("check_topk_attention_pool", "sorted[:, k] off by one: keeps k+1 keys", 5,
     topk_sort_off_by_one),
    ("check_topk_attention_pool", "topk along dim 0", 3, topk_dim0),
    ("check_topk_attention_pool", "ranks keys by |score|", 3, topk_abs),
    ("check_topk_attention_pool", "own softmax, exp without max", 2, topk_naive_exp),
    ("check_topk_attention_pool", "detached weights", 1, topk_detach),
    ("check_topk_attention_pool", "one global threshold for all queries", 5,
     topk_global_threshold),
    ("check_topk_attention_pool", "largest=False (k worst keys)", 5, topk_smallest),
    ("check_topk_attention_pool", "returns (weights, outputs)", 6, topk_swapped_return),
    ("check_topk_attention_pool", "fill with finfo(float32).min (float16 overflow)", 6,
     topk_finfo32_fill),
    ("check_topk_attention_pool", "fill with -1e4 instead of -inf", 2, topk_minus_1e4),
    ("check_topk_attention_pool", "additive -1e4 mask: float16 in, float32 out", 6,
     topk_subtract_1e4),
    ("check_topk_attention_pool", "weights[:, idx] = ... (right for 1 query only)", 3,
     topk_ties_index),
]

RIGHT_BUT_UNUSUAL = [
    ("check_softmax", "detached max (shift invariance)", 0, softmax_detached_max),
    ("check_softmax", "exp(x - logsumexp(x))", 0, softmax_logsumexp),
    ("check_softmax", ".max(...).values and reciprocal", 0, softmax_max_values),
    ("check_softmax", "float64 inside, cast back", 0, softmax_float64_inside),
    ("check_softmax", "movedim, non-contiguous output", 0, softmax_movedim),
    ("check_topk_attention_pool", "softmax of top-k values, scattered", 0, topk_scatter),
    ("check_topk_attention_pool", "exp(x - max) * keep / sum", 0, topk_renorm),
    ("check_topk_attention_pool", "argsort + where(-inf)", 0, topk_where_inf),
    ("check_topk_attention_pool", "returns a list [outputs, weights]", 0,
     topk_tuple_list),
]
