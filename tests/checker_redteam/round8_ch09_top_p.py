"""Round 8 red team (writer C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/C/sols/ch09_topp.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_); there are no S_ entries. W_24 (returns
the logits object itself at p >= 1) was accepted in round 8; the lead ruled it wrong, as
returning x itself was for RoPE in round 6 (exercise 9.1 now says "a new tensor").
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_top_p_filter"
import torch

NEG = float("-inf")


def C_01_reference(logits, p):
    probs = torch.softmax(logits.float() if logits.dtype != torch.float64 else logits, -1)
    ranked = probs.sort(-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def _probs(logits):
    return torch.softmax(logits.float() if logits.dtype != torch.float64 else logits, -1)


def O_02_logit_threshold(logits, p):
    """Threshold on the logits of the sorted order instead of the probabilities."""
    probs = _probs(logits)
    ranked, order = probs.sort(-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr_logit = logits.gather(-1, order.gather(-1, n - 1))
    return logits.masked_fill(logits < thr_logit, NEG)


def O_03_pairwise(logits, p):
    """Mass above each token by a (V x V) comparison: no sort, exact on ties."""
    probs = _probs(logits)
    above = (probs.unsqueeze(-2) > probs.unsqueeze(-1)).to(probs.dtype)   # [.., j, i]: i above j
    mass_above = (above * probs.unsqueeze(-2)).sum(-1)
    return logits.masked_fill(~(mass_above < p), NEG)


def W_00_log_renormalised(logits, p):
    """Returns log of the renormalised kept probabilities (softmax of it is the same)."""
    keep = C_01_reference(logits, p) > NEG
    probs = _probs(logits)
    q = torch.where(keep, probs, torch.zeros_like(probs))
    q = q / q.sum(-1, keepdim=True)
    return torch.log(q).to(logits.dtype)


def W_01_excludes_crossing(logits, p):
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = (ranked.cumsum(-1) < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_02_hf_style_le(logits, p):
    """HF: remove cumsum > p shifted right (keeps when mass above <= p, not < p); no ties."""
    probs = _probs(logits)
    ranked, order = probs.sort(-1, descending=True)
    remove = ranked.cumsum(-1) > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(-1, order, remove)
    return logits.masked_fill(mask, NEG)


def W_03_no_ties(logits, p):
    """Scatter by sort order with mass above < p: a token tied with the last kept is dropped."""
    probs = _probs(logits)
    ranked, order = probs.sort(-1, descending=True)
    keep = (ranked.cumsum(-1) - ranked) < p
    keep = keep.scatter(-1, order, keep)
    return logits.masked_fill(~keep, NEG)


def W_04_half_softmax(logits, p):
    probs = torch.softmax(logits, -1)
    ranked = probs.sort(-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_05_finite_fill(logits, p):
    keep = C_01_reference(logits, p) > NEG
    return logits.masked_fill(~keep, -1e9 if logits.dtype != torch.float16 else -6e4)


def W_06_inplace(logits, p):
    keep = C_01_reference(logits, p) > NEG
    logits[~keep] = NEG
    return logits


def W_07_returns_float32(logits, p):
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.float().masked_fill(probs < thr, NEG)


def W_08_no_max_exp(logits, p):
    e = logits.float().exp()
    probs = e / e.sum(-1, keepdim=True)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_09_unsorted_cumsum(logits, p):
    probs = _probs(logits)
    before = probs.cumsum(-1) - probs
    return logits.masked_fill(~(before < p), NEG)


def W_10_plus_one_gather(logits, p):
    """(cumsum < p).sum() + 1 tokens: out of range when the float total stays below p = 1."""
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = (ranked.cumsum(-1) < p).sum(-1, keepdim=True) + 1
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_06_complement_cumsum(logits, p):
    """Mass above = 1 - (ascending cumsum up to itself): cancellation near p."""
    probs = _probs(logits)
    asc = probs.sort(-1).values
    above_asc = 1 - asc.cumsum(-1)
    # kept tokens: those whose mass above < p; their count is the same in either order
    n = (above_asc < p).sum(-1, keepdim=True)
    ranked = probs.sort(-1, descending=True).values
    thr = ranked.gather(-1, n.clamp(min=1) - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_12_batchwide(logits, p):
    """One threshold for the whole batch (flattened sort)."""
    probs = _probs(logits)
    flat = probs.flatten().sort(descending=True).values / probs.shape[0]
    n = ((flat.cumsum(0) - flat) < p).sum()
    thr = flat[n - 1] * probs.shape[0]
    return logits.masked_fill(probs < thr, NEG)


def W_13_detached(logits, p):
    keep = C_01_reference(logits, p) > NEG
    return logits.detach().masked_fill(~keep, NEG)


def W_14_nan_from_inf_rows(logits, p):
    """Replaces -inf inputs by the row minimum first (forgetting they were removed)."""
    fin = torch.where(torch.isinf(logits), torch.full_like(logits, -30.0), logits)
    return C_01_reference(fin, p)


def W_15_strict_threshold(logits, p):
    """Keeps probs > threshold of the crossing token... plus the crossing token by index only."""
    probs = _probs(logits)
    ranked, order = probs.sort(-1, descending=True)
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    keep = probs > thr
    keep.scatter_(-1, order.gather(-1, n - 1), True)
    return logits.masked_fill(~keep, NEG)


def W_16_p_one_shortcut_wrong(logits, p):
    """Renormalises the kept mass with p (cumsum / p) and keeps while < 1."""
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) / p < 1 - 1e-6).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_17_cumsum_float16(logits, p):
    """Softmax in float32 but cumsum in the input dtype."""
    probs = _probs(logits).to(logits.dtype)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_18_isclose_ties(logits, p):
    """Keeps tokens within 1e-3 (relative) of the threshold: near-ties treated as ties."""
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr * (1 - 1e-3), NEG)


def W_19_temperature_like_divide(logits, p):
    """Scales logits by p (confuses p with a temperature) before filtering."""
    keep = C_01_reference(logits, p) > NEG
    return (logits / p).masked_fill(~keep, NEG)


def O_05_view_last_dim(logits, p):
    """logits.view(-1, V): fails on a non-contiguous slice such as logits[:, -1, :]."""
    V = logits.shape[-1]
    flat = logits.view(-1, V)
    return C_01_reference(flat, p).view(logits.shape)


def W_21_mass_above_le_eps(logits, p):
    """Keeps when mass above < p + 1e-6 (a tolerance for rounding)."""
    probs = _probs(logits)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p + 1e-6).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_22_bf16_not_upcast(logits, p):
    """Upcasts only float16: bfloat16 rows get their softmax and cumsum in bfloat16."""
    x = logits.float() if logits.dtype == torch.float16 else logits
    probs = torch.softmax(x, -1)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_23_half_cast_back(logits, p):
    """Casts low-precision results back with .half(): bfloat16 in, float16 out."""
    out = C_01_reference(logits.float(), p) if logits.dtype in (torch.float16, torch.bfloat16) \
        else C_01_reference(logits, p)
    return out.half() if logits.dtype in (torch.float16, torch.bfloat16) else out


def O_07_p1_clone(logits, p):
    """p = 1 keeps every token of positive probability: returns a copy."""
    if p == 1:
        return logits.clone()
    return C_01_reference(logits, p)


def W_24_p1_alias(logits, p):
    """p = 1: returns logits itself (the same tensor object)."""
    if p >= 1:
        return logits
    return C_01_reference(logits, p)


def W_25_softmax_dim0(logits, p):
    """Softmax over the batch axis: right for one row only."""
    probs = torch.softmax(logits.float(), 0)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_08_float64_probs(logits, p):
    """Probabilities and running sum in float64 for every dtype (the hint allows it)."""
    probs = torch.softmax(logits.double(), -1)
    ranked = probs.sort(-1, descending=True).values
    n = ((ranked.cumsum(-1) - ranked) < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_09_sorted_logits_softmax(logits, p):
    """Sort the logits, softmax the sorted row, scatter the keep mask back (ties kept by value)."""
    sl, order = logits.sort(-1, descending=True)
    sp = torch.softmax(sl.float() if sl.dtype != torch.float64 else sl, -1)
    n = ((sp.cumsum(-1) - sp) < p).sum(-1, keepdim=True)
    thr = sl.gather(-1, n - 1)
    return logits.masked_fill(logits < thr, NEG)


def W_26_argmax_shortcut(logits, p):
    """Rows whose top probability already reaches p keep only their argmax (a tie at the top
    is dropped)."""
    out = C_01_reference(logits, p)
    probs = _probs(logits)
    top = probs.max(-1, keepdim=True).values >= p
    only = torch.zeros_like(probs, dtype=torch.bool).scatter(-1, probs.argmax(-1, keepdim=True), True)
    return torch.where(top & ~only, torch.full_like(out, NEG), out)
