"""Round 4 red team (writer B, issue 12), ch07_causal_mask: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise
text alone; copied from /work/redteam/round4/B/sols/ch07_causal_mask.py
with the names W01_x written W_01_x. The tests run every W_ entry (must fail) and
every C_ and O_ entry (must pass); A_ entries are wrong ones accepted on purpose
(each says why), not tested.
Writer's note: Round 4, writer B: causal_mask (exercise 7.1), written from the exercise
text only."""
# flake8: noqa
import functools

import numpy as np
import torch

CHECK = "check_causal_mask"


# ---------------------------------------------------------------- correct and odd
def C_01_compare_aranges(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def C_02_tril_bool(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def O_03_transposed_triu(num_steps):
    """triu transposed: a non-contiguous view, values right."""
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool)).T


@functools.lru_cache(maxsize=None)
def O_04_cached(num_steps):
    """Cached: the same tensor object for the same num_steps."""
    return torch.ones(num_steps, num_steps).tril() > 0


def O_05_numpy_int_argument(num_steps):
    """Works with a numpy integer argument too."""
    n = int(num_steps)
    return torch.from_numpy(np.tril(np.ones((n, n), dtype=bool)))


# ---------------------------------------------------------------- wrong
def W_01_triu(num_steps):
    """j >= i: each query sees the future."""
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool))


def W_02_strict_lower(num_steps):
    """j < i: a query may not attend itself (row 0 fully masked)."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=-1)


def W_03_mha_convention(num_steps):
    """nn.MultiheadAttention's convention: True = masked out."""
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)


def W_04_additive_float(num_steps):
    """0 / -inf additive float mask instead of a boolean one."""
    m = torch.full((num_steps, num_steps), float("-inf"))
    return torch.triu(m, diagonal=1)


def W_05_float_ones(num_steps):
    """A float 0/1 mask (SDPA would ADD it to the scores)."""
    return torch.tril(torch.ones(num_steps, num_steps))


def W_06_uint8(num_steps):
    """An old-style byte mask."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def W_07_int8_positions(num_steps):
    """Positions in int8 to save memory: they wrap around after 127."""
    i = torch.arange(num_steps).to(torch.int8)
    return i[:, None] >= i[None, :]


def W_08_float16_positions(num_steps):
    """Positions in float16: above 2048 neighbours round together."""
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


_TABLE = torch.tril(torch.ones(128, 128, dtype=torch.bool))


def W_09_precomputed_table(num_steps):
    """A table up to 128 steps, sliced (too short beyond 128, and a view of module state)."""
    return _TABLE[:num_steps, :num_steps]


def W_10_diagonal_plus_one(num_steps):
    """Off by one: query i may also see key i + 1."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)


def W_11_batched_shape(num_steps):
    """(1, n, n): broadcasts in SDPA, but not the asked shape."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))[None]


def W_12_numpy_array(num_steps):
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_13_list_of_lists(num_steps):
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def W_14_window(num_steps):
    """A sliding window of 64 keys (a "local causal" mask): differs from 65 steps on."""
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 64)


def W_15_valid_lens_pattern(num_steps):
    """Lengths 1..n compared against a row of keys, but with the query axis last."""
    lens = torch.arange(1, num_steps + 1)
    return torch.arange(num_steps)[:, None] < lens[None, :]


def W_16_shared_cached_tensor_mutated(num_steps, _cache={}):
    """Keeps one mask per size and hands out the same tensor; a caller that
    edits it (mask[0, 1] = True to debug) changes the next call's answer. Here it
    also 'fixes up' row 0 on the second call."""
    if num_steps in _cache:
        m = _cache[num_steps]
        m[0, :] = True
        return m
    m = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
    _cache[num_steps] = m
    return m


def W_17_square_root_bug(num_steps):
    """Builds from ones(n, n // 2 * 2): odd sizes lose a column, then pads with False."""
    n2 = num_steps // 2 * 2
    m = torch.tril(torch.ones(num_steps, n2, dtype=torch.bool))
    if n2 < num_steps:
        m = torch.cat([m, torch.zeros(num_steps, 1, dtype=torch.bool)], dim=1)
    return m


_BIG = torch.tril(torch.ones(4096, 4096, dtype=torch.bool))


def W_18_table_4096(num_steps):
    """GPT-style buffer of a fixed context (4096), sliced: wrong shape beyond 4096."""
    return _BIG[:num_steps, :num_steps]


# Accepted on purpose (not tested): int16 positions wrap only past 32767 steps, where
# the mask alone takes 1 GiB: not testable in a check cell
def A_19_int16_positions(num_steps):
    """int16 positions: wrap around after 32767."""
    i = torch.arange(num_steps).to(torch.int16)
    return i[:, None] >= i[None, :]
