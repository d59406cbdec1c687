"""Round 6 red team (writer R6-B, issue 12), ch05_transpose_output: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round6/B/sols/ch05_transpose_output.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import torch

CHECK = "check_transpose_output"


def C_01_reference(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).permute(0, 2, 1, 3).reshape(bh // num_heads, n, -1)


def O_02_strided_slices_cat(X, num_heads):
    # X[i::h] holds head i of every example
    return torch.cat([X[i::num_heads] for i in range(num_heads)], dim=-1)


def O_03_unflatten_flatten(X, num_heads):
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def O_04_view_contiguous(X, num_heads):
    bh, n, p = X.shape
    return X.contiguous().view(bh // num_heads, num_heads, n, p).transpose(1, 2) \
        .contiguous().view(bh // num_heads, n, num_heads * p)


# ---------------- wrong ----------------
def W_01_chunk_dim0_head_major(X, num_heads):
    # assumes rows i * batch + b: right when batch == 1
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def W_02_no_permute(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def W_03_heads_interleaved_features(X, num_heads):
    # output feature j * h + i instead of i * p + j
    bh, n, p = X.shape
    return X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1).reshape(bh // num_heads, n, -1)


def W_04_reshape_head_major(X, num_heads):
    bh, n, p = X.shape
    return X.reshape(num_heads, -1, n, p).permute(1, 2, 0, 3).reshape(bh // num_heads, n, -1)


def W_05_detach(X, num_heads):
    return C_01_reference(X.detach(), num_heads)


def W_06_batch_stride_slices(X, num_heads):
    # X[i::b] with b the batch: same as O02 only when batch == num_heads
    b = X.shape[0] // num_heads
    return torch.cat([X[i::b] for i in range(b)], dim=-1).reshape(b, X.shape[1], -1) \
        if b != num_heads else O_02_strided_slices_cat(X, num_heads)


def A_07_silent_floor_of_batch(X, num_heads):
    # Accepted on purpose (as round 5 did for transpose_qkv): a first axis that is not a
    # multiple of num_heads is outside the exercise's contract (transpose_qkv never makes
    # one). Requiring an error would also refuse round 4's O_04 (a preallocated output
    # filled by slices, accepted as right).
    # batch*heads not divisible by num_heads: drops rows instead of raising
    bh, n, p = X.shape
    b = bh // num_heads
    return C_01_reference(X[: b * num_heads], num_heads)


def W_08_float32_output(X, num_heads):
    return C_01_reference(X, num_heads).float()


def O_05_view_no_contiguous(X, num_heads):
    bh, n, p = X.shape
    return X.view(-1, num_heads, n, p).permute(0, 2, 1, 3).reshape(bh // num_heads, n, -1)


def W_10_as_strided_assumes_contiguous(X, num_heads):
    bh, n, p = X.shape
    b = bh // num_heads
    Y = X.as_strided((b, n, num_heads, p), (num_heads * n * p, p, n * p, 1),
                     X.storage_offset())
    return Y.reshape(b, n, num_heads * p)


def W_11_transpose_in_place_on_input(X, num_heads):
    # transpose_ on the input: the caller's tensor changes its shape
    bh, n, p = X.shape
    if X.requires_grad:
        return C_01_reference(X, num_heads)
    X.transpose_(0, 1)                         # (n, bh, p)
    Y = X.reshape(n, -1, num_heads, p).permute(1, 0, 2, 3)
    return Y.reshape(bh // num_heads, n, -1)


def W_12_flip_heads_order(X, num_heads):
    # heads concatenated in reverse order (reads the heads from the back)
    bh, n, p = X.shape
    Y = X.reshape(-1, num_heads, n, p).flip(1)
    return Y.permute(0, 2, 1, 3).reshape(bh // num_heads, n, -1)


def A_13_moves_to_cpu(X, num_heads):
    # Accepted on purpose: .cpu() is a no-op on the CPU inputs every checker builds (the
    # same inputs on every machine, so the same verdict on CPU and CUDA); expect_tensor
    # already requires the output on the inputs' device, which catches .cuda()/.to(device).
    return C_01_reference(X, num_heads).cpu()


def W_14_mean_over_heads_when_one(X, num_heads):
    # special case: num_heads == 1 takes a mean (keeps dims)... else right
    if num_heads == 1:
        return X.mean(0, keepdim=True).expand(X.shape[0], -1, -1).clone() \
            if X.shape[0] > 1 else X
    return C_01_reference(X, num_heads)
