"""Round 13 red team (writer E, issue 12), ch10_alibi: check_alibi_bias; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch10_alibi.py (writer's note: right and wrong ALiBi biases.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: none (every wrong entry was rejected on the snapshot).
"""
# flake8: noqa
import math
import torch
CHECK = "check_alibi_bias"


def _slopes(h):
    c = 1 << (h.bit_length() - 1)
    s = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    if c < h:
        s += _slopes(2 * c)[0::2][:h - c]
    return s


def _bias(slopes, n, fill=None):
    m = torch.tensor(slopes, dtype=torch.float64)[:, None, None]
    i = torch.arange(n, dtype=torch.float64)
    b = -m * (i[:, None] - i[None, :])
    if fill is not None:
        b = b.masked_fill(i[None, :] > i[:, None], fill)
    return b.float()


def C_01_reference(num_heads, n):
    return _bias(_slopes(num_heads), n)


def C_02_minus_inf_above(num_heads, n):
    return _bias(_slopes(num_heads), n, float("-inf"))


def O_03_symmetric_above(num_heads, n):
    """-m |i - j|: moderate finite entries above the diagonal."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)[:, None, None]
    i = torch.arange(n)
    return -m * (i[:, None] - i[None, :]).abs().float()


def W_04_sorted_slopes(num_heads, n):
    """Reads 'interleave' as sorting all slopes in decreasing order: 12 heads get the same
    set in another order (head 8's slope 2^-0.5 moves to head 0)."""
    return _bias(sorted(_slopes(num_heads), reverse=True), n)


def W_05_nearest_power(num_heads, n):
    """c = 2 ** round(log2 H) (nearest power, not largest below): H=6 gives c=8."""
    c = 2 ** round(math.log2(num_heads))
    if c >= num_heads:
        s = [2 ** (-8 * k / c) for k in range(1, c + 1)][:num_heads]
    else:
        s = _slopes(c) + _slopes(2 * c)[0::2][:num_heads - c]
    return _bias(s, n)


def W_06_plus_huge_above(num_heads, n):
    """Fills above the diagonal with +1e30 (finite, but huge positive: not 'moderate')."""
    return _bias(_slopes(num_heads), n, 1e30)


def W_07_one_head_half(num_heads, n):
    """Special case H=1 with the slope 1/2 (the last slope for 2 heads... a misreading)."""
    s = [0.5] if num_heads == 1 else _slopes(num_heads)
    return _bias(s, n)


def W_08_slopes_float16(num_heads, n):
    """Slopes stored in float16: 2^(-8/12*...) rounded to 11 bits; at distance 2049 the
    bias is off by up to 0.25 * m."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float16).float()[:, None, None]
    i = torch.arange(n, dtype=torch.float32)
    return -m * (i[:, None] - i[None, :])


def W_09_float64_result(num_heads, n):
    """Returns float64 (the text asks for float32)."""
    return _bias(_slopes(num_heads), n).double()


_CACHE = {}


def W_10_cache_on_heads_slice_end(num_heads, n):
    """Caches one tensor per head count and slices [:, :n, :n]; the first call's n is kept,
    so a larger n later gets a smaller tensor."""
    if num_heads not in _CACHE:
        _CACHE[num_heads] = C_01_reference(num_heads, n)
    return _CACHE[num_heads][:, :n, :n]


_SHARED = {}


def A_11_shared_cached_object(num_heads, n):
    """Returns one cached tensor per (H, n): a caller that masks it in place
    (bias.masked_fill_(mask, -inf) or += scores) changes every later result.
    A_: the same ruling as the causal mask's cached shared object; the text does not ask
    for a new tensor."""
    key = (num_heads, n)
    if key not in _SHARED:
        _SHARED[key] = C_01_reference(num_heads, n)
    return _SHARED[key]


def W_12_distance_bf16(num_heads, n):
    """Distances in bfloat16 (8-bit mantissa): i - j = 257 becomes 256."""
    i = torch.arange(n, dtype=torch.bfloat16)
    dist = (i[:, None] - i[None, :]).float()
    m = torch.tensor(_slopes(num_heads))[:, None, None]
    return -m * dist


def W_13_odd_slopes_from_2c_wrong_offset(num_heads, n):
    """Takes [1::2] of the 2c slopes (2nd, 4th, ...: already the c slopes)."""
    h = num_heads
    c = 1 << (h.bit_length() - 1)
    s = _slopes(c)
    if c < h:
        s = s + _slopes(2 * c)[1::2][:h - c]
    return _bias(s, n)


def W_14_geometric_in_h(num_heads, n):
    """2^(-8(h+1)/H) for every H, powers of 2 or not."""
    return _bias([2 ** (-8 * (k + 1) / num_heads) for k in range(num_heads)], n)


def W_15_slopes_recurse_2c_not_interleaved(num_heads, n):
    """Extra heads get the first H - c slopes for 2c (1st, 2nd, 3rd, not 1st, 3rd, 5th)."""
    h = num_heads
    c = 1 << (h.bit_length() - 1)
    s = _slopes(c)
    if c < h:
        s = s + _slopes(2 * c)[:h - c]
    return _bias(s, n)


def W_16_nan_above(num_heads, n):
    """-m * (i - j) * mask with mask = inf above (0 * inf = NaN on... ) -> NaN above."""
    b = C_01_reference(num_heads, n)
    i = torch.arange(n)
    return b.masked_fill(i[None, :] > i[:, None], float("nan"))


def W_17_max_n_cap(num_heads, n):
    """Distances clamped at 2048 (a 'max context' table): position pairs farther apart than
    2048 get -m * 2048."""
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).clamp(max=2048).double()
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)[:, None, None]
    return (-m * dist).float()


def W_18_diag_tiny_shift(num_heads, n):
    """Subtracts m/2 so the diagonal is not 'free' (a shifted version)."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)[:, None, None]
    return (C_01_reference(num_heads, n).double() - m * 0.5).float()


def W_19_slope_via_float32_pow_2c_exponent_bug(num_heads, n):
    """Non-power H: the extra slopes computed as 2^(-8(2k+1)/c) (forgets the 2c in the
    denominator, i.e. exponent doubled)."""
    h = num_heads
    c = 1 << (h.bit_length() - 1)
    s = _slopes(c) + [2 ** (-8 * (2 * k + 1) / c) for k in range(h - c)]
    return _bias(s, n)


def W_20_plus_inf_above(num_heads, n):
    """-m * (i - j) with the above-diagonal distance set to -inf before multiplying:
    -m * (-inf) = +inf above the diagonal."""
    i = torch.arange(n, dtype=torch.float64)
    dist = (i[:, None] - i[None, :]).masked_fill(i[None, :] > i[:, None], float("-inf"))
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)[:, None, None]
    return (-m * dist).float()
