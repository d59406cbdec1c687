"""Round 9 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round9/B/sols/ch05_tqkv.py with the names W01_x written W_01_x (O03b_view written
O_20_view). tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_
entry (must pass). W_18 (an output buffer per shape, filled with copy_, keeping autograd) and
W_19 (a memo keyed on the shape and X[0, 0, 0]) were accepted in round 9: the checker now
calls a second X of an earlier shape (-X: the same first entry, every other entry different).
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_qkv"


def C_01_ref(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def O_02_chunk_stack(X, num_heads):
    b, n, d = X.shape
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).reshape(b * num_heads, n, -1)


def O_03_unflatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_04_einsum_free_loop(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    rows = [X[bi, :, i * p:(i + 1) * p] for bi in range(b) for i in range(num_heads)]
    return torch.stack(rows)


def W_01_chunk_cat_head_major(X, num_heads):
    # heads into the batch, but head-major: row i * batch + b
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_02_interleaved_features(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2)
    return X.reshape(b * num_heads, n, -1)


def O_20_view(X, num_heads):
    b, n, d = X.shape
    X = X.view(b, n, num_heads, d // num_heads).transpose(1, 2)
    return X.contiguous().view(b * num_heads, n, d // num_heads)


def W_04_as_strided_assumes_contiguous(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    Y = torch.as_strided(X, (b, num_heads, n, p), (n * d, p, d, 1))
    return Y.reshape(b * num_heads, n, p)


def W_05_detach(X, num_heads):
    return C_01_ref(X.detach(), num_heads)


def W_06_numpy_roundtrip(X, num_heads):
    b, n, d = X.shape
    a = X.detach().cpu().numpy().reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3)
    return torch.from_numpy(np.ascontiguousarray(a)).reshape(b * num_heads, n, -1)


def W_07_float(X, num_heads):
    return C_01_ref(X.float(), num_heads)


_IDX = {}


def W_08_gather_index_cache_ignores_heads(X, num_heads):
    b, n, d = X.shape
    key = (b, n, d)
    if key not in _IDX:
        _IDX[key] = C_01_ref(torch.arange(b * n * d).reshape(b, n, d), num_heads).flatten()
    idx = _IDX[key]
    return X.flatten()[idx].reshape(-1, n, d // num_heads)


_BUF = {}


def W_09_reused_output_buffer(X, num_heads):
    b, n, d = X.shape
    key = (b, n, d, num_heads, X.dtype)
    out = _BUF.get(key)
    if out is None:
        out = torch.empty(b * num_heads, n, d // num_heads, dtype=X.dtype)
        _BUF[key] = out
    with torch.no_grad():
        out.copy_(C_01_ref(X, num_heads))
    return out


def O_10_batch_for_n_harmless(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(b * num_heads, b, -1) if b == n else X.reshape(-1, n, d // num_heads)


def W_11_permute_n_p(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1)
    return X.reshape(b * num_heads, n, -1)


def W_12_head_major_permute(X, num_heads):
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(b * num_heads, n, -1)


def W_13_inplace_transpose_input(X, num_heads):
    b, n, d = X.shape
    X.data = X.data.reshape(b, n, num_heads, -1).transpose(1, 2).reshape(b * num_heads, n, -1)
    return X


def W_14_data_attr(X, num_heads):
    return C_01_ref(X.data, num_heads)


def W_15_contiguous_input_only_stride(X, num_heads):
    # builds the result from X.storage order (flatten of the untransposed storage)
    b, n, d = X.shape
    flat = torch.empty(0, dtype=X.dtype).set_(X.untyped_storage(), X.storage_offset(),
                                              (b * n * d,), (1,))
    return C_01_ref(flat.reshape(b, n, d), num_heads)


def W_16_transpose_mixed_dims(X, num_heads):
    # transpose(1, 2) on the 4-D view but the reshape uses -1 for n
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).transpose(1, 2)
    return X.reshape(-1, d // num_heads, n).transpose(1, 2) if n != d // num_heads else \
        X.reshape(-1, n, d // num_heads)


def W_17_gather_cache_by_shape_and_heads_not_dtype(X, num_heads):
    # index cache keyed on shape and heads; int index built once: right. But the
    # gather uses torch.take on X.contiguous() of the first call's X (stale X)
    b, n, d = X.shape
    key = (b, n, d, num_heads)
    if key not in _IDX:
        _IDX[key] = (C_01_ref(torch.arange(b * n * d).reshape(b, n, d), num_heads), X)
    idx, X0 = _IDX[key]
    return torch.take(X0, idx)


_BUF2 = {}


def W_18_reused_buffer_with_grad(X, num_heads):
    b, n, d = X.shape
    key = (b, n, d, num_heads, X.dtype)
    out = _BUF2.get(key)
    if out is None:
        out = torch.empty(b * num_heads, n, d // num_heads, dtype=X.dtype)
        _BUF2[key] = out
    return out.copy_(C_01_ref(X, num_heads))


_LAST = {}


def W_19_returns_previous_result_same_shape(X, num_heads):
    # "memoised": keyed on shape, heads and the first entry only
    key = (tuple(X.shape), num_heads, X.dtype, float(X.reshape(-1)[0]))
    if key not in _LAST:
        _LAST[key] = C_01_ref(X, num_heads)
    return _LAST[key]
