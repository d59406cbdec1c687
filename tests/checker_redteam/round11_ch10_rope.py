"""Round 11 red team (writer D, issue 12), ch10_rope: apply_rope (exercise 10.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round11/D/sols/ch10_rope.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
Round 11 found: n = 1 (a decoding step) with angles in x's dtype (W_18) or under no_grad
(W_19), and a detached copy for all-zero positions (W_01, W_16): the checker now has
float16/bfloat16 cases with one vector at positions 3001, 70000 and 1000, and backward()
at all-zero positions, at n = 1 at position 0 and 5000, and in float16/bfloat16 at n = 1.
W_14 (a cache keyed on data_ptr and _version) is now told that it keeps state, from a
second call with a new positions tensor of the same values, and a decoding loop places each
step's positions in the previous step's memory, so it is rejected on every run.
A_10 and A_17 (angle reduced modulo 2 pi, then rounded to float16/bfloat16): accepted,
see their comments."""
# flake8: noqa
import torch
CHECK = "check_apply_rope"


def _theta(d, dtype=torch.float32):
    return 10000.0 ** (-torch.arange(0, d, 2, dtype=dtype) / d)


def _rot(x, ang):
    c, s = ang.cos(), ang.sin()
    if x.dtype in (torch.float16, torch.bfloat16):
        xf = x.float()
    else:
        xf = x
    c, s = c.to(xf.dtype), s.to(xf.dtype)
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2)
    return y.to(x.dtype)


def _check(x):
    if x.shape[-1] % 2:
        raise ValueError(f"d = {x.shape[-1]} is odd: feature {x.shape[-1]-1} has no partner")


def C_01_reference(x, positions):
    _check(x)
    d = x.shape[-1]
    ang = positions.to(torch.float32)[:, None] * _theta(d)
    return _rot(x, ang)


def O_02_float64_angles_for_float64(x, positions):
    _check(x)
    d = x.shape[-1]
    dt = torch.float64 if x.dtype == torch.float64 else torch.float32
    ang = positions.to(dt)[:, None] * _theta(d, dt)
    return _rot(x, ang)


def O_03_clone_then_slice_assign(x, positions):
    _check(x)
    d = x.shape[-1]
    ang = positions.float()[:, None] * _theta(d)
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    c, s = ang.cos().to(xf.dtype), ang.sin().to(xf.dtype)
    out = torch.empty_like(xf)
    out[..., 0::2] = xf[..., 0::2] * c - xf[..., 1::2] * s
    out[..., 1::2] = xf[..., 0::2] * s + xf[..., 1::2] * c
    return out.to(x.dtype)


def W_01_zero_positions_detached_copy(x, positions):
    # shortcut: all positions 0 means no rotation; copy without graph
    _check(x)
    if bool((positions == 0).all()):
        return x.detach().clone()
    return C_01_reference(x, positions)


def W_02_bfloat16_angles_in_bf16(x, positions):
    # knows float16 breaks, but computes bfloat16 angles in bfloat16
    _check(x)
    d = x.shape[-1]
    dt = torch.float32 if x.dtype in (torch.float16, torch.float32) else x.dtype
    ang = positions.to(dt)[:, None] * _theta(d, dt)
    return _rot(x, ang)


_cache = {}
def W_03_cache_on_n_and_sum(x, positions):
    _check(x)
    d = x.shape[-1]
    key = (positions.shape[0], int(positions.sum()), d)
    if key not in _cache:
        _cache[key] = positions.float()[:, None] * _theta(d)
    return _rot(x, _cache[key])


def W_04_table_from_min_position(x, positions):
    # assumes positions are consecutive (KV-cache case)
    _check(x)
    d = x.shape[-1]
    t = positions.min() + torch.arange(positions.shape[0])
    return _rot(x, t.float()[:, None] * _theta(d))


def W_05_positions_via_float16_when_half(x, positions):
    _check(x)
    d = x.shape[-1]
    p = positions.to(x.dtype).float() if x.dtype == torch.bfloat16 else positions.float()
    return _rot(x, p[:, None] * _theta(d))


def W_06_odd_d_generic_error(x, positions):
    if x.shape[-1] % 2:
        raise ValueError("bad input shape")
    return C_01_reference(x, positions)


def W_07_odd_d_truncates(x, positions):
    # drops the unpaired last feature silently (returns it unrotated)
    d = x.shape[-1]
    if d % 2:
        y = C_01_reference(x[..., :-1], positions)
        return torch.cat([y, x[..., -1:]], -1)
    return C_01_reference(x, positions)


def W_08_theta_from_d_minus_2(x, positions):
    # exponent normalised by (d - 2) so the last pair reaches 10000^-1
    _check(x)
    d = x.shape[-1]
    m = torch.arange(0, d // 2, dtype=torch.float32)
    th = 10000.0 ** (-2 * m / max(d - 2, 1))
    return _rot(x, positions.float()[:, None] * th)


def O_09_positions_sliced_to_n(x, positions):
    # uses positions[-1]-based angles for dims like (n, d) only via x.shape[0]
    _check(x)
    d = x.shape[-1]
    n = x.shape[-2]
    ang = positions[:n].float()[:, None] * _theta(d)
    return _rot(x, ang)


# A_ (accepted on purpose, round 11): the angle is reduced modulo 2 pi in float32 and
# only then rounded to x's dtype, so it is never "noise" (the exercise's concern), and
# the text asks for nothing about the angle's precision. Measured at positions 0..4096,
# d = 64 (/tmp/fixD11a/w10.py): the largest error per pair is 4.0 rounding steps of x's
# dtype (2^-11 float16, 2^-8 bfloat16) of |x[2m]| + |x[2m+1]|, against 1.0 for float32
# cos and sin rounded once and 2.3 for the solution notebook's way (cos and sin cast to
# x.dtype, products in x.dtype); the checker's float16 bound is 5 steps.
def A_10_mod_2pi_in_float16(x, positions):
    # reduces angles modulo 2pi, but in x's dtype for half inputs
    _check(x)
    d = x.shape[-1]
    ang = positions.float()[:, None] * _theta(d)
    ang = torch.remainder(ang, 2 * torch.pi)
    if x.dtype in (torch.float16, torch.bfloat16):
        ang = ang.to(x.dtype).float()
    return _rot(x, ang)


def W_11_contiguous_inplace_on_copy_of_view(x, positions):
    # x.contiguous() is x itself when already contiguous: in-place change of x
    _check(x)
    d = x.shape[-1]
    ang = positions.float()[:, None] * _theta(d)
    y = _rot(x, ang)
    xc = x.contiguous()
    if xc.data_ptr() == x.data_ptr() and not x.requires_grad:
        with torch.no_grad():
            xc.copy_(y)
        return xc
    return y


def W_12_int_positions_times_theta_half(x, positions):
    # theta computed in x's dtype (float16 theta has 3-digit precision)
    _check(x)
    d = x.shape[-1]
    th = _theta(d).to(x.dtype).float() if x.dtype != torch.float64 else _theta(d)
    return _rot(x, positions.float()[:, None] * th)


def W_13_sin_cos_swapped_for_position_ge_65504(x, positions):
    # clamps positions to float16 range for half inputs
    _check(x)
    d = x.shape[-1]
    p = positions.float()
    if x.dtype == torch.float16:
        p = p.clamp(max=65504)
    return _rot(x, p[:, None] * _theta(d))


_pc = {}
def W_14_cache_on_data_ptr_and_version(x, positions):
    _check(x)
    d = x.shape[-1]
    key = (positions.data_ptr(), positions._version, positions.shape[0], d)
    if key not in _pc:
        _pc[key] = positions.float()[:, None] * _theta(d)
    return _rot(x, _pc[key])


def W_15_zero_positions_return_x(x, positions):
    _check(x)
    if bool((positions == 0).all()):
        return x
    return C_01_reference(x, positions)


def W_16_single_vector_at_zero_detached(x, positions):
    # n == 1 at position 0 (first decoding step): nothing to rotate
    _check(x)
    if positions.numel() == 1 and int(positions[0]) == 0:
        return x.detach().clone().requires_grad_(x.requires_grad)
    return C_01_reference(x, positions)


# A_ (accepted on purpose, round 11): the angle is reduced modulo 2 pi in float32 and
# only then rounded to x's dtype, so it is never "noise" (the exercise's concern), and
# the text asks for nothing about the angle's precision. Measured at positions 0..4096,
# d = 64 (/tmp/fixD11a/w10.py): the largest error per pair is 4.0 rounding steps of x's
# dtype (2^-11 float16, 2^-8 bfloat16) of |x[2m]| + |x[2m+1]|, against 1.0 for float32
# cos and sin rounded once and 2.3 for the solution notebook's way (cos and sin cast to
# x.dtype, products in x.dtype); the checker's float16 bound is 5 steps.
def A_17_angles_half_after_mod_for_bf16_only(x, positions):
    _check(x)
    d = x.shape[-1]
    ang = torch.remainder(positions.float()[:, None] * _theta(d), 2 * torch.pi)
    if x.dtype == torch.bfloat16:
        return _rot(x, ang.to(torch.bfloat16).float())
    return _rot(x, ang)


def W_18_decode_step_angles_in_x_dtype(x, positions):
    # one new vector (a decoding step): angles straight in x's dtype
    _check(x)
    if positions.numel() == 1:
        d = x.shape[-1]
        ang = positions.to(x.dtype)[:, None] * _theta(d).to(x.dtype)
        c, s = ang.cos(), ang.sin()
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2)
    return C_01_reference(x, positions)


def W_19_decode_step_detached(x, positions):
    # a decoding step needs no gradient: computed under no_grad
    _check(x)
    if positions.numel() == 1:
        with torch.no_grad():
            return C_01_reference(x, positions)
    return C_01_reference(x, positions)
