"""Round 1 red team, chapter 5: check_transpose_qkv and check_transpose_output (5.1).

Entries: (checker_name, short_description, kind, callable). From the exercise text:
transpose_qkv (batch, n, h*p) -> (batch*h, n, p) with row b*h + i = head i of example b
(features i*p .. (i+1)*p - 1); transpose_output undoes it.
"""
import numpy as np
import torch

Q = "check_transpose_qkv"
O = "check_transpose_output"


# ------------------------------------------------------------------ transpose_qkv: wrong

def qkv_plain_reshape(X, num_heads):
    """Kind 5: one reshape, no permute."""
    b, n, d = X.shape
    return X.reshape(b * num_heads, n, d // num_heads)


def qkv_interleaved(X, num_heads):
    """Kind 5: splits the features as (p, heads): head i gets features i, i+h, ..."""
    b, n, d = X.shape
    X = X.reshape(b, n, d // num_heads, num_heads).permute(0, 3, 1, 2)
    return X.reshape(b * num_heads, n, d // num_heads)


def qkv_heads_outer(X, num_heads):
    """Kind 3: permute(2, 0, 1, 3): rows ordered i * batch + b (right for batch 1)."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(2, 0, 1, 3)
    return X.reshape(b * num_heads, n, -1)


def qkv_transpose_first(X, num_heads):
    """Kind 5: transposes (n, d) first, then reshapes."""
    b, n, d = X.shape
    return X.transpose(1, 2).reshape(b * num_heads, n, d // num_heads)


def qkv_detach(X, num_heads):
    """Kind 1: right entries, detached."""
    X = X.detach().reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return X.reshape(-1, X.shape[2], X.shape[3])


def qkv_numpy(X, num_heads):
    """Kind 1: numpy round trip."""
    a = X.detach().cpu().numpy()
    b, n, d = a.shape
    a = a.reshape(b, n, num_heads, -1).transpose(0, 2, 1, 3).reshape(b * num_heads, n, -1)
    return torch.from_numpy(np.ascontiguousarray(a)).to(X.device)


def qkv_square_p(X, num_heads):
    """Kind 3: reshape(b, n, h, h) 'p = h' (right only when num_hiddens == h * h)."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, num_heads).permute(0, 2, 1, 3)
    return X.reshape(b * num_heads, n, num_heads)


def qkv_swap_np(X, num_heads):
    """Kind 3: permute(0, 2, 3, 1) then reshape to (b*h, n, p): right shape only
    when n == p, wrong entries."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, -1).permute(0, 2, 3, 1)    # (b, h, p, n)
    return X.reshape(b * num_heads, n, d // num_heads)


def qkv_no_final_reshape(X, num_heads):
    """Kind 6: returns (batch, heads, n, p) without folding the heads."""
    return X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)


def qkv_no_grad(X, num_heads):
    """Kind 1: under torch.no_grad() ('only a reshape')."""
    with torch.no_grad():
        Y = X.reshape(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
        return Y.reshape(-1, Y.shape[2], Y.shape[3])


def qkv_chunk_cat_batch(X, num_heads):
    """Kind 3: torch.cat(X.chunk(h, dim=-1), dim=0): heads-outer order (right for
    batch 1)."""
    return torch.cat(X.chunk(num_heads, dim=-1), dim=0)


def qkv_float_p(X, num_heads):
    """Kind 6: p = X.shape[-1] / num_heads (a float) in reshape: TypeError."""
    b, n, d = X.shape
    X = X.reshape(b, n, num_heads, d / num_heads).permute(0, 2, 1, 3)
    return X.reshape(b * num_heads, n, d / num_heads)


# ------------------------------------------------------------------ transpose_qkv: right

def qkv_stack_chunk(X, num_heads):
    """Right: stack the feature chunks as a head axis, then fold."""
    Y = torch.stack(X.chunk(num_heads, dim=-1), dim=1)        # (b, h, n, p)
    return Y.reshape(-1, X.shape[1], X.shape[2] // num_heads)


def qkv_unflatten(X, num_heads):
    """Right: unflatten / transpose / flatten."""
    return X.unflatten(-1, (num_heads, -1)).transpose(1, 2).flatten(0, 1)


def qkv_view_first(X, num_heads):
    """Right on contiguous inputs: view (not reshape) for the split; a non-contiguous
    input makes view raise."""
    Y = X.view(X.shape[0], X.shape[1], num_heads, -1).permute(0, 2, 1, 3)
    return Y.reshape(-1, X.shape[1], X.shape[2] // num_heads)


# --------------------------------------------------------------- transpose_output: wrong

def out_plain_reshape(X, num_heads):
    """Kind 5: one reshape, no permute."""
    bh, n, p = X.shape
    return X.reshape(bh // num_heads, n, num_heads * p)


def out_heads_outer(X, num_heads):
    """Kind 3: reshape(h, b, n, p): assumes heads-outer rows (right for batch 1)."""
    bh, n, p = X.shape
    X = X.reshape(num_heads, bh // num_heads, n, p).permute(1, 2, 0, 3)
    return X.reshape(bh // num_heads, n, -1)


def out_interleaved(X, num_heads):
    """Kind 5: permute(0, 2, 3, 1): concatenation interleaves the heads' features."""
    bh, n, p = X.shape
    X = X.reshape(-1, num_heads, n, p).permute(0, 2, 3, 1)
    return X.reshape(bh // num_heads, n, -1)


def out_detach(X, num_heads):
    """Kind 1: right entries, detached."""
    X = X.detach().reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


def out_numpy(X, num_heads):
    """Kind 1: numpy round trip."""
    a = X.detach().cpu().numpy()
    bh, n, p = a.shape
    a = a.reshape(-1, num_heads, n, p).transpose(0, 2, 1, 3).reshape(bh // num_heads, n, -1)
    return torch.from_numpy(np.ascontiguousarray(a)).to(X.device)


def out_view_after_permute(X, num_heads):
    """Kind 6: .view after a permute: always raises ('view size is not compatible')."""
    X = X.view(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return X.view(X.shape[0], X.shape[1], -1)


def out_keep_heads_axis(X, num_heads):
    """Kind 6: returns (batch, n, heads, p) without concatenating."""
    return X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)


def out_chunk_cat(X, num_heads):
    """Kind 3: torch.cat(X.chunk(h, dim=0), dim=-1): assumes heads-outer rows
    (right for batch 1)."""
    return torch.cat(X.chunk(num_heads, dim=0), dim=-1)


def out_wrong_batch(X, num_heads):
    """Kind 6: uses X.shape[0] (batch * heads) as the batch in the final reshape."""
    Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
    return Y.reshape(X.shape[0], X.shape[1], -1)


def out_swap_np(X, num_heads):
    """Kind 3: transpose(1, 2) of the (b*h, n, p) tensor before unfolding: right only
    in shape when n == p."""
    bh, n, p = X.shape
    Y = X.transpose(1, 2).reshape(-1, num_heads, n, p).permute(0, 2, 1, 3)
    return Y.reshape(bh // num_heads, n, -1)


def out_no_grad(X, num_heads):
    """Kind 1: under torch.no_grad()."""
    with torch.no_grad():
        Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2]).permute(0, 2, 1, 3)
        return Y.reshape(Y.shape[0], Y.shape[1], -1)


# --------------------------------------------------------------- transpose_output: right

def out_cat_unbind(X, num_heads):
    """Right: concatenate the heads along the features."""
    Y = X.reshape(-1, num_heads, X.shape[1], X.shape[2])        # (b, h, n, p)
    return torch.cat(Y.unbind(1), dim=-1)


def out_unflatten(X, num_heads):
    """Right: unflatten / transpose / flatten."""
    return X.unflatten(0, (-1, num_heads)).transpose(1, 2).flatten(2)


def out_einsum(X, num_heads):
    """Right: einsum permutation, then reshape."""
    Y = torch.einsum("bhnp->bnhp", X.reshape(-1, num_heads, X.shape[1], X.shape[2]))
    return Y.reshape(Y.shape[0], Y.shape[1], -1)


WRONG = [
    (Q, "qkv: one reshape, no permute", 5, qkv_plain_reshape),
    (Q, "qkv: features split (p, heads): interleaved heads", 5, qkv_interleaved),
    (Q, "qkv: permute(2, 0, 1, 3): heads-outer rows", 3, qkv_heads_outer),
    (Q, "qkv: transpose(1, 2) then reshape", 5, qkv_transpose_first),
    (Q, "qkv: detached", 1, qkv_detach),
    (Q, "qkv: numpy round trip", 1, qkv_numpy),
    (Q, "qkv: p hard-coded as num_heads", 3, qkv_square_p),
    (Q, "qkv: permute(0, 2, 3, 1): (n, p) swapped", 3, qkv_swap_np),
    (Q, "qkv: no final reshape (4-D result)", 6, qkv_no_final_reshape),
    (Q, "qkv: under torch.no_grad()", 1, qkv_no_grad),
    (Q, "qkv: cat(chunk(h, -1), dim=0): heads-outer rows", 3, qkv_chunk_cat_batch),
    (Q, "qkv: float p = d / h in reshape", 6, qkv_float_p),
    (O, "output: one reshape, no permute", 5, out_plain_reshape),
    (O, "output: reshape(h, b, n, p): heads-outer rows", 3, out_heads_outer),
    (O, "output: permute(0, 2, 3, 1): interleaved features", 5, out_interleaved),
    (O, "output: detached", 1, out_detach),
    (O, "output: numpy round trip", 1, out_numpy),
    (O, "output: .view after permute (always raises)", 6, out_view_after_permute),
    (O, "output: returns (b, n, h, p)", 6, out_keep_heads_axis),
    (O, "output: cat(chunk(h, dim=0), -1): heads-outer rows", 3, out_chunk_cat),
    (O, "output: final reshape uses batch*heads as batch", 6, out_wrong_batch),
    (O, "output: transpose(1, 2) before unfolding", 3, out_swap_np),
    (O, "output: under torch.no_grad()", 1, out_no_grad),
]

RIGHT_BUT_UNUSUAL = [
    (Q, "qkv: stack(chunk) then fold", 0, qkv_stack_chunk),
    (Q, "qkv: unflatten/transpose/flatten", 0, qkv_unflatten),
    (Q, "qkv: view for the split (contiguous inputs only)", 0, qkv_view_first),
    (O, "output: cat(unbind(1), -1)", 0, out_cat_unbind),
    (O, "output: unflatten/transpose/flatten", 0, out_unflatten),
    (O, "output: einsum permutation", 0, out_einsum),
]
