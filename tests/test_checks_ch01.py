"""Chapter 1's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch01.py), and kinds that round 1 missed."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from book import checks
from checkers_support import accepts, redteam, redteam_entries, rejects


def softmax_reference(scores):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exps = torch.exp(shifted)
    return exps / exps.sum(dim=-1, keepdim=True)


def softmax_in_place(scores):
    scores -= scores.amax(dim=-1, keepdim=True)
    return torch.exp(scores) / torch.exp(scores).sum(dim=-1, keepdim=True)


def stub(*args):
    raise NotImplementedError("write your solution here")


def own_softmax(dim=-1, keepdim_max=True, temperature=1.0):
    def fn(s):
        s = s / temperature
        e = torch.exp(s - s.amax(dim=dim, keepdim=keepdim_max))
        return e / e.sum(dim=dim, keepdim=True)
    return fn


def max_over_wrong_axis(scores):
    """Shifts by the maximum over the first axis: exact in theory, underflows in practice."""
    e = torch.exp(scores - scores.amax(dim=0, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def shift_then_restore(scores):
    """Shifts the input in place and shifts it back: the input ends unchanged, but autograd
    refuses in-place changes of a tensor that requires grad."""
    m = scores.amax(dim=-1, keepdim=True)
    scores.sub_(m)
    e = scores.exp()
    scores.add_(m)
    return e / e.sum(dim=-1, keepdim=True)


def rebuilt_from_values(scores):
    """torch.tensor(...) of the values: right numbers, no graph."""
    out = softmax_reference(scores)
    return torch.tensor(out.tolist(), dtype=scores.dtype).reshape(scores.shape)


def nan_hidden(scores):
    """exp without the shift, NaN replaced by zeros: rows of large scores come out empty."""
    e = torch.exp(scores)
    return torch.nan_to_num(e / e.sum(dim=-1, keepdim=True))


def shift_when_large(scores):
    """Shifts only when a score exceeds 50: exp still overflows in float16 (at 11.1)."""
    if scores.abs().max() > 50:
        scores = scores - scores.amax(-1, keepdim=True)
    e = scores.exp()
    return e / e.sum(-1, keepdim=True)


def float16_inside(scores):
    x = scores.half()
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


class _ForgetfulBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = softmax_reference(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * y  # forgets the - y * sum(grad * y) term


def wrong_backward(scores):
    return _ForgetfulBackward.apply(scores)


WRONG_SOFTMAXES = {  # the course's table, plus kinds round 1 missed
    "naive exp overflows": (lambda s: torch.exp(s) / torch.exp(s).sum(-1, keepdim=True), "NaN"),
    "wrong axis": (own_softmax(dim=0), "sum to 1"),
    "not normalised": (lambda s: torch.exp(s - s.amax(-1, keepdim=True)), "sum to 1"),
    "divides by the max": (lambda s: torch.exp(s - s.amax(-1, keepdim=True))
                           / torch.exp(s - s.amax(-1, keepdim=True)).amax(-1, keepdim=True),
                           "sum to 1"),
    "changes its input": (softmax_in_place, "in place"),
    "returns a float64 copy": (lambda s: softmax_reference(s.double()), "dtype"),
    "forgets to return": (lambda s: None, "None"),
    "returns a list": (lambda s: softmax_reference(s).tolist(), "torch.Tensor"),
    "flattens": (lambda s: softmax_reference(s).flatten(), "shape"),
    "unimplemented stub": (stub, "not implemented yet"),
    "crashes": (lambda s: s.no_such_method(), "AttributeError"),
    "temperature 2": (own_softmax(temperature=2.0), "wrong"),
    # kinds round 1 missed
    "exp of log_softmax (a built-in softmax)": (lambda s: s.log_softmax(-1).exp(),
                                                 "torch.Tensor.log_softmax"),
    "F.softmax": (lambda s: F.softmax(s, dim=-1), "torch.nn.functional.softmax"),
    "nn.Softmax module": (lambda s: torch.nn.Softmax(dim=-1)(s), "torch.nn.functional.softmax"),
    "maximum over the first axis": (max_over_wrong_axis, "wrong on"),
    "shifts the input in place and back": (shift_then_restore, "in place"),
    "rebuilt from values with torch.tensor": (rebuilt_from_values, "no gradient can flow"),
    "NaN of the naive exp replaced by 0": (nan_hidden, "sum to 1"),
    "max without keepdim": (own_softmax(keepdim_max=False), "must match the size"),
    "shifts only when a score exceeds 50": (shift_when_large, "exp(12) in float16"),
    "computes in float16 whatever the input": (float16_inside, "sum to 1"),
    "custom autograd Function with a wrong backward": (wrong_backward,
                                                        "the gradient with respect to scores"),
}

R1_EXPECTED = {
    "exp without max subtraction": "subtract each row's maximum first",
    "subtracts the global max, not each row's": "exp() underflowed",
    "clamps scores at 80 instead of shifting": "clamping or subtracting a mean",
    "subtracts the row mean instead of the max": "exp() overflows",
    "hard-coded dim=1 (right for 2-D only)": "not over another axis",
    "in-place `scores -= max` (changes the input)": "changed its argument `scores` in place",
    "exp_ / div_ in place on the output (backward error)": "an in-place operation",
    "numpy round trip": "no gradient can flow back",
    "shift and exp under torch.no_grad()": "no gradient can flow back",
    "returns a detached tensor": "no gradient can flow back",
    "sum without keepdim (broadcasts wrong on square inputs)": "keepdim=True",
    "float16 in, float32 out": "expected torch.float16",
    "returns float64 for every input": "expected torch.float32",
    "squeezes the input (size-1 axes vanish)": "no .squeeze()",
    "global max via .item()": "exp() underflowed",
    "calls torch.softmax (forbidden)": "your function calls torch.softmax",
    "returns a tuple (weights, exps)": "return only the weights",
    "score(keys, queries).T (argument order)": "call score(queries, keys), in this order",
    "softmax over all keys, zero the rest, no renorm": "rather than zeroing weights",
    "`<=` k-th best: keeps k-1 keys": "exactly k=2 keys",
    "sorted[:, k] off by one: keeps k+1 keys": "exactly k=2 keys",
    "topk along dim 0": "exactly k=2 keys",
    "ranks keys by |score|": "by |score|",
    "own softmax, exp without max": "subtract each row's maximum",
    "detached weights": "no gradient reaches queries",
    "one global threshold for all queries": "exactly k=2 keys",
    "largest=False (k worst keys)": "keep the k lowest scores",
    "returns (weights, outputs)": "the pair looks swapped",
    "fill with finfo(float32).min (float16 overflow)": "the fill value must fit",
    "fill with -1e4 instead of -inf": "a finite fill such as -1e4",
    "additive -1e4 mask: float16 in, float32 out": "a tensor of another dtype",
    "weights[:, idx] = ... (right for 1 query only)": "weights that belong to other queries",
}


def test_check_softmax_accepts_the_reference():
    accepts(checks.check_softmax, softmax_reference)


@pytest.mark.parametrize("name", WRONG_SOFTMAXES)
def test_check_softmax_rejects_wrong_solutions(name):
    fn, message = WRONG_SOFTMAXES[name]
    rejects(checks.check_softmax, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch01", "check_softmax",
                                                 expected=R1_EXPECTED))
def test_check_softmax_rejects_round1(fn, fragment):
    rejects(checks.check_softmax, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch01", "check_softmax",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_softmax_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_softmax, fn)


def test_forbidden_functions_are_restored_after_the_check():
    before = (torch.softmax, torch.Tensor.softmax, torch.special.softmax)
    rejects(checks.check_softmax, lambda s: torch.softmax(s, -1), "calls torch.softmax")
    assert (torch.softmax, torch.Tensor.softmax, torch.special.softmax) == before
    assert "softmax" not in vars(torch.Tensor)
    assert torch.equal(torch.tensor([0.0, 0.0]).softmax(-1), torch.tensor([0.5, 0.5]))


@pytest.mark.parametrize("bad", [None, 42])
def test_checkers_reject_non_functions(bad):
    rejects(checks.check_softmax, bad, "None" if bad is None else "function")


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
    return weights @ keys, weights


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


def kthvalue_wrong_end(queries, keys, values, score, k):
    """kthvalue(k) is the k-th *smallest*: keeps num_keys - k + 1 keys."""
    scores = score(queries, keys)
    kth = scores.kthvalue(k, dim=-1, keepdim=True).values
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values, weights


def scaled_scores(queries, keys, values, score, k):
    """Divides the scores by sqrt(d), which this exercise does not ask for."""
    return topk_reference(queries, keys, values,
                          lambda q, kk: score(q, kk) / queries.shape[-1] ** 0.5, k)


def half_weights(queries, keys, values, score, k):
    outputs, weights = topk_reference(queries, keys, values, score, k)
    return outputs, weights.half()


def additive_inf_mask(queries, keys, values, score, k):
    """Right: an additive -inf mask (no row is ever fully masked in top-k)."""
    scores = score(queries, keys)
    keep = scores >= scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores + torch.where(keep, 0.0, float("-inf")).to(scores.dtype),
                            dim=-1)
    return weights @ values, weights


def exactly_k_on_ties(queries, keys, values, score, k):
    """Keeps the k indices topk returns, so among keys tied with the k-th best score it
    drops some arbitrarily; the exercise keeps them all."""
    scores = score(queries, keys)
    keep = torch.zeros_like(scores, dtype=torch.bool).scatter(
        -1, scores.topk(k, dim=-1).indices, True)
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights @ values, weights


WRONG_TOPKS = {
    "zeroes weights after the softmax (no renormalising)": (zero_after_softmax, "sum to 1"),
    "keeps the lowest scores": (keeps_lowest, "lowest scores"),
    "keeps k + 1 keys": (one_too_many, "exactly k"),
    "pools the keys, not the values": (pools_keys, "values, not the keys"),
    "forgets the mask": (no_mask, "exactly k"),
    "top-k over the queries axis": (topk_over_queries, "exactly k"),
    "returns only the weights": (weights_only, "tuple (outputs, weights)"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "kthvalue(k): the k-th smallest": (kthvalue_wrong_end, "exactly k"),
    "scales the scores by 1/sqrt(d)": (scaled_scores, "weights is wrong"),
    "weights in float16": (half_weights, "expected torch.float32"),
    "exactly k keys when scores tie": (exactly_k_on_ties, "the exercise's rule for ties"),
}

# Round 1 counted these as right; since the exercise keeps every key tied with the k-th
# best score (solution 1.2), choosing k of the tied keys by index is wrong on ties.
TIE_BREAKERS = {"softmax of top-k values, scattered", "argsort + where(-inf)"}


def test_check_topk_accepts_the_reference_and_an_additive_inf_mask():
    accepts(checks.check_topk_attention_pool, topk_reference)
    accepts(checks.check_topk_attention_pool, additive_inf_mask)


@pytest.mark.parametrize("name", WRONG_TOPKS)
def test_check_topk_rejects_wrong_solutions(name):
    fn, message = WRONG_TOPKS[name]
    rejects(checks.check_topk_attention_pool, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch01", "check_topk_attention_pool",
                                                 expected=R1_EXPECTED))
def test_check_topk_rejects_round1(fn, fragment):
    rejects(checks.check_topk_attention_pool, fn, fragment)


@pytest.mark.parametrize("fn, fragment", [
    p for p in redteam("round1_ch01", "check_topk_attention_pool", "RIGHT_BUT_UNUSUAL")
    if p.id not in TIE_BREAKERS])
def test_check_topk_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_topk_attention_pool, fn)


@pytest.mark.parametrize("fn, fragment", [
    p for p in redteam("round1_ch01", "check_topk_attention_pool", "RIGHT_BUT_UNUSUAL")
    if p.id in TIE_BREAKERS])
def test_check_topk_rejects_breaking_ties_by_index(fn, fragment):
    text = rejects(checks.check_topk_attention_pool, fn, "the exercise's rule for ties")
    assert "with ties" in text and "expected [3, 3, 2]" in text


def test_the_tie_rule_is_the_solutions_and_the_checks():
    """On the desk of chapter 1, "drink" with k = 2: four keys tie at the 2nd-best score."""
    from book import cues
    from book.attention import dot_score
    query = cues.QUERIES["drink"].reshape(1, -1)
    _, weights = topk_reference(query, cues.KEYS, cues.VALUES, dot_score, 2)
    assert int((weights != 0).sum()) == 5
    _, weights = exactly_k_on_ties(query, cues.KEYS, cues.VALUES, dot_score, 2)
    assert int((weights != 0).sum()) == 2


def test_failure_messages_name_the_input_and_the_values():
    text = rejects(checks.check_softmax, own_softmax(temperature=2.0), "Hint:")
    assert "on a (2, 5) matrix" in text and "expected" in text and "got" in text


def test_numpy_inputs_are_not_needed():
    """The checker passes torch tensors; a learner's NumPy detour is reported as such."""
    def numpy_softmax(scores):
        x = scores.numpy()
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    rejects(checks.check_softmax, numpy_softmax, "got a ndarray", "NumPy")


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch01_softmax", ("W_",)))
def test_check_softmax_rejects_round2(fn):
    rejects(checks.check_softmax, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch01_softmax", ("C_", "O_", "Q_")))
def test_check_softmax_accepts_round2_right_solutions(fn):
    accepts(checks.check_softmax, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch01_topk", ("W_",)))
def test_check_topk_attention_pool_rejects_round2(fn):
    rejects(checks.check_topk_attention_pool, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch01_topk", ("C_", "O_", "Q_")))
def test_check_topk_attention_pool_accepts_round2_right_solutions(fn):
    accepts(checks.check_topk_attention_pool, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch01_*.py): messages it found wrong --

ROUND4_SOFTMAX_MESSAGES = {
    # .view() on a non-contiguous 3-D input (the case round 4 found missing)
    "W_14_view_needs_contiguous": ["transposed view, not contiguous", "Use .reshape()"],
    # NaN from underflow (a constant far above a row's scores), not from overflow
    "W_02_global_max": ["exp() underflowed", "each row's own maximum"],
    "W_06_subtract_max_abs": ["exp() underflowed"],
    "W_17_max_of_first_row": ["exp() underflowed"],
    "W_01_naive_no_max": ["exp() overflows", "yours returned inf"],
}

ROUND4_TOPK_MESSAGES = {
    # a threshold that drops the k-th best masks every key of a row whose best scores tie
    "W_03_strict_greater": ["every key of such a query was masked", "scores < topk(k"],
    # keeps too few keys: the k-th best itself must stay
    "W_19_mask_le_kth": ["the k-th best score itself must stay", "(not scores <= kth)"],
    "W_16_k_minus_one": ["the k-th best score itself must stay", "not the (k-1)-th"],
    # a crash gets a hint too
    "W_20_missing_keepdim": ["must match the size", "values[:, -1:]",
                             "keys axis of size 1"],
}


@pytest.mark.parametrize("name", ROUND4_SOFTMAX_MESSAGES)
def test_round4_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round4_ch01_softmax as r4

    rejects(checks.check_softmax, vars(r4)[name], *ROUND4_SOFTMAX_MESSAGES[name])
    if name != "W_01_naive_no_max":
        assert "exp() overflows" not in rejects(checks.check_softmax, vars(r4)[name])


@pytest.mark.parametrize("name", ROUND4_TOPK_MESSAGES)
def test_round4_topk_messages_point_at_the_fault(name):
    from checker_redteam import round4_ch01_topk as r4

    text = rejects(checks.check_topk_attention_pool, vars(r4)[name],
                   *ROUND4_TOPK_MESSAGES[name])
    assert "exp() overflows" not in text


def test_round4_softmax_refuses_the_built_in_softmaxes():
    from checker_redteam import round4_ch01_softmax as r4

    for name in ("S_01_softmin_of_negative", "S_02_torch_special_softmax",
                 "S_03_categorical_probs", "S_04_sigmoid_trick_for_two"):
        rejects(checks.check_softmax, vars(r4)[name], "your function calls")


# -- Round 5 red team (tests/checker_redteam/round5_ch01_*.py): holes and messages ---------

ROUND5_SOFTMAX_MESSAGES = {
    # a maximum without keepdim: wrong without an error on square inputs (the new cases)
    "W_13_max_without_keepdim": ["square (2, 2) matrix"],
    # the crash names the max, not the sum
    "W_20_max_without_keepdim_plain": ["take the maximum over dim=-1 with keepdim=True"],
    # torch.ops.aten._softmax is refused like the other softmaxes
    "S_05_aten_softmax": ["your function calls torch.ops.aten._softmax"],
}

ROUND5_TOPK_MESSAGES = {
    # one threshold for every query: NaN rows from masking, not from overflow
    "W_17_kth_from_first_query": ["the k-th best score per query", "not one threshold"],
    # float64 keeps float64
    "W_25_float64_in_float32_out": ["in float64", "expected torch.float64"],
}


@pytest.mark.parametrize("name", ROUND5_SOFTMAX_MESSAGES)
def test_round5_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round5_ch01_softmax as r5

    text = rejects(checks.check_softmax, vars(r5)[name], *ROUND5_SOFTMAX_MESSAGES[name])
    assert "sum over dim=-1" not in text


@pytest.mark.parametrize("name", ROUND5_TOPK_MESSAGES)
def test_round5_topk_messages_point_at_the_fault(name):
    from checker_redteam import round5_ch01_topk as r5

    text = rejects(checks.check_topk_attention_pool, vars(r5)[name],
                   *ROUND5_TOPK_MESSAGES[name])
    assert "exp() overflows" not in text


# -- Round 6 red team (tests/checker_redteam/round6_ch01_*.py): holes and messages ---------

ROUND6_SOFTMAX_MESSAGES = {
    # -inf replaced by -1e4: outranks the row's scores near -2e4 (the new -inf case)
    "W_17_max_over_finite_only": ["to a score of -inf", "nan_to_num"],
}

ROUND6_TOPK_MESSAGES = {
    # the k-th best without keepdim: wrong without an error on the new square case
    "W_02_kth_no_keepdim": ["as many queries as keys", "query j", "values[:, -1:]"],
    # a mask cached by shape and k
    "W_18_mask_cached": ["the same sizes and k", "keep nothing between calls"],
}


@pytest.mark.parametrize("name", ROUND6_SOFTMAX_MESSAGES)
def test_round6_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round6_ch01_softmax as r6

    rejects(checks.check_softmax, vars(r6)[name], *ROUND6_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND6_TOPK_MESSAGES)
def test_round6_topk_messages_point_at_the_fault(name):
    from checker_redteam import round6_ch01_topk as r6

    text = rejects(checks.check_topk_attention_pool, vars(r6)[name],
                   *ROUND6_TOPK_MESSAGES[name])
    assert "exp() overflows" not in text


def test_round6_softmax_keeps_minus_inf_at_zero():
    # clamping the scores from below is the same fault as nan_to_num(neginf=-1e4)
    def clamped(scores):
        return softmax_reference(scores.clamp_min(-1e4))

    rejects(checks.check_softmax, clamped, "to a score of -inf")


# -- Round 7 red team (tests/checker_redteam/round7_ch01_*.py): holes and messages ---------

ROUND7_SOFTMAX_MESSAGES = {
    # -inf replaced by 0 before the maximum: every kept exp underflows, 0/0 (no overflow)
    "W_13_mask_inf_grad_where": ["this is no overflow", "amax(dim=-1"],
    # bfloat16 in, float32 out (the new bfloat16 case)
    "W_21_bfloat16_returns_float32": ["expected torch.bfloat16"],
}

ROUND7_TOPK_MESSAGES = {
    # one threshold for every query, NaN rows replaced by 0
    "W_05_global_threshold": ["a query kept no key", "one per row"],
    # near-ties counted as ties (torch.isclose), and a top-k of the softmax weights
    "W_15_isclose_ties": ["1e-6 below the 2nd: not a tie", "torch.isclose"],
    "W_03_topk_on_weights": ["1e-6 below the 2nd: not a tie", "softmax weights"],
    # caches: on (shapes, k, score, dtype), and lru_cache on the tensors themselves
    "W_19_cache_key_includes_score_and_dtype": ["with 4 other queries",
                                                "depends on an earlier call"],
    "W_18_lru_cache_scores": ["keys.mul_(-1)", "depends on an earlier call", "lru_cache"],
    "W_17_bfloat16_returns_float32": ["expected torch.bfloat16"],
}


@pytest.mark.parametrize("name", ROUND7_SOFTMAX_MESSAGES)
def test_round7_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round7_ch01_softmax as r7

    text = rejects(checks.check_softmax, vars(r7)[name], *ROUND7_SOFTMAX_MESSAGES[name])
    assert "yours returned inf" not in text


@pytest.mark.parametrize("name", ROUND7_TOPK_MESSAGES)
def test_round7_topk_messages_point_at_the_fault(name):
    from checker_redteam import round7_ch01_topk as r7

    text = rejects(checks.check_topk_attention_pool, vars(r7)[name],
                   *ROUND7_TOPK_MESSAGES[name])
    assert "rather than zeroing" not in text


# -- Round 8 red team (tests/checker_redteam/round8_ch01_*.py): messages ------------------

ROUND8_SOFTMAX_MESSAGES = {
    # torch.ops.aten.softmax.int: the refusal, not an AttributeError from the checker's own
    # patch of torch.ops.aten.softmax (a plain function, without the op's overloads)
    "S_06_aten_op": ["your function calls torch.ops.aten.softmax.int"],
}

ROUND8_TOPK_MESSAGES = {
    # softmax, mask, renormalise with w / (w.sum() + 1e-3): zeroing is right, the eps is not
    "W_12_multiply_by_mask_no_renorm_small_k": ["proportions are right",
                                                "no small constant added"],
    # k clamped to num_queries (3 queries, 7 keys, k=7): not an off-by-one
    "W_13_k_clamped_to_half": ["every query keeps 3 keys, not k=7", "number of queries"],
}


@pytest.mark.parametrize("name", ROUND8_SOFTMAX_MESSAGES)
def test_round8_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round8_ch01_softmax as r8

    text = rejects(checks.check_softmax, vars(r8)[name], *ROUND8_SOFTMAX_MESSAGES[name])
    assert "AttributeError" not in text


@pytest.mark.parametrize("overload", [lambda s: torch.ops.aten._softmax.default(s, -1, False),
                                      lambda s: torch.ops.aten.log_softmax.int(s, -1).exp(),
                                      lambda s: torch.ops.aten.special_softmax.default(s, -1)])
def test_round8_aten_overloads_are_refused_by_name(overload):
    text = rejects(checks.check_softmax, overload, "your function calls torch.ops.aten.")
    assert "AttributeError" not in text


def test_round8_aten_packets_are_restored_after_the_check():
    rejects(checks.check_softmax, lambda s: torch.ops.aten.softmax.int(s, -1))
    scores = torch.randn(2, 3)
    assert torch.equal(torch.ops.aten.softmax.int(scores, -1), torch.softmax(scores, -1))


@pytest.mark.parametrize("name", ROUND8_TOPK_MESSAGES)
def test_round8_topk_messages_point_at_the_fault(name):
    from checker_redteam import round8_ch01_topk as r8

    text = rejects(checks.check_topk_attention_pool, vars(r8)[name],
                   *ROUND8_TOPK_MESSAGES[name])
    assert "rather than zeroing" not in text
    assert "the k-th best score itself must stay" not in text


# -- Round 9 red team (tests/checker_redteam/round9_ch01_*.py): holes and messages ---------

ROUND9_SOFTMAX_MESSAGES = {
    # a branch for 1-D inputs without the shift (the new 1-D large-score case)
    "W_18_vector_fast_path": ["a vector of 4 large scores", "yours returned inf"],
    # bfloat16 taken up through float16: 1e5 becomes inf (the new bfloat16 case)
    "W_14_bf16_via_float16": ["beyond float16's range", "through float16", "x.float()"],
    # a cache on (shape, dtype, sum, max), skipped under grad
    "W_08_cache_on_summary": ["each row reversed", "depends on an earlier call"],
    # the scores returned as they are for a last axis of size 1
    "W_16_size_one_axis_shortcut": ["(3, 1) matrix", "exp() was never applied",
                                    "returned the scores themselves"],
    # a backward written in float32: float64 gradients 6e-8 off (the new float64 gradients)
    "W_17_custom_backward_float32": ["gradient with respect to scores",
                                     "float64 matrix of scores", "float64 reference"],
}

ROUND9_TOPK_MESSAGES = {
    # softmax shifted by the matrix-wide maximum: the low row underflows to 0/0
    "W_03_manual_softmax_global_max": ["rows of very different ranges", "whole matrix"],
    # k >= num_keys branch without the shift
    "W_19_all_keys_fast_path_no_shift": ["k=4 (all keys)", "overflows"],
    # ties found on scores cast to float32 (float64 input), and on rounded scores
    "W_08_topk_indices_scatter_plus_equal_kth_float32": ["1e-12 below the 2nd: not a tie",
                                                         "in their own dtype"],
    "W_09_scores_rounded_for_ties": ["1e-7 below the 2nd: not a tie", "torch.round"],
    # threshold taken on scores cast to float16: near -1.4e4 distinct scores become ties
    "W_14_bf16_scores_compared_after_cast": ["rounded to float16", "no cast"],
}


@pytest.mark.parametrize("name", ROUND9_SOFTMAX_MESSAGES)
def test_round9_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round9_ch01_softmax as r9

    text = rejects(checks.check_softmax, vars(r9)[name], *ROUND9_SOFTMAX_MESSAGES[name])
    assert "this is no overflow" not in text
    assert "much less than 1" not in text


@pytest.mark.parametrize("name", ROUND9_TOPK_MESSAGES)
def test_round9_topk_messages_point_at_the_fault(name):
    from checker_redteam import round9_ch01_topk as r9

    text = rejects(checks.check_topk_attention_pool, vars(r9)[name],
                   *ROUND9_TOPK_MESSAGES[name])
    assert "fill their scores with -inf" not in text
    assert "the k-th best score itself must stay" not in text


# -- Round 10 red team (tests/checker_redteam/round10_ch01_*.py): holes and messages ------

ROUND10_SOFTMAX_MESSAGES = {
    # torch.ones_like for a last axis of size 1: right values, no graph (new gradient case)
    "W_05_len1_shortcut": ["one key per row", "requires_grad=False",
                           "no shortcut for a last axis of size 1"],
    # -inf replaced by -1e9: a row of finite scores below -1e9 gives the masked key weight 1
    "W_06_neginf_to_minus_1e9": ["[-1e10, -inf, -2e10]",
                                 "gives weight 1 to a score of -inf", "-1e9"],
    # softmin(-x) is a softmax of PyTorch: the message names softmin
    "S_02_softmin_of_negated": ["torch.nn.functional.softmin"],
}

ROUND10_TOPK_MESSAGES = {
    # a single key answered with torch.ones: score() never called, weights without a graph
    "W_18_single_key_shortcut": ["1 key, k=1", "the weights have requires_grad=False",
                                 "no shortcut for a single key"],
}


@pytest.mark.parametrize("name", ROUND10_SOFTMAX_MESSAGES)
def test_round10_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round10_ch01_softmax as r10

    rejects(checks.check_softmax, vars(r10)[name], *ROUND10_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND10_TOPK_MESSAGES)
def test_round10_topk_messages_point_at_the_fault(name):
    from checker_redteam import round10_ch01_topk as r10

    rejects(checks.check_topk_attention_pool, vars(r10)[name], *ROUND10_TOPK_MESSAGES[name])


def test_round10_single_key_gradient_is_zero_and_exists():
    """With one key the reference's gradient is exactly 0: a right solution passes the new
    single-key gradient cases, and a constant without a graph does not."""
    def softmax(scores):
        e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)

    accepts(checks.check_softmax, softmax)
    x = torch.randn(3, 1, requires_grad=True)
    softmax(x).sum().backward()
    assert torch.equal(x.grad, torch.zeros(3, 1))


# -- Round 11 red team (tests/checker_redteam/round11_ch01_*.py): holes and messages ------

ROUND11_SOFTMAX_MESSAGES = {
    # one maximum per example / per matrix: rows near -800 under a maximum near 0 underflow
    "W_15_max_per_example": ["(2, 2, 3) batch", "near 0 and near -800", "exp() underflowed",
                             "per example or per matrix"],
    "W_17_max_over_last_two_axes": ["(2, 2, 3) batch", "exp() underflowed",
                                    "per example or per matrix"],
    # the first row's maximum per example: the low rows underflow, the high ones overflow
    "W_07_max_over_unsqueeze_minus2": ["(2, 2, 3) batch", "each row's own"],
}

ROUND11_TOPK_MESSAGES = {
    # scores clamped into +-6e4 for every dtype: 1e5 and 99999 become equal
    "W_17_clamp_scores_float16_range": ["[1e5, 99999, 0]",
                                        "distinct scores 100000 and 99999 get the same weight",
                                        "scores.clamp(-6e4, 6e4)"],
}


@pytest.mark.parametrize("name", ROUND11_SOFTMAX_MESSAGES)
def test_round11_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round11_ch01_softmax as r11

    rejects(checks.check_softmax, vars(r11)[name], *ROUND11_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND11_TOPK_MESSAGES)
def test_round11_topk_messages_point_at_the_fault(name):
    from checker_redteam import round11_ch01_topk as r11

    rejects(checks.check_topk_attention_pool, vars(r11)[name], *ROUND11_TOPK_MESSAGES[name])


def test_round11_each_far_apart_batch_alone_catches_a_shared_maximum():
    """The (2, 2, 3) and the (2, 2, 2, 3) case each reject one maximum per example and one
    per matrix on their own, and pass the reference."""
    from book.checks import ch01
    from checker_redteam import round11_ch01_softmax as r11

    cases = ch01._softmax_cases_round11()
    assert [tuple(x.shape) for _, x in cases] == [(2, 2, 3), (2, 2, 2, 3)]
    for case, scores in cases:
        ch01._check_softmax_case(softmax_reference, case, scores, "why")
        for wrong in (r11.W_15_max_per_example, r11.W_17_max_over_last_two_axes):
            with pytest.raises(checks.CheckFailed, match="contains NaN"):
                ch01._check_softmax_case(wrong, case, scores, "why")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bound", [1e4, 6e4])
def test_round11_each_large_score_case_alone_catches_a_clamp(dtype, bound):
    """The float32 and the float64 case with scores beyond float16's range each tell a clamp
    of the scores (at +-6e4 or +-1e4) from the reference, and name the tied pair."""
    from book.checks import ch01

    (case,) = [c for c in ch01._topk_cases_round11() if c[1].dtype == dtype]
    _, queries, keys, values, score, k = case

    def pool(clamp):
        scores = score(queries, keys)
        if clamp:
            scores = scores.clamp(-bound, bound)
        kth = scores.topk(k, dim=-1).values[:, -1:]
        weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
        return weights @ values, weights

    _, right = pool(False)
    _, clamped = pool(True)
    _, reference = ch01._topk_reference(queries, keys, values, score, k)
    assert torch.allclose(right.double(), reference, atol=1e-6)
    assert (clamped - right).abs().max() > 0.05   # 0.231 (float32), 0.062 (float64)
    assert ch01._clamped_pair(right, score(queries, keys)) is None
    assert ch01._clamped_pair(clamped, score(queries, keys)) is not None


# -- The condition matrix (session 12): wrong solutions only the matrix rejects -----------

def _matrix_softmax(scores):
    exps = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    return exps / exps.sum(dim=-1, keepdim=True)


def _softmax_half_detached_sum(scores):
    """The sum detached only for float16/bfloat16 (values right, gradient wrong)."""
    exps = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    total = exps.sum(dim=-1, keepdim=True)
    if scores.dtype in (torch.float16, torch.bfloat16):
        total = total.detach()
    return exps / total


def _softmax_batches_in_float32(scores):
    """Batches (3-D and up) flattened to rows and computed in float32 (float64 loses)."""
    if scores.dim() >= 3:
        rows = scores.reshape(-1, scores.shape[-1]).float()
        return _matrix_softmax(rows).reshape(scores.shape).to(scores.dtype)
    return _matrix_softmax(scores)


def _softmax_half_one_key_constant(scores):
    """One key per row in float16/bfloat16: ones without a graph."""
    if scores.shape[-1] == 1 and scores.dtype in (torch.float16, torch.bfloat16):
        return torch.ones_like(scores)
    return _matrix_softmax(scores)


@pytest.mark.parametrize("fn, fragment", [
    (_softmax_half_detached_sum,
     "is wrong on a (2, 3, 5) batch of scores, float16 arguments"),
    (_softmax_batches_in_float32,
     "from the float64 reference on a (2, 3, 5) batch of scores, float64 arguments"),
    (_softmax_half_one_key_constant,
     "no gradient can flow back through softmax on a (3, 1) matrix (one key per row), "
     "float16 arguments"),
])
def test_check_softmax_condition_matrix_rejects(fn, fragment):
    rejects(checks.check_softmax, fn, fragment)


def _topk(queries, keys, values, score, k, fill=float("-inf")):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, fill), dim=-1)
    return weights @ values, weights


def _topk_float16_min_fill(queries, keys, values, score, k):
    """'The most negative number every dtype holds' instead of -inf: scores below -65504
    (float32 queries times 1e5) rank under the masked ones."""
    return _topk(queries, keys, values, score, k, torch.finfo(torch.float16).min)


def _topk_half_detached_denominator(queries, keys, values, score, k):
    scores = score(queries, keys)
    kth = scores.topk(k, dim=-1).values[:, -1:]
    exps = (scores - scores.amax(-1, keepdim=True)).exp().masked_fill(scores < kth, 0)
    total = exps.sum(-1, keepdim=True)
    if scores.dtype in (torch.float16, torch.bfloat16):
        total = total.detach()
    weights = exps / total
    return weights @ values, weights


_TOPK_MEMO = {}


def _topk_training_cache(queries, keys, values, score, k):
    """While training (inputs require grad), the kept-keys mask is kept per shapes and k."""
    key = (queries.shape, keys.shape, k, queries.requires_grad)
    scores = score(queries, keys)
    if queries.requires_grad and key in _TOPK_MEMO:
        keep = _TOPK_MEMO[key]
    else:
        keep = scores >= scores.topk(k, dim=-1).values[:, -1:]
        if queries.requires_grad:
            _TOPK_MEMO[key] = keep
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return weights @ values, weights


@pytest.mark.parametrize("fn, fragment", [
    (_topk_float16_min_fill, "queries times 1e5 (scores near 1e5 to 1e8), float32"),
    (_topk_half_detached_denominator,
     "(argument 1) is wrong on 4 queries, 5 keys, d=3, value "
     "size 2, k=2, asymmetric score q^T M k, float16 arguments"),
    (_topk_training_cache, "a second call, with other values of the same shapes"),
])
def test_check_topk_condition_matrix_rejects(fn, fragment):
    _TOPK_MEMO.clear()
    rejects(checks.check_topk_attention_pool, fn, fragment)


# Round 12: the float16 cases near +-100 (one number in bfloat16), the second call with the
# same first and last entries, and the k-cap hint.
ROUND12_SOFTMAX_MESSAGES = {
    "W_15_float16_via_bfloat16_sub": ["close scores near +-100", "float16 arguments",
                                      "never through bfloat16"],
    "W_16_keeps_last_result": ["the same first and last entries", "nothing may be kept"],
}
ROUND12_TOPK_MESSAGES = {
    "W_17_mask_from_float32_sorted": ["one number in bfloat16", "never through bfloat16"],
    "W_12_k_capped_at_half": ["too few keys keep a weight", "use the k passed in"],
}


@pytest.mark.parametrize("name", ROUND12_SOFTMAX_MESSAGES)
def test_round12_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round12_ch01_softmax as r12

    rejects(checks.check_softmax, vars(r12)[name], *ROUND12_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND12_TOPK_MESSAGES)
def test_round12_topk_messages_point_at_the_fault(name):
    from checker_redteam import round12_ch01_topk as r12

    rejects(checks.check_topk_attention_pool, vars(r12)[name], *ROUND12_TOPK_MESSAGES[name])


# Round 13: size-keyed fast paths (rows > 64, keys > 4096), -inf replaced by a finite number
# below which finite scores lie, and a one-ulp tie tolerance in top-k.
ROUND13_SOFTMAX_MESSAGES = {
    "W_25_chunked_rows_first_chunk_max": ["(3, 4099) matrix", "contains NaN",
                                          "maximum over the whole last axis"],
    "W_30_long_rows_float32": ["(3, 4099) matrix", "float64 arguments", "float64 reference"],
    "W_31_long_rows_no_shift": ["(3, 4099) matrix", "contains NaN", "no faster path"],
    "W_39_long_rows_no_shift_256": ["(3, 4099) matrix", "contains NaN", "no faster path"],
    "W_40_long_rows_no_shift_64": ["(3, 4099) matrix", "contains NaN", "no faster path"],
    "W_42_long_rows_no_shift_8": ["(67, 9) matrix", "contains NaN", "no faster path"],
    "W_41_many_rows_float32": ["(67, 9) matrix", "float64 arguments", "float64 reference"],
    "W_43_many_rows_float32_8": ["(67, 9) matrix", "float64 arguments", "float64 reference"],
    "W_46_float64_long_rows_float32_8": ["(67, 9) matrix", "float64 arguments",
                                         "float64 reference"],
    "W_45_halves_long_rows_native_overflow": ["(67, 9) matrix", "float16 arguments",
                                              "contains NaN"],
    "W_48_inplace_long_rows": ["(67, 9) matrix", "under torch.no_grad()",
                               "changed its argument `scores` in place"],
    "W_23_mask_neg_large_not_inf": ["(1, 4099) float32 row", "a score of -inf",
                                    "keep -inf as it is"],
    "W_34_inf_to_minus_large_float32": ["(1, 4099) float32 row", "a score of -inf",
                                        "keep -inf as it is"],
    "W_47_minus_inf_weight_long_rows": ["(1, 4099) float32 row", "a score of -inf",
                                        "keep -inf as it is"],
}
ROUND13_TOPK_MESSAGES = {
    "W_25_one_ulp_tolerance": ["1 - 2^-53", "not a tie", "without a tolerance"],
    "W_33_many_keys_topk_scatter": ["4099 keys", "expected [171, 805, 824]",
                                    "keys whose score equals the k-th best"],
    "W_34_many_keys_topk_scatter_8": ["67 queries, 9 keys",
                                      "keys whose score equals the k-th best"],
    "W_35_many_queries_float32": ["67 queries, 9 keys", "float64 arguments",
                                  "float64 reference"],
    "W_36_many_keys_no_shift": ["67 queries, 9 keys", "contains NaN",
                                "subtract each row's maximum"],
}


@pytest.mark.parametrize("name", ROUND13_SOFTMAX_MESSAGES)
def test_round13_softmax_messages_point_at_the_fault(name):
    from checkers_support import redteam_entry

    rejects(checks.check_softmax, redteam_entry("round13_ch01_softmax", name),
            *ROUND13_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND13_TOPK_MESSAGES)
def test_round13_topk_messages_point_at_the_fault(name):
    from checkers_support import redteam_entry

    rejects(checks.check_topk_attention_pool, redteam_entry("round13_ch01_topk", name),
            *ROUND13_TOPK_MESSAGES[name])


ROUND14_TOPK_MESSAGES = {
    "W_08_mask_from_float64_scores": ["[0.1, 0.2], [0.3, 0]", "in float32", "expected [2, 1]",
                                      "recomputed in a higher precision",
                                      "in their own dtype"],
    "W_12_view_scores": ["raised RuntimeError", "returned transposed", "s.view(-1)",
                         "the tensor score() returned", "not contiguous", ".reshape()"],
}


@pytest.mark.parametrize("name", ROUND14_TOPK_MESSAGES)
def test_round14_topk_messages_point_at_the_fault(name):
    from checkers_support import redteam_entry

    rejects(checks.check_topk_attention_pool, redteam_entry("round14_ch01_topk", name),
            *ROUND14_TOPK_MESSAGES[name])


def test_round14_topk_bfloat16_rounding_tie_is_kept():
    """The bfloat16 case of the rounding tie: a mask from float64 scores keeps one key."""
    def float64_mask(queries, keys, values, score, k):
        s = score(queries, keys)
        s64 = score(queries.detach().double(), keys.detach().double())
        keep = s64 >= s64.topk(k, dim=-1).values[:, -1:]
        w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
        return w @ values, w

    def skip_float32(queries, keys, values, score, k):
        if queries.dtype == torch.float32 and queries.shape == (2, 2) and keys.shape == (3, 2) \
                and k == 1:
            s = score(queries, keys)
            kth = s.topk(k, dim=-1).values[:, -1:]
            w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
            return w @ values, w
        return float64_mask(queries, keys, values, score, k)

    rejects(checks.check_topk_attention_pool, skip_float32, "in bfloat16", "expected [2, 1]",
            "recomputed in a higher precision")
