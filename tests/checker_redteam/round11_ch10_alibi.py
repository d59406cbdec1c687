"""Round 11 red team (writer D, issue 12), ch10_alibi: alibi_bias (exercise 10.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round11/D/sols/ch10_alibi.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass).
Round 11 found: W_17 (the paper's rule up to 16 heads, 2^(-8k/h) above) passed, as no head
count above 16 was tried: now 20, 24 and 48 heads; W_20 (distances in float16, 2049 stored
as 2048) passed, as n stopped at 300: now one head at n = 2050 (the exercise text says so)."""
# flake8: noqa
import math
import torch
CHECK = "check_alibi_bias"


def _pow2(H):
    start = 2 ** (-8 / H)
    return [start ** (i + 1) for i in range(H)]


def slopes_ref(H):
    if H & (H - 1) == 0:
        return _pow2(H)
    c = 2 ** math.floor(math.log2(H))
    return _pow2(c) + slopes_ref(2 * c)[0::2][: H - c]


def _bias(sl, n, fill=None):
    m = torch.tensor(sl, dtype=torch.float32)[:, None, None]
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    b = -m * (i - j).float()
    if fill is not None:
        b = b.masked_fill(j > i, fill)
    return b


def C_01_reference(num_heads, n):
    return _bias(slopes_ref(num_heads), n)


def O_02_neg_inf_above(num_heads, n):
    return _bias(slopes_ref(num_heads), n, float("-inf"))


def O_03_permuted_layout(num_heads, n):
    sl = torch.tensor(slopes_ref(num_heads))
    i = torch.arange(n, dtype=torch.float32)
    d = (i[None, :] - i[:, None])  # j - i
    return (d[..., None] * sl).permute(2, 0, 1)


def W_01_odd_slopes_1based(num_heads, n):
    # "1st, 3rd, 5th" read as indices 1, 3, 5
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _pow2(2 * c)[1::2][: H - c], n)


def W_02_first_H_of_2c(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(2 * c)[:H], n)


def W_03_geometric_for_any_H(num_heads, n):
    return _bias(_pow2(num_heads), n)


def W_04_slopes_float16(num_heads, n):
    sl = torch.tensor(slopes_ref(num_heads)).half().float().tolist()
    return _bias(sl, n)


def W_05_float64_output(num_heads, n):
    m = torch.tensor(slopes_ref(num_heads), dtype=torch.float64)[:, None, None]
    i = torch.arange(n)
    return -m * (i[:, None] - i[None, :])


def W_06_finfo_max_above(num_heads, n):
    return _bias(slopes_ref(num_heads), n, torch.finfo(torch.float32).max)


def W_07_distance_bfloat16(num_heads, n):
    m = torch.tensor(slopes_ref(num_heads))[:, None, None]
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).to(torch.bfloat16).float()
    return -m * dist


def W_08_transposed(num_heads, n):
    return C_01_reference(num_heads, n).transpose(1, 2).contiguous()


def W_09_shifted_by_row(num_heads, n):
    # -m * (n - 1 - j)... i.e. softmax-equivalent shift, not the asked bias
    m = torch.tensor(slopes_ref(num_heads))[:, None, None]
    j = torch.arange(n, dtype=torch.float32)
    i = torch.arange(n, dtype=torch.float32)[:, None]
    b = m * (j - (n - 1)) + 0 * i
    return torch.where(j <= i, b, torch.full_like(b, float("-inf")))


_c = {}
def W_10_cache_slopes_ignoring_H_change(num_heads, n):
    # remembers the biggest table; slices heads from it (wrong for different H)
    key = n
    if key not in _c or _c[key].shape[0] < num_heads:
        _c[key] = C_01_reference(num_heads, n)
    return _c[key][:num_heads].clone()


def W_11_nan_above(num_heads, n):
    b = C_01_reference(num_heads, n)
    i = torch.arange(n)
    return b + torch.where(i[None, :] > i[:, None], float("nan"), 0.0)


def O_05_round_log2_then_fix(num_heads, n):
    # nearest power of 2 (round), not the largest below
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** round(math.log2(H))
    if c > H:
        c //= 2
        return _bias(_pow2(c) + _pow2(2 * c)[0::2][: H - c], n)
    return _bias(_pow2(c) + _pow2(2 * c)[0::2][: H - c], n)


def O_04_inf_times_distance_above(num_heads, n):
    m = torch.tensor(slopes_ref(num_heads))[:, None, None]
    i = torch.arange(n, dtype=torch.float32)
    d = i[:, None] - i[None, :]
    d = torch.where(d < 0, torch.full_like(d, float("inf")), d)
    return -m * d


def W_14_int_slopes_power(num_heads, n):
    # integer exponent: 2 ** (-(8 * (h+1)) // H)
    H = num_heads
    sl = [2.0 ** ((-8 * (h + 1)) // H) for h in range(H)]
    if H & (H - 1):
        c = 2 ** math.floor(math.log2(H))
        sl = [2.0 ** ((-8 * (h + 1)) // c) for h in range(c)]
        sl += [2.0 ** ((-8 * (h + 1)) // (2 * c)) for h in range(2 * c)][0::2][: H - c]
    return _bias(sl, n)


def W_15_fill_1e30_above(num_heads, n):
    # "finite" but huge positive: hidden only by an -inf mask, not by -1e9
    return _bias(slopes_ref(num_heads), n, 1e30)


def W_16_one_head_slope_half(num_heads, n):
    if num_heads == 1:
        return _bias([0.5], n)
    return C_01_reference(num_heads, n)


def W_17_geometric_above_16(num_heads, n):
    # the paper's rule coded for up to 16 heads, plain geometric beyond
    if num_heads <= 16:
        return C_01_reference(num_heads, n)
    return _bias(_pow2(num_heads), n)


def W_18_recursion_only_one_level_pow2_2c_wrong_for_3(num_heads, n):
    # c computed as H // 2 rounded down to even
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = H // 2 if (H // 2) & (H // 2 - 1) == 0 else 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _pow2(2 * c)[0::2][: H - c], n)


def W_19_one_position_float64_zeros(num_heads, n):
    # a single position has no distances: zeros (NumPy-style float64)
    if n == 1:
        return torch.zeros(num_heads, 1, 1, dtype=torch.float64)
    return C_01_reference(num_heads, n)


def W_20_large_n_distances_float16(num_heads, n):
    # distances in float16 (exact only up to 2048)
    m = torch.tensor(slopes_ref(num_heads))[:, None, None]
    i = torch.arange(n)
    return -m * (i[:, None] - i[None, :]).half().float()
