"""Round 8 red team (writer D, issue 12), ch10_rope: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round8/D/sols/ch10_rope.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _wd(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _angles(positions, d, device, dtype=torch.float32):
    m = torch.arange(d // 2, device=device, dtype=dtype)
    theta = 10000.0 ** (-2 * m / d)
    return positions.to(device=device, dtype=dtype)[:, None] * theta


def _rot(x, ang):
    xf = x.to(_wd(x))
    c, s = torch.cos(ang).to(xf.dtype), torch.sin(ang).to(xf.dtype)
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)
    return y.to(x.dtype)


def _check(x):
    if x.shape[-1] % 2:
        raise ValueError(f"d = {x.shape[-1]} is odd: feature {x.shape[-1]-1} has no partner")


# ---------------------------------------------------------------- correct / odd
def C_01_reference_like(x, positions):
    _check(x)
    return _rot(x, _angles(positions, x.shape[-1], x.device, _wd(x)))


def O_02_angles_float64(x, positions):
    """More accurate angles (float64 product, then cos/sin in float64)."""
    _check(x)
    d = x.shape[-1]
    m = torch.arange(d // 2, device=x.device, dtype=torch.float64)
    ang = positions.to(torch.float64)[:, None] * 10000.0 ** (-2 * m / d)
    c, s = torch.cos(ang), torch.sin(ang)
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(wd)
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    y = torch.empty_like(xf)
    y[..., 0::2] = x0 * c.to(wd) - x1 * s.to(wd)
    y[..., 1::2] = x0 * s.to(wd) + x1 * c.to(wd)
    return y.to(x.dtype)


def O_03_hf_style_cos_sin_in_x_dtype(x, positions):
    """float32 angles, cos/sin cast to x's dtype, products in x's dtype (as HF Llama does)."""
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device, _wd(x))
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]  # float64 x: angles are float64 (_wd)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)


# ---------------------------------------------------------------- wrong
_cache_minmax = {}


def W_01_cache_keyed_on_min_max_len(x, positions):
    """Caches the cos/sin table on (d, n, min, max): a permutation of the same positions
    (or any other set with the same ends) reuses a stale table."""
    _check(x)
    d = x.shape[-1]
    key = (d, positions.numel(), int(positions.min()), int(positions.max()), x.device)
    if key not in _cache_minmax:
        _cache_minmax[key] = _angles(positions, d, x.device, _wd(x))
    return _rot(x, _cache_minmax[key])


_cache_sum = {}


def W_02_cache_keyed_on_sum(x, positions):
    """Caches on (d, n, sum of positions): permuted positions hit the cache."""
    _check(x)
    d = x.shape[-1]
    key = (d, positions.numel(), int(positions.sum()))
    if key not in _cache_sum:
        _cache_sum[key] = _angles(positions, d, x.device, _wd(x))
    return _rot(x, _cache_sum[key])


def W_03_returns_x_when_positions_zero(x, positions):
    """Shortcut: position 0 is the identity rotation, so return x itself (aliases the
    input; the exercise asks for a new tensor)."""
    _check(x)
    if bool((positions == 0).all()):
        return x
    return _rot(x, _angles(positions, x.shape[-1], x.device, _wd(x)))


def W_04_rejects_d_not_multiple_of_4(x, positions):
    """Raises for every d that is not a multiple of 4 (e.g. d = 6, 2), which are valid."""
    if x.shape[-1] % 4:
        raise ValueError(f"d = {x.shape[-1]} must be even")
    return _rot(x, _angles(positions, x.shape[-1], x.device, _wd(x)))


def W_05_value_error_without_reason(x, positions):
    """Odd d raises ValueError, but the message does not say that d is odd / a feature
    has no partner."""
    if x.shape[-1] % 2:
        raise ValueError("bad input")
    return _rot(x, _angles(positions, x.shape[-1], x.device, _wd(x)))


def O_06_view_pairs_split_only(x, positions):
    """x.view(..., d/2, 2): splitting the last dim is a valid view at any strides (I first
    thought it failed on a transposed x; it does not)."""
    _check(x)
    d = x.shape[-1]
    ang = _angles(positions, d, x.device, _wd(x))
    xp = x.view(*x.shape[:-1], d // 2, 2).to(_wd(x))
    c, s = torch.cos(ang), torch.sin(ang)
    y0 = xp[..., 0] * c - xp[..., 1] * s
    y1 = xp[..., 0] * s + xp[..., 1] * c
    return torch.stack([y0, y1], -1).view(x.shape).to(x.dtype)


def W_07_theta_in_x_dtype(x, positions):
    """theta computed in x's dtype (float16/bfloat16 theta), angle product in float32:
    theta's rounding error is multiplied by the position."""
    _check(x)
    if x.dtype == torch.float64:
        return C_01_reference_like(x, positions)
    d = x.shape[-1]
    m = torch.arange(d // 2, device=x.device).to(x.dtype)
    theta = (10000.0 ** (-2 * m.float() / d)).to(x.dtype)
    ang = positions.float()[:, None] * theta.float()
    return _rot(x, ang)


def W_08_overwrites_x0_before_use(x, positions):
    """Writes y[...,0::2] first, then reads x0 from y (a view) for y[...,1::2]."""
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device, _wd(x))
    c, s = torch.cos(ang), torch.sin(ang)
    y = x.to(_wd(x)).clone()
    y[..., 0::2] = y[..., 0::2] * c - y[..., 1::2] * s
    y[..., 1::2] = y[..., 0::2] * s + y[..., 1::2] * c
    return y.to(x.dtype)


def W_09_positions_relative_to_first(x, positions):
    """Subtracts positions[0] ("only distances matter"): scores are right, the rotated
    vectors are not the exercise's."""
    _check(x)
    return _rot(x, _angles(positions - positions[0], x.shape[-1], x.device, _wd(x)))


def W_10_table_for_4096_positions_clamped(x, positions):
    """Precomputed table for positions < 4096 (a 'max context'); larger positions are
    clamped to the last row."""
    _check(x)
    d = x.shape[-1]
    table = _angles(torch.arange(4096), d, x.device, _wd(x))
    return _rot(x, table[positions.clamp(max=4095)])


def W_11_positions_as_float16_when_x_half(x, positions):
    """Casts positions to x's dtype before the product (exact only below 2048 in float16,
    256 in bfloat16)."""
    _check(x)
    if x.dtype == torch.float64:
        return C_01_reference_like(x, positions)
    d = x.shape[-1]
    m = torch.arange(d // 2, device=x.device, dtype=torch.float32)
    theta = 10000.0 ** (-2 * m / d)
    ang = positions.to(x.dtype).float()[:, None] * theta
    return _rot(x, ang)


def W_12_detaches_x(x, positions):
    """Rotates x.detach(): right values, no gradient."""
    _check(x)
    return _rot(x.detach(), _angles(positions, x.shape[-1], x.device, _wd(x)))


def W_13_consecutive_from_first(x, positions):
    """Assumes positions are positions[0] + arange(n) (true in a decoding loop)."""
    _check(x)
    n = x.shape[-2]
    p = positions[0] + torch.arange(n, device=positions.device)
    return _rot(x, _angles(p, x.shape[-1], x.device, _wd(x)))


def W_14_halves_pairing(x, positions):
    """Pairs feature m with m + d/2 (GPT-NeoX layout), not 2m with 2m + 1."""
    _check(x)
    d = x.shape[-1]
    ang = _angles(positions, d, x.device, _wd(x))
    c, s = torch.cos(ang), torch.sin(ang)
    xf = x.to(_wd(x))
    x0, x1 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat([x0 * c - x1 * s, x0 * s + x1 * c], -1).to(x.dtype)


def W_15_inplace_on_x(x, positions):
    """Rotates x in place (for a float32 x) and returns it."""
    _check(x)
    y = _rot(x, _angles(positions, x.shape[-1], x.device, _wd(x)))
    if x.dtype == torch.float32 and not x.requires_grad:
        x.copy_(y)
        return x
    return y


def W_16_angle_mod_2pi_in_float16(x, positions):
    """Reduces angles mod 2 pi, but in x's dtype (float16): wrong for half inputs."""
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device, _wd(x))
    if x.dtype in (torch.float16, torch.bfloat16):
        ang = torch.remainder(ang.to(x.dtype), 2 * math.pi).float()
    return _rot(x, ang)


_cache_ptr = {}


def W_17_cache_keyed_on_data_ptr(x, positions):
    """Caches the angle table on (positions.data_ptr(), n, d): a freed positions tensor's
    memory is reused by the next one (decoding loop), which then hits the stale entry."""
    _check(x)
    d = x.shape[-1]
    key = (positions.data_ptr(), positions.numel(), d, x.dtype)
    if key not in _cache_ptr:
        _cache_ptr[key] = _angles(positions, d, x.device, _wd(x))
    return _rot(x, _cache_ptr[key])


def S_18_complex_numbers(x, positions):
    """torch.polar / view_as_complex: right values, but the text says cos and sin, not
    complex numbers."""
    _check(x)
    wd = _wd(x)
    ang = _angles(positions, x.shape[-1], x.device, wd)
    z = torch.view_as_complex(x.to(wd).reshape(*x.shape[:-1], -1, 2).contiguous())
    r = torch.polar(torch.ones_like(ang), ang)
    return torch.view_as_real(z * r).flatten(-2).to(x.dtype)


_cache_pos = {}


def W_19_cache_keyed_on_positions_only(x, positions):
    """Caches the angle table on the positions' values (tuple), not on d."""
    _check(x)
    key = tuple(positions.tolist())
    if key not in _cache_pos:
        _cache_pos[key] = _angles(positions, x.shape[-1], x.device, torch.float64)
    return _rot(x, _cache_pos[key])


_cache_cs = {}


def W_20_cache_cos_sin_ignores_dtype(x, positions):
    """Caches cos and sin in x's dtype per (positions, d): a float32 call after a float16
    (or bfloat16) call at the same positions gets half-precision cos/sin."""
    _check(x)
    d = x.shape[-1]
    key = (tuple(positions.tolist()), d)
    if key not in _cache_cs:
        ang = _angles(positions, d, x.device, torch.float64)
        _cache_cs[key] = (torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype))
    c, s = _cache_cs[key]
    wd = _wd(x)
    xf = x.to(wd)
    c, s = c.to(wd), s.to(wd)
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)


def W_21_bfloat16_theta_only(x, positions):
    """theta rounded to bfloat16 when x is bfloat16 (float32 otherwise)."""
    _check(x)
    d = x.shape[-1]
    wd = _wd(x)
    m = torch.arange(d // 2, device=x.device, dtype=wd)
    theta = 10000.0 ** (-2 * m / d)
    if x.dtype == torch.bfloat16:
        theta = theta.to(torch.bfloat16).float()
    return _rot(x, positions.to(wd)[:, None] * theta)


def W_22_bfloat16_positions_only(x, positions):
    """positions cast to bfloat16 when x is bfloat16 (exact integers only up to 256)."""
    _check(x)
    d = x.shape[-1]
    wd = _wd(x)
    pos = positions.to(torch.bfloat16).to(wd) if x.dtype == torch.bfloat16 else positions
    return _rot(x, _angles(pos, d, x.device, wd))
