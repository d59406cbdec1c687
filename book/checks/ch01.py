"""Checkers for chapter 1's exercises: a stable softmax and top-k attention pooling."""
import torch

from ._core import call, expect_close, expect_tensor, fail, passed


def _softmax_cases():
    g = torch.Generator().manual_seed(1)
    return [
        ("a (2, 5) matrix of small scores", torch.randn(2, 5, generator=g)),
        ("a (3, 4) matrix of large scores (values near +-1000)", 1000 * torch.randn(3, 4, generator=g)),
        ("a (2, 3, 4) batch (softmax over the last axis)", torch.randn(2, 3, 4, generator=g)),
        ("a (1, 3) row of equal scores", torch.full((1, 3), 7.0)),
    ]


def check_softmax(fn):
    """Check `fn(scores)`: softmax over the last axis, finite for large scores, input untouched."""
    for case, scores in _softmax_cases():
        before = scores.clone()
        out = call(fn, scores, name="softmax", case=case)
        expect_tensor(out, scores.shape, scores.dtype, what="softmax(scores)", case=case)
        if not torch.equal(scores, before):
            fail(f"softmax changed its input in place on {case}.",
                 "use `scores - max` (a new tensor), not `scores -= max` or `.sub_()`.")
        sums = out.sum(dim=-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
            fail(f"the rows of softmax(scores) must sum to 1 over the last axis on {case}; "
                 f"they sum to {sums.flatten()[:4].tolist()}.",
                 "divide by the sum over dim=-1 (keepdim=True), not by the max and not over another axis.")
        expect_close(out, torch.softmax(scores, dim=-1), what="softmax(scores)", case=case,
                     hint="softmax(x)_i = exp(x_i - max_j x_j) / sum_k exp(x_k - max_j x_j), over the last axis.")
    return passed("softmax")


def _topk_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def check_topk_attention_pool(fn):
    """Check `fn(queries, keys, values, score, k)` -> (outputs, weights) for top-k attention pooling."""
    g = torch.Generator().manual_seed(2)
    dot = lambda q, k: q @ k.T  # noqa: E731
    cases = [("4 queries, 6 keys, k=2", 4, 6, 3, 2), ("1 query, 5 keys, k=1", 1, 5, 2, 1),
             ("3 queries, 7 keys, k=7 (all keys)", 3, 7, 4, 7), ("2 queries, 8 keys, k=3", 2, 8, 5, 3)]
    for case, n_q, n_k, d_v, k in cases:
        queries, keys = torch.randn(n_q, 4, generator=g), torch.randn(n_k, 4, generator=g)
        values = torch.randn(n_k, d_v, generator=g)
        result = call(fn, queries, keys, values, dot, k, name="topk_attention_pool", case=case)
        if not isinstance(result, tuple) or len(result) != 2:
            fail(f"topk_attention_pool should return a pair (outputs, weights), got {type(result).__name__} on {case}.")
        outputs, weights = result
        expect_tensor(weights, (n_q, n_k), what="weights", case=case)
        expect_tensor(outputs, (n_q, d_v), what="outputs", case=case)
        sums = weights.sum(dim=-1)
        if not torch.allclose(sums, torch.ones_like(sums), atol=1e-5):
            fail(f"each query's weights must sum to 1 on {case}; they sum to {sums.tolist()}.",
                 "mask the scores before the softmax (fill with -inf), rather than zeroing weights after it.")
        nonzero = (weights > 0).sum(dim=-1)
        if not torch.equal(nonzero, torch.full_like(nonzero, k)):
            fail(f"each query should give weight to exactly k={k} keys on {case}; "
                 f"the number of keys with weight > 0 per query is {nonzero.tolist()}.",
                 "keep the k largest scores of each row (topk over the keys axis, dim=-1).")
        ref_out, ref_weights = _topk_reference(queries, keys, values, dot, k)
        expect_close(weights, ref_weights, what="weights", case=case,
                     hint="the kept keys must be the k with the highest scores for that query.")
        expect_close(outputs, ref_out, what="outputs", case=case,
                     hint="the output is weights @ values (the values, not the keys).")
    return passed("topk_attention_pool")
