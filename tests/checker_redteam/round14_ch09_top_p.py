"""Round 14 red team (writer E, issue 12), ch09_top_p: check_top_p_filter; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round14/E/sols/ch09_top_p.py (writer's note: Round 14, writer E, check_top_p_filter.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_24 (torch.enable_grad() inside): check_top_p_filter now
calls it under torch.no_grad() with logits requiring grad and rejects a result that requires
grad. W_12/W_13 are _core's. W_10 -> A_10 (lead's ruling: `logits - inf` gradient).
"""
# flake8: noqa
import torch
CHECK = "check_top_p_filter"


def _wide(x):
    return torch.promote_types(x.dtype, torch.float32)


def C_01_reference(logits, p):
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def C_02_scatter_then_ties(logits, p):
    """Sort indices, exclusive cumsum via cat, scatter the keep mask back; keep ties of the
    last kept probability."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked, idx = probs.sort(dim=-1, descending=True)
    before = torch.cat([torch.zeros_like(ranked[..., :1]), ranked.cumsum(-1)[..., :-1]], -1)
    keep_sorted = before < p
    if p >= 1:
        keep_sorted = torch.ones_like(keep_sorted)
    last = torch.where(keep_sorted, ranked, torch.full_like(ranked, float("inf"))).amin(-1, keepdim=True)
    keep = probs >= last
    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))


def O_03_no_grad_mask(logits, p):
    """Mask computed under no_grad (it is not differentiated); masked_fill outside."""
    with torch.no_grad():
        probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
        ranked = probs.sort(dim=-1, descending=True).values
        before = ranked.cumsum(-1) - ranked
        num = (before < p).sum(-1, keepdim=True)
        thr = ranked.gather(-1, num - 1)
        drop = probs < thr if p < 1 else torch.zeros_like(probs, dtype=torch.bool)
    return logits.masked_fill(drop, float("-inf"))


def O_04_inference_mode_mask_cloned(logits, p):
    with torch.inference_mode():
        probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
        ranked = probs.sort(dim=-1, descending=True).values
        before = ranked.cumsum(-1) - ranked
        num = (before < p).sum(-1, keepdim=True)
        thr = ranked.gather(-1, num - 1)
        drop = probs < thr if p < 1 else torch.zeros_like(probs, dtype=torch.bool)
    drop = drop.clone()
    return logits.masked_fill(drop, float("-inf"))


def O_05_log_of_mask(logits, p):
    """Adds log(keep) (0 or -inf) to the logits."""
    keep = ~(C_01_reference(logits.detach(), p) == float("-inf")) | (logits == float("-inf"))
    return logits + torch.log(keep.to(logits.dtype))


def O_06_threshold_on_logits(logits, p):
    """Compares logits with the last kept logit (monotone in probability)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked, idx = probs.sort(dim=-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    num = (before < p).sum(-1, keepdim=True)
    last_logit = logits.gather(-1, idx.gather(-1, num - 1))
    # ties in probability are ties in logits, except where the float32 probs merged them:
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def O_07_default_dtype_restored(logits, p):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        pp = torch.tensor(p)          # float64 now
    finally:
        torch.set_default_dtype(old)
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before < pp.to(before.dtype)).sum(-1, keepdim=True) if p < 1 else torch.full_like(ranked[..., :1], ranked.shape[-1], dtype=torch.long)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


# ------------------------------------------------------------------------------ wrong

def A_10_minus_inf_gradient_one(logits, p):
    """Accepted (lead's ruling, round 14): a finite loss only reaches removed tokens through a softmax, where the gradient is 0 either way; only a loss on the filtered logits themselves would see the 1. Removed tokens written as logits - inf: forward -inf, but d out/d logits = 1 (not 0)
    at removed tokens, and -inf - inf... ; visible with out.masked_fill(out==-inf, 0).sum()."""
    keep = C_01_reference(logits.detach(), p) != float("-inf")
    return torch.where(keep, logits, logits - float("inf"))


def W_11_inference_mask_not_cloned(logits, p):
    """Mask built under inference_mode and used directly: masked_fill saves it for backward
    -> RuntimeError at backward time (outside the function)."""
    with torch.inference_mode():
        drop = C_01_reference(logits, p) == float("-inf")
        drop = drop & (logits != float("-inf"))
    return logits.masked_fill(drop, float("-inf"))


def W_12_grad_mode_left_on(logits, p):
    """Mask under set_grad_enabled(False) ... set_grad_enabled(True): grad mode left on in the
    caller's no_grad block."""
    torch.set_grad_enabled(False)
    drop = C_01_reference(logits, p) == float("-inf")
    torch.set_grad_enabled(True)
    return logits.masked_fill(drop, float("-inf"))


def W_13_manual_seed(logits, p):
    """torch.manual_seed(1234) at the top: resets the caller's generator."""
    torch.manual_seed(1234)
    return C_01_reference(logits, p)


def W_14_softmax_of_sorted_logits(logits, p):
    """Sorts logits, softmaxes the sorted row, and compares with softmax of the unsorted row:
    the two normalisers differ by an ulp, so the last kept token can drop itself."""
    if p == 1:
        return logits.clone()
    w = _wide(logits)
    ranked = torch.softmax(logits.to(w).sort(-1, descending=True).values, -1)
    probs = torch.softmax(logits.to(w), -1)
    before = ranked.cumsum(-1) - ranked
    num = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_15_float32_for_float64(logits, p):
    """float64 logits computed in float32 (near-ties within float32 rounding merged)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_16_le_p(logits, p):
    """'before <= p': when the mass above reaches p exactly, one token too many."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before <= p).sum(-1, keepdim=True).clamp(max=ranked.shape[-1])
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_17_cumsum_inclusive_lt(logits, p):
    """Keeps tokens whose inclusive cumsum < p, then always the top-1: misses the token that
    crosses p."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked, idx = probs.sort(dim=-1, descending=True)
    keep_s = ranked.cumsum(-1) < p
    keep_s[..., 0] = True
    keep = torch.zeros_like(keep_s).scatter(-1, idx, keep_s)
    return logits.masked_fill(~keep, float("-inf"))


def W_18_no_ties(logits, p):
    """Keeps by sorted rank only (scatter), not the ties of the last kept token."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked, idx = probs.sort(dim=-1, descending=True)
    keep_s = (ranked.cumsum(-1) - ranked) < p
    keep = torch.zeros_like(keep_s).scatter(-1, idx, keep_s)
    return logits.masked_fill(~keep, float("-inf"))


def W_19_cumsum_in_input_dtype(logits, p):
    """Softmax in float32, but the running sum in the logits' dtype (float16 over thousands)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = (ranked.to(logits.dtype).cumsum(-1) - ranked.to(logits.dtype)).to(ranked.dtype)
    num = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_20_p1_detached_clone(logits, p):
    """At p == 1 returns logits.detach().clone(): no gradient at p = 1."""
    if p == 1:
        return logits.detach().clone()
    return C_01_reference(logits, p)


def W_21_fill_finfo_min_then_neg_inf_only_f32(logits, p):
    """Fills removed tokens with -1e4 in float16 (finite) and -inf otherwise."""
    out = C_01_reference(logits, p)
    if logits.dtype == torch.float16:
        out = out.masked_fill(out == float("-inf"), -6e4) if False else out.nan_to_num(neginf=-65504.0)
    return out


def W_22_renormalised_probs_log(logits, p):
    """Returns log of renormalised probabilities (softmax is the same!) but the kept logits
    lose their values -- the returned tensor is not 'logits with -inf' (float16 log-probs
    underflow: tiny probabilities become -inf, i.e. removed)."""
    out = C_01_reference(logits, p)
    return torch.log_softmax(out.float(), -1).to(logits.dtype)


def W_23_global_p_mass_over_batch(logits, p):
    """Threshold taken from the first row and applied to every row (batch shares one cut)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, num - 1)
    thr = thr.amin(0, keepdim=True) if logits.dim() > 1 else thr
    return logits.masked_fill(probs < thr, float("-inf"))


def W_24_grad_mode_enable_inside_no_grad(logits, p):
    """Wraps its work in torch.enable_grad(): under the caller's no_grad the result requires
    grad and carries a graph."""
    with torch.enable_grad():
        return C_01_reference(logits, p)


def W_25_dtype_float32_result_for_half(logits, p):
    """Returns the float32 copy for float16 / bfloat16 logits."""
    w = _wide(logits)
    return C_01_reference(logits.to(w), p)


def W_26_sub_eps(logits, p):
    """Compares before < p - 1e-6 (a 'safety' epsilon): a mass just below p (within 1e-6)
    keeps one token too few."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num = (before < p - 1e-6).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num - 1)
    return logits.masked_fill(probs < thr, float("-inf"))
