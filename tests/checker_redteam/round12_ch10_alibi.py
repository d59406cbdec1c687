"""Round 12 red team (writer D, issue 12), ch10_alibi: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/D/sols/ch10_alibi.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 12 except W08 (-(m i) + m j in float32), accepted on purpose as
A_08 by the lead's ruling (see its comment).
"""
# flake8: noqa
import math
import torch

CHECK = "check_alibi_bias"


def _pow2(H):
    return [2.0 ** (-8.0 * (h + 1) / H) for h in range(H)]


def slopes(H):
    if H & (H - 1) == 0:
        return _pow2(H)
    c = 2 ** math.floor(math.log2(H))
    return _pow2(c) + _pow2(2 * c)[0::2][: H - c]


def _dist(n):
    i = torch.arange(n)
    return (i[:, None] - i[None, :])


def _bias(sl, n):
    m = torch.tensor(sl, dtype=torch.float32)
    return -m[:, None, None] * _dist(n).to(torch.float32)


def C_01_reference_like(num_heads, n):
    return _bias(slopes(num_heads), n)


def O_02_paper_code(num_heads, n):
    """The paper's get_slopes: start * ratio ** i in Python floats."""
    def p2(k):
        start = 2 ** (-2 ** -(math.log2(k) - 3))
        return [start * start ** i for i in range(k)]
    if math.log2(num_heads).is_integer():
        sl = p2(num_heads)
    else:
        c = 2 ** math.floor(math.log2(num_heads))
        sl = p2(c) + _o02_sl(2 * c)[0::2][: num_heads - c]
    return _bias(sl, n)


def _o02_sl(k):
    start = 2 ** (-2 ** -(math.log2(k) - 3))
    return [start * start ** i for i in range(k)]


def O_03_float64_then_cast_abs_upper(num_heads, n):
    """Computed in float64, -m|i - j| (finite and moderate above the diagonal)."""
    m = torch.tensor(slopes(num_heads), dtype=torch.float64)
    return (-m[:, None, None] * _dist(n).abs().double()).float()


def W_04_sorted_slopes(num_heads, n):
    """The interleaved slopes sorted from steepest to flattest, so heads are reordered."""
    return _bias(sorted(slopes(num_heads), reverse=True), n)


def W_05_second_fourth_slopes(num_heads, n):
    """The 2nd, 4th, ... slopes of 2c instead of the 1st, 3rd, ..."""
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _pow2(2 * c)[1::2][: H - c], n)


def W_06_fill_plus_1e9(num_heads, n):
    """masked_fill(upper, 1e9): the sign of -1e9 lost."""
    b = C_01_reference_like(num_heads, n)
    up = torch.ones(n, n, dtype=torch.bool).triu(1)
    return b.masked_fill(up, 1e9)


def W_07_fill_plus_1e30(num_heads, n):
    b = C_01_reference_like(num_heads, n)
    up = torch.ones(n, n, dtype=torch.bool).triu(1)
    return b.masked_fill(up, 1e30)


# A_ (the lead's ruling, round 12): -(m i) + m j in float32 rounds m i and m j before the
# subtraction: within 1.2e-4 absolute, 2e-4 relative at distance 1 (H = 48, n = 2050), and
# exact for slopes that are powers of 2; a rounding, with no visible effect on attention.
def A_08_cancellation(num_heads, n):
    """-(m i) + (m j) in float32: rounding of m*i and m*j, wrong at distance 1 near n=2050."""
    m = torch.tensor(slopes(num_heads), dtype=torch.float32)[:, None, None]
    i = torch.arange(n, dtype=torch.float32)
    return -(m * i[:, None]) + m * i[None, :]


def W_09_slope_from_2c_first_H(num_heads, n):
    """Slopes for the next power of 2, first H of them."""
    H = num_heads
    P = 1 << (H - 1).bit_length()
    return _bias(_pow2(P)[:H], n)


def W_10_slopes_recomputed_with_H(num_heads, n):
    """Non-power of 2: extra slopes 2^(-8(2k+1)/(2H)) using H instead of c."""
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    extra = [2.0 ** (-8.0 * (2 * k + 1) / (2 * H)) for k in range(H - c)]
    return _bias(_pow2(c) + extra, n)


def W_11_float16_distance(num_heads, n):
    m = torch.tensor(slopes(num_heads), dtype=torch.float32)
    i = torch.arange(n, dtype=torch.float16)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_12_slopes_in_float16(num_heads, n):
    """The slopes rounded to float16 (a 'half' table)."""
    m = torch.tensor(slopes(num_heads), dtype=torch.float16).float()
    return -m[:, None, None] * _dist(n).float()


def W_13_float64_output(num_heads, n):
    m = torch.tensor(slopes(num_heads), dtype=torch.float64)
    return -m[:, None, None] * _dist(n).double()


_C = {}


def W_14_cache_on_heads_only(num_heads, n):
    """Memo keyed on num_heads: the bias of the largest n so far, cropped; but a larger n
    later gets the old (smaller) one cropped, i.e. too small."""
    if num_heads not in _C:
        _C[num_heads] = C_01_reference_like(num_heads, n)
    return _C[num_heads][:, :n, :n]


def W_15_bias_transposed(num_heads, n):
    """[h, j, i] instead of [h, i, j]: -m (j - i) below the diagonal."""
    return C_01_reference_like(num_heads, n).transpose(1, 2)


def W_16_slope_h_from_zero(num_heads, n):
    """m_h = 2^(-8h/H): h from 0, the first head gets slope 1 and no last one."""
    H = num_heads
    def p(k):
        return [2.0 ** (-8.0 * h / k) for h in range(k)]
    if H & (H - 1) == 0:
        return _bias(p(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(p(c) + p(2 * c)[0::2][: H - c], n)


def W_17_upper_nan_from_inf_times_zero(num_heads, n):
    """A -inf causal mask multiplied by the slope: -inf * m is fine, but the diagonal
    uses (i - j) * inf-mask -> 0 * inf = NaN on the diagonal? no: here the fill is +inf."""
    b = C_01_reference_like(num_heads, n)
    up = torch.ones(n, n, dtype=torch.bool).triu(1)
    return b.masked_fill(up, float("inf"))


def _bloom_slopes(H):
    c = 2 ** math.floor(math.log2(H))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(c) - 3))), dtype=torch.float32)
    sl = torch.pow(base, torch.arange(1, 1 + c, dtype=torch.int32))
    if c != H:
        eb = torch.tensor(2 ** (-(2 ** -(math.log2(2 * c) - 3))), dtype=torch.float32)
        r = min(c, H - c)
        sl = torch.cat([sl, torch.pow(eb, torch.arange(1, 1 + 2 * r, 2, dtype=torch.int32))])
    return sl


def O_18_bloom_slopes_float32_pow(num_heads, n):
    """BLOOM's build_alibi_tensor slopes (float32 torch.pow), then -m (i - j)."""
    m = _bloom_slopes(num_heads)
    return -m[:, None, None] * _dist(n).float()


def W_19_bloom_key_position_bias(num_heads, n):
    """BLOOM's bias m * j (key position only): equal to -m (i - j) plus -m i per row
    (softmax-invariant), but not 0 on the diagonal."""
    m = _bloom_slopes(num_heads)
    j = torch.arange(n, dtype=torch.float32)
    return (m[:, None, None] * j[None, None, :]).expand(num_heads, n, n).contiguous()


def O_20_expand_noop_when_one_head(num_heads, n):
    """Returns an expanded (stride-0) tensor when num_heads == 1 (a view, not writable
    per entry) - otherwise right."""
    if num_heads == 1:
        return (-_dist(n).float() * 2.0 ** -8)[None].expand(1, n, n)
    return C_01_reference_like(num_heads, n)
