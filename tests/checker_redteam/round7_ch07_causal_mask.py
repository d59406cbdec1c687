"""Round 7 red team (writer R7-B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round7/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x. Wrong ones
the checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_causal_mask"
import functools
import numpy as np
import torch


def C_01_compare(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def C_02_tril(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def O_03_numpy_tri_noncontig(num_steps):
    # np.tri gives the lower triangle; build the upper one and transpose: a non-contiguous
    # but correct bool tensor
    up = torch.from_numpy(np.tri(num_steps, dtype=bool).T.copy())
    return up.T


def O_04_accepts_numpy_int(num_steps):
    n = int(num_steps)
    return torch.tril(torch.ones(n, n)) > 0.5


def A_01_lru_cache_shared_object(num_steps):
    # Accepted on purpose (as round 6 A_14): one shared tensor per size, as libraries
    # cache masks; the exercise does not ask for a fresh tensor at every call.
    # the same tensor object is returned on every call: a caller that edits its mask in
    # place (mask[0, 1] = True, or mask &= pad) corrupts every later causal_mask(n)
    return _cached(num_steps)


@functools.lru_cache(maxsize=None)
def _cached(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


_BIG = torch.ones(64, 64, dtype=torch.bool).tril()


def W_02_view_of_global_table(num_steps):
    # a slice (a view) of one module-level table: aliasing between calls, and silently
    # too small beyond 64 steps
    return _BIG[:num_steps, :num_steps]


_BIG512 = torch.ones(512, 512, dtype=torch.bool).tril()


def W_03_fixed_512_table_copy(num_steps):
    # a copy of a precomputed 512 x 512 table: right for num_steps <= 512, a too-small
    # (512, 512) mask beyond
    return _BIG512[:num_steps, :num_steps].clone()


def W_04_bfloat16_positions(num_steps):
    # positions in bfloat16 "to save memory": integers above 256 are rounded, so entries
    # next to the diagonal go wrong for num_steps > 257
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_05_float16_positions(num_steps):
    # the same in float16: exact only up to 2048
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_06_uint8_mask(num_steps):
    # old-style byte mask
    return torch.ones(num_steps, num_steps, dtype=torch.uint8).tril()


def W_07_float_ones(num_steps):
    return torch.ones(num_steps, num_steps).tril()


def W_08_nn_multihead_convention(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def W_09_broadcastable_1nn(num_steps):
    # (1, n, n): broadcasts in scaled_dot_product_attention, but not the asked shape
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()[None]


def W_10_numpy_bool(num_steps):
    return np.tri(num_steps, dtype=bool)


def C_11_expanded_then_tril(num_steps):
    # shares memory between rows via expand: values right? no: each row is row n-1
    row = torch.ones(num_steps, dtype=torch.bool)
    m = row.expand(num_steps, num_steps)
    return m.tril()  # tril copies: this one is right; see W12 for the wrong variant


def W_12_strict_plus_diag_wrong_n1(num_steps):
    # strictly lower triangle or the diagonal, built by adding; right except it returns
    # an int64 tensor when... (bool + bool -> bool in torch); off-by-one: diag=-1 shifted
    m = torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)
    return m | torch.eye(num_steps, dtype=torch.bool).roll(1, 0) if num_steps > 1 else m


def W_13_requires_grad_float_bool_like(num_steps):
    # a float mask of 0 / -inf (the additive convention)
    m = torch.zeros(num_steps, num_steps)
    return m.masked_fill(torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1),
                         float("-inf"))


def W_14_zero_steps_wrong(num_steps):
    # "at least one step": a (1, 1) mask for num_steps = 0
    n = max(num_steps, 1)
    return torch.ones(n, n, dtype=torch.bool).tril()


def W_15_list_of_lists(num_steps):
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def O_16_linspace_positions_correct(num_steps):
    # float64 arange -> fine values; but the result has the shape (n, n) only when
    # num_steps is an int: linspace with n points from 0 to n (step n/(n-1)), wrong for n>2
    i = torch.linspace(0, num_steps, num_steps)
    j = torch.arange(num_steps, dtype=torch.float32)
    return i[:, None] >= j[None, :]


_BIG4K = torch.ones(4096, 4096, dtype=torch.bool).tril()


def W_17_view_of_big_global_table(num_steps):
    # a view into one 4096 x 4096 module-level table: every call returns memory shared
    # with every other call (a caller's mask[...] = ... edits all later masks); too small
    # beyond 4096
    return _BIG4K[:num_steps, :num_steps]


def W_18_sliding_window_1024(num_steps):
    # a local (sliding-window) causal mask: right only while num_steps <= 1024
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 1024)


def A_19_negative_silently_empty(num_steps):
    # Accepted on purpose: the exercise text says nothing of a negative num_steps, and
    # requiring an error would refuse right solutions built from Python ranges.
    # max(0, n): a negative num_steps gives an empty mask instead of an error
    n = max(0, int(num_steps))
    return torch.ones(n, n, dtype=torch.bool).tril()


def O_20_tensor_num_steps(num_steps):
    n = torch.as_tensor(num_steps).item()
    return torch.tril(torch.ones(n, n, dtype=torch.bool))
