"""Round 12 red team (writer B, issue 12), ch07_causal_mask: wrong (W_), right (C_) and odd
but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round12/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Round 12 found no hole and no misleading message here. O_05 (nested Python
lists) takes about 15 s at the checker's lengths (up to 4097)."""
# flake8: noqa
import torch
from torch import nn

CHECK = "check_causal_mask"


def C_01_tril(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def O_02_transposed_triu(num_steps):
    """triu(...).T: the right values, a non-contiguous tensor."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu().T


def O_03_from_generate_square_subsequent_mask(num_steps):
    """nn.Transformer's float mask (0 / -inf): attend where it is 0."""
    return nn.Transformer.generate_square_subsequent_mask(num_steps) == 0


def O_04_power_of_two_slice(num_steps):
    """Builds the next power of two and slices (a non-contiguous view)."""
    size = 1
    while size < num_steps:
        size *= 2
    return torch.ones(size, size, dtype=torch.bool).tril()[:num_steps, :num_steps]


# ------------------------------------------------------------------ wrong
_BIG = torch.ones(1000, 1000, dtype=torch.bool).tril()


def W_01_precomputed_max_len_1000(num_steps):
    """Slices a table made for max_len=1000 (like PositionalEncoding): for more than 1000
    steps the mask is silently (1000, 1000)."""
    return _BIG[:num_steps, :num_steps]


def W_02_bfloat16_positions(num_steps):
    """Positions in bfloat16 ('half the memory'): integers above 256 round, so query 256
    sees key 257 (wrong from 258 steps on)."""
    pos = torch.arange(num_steps, dtype=torch.bfloat16)
    return pos[None, :] <= pos[:, None]


def W_03_float16_positions(num_steps):
    """Positions in float16: wrong from 2050 steps on (2049 rounds to 2048)."""
    pos = torch.arange(num_steps, dtype=torch.float16)
    return pos[None, :] <= pos[:, None]


def W_04_int8_positions(num_steps):
    """Positions in int8: they wrap after 127 (wrong from 129 steps on)."""
    pos = torch.arange(num_steps).to(torch.int8)
    return pos[None, :] <= pos[:, None]


def W_05_uint8_positions(num_steps):
    """Positions in uint8: they wrap after 255 (wrong from 257 steps on)."""
    pos = torch.arange(num_steps).to(torch.uint8)
    return pos[None, :] <= pos[:, None]


def W_06_local_window_256(num_steps):
    """A sliding window of 256 keys left in from a longformer-style experiment."""
    m = torch.ones(num_steps, num_steps, dtype=torch.bool)
    return m.tril() & m.triu(-255)


def W_07_one_step_scalar(num_steps):
    """Special case for one step: a 0-d True instead of shape (1, 1)."""
    if num_steps == 1:
        return torch.tensor(True)
    return C_01_tril(num_steps)


def W_08_empty_1d(num_steps):
    """Zero steps: returns shape (0,) instead of (0, 0)."""
    if num_steps == 0:
        return torch.zeros(0, dtype=torch.bool)
    return C_01_tril(num_steps)


def W_09_float_mask(num_steps):
    """Returns the 0/1 float mask (tril of ones) without converting to bool."""
    return torch.tril(torch.ones(num_steps, num_steps))


def W_10_uint8_mask(num_steps):
    """uint8 0/1 mask (the old PyTorch mask dtype)."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def W_11_bool_of_subsequent_mask(num_steps):
    """.bool() of nn.Transformer's float mask: True where -inf, the opposite convention."""
    return nn.Transformer.generate_square_subsequent_mask(num_steps).bool()


def W_12_float32_mask_from_cumsum(num_steps):
    """Ones cumsum'd in float16: counts stop at 2048 (wrong for more than 2049 steps)."""
    c = torch.ones(num_steps, dtype=torch.float16).cumsum(0) - 1   # 0, 1, 2, ... in fp16
    return c[None, :] <= c[:, None]


def O_13_linspace_positions(num_steps):
    """Positions from linspace(0, 1) in float32: strictly increasing for any testable n
    (spacing 1/(n-1) far above float32's eps), so the comparison is right."""
    pos = torch.linspace(0, 1, num_steps) if num_steps > 1 else torch.zeros(num_steps)
    return pos[None, :] <= pos[:, None]


def W_14_batched(num_steps):
    """Adds a batch axis for broadcasting: (1, n, n)."""
    return C_01_tril(num_steps)[None]


def W_15_requires_grad_float(num_steps):
    """Additive float mask with -inf above the diagonal (the other convention)."""
    return torch.zeros(num_steps, num_steps).masked_fill(~C_01_tril(num_steps), float("-inf"))


_last = {}


def W_16_shared_buffer_grown(num_steps):
    """One buffer grown when needed and written in place with copy_: a mask handed out
    earlier changes when a later call rewrites the buffer."""
    buf = _last.get("buf")
    if buf is None or buf.shape[0] < num_steps:
        buf = torch.empty(num_steps, num_steps, dtype=torch.bool)
        _last["buf"] = buf
    buf[:num_steps, :num_steps].copy_(C_01_tril(num_steps))
    buf[:num_steps, num_steps:] = True          # leftovers 'do not matter'
    return buf[:num_steps, :num_steps]


def W_17_numpy_array(num_steps):
    """A NumPy boolean array, not a tensor."""
    import numpy as np
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_18_sparse(num_steps):
    """A sparse COO tensor 'to save memory': SDPA and masked_fill cannot use it."""
    return C_01_tril(num_steps).to_sparse()


def O_05_python_lists(num_steps):
    """Nested list comprehension then torch.tensor (slow but right)."""
    return torch.tensor([[j <= i for j in range(num_steps)] for i in range(num_steps)],
                        dtype=torch.bool).reshape(num_steps, num_steps)


_BLOCK = torch.ones(4096, 4096, dtype=torch.bool).tril()


def W_19_nanogpt_block_size_4096(num_steps):
    """nanoGPT's pattern: a tril buffer for block_size = 4096, sliced. Past 4096 steps the
    mask silently stays (4096, 4096)."""
    return _BLOCK[:num_steps, :num_steps]


def W_20_sliding_window_4096(num_steps):
    """Mistral's sliding window (4096 keys) left in: wrong from 4097 steps on."""
    i = torch.arange(num_steps)
    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 4096)
