"""Round 11 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 11 already except W_20 (X * 1.0: an integer X comes
back float32); two int64 cases now reject it (the function only moves entries, so it keeps
any dtype). The writer renamed several of its W entries O (right on reflection: .view,
num_heads == 1 returning X, the n == 1 path).
"""
# flake8: noqa
import torch

CHECK = "check_transpose_qkv"


def C_01_reshape_permute(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3).reshape(-1, X.shape[1], X.shape[3])


def O_02_chunk_stack(X, num_heads):
    b, n, d = X.shape
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).reshape(b * num_heads, n, -1)


def O_03_unflatten_transpose_flatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_04_einops_like_loop(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    rows = [X[i, :, h * p:(h + 1) * p] for i in range(b) for h in range(num_heads)]
    return torch.stack(rows)


# ---- wrong ---------------------------------------------------------------------------

def W_01_reshape_without_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_02_heads_interleaved(X, num_heads):
    """Head i gets features i, i+h, i+2h, ... (strided split)."""
    b, n, d = X.shape
    return X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2).reshape(b * num_heads, n, -1)


def W_03_head_major_cat(X, num_heads):
    """torch.cat of the chunks along the batch: row i*b + b (head-major)."""
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def O_04b_view_not_reshape(X, num_heads):
    """.view: fails on a non-contiguous X."""
    b, n, d = X.shape
    X = X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).contiguous()
    return X.view(b * num_heads, n, -1)


def W_05_as_strided_assumes_contiguous(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    return X.as_strided((b, num_heads, n, p), (n * d, p, d, 1)).reshape(b * num_heads, n, p)


def W_06_detach(X, num_heads):
    return C_01_reshape_permute(X.detach(), num_heads)


def W_07_float_cast(X, num_heads):
    return C_01_reshape_permute(X.float(), num_heads)


def W_08_numpy_roundtrip(X, num_heads):
    return torch.as_tensor(C_01_reshape_permute(X.detach(), num_heads).numpy())


def W_09_swap_n_and_heads(X, num_heads):
    """reshape to (b, heads, n, p) directly then swap: right only when n == heads... no."""
    b, n, d = X.shape
    return X.reshape(b, num_heads, n, -1).reshape(b * num_heads, n, -1)


def W_10_permute_0_2_3_1(X, num_heads):
    """(b, n, h, p) -> (b, h, p, n) -> reshape: p and n mixed up (right shape if p == n)."""
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1).reshape(b * num_heads, n, -1)


def O_11_heads_from_batch_view(X, num_heads):
    """transpose(1, 2) of the whole (b, n, d) before splitting."""
    b, n, d = X.shape
    return X.transpose(1, 2).reshape(b, num_heads, -1, n).transpose(2, 3).reshape(
        b * num_heads, n, -1)


def O_12_p_from_shape1(X, num_heads):
    """Uses X.shape[1] (n) where num_hiddens is meant in the head size."""
    b, n, d = X.shape
    p = d // num_heads
    return X.reshape(b, n, num_heads, p).permute(0, 2, 1, 3).reshape(-1, X.shape[1], p)


def O_13_data_reassign_control(X, num_heads):
    """Works on X.data in place: the caller's X is re-laid out."""
    b, n, d = X.shape
    Y = C_01_reshape_permute(X, num_heads)
    X.data = X.data.reshape(b, n, d)  # no-op re-assign, harmless? (control)
    return Y


def W_14_tensor_from_list(X, num_heads):
    return torch.tensor(C_01_reshape_permute(X, num_heads).tolist(), dtype=X.dtype)


def O_15_num_heads_one_returns_input(X, num_heads):
    """Fast path for one head: returns X itself (alias; fine) -- control."""
    if num_heads == 1:
        return X
    return C_01_reshape_permute(X, num_heads)


def W_16_batch_one_path(X, num_heads):
    """For batch 1, reshape without permute ('nothing to interleave')."""
    b, n, d = X.shape
    if b == 1:
        return X.reshape(num_heads, n, -1)
    return C_01_reshape_permute(X, num_heads)


def O_17_n_one_path(X, num_heads):
    """For one position, reshape directly (heads are contiguous then... but wrong axis)."""
    b, n, d = X.shape
    if n == 1:
        return X.reshape(b * num_heads, 1, -1)
    return C_01_reshape_permute(X, num_heads)


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, num_heads):
        ctx.shape = X.shape
        return C_01_reshape_permute(X, num_heads)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None     # forgets to undo the permute


def W_18_custom_function_wrong_backward(X, num_heads):
    """A 'fast' autograd.Function whose backward just reshapes the gradient back."""
    return _WrongBackward.apply(X, num_heads)


_BUF = {}


def W_19_output_buffer_reused(X, num_heads):
    """Writes into one preallocated buffer per shape: a second call overwrites the first
    call's result."""
    b, n, d = X.shape
    key = (b, n, d, num_heads, X.dtype, X.device)
    if key not in _BUF:
        _BUF[key] = torch.empty(b * num_heads, n, d // num_heads, dtype=X.dtype,
                                device=X.device)
    out = _BUF[key]
    with torch.no_grad():
        out.copy_(C_01_reshape_permute(X, num_heads))
    if X.requires_grad:
        return C_01_reshape_permute(X, num_heads)
    return out


def W_20_times_one_float(X, num_heads):
    """Multiplies by 1.0 'to make a copy': integer inputs come back float."""
    return C_01_reshape_permute(X * 1.0, num_heads)


def W_21_zeros_buffer_fill(X, num_heads):
    """Fills torch.zeros (float32 by default) head by head: keeps values, loses dtype
    only for non-float32 inputs -- and keeps the gradient."""
    b, n, d = X.shape
    p = d // num_heads
    out = torch.zeros(b * num_heads, n, p, device=X.device)
    for i in range(b):
        for h in range(num_heads):
            out[i * num_heads + h] = X[i, :, h * p:(h + 1) * p]
    return out
