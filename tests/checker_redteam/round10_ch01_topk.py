"""Round 10 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def _finish(scores, values, keep):
    s = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ values, w


def W_01_topk_indices_drop_ties(queries, keys, values, score, k):
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    return _finish(scores, values, keep)


def W_02_score_args_swapped(queries, keys, values, score, k):
    scores = score(keys, queries).T
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _finish(scores, values, scores >= kth)


def W_03_fill_minus_1e4(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, -1e4), dim=-1)
    return w @ values, w


def W_04_topk_along_queries(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=0).values[-1:, :]
    return _finish(scores, values, scores >= kth)


def W_05_k1_argmax_onehot(queries, keys, values, score, k):
    scores = score(queries, keys)
    if k == 1:
        w = torch.nn.functional.one_hot(scores.argmax(-1), scores.shape[-1]).to(values.dtype)
        return w @ values, w
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _finish(scores, values, scores >= kth)


def W_06_isclose_ties(queries, keys, values, score, k):
    # treats near-ties as ties (rtol 1e-5): keeps keys that are not tied
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = (scores >= kth) | torch.isclose(scores, kth.expand_as(scores))
    return _finish(scores, values, keep)


def W_07_global_threshold(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1].min()
    return _finish(scores, values, scores >= kth)


def W_08_naive_exp(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    e = torch.exp(scores) * (scores >= kth)
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_09_softmax_then_zero_no_renorm(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, -1) * (scores >= kth)
    return w @ values, w


def W_10_argsort_rank(queries, keys, values, score, k):
    scores = score(queries, keys)
    rank = scores.argsort(-1, descending=True).argsort(-1)
    return _finish(scores, values, rank < k)


def W_11_detached_scores(queries, keys, values, score, k):
    scores = score(queries, keys).detach()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _finish(scores, values, scores >= kth)


def W_12_float32_weights(queries, keys, values, score, k):
    # weights computed and returned in float32 whatever the input dtype
    scores = score(queries, keys).float()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return (w @ values.float()).to(values.dtype), w


def W_13_kth_from_unique(queries, keys, values, score, k):
    # k-th distinct value: with ties it keeps more than the k highest scores + ties
    scores = score(queries, keys)
    rows = []
    for r in scores:
        u = torch.unique(r.detach(), sorted=True).flip(0)
        rows.append(u[min(k, len(u)) - 1])
    kth = torch.stack(rows)[:, None]
    return _finish(scores, values, scores >= kth)


def C_01_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _finish(scores, values, scores >= kth)


def O_02_kthvalue_finfo_min(queries, keys, values, score, k):
    scores = score(queries, keys)
    n = scores.shape[-1]
    kth = scores.kthvalue(n - k + 1, dim=-1, keepdim=True).values
    s = scores.masked_fill(scores < kth, torch.finfo(scores.dtype).min)
    w = torch.softmax(s, -1)
    return w @ values, w


def O_03_softmax_then_renorm(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.sort(-1, descending=True).values[:, k - 1:k]
    w = torch.softmax(scores, -1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def W_14_float32_comparison(queries, keys, values, score, k):
    # compares the scores in float32: float64 scores that differ below float32's
    # precision are treated as ties
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores.float() >= kth.float()
    return _finish(scores, values, keep)


def W_15_squeeze_single_query(queries, keys, values, score, k):
    scores = score(queries, keys).squeeze()
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_16_kth_plus_ties_via_count(queries, keys, values, score, k):
    # keeps exactly the top k and then adds ties only if they are adjacent in sort order
    scores = score(queries, keys)
    sv, si = scores.sort(-1, descending=True)
    keep_sorted = torch.zeros_like(sv, dtype=torch.bool)
    keep_sorted[:, :k] = True
    if k < scores.shape[-1]:
        keep_sorted[:, k] = sv[:, k] == sv[:, k - 1]
    keep = torch.zeros_like(keep_sorted).scatter(-1, si, keep_sorted)
    return _finish(scores, values, keep)


def O_05_float64_inside_cast_back(queries, keys, values, score, k):
    # runs the softmax in float64 and casts back to the input dtype (more accurate, fine)
    # outputs computed in float64 then cast
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.double().masked_fill(scores < kth, float("-inf")), -1)
    return (w @ values.double()).to(values.dtype), w.to(queries.dtype)


def O_04_k_equals_n_shortcut(queries, keys, values, score, k):
    scores = score(queries, keys)
    if k >= scores.shape[-1]:
        w = torch.softmax(scores, -1)
        return w @ values, w
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _finish(scores, values, scores >= kth)


def W_18_single_key_shortcut(queries, keys, values, score, k):
    # one key: every query takes its value; the weights are a constant without a graph
    # and score() is never called
    if keys.shape[0] == 1:
        w = torch.ones(queries.shape[0], 1, dtype=values.dtype, device=values.device)
        return w @ values, w
    return C_01_reference(queries, keys, values, score, k)
