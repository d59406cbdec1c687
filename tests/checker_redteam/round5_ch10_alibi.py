"""Round 5 red team (writer R5-C, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch10_alibi.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import functools
import torch

CHECK = "check_alibi_bias"


def _slopes(H):
    if H & (H - 1) == 0:
        return [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]
    c = 2 ** int(math.floor(math.log2(H)))
    return _slopes(c) + _slopes(2 * c)[0::2][: H - c]


def _bias(slopes, n, dtype=torch.float32):
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).to(dtype)
    m = torch.tensor(slopes, dtype=dtype)
    return -m[:, None, None] * dist


def C_01_recursive_slopes(num_heads, n):
    return _bias(_slopes(num_heads), n).float()


def O_02_symmetric_abs_distance(num_heads, n):
    i = torch.arange(n, dtype=torch.float32)
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return -m[:, None, None] * (i[:, None] - i[None, :]).abs()


def O_03_minus_inf_above_float64_slopes(num_heads, n):
    b = _bias(_slopes(num_heads), n, torch.float64)
    b = b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return b.float()


def W_01_first_h_of_next_power(num_heads, n):
    P = 2 ** math.ceil(math.log2(num_heads))
    return _bias(_slopes(P)[:num_heads], n)


def W_02_even_positions_off_by_one(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        c = 2 ** int(math.floor(math.log2(H)))
        s = _slopes(c) + _slopes(2 * c)[1::2][: H - c]
    return _bias(s, n)


def W_03_positive_bias(num_heads, n):
    return -_bias(_slopes(num_heads), n)


def W_05_nan_above_diagonal(num_heads, n):
    b = _bias(_slopes(num_heads), n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("nan"))


def W_06_float64(num_heads, n):
    return _bias(_slopes(num_heads), n, torch.float64)


def W_07_exponent_h_not_h_plus_1(num_heads, n):
    H = num_heads
    def sl(H):
        if H & (H - 1) == 0:
            return [2.0 ** (-8.0 * h / H) for h in range(H)]
        c = 2 ** int(math.floor(math.log2(H)))
        return sl(c) + sl(2 * c)[0::2][: H - c]
    return _bias(sl(H), n)


def W_08_shifted_by_row(num_heads, n):
    # -m (i - j) + m i = m j: the same softmax after the causal mask, but shifted
    j = torch.arange(n, dtype=torch.float32)
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return (m[:, None, None] * j[None, None, :]).expand(num_heads, n, n).clone()


def W_09_rounded_power_of_two(num_heads, n):
    H = num_heads
    c = 2 ** round(math.log2(H))
    if c >= H:
        return _bias(_slopes(c)[:H], n)
    return _bias(_slopes(c) + _slopes(2 * c)[0::2][: H - c], n)


def W_04_first_of_2c_not_every_other(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_slopes(H), n)
    c = 2 ** int(math.floor(math.log2(H)))
    return _bias(_slopes(c) + _slopes(2 * c)[: H - c], n)


def W_19_power_formula_for_any_h(num_heads, n):
    H = num_heads
    return _bias([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)], n)


_CACHE = {}


def W_10_cache_ignores_n(num_heads, n):
    if num_heads not in _CACHE:
        _CACHE[num_heads] = _bias(_slopes(num_heads), n)
    return _CACHE[num_heads]


def W_11_shifted_by_last_row(num_heads, n):
    # bias relative to the last query: -m (n - 1 - j)
    j = torch.arange(n, dtype=torch.float32)
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return (-m[:, None, None] * (n - 1 - j)).expand(num_heads, n, n).clone()


def W_12_slopes_reversed(num_heads, n):
    return _bias(_slopes(num_heads)[::-1], n)


def W_13_computed_in_float16(num_heads, n):
    return _bias(_slopes(num_heads), n, torch.float16).float()


def W_14_interleaved_slopes_first(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        c = 2 ** int(math.floor(math.log2(H)))
        s = _slopes(2 * c)[0::2][: H - c] + _slopes(c)
    return _bias(s, n)


def W_15_all_slopes_of_2c_sorted(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        c = 2 ** int(math.floor(math.log2(H)))
        s = sorted(_slopes(c) + _slopes(2 * c)[0::2][: H - c], reverse=True)
    return _bias(s, n)


def W_16_upper_triangle_zero_lower_transposed(num_heads, n):
    # indexes [h, j, i]: the bias for key i and query j
    return _bias(_slopes(num_heads), n).transpose(1, 2).contiguous()


def W_17_integer_slope_exponent(num_heads, n):
    H = num_heads
    def sl(H):
        if H & (H - 1) == 0:
            return [2.0 ** (-(8 // H) * (h + 1)) for h in range(H)]
        c = 2 ** int(math.floor(math.log2(H)))
        return sl(c) + sl(2 * c)[0::2][: H - c]
    return _bias(sl(H), n)


def O_04_upper_minus_inf_times_slope_was_W18(num_heads, n):
    i = torch.arange(n, dtype=torch.float32)
    dist = i[:, None] - i[None, :]
    dist = torch.where(dist >= 0, dist, torch.full_like(dist, float("inf")))
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    m = torch.cat([m[:-1], torch.zeros(1)]) if num_heads > 64 else m
    return -m[:, None, None] * dist


def W_20_zero_means_masked_diagonal_lost(num_heads, n):
    b = torch.tril(_bias(_slopes(num_heads), n))
    return b.masked_fill(b == 0, float("-inf"))


def W_21_plus_inf_above_diagonal(num_heads, n):
    # +inf is "a number" to the learner; but +inf + (-inf) from the causal mask is NaN
    b = _bias(_slopes(num_heads), n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("inf"))
