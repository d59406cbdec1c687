"""Round 7 red team (writer R7-B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round7/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x. Wrong ones
the checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_transpose_qkv"
import functools
import torch


def C_01_reference(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def O_02_split_stack(X, num_heads):
    p = X.shape[-1] // num_heads
    if p * num_heads != X.shape[-1]:
        raise ValueError("num_hiddens must be divisible by num_heads")
    return torch.stack(X.split(p, dim=-1), dim=1).flatten(0, 1)


def O_03_unflatten_transpose(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def S_04_view_contiguous(X, num_heads):
    # .view instead of .reshape, after .contiguous(): right, though the text says reshape
    b, n, d = X.shape
    return X.contiguous().view(b, n, num_heads, d // num_heads).transpose(1, 2) \
        .contiguous().view(b * num_heads, n, d // num_heads)


def W_01_head_major_cat(X, num_heads):
    # heads stacked first: row i * batch + b instead of b * num_heads + i (right for batch 1)
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_02_strided_heads(X, num_heads):
    # head i gets features i, i + h, i + 2h, ...
    b, n, d = X.shape
    return X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2).reshape(b * num_heads, n, -1)


def A_03_truncate_indivisible(X, num_heads):
    # Accepted on purpose (as round 6 A_06): num_hiddens not divisible by num_heads is
    # outside the exercise contract (MultiHeadAttention refuses it in its constructor), and
    # requiring an error would refuse round 4 O_05 (a loop of slices, accepted as right).
    # silently drops the last d % num_heads features instead of raising
    b, n, d = X.shape
    p = d // num_heads
    X = X[..., : p * num_heads]
    return X.reshape(b, n, num_heads, p).permute(0, 2, 1, 3).reshape(b * num_heads, n, p)


def W_04_numpy_roundtrip(X, num_heads):
    # right values, no gradient (and CPU only)
    b, n, d = X.shape
    a = X.detach().cpu().numpy().reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3)
    return torch.from_numpy(a.reshape(b * num_heads, n, -1).copy())


def W_05_float_cast(X, num_heads):
    # .float() "to be safe": float64 / float16 inputs come back as float32
    return C_01_reference(X, num_heads).float()


def W_06_squeeze(X, num_heads):
    # squeeze "the extra axis": drops every size-1 axis (n = 1, p = 1, batch*heads = 1)
    return C_01_reference(X, num_heads).squeeze()


_idx_cache = {}


def W_07_gather_cache_without_heads(X, num_heads):
    # permutation index cached on X's shape only: a second call with another num_heads
    # reuses the wrong index
    key = tuple(X.shape)
    if key not in _idx_cache:
        b, n, d = X.shape
        idx = torch.arange(b * n * d).reshape(b, n, d)
        _idx_cache[key] = (C_01_reference(idx, num_heads).reshape(-1), num_heads)
    idx, h = _idx_cache[key]
    b, n, d = X.shape
    return X.reshape(-1)[idx].reshape(b * h, n, d // h)


_idx_cache2 = {}


def O_08_gather_cache_with_size_fix(X, num_heads):
    # index cached on (n, d, heads) but built for the first batch size
    b, n, d = X.shape
    key = (n, d, num_heads)
    if key not in _idx_cache2:
        idx = torch.arange(b * n * d).reshape(b, n, d)
        _idx_cache2[key] = C_01_reference(idx, num_heads).reshape(-1)
    idx = _idx_cache2[key]
    flat = X.reshape(-1)
    if idx.numel() != flat.numel():   # "fix" the size mismatch the lazy way
        idx = torch.arange(flat.numel()).reshape(b, n, d)
        idx = C_01_reference(idx, num_heads).reshape(-1)
    return flat[idx].reshape(-1, n, d // num_heads)


def W_09_batch_heads_swapped_reshape(X, num_heads):
    # (batch, n, h, p) -> permute(2, 0, 1, 3): (h, batch, n, p) -> rows i * batch + b
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3).reshape(b * num_heads, n, -1)


def W_10_positions_into_batch(X, num_heads):
    # reshape(b, h, n, p) without the permute: mixes positions and heads
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


# Round 11: an int64 X comes back float32 (the check now has int64 cases: these functions
# only move entries, so the dtype is kept); right before, wrong since.
def W_11_times_one_copy(X, num_heads):
    # "pre-scales" the queries by 1/sqrt(p) in place... and mutates the caller's X
    p = X.shape[-1] // num_heads
    return C_01_reference(X, num_heads) * 1.0


def W_12_out_of_place_mutation(X, num_heads):
    # .copy_ into the caller's X to "make it contiguous" first: X ends up holding the
    # head-split data in its own storage (input mutated)
    b, n, d = X.shape
    Y = C_01_reference(X, num_heads).clone()
    with torch.no_grad():
        X.view(-1).copy_(Y.reshape(-1)) if X.is_contiguous() else None
    return X.view(b * num_heads, n, d // num_heads) if X.is_contiguous() else Y


def W_13_dense_transpose_n_p(X, num_heads):
    # permute(0, 2, 3, 1): (b, h, p, n), then reshape to (b*h, n, p): right only for n = 1
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1).reshape(b * num_heads, n, -1)


def W_14_last_batch_only_contig(X, num_heads):
    # uses X.shape[0] of a contiguous copy but heads from X.size(1) when n == num_heads...:
    # takes num_heads from the wrong argument when the call passes it by keyword 'h'
    return C_01_reference(X, max(1, num_heads)).detach().requires_grad_(X.requires_grad)


def W_15_as_strided_assumes_contiguous(X, num_heads):
    # zero-copy view computed from the shape, assuming X's strides are contiguous:
    # silently wrong on a transposed / sliced X
    b, n, d = X.shape
    p = d // num_heads
    Y = X.as_strided((b, num_heads, n, p), (n * d, p, d, 1), X.storage_offset())
    return Y.reshape(b * num_heads, n, p)


def W_16_split_by_num_heads(X, num_heads):
    # split(num_heads) makes chunks OF SIZE num_heads: right only when p == num_heads
    return torch.stack(X.split(num_heads, dim=-1), dim=1).flatten(0, 1)


def S_17_view_no_contiguous(X, num_heads):
    # .view: fails on a non-contiguous X (the text says reshape)
    b, n, d = X.shape
    return X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(b * num_heads, n, -1)
