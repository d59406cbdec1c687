"""Round 13 red team (writer C, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round13/C/sols/ch05_transpose_qkv.py.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: the red team's snapshot accepted W_23 (a memo keyed on the shape, num_heads,
sum and sum of squares), W_24 (the batch in chunks of 8, the last partial chunk dropped) and
W_25 (a "fast path" for n > 64 that splits the heads strided). Now a second call with
X.flip(1) (the same values in another order, so the same sums) under torch.no_grad() must
not get the earlier result (W_23), and a case of batch 9 and n = 67, (9, 67, 12) with
num_heads=3, runs contiguous and not (W_24: rows missing, told about the last chunk; W_25:
wrong layout).
"""
# flake8: noqa
import torch
CHECK = "check_transpose_qkv"

_BUF = {}


def C_01_reference(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3).reshape(-1, X.shape[1], X.shape[3])


def C_02_split_stack(X, num_heads):
    p = X.shape[-1] // num_heads
    return torch.stack(X.split(p, dim=-1), dim=1).flatten(0, 1)


def O_03_transpose_first(X, num_heads):
    """Transpose features to the front, split, transpose back: also right."""
    b, n, d = X.shape
    Y = X.transpose(1, 2).reshape(b, num_heads, d // num_heads, n).transpose(2, 3)
    return Y.reshape(b * num_heads, n, d // num_heads)


def O_04_unflatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def W_05_strided_heads(X, num_heads):
    """Head i gets features i, i+h, i+2h, ... (reshape (b, n, p, h)); any h>1, p>1."""
    b, n, d = X.shape
    return X.reshape(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2).reshape(b * num_heads, n, -1)


def W_06_head_major(X, num_heads):
    """Rows ordered i * batch + b (chunk + cat on dim 0); wrong when batch > 1 and h > 1."""
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_07_no_permute(X, num_heads):
    """reshape straight to (b*h, n, p): wrong entries when n > 1 and h > 1."""
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_08_float(X, num_heads):
    """.float(): float64 inputs come back float32 (and lose precision)."""
    return C_01_reference(X.float(), num_heads)


def W_09_shared_out_buffer(X, num_heads):
    """'Preallocated' output per shape: a second call with the same shape overwrites the
    tensor returned by the first call."""
    Y = C_01_reference(X, num_heads)
    key = (tuple(Y.shape), Y.dtype, Y.device)
    if key not in _BUF:
        _BUF[key] = torch.empty_like(Y)
    buf = _BUF[key].detach()
    return buf.copy_(Y)


def W_10_detached(X, num_heads):
    """Computes through numpy: no gradient flows back to X."""
    return torch.from_numpy(C_01_reference(X.detach().cpu(), num_heads).numpy().copy()).to(X.device)


def W_11_wrong_n_axis(X, num_heads):
    """Transposes n and p in the middle: (b*h, p, n) viewed as (b*h, n, p); wrong unless n==p==1."""
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1)
    return Y.reshape(b * num_heads, n, d // num_heads)


def W_12_permute_then_view_contig_only(X, num_heads):
    """reshape (b, h, n, p) from X.transpose(1, 2)-free code that assumes d-major storage:
    X.mT.reshape(b, h, p, n).mT with wrong final order (heads as p chunks of n)."""
    b, n, d = X.shape
    Y = X.mT.reshape(b, d // num_heads, num_heads, n).permute(0, 2, 3, 1)
    return Y.reshape(b * num_heads, n, d // num_heads)


def W_13_batch1_squeeze(X, num_heads):
    """squeeze(0) 'to drop the batch axis': for batch 1 the head axis is lost order-wise...
    uses X.squeeze(0) then treats n as batch: wrong when batch == 1 and n > 1."""
    Z = X.squeeze(0) if X.shape[0] == 1 else X
    if Z.dim() == 2:
        Z = Z[:, None, :]                     # (n, 1, d): n treated as the batch
        Y = C_01_reference(Z, num_heads)      # (n*h, 1, p)
        return Y.reshape(1 * num_heads, X.shape[1], -1)
    return C_01_reference(Z, num_heads)


def W_14_round_heads_to_int_dtype(X, num_heads):
    """Moves data through a 0/1 permutation matmul in the default float dtype: int inputs
    become float, float64 loses precision (float32 matmul), NaN spreads across a row."""
    b, n, d = X.shape
    perm = torch.eye(d, dtype=torch.float32, device=X.device)
    Y = (X.to(torch.float32) @ perm).to(X.dtype)
    return C_01_reference(Y, num_heads)


def W_15_nan_to_num(X, num_heads):
    """'Cleans' the input with nan_to_num: NaN/inf entries (legal data) come back as 0/max."""
    return C_01_reference(torch.nan_to_num(X), num_heads)


def W_16_contiguous_clone_requires_grad(X, num_heads):
    """X.clone().detach().requires_grad_(): output is a new leaf; X gets no gradient."""
    return C_01_reference(X.clone().detach().requires_grad_(X.requires_grad), num_heads)


def W_17_mutates_input(X, num_heads):
    """Writes the result's layout back into X's storage via X.data = ...: the caller's X changes
    shape/values (any input)."""
    Y = C_01_reference(X, num_heads)
    X.data = X.data.reshape(X.shape[0], X.shape[1], num_heads, -1).transpose(1, 2).reshape(X.shape)
    return Y


def W_18_heads_reversed(X, num_heads):
    """Row b*h + i holds head h-1-i (split then reversed stack); any h > 1."""
    p = X.shape[-1] // num_heads
    return torch.stack(X.split(p, -1)[::-1], 1).flatten(0, 1)


def W_19_rows_by_n_equals_h(X, num_heads):
    """Uses X.shape[1] where num_heads belongs in the first reshape (n and h confused): right
    only when n == h."""
    b, n, d = X.shape
    Y = X.reshape(b, n, n, -1) if d % n == 0 else X.reshape(b, n, num_heads, -1)
    Y = Y.permute(0, 2, 1, 3).reshape(-1, n, Y.shape[-1])
    return Y.reshape(b * num_heads, n, d // num_heads)


def W_20_half_roundtrip(X, num_heads):
    """Routes through float16 'to save memory': float32/float64 values lose digits, large
    values become inf."""
    return C_01_reference(X.half(), num_heads).to(X.dtype)


def _ref_out(X, h):
    X = X.reshape(-1, h, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class _FastQKV(torch.autograd.Function):
    """Hand-written Function 'to skip autograd bookkeeping'; backward forgets the un-permute."""
    @staticmethod
    def forward(ctx, X, h):
        ctx.shape, ctx.h = X.shape, h
        return C_01_reference(X, h)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class _FastQKV2(torch.autograd.Function):
    """Backward right in layout but accumulates in float32 (float64 grads lose digits)."""
    @staticmethod
    def forward(ctx, X, h):
        ctx.h = h
        return C_01_reference(X, h)

    @staticmethod
    def backward(ctx, g):
        return _ref_out(g.float(), ctx.h).to(g.dtype), None


def W_21_custom_function_bad_backward(X, num_heads):
    """Custom autograd.Function: forward right, backward reshapes the gradient without undoing
    the permute -- X.grad lands at the wrong entries (any n > 1, h > 1)."""
    return _FastQKV.apply(X, num_heads)


def W_22_custom_function_float32_backward(X, num_heads):
    """Custom Function whose backward runs in float32: float64 gradients rounded to float32."""
    return _FastQKV2.apply(X, num_heads)


_CACHE = {}


def W_23_cache_keyed_on_checksum(X, num_heads):
    """Memoises by (shape, dtype, num_heads, sum, sum of squares) when no grad is needed: a
    permutation of an earlier input (same sums) gets the earlier input's result."""
    if X.requires_grad:
        return C_01_reference(X, num_heads)
    key = (tuple(X.shape), X.dtype, X.device, num_heads, float(X.double().sum()),
           float((X.double() ** 2).sum()))
    if key not in _CACHE:
        _CACHE[key] = C_01_reference(X, num_heads).clone()
    return _CACHE[key].clone()


def W_24_chunked_batch_drops_tail(X, num_heads):
    """Processes the batch in chunks of 8 'to bound memory' but the range stops at the last full
    chunk: for batch % 8 != 0 and batch > 8 the tail examples are lost."""
    if X.shape[0] <= 8:
        return C_01_reference(X, num_heads)
    parts = [C_01_reference(X[i:i + 8], num_heads) for i in range(0, X.shape[0] - 7, 8)]
    return torch.cat(parts, 0)


def W_25_long_seq_fast_path(X, num_heads):
    """For n > 64 takes a 'fast path' that splits heads strided (reshape (b, n, p, h))."""
    if X.shape[1] > 64:
        return W_05_strided_heads(X, num_heads)
    return C_01_reference(X, num_heads)
