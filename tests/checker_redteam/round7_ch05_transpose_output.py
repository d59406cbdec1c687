"""Round 7 red team (writer R7-B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round7/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x. Wrong ones
the checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_transpose_output"
import torch


def C_01_reference(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def O_02_unbind_cat(X, num_heads):
    bh, n, p = X.shape
    if bh % num_heads:
        raise ValueError("batch * num_heads rows expected")
    return torch.cat(X.reshape(bh // num_heads, num_heads, n, p).unbind(1), dim=-1)


def O_03_unflatten_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_04_einsum_like_permute_noncontig_input(X, num_heads):
    # works on any strides: reshape (not view) after the transpose
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, num_heads, n, p).transpose(1, 2).reshape(
        bh // num_heads, n, num_heads * p)


def W_01_head_major(X, num_heads):
    # inverse of the head-major layout: cat the num_heads chunks of the batch axis
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_02_plain_reshape(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def A_03_truncate_indivisible(X, num_heads):
    # Accepted on purpose (as round 6 A_07): a first axis that is not a multiple of
    # num_heads is outside the exercise contract (transpose_qkv never makes one); requiring
    # an error would refuse round 4 O_04 (a preallocated output filled by slices).
    # batch * num_heads rows not a multiple of num_heads: silently drops the last rows
    bh, n, p = X.shape
    b = bh // num_heads
    X = X[: b * num_heads]
    return X.reshape(b, num_heads, n, p).permute(0, 2, 1, 3).reshape(b, n, num_heads * p)


def W_04_tolist_roundtrip(X, num_heads):
    # values right, the graph is cut
    Y = C_01_reference(X, num_heads)
    return torch.tensor(Y.tolist(), dtype=X.dtype, device=X.device)


def W_05_float_cast(X, num_heads):
    return C_01_reference(X, num_heads).to(torch.float32)


def W_06_squeeze(X, num_heads):
    return C_01_reference(X, num_heads).squeeze()


def W_07_strided_concat(X, num_heads):
    # interleaves the heads: feature j of head i lands at j * num_heads + i
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1).reshape(bh // num_heads, n, -1)


def W_08_wrong_permute_n_h(X, num_heads):
    # (b, h, n, p) -> permute(0, 1, 2, 3) forgotten but a transpose of n and p instead
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).transpose(2, 3).reshape(bh // num_heads, n, -1)


_cache = {}


def W_09_index_cache_without_heads(X, num_heads):
    key = tuple(X.shape)
    if key not in _cache:
        idx = torch.arange(X.numel()).reshape(X.shape)
        _cache[key] = (C_01_reference(idx, num_heads).reshape(-1), num_heads)
    idx, h = _cache[key]
    bh, n, p = X.shape
    return X.reshape(-1)[idx].reshape(bh // h, n, h * p)


def W_10_batch_from_heads(X, num_heads):
    # batch inferred as X.shape[0] // num_heads, but reshape(b, n, -1) done before the
    # permute: position and head axes mixed
    bh, n, p = X.shape
    b = bh // num_heads
    return X.reshape(b, num_heads, n, p).reshape(b, n, num_heads, p).reshape(b, n, -1)


def W_11_detach_when_no_grad_needed(X, num_heads):
    # "optimisation": works on X.data; gradients never reach X
    return C_01_reference(X.data, num_heads)


def W_12_mutates_input_via_resize(X, num_heads):
    # writes the permuted layout back into X's own storage (X.copy_), then returns a view:
    # same values, but the caller's X is overwritten
    Y = C_01_reference(X, num_heads).contiguous()
    if X.is_contiguous() and not X.requires_grad:
        X.view(-1).copy_(Y.reshape(-1))
        return X.view(Y.shape)
    return Y


def W_13_sum_heads(X, num_heads):
    # heads summed instead of concatenated (shape (b, n, p))
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).sum(1)


def A_14_num_heads_from_p(X, num_heads):
    # Accepted on purpose, as W03: it differs from the reference only when X.shape[0] is
    # not a multiple of num_heads, outside the exercise contract.
    # assumes square heads: num_heads taken as p when the argument is "obviously" wrong
    h = num_heads if X.shape[0] % num_heads == 0 else X.shape[2]
    return C_01_reference(X, h)


def W_15_as_strided_assumes_contiguous(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    Y = X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1),
                     X.storage_offset())
    return Y.reshape(b, n, num_heads * p)


def W_16_heads_and_batch_swapped_reshape(X, num_heads):
    # reshape(num_heads, -1, n, p).permute(1, 2, 0, 3): head-major undo
    bh, n, p = X.shape
    return X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3).reshape(bh // num_heads, n, -1)


def S_17_view_after_contiguous(X, num_heads):
    bh, n, p = X.shape
    return X.contiguous().view(-1, num_heads, n, p).permute(0, 2, 1, 3).contiguous().view(
        bh // num_heads, n, -1)
