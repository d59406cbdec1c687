"""Round 10 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 10 already. O_05 was meant to be wrong
when batch == n but its branch is a no-op (right). S_01 (.view) is right on the inputs.
"""
# flake8: noqa
import torch

CHECK = "check_transpose_qkv"


def C_01_reference(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def O_01_unflatten_flatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_02_transpose_first(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    return X.transpose(1, 2).reshape(b * num_heads, p, n).transpose(1, 2)


def O_03_stack_of_chunks(X, num_heads):
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).flatten(0, 1)


def O_04_loop_into_empty_like(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    out = X.new_empty(b * num_heads, n, p)
    for i in range(num_heads):
        out[i::num_heads] = X[:, :, i * p:(i + 1) * p]
    return out


def S_01_view_needs_contiguous(X, num_heads):
    b, n, d = X.shape
    return X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).contiguous().view(
        b * num_heads, n, -1)


# ------------------------------------------------------------------ wrong
def W_01_interleaved_heads(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2).reshape(b * num_heads, n, -1)


def W_02_head_major_rows(X, num_heads):
    return torch.cat(X.split(X.shape[-1] // num_heads, dim=-1), dim=0)


def W_03_no_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_04_detach(X, num_heads):
    return C_01_reference(X.detach(), num_heads)


def W_05_float_cast(X, num_heads):
    return C_01_reference(X.float(), num_heads)


def W_06_empty_default_dtype(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    out = torch.empty(b * num_heads, n, p)
    for i in range(num_heads):
        out[i::num_heads] = X[:, :, i * p:(i + 1) * p]
    return out


def W_07_as_strided_assumes_contiguous(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    return X.as_strided((b, num_heads, n, p), (n * d, p, d, 1)).reshape(b * num_heads, n, p)


_first = {}


def W_08_first_call_num_heads(X, num_heads):
    h = _first.setdefault("h", num_heads)
    return C_01_reference(X, h)


_buf = {}


def W_09_output_buffer_per_shape(X, num_heads):
    b, n, d = X.shape
    key = (b, n, d, num_heads, X.dtype)
    y = C_01_reference(X, num_heads)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    with torch.no_grad():
        _buf[key].copy_(y)
    return _buf[key].requires_grad_(X.requires_grad)


def W_10_feature_size_from_n(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, n // num_heads).permute(0, 2, 1, 3).reshape(
        b * num_heads, n, -1)


def W_11_wrong_permute(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    return X.reshape(b, n, num_heads, p).permute(0, 2, 3, 1).reshape(b * num_heads, n, p)


def W_12_tolist_roundtrip(X, num_heads):
    return torch.tensor(C_01_reference(X, num_heads).tolist(), dtype=X.dtype,
                        requires_grad=X.requires_grad)


def W_13_transpose_then_reshape(X, num_heads):
    b, n, d = X.shape
    return X.transpose(1, 2).reshape(b * num_heads, n, d // num_heads)


def W_14_in_place_scale_input(X, num_heads):
    """Learner 'normalises' the head features in place (X /= 1 is a no-op, so uses mul_
    with the identity on a detached view -- no: scales by 1.0 then adds 0): actually
    writes the heads back into X's storage."""
    Y = C_01_reference(X, num_heads)
    with torch.no_grad():
        X.zero_()
    return Y


def W_15_squeeze_at_end(X, num_heads):
    return C_01_reference(X, num_heads).squeeze()


def O_05_batch_equals_n_branch_noop(X, num_heads):
    """Uses X.shape[1] (n) where the batch belongs: right only when batch == n."""
    b, n, d = X.shape
    Y = X.reshape(n, n, num_heads, -1) if b == n else X.reshape(b, n, num_heads, -1)
    return Y.permute(0, 2, 1, 3).reshape(-1, n, d // num_heads)
