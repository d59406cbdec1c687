"""Chapter 2's checker passes the reference solution and rejects known-wrong ones with useful messages."""
import pytest
import torch

from book import checks


def reference(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    K = 0.75 * (1 - u ** 2).clamp_min(0)
    weights = K / K.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values, weights


def with_kernel(kernel, width_used=True, guard=True):
    def pool(queries, keys, values, width=1.0):
        u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / (width if width_used else 1.0)
        K = kernel(u)
        total = K.sum(dim=-1, keepdim=True)
        weights = K / (total.clamp_min(1e-30) if guard else total)
        return weights @ values, weights
    return pool


def stub(*args):
    raise NotImplementedError("write your solution here")


def not_normalised(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    weights = 0.75 * (1 - u ** 2).clamp_min(0)
    return weights @ values, weights


def normalised_over_queries(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    K = (1 - u ** 2).clamp_min(0)
    weights = K / K.sum(dim=0, keepdim=True).clamp_min(1e-30)
    return weights @ values, weights


def pools_keys(queries, keys, values, width=1.0):
    _, weights = reference(queries, keys, values, width)
    return weights @ keys, weights


def softmax_of_kernel(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    weights = torch.softmax(0.75 * (1 - u ** 2).clamp_min(0), dim=-1)
    return weights @ values, weights


def uniform_when_empty(queries, keys, values, width=1.0):
    outputs, weights = reference(queries, keys, values, width)
    empty = weights.sum(-1) == 0
    weights[empty] = 1 / keys.shape[0]
    return weights @ values, weights


WRONG = {
    "triangular kernel 1 - |u| (d2l's 'epanechikov')":
        (with_kernel(lambda u: (1 - u.abs()).clamp_min(0)), "wrong on"),
    "forgets to divide by the width": (with_kernel(lambda u: (1 - u ** 2).clamp_min(0),
                                                   width_used=False), "same as at width 1"),
    "does not clamp 1 - u^2 at 0": (with_kernel(lambda u: 1 - u ** 2), "negative"),
    "NaN for a query with an empty window": (with_kernel(lambda u: (1 - u ** 2).clamp_min(0),
                                                         guard=False), "NaN"),
    "no normalisation": (not_normalised, "sum to 1"),
    "normalises over the queries": (normalised_over_queries, "sum to 1"),
    "Gaussian kernel instead": (with_kernel(lambda u: torch.exp(-u ** 2 / 2)), "wrong on"),
    "softmax of the kernel values": (softmax_of_kernel, "all-zero weights|wrong on"),
    "uniform weights for an empty window": (uniform_when_empty, "all-zero weights"),
    "pools the keys, not the values": (pools_keys, "not of the keys"),
    "returns only the weights": (lambda q, k, v, w: reference(q, k, v, w)[1], "pair"),
    "unimplemented stub": (stub, "not implemented yet"),
}


def test_check_epanechnikov_accepts_the_reference():
    assert "passed" in checks.check_epanechnikov_pool(reference)


@pytest.mark.parametrize("name", WRONG)
def test_check_epanechnikov_rejects_wrong_solutions(name):
    fn, message = WRONG[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_epanechnikov_pool(fn)


def test_failure_messages_name_the_input_and_the_values():
    with pytest.raises(AssertionError) as info:
        checks.check_epanechnikov_pool(WRONG["triangular kernel 1 - |u| (d2l's 'epanechikov')"][0])
    text = str(info.value)
    assert "on 5 queries, 8 keys" in text and "expected" in text and "got" in text
    assert "Hint:" in text and "1 - u^2" in text
