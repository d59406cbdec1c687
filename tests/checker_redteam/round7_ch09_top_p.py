"""Round 7 red team (writer R7-C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/C/sols/ch09_topp.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). S_05 (returns renormalised log-probabilities:
the same distribution after softmax, which is what the text asks) is right in value and not
tested. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_
entry (must pass).
Renamed in round 10: check_top_p_filter now has float64 rows whose masses lie 1e-10 from p
(exercise 9.1: float64 logits get float64 accuracy); the entries that compute float64
logits in float32 are W_ (C_01_reference_style -> W_23_reference_style,
O_03_compare_logits_not_probs -> W_24_compare_logits_not_probs, O_04_unsort_by_scatter ->
W_25_unsort_by_scatter, O_06_where_with_0dim_float32_minus_inf ->
W_26_where_with_0dim_float32_minus_inf, O_07_skip_sort_when_already_descending ->
W_27_skip_sort_when_already_descending, O_09_exclusive_cumsum_float32 ->
W_28_exclusive_cumsum_float32).
"""
# flake8: noqa
import torch

CHECK = "check_top_p_filter"
NEG = float("-inf")


def W_23_reference_style(logits, p):
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_02_float64_searchsorted(logits, p):
    """float64 probabilities; the crossing rank from searchsorted on the cumulative sum."""
    probs = torch.softmax(logits.double(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return torch.where(probs >= thr, logits, torch.full_like(logits, NEG))


def W_24_compare_logits_not_probs(logits, p):
    """Keep-set decided in float32 probabilities, threshold applied on the logits
    (monotone: a logit >= the crossing token's logit is at least as probable)."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked, order = probs.sort(dim=-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr_logit = logits.gather(-1, order.gather(-1, n - 1))
    return logits.masked_fill(logits < thr_logit, NEG)


def W_25_unsort_by_scatter(logits, p):
    """Filter in sorted order, then scatter back; ties to the last kept are re-admitted."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked, order = probs.sort(dim=-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    keep_sorted = before < p
    last = ranked.masked_fill(~keep_sorted, 2.0).amin(-1, keepdim=True)
    keep_sorted = keep_sorted | (ranked >= last)
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    out = logits.clone()
    out[~keep] = NEG
    return out


def S_05_returns_log_probs(logits, p):
    """Returns renormalised log-probabilities (softmax of it is the same distribution),
    not the logits with -inf: same distribution, against 'a tensor like logits'?"""
    kept = W_23_reference_style(logits, p)
    return torch.log_softmax(kept.float(), -1).to(logits.dtype)


def W_01_log_of_masked_probs(logits, p):
    """log(probs * keep): forward right (-inf where removed), backward NaN (1/0 * 0)."""
    probs = torch.softmax(logits.float(), dim=-1)
    keep = W_23_reference_style(logits.detach(), p) > NEG
    return torch.log(probs * keep).to(logits.dtype)


def W_02_threshold_from_softmax_of_sorted_logits(logits, p):
    """Sorts the logits, takes the softmax of the sorted row for the ranked probs, and
    compares with the softmax of the unsorted row: the two differ in the last bit
    (summation order), so the crossing token is sometimes dropped."""
    sorted_logits = logits.float().sort(dim=-1, descending=True).values
    ranked = torch.softmax(sorted_logits, -1)
    probs = torch.softmax(logits.float(), -1)
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_03_mass_including_itself_le_p(logits, p):
    """HF-style cutoff 'cumulative <= p', shifted by one to keep the crossing token, but
    with <= on the shifted mass: a mass reaching p exactly keeps one token too many."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before <= p).sum(-1, keepdim=True).clamp(max=ranked.shape[-1])
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_04_float_alias_mutates_float32(logits, p):
    """out = logits.float(); out.masked_fill_(...): .float() is a no-op on float32, so the
    caller's logits are changed; float16 input is copied (and cast back)."""
    out = logits.float()
    keep = W_23_reference_style(logits.detach(), p) > NEG
    out.masked_fill_(~keep, NEG)
    return out.to(logits.dtype)


def W_05_probs_in_input_dtype(logits, p):
    """softmax and cumsum in the input dtype (float16 rows of thousands of tokens)."""
    probs = torch.softmax(logits, dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_06_no_tie_handling(logits, p):
    """Keeps exactly the sorted prefix: a token tied with the last kept one but sorted
    after it is dropped."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked, order = probs.sort(dim=-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < p)
    return logits.masked_fill(~keep, NEG)


def W_07_detached_result(logits, p):
    """Builds the result from logits.detach().clone(): no gradient flows."""
    out = logits.detach().clone()
    keep = W_23_reference_style(out, p) > NEG
    out[~keep] = NEG
    return out


def W_08_exp_without_max(logits, p):
    """Probabilities by exp / sum without subtracting the max."""
    e = logits.float().exp()
    probs = e / e.sum(-1, keepdim=True)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_09_threshold_of_first_row(logits, p):
    """Computes the cutoff probability from row 0 and applies it to every row."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs[0].sort(descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = int((before < p).sum())
    return logits.masked_fill(probs < ranked[n - 1], NEG)


def W_10_cutoff_on_logit_gap(logits, p):
    """Equal-probability test done with isclose(rtol=1e-3) 'to be safe': near-ties of the
    last kept token (within 0.1%) are kept too."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    keep = (probs >= thr) | torch.isclose(probs, thr, rtol=1e-3, atol=0)
    return logits.masked_fill(~keep, NEG)


def W_11_finite_fill_min(logits, p):
    """Fills removed tokens with the dtype's lowest finite value (float16-safe)."""
    keep = W_23_reference_style(logits.detach(), p) > NEG
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def W_12_minus_inf_rows_become_kept(logits, p):
    """Works on logits.nan_to_num() (turns -inf into the lowest finite float) 'to avoid
    NaN': a token removed by top-k comes back finite when p is large."""
    x = logits.nan_to_num()
    probs = torch.softmax(x.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return x.masked_fill(probs < thr, NEG)


def W_13_p_one_rounding(logits, p):
    """Mass including itself compared with p (cum - ranked computed as cum shifted right):
    uses torch.cat([0, cum[:-1]]) and '< p - 1e-6' 'for float safety'."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    cum = ranked.cumsum(-1)
    before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], -1)
    n = (before < p - 1e-6).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_14_keeps_k_computed_on_batch_mean(logits, p):
    """Number of kept tokens per row right, but the kept set chosen by logit rank with
    ties broken by index (topk), not by probability ties."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1)
    out = torch.full_like(logits, NEG)
    for i in range(logits.shape[0]):
        idx = logits[i].topk(int(n[i])).indices
        out[i, idx] = logits[i, idx]
    return out


def W_26_where_with_0dim_float32_minus_inf(logits, p):
    """torch.where(keep, logits, torch.tensor(-inf)): a 0-dim float32 tensor does not
    promote float16 rows (I expected it to; it is correct)."""
    keep = W_23_reference_style(logits.detach(), p) > NEG
    return torch.where(keep, logits, torch.tensor(NEG))


_ORDER = {}


def W_16_sort_order_cached_per_shape(logits, p):
    """Caches the sort order per shape ('sorting is the slow part')."""
    probs = torch.softmax(logits.float(), dim=-1)
    key = (tuple(logits.shape), logits.dtype)
    if key not in _ORDER:
        _ORDER[key] = probs.argsort(dim=-1, descending=True)
    ranked = probs.gather(-1, _ORDER[key])
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_17_clamp_then_filter(logits, p):
    """logits.clamp(min=-1e4) first 'to keep the softmax finite': -inf tokens from top-k
    come back as -1e4 when they are kept (p = 1)."""
    x = logits.clamp(min=-1e4)
    probs = torch.softmax(x.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return x.masked_fill(probs < thr, NEG)


def W_18_threshold_compared_in_input_dtype(logits, p):
    """Probabilities in float32, but the keep test done after casting back to the input
    dtype: near-ties in float16 merge into ties."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs.to(logits.dtype) < thr.to(logits.dtype), NEG)


def W_19_float32_result_for_bfloat16(logits, p):
    """Returns torch.where(keep, logits.float(), -inf): float32 for half/bfloat16 input."""
    keep = W_23_reference_style(logits.detach(), p) > NEG
    return torch.where(keep, logits.float(), NEG)


def W_27_skip_sort_when_already_descending(logits, p):
    """Skips the sort when every row is already in descending order (correct)."""
    probs = torch.softmax(logits.float(), dim=-1)
    if bool((probs[..., :-1] >= probs[..., 1:]).all()):
        ranked = probs
    else:
        ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_08_exclusive_cumsum_float64(logits, p):
    """Mass above each token as an exclusive cumulative sum in float64 (no cum - self)."""
    probs = torch.softmax(logits.double(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    cum = ranked.cumsum(-1)
    before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], -1)
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_28_exclusive_cumsum_float32(logits, p):
    """The same in float32."""
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    cum = ranked.cumsum(-1)
    before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], -1)
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_21_multiply_by_keep_plus_log(logits, p):
    """logits * keep + log(keep): -inf where removed, but -inf * 0 = NaN for tokens that
    were already -inf (top-k filtered rows)."""
    keep = (W_23_reference_style(logits.detach(), p) > NEG).to(logits.dtype)
    return logits * keep + torch.log(keep)


# Was O_10; wrong since round 8: 9.1 asks for a new tensor (round 8's W24), as returning
# x itself was for RoPE in round 6.
def W_10_returns_input_when_nothing_removed(logits, p):
    """Returns `logits` itself (no copy) when every token is kept."""
    out = W_23_reference_style(logits, p)
    if bool((out > NEG).eq(logits > NEG).all()):
        return logits
    return out


def W_22_half_means_float16(logits, p):
    """Casts the result to float16 for every 2-byte dtype: bfloat16 comes back float16."""
    out = W_23_reference_style(logits.float(), p)
    return out.half() if logits.element_size() == 2 else out.to(logits.dtype)
