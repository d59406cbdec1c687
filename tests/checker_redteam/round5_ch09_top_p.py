"""Round 5 red team (writer R5-C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch09_top_p.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Renamed in round 10: check_top_p_filter now has float64 rows whose masses lie 1e-10 from p
(exercise 9.1: float64 logits get float64 accuracy); the entries that compute float64
logits in float32 are W_ (C_01_sort_threshold -> W_23_sort_threshold,
O_03_log_of_keep_mask -> W_24_log_of_keep_mask).
Renamed in round 12: A_21_cumsum_float16_probs_float32 -> W_21 (the round-10 case of
float16 rows 2e-4 from p rejects it; see its comment).
"""
# flake8: noqa
import math
import torch

CHECK = "check_top_p_filter"


def _keep(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    above = sp.cumsum(-1) - sp
    kept = above < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return probs >= thresh


def W_23_sort_threshold(logits, p):
    return logits.masked_fill(~_keep(logits, p), float("-inf"))


def O_02_quadratic_strictly_greater_mass(logits, p):
    probs = torch.softmax(logits.double(), -1)
    more = (probs[..., None, :] > probs[..., :, None]).double()
    mass_above = (more * probs[..., None, :]).sum(-1)
    return torch.where(mass_above < p, logits, torch.full_like(logits, float("-inf")))


def W_24_log_of_keep_mask(logits, p):
    return logits + torch.log(_keep(logits, p).to(logits.dtype))


def W_01_no_tie_handling(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept_sorted = (sp.cumsum(-1) - sp) < p
    keep = torch.zeros_like(kept_sorted).scatter(-1, idx, kept_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def W_02_cumsum_including_itself(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept_sorted = sp.cumsum(-1) < p
    kept_sorted[..., 0] = True
    keep = torch.zeros_like(kept_sorted).scatter(-1, idx, kept_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def W_03_mass_above_le_p(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) <= p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def W_04_softmax_in_float16(logits, p):
    probs = torch.softmax(logits, -1)  # stays in the input dtype
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def W_05_finite_fill(logits, p):
    return logits.masked_fill(~_keep(logits, p), -1e4)


def W_06_in_place_on_logits(logits, p):
    keep = _keep(logits, p)
    with torch.no_grad():
        logits.masked_fill_(~keep, float("-inf"))
    return logits


def W_07_returns_float32(logits, p):
    return logits.float().masked_fill(~_keep(logits, p), float("-inf"))


def W_08_detached_output(logits, p):
    return logits.detach().masked_fill(~_keep(logits, p), float("-inf"))


def W_09_exp_without_max(logits, p):
    e = torch.exp(logits.float())
    probs = e / e.sum(-1, keepdim=True)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def W_10_threshold_from_first_row(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh[:1], float("-inf"))


def W_11_epsilon_tolerance(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p + 1e-6
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def W_12_mask_in_sorted_order_not_unsorted(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept_sorted = (sp.cumsum(-1) - sp) < p
    # forgets to scatter back: applies the sorted-order mask to the vocabulary order
    return logits.masked_fill(~kept_sorted, float("-inf"))


def W_13_centre_logits_first(logits, p):
    centred = logits - logits.mean(-1, keepdim=True)
    return centred.masked_fill(~_keep(centred, p), float("-inf"))


def W_14_log_renormalised_probs_nan_grad(logits, p):
    probs = torch.softmax(logits.float(), -1)
    keep = _keep(logits, p)
    kept = probs * keep
    return torch.log(kept / kept.sum(-1, keepdim=True)).to(logits.dtype)


def W_15_gather_instead_of_scatter(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept_sorted = (sp.cumsum(-1) - sp) < p
    keep = kept_sorted.gather(-1, idx)
    return logits.masked_fill(~keep, float("-inf"))


def W_16_p_of_one_keeps_everything_but_minus_inf_rows_nan(logits, p):
    # keeps -inf entries "as is" but replaces them by the row minimum first
    finite_min = torch.where(torch.isinf(logits), torch.full_like(logits, float("inf")),
                             logits).min(-1, keepdim=True).values
    filled = torch.where(torch.isinf(logits), finite_min - 20, logits)
    return filled.masked_fill(~_keep(filled, p), float("-inf"))


def W_17_counts_kept_then_topk(logits, p):
    # number kept = how many sorted tokens needed, then topk of that many (ties broken)
    probs = torch.softmax(logits.float(), -1)
    sp, _ = probs.sort(-1, descending=True)
    k = ((sp.cumsum(-1) - sp) < p).sum(-1)
    out = torch.full_like(logits, float("-inf"))
    for r in range(logits.shape[0]):
        top = logits[r].topk(int(k[r])).indices
        out[r, top] = logits[r, top]
    return out


def W_18_isclose_ties(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    keep = (probs >= thresh) | torch.isclose(probs, thresh.expand_as(probs))
    return logits.masked_fill(~keep, float("-inf"))


def W_19_tie_tolerance_1e_4(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh - 1e-4, float("-inf"))


def W_20_epsilon_below_p(logits, p):
    # "mass reaches p" with a float safety margin: removes tokens whose mass above is a hair
    # below p
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p - 1e-5
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


# Wrong (was A_21 until round 12): rounding the sorted float32 probabilities to float16
# before the cumsum moves the running sum by about 1e-5 per step of a random walk, and a sum
# near 0.75 grows in float16 steps of 0.0005. The round-10 case of 2 x 4,096 float16 rows
# (2 * randn, another draw) whose masses lie about 2e-4 below p already rejects it: row 1
# keeps 385 tokens instead of 386 (the checker's hint: the running sum in float32 or float64),
# so it is tested as wrong.
def W_21_cumsum_float16_probs_float32(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    c = sp.to(logits.dtype).cumsum(-1).float()
    kept = (c - sp) < p
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def W_22_margin_below_p_keep_first(logits, p):
    probs = torch.softmax(logits.float(), -1)
    sp, idx = probs.sort(-1, descending=True)
    kept = (sp.cumsum(-1) - sp) < p - 1e-5
    kept[..., 0] = True  # always keep at least one token
    thresh = torch.where(kept, sp, torch.full_like(sp, float("inf"))).min(-1, keepdim=True).values
    return logits.masked_fill(probs < thresh, float("-inf"))


def S_02_returns_logits_itself_when_p_is_1(logits, p):
    if p >= 1:
        return logits
    return W_23_sort_threshold(logits, p)
