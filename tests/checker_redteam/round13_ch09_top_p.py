"""Round 13 red team (writer E, issue 12), ch09_top_p: check_top_p_filter; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch09_top_p.py (writer's note: right and wrong top-p filters.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_17 (a running sum rounded to bfloat16, for
bfloat16 only): check_top_p_filter now has bfloat16 rows of 4,096 (4 * randn) at p = 0.95,
where ties do not hide it; rejected there with the bfloat16 hint. No other wrong entry
passed; A_12 (log_softmax values with -inf) left accepted by the writer.
"""
# flake8: noqa
import torch
CHECK = "check_top_p_filter"

_NEG = float("-inf")


def _wide(logits):
    return torch.promote_types(logits.dtype, torch.float32)


def C_01_reference(logits, p):
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def C_02_float64_always(logits, p):
    probs = torch.softmax(logits.double(), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = torch.cat([torch.zeros_like(ranked[..., :1]), ranked.cumsum(-1)[..., :-1]], -1)
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return torch.where(probs >= thr, logits, torch.full_like(logits, _NEG))


def O_03_log_of_mask(logits, p):
    """Adds log(keep) (0 or -inf) to the logits: same values, gradient 1 on kept."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits + torch.log((probs >= thr).to(logits.dtype))


def _keep_from_before(logits, p, before_fn, probs_dtype=None):
    probs = torch.softmax(logits.to(probs_dtype or _wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = before_fn(ranked)
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_04_p_rounded_to_float32(logits, p):
    """p turned into a float32 tensor: float64 logits whose mass above a token lies in
    [float32(p), p) (p=0.9: float32(0.9)=0.8999999762) drop that token."""
    pt = torch.tensor(p, dtype=torch.float32)
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < pt).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_05_safety_margin(logits, p):
    """before < p - 1e-6 'for rounding': a token whose mass above is in [p-1e-6, p) is dropped
    (float64 probs [0.4999995, 0.25, 0.2500005], p=0.5)."""
    return _keep_from_before(logits, p, lambda r: r.cumsum(-1) - r + 1e-6)


def W_06_hf_ascending(logits, p):
    """The HF recipe: ascending sort, remove where cumsum <= 1 - p; ties split by sort order
    and the 1-p rounding (ties at the boundary, e.g. [0.25]*4 and p=0.5 keeps 2, not 4)."""
    sl, idx = torch.sort(logits, descending=False, dim=-1)
    cp = sl.to(_wide(logits)).softmax(-1).cumsum(-1)
    remove = cp <= (1 - p)
    remove[..., -1:] = False
    remove = remove.scatter(-1, idx, remove)
    return logits.masked_fill(remove, _NEG)


def W_07_isclose_ties(logits, p):
    """Keeps 'near-ties' of the threshold with rtol 1e-4: a token with 0.99995x the
    probability of the last kept one is kept although more mass than p is reached."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr * (1 - 1e-4), _NEG)


def W_08_near_one_shortcut(logits, p):
    """Returns everything when p >= 0.99 'since almost all mass is kept': at p=0.99 a row
    with a long tail of mass > 1% loses nothing."""
    if p >= 0.99:
        return logits.clone()
    return C_01_reference(logits, p)


def W_09_top1_shortcut_no_ties(logits, p):
    """If the top token alone reaches p keep just argmax: two tied top tokens with 0.45
    each and p=0.3 keep one instead of two."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    top = probs.max(-1, keepdim=True)
    out = C_01_reference(logits, p)
    only = torch.full_like(logits, _NEG).scatter(-1, top.indices, logits.gather(-1, top.indices))
    return torch.where(top.values >= p, only, out)


def W_10_bf16_via_fp16(logits, p):
    """bfloat16 logits routed through float16 for the probabilities: logits above 65504
    (bfloat16 holds 1e5) become inf, softmax NaN, everything removed."""
    x = logits.half() if logits.dtype == torch.bfloat16 else logits
    probs = torch.softmax(x.float() if x.dtype == torch.float16 else x.to(_wide(x)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_11_nan_to_num_first(logits, p):
    """Cleans the logits with nan_to_num first: -inf from a top-k filter comes back as
    finfo.min (at p=1 every token is kept, so the old -inf entries are finite)."""
    clean = torch.nan_to_num(logits)
    probs = torch.softmax(clean.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return clean.masked_fill(probs < thr, _NEG)


def A_12_log_softmax_values(logits, p):
    """Returns log-probabilities (log_softmax) with -inf for removed tokens: the softmax is
    the same but the kept entries are not the logits (logits [1, 2] -> [-1.31, -0.31]).
    A_: the text says only 'with -inf for every removed token, so that softmax of it is the
    distribution'; it does not say the kept entries are the logits, and any per-row shift is
    invisible to softmax (also to temperature and top-k applied afterwards)."""
    lp = torch.log_softmax(logits.to(_wide(logits)), -1).to(logits.dtype)
    keep = C_01_reference(logits, p) > _NEG
    return lp.masked_fill(~keep, _NEG)


_BUF = {}


def W_13_reused_output_buffer(logits, p):
    """Writes into one preallocated buffer per (shape, dtype): a second call of the same
    shape overwrites the tensor returned by the first."""
    key = (tuple(logits.shape), logits.dtype)
    ref = C_01_reference(logits, p)
    if ref.requires_grad:
        return ref
    buf = _BUF.get(key)
    if buf is None:
        buf = _BUF[key] = torch.empty_like(logits)
    buf.copy_(ref)
    return buf


def W_14_exp_float64_no_shift(logits, p):
    """Probabilities as exp(x)/sum exp(x) in float64 (no max shift, 'float64 cannot
    overflow'): logits above 709.8 give inf/inf = NaN."""
    e = logits.double().exp()
    probs = e / e.sum(-1, keepdim=True)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_15_round_probs(logits, p):
    """Rounds probabilities to 6 decimals so float 'ties' merge: tokens with 1.0e-7 and
    4e-7 probabilities in a long tail are tied to 0 and each other (p=1 - tiny)."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    probs = torch.round(probs * 1e6) / 1e6
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_16_logit_threshold_float16(logits, p):
    """Compares logits with the threshold logit cast to the input dtype after a float32
    sort of probabilities... but takes the threshold from logits.sort in float16 and keeps
    x >= thr - 1e-3 (absorbs near-ties within 1e-3 in logit)."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked, idx = probs.sort(dim=-1, descending=True)
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr_logit = logits.gather(-1, idx.gather(-1, n - 1))
    return logits.masked_fill(logits < thr_logit - 1e-3, _NEG)


def W_17_cumsum_in_input_dtype_bf16(logits, p):
    """Running sum in the input dtype for bfloat16 only (float16 upcast 'because the text
    says so'): thousands of bfloat16 probabilities summed in bfloat16 stall."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    if logits.dtype == torch.bfloat16:
        before = ranked.to(torch.bfloat16).cumsum(-1).float() - ranked
    else:
        before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_18_batch_threshold(logits, p):
    """Counts the kept tokens with the first row only and applies that count to every row
    (fine for batch 1, wrong when rows differ)."""
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before[:1] < p).sum(-1, keepdim=True).expand(probs.shape[0], 1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_19_temperature_leak(logits, p):
    """Sharpens the row before measuring mass (divides by 0.999 'for stability'): slightly
    different mass at the boundary, e.g. probs [0.5, 0.3, 0.2], p=0.8 keeps 3 instead of 2?"""
    probs = torch.softmax(logits.to(_wide(logits)) / 0.999, dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_20_mass_including_self_le(logits, p):
    """Keeps while inclusive cumsum <= p, plus the crossing token via a shift, but uses
    <= for the shifted test: keeps one extra token when the mass above reaches p exactly."""
    return _keep_le(logits, p)


def _keep_le(logits, p):
    probs = torch.softmax(logits.to(_wide(logits)), dim=-1)
    ranked = probs.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    n = (before <= p).sum(-1, keepdim=True).clamp(max=probs.shape[-1])
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(probs < thr, _NEG)


def W_21_threshold_from_sorted_softmax(logits, p):
    """Threshold from softmax of the *sorted* logits, compared with softmax of the unsorted
    logits: the two softmaxes sum in a different order, so the crossing token's probability
    can come out one ulp below the threshold and be dropped (float32/float16 rows of
    thousands)."""
    w = _wide(logits)
    sl = logits.to(w).sort(dim=-1, descending=True).values
    ranked = torch.softmax(sl, -1)
    before = ranked.cumsum(-1) - ranked
    n = (before < p).sum(-1, keepdim=True)
    thr = ranked.gather(-1, n - 1)
    probs = torch.softmax(logits.to(w), -1)
    return logits.masked_fill(probs < thr, _NEG)


def W_22_detached_at_p1(logits, p):
    """At p = 1 returns logits.detach().clone() ('nothing to filter'): no gradient."""
    if p >= 1:
        return logits.detach().clone()
    return C_01_reference(logits, p)


def W_23_exp_ratio_threshold(logits, p):
    """Probabilities as exp(x - max) without normalising, the mass compared with p * sum:
    fine in exact arithmetic, but in float16 input computes exp in float16 (large sums of
    thousands overflow 65504 -> inf, every token kept)."""
    x = logits.float() if logits.dtype == torch.bfloat16 else logits
    e = torch.exp(x - x.amax(-1, keepdim=True))
    ranked = e.sort(dim=-1, descending=True).values
    before = ranked.cumsum(-1) - ranked
    total = e.sum(-1, keepdim=True)
    n = (before < p * total).sum(-1, keepdim=True).clamp(min=1)
    thr = ranked.gather(-1, n - 1)
    return logits.masked_fill(e < thr, _NEG)
