"""Round 12 red team (writer C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/C/sols/ch09_topp.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 12 except W03 (no p = 1 shortcut), accepted on purpose as A_03
by the lead's ruling (see its comment).
"""
# flake8: noqa
import torch

CHECK = "check_top_p_filter"


def _wide(dt):
    return torch.promote_types(dt, torch.float32)


def C_01_reference_like(logits, p):
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def O_02_compare_logits(logits, p):
    """The threshold on the logits (the crossing token's logit), not on probabilities."""
    if p == 1:
        return logits.clone()
    w = _wide(logits.dtype)
    sl, idx = logits.sort(dim=-1, descending=True)
    sp = torch.softmax(sl.to(w), dim=-1)
    before = sp.cumsum(-1) - sp
    n = (before < p).sum(-1, keepdim=True)
    thr = sl.gather(-1, n - 1)
    return torch.where(logits >= thr, logits, torch.full_like(logits, float("-inf")))


def O_03_float64_probs_exclusive_cumsum(logits, p):
    """Probabilities and the exclusive running sum in float64 for every dtype."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.double(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    c = ranked.cumsum(-1)
    before = torch.cat([torch.zeros_like(c[..., :1]), c[..., :-1]], dim=-1)
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_01_hf_shift_right(logits, p):
    """Hugging Face style: remove where cumsum > p, shifted right; ties by sort position."""
    w = _wide(logits.dtype)
    sl, idx = logits.sort(dim=-1, descending=True)
    cp = torch.softmax(sl.to(w), -1).cumsum(-1)
    remove = cp > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(-1, idx, remove)
    return logits.masked_fill(mask, float("-inf"))


def W_02_ties_by_position(logits, p):
    """Right rule (mass before < p) in sorted order, scattered back: ties cut by position."""
    if p == 1:
        return logits.clone()
    w = _wide(logits.dtype)
    sl, idx = logits.sort(dim=-1, descending=True)
    sp = torch.softmax(sl.to(w), -1)
    keep_sorted = (sp.cumsum(-1) - sp) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


# A_ (the lead's ruling, round 12): at p = 1 a float32 running sum reaches 1 before the end of
# a long row, so tokens are removed; each has probability below float32's resolution of the
# running sum (<= 1.2e-7, the distribution moves by at most 2e-5 in total variation), and the
# course's own solution (exercises/solutions/09_gpt.ipynb) computes it the same way.
def A_03_no_p1_shortcut(logits, p):
    """No special case at p = 1: a running sum rounded to 1 drops the tail."""
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_04_cumsum_in_input_dtype(logits, p):
    """Softmax in float32 but the running sum in the logits' dtype (float16 rows)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.float(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    r = ranked.to(logits.dtype) if logits.dtype != torch.float64 else ranked
    before = (r.cumsum(-1) - r).float()
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_05_before_le_p(logits, p):
    """Keeps a token when the mass above it is <= p (one too many when it hits p)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before <= p).sum(-1, keepdim=True).clamp(max=ranked.shape[-1])
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def O_06_ascending_tail(logits, p):
    """Sorted ascending: keep where the running sum from the bottom exceeds 1 - p."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1).values
    tail = ranked.cumsum(-1)
    n_removed = (tail <= 1 - p).sum(-1, keepdim=True).clamp(max=ranked.shape[-1] - 1)
    thr = ranked.gather(-1, n_removed)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_07_detached_copy(logits, p):
    out = C_01_reference_like(logits.detach(), p)
    return out


def W_08_finite_fill_min(logits, p):
    out = C_01_reference_like(logits, p)
    return out.masked_fill(out == float("-inf"), torch.finfo(logits.dtype).min)


def W_09_manual_softmax_no_shift(logits, p):
    if p == 1:
        return logits.clone()
    e = torch.exp(logits.to(_wide(logits.dtype)))
    probs = e / e.sum(-1, keepdim=True)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_10_one_threshold_for_batch(logits, p):
    """Threshold per row... computed with keepdim missing and broadcast over columns for
    square batches; here: the smallest row threshold used for every row."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1).min()
    return logits.masked_fill(probs < thr, float("-inf"))


def W_11_p1_returns_same(logits, p):
    if p == 1:
        return logits
    return C_01_reference_like(logits, p)


def W_12_in_place(logits, p):
    out = C_01_reference_like(logits, p)
    if not logits.requires_grad:
        logits.copy_(out)
        return out
    return out


def S_13_renormalised_log_probs(logits, p):
    """Returns log-probabilities renormalised over the kept tokens (same softmax)."""
    out = C_01_reference_like(logits, p)
    return torch.log_softmax(out.to(_wide(out.dtype)), -1).to(logits.dtype)


def W_14_near_tie_rounding_prob_in_input_dtype(logits, p):
    """Probabilities in float32, but compared in the input's dtype (float16 rounding makes
    near-ties equal and keeps extra tokens)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    dt = logits.dtype
    return logits.masked_fill(probs.to(dt) < thr.to(dt), float("-inf"))


def W_15_relative_tolerance_ties(logits, p):
    """Treats probabilities within 1e-3 (relative) of the crossing one as ties."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1) * (1 - 1e-3)
    return logits.masked_fill(probs < thr, float("-inf"))


def W_16_p_clamped_to_0_99(logits, p):
    """Clamps p to 0.99 'to avoid rounding trouble at 1' (removes tokens at p = 1 too)."""
    p = min(p, 0.99)
    return C_01_reference_like(logits, p)


def W_17_where_with_grad_nan(logits, p):
    """Builds the output as logits + log(keep): -inf where removed, but the gradient of
    log(0) * 0 ... is fine; here via logits * keep / keep (NaN gradient at removed)."""
    if p == 1:
        return logits.clone()
    keep = torch.isfinite(C_01_reference_like(logits.detach(), p)).to(logits.dtype)
    return logits * keep + torch.log(keep)


def O_04_python_loop_tolist(logits, p):
    """Finds each row's nucleus with a Python loop over .tolist() values; masks the logits
    (the gradient still flows through masked_fill)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.detach().to(torch.float64), dim=-1)
    remove = torch.zeros(logits.shape, dtype=torch.bool)
    for r, row in enumerate(probs.tolist()):
        order = sorted(range(len(row)), key=lambda j: -row[j])
        mass, thr = 0.0, None
        for j in order:
            if mass < p:
                thr = row[j]
                mass += row[j]
            else:
                break
        for j in range(len(row)):
            if row[j] < thr:
                remove[r, j] = True
    return logits.masked_fill(remove.to(logits.device), float("-inf"))


def W_18_unsorted_running_sum(logits, p):
    """Running sum in vocabulary order (forgets to sort)."""
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits.to(_wide(logits.dtype)), dim=-1)
    before = probs.cumsum(-1) - probs
    return logits.masked_fill(~(before < p), float("-inf"))


def S_19_p_not_validated(logits, p):
    """No check of p: p = 0 keeps only the top token, p = 1.5 keeps all (silently)."""
    if p >= 1:
        return logits.clone()
    return C_01_reference_like(logits, max(p, 1e-12))


def W_20_float32_output_for_half(logits, p):
    out = C_01_reference_like(logits.float(), p)
    return out
