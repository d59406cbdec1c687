"""Round 9 red team (writer B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd
but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round9/B/sols/ch05_tout.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass). W_11 (an output buffer per shape, filled with copy_, keeping autograd) and W_15 (a memo
keyed on the shape and X[0, 0, 0]) were accepted in round 9: the checker now calls a second X
of an earlier shape (-X: the same first entry, every other entry different).
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_output"


def C_01_ref(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_cat_strided_rows(X, num_heads):
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


def O_03_unflatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_04_view(X, num_heads):
    bh, n, p = X.shape
    return X.view(bh // num_heads, num_heads, n, p).transpose(1, 2).reshape(
        bh // num_heads, n, num_heads * p)


def W_01_split_cat_head_major(X, num_heads):
    b = X.shape[0] // num_heads
    return torch.cat(X.split(b, dim=0), dim=-1)


def W_02_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_03_head_major_reshape(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(bh // num_heads, n, -1)


def W_04_interleave_features(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(bh // num_heads, n, -1)


def W_05_detach(X, num_heads):
    return C_01_ref(X.detach(), num_heads)


def W_06_float(X, num_heads):
    return C_01_ref(X.float(), num_heads)


def W_07_as_strided(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    return torch.as_strided(X, (b, n, num_heads, p), (num_heads * n * p, p, n * p, 1)
                            ).reshape(b, n, num_heads * p)


def W_08_returns_view_aliasing_input(X, num_heads):
    # the result is a view of X when heads=1; otherwise a copy, but the copy is
    # written back into X's storage ("saves memory")
    out = C_01_ref(X, num_heads)
    if X.is_contiguous() and not X.requires_grad:
        X.view(-1).copy_(out.reshape(-1))
        return X.view(out.shape)
    return out


def W_09_numpy(X, num_heads):
    bh, n, p = X.shape
    a = X.detach().numpy().reshape(-1, num_heads, n, p).transpose(0, 2, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(a)).reshape(bh // num_heads, n, -1)


def W_10_permute_n_p(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 3, 1, 2)
    return X.reshape(bh // num_heads, n, -1)


_BUF = {}


def W_11_reused_buffer_with_grad(X, num_heads):
    bh, n, p = X.shape
    key = (bh, n, p, num_heads, X.dtype)
    out = _BUF.get(key)
    if out is None:
        out = torch.empty(bh // num_heads, n, num_heads * p, dtype=X.dtype)
        _BUF[key] = out
    return out.copy_(C_01_ref(X, num_heads))


_IDX = {}


def W_12_index_cache_ignores_heads(X, num_heads):
    bh, n, p = X.shape
    key = (bh, n, p)
    if key not in _IDX:
        _IDX[key] = (C_01_ref(torch.arange(bh * n * p).reshape(bh, n, p), num_heads), num_heads)
    idx, h0 = _IDX[key]
    return X.reshape(-1)[idx.reshape(-1)].reshape(idx.shape) if X.is_contiguous() else \
        X.contiguous().reshape(-1)[idx.reshape(-1)].reshape(idx.shape)


def W_13_inplace_input(X, num_heads):
    X.data = C_01_ref(X.data, num_heads)
    return X


def O_14_harmless(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 1, 3)
    return X.reshape(n, X.shape[0], -1).transpose(0, 1).reshape(X.shape[0], n, -1) \
        if False else X.reshape(-1, n, num_heads * p)


_LAST = {}


def W_15_memo_keyed_on_first_entry(X, num_heads):
    key = (tuple(X.shape), num_heads, X.dtype, float(X.reshape(-1)[0]))
    if key not in _LAST:
        _LAST[key] = C_01_ref(X, num_heads)
    return _LAST[key]
