"""Round 13 red team (writer D, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round13/D/sols/ch07_causal_mask.py (the writer's header: causal_mask(num_steps) -> (n, n) bool, True where j <= i.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: none left in
book/checks/ch07.py. W_27 (@torch.inference_mode()) is now rejected by _core.call (an
inference-tensor result). A_16 (a mask cached at 16384 x 16384 and sliced) is accepted by the
lead's ruling: a cap beyond any case. A_26 (True bytes of 255) is right in every use."""
# flake8: noqa
import functools
import numpy as np
import torch

CHECK = "check_causal_mask"


def C_01_tril(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def C_02_compare(num_steps):
    pos = torch.arange(num_steps)
    return pos[:, None] >= pos[None, :]


def O_03_not_triu(num_steps):
    return ~torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def O_04_eye_cumsum(num_steps):
    return torch.eye(num_steps, dtype=torch.int64).cumsum(0).bool()


def O_05_float_tril_gt(num_steps):
    return torch.ones(num_steps, num_steps).tril() > 0.5


def W_06_strict(num_steps):
    """j < i: the diagonal is hidden (each query cannot see itself); any n >= 1."""
    pos = torch.arange(num_steps)
    return pos[:, None] > pos[None, :]


def W_07_mha_convention(num_steps):
    """nn.MultiheadAttention's convention (True = hide): triu(1); any n >= 2."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def W_08_float_mask(num_steps):
    """Returns an additive float mask 0/-inf instead of bool; any n >= 2."""
    m = torch.zeros(num_steps, num_steps)
    return m.masked_fill(torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1), float("-inf"))


def W_09_int_mask(num_steps):
    """Returns int64 0/1 instead of bool (sdpa would ADD it to the scores); any n."""
    return torch.ones(num_steps, num_steps, dtype=torch.int64).tril()


def W_10_float16_positions(num_steps):
    """Positions in float16: 2049 rounds to 2048, so [2048, 2049] is True; n >= 2050."""
    pos = torch.arange(num_steps, dtype=torch.float16)
    return pos[:, None] >= pos[None, :]


def W_11_flat_index_float32(num_steps):
    """Flat index k = i*n + j in float32, i = k // n: wrong once n*n > 2^24 (n >= 4097)."""
    k = torch.arange(num_steps * num_steps, dtype=torch.float32)
    i = torch.div(k, num_steps, rounding_mode="floor")
    j = k - i * num_steps
    return (j <= i).reshape(num_steps, num_steps)


def W_12_numpy(num_steps):
    """Returns a numpy bool array, not a tensor (no .to(device), sdpa rejects it); any n."""
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_13_list(num_steps):
    """Returns a nested Python list of bools, not a tensor; any n."""
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def W_14_zero_as_one(num_steps):
    """max(n, 1): n = 0 gives a (1, 1) mask instead of (0, 0)."""
    m = max(num_steps, 1)
    return torch.tril(torch.ones(m, m, dtype=torch.bool))


def W_15_extra_batch_dim(num_steps):
    """Shape (1, n, n) (broadcasts in sdpa) instead of (n, n); any n."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))[None]


def A_16_cap_16384(num_steps):
    """A cached 16384 x 16384 mask sliced: n > 16384 gets a (16384, 16384) mask. Accepted by
    the lead's ruling: a cap beyond any case (the largest case is n = 4099; a 16385 mask is
    268 MB as bool)."""
    return _big()[:num_steps, :num_steps]


@functools.lru_cache(None)
def _big():
    return torch.tril(torch.ones(16384, 16384, dtype=torch.bool))


def W_17_bfloat16_cumsum(num_steps):
    """cumsum of ones in bfloat16 saturates at 256: column counts stall, so [i, j] with
    j > i is True once i >= 256; n >= 258."""
    c = torch.ones(num_steps, num_steps, dtype=torch.bfloat16).cumsum(1)  # 1..n per row
    return c <= torch.arange(1, num_steps + 1, dtype=torch.bfloat16)[:, None]


def W_18_meta_device(num_steps):
    """Returns a tensor on the meta device (no values at all); any n."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool, device="meta").tril()


def W_19_sparse(num_steps):
    """Returns a sparse COO bool tensor (sdpa's attn_mask must be dense); any n >= 1."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool)).to_sparse()


def W_20_uint8(num_steps):
    """uint8 0/1 mask (deprecated byte mask; sdpa treats it as additive); any n."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def W_21_nested_rows(num_steps):
    """A tuple of 1-D row tensors of growing length instead of a square tensor."""
    return tuple(torch.ones(i + 1, dtype=torch.bool) for i in range(num_steps))


def W_22_requires_float_grad(num_steps):
    """A float 0/1 mask with requires_grad (not bool); any n."""
    return torch.ones(num_steps, num_steps).tril().requires_grad_()


def W_23_row0_hidden(num_steps):
    """First query sees nothing (off-by-one on the first row, a NaN row in sdpa); n >= 1."""
    m = torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
    if num_steps:
        m[0, 0] = False
    return m


def W_24_odd_only(num_steps):
    """Built from a half-size mask upsampled by 2: right only on blocks; wrong at [2k, 2k+1]."""
    h = (num_steps + 1) // 2
    m = torch.tril(torch.ones(h, h, dtype=torch.bool))
    return m.repeat_interleave(2, 0).repeat_interleave(2, 1)[:num_steps, :num_steps]


_BUF = {}


def W_25_shared_buffer(num_steps):
    """One preallocated buffer, zeroed and refilled on each call; the result is a view of it.
    Each mask is right when returned, but a later call with a smaller n wipes an earlier
    (larger) mask: m8 = causal_mask(8); causal_mask(4); m8[7, 0] is now False."""
    buf = _BUF.get("b")
    if buf is None or buf.shape[0] < num_steps:
        buf = _BUF["b"] = torch.zeros(max(num_steps, 64), max(num_steps, 64), dtype=torch.bool)
    buf.zero_()
    buf[:num_steps, :num_steps] = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return buf[:num_steps, :num_steps]


def A_26_bool_bytes_255(num_steps):
    """A bool tensor whose True entries hold the byte 255 (viewed from uint8): equal to the
    right mask under ==, but ~mask is True everywhere (254/255 bytes), so masked_fill(~mask)
    in the chapter's style hides every key; any n >= 1."""
    return (torch.ones(num_steps, num_steps, dtype=torch.uint8).tril() * 255).view(torch.bool)


@torch.inference_mode()
def W_27_inference_mode(num_steps):
    """Decorated with @torch.inference_mode() "since masks need no gradient": the result is an
    inference tensor, and torch.where(mask, scores, -inf) on scores that require grad raises
    'Inference tensors cannot be saved for backward' in training; any n."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))
