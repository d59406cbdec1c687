"""Round 14 red team (writer C, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round14/C/sols/ch05_transpose_qkv.py (Round 14, writer C, check_transpose_qkv: the heads folded into the batch axis.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: none; main rejects every W_ entry (the global-state ones
through _core).
"""
# flake8: noqa
import random

import numpy as np
import torch

CHECK = "check_transpose_qkv"


def _ref(X, h):
    X = X.reshape(X.shape[0], X.shape[1], h, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def C_01_reference(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def C_02_unflatten_transpose(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_03_stack_chunks(X, num_heads):
    """Heads by chunk, stacked on a new axis 1, then flattened: exact."""
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).flatten(0, 1)


def O_04_gather_index_built_under_no_grad(X, num_heads):
    """A permutation index built under no_grad (it is never differentiated); exact."""
    b, n, d = X.shape
    p = d // num_heads
    with torch.no_grad():
        idx = torch.arange(d, device=X.device).reshape(num_heads, p)  # head i: i*p..(i+1)*p-1
    Y = X[:, :, idx]                      # (b, n, h, p)
    return Y.transpose(1, 2).reshape(b * num_heads, n, p)


def O_05_sets_and_restores_default_dtype(X, num_heads):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return _ref(X, num_heads)
    finally:
        torch.set_default_dtype(old)


def O_06_einsum_permute(X, num_heads):
    b, n, d = X.shape
    Y = torch.einsum("bnhp->bhnp", X.reshape(b, n, num_heads, d // num_heads))
    return Y.reshape(b * num_heads, n, d // num_heads)


def O_07_fork_rng_self_test(X, num_heads):
    """Self-test on a random probe inside fork_rng: the caller's generator is restored."""
    with torch.random.fork_rng(devices=[]):
        probe = torch.randn(1, 2, 2 * num_heads)
        assert _ref(probe, num_heads).shape == (num_heads, 2, 2)
    return _ref(X, num_heads)


def O_08_as_strided_on_contiguous(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    Xc = X.contiguous()
    return Xc.as_strided((b, num_heads, n, p), (n * d, p, d, 1)).reshape(b * num_heads, n, p)


def O_09_empty_then_slice_copy(X, num_heads):
    """Preallocate and copy head by head (copy_ is differentiable)."""
    b, n, d = X.shape
    p = d // num_heads
    out = X.new_empty(b, num_heads, n, p)
    for i in range(num_heads):
        out[:, i] = X[:, :, i * p:(i + 1) * p]
    return out.reshape(b * num_heads, n, p)


# ---------------------------------------------------------------- wrong
def W_10_heads_interleaved(X, num_heads):
    """Splits d as (p, heads) instead of (heads, p): head i gets features i, i+h, ...; any d > h."""
    X = X.reshape(X.shape[0], X.shape[1], -1, num_heads)
    X = X.permute(0, 3, 1, 2)
    return X.reshape(-1, X.shape[2], X.shape[3])


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, h):
        ctx.shape = X.shape
        return _ref(X, h).clone()

    @staticmethod
    def backward(ctx, g):
        # the gradient put back by a plain reshape: wrong place for every entry with h > 1
        return g.reshape(ctx.shape), None


def W_11_custom_function_wrong_backward(X, num_heads):
    """Right values, but the hand-written backward reshapes the gradient without undoing the
    permute: dL/dX wrong for any batch with h > 1 and n > 1."""
    return _WrongBackward.apply(X, num_heads)


_BUF = {}


def W_12_reused_output_buffer(X, num_heads):
    """Writes into a module-level buffer per (shape, dtype) when no grad is needed: a second
    call with the same shape overwrites the first call's result (a = f(X); b = f(Y); a == b)."""
    if X.requires_grad and torch.is_grad_enabled():
        return _ref(X, num_heads)
    key = (tuple(X.shape), X.dtype, X.device, num_heads)
    out = _BUF.get(key)
    if out is None:
        out = _BUF[key] = torch.empty(_ref(X, num_heads).shape, dtype=X.dtype, device=X.device)
    out.copy_(_ref(X, num_heads))
    return out


def W_13_forces_grad_mode_on(X, num_heads):
    """Turns grad mode on for the caller: under torch.no_grad() the result of an X that
    requires grad requires grad, and the caller's block records graphs from then on."""
    torch.set_grad_enabled(True)
    return _ref(X, num_heads)


def W_14_numpy_global_rng_self_test(X, num_heads):
    """A self-test on a random probe from NumPy's global generator: a deterministic function
    that advances the caller's np.random stream (set_seed seeds it)."""
    probe = torch.from_numpy(np.random.rand(1, 2, 2 * num_heads))
    assert _ref(probe, num_heads).shape == (num_heads, 2, 2)
    return _ref(X, num_heads)


def W_15_python_random_self_test(X, num_heads):
    """Same, with Python's global `random` (seeded by set_seed): caller's stream advanced."""
    k = random.randrange(1, 3)
    assert _ref(torch.zeros(1, k, 2 * num_heads), num_heads).shape[1] == k
    return _ref(X, num_heads)


def W_16_rewinds_torch_generator(X, num_heads):
    """Self-test drawing from torch's generator, then 'restores' it by reseeding with
    initial_seed(): the caller's generator is rewound to the start of its seed."""
    torch.randn(3)
    torch.manual_seed(torch.initial_seed())
    return _ref(X, num_heads)


def W_17_flush_denormal(X, num_heads):
    """Turns on flush-denormal for the caller (a speed tweak) and leaves it: the caller's
    later float32 arithmetic gives 0 for 1e-40 * 1 (and subnormal X entries are kept here)."""
    torch.set_flush_denormal(True)
    return _ref(X, num_heads)


def A_18_view_fails_non_contiguous(X, num_heads):
    """.view instead of reshape. A_: it never fails here: view only splits one axis (always
    possible whatever the strides) and then works on a contiguous copy; shown in proofs.py."""
    b, n, d = X.shape
    return X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).contiguous().view(b * num_heads, n, -1)


def W_19_int_through_float32(X, num_heads):
    """Moves entries with a one-hot permutation matmul in float32: int64 X > 2^24 lose digits,
    float64 X rounded to float32."""
    b, n, d = X.shape
    P = torch.eye(d, dtype=torch.float32, device=X.device)
    Y = (X.to(torch.float32) @ P).to(X.dtype)
    return _ref(Y, num_heads)


def W_20_squeeze_for_single_head_dim(X, num_heads):
    """squeeze() to tidy up: with p = 1 (num_hiddens == num_heads) or n == 1 the last axes vanish
    and the reshape puts entries elsewhere / wrong shape."""
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, -1).squeeze()
    if Y.dim() == 4:
        return Y.permute(0, 2, 1, 3).reshape(b * num_heads, n, -1)
    return Y.reshape(b * num_heads, n, -1)


def W_21_retain_grad_on_argument(X, num_heads):
    """Calls X.retain_grad() (to inspect it): a non-leaf X of the caller now keeps its .grad."""
    if X.requires_grad:
        X.retain_grad()
    return _ref(X, num_heads)


def W_22_anomaly_mode_left_on(X, num_heads):
    """Debugging left in: turns on autograd anomaly detection for the caller and never off."""
    torch.autograd.set_detect_anomaly(True)
    return _ref(X, num_heads)


def A_23_deterministic_algorithms_left_on(X, num_heads):
    """Turns on torch.use_deterministic_algorithms for the caller and leaves it on: the
    caller's later index_add_/scatter_add_ on CUDA and others now raise. A_: on the CPU the
    only effect is torch.empty filled with NaN, nothing wrong can be shown here."""
    torch.use_deterministic_algorithms(True)
    return _ref(X, num_heads)


def A_24_num_threads_left_at_one(X, num_heads):
    """Sets torch.set_num_threads(1) (a tiny-op tweak) and leaves it: caller's state changed. A_: speed only."""
    torch.set_num_threads(1)
    return _ref(X, num_heads)


def W_25_mutates_requires_grad_of_view_base(X, num_heads):
    """Marks the result's graph with a hook on X (to log the gradient) and leaves it."""
    if X.requires_grad:
        X.register_hook(lambda g: g)
    return _ref(X, num_heads)


def W_26_bool_via_float(X, num_heads):
    """X * 1.0 to 'make it float' first: a bool or int X comes back as float32."""
    return _ref(X * 1.0, num_heads)
