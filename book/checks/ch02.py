"""Checkers for chapter 2's exercises: Epanechnikov-kernel attention pooling."""
import torch

from ._core import call, expect_close, expect_tensor, fail


def _epanechnikov_reference(queries, keys, values, width):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width        # (n_q, n_k)
    K = (1 - u ** 2).clamp_min(0)                                     # 3/4 cancels
    total = K.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, K / total.clamp_min(1e-30), torch.zeros_like(K))
    return weights @ values, weights


def _epanechnikov_cases():
    g = torch.Generator().manual_seed(2)
    keys = torch.sort(torch.rand(8, generator=g) * 4).values
    values = torch.randn(8, generator=g)
    queries = torch.tensor([0.3, 1.1, 2.0, 2.7, 3.6])
    return [
        ("5 queries, 8 keys in [0, 4), width 1", queries, keys, values, 1.0),
        ("the same inputs, width 0.7", queries, keys, values, 0.7),
        ("3 queries, 8 keys, width 2.5 (wide windows)", queries[:3], keys, values, 2.5),
        ("queries 1.0 and 10.0 with keys 0, 0.5, ..., 3.5, width 1 (no key near 10)",
         torch.tensor([1.0, 10.0]), torch.arange(0, 4, 0.5), torch.arange(8.0) - 3, 1.0),
    ]


def check_epanechnikov_pool(fn):
    """Check `fn(queries, keys, values, width)` -> (outputs, weights), Epanechnikov pooling."""
    previous = None  # the weights of the first case, for the width check of the second
    for case, queries, keys, values, width in _epanechnikov_cases():
        result = call(fn, queries.clone(), keys.clone(), values.clone(), width,
                      name="epanechnikov_pool", case=case)
        if not isinstance(result, tuple) or len(result) != 2:
            fail(f"epanechnikov_pool should return a pair (outputs, weights), got "
                 f"{type(result).__name__} on {case}.")
        outputs, weights = result
        n_q, n_k = len(queries), len(keys)
        if isinstance(weights, torch.Tensor) and weights.is_floating_point() \
                and torch.isnan(weights).any():
            rows = torch.isnan(weights).any(dim=-1).nonzero().flatten().tolist()
            fail(f"the weights contain NaN on {case}, for the queries {queries[rows].tolist()}.",
                 "a query with no key inside its window has kernel sum 0, and 0/0 is NaN: "
                 "give such a query all-zero weights (guard the division).")
        expect_tensor(weights, (n_q, n_k), what="weights", case=case)
        expect_tensor(outputs, (n_q,), what="outputs", case=case)
        if (weights < 0).any():
            fail(f"some weights are negative on {case} (smallest {weights.min().item():.3g}).",
                 "outside the window |u| > 1 the kernel is 0, not 1 - u^2 < 0: clamp it at 0.")
        if previous is not None and previous.shape == weights.shape \
                and torch.allclose(weights, previous):
            fail(f"the weights on {case} are the same as at width 1.",
                 "divide the distance by the width: u = (query - key) / width.")
        previous = weights if previous is None else previous
        ref_outputs, ref_weights = _epanechnikov_reference(queries, keys, values, width)
        sums, ref_sums = weights.sum(dim=-1), ref_weights.sum(dim=-1)
        has_keys = ref_sums > 0
        if not torch.allclose(sums[has_keys], torch.ones_like(sums[has_keys]), atol=1e-5):
            fail(f"each query's weights must sum to 1 on {case}; they sum to "
                 f"{[round(s, 4) for s in sums.tolist()]}.",
                 "divide each kernel value by the sum over the keys (dim=-1) of that query.")
        if (~has_keys).any() and not torch.equal(weights[~has_keys],
                                                 torch.zeros_like(weights[~has_keys])):
            fail(f"a query with no key inside its window should get all-zero weights on {case}; "
                 f"got {weights[~has_keys][0].tolist()}.",
                 "when the sum of the kernel values is 0, keep the weights 0 (guard the "
                 "division) instead of spreading them over keys that are outside the window.")
        expect_close(weights, ref_weights, what="weights", case=case,
                     hint="the weight of key i is K(u_i) / sum_j K(u_j) with "
                          "u = (query - key) / width and K(u) = 3/4 (1 - u^2) for |u| <= 1.")
        expect_close(outputs, ref_outputs, what="outputs", case=case,
                     hint="the output of a query is the weighted sum of the values, "
                          "not of the keys.")
    return "epanechnikov_pool: all checks passed."
