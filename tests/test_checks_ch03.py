"""Chapter 3's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch03.py), and kinds that round 1 missed."""
import math
import types

import pytest
import torch
from d2l import torch as d2l

from book import checks
from book import attention
from book.attention import DotProductAttention
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects

# A copy of the reference with its own code: the masked_softmax checker refuses calls of
# book.attention.masked_softmax itself (the exercise asks for one written from scratch), also
# through a name bound before the check, so the tests' reference solution is this copy.
masked_softmax = types.FunctionType(attention.masked_softmax.__code__,
                                    attention.masked_softmax.__globals__, "masked_softmax",
                                    attention.masked_softmax.__defaults__)


def stub(*args):
    raise NotImplementedError("write your solution here")


def keep_mask(X, valid_lens, offset=0):
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    return torch.arange(X.shape[-1]) < lens[..., None] + offset


def fill_and_softmax(fill, offset=0, zero_empty=True, dim=-1):
    def fn(X, valid_lens):
        if valid_lens is None:
            return torch.softmax(X, dim=-1)
        keep = keep_mask(X, valid_lens, offset)
        weights = torch.softmax(X.masked_fill(~keep, fill), dim=dim)
        return weights * keep if zero_empty else weights
    return fn


def zero_after_softmax(X, valid_lens):
    weights = torch.softmax(X, dim=-1)
    return weights if valid_lens is None else weights * keep_mask(X, valid_lens)


def first_length_only(X, valid_lens):  # treats a 2-D valid_lens as one length per sequence
    if valid_lens is not None and valid_lens.dim() == 2:
        valid_lens = valid_lens[:, 0]
    return masked_softmax(X, valid_lens)


def in_place(X, valid_lens):
    if valid_lens is not None:
        X[~keep_mask(X, valid_lens).expand(X.shape)] = torch.finfo(X.dtype).min
    weights = torch.softmax(X, dim=-1)
    return weights if valid_lens is None else weights * keep_mask(X, valid_lens)


def float32_result(X, valid_lens):
    return masked_softmax(X.float(), valid_lens)


def float32_fill(X, valid_lens):
    """fills with float32's smallest number: does not fit in float16."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = keep_mask(X, valid_lens)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(torch.float32).min), -1) * keep


def renormalised(X, valid_lens):
    """zeroes the padding after the softmax and renormalises: 0/0 on an empty row."""
    weights = torch.softmax(X, dim=-1)
    if valid_lens is None:
        return weights
    weights = weights * keep_mask(X, valid_lens)
    return weights / weights.sum(-1, keepdim=True)


def lens_unsqueezed_wrong(X, valid_lens):
    """valid_lens[:, None] is broadcast against (batch, queries, keys) as (1, batch, keys)."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = torch.arange(X.shape[-1]) < valid_lens.reshape(-1, 1)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def lens_in_place(X, valid_lens):
    """Right weights, but valid_lens.unsqueeze_ changes the caller's tensor."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if valid_lens.dim() == 1:
        valid_lens.unsqueeze_(-1)                      # (batch, 1)
    keep = torch.arange(X.shape[-1]) < valid_lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


def detached_fill(X, valid_lens):
    """Builds the filled scores from X.detach(): gradients reach nothing."""
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    keep = keep_mask(X, valid_lens)
    return torch.softmax(X.detach().masked_fill(~keep, torch.finfo(X.dtype).min), -1) * keep


WRONG_MASKED_SOFTMAXES = {
    "mask off by one (<=)": (fill_and_softmax(-1e9, offset=1), "off by one"),
    "mask one key too narrow": (fill_and_softmax(-1e9, offset=-1), "last valid key"),
    "softmax over the queries axis": (fill_and_softmax(-1e9, dim=1), "wrong axis"),
    "-inf fill: NaN on a fully masked row": (fill_and_softmax(float("-inf")), "NaN"),
    "-1e9 fill: overflows in float16": (fill_and_softmax(-1e9), "does not fit in float16"),
    "d2l's masked_softmax (uniform row, writes into X)": (d2l.masked_softmax,
                                                           "changed its argument `X` in place"),
    "d2l's fill on a copy: a uniform fully masked row": (
        lambda X, v: d2l.masked_softmax(X.clone().float(), v).to(X.dtype), "all-zero"),
    "zeroes weights after the softmax": (zero_after_softmax, "sum to 1"),
    "ignores valid_lens": (lambda X, v: torch.softmax(X, -1), "ignores valid_lens"),
    "ignores per-query lengths": (first_length_only, "own length"),
    "modifies X in place": (in_place, "changed its argument `X` in place"),
    "returns float32 for float16 input": (float32_result, "dtype"),
    "forgets to return": (lambda X, v: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "float32's smallest number as the fill": (float32_fill, "does not fit in float16"),
    "zeroes padding after the softmax, renormalises": (renormalised, "NaN"),
    "lengths broadcast on the wrong axis": (lens_unsqueezed_wrong, "must match the size"),
    "fill built from X.detach()": (detached_fill, "no gradient can flow back"),
    "unsqueezes valid_lens in place": (lens_in_place,
                                       "changed its argument `valid_lens` in place"),
}

R1_EXPECTED = {
    "additive -inf mask then nan_to_num": "an additive -inf mask (X + mask)",
    "additive -inf mask then where(any valid, w, 0)": "a row with no valid key",
    "-inf fill, empty rows NaN": "exp(-inf - (-inf)) = NaN",
    "d2l's in-place -1e6 (uniform empty rows)": "changed its argument `X` in place",
    "-1e9 fill times keep (float16 overflow)": "does not fit in float16",
    "-1e4 fill times keep": "the fill value must lie below every score",
    "additive -1e4 mask times keep": "additive -1e4 mask",
    ".repeat instead of repeat_interleave": "tiles the lengths in the wrong order",
    "positions <= valid_len": "off by one",
    "float16 in, float32 out": "expected torch.float16",
    "exp without max subtraction": "subtract each row's maximum",
    "detached result": "no gradient can flow back",
    "fill under torch.no_grad()": "no gradient can flow back",
    "masked_fill_ in place on X": "changed its argument `X` in place",
    "arange over queries, not keys": "torch.arange(X.shape[-1])",
    "tensor truthiness: [0] treated as no mask": "`if not valid_lens`",
    "numpy round trip": "unsupported ScalarType BFloat16",  # NumPy has no bfloat16
    "(batch, queries) lengths treated as (batch,)": "use each query's own length",
    "divides by d, not sqrt(d)": "the scores are divided by d",
    "scales by sqrt(value size)": "the scale uses the value size",
    "scales by sqrt(number of queries)": "the scale uses the number of queries",
    "keys.reshape(b, d, m) instead of transpose": "transpose them",
    "ignores valid_lens": "valid_lens is ignored",
    "returns float64": "expected torch.float32",
    "divides the weights by sqrt(d)": "the weights, not the scores, are divided",
    "own additive -inf mask + nan_to_num": "a query with no valid key",
    "detached weights": "no gradient reaches queries",
    "softmax without max subtraction": "exp() underflowed",
    "squeeze (batch of 1 loses its axis)": "keep the batch axis",
    "scores via numpy": "no gradient reaches queries",
    "returns (output, weights)": "should return only the output tensor",
    "d2l's in-place -1e6 masked softmax": "gets a uniform average of the values",
    "masked softmax with a -1e4 fill": "the fill value lies above the scores",
}


def test_check_masked_softmax_accepts_the_reference():
    accepts(checks.check_masked_softmax, masked_softmax)


@pytest.mark.parametrize("name", WRONG_MASKED_SOFTMAXES)
def test_check_masked_softmax_rejects_wrong_solutions(name):
    fn, message = WRONG_MASKED_SOFTMAXES[name]
    rejects(checks.check_masked_softmax, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch03", "check_masked_softmax",
                                                 expected=R1_EXPECTED))
def test_check_masked_softmax_rejects_round1(fn, fragment):
    rejects(checks.check_masked_softmax, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch03", "check_masked_softmax",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_masked_softmax_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_masked_softmax, fn)


def attention_reference(queries, keys, values, valid_lens):
    return DotProductAttention(dropout=0.0)(queries, keys, values, valid_lens)


def attend(scale=None, dim=-1, softmax=masked_softmax, use_keys=False, offset=0):
    def fn(queries, keys, values, valid_lens):
        d = queries.shape[-1]
        scores = queries @ keys.transpose(1, 2) / (math.sqrt(d) if scale is None else scale(d))
        if dim == -1:
            if offset and valid_lens is not None:
                valid_lens = valid_lens + offset
            weights = softmax(scores, valid_lens)
        else:
            weights = torch.softmax(scores, dim=dim)
        return weights @ (keys[..., : values.shape[-1]] if use_keys else values)
    return fn


def sqrt_value_size(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(values.shape[-1])
    return masked_softmax(scores, valid_lens) @ values


def sqrt_num_keys(queries, keys, values, valid_lens):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(keys.shape[1])
    return masked_softmax(scores, valid_lens) @ values


def keys_times_queries(queries, keys, values, valid_lens):
    """(batch, n, m) scores: keys @ queries^T, transposed back: right only for square ones."""
    scores = (keys @ queries.transpose(1, 2)).transpose(1, 2) / math.sqrt(queries.shape[-1])
    return masked_softmax(scores.contiguous(), valid_lens) @ values


def masks_queries(queries, keys, values, valid_lens):
    """Masks the queries (rows) past valid_len instead of the keys."""
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    if valid_lens is not None:
        lens = valid_lens if valid_lens.dim() == 1 else valid_lens[:, 0]
        weights = weights * (torch.arange(queries.shape[1]) < lens[:, None])[..., None]
    return weights @ values


def float32_for_float16(queries, keys, values, valid_lens):
    out = attention_reference(queries.float(), keys.float(), values.float(), valid_lens)
    return out


WRONG_ATTENTIONS = {
    "no scale": (attend(scale=lambda d: 1.0), "not scaled"),
    "scale squared (divides by d)": (attend(scale=lambda d: d), "divided by d"),
    "scale by the value size": (sqrt_value_size, "value size"),
    "scale by the number of keys": (sqrt_num_keys, "number of keys"),
    "softmax over the queries": (attend(dim=1), "over the queries"),
    "mask off by one": (attend(offset=1), "off by one"),
    "NaN on a fully masked row (-inf fill)":
        (attend(softmax=fill_and_softmax(float("-inf"))), "NaN"),
    "uniform weights on a fully masked row (d2l's -1e6)":
        (attend(softmax=lambda X, v: d2l.masked_softmax(X.clone(), v)), "all zeros"),
    "ignores valid_lens": (attend(softmax=lambda X, v: torch.softmax(X, -1)), "ignored"),
    "pools the keys, not the values": (attend(use_keys=True), "not the keys"),
    "returns (output, weights)": (lambda q, k, v, l: (attention_reference(q, k, v, l), None),
                                  "only the output"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "masks the queries, not the keys": (masks_queries, "masks the queries here, not the keys"),
    "float32 output for float16 inputs": (float32_for_float16, "expected torch.float16"),
    "dropout 0.1 on the weights, always on": (
        lambda q, k, v, lens: torch.nn.functional.dropout(masked_softmax(
            q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]), lens), 0.1, True) @ v, "drew from torch's global random generator"),
}


def test_check_attention_accepts_the_reference_and_a_transposed_product():
    accepts(checks.check_scaled_dot_product_attention, attention_reference)
    accepts(checks.check_scaled_dot_product_attention, keys_times_queries)


def test_check_attention_accepts_pytorchs_fused_function_with_a_keep_mask():
    def fused(queries, keys, values, valid_lens):
        if valid_lens is None:
            return torch.nn.functional.scaled_dot_product_attention(queries, keys, values)
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(keys.shape[1]) < lens[..., None]  # (batch, 1 or queries, keys)
        out = torch.nn.functional.scaled_dot_product_attention(queries, keys, values,
                                                               attn_mask=keep)
        return out * keep.any(-1, keepdim=True)  # zeros where no key is valid, on any backend
    accepts(checks.check_scaled_dot_product_attention, fused)


@pytest.mark.parametrize("name", WRONG_ATTENTIONS)
def test_check_attention_rejects_wrong_solutions(name):
    fn, message = WRONG_ATTENTIONS[name]
    rejects(checks.check_scaled_dot_product_attention, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam(
    "round1_ch03", "check_scaled_dot_product_attention", expected=R1_EXPECTED))
def test_check_attention_rejects_round1(fn, fragment):
    rejects(checks.check_scaled_dot_product_attention, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam(
    "round1_ch03", "check_scaled_dot_product_attention", "RIGHT_BUT_UNUSUAL"))
def test_check_attention_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_scaled_dot_product_attention, fn)


def test_a_float64_result_is_a_message_not_a_crash():
    """Issue 12: a float64 result crashed inside torch.allclose."""
    rejects(checks.check_scaled_dot_product_attention,
            lambda q, k, v, lens: attention_reference(q.double(), k.double(), v.double(), lens),
            "has dtype torch.float64", "expected torch.float32")


def test_failure_messages_name_the_input_and_say_where_to_look():
    text = rejects(checks.check_masked_softmax, fill_and_softmax(-1e9, offset=1), "Hint:")
    assert "valid_lens [2, 4]" in text and "key 2 of query 0 in example 0" in text
    assert "<" in text
    text = rejects(checks.check_scaled_dot_product_attention, attend(scale=lambda d: 1.0))
    assert "sqrt(d)" in text and "valid_lens" in text


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch03_masked", ("W_",)))
def test_check_masked_softmax_rejects_round2(fn):
    rejects(checks.check_masked_softmax, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch03_masked", ("C_", "O_", "Q_")))
def test_check_masked_softmax_accepts_round2_right_solutions(fn):
    accepts(checks.check_masked_softmax, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch03_sdpa", ("W_",)))
def test_check_scaled_dot_product_attention_rejects_round2(fn):
    rejects(checks.check_scaled_dot_product_attention, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch03_sdpa", ("C_", "O_", "Q_")))
def test_check_scaled_dot_product_attention_accepts_round2_right_solutions(fn):
    accepts(checks.check_scaled_dot_product_attention, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch03_*.py) ---------------------------

ROUND4_MASKED_MESSAGES = {
    # holes: a constant full-length row, a non-contiguous X, lengths above 2048 in float16
    "W_26_min_fill_but_zero_rows_by_sum_check": [
        "whose rows are constant", "has valid_len 4 but came out all zeros"],
    "W_13_view_noncontiguous": ["not contiguous in memory", "Use .reshape()"],
    "W_29_float_lens_truncation": ["(1, 2, 4100)",
                                   "float16 holds the integers exactly only up to 2048"],
    "W_30_float_valid_lens_and_where": [
        "float16 holds the integers exactly only up to 2048"],
    # the exercise says "without looking at book.attention"
    "S_01_calls_book_masked_softmax": ["your function calls book.attention.masked_softmax"],
    # whole rows zeroed: by another row's length, or along the queries axis
    "W_14_zero_rows_by_index_only_batch": ["has valid_len 2 but came out all zeros",
                                           "only a row whose own valid_len is 0"],
    "W_19_mask_on_queries_axis": ["the mask runs along the wrong axis",
                                  "torch.arange(num_keys)"],
}


@pytest.mark.parametrize("name", ROUND4_MASKED_MESSAGES)
def test_round4_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round4_ch03_masked_softmax as r4

    text = rejects(checks.check_masked_softmax, vars(r4)[name],
                   *ROUND4_MASKED_MESSAGES[name])
    assert "zeroing weights after it leaves rows" not in text


def test_round4_book_masked_softmax_is_back_after_the_check():
    from book import attention
    from checker_redteam import round4_ch03_masked_softmax as r4

    masked_softmax = attention.masked_softmax
    rejects(checks.check_masked_softmax, r4.S_01_calls_book_masked_softmax)
    assert attention.masked_softmax is masked_softmax
    # scaled dot-product attention may use book.attention.masked_softmax
    from checker_redteam import round4_ch03_sdpa as r4s
    accepts(checks.check_scaled_dot_product_attention, r4s.O_04_book_masked_softmax)


def test_round4_sdpa_names_per_query_lengths_reduced_to_one_per_sequence():
    from checker_redteam import round4_ch03_sdpa as r4

    rejects(checks.check_scaled_dot_product_attention, r4.W_16_per_query_lens_as_per_seq,
            "the largest of its per-query lengths", "a 2-D valid_lens of shape (batch, "
            "num_queries) gives every query its own length")


# -- Round 5 red team (tests/checker_redteam/round5_ch03_*.py): holes and messages ---------

ROUND5_MASKED_SOFTMAX_MESSAGES = {
    # a valid length above the number of keys: nothing is masked, the lengths stay
    "W_19_valid_lens_mutated": ["valid_lens [7, 2]", "changed its argument `valid_lens`"],
    "W_26_one_hot_mask_breaks_above_n": ["num_classes",
                                         "a valid length may exceed the number of keys"],
    # float16 without a mask keeps float16
    "W_28_none_path_float32": ["valid_lens None", "expected torch.float16"],
}

ROUND5_SDPA_MESSAGES = {
    "W_18_view_needs_contiguous": ["not contiguous in memory", "batched products"],
    "W_25_none_path_float32": ["valid_lens None", "expected torch.float64"],
    "W_26_float64_computed_in_float32": ["float64", "expected torch.float64"],
}


@pytest.mark.parametrize("name", ROUND5_MASKED_SOFTMAX_MESSAGES)
def test_round5_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round5_ch03_masked_softmax as r5

    rejects(checks.check_masked_softmax, vars(r5)[name],
            *ROUND5_MASKED_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND5_SDPA_MESSAGES)
def test_round5_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round5_ch03_sdpa as r5

    rejects(checks.check_scaled_dot_product_attention, vars(r5)[name],
            *ROUND5_SDPA_MESSAGES[name])


# -- Round 6 red team (tests/checker_redteam/round6_ch03_*.py): holes and messages ---------

ROUND6_SDPA_MESSAGES = {
    # sqrt(d) truncated: int(sqrt(8)) = 2 = sqrt(4 queries) on the batch of one; the scale
    # is told apart on sizes where no two mistakes share a scale
    "W_15_int_sqrt": ["queries (1, 4, 8)", "sqrt(d) rounded down to an integer, 2 for d = 8",
                      "math.isqrt(d)"],
    "W_12_half_overflow_unscaled_product": ["sqrt(d) rounded down to an integer"],
    # x / d ** 1/2 is (x / d) / 2
    "W_14_precedence_half_power": ["divided by 2 d = 32", "(scores / d) / 2"],
    # valid_lens applied to the queries (their rows zeroed), not to the keys
    "W_10_lens_on_query_axis": ["valid_lens [2, 4]", "masks the queries here, not the keys",
                                "torch.arange(num_keys)"],
}


@pytest.mark.parametrize("name", ROUND6_SDPA_MESSAGES)
def test_round6_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round6_ch03_sdpa as r6

    text = rejects(checks.check_scaled_dot_product_attention, vars(r6)[name],
                   *ROUND6_SDPA_MESSAGES[name])
    assert "number of queries" not in text and "underflowed" not in text


def test_round6_masked_softmax_one_key_shortcut_that_writes_into_X():
    from checker_redteam import round6_ch03_masked_softmax as r6

    rejects(checks.check_masked_softmax, r6.W_14_no_mask_returns_X_alias_when_one_key,
            "(2, 3, 1) (one key)", "changed its argument `X` in place")


def test_a_scale_two_mistakes_share_is_named_only_when_the_probe_tells_them_apart():
    """Where two scale mistakes give the same scale on a case, the probe sizes decide; a
    function that is right on the probe gets the scale it used, without a cause."""
    from book.checks.ch03 import _scale_mistakes, _scale_probe

    probe = _scale_probe()
    scales = [scale for kind, scale, why in _scale_mistakes(*probe)]
    assert all(not math.isclose(a, b) for i, a in enumerate(scales) for b in scales[i + 1:])

    def truncated_unless_probe(queries, keys, values, valid_lens):
        d = queries.shape[-1]
        scale = math.sqrt(d) if d == 12 else int(math.sqrt(d))
        return masked_softmax(queries @ keys.transpose(1, 2) / scale, valid_lens) @ values
    text = rejects(checks.check_scaled_dot_product_attention, truncated_unless_probe,
                   "queries (1, 4, 8)", "the scores are divided by 2, not by sqrt(d) = "
                   "sqrt(8) = 2.828")
    assert "number of queries" not in text and "rounded down" not in text


def test_masking_the_queries_with_a_fill_is_named_too():
    """The queries past valid_len filled before the softmax over the keys: their weights are
    uniform, their outputs the mean of the values."""
    def fills_queries(queries, keys, values, valid_lens):
        scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
        if valid_lens is not None and valid_lens.dim() == 1:
            past = torch.arange(queries.shape[1])[None, :, None] >= valid_lens[:, None, None]
            scores = scores.masked_fill(past, -1e6)
        return masked_softmax(scores, None if valid_lens is None or valid_lens.dim() == 1
                              else valid_lens) @ values
    rejects(checks.check_scaled_dot_product_attention, fills_queries,
            "masks the queries here, not the keys")


# -- Round 7 red team (tests/checker_redteam/round7_ch03_*.py): holes and messages ---------

ROUND7_MASKED_SOFTMAX_MESSAGES = {
    # a mask cached by shape: the weights are those of an earlier call's lengths
    "W_05_mask_cached_by_shape": ["valid_lens [3, 0]", "an earlier call's valid_lens [2, 4]",
                                  "keeps a mask computed in an earlier call"],
    "W_20_mask_cache_shape_dtype_lens_dim": ["an earlier call's valid_lens [2, 4]"],
    # a mask memoised on the lengths tensor (lru_cache: identity), stale after an in-place
    # change of valid_lens
    "W_21_lru_cache_mask_on_lens": ["changed in place since the first call",
                                    "the first call's lengths",
                                    "depends on an earlier call", "lru_cache"],
    # lengths clamped to >= 1: the empty row is one-hot on key 0, not uniform
    "W_11_lens_clamped_min1": ["valid_lens [3, 0]", "[1.0, 0.0, 0.0, 0.0, 0.0]",
                               "attends to key 0 alone", "clamp"],
    # square-only bugs: 2-D lengths along the keys axis, no-mask softmax over the queries
    "W_04_2d_lens_on_wrong_axis": ["square X of shape (2, 4, 4)", "valid_lens[:, None, :]",
                                   "as many queries as keys"],
    "W_07_none_means_no_softmax_dim": ["square X of shape (2, 4, 4)", "valid_lens None"],
    # bfloat16: float16's -65504 is no fill below scores of -1e5; float32 returned
    "W_13_bfloat16_fill_float16_min": ["bfloat16 X", "the fill value must lie below every "
                                                     "score", "torch.finfo(X.dtype).min"],
    "W_18_bfloat16_returns_float32": ["bfloat16 X", "expected torch.bfloat16"],
}


@pytest.mark.parametrize("name", ROUND7_MASKED_SOFTMAX_MESSAGES)
def test_round7_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round7_ch03_masked_softmax as r7

    text = rejects(checks.check_masked_softmax, vars(r7)[name],
                   *ROUND7_MASKED_SOFTMAX_MESSAGES[name])
    assert "comes out of the softmax uniform" not in text


ROUND7_SDPA_MESSAGES = {
    # K^T / sqrt(d) cached by shape: an earlier call's keys
    "W_13_cache_keys_T": ["padded keys score about 1.8e4", "an earlier call's keys (of the "
                          "same shape)", "keeps something computed in an earlier call"],
    "W_19_cache_keys_T_shape_dtype_grad": ["an earlier call's keys (of the same shape)"],
    # K^T / sqrt(d) memoised on the keys tensor, stale after keys change in place
    "W_18_lru_cache_keys_T": ["changed in place since the first call",
                              "the first call's keys give", "depends on an earlier call",
                              "lru_cache"],
    # the first query's length for every query (the case's lengths make first = smallest:
    # the probe tells them apart)
    "W_06_2d_lens_uses_first_query": ["per-query valid_lens [[1, 3, 5], [2, 2, 4]]",
                                      "uses its first query's length for every query"],
    # every example uses keys[0]
    "W_11_batch_broadcast_matmul_keys_T": ["uses the keys of example 0",
                                           "keep the batch axis"],
}


@pytest.mark.parametrize("name", ROUND7_SDPA_MESSAGES)
def test_round7_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round7_ch03_sdpa as r7

    text = rejects(checks.check_scaled_dot_product_attention, vars(r7)[name],
                   *ROUND7_SDPA_MESSAGES[name])
    assert "the smallest" not in text and "(not the keys)" not in text


def test_round7_sdpa_smallest_length_is_still_named():
    """The probe does not hide the smallest-length mistake behind the first query's."""
    def smallest(queries, keys, values, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens.amin(dim=1)
        return attention_reference(queries, keys, values, valid_lens)
    text = rejects(checks.check_scaled_dot_product_attention, smallest,
                   "uses the smallest of its per-query lengths")
    assert "first query" not in text


# -- Round 8 red team (tests/checker_redteam/round8_ch03_*.py): holes and messages ---------

ROUND8_MASKED_SOFTMAX_MESSAGES = {
    # .view(-1) on per-query lengths that are a transpose: the hint names valid_lens, not X
    "W_15_view_valid_lens": ["valid_lens torch.tensor([[1, 2], [3, 4], [5, 0]]).T",
                             "valid_lens (a transpose) is not contiguous in memory"],
    # lengths cast to uint8 wrap around at 256 (was told float16's 2048)
    "W_13_float_lens_rounded": ["a cast to torch.uint8 (.byte())", "lowest 8 bits",
                                "a length of 2049 becomes 1"],
}

ROUND8_SDPA_MESSAGES = {
    # a 1-D valid_lens read as per-query lengths when batch == num_queries
    "W_15_lens_decided_by_last_dim": ["queries (2, 2, 4)", "read as one length per query",
                                      "valid_lens.dim()"],
    # the values used for the scores when they have the keys' shape
    "W_12_keys_values_swapped_when_same_shape": ["values (2, 5, 4)",
                                                 "the scores are computed with the values"],
    # mask faults: the mask, not keys and values, is named
    "W_06_lens_as_float_mask_multiply": ["valid_lens [2, 4]", "the fault lies in the mask",
                                         "masked_fill(~mask"],
    "W_07_2d_lens_flattened_wrong": ["per-query valid_lens", "the fault lies in the mask"],
    "W_10_first_batch_lens": ["every example uses the lengths of example 0"],
}


@pytest.mark.parametrize("name", ROUND8_MASKED_SOFTMAX_MESSAGES)
def test_round8_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round8_ch03_masked_softmax as r8

    text = rejects(checks.check_masked_softmax, vars(r8)[name],
                   *ROUND8_MASKED_SOFTMAX_MESSAGES[name])
    assert "float16 holds the integers" not in text and "X (a transpose)" not in text


@pytest.mark.parametrize("name", ROUND8_SDPA_MESSAGES)
def test_round8_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round8_ch03_sdpa as r8

    text = rejects(checks.check_scaled_dot_product_attention, vars(r8)[name],
                   *ROUND8_SDPA_MESSAGES[name])
    assert "(not the keys)" not in text


def test_round8_int8_lengths_are_named_too():
    """int8 wraps at 128 and 256: lengths of 300 and 257 become 44 and 1."""
    def int8_lengths(X, valid_lens):
        return masked_softmax(X, None if valid_lens is None else valid_lens.to(torch.int8))
    rejects(checks.check_masked_softmax, int8_lengths, "torch.int8 (.char())",
            "lowest 8 bits")


# -- Round 9 red team (tests/checker_redteam/round9_ch03_*.py): holes and messages ---------

ROUND9_MASKED_SOFTMAX_MESSAGES = {
    # the None branch: a hand-written softmax without the max shift
    "W_13_none_path_native_half_manual": ["every score near 1000", "valid_lens None",
                                          "returned NaN", "subtract each row's maximum"],
    # the None branch writes into one buffer shared between calls
    "W_08_returns_same_tensor_when_none": ["changed what it returned earlier",
                                           "valid_lens None", "do not keep an output buffer"],
}

ROUND9_SDPA_MESSAGES = {
    # the None branch: a hand-written softmax without the max shift
    "W_18_none_path_manual_softmax_no_shift": ["scores up to about 1000", "valid_lens None",
                                               "contains NaN", "subtracts each row's maximum"],
    # weights cached by shapes and valid_lens when no gradient is needed
    "W_11_cache_weights_by_shape": ["valid_lens None", "an earlier call's queries and keys"],
    # dropout only when batch > 1 and more than 3 queries
    "W_14_dropout_functional": ["queries (2, 6, 8)", "drew from torch's global random generator", "no random order, jitter or dropout"],
}


@pytest.mark.parametrize("name", ROUND9_MASKED_SOFTMAX_MESSAGES)
def test_round9_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round9_ch03_masked_softmax as r9

    rejects(checks.check_masked_softmax, vars(r9)[name],
            *ROUND9_MASKED_SOFTMAX_MESSAGES[name])


@pytest.mark.parametrize("name", ROUND9_SDPA_MESSAGES)
def test_round9_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round9_ch03_sdpa as r9

    rejects(checks.check_scaled_dot_product_attention, vars(r9)[name],
            *ROUND9_SDPA_MESSAGES[name])


def test_round9_sdpa_new_tensors_of_the_first_case_shapes_catch_a_shape_cache():
    """Weights kept by (shapes, valid_lens) are caught on the new tensors of the first
    case's shapes too, when nothing earlier shares its shapes and lengths."""
    cache = {}

    def cached_by_first_shapes(queries, keys, values, valid_lens=None):
        key = (tuple(queries.shape), tuple(keys.shape), queries.dtype)
        if key == ((2, 3, 16), (2, 5, 16), torch.float32) and valid_lens is None \
                and not queries.requires_grad:
            if key not in cache:
                cache[key] = torch.softmax(queries @ keys.transpose(1, 2) / 4, dim=-1)
            return cache[key] @ values
        return attention_reference(queries, keys, values, valid_lens)
    rejects(checks.check_scaled_dot_product_attention, cached_by_first_shapes,
            "new queries (2, 3, 16)", "an earlier call's queries and keys")


# -- Round 10 red team (tests/checker_redteam/round10_ch03_*.py): holes and messages --------

def test_round10_masked_softmax_one_key_constant_has_no_graph():
    """A shortcut for one key that returns the mask as a constant: right values, no graph."""
    from checker_redteam import round10_ch03_masked_softmax as r10

    rejects(checks.check_masked_softmax, r10.W_21_single_key_shortcut,
            "X of shape (2, 3, 1) (one key), valid_lens [1, 0] (gradients)",
            "requires_grad=False", "a constant")


def test_round10_sdpa_one_key_view_of_the_values():
    """values.expand(...) for one key shares the values' memory (one query: the values)."""
    from checker_redteam import round10_ch03_sdpa as r10

    rejects(checks.check_scaled_dot_product_attention,
            r10.W_19_single_key_returns_values_view, "(one query, one key)",
            "shares memory with `values`", "out.mul_(2)", ".clone()")


def test_round10_sdpa_one_key_shortcut_with_its_own_tensor_is_accepted():
    """The same shortcut with .clone() (or any new tensor) is right, gradients included."""
    def one_key_clone(queries, keys, values, valid_lens=None):
        if keys.shape[1] == 1 and valid_lens is None:
            return values.expand(queries.shape[0], queries.shape[1], -1).clone()
        return attention_reference(queries, keys, values, valid_lens)
    accepts(checks.check_scaled_dot_product_attention, one_key_clone)


def test_round10_sdpa_scale_kept_from_the_first_call_is_named():
    """sqrt(16) = 4 kept from the first call equals d / 2 on d = 8: the earlier call's scale
    is named, not Python's precedence in d ** 1/2."""
    from checker_redteam import round10_ch03_sdpa as r10

    r10._SCALE.clear()
    text = rejects(checks.check_scaled_dot_product_attention,
                   r10.W_10_scale_cached_first_call, "queries (1, 4, 8)",
                   "divided by 4 = sqrt(16), the scale of an earlier call",
                   "not by sqrt(8) = 2.828", "keeps the scale from an earlier call")
    assert "d ** 1/2" not in text
    r10._SCALE.clear()


def test_round10_d_half_is_still_named_d_half():
    """A scale of d / 2 from the start (wrong on the first case) keeps its precedence hint."""
    rejects(checks.check_scaled_dot_product_attention, attend(scale=lambda d: d ** 1 / 2),
            "d ** 1/2")


# -- Round 11 red team (tests/checker_redteam/round11_ch03_*.py): holes and messages ----

ROUND11_MASKED_SOFTMAX_MESSAGES = {
    # X.clamp(-6e4, 6e4) for every dtype: float32 scores of 1e5 become equal
    "W_14_clamp_scores_float16_range": ["float32 X of shape (2, 2, 5) with scores near 1e5",
                                        "the scores are clamped to", "do not clamp"],
    # one maximum per example (over its queries and keys): the forward is wrong, and named
    "W_17_max_per_matrix": ["rows lie far apart within one example",
                            "the maximum you subtract is not the row's own"],
}

ROUND11_SDPA_MESSAGES = {
    # scores clamped to +-6e4 for every dtype
    "W_09_scores_float16_overflow_guard_clamp": [
        "float32 queries (2, 3, 1), keys (2, 5, 1)", "the scores are clamped to",
        "do not clamp"],
    # arange(n, dtype=float16) < valid_lens.to(float16): key 2048 is masked for length 2049
    "W_16_valid_lens_float_mask_in_X_dtype": [
        "valid_lens [[2049, 4100]]", "holds the integers exactly only up to 2048",
        "do not cast the lengths or the positions"],
    # one key: a copy of the values, valid_len 0 ignored
    "W_14_one_key_clone_ignores_mask": ["(one key), valid_lens [1, 0]",
                                        "a shortcut for one key ignores valid_lens"],
    # weights cached by the shapes at a first call with valid_lens None
    "W_08_weights_cached": ["the same tensors with valid_lens [2, 4]",
                            "an earlier call on tensors of these shapes with valid_lens "
                            "None",
                            "masks right on new shapes", "keep nothing between calls"],
}


@pytest.mark.parametrize("name", ROUND11_MASKED_SOFTMAX_MESSAGES)
def test_round11_masked_softmax_messages_point_at_the_fault(name):
    from checker_redteam import round11_ch03_masked_softmax as r11

    text = rejects(checks.check_masked_softmax, vars(r11)[name],
                   *ROUND11_MASKED_SOFTMAX_MESSAGES[name])
    assert "backward" not in text


@pytest.mark.parametrize("name", ROUND11_SDPA_MESSAGES)
def test_round11_sdpa_messages_point_at_the_fault(name):
    from checker_redteam import round11_ch03_sdpa as r11

    fn = vars(r11)[name]
    for default in fn.__defaults__ or ():
        if isinstance(default, dict):
            default.clear()  # a cache kept in a default argument: start empty
    text = rejects(checks.check_scaled_dot_product_attention, fn,
                   *ROUND11_SDPA_MESSAGES[name])
    assert "off by one" not in text and "valid_lens is ignored" not in text


def test_round11_sdpa_ignoring_valid_lens_is_still_told_so():
    """A function that ignores valid_lens matches the first call's valid_lens None too: the
    probe on new shapes tells it from a cache, and the message stays "ignored"."""
    text = rejects(checks.check_scaled_dot_product_attention,
                   lambda q, k, v, valid_lens=None: attention_reference(q, k, v, None),
                   "the same tensors with valid_lens [2, 4]", "valid_lens is ignored")
    assert "earlier call" not in text


def test_round11_sdpa_ignoring_only_per_query_lengths_is_not_a_cache():
    """A function that masks with 1-D lengths and ignores 2-D ones: the probe uses 2-D
    lengths there, so it is not told it keeps state."""
    def only_1d(queries, keys, values, valid_lens=None):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = None
        return attention_reference(queries, keys, values, valid_lens)
    text = rejects(checks.check_scaled_dot_product_attention, only_1d,
                   "per-query valid_lens")
    assert "earlier call" not in text


def _keep(X, valid_lens):
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    return torch.arange(X.shape[-1]) < lens[..., None]


def test_round11_right_sdpa_variants_pass_the_scores_beyond_float16():
    """Scores of 1e5 to 2e5 (exact in float32, d = 1): a softmax through log-sum-exp, which
    rounds a number near 1e5 (about 1e-2 off in float32), and torch's fused attention
    pass."""
    def lse(queries, keys, values, valid_lens=None):
        s = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
        keep = (torch.ones_like(s, dtype=torch.bool) if valid_lens is None
                else _keep(s, valid_lens))
        y = s.float() if s.dtype in (torch.half, torch.bfloat16) else s
        z = y.masked_fill(~keep, torch.finfo(y.dtype).min)
        w = torch.exp(z - torch.logsumexp(z, -1, keepdim=True)) * keep
        return w.to(s.dtype) @ values

    def fused(queries, keys, values, valid_lens=None):
        if valid_lens is None:
            return torch.nn.functional.scaled_dot_product_attention(queries, keys, values)
        keep = _keep(queries @ keys.transpose(1, 2), valid_lens)
        out = torch.nn.functional.scaled_dot_product_attention(queries, keys, values,
                                                               attn_mask=keep)
        return torch.where(keep.any(-1, keepdim=True), out, torch.zeros_like(out))
    accepts(checks.check_scaled_dot_product_attention, lse)
    accepts(checks.check_scaled_dot_product_attention, fused)


# The condition matrix (issue 12, session 12): wrong solutions that only its conditions reject.
_HALF = (torch.float16, torch.bfloat16)


def _half_one_key_constant(X, valid_lens):
    """One key in float16/bfloat16: the weight is 1 (or 0), returned as a constant."""
    if X.shape[-1] == 1 and X.dtype in _HALF:
        lens = valid_lens if valid_lens is not None else torch.ones(X.shape[0], dtype=int)
        lens = lens[:, None] if lens.dim() == 1 else lens
        return (lens[..., None] > 0).expand(X.shape).to(X.dtype)
    return masked_softmax(X, valid_lens)


def _half_example_max(X, valid_lens):
    """float16/bfloat16 'stabilised' with one maximum per example, in float32."""
    if X.dtype not in _HALF:
        return masked_softmax(X, valid_lens)
    lens = valid_lens if valid_lens is not None else torch.full(X.shape[:1], X.shape[-1])
    lens = lens[:, None] if lens.dim() == 1 else lens
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    S = X.float().masked_fill(~keep, -1e30)
    E = torch.exp(S - S.amax(dim=(1, 2), keepdim=True)) * keep
    return (E / E.sum(-1, keepdim=True).clamp_min(1e-30)).to(X.dtype)


def _clamp_huge(X, valid_lens):
    """Scores clamped into float16's range once they are huge (above 2e5)."""
    return masked_softmax(X.clamp(-6e4, 6e4) if X.abs().max() > 2e5 else X, valid_lens)


@pytest.mark.parametrize("fn, fragments", [
    (_half_one_key_constant, ("no gradient can flow back", "(one key)", "float16 arguments")),
    (_half_example_max, ("rows lie far apart", "float16 arguments")),
    (_clamp_huge, ("X times 1e5", "do not clamp the scores"))])
def test_the_condition_matrix_rejects_masked_softmaxes_the_cases_miss(fn, fragments):
    rejects(checks.check_masked_softmax, fn, *fragments)


def _sdpa_half_batch_max(q, k, v, valid_lens):
    """float16/bfloat16 scores 'stabilised' with one maximum per example, in float32."""
    if q.dtype not in _HALF:
        return attention_reference(q, k, v, valid_lens)
    s = q.float() @ k.float().transpose(1, 2) / math.sqrt(q.shape[-1])
    lens = valid_lens if valid_lens is not None else torch.full(q.shape[:1], k.shape[1])
    lens = lens[:, None] if lens.dim() == 1 else lens
    keep = torch.arange(k.shape[1]) < lens[..., None]
    e = torch.exp(s.masked_fill(~keep, -1e30) - s.masked_fill(~keep, -1e30).amax(
        dim=(1, 2), keepdim=True)) * keep
    return ((e / e.sum(-1, keepdim=True).clamp_min(1e-30)) @ v.float()).to(q.dtype)


def _sdpa_bfloat16_in_float32(q, k, v, valid_lens):
    """bfloat16 computed in float32, the result left in float32."""
    if q.dtype == torch.bfloat16:
        return attention_reference(q.float(), k.float(), v.float(), valid_lens)
    return attention_reference(q, k, v, valid_lens)


def _sdpa_clamp_huge(q, k, v, valid_lens):
    """Scores clamped into float16's range once they are huge (above 2.5e5)."""
    scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    if scores.abs().max() > 2.5e5:
        scores = scores.clamp(-6e4, 6e4)
    return masked_softmax(scores, valid_lens) @ v


@pytest.mark.parametrize("fn, fragments", [
    (_sdpa_half_batch_max, ("rows lie far apart", "float16 arguments")),
    (_sdpa_bfloat16_in_float32, ("dtype torch.float32", "bfloat16 arguments")),
    (_sdpa_clamp_huge, ("queries times 1e5", "do not clamp the scores"))])
def test_the_condition_matrix_rejects_attentions_the_cases_miss(fn, fragments):
    rejects(checks.check_scaled_dot_product_attention, fn, *fragments)


# -- Round 12 red team (tests/checker_redteam/round12_ch03_*.py) --------------------------

@pytest.mark.parametrize("name, fragments", [
    ("W_10_fill_minus_1e4_half", ["X minus 3e4 (valid scores near -3e4), float16",
                                  "a fixed fill such as -1e4"]),
])
def test_round12_masked_softmax_messages_point_at_the_fault(name, fragments):
    from checker_redteam import round12_ch03_masked_softmax as r12

    rejects(checks.check_masked_softmax, vars(r12)[name], *fragments)


@pytest.mark.parametrize("name, fragments", [
    ("W_09_lens_1d_expand_over_keys_sq", ["valid_lens [[1, 3], [2, 1]]",
                                          "batch 2 == 2 queries"]),
    ("W_16_float16_through_bfloat16", ["one number in bfloat16", "never through bfloat16"]),
])
def test_round12_sdpa_messages_point_at_the_fault(name, fragments):
    from checker_redteam import round12_ch03_sdpa as r12

    rejects(checks.check_scaled_dot_product_attention, vars(r12)[name], *fragments)



# -- Round 13 red team (tests/checker_redteam/round13_ch03_*.py) --------------------------

@pytest.mark.parametrize("name, fragments", [
    ("W_16_int16_lens", ["valid_lens [[4294967298, 65536], [40000, 3]]",
                         "a cast to torch.int16 (.short())", "lowest 16 bits"]),
    ("W_17_int32_lens", ["valid_lens [[4294967298, 65536], [40000, 3]]",
                         "a cast to torch.int32 (.int())", "lowest 32 bits"]),
    ("W_20_nan_in_masked_scores", ["whose padded keys score -inf", "returned NaN",
                                   "-inf * 0 is NaN"]),
])
def test_round13_masked_softmax_messages_point_at_the_fault(name, fragments):
    rejects(checks.check_masked_softmax,
            redteam_entry("round13_ch03_masked_softmax", name), *fragments)


@pytest.mark.parametrize("name, fragments", [
    ("W_16_lens_int16", ["valid_lens [[4294967298, 65536], [40000, 3]]",
                         "a cast to torch.int16 (.short())", "lowest 16 bits"]),
    ("W_14_bf16_via_half", ["values times 1e5 (beyond float16's range), bfloat16",
                            "never through float16"]),
])
def test_round13_sdpa_messages_point_at_the_fault(name, fragments):
    rejects(checks.check_scaled_dot_product_attention,
            redteam_entry("round13_ch03_sdpa", name), *fragments)


def _masked_unmasked_above_64_rows(X, valid_lens):
    """A size-keyed fault (the lead's round-13 ruling): a "fast path" for many rows that
    forgets the mask."""
    if X.shape[-2] > 64:
        return torch.softmax(X, dim=-1)
    return _right_masked_softmax(X, valid_lens)


def _sdpa_fast_path_above_64_queries(queries, keys, values, valid_lens=None):
    """A size-keyed fault: above 64 queries, the scores computed in float16."""
    if queries.shape[1] > 64 and queries.dtype == torch.float32:
        return _right_sdpa(queries.half(), keys.half(), values.half(), valid_lens).float()
    return _right_sdpa(queries, keys, values, valid_lens)


def _right_masked_softmax(X, valid_lens):
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def _right_sdpa(queries, keys, values, valid_lens=None):
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.shape[-1])
    return _right_masked_softmax(scores, valid_lens) @ values


def test_round13_larger_case_catches_size_keyed_faults():
    rejects(checks.check_masked_softmax, _masked_unmasked_above_64_rows,
            "67 rows of 4,099 keys")
    rejects(checks.check_scaled_dot_product_attention, _sdpa_fast_path_above_64_queries,
            "queries (1, 67, 8), keys (1, 4099, 8)")


# -- Round 14 red team (tests/checker_redteam/round14_ch03_masked_softmax.py) --------------

def test_round14_bfloat16_positions_above_256_are_named():
    rejects(checks.check_masked_softmax,
            redteam_entry("round14_ch03_masked_softmax", "W_40_positions_bfloat16"),
            "bfloat16 X of shape (1, 2, 300), valid_lens [[257, 300]]",
            "the last valid key of some query has weight 0", "bfloat16 only up to 256")
