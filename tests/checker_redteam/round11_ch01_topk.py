"""Round 11 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Hole fixed: W_17 clamps the scores into +-6e4 for every dtype ("for half precision"); no
float32 or float64 case had scores beyond about 2e4. The checker now has float32 dot scores
[1e5, 99999, 0] and float64 ones [2e5, 2e5 - 0.25, -2e5, 3] at k=2, and a message that names
the two distinct scores that got the same weight.

S_01 clamps k into 1..num_keys without a word: the exercise text says nothing about k < 1 or
k > num_keys (torch.topk already raises for k > num_keys), so it is not tested.
"""
# flake8: noqa
import torch
CHECK = "check_topk_attention_pool"


def _sm(s):
    return torch.softmax(s, dim=-1)


def C_01_standard(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth, float("-inf")))
    return w @ values, w


def O_02_kthvalue(queries, keys, values, score, k):
    s = score(queries, keys)
    n = s.shape[-1]
    kth = s.kthvalue(n - k + 1, dim=-1, keepdim=True).values
    w = _sm(torch.where(s >= kth, s, torch.full_like(s, float("-inf"))))
    return w @ values, w


def O_03_softmax_then_renormalise(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[:, k - 1:k]
    w = _sm(s) * (s >= kth)
    w = w / w.sum(dim=-1, keepdim=True)
    return w @ values, w


def W_01_isclose_ties(queries, keys, values, score, k):
    # keeps keys "tied" within float tolerance of the k-th score
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    keep = (s > kth) | torch.isclose(s, kth.expand_as(s))
    w = _sm(s.masked_fill(~keep, float("-inf")))
    return w @ values, w


def W_02_tolerance_1e_6(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth - 1e-6, float("-inf")))
    return w @ values, w


def W_03_kth_no_keepdim(queries, keys, values, score, k):
    # kth of shape (num_queries,): broadcasts against columns when square
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1]
    w = _sm(s.masked_fill(s < kth, float("-inf")))
    return w @ values, w


def W_04_compare_in_float32(queries, keys, values, score, k):
    # compares scores after a float32 cast: float64 near-ties collapse into ties
    s = score(queries, keys)
    s32 = s.float()
    kth = s32.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s32 < kth, float("-inf")))
    return w @ values, w


def W_05_round_scores(queries, keys, values, score, k):
    # rounds the scores to 4 decimals before ranking "to make ties robust"
    s = score(queries, keys)
    r = torch.round(s, decimals=4)
    kth = r.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(r < kth, float("-inf")))
    return w @ values, w


def W_06_weights_detached_for_output(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth, float("-inf")))
    return w.detach() @ values, w


def S_01_k_clamped_silently(queries, keys, values, score, k):
    # k larger than num_keys / k < 1 silently clamped instead of an error
    s = score(queries, keys)
    k = max(1, min(k, s.shape[-1]))
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth, float("-inf")))
    return w @ values, w


def W_08_topk_of_softmax(queries, keys, values, score, k):
    # ranks the softmax weights, not the scores: weights of far-below keys underflow
    # to 0 and tie with each other at the k-th place
    s = score(queries, keys)
    p = _sm(s)
    kth = p.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(p < kth, float("-inf")))
    return w @ values, w


def W_09_gather_values_by_index(queries, keys, values, score, k):
    # weights on the top-k values only; ties at the k-th place dropped
    s = score(queries, keys)
    top = s.topk(k, dim=-1)
    wk = _sm(top.values)
    w = torch.zeros_like(s).scatter(-1, top.indices, wk)
    return w @ values, w


def W_10_minus_large_fill(queries, keys, values, score, k):
    # fills with -1e4 (safe in float16) instead of -inf: masked keys get weight
    # exp(-1e4 - max) = 0 ... unless the kept scores are themselves below -1e4
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth, -1e4))
    return w @ values, w


def W_11_mask_from_detached_half(queries, keys, values, score, k):
    # computes the ranking in float16 to save memory
    s = score(queries, keys)
    h = s.detach().half()
    kth = h.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(h < kth, float("-inf")))
    return w @ values, w


def W_12_mask_cached_by_shape(queries, keys, values, score, k, _memo={}):
    s = score(queries, keys)
    key = (tuple(s.shape), k)
    if key not in _memo:
        kth = s.topk(k, dim=-1).values[:, -1:]
        _memo[key] = s < kth
    w = _sm(s.masked_fill(_memo[key], float("-inf")))
    return w @ values, w


def W_13_softmax_in_float32(queries, keys, values, score, k):
    # float16 input: returns float32 weights/outputs
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.float().masked_fill(s < kth, float("-inf")))
    if s.dtype == torch.float64:
        w = w.double()
    return w @ values.to(w.dtype), w


def W_14_kth_distinct_value(queries, keys, values, score, k):
    # "handles ties" by ranking distinct scores: the k-th highest *distinct* score
    s = score(queries, keys)
    kths = []
    for row in s.detach():
        u = torch.unique(row, sorted=True).flip(0)
        kths.append(u[min(k, len(u)) - 1])
    kth = torch.stack(kths)[:, None]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def O_04_exp_times_mask_eps(queries, keys, values, score, k):
    # exp(s - max) * mask, normalised, with a +1e-12 guard; underflow of the kept
    # keys far below the max leaves their weight 0 (fine) -- but scores -inf
    # give exp(nan)? no: mask computed after, so -inf * 0 -> nan
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(s - s.amax(-1, keepdim=True)) * (s >= kth)
    w = e / (e.sum(-1, keepdim=True) + 1e-12)
    return w @ values, w


def W_16_k1_argmax_fast_path(queries, keys, values, score, k):
    # k == 1: one-hot of the argmax (drops keys tied with the best score)
    s = score(queries, keys)
    if k == 1:
        w = torch.nn.functional.one_hot(s.argmax(-1), s.shape[-1]).to(s.dtype)
        return w @ values, w
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def W_17_clamp_scores_float16_range(queries, keys, values, score, k):
    # clamps the scores into +-6e4 "so half precision cannot overflow"
    s = score(queries, keys).clamp(-6e4, 6e4)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w
