"""Round 2 red team (writer R2), ch05_out: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch05_out.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch

CHECK = "check_transpose_output"


def W_plain_reshape(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, p * num_heads)


def W_heads_major(X, num_heads):
    """reshape(num_heads, batch, n, p): assumes row i * batch + b."""
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(bh // num_heads, n, -1)


def W_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).reshape(bh // num_heads, n, -1)


def W_chunk_cat(X, num_heads):
    """torch.cat(X.chunk(num_heads, 0), -1): heads-major again."""
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_batch_from_n(X, num_heads):
    """batch = X.shape[0] // X.shape[1] (divides by n): right only when n == num_heads."""
    bh, n, p = X.shape
    b = bh // n
    X = X.reshape(b, -1, n, p).permute(0, 2, 1, 3)
    return X.reshape(b, n, -1)


def W_view_after_permute(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 1, 3)
    return X.view(bh // num_heads, n, -1)


def W_strided_concat(X, num_heads):
    """permute(0, 2, 3, 1): interleaves the heads' features."""
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(bh // num_heads, n, -1)


def W_transpose_12(X, num_heads):
    """transpose(1, 2) of the 3-D tensor, then reshape."""
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).transpose(2, 3).reshape(bh // num_heads, n, -1)


def W_keeps_heads_axis(X, num_heads):
    """Returns (batch, n, heads, p)."""
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).permute(0, 2, 1, 3)


def C_reverse(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(bh // num_heads, num_heads, n, p).permute(0, 2, 1, 3)
    return X.reshape(bh // num_heads, n, num_heads * p)


def O_transpose_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_cat_heads(X, num_heads):
    """Concatenates head i = X[i::num_heads] along the features."""
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


def W_inplace_zero(X, num_heads):
    """Returns a copy and clears the input (when no grad)."""
    bh, n, p = X.shape
    Y = X.reshape(bh // num_heads, num_heads, n, p).permute(0, 2, 1, 3).reshape(bh // num_heads, n, -1).clone()
    if not X.requires_grad:
        X.zero_()
    return Y
