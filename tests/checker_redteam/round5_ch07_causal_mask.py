"""Round 5 red team (writer R5-B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import functools

import numpy as np
import torch

CHECK = "check_causal_mask"


def C_01_reference(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_02_tril_ones(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


@functools.lru_cache(maxsize=None)
def O_03_lru_cache(num_steps):
    # cached: the same tensor object on every call with the same size
    return torch.tril(torch.ones(num_steps, num_steps)).bool()


def O_04_numpy_then_tensor(num_steps):
    return torch.from_numpy(np.tri(num_steps, dtype=bool))


def W_01_triu(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu()


def W_02_strict(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)


def W_03_float(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps))


def W_04_masked_convention(num_steps):
    # True = do not attend (nn.MultiheadAttention's convention)
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def W_05_additive(num_steps):
    m = torch.zeros(num_steps, num_steps)
    return m.masked_fill(torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1),
                         float("-inf"))


_TABLE = torch.tril(torch.ones(128, 128, dtype=torch.bool))


def W_06_table_128(num_steps):
    # a precomputed table, right only up to 128 steps
    return _TABLE[:num_steps, :num_steps]


_BIG = torch.tril(torch.ones(1024, 1024, dtype=torch.bool))


def W_07_table_1024(num_steps):
    return _BIG[:num_steps, :num_steps]


def W_08_numpy(num_steps):
    return np.tri(num_steps, dtype=bool)


def W_09_batched(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()[None]


def W_10_off_by_one_plus(num_steps):
    # j <= i + 1: a query also sees the next token
    i = torch.arange(num_steps)
    return i[None, :] <= i[:, None] + 1


def W_11_uint8(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


_CACHE = {}


def W_12_cache_first_size(num_steps):
    # keeps the first mask and slices it: wrong once a longer one is asked for
    if "m" not in _CACHE:
        _CACHE["m"] = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return _CACHE["m"][:num_steps, :num_steps]


def W_13_transposed(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] <= i[None, :]


def W_14_int8_arange_overflow(num_steps):
    # positions in int8: wrap around beyond 127
    i = torch.arange(num_steps).to(torch.int8)
    return i[:, None] >= i[None, :]


def W_15_float16_positions(num_steps):
    # float16 positions lose integers above 2048
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_16_requires_size_gt1(num_steps):
    # squeeze() collapses num_steps == 1 to a 0-d tensor
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril().squeeze()


def W_17_window(num_steps):
    # a sliding window of 64 keys (local attention) instead of every earlier key
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 64)


_HUGE = torch.tril(torch.ones(8192, 8192, dtype=torch.bool))


def S_01_shared_table_view(num_steps):
    # right values, but every call returns a view of one global table: a caller that
    # edits its mask in place (mask[0, 1] = True) changes every later mask
    return _HUGE[:num_steps, :num_steps]


def W_18_window_4096(num_steps):
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 4096)
