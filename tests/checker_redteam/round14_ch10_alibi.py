"""Round 14 red team (writer E, issue 12), ch10_alibi_bias: check_alibi_bias; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round14/E/sols/ch10_alibi_bias.py (writer's note: Round 14, writer E, check_alibi_bias.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: the snapshot accepted W_20 (set_grad_enabled(False) ... (True)): check_alibi_bias
now calls it once under torch.no_grad(), where _core's call() sees grad mode turned on.
W_21 (manual_seed) is _core's.
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


def C_01_reference(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def C_02_float64_then_cast_neg_inf_above(num_heads, n):
    m = torch.tensor(_slopes(num_heads), dtype=torch.float64)
    i = torch.arange(n, dtype=torch.float64)
    b = -m[:, None, None] * (i[:, None] - i[None, :])
    b = b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return b.float()


def O_03_paper_code_slopes(num_heads, n):
    """The paper's get_slopes (start = 2**(-2**-(log2(n)-3)), ratio = start)."""
    def p2(k):
        start = 2 ** (-2 ** -(math.log2(k) - 3))
        return [start * start ** i for i in range(k)]
    def get(k):
        if math.log2(k).is_integer():
            return p2(k)
        c = 2 ** math.floor(math.log2(k))
        return p2(c) + get(2 * c)[0::2][:k - c]
    m = torch.tensor(get(num_heads), dtype=torch.float32)
    i = torch.arange(n, dtype=torch.float32)
    return (m[:, None, None] * (i[None, :] - i[:, None])[None]).tril()


def O_04_cached_big_slice_clone(num_heads, n):
    key = num_heads
    if key not in _C or _C[key].shape[-1] < n:
        _C[key] = C_01_reference(num_heads, max(n, 64))
    return _C[key][:, :n, :n].clone()


_C = {}


def O_05_requires_grad_slopes_param(num_heads, n):
    """Slopes as a leaf tensor with requires_grad made inside (like an nn.Parameter), result
    detached."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32, requires_grad=True)
    i = torch.arange(n, dtype=torch.float32)
    return (-m[:, None, None] * (i[:, None] - i[None, :])).detach()


def O_06_default_dtype_restored(num_heads, n):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        m = torch.tensor(_slopes(num_heads))
        i = torch.arange(n) * 1.0
        b = -m[:, None, None] * (i[:, None] - i[None, :])
    finally:
        torch.set_default_dtype(old)
    return b.float()


# --------------------------------------------------------------------------- wrong

def W_10_upper_plus_1e30(num_heads, n):
    """Upper triangle +1e30 (a huge positive number, forbidden by the text: against a finite
    -1e9 mask it dominates; the text bans 'a huge positive number')."""
    b = C_01_reference(num_heads, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), 1e30)


def W_11_upper_3e38(num_heads, n):
    """Upper triangle 3e38 (not finfo.max, but a score of 4e37 added overflows to inf)."""
    b = C_01_reference(num_heads, n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), 3e38)


def W_12_cache_keyed_on_n(num_heads, n):
    """Cache keyed on n only: a second head count at the same n gets the first one's bias."""
    if n not in _N:
        _N[n] = C_01_reference(num_heads, n)
    return _N[n].clone()


_N = {}


def W_13_slopes_bfloat16(num_heads, n):
    """Slopes rounded to bfloat16 (relative error up to 2^-9)."""
    m = torch.tensor(_slopes(num_heads)).to(torch.bfloat16).float()
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_14_slopes_float16(num_heads, n):
    """Slopes rounded to float16 (relative error up to 2^-12)."""
    m = torch.tensor(_slopes(num_heads)).to(torch.float16).float()
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_15_round_log2(num_heads, n):
    """c = 2 ** round(log2 H) instead of floor: H = 6, 7, 11, 12, 13..15, 23, 24.. wrong."""
    def s(h):
        c = 2 ** round(math.log2(h))
        if c >= h:
            return [2 ** (-8 * k / c) for k in range(1, c + 1)][:h]
        return [2 ** (-8 * k / c) for k in range(1, c + 1)] + s(2 * c)[0::2][:h - c]
    m = torch.tensor(s(num_heads), dtype=torch.float32)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_16_h1_slope_one(num_heads, n):
    """H = 1: slope 1 (2^0) -- 'log2(1) = 0' special case -- instead of 2^-8."""
    if num_heads == 1:
        i = torch.arange(n)
        return -(i[:, None] - i[None, :]).float()[None]
    return C_01_reference(num_heads, n)


def A_17_upper_nan_from_log(num_heads, n):
    """Builds the bias as log of a 0/1 mask times ... : 0 * -inf = NaN above the diagonal."""
    b = C_01_reference(num_heads, n)
    mask = torch.ones(n, n).tril().log()      # 0 on/below, -inf above
    return b + mask * (b != 0).float() if n > 1 else b


def W_18_interleave_from_2c_including_first(num_heads, n):
    """Extra slopes: every other slope for 2c starting at the 2nd (1::2) -- these equal the
    slopes for c, so heads repeat."""
    def s(h):
        c = 1 << (h.bit_length() - 1)
        out = [2 ** (-8 * k / c) for k in range(1, c + 1)]
        if c < h:
            out += [2 ** (-8 * k / (2 * c)) for k in range(1, 2 * c + 1)][1::2][:h - c]
        return out
    m = torch.tensor(s(num_heads), dtype=torch.float32)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_19_distance_float16(num_heads, n):
    """(i - j) computed in float16 for n > 2048 rounds to even numbers."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    i = torch.arange(n, dtype=torch.float16)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_20_grad_mode_left_on(num_heads, n):
    """set_grad_enabled(False) ... set_grad_enabled(True): grad left on in caller's no_grad."""
    torch.set_grad_enabled(False)
    b = C_01_reference(num_heads, n)
    torch.set_grad_enabled(True)
    return b


def W_21_manual_seed(num_heads, n):
    """torch.manual_seed(1234) inside a deterministic function."""
    torch.manual_seed(1234)
    return C_01_reference(num_heads, n)


def A_22_requires_grad_result(num_heads, n):
    """Returns a leaf with requires_grad=True (nn.Parameter-like): a 'bias' the caller's
    optimiser could never see; adds a graph to every score."""
    return C_01_reference(num_heads, n).requires_grad_()


def W_23_float64_result(num_heads, n):
    """float64 result (text asks float32)."""
    return C_01_reference(num_heads, n).double()


def W_24_shifted_by_row(num_heads, n):
    """-m (i - j) + m i = m j: a shifted version (softmax-equivalent per row, not the bias)."""
    m = torch.tensor(_slopes(num_heads), dtype=torch.float32)
    j = torch.arange(n).float()
    return (m[:, None, None] * j[None, None, :]).expand(num_heads, n, n).clone()


def W_25_slopes_list_reversed(num_heads, n):
    """Slopes in ascending order (smallest slope for head 0)."""
    m = torch.tensor(_slopes(num_heads)[::-1], dtype=torch.float32)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()


def W_27_tf32_slope_pow(num_heads, n):
    """Slopes via torch.pow in float16: 2 ** (-8 k / c) evaluated with a float16 exponent."""
    c = 1 << (num_heads.bit_length() - 1)
    ks = torch.arange(1, c + 1, dtype=torch.float16)
    base = torch.pow(torch.tensor(2.0, dtype=torch.float16), -8 * ks / c).float().tolist()
    s = base
    if c < num_heads:
        ks2 = torch.arange(1, 2 * c + 1, dtype=torch.float16)
        s = s + torch.pow(torch.tensor(2.0, dtype=torch.float16), -8 * ks2 / (2 * c)).float().tolist()[0::2][:num_heads - c]
    m = torch.tensor(s, dtype=torch.float32)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).float()
