"""Round 9 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

S_15 (calls score twice) gives the right result; the text does not forbid it.
"""
# flake8: noqa
import torch
CHECK = "check_topk_attention_pool"


def _masked(scores, keep):
    return scores.masked_fill(~keep, float("-inf"))


def C_01_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def O_02_softmax_then_renormalize(queries, keys, values, score, k):
    # softmax first, zero the dropped keys, renormalize: same values and gradients
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, dim=-1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_03_sort_and_where(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.detach().sort(dim=-1, descending=True).values[:, k - 1:k]
    s = torch.where(scores >= kth, scores, torch.full_like(scores, float("-inf")))
    w = torch.softmax(s, dim=-1)
    return w @ values, w


def W_01_isclose_ties(queries, keys, values, score, k):
    # "float-safe" tie test: also keeps keys within rtol=1e-5 of the k-th score
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = (scores >= kth) | torch.isclose(scores, kth.expand_as(scores))
    w = torch.softmax(_masked(scores, keep), dim=-1)
    return w @ values, w


def W_02_manual_softmax_no_max(queries, keys, values, score, k):
    # masked manual softmax without the max shift: overflows on large scores
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(scores) * (scores >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_03_manual_softmax_global_max(queries, keys, values, score, k):
    # shift by the matrix-wide max: a query whose best scores are far below it underflows
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(scores - scores.max()) * (scores >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_04_ties_with_eps(queries, keys, values, score, k):
    # subtracts a small absolute epsilon from the threshold
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, scores >= kth - 1e-6), dim=-1)
    return w @ values, w


def W_05_quantile_lower(queries, keys, values, score, k):
    # threshold via quantile: interpolation='lower' keeps one key too many
    scores = score(queries, keys)
    n = scores.shape[-1]
    kth = torch.quantile(scores.detach(), 1 - k / n, dim=-1, keepdim=True,
                         interpolation="lower")
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def W_06_weights_detached(queries, keys, values, score, k):
    # top-k chosen on a detached copy, then the weights computed from it as well
    scores = score(queries, keys)
    s = scores.detach()
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, s >= kth), dim=-1)
    return w.detach() @ values, w


def W_07_mask_via_multiply_inf(queries, keys, values, score, k):
    # additive mask built from a 0/1 mask with log(): log(0) = -inf, fine, but in float32
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    add = torch.log((scores >= kth).float())
    w = torch.softmax(scores + add, dim=-1)
    return w @ values, w


def W_08_topk_indices_scatter_plus_equal_kth_float32(queries, keys, values, score, k):
    # ties found by comparing in float32: float64 near-ties collapse to equal
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores.float() >= kth.float()
    w = torch.softmax(_masked(scores, keep), dim=-1)
    return w @ values, w


def W_09_scores_rounded_for_ties(queries, keys, values, score, k):
    # rounds the scores to 6 decimals before comparing "to catch ties"
    scores = score(queries, keys)
    r = torch.round(scores.detach(), decimals=6)
    kth = r.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, r >= kth), dim=-1)
    return w @ values, w


def W_10_k_clamped_to_half(queries, keys, values, score, k):
    # "k must not exceed half the keys" clamp
    scores = score(queries, keys)
    k = min(k, max(1, scores.shape[-1] // 2)) if scores.shape[-1] > 2 else k
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def W_11_fill_lowest_finite(queries, keys, values, score, k):
    # fills with the lowest finite float32 even for float64 scores (-3.4e38)
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, torch.finfo(torch.float32).min), -1)
    return w @ values, w


_last = {}


def W_12_cache_kth_by_shape(queries, keys, values, score, k):
    # remembers the threshold per (shape, k): a second score function of the same shape reuses it
    scores = score(queries, keys)
    key = (tuple(scores.shape), k, scores.dtype)
    if key not in _last:
        _last[key] = scores.detach().topk(k, dim=-1).values[:, -1:]
    kth = _last[key]
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def W_13_kth_without_keepdim(queries, keys, values, score, k):
    # kth without keepdim: broadcasts along the keys (crashes unless square, wrong if square)
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1]
    if scores.shape[0] != scores.shape[1]:
        kth = kth[:, None]
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def W_14_bf16_scores_compared_after_cast(queries, keys, values, score, k):
    # compares in the values' dtype (cast for "consistency"): float16 values + float32
    # scores merge near-ties
    scores = score(queries, keys)
    s = scores.to(values.dtype) if values.dtype != scores.dtype else scores.half()
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(_masked(scores, s >= kth), dim=-1)
    return w @ values, w


def S_15_calls_score_twice(queries, keys, values, score, k):
    # calls score() twice (once for the threshold, once for the softmax)
    kth = score(queries, keys).topk(k, dim=-1).values[:, -1:]
    scores = score(queries, keys)
    w = torch.softmax(_masked(scores, scores >= kth), dim=-1)
    return w @ values, w


def W_16_squeeze_outputs(queries, keys, values, score, k):
    # squeezes the outputs "to drop the extra axis": (num_queries,) when value_dim == 1
    o, w = C_01_reference(queries, keys, values, score, k)
    return o.squeeze(), w


def W_17_values_detached(queries, keys, values, score, k):
    return C_01_reference(queries, keys, values.detach(), score, k)


def W_18_keys_detached(queries, keys, values, score, k):
    return C_01_reference(queries, keys.detach(), values, score, k)


def W_19_all_keys_fast_path_no_shift(queries, keys, values, score, k):
    # k >= num_keys: "plain attention pooling" fast path with a hand-written softmax, no shift
    scores = score(queries, keys)
    if k >= scores.shape[-1]:
        e = torch.exp(scores)
        w = e / e.sum(-1, keepdim=True)
        return w @ values, w
    return C_01_reference(queries, keys, values, score, k)
