"""Round 12 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/ch01_topk.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_17 (float16 ranked through bfloat16) and W_18 (float16 softmax without the
max shift; already caught by the matrix's float16 condition): two float16 cases of dot
scores near 100 and 50 whose two best (100.25 and 99.75) are one number in bfloat16 (k=1,
k=2). A_19 (finfo.min fill of the hidden keys) is accepted on purpose (lead's ruling).
"""
# flake8: noqa
import torch

CHECK = "check_topk_attention_pool"


def _pool(scores, keep, values):
    s = scores.masked_fill(~keep, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ values, w


# ---------------- correct / odd ----------------
def C_01_threshold_kth(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def O_02_softmax_then_renormalise(queries, keys, values, score, k):
    """Softmax over all keys, zero the others, renormalise: the same weights
    mathematically (the full normaliser cancels)."""
    scores = score(queries, keys)
    kth = scores.sort(dim=-1, descending=True).values[:, k - 1:k]
    w = torch.softmax(scores, dim=-1) * (scores >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_03_kthvalue(queries, keys, values, score, k):
    """kthvalue from the bottom: the (n-k+1)-th smallest is the k-th largest."""
    scores = score(queries, keys)
    n = scores.shape[-1]
    kth = scores.kthvalue(n - k + 1, dim=-1, keepdim=True).values
    return _pool(scores, scores >= kth, values)


# ---------------- wrong ----------------
def W_04_near_ties_kept(queries, keys, values, score, k):
    """Ties judged with a tolerance (torch.isclose style, rtol 1e-5): a key whose score is
    just below the k-th (e.g. scores [1, 0.999999, 0] with k = 1) is kept."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores >= kth - 1e-5 * kth.abs() - 1e-8
    return _pool(scores, keep, values)


def W_05_argmax_when_k1(queries, keys, values, score, k):
    """Fast path for k = 1: one-hot argmax. Drops ties at k = 1 (scores [2, 2, 0] should
    give [0.5, 0.5, 0])."""
    scores = score(queries, keys)
    if k == 1:
        idx = scores.argmax(dim=-1)
        w = torch.nn.functional.one_hot(idx, scores.shape[-1]).to(scores.dtype)
        return w @ values, w
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_06_topk_on_weights(queries, keys, values, score, k):
    """Picks the top k on the softmax weights instead of the scores: scores that differ by
    less than float resolution after exp (e.g. [0, 1e-8] in float32) become ties, and keys
    that underflow to weight 0 tie with each other."""
    scores = score(queries, keys)
    full = torch.softmax(scores, dim=-1)
    kth = full.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, full >= kth, values)


def W_07_kth_from_rounded_scores(queries, keys, values, score, k):
    """Rounds the scores to 4 decimals before ranking "so float noise doesn't split
    ties": scores 0.30001 and 0.30004 become ties."""
    scores = score(queries, keys)
    r = scores.detach().round(decimals=4)
    kth = r.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, r >= kth, values)


def W_08_exactly_k_scatter(queries, keys, values, score, k):
    """Exactly k keys via topk indices + scatter (drops ties)."""
    scores = score(queries, keys)
    idx = scores.topk(k, dim=-1).indices
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)
    return _pool(scores, keep, values)


def W_09_mask_detached_scores(queries, keys, values, score, k):
    """Computes scores under no_grad "because topk is not differentiable": no gradient
    reaches queries or keys."""
    with torch.no_grad():
        scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_10_kth_over_float32(queries, keys, values, score, k):
    """Ranks in float16 "to save memory": float32 scores that round to the same float16
    become ties (0.1000 and 0.1001)."""
    scores = score(queries, keys)
    h = scores.detach().half()
    kth = h.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, h >= kth, values)


def W_11_multiply_mask_no_renorm_grad(queries, keys, values, score, k):
    """Softmax over kept keys by exp * mask / sum, without the max shift: overflows for
    large scores."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores >= kth
    e = torch.exp(scores) * keep
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_12_k_capped_at_half(queries, keys, values, score, k):
    """Caps k at num_keys // 2 (thinking "top-k must drop something")."""
    scores = score(queries, keys)
    k = max(1, min(k, scores.shape[-1] // 2)) if k < scores.shape[-1] else k
    kth = scores.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, scores >= kth, values)


def W_13_fill_min_minus_one(queries, keys, values, score, k):
    """Hidden keys get (row minimum - 1) rather than -inf: nonzero weight when the kept and
    hidden scores are close (e.g. scores [1, 0.5, 0] k=1)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    fill = scores.amin(-1, keepdim=True) - 30
    s = torch.where(scores >= kth, scores, fill)
    w = torch.softmax(s, dim=-1)
    return w @ values, w


def W_14_values_view_when_k1_single(queries, keys, values, score, k):
    """With one key, returns the values themselves broadcast (a view, no graph)."""
    if keys.shape[0] == 1:
        w = torch.ones(queries.shape[0], 1, dtype=values.dtype)
        return values.expand(queries.shape[0], -1), w
    return C_01_threshold_kth(queries, keys, values, score, k)


def W_15_kth_from_first_query(queries, keys, values, score, k):
    """Threshold of the query with the most spread... no: threshold per query but the
    mask built against the first query's order when num_queries == 1 is assumed:
    uses scores.topk(k, dim=-1).values[..., -1] without keepdim, broadcast along keys
    (right only when num_queries == 1 or num_queries == num_keys transposed)."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[..., -1]
    if scores.shape[0] == scores.shape[1] or scores.shape[0] == 1:
        keep = scores >= kth
    else:
        keep = scores >= kth[:, None]
    return _pool(scores, keep, values)


def W_16_squeeze_single_query(queries, keys, values, score, k):
    """scores.squeeze() 'to drop the batch axis': one query gives weights of shape
    (num_keys,) and outputs (value_dim,)."""
    scores = score(queries, keys).squeeze()
    kth = scores.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1)
    return w @ values, w


def W_17_mask_from_float32_sorted(queries, keys, values, score, k):
    """Ranks on scores.sort() of the scores rounded through bfloat16 only when the dtype is
    float16 ('safer range'): float16 scores 100.25 and 100.5 tie in bfloat16."""
    scores = score(queries, keys)
    r = scores.detach().to(torch.bfloat16) if scores.dtype == torch.float16 else scores
    kth = r.topk(k, dim=-1).values[:, -1:]
    return _pool(scores, r >= kth, values)


def W_18_softmax_float16_no_shift(queries, keys, values, score, k):
    """Masked weights by exp(s) * keep / sum in float32 for float16 scores... without the
    max shift in every dtype only when scores are float16 ('float16 scores are small')."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    keep = scores >= kth
    if scores.dtype == torch.float16:
        e = torch.exp(scores) * keep
        w = e / e.sum(-1, keepdim=True)
        return w @ values, w
    return _pool(scores, keep, values)


# Accepted on purpose (lead's ruling, round 12): a finfo.min fill is wrong only when a kept
# score lies near finfo.min (within about 17 in float16, 88 in float32).
def A_19_finfo_min_fill(queries, keys, values, score, k):
    """Hidden keys get finfo.min instead of -inf (finite 'to avoid NaN')."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    s = scores.masked_fill(scores < kth, torch.finfo(scores.dtype).min)
    w = torch.softmax(s, -1)
    return w @ values, w


def W_20_half_returns_float32(queries, keys, values, score, k):
    """softmax(..., dtype=torch.float32) 'for accuracy' and never cast back: float16 inputs
    get float32 weights and outputs."""
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), -1,
                      dtype=torch.float32 if scores.dtype == torch.float16 else None)
    return w @ values.to(w.dtype), w
