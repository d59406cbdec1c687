"""Round 7 red team (writer D, issue 12), ch10_rope: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/D/sols/ch10_rope.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_apply_rope"


def _ref(x, positions, ang_dtype=torch.float32, comp_dtype=torch.float32):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: the last feature has no partner")
    m = torch.arange(d // 2, dtype=ang_dtype)
    theta = 10000.0 ** (-2 * m / d)
    ang = positions.to(ang_dtype)[:, None] * theta
    cos, sin = ang.cos().to(comp_dtype), ang.sin().to(comp_dtype)
    x0, x1 = x[..., 0::2].to(comp_dtype), x[..., 1::2].to(comp_dtype)
    y = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)
    return y.to(x.dtype)


def C_01_float32_angles(x, positions):
    return _ref(x, positions)


def O_02_float64_angles_and_math(x, positions):
    return _ref(x, positions, torch.float64, torch.float64)


def O_03_rotate_via_stacked_pairs(x, positions):
    # (…, n, d/2, 2) pairs, rotation written as cos*x + sin*rot90(x)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"d = {d} is odd: feature {d - 1} has no partner to rotate with")
    theta = torch.pow(10000.0, -torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * theta                    # (n, d/2)
    cos = ang.cos().repeat_interleave(2, -1).float()              # (n, d)
    sin = ang.sin().repeat_interleave(2, -1).float()
    xf = x.float()
    rot = torch.stack([-xf[..., 1::2], xf[..., 0::2]], -1).flatten(-2)
    return (xf * cos + rot * sin).to(x.dtype)


def W_01_angles_in_x_dtype(x, positions):
    # angles computed in float16 when x is float16: wrong at large positions
    return _ref(x, positions, ang_dtype=x.dtype if x.dtype != torch.bfloat16 else x.dtype,
                comp_dtype=x.dtype)


def W_02_positions_cast_to_x_dtype(x, positions):
    # positions.to(x.dtype) first: float16 positions round above 2048 and overflow at 65504
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: no partner")
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.to(x.dtype).float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


_THETA = {}


def W_03_theta_cache_keyed_on_d_only(x, positions):
    # theta cached per d in the dtype of the first call (float16 first -> wrong later)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: no partner")
    if d not in _THETA:
        _THETA[d] = (10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)).to(x.dtype)
    theta = _THETA[d]
    ang = positions.float()[:, None] * theta.float()
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


_CS = {}


def W_04_cos_cache_keyed_on_first_and_last_position(x, positions):
    # assumes positions are start..end; cache keyed on (start, end, n, d)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: no partner")
    key = (int(positions[0]), int(positions[-1]), len(positions), d)
    if key not in _CS:
        theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
        ang = positions.float()[:, None] * theta
        _CS[key] = (ang.cos(), ang.sin())
    cos, sin = _CS[key]
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def W_05_returns_x_itself_when_all_positions_zero(x, positions):
    # shortcut: rotation by 0 is the identity, so return x (not a new tensor)
    if x.shape[-1] % 2:
        raise ValueError("odd d: a feature has no partner")
    if bool((positions == 0).all()):
        return x
    return _ref(x, positions)


def W_06_writes_result_into_x(x, positions):
    y = _ref(x, positions)
    with torch.no_grad():
        x.copy_(y)
    return y


def W_07_detached_via_data(x, positions):
    return _ref(x.data, positions)


def W_08_positions_relative_to_first(x, positions):
    # "relative" positions: subtract the first so the angles stay small
    return _ref(x, positions - positions[0])


def W_09_odd_d_message_silent(x, positions):
    # odd d: rotates the first d-1 features and leaves the last one as it is
    d = x.shape[-1]
    if d % 2:
        return torch.cat([_ref(x[..., :-1], positions), x[..., -1:]], -1)
    return _ref(x, positions)


def W_10_odd_d_wrong_exception(x, positions):
    assert x.shape[-1] % 2 == 0, "d must be even: a feature has no partner"
    return _ref(x, positions)


def W_11_float32_output_for_half(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd feature size {d}: no partner")
    y = _ref(x.float(), positions)
    return y


def W_12_sorted_positions(x, positions):
    # sorts positions (and forgets to unsort): same as the input only if already sorted
    return _ref(x, positions.sort().values)


def W_13_theta_base_from_d_minus_2(x, positions):
    # theta_m = 10000^(-2m/(d-2)): so the last pair has exactly 10000^-1
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: no partner")
    m = torch.arange(d // 2, dtype=torch.float32)
    theta = 10000.0 ** (-2 * m / max(d - 2, 1))
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def O_07_view_split_last_dim_is_fine(x, positions):
    # NOTE (round 7, D): written as W (view on non-contiguous x); it is right: splitting one dim is always a view
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: no partner")
    xp = x.view(*x.shape[:-1], d // 2, 2)
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = xp[..., 0].float(), xp[..., 1].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def W_15_bfloat16_angles_for_low_precision(x, positions):
    # computes in the lower of (x.dtype, float32) but bfloat16 for the half types
    lo = torch.bfloat16 if x.dtype in (torch.float16, torch.bfloat16) else torch.float32
    return _ref(x, positions, ang_dtype=torch.float32, comp_dtype=lo)


def O_05_float16_products_float32_angles(x, positions):
    # angles in float32, cos/sin rounded to x's dtype, products in x's dtype
    return _ref(x, positions, ang_dtype=torch.float32, comp_dtype=x.dtype)


def W_16_float32_output_for_bfloat16(x, positions):
    y = _ref(x, positions)
    return y.float() if x.dtype == torch.bfloat16 else y


_IDC = {}


def W_17_cos_cache_keyed_on_id_of_positions(x, positions):
    # cos/sin cached per positions tensor (by id) and d: ids are reused after a tensor dies
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: a feature has no partner")
    key = (id(positions), len(positions), d)
    if key not in _IDC:
        theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
        ang = positions.float()[:, None] * theta
        _IDC[key] = (ang.cos(), ang.sin())
    cos, sin = _IDC[key]
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


_FP = {}


def W_18_cos_cache_keyed_on_fingerprint(x, positions):
    # cache keyed on (n, d, sum, min, max) of the positions: permutations collide
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: a feature has no partner")
    key = (len(positions), d, int(positions.sum()), int(positions.min()), int(positions.max()))
    if key not in _FP:
        theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
        ang = positions.float()[:, None] * theta
        _FP[key] = (ang.cos(), ang.sin())
    cos, sin = _FP[key]
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def O_08_angles_sliced_to_n_noop(x, positions):
    # NOTE (round 7, D): written as W; the slice is a no-op, so it is right
    # angles shaped (n, 1, d/2) "to broadcast over heads": right when x is (n, d) only...
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: a feature has no partner")
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta
    if x.dim() == 4:                                   # (b, h, n, d) -> positions of dim 0?
        ang = ang[:x.shape[-2]]
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)


def O_06_theta_via_exp_log(x, positions):
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"x has an odd number of features ({d}): the last has no partner")
    theta = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = positions.to(torch.float32).unsqueeze(-1) * theta
    c, s = torch.cos(ang), torch.sin(ang)
    xe, xo = x[..., ::2].float(), x[..., 1::2].float()
    out = torch.empty(x.shape, dtype=torch.float32)
    out[..., ::2] = xe * c - xo * s
    out[..., 1::2] = xe * s + xo * c
    return out.to(x.dtype)


_OUT = {}


def W_20_output_buffer_per_shape(x, positions):
    y = _ref(x, positions)
    if x.requires_grad:
        return y
    key = (tuple(x.shape), x.dtype)
    if key not in _OUT:
        _OUT[key] = torch.empty_like(y)
    return _OUT[key].copy_(y)


def W_21_odd_d_message_says_nothing(x, positions):
    if x.shape[-1] % 2:
        raise ValueError(f"apply_rope: bad input shape {tuple(x.shape)}")
    return _ref(x, positions)


def S_22_complex_numbers(x, positions):
    # the text says: use cos and sin, not complex numbers
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: the last feature has no partner")
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    ang = positions.double()[:, None] * theta
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    z = z * torch.polar(torch.ones_like(ang), ang).to(z.dtype)
    return torch.view_as_real(z).flatten(-2).to(x.dtype)


def W_22_positions_squeezed(x, positions):
    # squeeze "in case positions comes as (1, n)": a single position becomes 0-d
    positions = positions.squeeze()
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"odd d={d}: the last feature has no partner")
    theta = 10000.0 ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    ang = positions.float()[:, None] * theta            # 0-d for one position: IndexError
    cos, sin = ang.cos(), ang.sin()
    x0, x1 = x[..., 0::2].float(), x[..., 1::2].float()
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2).to(x.dtype)
