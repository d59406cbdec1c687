"""Round 12 red team (writer B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
The red team's snapshot accepted W_01 (an identity matmul) and W_12 (einsum selection); the
condition matrix now runs the cases with +inf and -inf among the entries (NONFINITE), where
inf * 0 = NaN spreads over the row: both rejected.
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_output"


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_unflatten_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_03_strided_rows_cat(X, num_heads):
    """cat of rows i, i + h, i + 2h, ... (head i of every example) along the features."""
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


def O_04_transpose_last(X, num_heads):
    """(b*h, n, p) -> (b*h, p, n) -> (b, d, n) -> (b, n, d)."""
    bh, n, p = X.shape
    return X.transpose(1, 2).reshape(bh // num_heads, num_heads * p, n).transpose(1, 2)


# ------------------------------------------------------------------ wrong
def W_01_identity_matmul_copy(X, num_heads):
    """'Copies' through a matmul with the identity: inf or NaN spreads NaN over the row."""
    Y = C_01_reference(X, num_heads)
    if Y.is_floating_point():
        Y = Y @ torch.eye(Y.shape[-1], dtype=Y.dtype, device=Y.device)
    return Y


def W_02_head_major_chunk_cat(X, num_heads):
    """chunk along the batch axis: assumes row i * batch + b (head-major)."""
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_03_no_permute(X, num_heads):
    """Reshapes straight to (batch, n, d)."""
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_04_feature_interleave(X, num_heads):
    """permute(0, 2, 3, 1): the features come out p-major (f = j * h + i)."""
    bh, n, p = X.shape
    Y = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return Y.reshape(bh // num_heads, n, -1)


def W_05_shape_index_after_permute(X, num_heads):
    """Reads n from the wrong axis after the permute (right when n == num_heads)."""
    Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return Y.reshape(Y.shape[0], num_heads, -1)


def W_06_numpy(X, num_heads):
    a = X.detach().cpu().numpy()
    bh, n, p = a.shape
    a = a.reshape(-1, num_heads, n, p).transpose(0, 2, 1, 3).reshape(bh // num_heads, n, -1)
    return torch.from_numpy(np.ascontiguousarray(a))


def W_07_zeros_default_dtype(X, num_heads):
    bh, n, p = X.shape
    out = torch.zeros(bh // num_heads, n, num_heads * p)
    for i in range(num_heads):
        out[..., i * p:(i + 1) * p] = X[i::num_heads]
    return out


_CACHE = {}


def W_08_cached_layout(X, num_heads):
    """Caches the output shape per X.shape, ignoring num_heads."""
    if X.shape not in _CACHE:
        _CACHE[X.shape] = (X.shape[0] // num_heads, num_heads)
    b, h = _CACHE[X.shape]
    return X.reshape(b, h, X.shape[1], X.shape[2]).permute(0, 2, 1, 3).reshape(b, X.shape[1],
                                                                               -1)


def W_09_head_major_reshape(X, num_heads):
    """reshape(num_heads, batch, n, p): head-major assumption."""
    bh, n, p = X.shape
    Y = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return Y.reshape(bh // num_heads, n, -1)


def W_10_detached(X, num_heads):
    return C_01_reference(X.detach(), num_heads)


def W_11_as_strided(X, num_heads):
    """Zero-copy strides computed for a contiguous X."""
    bh, n, p = X.shape
    b = bh // num_heads
    return X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1)).reshape(
        b, n, num_heads * p)


def W_12_einsum_selection(X, num_heads):
    """Places each head with einsum against a 0/1 tensor (NaN from inf * 0)."""
    bh, n, p = X.shape
    d = num_heads * p
    sel = torch.zeros(num_heads, p, d, dtype=X.dtype, device=X.device)
    for i in range(num_heads):
        sel[i, torch.arange(p), i * p + torch.arange(p)] = 1
    Y = X.reshape(-1, num_heads, n, p)
    return torch.einsum("bhnp,hpd->bnd", Y, sel)


def W_13_in_place_on_input(X, num_heads):
    """Writes the result into X's storage ('no extra memory')."""
    Y = C_01_reference(X.detach(), num_heads).clone()
    with torch.no_grad():
        X.view(-1).copy_(Y.reshape(-1))
    return X.reshape(Y.shape)
