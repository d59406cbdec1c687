"""Round 4 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def _pool(scores, values):
    w = torch.softmax(scores, dim=-1)
    return w @ values, w


def C_01_reference(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def O_02_sort_descending(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[:, k - 1].unsqueeze(-1)
    s = torch.where(s >= kth, s, torch.full_like(s, float("-inf")))
    return _pool(s, values)


def O_03_softmax_then_renormalise(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values.min(dim=-1, keepdim=True).values
    w = torch.softmax(s, dim=-1) * (s >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_04_kthvalue(queries, keys, values, score, k):
    s = score(queries, keys)
    n = s.shape[-1]
    kth = torch.kthvalue(s, n - k + 1, dim=-1, keepdim=True).values
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_01_ignores_score_dot(queries, keys, values, score, k):
    s = queries @ keys.T
    kth = s.topk(k, dim=-1).values[:, -1:]
    m = s < kth
    s2 = score(queries, keys).masked_fill(m, float("-inf"))
    return _pool(s2, values)


def W_02_scatter_drops_ties(queries, keys, values, score, k):
    s = score(queries, keys)
    idx = s.topk(k, dim=-1).indices
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    s = s.masked_fill(~keep, float("-inf"))
    return _pool(s, values)


def W_03_strict_greater(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k + 1, dim=-1).values[:, -1:] if k < s.shape[-1] else s.min(-1, keepdim=True).values - 1
    s = s.masked_fill(~(s > kth), float("-inf"))
    return _pool(s, values)


def W_04_zero_after_softmax_no_renorm(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s, dim=-1) * (s >= kth)
    return w @ values, w


def W_05_kthvalue_off_by_one(queries, keys, values, score, k):
    s = score(queries, keys)
    n = s.shape[-1]
    kth = torch.kthvalue(s, max(n - k, 1), dim=-1, keepdim=True).values
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_06_global_threshold(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1].min()
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_07_topk_over_queries(queries, keys, values, score, k):
    s = score(queries, keys)
    kk = min(k, s.shape[0])
    kth = s.topk(kk, dim=0).values[-1:, :]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_08_fill_minus_1e4(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, -1e4)
    return _pool(s, values)


def W_09_fill_zero(queries, keys, values, score, k):
    # "hide" the scores by setting them to 0
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, 0.0)
    return _pool(s, values)


def W_10_near_tie_tolerance(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth - 1e-3, float("-inf"))
    return _pool(s, values)


def W_11_scores_detached(queries, keys, values, score, k):
    s = score(queries, keys).detach()
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_12_values_detached(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    w = torch.softmax(s, -1)
    return w @ values.detach(), w


# Accepted on purpose: topk(sorted=False) is not documented to sort, but on the CPU,
# where every check runs, it returns the k-th best last for every size (nth_element puts
# it at position k-1; partial_sort sorts): the values are right on the checker's inputs.
def A_13_topk_unsorted_last(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1, sorted=False).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_14_topk_of_weights_after_softmax_uniform(queries, keys, values, score, k):
    # keeps the top k but gives them uniform weights 1/k
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    keep = (s >= kth).to(values.dtype)
    w = keep / keep.sum(-1, keepdim=True)
    return w @ values, w


def W_15_swapped_score_args(queries, keys, values, score, k):
    s = score(keys, queries).T
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_16_k_minus_one(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -2:-1] if k > 1 else s.topk(1, dim=-1).values
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_17_inplace_on_score_output_of_abs(queries, keys, values, score, k):
    # uses |score| for the ranking ("biggest scores")
    s = score(queries, keys)
    kth = s.abs().topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s.abs() < kth, float("-inf"))
    return _pool(s, values)


def W_18_weights_float64(queries, keys, values, score, k):
    s = score(queries, keys).double()
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s < kth, float("-inf"))
    w = torch.softmax(s, -1)
    return (w @ values.double()), w


def O_05_inplace_fill_on_score_output(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s[s < kth] = float("-inf")
    return _pool(s, values)


def W_19_mask_le_kth(queries, keys, values, score, k):
    # masks scores <= k-th best (keeps only the ones strictly above): k-1 keys, or none
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s = s.masked_fill(s <= kth, float("-inf"))
    return _pool(s, values)


def W_20_missing_keepdim(queries, keys, values, score, k):
    # kth without keepdim: (num_queries,) broadcasts along the keys axis
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1]
    s = s.masked_fill(s < kth, float("-inf"))
    return _pool(s, values)


def W_21_outputs_from_keys(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w @ (keys if keys.shape == values.shape else values), w


def W_22_keys_detached(queries, keys, values, score, k):
    s = score(queries, keys.detach())
    kth = s.topk(k, dim=-1).values[:, -1:]
    return _pool(s.masked_fill(s < kth, float("-inf")), values)


def W_23_weights_detached_for_output(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), -1)
    return w.detach() @ values, w
