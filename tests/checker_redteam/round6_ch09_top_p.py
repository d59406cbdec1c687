"""Round 6 red team (writer R6-C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/C/sols/ch09_topp.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). S_17 (returns the argument object itself for
p >= 1: aliasing only) is right in value and not tested. tests/test_checks_redteam.py
runs every W_ entry (must fail) and every C_ and O_ entry (must pass).
Renamed in round 10: check_top_p_filter now has float64 rows whose masses lie 1e-10 from p
(exercise 9.1: float64 logits get float64 accuracy); the entries that compute float64
logits in float32 are W_ (C_01_reference -> W_25_reference).
"""
# flake8: noqa
import torch

CHECK = "check_top_p_filter"
NEG = float("-inf")


def _keep_ref(logits, p):
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    kept_sorted = above < p
    # the smallest kept probability; every token at least that probable is kept
    thr = torch.where(kept_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return probs >= thr


def W_25_reference(logits, p):
    return logits.masked_fill(~_keep_ref(logits, p), NEG)


def O_02_float64_and_strict_mass(logits, p):
    """Mass strictly more probable than each token, computed directly in float64
    (V x V comparison; fine for the sizes here)."""
    probs = torch.softmax(logits.double(), dim=-1)
    more = (probs[:, None, :] > probs[:, :, None]).double()      # [b, j, i]: i > j
    above = (more * probs[:, None, :]).sum(-1)
    return logits.masked_fill(~(above < p), NEG)


def W_03_log_softmax_returned(logits, p):
    """Returns log-probabilities of the kept tokens (softmax of it is the same). Was O_03;
    wrong under session 21's float64 rule: its log_softmax runs in float32 for float64
    logits."""
    keep = _keep_ref(logits, p)
    return torch.log_softmax(logits.float(), -1).to(logits.dtype).masked_fill(~keep, NEG)


def W_01_hf_shift_right(logits, p):
    """The usual sorted-cumsum-shift recipe: ties at the boundary are split by order."""
    sl, idx = logits.sort(dim=-1, descending=True)
    cum = torch.softmax(sl.float(), -1).cumsum(-1)
    remove = cum > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(-1, idx, remove)
    return logits.masked_fill(mask, NEG)


def W_02_probs_in_input_dtype(logits, p):
    """Softmax and cumsum in float16 for float16 rows."""
    probs = torch.softmax(logits, dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_03_isclose_ties(logits, p):
    """Treats near-ties (within 1e-6 relative) as ties: keeps a slightly less probable one."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr * (1 - 1e-4)), NEG)


def W_04_eps_on_p(logits, p):
    """above < p + 1e-6 'for safety': a mass that reaches p exactly keeps one more."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p + 1e-6, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_05_shift_and_divide(logits, p):
    """(logits - max) / keep: right distribution, NaN gradients (0/0) at removed tokens."""
    keep = _keep_ref(logits, p)
    shifted = logits - logits.max(dim=-1, keepdim=True).values.detach()
    return shifted / keep.to(logits.dtype)


def W_06_detached_output(logits, p):
    """Builds the output from logits.detach(): no gradient."""
    out = logits.detach().clone()
    out[~_keep_ref(logits, p)] = NEG
    return out


def W_07_inplace(logits, p):
    """masked_fill_ on the argument (when it needs no grad) and returns it."""
    keep = _keep_ref(logits, p)
    if logits.requires_grad:
        return logits.masked_fill(~keep, NEG)
    return logits.masked_fill_(~keep, NEG)


def W_08_returns_float32(logits, p):
    """Upcasts and forgets to cast back: float16 in, float32 out."""
    x = logits.float()
    return x.masked_fill(~_keep_ref(x, p), NEG)


def W_09_no_max_subtraction(logits, p):
    """exp(logits) / sum in float32: overflows for large logits."""
    e = logits.float().exp()
    probs = e / e.sum(-1, keepdim=True)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_10_first_row_threshold(logits, p):
    """Threshold of the first row used for the whole batch (a scalar .min())."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0))[0].min()
    return logits.masked_fill(~(probs >= thr), NEG)


def W_11_threshold_on_logit_minus_eps(logits, p):
    """Compares logits with the kept logit threshold minus 1e-3 (near-ties in logits)."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, si = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    k = (above < p).sum(-1, keepdim=True)                 # number kept in sorted order
    sl = logits.float().gather(-1, si)
    thr = sl.gather(-1, k - 1)
    return logits.masked_fill(~(logits.float() >= thr - 1e-3), NEG)


def W_12_finite_fill_min(logits, p):
    """finfo.min instead of -inf."""
    return logits.masked_fill(~_keep_ref(logits, p), torch.finfo(logits.dtype).min)


def W_13_neginf_rows_nan(logits, p):
    """Adds log(keep): -inf where removed; but -inf + (-inf) fine, x*keep gives nan on -inf."""
    keep = _keep_ref(logits, p).to(logits.dtype)
    return logits * keep + torch.log(keep)


def W_14_count_k_sorted_order(logits, p):
    """Keeps the k = number of kept positions in sorted order (ties split by order)."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, si = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    keep_sorted = above < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, si, keep_sorted)
    return logits.masked_fill(~keep, NEG)


def W_15_clamped_probs_log(logits, p):
    """Returns log(probs.clamp_min(1e-30)) of kept tokens: the float16 row underflows."""
    probs = torch.softmax(logits.float(), dim=-1)
    keep = _keep_ref(logits, p)
    return probs.clamp_min(1e-30).log().to(logits.dtype).masked_fill(~keep, NEG)


def W_16_cumsum_float16(logits, p):
    """Softmax in float32 but the running sum in the input dtype."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.to(logits.dtype).sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs.to(logits.dtype) >= thr), NEG)


def S_17_p_one_returns_same_object(logits, p):
    """For p >= 1 returns the logits themselves (the same object: aliasing)."""
    if p >= 1:
        return logits
    return W_25_reference(logits, p)


def W_18_view_needs_contiguous(logits, p):
    """Flattens with .view(): fails on a non-contiguous (e.g. sliced) logits tensor."""
    b, V = logits.shape
    keep = _keep_ref(logits, p).view(-1)
    return logits.view(-1).masked_fill(~keep, NEG).view(b, V)


def W_19_gather_instead_of_scatter(logits, p):
    """Maps the sorted keep mask back with gather(idx) instead of scatter (the inverse
    permutation): right whenever the sort permutation is its own inverse."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, si = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    keep_sorted = sp >= thr
    keep = keep_sorted.gather(-1, si)
    return logits.masked_fill(~keep, NEG)


def W_20_ties_in_input_dtype(logits, p):
    """Compares probabilities after rounding them to the input dtype (float16 near-ties
    become ties)."""
    probs = torch.softmax(logits.float(), dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    keep = probs.to(logits.dtype) >= thr.to(logits.dtype)
    return logits.masked_fill(~keep, NEG)


_MEMO = {}


def W_21_memo_order_per_shape(logits, p):
    """Caches the sort order per (shape, p): wrong on a second call with new values."""
    key = (tuple(logits.shape), float(p), logits.dtype)
    probs = torch.softmax(logits.float(), dim=-1)
    if key not in _MEMO:
        _MEMO[key] = probs.sort(dim=-1, descending=True).indices
    si = _MEMO[key]
    sp = probs.gather(-1, si)
    above = sp.cumsum(-1) - sp
    keep = torch.zeros_like(above, dtype=torch.bool).scatter(-1, si, above < p)
    return logits.masked_fill(~keep, NEG)


def W_22_keep_by_rank_of_logits_int(logits, p):
    """Ranks tokens by logits rounded to 3 decimals (for 'stable' ties)."""
    r = (logits.float() * 1000).round() / 1000
    probs = torch.softmax(r, dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_23_upcast_only_float16(logits, p):
    """Upcasts float16 rows only: bfloat16 rows are summed in bfloat16."""
    x = logits.float() if logits.dtype == torch.float16 else logits
    probs = torch.softmax(x, dim=-1)
    sp, _ = probs.sort(dim=-1, descending=True)
    above = sp.cumsum(-1) - sp
    thr = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thr), NEG)


def W_24_float64_returned_as_float32(logits, p):
    """Computes in float32 and returns float32 also for float64 logits."""
    x = logits.float()
    out = x.masked_fill(~_keep_ref(x, p), NEG)
    return out.to(logits.dtype) if logits.dtype in (torch.float16, torch.bfloat16) else out
