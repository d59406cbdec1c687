"""Round 10 red team (writer D, issue 12), ch10_alibi: alibi_bias (exercise 10.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round10/D/sols/ch10_alibi.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_alibi_bias"


def _slopes(H):
    def pow2(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    if H & (H - 1) == 0:
        return pow2(H)
    c = 2 ** int(math.floor(math.log2(H)))
    return pow2(c) + pow2(2 * c)[0::2][: H - c]


def _bias(slopes, n, fill=None, dtype=torch.float32):
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    dist = (i - j).to(dtype)
    b = -torch.tensor(slopes, dtype=dtype)[:, None, None] * dist
    if fill is not None:
        b = b.masked_fill(j > i, fill)
    return b.float()


def C_01_reference(num_heads, n):
    return _bias(_slopes(num_heads), n)


def O_02_paper_code_start_ratio(num_heads, n):
    # the paper's get_slopes: start * ratio**i
    def p2(k):
        start = 2 ** (-2 ** -(math.log2(k) - 3))
        return [start * start ** i for i in range(k)]
    if math.log2(num_heads).is_integer():
        s = p2(num_heads)
    else:
        c = 2 ** math.floor(math.log2(num_heads))
        s = p2(c) + p2(2 * c)[0::2][: num_heads - c]
    return _bias(s, n)


def O_03_abs_distance_and_float32_cumprod(num_heads, n):
    # slopes as float32 cumprod of the ratio; -m|i-j| (finite, moderate above the diagonal)
    def p2(k):
        r = torch.tensor(2.0 ** (-8.0 / k), dtype=torch.float32)
        return torch.cumprod(r.repeat(k), 0)
    if num_heads & (num_heads - 1) == 0:
        s = p2(num_heads)
    else:
        c = 1 << (num_heads.bit_length() - 1)
        s = torch.cat([p2(c), p2(2 * c)[0::2][: num_heads - c]])
    idx = torch.arange(n, dtype=torch.float32)
    return -s[:, None, None] * (idx[:, None] - idx[None, :]).abs()


def W_01_float16_distances(num_heads, n):
    return _bias(_slopes(num_heads), n, dtype=torch.float16)


def W_02_bfloat16_compute(num_heads, n):
    return _bias(_slopes(num_heads), n, dtype=torch.bfloat16)


def W_03_round_log2(num_heads, n):
    c = 2 ** round(math.log2(num_heads))
    if c == num_heads:
        s = [2.0 ** (-8.0 * (h + 1) / c) for h in range(c)]
    else:
        c = min(c, 2 ** int(math.log2(num_heads)))
        s = _slopes(num_heads)
    # bug: for H where round goes up, uses the first H slopes of that power
    c2 = 2 ** round(math.log2(num_heads))
    if c2 > num_heads:
        s = [2.0 ** (-8.0 * (h + 1) / c2) for h in range(c2)][:num_heads]
    return _bias(s, n)


def O_04_positive_1e4_fill(num_heads, n):
    # above the diagonal 1e4 (finite, "the mask hides it")
    return _bias(_slopes(num_heads), n, fill=1e4)


def W_05_float64_output(num_heads, n):
    i = torch.arange(n, dtype=torch.float64)
    s = torch.tensor(_slopes(num_heads), dtype=torch.float64)
    return -s[:, None, None] * (i[:, None] - i[None, :])


def W_06_clip_distance_at_256(num_heads, n):
    # a precomputed distance table of 256 positions (training length)
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).clamp(max=255).float()
    return -torch.tensor(_slopes(num_heads))[:, None, None] * dist


def W_07_slopes_base_uses_H_not_c(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        c = 2 ** int(math.log2(H))
        s = [2.0 ** (-8.0 * (h + 1) / H) for h in range(c)] + \
            [2.0 ** (-8.0 * (h + 1) / (2 * c)) for h in range(2 * c)][0::2][: H - c]
    return _bias(s, n)


def W_08_diagonal_masked_too(num_heads, n):
    b = _bias(_slopes(num_heads), n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(0), float("-inf"))


def O_09_minus_inf_above_via_inf_mask(num_heads, n):
    # causal built as slope * (dist + mask) with mask = +inf above: produces -inf... and NaN at 0
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).float()
    mask = torch.where(dist < 0, float("inf"), 0.0)
    s = torch.tensor(_slopes(num_heads))[:, None, None]
    return -s * dist - s * mask * (dist != 0)


def W_10_huge_positive_fill_1e30(num_heads, n):
    # above the diagonal 1e30 ("the causal mask hides it"): the text forbids huge positives
    return _bias(_slopes(num_heads), n, fill=1e30)


_TABLE = {h: _slopes(h) for h in (1, 2, 4, 8, 12, 16)}


def W_15_hardcoded_table_else_first_H_of_next_power(num_heads, n):
    # a table of the common head counts; other counts take the first H of the next power
    if num_heads in _TABLE:
        s = _TABLE[num_heads]
    else:
        p = 1 << (num_heads - 1).bit_length()
        s = [2.0 ** (-8.0 * (h + 1) / p) for h in range(p)][:num_heads]
    return _bias(s, n)


def W_16_uint8_positions(num_heads, n):
    i = torch.arange(n).to(torch.uint8).long()
    dist = (i[:, None] - i[None, :]).float()
    return -torch.tensor(_slopes(num_heads))[:, None, None] * dist


def W_17_nan_above_from_where_inf(num_heads, n):
    # -inf above via multiplication: (j > i) * -inf gives NaN where j <= i... no: fill via log
    b = _bias(_slopes(num_heads), n)
    i = torch.arange(n)
    keep = (i[None, :] <= i[:, None]).float()
    return b + torch.log(keep) * float("inf")


def W_11_slopes_interleave_1based_even(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        c = 2 ** int(math.log2(H))
        s = _slopes(c) + _slopes(2 * c)[1::2][: H - c]
    return _bias(s, n)


def W_12_transposed_bias(num_heads, n):
    return _bias(_slopes(num_heads), n).transpose(-1, -2)


def W_13_zero_above_via_relu(num_heads, n):
    # relu of distance: above the diagonal 0 (like the diagonal): fine, but
    # slopes computed as 1/2**(8*(h+1)//H) (integer division)
    H = num_heads
    c = 2 ** int(math.log2(H))
    def p2(k):
        return [1 / 2 ** (8 * (h + 1) // k) for h in range(k)]
    s = p2(H) if c == H else p2(c) + p2(2 * c)[0::2][: H - c]
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).clamp(min=0).float()
    return -torch.tensor(s)[:, None, None] * dist


def W_14_power2_path_strictly_below(num_heads, n):
    # always the non-power route, with c the largest power of 2 strictly below H
    H = num_heads
    if H == 1:
        s = [2.0 ** -8]
    else:
        c = 2 ** int(math.log2(H - 1))
        s = _slopes(c) + _slopes(2 * c)[0::2][: H - c]
    return _bias(s, n)


def W_18_slopes_scaled_1_0002(num_heads, n):
    return _bias([s * 1.0002 for s in _slopes(num_heads)], n)
