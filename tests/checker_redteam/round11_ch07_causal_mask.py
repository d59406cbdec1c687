"""Round 11 red team (writer B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 11 already (no finding).
"""
# flake8: noqa
import torch

CHECK = "check_causal_mask"


def C_01_arange_compare(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_02_tril_ones(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def O_03_generate_square_subsequent_mask(num_steps):
    return torch.nn.Transformer.generate_square_subsequent_mask(num_steps) == 0


def O_04_numpy_tril(num_steps):
    import numpy as np
    return torch.from_numpy(np.tri(int(num_steps), dtype=bool))


# ---- wrong ---------------------------------------------------------------------------

def W_01_triu(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu()


def W_02_strict_lower(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)


def W_03_float_mask(num_steps):
    return torch.ones(num_steps, num_steps).tril()


def W_04_generate_mask_bool(num_steps):
    """The -inf float mask cast to bool: True where masked (nn.MultiheadAttention's)."""
    return torch.nn.Transformer.generate_square_subsequent_mask(num_steps).bool()


_TABLE = torch.ones(128, 128, dtype=torch.bool).tril()


def W_05_table_128(num_steps):
    """Slices a precomputed 128 x 128 table: wrong (too small) past 128 steps."""
    return _TABLE[:num_steps, :num_steps]


_TABLE512 = torch.ones(512, 512, dtype=torch.bool).tril()


def W_06_table_512(num_steps):
    return _TABLE512[:num_steps, :num_steps]


def W_07_int8_positions(num_steps):
    """int8 positions 'to save memory': they wrap past 127."""
    i = torch.arange(num_steps, dtype=torch.int8)
    return i[:, None] >= i[None, :]


def W_08_bfloat16_positions(num_steps):
    """bfloat16 positions: exact only up to 256."""
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_09_float16_positions(num_steps):
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_10_window_100(num_steps):
    """A local window (0 <= i - j < 100): a sliding-window mask, not a causal one."""
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 100)


def W_11_window_1024(num_steps):
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 1024)


def W_12_uint8_diff(num_steps):
    """uint8 tensor (not bool), the old PyTorch mask type."""
    return torch.ones(num_steps, num_steps, dtype=torch.uint8).tril()


def W_13_batched_shape(num_steps):
    """(1, n, n) 'to broadcast over the batch'."""
    return C_01_arange_compare(num_steps)[None]


def W_14_transposed_compare(num_steps):
    i = torch.arange(num_steps)
    return i[None, :] >= i[:, None]


def S_15_shared_cache_returned(num_steps):
    """lru_cache-like dict returning the same tensor object: a caller's in-place change
    (mask &= padding) corrupts later calls."""
    c = W15_shared_cache_returned.__dict__.setdefault("c", {})
    if num_steps not in c:
        c[num_steps] = C_01_arange_compare(num_steps)
    return c[num_steps]


def O_16_and_with_expand(num_steps):
    """An expanded (stride-0) view: writing into it raises, and it aliases."""
    i = torch.arange(num_steps)
    row = torch.ones(1, dtype=torch.bool).expand(num_steps, num_steps)
    return row & (i[:, None] >= i[None, :])


def W_17_zero_steps_raise(num_steps):
    if num_steps <= 0:
        raise ValueError("num_steps must be positive")
    return C_01_arange_compare(num_steps)


def S_18_float_num_steps_accepted(num_steps):
    """Accepts a float like 4.5 (int() truncates silently)."""
    n = int(num_steps)
    return C_01_arange_compare(n)


def W_19_cumsum_float16(num_steps):
    """Counts with a float16 cumsum: exact only up to 2048."""
    c = torch.ones(num_steps, num_steps, dtype=torch.float16).cumsum(1)
    return c <= torch.arange(1, num_steps + 1, dtype=torch.float16)[:, None]


def W_20_diag_only_for_first(num_steps):
    """Query 0 attends key 0; others strictly earlier keys plus themselves except the last."""
    m = C_01_arange_compare(num_steps).clone()
    if num_steps > 64:
        m[-1, -1] = False
    return m


def W_21_returns_numpy(num_steps):
    import numpy as np
    return np.tri(num_steps, dtype=bool)


def O_22_contiguous_control(num_steps):
    """Allocates on 'cuda' when available, else 'meta'-free CPU: on CPU right. Control."""
    return C_01_arange_compare(num_steps).contiguous()


def W_23_window_4096(num_steps):
    """A sliding window of 4096 (Mistral's): causal only up to 4096 steps."""
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 4096)


def W_24_float16_positions_offset(num_steps):
    """float16 positions counted from 1000 (an offset 'for the cache'): exact only while
    1000 + i stays below 2048."""
    i = torch.arange(num_steps, dtype=torch.float16) + 1000
    return i[:, None] >= i[None, :]


def O_25_transposed_triu(num_steps):
    """Non-contiguous, but the right values."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu().T
