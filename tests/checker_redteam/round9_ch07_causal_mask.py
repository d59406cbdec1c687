"""Round 9 red team (writer B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/B/sols/ch07_causal_mask.py with the names W01_x written
W_01_x. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Accepted in round 9, now rejected: W_11 (torch.manual_seed inside: the global
generator's state must be the same after a call as before). W_19 (.to_sparse()) is now told
to return a dense tensor. S_ entries are not tested: S_08 (one buffer returned as views: the
cached-mask area the checker accepts), S_12 and S_13 (a float num_steps accepted or
truncated: an input the exercise does not define).
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_causal_mask"


def C_01_compare(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_02_tril_ones(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def O_03_loop(num_steps):
    m = torch.zeros(num_steps, num_steps, dtype=torch.bool)
    for i in range(num_steps):
        m[i, : i + 1] = True
    return m


def O_04_not_triu(num_steps):
    return ~torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


_BIG = torch.ones(1000, 1000, dtype=torch.bool).tril()


def W_01_slice_of_table_1000(num_steps):
    # a table like PositionalEncoding's max_len=1000: wrong shape above 1000
    return _BIG[:num_steps, :num_steps]


_BIG2 = torch.ones(1000, 1000, dtype=torch.bool).tril()


def W_02_slice_of_table_clone_1000(num_steps):
    return _BIG2[:num_steps, :num_steps].clone()


_BIG3 = torch.ones(128, 128, dtype=torch.bool).tril()


def W_03_table_128(num_steps):
    return _BIG3[:num_steps, :num_steps].clone()


def W_04_numpy(num_steps):
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_05_uint8(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.uint8).tril()


def W_06_long(num_steps):
    i = torch.arange(num_steps)
    return (i[:, None] >= i[None, :]).long()


def W_07_float01(num_steps):
    return torch.ones(num_steps, num_steps).tril()


_SHARED = {}


def S_08_shared_buffer_by_size(num_steps):
    # one buffer reused and refilled: a caller who edits one mask edits the next
    buf = _SHARED.get("buf")
    if buf is None or buf.shape[0] < num_steps:
        buf = torch.ones(max(num_steps, 16), max(num_steps, 16), dtype=torch.bool).tril()
        _SHARED["buf"] = buf
    return buf[:num_steps, :num_steps]


def W_09_strict(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] > i[None, :]


def O_10_expanded_compare(num_steps):
    # stride-0 expansion: writing into one row writes into all
    i = torch.arange(num_steps)
    row = i[None, :].expand(num_steps, num_steps)
    col = i[:, None].expand(num_steps, num_steps)
    return torch.ge(col, row)


def W_11_reseeds_global_rng(num_steps):
    torch.manual_seed(0)   # "for reproducibility": resets everyone's RNG
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def S_12_float_num_steps_accepted(num_steps):
    # num_steps=2.5 gives a 3x3 mask silently; otherwise right
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def S_13_int_cast_of_float(num_steps):
    n = int(num_steps)  # silently truncates 2.7 to 2
    i = torch.arange(n)
    return i[:, None] >= i[None, :]


def W_14_upper(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu()


def W_15_one_extra_diag(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(1)


def W_16_batched(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()[None]


def W_17_bf16_positions(num_steps):
    # positions in bfloat16 ("a small dtype saves memory"): exact only up to 256
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_18_f16_positions(num_steps):
    # float16 positions: exact only up to 2048 (2049 rounds to 2048)
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_19_sparse(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril().to_sparse()


def O_20_transposed_view(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu().T


def O_21_numpy_int_arg(num_steps):
    n = int(num_steps)
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def O_22_linspace_positions(num_steps):
    # float32 linspace: positions i/(n-1) rounded; ties near the diagonal for large n
    i = torch.linspace(0, 1, num_steps)
    return i[:, None] >= i[None, :]


def O_23_ratio_positions(num_steps):
    # compare (j + 1) / (i + 1) <= 1 in float32
    i = torch.arange(num_steps, dtype=torch.float32)
    return (i[None, :] + 1) / (i[:, None] + 1) <= 1.0
