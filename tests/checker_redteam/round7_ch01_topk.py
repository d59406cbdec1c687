"""Round 7 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W08 is A_08 (a write into the tensor score() returned: right since round 6, O_07).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def C_01_reference(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ values, w


def O_02_sort_and_kthvalue(queries, keys, values, score, k):
    # k-th largest = (n - k + 1)-th smallest
    s = score(queries, keys)
    n = s.shape[-1]
    kth = s.kthvalue(n - k + 1, dim=-1, keepdim=True).values
    w = torch.softmax(torch.where(s >= kth, s, torch.full_like(s, float("-inf"))), -1)
    return w @ values, w


def O_03_mask_after_exp(queries, keys, values, score, k):
    # stable exp over all keys, multiply by the mask, renormalise: same numbers
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[:, k - 1:k]
    e = torch.exp(s - s.max(-1, keepdim=True).values) * (s >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_01_exactly_k_scatter(queries, keys, values, score, k):
    # keeps exactly k keys (topk indices): ties with the k-th score are dropped arbitrarily
    s = score(queries, keys)
    idx = s.topk(k, dim=-1).indices
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w


def W_02_tie_tolerance(queries, keys, values, score, k):
    # counts scores within 1e-3 of the k-th as ties: near-ties are not ties
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth - 1e-3, float("-inf")), -1)
    return w @ values, w


def W_03_topk_on_weights(queries, keys, values, score, k):
    # picks the top k on the softmax weights: rounding makes near scores tie
    s = score(queries, keys)
    p = torch.softmax(s, -1)
    kth = p.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(p < kth, float("-inf")), -1)
    return w @ values, w


def W_04_score_args_swapped(queries, keys, values, score, k):
    # score(keys, queries).T: right for symmetric scores (dot, Gaussian) only
    s = score(keys, queries).T
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


def W_05_global_threshold(queries, keys, values, score, k):
    # one threshold for all queries: the k-th best of the first query
    s = score(queries, keys)
    kth = s[0].topk(k).values[-1]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    w = torch.nan_to_num(w)
    return w @ values, w


def W_06_detached_scores(queries, keys, values, score, k):
    # right values, no gradient to queries and keys
    s = score(queries, keys).detach()
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


def W_07_kthvalue_off_by_one(queries, keys, values, score, k):
    # kthvalue(n - k): keeps k + 1 keys
    s = score(queries, keys)
    n = s.shape[-1]
    if n - k < 1:
        kth = s.min(-1, keepdim=True).values
    else:
        kth = s.kthvalue(n - k, dim=-1, keepdim=True).values
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


# Accepted on purpose: it writes -inf into the tensor score() just returned, which is the
# function's own; round 6 decided so (round6_ch01_topk.py O_07). Only a score that
# returns a stored table or a view of its input is harmed, and the exercise's do not.
def A_08_inplace_on_score_output(queries, keys, values, score, k):
    # writes -inf into the tensor returned by score(): if score returns a stored tensor
    # (or a view of an input) this corrupts it
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:].clone()
    with torch.no_grad():
        s[s < kth] = float("-inf")
    w = torch.softmax(s, -1)
    return w @ values, w


_CACHE = {}


def W_09_mask_cached_by_shape(queries, keys, values, score, k):
    # caches the mask per (shape, k): a later call with the same shapes reuses it
    s = score(queries, keys)
    key = (tuple(s.shape), k)
    if key not in _CACHE:
        kth = s.topk(k, dim=-1).values[:, -1:]
        _CACHE[key] = s >= kth
    w = torch.softmax(s.masked_fill(~_CACHE[key], float("-inf")), -1)
    return w @ values, w


def W_10_mask_finite_fill(queries, keys, values, score, k):
    # fills the hidden scores with -1e4: not exactly 0 when the kept scores are very low
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, -1e4), -1)
    return w @ values, w


def W_11_quantile_lower(queries, keys, values, score, k):
    # threshold from torch.quantile with interpolation="lower": one rank too low
    s = score(queries, keys)
    n = s.shape[-1]
    kth = torch.quantile(s.float(), 1 - k / n, dim=-1, keepdim=True,
                         interpolation="lower").to(s.dtype)
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


# Renamed O_04 -> W_ after round 13: quantile interpolation is not exact: float64 scores [1, 1 - 2^-53, 0] with k=1 keep 2 keys (round 13's one-ulp near-tie, ruled wrong).
def W_04_quantile_linear(queries, keys, values, score, k):
    # linear-interpolated quantile at 1 - k/n lies in (s_(k+1), s_(k)]: keeps top k + ties
    s = score(queries, keys)
    n = s.shape[-1]
    kth = torch.quantile(s.double(), 1 - k / n, dim=-1, keepdim=True)
    keep = s.double() >= kth
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w


def W_12_k_clamped_one_less(queries, keys, values, score, k):
    # guards k > num_keys with min(k, n - 1): when k == n the worst key is dropped
    s = score(queries, keys)
    k = min(k, s.shape[-1] - 1) if s.shape[-1] > 1 else 1
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


def W_13_values_dtype_float32(queries, keys, values, score, k):
    # builds the mask as float32 and multiplies: float64 inputs give float32 weights
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    keep = (s >= kth).float()
    e = torch.exp(s - s.max(-1, keepdim=True).values).float() * keep
    w = e / e.sum(-1, keepdim=True)
    return w @ values.float(), w


def W_14_mask_rows_by_column_max(queries, keys, values, score, k):
    # stabilises with the max over the queries (axis 0) instead of each row
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(s - s.max(0, keepdim=True).values) * (s >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_15_isclose_ties(queries, keys, values, score, k):
    # ties found with torch.isclose (rtol 1e-5): near-ties count as ties
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    keep = (s > kth) | torch.isclose(s, kth.expand_as(s))
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w


def O_05_gather_kept(queries, keys, values, score, k):
    # inf threshold via -inf where; right values built with where on the exp
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values.min(dim=-1, keepdim=True).values
    s = torch.where(s >= kth, s, s.new_tensor(float("-inf")))
    w = s.softmax(-1)
    return torch.einsum("qk,kv->qv", w, values), w


def W_16_float64_returns_float32(queries, keys, values, score, k):
    out, w = C_01_reference(queries, keys, values, score, k)
    if w.dtype == torch.float64:
        return out.float(), w.float()
    return out, w


def W_17_bfloat16_returns_float32(queries, keys, values, score, k):
    out, w = C_01_reference(queries, keys, values, score, k)
    if w.dtype == torch.bfloat16:
        return out.float(), w.float()
    return out, w


import functools


@functools.lru_cache(maxsize=16)
def _scores_cached(score, queries, keys):
    # lru_cache hashes tensors by identity: stale after an in-place update of queries/keys
    return score(queries, keys)


def W_18_lru_cache_scores(queries, keys, values, score, k):
    # memoises score(queries, keys) with functools.lru_cache (the desk demo calls it often)
    s = _scores_cached(score, queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ values, w


_C2 = {}


def W_19_cache_key_includes_score_and_dtype(queries, keys, values, score, k):
    # caches the kept-key mask per (shapes, k, score, dtype)
    s = score(queries, keys)
    key = (tuple(s.shape), k, score, s.dtype)
    if key not in _C2:
        _C2[key] = s >= s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~_C2[key], float("-inf")), -1)
    return w @ values, w


def W_20_detached_values(queries, keys, values, score, k):
    out, w = C_01_reference(queries, keys, values.detach(), score, k)
    return out, w


def W_21_weights_detached_output_ok(queries, keys, values, score, k):
    out, w = C_01_reference(queries, keys, values, score, k)
    return out, w.detach()


def O_06_per_query_loop(queries, keys, values, score, k):
    # one query at a time, with a Python-level count of the kept keys
    s = score(queries, keys)
    rows = []
    for i in range(s.shape[0]):
        row = s[i]
        kth = row.sort(descending=True).values[k - 1]
        rows.append(torch.softmax(row.masked_fill(row < kth, float("-inf")), -1))
    w = torch.stack(rows)
    return w @ values, w
