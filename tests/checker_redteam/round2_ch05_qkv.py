"""Round 2 red team (writer R2), ch05_qkv: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch05_qkv.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch

CHECK = "check_transpose_qkv"


def W_plain_reshape(X, num_heads):
    """No permute: right shape, heads mixed with positions."""
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_strided_heads(X, num_heads):
    """reshape(b, n, p, h): head i gets features i, i+h, ... (strided)."""
    b, n, d = X.shape
    X = X.reshape(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2)
    return X.reshape(b * num_heads, n, d // num_heads)


def W_heads_major(X, num_heads):
    """permute(2, 0, 1, 3): row i * batch + b instead of b * num_heads + i."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(b * num_heads, n, -1)


def W_transpose_first(X, num_heads):
    """transpose(1, 2) then reshape: right shape, scrambled."""
    b, n, d = X.shape
    return X.transpose(1, 2).reshape(b * num_heads, n, d // num_heads)


def W_split_cat(X, num_heads):
    """torch.cat(X.split(p, -1), dim=0): heads-major order."""
    p = X.shape[-1] // num_heads
    return torch.cat(X.split(p, dim=-1), dim=0)


def W_view_after_permute(X, num_heads):
    """.view on a permuted tensor: raises for most inputs."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.view(b * num_heads, n, -1)


def W_reshape_n_first(X, num_heads):
    """reshape(b, num_heads, n, p) directly (no permute)."""
    b, n, d = X.shape
    return X.reshape(b, num_heads, n, d // num_heads).reshape(b * num_heads, n, -1)


def W_hardcoded_p(X, num_heads):
    """Hard-codes p = 8 (the chapter's 24 / 3)."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, 8).permute(0, 2, 1, 3)
    return X.reshape(b * num_heads, n, 8)


def W_permute_0213_wrong_reshape(X, num_heads):
    """Right permute, final reshape (-1, d//h, n) then transposed back? No: reshape(-1, p, n).mT."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, d // num_heads, n).transpose(1, 2)


def W_returns_4d(X, num_heads):
    """Forgets the last reshape: (batch, heads, n, p)."""
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)


def W_stack_dim0(X, num_heads):
    """torch.stack(chunks, dim=0): heads-major."""
    b, n, d = X.shape
    return torch.stack(X.chunk(num_heads, dim=-1), dim=0).reshape(b * num_heads, n, -1)


def C_reshape_permute(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, d // num_heads).permute(0, 2, 1, 3)
    return X.reshape(b * num_heads, n, d // num_heads)


def O_stack_dim1(X, num_heads):
    """stack of chunks on dim 1, then flatten: the same layout."""
    b, n, d = X.shape
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).reshape(b * num_heads, n, -1)


def O_unflatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def W_inplace_resize(X, num_heads):
    """Works on X.data through as_strided_-like in-place reshape: changes the caller's tensor."""
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(b * num_heads, n, -1)
    if not X.requires_grad:
        X.zero_()
    return Y.clone()
