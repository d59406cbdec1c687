"""Round 5 red team (writer R5-B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_qkv"


def C_01_reference(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def O_02_split_stack(X, num_heads):
    # stack the heads along a new dim 1, then merge it into the batch
    p = X.shape[-1] // num_heads
    return torch.stack(X.split(p, dim=-1), dim=1).reshape(-1, X.shape[1], p)


def O_03_float64_einops_like(X, num_heads):
    b, n, d = X.shape
    return X.unflatten(-1, (num_heads, d // num_heads)).transpose(1, 2).flatten(0, 1)


def W_01_no_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_02_head_major(X, num_heads):
    # row i * batch + b instead of b * num_heads + i (right for batch 1)
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def W_03_chunk_cat(X, num_heads):
    # heads split and concatenated along the batch: head-major order again
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_04_interleaved_features(X, num_heads):
    # head i gets features i, i + h, i + 2h, ... instead of a contiguous block
    b, n, d = X.shape
    X = X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2)
    return X.reshape(-1, n, d // num_heads)


def W_05_detach(X, num_heads):
    b, n, d = X.shape
    X = X.detach().reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def W_06_view_after_permute(X, num_heads):
    b, n, d = X.shape
    X = X.view(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.view(-1, n, d // num_heads)


def W_07_shape_from_new_X(X, num_heads):
    # reads X.shape[1] after X was reassigned: that is num_heads, not n
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[1], X.shape[3])


def W_08_float32(X, num_heads):
    b, n, d = X.shape
    X = X.float().reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def W_09_via_numpy(X, num_heads):
    b, n, d = X.shape
    a = X.detach().cpu().numpy().reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(a).reshape(-1, n, d // num_heads))


def W_10_permute_n_and_p(X, num_heads):
    # (b, h, p, n) merged then reshaped: right shape only when n == p
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1)
    return X.reshape(-1, n, d // num_heads)


def A_11_truncate_features(X, num_heads):
    # Accepted on purpose: num_hiddens not divisible by num_heads is outside the exercise's
    # contract (MultiHeadAttention refuses it in its constructor, so transpose_qkv never
    # sees it), and for d = 7, h = 2 the text's own formula gives the shape this returns,
    # (batch * 2, n, 7 // 2). Requiring an error would also refuse round 4's O_05 (a loop
    # of slices, accepted as right).
    # silently drops the last d % h features instead of failing
    b, n, d = X.shape
    p = d // num_heads
    X = X[..., : p * num_heads].reshape(b, n, num_heads, p).permute(0, 2, 1, 3)
    return X.reshape(-1, n, p)


def W_12_no_grad(X, num_heads):
    with torch.no_grad():
        b, n, d = X.shape
        X = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
        return X.reshape(-1, n, d // num_heads)


def W_13_transpose_batch_n(X, num_heads):
    # permute(1, 2, 0, 3): (n, h, b, p) -> wrong rows; shape right only when n == b
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(1, 2, 0, 3)
    return X.reshape(-1, b, d // num_heads)


def W_14_inplace_on_view_of_input(X, num_heads):
    # a learner "normalises" the head features in place first (mutates the caller's X)
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, -1)
    Y.mul_(1.0)
    return Y.transpose(1, 2).reshape(-1, n, d // num_heads) if False else \
        Y.permute(0, 2, 1, 3).reshape(-1, n, d // num_heads) + 0 * X.sum()


def O_04_view_first(X, num_heads):
    # Renamed from S01 (the writer thought it fails on a non-contiguous X): .view only splits
    # the last axis here, which works for any strides; it passes on the writer's
    # torch.randn(3, 2, 8).transpose(0, 1) and on the checker's non-contiguous inputs.
    # view on the input: fails on a non-contiguous X
    b, n, d = X.shape
    X = X.view(b, n, num_heads, d // num_heads).permute(0, 2, 1, 3)
    return X.reshape(-1, n, d // num_heads)
