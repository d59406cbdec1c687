"""Round 2 red team (writer R2), ch01_topk: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch01_topk.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch

CHECK = "check_topk_attention_pool"
NEG = float("-inf")


def _sm(s):
    return torch.softmax(s, dim=-1)


def W_scatter_exact_k(queries, keys, values, score, k):
    """Keeps exactly k keys by index: drops ties with the k-th score."""
    s = score(queries, keys)
    idx = s.topk(k, dim=-1).indices
    keep = torch.zeros_like(s, dtype=torch.bool).scatter(-1, idx, True)
    w = _sm(s.masked_fill(~keep, NEG))
    return w @ values, w


def W_strict_threshold(queries, keys, values, score, k):
    """Keeps scores strictly above the k-th: only k-1 keys."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s <= kth, NEG))
    return w @ values, w


def W_mask_after_softmax(queries, keys, values, score, k):
    """Zeros the weights after the softmax without renormalising."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s) * (s >= kth)
    return w @ values, w


def W_smallest(queries, keys, values, score, k):
    """topk(largest=False): keeps the k worst keys."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1, largest=False).values[..., -1:]
    w = _sm(s.masked_fill(s > kth, NEG))
    return w @ values, w


def W_kth_per_key(queries, keys, values, score, k):
    """Takes the k-th best score along the queries axis (per key)."""
    s = score(queries, keys)
    kk = min(k, s.shape[0])
    kth = s.topk(kk, dim=0).values[-1:, :]
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w


def W_fill_zero(queries, keys, values, score, k):
    """Masks with score 0 instead of -inf: masked keys keep weight."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s < kth, 0.0))
    return w @ values, w


def W_detach_scores(queries, keys, values, score, k):
    """Right values, but detaches the scores: no gradient to queries or keys."""
    s = score(queries, keys).detach()
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w


def W_tolerance_ties(queries, keys, values, score, k):
    """Treats near-ties (within 1e-3) as ties: keeps keys that are not tied."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s < kth - 1e-3, NEG))
    return w @ values, w


def W_kthvalue(queries, keys, values, score, k):
    """kthvalue gives the k-th *smallest*: the threshold is wrong unless k = (n+1)/2."""
    s = score(queries, keys)
    kth = s.kthvalue(k, dim=-1, keepdim=True).values
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w


def W_sort_index_k(queries, keys, values, score, k):
    """Off by one: sorted[..., k] is the (k+1)-th best, keeps k+1 keys."""
    s = score(queries, keys)
    srt = s.sort(dim=-1, descending=True).values
    kth = srt[..., min(k, s.shape[-1] - 1)][..., None]
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w


def W_inplace_scores(queries, keys, values, score, k):
    """Writes -inf into the scores in place and returns them as the weights' source; also
    normalises with the global max (fragile with large scores)."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    s = s.masked_fill(s < kth, NEG)
    e = torch.exp(s)  # no max subtraction: overflows for large scores
    w = e / e.sum(-1, keepdim=True)
    return w @ values, w


def W_weights_transposed(queries, keys, values, score, k):
    """Builds the weights as (num_keys, num_queries) and multiplies values.T."""
    s = score(queries, keys).T
    kth = s.topk(min(k, s.shape[0]), dim=0).values[-1:, :]
    w = torch.softmax(s.masked_fill(s < kth, NEG), dim=0)
    return (values.T @ w).T, w


def W_nan_to_num(queries, keys, values, score, k):
    """Masks by multiplying the scores with -inf*(~keep): 0*-inf = NaN, patched with nan_to_num
    (which also turns -inf into a huge finite number)."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    masked = torch.nan_to_num(s + (s < kth) * NEG, nan=0.0)
    w = _sm(masked)
    return w @ values, w


def W_k_clipped_to_two(queries, keys, values, score, k):
    """Hard-codes k=2 (the chapter's example)."""
    s = score(queries, keys)
    kth = s.topk(min(2, s.shape[-1]), dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w


def C_threshold(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def O_renormalise_after(queries, keys, values, score, k):
    """Softmax first, then zero the losers and renormalise: the same distribution."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = torch.softmax(s, dim=-1) * (s >= kth)
    w = w / w.sum(-1, keepdim=True)
    return w @ values, w


def O_sort_where(queries, keys, values, score, k):
    """sort + torch.where; works in float64 too."""
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[..., k - 1: k]
    w = torch.softmax(torch.where(s >= kth, s, torch.full_like(s, float("-inf"))), dim=-1)
    return w @ values, w


def W_inplace_div(queries, keys, values, score, k):
    """Own softmax with an in-place division: right values, backward raises."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    s = s.masked_fill(s < kth, NEG)
    e = torch.exp(s - s.amax(-1, keepdim=True))
    e /= e.sum(-1, keepdim=True)
    return e @ values, e


def W_inplace_queries(queries, keys, values, score, k):
    """Normalises the queries in place (when no grad is needed): changes the caller's tensor
    and the scores."""
    if not queries.requires_grad:
        queries /= queries.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[..., -1:]
    w = _sm(s.masked_fill(s < kth, NEG))
    return w @ values, w
