"""Round 4 red team (writer R4-C, issue 12), ch10_rope: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch10_rope.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _check(x):
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rope: d = {x.shape[-1]} is odd; feature {x.shape[-1] - 1} "
                         "has no partner to rotate with")


def _angles(x, positions, dtype=torch.float32, theta_fn=None):
    d = x.shape[-1]
    m = torch.arange(d // 2, device=x.device, dtype=dtype)
    theta = 10000.0 ** (-2 * m / d) if theta_fn is None else theta_fn(m, d)
    return positions.to(dtype)[:, None] * theta  # (n, d/2)


def _rotate(x, ang, out_dtype=None, interleave=True):
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    y1 = x1 * cos - x2 * sin
    y2 = x1 * sin + x2 * cos
    y = torch.stack([y1, y2], -1).flatten(-2) if interleave else torch.cat([y1, y2], -1)
    return y.to(x.dtype if out_dtype is None else out_dtype)


def C_01_float32_angles(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions))


def C_02_index_assign(x, positions):
    _check(x)
    ang = _angles(x, positions)
    cos, sin = ang.cos(), ang.sin()
    xf = x.float()
    y = torch.empty_like(xf)
    y[..., 0::2] = xf[..., 0::2] * cos - xf[..., 1::2] * sin
    y[..., 1::2] = xf[..., 0::2] * sin + xf[..., 1::2] * cos
    return y.to(x.dtype)


def O_01_float64_angles(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, torch.float64))


def O_02_repeat_interleave_rotate_half_pairs(x, positions):
    _check(x)
    ang = _angles(x, positions).repeat_interleave(2, -1)  # (n, d)
    xf = x.float()
    rot = torch.stack([-xf[..., 1::2], xf[..., 0::2]], -1).flatten(-2)
    return (xf * ang.cos() + rot * ang.sin()).to(x.dtype)


def O_03_theta_via_exp_log(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: torch.exp(
        -2 * m / d * math.log(10000.0))))


def W_01_half_split_pairs(x, positions):
    # GPT-NeoX style: pairs feature m with feature m + d/2
    _check(x)
    d = x.shape[-1]
    ang = _angles(x, positions)
    xf = x.float()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()],
                     -1).to(x.dtype)


def W_02_clockwise(x, positions):
    _check(x)
    return _rotate(x, -_angles(x, positions))


def W_03_theta_missing_factor_2(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: 10000.0 ** (-m / d)))


def W_04_m_starts_at_1(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: 10000.0 ** (-2 * (m + 1) / d)))


def W_05_positions_ignored(x, positions):
    _check(x)
    n = x.shape[-2]
    return _rotate(x, _angles(x, torch.arange(n, device=x.device)))


def W_06_angles_in_input_dtype(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, x.dtype))


def W_07_odd_d_truncated(x, positions):
    d = x.shape[-1] - x.shape[-1] % 2
    y = x.clone()
    y[..., :d] = _rotate(x[..., :d], _angles(x[..., :d], positions))
    return y


def W_08_assert_instead_of_valueerror(x, positions):
    assert x.shape[-1] % 2 == 0, "d must be even"
    return _rotate(x, _angles(x, positions))


def W_09_in_place(x, positions):
    _check(x)
    y = _rotate(x, _angles(x, positions))
    with torch.no_grad():
        x.copy_(y)
    return y


def W_10_returns_float32(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions), out_dtype=torch.float32)


def W_11_cat_instead_of_interleave(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions), interleave=False)


def W_12_detached(x, positions):
    _check(x)
    return _rotate(x.detach(), _angles(x, positions))


def W_13_integer_division_theta(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: 10000.0 ** (
        -(2 * m.long() // d).float())))


def W_14_sin_cos_swapped(x, positions):
    _check(x)
    ang = _angles(x, positions)
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    y = torch.stack([x1 * ang.sin() - x2 * ang.cos(), x1 * ang.cos() + x2 * ang.sin()], -1)
    return y.flatten(-2).to(x.dtype)


def W_15_relative_to_first_position(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions - positions[0]))


def W_16_assumes_consecutive_positions(x, positions):
    _check(x)
    n = x.shape[-2]
    return _rotate(x, _angles(x, positions[0] + torch.arange(n, device=x.device)))


def W_17_sorted_positions(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions.sort().values))


def W_18_message_says_nothing(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("bad input")
    return _rotate(x, _angles(x, positions))


def O_04_products_in_input_dtype(x, positions):
    # angles float32, but the products in the input dtype
    _check(x)
    ang = _angles(x, positions)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def W_20_positions_over_wrong_axis(x, positions):
    # broadcasts the (n, d/2) angles as if x were (n, ..., d): right when x is 2-D or 3-D
    # with n in dim 1 only when batch == n
    _check(x)
    ang = _angles(x, positions)
    while ang.dim() < x.dim():
        ang = ang.unsqueeze(1)
    ang = ang.movedim(0, 0)
    if x.dim() > 2:
        ang = ang.transpose(0, -2) if ang.shape[0] == x.shape[0] else ang.squeeze(1)
    return _rotate(x, ang)


def W_21_theta_base_10000_float16(x, positions):
    # the frequencies computed in float16, angles in float32
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: (10000.0 ** (-2 * m / d)).half().float()))


def W_22_positions_modulo_2pi_in_half(x, positions):
    _check(x)
    ang = _angles(x, positions)
    return _rotate(x, torch.remainder(ang, 2 * math.pi).half().float())


_TABLE = {}


def W_23_cos_sin_cached_by_shape(x, positions):
    # caches the cos/sin table per (n, d, device): reuses stale angles for new positions
    _check(x)
    key = (x.shape[-2], x.shape[-1], x.device)
    if key not in _TABLE:
        _TABLE[key] = _angles(x, positions)
    return _rotate(x, _TABLE[key])


def W_24_theta_from_n_when_square(x, positions):
    _check(x)
    return _rotate(x, _angles(x, positions, theta_fn=lambda m, d: 10000.0 ** (
        -2 * m / x.shape[-1] if x.shape[-1] <= 64 else -2 * m / 64)))


def W_25_float_alias_writes_into_x(x, positions):
    # .float() is a no-op for float32 x: the in-place writes change the caller's x
    _check(x)
    ang = _angles(x, positions)
    xf = x.float()
    x1, x2 = xf[..., 0::2].clone(), xf[..., 1::2].clone()
    xf[..., 0::2] = x1 * ang.cos() - x2 * ang.sin()
    xf[..., 1::2] = x1 * ang.sin() + x2 * ang.cos()
    return xf.to(x.dtype)


def S_01_complex_numbers(x, positions):
    _check(x)
    ang = _angles(x, positions)
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
    y = torch.view_as_real(xc * torch.polar(torch.ones_like(ang), ang)).flatten(-2)
    return y.to(x.dtype)


def W_26_view_flatten_leading_dims(x, positions):
    # flattens the leading dims with .view: fails on q from a transpose(1, 2)
    _check(x)
    n, d = x.shape[-2:]
    x3 = x.view(-1, n, d)
    return _rotate(x3, _angles(x, positions)).view(x.shape)
