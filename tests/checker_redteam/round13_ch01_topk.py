"""Round 13 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but right
(O_) and accepted (A_) solutions of check_topk_attention_pool written from the exercise
text alone; copied from /work/redteam/round13/A/sols/ch01_topk.py.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed (book/checks/ch01.py): W_25 (ties with a one-ulp tolerance): _topk_cases_round13,
scores [1, 1 - 2^-53] in float64 and [1, 1 - 2^-24] in float32, k=1 (not a tie); W_33/W_34
(tied keys dropped above 64 or 8 keys), W_36 (no max shift above 8 keys) and W_35 (float64
in float32 above 8 queries): _topk_large, 67 queries with 9 keys and 3 queries with 4099
keys, integer points (many ties), score = dot + 400, k=3, in the main loop and under
torch.no_grad() and float64 in _topk_matrix. W_32 (values.requires_grad_()) is caught by
_core's argument checks. A_12 (score called twice) is accepted pending the lead's ruling.
"""
import torch

CHECK = "check_topk_attention_pool"


def _pool(scores, keep, values):
    masked = scores.masked_fill(~keep, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    return weights @ values, weights


def C_01_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def C_02_sort(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.sort(dim=-1, descending=True).values[:, k - 1 : k]
    masked = torch.where(scores >= kth, scores, torch.full_like(scores, float("-inf")))
    weights = torch.softmax(masked, dim=-1)
    return weights @ values, weights


def O_03_kthvalue_of_negation(queries, keys, values, score, k):
    """k-th smallest of -scores is the k-th largest of scores."""
    scores = score(queries, keys)
    kth = -torch.kthvalue(-scores, k, dim=-1, keepdim=True).values
    return _pool(scores, scores >= kth, values)


def O_04_renormalised_softmax(queries, keys, values, score, k):
    """softmax of all keys, zeroed outside the top k, renormalised (the max is kept, so no
    underflow of the kept mass)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, dim=-1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_05_count_greater(queries, keys, values, score, k):
    """Keep key j iff fewer than k keys score strictly higher: the same set, ties kept."""
    scores = score(queries, keys)
    greater = (scores[:, None, :] > scores[:, :, None]).sum(-1)  # (q, n): keys above j
    return _pool(scores, greater < k, values)


# ---------------------------------------------------------------- wrong
def W_06_near_tie_tolerance(queries, keys, values, score, k):
    """Keeps keys within 1e-6 of the k-th score 'for rounding safety': scores 1.0 and
    1.0 - 1e-7 (float64, k = 1) both kept; the second should get weight 0."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth - 1e-6, values)


def W_07_isclose_ties(queries, keys, values, score, k):
    """Ties found with torch.isclose (rtol 1e-5): float64 scores 100 and 100 - 1e-4 tie."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, (scores > kth) | torch.isclose(scores, kth.expand_as(scores)), values)


def W_08_mask_from_float32(queries, keys, values, score, k):
    """Mask computed from float32-rounded scores (weights in float64): float64 scores
    1 + 1e-12 and 1 merge in float32, so k = 1 keeps both."""
    scores = score(queries, keys)
    s32 = scores.float()
    kth = s32.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, s32 >= kth, values)


def W_09_distinct_values(queries, keys, values, score, k):
    """Threshold = k-th highest DISTINCT score: scores [5, 5, 3, 1], k = 2 keeps 3 as well."""
    scores = score(queries, keys)
    keep = torch.zeros_like(scores, dtype=torch.bool)
    for i, row in enumerate(scores):
        distinct = torch.unique(row.detach()).flip(0)
        kth = distinct[min(k, len(distinct)) - 1]
        keep[i] = row >= kth
    return _pool(scores, keep, values)


def W_10_fill_kth_minus_30(queries, keys, values, score, k):
    """Hidden keys set to kth - 30 instead of -inf: they keep weight ~e^-30 ~ 1e-13."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    masked = torch.where(scores >= kth, scores, kth - 30)
    w = torch.softmax(masked, dim=-1)
    return w @ values, w


def W_11_fill_kth_minus_100(queries, keys, values, score, k):
    """Hidden keys set to kth - 100: weight e^-100 ~ 4e-44 (float32 denormal, float64
    normal), not exactly 0."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    masked = torch.where(scores >= kth, scores, kth - 100)
    w = torch.softmax(masked, dim=-1)
    return w @ values, w


_calls = {"n": 0}


def A_12_score_called_twice(queries, keys, values, score, k):
    """Calls score twice (once for the mask, once for the weights): a stateful or random
    score (dropout on the scores) gets a mask from one draw and weights from another.
    Accepted (A_), for the lead's ruling: every score the exercise passes is a pure function
    of (queries, keys), for which two calls give the same scores and this entry is right; it
    is wrong only for a random or stateful score, which the text does not mention. Rejecting
    it means a checker score that counts its calls or draws noise, i.e. a new requirement
    ("call score once") that the exercise text would have to state first."""
    mask_scores = score(queries, keys)
    kth = mask_scores.topk(k, dim=-1).values[:, -1:]
    keep = mask_scores >= kth
    scores = score(queries, keys)
    return _pool(scores, keep, values)


def W_13_kthvalue_off_by_one(queries, keys, values, score, k):
    """kthvalue(scores, n - k) instead of n - k + 1: keeps k + 1 keys (k < n)."""
    scores = score(queries, keys)
    n = scores.shape[-1]
    kth = torch.kthvalue(scores, max(n - k, 1), dim=-1, keepdim=True).values
    return _pool(scores, scores >= kth, values)


def W_14_topk_indices_scatter(queries, keys, values, score, k):
    """Scatter of topk indices: ties at the k-th score are dropped arbitrarily."""
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    return _pool(scores, keep, values)


def W_15_k_clipped_to_half(queries, keys, values, score, k):
    """k silently clipped to max(1, num_keys // 2) 'to keep it sparse': k = n keeps half."""
    scores = score(queries, keys)
    k = min(k, max(1, scores.shape[-1] // 2))
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_16_weights_float32(queries, keys, values, score, k):
    """Softmax computed in float32 and cast back: float64 inputs get float32 accuracy."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.float().masked_fill(scores < kth, float("-inf")), -1)
    w = w.to(scores.dtype)
    return w @ values, w


def W_17_mask_on_values_norm(queries, keys, values, score, k):
    """Outputs from the top-k renormalised weights but the returned weights are the full
    softmax (the two disagree whenever k < num_keys)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    out, _ = _pool(scores, scores >= kth, values)
    return out, torch.softmax(scores, -1)


def A_18_posinf_clamped(queries, keys, values, score, k):
    """Keys whose score is -inf are removed before counting the k (topk over finite scores
    only): a row [3, -inf, -inf] with k = 2 ... same; but a row [1, 1, -inf], k = 3 keeps
    all (fine) -- fault: rows with +inf scores: [inf, 0, 1] k=1 -> inf masked to finite max."""
    scores = score(queries, keys)
    finite = torch.nan_to_num(scores, posinf=torch.finfo(scores.dtype).max)
    kth = finite.topk(k, dim=-1).values[:, -1:]
    return _pool(finite, finite >= kth, values)


def W_19_median_tie_only(queries, keys, values, score, k):
    """Ties kept only when they are adjacent in the key order (checks key j-1 and j+1):
    scores [2, 1, 0, 2] with k = 1 keeps only key 0."""
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    tie = scores == kth
    left = torch.nn.functional.pad(keep[:, :-1], (1, 0))
    right = torch.nn.functional.pad(keep[:, 1:], (0, 1))
    keep = keep | (tie & (left | right))
    return _pool(scores, keep, values)


def W_20_inplace_values(queries, keys, values, score, k):
    """Zeroes the values of hidden keys for the top query in place (values.data) when no
    gradient is needed: the caller's values change."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    out, w = _pool(scores, scores >= kth, values)
    if not values.requires_grad:
        values.data.mul_((w.sum(0) > 0).to(values.dtype)[:, None])
    return out, w


def W_21_weights_detached(queries, keys, values, score, k):
    """Weights from detached scores ('the mask is not differentiable anyway'): no gradient
    reaches queries and keys."""
    scores = score(queries, keys).detach()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_22_keys_values_swapped_when_square(queries, keys, values, score, k):
    """score(keys, queries).T: right for symmetric scores (dot, gaussian) only."""
    scores = score(keys, queries).T
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def A_23_k_zero_all_keys(queries, keys, values, score, k):
    """k > num_keys clipped to num_keys ... but k == 0 treated as 'all keys'."""
    scores = score(queries, keys)
    n = scores.shape[-1]
    if k <= 0:
        k = n
    kth = scores.topk(min(k, n), dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_24_float16_weights(queries, keys, values, score, k):
    """Weights rounded through float16 for speed (float32 and float64 inputs): ~1e-3 error."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    _, w = _pool(scores, scores >= kth, values)
    w = w.half().to(scores.dtype)
    return w @ values, w


def W_25_one_ulp_tolerance(queries, keys, values, score, k):
    """Ties with a one-ulp tolerance (nextafter towards -inf): scores 1 and 1 - 2^-53
    (float64, adjacent doubles) with k = 1 both kept."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    lo = torch.nextafter(kth, torch.full_like(kth, float("-inf")))
    return _pool(scores, scores >= lo, values)


def W_26_abs_tol_1e12(queries, keys, values, score, k):
    """Absolute tie tolerance 1e-12: float64 scores 0 and -1e-13 tie."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth - 1e-12, values)


def W_27_shift_by_kth(queries, keys, values, score, k):
    """Stable-looking softmax shifted by the k-th score instead of the max: max - kth > 88
    (float32, e.g. scores [200, 0, -1], k = 2) overflows to inf/inf = NaN."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores >= kth
    e = torch.exp(scores - kth) * keep
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_28_float16_returns_float32(queries, keys, values, score, k):
    """Low-precision inputs computed in float32 and returned in float32."""
    scores = score(queries, keys).float()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values.float())


def W_29_rel_tol_relative(queries, keys, values, score, k):
    """Relative tie tolerance |s - kth| <= 1e-9 |kth|: float64 scores 1e6 and 1e6 - 1e-4
    tie (k = 1)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth - 1e-9 * kth.abs(), values)


def W_30_no_renormalise_after_fill(queries, keys, values, score, k):
    """Weights = full softmax times the mask, not renormalised: each row sums to < 1
    whenever a hidden key has a score within ~30 of the max."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, -1) * (scores >= kth)
    return w @ values, w


def W_31_numpy_partition(queries, keys, values, score, k):
    """k-th score via numpy.partition (the mask needs no gradient): crashes on bfloat16."""
    import numpy as np
    scores = score(queries, keys)
    s = scores.detach().cpu().numpy()
    n = s.shape[-1]
    kth = torch.from_numpy(np.partition(s, n - k, axis=-1)[:, n - k : n - k + 1].copy())
    return _pool(scores, scores >= kth.to(scores.device), values)


def W_32_values_requires_grad(queries, keys, values, score, k):
    """values.requires_grad_() 'to get gradients': flips the caller's tensor's flag."""
    if values.is_leaf and not values.requires_grad:
        values.requires_grad_()
    return C_01_reference(queries, keys, values, score, k)


def W_33_many_keys_topk_scatter(queries, keys, values, score, k):
    """Ties kept for up to 64 keys; beyond that, topk indices scattered (ties dropped) for
    speed: 1 query, 100 keys all scoring 0, k = 1 keeps 1 key instead of 100."""
    if keys.shape[0] <= 64:
        return C_01_reference(queries, keys, values, score, k)
    return W_14_topk_indices_scatter(queries, keys, values, score, k)


def W_34_many_keys_topk_scatter_8(queries, keys, values, score, k):
    """As W_33 with the switch at 8 keys: 1 query, 10 keys scoring 0, k = 1 keeps 1 key."""
    if keys.shape[0] <= 8:
        return C_01_reference(queries, keys, values, score, k)
    return W_14_topk_indices_scatter(queries, keys, values, score, k)


def W_35_many_queries_float32(queries, keys, values, score, k):
    """float64 inputs with more than 8 queries computed in float32."""
    if queries.dtype == torch.float64 and queries.shape[0] > 8:
        out, w = C_01_reference(queries.float(), keys.float(), values.float(),
                                lambda a, b: score(a.double(), b.double()).float(), k)
        return out.double(), w.double()
    return C_01_reference(queries, keys, values, score, k)


def W_36_many_keys_no_shift(queries, keys, values, score, k):
    """More than 8 keys: masked exp without the max shift: scores near 100 (float32)
    overflow."""
    if keys.shape[0] <= 8:
        return C_01_reference(queries, keys, values, score, k)
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(scores) * (scores >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_37_inplace_scale_queries_many(queries, keys, values, score, k):
    """More than 8 keys and no autograd: sorts the caller's keys in place by their first
    feature (keys.data), permuting the caller's tensor."""
    if keys.shape[0] > 8 and not keys.requires_grad:
        order = keys[:, 0].argsort()
        keys.data.copy_(keys.data[order])
        values = values[order]
    return C_01_reference(queries, keys, values, score, k)[0], \
        C_01_reference(queries, keys, values, score, k)[1]
