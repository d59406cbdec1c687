"""Round 3 red team (writer R3, issue 12), ch10_rope: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch10_rope.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_apply_rope"
import math, torch

def _ang(positions, d, device, dtype=torch.float32):
    m = torch.arange(d // 2, device=device, dtype=dtype)
    theta = 10000.0 ** (-2 * m / d)
    return positions.to(dtype)[:, None] * theta  # (n, d/2)

def _odd(d):
    if d % 2:
        raise ValueError(f"d = {d} is odd: feature {d - 1} has no partner to rotate with")

def C_1_reference_float32(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return y.to(x.dtype)

def C_2_cos_sin_cast_to_x_dtype(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)

def O_1_float64_angles(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device, torch.float64)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].double(), x[..., 1::2].double()
    y = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return y.to(x.dtype)

def O_2_rotate_half_interleaved(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device).repeat_interleave(2, dim=-1)  # (n, d)
    rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return (x.float() * a.cos() + rot.float() * a.sin()).to(x.dtype)

def O_3_empty_like_and_index_assign(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    y = torch.empty_like(x)
    y[..., 0::2] = (x1 * cos - x2 * sin).to(x.dtype)
    y[..., 1::2] = (x1 * sin + x2 * cos).to(x.dtype)
    return y

def W_01_halves_pairing_neox(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., : d // 2].float(), x[..., d // 2:].float()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)

def W_02_clockwise(x, positions):
    return C_1_reference_float32(x, -positions)

def W_03_ignores_positions_uses_arange(x, positions):
    n = x.shape[-2]
    return C_1_reference_float32(x, torch.arange(n, device=x.device))

def W_04_theta_missing_factor_2(x, positions):
    d = x.shape[-1]; _odd(d)
    m = torch.arange(d // 2, device=x.device, dtype=torch.float32)
    a = positions.float()[:, None] * 10000.0 ** (-m / d)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)

def W_05_angles_in_x_dtype(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device, x.dtype)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)

def W_06_writes_into_x(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos().to(x.dtype), a.sin().to(x.dtype)
    x1, x2 = x[..., 0::2].clone(), x[..., 1::2].clone()
    with torch.no_grad():
        pass
    out = x.detach()  # "avoid autograd trouble", writes into x's storage
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out

def W_07_returns_float32(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)

def W_08_odd_d_passes_last_feature_through(x, positions):
    d = x.shape[-1]
    if d % 2 == 0:
        return C_1_reference_float32(x, positions)
    return torch.cat([C_1_reference_float32(x[..., :-1], positions), x[..., -1:]], dim=-1)

def W_09_positions_relative_to_first(x, positions):
    return C_1_reference_float32(x, positions - positions[0])

def W_10_assumes_contiguous_positions(x, positions):
    n = x.shape[-2]
    start = positions.min()
    return C_1_reference_float32(x, torch.arange(n, device=x.device) + start)

def W_11_m_from_1(x, positions):
    d = x.shape[-1]; _odd(d)
    m = torch.arange(1, d // 2 + 1, device=x.device, dtype=torch.float32)
    a = positions.float()[:, None] * 10000.0 ** (-2 * m / d)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)

def W_12_detached_output(x, positions):
    with torch.no_grad():
        return C_1_reference_float32(x, positions)

def W_13_no_odd_check_truncates(x, positions):
    # odd d: silently rotates the first d-1 and drops nothing but raises no error -> wrong result shape?
    d = x.shape[-1]
    a = _ang(positions, d - d % 2, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0:d - d % 2:2].float(), x[..., 1::2].float()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2).to(x.dtype)

def W_14_degree_theta_base_1e4_float16_positions_int32(x, positions):
    # positions cast to int16 to "save memory" -> large positions wrap
    return C_1_reference_float32(x, positions.to(torch.int16).to(torch.int64))

def W_15_assert_instead_of_ValueError(x, positions):
    assert x.shape[-1] % 2 == 0, "d must be even"
    return C_1_reference_float32(x, positions)

def W_16_ValueError_vague_message(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("bad input shape")
    return C_1_reference_float32(x, positions)

def S_1_complex_numbers(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    y = torch.view_as_real(z * torch.polar(torch.ones_like(a), a)).flatten(-2)
    return y.to(x.dtype)

def W_17_cat_halves_instead_of_interleave(x, positions):
    d = x.shape[-1]; _odd(d)
    a = _ang(positions, d, x.device)
    cos, sin = a.cos(), a.sin()
    x1, x2 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).to(x.dtype)
