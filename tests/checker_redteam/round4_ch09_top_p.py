"""Round 4 red team (writer R4-C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch09_top_p.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 10: check_top_p_filter now has float64 rows whose masses lie 1e-10 from p
(exercise 9.1: float64 logits get float64 accuracy); the entries that compute float64
logits in float32 are W_ (O_01_float32_probs -> W_23_float32_probs,
O_06_float32_one_minus_cumsum -> W_24_float32_one_minus_cumsum).
"""
# flake8: noqa
import math
import torch

CHECK = "check_top_p_filter"
NEG = float("-inf")


def _keep_mask(logits, p, dtype=torch.float64):
    probs = torch.softmax(logits.to(dtype), -1)
    sp, idx = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    keep_sorted = above < p
    # smallest kept probability; ties with it are kept too
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return probs >= thr


def C_01_sort_threshold(logits, p):
    return logits.masked_fill(~_keep_mask(logits, p), NEG)


def C_02_pairwise_mass(logits, p):
    # direct definition: mass of strictly more probable tokens < p (O(V^2) per row, chunked)
    probs = torch.softmax(logits.double(), -1)
    out = []
    for row in probs:
        keep = torch.zeros_like(row, dtype=torch.bool)
        for s in range(0, row.numel(), 512):
            blk = row[s:s + 512]
            above = (row[None, :] * (row[None, :] > blk[:, None])).sum(-1)
            keep[s:s + 512] = above < p
        out.append(keep)
    return logits.masked_fill(~torch.stack(out), NEG)


def W_23_float32_probs(logits, p):
    return logits.masked_fill(~_keep_mask(logits, p, torch.float32), NEG)


def O_02_return_renormalised_logprobs(logits, p):
    # softmax of this is the renormalised distribution; same shape/dtype
    out = logits.masked_fill(~_keep_mask(logits, p), NEG)
    return out - out.float().logsumexp(-1, keepdim=True).to(out.dtype)


def O_03_where_log_mask(logits, p):
    keep = _keep_mask(logits, p)
    return torch.where(keep, logits, torch.tensor(NEG, dtype=logits.dtype))


def W_01_keep_when_above_le_p(logits, p):
    # HF-style shift: keep while the mass above is <= p (keeps one too many when mass == p)
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) <= p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, NEG)


def W_02_ties_broken_by_sort_order(logits, p):
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, NEG)


def W_03_inclusive_cumsum_lt_p(logits, p):
    # drops the token that makes the sum reach p (and keeps nothing if top prob >= p)
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = sp.cumsum(-1) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, NEG)


def W_04_fill_minus_1e9(logits, p):
    return logits.masked_fill(~_keep_mask(logits, p), -1e4 if logits.dtype == torch.float16
                              else -1e9)


def W_05_probs_in_input_dtype(logits, p):
    # softmax and cumsum in float16 for float16 rows of thousands of tokens
    return logits.masked_fill(~_keep_mask(logits, p, logits.dtype), NEG)


def W_06_inplace_modifies_logits(logits, p):
    keep = _keep_mask(logits, p)
    with torch.no_grad():
        logits.masked_fill_(~keep, NEG)
    return logits


def W_07_returns_float32(logits, p):
    return logits.float().masked_fill(~_keep_mask(logits, p), NEG)


def W_08_gather_instead_of_scatter(logits, p):
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    keep = keep_sorted.gather(-1, idx)  # wrong inverse permutation
    return logits.masked_fill(~keep, NEG)


def W_09_exp_without_max(logits, p):
    e = logits.double().exp()
    probs = e / e.sum(-1, keepdim=True)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_10_detached(logits, p):
    return logits.detach().masked_fill(~_keep_mask(logits, p), NEG)


def W_11_softmax_over_batch_dim(logits, p):
    probs = torch.softmax(logits.double(), 0)
    sp, idx = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    keep_sorted = above < p
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_12_threshold_from_first_row(logits, p):
    # batch-1 thinking: one probability threshold for the whole batch
    probs = torch.softmax(logits.double(), -1)
    sp, _ = probs[0].sort(descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    thr = sp[keep_sorted].min()
    return logits.masked_fill(~(probs >= thr), NEG)


def W_13_return_probabilities(logits, p):
    out = torch.softmax(logits.float(), -1).masked_fill(~_keep_mask(logits, p), 0)
    return (out / out.sum(-1, keepdim=True)).to(logits.dtype)


def W_14_epsilon_safety(logits, p):
    # "for float safety": keeps only tokens whose mass above is below p - 1e-3
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p - 1e-3
    keep_sorted[..., 0] = True
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_15_multiply_by_inf_mask(logits, p):
    # additive mask built as log(keep): forward ok; mask built from logits*0 gives NaN grads?
    keep = _keep_mask(logits, p)
    return logits + torch.log(keep.to(logits.dtype)) * (logits - logits.detach() + 1)


def W_16_nan_to_num_after_inf(logits, p):
    keep = _keep_mask(logits, p)
    out = torch.where(keep, logits, logits * float("inf") * -1)
    return torch.where(keep, out, torch.tensor(NEG, dtype=logits.dtype))


def O_04_kth_prob_threshold(logits, p):
    # keeps the first k sorted tokens, where k counts tokens with mass above < p, but sorts
    # logits with topk-style unstable order and ignores ties (same as W02 via topk)
    probs = torch.softmax(logits.double(), -1)
    k = ((probs.sort(-1, descending=True).values.cumsum(-1)
          - probs.sort(-1, descending=True).values) < p).sum(-1, keepdim=True)
    kth = probs.sort(-1, descending=True).values.gather(-1, k - 1)
    return logits.masked_fill(probs < kth, NEG).masked_fill(
        torch.zeros_like(probs, dtype=torch.bool), NEG)


def W_18_neg_inf_rows_become_nan(logits, p):
    # subtracts the max, and replaces -inf by the row minimum "to avoid NaN" before softmax
    finite_min = torch.where(torch.isinf(logits), logits.new_tensor(float("inf")),
                             logits).min(-1, keepdim=True).values
    x = torch.where(torch.isinf(logits), finite_min, logits)
    return x.masked_fill(~_keep_mask(x, p), NEG)


def W_19_compare_in_input_dtype(logits, p):
    # probabilities in float64, but the tie comparison done after casting to logits' dtype
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs.to(logits.dtype) >= thr.to(logits.dtype)), NEG)


def S_01_alias_when_p_is_1(logits, p):
    if p >= 1:
        return logits  # the very same tensor object
    return logits.masked_fill(~_keep_mask(logits, p), NEG)


def W_20_isclose_merges_near_ties(logits, p):
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1, descending=True)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    thr = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    keep = (probs >= thr) | torch.isclose(probs, thr, rtol=1e-3, atol=0)
    return logits.masked_fill(~keep, NEG)


def O_05_one_minus_ascending_cumsum(logits, p):
    # mass above j = 1 - (mass of j and everything below it), in float64
    probs = torch.softmax(logits.double(), -1)
    sp, idx = probs.sort(-1)  # ascending
    above_sorted = 1 - sp.cumsum(-1)
    above = torch.empty_like(probs).scatter_(-1, idx, above_sorted)
    # ties: a token's "above" must not count its tied peers; use the largest above among ties
    keep = above < p
    thr = torch.where(keep, probs, torch.full_like(probs, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_24_float32_one_minus_cumsum(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1)
    above = torch.empty_like(probs).scatter_(-1, idx, 1 - sp.cumsum(-1))
    keep = above < p
    thr = torch.where(keep, probs, torch.full_like(probs, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_21_float_alias_mutates_input(logits, p):
    # .float() is a no-op on float32 logits, so the in-place fill changes the caller's tensor
    keep = _keep_mask(logits, p)
    out = logits.float()
    out[~keep] = NEG
    return out.to(logits.dtype)


def W_22_flat_view_breaks_on_noncontiguous(logits, p):
    # flattens with .view to scatter by flat index: fails on logits[:, -1, :] from a model
    b, V = logits.shape
    keep = _keep_mask(logits, p)
    flat = logits.view(-1)
    out = flat.masked_fill(~keep.view(-1), NEG)
    return out.view(b, V)
