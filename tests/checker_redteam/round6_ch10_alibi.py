"""Round 6 red team (writer D, issue 12), ch10_alibi: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch10_alibi.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_alibi_bias"
import math
import torch


def _pow2(n):
    return [2 ** (-8 * (h + 1) / n) for h in range(n)]


def _slopes(H):
    if (H & (H - 1)) == 0:
        return _pow2(H)
    c = 2 ** math.floor(math.log2(H))
    return _pow2(c) + _pow2(2 * c)[0::2][: H - c]


def _bias(slopes, n, dtype=torch.float32):
    m = torch.tensor(slopes, dtype=dtype)
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).to(dtype)
    return -m[:, None, None] * dist


def C_01_reference(num_heads, n):
    H = num_heads
    pw = (H & (H - 1)) == 0
    sl = _pow2(H) if pw else _slopes(H)
    return _bias(sl, n).float()


def O_02_abs_distance_symmetric(num_heads, n):
    # -m |i - j|: the lower triangle is exact, the upper is finite (allowed)
    H = num_heads
    sl = _pow2(H) if (H & (H - 1)) == 0 else _slopes(H)
    i = torch.arange(n)
    return -torch.tensor(sl)[:, None, None] * (i[:, None] - i[None, :]).abs().float()


def O_03_geometric_ratio_neg_inf_upper(num_heads, n):
    H = num_heads

    def p2(k):
        start = 2 ** (-8 / k)
        return [start * start ** h for h in range(k)]
    if (H & (H - 1)) == 0:
        sl = p2(H)
    else:
        c = 1 << (H.bit_length() - 1)
        sl = p2(c) + p2(2 * c)[0::2][: H - c]
    b = _bias(sl, n, torch.float64).float()
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


# ---- wrong ----

def W_01_short_2c_table(num_heads, n):
    # the 2c table built with range(c) only: enough while H - c <= c / 2
    H = num_heads
    if (H & (H - 1)) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    two_c = [2 ** (-8 * (h + 1) / (2 * c)) for h in range(c)]
    return _bias(_pow2(c) + two_c[0::2][: H - c], n)


def W_02_round_log2(num_heads, n):
    H = num_heads
    c = 2 ** round(math.log2(H))
    if c == H:
        return _bias(_pow2(H), n)
    if c > H:
        c //= 2
    return _bias(_pow2(c) + _pow2(2 * c)[1::2][: H - c], n)


def W_03_float16_bias(num_heads, n):
    H = num_heads
    return _bias(_slopes(H), n, torch.float16).float()


def W_04_sorted_slopes(num_heads, n):
    return _bias(sorted(_slopes(num_heads), reverse=True), n)


def W_05_last_H_minus_c(num_heads, n):
    H = num_heads
    if (H & (H - 1)) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    odd = _pow2(2 * c)[0::2]
    return _bias(_pow2(c) + odd[len(odd) - (H - c):], n)


def W_06_slopes_over_H_for_c_part(num_heads, n):
    H = num_heads
    if (H & (H - 1)) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    first = [2 ** (-8 * (h + 1) / H) for h in range(c)]
    return _bias(first + _pow2(2 * c)[0::2][: H - c], n)


_cache = {}


def O_07_cache_by_heads_grows_correctly(num_heads, n):
    # caches by num_heads; a larger n later is padded from the old table (stale) 
    if num_heads not in _cache or _cache[num_heads].shape[-1] < n:
        old = _cache.get(num_heads)
        new = _bias(_slopes(num_heads), n)
        if old is not None:
            k = old.shape[-1]
            new[:, :k, :k] = old  # same values: fine
            new[:, k:, :] = -new[:, k:, :].abs()  # "keep it negative"
        _cache[num_heads] = new
    return _cache[num_heads][:, :n, :n]


def W_08_positive_inf_upper(num_heads, n):
    b = _bias(_slopes(num_heads), n)
    return b.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("inf"))


def W_09_float64(num_heads, n):
    return _bias(_slopes(num_heads), n, torch.float64)


def W_10_interleave_after_H(num_heads, n):
    # interleaves: c slopes then odd ones, but recursion uses 2*H
    H = num_heads
    if (H & (H - 1)) == 0:
        return _bias(_pow2(H), n)
    c = 2 ** math.floor(math.log2(H))
    return _bias(_pow2(c) + _pow2(2 * H)[0::2][: H - c], n)


def W_11_nan_upper(num_heads, n):
    b = _bias(_slopes(num_heads), n)
    mask = torch.ones(n, n).triu(1)
    return b + mask * float("-inf") * 0 + torch.where(mask.bool(), float("nan"), 0.0)


def O_12_reference_with_noop_terms(num_heads, n):
    # m * (j - (n-1)): "softmax does not care", but the text asks for exactly -m(i-j)
    H = num_heads
    i = torch.arange(n).float()
    m = torch.tensor(_slopes(H))
    b = -m[:, None, None] * (i[:, None] - i[None, :])
    return b - b[:, :, :1] * 0 + (0 if n < 64 else -m[:, None, None] * 0.0)


def W_13_slopes_from_float16(num_heads, n):
    m = torch.tensor(_slopes(num_heads)).half().float().tolist()
    return _bias(m, n)


def W_14_integer_distance_clamped(num_heads, n):
    # distance stored as int8 (n was 64 in the chapter...)
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).to(torch.int8).float()
    return -torch.tensor(_slopes(num_heads))[:, None, None] * dist


def W_15_one_head_special(num_heads, n):
    # H = 1 treated as "no power of 2 below": slope 1/2
    if num_heads == 1:
        return _bias([0.5], n)
    return _bias(_slopes(num_heads), n)


def W_16_three_heads_fallback(num_heads, n):
    # slopes of the next power of 2 truncated (what the paper says not to do)
    H = num_heads
    if (H & (H - 1)) == 0:
        return _bias(_pow2(H), n)
    nxt = 1 << H.bit_length()
    return _bias(_pow2(nxt)[:H], n)


def W_17_uint8_distance(num_heads, n):
    # distances stored as uint8 to save memory: wraps past 255
    i = torch.arange(n)
    dist = (i[:, None] - i[None, :]).clamp(min=0).to(torch.uint8).float()
    return -torch.tensor(_slopes(num_heads))[:, None, None] * dist


def W_18_squeeze_at_end(num_heads, n):
    return _bias(_slopes(num_heads), n).squeeze()


_last = {}


def W_19_slopes_cached_by_first_call(num_heads, n):
    # slopes computed once, on the first call, and reused (state between calls)
    if "m" not in _last or len(_last["m"]) != num_heads:
        _last["m"] = _slopes(num_heads) if not _last else _pow2(num_heads)
    return _bias(_last["m"], n)
