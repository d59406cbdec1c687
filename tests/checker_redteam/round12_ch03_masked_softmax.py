"""Round 12 red team (writer A, issue 12), ch03_masked_softmax: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/ch03_masked_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_10 (a -1e4 fill for float16: valid float16 scores near -3e4, X shifted by
-3e4 in the matrix) and W_16 (float16 through bfloat16: already caught by the matrix's far
rows; also a float16 case of close scores near +-100).
"""
# flake8: noqa
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    n = X.shape[-1]
    pos = torch.arange(n, device=X.device)
    if valid_lens.dim() == 1:
        return pos[None, None, :] < valid_lens[:, None, None]
    return pos[None, None, :] < valid_lens[:, :, None]


def _soft(x):
    up = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return torch.softmax(up, dim=-1).to(x.dtype)


# ---------------- correct / odd ----------------
def C_01_where_then_zero_rows(X, valid_lens):
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    any_valid = keep.any(-1, keepdim=True)
    Z = torch.where(keep, X, torch.tensor(float("-inf"), dtype=X.dtype))
    Z = torch.where(any_valid, Z, torch.zeros_like(X))  # fully masked rows: finite
    return _soft(Z) * keep


def O_02_manual_exp_float64(X, valid_lens):
    """Manual max-shifted exp with the mask multiplied in; denominators guarded."""
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    up = X.float() if X.dtype in (torch.float16, torch.bfloat16) else X
    m = up.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp((up - m).masked_fill(~keep, float("-inf")))
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def O_03_valid_lens_clamped_expand(X, valid_lens):
    """Lengths clamped to num_keys, 1-D lengths expanded to (batch, num_queries)."""
    if valid_lens is None:
        return _soft(X)
    b, m, n = X.shape
    vl = valid_lens.clamp(max=n)
    if vl.dim() == 1:
        vl = vl[:, None].expand(b, m)
    keep = torch.arange(n, device=X.device) < vl[..., None]
    fill = torch.finfo(X.dtype).min
    return _soft(X.masked_fill(~keep, fill)) * keep


# ---------------- wrong ----------------
def W_04_arange_in_X_dtype(X, valid_lens):
    """Positions built in X's dtype (arange(n, dtype=X.dtype)): float16 cannot count past
    2048, so with num_keys = 3000 and valid_len = 2049 key 2049 (rounded to 2048) stays."""
    if valid_lens is None:
        return _soft(X)
    pos = torch.arange(X.shape[-1], dtype=X.dtype, device=X.device)
    vl = valid_lens.to(X.dtype)
    vl = vl[:, None, None] if vl.dim() == 1 else vl[:, :, None]
    keep = pos < vl
    return C_01_where_then_zero_rows.__wrapped__(X, keep) if False else _apply(X, keep)


def _apply(X, keep):
    any_valid = keep.any(-1, keepdim=True)
    Z = torch.where(keep, X, torch.tensor(float("-inf"), dtype=X.dtype))
    Z = torch.where(any_valid, Z, torch.zeros_like(X))
    return _soft(Z) * keep


def O_05_masked_fill_after_softmax(X, valid_lens):
    """-inf fill, softmax, then masked_fill(~keep, 0): the NaN of empty rows is replaced by
    masked_fill, whose backward gives exactly 0 to filled positions, and the -inf fill's
    backward zeroes X's gradient there too: finite, right gradient (checked by hand)."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    w = _soft(X.masked_fill(~keep, float("-inf")))
    return w.masked_fill(~keep, 0.0)


def W_06_lens_1d_broadcast_wrong_axis(X, valid_lens):
    """1-D lengths broadcast as (batch, 1) against (num_keys,): a (batch, num_keys) mask
    that lines up with X's (num_queries, num_keys) axes: right when batch == 1, wrong
    without error when batch == num_queries (query i of every example uses length i)."""
    if valid_lens is None:
        return _soft(X)
    pos = torch.arange(X.shape[-1], device=X.device)
    if valid_lens.dim() == 1:
        keep = (pos < valid_lens[:, None]).expand_as(X)
    else:
        keep = pos < valid_lens[:, :, None]
    return _apply(X, keep)


def W_07_renormalise_softmax(X, valid_lens):
    """Softmax over all keys, multiply by the mask, divide by the kept mass (guarded):
    a dominating padded score (1e4) underflows the kept weights to 0 -> zeros."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    w = _soft(X) * keep
    s = w.sum(-1, keepdim=True)
    return w / torch.where(s > 0, s, torch.ones_like(s))


def W_08_lens_float16(X, valid_lens):
    """valid_lens cast to X's dtype before comparing with integer positions: float16
    rounds 2049 to 2048 (one key too few)."""
    if valid_lens is None:
        return _soft(X)
    vl = valid_lens.to(X.dtype)
    pos = torch.arange(X.shape[-1], device=X.device)
    vl = vl[:, None, None] if vl.dim() == 1 else vl[:, :, None]
    return _apply(X, pos < vl)


def W_09_2d_lens_flatten_transposed(X, valid_lens):
    """2-D lengths read in the wrong order: valid_lens.T.reshape(-1) vs X.reshape(-1, n)
    (right when batch or num_queries is 1)."""
    if valid_lens is None:
        return _soft(X)
    b, m, n = X.shape
    if valid_lens.dim() == 1:
        flat = valid_lens.repeat_interleave(m)
    else:
        flat = valid_lens.T.reshape(-1) if valid_lens.shape[0] != valid_lens.shape[1] \
            else valid_lens.reshape(-1)
        flat = valid_lens.reshape(-1) if b == 1 or m == 1 else valid_lens.T.reshape(-1)
    Xf = X.reshape(-1, n)
    keep = (torch.arange(n, device=X.device) < flat[:, None]).reshape(b, m, n)
    return _apply(X, keep)


def W_10_fill_minus_1e4_half(X, valid_lens):
    """Fill -1e4 in float16, finfo.min otherwise (d2l's -1e6 does not fit float16): with
    valid scores near -3e4 in float16 the padding dominates."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    fill = -1e4 if X.dtype == torch.float16 else torch.finfo(X.dtype).min
    return _soft(X.masked_fill(~keep, fill)) * keep.any(-1, keepdim=True)


def W_11_repeat_not_interleave(X, valid_lens):
    """d2l-style flatten but with valid_lens.repeat(m) instead of repeat_interleave."""
    if valid_lens is None:
        return _soft(X)
    b, m, n = X.shape
    flat = valid_lens.repeat(m) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    keep = (torch.arange(n, device=X.device) < flat[:, None]).reshape(b, m, n)
    return _apply(X, keep)


def W_12_keep_grad_masked_positions(X, valid_lens):
    """Additive mask: X + (-1e9) * (~keep) in float32/64: float32 X of 1e9-scale... and
    for rows with no valid key, zeroed by * keep.any: gradient flows into masked positions
    only by ~0. Wrong where X itself is ~1e9: padding not hidden."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    big = 6e4 if X.dtype == torch.float16 else 1e9
    Z = X - big * (~keep).to(X.dtype)
    return _soft(Z) * keep.any(-1, keepdim=True)


def W_13_mutates_X_via_data(X, valid_lens):
    """Writes the fill into X.data when X does not require grad (d2l's in-place habit)."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    Z = X if not X.requires_grad else X.clone()
    Z.masked_fill_(~keep, float("-inf"))
    Z2 = torch.where(keep.any(-1, keepdim=True), Z, torch.zeros_like(Z))
    return _soft(Z2) * keep


def W_14_lens_above_n_raise_or_wrap(X, valid_lens):
    """valid_len taken modulo num_keys + 1 "to stay in range": a length above num_keys
    wraps to a short one."""
    if valid_lens is None:
        return _soft(X)
    vl = valid_lens % (X.shape[-1] + 1)
    return _apply(X, _keep(X, vl))


def W_15_zero_rows_uniform(X, valid_lens):
    """Fully masked rows come out uniform (finfo.min fill, no zeroing): d2l's behaviour."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    return _soft(X.masked_fill(~keep, torch.finfo(X.dtype).min))


def W_16_bfloat16_cast_for_half(X, valid_lens):
    """Computes a float16 input through bfloat16 ("wider range, no overflow"), then back:
    8-bit mantissa, weights off by a few percent for scores around 100."""
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    Y = X.to(torch.bfloat16).float() if X.dtype == torch.float16 else X
    any_valid = keep.any(-1, keepdim=True)
    Z = torch.where(keep, Y, torch.tensor(float("-inf"), dtype=Y.dtype))
    Z = torch.where(any_valid, Z, torch.zeros_like(Y))
    up = Z.float() if Z.dtype == torch.bfloat16 else Z
    return (torch.softmax(up, -1) * keep).to(X.dtype)


def W_17_none_means_zero_rows(X, valid_lens):
    """valid_lens None handled as 'lengths 0'... no: as lengths num_keys - 1 (last key is
    the end token), a plausible off-by-one."""
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1] - 1, device=X.device)
    return _apply(X, _keep(X, valid_lens))


def W_18_2d_lens_transposed_when_square(X, valid_lens):
    """2-D lengths used as valid_lens.T when batch == num_queries (the learner 'fixed' an
    axis order on a square example): X (2, 2, 4), valid_lens [[1, 3], [2, 4]] gives query 0
    of example 1 the length 3 instead of 2."""
    if valid_lens is not None and valid_lens.dim() == 2 and \
            valid_lens.shape[0] == valid_lens.shape[1]:
        valid_lens = valid_lens.T
    return C_01_where_then_zero_rows(X, valid_lens)


def W_19_half_exp_no_shift(X, valid_lens):
    """float16: manual exp (in float32) of the masked scores without the max shift, zero
    rows guarded: overflow for float16 scores above 88."""
    if valid_lens is None:
        valid_lens = torch.full(X.shape[:1], X.shape[-1], device=X.device)
    keep = _keep(X, valid_lens)
    if X.dtype != torch.float16:
        return C_01_where_then_zero_rows(X, valid_lens)
    e = torch.exp(X.float()) * keep
    s = e.sum(-1, keepdim=True)
    return (e / torch.where(s > 0, s, torch.ones_like(s))).to(X.dtype)


def W_20_view_flatten(X, valid_lens):
    """Flattens X with view(-1, n) (d2l style): raises on a non-contiguous X."""
    b, m, n = X.shape
    Xf = X.view(-1, n)
    return C_01_where_then_zero_rows(Xf.view(b, m, n), valid_lens)


def W_21_fill_row_min_minus_50(X, valid_lens):
    """Padding filled with (smallest valid score - 50) 'finite and below every valid key':
    padded keys keep weight e^-(range + 50) >= ~2e-22 instead of exactly 0."""
    if valid_lens is None:
        return _soft(X)
    keep = _keep(X, valid_lens)
    lo = X.masked_fill(~keep, float("inf")).amin(-1, keepdim=True)
    lo = torch.where(torch.isfinite(lo), lo, torch.zeros_like(lo)).detach()
    Z = torch.where(keep, X, lo - 50)
    return _soft(Z) * keep.any(-1, keepdim=True)
