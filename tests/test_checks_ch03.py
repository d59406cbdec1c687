"""Chapter 3's checkers pass the reference solutions and reject known-wrong ones with useful messages."""
import math

import pytest
import torch
from d2l import torch as d2l

from book import checks
from book.attention import DotProductAttention, masked_softmax


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


WRONG_MASKED_SOFTMAXES = {
    "mask off by one (<=)": (fill_and_softmax(-1e9, offset=1), "off by one"),
    "mask one key too narrow": (fill_and_softmax(-1e9, offset=-1), "last valid key"),
    "softmax over the queries axis": (fill_and_softmax(-1e9, dim=1), "wrong axis"),
    "-inf fill: NaN on a fully masked row": (fill_and_softmax(float("-inf")), "NaN"),
    "-1e9 fill: overflows in float16": (fill_and_softmax(-1e9), "does not fit in float16"),
    "d2l's masked_softmax (uniform row, writes into X)": (d2l.masked_softmax, "changed its input"),
    "d2l's fill on a copy: a uniform fully masked row": (
        lambda X, v: d2l.masked_softmax(X.clone().float(), v).to(X.dtype), "all-zero"),
    "zeroes weights after the softmax": (zero_after_softmax, "sum to 1"),
    "ignores valid_lens": (lambda X, v: torch.softmax(X, -1), "must get weight 0"),
    "ignores per-query lengths": (first_length_only, "own length"),
    "modifies X in place": (in_place, "changed its input"),
    "returns float32 for float16 input": (float32_result, "dtype"),
    "forgets to return": (lambda X, v: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
}


def test_check_masked_softmax_accepts_the_reference():
    assert "passed" in checks.check_masked_softmax(masked_softmax)


@pytest.mark.parametrize("name", WRONG_MASKED_SOFTMAXES)
def test_check_masked_softmax_rejects_wrong_solutions(name):
    fn, message = WRONG_MASKED_SOFTMAXES[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_masked_softmax(fn)


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
}


def test_check_attention_accepts_the_reference():
    assert "passed" in checks.check_scaled_dot_product_attention(attention_reference)


def test_check_attention_accepts_pytorchs_fused_function_with_a_keep_mask():
    def fused(queries, keys, values, valid_lens):
        if valid_lens is None:
            return torch.nn.functional.scaled_dot_product_attention(queries, keys, values)
        lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
        keep = torch.arange(keys.shape[1]) < lens[..., None]  # (batch, 1 or queries, keys)
        out = torch.nn.functional.scaled_dot_product_attention(queries, keys, values,
                                                               attn_mask=keep)
        return out * keep.any(-1, keepdim=True)  # zeros where no key is valid, on any backend
    assert "passed" in checks.check_scaled_dot_product_attention(fused)


@pytest.mark.parametrize("name", WRONG_ATTENTIONS)
def test_check_attention_rejects_wrong_solutions(name):
    fn, message = WRONG_ATTENTIONS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_scaled_dot_product_attention(fn)


def test_failure_messages_name_the_input_and_say_where_to_look():
    with pytest.raises(AssertionError) as info:
        checks.check_masked_softmax(fill_and_softmax(-1e9, offset=1))
    text = str(info.value)
    assert "valid_lens [2, 4]" in text and "key 2 of query 0 in example 0" in text
    assert "Hint:" in text and "<" in text
    with pytest.raises(AssertionError) as info:
        checks.check_scaled_dot_product_attention(attend(scale=lambda d: 1.0))
    assert "sqrt(d)" in str(info.value) and "valid_lens" in str(info.value)
