"""Round 2 red team (writer R2), ch03_masked: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch03_masked.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch

CHECK = "check_masked_softmax"


def _keep(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    return torch.arange(X.shape[-1], device=X.device) < valid_lens[..., None]


def W_d2l_minus_1e6(X, valid_lens):
    """d2l's recipe (copy, fill -1e6): zero-length rows come out uniform; float16 overflows."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    shape = X.shape
    if valid_lens.dim() == 1:
        valid_lens = torch.repeat_interleave(valid_lens, shape[1])
    else:
        valid_lens = valid_lens.reshape(-1)
    Xf = X.reshape(-1, shape[-1]).clone()
    mask = torch.arange(shape[-1], device=X.device)[None, :] < valid_lens[:, None]
    Xf[~mask] = -1e6
    return torch.softmax(Xf.reshape(shape), dim=-1)


def W_fill_neginf(X, valid_lens):
    """-inf fill: zero-length rows become NaN."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return torch.softmax(X.masked_fill(~_keep(X, valid_lens), float("-inf")), dim=-1)


def W_finfo_float32(X, valid_lens):
    """Fills with float32's min whatever the dtype: masked_fill overflows in float16."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(torch.float32).min), dim=-1)
    return w * keep


def W_fill_minus_1e4(X, valid_lens):
    """Finite fill -1e4 (float16-safe) and zeroing: the padding wins when real scores are
    below -1e4."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e4), dim=-1) * keep


def W_inplace(X, valid_lens):
    """Right values, writes the fill into X."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    X.masked_fill_(~keep, torch.finfo(X.dtype).min)
    return torch.softmax(X, dim=-1) * keep


def W_off_by_one(X, valid_lens):
    """<= instead of <: one extra key."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) <= vl[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_lens_as_per_query(X, valid_lens):
    """Treats a (batch,) tensor like per-query lengths: valid_lens[None, :, None] broadcasts
    over the queries axis; right only when batch == 1 (or batch == num_queries by luck)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        vl = valid_lens[None, :, None]
    else:
        vl = valid_lens[..., None]
    keep = torch.arange(X.shape[-1], device=X.device) < vl
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_float32_compute(X, valid_lens):
    """Computes in float32 and forgets to cast back: float16 in, float32 out."""
    X = X.float()
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, -1e30), dim=-1) * keep


def W_none_returns_X(X, valid_lens):
    """valid_lens None: returns X itself (forgets the softmax)."""
    if valid_lens is None:
        return X
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_mask_after_no_renorm(X, valid_lens):
    """Softmax over all keys, then zero the padding: rows sum to < 1."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return torch.softmax(X, dim=-1) * _keep(X, valid_lens)


def W_mask_after_renorm(X, valid_lens):
    """Softmax over all keys, zero the padding, renormalise: right unless the padding's
    scores dominate (the real weights underflow to 0)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    w = torch.softmax(X, dim=-1) * _keep(X, valid_lens)
    return w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(X.dtype).tiny)


def W_global_max_len(X, valid_lens):
    """Uses the largest length for every row."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = torch.arange(X.shape[-1], device=X.device) < valid_lens.max()
    keep = keep.expand_as(X)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_zero_rows_only_if_batch(X, valid_lens):
    """Zeroes empty rows only for 1-D lengths; per-query zero lengths stay uniform."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    if valid_lens.dim() == 1:
        w = w * keep
    return w


def W_detach_weights(X, valid_lens):
    """Builds the output with a no_grad block: no gradient."""
    with torch.no_grad():
        if valid_lens is None:
            return torch.softmax(X, dim=-1)
        keep = _keep(X, valid_lens)
        return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def Q_neginf_nan_to_num(X, valid_lens):
    """-inf fill and nan_to_num: values right; the backward of an all-masked row is zeroed by
    masked_fill, so the gradient may be fine too."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    return torch.nan_to_num(torch.softmax(X.masked_fill(~_keep(X, valid_lens), float("-inf")), dim=-1), nan=0.0)


def C_finfo(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    w = torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1)
    return w * keep


def O_loop_int32(X, valid_lens):
    """Loops over the batch, builds the mask with torch.where, int lengths of any dtype."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    out = []
    for b in range(X.shape[0]):
        vl = valid_lens[b].to(torch.int64)
        vl = vl.reshape(-1, 1) if vl.dim() == 1 else vl.reshape(1, 1)
        keep = torch.arange(X.shape[-1], device=X.device)[None, :] < vl  # (q or 1, k)
        s = torch.where(keep, X[b], torch.full_like(X[b], -float("inf")))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        e = torch.exp(s - m)
        tot = e.sum(-1, keepdim=True)
        out.append(e / torch.where(tot > 0, tot, torch.ones_like(tot)))
    return torch.stack(out)


def W_2d_lens_unsqueeze1(X, valid_lens):
    """2-D lengths unsqueezed on the wrong axis: (batch, 1, q) against the keys axis."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None, None] if valid_lens.dim() == 1 else valid_lens[:, None, :]
    keep = torch.arange(X.shape[-1], device=X.device) < vl
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def W_repeat_not_interleave(X, valid_lens):
    """d2l's flattening with repeat instead of repeat_interleave: lengths land on the wrong rows."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    b, q, k = X.shape
    vl = valid_lens.repeat(q) if valid_lens.dim() == 1 else valid_lens.reshape(-1)
    Xf = X.reshape(-1, k)
    keep = torch.arange(k, device=X.device)[None, :] < vl[:, None]
    w = torch.softmax(Xf.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep
    return w.reshape(b, q, k)


# Listed as right until round 8: under issue 12's float64 rule (a float64 input asks for
# float64 accuracy) computing a float64 X in float32 is wrong.
def W_additive_mask_float32(X, valid_lens):
    """Adds a finfo.min additive mask in float32, then casts back: a float64 X loses
    float64 accuracy."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    vl = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1], device=X.device) < vl[..., None]
    Xf = X.float().masked_fill(~keep, float("-inf"))
    m = Xf.amax(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).min)
    e = torch.exp(Xf - m)
    tot = e.sum(-1, keepdim=True)
    return (e / torch.where(tot > 0, tot, torch.ones_like(tot))).to(X.dtype)
