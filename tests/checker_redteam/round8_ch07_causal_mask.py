"""Round 8 red team (writer B, issue 12), ch07_causal_mask: wrong (W_),
right (C_), odd but right (O_) and against-the-wording (S_) solutions written from the
exercise text alone; copied from /work/redteam/round8/B/sols/ch07_causal_mask.py
with the names W01_x written W_01_x. tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass).
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_causal_mask"


# ---- correct / odd -------------------------------------------------------------------
def C_01_arange_compare(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def O_02_triu_transposed_noncontig(num_steps):
    # ones.triu() transposed is the lower triangle: a non-contiguous but right bool tensor
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu().T


def O_03_eye_cumsum(num_steps):
    return torch.eye(num_steps).cumsum(dim=0).bool()


def O_04_python_loops(num_steps):
    return torch.tensor([[j <= i for j in range(num_steps)] for i in range(num_steps)],
                        dtype=torch.bool).reshape(num_steps, num_steps)


# ---- wrong ---------------------------------------------------------------------------
def W_01_int8_positions(num_steps):
    # "save memory": int8 positions wrap around after 127
    i = torch.arange(num_steps).to(torch.int8)
    return i[:, None] >= i[None, :]


def W_02_uint8_positions(num_steps):
    # uint8 positions wrap around after 255
    i = torch.arange(num_steps).to(torch.uint8)
    return i[:, None] >= i[None, :]


_BASE_1000 = torch.ones(1000, 1000, dtype=torch.bool).tril()


def W_03_global_table_1000(num_steps):
    # like PositionalEncoding's max_len=1000: a precomputed table sliced; wrong shape beyond
    return _BASE_1000[:num_steps, :num_steps]


_BASE_128 = torch.ones(128, 128, dtype=torch.bool).tril()


def W_04_global_table_128(num_steps):
    return _BASE_128[:num_steps, :num_steps]


def W_05_uint8_dtype(num_steps):
    # old-style byte mask instead of bool
    return torch.ones(num_steps, num_steps, dtype=torch.uint8).tril()


def W_06_float_mask(num_steps):
    # additive-mask habit: 1.0 / 0.0 floats
    return torch.ones(num_steps, num_steps).tril()


def W_07_mha_convention(num_steps):
    # nn.MultiheadAttention's convention (True = blocked)
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu(diagonal=1)


def W_08_strict_lower(num_steps):
    # forgets that a query may attend itself
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(diagonal=-1)


def W_09_numpy_array(num_steps):
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_10_batched_shape(num_steps):
    # (1, n, n): broadcasts in SDPA, but not the asked shape
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()[None]


def W_11_float16_positions(num_steps):
    # positions in float16: integers above 2048 are no longer exact
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[:, None] >= i[None, :]


def W_12_bfloat16_positions(num_steps):
    # positions in bfloat16: integers above 256 are no longer exact
    i = torch.arange(num_steps, dtype=torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_13_loop_off_by_one(num_steps):
    m = torch.zeros(num_steps, num_steps, dtype=torch.bool)
    for i in range(num_steps - 1):
        m[i, : i + 1] = True
    return m


def W_14_float32_ones_min_mask(num_steps):
    # float mask 0 / -inf (additive) instead of bool
    m = torch.zeros(num_steps, num_steps)
    return m.masked_fill(torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1),
                         float("-inf"))


_calls = {"n": 0}


def W_15_transposed_after_first_call(num_steps):
    # state between calls: a "cache" of the transposed tensor returned from the second call
    _calls["n"] += 1
    m = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return m if _calls["n"] == 1 else m.T.contiguous()


def W_16_list_of_lists(num_steps):
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def W_17_expand_stride0(num_steps):
    # builds the mask from a row of ones expanded: same values, but the result of
    # tril on an expand is fine; here the mistake: triu of ones-like "upper" flipped by
    # fliplr, giving an anti-diagonal pattern that is right only for n <= 2
    m = torch.ones(num_steps, num_steps, dtype=torch.bool).triu()
    return torch.fliplr(m)


def W_18_sliding_window_1024(num_steps):
    # "local attention" habit: each query sees at most the last 1024 keys
    i = torch.arange(num_steps)
    d = i[:, None] - i[None, :]
    return (d >= 0) & (d < 1024)


def O_05_float32_thirds_with_tolerance(num_steps):
    # positions normalised to [0, 1] in float32 (as for a plot): i/(n-1) vs j/(n-1);
    # equal ratios round alike, so right; but rounding with a float32 division by 3
    i = torch.arange(num_steps, dtype=torch.float32) / 3.0
    return (i[:, None] - i[None, :]) > -1e-4
