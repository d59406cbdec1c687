"""Round 3 red team (writer R3, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch10_alibi.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_alibi_bias"
import math, torch

def _p2(n):
    return [2 ** (-8 * (h + 1) / n) for h in range(n)]

def slopes_ok(H):
    if H & (H - 1) == 0:
        return _p2(H)
    c = 2 ** math.floor(math.log2(H))
    return _p2(c) + _p2(2 * c)[0::2][: H - c]

def _bias(sl, n, dtype=torch.float32):
    m = torch.tensor(sl, dtype=dtype)
    i = torch.arange(n)[:, None]; j = torch.arange(n)[None, :]
    return -m[:, None, None] * (i - j).to(dtype)

def C_1_reference(num_heads, n):
    return _bias(slopes_ok(num_heads), n)

def O_1_paper_recursive_code(num_heads, n):
    def get_slopes(n):
        def p2(n):
            start = 2 ** (-2 ** -(math.log2(n) - 3))
            return [start * start ** i for i in range(n)]
        if math.log2(n).is_integer():
            return p2(n)
        c = 2 ** math.floor(math.log2(n))
        return p2(c) + get_slopes(2 * c)[0::2][: n - c]
    return _bias(get_slopes(num_heads), n)

def O_2_minus_inf_above_diag_float64_then_cast(num_heads, n):
    b = _bias(slopes_ok(num_heads), n, torch.float64)
    b = b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return b.float()

def O_3_abs_distance(num_heads, n):
    m = torch.tensor(slopes_ok(num_heads))
    d = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return -m[:, None, None] * d.abs().float()

def W_01_slopes_from_h0(num_heads, n):
    return _bias([2 ** (-8 * h / num_heads) for h in range(num_heads)], n)

def W_02_first_H_of_next_power(num_heads, n):
    P = 2 ** math.ceil(math.log2(num_heads))
    return _bias(_p2(P)[:num_heads], n)

def W_03_formula_with_H_directly(num_heads, n):
    return _bias(_p2(num_heads), n)

def W_04_interleave_odd_ones(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_p2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_p2(c) + _p2(2 * c)[1::2][: H - c], n)

def W_05_positive_sign(num_heads, n):
    return -C_1_reference(num_heads, n)

def W_06_lower_triangle_zero(num_heads, n):
    m = torch.tensor(slopes_ok(num_heads))
    i = torch.arange(n)[:, None]; j = torch.arange(n)[None, :]
    return -m[:, None, None] * (j - i).clamp(min=0).float()

def W_07_float64(num_heads, n):
    return _bias(slopes_ok(num_heads), n, torch.float64)

def W_08_slopes_ascending(num_heads, n):
    return _bias(sorted(slopes_ok(num_heads)), n)

def W_09_head_last_then_reshape(num_heads, n):
    m = torch.tensor(slopes_ok(num_heads))
    i = torch.arange(n)[:, None, None]; j = torch.arange(n)[None, :, None]
    return (-(i - j).float() * m).reshape(num_heads, n, n)

def W_10_distance_plus_one(num_heads, n):
    m = torch.tensor(slopes_ok(num_heads))
    i = torch.arange(n)[:, None]; j = torch.arange(n)[None, :]
    return -m[:, None, None] * (i - j + 1).float()

def W_11_first_not_every_other(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_p2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_p2(c) + _p2(2 * c)[: H - c], n)

def W_12_c_includes_H_largest_power_below_or_equal_minus(num_heads, n):
    # largest power of 2 strictly below H even when H is a power of 2
    H = num_heads
    c = 2 ** math.floor(math.log2(H - 1)) if H > 1 else 1
    if c == H:
        return _bias(_p2(H), n)
    return _bias(_p2(c) + _p2(2 * c)[0::2][: H - c], n)

def W_13_extra_slopes_first(num_heads, n):
    H = num_heads
    if H & (H - 1) == 0:
        return _bias(_p2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_p2(2 * c)[0::2][: H - c] + _p2(c), n)

def W_14_row_shift_only_upper_triangle_filled_with_zero(num_heads, n):
    # keeps -m(i-j) below the diagonal but -m*n on the diagonal (as if "distance n" was meant)
    b = C_1_reference(num_heads, n)
    eye = torch.eye(n, dtype=torch.bool)
    m = torch.tensor(slopes_ok(num_heads))
    return torch.where(eye, -m[:, None, None] * 1.0, b)
