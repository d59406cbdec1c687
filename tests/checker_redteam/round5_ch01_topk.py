"""Round 5 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def _mask_softmax(scores, keep):
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return w


def C_01_standard(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return w @ values, w


def O_02_sort(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.sort(dim=-1, descending=True).values[:, k - 1:k]
    w = torch.softmax(torch.where(scores >= kth, scores, torch.full_like(scores, -torch.inf)), -1)
    return w @ values, w


def O_03_renormalise(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, -1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_04_kthvalue_negated(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = (-scores).kthvalue(k, dim=-1, keepdim=True).values.neg()
    w = torch.softmax(scores.masked_fill(scores < kth, torch.finfo(scores.dtype).min), -1)
    w = w * (scores >= kth)
    return w @ values, w


def W_01_scatter_drops_ties(queries, keys, values, score, k):
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    w = _mask_softmax(scores, keep)
    return w @ values, w


def W_02_ignores_score(queries, keys, values, score, k):
    scores = queries @ keys.T
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_03_score_swapped(queries, keys, values, score, k):
    scores = score(keys, queries).T
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_04_no_renormalise(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores, -1) * (scores >= kth)
    return w @ values, w


def W_05_strict_drops_kth(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores > kth)
    return w @ values, w


def W_06_fill_zero(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, 0.0), -1)
    return w @ values, w


def W_07_keeps_k_plus_1(queries, keys, values, score, k):
    scores = score(queries, keys)
    kk = min(k + 1, scores.shape[-1])
    kth = scores.topk(kk, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_08_threshold_per_key(queries, keys, values, score, k):
    scores = score(queries, keys)
    kk = min(k, scores.shape[0])
    kth = scores.topk(kk, dim=0).values[-1:, :]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_09_global_threshold(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:].min()
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_10_detached_scores(queries, keys, values, score, k):
    scores = score(queries, keys).detach()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_11_fill_minus_1e4(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(torch.where(scores >= kth, scores, torch.full_like(scores, -1e4)), -1)
    return w @ values, w


def W_12_ascending_sort(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.sort(dim=-1).values[:, k - 1:k]    # k-th smallest, not largest
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_13_near_ties_kept(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth - 1e-3)
    return w @ values, w


def W_14_abs_scores(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.abs().topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores.abs() >= kth)
    return w @ values, w


def W_15_outputs_unmasked(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return torch.softmax(scores, -1) @ values, w


def O_05_nan_to_num_never_triggers(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    s = scores.masked_fill(scores < kth, float("-inf"))
    e = torch.exp(s - s.max(-1, keepdim=True).values)
    w = torch.nan_to_num(e / e.sum(-1, keepdim=True))
    return w @ values, w


def W_17_kth_from_first_query(queries, keys, values, score, k):
    # batch-1 habit: one threshold for all queries, taken from query 0
    scores = score(queries, keys)
    kth = scores[0].topk(k).values[-1]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_18_softmax_over_queries(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, -1e9), 0)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def W_19_mutates_values(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return torch.matmul(w, values, out=None), w.clamp_(min=0)


# Accepted on purpose: on the CPU, topk(sorted=False) puts the k-th value last (the red team
# tried n up to 5000), so no CPU input tells it apart; the checkers run on the CPU.
def A_20_topk_unsorted_last(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1, sorted=False).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_21_kth_without_keepdim(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, k - 1]          # (m,) broadcasts along keys
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_22_kth_capped_at_num_keys_minus_1(queries, keys, values, score, k):
    # "guards" k against num_keys with the wrong bound: k = n becomes n - 1
    scores = score(queries, keys)
    k = min(k, scores.shape[-1] - 1)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def O_07_inplace_on_score_output(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    scores.masked_fill_(scores < kth, float("-inf"))
    w = torch.softmax(scores, -1)
    return w @ values, w


def W_23_float32_weight_buffer(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.zeros(scores.shape)
    w = w + _mask_softmax(scores, scores >= kth)
    return w @ values.float(), w


def W_24_squeeze_habit(queries, keys, values, score, k):
    scores = score(queries, keys).squeeze()
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = _mask_softmax(scores, scores >= kth)
    return (w @ values).squeeze(), w


def W_25_float64_in_float32_out(queries, keys, values, score, k):
    scores = score(queries, keys)
    if scores.dtype == torch.float64:
        scores, values = scores.float(), values.float()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, scores >= kth)
    return w @ values, w


def W_26_keys_detached(queries, keys, values, score, k):
    return C_01_standard(queries, keys.detach(), values, score, k)


def W_27_values_detached(queries, keys, values, score, k):
    return C_01_standard(queries, keys, values.detach(), score, k)


def W_28_random_tie_break(queries, keys, values, score, k):
    scores = score(queries, keys)
    noisy = scores + 1e-6 * torch.rand_like(scores)
    kth = noisy.topk(k, dim=-1).values[:, -1:]
    w = _mask_softmax(scores, noisy >= kth)
    return w @ values, w
