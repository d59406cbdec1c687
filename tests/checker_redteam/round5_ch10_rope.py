"""Round 5 red team (writer R5-C, issue 12), ch10_rope: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch10_rope.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _angles(positions, d, device, dtype=torch.float32):
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=dtype) / d)
    return positions.to(dtype)[:, None] * theta[None, :]


def _rot(x, ang):
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack([y0, y1], -1).flatten(-2).to(x.dtype)


def _check(x):
    if x.shape[-1] % 2:
        raise ValueError(f"RoPE pairs features: d = {x.shape[-1]} is odd, one has no partner")


def C_01_stack_float32_angles(x, positions):
    _check(x)
    return _rot(x, _angles(positions, x.shape[-1], x.device))


def O_02_float64_angles(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device, torch.float64)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2].double(), x[..., 1::2].double()
    y = torch.empty(x.shape, dtype=torch.float64, device=x.device)
    y[..., 0::2] = x0 * cos - x1 * sin
    y[..., 1::2] = x0 * sin + x1 * cos
    return y.to(x.dtype)


def O_03_repeat_interleave_rotate_pairs(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device).repeat_interleave(2, -1)
    xf = x.float()
    rot = torch.stack([-xf[..., 1::2], xf[..., 0::2]], -1).flatten(-2)
    return (xf * torch.cos(ang) + rot * torch.sin(ang)).to(x.dtype)


def W_01_rotate_half_layout(x, positions):
    _check(x)
    d = x.shape[-1]
    ang = _angles(positions, d, x.device)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., : d // 2].float(), x[..., d // 2:].float()
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).to(x.dtype)


def W_02_theta_m_over_d(x, positions):
    _check(x)
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(d // 2, device=x.device, dtype=torch.float32) / d)
    return _rot(x, positions.float()[:, None] * theta)


def W_03_clockwise(x, positions):
    _check(x)
    return _rot(x, -_angles(positions, x.shape[-1], x.device))


def W_04_ignores_positions(x, positions):
    _check(x)
    n = x.shape[-2]
    return _rot(x, _angles(torch.arange(n, device=x.device), x.shape[-1], x.device))


def W_05_in_place(x, positions):
    _check(x)
    y = _rot(x, _angles(positions, x.shape[-1], x.device))
    with torch.no_grad():
        x.copy_(y)
    return x


def W_06_odd_d_leaves_last_feature(x, positions):
    d = x.shape[-1]
    if d % 2 == 0:
        return _rot(x, _angles(positions, d, x.device))
    y = _rot(x[..., :-1], _angles(positions, d - 1, x.device))
    return torch.cat([y, x[..., -1:]], -1)


def W_07_angles_in_input_dtype(x, positions):
    _check(x)
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)
    ang = positions.to(x.dtype)[:, None] * theta
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


def W_08_returns_float32(x, positions):
    _check(x)
    return _rot(x, _angles(positions, x.shape[-1], x.device)).float()


def O_04_view_pairs_was_W09(x, positions):
    _check(x)
    d = x.shape[-1]
    pairs = x.view(*x.shape[:-1], d // 2, 2)
    ang = _angles(positions, d, x.device)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = pairs[..., 0].float(), pairs[..., 1].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).view(x.shape).to(x.dtype)


def W_10_angles_transposed_when_square(x, positions):
    _check(x)
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    ang = theta[:, None] * positions.float()[None, :]  # (d/2, n)
    if ang.shape[0] != x.shape[-2]:
        ang = ang.T
    return _rot(x, ang)


def W_11_detached_input(x, positions):
    _check(x)
    return _rot(x.detach(), _angles(positions, x.shape[-1], x.device))


def W_12_integer_exponent(x, positions):
    _check(x)
    d = x.shape[-1]
    m = torch.arange(d // 2, device=x.device)
    theta = 10000.0 ** (-(2 * m // d).float())
    return _rot(x, positions.float()[:, None] * theta)


def W_13_exponent_double_counted(x, positions):
    _check(x)
    d = x.shape[-1]
    m = torch.arange(0, d, 2, device=x.device, dtype=torch.float32)
    theta = 10000.0 ** (-2 * m / d)
    return _rot(x, positions.float()[:, None] * theta)


def W_14_concat_halves_not_interleaved(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device)
    cos, sin = torch.cos(ang), torch.sin(ang)
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).to(x.dtype)


def W_15_positions_relative_to_first(x, positions):
    _check(x)
    return _rot(x, _angles(positions - positions.min(), x.shape[-1], x.device))


def W_16_sorted_positions(x, positions):
    _check(x)
    return _rot(x, _angles(positions.sort().values, x.shape[-1], x.device))


def W_17_odd_d_raises_index_error(x, positions):
    if x.shape[-1] % 2:
        raise IndexError("d must be even")
    return _rot(x, _angles(positions, x.shape[-1], x.device))


def W_18_odd_d_message_silent(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("bad input")
    return _rot(x, _angles(positions, x.shape[-1], x.device))


def O_05_float16_products_float32_angles_was_W19(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device)
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


def W_20_theta_base_1000(x, positions):
    _check(x)
    d = x.shape[-1]
    theta = 1000.0 ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
    return _rot(x, positions.float()[:, None] * theta)


_TABLE = {}


def W_21_cos_sin_cached_by_shape(x, positions):
    _check(x)
    n, d = x.shape[-2:]
    if (n, d) not in _TABLE:
        _TABLE[(n, d)] = _angles(positions, d, x.device)
    return _rot(x, _TABLE[(n, d)])


def O_06_table_indexed_by_position(x, positions):
    _check(x)
    d = x.shape[-1]
    table = _angles(torch.arange(int(positions.max()) + 1), d, x.device)
    return _rot(x, table[positions])


def W_22_repeat_not_repeat_interleave(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device).repeat(1, 2)
    xf = x.float()
    rot = torch.stack([-xf[..., 1::2], xf[..., 0::2]], -1).flatten(-2)
    return (xf * torch.cos(ang) + rot * torch.sin(ang)).to(x.dtype)


def W_23_aliasing_views_of_output(x, positions):
    _check(x)
    ang = _angles(positions, x.shape[-1], x.device)
    cos, sin = torch.cos(ang), torch.sin(ang)
    y = x.float().clone()
    x0, x1 = y[..., 0::2], y[..., 1::2]  # views of y, not of x
    y[..., 0::2] = x0 * cos - x1 * sin
    y[..., 1::2] = x0 * sin + x1 * cos   # x0 already overwritten
    return y.to(x.dtype)


def W_24_consecutive_from_first_position(x, positions):
    _check(x)
    n = x.shape[-2]
    pos = positions[0] + torch.arange(n, device=x.device)
    return _rot(x, _angles(pos, x.shape[-1], x.device))
