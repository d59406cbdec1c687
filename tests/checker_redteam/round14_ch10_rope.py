"""Round 14 red team (writer E, issue 12), ch10_apply_rope: check_apply_rope; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round14/E/sols/ch10_apply_rope.py (writer's note: Round 14, writer E, check_apply_rope.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_21 (torch.enable_grad() inside): check_apply_rope now
calls it under torch.no_grad() with x requiring grad and rejects a result that requires
grad. W_14/W_15 are _core's. W_22 -> A_22 (standing ruling: float64 in float32).
"""
# flake8: noqa
import math
import torch
CHECK = "check_apply_rope"


def _ang(positions, d, dtype=torch.float64):
    m = torch.arange(d // 2, dtype=torch.float64, device=positions.device)
    theta = 10000.0 ** (-2 * m / d)
    return positions.to(torch.float64)[:, None] * theta


def C_01_reference(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE pairs features, d must be even, got odd d={d}")
    a = _ang(positions, d)
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = a.cos().to(w), a.sin().to(w)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    return y.to(x.dtype)


def C_02_float32_angles(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd feature size: feature d-1 has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)
    a = positions.float()[:, None] * theta
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = a.cos().to(w), a.sin().to(w)
    y = torch.empty(x.shape, dtype=w, device=x.device)
    xe, xo = x[..., 0::2].to(w), x[..., 1::2].to(w)
    y = torch.stack([xe * cos - xo * sin, xe * sin + xo * cos], -1).reshape(x.shape)
    return y.to(x.dtype)


def O_03_table_under_inference_mode_cloned(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: no partner for the last feature")
    with torch.inference_mode():
        a = _ang(positions, d)
        cos, sin = a.cos(), a.sin()
    cos, sin = cos.clone(), sin.clone()
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = cos.to(w), sin.to(w)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def O_04_rotate_half_trick(x, positions):
    """x*cos_full + rot(x)*sin_full with interleaved repeat (the HF-style form, interleaved)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: a feature without a partner")
    a = _ang(positions, d).repeat_interleave(2, -1)
    w = torch.promote_types(x.dtype, torch.float32)
    xw = x.to(w)
    rot = torch.stack([-xw[..., 1::2], xw[..., 0::2]], -1).flatten(-2)
    return (xw * a.cos().to(w) + rot * a.sin().to(w)).to(x.dtype)


def O_05_default_dtype_restored_and_grad_leaf_table(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: a feature without a partner")
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        m = torch.arange(d // 2) * 1.0           # float64
    finally:
        torch.set_default_dtype(old)
    theta = torch.exp(-2 * m / d * math.log(10000.0)).requires_grad_()   # a leaf, made here
    a = positions.to(torch.float64)[:, None] * theta
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = a.cos().detach().to(w), a.sin().detach().to(w)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


# ------------------------------------------------------------------------------ wrong

_TABLE = {}


def W_10_cached_table_inference_mode(x, positions):
    """cos/sin cached per (d, positions tuple) built under inference_mode; used in the
    product: backward raises 'Inference tensors cannot be saved for backward'."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: a feature without a partner")
    key = (d, tuple(positions.tolist()))
    if key not in _TABLE:
        with torch.inference_mode():
            a = _ang(positions, d)
            _TABLE[key] = (a.cos().float(), a.sin().float())
    cos, sin = _TABLE[key]
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = cos.to(w), sin.to(w)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def A_11_view_noncontiguous(x, positions):
    """x.view(..., d/2, 2) fails on a transposed x (RuntimeError, not a ValueError)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    a = _ang(positions, d)
    w = torch.promote_types(x.dtype, torch.float32)
    p = x.view(*x.shape[:-1], d // 2, 2).to(w)
    x1, x2 = p[..., 0], p[..., 1]
    cos, sin = a.cos().to(w), a.sin().to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def W_12_valueerror_without_saying(x, positions):
    """Odd d: raises ValueError('bad shape') -- does not say which feature has no partner."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("bad shape")
    return C_01_reference(x, positions)


def W_13_theta_in_x_dtype(x, positions):
    """theta rounded to x's dtype (bfloat16: 3 significant digits) before t * theta."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: a feature without a partner")
    m = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    theta = (10000.0 ** (-2 * m / d)).to(x.dtype).float()
    a = positions.float()[:, None] * theta
    w = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    cos, sin = a.cos().to(w), a.sin().to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def W_14_grad_mode_left_on(x, positions):
    """Table under set_grad_enabled(False), then set_grad_enabled(True): grad left on in the
    caller's no_grad."""
    torch.set_grad_enabled(False)
    a = _ang(positions, x.shape[-1]) if x.shape[-1] % 2 == 0 else None
    torch.set_grad_enabled(True)
    return C_01_reference(x, positions)


def W_15_manual_seed(x, positions):
    """torch.manual_seed(1234) inside: resets the caller's global generator."""
    torch.manual_seed(1234)
    return C_01_reference(x, positions)


def W_16_positions_from_first_only(x, positions):
    """Uses positions[0] + arange(n): right for consecutive positions, wrong for unsorted."""
    n = x.shape[-2]
    pos = positions[0] + torch.arange(n, device=positions.device)
    return C_01_reference(x, pos)


def A_17_sin_cos_via_float16_angles_mod(x, positions):
    """Angles reduced mod 2*pi in float32 then cast to x's dtype (float16) before cos/sin."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    a = torch.remainder(_ang(positions, d), 2 * math.pi).float()
    if x.dtype in (torch.float16, torch.bfloat16):
        a = a.to(x.dtype).float()
    w = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    cos, sin = a.cos().to(w), a.sin().to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def W_18_mutates_positions_sort(x, positions):
    """Sorts positions in place (positions.sort_ ... via positions[:] = sorted) to build a
    table, then restores them... only their values, losing order when duplicated? -- here:
    leaves positions sorted (mutates the caller's positions)."""
    out = C_01_reference(x, positions)
    positions.copy_(positions.sort().values)
    return out


def W_19_identity_gradient(x, positions):
    """Forward right; backward as the identity (x + (y - x).detach())."""
    y = C_01_reference(x, positions)
    return x + (y - x).detach()


def W_20_one_vector_float16_native(x, positions):
    """For n == 1 (decoding), a 'fast path' all in x's dtype (float16 cos/sin of float16
    angles, no upcast)."""
    if x.shape[-2] == 1 and x.dtype in (torch.float16, torch.bfloat16):
        d = x.shape[-1]
        if d % 2:
            raise ValueError("odd d")
        a = _ang(positions, d).to(x.dtype)
        cos, sin = a.cos(), a.sin()
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)
    return C_01_reference(x, positions)


def W_21_grad_enable_inside(x, positions):
    """torch.enable_grad() inside: under the caller's no_grad the result carries a graph."""
    with torch.enable_grad():
        return C_01_reference(x, positions)


def A_22_float32_result_for_float64(x, positions):
    """Accepted (standing ruling): float64 x computed in float32 (float32 angles are the industry standard); |diff| 9.9e-9 at position 0. float64 x computed and returned via float32 (upcast only to float32)."""
    return C_01_reference(x.float(), positions).to(x.dtype) if x.dtype == torch.float64 else C_01_reference(x, positions)


def W_23_base_1e4_int_exponent(x, positions):
    """theta_m = 10000 ** (-(2m // d))...: integer floor division; here the classic slip
    theta = 1 / 10000 ** (2 * m / (d - 2)) (d - 2 in the exponent, 'so the last is 1e-4')."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    if d == 2:
        return C_01_reference(x, positions)
    m = torch.arange(d // 2, dtype=torch.float64)
    theta = 10000.0 ** (-2 * m / (d - 2))
    a = positions.double()[:, None] * theta
    w = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    cos, sin = a.cos().to(w), a.sin().to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def W_24_positions_int32_negative_ok(x, positions):
    """positions cast to float16 when x is bfloat16 (only bfloat16 path)."""
    if x.dtype == torch.bfloat16:
        positions = positions.half().float().long()
    return C_01_reference(x, positions)


def W_25_returns_input_when_all_zero(x, positions):
    """Shortcut: every position 0 -> return x itself (identity rotation)."""
    if bool((positions == 0).all()):
        return x
    return C_01_reference(x, positions)


def A_26_cos_sin_bf16_table(x, positions):
    """cos/sin rounded to bfloat16 for bfloat16 x, product in float32."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d")
    a = _ang(positions, d)
    w = torch.promote_types(x.dtype, torch.float32)
    cos, sin = a.cos().to(x.dtype).to(w), a.sin().to(x.dtype).to(w)
    x1, x2 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)


def W_27_half_pairing(x, positions):
    """Pairs feature j with j + d/2 (GPT-NeoX 'half' layout), not 2m with 2m + 1."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd d: a feature without a partner")
    a = _ang(positions, d)
    w = torch.promote_types(x.dtype, torch.float32)
    x1, x2 = x[..., : d // 2].to(w), x[..., d // 2:].to(w)
    cos, sin = a.cos().to(w), a.sin().to(w)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)


def W_28_clockwise_when_half(x, positions):
    """float16/bfloat16 path with the sign of sin flipped (clockwise rotation)."""
    if x.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(x, -positions)
    return C_01_reference(x, positions)
