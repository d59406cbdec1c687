"""Round 2 red team (writer R2), ch09_topp: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch09_topp.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
Renamed in round 10: check_top_p_filter now has float64 rows whose masses lie 1e-10 from p
(exercise 9.1: float64 logits get float64 accuracy); the entries that compute float64
logits in float32 are W_ (C_threshold -> W_threshold, O_sort_logits -> W_sort_logits).
"""
import torch

CHECK = "check_top_p_filter"
NEG = float("-inf")


def W_threshold(logits, p):
    """Keep j when the mass of tokens strictly more probable than j is < p: find the smallest
    kept probability in sorted order, keep every token at least that probable."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    keep = probs >= kept_min
    return logits.masked_fill(~keep, NEG)


def O_pairwise(logits, p):
    """A different valid algorithm: for each token the mass of strictly more probable tokens,
    by an O(V^2) pairwise comparison (float64)."""
    probs = torch.softmax(logits.double(), dim=-1)
    more = probs[..., None, :] > probs[..., :, None]            # [b, j, i]: i more probable than j
    mass = (more * probs[..., None, :]).sum(-1)
    return torch.where(mass < p, logits, torch.full_like(logits, NEG))


def W_logprobs(logits, p):
    """Returns log of the kept probabilities (softmax gives the same renormalised distribution).
    Right until session 21; wrong under the float64 rule: float64 logits get float64 accuracy,
    and its log_softmax runs in float32 (the renormalised probabilities 4e-10 off)."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    keep = probs >= kept_min
    return torch.log_softmax(logits.float(), -1).masked_fill(~keep, NEG).to(logits.dtype)


def W_hf_scatter(logits, p):
    """The usual sort/cumsum/scatter: ties broken by sort order."""
    probs = torch.softmax(logits, dim=-1)
    srt, idx = probs.sort(dim=-1, descending=True)
    remove_sorted = (srt.cumsum(-1) - srt) >= p
    remove = remove_sorted.scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, NEG)


def W_drops_crossing(logits, p):
    """Keeps tokens while cumsum <= p: drops the one that reaches p."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt, idx = probs.sort(dim=-1, descending=True)
    remove_sorted = srt.cumsum(-1) > p
    remove = remove_sorted.scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, NEG)


def W_cumsum_logits(logits, p):
    """Cumulative sum of the logits, not of probabilities."""
    srt, idx = logits.sort(dim=-1, descending=True)
    remove_sorted = (srt.cumsum(-1) - srt) >= p
    remove = remove_sorted.scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, NEG)


def W_half_precision_cumsum(logits, p):
    """Softmax and cumsum in the input dtype (float16 rounding accumulates on long rows),
    tie-safe otherwise."""
    probs = torch.softmax(logits, dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, NEG)


def W_ascending(logits, p):
    """Sorts ascending: keeps the least probable."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt, idx = probs.sort(dim=-1)
    remove_sorted = (srt.cumsum(-1) - srt) >= p
    remove = remove_sorted.scatter(-1, idx, remove_sorted)
    return logits.masked_fill(remove, NEG)


def W_inplace(logits, p):
    """Writes -inf into logits."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    logits[probs < kept_min] = NEG
    return logits


def W_detach(logits, p):
    """out = logits.detach().clone(): right values, no gradient."""
    out = logits.detach().clone()
    probs = torch.softmax(out.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    out[probs < kept_min] = NEG
    return out


def W_flatten_batch(logits, p):
    """Applies the filter to the whole batch at once."""
    flat = logits.reshape(1, -1)
    probs = torch.softmax(flat.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return flat.masked_fill(probs < kept_min, NEG).reshape(logits.shape)


def W_le_p(logits, p):
    """above <= p: also keeps the token right after the mass reaches exactly p."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above > p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, NEG)


def W_float32_out(logits, p):
    """Returns float32 for float16 input."""
    x = logits.float()
    probs = torch.softmax(x, dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return x.masked_fill(probs < kept_min, NEG)


def W_naive_softmax(logits, p):
    """Own softmax without max subtraction: large logits overflow."""
    e = torch.exp(logits.float())
    probs = e / e.sum(-1, keepdim=True)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, NEG)


def W_minus_1e9(logits, p):
    """Fills with -1e9 (not -inf): float16 overflow to -inf, float32 fine; probes whether -inf is
    enforced."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, -1e9 if logits.dtype != torch.float16 else -6e4)


def W_first_row_threshold(logits, p):
    """Computes the threshold from row 0 only (batch of one works)."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs[:1].sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, NEG)


def W_nan_to_num_inf(logits, p):
    """Calls nan_to_num on the logits first: -inf (top-k filtered) becomes a huge finite
    negative number, which then is not -inf in the output."""
    x = torch.nan_to_num(logits)
    probs = torch.softmax(x.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return x.masked_fill(probs < kept_min, NEG)


def W_keep_at_least_two(logits, p):
    """Always keeps the top two tokens (min_tokens_to_keep=2 habit)."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    above[..., :2] = 0
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min, NEG)


def W_tolerance(logits, p):
    """Keeps every token within 1e-4 of the last kept probability ("ties" with a tolerance):
    keeps tokens that are not tied."""
    probs = torch.softmax(logits.float(), dim=-1)
    srt = probs.sort(dim=-1, descending=True).values
    above = srt.cumsum(-1) - srt
    kept_min = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(probs < kept_min - 1e-4, NEG)


def W_sort_logits(logits, p):
    """Sorts the logits (same order as the probabilities), softmax of the sorted row, and
    compares logits with the last kept logit."""
    srt = logits.sort(dim=-1, descending=True).values
    sp = torch.softmax(srt.float(), -1)
    above = sp.cumsum(-1) - sp
    last = srt.masked_fill(above >= p, float("inf")).amin(-1, keepdim=True)
    return logits.masked_fill(logits < last, NEG)
