"""Round 13 red team (writer E, issue 12), ch10_rope: check_apply_rope; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch10_rope.py (writer's note: right and wrong RoPE with cos and sin.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: W_08 (float64 x rotated in float32, inf for |x| ~ 1e40) is renamed A_08
(standing ruling: float64 rotated in float32 is right; the text asks for no float64
accuracy). No other wrong entry passed.
"""
# flake8: noqa
import torch
CHECK = "check_apply_rope"


def _angles(positions, d, dtype=torch.float64):
    if d % 2:
        raise ValueError(f"RoPE pairs features 2m and 2m+1: the feature size d={d} is odd")
    m = torch.arange(d // 2, dtype=torch.float64, device=positions.device)
    theta = 10000.0 ** (-2 * m / d)
    return (positions.to(torch.float64)[:, None] * theta).to(dtype)


def _rot(x, a):
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().to(w), a.sin().to(w)
    x0, x1 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(-2)
    return y.to(x.dtype)


def C_01_reference(x, positions):
    return _rot(x, _angles(positions, x.shape[-1]))


def C_02_float32_angles(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError("odd feature size: feature d-1 has no partner to rotate with")
    theta = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    a = positions.float()[:, None] * theta
    return _rot(x, a)


def O_03_slice_assign(x, positions):
    """Writes into a fresh tensor by slices (autograd handles it)."""
    a = _angles(positions, x.shape[-1])
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().to(w), a.sin().to(w)
    y = torch.empty(x.shape, dtype=w)
    y[..., 0::2] = x[..., 0::2].to(w) * c - x[..., 1::2].to(w) * s
    y[..., 1::2] = x[..., 0::2].to(w) * s + x[..., 1::2].to(w) * c
    return y.to(x.dtype)


_C1 = {}


def W_04_cache_first_position(x, positions):
    """Caches the angles on (n, d, positions[0]) assuming consecutive positions: [5, 9, 7]
    after [5, 6, 7] reuses the angles of 6 for 9."""
    key = (len(positions), x.shape[-1], int(positions[0]))
    if key not in _C1:
        _C1[key] = _angles(positions, x.shape[-1])
    return _rot(x, _C1[key])


_C2 = {}


def W_05_cache_first_last(x, positions):
    """Caches the angles on (n, d, first, last position): unsorted positions with the same
    ends as an earlier call ([0, 2, 1, 3] after [0, 1, 2, 3]) reuse stale angles."""
    key = (len(positions), x.shape[-1], int(positions[0]), int(positions[-1]))
    if key not in _C2:
        _C2[key] = _angles(positions, x.shape[-1])
    return _rot(x, _C2[key])


_C3 = {}


def W_06_cache_sum(x, positions):
    """Caches on (n, d, sum of positions): a permutation of earlier positions, or [0, 3]
    after [1, 2], hits the cache."""
    key = (len(positions), x.shape[-1], int(positions.sum()))
    if key not in _C3:
        _C3[key] = _angles(positions, x.shape[-1])
    return _rot(x, _C3[key])


def W_07_vague_error(x, positions):
    """Odd d: raises ValueError('bad input') that does not say why."""
    if x.shape[-1] % 2:
        raise ValueError("bad input")
    return C_01_reference(x, positions)


def A_08_float64_product_in_float32(x, positions):
    """float64 x is rotated in float32 (cos, sin and the products): float64 entries beyond
    float32's range (|x| = 1e40) become inf, below it (1e-50) become 0.
    Accepted (round 13, lead's ruling; written W_08): float64 x rotated in float32 is ruled
    right (round 12's A_17), and exercise 10.1 asks for no float64 accuracy or range (it
    asks for the shape and dtype of x); entries beyond float32's range are the same fault
    seen at its extreme."""
    a = _angles(positions, x.shape[-1]).float()
    c, s = a.cos(), a.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)


def W_09_zero_positions_view(x, positions):
    """At every position 0 returns x[...] (a view of x, not a new tensor): writing into the
    result writes into x."""
    if positions.numel() and bool((positions == 0).all()):
        return x[...]
    return C_01_reference(x, positions)


def W_10_theta_base_float32_pow(x, positions):
    """theta = 10000 ** (-2m/d) computed as exp(-2m/d * ln 10000) in bfloat16 for bfloat16 x."""
    d = x.shape[-1]
    m = torch.arange(d // 2, dtype=torch.float32)
    if x.dtype == torch.bfloat16:
        theta = torch.exp((-2 * m / d * 9.210340371976184).to(torch.bfloat16)).float()
    else:
        theta = torch.exp(-2 * m / d * 9.210340371976184)
    return _rot(x, positions.double()[:, None] * theta.double())


def W_11_position_interpolation(x, positions):
    """Linear position interpolation beyond 4096 positions (positions * 4096 / max+1):
    wrong at large positions (position 10000 rotated like 4096 * 10000/10001)."""
    mx = int(positions.max()) + 1 if positions.numel() else 1
    pos = positions.double() * (4096 / mx) if mx > 4096 else positions.double()
    d = x.shape[-1]
    m = torch.arange(d // 2, dtype=torch.float64)
    return _rot(x, pos[:, None] * 10000.0 ** (-2 * m / d))


def W_12_neg_zero_position_shortcut(x, positions):
    """Skips the rotation where the angle is below 1e-3 (cos ~ 1, sin ~ angle dropped):
    pairs with small t*theta (the high pairs, t*theta_m < 1e-3) are not rotated."""
    a = _angles(positions, x.shape[-1])
    a = torch.where(a.abs() < 1e-3, torch.zeros_like(a), a)
    return _rot(x, a)


def W_13_cos_sin_float16_table(x, positions):
    """cos/sin tables stored in float16 for every dtype (memory): float32 x gets 5e-4
    relative error."""
    a = _angles(positions, x.shape[-1])
    w = torch.promote_types(x.dtype, torch.float32)
    c, s = a.cos().half().to(w), a.sin().half().to(w)
    x0, x1 = x[..., 0::2].to(w), x[..., 1::2].to(w)
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2).to(x.dtype)


def A_14_angles_mod_2pi_float16(x, positions):
    """Angles from positions.float() * theta with the product reduced mod 2*pi in float16
    for float16 x ('fits the dtype'): angle errors of 1e-3 rad at every position."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: the last feature has no partner")
    m = torch.arange(d // 2, dtype=torch.float32)
    theta = 10000.0 ** (-2 * m / d)
    a = positions.float()[:, None] * theta
    if x.dtype == torch.float16:
        a = torch.remainder(a, 2 * torch.pi).half().float()
    return _rot(x, a)


def W_15_n_from_x(x, positions):
    """Uses positions[:1] + arange(n) (assumes consecutive positions): wrong for unsorted."""
    n = x.shape[-2]
    pos = positions[0] + torch.arange(n, device=positions.device)
    return C_01_reference(x, pos)


def W_16_grad_through_float16_table_detach(x, positions):
    """For float16/bfloat16 x, rotates under no_grad ('inference precision') then attaches
    x - x.detach(): the gradient is the identity instead of the transposed rotation."""
    if x.dtype in (torch.float16, torch.bfloat16):
        with torch.no_grad():
            y = C_01_reference(x, positions)
        return y + (x - x.detach())
    return C_01_reference(x, positions)


def W_17_odd_d_check_only_2d(x, positions):
    """Checks oddness as x.size(1) % 2 (the feature dim of a 2-D x): 3-D and 4-D x with odd
    d get no ValueError (they crash in stack/flatten or give garbage)."""
    if x.size(1) % 2:
        raise ValueError("odd feature size: a feature has no partner")
    d = x.shape[-1]
    if d % 2:
        d2 = d - 1
        y = C_01_reference(x[..., :d2], positions)
        return torch.cat([y, x[..., d2:]], -1)
    return C_01_reference(x, positions)


def W_18_odd_d_passthrough(x, positions):
    """Odd d: leaves the last feature unrotated instead of raising ValueError."""
    d = x.shape[-1]
    if d % 2:
        y = C_01_reference(x[..., :d - 1], positions)
        return torch.cat([y, x[..., d - 1:]], -1)
    return C_01_reference(x, positions)


def W_19_large_positions_int_mod(x, positions):
    """Reduces positions mod 2*pi*10000 rounded (62832) 'periodicity': theta_0 = 1 has
    period 2*pi, not integer, so position 70000 is rotated like 7168."""
    pos = positions % 62832
    return C_01_reference(x, pos)


def A_21_float16_native_products(x, positions):
    """float16 x: cos and sin rounded to float16 and the products in float16 (native)."""
    a = _angles(positions, x.shape[-1])
    c, s = a.cos().to(x.dtype), a.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], -1).flatten(-2)


def W_22_odd_d_assertion(x, positions):
    """Odd d: assert d % 2 == 0 (AssertionError, not the ValueError the text asks for)."""
    assert x.shape[-1] % 2 == 0, "d must be even"
    return C_01_reference(x, positions)


def W_20_x_dtype_positions_bf16_only(x, positions):
    """positions converted to x's dtype only for bfloat16 x: position 257 -> 256."""
    if x.dtype == torch.bfloat16:
        positions = positions.to(torch.bfloat16).to(torch.int64)
    return C_01_reference(x, positions)
