"""Round 11 red team (writer B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 11 already except W_17 (X * 1.0: an integer X comes
back float32); two int64 cases now reject it (the function only moves entries, so it keeps
any dtype).
"""
# flake8: noqa
import torch

CHECK = "check_transpose_output"


def C_01_reshape_permute(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_unbind_cat(X, num_heads):
    bh, n, p = X.shape
    return torch.cat(X.reshape(bh // num_heads, num_heads, n, p).unbind(1), dim=-1)


def O_03_unflatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


# ---- wrong ---------------------------------------------------------------------------

def W_01_reshape_only(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_02_split_by_batch_cat(X, num_heads):
    """Inverse of a head-major layout."""
    bh, n, p = X.shape
    return torch.cat(X.split(bh // num_heads, dim=0), dim=-1)


def W_03_interleaved_features(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(X.shape[0], n, -1)


def W_04_batch_first_reshape(X, num_heads):
    """(b*h) split as (h, b) instead of (b, h)."""
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(X.shape[0], n, -1)


def O_05_view_final(X, num_heads):
    bh, n, p = X.shape
    X = X.view(-1, num_heads, n, p).permute(0, 2, 1, 3)
    return X.contiguous().view(X.shape[0], n, -1)


def O_06_view_input(X, num_heads):
    """.view on the input: crashes on a non-contiguous X (e.g. an output of transpose)."""
    bh, n, p = X.shape
    X = X.view(-1, num_heads, n, p).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], n, -1)


def W_07_detach(X, num_heads):
    return C_01_reshape_permute(X.detach(), num_heads)


def W_08_as_strided(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    return X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1)).reshape(
        b, n, num_heads * p)


def W_09_transpose_1_2_whole(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).transpose(1, 3)       # (b, p, n, h)
    return X.transpose(1, 2).reshape(X.shape[0], n, -1)       # (b, n, p, h): interleaved


def W_10_float_cast(X, num_heads):
    return C_01_reshape_permute(X.to(torch.float32), num_heads)


def O_11_slice_noop(X, num_heads):
    """Infers batch from n (thinks the first axis is num_heads * n)."""
    bh, n, p = X.shape
    X = X.reshape(bh // num_heads, num_heads, n, p).permute(0, 2, 1, 3)
    return X.reshape(-1, n, num_heads * p)[: bh // num_heads]


def W_12_numpy(X, num_heads):
    import numpy as np
    a = X.detach().cpu().numpy()
    bh, n, p = a.shape
    a = a.reshape(-1, num_heads, n, p).transpose(0, 2, 1, 3).reshape(bh // num_heads, n, -1)
    return torch.from_numpy(np.ascontiguousarray(a))


def W_13_batch_one_path(X, num_heads):
    bh, n, p = X.shape
    if bh == num_heads:
        return X.reshape(1, n, -1)
    return C_01_reshape_permute(X, num_heads)


def W_14_n_equals_heads_path(X, num_heads):
    """Permutes (0, 2, 1, 3) but on a reshape (b, n, heads, p): right when n == heads."""
    bh, n, p = X.shape
    X = X.reshape(-1, n, num_heads, p).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class _WrongBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, num_heads):
        ctx.shape = X.shape
        return C_01_reshape_permute(X, num_heads)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


def W_15_custom_function_wrong_backward(X, num_heads):
    return _WrongBackward.apply(X, num_heads)


_BUF = {}


def W_16_output_buffer_reused(X, num_heads):
    bh, n, p = X.shape
    key = (bh, n, p, num_heads, X.dtype, X.device)
    if key not in _BUF:
        _BUF[key] = torch.empty(bh // num_heads, n, p * num_heads, dtype=X.dtype,
                                device=X.device)
    out = _BUF[key]
    with torch.no_grad():
        out.copy_(C_01_reshape_permute(X, num_heads))
    if X.requires_grad:
        return C_01_reshape_permute(X, num_heads)
    return out


def W_17_times_one_float(X, num_heads):
    return C_01_reshape_permute(X * 1.0, num_heads)


def W_18_zeros_buffer_fill(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    out = torch.zeros(b, n, num_heads * p, device=X.device)
    for i in range(b):
        for h in range(num_heads):
            out[i, :, h * p:(h + 1) * p] = X[i * num_heads + h]
    return out
