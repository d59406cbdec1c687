"""Round 13 red team (writer B, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_masked_softmax; copied from
/work/redteam/round13/B/sols/ch03_masked_softmax.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_16 and W_17 (lengths cast to int16 / int32: a case with valid_lens
[[2**32 + 2, 65536], [40000, 3]], above the 6 keys, and _wrapped_lens now names 16- and
32-bit casts too), W_20 (padded scores multiplied by the mask: a case whose padded keys score
-inf, with a hint on -inf * 0). Left for _core (and rejected there now): W_26 (requires_grad
turned on), W_28 (randperm: a draw from the global generator), W_29 (a hook left on the
caller's X). Accepted: A_22 (float32 positions, wrong only beyond 2**24 keys: beyond any
case). Also the lead's size ruling: a matrix case of 67 rows of 4,099 keys.
"""
# flake8: noqa
import math
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    pos = torch.arange(X.shape[-1], device=X.device)
    return pos < valid_lens[..., None]


def C_01_reference(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    return w * keep


def C_02_where(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Z = torch.where(keep, X, torch.tensor(torch.finfo(X.dtype).min, dtype=X.dtype))
    m = Z.amax(-1, keepdim=True).detach()
    e = torch.where(keep, torch.exp(Z - m), torch.zeros((), dtype=X.dtype))
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones((), dtype=X.dtype))


def W_02b_zero_fill_before_max(X, valid_lens):
    """(My own first C_02, found by the checker.) Masked entries filled with 0 before the row
    max, exp then masked: valid scores all near -2e4 underflow against the 0 fill -> zeros."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    Z = torch.where(keep, X, torch.zeros((), dtype=X.dtype))
    m = Z.amax(-1, keepdim=True).detach()
    e = torch.where(keep, torch.exp(Z - m), torch.zeros((), dtype=X.dtype))
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones((), dtype=X.dtype))


def O_03_upcast_float16(X, valid_lens):
    """float16 computed in float32 and cast back; 2-D lens reshaped d2l style."""
    dt = X.dtype
    Y = X.float() if dt in (torch.float16, torch.bfloat16) else X
    if valid_lens is None:
        return torch.softmax(Y, -1).to(dt)
    b, m, n = X.shape
    lens = valid_lens.reshape(b, -1).expand(b, m).reshape(-1)
    flat = Y.reshape(-1, n)
    keep = torch.arange(n)[None, :] < lens[:, None]
    w = torch.softmax(flat.masked_fill(~keep, -math.inf), -1)
    w = torch.where(keep, w, torch.zeros((), dtype=w.dtype))
    # rows with all -inf: softmax is NaN; where() selects 0 but grad of NaN * 0 ... use safe fill
    return w.reshape(b, m, n).to(dt)


def O_04_sdpa_identity(X, valid_lens):
    """Route through F.softmax of a log-domain: log_softmax then exp, masked by where."""
    if valid_lens is None:
        return torch.log_softmax(X, -1).exp()
    keep = _keep(X, valid_lens)
    ls = torch.log_softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    return torch.where(keep, ls.exp(), torch.zeros((), dtype=X.dtype))


def W_05_fp16_positions(X, valid_lens):
    """Positions and lengths compared in X's dtype: float16 rounds 2049 to 2048, so with
    num_keys > 2048 in float16 (valid_len 2049) key 2048 is wrongly masked."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    lens = valid_lens.to(X.dtype)
    if lens.dim() == 1:
        lens = lens[:, None]
    pos = torch.arange(X.shape[-1], dtype=X.dtype)
    keep = pos < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_06_shift_over_all_keys(X, valid_lens):
    """Max shift taken over all keys including masked ones, then exp*keep/sum: when a masked
    key's score exceeds the valid ones by > ~104 (float32), the valid exps underflow: 0/0 NaN
    or zeros (e.g. row [0, 0, 200] with valid_len 2)."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens).to(X.dtype)
    e = torch.exp(X - X.amax(-1, keepdim=True)) * keep
    s = e.sum(-1, keepdim=True)
    return e / s.clamp_min(torch.finfo(X.dtype).tiny)


def W_07_global_max_shift(X, valid_lens):
    """Shift by the max of the whole tensor instead of per row: a row whose scores are all
    ~200 below another row's (float32) underflows to all zeros."""
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    Z = X.masked_fill(~keep, -math.inf)
    e = torch.exp(Z - Z.amax().detach()).masked_fill(~keep, 0)
    s = e.sum(-1, keepdim=True)
    return e / torch.where(s > 0, s, torch.ones((), dtype=X.dtype))


def W_08_relative_fill(X, valid_lens):
    """Fill = X.min() - 16: masked keys keep weight ~e^-16 each (1e-7); with float64 accuracy
    expected, or many masked keys (1e5 keys -> 1e-2), the weights are visibly wrong."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    fill = (X.detach().amin() - 16)
    w = torch.softmax(torch.where(keep, X, fill), -1)
    return w * keep.any(-1, keepdim=True)


def W_09_clamps_valid_lens_inplace(X, valid_lens):
    """Clamps the caller's valid_lens in place (valid_lens.clamp_(max=num_keys)): a length
    above num_keys is overwritten in the caller's tensor."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    valid_lens.clamp_(max=X.shape[-1])
    return C_01_reference(X, valid_lens)


def W_10_unsqueeze_inplace(X, valid_lens):
    """valid_lens.unsqueeze_(-1) changes the caller's tensor's shape ((b,) -> (b, 1))."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    if valid_lens.dim() == 1:
        valid_lens.unsqueeze_(-1)
    pos = torch.arange(X.shape[-1])
    keep = pos < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, keep):
        w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
        ctx.save_for_backward(w)
        return w

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return w * g, None  # missing the  - w * sum(w * g)  term


def W_11_custom_backward_missing_term(X, valid_lens):
    """Hand-written backward w*g (the Jacobian's diagonal only): values right, gradient wrong
    for any row with >= 2 valid keys and a non-constant upstream gradient."""
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    return _WrongBackward.apply(X, keep)


def W_12_detached_denominator(X, valid_lens):
    """e / e.sum().detach(): values right, gradient wrong (missing the normaliser term)."""
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    Z = X.masked_fill(~keep, torch.finfo(X.dtype).min)
    e = torch.exp(Z - Z.amax(-1, keepdim=True).detach()) * keep
    s = e.sum(-1, keepdim=True).detach()
    return e / torch.where(s > 0, s, torch.ones((), dtype=X.dtype))


def W_13_single_key_shortcut(X, valid_lens):
    """With one key, returns ones (every weight is 1) ignoring valid_len = 0 rows."""
    if X.shape[-1] == 1:
        return X * 0 + 1
    return C_01_reference(X, valid_lens)


def W_14_additive_mask(X, valid_lens):
    """Additive mask X + (-1e9) * masked: a masked score >= ~1e9 above the valid ones (float32/
    float64, e.g. masked score 1e12) keeps its weight; in float16 -1e9 is -inf (NaN rows)."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X + (~keep).to(X.dtype) * -1e9, -1)
    return w * keep


def W_15_half_for_bfloat16(X, valid_lens):
    """Low-precision inputs computed through float16: bfloat16 scores above 65504 become inf
    (NaN), and finer bfloat16 ranges lose nothing but the overflow is wrong (bfloat16 1e5)."""
    dt = X.dtype
    Y = X.half() if dt in (torch.float16, torch.bfloat16) else X
    return C_01_reference(Y, valid_lens).to(dt)


def W_16_int16_lens(X, valid_lens):
    """Lengths cast to int16 to save memory: a length of 65536 (above num_keys, so 'all
    valid') wraps to 0 and masks the whole row; 40000 wraps to negative."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    return C_01_reference(X, valid_lens.to(torch.int16))


def W_17_int32_lens(X, valid_lens):
    """Lengths cast to int32: a length of 2**32 (above num_keys) wraps to 0, masking the row."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    return C_01_reference(X, valid_lens.to(torch.int32))


def W_18_float32_scalar_fill_float64(X, valid_lens):
    """Fill = finfo(float32).min for every dtype: float64 valid scores below -3.4e38 (e.g.
    -1e300) are beaten by the masked keys; float16 fill overflows."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(torch.where(keep, X, torch.tensor(-3.4e38, dtype=X.dtype)), -1)
    return w * keep


def W_19_lens_float_compare_rounding(X, valid_lens):
    """Lengths compared via float32 division: keep = pos / n < len / n; for n = 3, len 1:
    rounding makes pos/3 < len/3 exact... fault: uses (pos + 0.5) <= len - 0.5 in float16
    which for len >= 2048 rounds (num_keys > 2048, float16 lengths)."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    lens = valid_lens.to(torch.float16)
    if lens.dim() == 1:
        lens = lens[:, None]
    pos = torch.arange(X.shape[-1], dtype=torch.float32)
    keep = pos < lens[..., None].float()
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_20_nan_in_masked_scores(X, valid_lens):
    """Masks by multiplying: softmax(X * keep + (keep - 1) * big): a padded score of -inf or
    +inf (e.g. an upstream additive mask already put -inf there) gives inf*0 = NaN in the row."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens).to(X.dtype)
    big = torch.finfo(X.dtype).max
    w = torch.softmax(X * keep + (keep - 1) * big, -1)
    return w * keep


def W_21_row_zero_by_len_min(X, valid_lens):
    """Zeroes the fully masked rows only when valid_lens.min() == 0 over a 1-D tensor; for 2-D
    lengths the zero rows are checked with valid_lens[:, 0] only (first query)."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1)
    lens = valid_lens if valid_lens.dim() == 1 else valid_lens[:, 0]
    empty = (lens == 0)[:, None, None]
    return torch.where(empty, torch.zeros((), dtype=X.dtype), w)


def A_22_float32_positions(X, valid_lens):
    """Positions and lengths compared in float32 (whatever X's dtype): float32 rounds
    16777217 to 16777216, so with num_keys > 2**24 and valid_len 16777217 the last valid key
    is masked (and position 16777217 is kept for valid_len 16777218 ... rounding both ways).

    Accepted on purpose (fixer, round 13: "beyond any case", the lead's ruling on size-keyed
    faults): it is wrong only on rows of more than 2**24 = 16,777,216 keys. One such row is
    64 MiB in float32, and a case of it costs the learner's own function about 2 s and the
    check about 0.6 s more on the course machine (measured: X = zeros(1, 1, 2**24 + 2),
    valid_lens [2**24 + 1]), beyond the ~1 s a check may grow; its float32 softmax also
    errs by 0.7% there in a right solution (16.8M terms summed in float32), so the case
    would need loose tolerances. The 4,099-key cases (float16 positions) are the size
    cases kept."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    lens = valid_lens.float()
    if lens.dim() == 1:
        lens = lens[:, None]
    pos = torch.arange(X.shape[-1], dtype=torch.float32)
    keep = pos < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def W_23_wrong_grad_unmasked_path(X, valid_lens):
    """valid_lens None: a hand-written softmax with a detached denominator; values right,
    gradient wrong (the masked path is right)."""
    if valid_lens is None:
        e = torch.exp(X - X.amax(-1, keepdim=True).detach())
        return e / e.sum(-1, keepdim=True).detach()
    return C_01_reference(X, valid_lens)


def W_24_wrong_grad_1d_lens(X, valid_lens):
    """1-D valid_lens: detached denominator (gradient wrong); 2-D and None paths right."""
    if valid_lens is not None and valid_lens.dim() == 1:
        return W_12_detached_denominator(X, valid_lens)
    return C_01_reference(X, valid_lens)


def W_25_fp16_detached(X, valid_lens):
    """float16: computed in float32 from X.detach(): no gradient reaches a float16 X."""
    if X.dtype == torch.float16:
        w = C_01_reference(X.detach().float(), valid_lens).half()
        return w + 0 * X  # keeps requires_grad, but the gradient w.r.t. X is 0
    return C_01_reference(X, valid_lens)


def W_26_sets_requires_grad(X, valid_lens):
    """Turns on requires_grad on the caller's leaf X (X.requires_grad_()): the caller's tensor
    is changed (it now tracks gradients and later in-place edits of it fail)."""
    if X.is_leaf and not X.requires_grad:
        X.requires_grad_()
    return C_01_reference(X, valid_lens)


def W_27_global_rng(X, valid_lens):
    """Tie-breaking jitter of eps * |X| * randn: draws from the global RNG (the caller's random
    stream changes: dropout masks after the call differ) and the result is not deterministic."""
    eps = torch.finfo(X.dtype).eps
    Xj = X + (X.detach().abs() * eps * 0.25 * torch.randn(X.shape, dtype=X.dtype))
    return C_01_reference(Xj, valid_lens)


def W_28_randperm_keys(X, valid_lens):
    """Permutes the keys with torch.randperm and back (a 'shuffle test' left in): values equal
    up to summation order, but the global RNG advances (caller's dropout masks change)."""
    n = X.shape[-1]
    perm = torch.randperm(n, device=X.device)
    inv = torch.argsort(perm)
    keep = torch.ones_like(X, dtype=torch.bool) if valid_lens is None else _keep(X, valid_lens)
    Xp, kp = X[..., perm], keep[..., perm]
    w = torch.softmax(Xp.masked_fill(~kp, torch.finfo(X.dtype).min), -1) * kp
    return w[..., inv]


def W_29_nan_hook_on_X(X, valid_lens):
    """-inf mask + nan_to_num, and the NaN gradients hidden by a hook registered on the caller's
    X: the hook stays on X, so NaN gradients from other uses of X are silently zeroed too (and
    one more hook piles up per call)."""
    if valid_lens is None:
        return torch.softmax(X, -1)
    keep = _keep(X, valid_lens)
    if X.requires_grad:
        X.register_hook(lambda g: torch.where(torch.isnan(g), torch.zeros((), dtype=g.dtype), g))
    w = torch.softmax(X.masked_fill(~keep, -math.inf), -1)
    return torch.nan_to_num(w, nan=0.0)
