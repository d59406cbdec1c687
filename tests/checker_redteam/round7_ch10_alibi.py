"""Round 7 red team (writer D, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/D/sols/ch10_alibi.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_alibi_bias"


def _p2(n):
    start = 2 ** (-8 / n)
    return [start ** (i + 1) for i in range(n)]


def _slopes(H):
    if math.log2(H).is_integer():
        return _p2(H)
    c = 2 ** math.floor(math.log2(H))
    return _p2(c) + _slopes(2 * c)[0::2][:H - c]


def _bias(slopes, n, above=None):
    m = torch.tensor(slopes, dtype=torch.float32)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    b = -m[:, None, None] * (i - j).float()
    if above is not None:
        b = b.masked_fill(j > i, above)
    return b


def C_01_paper_code(num_heads, n):
    return _bias(_slopes(num_heads), n, float("-inf"))


def O_02_symmetric_abs_distance_above(num_heads, n):
    # above the diagonal: -m |i - j| (finite, any finite number is allowed there)
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs().float()
    return -m[:, None, None] * d


def O_03_float64_everything_then_cast(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).double()
    return (-m[:, None, None] * d).tril().float()          # 0 above the diagonal


def O_04_torch_pow_slopes_direct_formula(num_heads, n):
    # slopes from torch.pow in float32 with exponents -8k/c, not start ** k
    H = num_heads
    c = 1 << (H.bit_length() - 1)
    s = torch.pow(2.0, -8.0 * torch.arange(1, c + 1, dtype=torch.float32) / c)
    if c < H:
        s2 = torch.pow(2.0, -8.0 * torch.arange(1, 2 * c + 1, dtype=torch.float32) / (2 * c))
        s = torch.cat([s, s2[0::2][:H - c]])
    i = torch.arange(n, dtype=torch.float32)
    return s[:, None, None] * (i[None, :] - i[:, None])


def W_01_plus_inf_above(num_heads, n):
    return _bias(_slopes(num_heads), n, float("inf"))


def W_02_round_for_power_of_two(num_heads, n):
    # c = 2 ** round(log2 H): the *nearest* power of 2, above H for 6, 12, 3 ...
    H = num_heads
    c = 2 ** round(math.log2(H))
    if c == H:
        s = _p2(H)
    elif c > H:
        s = _p2(c)[:H]
    else:
        s = _p2(c) + _p2(2 * c)[0::2][:H - c]
    return _bias(s, n, float("-inf"))


def W_03_sorted_descending(num_heads, n):
    # sorts the slopes so the heads go from steep to flat
    return _bias(sorted(_slopes(num_heads), reverse=True), n, float("-inf"))


def W_04_last_of_interleaved(num_heads, n):
    H = num_heads
    c = 1 << (H.bit_length() - 1)
    s = _p2(c)
    if c < H:
        s = s + _p2(2 * c)[0::2][-(H - c):]
    return _bias(s, n, float("-inf"))


def W_05_interleave_from_2H(num_heads, n):
    H = num_heads
    c = 1 << (H.bit_length() - 1)
    s = _p2(c)
    if c < H:
        s = s + _p2(2 * H)[0::2][:H - c]
    return _bias(s, n, float("-inf"))


def W_06_float16_arithmetic(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float16)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).half()
    return (-m[:, None, None] * d).float()


def W_07_returns_float64(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).double()
    return -m[:, None, None] * d


_CACHE = {}


def W_08_cache_keyed_on_n_only(num_heads, n):
    # the distance table times the slopes, cached by n (heads forgotten in the key)
    if n not in _CACHE:
        _CACHE[n] = _bias(_slopes(num_heads), n, float("-inf"))
    return _CACHE[n]


def W_09_nan_above_via_log_of_mask(num_heads, n):
    # -m (i - j) + log(causal): above the diagonal -m(i-j) is positive, + -inf = -inf OK,
    # but the learner multiplies instead: -m (i - j) * causal / causal -> NaN above
    b = _bias(_slopes(num_heads), n)
    causal = torch.ones(n, n).tril()
    return b * causal / causal


def W_10_shifted_mj(num_heads, n):
    # m * j - m * (n - 1): equal to -m(i - j) only on the last row
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    j = torch.arange(n).float()
    b = (m[:, None] * (j - (n - 1)))[:, None, :].expand(num_heads, n, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


def W_11_uint8_distances(num_heads, n):
    # distances in uint8 to save memory: wrap at 256
    i = torch.arange(n).to(torch.uint8)
    d = (i[:, None] - i[None, :]).float()
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return (-m[:, None, None] * d).tril()


def W_12_precomputed_256(num_heads, n):
    # a table for 256 positions, cut to n; beyond 256 the distances are clamped
    L = 256
    i = torch.arange(n).clamp(max=L - 1)
    d = (i[:, None] - i[None, :]).float()
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return (-m[:, None, None] * d).tril()


def W_13_odd_slopes_first_for_2c(num_heads, n):
    # interleave with 2nd, 4th, ... (1-based even) slopes for 2c
    H = num_heads
    c = 1 << (H.bit_length() - 1)
    s = _p2(c)
    if c < H:
        s = s + _p2(2 * c)[1::2][:H - c]
    return _bias(s, n, float("-inf"))


def W_14_heads_last_layout(num_heads, n):
    # (n, n, H) reshaped (not permuted) to (H, n, n): right only for one head
    b = _bias(_slopes(num_heads), n, None).permute(1, 2, 0).contiguous()
    return b.reshape(num_heads, n, n).tril()


def O_05_bitmask_power_of_two_test(num_heads, n):
    # NOTE (round 7, D): written as W (C precedence); in Python & binds tighter than ==, so it is right
    # `H & (H - 1) == 0` is H & ((H - 1) == 0): only H = 1 counts as a power of 2;
    # c = the largest power of 2 strictly below H
    H = num_heads
    if H & (H - 1) == 0:
        s = _p2(H)
    else:
        c = 1 << ((H - 1).bit_length() - 1)
        s = _p2(c) + _p2(2 * c)[0::2][:H - c]
    return _bias(s, n, float("-inf"))


def W_16_rounded_to_3_decimals(num_heads, n):
    # bias computed as float32 slopes times distances, then rounded to 3 decimals
    return torch.round(_bias(_slopes(num_heads), n, float("-inf")), decimals=3)
