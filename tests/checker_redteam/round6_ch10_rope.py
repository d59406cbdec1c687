"""Round 6 red team (writer D, issue 12), ch10_rope: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch10_rope.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_apply_rope"
import math
import torch


def _ref(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope needs an even feature size d, got d={d}: feature {d-1} has no partner")
    m = torch.arange(d // 2, dtype=torch.float32, device=x.device)
    theta = 10000.0 ** (-2 * m / d)
    ang = positions.to(torch.float32)[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    y = torch.stack([xe * cos - xo * sin, xe * sin + xo * cos], dim=-1).flatten(-2)
    return y.to(x.dtype)


def C_01_reference(x, positions):
    return _ref(x, positions)


def O_02_float64_angles_empty_like(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: the last feature has no partner")
    m = torch.arange(d // 2, dtype=torch.float64)
    ang = positions.double()[:, None] * 10000.0 ** (-2 * m / d)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    y = torch.empty_like(x)
    y[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    y[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return y


def O_03_pairs_view(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"d={d} is odd: feature {d - 1} has no partner")
    pairs = x.reshape(*x.shape[:-1], d // 2, 2)
    m = torch.arange(d // 2, dtype=torch.float32)
    ang = positions.float()[:, None] * torch.exp(-2 * m / d * math.log(10000.0))
    c, s = ang.cos(), ang.sin()
    a, b = pairs[..., 0].float(), pairs[..., 1].float()
    return torch.stack([a * c - b * s, a * s + b * c], -1).reshape(x.shape).to(x.dtype)


# ---- wrong ----

def W_01_positions_cast_to_x_dtype(x, positions):
    # angles built in x's dtype: float16 positions > 2048 round, > 65504 overflow
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    m = torch.arange(d // 2, dtype=x.dtype)
    theta = 10000.0 ** (-2 * m / d)
    ang = positions.to(x.dtype)[:, None] * theta
    xe, xo = x[..., 0::2], x[..., 1::2]
    return torch.stack([xe * ang.cos() - xo * ang.sin(), xe * ang.sin() + xo * ang.cos()], -1).flatten(-2)


_cache = {}


def W_02_cache_keyed_on_first_position(x, positions):
    # assumes positions are start, start+1, ...: caches the table by (start, n, d)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    key = (int(positions[0]), positions.shape[0], d)
    if key not in _cache:
        m = torch.arange(d // 2, dtype=torch.float32)
        ang = positions.float()[:, None] * 10000.0 ** (-2 * m / d)
        _cache[key] = (ang.cos(), ang.sin())
    cos, sin = _cache[key]
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([xe * cos - xo * sin, xe * sin + xo * cos], -1).flatten(-2).to(x.dtype)


def W_03_relative_to_first_position(x, positions):
    # rotates by t - t0: scores unchanged, but not the exercise's absolute rotation
    return _ref(x, positions - positions.min())


def W_04_detach_to_protect_x(x, positions):
    x = x.detach().clone()  # "do not change x"
    return _ref(x, positions)


def W_05_inplace_on_x(x, positions):
    y = _ref(x, positions)
    with torch.no_grad():
        x.copy_(y) if not x.requires_grad else None
    return y if x.requires_grad else x


def W_06_odd_d_leaves_last_feature(x, positions):
    d = x.shape[-1]
    if d % 2:
        return torch.cat([_ref(x[..., :-1], positions), x[..., -1:]], -1)
    return _ref(x, positions)


def W_07_odd_d_assertion(x, positions):
    assert x.shape[-1] % 2 == 0, "d must be even"
    return _ref(x, positions)


def O_08_view_splits_last_dim_any_stride(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    p = x.view(*x.shape[:-1], d // 2, 2)
    m = torch.arange(d // 2, dtype=torch.float32)
    ang = positions.float()[:, None] * 10000.0 ** (-2 * m / d)
    a, b = p[..., 0].float(), p[..., 1].float()
    return torch.stack([a * ang.cos() - b * ang.sin(), a * ang.sin() + b * ang.cos()], -1).view(x.shape).to(x.dtype)


def W_09_float32_out_for_half(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    return _ref(x.float(), positions)


def W_10_positions_view_3d(x, positions):
    # angles shaped (1, n, d/2) as for (b, n, d): a 2-D x gets an extra leading dim
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    m = torch.arange(d // 2, dtype=torch.float32)
    ang = positions.float().view(1, -1, 1) * 10000.0 ** (-2 * m / d)
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([xe * ang.cos() - xo * ang.sin(), xe * ang.sin() + xo * ang.cos()], -1).flatten(-2).to(x.dtype)


def W_11_theta_float16_table(x, positions):
    # the frequency table itself rounded to float16 (then angles in float32)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    m = torch.arange(d // 2, dtype=torch.float32)
    theta = (10000.0 ** (-2 * m / d)).half().float()
    ang = positions.float()[:, None] * theta
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([xe * ang.cos() - xo * ang.sin(), xe * ang.sin() + xo * ang.cos()], -1).flatten(-2).to(x.dtype)


def W_12_shortcut_returns_x_at_zero(x, positions):
    # "position 0 is the identity": returns x itself (aliases the input)
    if bool((positions == 0).all()):
        if x.shape[-1] % 2:
            raise ValueError("odd d")
        return x
    return _ref(x, positions)


def W_13_d_from_wrong_axis_when_square(x, positions):
    # uses x.size(-2) for d in theta (n == d for square inputs)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    dd = x.shape[-2] if x.dim() >= 2 else d
    m = torch.arange(d // 2, dtype=torch.float32)
    ang = positions.float()[:, None] * 10000.0 ** (-2 * m / dd)
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([xe * ang.cos() - xo * ang.sin(), xe * ang.sin() + xo * ang.cos()], -1).flatten(-2).to(x.dtype)


def W_14_position_int32_wrap(x, positions):
    # multiplies int positions by 2m in int32 before the float: fine for small t
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}")
    m = torch.arange(d // 2, dtype=torch.float32)
    t = positions.to(torch.int16).float()
    ang = t[:, None] * 10000.0 ** (-2 * m / d)
    xe, xo = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([xe * ang.cos() - xo * ang.sin(), xe * ang.sin() + xo * ang.cos()], -1).flatten(-2).to(x.dtype)


def O_15_nan_to_num_on_finite_output(x, positions):
    # a "safety" nan_to_num on the rotated half-precision output: fine values, but clamps inf
    y = _ref(x, positions)
    return torch.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0)


_buf = {}


def W_16_reused_output_buffer(x, positions):
    # one preallocated output per (shape, dtype), filled with copy_: a second call of the
    # same shape overwrites the tensor the first call returned
    y = _ref(x, positions)
    key = (tuple(x.shape), x.dtype)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    return _buf[key].copy_(y)


def O_17_half_arithmetic(x, positions):
    # float32 angles, cos/sin cast to x's dtype, products in x's dtype (float16 stays float16)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size d={d}: feature {d - 1} has no partner")
    m = torch.arange(d // 2, dtype=torch.float32)
    ang = positions.float()[:, None] * 10000.0 ** (-2 * m / d)
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    xe, xo = x[..., 0::2], x[..., 1::2]
    return torch.stack([xe * c - xo * s, xe * s + xo * c], -1).flatten(-2)
