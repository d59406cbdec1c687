"""Round 8 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

W04 is A_04 (topk(sorted=False): order unpromised, but sorted on the CPU).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def C_01_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    masked = scores.masked_fill(scores < kth, float("-inf"))
    w = torch.softmax(masked, dim=-1)
    return w @ values, w


def O_02_softmax_then_renormalise(queries, keys, values, score, k):
    # masking after the softmax and renormalising gives the same function (max is kept)
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores, dim=-1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_03_kthvalue_and_where(queries, keys, values, score, k):
    scores = score(queries, keys)
    n = scores.shape[-1]
    kth = torch.kthvalue(scores, n - k + 1, dim=-1, keepdim=True).values
    w = torch.softmax(torch.where(scores >= kth, scores, float("-inf")), dim=-1)
    return w @ values, w


def O_04_sort_ascending(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.sort(dim=-1).values[..., -k].unsqueeze(-1)
    w = torch.softmax(scores.masked_fill(scores < kth, -torch.inf), -1)
    return torch.matmul(w, values), w


def W_01_score_arguments_swapped(queries, keys, values, score, k):
    # score(keys, queries).T: the same for dot and Gaussian scores, not for asymmetric ones
    scores = score(keys, queries).T
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_02_isclose_ties(queries, keys, values, score, k):
    # "float-safe" ties: keys within rtol 1e-5 of the k-th score are kept too
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    keep = (scores > kth) | torch.isclose(scores, kth.expand_as(scores))
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w


def W_03_threshold_on_weights(queries, keys, values, score, k):
    # picks the top k by softmax weight: distinct scores that underflow to weight 0 tie
    scores = score(queries, keys)
    p = torch.softmax(scores, -1)
    kth = p.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(p < kth, float("-inf")), -1)
    return w @ values, w


# A_ (accepted on purpose, lead's decision): topk(sorted=False) does not promise an order,
# so its last value need not be the k-th best; but on the CPU the values come back sorted
# (the red team tried n up to 5000, k up to 100), so no CPU input shows it. Like .cpu(),
# it can only be seen on a GPU.
def A_04_topk_unsorted_last(queries, keys, values, score, k):
    # sorted=False: the last of the k values is not necessarily the k-th best
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1, sorted=False).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_05_kth_from_first_query(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores[0].topk(k).values[-1]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_06_topk_over_queries_axis(queries, keys, values, score, k):
    # threshold per key column (topk over dim 0)
    scores = score(queries, keys)
    kth = scores.topk(min(k, scores.shape[0]), dim=0).values[-1:, :]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_07_fill_minus_1e4(queries, keys, values, score, k):
    # float16-safe fill; Gaussian scores of far keys are below -1e4
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, -1e4), -1)
    return w @ values, w


def W_08_jitter_to_break_ties(queries, keys, values, score, k):
    # exactly k keys: tiny random noise breaks ties (and uses the global RNG)
    scores = score(queries, keys)
    noisy = scores + 1e-6 * torch.randn_like(scores)
    idx = noisy.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1)
    return w @ values, w


def W_09_float32_scores(queries, keys, values, score, k):
    # score in float32 for accuracy, weights cast back but outputs from float32 values
    scores = score(queries.float(), keys.float())
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return (w @ values.float()).to(values.dtype), w.to(values.dtype)


def W_10_mask_by_rank_of_sorted_indices(queries, keys, values, score, k):
    # keeps the keys whose rank (argsort of argsort) is < k: ties broken by position
    scores = score(queries, keys)
    rank = scores.argsort(-1, descending=True).argsort(-1)
    w = torch.softmax(scores.masked_fill(rank >= k, float("-inf")), -1)
    return w @ values, w


def W_11_detached_softmax_input(queries, keys, values, score, k):
    # builds the masked scores from a detached copy: no gradient to queries/keys
    scores = score(queries, keys)
    s = scores.detach().clone()
    kth = s.topk(k, dim=-1).values[..., -1:]
    s[s < kth] = float("-inf")
    w = torch.softmax(s, -1)
    return w @ values, w


def W_12_multiply_by_mask_no_renorm_small_k(queries, keys, values, score, k):
    # renormalises with a +eps that is visible when all kept weights are tiny in float16
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores, -1) * (scores >= kth)
    w = w / (w.sum(-1, keepdim=True) + 1e-3)
    return w @ values, w


def W_13_k_clamped_to_half(queries, keys, values, score, k):
    # "k cannot exceed the number of keys": clamps with the wrong size (num_queries)
    scores = score(queries, keys)
    k = min(k, scores.shape[0])
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_14_squeeze_output(queries, keys, values, score, k):
    # .squeeze() "to tidy up": (m, 1) outputs become (m,), one query becomes (value_dim,)
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return (w @ values).squeeze(), w.squeeze(0) if w.shape[0] == 1 and False else w


def O_05_log_of_mask(queries, keys, values, score, k):
    # adds log(1) = 0 to the kept scores and log(0) = -inf to the others
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores + torch.log((scores >= kth).to(scores.dtype)), -1)
    return w @ values, w


def W_15_k1_argmax_shortcut(queries, keys, values, score, k):
    # k = 1 special case: one-hot at the argmax (drops keys tied with the best)
    scores = score(queries, keys)
    if k == 1:
        w = torch.zeros_like(scores).scatter(-1, scores.argmax(-1, keepdim=True), 1.0)
        w = w + scores - scores.detach()  # keep a gradient path
        w = torch.where(w.detach() != 0, w, torch.zeros_like(w))
        return w @ values, w
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_16_values_rebuilt_with_torch_tensor(queries, keys, values, score, k):
    values = torch.tensor(values)
    return C_01_reference(queries, keys, values, score, k)


def W_17_keys_rebuilt_with_torch_tensor(queries, keys, values, score, k):
    keys = torch.tensor(keys)
    return C_01_reference(queries, keys, values, score, k)



def O_06_attention_pool_with_masked_score(queries, keys, values, score, k):
    from book.attention import attention_pool

    def masked(q, kk):
        s = score(q, kk)
        kth = s.topk(k, dim=-1).values[..., -1:]
        return s.masked_fill(s < kth, float("-inf"))

    return attention_pool(queries, keys, values, masked)
