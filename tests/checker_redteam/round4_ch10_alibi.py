"""Round 4 red team (writer R4-C, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch10_alibi.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_alibi_bias"


def _pow2(n):
    start = 2 ** (-8 / n)
    return [start ** (i + 1) for i in range(n)]


def _slopes(H):
    if math.log2(H).is_integer():
        return _pow2(H)
    c = 2 ** math.floor(math.log2(H))
    return _pow2(c) + _pow2(2 * c)[0::2][: H - c]


def _bias(slopes, n, dtype=torch.float32, rel=None):
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]) if rel is None else rel(i)
    return (-torch.tensor(slopes, dtype=torch.float64)[:, None, None] * dist).to(dtype)


def C_01_reference(num_heads, n):
    return _bias(_slopes(num_heads), n)


def C_02_float32_slopes_tril_zero_above(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    i = torch.arange(n, dtype=torch.float32)
    d = (i[:, None] - i[None, :]).clamp(min=0)
    return -m[:, None, None] * d


def O_01_abs_distance(num_heads, n):
    return _bias(_slopes(num_heads), n, rel=lambda i: (i[:, None] - i[None, :]).abs())


def O_02_minus_inf_above(num_heads, n):
    b = _bias(_slopes(num_heads), n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


def O_03_recursive_slopes(num_heads, n):
    def sl(H):
        if H & (H - 1) == 0:
            return [2 ** (-8 * (h + 1) / H) for h in range(H)]
        c = 1 << (H.bit_length() - 1)
        return sl(c) + sl(2 * c)[0::2][: H - c]
    return _bias(sl(num_heads), n)


def O_04_expanded_view(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    i = torch.arange(n)
    d = (i[:, None] - i[None, :]).float()
    return (-m[:, None, None]) * d.expand(num_heads, n, n)


def W_01_positive_sign(num_heads, n):
    return -C_01_reference(num_heads, n)


def W_02_slopes_start_at_h0(num_heads, n):
    H = num_heads
    def sl(H):
        if math.log2(H).is_integer():
            return [2 ** (-8 * h / H) for h in range(H)]
        c = 2 ** math.floor(math.log2(H))
        return sl(c) + sl(2 * c)[0::2][: H - c]
    return _bias(sl(H), n)


def W_03_first_H_of_next_pow2(num_heads, n):
    H = num_heads
    if math.log2(H).is_integer():
        return _bias(_pow2(H), n)
    return _bias(_pow2(2 ** math.ceil(math.log2(H)))[:H], n)


def W_04_even_slopes_of_2c(num_heads, n):
    H = num_heads
    if math.log2(H).is_integer():
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _pow2(2 * c)[1::2][: H - c], n)


def W_05_formula_for_every_H(num_heads, n):
    return _bias(_pow2(num_heads), n)


def W_06_layout_n_n_H(num_heads, n):
    return C_01_reference(num_heads, n).permute(1, 2, 0).contiguous()


def W_07_float64(num_heads, n):
    return _bias(_slopes(num_heads), n, torch.float64)


def W_08_shifted_bias_m_times_j(num_heads, n):
    # softmax-equivalent, but not the exercise's bias (exactly -m (i - j))
    return _bias(_slopes(num_heads), n, rel=lambda i: -i[None, :].expand(n, n))


def W_09_distance_clamped_255(num_heads, n):
    return _bias(_slopes(num_heads), n, rel=lambda i: (i[:, None] - i[None, :]).clamp(max=255))


def W_10_float16_slopes(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float16)
    i = torch.arange(n)
    return (-m[:, None, None] * (i[:, None] - i[None, :]).half()).float()


_CACHE = {}


def W_11_cached_by_heads_only(num_heads, n):
    if num_heads not in _CACHE:
        _CACHE[num_heads] = C_01_reference(num_heads, max(n, 1))
    b = _CACHE[num_heads]
    return b[:, :n, :n] if b.shape[-1] >= n else b


def W_12_transposed_query_key(num_heads, n):
    return C_01_reference(num_heads, n).transpose(1, 2)


def W_13_remainder_from_H_minus_c(num_heads, n):
    H = num_heads
    if math.log2(H).is_integer():
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _slopes(H - c), n)


def W_14_c_is_next_power_minus(num_heads, n):
    # "largest power of 2 below H" taken as below-or-equal of H - 1 (wrong when H is a power)
    H = num_heads
    c = 2 ** math.floor(math.log2(max(H - 1, 1)))
    if c == H:
        return _bias(_pow2(H), n)
    return _bias(_pow2(c) + _pow2(2 * c)[0::2][: H - c], n)


def W_15_uint8_positions(num_heads, n):
    i = torch.arange(n).to(torch.uint8).long()
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_16_base_2_minus_8_over_H_times_h_plus_1_with_int_division(num_heads, n):
    H = num_heads
    sl = [2 ** (-(8 * (h + 1) // H)) for h in range(H)] if math.log2(H).is_integer() else None
    if sl is None:
        c = 2 ** math.floor(math.log2(H))
        a = [2 ** (-(8 * (h + 1) // c)) for h in range(c)]
        b = [2 ** (-(8 * (h + 1) // (2 * c))) for h in range(2 * c)]
        sl = a + b[0::2][: H - c]
    return _bias(sl, n)


def W_17_upper_triangle_nan(num_heads, n):
    # fills "as you like" with NaN: 0 * NaN later breaks masked scores
    b = C_01_reference(num_heads, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("nan"))


def W_18_mean_slope_all_heads(num_heads, n):
    s = _slopes(num_heads)
    return _bias([sum(s) / len(s)] * num_heads, n)
