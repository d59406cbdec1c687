"""Checkers for chapter 5's exercises: the reshapes that run all heads in parallel.

The test inputs hold their own coordinates (X[b, t, c] = 10000 b + 100 t + c), so when an
entry lands in the wrong place the message can say where it came from.
"""
import torch

from ._core import call, expect_tensor, fail, passed

_CASES = [  # (batch, n, num_hiddens, num_heads)
    (2, 3, 8, 2), (3, 4, 12, 3), (1, 5, 8, 4), (2, 2, 6, 1), (2, 4, 8, 8)]


def _coordinates(batch, n, num_hiddens):
    b, t, c = torch.meshgrid(torch.arange(batch), torch.arange(n), torch.arange(num_hiddens),
                             indexing="ij")
    return (10000 * b + 100 * t + c).float()  # (batch, n, num_hiddens)


def _where(value, name="X"):
    value = int(round(float(value)))
    return f"{name}[{value // 10000}, {value % 10000 // 100}, {value % 100}]"


def _split_heads(X, num_heads):  # the reference
    batch, n, num_hiddens = X.shape
    X = X.reshape(batch, n, num_heads, num_hiddens // num_heads)
    return X.permute(0, 2, 1, 3).reshape(batch * num_heads, n, num_hiddens // num_heads)


def _layout_message(out, expected, what, case, explain, name="X"):
    index = tuple(int(i) for i in (out != expected).nonzero()[0])
    return (f"{what} has the right shape but the wrong layout on {case}: at index {index} "
            f"it holds {_where(out[index], name)} but should hold "
            f"{_where(expected[index], name)}. {explain}")


_QKV_RULE = ("Row i of the output must be example i // num_heads, head i % num_heads, and head "
             "h is the slice X[:, :, h*p:(h+1)*p] of the features (p = num_hiddens // num_heads).")
_QKV_HINT = ("split the LAST axis: X.reshape(batch, n, num_heads, p), then move the heads next "
             "to the batch with .permute(0, 2, 1, 3), then .reshape(batch * num_heads, n, p). "
             "Reshaping straight to (batch * num_heads, n, p) mixes positions and features.")


def check_transpose_qkv(fn):
    """Check `fn(X, num_heads)`: (batch, n, num_hiddens) -> (batch * num_heads, n, p)."""
    for batch, n, num_hiddens, num_heads in _CASES:
        p = num_hiddens // num_heads
        case = f"X of shape ({batch}, {n}, {num_hiddens}) with num_heads={num_heads}"
        X = _coordinates(batch, n, num_hiddens)
        before = X.clone()
        out = call(fn, X, num_heads, name="transpose_qkv", case=case)
        expect_tensor(out, None, what="transpose_qkv(X, num_heads)", case=case)
        if tuple(out.shape) != (batch * num_heads, n, p):
            fail(f"transpose_qkv(X, num_heads) has shape {tuple(out.shape)} on {case}; expected "
                 f"(batch * num_heads, n, num_hiddens // num_heads) = {(batch * num_heads, n, p)}.",
                 "fold the heads into the batch axis: the result is 3-D, and use the "
                 "num_heads argument rather than a fixed number.")
        if not torch.equal(X, before):
            fail(f"transpose_qkv changed its input in place on {case}.")
        expected = _split_heads(X, num_heads)
        if not torch.equal(out.to(expected.dtype), expected):
            fail(_layout_message(out, expected, "transpose_qkv(X, num_heads)", case, _QKV_RULE),
                 _QKV_HINT)
    return passed("transpose_qkv")


def check_transpose_output(fn):
    """Check `fn(X, num_heads)`: (batch * num_heads, n, p) -> (batch, n, num_heads * p)."""
    for batch, n, num_hiddens, num_heads in _CASES:
        case = f"X of shape ({batch * num_heads}, {n}, {num_hiddens // num_heads}) with " \
               f"num_heads={num_heads} (batch {batch})"
        X = _coordinates(batch, n, num_hiddens)   # (batch, n, num_hiddens)
        heads = _split_heads(X, num_heads)        # what transpose_qkv gives
        out = call(fn, heads.clone(), num_heads, name="transpose_output", case=case)
        expect_tensor(out, None, what="transpose_output(X, num_heads)", case=case)
        if tuple(out.shape) != (batch, n, num_hiddens):
            fail(f"transpose_output(X, num_heads) has shape {tuple(out.shape)} on {case}; "
                 f"expected (batch, n, num_heads * p) = {(batch, n, num_hiddens)}.",
                 "the result is 3-D: unfold the heads from the batch axis and concatenate "
                 "them along the last axis.")
        if not torch.equal(out.to(X.dtype), X):
            fail(_layout_message(out, X, "transpose_output(X, num_heads)", case,
                                 "(Z is the (batch, n, num_hiddens) tensor that transpose_qkv "
                                 "split into these heads: transpose_output must give Z back, "
                                 "transpose_output(transpose_qkv(Z, h), h) == Z.)", name="Z"),
                 "reverse the three steps: .reshape(-1, num_heads, n, p), then "
                 ".permute(0, 2, 1, 3), then .reshape(batch, n, num_heads * p).")
    return passed("transpose_output")
