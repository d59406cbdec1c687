"""Round 4 red team (writer B, issue 12), ch05_transpose_qkv: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise
text alone; copied from /work/redteam/round4/B/sols/ch05_transpose_qkv.py
with the names W01_x written W_01_x. The tests run every W_ entry (must fail) and
every C_ and O_ entry (must pass); A_ entries are wrong ones accepted on purpose
(each says why), not tested.
Writer's note: Round 4, writer B: transpose_qkv (exercise 5.1), written from the
exercise text only."""
# flake8: noqa
import torch

CHECK = "check_transpose_qkv"


# ---------------------------------------------------------------- correct and odd
def C_01_reference_order(X, num_heads):
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def C_02_transpose_contiguous_view(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, n, num_heads, d // num_heads).transpose(1, 2).contiguous().view(
        b * num_heads, n, d // num_heads)


def O_03_chunk_stack(X, num_heads):
    """Split the features into heads with chunk, stack heads after the batch axis."""
    b, n, d = X.shape
    return torch.stack(X.chunk(num_heads, dim=-1), dim=1).reshape(b * num_heads, n, -1)


def O_04_unflatten_flatten(X, num_heads):
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def O_05_einsum_identity_gather(X, num_heads):
    """An index-gather formulation (every output entry picked by an explicit index)."""
    b, n, d = X.shape
    p = d // num_heads
    rows = []
    for bb in range(b):
        for i in range(num_heads):
            rows.append(X[bb, :, i * p:(i + 1) * p])
    return torch.stack(rows, dim=0)


# ---------------------------------------------------------------- wrong
def W_01_no_permute(X, num_heads):
    """Right shape, no permute: entries scrambled."""
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def W_02_reshape_heads_first_without_permute(X, num_heads):
    b, n, d = X.shape
    return X.reshape(b, num_heads, n, d // num_heads).reshape(-1, n, d // num_heads)


def W_03_strided_features(X, num_heads):
    """Head i gets features i, i+h, i+2h, ... (the split in the wrong order)."""
    b, n, d = X.shape
    X = X.reshape(b, n, -1, num_heads).permute(0, 3, 1, 2)
    return X.reshape(-1, n, d // num_heads)


def W_04_head_major_rows(X, num_heads):
    """Row i * batch + b instead of b * num_heads + i (right for batch 1 or 1 head)."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(-1, n, d // num_heads)


def W_05_split_cat_head_major(X, num_heads):
    """torch.cat of the feature chunks along the batch: head-major order again."""
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def W_06_detach(X, num_heads):
    X = X.detach().reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def W_07_shape_index_after_reshape(X, num_heads):
    """Uses X.shape[1] after the permute (now the heads): right only when n == heads."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[1], X.shape[3])


def W_08_transpose_last_two(X, num_heads):
    """(b, n, h, p).transpose(2, 3) then reshape: right shape, wrong entries."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).transpose(2, 3)
    return X.reshape(-1, n, d // num_heads)


def W_09_float32_cast(X, num_heads):
    """Casts to float32 (a float64 input comes back as float32)."""
    X = X.float().reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3).reshape(-1, X.shape[1], X.shape[3])


def W_10_numpy_roundtrip(X, num_heads):
    """Through numpy: right values, no gradient (and only works on CPU)."""
    a = X.detach().cpu().numpy()
    b, n, d = a.shape
    a = a.reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3).reshape(-1, n, d // num_heads)
    return torch.from_numpy(a.copy()).to(X.device)


def W_11_cached_index(X, num_heads, _cache={}):
    """Caches a gather index by num_heads only: wrong for a second shape."""
    b, n, d = X.shape
    if num_heads not in _cache:
        idx = torch.arange(b * n * d).reshape(b, n, num_heads, -1).permute(0, 2, 1, 3)
        _cache[num_heads] = (idx.reshape(-1), (b * num_heads, n, d // num_heads))
    idx, shape = _cache[num_heads]
    flat = X.reshape(-1)
    if idx.numel() != flat.numel():
        idx = idx[: flat.numel()] % flat.numel()
    return flat[idx].reshape(-1, n, d // num_heads)


def W_12_hardcoded_heads(X, num_heads):
    """Ignores num_heads (uses 4, as in the chapter's model)."""
    num_heads = 4
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    X = X.permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def W_13_no_grad_copy(X, num_heads):
    """Builds the output under no_grad into a fresh tensor: no gradient path."""
    b, n, d = X.shape
    with torch.no_grad():
        out = X.reshape(b, n, num_heads, -1).permute(0, 2, 1, 3).reshape(-1, n, d // num_heads)
    return out.clone().requires_grad_(X.requires_grad)


def W_14_permute_batch_and_n(X, num_heads):
    """permute(1, 2, 0, 3) then reshape: (n, h, b, p): right shape only when n == b."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)  # head major
    X = X.transpose(0, 1)                                   # (b, h, n, p) -- correct so far
    return X.transpose(0, 2).reshape(-1, n, d // num_heads)  # then swaps again


def W_15_view_without_contiguous(X, num_heads):
    """.view after the permute: raises on every input (a torch error, not the checker's)."""
    b, n, d = X.shape
    return X.view(b, n, num_heads, -1).permute(0, 2, 1, 3).view(-1, n, d // num_heads)


def W_16_as_strided_assumes_contiguous(X, num_heads):
    """as_strided with the strides of a contiguous X: wrong on a non-contiguous input."""
    b, n, d = X.shape
    p = d // num_heads
    Y = torch.as_strided(X, (b, num_heads, n, p), (n * d, p, d, 1), X.storage_offset())
    return Y.reshape(b * num_heads, n, p)


def W_17_float16_roundtrip(X, num_heads):
    """Goes through half precision to save memory: values rounded."""
    Y = X.half().reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return Y.reshape(-1, Y.shape[2], Y.shape[3]).to(X.dtype)


def W_18_inplace_mutation(X, num_heads):
    """Scales X in place 'temporarily' and forgets to undo it."""
    with torch.no_grad():
        X.mul_(2.0)
    Y = X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return Y.reshape(-1, Y.shape[2], Y.shape[3]) / 2.0


def W_19_float64_always(X, num_heads):
    """Promotes to float64 'for exactness': a float32 model then gets float64 heads."""
    X = X.double().reshape(X.shape[0], X.shape[1], num_heads, -1)
    return X.permute(0, 2, 1, 3).reshape(-1, X.shape[1], X.shape[3])


def W_20_contiguous_only_view_trick(X, num_heads):
    """torch.Tensor.set_ on the storage: assumes X is contiguous from offset 0."""
    b, n, d = X.shape
    p = d // num_heads
    flat = X.reshape(-1) if X.is_contiguous() else X.as_strided((X.numel(),), (1,))
    return flat.reshape(b, n, num_heads, p).permute(0, 2, 1, 3).reshape(b * num_heads, n, p)
