"""Round 8 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_),
right (C_), odd but right (O_) and against-the-wording (S_) solutions written from the
exercise text alone; copied from /work/redteam/round8/B/sols/ch05_transpose_qkv.py
with the names W01_x written W_01_x. tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass). The writer first wrote O_05 (view instead of
reshape) as wrong: splitting one axis always works with view, even on a non-contiguous
input, so it is right.
"""
# flake8: noqa
import torch

CHECK = "check_transpose_qkv"

_cache = {}


# ---- correct / odd -------------------------------------------------------------------
def C_01_reshape_permute(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def O_02_split_stack(X, num_heads):
    p = X.shape[-1] // num_heads
    return torch.stack(torch.split(X, p, dim=-1), dim=1).flatten(0, 1)


def O_03_unflatten_transpose(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_04_einops_like_einsum(X, num_heads):
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, d // num_heads)
    return torch.einsum("bnhp->bhnp", Y).reshape(b * num_heads, n, d // num_heads)


# ---- wrong ---------------------------------------------------------------------------
def W_01_heads_interleaved(X, num_heads):
    # splits d as (p, heads): head i gets features i, i+h, i+2h, ...
    b, n, d = X.shape
    X = X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2)
    return X.reshape(b * num_heads, n, -1)


def W_02_no_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_03_head_major(X, num_heads):
    # row i * batch + b instead of b * num_heads + i
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def W_04_cat_split_head_major(X, num_heads):
    p = X.shape[-1] // num_heads
    return torch.cat(torch.split(X, p, dim=-1), dim=0)


def W_05_detach(X, num_heads):
    return C_01_reshape_permute(X.detach(), num_heads)


def O_05_view_split_is_always_fine(X, num_heads):
    # view fails on a non-contiguous X (e.g. a transposed tensor)
    b, n, d = X.shape
    X = X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).contiguous()
    return X.view(b * num_heads, n, -1)


def W_07_float32_buffer(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    out = torch.zeros(b * num_heads, n, p)
    for bi in range(b):
        for i in range(num_heads):
            out[bi * num_heads + i] = X[bi, :, i * p:(i + 1) * p]
    return out


def W_08_buffer_via_data(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    out = torch.zeros(b * num_heads, n, p, dtype=X.dtype, device=X.device)
    for bi in range(b):
        for i in range(num_heads):
            out.data[bi * num_heads + i] = X.data[bi, :, i * p:(i + 1) * p]
    return out


def W_09_index_cache_on_shape(X, num_heads):
    # precomputed gather index, cached on X's shape only (num_heads forgotten in the key)
    key = tuple(X.shape)
    if key not in _cache:
        b, n, d = X.shape
        idx = torch.arange(b * n * d).reshape(b, n, d)
        _cache[key] = C_01_reshape_permute(idx, num_heads).reshape(-1)
    idx = _cache[key]
    b, n, d = X.shape
    return X.reshape(-1)[idx].reshape(-1, n, d // num_heads)


def W_10_n_and_p_swapped(X, num_heads):
    # permute(0, 2, 3, 1): (b, heads, p, n) -> right shape only when n == p
    b, n, d = X.shape
    p = d // num_heads
    X = X.reshape(b, n, num_heads, p).permute(0, 2, 3, 1)
    return X.reshape(b * num_heads, n, p)


def W_11_transpose_inplace_input(X, num_heads):
    # the learner "saves memory" with in-place ops on X itself
    b, n, d = X.shape
    Y = X.unsqueeze(2)
    Y.mul_(1.0)  # harmless-looking in-place op; on a leaf that requires grad it errors
    return C_01_reshape_permute(Y.squeeze(2), num_heads)


def W_12_output_to_float(X, num_heads):
    # casts to float32 "for the matmul that follows"
    return C_01_reshape_permute(X, num_heads).float()


def W_13_heads_from_global(X, num_heads):
    # uses the batch from the previous call (stale state)
    global _last_b
    b = globals().get("_last_b", X.shape[0])
    _last_b = X.shape[0]
    n, d = X.shape[1], X.shape[2]
    Y = X.reshape(X.shape[0], n, num_heads, -1).permute(0, 2, 1, 3)
    return Y.reshape(b * num_heads, n, -1) if b == X.shape[0] else Y.reshape(-1, n, d)


def W_14_chunk_wrong_dim_order(X, num_heads):
    # chunk along features, stack on a new last-but-two axis, then flatten (n, heads)
    parts = X.chunk(num_heads, dim=-1)            # heads x (b, n, p)
    Y = torch.stack(parts, dim=2)                 # (b, n, heads, p)
    return Y.reshape(-1, X.shape[1], X.shape[2] // num_heads)


def W_15_squeeze_at_end(X, num_heads):
    # a stray squeeze(): one-step decoding (n == 1) or num_hiddens == num_heads loses axes
    return C_01_reshape_permute(X, num_heads).squeeze()


def W_16_as_strided_zero_copy(X, num_heads):
    # "zero-copy" version: strides computed for a contiguous X; silent garbage otherwise
    b, n, d = X.shape
    p = d // num_heads
    Y = X.as_strided((b, num_heads, n, p), (n * d, p, d, 1))
    return Y.reshape(b * num_heads, n, p)


def W_17_split_size_not_count(X, num_heads):
    # torch.split takes a chunk *size*: right only when p == num_heads (d = h * h)
    return torch.stack(torch.split(X, num_heads, dim=-1), dim=1).flatten(0, 1)
