"""Round 4 red team (writer B, issue 12), ch05_transpose_output: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise
text alone; copied from /work/redteam/round4/B/sols/ch05_transpose_output.py
with the names W01_x written W_01_x. The tests run every W_ entry (must fail) and
every C_ and O_ entry (must pass); A_ entries are wrong ones accepted on purpose
(each says why), not tested.
Writer's note: Round 4, writer B: transpose_output (exercise 5.1), written from the
exercise text only."""
# flake8: noqa
import torch

CHECK = "check_transpose_output"


# ---------------------------------------------------------------- correct and odd
def C_01_reference_order(X, num_heads):
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def C_02_transpose_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_03_cat_heads(X, num_heads):
    """Concatenate the heads of each example along the features."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    return torch.cat([X[:, i] for i in range(num_heads)], dim=-1)


def O_04_fill_preallocated(X, num_heads):
    """Fills a preallocated output by slices (copy_ is differentiable)."""
    bh, n, p = X.shape
    b = bh // num_heads
    out = X.new_zeros(b, n, num_heads * p)
    for bb in range(b):
        for i in range(num_heads):
            out[bb, :, i * p:(i + 1) * p] = X[bb * num_heads + i]
    return out


def O_05_float64_einsum(X, num_heads):
    """einsum with an identity, keeps the input dtype."""
    bh, n, p = X.shape
    Y = X.reshape(-1, num_heads, n, p)
    return torch.einsum("bhnp->bnhp", Y).reshape(bh // num_heads, n, num_heads * p)


# ---------------------------------------------------------------- wrong
def W_01_plain_reshape(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_02_head_major_split(X, num_heads):
    """Assumes rows ordered i * batch + b (head-major): right for batch 1 only."""
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_03_head_major_permute(X, num_heads):
    bh, n, p = X.shape
    X = X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3)
    return X.reshape(bh // num_heads, n, -1)


def W_04_strided_features(X, num_heads):
    """Interleaves the heads' features (b, n, p, h) instead of concatenating."""
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(bh // num_heads, n, -1)


def W_05_detach(X, num_heads):
    X = X.detach().reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def W_06_shape_index_after_permute(X, num_heads):
    """Reads X.shape[2] after the permute (now the heads): right only when n == heads."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[2], -1)


def W_07_wrong_unfold(X, num_heads):
    """Unfolds as (batch, n, heads, p) straight from the rows: batch and n mixed up."""
    bh, n, p = X.shape
    return X.reshape(-1, n, num_heads, p).reshape(bh // num_heads, n, -1)


def W_08_float32_cast(X, num_heads):
    X = X.float().reshape(-1, num_heads, X.shape[1], X.shape[2])
    return X.permute(0, 2, 1, 3).reshape(X.shape[0], X.shape[2], -1)


def W_09_sum_heads(X, num_heads):
    """Adds the heads instead of concatenating them (shape (batch, n, p))."""
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).sum(dim=1)


def W_10_reversed_heads(X, num_heads):
    """Concatenates the heads last-to-first."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    return torch.cat([X[:, i] for i in reversed(range(num_heads))], dim=-1)


def W_11_data_assignment(X, num_heads):
    """Fills the output through .data: right values, no gradient to X."""
    bh, n, p = X.shape
    out = torch.zeros(bh // num_heads, n, num_heads * p, dtype=X.dtype, device=X.device,
                      requires_grad=True)
    out.data = X.reshape(-1, num_heads, n, p).permute(0, 2, 1, 3).reshape(
        bh // num_heads, n, -1).data
    return out


def W_12_hardcoded_heads(X, num_heads):
    num_heads = 4
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def W_13_transpose_n_p(X, num_heads):
    """transpose(2, 3) instead of (1, 2): (b, h, p, n) -> right shape only if n == p."""
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).transpose(2, 3)
    return X.reshape(bh // num_heads, n, -1)


def W_14_inplace_scale_input(X, num_heads):
    """Normalises X in place before reshaping (mutates the caller's tensor)."""
    with torch.no_grad():
        X.mul_(1.0)  # harmless values-wise ...
        X.add_(0.0)
    X2 = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    out = X2.reshape(X2.shape[0], X2.shape[1], -1)
    with torch.no_grad():
        X.zero_()  # ... "free memory": the caller's tensor is now zeros
    return out.clone()


def W_15_as_strided_assumes_contiguous(X, num_heads):
    """as_strided with the strides of a contiguous X: wrong on a non-contiguous input
    (e.g. the output of attention computed as (V^T A^T)^T)."""
    bh, n, p = X.shape
    b = bh // num_heads
    Y = torch.as_strided(X, (b, n, num_heads, p), (num_heads * n * p, p, n * p, 1),
                         X.storage_offset())
    return Y.reshape(b, n, num_heads * p)


def W_16_float64_always(X, num_heads):
    X = X.double().reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)
