"""Round 12 red team (writer D, issue 12), ch10_rope: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/D/sols/ch10_rope.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
The red team's snapshot accepted W_07 and W_19 (a table of 2**17 = 131072 angles, wrapped or
indexed); the checker now has a float32 case at positions 131072 to 10**6: both rejected
(W_07 told that its angles wrap at 2**17). W17 (float64 x rotated in float32) is accepted on
purpose as A_17 (see its comment).
"""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _theta(d, device=None):
    return 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32, device=device) / d)


def _rot(x, ang):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = xf[..., 0::2], xf[..., 1::2]
    y = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    return y.to(x.dtype)


def C_01_reference_like(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"apply_rope needs an even feature size d, got d = {d}")
    ang = positions.to(torch.float32)[:, None] * _theta(d, x.device)[None, :]
    return _rot(x, ang)


def O_02_float64_angles(x, positions):
    """More accurate angles (float64), cast to float32 for the rotation."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}: feature {d-1} has no partner")
    th = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = (positions.to(torch.float64)[:, None] * th).to(torch.float32)
    return _rot(x, ang)


def O_03_theta_exp_log(x, positions):
    """theta_m = exp(-2m/d * ln 10000): the same number up to float32 rounding."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    th = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    ang = positions.float()[:, None] * th
    return _rot(x, ang)


def O_04_half_rotation_in_half(x, positions):
    """cos/sin computed in float32 then cast to x's dtype; the rotation in x's dtype."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    ang = positions.float()[:, None] * _theta(d)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)


def W_05_returns_x_at_position_zero(x, positions):
    """Shortcut: every angle 0 means no rotation, so return x itself (not a new tensor)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    if bool((positions == 0).all()):
        return x
    return C_01_reference_like(x, positions)


_TABLE = {}


def _table(d, max_len):
    if d not in _TABLE:
        t = torch.arange(max_len, dtype=torch.float32)
        _TABLE[d] = torch.outer(t, _theta(d))
    return _TABLE[d]


def W_06_table_of_32768_positions(x, positions):
    """A precomputed angle table (max_position_embeddings = 32768): positions beyond
    the table raise IndexError; negative ones index from the end."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    return _rot(x, _table(d, 32768)[positions])


_TABLE2 = {}


def W_07_table_of_131072_positions_wraps(x, positions):
    """A table of 2**17 positions, indexed with positions % 2**17 to avoid IndexError."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    if d not in _TABLE2:
        _TABLE2[d] = torch.outer(torch.arange(2 ** 17, dtype=torch.float32), _theta(d))
    return _rot(x, _TABLE2[d][positions % 2 ** 17])


def O_08_view_pairs_last_dim_split(x, positions):
    """x.view(..., d/2, 2): a transposed x raises a RuntimeError."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    ang = positions.float()[:, None] * _theta(d)
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    pairs = xf.view(*x.shape[:-1], d // 2, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    c, s = ang.cos(), ang.sin()
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).view(x.shape).to(x.dtype)


def W_09_positions_relative_to_first(x, positions):
    """Angles from positions - positions.min(): scores are unchanged (relative), but the
    rotated vectors are not the exercise's."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    return C_01_reference_like(x, positions - positions.min())


def W_10_positions_in_x_dtype(x, positions):
    """positions.to(x.dtype) before the float32 angles: float16 rounds positions above
    2048 and makes inf above 65504; bfloat16 rounds above 256."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    ang = positions.to(x.dtype).float()[:, None] * _theta(d)
    return _rot(x, ang)


def W_11_theta_over_d_minus_2(x, positions):
    """theta_m = 10000^(-2m/(d-2)): the last pair gets exactly 1/10000 (linspace habit)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    th = 10000.0 ** (-torch.linspace(0, 1, d // 2)) if d > 2 else torch.ones(1)
    return _rot(x, positions.float()[:, None] * th)


def W_12_rotate_half_layout(x, positions):
    """Pairs (m, m + d/2), the GPT-NeoX / Llama HF layout, not (2m, 2m+1)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    ang = positions.float()[:, None] * _theta(d)
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    x0, x1 = xf[..., : d // 2], xf[..., d // 2:]
    c, s = ang.cos(), ang.sin()
    return torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), -1).to(x.dtype)


def W_13_clockwise(x, positions):
    return C_01_reference_like(x, -positions)


def W_14_modifies_x_in_place(x, positions):
    """Writes the rotated pairs back into x (and returns it)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    y = C_01_reference_like(x, positions)
    with torch.no_grad():
        x.copy_(y)
    return y


_CACHE = {}


def W_15_cache_keyed_on_d_n_first_last(x, positions):
    """cos/sin memoised on (d, n, first position, last position)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    key = (d, positions.numel(), int(positions[0]), int(positions[-1]))
    if key not in _CACHE:
        _CACHE[key] = positions.float()[:, None] * _theta(d)
    return _rot(x, _CACHE[key])


def W_16_odd_d_drops_last_feature(x, positions):
    """An odd d keeps the last feature unrotated instead of raising."""
    d = x.shape[-1]
    if d % 2:
        y = C_01_reference_like(x[..., :-1], positions)
        return torch.cat((y, x[..., -1:]), -1)
    return C_01_reference_like(x, positions)


# A_ (the standing ruling that float32 angles are right for a float64 x, the industry
# standard): rotating in float32 is about 3.2e-7 from a float64 rotation with float32 angles,
# far inside the differences between right angle formulas (9e-6 to 7e-4), so no tolerance
# that accepts those can reject it.
def A_17_float64_rotation_in_float32(x, positions):
    """float64 x computed wholly in float32 (known category; kept as a control)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    return C_01_reference_like(x.float(), positions).to(x.dtype)


def W_18_positions_as_int32_times_theta_int(x, positions):
    """positions * (10000 ** (-2m/d)) computed with positions.int() and the product in
    float16 for half x."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    th = _theta(d).to(x.dtype) if x.dtype in (torch.float16, torch.bfloat16) else _theta(d)
    ang = positions.int()[:, None] * th
    return _rot(x, ang.float())


_TABLE3 = {}


def W_19_llama_freqs_table_131072(x, positions):
    """Llama's reference code: precompute the angles for max_seq_len * 2 = 131072
    positions once and index them; a position >= 131072 raises IndexError."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d = {d}")
    if d not in _TABLE3:
        _TABLE3[d] = torch.outer(torch.arange(131072, dtype=torch.float32), _theta(d))
    return _rot(x, _TABLE3[d][positions])
