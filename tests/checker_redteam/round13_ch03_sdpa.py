"""Round 13 red team (writer B, issue 12), ch03_sdpa: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_scaled_dot_product_attention; copied from
/work/redteam/round13/B/sols/ch03_sdpa.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_16 (lengths cast to int16: a case with valid_lens [[2**32 + 2, 65536],
[40000, 3]], and the 8/16/32-bit wrap named), W_14 (bfloat16 through float16: the matrix with
bfloat16 values times 1e5). Left for _core (and rejected there now): W_23 (a draw from the
global generator). Accepted: A_06 (float16 Q K^T overflowing before the scale: the
exercise's own hint and solution). Also the lead's size ruling: a matrix case of 67 queries
and 4,099 keys.
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_scaled_dot_product_attention"


def _keep(X, valid_lens):
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None]
    pos = torch.arange(X.shape[-1], device=X.device)
    return pos < valid_lens[..., None]


def masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = _keep(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def C_01_reference(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def C_02_scale_queries(queries, keys, values, valid_lens=None):
    d = queries.shape[-1]
    scores = torch.bmm(queries / math.sqrt(d), keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def O_03_torch_sdpa(queries, keys, values, valid_lens=None):
    """F.scaled_dot_product_attention with a bool mask (torch 2.5+ gives 0 for empty rows)."""
    mask = None if valid_lens is None else _keep(
        torch.empty(queries.shape[0], queries.shape[1], keys.shape[1]), valid_lens)
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)


def O_04_baddbmm(queries, keys, values, valid_lens=None):
    b, m, d = queries.shape
    z = queries.new_zeros(b, m, keys.shape[1])
    scores = torch.baddbmm(z, queries, keys.transpose(1, 2), beta=0, alpha=1 / math.sqrt(d))
    return masked_softmax(scores, valid_lens) @ values


def W_05_float32_scale_tensor(queries, keys, values, valid_lens=None):
    """Scale 1/sqrt(d) computed as a float32 tensor: for float64 inputs with d not a power of 4
    (d = 3, 8, 10...) the scale is off by ~3e-8 relative: no float64 accuracy on large scores."""
    d = queries.shape[-1]
    scale = torch.tensor(float(d), dtype=torch.float32).rsqrt().item()
    scale = float(torch.tensor(scale, dtype=torch.float32))
    scores = torch.bmm(queries, keys.transpose(1, 2)) * scale
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def A_06_fp16_scale_after_matmul(queries, keys, values, valid_lens=None):
    """Scales after the matmul, in float16 natively: Q K^T above 65504 (d = 64, entries ~ 40)
    overflows to inf before / sqrt(d), though the scaled scores (~1.3e4) fit: NaN output.

    Accepted on purpose (fixer, round 13): this is the exercise's own formula, in the
    exercise's own hint ("scores = torch.bmm(queries, keys.transpose(1, 2)) / sqrt(d)") and
    solution notebook, computed in the input's dtype as the text asks. float16 inputs whose
    unscaled products pass 65504 are beyond what the exercise's float16 requirement covers;
    rejecting this would reject the book's own solution. (If the lead wants it wrong, the
    hint and the solution should scale the queries first, as book.attention does.)"""
    d = queries.shape[-1]
    scores = torch.bmm(queries, keys.transpose(1, 2))
    return torch.bmm(masked_softmax(scores / math.sqrt(d), valid_lens), values)


def W_07_single_key_shortcut(queries, keys, values, valid_lens=None):
    """One key: every weight is 1, so returns values repeated, ignoring valid_len = 0 (zeros)."""
    b, m, _ = queries.shape
    if keys.shape[1] == 1:
        return values.expand(b, m, values.shape[-1]).clone() + 0 * queries.sum()
    return C_01_reference(queries, keys, values, valid_lens)


def W_08_single_key_view_when_m1(queries, keys, values, valid_lens=None):
    """One key, one query: values.expand(b, 1, d_v).contiguous() returns a view of `values`
    (contiguous() is a no-op there); also ignores valid_len = 0."""
    b, m, _ = queries.shape
    if keys.shape[1] == 1 and valid_lens is None:
        return values.expand(b, m, values.shape[-1]).contiguous()
    return C_01_reference(queries, keys, values, valid_lens)


def W_09_scale_by_num_queries(queries, keys, values, valid_lens=None):
    """Scales by sqrt(queries.shape[1]) (m) instead of d: wrong whenever m != d."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(queries.shape[1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_10_scale_by_value_dim(queries, keys, values, valid_lens=None):
    """Scales by sqrt(d_v): wrong whenever d_v != d."""
    scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(values.shape[-1])
    return torch.bmm(masked_softmax(scores, valid_lens), values)


def W_11_keys_detached(queries, keys, values, valid_lens=None):
    """Keys detached (a 'frozen memory' habit): gradient w.r.t. keys is missing/zero."""
    return C_01_reference(queries, keys.detach(), values, valid_lens)


def W_12_values_grad_scaled(queries, keys, values, valid_lens=None):
    """values passed through a straight-through trick v + (2v - v).detach() - v... gradient
    w.r.t. values is 2x: out = W (2v) - W v.detach()."""
    v2 = 2 * values - values.detach()
    return C_01_reference(queries, keys, v2, valid_lens)


_BUF = {}


def W_13_reused_output_buffer(queries, keys, values, valid_lens=None):
    """Without autograd, writes into a buffer cached per (shape, dtype) and returns it: a
    second call with the same shapes overwrites the first call's result."""
    if torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad
                                    or values.requires_grad):
        return C_01_reference(queries, keys, values, valid_lens)
    d = queries.shape[-1]
    w = masked_softmax(torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d), valid_lens)
    key = (queries.shape[0], queries.shape[1], values.shape[-1], values.dtype)
    buf = _BUF.get(key)
    if buf is None:
        buf = _BUF[key] = torch.empty(key[:3], dtype=key[3])
    torch.bmm(w, values, out=buf)
    return buf


def W_14_bf16_via_half(queries, keys, values, valid_lens=None):
    """bfloat16 inputs computed in float16: values or scores above 65504 overflow to inf."""
    dt = queries.dtype
    if dt == torch.bfloat16:
        return C_01_reference(queries.half(), keys.half(), values.half(), valid_lens).to(dt)
    return C_01_reference(queries, keys, values, valid_lens)


def W_15_lens_inplace_clamp(queries, keys, values, valid_lens=None):
    """Clamps the caller's valid_lens in place to n: a length above num_keys is overwritten."""
    if valid_lens is not None:
        valid_lens.clamp_(max=keys.shape[1])
    return C_01_reference(queries, keys, values, valid_lens)


def W_16_lens_int16(queries, keys, values, valid_lens=None):
    """Lengths cast to int16: a length of 65536 (above num_keys) wraps to 0, zeroing the row."""
    return C_01_reference(queries, keys, values,
                          None if valid_lens is None else valid_lens.to(torch.int16))


def W_17_sdpa_float_mask_min(queries, keys, values, valid_lens=None):
    """F.sdpa with an additive float mask of -1e9: in float16 the mask is -inf -> NaN rows for
    valid_len 0; in float32 valid scores ~ -1e10 lose to masked keys."""
    mask = None
    if valid_lens is not None:
        keep = _keep(torch.empty(queries.shape[0], queries.shape[1], keys.shape[1]), valid_lens)
        mask = torch.zeros(keep.shape, dtype=queries.dtype).masked_fill(~keep, -1e9)
    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask)


def W_18_sdpa_default_float32_mask_on_fp64(queries, keys, values, valid_lens=None):
    """Computes in float32 via F.sdpa then casts back: float64 loses accuracy."""
    dt = queries.dtype
    out = O_03_torch_sdpa(queries.float(), keys.float(), values.float(), valid_lens)
    return out.to(dt)


def W_19_uses_first_query_len(queries, keys, values, valid_lens=None):
    """2-D (per query) lengths reduced to valid_lens.max(1) (per sequence): queries with a
    shorter length attend to too many keys."""
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens.amax(1)
    return C_01_reference(queries, keys, values, valid_lens)


def W_20_one_d_lens_as_per_query(queries, keys, values, valid_lens=None):
    """1-D lengths whose size equals num_queries read as per-query (broadcast over batch):
    wrong when batch == num_queries but the lengths are per sequence."""
    if valid_lens is not None and valid_lens.dim() == 1 and valid_lens.shape[0] == queries.shape[1]:
        valid_lens = valid_lens[None, :].expand(queries.shape[0], -1)
    return C_01_reference(queries, keys, values, valid_lens)


def W_21_unmasked_path_keys_detached(queries, keys, values, valid_lens=None):
    """valid_lens None: keys detached; masked path right. Gradient w.r.t. keys is 0."""
    if valid_lens is None:
        return C_01_reference(queries, keys.detach(), values, None)
    return C_01_reference(queries, keys, values, valid_lens)


def W_22_per_query_path_wrong_grad(queries, keys, values, valid_lens=None):
    """2-D lengths path: values enter as 2v - v.detach() (gradient w.r.t. values doubled)."""
    if valid_lens is not None and valid_lens.dim() == 2:
        return C_01_reference(queries, keys, 2 * values - values.detach(), valid_lens)
    return C_01_reference(queries, keys, values, valid_lens)


def W_23_global_rng(queries, keys, values, valid_lens=None):
    """Consumes the global RNG (eps-level jitter on the scores): the caller's random stream
    changes and the output is not deterministic."""
    d = queries.shape[-1]
    s = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
    s = s + s.detach().abs() * torch.finfo(s.dtype).eps * 0.25 * torch.randn(s.shape, dtype=s.dtype)
    return torch.bmm(masked_softmax(s, valid_lens), values)
