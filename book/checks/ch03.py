"""Checkers for chapter 3's exercises: masked softmax and scaled dot-product attention."""
import math

import torch

from ._core import CheckFailed, call, expect_close, expect_tensor, fail


def _reference_masked_softmax(X, valid_lens, offset=0):
    """The reference (offset=0); offset=+1 / -1 is a mask one key too wide / too narrow."""
    if valid_lens is None:
        return torch.softmax(X.float(), dim=-1).to(X.dtype)
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1]) < (lens[..., None] + offset)
    weights = torch.softmax(X.float().masked_fill(~keep, -1e30), dim=-1) * keep
    return weights.to(X.dtype)


def _masked_softmax_cases():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(2, 3, 5, generator=g)
    return [
        ("X of shape (2, 3, 5), valid_lens [2, 4] (one length per sequence)",
         X, torch.tensor([2, 4])),
        ("X of shape (2, 3, 5), valid_lens [[1, 3, 5], [2, 4, 1]] (one length per query)",
         X, torch.tensor([[1, 3, 5], [2, 4, 1]])),
        ("X of shape (2, 3, 5), valid_lens None (no mask)", X, None),
        ("X of shape (2, 3, 5), valid_lens [3, 0] (example 1 has no valid key)",
         X, torch.tensor([3, 0])),
        ("X of shape (2, 3, 5), valid_lens [[2, 0, 5], [1, 1, 0]] (some rows fully masked)",
         X, torch.tensor([[2, 0, 5], [1, 1, 0]])),
        ("float16 X = 8 * randn(2, 3, 5), valid_lens [4, 0]",
         (8 * X).half(), torch.tensor([4, 0])),
    ]


def check_masked_softmax(fn):
    """Check `fn(X, valid_lens)`: softmax over the last axis that ignores keys >= valid_len."""
    for case, X, valid_lens in _masked_softmax_cases():
        before = X.clone()
        try:
            out = call(fn, X, valid_lens, name="masked_softmax", case=case)
        except CheckFailed as error:
            if X.dtype == torch.half and "overflow" in str(error):
                fail(str(error), "your fill value does not fit in float16 (its range ends "
                     "near -65504): use torch.finfo(X.dtype).min, which fits every dtype.")
            raise
        if isinstance(out, torch.Tensor) and out.is_floating_point() and torch.isnan(out).any():
            half = (" In float16, -1e6 and -1e9 overflow to -inf too."
                    if X.dtype == torch.half else "")
            fail(f"masked_softmax returned NaN on {case}.",
                 "a row whose keys are all masked gives exp(-inf - (-inf)) = NaN with an -inf "
                 "fill. Fill with a finite number, torch.finfo(X.dtype).min, and multiply the "
                 f"result by the mask so that such a row is all zeros.{half}")
        expect_tensor(out, X.shape, X.dtype, what="masked_softmax(X, valid_lens)", case=case)
        if not torch.equal(X, before):
            fail(f"masked_softmax changed its input X on {case}.",
                 "build a new tensor with X.masked_fill(...), not X[...] = or masked_fill_ "
                 "(d2l's version has this bug: it writes the fill value into X).")
        ref = _reference_masked_softmax(X, valid_lens)
        atol = 1e-3 if X.dtype == torch.half else 1e-5
        W = out.float()
        lens = torch.full(X.shape[:2], X.shape[-1]) if valid_lens is None else (
            valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens).expand(X.shape[:2])
        empty = lens == 0                                             # (batch, queries)
        positions = torch.arange(X.shape[-1])
        padded = positions >= lens[..., None]                         # (batch, queries, keys)
        sums = W.sum(dim=-1)[~empty]
        if not torch.allclose(sums, torch.ones_like(sums), atol=atol):
            over_queries = W.sum(dim=1)[(~padded).any(dim=1)]         # keys someone may see
            if torch.allclose(over_queries, torch.ones_like(over_queries), atol=atol):
                fail(f"the softmax runs over the wrong axis on {case}: the weights sum to 1 "
                     "over the queries (dim=1), not over the keys.",
                     "take the softmax over the last axis, dim=-1: one row per query.")
            fail(f"each query's weights over its valid keys must sum to 1 on {case}; "
                 f"they sum to {[round(x, 3) for x in sums.tolist()]}.",
                 "mask the scores before the softmax; zeroing weights after it leaves rows "
                 "that sum to less than 1.")
        if empty.any() and not (W[empty] == 0).all():
            fail(f"a row with no valid key should have all-zero weights on {case}; "
                 f"got {[round(x, 3) for x in W[empty][0].tolist()]}.",
                 "a row of equal fill values comes out of the softmax uniform: multiply "
                 "the weights by the mask afterwards, so that such a row is all zeros.")
        leaks = (W != 0) & padded
        if leaks.any():
            b, i, j = (int(t) for t in leaks.nonzero()[0])
            at_len = positions == lens[..., None]                     # first padded key
            only_first = not (leaks & ~at_len).any() and bool(
                (leaks | ~at_len.any(dim=-1, keepdim=True) | ~at_len).all())
            fail(f"key {j} of query {i} in example {b} has weight {W[b, i, j].item():.3g} on "
                 f"{case}, but that query's valid length is {int(lens[b, i])}: keys at "
                 "positions >= valid_len must get weight 0.",
                 "the mask is off by one: keep positions < valid_len (not <=)." if only_first
                 else "mask every key at a position >= valid_len before the softmax; with "
                 "per-query lengths (a 2-D valid_lens), use each query's own length.")
        last = (positions == lens[..., None] - 1) & ~empty[..., None]
        if (W[last] == 0).any():
            fail(f"the last valid key of some query has weight 0 on {case}.",
                 "the mask is off by one: keep positions < valid_len, not < valid_len - 1.")
        expect_close(out.float(), ref.float(), what="masked_softmax(X, valid_lens)", case=case,
                     atol=atol, rtol=1e-3,
                     hint="softmax over the last axis (dim=-1) of the scores, with the keys "
                          "at positions >= valid_len left out.")
    return "masked_softmax: all checks passed."


def _attend(queries, keys, values, valid_lens, scale=None, dim=-1, offset=0):
    """Reference scaled dot-product attention and its common mistakes, for diagnosis."""
    d = queries.shape[-1]
    scores = queries @ keys.transpose(1, 2) / (math.sqrt(d) if scale is None else scale)
    if dim == -1:
        weights = _reference_masked_softmax(scores, valid_lens, offset)
    else:  # softmax over the queries axis, masked the same way
        weights = torch.softmax(scores, dim=dim)
        if valid_lens is not None:
            weights = weights * (_reference_masked_softmax(scores, valid_lens) > 0)
    return weights @ values


def _attention_cases():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(2, 3, 16, generator=g), torch.randn(2, 5, 16, generator=g),
               torch.randn(2, 5, 6, generator=g))
    return [
        ("queries (2, 3, 16), keys (2, 5, 16), values (2, 5, 6), valid_lens None",
         q, k, v, None),
        ("the same tensors with valid_lens [2, 4]", q, k, v, torch.tensor([2, 4])),
        ("the same tensors with per-query valid_lens [[1, 3, 5], [2, 2, 4]]",
         q, k, v, torch.tensor([[1, 3, 5], [2, 2, 4]])),
        ("the same tensors with valid_lens [3, 0] (example 1 has no valid key)",
         q, k, v, torch.tensor([3, 0])),
    ]


def check_scaled_dot_product_attention(fn):
    """Check `fn(queries, keys, values, valid_lens)` -> softmax(Q K^T / sqrt(d)) V, masked."""
    for case, q, k, v, valid_lens in _attention_cases():
        out = call(fn, q.clone(), k.clone(), v.clone(), valid_lens,
                   name="scaled_dot_product_attention", case=case)
        if isinstance(out, tuple):
            fail(f"scaled_dot_product_attention should return only the output tensor, got a "
                 f"tuple of {len(out)} on {case}.")
        if isinstance(out, torch.Tensor) and out.is_floating_point() and torch.isnan(out).any():
            fail(f"the output contains NaN on {case}.",
                 "a query with no valid key must not give NaN: mask with a finite fill value "
                 "(torch.finfo(dtype).min) and zero its weights, as in the masked_softmax "
                 "exercise.")
        expect_tensor(out, (q.shape[0], q.shape[1], v.shape[2]), what="the output", case=case)
        ref = _attend(q, k, v, valid_lens)
        if torch.allclose(out, ref, atol=1e-5, rtol=1e-4):
            continue
        d, m = q.shape[-1], k.shape[1]
        mistakes = [
            (dict(scale=1.0), "the scores are not scaled: divide Q K^T by sqrt(d)."),
            (dict(scale=float(d)), "the scores are divided by d: divide by sqrt(d), "
                                   "the square root of the query size."),
            (dict(scale=math.sqrt(v.shape[-1])), "the scale uses the value size: d is the "
                                                 "size of the queries and keys."),
            (dict(scale=math.sqrt(m)), "the scale uses the number of keys: d is the size "
                                       "of the queries and keys (their last axis)."),
            (dict(dim=1), "the softmax runs over the queries: take it over the keys, the "
                          "last axis of the (batch, queries, keys) scores."),
            (dict(offset=1), "the mask is off by one: keep keys at positions < valid_len."),
        ]
        for kwargs, why in mistakes:
            if torch.allclose(out, _attend(q, k, v, valid_lens, **kwargs), atol=1e-5):
                fail(f"the output is wrong on {case}: {why}")
        if valid_lens is not None and torch.allclose(out, _attend(q, k, v, None), atol=1e-5):
            fail(f"the output is wrong on {case}: valid_lens is ignored.",
                 "mask the scores of keys at positions >= valid_len before the softmax.")
        empty = (valid_lens == 0) if valid_lens is not None else None
        if empty is not None and empty.any() and valid_lens.dim() == 1 \
                and not (out[empty] == 0).all():
            fail(f"example {int(empty.nonzero()[0])} has no valid key on {case}: its output "
                 "should be all zeros (all its weights are 0).",
                 "a row of equal fill values comes out of the softmax uniform: zero the "
                 "weights of rows with no valid key (multiply by the mask).")
        expect_close(out, ref, what="the output", case=case,
                     hint="output = softmax(Q K^T / sqrt(d), masked) V, with the values "
                          "(not the keys) and torch.bmm or @ over the batch.")
    return "scaled_dot_product_attention: all checks passed."
