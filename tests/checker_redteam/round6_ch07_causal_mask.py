"""Round 6 red team (writer R6-B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round6/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_causal_mask"


def C_01_compare_positions(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_02_tril_ones_bool(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril_()


def O_03_transposed_triu_non_contiguous(num_steps):
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool)).T


def O_04_numpy_int_argument(num_steps):
    # works with a numpy integer too
    n = int(np.int64(num_steps))
    return ~torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)


# ---------------- wrong ----------------
def W_01_float_tril(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps))


def W_02_uint8(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def W_03_nn_multihead_convention(num_steps):
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)


def W_04_strict_lower(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] > i[None, :]


_CACHE = torch.tril(torch.ones(64, 64, dtype=torch.bool))


def W_05_cached_64_slice(num_steps):
    # a "max length" buffer of 64 sliced: shape wrong past 64
    return _CACHE[:num_steps, :num_steps]


_BIG = torch.tril(torch.ones(4096, 4096, dtype=torch.bool))


def W_06_returns_view_of_shared_buffer(num_steps):
    # right values, but every call returns a view of one global buffer:
    # a caller that edits its mask in place corrupts every later mask
    return _BIG[:num_steps, :num_steps]


def W_07_sliding_window_128(num_steps):
    # local attention confused with causal: j <= i and i - j < 128
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 128)


def W_08_bfloat16_positions(num_steps):
    # positions in bfloat16 (e.g. under autocast): exact only up to 256
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_09_float16_positions(num_steps):
    # positions in float16: exact only up to 2048
    i = torch.arange(num_steps).to(torch.float16)
    return i[:, None] >= i[None, :]


def W_10_numpy_array(num_steps):
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_11_int64_mask(num_steps):
    i = torch.arange(num_steps)
    return (i[:, None] >= i[None, :]).long()


def W_12_batched_shape(num_steps):
    i = torch.arange(num_steps)
    return (i[:, None] >= i[None, :])[None, None]


def W_13_requires_grad_float(num_steps):
    return torch.ones(num_steps, num_steps, requires_grad=True).tril() > 0.5 \
        if False else torch.tril(torch.full((num_steps, num_steps), 1.0)).bool().float()


def O_05_expand_of_row(num_steps):
    # broadcast view: i >= j computed from an expanded row; same values but fails for 0?
    i = torch.arange(num_steps)
    m = i.expand(num_steps, num_steps)           # m[i, j] = j
    return m <= m.T                              # j <= i: right


import functools


@functools.lru_cache(maxsize=None)
# Accepted on purpose: one shared tensor per size, as libraries cache masks; it is wrong only
# for a caller that writes into the mask it got (the check never does, and a mask
# changed by a later call is refused by _core).
def A_14_lru_cached_same_object(num_steps):
    # cached: every call with the same n returns THE SAME tensor; a caller that edits its
    # mask in place (mask[:, 0] = False ...) changes the mask of every later call
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def W_15_transposed_upper_with_diagonal(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] <= i[None, :]


def W_16_peeks_one_ahead(num_steps):
    return torch.arange(1, num_steps + 1)[:, None] >= torch.arange(num_steps)[None, :]


def W_17_int8_positions(num_steps):
    i = torch.arange(num_steps).to(torch.int8)
    return i[:, None] >= i[None, :]


def W_18_squeeze_breaks_one_step(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps)).bool().squeeze()


def O_06_view_minus_one_zero_steps(num_steps):
    i = torch.arange(num_steps)
    return i.view(num_steps, 1) >= i.view(1, -1)
