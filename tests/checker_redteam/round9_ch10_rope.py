"""Round 9 red team (writer D, issue 12), ch10_rope: apply_rope (exercise 10.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch10_rope.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _theta(d, device=None, dtype=torch.float32):
    return 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)


def _rope_ref(x, positions, cast_cs=False):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE pairs features 2m and 2m+1: the last size {d} is odd")
    ang = positions.to(torch.float32)[:, None] * _theta(d, x.device).to(torch.float32)
    cos, sin = ang.cos(), ang.sin()
    wt = torch.promote_types(x.dtype, torch.float32)
    if cast_cs:
        cos, sin, wt = cos.to(x.dtype), sin.to(x.dtype), x.dtype
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack([y0, y1], -1).flatten(-2).to(x.dtype)


def C_01_reference(x, positions):
    return _rope_ref(x, positions)


def O_02_float64_angles(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: feature {d-1} has no partner")
    ang = positions.to(torch.float64)[:, None] * _theta(d, x.device)
    wt = torch.promote_types(x.dtype, torch.float32)
    cos, sin = ang.cos().to(wt), ang.sin().to(wt)
    out = torch.empty(x.shape, dtype=wt, device=x.device)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    out[..., 0::2] = x0 * cos - x1 * sin
    out[..., 1::2] = x0 * sin + x1 * cos
    return out.to(x.dtype)


def O_03_cos_sin_in_input_dtype(x, positions):
    """HF-Llama style: angles in float32, cos/sin cast to x's dtype, product in x's dtype."""
    return _rope_ref(x, positions, cast_cs=True)


def W_01_identity_gradient(x, positions):
    """Values right, but the rotation is written under no_grad into a clone: the gradient
    w.r.t. x is the identity instead of the transposed rotation."""
    out = x.clone()
    with torch.no_grad():
        out.copy_(_rope_ref(x, positions))
    return out


def W_02_straight_through(x, positions):
    """Right values, gradient of the identity (x + (rot - x).detach())."""
    y = _rope_ref(x, positions)
    return x + (y - x).detach()


def W_03_unsqueezes_positions_in_place(x, positions):
    """Changes the caller's positions tensor: unsqueeze_ turns (n,) into (n, 1)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    p = positions.unsqueeze_(-1) if positions.dim() == 1 else positions
    ang = p.to(torch.float32) * _theta(d, x.device).to(torch.float32)
    wt = torch.promote_types(x.dtype, torch.float32)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    y = torch.stack([x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()], -1)
    return y.flatten(-2).to(x.dtype)


def W_04_clockwise_for_negative_free(x, positions):
    """Rotates clockwise (sign of sin flipped)."""
    return _rope_ref(x, -positions)


def W_05_grad_nan_via_where(x, positions):
    """Right values; the gradient is NaN: x0 / x0 style normalisation then rescaling."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    # rotate in polar form: r, phi = |pair|, atan2 ; r is sqrt(x0^2+x1^2): grad NaN at 0
    wt = torch.promote_types(x.dtype, torch.float32)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    r = torch.sqrt(x0 * x0 + x1 * x1)
    phi = torch.atan2(x1, x0)
    ang = positions.to(torch.float32)[:, None] * _theta(d, x.device).to(torch.float32)
    y = torch.stack([r * torch.cos(phi + ang), r * torch.sin(phi + ang)], -1).flatten(-2)
    return y.to(x.dtype)


_CACHE = {}


def W_06_cache_on_data_ptr_and_shape(x, positions):
    """cos/sin cached on (positions.data_ptr(), n, d, dtype): a fresh positions tensor that
    reuses freed memory, or one changed in place, gets stale angles."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    key = (positions.data_ptr(), positions.shape[0], d, x.dtype)
    if key not in _CACHE:
        ang = positions.to(torch.float32)[:, None] * _theta(d, x.device).to(torch.float32)
        _CACHE[key] = (ang.cos(), ang.sin())
    cos, sin = _CACHE[key]
    wt = torch.promote_types(x.dtype, torch.float32)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


_TABLE = {}


def W_07_table_to_max_position_float16(x, positions):
    """A cos/sin table over 0..max position, stored in the first call's working dtype and
    reused for other dtypes (float16 table used for float32 inputs later)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    need = int(positions.max()) + 1 if positions.numel() else 1
    t = _TABLE.get(d)
    if t is None or t[0].shape[0] < need:
        ang = torch.arange(max(need, 4096), dtype=torch.float32)[:, None] * \
            _theta(d).to(torch.float32)
        t = (ang.cos().to(x.dtype), ang.sin().to(x.dtype))
        _TABLE[d] = t
    cos, sin = t[0][positions].float(), t[1][positions].float()
    wt = torch.promote_types(x.dtype, torch.float32)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def W_08_error_message_silent(x, positions):
    """Raises a ValueError for odd d, but the message does not say what is wrong."""
    if x.shape[-1] % 2:
        raise ValueError("bad input")
    return _rope_ref(x, positions)


def W_09_positions_from_first(x, positions):
    """Assumes consecutive positions: positions[0] + arange(n)."""
    p = positions[0] + torch.arange(x.shape[-2], device=x.device) if positions.numel() else positions
    return _rope_ref(x, p)


def W_10_half_angle_dtype_bf16(x, positions):
    """Angles computed in x's dtype when x is bfloat16 (positions and theta in bfloat16)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    if x.dtype == torch.bfloat16:
        ang = positions.to(x.dtype)[:, None] * _theta(d).to(x.dtype)
        cos, sin = ang.float().cos(), ang.float().sin()
        x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
        return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)
    return _rope_ref(x, positions)


def W_11_theta_over_d_minus_2(x, positions):
    """theta_m = 10000^(-2m/(d-2)), so the last pair turns at 1/10000 (off by one)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}")
    den = max(d - 2, 1)
    th = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / den)
    ang = positions.to(torch.float32)[:, None] * th.float()
    wt = torch.promote_types(x.dtype, torch.float32)
    x0, x1 = x[..., 0::2].to(wt), x[..., 1::2].to(wt)
    return torch.stack([x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()],
                       -1).flatten(-2).to(x.dtype)


def W_12_returns_float32_for_bf16(x, positions):
    y = _rope_ref(x.float(), positions)
    return y if x.dtype == torch.bfloat16 else y.to(x.dtype)


def O_06_float32_products_for_float64(x, positions):
    """float64 x rotated in float32 and cast back (only RoPE's angles may be float32)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: feature {d - 1} has no partner")
    ang = positions.to(torch.float32)[:, None] * _theta(d, x.device).to(torch.float32)
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    y = torch.stack([x0 * ang.cos() - x1 * ang.sin(), x0 * ang.sin() + x1 * ang.cos()], -1)
    return y.flatten(-2).to(x.dtype)


def W_14_as_strided_pairs(x, positions):
    """Reads the pairs with as_strided built from x's shape, assuming x is contiguous:
    silently wrong on a transposed x."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: feature {d - 1} has no partner")
    xs = torch.as_strided(x, (x.numel() // 2, 2), (2, 1), x.storage_offset())
    xc = xs.reshape(*x.shape[:-1], d // 2, 2)
    return _rope_ref(xc.flatten(-2), positions)


def W_15_norm_rescaled(x, positions):
    """Rotates unit pairs and multiplies back by the pair's length (r * (cos, sin) of
    unit vectors): right values, NaN gradient where a pair is (0, 0)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: feature {d - 1} has no partner")
    wt = torch.promote_types(x.dtype, torch.float32)
    pr = x.to(wt).reshape(*x.shape[:-1], d // 2, 2)
    r = pr.norm(dim=-1, keepdim=True)
    u = pr / r.clamp_min(1e-30)
    y = _rope_ref(u.flatten(-2), positions).reshape(pr.shape) * r
    return y.flatten(-2).to(x.dtype)


def W_16_returns_x_when_all_zero(x, positions):
    """Shortcut: every angle is 0, so return x itself (not a new tensor: the output
    aliases the input, and a later in-place change of one changes the other)."""
    if x.shape[-1] % 2:
        raise ValueError(f"odd feature size {x.shape[-1]}: a feature has no partner")
    if not bool(positions.any()):
        return x
    return _rope_ref(x, positions)
