"""Round 14 red team (writer D, issue 12), ch07_causal_mask: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round14/D/sols/ch07_causal_mask.py (the writer's header: Round 14, writer D, check_causal_mask: wrong masks by new mechanisms (byte values of bool tensors, tensor subclasses, sparse/strided layouts, uninitialised memory, ...).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: none in book/checks/ch07.py. Left for _core (fixed there by the
lead): W_10 (a torch.Tensor subclass whose __torch_function__ answers torch.equal with True;
refused by _core.call), W_25 (torch.set_grad_enabled(False) left turned), W_26
(torch.set_flush_denormal(True) left on). A_07/A_08 (True bytes of 2 or 255) behave as right
masks in every op; A_21 (an nn.Parameter with requires_grad=False) has the right values."""
# flake8: noqa
import torch

CHECK = "check_causal_mask"


def C_01_reference(num_steps):
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def C_02_tril(num_steps):
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def O_03_transposed_triu(num_steps):
    """Right: the transpose of an upper-triangular mask (a non-contiguous view)."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu().T


def O_04_inference_mode_inside(num_steps):
    """Right: builds under inference_mode, then clones out into a normal tensor."""
    with torch.inference_mode():
        m = torch.ones(num_steps, num_steps, dtype=torch.bool).tril()
    return m.clone()


def O_05_numpy_route(num_steps):
    import numpy as np
    return torch.from_numpy(np.tri(num_steps, dtype=bool))


def O_06_int_compare_float(num_steps):
    """Right: float64 positions (exact far beyond any n)."""
    i = torch.arange(num_steps, dtype=torch.float64)
    return (i[:, None] - i[None, :]) >= 0


def A_07_bool_bytes_two(num_steps):
    """A bool tensor whose True bytes are 2 (uint8 viewed as bool): ~mask is all True, so
    masked_fill(~mask, -inf) hides everything; any n >= 1."""
    m = torch.ones(num_steps, num_steps, dtype=torch.uint8).tril() * 2
    return m.view(torch.bool)


def A_08_bool_bytes_255(num_steps):
    """Bool view of 0/255 bytes (from ~ on uint8): logical_not / ~ give wrong results."""
    m = ~torch.zeros(num_steps, num_steps, dtype=torch.uint8)   # 255
    m = m.tril()
    return m.view(torch.bool)


def W_09_sparse(num_steps):
    """A sparse COO bool tensor: not usable as scaled_dot_product_attention's attn_mask."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril().to_sparse()


def W_10_subclass_eq(num_steps):
    """A Tensor subclass (cheat) whose comparisons always claim equality; values are the
    upper triangle (wrong) for any n >= 2."""
    class Mask(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in ("equal", "allclose"):
                return True
            if name in ("eq", "__eq__"):
                out = super().__torch_function__(func, types, args, kwargs)
                return torch.ones_like(out.as_subclass(torch.Tensor))
            return super().__torch_function__(func, types, args, kwargs)
    m = torch.ones(num_steps, num_steps, dtype=torch.bool).triu()
    return m.as_subclass(Mask)


def W_11_empty_then_fill(num_steps):
    """torch.empty then only the lower triangle set True: the upper triangle is whatever the
    allocator left there (nonzero garbage after earlier allocations)."""
    m = torch.empty(num_steps, num_steps, dtype=torch.bool)
    r, c = torch.tril_indices(num_steps, num_steps)
    m[r, c] = True
    return m


def W_12_bfloat16_positions(num_steps):
    """Positions in bfloat16: i and j > 256 round together, j = i + 1 becomes visible;
    n = 300."""
    i = torch.arange(num_steps).to(torch.bfloat16)
    return i[:, None] >= i[None, :]


def W_13_int8_positions(num_steps):
    """Positions as int8: wrap past 127; n = 200."""
    i = torch.arange(num_steps).to(torch.int8)
    return i[:, None] >= i[None, :]


def W_14_inference_tensor(num_steps):
    """An inference tensor: torch.where(mask, scores, -inf) on scores that require grad
    fails (inference tensors cannot be saved for backward)."""
    with torch.inference_mode():
        return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def W_15_extra_batch_dim(num_steps):
    """Shape (1, n, n): broadcasts in SDPA but is not (n, n)."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril()[None]


def W_16_uint8(num_steps):
    """uint8 0/1 instead of bool: SDPA rejects/handles it as a float bias."""
    return torch.ones(num_steps, num_steps, dtype=torch.uint8).tril()


def W_17_float_additive(num_steps):
    """A float additive mask (0 / -inf), the other convention."""
    m = torch.zeros(num_steps, num_steps)
    return m.masked_fill(~torch.ones(num_steps, num_steps, dtype=torch.bool).tril(),
                         float("-inf"))


def W_18_strict(num_steps):
    """j < i: a query does not see itself; n >= 1."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(-1)


def W_19_nested_list(num_steps):
    """A list of lists of bools, not a tensor."""
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def W_20_expanded_rows_wrong(num_steps):
    """Anti-diagonal flip (i + j <= n - 1): right count of True, wrong places; n >= 2."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril().flip(1)


def A_21_requires_parameter(num_steps):
    """An nn.Parameter (bool, no grad): a module attribute assigned this mask registers it
    as a parameter; type is not a plain tensor."""
    return torch.nn.Parameter(torch.ones(num_steps, num_steps, dtype=torch.bool).tril(),
                              requires_grad=False)


def W_22_meta(num_steps):
    """A meta tensor: shape and dtype right, no values."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool, device="meta").tril()


def W_23_readonly_numpy_strides_neg(num_steps):
    """Right values for n <= 4096 only through float16 arange in a *negative* direction:
    arange(n-1, -1, -1) in float16 then flipped; wrong above 2048."""
    i = torch.arange(num_steps - 1, -1, -1, dtype=torch.float16).flip(0)
    return i[:, None] >= i[None, :]


_BUF = {}


def W_24_shared_buffer_rezeroed(num_steps):
    """One module-level buffer: each call zeroes it and fills the top-left n x n: the mask
    returned for n = 6 loses its rows 3..5 (all False) when the caller next asks for n = 3."""
    buf = _BUF.get("b")
    if buf is None or buf.shape[0] < num_steps:
        buf = _BUF["b"] = torch.zeros(max(num_steps, 8192 if num_steps <= 8192 else num_steps),
                                      max(num_steps, 8192 if num_steps <= 8192 else num_steps),
                                      dtype=torch.bool)
    buf.zero_()
    i = torch.arange(num_steps)
    buf[:num_steps, :num_steps] = i[:, None] >= i[None, :]
    return buf[:num_steps, :num_steps]


def W_25_grad_left_disabled(num_steps):
    """torch.set_grad_enabled(False) as a statement ('a mask needs no graph'), never
    restored: the caller's model trains without gradients afterwards."""
    torch.set_grad_enabled(False)
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]


def W_26_flush_denormal_left(num_steps):
    """torch.set_flush_denormal(True) left on: afterwards the caller's float32 1e-40
    becomes 0."""
    torch.set_flush_denormal(True)
    i = torch.arange(num_steps)
    return i[:, None] >= i[None, :]
