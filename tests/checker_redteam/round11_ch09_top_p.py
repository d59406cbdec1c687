"""Round 11 red team (writer C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but right
(O_) solutions written from the exercise text alone; copied from
/work/redteam/round11/C/sols/ch09_top_p.py with the names W01_x written W_01_x.
Passed in round 11, rejected since: W_07 (logits.detach().clone() at p >= 1) on backward()
at p = 1; W_17 (half logits filtered on a detached float32 copy) on backward() in float16
and bfloat16; W_19 (bfloat16 probabilities computed through float16) on bfloat16 logits near
100,000, beyond float16's range, where it removes every token (the hint names the float16
cast); W_21 (every token kept for p > 0.999) on p = 0.9995 and p = 0.99999, whose tails
(3.1e-4 and 2.5e-4, and 5e-6, of the mass) go.
O_16 (written W16: logits.clone() at p = 1) is right by the exercise's rule: token j is kept
when the tokens more probable than j have a total probability below p, and at p = 1 that
holds for every token whose own probability is above 0, however small. A solution whose
running sum rounds to 1.0 before such a token (the solution notebook's, "before < p")
removes it: a float artefact, accepted too. No case at p = 1 has a token within rounding of
probability 0, so both are accepted; tokens that are -inf in the input stay -inf either way.
No wrong one is accepted on purpose (no A_).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_top_p_filter"
import torch

NEG = float("-inf")


def _keep(logits, p, dtype=None):
    """Reference-style keep mask (threshold on the last kept probability)."""
    if dtype is None:
        dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.detach().to(dtype), dim=-1)
    sp, idx = probs.sort(dim=-1, descending=True)
    cum = sp.cumsum(-1)
    above = cum - sp
    keep_sorted = above < p
    # smallest kept prob per row; keep every token at least as probable
    thresh = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return probs >= thresh


def C_01_threshold(logits, p):
    return logits.masked_fill(~_keep(logits, p), NEG)


def O_02_float64_and_log(logits, p):
    keep = _keep(logits, p, torch.float64)
    return logits + torch.log(keep.to(logits.dtype))  # 0 where kept, -inf where removed


def O_03_clone_index(logits, p):
    keep = _keep(logits, p)
    out = logits.clone()
    out[~keep] = NEG
    return out


def W_01_sort_order_ties(logits, p):
    # classic HF: tie broken by sort order
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    remove_sorted = (sp.cumsum(-1) - sp) >= p
    remove = remove_sorted.scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, NEG)


def W_02_where_detach(logits, p):
    keep = _keep(logits, p)
    return torch.where(keep, logits.detach(), torch.full_like(logits, NEG))


def W_03_log_of_masked_probs(logits, p):
    # log of renormalisable masked probabilities: same softmax, NaN gradients
    keep = _keep(logits, p)
    probs = torch.softmax(logits.float(), -1)
    return torch.log(probs * keep).to(logits.dtype)


def W_04_global_max_shift(logits, p):
    # one maximum for the whole batch when computing probabilities
    x = logits.detach().double() if logits.dtype == torch.float64 else logits.detach().float()
    e = torch.exp(x - x.max())
    probs = e / e.sum(-1, keepdim=True)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    thresh = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_05_no_max_shift(logits, p):
    x = logits.detach().double() if logits.dtype == torch.float64 else logits.detach().float()
    e = torch.exp(x)
    probs = e / e.sum(-1, keepdim=True)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    thresh = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_06_tie_tolerance(logits, p):
    # "ties" judged with a tolerance: near-ties kept too
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.detach().to(dtype), -1)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    thresh = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh * (1 - 1e-4)), NEG)


def W_07_p1_detached_clone(logits, p):
    if p >= 1:
        return logits.detach().clone()
    return C_01_threshold(logits, p)


def W_08_first_row_order(logits, p):
    # threshold from the first row applied to all rows (batch 1 assumption)
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.detach().to(dtype), -1)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    k = int((above[0] < p).sum())
    thresh = sp[:, k - 1:k]
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_09_cum_strictly_above(logits, p):
    # keeps a token when the mass *before and including* it is <= p, plus the first
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.detach().to(dtype), -1)
    sp, idx = probs.sort(-1, descending=True)
    cum = sp.cumsum(-1)
    keep_sorted = cum <= p
    keep_sorted[..., 0] = True
    thresh = torch.where(keep_sorted, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_10_logit_threshold_sorted_logits(logits, p):
    # threshold on logits, but the softmax is taken of the input dtype (float16 cumsum)
    probs = torch.softmax(logits.detach(), -1)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    thresh = torch.where(above < p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_11_inplace_then_clone(logits, p):
    keep = _keep(logits, p)
    with torch.no_grad():
        logits.masked_fill_(~keep, NEG)
    return logits.clone()


def W_12_fill_finfo_min(logits, p):
    keep = _keep(logits, p)
    return logits.masked_fill(~keep, torch.finfo(logits.dtype).min)


def W_13_mass_above_gt(logits, p):
    # removes only when the mass above exceeds p strictly: a mass reaching p exactly keeps one more
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    probs = torch.softmax(logits.detach().to(dtype), -1)
    sp, _ = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    thresh = torch.where(above <= p, sp, torch.full_like(sp, 2.0)).min(-1, keepdim=True).values
    return logits.masked_fill(~(probs >= thresh), NEG)


def W_14_minus_inf_rows_nan(logits, p):
    # handles -inf input by replacing with the row min first (treats -inf tokens as finite)
    x = torch.where(torch.isinf(logits), logits[~torch.isinf(logits)].min() - 50, logits)
    return C_01_threshold(x, p)


def W_15_p_as_float32(logits, p):
    # p compared after casting to float32 even for float64 logits
    p32 = float(torch.tensor(p, dtype=torch.float32))
    return C_01_threshold(logits, p32)


def O_16_p1_plain_clone(logits, p):
    # right (written W16): see the docstring. At p = 1 "everything is kept": tokens whose probability underflows to 0 stay finite
    if p >= 1:
        return logits.clone()
    return C_01_threshold(logits, p)


def W_17_detach_half(logits, p):
    # half logits: filtered in float32 on a detached copy, cast back (no gradient in half)
    if logits.dtype in (torch.float16, torch.bfloat16):
        x = logits.detach().float()
        return C_01_threshold(x, p).to(logits.dtype)
    return C_01_threshold(logits, p)


def W_18_p1_view(logits, p):
    # at p = 1 returns a view of logits (not the object itself, but the same storage)
    if p >= 1:
        return logits.view_as(logits)
    return C_01_threshold(logits, p)


def W_19_bf16_via_half(logits, p):
    # half dtypes' probabilities through float16 (bfloat16 logits above 65504 overflow)
    if logits.dtype in (torch.float16, torch.bfloat16):
        keep = _keep(logits.half(), p)
        return logits.masked_fill(~keep, NEG)
    return C_01_threshold(logits, p)


def O_20_view_rows_same_shape(logits, p):
    # flattens with view (crashes on a non-contiguous batch, e.g. a column slice)
    V = logits.shape[-1]
    flat = logits.view(-1, V)
    return C_01_threshold(flat, p).view(logits.shape)


def W_21_p_near_one_shortcut(logits, p):
    # treats p within 1e-3 of 1 as "keep everything"
    if p > 0.999:
        return logits.clone()
    return C_01_threshold(logits, p)
