"""Round 13 red team (writer E, issue 12), ch10_alibi2: check_alibi_bias; wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone;
copied from /work/redteam/round13/E/sols/ch10_alibi2.py (writer's note: Python aliasing in cached slopes.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ and S_ entries are not tested.
Holes fixed: none (every wrong entry was rejected on the snapshot).
"""
# flake8: noqa
import functools
import torch
CHECK = "check_alibi_bias"


def _ref_slopes(h):
    c = 1 << (h.bit_length() - 1)
    s = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    if c < h:
        s += _ref_slopes(2 * c)[0::2][:h - c]
    return s


def _bias(slopes, n):
    m = torch.tensor(slopes, dtype=torch.float64)[:, None, None]
    i = torch.arange(n, dtype=torch.float64)
    return (-m * (i[:, None] - i[None, :])).float()


def C_01_reference(num_heads, n):
    return _bias(_ref_slopes(num_heads), n)


@functools.lru_cache(maxsize=None)
def _cached_pow2(c):
    return [2 ** (-8 * k / c) for k in range(1, c + 1)]


def W_21_lru_cache_list_mutation(num_heads, n):
    """Caches the power-of-2 slopes in an lru_cache and extends the returned list with +=:
    the cached list for c grows, so a later call with num_heads = c gets more heads
    (alibi_bias(6, n) then alibi_bias(4, n) returns 6 heads)."""
    c = 1 << (num_heads.bit_length() - 1)
    s = _cached_pow2(c)
    if c < num_heads:
        s += _cached_pow2(2 * c)[0::2][:num_heads - c]
    return _bias(s[:num_heads] if False else s, n)


_SLOPES = {}


def W_22_cache_on_n_for_slopes(num_heads, n):
    """Caches the whole bias on n only (the slopes of the first head count are reused)."""
    if n not in _SLOPES:
        _SLOPES[n] = (num_heads, C_01_reference(num_heads, n))
    h, b = _SLOPES[n]
    return b if h == num_heads else C_01_reference(num_heads, n) if h < num_heads else b[:num_heads]
