"""Round 10 red team (writer B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 10 already.
"""
# flake8: noqa
import torch

CHECK = "check_transpose_output"


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_01_permute_sequence_first(X, num_heads):
    bh, n, p = X.shape
    return X.permute(1, 0, 2).reshape(n, bh // num_heads, num_heads * p).permute(1, 0, 2)


def O_02_unflatten_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_03_cat_of_strided_rows(X, num_heads):
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


# ------------------------------------------------------------------ wrong
def W_01_head_major(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(num_heads, bh // num_heads, n, p).permute(1, 2, 0, 3).reshape(
        bh // num_heads, n, -1)


def W_02_interleaved(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1).reshape(bh // num_heads, n, -1)


def W_03_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_04_detach(X, num_heads):
    return C_01_reference(X.detach(), num_heads)


def W_05_cat_of_chunks(X, num_heads):
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_06_float_cast(X, num_heads):
    return C_01_reference(X, num_heads).float()


def W_07_empty_default_dtype(X, num_heads):
    bh, n, p = X.shape
    out = torch.empty(bh // num_heads, n, num_heads * p)
    for i in range(num_heads):
        out[:, :, i * p:(i + 1) * p] = X[i::num_heads]
    return out


def W_08_as_strided_assumes_contiguous(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    return X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1)).reshape(
        b, n, num_heads * p)


_first = {}


def W_09_first_call_num_heads(X, num_heads):
    return C_01_reference(X, _first.setdefault("h", num_heads))


def W_10_swap_n_and_p(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, p, n).permute(0, 3, 1, 2).reshape(bh // num_heads, n, -1)


def W_11_transpose_instead_of_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).transpose(1, 3).reshape(bh // num_heads, n, -1)


def W_12_tolist_roundtrip(X, num_heads):
    return torch.tensor(C_01_reference(X, num_heads).tolist(), dtype=X.dtype,
                        requires_grad=X.requires_grad)


_buf = {}


def W_13_output_buffer_per_shape(X, num_heads):
    y = C_01_reference(X, num_heads)
    key = (tuple(X.shape), num_heads, X.dtype)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    with torch.no_grad():
        _buf[key].copy_(y)
    return _buf[key]


def W_14_squeeze_at_end(X, num_heads):
    return C_01_reference(X, num_heads).squeeze()
