"""Round 12 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
The red team's snapshot accepted W_01 (X @ eye) and W_11 (einsum against 0/1 ones); the condition
matrix now runs the cases with +inf and -inf among the entries (NONFINITE), where inf * 0 = NaN
spreads over the row: both rejected.
"""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_transpose_qkv"


def C_01_reference(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3).reshape(-1, X.shape[1], X.shape[3])


def O_02_unflatten_flatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_03_stack_of_chunks(X, num_heads):
    """Heads stacked after the batch axis: row b * h + i is head i of example b."""
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).flatten(0, 1)


def O_04_index_gather(X, num_heads):
    """Loops over heads into a fresh tensor of X's dtype (CopySlices keeps the graph)."""
    b, n, d = X.shape
    p = d // num_heads
    out = X.new_empty(b * num_heads, n, p)
    for i in range(num_heads):
        out[i::num_heads] = X[..., i * p:(i + 1) * p]
    return out


# ------------------------------------------------------------------ wrong
def W_01_permutation_matmul(X, num_heads):
    """Moves the entries with a 0/1 permutation matrix: inf or NaN anywhere in a row
    spreads NaN (inf * 0) over the row, -0.0 becomes +0.0."""
    b, n, d = X.shape
    p = d // num_heads
    # A feature permutation is the identity here; the head split is what matters. Use a
    # matmul with the identity to 'make a copy', then reshape.
    eye = torch.eye(d, dtype=X.dtype, device=X.device)
    Y = X @ eye if X.is_floating_point() else X
    return Y.reshape(b, n, num_heads, p).permute(0, 2, 1, 3).reshape(-1, n, p)


def W_02_head_major_split_cat(X, num_heads):
    """cat of the splits along the batch axis: row i * batch + b (head-major)."""
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_03_shape_index_after_permute(X, num_heads):
    """Reads n from the permuted tensor's axis 1 (= num_heads): right only when n ==
    num_heads."""
    Y = X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return Y.reshape(-1, Y.shape[1], Y.shape[3])


def W_04_strided_heads(X, num_heads):
    """Splits the features as (p, heads): head i gets features i, i + h, i + 2h, ..."""
    b, n, d = X.shape
    Y = X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2)
    return Y.reshape(b * num_heads, n, -1)


def W_05_through_numpy(X, num_heads):
    """NumPy round trip: no gradient, no bfloat16, CPU only."""
    a = X.detach().cpu().numpy()
    b, n, d = a.shape
    a = a.reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3).reshape(b * num_heads, n, -1)
    return torch.from_numpy(np.ascontiguousarray(a))


def W_06_float_buffer(X, num_heads):
    """Fresh buffer with torch.zeros' default dtype: float32 whatever X is."""
    b, n, d = X.shape
    p = d // num_heads
    out = torch.zeros(b * num_heads, n, p)
    for i in range(num_heads):
        out[i::num_heads] = X[..., i * p:(i + 1) * p]
    return out


_PERM = {}


def W_07_cached_index_on_shape(X, num_heads):
    """Caches the gather index per X.shape, ignoring num_heads."""
    b, n, d = X.shape
    if X.shape not in _PERM:
        p = d // num_heads
        idx = torch.arange(b * n * d).reshape(b, n, num_heads, p).permute(0, 2, 1, 3)
        _PERM[X.shape] = (idx.reshape(-1), num_heads)
    idx, h = _PERM[X.shape]
    return X.reshape(-1)[idx].reshape(b * h, n, d // h)


def W_08_batch_and_n_swapped(X, num_heads):
    """Reshapes with (n, batch) read the other way round: right only for batch == n."""
    b, n, d = X.shape
    Y = X.reshape(n, b, num_heads, -1).permute(0, 2, 1, 3)   # axes misread
    return Y.reshape(b * num_heads, n, -1)


def W_09_data_attribute(X, num_heads):
    """Works on X.data 'to avoid copying the graph': no gradient."""
    D = X.data
    D = D.reshape(D.shape[0], D.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return D.reshape(-1, D.shape[2], D.shape[3])


def W_10_in_place_resize_input(X, num_heads):
    """Rearranges X in place (X.set_ / copy) to save memory: the caller's X changes."""
    b, n, d = X.shape
    Y = X.detach().reshape(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(b * num_heads,
                                                                            n, -1).clone()
    with torch.no_grad():
        X.view(-1).copy_(Y.reshape(-1))
    return X.reshape(b * num_heads, n, -1)


def W_11_einsum_with_ones(X, num_heads):
    """Splits heads with einsum against a 0/1 selection tensor (NaN from inf * 0)."""
    b, n, d = X.shape
    p = d // num_heads
    sel = torch.zeros(num_heads, p, d, dtype=X.dtype, device=X.device)
    for i in range(num_heads):
        sel[i, torch.arange(p), i * p + torch.arange(p)] = 1
    return torch.einsum("bnd,hpd->bhnp", X, sel).reshape(b * num_heads, n, p)


def O_12_many_transposes(X, num_heads):
    """A detour of transposes that ends in the right layout (checked by hand)."""
    b, n, d = X.shape
    Y = X.reshape(b, n, num_heads, -1).transpose(1, 2).transpose(2, 3).transpose(2, 3)
    Y = Y.transpose(2, 3).reshape(b * num_heads, -1, n).transpose(1, 2)
    return Y.reshape(b * num_heads, n, -1)


def O_13_transpose_first(X, num_heads):
    """(b, d, n) -> (b * h, p, n) -> (b * h, n, p): the feature axis split while it is in
    the middle; right."""
    b, n, d = X.shape
    return X.transpose(1, 2).reshape(b * num_heads, d // num_heads, n).transpose(1, 2)


def W_14_as_strided_assumes_contiguous(X, num_heads):
    """Zero-copy view with strides computed for a contiguous X: wrong for a transposed or
    otherwise non-contiguous X."""
    b, n, d = X.shape
    p = d // num_heads
    V = X.as_strided((b, num_heads, n, p), (n * d, p, d, 1))
    return V.reshape(b * num_heads, n, p)
