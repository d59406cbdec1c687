"""Round 9 red team (writer D, issue 12), ch10_alibi: alibi_bias (exercise 10.2).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch10_alibi.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_alibi_bias"


def _slopes(H):
    c = 1 << (H.bit_length() - 1)
    s = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    if c < H:
        s += _slopes(2 * c)[0::2][:H - c]
    return s


def _dist(n):
    i = torch.arange(n)
    return (i[:, None] - i[None, :])


def C_01_reference(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


def O_02_abs_distance_and_geometric(num_heads, n):
    """-m |i - j| (finite above the diagonal), slopes as start * ratio**k in float64."""
    def sl(H):
        if H & (H - 1) == 0:
            start = 2 ** (-8 / H)
            return [start * start ** k for k in range(H)]
        c = 2 ** math.floor(math.log2(H))
        return sl(c) + sl(2 * c)[0::2][:H - c]
    m = torch.tensor(sl(num_heads), dtype=torch.float64)
    return (-m[:, None, None] * _dist(n).abs().double()).float()


def O_03_minus_inf_above(num_heads, n):
    b = C_01_reference(num_heads, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


def W_01_first_H_of_next_power(num_heads, n):
    """Slopes for the next power of 2, first H of them (what the paper rejects)."""
    c = 1 << ((num_heads - 1).bit_length())
    m = torch.tensor(_slopes(c)[:num_heads], dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


def W_02_odd_ones(num_heads, n):
    """Interleaves the 2nd, 4th, ... slopes for 2c instead of the 1st, 3rd, ..."""
    def sl(H):
        c = 1 << (H.bit_length() - 1)
        s = [2 ** (-8 * k / c) for k in range(1, c + 1)]
        if c < H:
            s += sl(2 * c)[1::2][:H - c]
        return s
    m = torch.tensor(sl(num_heads), dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


def W_03_nan_above(num_heads, n):
    """0 * inf above the diagonal: NaN there."""
    d = _dist(n).float()
    d = d.masked_fill(d < 0, float("inf"))
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    b = -m[:, None, None] * d
    return b * (d < float("inf")).float()  # inf * 0 = nan above


def W_04_slopes_from_largest_power_applied_cyclically(num_heads, n):
    """Non-power-of-2: reuses the c slopes cyclically."""
    c = 1 << (num_heads.bit_length() - 1)
    s = _slopes(c)
    m = torch.tensor([s[h % c] for h in range(num_heads)], dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


_C = {}


def W_05_cache_keyed_on_n(num_heads, n):
    if n not in _C:
        _C[n] = C_01_reference(num_heads, n)
    return _C[n]


_S = []


def W_06_slopes_computed_once(num_heads, n):
    if not _S:
        _S.append(torch.tensor(_slopes(num_heads), dtype=torch.float32))
    m = _S[0]
    if len(m) < num_heads:
        m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return -m[:num_heads, None, None] * _dist(n).float()


def W_07_float16_bias(num_heads, n):
    """Computed in float16 to save memory, cast to float32."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float16)
    return (-m[:, None, None] * _dist(n).half()).float()


def W_08_big_positive_above(num_heads, n):
    """+m (j - i) above the diagonal is -m (i-j) ... but written with the mask as +1e30."""
    b = C_01_reference(num_heads, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), 1e30)


def W_09_shifted_by_n_minus_1(num_heads, n):
    """The softmax-invariant shifted form m (j - (n-1))... per row: -m (i - j) + m*i."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    j = torch.arange(n).float()
    return (m[:, None, None] * j[None, None, :]).expand(num_heads, n, n).clone()


def W_10_transposed(num_heads, n):
    return C_01_reference(num_heads, n).transpose(1, 2)


def O_04_rounded_power_of_two_clamped(num_heads, n):
    """c = 2 ** round(log2 H) instead of floor."""
    H = num_heads
    c = 2 ** round(math.log2(H))
    if c > H:
        c //= 2
    if H & (H - 1) == 0:
        s = _slopes(H)
    else:
        s = _slopes(c) + _slopes(2 * c)[0::2][:H - c]
    # bug: for H = 3*2^k round gives the right c; for H = 5..: above, so clamp keeps it
    m = torch.tensor(s, dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


def W_12_zero_based_head(num_heads, n):
    """m_h = 2^(-8h/H) with h from 0: the first head has slope 1... offset."""
    c = 1 << (num_heads.bit_length() - 1)
    s = [2 ** (-8 * k / c) for k in range(0, c)]
    if c < num_heads:
        s += [2 ** (-8 * k / (2 * c)) for k in range(0, 2 * c)][0::2][:num_heads - c]
    m = torch.tensor(s, dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()


def W_13_float64_output(num_heads, n):
    return C_01_reference(num_heads, n).double()




def W_14_uint8_positions(num_heads, n):
    """Distances from uint8 positions (saves memory): wrap around beyond 255."""
    i = torch.arange(n, dtype=torch.uint8)
    dist = (i[:, None] - i[None, :]).float()      # uint8 arithmetic wraps
    dist = torch.where(torch.arange(n)[:, None] >= torch.arange(n)[None, :], dist, -dist)
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    return -m[:, None, None] * dist


def W_15_slopes_rounded_to_4_digits(num_heads, n):
    """Slopes copied as 4-significant-digit numbers (0.7071, 0.3536, ...)."""
    s = [float(f"{x:.4g}") for x in _slopes(num_heads)]
    m = torch.tensor(s, dtype=torch.float32)
    return -m[:, None, None] * _dist(n).float()
