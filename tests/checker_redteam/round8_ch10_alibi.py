"""Round 8 red team (writer D, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round8/D/sols/ch10_alibi.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import functools
import math
import torch

CHECK = "check_alibi_bias"


def _pow2(n):
    start = 2.0 ** (-8.0 / n)
    return [start ** (i + 1) for i in range(n)]


def _slopes(h):
    if h & (h - 1) == 0:
        return _pow2(h)
    c = 2 ** int(math.floor(math.log2(h)))
    return _pow2(c) + _pow2(2 * c)[0::2][: h - c]


def _bias(slopes, n, fill=float("-inf")):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    d = (i - j).float()
    m = torch.tensor(slopes, dtype=torch.float32)[:, None, None]
    b = -m * d
    return b.masked_fill(j > i, fill)


# ---------------------------------------------------------------- correct / odd
def C_01_paper_slopes(num_heads, n):
    return _bias(_slopes(num_heads), n)


def O_02_symmetric_upper_finite(num_heads, n):
    """-m |i - j| everywhere: the upper entries are finite (allowed)."""
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)[:, None, None]
    return (-m * (i - j).abs()).float()


def O_03_float64_slopes_zero_upper(num_heads, n):
    """Slopes as exact powers computed in float64, 0 above the diagonal."""
    h = num_heads
    def p2(k):
        return [2.0 ** (-8.0 * (i + 1) / k) for i in range(k)]
    if h & (h - 1) == 0:
        s = p2(h)
    else:
        c = 1 << (h.bit_length() - 1)
        s = p2(c) + p2(2 * c)[0::2][: h - c]
    i = torch.arange(n, dtype=torch.float64)
    b = -torch.tensor(s, dtype=torch.float64)[:, None, None] * (i[:, None] - i[None, :])
    return torch.tril(b).to(torch.float32)


# D's S04: since round 8 the checker rejects entries above the diagonal larger than 1e4 in
# absolute value (the exercise text now says so), hence W_.
def W_18_upper_filled_with_float32_max(num_heads, n):
    """Upper entries +3.4e38: finite as the text allows, but a score plus this overflows to
    +inf, and +inf + (-inf) is NaN when the causal mask is added afterwards."""
    return _bias(_slopes(num_heads), n, fill=torch.finfo(torch.float32).max)


# ---------------------------------------------------------------- wrong
@functools.lru_cache(maxsize=None)
def _pow2_cached(n):
    start = 2.0 ** (-8.0 / n)
    return [start ** (i + 1) for i in range(n)]


def W_01_cached_slope_list_mutated(num_heads, n):
    """lru_cache on the power-of-2 slope list, then .extend() on the cached list: a later
    call with the same c gets the extended (stale) list."""
    h = num_heads
    if h & (h - 1) == 0:
        s = _pow2_cached(h)
    else:
        c = 2 ** int(math.floor(math.log2(h)))
        s = _pow2_cached(c)
        s.extend(_pow2_cached(2 * c)[0::2][: h - c])
    return _bias(s, n)


_by_n = {}


def W_02_cache_keyed_on_n_only(num_heads, n):
    """Caches the bias per n: a second head count at the same n gets the old heads."""
    if n not in _by_n:
        _by_n[n] = _bias(_slopes(num_heads), n)
    return _by_n[n]


def W_03_first_h_of_next_power(num_heads, n):
    """Takes the slopes for the next power of 2 and keeps the first H."""
    h = num_heads
    c = 1 << (h - 1).bit_length()
    return _bias(_pow2(c)[:h], n)


def W_04_odd_positions_1based_wrong(num_heads, n):
    """Interleaves with [1::2] (2nd, 4th, ... slopes) instead of the 1st, 3rd, 5th."""
    h = num_heads
    if h & (h - 1) == 0:
        return _bias(_pow2(h), n)
    c = 2 ** int(math.floor(math.log2(h)))
    return _bias(_pow2(c) + _pow2(2 * c)[1::2][: h - c], n)


def W_05_round_log2(num_heads, n):
    """c = 2 ** round(log2 H) (the nearest power, not the largest below), then the first
    H slopes of the concatenation."""
    h = num_heads
    if h & (h - 1) == 0:
        return _bias(_pow2(h), n)
    c = 2 ** round(math.log2(h))
    s = (_pow2(c) + _pow2(2 * c)[0::2])[:h]
    return _bias(s, n)


def W_06_bfloat16_bias(num_heads, n):
    """Builds the bias in bfloat16 'to save memory', returns .float()."""
    s = _slopes(num_heads)
    i = torch.arange(n, dtype=torch.bfloat16)
    m = torch.tensor(s, dtype=torch.bfloat16)[:, None, None]
    b = -m * (i[:, None] - i[None, :])
    return torch.tril(b).float()


def W_07_shifted_by_one(num_heads, n):
    """-m (i - j + 1): the diagonal is -m, a shifted version."""
    b = _bias(_slopes(num_heads), n)
    m = torch.tensor(_slopes(num_heads))[:, None, None]
    return b - m


def W_08_nan_above(num_heads, n):
    """0 * (-inf) trick makes NaN above the diagonal."""
    s = _slopes(num_heads)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    causal = torch.where(j <= i, 1.0, float("inf"))
    m = torch.tensor(s)[:, None, None]
    return -m * (i - j).clamp(min=0).float() * causal


def W_09_float64_output(num_heads, n):
    """Returns float64 (slopes in float64); the exercise asks float32."""
    return _bias(_slopes(num_heads), n).double()


def W_10_precedence_bug_power_test(num_heads, n):
    """if H & (H - 1) == 0 written with the precedence of '==' over '&' done wrong:
    H & ((H - 1) == 0): only H = 1 counts as a power of 2."""
    h = num_heads
    if h & ((h - 1) == 0):
        return _bias(_pow2(h), n)
    c = 2 ** int(math.floor(math.log2(h)))
    if c == h:
        c //= 2
    if c == 0:
        return _bias(_pow2(1), n)
    return _bias(_pow2(c) + _pow2(2 * c)[0::2][: h - c], n)


def W_11_integer_exponent(num_heads, n):
    """m_h = 2 ** -(8 (h+1) // H): integer division of the exponent (right for H <= 8)."""
    h = num_heads
    def p2(k):
        return [2.0 ** -(8 * (i + 1) // k) for i in range(k)]
    if h & (h - 1) == 0:
        s = p2(h)
    else:
        c = 2 ** int(math.floor(math.log2(h)))
        s = p2(c) + p2(2 * c)[0::2][: h - c]
    return _bias(s, n)


def W_12_i_j_swapped(num_heads, n):
    """-m (j - i) below the diagonal (positive)."""
    return -_bias(_slopes(num_heads), n, fill=0.0)


def W_13_reversed_heads(num_heads, n):
    """Slopes in ascending order (smallest first)."""
    return _bias(_slopes(num_heads)[::-1], n)


def W_14_recursion_on_2c_uses_H(num_heads, n):
    """Takes the 2c slopes as _slopes(2 * H) (a misreading of '2c'), odd entries."""
    h = num_heads
    if h & (h - 1) == 0:
        return _bias(_pow2(h), n)
    c = 2 ** int(math.floor(math.log2(h)))
    extra = _pow2(2 * h)[0::2][: h - c]
    return _bias(_pow2(c) + extra, n)


def W_15_mask_fill_minus_inf_times_slope_nan_diag(num_heads, n):
    """Distance +inf above the diagonal, -m * dist = -inf, then nan_to_num(neginf=inf)
    (meant as 'hide them'): +inf above the diagonal, which the text forbids."""
    s = _slopes(num_heads)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    m = torch.tensor(s)[:, None, None]
    # learner computes a 'distance' matrix with the upper triangle set to +inf, then -m*dist
    dist = torch.where(j <= i, (i - j).float(), float("inf"))
    return (-m * dist).nan_to_num(neginf=float("inf"))


@functools.lru_cache(maxsize=None)
def S_05_lru_cache_same_tensor(num_heads, n):
    """lru_cache on (num_heads, n): returns the same tensor object every time, so a caller
    that adds a mask in place (bias += mask) corrupts every later call."""
    return _bias(_slopes(num_heads), n)


def W_16_one_head_no_bias(num_heads, n):
    """One head: 'no need for a slope', returns zeros (the slope is 2^-8)."""
    if num_heads == 1:
        return torch.zeros(1, n, n)
    return C_01_paper_slopes(num_heads, n)


def W_17_n_one_shape(num_heads, n):
    """n = 1: returns (num_heads, 1) after a squeeze."""
    return C_01_paper_slopes(num_heads, n).squeeze(-1) if n == 1 else C_01_paper_slopes(
        num_heads, n)
