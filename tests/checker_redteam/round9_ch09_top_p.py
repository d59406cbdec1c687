"""Round 9 red team (writer C, issue 12), ch09_top_p: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/C/sols/ch09_topp.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). W_04 (one softmax maximum for the whole batch)
passed in round 9, before the case of two rows far apart (near 1000 and near 0). S_01 (the
log-softmax of the kept logits returned) is refused by the float64 accuracy check; S_ are
not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import torch

CHECK = "check_top_p_filter"
NEG = float("-inf")


def _probs(logits):
    dt = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return torch.softmax(logits.to(dt), dim=-1)


def C_01_threshold(logits, p):
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_01_pairwise_definition(logits, p):
    """The definition literally: mass of the strictly more probable tokens < p (O(V^2))."""
    probs = _probs(logits)
    if probs.shape[-1] * probs.shape[0] > 2048:
        return C_01_threshold(logits, p)
    more = probs[..., None, :] > probs[..., :, None]        # [j, i]: i more probable than j
    above = (probs[..., None, :] * more).sum(-1)
    return logits.masked_fill(~(above < p), NEG)


def O_02_scatter_then_ties(logits, p):
    """Sorted keep mask scattered back, then ties with the last kept one re-added."""
    probs = _probs(logits)
    ranked, idx = probs.sort(dim=-1, descending=True)
    keep_sorted = (ranked.cumsum(-1) - ranked) < p
    keep_sorted[..., 0] = True
    last = torch.where(keep_sorted, ranked, torch.full_like(ranked, 2.0)).min(-1,
                                                                             keepdim=True).values
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted) | (probs >= last)
    out = logits.clone()
    out[~keep] = NEG
    return out


def O_03_log_of_mask(logits, p):
    """logits + log(keep): -inf where removed, gradient 1 elsewhere."""
    keep = C_01_threshold(logits, p) != NEG
    return logits + torch.log(keep.to(logits.dtype))


def O_04_searchsorted_inclusive(logits, p):
    """Kept count = #(cumsum < p) + 1, clamped; ties via the threshold."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    cum = ranked.cumsum(-1)
    k = ((cum < p).sum(-1, keepdim=True) + 1).clamp(max=probs.shape[-1])
    thr = ranked.gather(-1, k - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_01_half_softmax(logits, p):
    """Probabilities in the logits' dtype (float16 softmax), then float32 sums."""
    probs = torch.softmax(logits, -1).float() if logits.dtype != torch.float64 \
        else torch.softmax(logits, -1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_02_nonstrict(logits, p):
    """mass above <= p: keeps one more token when the mass reaches p exactly."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before <= p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_03_hf_style_no_ties(logits, p):
    """HF's shift-right trick in sorted order; ties with the last kept are dropped."""
    probs = _probs(logits)
    ranked, idx = probs.sort(dim=-1, descending=True)
    remove = ranked.cumsum(-1) > p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    rm = remove.scatter(-1, idx, remove)
    return logits.masked_fill(rm, NEG)


def W_04_batch_max(logits, p):
    """exp(logits - one max over the whole batch): rows far below it underflow."""
    dt = torch.float64 if logits.dtype == torch.float64 else torch.float32
    e = torch.exp(logits.to(dt) - logits.to(dt).max())
    probs = e / e.sum(-1, keepdim=True)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_05_detached(logits, p):
    out = logits.detach().clone()
    return C_01_threshold(out, p)


def W_06_p1_returns_input(logits, p):
    if p >= 1:
        return logits
    return C_01_threshold(logits, p)


def W_07_inplace(logits, p):
    keep = C_01_threshold(logits.detach(), p) != NEG
    with torch.no_grad():
        logits.masked_fill_(~keep, NEG)
    return logits.clone()


def W_08_finite_fill(logits, p):
    keep = C_01_threshold(logits, p) != NEG
    return logits.masked_fill(~keep, -1e4 if logits.dtype == torch.float16 else -1e9)


def W_09_output_float32(logits, p):
    return C_01_threshold(logits.float() if logits.dtype != torch.float64 else logits, p)


def W_10_nan_to_num(logits, p):
    """nan_to_num first (to 'avoid -inf trouble'): a kept -inf becomes finite."""
    clean = torch.nan_to_num(logits)
    return C_01_threshold(clean, p)


def W_11_first_row_threshold(logits, p):
    """The kept count of the first row used for every row."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before[:1] < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept.expand(ranked.shape[0], 1) - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_12_threshold_in_logit_space_approx(logits, p):
    """Keeps tokens whose logit is within log(1/(1-p)) ... no: keep top while cumsum of
    sorted *float16* probabilities < p (cumsum in the input dtype)."""
    probs = torch.softmax(logits.float(), -1).to(logits.dtype)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def S_01_renormalised_log_probs(logits, p):
    """Returns log of the renormalised kept probabilities (softmax-equal, but not the logits;
    float16 rows lose precision)."""
    kept = C_01_threshold(logits, p)
    return torch.log_softmax(kept.float(), -1).to(logits.dtype)


def W_15_keep_minimum_two(logits, p):
    """Always keeps at least two tokens (a 'safety' min_tokens_to_keep=2)."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=2, max=probs.shape[-1])
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_16_ties_broken_by_index(logits, p):
    """Stable sort + scatter: of equally probable tokens only those ranked before the
    crossing are kept."""
    probs = _probs(logits)
    ranked, idx = probs.sort(dim=-1, descending=True, stable=True)
    keep_sorted = (ranked.cumsum(-1) - ranked) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, idx, keep_sorted)
    return logits.masked_fill(~keep, NEG)


def O_05_complement_mass(logits, p):
    """Mass above j = 1 - (mass of j and everything below), suffix sums from the tail."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    tail = ranked.flip(-1).cumsum(-1).flip(-1)          # sum from j to the end
    before = 1 - tail
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_06_python_loop(logits, p):
    """Row by row in Python floats (double sums)."""
    probs = _probs(logits)
    out = logits.clone()
    for r in range(logits.shape[0]):
        pr = probs[r].tolist()
        order = sorted(range(len(pr)), key=lambda i: -pr[i])
        acc, thr = 0.0, None
        for i in order:
            if acc >= p:
                break
            thr = pr[i]
            acc += pr[i]
        keep = probs[r] >= thr
        out[r] = out[r].masked_fill(~keep, NEG)
    return out


def W_17_full_like_then_copy_detached(logits, p):
    """A fresh -inf tensor with the kept logits copied under no_grad: no gradient."""
    keep = C_01_threshold(logits, p) != NEG
    out = torch.full_like(logits, NEG)
    with torch.no_grad():
        out[keep] = logits[keep]
    return out


def W_18_threshold_on_rounded_logits(logits, p):
    """Ties decided on logits rounded to 3 decimals (near-ties merged)."""
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    rl = torch.round(logits.double() * 1000) / 1000
    thr = rl.sort(dim=-1, descending=True).values.gather(-1, num_kept - 1)
    return logits.masked_fill(rl < thr, NEG)


def _by_before(logits, p, cmp):
    probs = _probs(logits)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = cmp(before).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def W_19_fudge_minus_eps(logits, p):
    """before < p - 1e-6 ('float safety'): drops the crossing token when the mass above it
    is within 1e-6 below p."""
    return _by_before(logits, p, lambda b: b < p - 1e-6)


def W_20_fudge_plus_eps(logits, p):
    """before < p + 1e-6: keeps an extra token when the mass reaches p (within 1e-6)."""
    return _by_before(logits, p, lambda b: b < p + 1e-6)


def W_21_fudge_minus_1e4(logits, p):
    return _by_before(logits, p, lambda b: b < p - 1e-4)


def O_07_exp_minus_logsumexp(logits, p):
    """Probabilities as exp(l - logsumexp(l)) instead of softmax."""
    dt = torch.float64 if logits.dtype == torch.float64 else torch.float32
    l = logits.to(dt)
    probs = torch.exp(l - l.logsumexp(-1, keepdim=True))
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


def O_08_all_float64(logits, p):
    """Probabilities in float64 whatever the input dtype ('float32 or more')."""
    probs = torch.softmax(logits.double(), -1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    num_kept = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, num_kept - 1)
    return logits.masked_fill(probs < thr, NEG)


_OUT = {}


def W_22_output_buffer_reused_no_grad(logits, p):
    """Without gradients, the result is written into one buffer per shape and dtype."""
    res = C_01_threshold(logits, p)
    if torch.is_grad_enabled() and logits.requires_grad:
        return res
    key = (logits.shape, logits.dtype)
    if key not in _OUT:
        _OUT[key] = torch.empty_like(logits)
    _OUT[key].copy_(res)
    return _OUT[key]
