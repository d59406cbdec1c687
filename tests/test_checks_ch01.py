"""Chapter 1's checkers pass the reference solutions and reject known-wrong ones with useful messages."""
import pytest
import torch

from book import checks


def softmax_reference(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_in_place(scores):
    scores -= scores.amax(dim=-1, keepdim=True)
    return torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)


def stub(*args):
    raise NotImplementedError("write your solution here")


WRONG_SOFTMAXES = {
    "naive exp overflows": (lambda s: torch.exp(s) / torch.exp(s).sum(-1, keepdim=True), "NaN"),
    "wrong axis": (lambda s: torch.softmax(s, dim=0), "sum to 1"),
    "not normalised": (lambda s: torch.exp(s - s.amax(-1, keepdim=True)), "sum to 1"),
    "divides by the max": (lambda s: torch.exp(s - s.amax(-1, keepdim=True))
                           / torch.exp(s - s.amax(-1, keepdim=True)).amax(-1, keepdim=True), "sum to 1"),
    "changes its input": (softmax_in_place, "in place"),
    "returns a float64 copy": (lambda s: torch.softmax(s.double(), -1), "dtype"),
    "forgets to return": (lambda s: None, "None"),
    "returns a list": (lambda s: torch.softmax(s, -1).tolist(), "torch.Tensor"),
    "flattens": (lambda s: torch.softmax(s, -1).flatten(), "shape"),
    "unimplemented stub": (stub, "not implemented yet"),
    "crashes": (lambda s: s.no_such_method(), "AttributeError"),
    "temperature 2": (lambda s: torch.softmax(s / 2, -1), "wrong"),
}


def test_check_softmax_accepts_the_reference():
    assert "passed" in checks.check_softmax(softmax_reference)


@pytest.mark.parametrize("name", WRONG_SOFTMAXES)
def test_check_softmax_rejects_wrong_solutions(name):
    fn, message = WRONG_SOFTMAXES[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_softmax(fn)


@pytest.mark.parametrize("bad", [None, 42])
def test_checkers_reject_non_functions(bad):
    with pytest.raises(AssertionError, match="None|function"):
        checks.check_softmax(bad)


def topk_reference(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth_best = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth_best, float("-inf")), dim=-1)
    return weights @ values, weights


def zero_after_softmax(queries, keys, values, score, k):
    scores = score(queries, keys)
    weights = torch.softmax(scores, -1)
    weights = weights * (scores >= scores.topk(k, -1).values[:, -1:])
    return weights @ values, weights


def keeps_lowest(queries, keys, values, score, k):
    return topk_reference(queries, keys, values, lambda q, kk: -score(q, kk), k)


def one_too_many(queries, keys, values, score, k):
    return topk_reference(queries, keys, values, score, min(k + 1, keys.shape[0]))


def pools_keys(queries, keys, values, score, k):
    _, weights = topk_reference(queries, keys, values, score, k)
    return weights @ keys[:, : values.shape[1]] if keys.shape[1] >= values.shape[1] else weights @ keys, weights


def no_mask(queries, keys, values, score, k):
    weights = torch.softmax(score(queries, keys), -1)
    return weights @ values, weights


def topk_over_queries(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(min(k, scores.shape[0]), dim=0).values[-1:, :]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def weights_only(queries, keys, values, score, k):
    return topk_reference(queries, keys, values, score, k)[1]


WRONG_TOPKS = {
    "zeroes weights after the softmax (no renormalising)": (zero_after_softmax, "sum to 1"),
    "keeps the lowest scores": (keeps_lowest, "highest scores"),
    "keeps k + 1 keys": (one_too_many, "exactly k"),
    "pools the keys, not the values": (pools_keys, "values, not the keys|shape"),
    "forgets the mask": (no_mask, "exactly k"),
    "top-k over the queries axis": (topk_over_queries, "exactly k|highest"),
    "returns only the weights": (weights_only, "pair"),
    "unimplemented stub": (stub, "not implemented yet"),
}


def test_check_topk_accepts_the_reference():
    assert "passed" in checks.check_topk_attention_pool(topk_reference)


@pytest.mark.parametrize("name", WRONG_TOPKS)
def test_check_topk_rejects_wrong_solutions(name):
    fn, message = WRONG_TOPKS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_topk_attention_pool(fn)


def test_failure_messages_name_the_input_and_the_values():
    with pytest.raises(AssertionError) as info:
        checks.check_softmax(lambda s: torch.softmax(s / 2, -1))
    text = str(info.value)
    assert "on a (2, 5) matrix" in text and "expected" in text and "got" in text and "Hint:" in text
