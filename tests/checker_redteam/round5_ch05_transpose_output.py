"""Round 5 red team (writer R5-B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_output"


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_strided_slices(X, num_heads):
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


def O_03_unflatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def W_01_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_02_head_major(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(-1, n, num_heads * p)


def W_03_chunk_cat(X, num_heads):
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_04_interleaved_features(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(-1, n, num_heads * p)


def W_05_detach(X, num_heads):
    X = X.detach().reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def W_06_view_end(X, num_heads):
    X = X.view(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.view(X.shape[0], X.shape[1], -1)


def W_07_reshape_wrong_split(X, num_heads):
    # reshape(b, n, h, p) straight from (b*h, n, p): no permute, wrong entries
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads, p).reshape(bh // num_heads, n, -1)


def W_08_float32(X, num_heads):
    X = X.float().reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def W_09_via_numpy(X, num_heads):
    bh, n, p = X.shape
    a = X.detach().cpu().numpy().reshape(-1, num_heads, n, p).transpose(0, 2, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(a).reshape(-1, n, num_heads * p))


def W_10_transpose_last_two(X, num_heads):
    # permute(0, 3, 1, 2) style mistake: (b, p, h, n)... right shape only when n == p
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 3, 1, 2)
    return X.reshape(-1, n, num_heads * p)


def W_11_mean_heads(X, num_heads):
    # averages heads and tiles: right shape, wrong values
    bh, n, p = X.shape
    m = X.reshape(-1, num_heads, n, p).mean(1)
    return m.repeat(1, 1, num_heads)


def W_12_no_grad(X, num_heads):
    with torch.no_grad():
        X = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


def W_13_batch_from_n(X, num_heads):
    # uses n where batch was meant: right only when batch == n
    bh, n, p = X.shape
    X = X.reshape(n, num_heads, -1, p).permute(0, 2, 1, 3)
    return X.reshape(n, -1, num_heads * p)


def W_14_stack_dim(X, num_heads):
    # stacks heads on the last dim then flattens (p-major interleave)
    bh, n, p = X.shape
    return torch.stack([X[i::num_heads] for i in range(num_heads)], dim=-1).reshape(-1, n, num_heads * p)
