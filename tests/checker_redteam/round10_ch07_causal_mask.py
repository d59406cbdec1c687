"""Round 10 red team (writer B, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/B/sols/ch07_causal_mask.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 10 already except A_12 (see its comment).
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_causal_mask"


def C_01_reference(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_01_tril_ones_bool(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def O_02_triu_negated_transposed_view(num_steps):
    return ~torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def O_03_python_loops(num_steps):
    return torch.tensor([[j <= i for j in range(num_steps)] for i in range(num_steps)],
                        dtype=torch.bool).reshape(num_steps, num_steps)


def O_04_cumsum(num_steps):
    return torch.eye(num_steps, dtype=torch.long).cumsum(0).bool()


# ---------------------------------------------------------------- wrong
_BLOCK = torch.tril(torch.ones(1024, 1024, dtype=torch.bool))


def W_01_gpt2_block_size_buffer(num_steps):
    return _BLOCK[:num_steps, :num_steps]


def W_02_bfloat16_positions(num_steps):
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_03_float16_positions(num_steps):
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_04_squeeze(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps)).bool().squeeze()


def W_05_numpy_array(num_steps):
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_06_sliding_window_256(num_steps):
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 256)


def W_07_uint8(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def W_08_float_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps))


def W_09_strict(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] > i[None, :]


def W_10_transposed(num_steps):
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool))


def W_11_additive_float_mask(num_steps):
    return torch.triu(torch.full((num_steps, num_steps), float("-inf")), 1)


_cache = {}


# Accepted on purpose: one cached mask returned as views is the lru_cache ruling
# (/work/brief/ROUND10.md: causal_mask with lru_cache accepted; round 9's S_08).
def A_12_shared_cached_growing(num_steps):
    """Cache the biggest mask so far and return a slice of it (a view)."""
    m = _cache.get("m")
    if m is None or m.shape[0] < num_steps:
        m = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
        _cache["m"] = m
    return m[:num_steps, :num_steps]


def W_13_float32_linspace_positions(num_steps):
    """Positions as fractions i / num_steps in float16: collide for long sequences."""
    i = torch.arange(num_steps, dtype=torch.float32) / num_steps
    i = i.half()
    return i[:, None] >= i[None, :]


def W_14_loop_row0_forgotten(num_steps):
    m = torch.zeros(num_steps, num_steps, dtype=torch.bool)
    for i in range(1, num_steps):
        m[i, : i + 1] = True
    return m


def W_15_opposite_convention(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] < i[None, :]


def W_16_mask_cached_1024_on_first_call(num_steps):
    """Builds a max_len=512 mask once; longer sequences get a wrong shape silently."""
    if "b" not in _cache:
        _cache["b"] = torch.tril(torch.ones(512, 512, dtype=torch.bool))
    return _cache["b"][:num_steps, :num_steps]


def W_17_python_list_no_reshape(num_steps):
    """torch.tensor of a nested list: for num_steps=0 the shape is (0,), not (0, 0)."""
    return torch.tensor([[j <= i for j in range(num_steps)] for i in range(num_steps)],
                        dtype=torch.bool)


def O_05_meshgrid(num_steps):
    i, j = torch.meshgrid(torch.arange(num_steps), torch.arange(num_steps), indexing="ij")
    return j <= i
