"""Round 8 red team (writer B, issue 12), ch05_transpose_output: wrong (W_),
right (C_), odd but right (O_) and against-the-wording (S_) solutions written from the
exercise text alone; copied from /work/redteam/round8/B/sols/ch05_transpose_output.py
with the names W01_x written W_01_x. tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass). The writer first wrote O_05 (view instead of
reshape) as wrong: splitting one axis always works with view, even on a non-contiguous
input, so it is right.
"""
# flake8: noqa
import torch

CHECK = "check_transpose_output"

_cache = {}


# ---- correct / odd -------------------------------------------------------------------
def C_01_reshape_permute(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_unbind_cat(X, num_heads):
    return torch.cat(X.unflatten(0, (-1, num_heads)).unbind(1), dim=-1)


def O_03_unflatten_transpose_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_04_loops_new_tensor(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    rows = [torch.cat([X[bi * num_heads + i] for i in range(num_heads)], dim=-1)
            for bi in range(b)]
    return torch.stack(rows) if rows else X.new_zeros(0, n, p * num_heads)


# ---- wrong ---------------------------------------------------------------------------
def W_01_head_major(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(-1, n, num_heads * p)


def W_02_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_03_features_interleaved(X, num_heads):
    # permute(0, 2, 3, 1): (b, n, p, heads) -> feature j of head i lands at j * h + i
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(X.shape[0], n, -1)


def W_04_split_by_batch(X, num_heads):
    # splits the batch axis into num_heads chunks of size batch (head-major reading)
    b = X.shape[0] // num_heads
    return torch.cat(torch.split(X, b, dim=0), dim=-1)


def W_05_detach(X, num_heads):
    return C_01_reshape_permute(X.detach(), num_heads)


def O_05_view_split_is_always_fine(X, num_heads):
    bh, n, p = X.shape
    X = X.view(-1, num_heads, n, p).permute(0, 2, 1, 3).contiguous()
    return X.view(X.shape[0], n, -1)


def W_07_float32_buffer(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    out = torch.zeros(b, n, num_heads * p)
    for bi in range(b):
        for i in range(num_heads):
            out[bi, :, i * p:(i + 1) * p] = X[bi * num_heads + i]
    return out


def W_08_buffer_via_data(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    out = X.new_zeros(b, n, num_heads * p)
    for bi in range(b):
        for i in range(num_heads):
            out.data[bi, :, i * p:(i + 1) * p] = X.data[bi * num_heads + i]
    return out


def W_09_index_cache_on_shape(X, num_heads):
    key = tuple(X.shape)
    if key not in _cache:
        idx = torch.arange(X.numel()).reshape(X.shape)
        _cache[key] = C_01_reshape_permute(idx, num_heads).reshape(-1)
    bh, n, p = X.shape
    return X.reshape(-1)[_cache[key]].reshape(-1, n, num_heads * p)


def W_10_n_and_p_swapped(X, num_heads):
    # (b, heads, n, p) -> permute(0, 3, 1, 2) mixes n and p; shape right only if n == p
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 3, 1, 2)
    return X.reshape(X.shape[0], n, -1)


def W_11_squeeze_at_end(X, num_heads):
    return C_01_reshape_permute(X, num_heads).squeeze()


def W_12_as_strided_zero_copy(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    Y = X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1))
    return Y.reshape(b, n, num_heads * p)


def W_13_output_to_float(X, num_heads):
    return C_01_reshape_permute(X, num_heads).float()


def W_14_batch_from_first_call(X, num_heads):
    # remembers the batch size of the first call (e.g. set when the model was built)
    if "b" not in _cache:
        _cache["b"] = X.shape[0] // num_heads
    b = _cache["b"]
    return X.reshape(b, num_heads, X.shape[1], -1).permute(0, 2, 1, 3).reshape(
        b, X.shape[1], -1)


def W_15_split_count_not_size(X, num_heads):
    # torch.chunk takes a number of chunks: chunk(X, num_heads) reads head-major
    return torch.cat(torch.chunk(X, num_heads, dim=0), dim=-1)


def W_16_inplace_scale_input(X, num_heads):
    # "re-scales" the heads in place before concatenating (mutates the caller's tensor)
    X.mul_(1.0)
    return C_01_reshape_permute(X, num_heads)
