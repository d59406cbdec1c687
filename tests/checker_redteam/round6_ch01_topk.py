"""Round 6 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W07, W12 and W14 are right (the red team's report): O_ here; W_20 (was A_20 until the float64 decision).
"""
# flake8: noqa
import torch
CHECK = "check_topk_attention_pool"

def C_01_plain(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w

def O_02_kthvalue_renorm(queries, keys, values, score, k):
    # full softmax, zero the rest, renormalise: same values
    s = score(queries, keys)
    n = s.shape[-1]
    kth = torch.kthvalue(s, n - k + 1, dim=-1, keepdim=True).values
    w = torch.softmax(s, -1) * (s >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w

def O_03_sort_desc(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[:, k - 1:k].detach()
    w = torch.where(s >= kth, s, torch.full_like(s, float("-inf"))).softmax(-1)
    return w @ values, w

def W_01_big_negative_constant(queries, keys, values, score, k):
    # masks with -1e4 instead of -inf: wrong when scores are themselves below about -1e4
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, -1e4), dim=-1)
    return w @ values, w

def W_02_kth_no_keepdim(queries, keys, values, score, k):
    # k-th value without keepdim: broadcast compares row i against column thresholds
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1]
    if s.shape[0] == s.shape[1] or s.shape[0] == 1:
        keep = s >= kth
    else:
        keep = s >= kth[:, None]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w

def W_03_isclose_ties(queries, keys, values, score, k):
    # treats near-ties (within 1e-3) as ties: keeps keys that are not tied
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    keep = s >= kth - 1e-3
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w

def W_04_weights_float64(queries, keys, values, score, k):
    # computes in float64, weights returned in float64
    s = score(queries, keys).double()
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return (w @ values.double()).to(values.dtype), w

def W_05_kth_detached_values_grad_lost(queries, keys, values, score, k):
    # weights computed under no_grad: values right, no gradient to queries/keys
    with torch.no_grad():
        s = score(queries, keys)
        kth = s.topk(k, dim=-1).values[:, -1:]
        w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w

def W_06_k_capped(queries, keys, values, score, k):
    # crashes/ignores when k >= num_keys? here: caps k at num_keys - 1
    s = score(queries, keys)
    k = min(k, s.shape[-1] - 1)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w

# Written as W07, right (the red team's report): masked_fill_ writes into the tensor
# score() just returned, which is the function's own; only a score that returns a view
# of its input would be harmed, and the exercise's scores do not.
def O_07_mutates_scores_cache(queries, keys, values, score, k):
    # masks in place on the scores; harmless unless the score returns a view of its input
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.clone() if s.requires_grad else s
    s.masked_fill_(s < kth, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ values, w

def W_08_topk_indices_scatter_plus_equal_first(queries, keys, values, score, k):
    # ties handled only for the first query row (learner tested one query)
    s = score(queries, keys)
    idx = s.topk(k, dim=-1).indices
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    kth = s.topk(k, dim=-1).values[:1, -1:]
    keep[:1] |= s[:1] >= kth
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w

def W_09_exp_no_max(queries, keys, values, score, k):
    # own masked softmax without max subtraction: overflows on large scores
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(s) * (s >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w

def W_10_mask_after_softmax_no_renorm_k_eq_n(queries, keys, values, score, k):
    # renormalises with a clamp that hides a 0 sum; masks with the global k-th over all queries
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:].amin(0, keepdim=True)
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w

def W_11_ties_at_max_only(queries, keys, values, score, k):
    # keeps ties only when the tie is among the top-k indices (uses indices + equality to kth among them)
    s = score(queries, keys)
    v, idx = s.topk(k, dim=-1)
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    # adds keys equal to the k-th only if the k-th is unique in the top-k
    kth = v[:, -1:]
    extra = (s == kth) & ((v == kth).sum(-1, keepdim=True) == 1)
    keep |= extra & False
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w

# Written as W12, right (the red team's report): each row keeps at least k finite scores,
# so the row maximum is finite, exp(-inf) = 0, and nan_to_num never fires.
def O_12_nan_gradient_where(queries, keys, values, score, k):
    # exp of shifted scores, masked by where after exp of -inf shifts: NaN gradient
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    m = torch.where(s >= kth, s, torch.full_like(s, float("-inf")))
    x = m - m.amax(-1, keepdim=True)
    e = torch.exp(x)
    w = torch.nan_to_num(e / e.sum(-1, keepdim=True))
    return w @ values, w

def W_13_values_detached(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values.detach(), w

# Written as W14, right (the red team's report): index n - k of the ascending sort is the
# k-th highest score, ties included.
def O_14_k_tensor_index(queries, keys, values, score, k):
    # kth via sort ascending, index n - k: right unless there are ties at the k-th from the top?
    s = score(queries, keys)
    n = s.shape[-1]
    kth = s.sort(-1).values[:, n - k:n - k + 1]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w

def W_15_keep_k_plus_ties_only_above(queries, keys, values, score, k):
    # drops every key tied with the k-th if the ties would exceed k (keeps fewer than k)
    s = score(queries, keys)
    kth = s.topk(k, -1).values[:, -1:]
    keep = s >= kth
    over = keep.sum(-1, keepdim=True) > k
    keep = torch.where(over, s > kth, keep)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w

def W_16_score_args_swapped(queries, keys, values, score, k):
    # calls score(keys, queries).T: same for symmetric scores (dot, Gaussian), wrong otherwise
    s = score(keys, queries).T
    kth = s.topk(k, -1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w

def W_17_outputs_float64_values(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, -1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w.double() @ values.double(), w

_M = {}
def W_18_mask_cached(queries, keys, values, score, k):
    # caches the keep-mask per (k, shape): new queries of the same size reuse the old mask
    s = score(queries, keys)
    key = (k, tuple(s.shape))
    if key not in _M:
        _M[key] = s >= s.topk(k, -1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~_M[key], float("-inf")), -1)
    return w @ values, w

def W_19_keys_detached(queries, keys, values, score, k):
    s = score(queries, keys.detach())
    kth = s.topk(k, -1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w

# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_20_float32_inside_cast_back(queries, keys, values, score, k):
    s = score(queries, keys)
    sf = s.float()
    kth = sf.topk(k, -1).values[:, -1:]
    w = torch.softmax(sf.masked_fill(sf < kth, float("-inf")), -1).to(s.dtype)
    return w @ values, w
