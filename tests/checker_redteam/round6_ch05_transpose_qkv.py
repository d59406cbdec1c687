"""Round 6 red team (writer R6-B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round6/B/sols/ch05_transpose_qkv.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import torch

CHECK = "check_transpose_qkv"


def C_01_reference(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(-1, n, d // num_heads)


def O_02_unflatten_transpose_flatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_03_stack_chunks_dim1(X, num_heads):
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).flatten(0, 1)


def O_04_loop_fill(X, num_heads):
    b, n, d = X.shape
    p = d // num_heads
    out = X.new_empty(b * num_heads, n, p)
    for bb in range(b):
        for i in range(num_heads):
            out[bb * num_heads + i] = X[bb, :, i * p:(i + 1) * p]
    return out


def O_05_view_contiguous(X, num_heads):
    b, n, d = X.shape
    X = X.contiguous().view(b, n, num_heads, d // num_heads)
    return X.permute(0, 2, 1, 3).contiguous().view(b * num_heads, n, d // num_heads)


# ---------------- wrong ----------------
def W_01_chunk_cat_head_major(X, num_heads):
    # row i * batch + b instead of b * num_heads + i: right when batch == 1
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_02_permute_head_first(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3).reshape(-1, n, d // num_heads)


def W_03_interleaved_features(X, num_heads):
    # head i gets features i, i + h, i + 2h, ...: right when num_heads == 1 or p == 1
    b, n, d = X.shape
    return X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2).reshape(-1, n, d // num_heads)


def W_04_no_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_05_detach(X, num_heads):
    return C_01_reference(X.detach(), num_heads)


def A_06_truncates_indivisible(X, num_heads):
    # Accepted on purpose (as round 5's A_11): num_hiddens not divisible by num_heads is
    # outside the exercise's contract (MultiHeadAttention refuses it in its constructor, so
    # transpose_qkv never sees it), and for d = 7, h = 2 the text's own formula gives the
    # shape this returns, (batch * 2, n, 7 // 2). Requiring an error would also refuse
    # round 4's O_05 (a loop of slices, accepted as right).
    # d not divisible by h: silently drops the last features instead of raising
    b, n, d = X.shape
    p = d // num_heads
    return C_01_reference(X[..., : p * num_heads], num_heads)


_IDX = {}


def W_07_cached_gather_index(X, num_heads):
    # index built once per num_heads (on the first shape seen) and reused
    b, n, d = X.shape
    if num_heads not in _IDX:
        p = d // num_heads
        _IDX[num_heads] = (p, torch.arange(d).reshape(num_heads, p))
    p, idx = _IDX[num_heads]
    out = X[..., idx.to(X.device)]            # (b, n, h, p)
    return out.permute(0, 2, 1, 3).reshape(-1, n, p)


def W_08_float32_output(X, num_heads):
    return C_01_reference(X, num_heads).to(torch.float32)


def W_09_reshape_transposes_n_and_p(X, num_heads):
    # permute (0, 2, 3, 1) then reshape to the right shape: right only if n == p ... or n==1
    b, n, d = X.shape
    p = d // num_heads
    return X.reshape(b, n, num_heads, p).permute(0, 2, 3, 1).reshape(b * num_heads, n, p)


def W_10_resize_input_in_place(X, num_heads):
    b, n, d = X.shape
    Y = X.detach() if X.requires_grad else X
    Y.resize_(b, n, num_heads, d // num_heads) if not X.requires_grad else None
    return C_01_reference(X.reshape(b, n, d) if X.dim() == 4 else X, num_heads)


def W_12_view_of_non_contiguous_input_crashes_silently(X, num_heads):
    # "fixes" a non-contiguous input by transposing it back (assumes it came from .mT)
    if not X.is_contiguous():
        X = X.transpose(1, 2).contiguous().transpose(1, 2)
        X = X.transpose(1, 2)  # wrong: swaps n and d for non-contiguous inputs
        X = X.reshape(X.shape[0], X.shape[2], X.shape[1])
    return C_01_reference(X, num_heads)


def O_06_view_without_contiguous(X, num_heads):
    b, n, d = X.shape
    return X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(-1, n, d // num_heads)


def W_14_as_strided_assumes_contiguous(X, num_heads):
    # reads the heads straight out of memory with the strides of a contiguous X
    b, n, d = X.shape
    p = d // num_heads
    Y = X.as_strided((b, num_heads, n, p), (n * d, p, d, 1), X.storage_offset())
    return Y.reshape(b * num_heads, n, p)


def W_15_split_size_is_num_heads(X, num_heads):
    # torch.split takes the chunk SIZE: right only when d == num_heads ** 2
    b, n, d = X.shape
    return torch.stack(torch.split(X, num_heads, dim=-1), dim=1).flatten(0, 1)


def A_16_moves_to_cpu(X, num_heads):
    # Accepted on purpose: .cpu() is a no-op on the CPU inputs every checker builds (the
    # same inputs on every machine, so the same verdict on CPU and CUDA); expect_tensor
    # already requires the output on the inputs' device, which catches .cuda()/.to(device).
    return C_01_reference(X, num_heads).cpu()
