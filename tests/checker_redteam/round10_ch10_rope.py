"""Round 10 red team (writer D, issue 12), ch10_rope: apply_rope (exercise 10.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round10/D/sols/ch10_rope.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _ref(x, positions, angle_dtype=torch.float32):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"head size d={d} is odd: feature {d - 1} has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=angle_dtype, device=x.device) / d)
    ang = positions.to(x.device, angle_dtype)[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf = x.to(wd)
    cos, sin = cos.to(wd), sin.to(wd)
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)
    return y.to(x.dtype)


def C_01_reference(x, positions):
    return _ref(x, positions)


def O_02_float64_angles(x, positions):
    # angles in float64 (more accurate than float32), then cast
    return _ref(x, positions, torch.float64)


def O_03_exp_log_theta_remainder(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: the last feature has no partner")
    m = torch.arange(d // 2, dtype=torch.float32, device=x.device)
    theta = torch.exp(-2 * m / d * math.log(10000.0))
    ang = positions.float()[:, None] * theta
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = ang.cos().to(wd), ang.sin().to(wd)
    xr = x.to(wd).unflatten(-1, (d // 2, 2))
    y0 = xr[..., 0] * c - xr[..., 1] * s
    y1 = xr[..., 0] * s + xr[..., 1] * c
    return torch.stack([y0, y1], -1).flatten(-2).to(x.dtype)


def W_01_alias_when_all_zero(x, positions):
    # fast path: rotation by 0 is the identity, so return x itself (not a new tensor)
    if x.shape[-1] % 2:
        raise ValueError("odd head size: a feature has no partner")
    if not positions.any():
        return x
    return _ref(x, positions)


_cache = {}


def W_02_cache_first_last(x, positions):
    # memo on (n, d, first, last position, dtype, device)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: a feature has no partner")
    key = (positions.numel(), d, int(positions[0]), int(positions[-1]), x.dtype, x.device)
    if key not in _cache:
        _cache[key] = _ref(torch.ones(1, d, dtype=torch.float64, device=x.device)
                           .expand(positions.numel(), d), positions)  # dummy
        theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        ang = positions.float()[:, None] * theta
        _cache[key] = (ang.cos(), ang.sin())
    c, s = _cache[key]
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = c.to(wd), s.to(wd)
    x0, x1 = x.to(wd)[..., 0::2], x.to(wd)[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


def W_03_message_does_not_say_odd(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("bad input shape")
    return _ref(x, positions)


def W_04_theta_in_x_dtype(x, positions):
    # theta computed in x's dtype (float16 theta for float16 x)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, device=x.device).to(x.dtype) / d)
    ang = positions.float()[:, None] * theta.float()
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = ang.cos().to(wd), ang.sin().to(wd)
    x0, x1 = x.to(wd)[..., 0::2], x.to(wd)[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


def O_05_cos_sin_in_x_dtype_multiply(x, positions):
    # cos/sin cast to x's dtype, products in x's dtype (half-precision products)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    c, s = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)


def W_06_positions_int32_overflow_squared(x, positions):
    # angle computed as positions * theta with positions cast to int32 first then float16
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    t = positions.to(torch.float32 if x.dtype != torch.float16 else torch.float16).float()
    ang = t[:, None] * theta
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = ang.cos().to(wd), ang.sin().to(wd)
    x0, x1 = x.to(wd)[..., 0::2], x.to(wd)[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


def W_07_relative_to_first_position(x, positions):
    # subtract positions[0] (scores only depend on distance, so "it's the same")
    return _ref(x, positions - positions[0])


def W_08_relative_to_min_position(x, positions):
    return _ref(x, positions - positions.min())


def W_09_theta_d_minus_2(x, positions):
    # theta_m = 10000^(-2m/(d-2)) so the last pair gets exactly 1/10000
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / max(d - 2, 1))
    ang = positions.float()[:, None] * theta
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = ang.cos().to(wd), ang.sin().to(wd)
    x0, x1 = x.to(wd)[..., 0::2], x.to(wd)[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


def W_10_out_buffer_inplace_on_clone_then_view(x, positions):
    # writes into x.clone() via a view; fine... but for 2-D x it reshapes with view of x
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    y = _ref(x, positions)
    if x.dim() == 2:  # "no batch: write in place to save memory"
        with torch.no_grad():
            x.copy_(y)
        return x
    return y


def W_11_grad_through_no_grad_angles_x_detach_when_half(x, positions):
    # detaches in the low-precision path
    y = _ref(x.detach() if x.dtype in (torch.float16, torch.bfloat16) else x, positions)
    return y


def W_12_only_first_n_positions_loop(x, positions):
    # decoding loop: when n == 1 uses position len-of-cache guess 0
    if x.shape[-2] == 1:
        return _ref(x, torch.zeros_like(positions))
    return _ref(x, positions)


def W_13_odd_d_silently_drops_last(x, positions):
    d = x.shape[-1]
    if d % 2:
        y = _ref(x[..., :-1], positions)
        return torch.cat([y, x[..., -1:]], -1)
    return _ref(x, positions)


def W_14_theta_float16_angle_for_bf16(x, positions):
    # angles computed in bfloat16 when x is bfloat16
    if x.dtype == torch.bfloat16:
        d = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        ang = (positions.float()[:, None] * theta).to(torch.bfloat16)
        c, s = ang.float().cos(), ang.float().sin()
        x0, x1 = x.float()[..., 0::2], x.float()[..., 1::2]
        return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)
    return _ref(x, positions)


def W_15_inplace_only_for_half(x, positions):
    y = _ref(x, positions)
    if x.dtype in (torch.float16, torch.bfloat16):
        with torch.no_grad():
            x.copy_(y)
        return x
    return y


def W_16_alias_zero_positions_half_only(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("odd head size: a feature has no partner")
    if x.dtype in (torch.float16, torch.bfloat16) and not positions.any():
        return x
    return _ref(x, positions)


def W_17_alias_zero_positions_4d_only(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("odd head size: a feature has no partner")
    if x.dim() == 4 and not positions.any():
        return x
    return _ref(x, positions)


def W_18_theta_base_10000_rounded(x, positions):
    # theta from 10000.5 (a slightly off constant): small errors, message check
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd head size {d}: feature {d-1} has no partner")
    theta = 10001.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    wd = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s = ang.cos().to(wd), ang.sin().to(wd)
    x0, x1 = x.to(wd)[..., 0::2], x.to(wd)[..., 1::2]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2).to(x.dtype)


def W_19_output_scaled_1_0002(x, positions):
    return _ref(x, positions) * 1.0002
