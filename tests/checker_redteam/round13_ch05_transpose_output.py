"""Round 13 red team (writer C, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round13/C/sols/ch05_transpose_output.py.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: the red team's snapshot accepted W_23 (a memo keyed on the shape, num_heads,
sum and sum of squares), W_24 (the rows in chunks of 8, the tail dropped) and W_25 (a "fast
path" for n > 64 that interleaves the heads). Now a second call with X.flip(1) (the same
values in another order) under torch.no_grad() must not get the earlier result (W_23), and
a case of batch 9 and n = 67, X of shape (27, 67, 4) with num_heads=3, runs contiguous and
not (W_24, W_25).
"""
# flake8: noqa
import torch
CHECK = "check_transpose_output"

_BUF = {}


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def C_02_unflatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_03_cat_of_heads(X, num_heads):
    Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    return torch.cat(Y.unbind(1), dim=-1)


def O_04_permute_via_movedim(X, num_heads):
    b = X.shape[0] // num_heads
    return torch.movedim(X.reshape(b, num_heads, *X.shape[1:]), 1, 2).reshape(b, X.shape[1], -1)


def W_05_head_major(X, num_heads):
    """Assumes rows ordered i*batch + b (cat of chunks): wrong for batch > 1, h > 1."""
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_06_no_permute(X, num_heads):
    """reshape straight to (b, n, h*p): wrong entries when n > 1 and h > 1."""
    return X.reshape(X.shape[0] // num_heads, X.shape[1], -1)


def W_07_strided_concat(X, num_heads):
    """Interleaves heads (feature j*h + i) instead of concatenating: any h > 1, p > 1."""
    b = X.shape[0] // num_heads
    Y = X.reshape(b, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 3, 1)
    return Y.reshape(b, X.shape[1], -1)


def W_08_float(X, num_heads):
    """.float(): float64 comes back float32."""
    return C_01_reference(X.float(), num_heads)


def W_09_shared_out_buffer(X, num_heads):
    """Preallocated output per shape: a second call with the same shape overwrites the first
    call's result."""
    Y = C_01_reference(X, num_heads)
    key = (tuple(Y.shape), Y.dtype, Y.device)
    if key not in _BUF:
        _BUF[key] = torch.empty_like(Y)
    return _BUF[key].detach().copy_(Y)


def W_10_detached(X, num_heads):
    """No gradient reaches X (through numpy)."""
    return torch.from_numpy(C_01_reference(X.detach().cpu(), num_heads).numpy().copy()).to(X.device)


def W_11_heads_reversed(X, num_heads):
    """Head i written at slot h-1-i."""
    Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    return torch.cat(Y.unbind(1)[::-1], dim=-1)


def W_12_n_p_swapped(X, num_heads):
    """Treats the input as (b*h, p, n) (transposes n and p): wrong unless n == p == 1."""
    b = X.shape[0] // num_heads
    n, p = X.shape[1], X.shape[2]
    Y = X.reshape(b, num_heads, p, n).permute(0, 3, 1, 2)
    return Y.reshape(b, n, -1)


def W_13_batch_from_n(X, num_heads):
    """Batch size taken as X.shape[0] // X.shape[1] (n and h confused): right only when n == h."""
    n = X.shape[1]
    b = X.shape[0] // n if X.shape[0] % n == 0 else X.shape[0] // num_heads
    h = X.shape[0] // b
    Y = X.reshape(b, h, n, X.shape[2]).permute(0, 2, 1, 3)
    return Y.reshape(b, n, -1)


def W_14_half_roundtrip(X, num_heads):
    """Routed through float16: digits lost, large values inf."""
    return C_01_reference(X.half(), num_heads).to(X.dtype)


def W_15_nan_to_num(X, num_heads):
    """Cleans NaN/inf (legal data) to 0/max."""
    return C_01_reference(torch.nan_to_num(X), num_heads)


def W_16_mean_of_heads_when_one_position(X, num_heads):
    """Special case for n == 1 that adds 0 * mean 'to keep the graph connected': NaN everywhere
    when the input holds inf/NaN, and a crash for integer inputs (n == 1)."""
    if X.shape[1] == 1:
        b = X.shape[0] // num_heads
        Y = X.reshape(b, num_heads, 1, X.shape[2])
        return Y.permute(0, 2, 1, 3).reshape(b, 1, -1) * 1.0 + 0 * Y.mean()
    return C_01_reference(X, num_heads)


def W_17_sum_trick_inf(X, num_heads):
    """Scatters heads with a sum over a one-hot head axis: inf*0 = NaN in the other slots;
    and -0.0 becomes +0.0 ... (inf entries)."""
    b = X.shape[0] // num_heads
    Y = X.reshape(b, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)  # (b, n, h, p)
    eye = torch.eye(num_heads, dtype=X.dtype, device=X.device)            # (h, h)
    Z = (Y[:, :, None, :, :] * eye[:, :, None]).sum(3)                    # (b, n, h, p)
    return Z.reshape(b, X.shape[1], -1)


def W_18_clone_leaf(X, num_heads):
    """New leaf: X gets no gradient."""
    return C_01_reference(X.detach().clone().requires_grad_(X.requires_grad), num_heads)


def W_19_mutates_input(X, num_heads):
    """Scrambles the caller's X via .data after computing the result."""
    Y = C_01_reference(X, num_heads)
    X.data = X.data.flip(0)
    return Y


def W_20_int_dtype_via_float(X, num_heads):
    """Casts to default float and back 'for reshape speed': int64 values above 2**24 change,
    float64 loses digits."""
    return C_01_reference(X.to(torch.float32), num_heads).to(X.dtype)


def _ref_qkv(X, h):
    X = X.reshape(X.shape[0], X.shape[1], h, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


class _FastOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, h):
        ctx.shape = X.shape
        return C_01_reference(X, h)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class _FastOut2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, h):
        ctx.h = h
        return C_01_reference(X, h)

    @staticmethod
    def backward(ctx, g):
        return _ref_qkv(g.float(), ctx.h).to(g.dtype), None


def W_21_custom_function_bad_backward(X, num_heads):
    """Custom Function: backward reshapes the gradient without the inverse permute."""
    return _FastOut.apply(X, num_heads)


def W_22_custom_function_float32_backward(X, num_heads):
    """Custom Function with float32 backward: float64 gradients rounded."""
    return _FastOut2.apply(X, num_heads)


_CACHE = {}


def W_23_cache_keyed_on_checksum(X, num_heads):
    """Memoised by (shape, sums) without grad: a permutation of an earlier input collides."""
    if X.requires_grad:
        return C_01_reference(X, num_heads)
    key = (tuple(X.shape), X.dtype, X.device, num_heads, float(X.double().sum()),
           float((X.double() ** 2).sum()))
    if key not in _CACHE:
        _CACHE[key] = C_01_reference(X, num_heads).clone()
    return _CACHE[key].clone()


def W_24_chunked_batch_drops_tail(X, num_heads):
    """Chunks of 8 * num_heads rows; tail lost when batch > 8 and batch % 8 != 0."""
    c = 8 * num_heads
    if X.shape[0] <= c:
        return C_01_reference(X, num_heads)
    parts = [C_01_reference(X[i:i + c], num_heads) for i in range(0, X.shape[0] - c + 1, c)]
    return torch.cat(parts, 0)


def W_25_long_seq_fast_path(X, num_heads):
    """For n > 64 a 'fast path' that interleaves heads."""
    if X.shape[1] > 64:
        return W_07_strided_concat(X, num_heads)
    return C_01_reference(X, num_heads)
