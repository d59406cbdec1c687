"""Chapter 11's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that point at the fault: broken numerics (overflow, -inf - -inf), masks off by one,
forgotten rescaling, too much memory, heads shared in the wrong order, gradients cut."""
import math

import pytest
import torch
import torch.nn.functional as F

from book.checks.ch11 import check_grouped_query_attention, check_online_softmax_attention
from book.fast_attention import tiled_attention
from checkers_support import accepts, redteam_entries, rejects


def stub(*args, **kwargs):
    raise NotImplementedError("write your solution here")


# -- Exercise 11.1 -------------------------------------------------------------------------

def online(Q, K, V, block_size, causal=False, init=float("-inf"), safe=True,
           rescale_sum=True, rescale_acc=True, mask=lambda cols, rows: cols > rows,
           stop=None, scale=None):
    """The solution notebook's answer, with switches for its common mistakes."""
    n = K.shape[1]
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    m = torch.full(Q.shape[:2] + (1,), init, dtype=Q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(Q.shape[:2] + (V.shape[-1],), dtype=Q.dtype)
    rows = torch.arange(Q.shape[1])[:, None]
    for j in range(0, stop or n, block_size):
        s = Q @ K[:, j:j + block_size].transpose(1, 2) * scale
        if causal:
            cols = torch.arange(j, min(j + block_size, n))
            s = s.masked_fill(mask(cols, rows), float("-inf"))
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = new.masked_fill(new == float("-inf"), 0.0) if safe else new
        e = torch.exp(s - shift)
        factor = torch.exp(m - shift)
        total = (total * factor if rescale_sum else total) + e.sum(-1, keepdim=True)
        acc = (acc * factor if rescale_acc else acc) + e @ V[:, j:j + block_size]
        m = new
    return acc / total


def by_tiles(Q, K, V, block_size, causal=False):  # right: the chapter's tiled version
    return tiled_attention(Q, K, V, (Q.shape[1], block_size), causal=causal)


def by_tiles_with_queries_blocked_too(Q, K, V, block_size, causal=False):  # right, unusual
    return tiled_attention(Q, K, V, (max(3, Q.shape[1] // 8), block_size), causal=causal)


def full_softmax(Q, K, V, block_size, causal=False):
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(scores.shape[1:]).triu(1).bool(), -math.inf)
    return torch.softmax(scores, -1) @ V


def softmax_per_block(Q, K, V, block_size, causal=False):
    out = 0
    for j in range(0, K.shape[1], block_size):
        s = Q @ K[:, j:j + block_size].transpose(1, 2) / math.sqrt(Q.shape[-1])
        if causal:
            cols = torch.arange(j, min(j + block_size, K.shape[1]))
            s = s.masked_fill(cols > torch.arange(Q.shape[1])[:, None], -math.inf)
        out = out + torch.softmax(s, -1).nan_to_num(0.0) @ V[:, j:j + block_size]
    return out


def naive_exp(Q, K, V, block_size, causal=False):  # a running sum of exp without any max
    total, acc = 0, 0
    for j in range(0, K.shape[1], block_size):
        s = Q @ K[:, j:j + block_size].transpose(1, 2) / math.sqrt(Q.shape[-1])
        if causal:
            cols = torch.arange(j, min(j + block_size, K.shape[1]))
            s = s.masked_fill(cols > torch.arange(Q.shape[1])[:, None], -math.inf)
        e = torch.exp(s)
        total, acc = total + e.sum(-1, keepdim=True), acc + e @ V[:, j:j + block_size]
    return acc / total


WRONG = {
    "the full score matrix": (full_softmax, "(nearly) all of the scores"),
    "a softmax per block, added up": (softmax_per_block, "normalised by itself"),
    "exp without a running max": (naive_exp, "overflows"),
    "the running max starts at 0": (lambda *a, **k: online(*a, init=0.0, **k), "NaN"),
    "the sum is not rescaled": (lambda *a, **k: online(*a, rescale_sum=False, **k),
                                "running sum of exponentials is not rescaled"),
    "the weighted sum is not rescaled": (lambda *a, **k: online(*a, rescale_acc=False, **k),
                                         "weighted sum of values is not rescaled"),
    "causal ignored": (lambda Q, K, V, b, causal=False: online(Q, K, V, b),
                       "causal=True is ignored"),
    "causal mask misses the diagonal": (
        lambda *a, **k: online(*a, mask=lambda c, r: c >= r, **k), "not key i itself"),
    "causal mask flipped": (lambda *a, **k: online(*a, mask=lambda c, r: c < r, **k),
                            "the future"),
    "the last, shorter block left out": (
        lambda Q, K, V, b, causal=False: online(Q, K, V, b, causal,
                                                stop=K.shape[1] - K.shape[1] % b or None),
        "last, shorter block"),
    "no 1/sqrt(d)": (lambda *a, **k: online(*a, scale=1.0, **k), "without the scale"),
    "detached": (lambda Q, K, V, b, causal=False: online(Q.detach(), K.detach(), V.detach(),
                                                         b, causal), "no gradient"),
    "the fused kernel": (lambda Q, K, V, b, causal=False:
                         F.scaled_dot_product_attention(Q, K, V, is_causal=causal),
                         "scaled_dot_product_attention"),
    "returns (output, max, sum)": (lambda *a, **k: (online(*a, **k), 0, 0), "tuple"),
    "float64 output": (lambda *a, **k: online(*a, **k).double(), "dtype"),
    "unimplemented stub": (stub, "not implemented yet"),
    "forgets to return": (lambda *a, **k: None, "None"),
}


def test_online_softmax_attention_accepts_right_solutions():
    accepts(check_online_softmax_attention, online)
    # With every query in each block, key 0 (seen by every query) comes first: the running
    # max is finite from the first block on, so no safe max is needed.
    accepts(check_online_softmax_attention,
            lambda *a, **k: online(*a, safe=False, **k))
    accepts(check_online_softmax_attention, by_tiles)
    accepts(check_online_softmax_attention, by_tiles_with_queries_blocked_too)


@pytest.mark.parametrize("name", WRONG)
def test_online_softmax_attention_rejects_wrong_solutions(name):
    fn, fragment = WRONG[name]
    rejects(check_online_softmax_attention, fn, fragment)


def test_the_fused_kernel_is_restored():
    fused = F.scaled_dot_product_attention
    rejects(check_online_softmax_attention, WRONG["the fused kernel"][0], "yourself")
    assert F.scaled_dot_product_attention is fused


# -- Exercise 11.2 -------------------------------------------------------------------------

def heads_divide(Q, K):
    """The ValueError exercise 11.2 asks for when num_kv_heads does not divide num_heads."""
    if Q.shape[1] % K.shape[1]:
        raise ValueError(f"num_kv_heads = {K.shape[1]} does not divide num_heads = "
                         f"{Q.shape[1]}")


def with_value_error(fn):
    """fn with the head-count check added, for entries written before it was required."""
    def checked(Q, K, V):
        heads_divide(Q, K)
        return fn(Q, K, V)
    return checked


def gqa(Q, K, V):
    """The solution notebook's answer."""
    heads_divide(Q, K)
    group = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(group, dim=1), V.repeat_interleave(group, dim=1)
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1) @ V


def gqa_grouped_view(Q, K, V):  # right, unusual: queries reshaped into groups, no copies
    heads_divide(Q, K)
    b, h, m, hs = Q.shape
    kv = K.shape[1]
    Qg = Q.reshape(b, kv, h // kv, m, hs)
    w = torch.softmax(Qg @ K[:, :, None].transpose(-2, -1) / math.sqrt(hs), dim=-1)
    return (w @ V[:, :, None]).reshape(b, h, m, hs)


def gqa_expand(Q, K, V):  # right, unusual: expand + reshape in the right order
    heads_divide(Q, K)
    b, kv, n, hs = K.shape
    group = Q.shape[1] // kv
    K = K[:, :, None].expand(b, kv, group, n, hs).reshape(b, kv * group, n, hs)
    V = V[:, :, None].expand(b, kv, group, n, hs).reshape(b, kv * group, n, hs)
    return torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(hs), dim=-1) @ V


def attend(Q, K, V, scale=None, dim=-1):
    scale = 1 / math.sqrt(Q.shape[-1]) if scale is None else scale
    return torch.softmax(Q @ K.transpose(-2, -1) * scale, dim=dim) @ V


def tiled_heads(Q, K, V):  # repeat: head i reads i % kv
    r = Q.shape[1] // K.shape[1]
    return attend(Q, K.repeat(1, r, 1, 1), V.repeat(1, r, 1, 1))


def group_reshape_wrong_order(Q, K, V):  # (b, group, kv, ..) instead of (b, kv, group, ..)
    b, h, m, hs = Q.shape
    kv = K.shape[1]
    Qg = Q.reshape(b, h // kv, kv, m, hs)
    return attend(Qg, K[:, None], V[:, None]).reshape(b, h, m, hs)


GQA_WRONG = {
    "repeat instead of repeat_interleave": (tiled_heads, "i % num_kv_heads"),
    "groups reshaped in the wrong order": (group_reshape_wrong_order,
                                           "reads key-value head"),
    "only key-value head 0": (lambda Q, K, V: attend(Q, K[:, :1], V[:, :1]),
                              "every query head reads key-value head 0"),
    "the mean of the key-value heads": (
        lambda Q, K, V: attend(Q, K.mean(1, keepdim=True), V.mean(1, keepdim=True)),
        "average of the key-value heads"),
    "no scale": (lambda Q, K, V: gqa(Q * math.sqrt(Q.shape[-1]), K, V),
                 "without the scale"),
    "softmax over the queries": (
        lambda Q, K, V: attend(Q, K.repeat_interleave(Q.shape[1] // K.shape[1], 1),
                               V.repeat_interleave(Q.shape[1] // K.shape[1], 1), dim=-2),
        "over the queries"),
    "V from head 0": (lambda Q, K, V: attend(
        Q, K.repeat_interleave(Q.shape[1] // K.shape[1], 1),
        V[:, :1].expand(-1, Q.shape[1], -1, -1)), "values of key-value head 0"),
    "one output per key-value head": (
        lambda Q, K, V: attend(Q[:, :K.shape[1]], K, V), "as many as the key-value heads"),
    "the fused kernel with enable_gqa": (
        lambda Q, K, V: F.scaled_dot_product_attention(Q, K, V, enable_gqa=True),
        "Share the heads yourself"),
    "detached": (lambda Q, K, V: gqa(Q.detach(), K.detach(), V.detach()), "no gradient"),
    "unimplemented stub": (stub, "not implemented yet"),
    "scale by sqrt(num_heads * head_size)": (
        lambda Q, K, V: gqa(Q / math.sqrt(Q.shape[1]), K, V), "is wrong"),
}


def test_grouped_query_attention_accepts_right_solutions():
    for fn in (gqa, gqa_grouped_view, gqa_expand):
        accepts(check_grouped_query_attention, fn)


@pytest.mark.parametrize("name", GQA_WRONG)
def test_grouped_query_attention_rejects_wrong_solutions(name):
    fn, fragment = GQA_WRONG[name]
    rejects(check_grouped_query_attention, fn, fragment)


def test_failure_names_the_case_and_the_heads():
    text = rejects(check_grouped_query_attention, tiled_heads, "Hint:")
    assert "4 query heads, 2 key-value heads" in text and "expected head" in text


# -- Round 3 red team (tests/checker_redteam/round3_ch11_*.py) ---------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round3_ch11_online", ("W_",)))
def test_online_softmax_attention_rejects_round3(fn):
    rejects(check_online_softmax_attention, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch11_online", ("C_", "O_")))
def test_online_softmax_attention_accepts_round3_right_solutions(fn):
    """O_2_float64_accumulators peaked at 2.2 of the old 2 MiB bound; the bound now scales
    with block_size."""
    accepts(check_online_softmax_attention, fn)


def test_online_softmax_memory_message_names_the_budget():
    from checker_redteam.round3_ch11_online import S_1_hardcoded_block_128_output_right as S1
    text = rejects(check_online_softmax_attention, S1, "more than the budget")
    assert "blocks of scores at once" in text and "builds (nearly)" not in text


@pytest.mark.parametrize("fn", redteam_entries("round3_ch11_gqa", ("W_",)))
def test_grouped_query_attention_rejects_round3(fn):
    rejects(check_grouped_query_attention, fn)


def test_grouped_query_attention_round3_messages():
    from checker_redteam.round3_ch11_gqa import W_05_no_max_subtraction, W_07_output_float32
    rejects(check_grouped_query_attention, W_05_no_max_subtraction, "exp() overflows")
    rejects(check_grouped_query_attention, W_07_output_float32, "float64")


# -- Round 4 red team (tests/checker_redteam/round4_ch11_*.py; tests/test_checks_redteam.py
# runs every W_, C_ and O_ entry) --------------------------------------------------------

def test_online_softmax_round4_causal_masks_are_named():
    """The causal mistakes of round 4 once got the generic recipe: the message now names the
    mask that was used, or says the causal mask is at fault when only causal cases fail."""
    from checker_redteam import round4_ch11_online_softmax as r4
    rejects(check_online_softmax_attention, r4.W_05_causal_off_by_one, "sees key i + 1",
            "index in the whole sequence")
    rejects(check_online_softmax_attention, r4.W_06_block_level_causal,
            "whole blocks of keys")
    rejects(check_online_softmax_attention, r4.W_23_causal_mask_block_local_index,
            "place inside its block")
    # A causal mask none of the named ones matches (query i sees keys j <= i - 2, i >= 2;
    # query 0 and 1 see key 0): the generic causal message.
    odd = lambda *a, **k: online(  # noqa: E731
        *a, mask=lambda c, r: (c > r - 2) & (c > 0), **k)
    rejects(check_online_softmax_attention, odd,
            "while every case with causal=False passed", "causal mask")


def test_online_softmax_round4_memory_holes():
    """A precomputed (n, n) causal mask and blocks of queries against all keys (against the
    wording) passed round 4's memory case, measured only with causal=False and n x n."""
    from checker_redteam import round4_ch11_online_softmax as r4
    text = rejects(check_online_softmax_attention, r4.W_24_full_causal_mask_precomputed,
                   "causal, the peak memory", "the causal mask takes the memory")
    assert "block by block" in text
    rejects(check_online_softmax_attention, r4.S_02_query_chunks_exact_softmax,
            "64 queries, 16411 keys", "cut the keys")


def bool_mask_once(Q, K, V, block_size, causal=False):
    """Right values, but the causal mask is built once as a (num_queries, num_keys) bool
    matrix: a quarter of the float32 score matrix (1.4 MiB at n = 1024 passed the budget;
    the check measures n = 2048)."""
    if not causal:
        return online(Q, K, V, block_size)
    n = K.shape[1]
    future = torch.arange(n)[None, :] > torch.arange(Q.shape[1])[:, None]
    return online(Q, K, V, block_size, causal,
                  mask=lambda cols, rows: future[:, cols[0]:cols[-1] + 1])


def test_online_softmax_a_bool_causal_mask_of_all_keys_is_rejected():
    rejects(check_online_softmax_attention, bool_mask_once,
            "the causal mask takes the memory")


def test_grouped_query_attention_round4_messages():
    from checker_redteam import round4_ch11_gqa as r4
    rejects(check_grouped_query_attention, r4.W_21_view_flatten_heads, "not contiguous",
            "Use .reshape()")
    rejects(check_grouped_query_attention, r4.W_22_repeated_kv_cached_by_shape,
            "an earlier call with the same shapes")


# -- Round 5 red team (tests/checker_redteam/round5_ch11_*.py) -----------------------------

def test_online_softmax_round5_max_per_query_is_named():
    from checker_redteam import round5_ch11_online_softmax as r5
    for fn in (r5.W_11_one_max_for_everything, r5.W_22_max_per_batch_not_per_query):
        rejects(check_online_softmax_attention, fn, "one per query")
    rejects(check_online_softmax_attention, r5.W_26_causal_by_multiplying_after_exp,
            "Mask with -inf before the max")


# -- Round 6 red team (tests/checker_redteam/round6_ch11_*.py) -----------------------------

def test_online_softmax_round6_finite_fills_layout_and_dtype():
    from checker_redteam import round6_ch11_online as r6
    # A finite fill for the hidden keys: named as such, also where the scores are 1e4.
    rejects(check_online_softmax_attention, r6.W_02_mask_fill_minus_1e4,
            "every visible score near -2e4", "a finite score", "float('-inf')")
    rejects(check_online_softmax_attention, r6.W_03_mask_fill_minus_1000,
            "scores up to about 1e4", "a finite score", "float('-inf')")
    # Fill 0 before exp, then multiply by the 0/1 mask: inf * 0 = NaN, said in the hint.
    rejects(check_online_softmax_attention, r6.W_20_mult_mask_fill0_inf_times_0,
            "contains NaN", "inf * 0 is NaN")
    # .view on transposed inputs; float32 out for float64 in; an output buffer reused.
    rejects(check_online_softmax_attention, r6.W_15_view_needs_contiguous,
            "not contiguous", "Use .reshape()")
    rejects(check_online_softmax_attention, r6.W_13_output_float32_for_half,
            "float64 inputs", "expected torch.float64")
    rejects(check_online_softmax_attention, r6.W_18_reused_output_buffer,
            "changed what it returned earlier")


def test_grouped_query_attention_round6_messages():
    from checker_redteam import round6_ch11_gqa as r6
    # Repeated K and V memoised by data_ptr: a second call after K and V changed in place.
    # Which case shows it first depends on whether the allocator hands a later case's K the
    # address of an earlier, freed one (it varies between runs, with Python's hash seed):
    # then the new tensors of the same shapes are served the earlier call's attention. Both
    # messages name the stale cache.
    text = rejects(check_grouped_query_attention, r6.W_08_cache_repeated_kv_by_storage)
    assert ("changed the same K and V tensors in place" in text
            and "before they were changed" in text) or \
        "of an earlier call with the same shapes" in text, text
    rejects(check_grouped_query_attention, r6.W_14_nan_to_num_softmax,
            "scores in the hundreds", "subtract each row's maximum")
    rejects(check_grouped_query_attention, r6.W_15_causal_if_square,
            "it is causal attention", "do not mask")
    rejects(check_grouped_query_attention, r6.W_10_float16_softmax_in_half,
            "the scores rounded to float16, while the inputs are float32")
    rejects(check_grouped_query_attention, r6.W_19_reused_output_buffer,
            "changed what it returned earlier")


# -- Round 7 red team (tests/checker_redteam/round7_ch11_*.py) -----------------------------

def test_online_softmax_round7_half_one_key_and_memory_message():
    from checker_redteam import round7_ch11_online as r7
    rejects(check_online_softmax_attention, r7.W_19_half_returns_float32,
            "float16 inputs", "expected torch.float16")
    rejects(check_online_softmax_attention, r7.W_20_single_key_returns_view_of_V,
            "1 key", "returned V itself, or a view of it", "a new tensor")
    text = rejects(check_online_softmax_attention, r7.W_23_store_every_block_merge_at_end,
                   "a partial result kept for every block")
    assert "builds (nearly) all of it" not in text and "memory that grows" in text


def test_grouped_query_attention_round7_messages():
    from checker_redteam import round7_ch11_gqa as r7
    rejects(check_grouped_query_attention, r7.W_08_batch_flatten_then_repeat,
            "1 key-value head (multi-query)", "batch above 1")
    rejects(check_grouped_query_attention, r7.W_19_half_upcast_not_cast_back,
            "float16 inputs", "expected torch.float16")
    rejects(check_grouped_query_attention, r7.W_13_bfloat16_math_for_half,
            "float16 inputs")


# -- Round 8 red team (tests/checker_redteam/round8_ch11_*.py) -----------------------------

def test_online_softmax_round8_bfloat16_and_value_dim_messages():
    from checker_redteam import round8_ch11_online as r8
    rejects(check_online_softmax_attention, r8.W_24_bfloat16_returns_float32,
            "bfloat16 inputs", "expected torch.bfloat16")
    rejects(check_online_softmax_attention, r8.W_02_acc_shaped_like_Q,
            "must match the size of tensor b",
            "d = 4 (the size of Q and K) and value_dim = 5",
            "the running weighted sum of values has value_dim columns")


def test_grouped_query_attention_round8_messages():
    from checker_redteam import round8_ch11_gqa as r8
    rejects(check_grouped_query_attention, r8.W_20_bfloat16_returns_float32,
            "bfloat16 inputs", "expected torch.bfloat16")
    rejects(check_grouped_query_attention, r8.W_04_repeat_interleave_by_hkv,
            "must match the size of tensor b", "the 6 query heads met 9 heads",
            "each key-value head repeated num_kv_heads = 3 times",
            "K.repeat_interleave(2, dim=1)")


# -- Round 9 red team (tests/checker_redteam/round9_ch11_*.py) -----------------------------

def test_float32_scale_for_float64_round9():
    from checker_redteam import round9_ch11_gqa as r9g, round9_ch11_online as r9o
    # A float32 sqrt(d) (torch.tensor(d).sqrt(), np.float32): exact for d = 4 only.
    # (With the ValueError exercise 11.2 asks for: the float64 fault is told last.)
    for fn in (r9g.W_15_float32_scale_tensor, r9g.W_18_float32_scale_numpy):
        rejects(check_grouped_query_attention, with_value_error(fn),
                "head size 5, float64 inputs",
                "from the float64 reference", "torch.tensor(d) is float32")
    rejects(check_online_softmax_attention, r9o.W_13_float32_scale_tensor,
            "d=5, block_size=3, float64 inputs", "from the float64 reference")


def test_grouped_query_attention_round9_messages():
    from checker_redteam import round9_ch11_gqa as r9
    # float16 softmax by hand without the row maximum: exp() overflows above 11.09.
    rejects(check_grouped_query_attention, r9.W_19_half_no_max_subtraction,
            "contains NaN or inf", "float16 inputs, Q and K times 3",
            "overflows to inf above 11.09", "subtract each row's maximum")
    # num_kv_heads that does not divide num_heads must be refused (any error).
    for fn in (r9.W_16_kv_heads_not_dividing_silently,
               r9.W_20_index_select_i_times_hkv_over_h):
        rejects(check_grouped_query_attention, fn,
                "6 query heads, 4 key-value heads (4 does not divide 6)",
                "instead of a ValueError", "raise ValueError")


# -- Round 10 red team (tests/checker_redteam/round10_ch11_*.py) ----------------------------

def test_grouped_query_attention_round10_scale_messages():
    from checker_redteam import round10_ch11_gqa as r10
    # A scale a little off crashed _diagnose_heads (IndexError: every head matched its own
    # key-value head within the loose tolerance); now the scale is named.
    for fn, fragment in ((r10.W_26_scale_times_1_0002, "a scale 0.02% too large"),
                         (r10.W_27_scale_times_0_9998, "a scale 0.02% too small"),
                         (r10.W_28_sqrt_d_rounded_4_digits, "divided by 1.414 instead"),
                         (r10.W_18_f16_rounded_sqrt_only_float32, "divided by 1.73242"),
                         (r10.W_09_half_softmax_in_half_scores_unscaled_overflow,
                          "divided by 1.73242"),
                         (r10.W_17_f16_rounded_sqrt_only_float64, "float64 inputs")):
        text = rejects(check_grouped_query_attention, fn, fragment, "math.sqrt(d)")
        assert "IndexError" not in text and "bug of the checker" not in text
    # A float32 input: no hint at float16 or bfloat16 for a scale 0.1% off.
    text = rejects(check_grouped_query_attention, r10.W_23_scale_times_1_001,
                   "a scale 0.1% too large")
    assert "bfloat16" not in text
    rejects(check_grouped_query_attention, r10.W_03_scale_by_num_keys_when_square,
            "divided by 2.44949 instead of sqrt(3)", "not the number of keys")


def test_grouped_query_attention_round10_half_and_one_key():
    from checker_redteam import round10_ch11_gqa as r10
    rejects(check_grouped_query_attention, r10.W_16_half_computed_in_half_max_from_float,
            "V between 1e5 and 2e5", "float16 only up to 65504")
    rejects(check_grouped_query_attention,
            r10.W_19_float16_for_float16_softmax_unshifted_only_half,
            "float16 inputs, each query's score for one key about 300",
            "overflows in float32 too")
    rejects(check_grouped_query_attention, r10.W_20_detach_in_half,
            "float16 inputs (gradients)", "requires_grad=False")
    for fn in (r10.W_29_single_key_fast_path, r10.W_30_single_query_fast_path_alias):
        rejects(check_grouped_query_attention, fn, "1 query, 1 key",
                "returned V itself, or a view of it")
    # W_29 where each group has several heads (V repeated, then expanded: a new tensor,
    # Q and K out of the graph, gradient None where the right one is zero) is round 7's
    # O_07_single_key_expand, ruled right then: not refused.

    def bfloat16_detached(Q, K, V):  # the half-precision gradient, in bfloat16 only
        return gqa(*(x.detach() if x.dtype == torch.bfloat16 else x for x in (Q, K, V)))
    rejects(check_grouped_query_attention, bfloat16_detached, "bfloat16 inputs (gradients)")


def test_online_softmax_round10_half_one_key_and_messages():
    from checker_redteam import round10_ch11_online as r10
    rejects(check_online_softmax_attention, r10.W_10_half_accumulate_in_half_for_bf16_via_f16,
            "V between 1e5 and 2e5", "float16 only up to 65504")
    rejects(check_online_softmax_attention, r10.W_19_half_shift_first_block,
            "after the first block about 300", "a later block")
    rejects(check_online_softmax_attention, r10.W_20_detach_in_half,
            "float16 inputs (gradients)", "requires_grad=False")
    rejects(check_online_softmax_attention, r10.W_24_single_key_returns_V_copy_no_grad,
            "1 key", "requires_grad=False")
    rejects(check_online_softmax_attention, r10.W_21_full_softmax_for_half,
            "512 queries and keys", "float16 inputs", "the peak memory")
    rejects(check_online_softmax_attention, r10.W_27_inplace_accumulators_was_O03,
            "backward() through online_softmax_attention failed", "in-place")
    # A running max started at -1e4, above every visible score (-2e4): named first.
    text = rejects(check_online_softmax_attention, r10.W_04_init_max_minus_1e4,
                   "every visible score near -2e4", "starts at a finite number")
    assert text.index("starts at a finite number") < text.index("exp(-inf - (-inf))")
    rejects(check_online_softmax_attention, r10.W_26_output_scaled_1_0002,
            "a scale 0.02% too large")
    rejects(check_online_softmax_attention, r10.W_25_scale_rounded_in_float16,
            "divided by 1.73242 instead of sqrt(3)")


# -- Round 11 red team (tests/checker_redteam/round11_ch11_*.py) ----------------------------

def test_grouped_query_attention_round11_value_error():
    from checker_redteam import round11_ch11_gqa as r11
    # Exercise 11.2 asks for a ValueError: an assert or a TypeError is refused and named.
    rejects(check_grouped_query_attention, r11.W_07_assert_not_valueerror,
            "raised AssertionError", "6 query heads, 4 key-value heads",
            "asks for a ValueError", "python -O removes it", "raise ValueError")
    rejects(check_grouped_query_attention, r11.W_17_typeerror_not_valueerror,
            "raised TypeError", "asks for a ValueError", "that is a ValueError")
    # More key-value heads than query heads: 4 does not divide 2.
    rejects(check_grouped_query_attention, r11.W_11_more_kv_than_q_heads_allowed,
            "2 query heads, 4 key-value heads (4 does not divide 2)",
            "instead of a ValueError", "more key-value heads (4) than query heads (2)")
    # The right solutions of rounds 3 to 9 stop with a broadcast's RuntimeError (renamed W_).
    from checker_redteam import round3_ch11_gqa as r3
    rejects(check_grouped_query_attention, r3.W_14_repeat_interleave, "raised RuntimeError",
            "asks for a ValueError", "the function ran on until a tensor operation failed")


def test_grouped_query_attention_round11_shortcuts_for_one_group_or_one_head():
    from checker_redteam import round11_ch11_gqa as r11
    # A shortcut for groups of one head (kv == h) or for one key-value head (kv == 1)
    # without the max subtraction: NaN at scores about 300.
    rejects(check_grouped_query_attention, r11.W_20_no_sharing_fast_path_no_max,
            "3 query heads, 3 key-value heads (plain multi-head)", "float32 inputs",
            "contains NaN or inf", "subtract each row's maximum")
    rejects(check_grouped_query_attention, r11.W_22_mqa_fast_path_no_max,
            "4 query heads, 1 key-value head (multi-query)", "float32 inputs",
            "contains NaN or inf", "subtract each row's maximum")
    # float64 computed in float32 only when kv == h.
    rejects(check_grouped_query_attention, r11.W_21_no_sharing_fast_path_float32,
            "3 query heads, 3 key-value heads (plain multi-head)", "float64 inputs",
            "from the float64 reference")

    def mqa_float32(Q, K, V):  # float64 computed in float32 only when kv == 1
        if K.shape[1] == 1:
            return gqa(Q.float(), K.float(), V.float()).to(Q.dtype)
        return gqa(Q, K, V)
    rejects(check_grouped_query_attention, mqa_float32,
            "4 query heads, 1 key-value head (multi-query)", "float64 inputs",
            "from the float64 reference")

    def half_fast_path_no_max(Q, K, V):  # kv == h, float16/bfloat16 only, no max
        if K.shape[1] == Q.shape[1] and Q.dtype in (torch.float16, torch.bfloat16):
            p = torch.exp(Q.float() @ K.float().transpose(-2, -1) / math.sqrt(Q.shape[-1]))
            return (p / p.sum(-1, keepdim=True) @ V.float()).to(Q.dtype)
        return gqa(Q, K, V)
    rejects(check_grouped_query_attention, half_fast_path_no_max,
            "3 query heads, 3 key-value heads (plain multi-head)", "float16 inputs",
            "contains NaN or inf")


def test_online_softmax_round11_one_block_and_memory():
    from checker_redteam import round11_ch11_online as r11
    # block_size >= num_keys: a plain-softmax shortcut with a finite fill, or without the max.
    rejects(check_online_softmax_attention, r11.W_22_single_block_fast_path_fill_1e4,
            "block_size=8 (one block holds every key), causal, every visible score near "
            "-2e4", "a finite score")
    rejects(check_online_softmax_attention, r11.W_23_single_block_fast_path_no_max,
            "block_size=9 (one block holds every key)", "contains NaN",
            "one block holds every key (block_size >= num_keys)")
    # The whole score matrix only for float64 and bfloat16 inputs: peak memory there too.
    rejects(check_online_softmax_attention, r11.W_19_full_matrix_for_bf16_and_f64,
            "1024 queries and keys", "float64 inputs", "float64 scores", "the peak memory")

    def full_for_bfloat16(Q, K, V, block_size, causal=False):
        if Q.dtype == torch.bfloat16:
            return full_softmax(Q.float(), K.float(), V.float(), block_size,
                                causal).bfloat16()
        return online(Q, K, V, block_size, causal)
    rejects(check_online_softmax_attention, full_for_bfloat16,
            "1024 queries and keys", "bfloat16 inputs", "the peak memory")


# -- Round 12 red team (tests/checker_redteam/round12_ch11_*.py) ---------------------------

def test_online_softmax_round12_fill_scale_and_float16_sums():
    from checker_redteam import round12_ch11_online as r12
    # Hidden keys filled with -1e9: every visible score is -2e10 in the new causal cases.
    rejects(check_online_softmax_attention, r12.W_24_fill_minus_1e9,
            "every visible score -2e10", "a finite score", "float('-inf')")

    def one_block_fill_1e9(Q, K, V, block_size, causal=False):  # the shortcut for one block
        if block_size >= K.shape[1]:
            s = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
            if causal:
                s = s.masked_fill(torch.ones(s.shape[1:], dtype=torch.bool).triu(1), -1e9)
            return torch.softmax(s, -1) @ V
        return online(Q, K, V, block_size, causal)
    rejects(check_online_softmax_attention, one_block_fill_1e9,
            "block_size=8 (one block holds every key), causal, float64 inputs, Q = 1e5",
            "a finite score")
    # The running max of Q K^T while exp() takes Q K^T / sqrt(d): named, not the generic
    # "subtract the running maximum (starting at -inf ...)" that the code already does.
    text = rejects(check_online_softmax_attention, r12.W_06_shift_by_unscaled_max,
                   "every score near -5000", "right on scores as far from 0 with head size "
                   "d = 1", "scaled differently", "the very scores you exponentiate")
    assert "starting at -inf" not in text
    # Lead's ruling: the running sums may keep the input's dtype (A_19: bfloat16 sums for
    # bfloat16 inputs; the solution notebook's loop), not less precision than it.
    accepts(check_online_softmax_attention, r12.A_19_all_in_input_dtype)


def bfloat16_detour(Q, K, V, block_size, causal=False):  # float16 "as half": bfloat16
    if Q.dtype == torch.float16:
        return online(Q.bfloat16(), K.bfloat16(), V.bfloat16(), block_size, causal).half()
    return online(Q, K, V, block_size, causal)


def bfloat16_sums_for_float16(Q, K, V, block_size, causal=False):
    """float16 scores and exponentials, but the running sums in bfloat16."""
    if Q.dtype != torch.float16:
        return online(Q, K, V, block_size, causal)
    n, scale = K.shape[1], 1 / math.sqrt(Q.shape[-1])
    m = torch.full(Q.shape[:2] + (1,), -math.inf, dtype=Q.dtype)
    total = torch.zeros(Q.shape[:2] + (1,), dtype=torch.bfloat16)
    acc = torch.zeros(Q.shape[:2] + (V.shape[-1],), dtype=torch.bfloat16)
    rows = torch.arange(Q.shape[1])[:, None]
    for j in range(0, n, block_size):
        s = Q @ K[:, j:j + block_size].transpose(1, 2) * scale
        if causal:
            s = s.masked_fill(torch.arange(j, min(j + block_size, n)) > rows, -math.inf)
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = new.masked_fill(new == -math.inf, 0.0)
        e, factor = torch.exp(s - shift), torch.exp(m - shift).bfloat16()
        total = total * factor + e.sum(-1, keepdim=True).bfloat16()
        acc = acc * factor + (e @ V[:, j:j + block_size]).bfloat16()
        m = new
    return (acc / total).half()


@pytest.mark.parametrize("fn", [bfloat16_detour, bfloat16_sums_for_float16])
def test_online_softmax_float16_summed_in_bfloat16_is_rejected(fn):
    rejects(check_online_softmax_attention, fn, "1 key", "float16 inputs",
            "more than one float16 step", "V rounded to bfloat16", "never through bfloat16")


def test_grouped_query_attention_round12_messages():
    from checker_redteam import round12_ch11_gqa as r12
    generic = "with K and V repeated for each group of query heads (repeat_interleave)"
    for fn, fragments in (
            (r12.W_06_max_over_keys_axis_wrong, ("taken over the queries (dim=-2)",
                                                 "s.amax(dim=-1, keepdim=True)")),
            (r12.W_08_transpose_back_wrong, ("the heads and the queries are mixed",
                                             "instead of transposed", ".transpose(1, 2)")),
            (r12.W_16_batch_mixed_kv, ("query head 2 of batch element 0 reads key-value "
                                       "head 0 of batch element 1",
                                       "the batch and head axes are mixed")),
            (r12.W_21_kv_heads_from_V, ("new Q, K and V of the same shapes",
                                        "the attention over the keys of an earlier call",
                                        "(and this call's values)"))):
        text = rejects(check_grouped_query_attention, fn, *fragments)
        assert generic not in text


def test_grouped_query_attention_round8_w27_asks_for_the_value_error():
    from checker_redteam import round8_ch11_gqa as r8
    rejects(check_grouped_query_attention, r8.W_27_half_scores_unscaled_first,
            "raised RuntimeError", "asks for a ValueError")

    def with_value_error(Q, K, V):  # its half-precision path stays accepted (was A_09)
        if Q.shape[1] % K.shape[1]:
            raise ValueError(f"{K.shape[1]} key-value heads do not divide {Q.shape[1]}")
        return r8.W_27_half_scores_unscaled_first(Q, K, V)
    accepts(check_grouped_query_attention, with_value_error)


# -- The condition matrix (session 12): wrongs that only it rejects -----------------------

def online_clamped(Q, K, V, block_size, causal=False):
    """Scores clamped to +-1e5 "so that exp() cannot overflow": the checker's own cases
    stay below 5e4; scores near 1e5 (Q times 1e5) tie at the clamp."""
    n, scale = K.shape[1], 1 / math.sqrt(Q.shape[-1])
    m = torch.full(Q.shape[:2] + (1,), -math.inf, dtype=Q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(Q.shape[:2] + (V.shape[-1],), dtype=Q.dtype)
    rows = torch.arange(Q.shape[1])[:, None]
    for j in range(0, n, block_size):
        s = (Q @ K[:, j:j + block_size].transpose(1, 2) * scale).clamp(-1e5, 1e5)
        if causal:
            s = s.masked_fill(torch.arange(j, min(j + block_size, n)) > rows, -math.inf)
        new = torch.maximum(m, s.amax(-1, keepdim=True))
        shift = new.masked_fill(new == -math.inf, 0.0)
        e, factor = torch.exp(s - shift), torch.exp(m - shift)
        total = total * factor + e.sum(-1, keepdim=True)
        acc = acc * factor + e @ V[:, j:j + block_size]
        m = new
    return acc / total


def online_inference_in_half(Q, K, V, block_size, causal=False):
    if not torch.is_grad_enabled() and Q.dtype == torch.float32:  # "faster inference"
        return online(Q.half(), K.half(), V.half(), block_size, causal).float()
    return online(Q, K, V, block_size, causal)


def online_inference_scales_q_in_place(Q, K, V, block_size, causal=False):
    if not torch.is_grad_enabled():  # inference: no copy of Q
        return online(Q.mul_(1 / math.sqrt(Q.shape[-1])), K, V, block_size, causal,
                      scale=1.0)
    return online(Q, K, V, block_size, causal)


_EXPANDED = {}


def gqa_multi_query_cache(Q, K, V):
    """Multi-query: the expanded K and V kept by shape (as if they were constants)."""
    h = Q.shape[1]
    if K.shape[1] == 1:
        key = (tuple(K.shape), K.dtype, h)
        if key not in _EXPANDED:
            _EXPANDED[key] = (K.expand(-1, h, -1, -1), V.expand(-1, h, -1, -1))
        return gqa(Q, *_EXPANDED[key])
    return gqa(Q, K, V)


def gqa_clamped(Q, K, V):
    """Scores clamped to +-1e4: the checker's own cases stay in the hundreds."""
    if Q.shape[1] % K.shape[1]:
        raise ValueError(f"{K.shape[1]} key-value heads do not divide {Q.shape[1]}")
    g = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).clamp(-1e4, 1e4)
    return torch.softmax(s, -1) @ V


def gqa_inference_scales_q_in_place(Q, K, V):
    if not torch.is_grad_enabled():
        d = Q.shape[-1]
        return gqa(Q.mul_(1 / math.sqrt(d)) * math.sqrt(d), K, V)
    return gqa(Q, K, V)


MATRIX_ONLY = [
    (check_online_softmax_attention, "_online_conditions", online_clamped,
     ("Q times 1e5 (scores near 1e5), float32",)),
    (check_online_softmax_attention, "_online_conditions", online_inference_in_half,
     ("under torch.no_grad() (inference)", "is wrong")),
    (check_grouped_query_attention, "_gqa_conditions", gqa_multi_query_cache,
     ("1 key-value head (multi-query)", "a second call, with other values of the same "
      "shapes")),
    (check_grouped_query_attention, "_gqa_conditions", gqa_clamped,
     ("Q times 1e5 (scores near 1e5), float32",)),
    (check_grouped_query_attention, "_gqa_conditions", gqa_inference_scales_q_in_place,
     ("under torch.no_grad()", "changed its argument `Q` in place")),
]


def test_an_inference_path_scaling_q_in_place_is_rejected():
    """Once only the matrix rejected it; since round 13 the many-keys case under no_grad
    (outside the matrix) does too."""
    rejects(check_online_softmax_attention, online_inference_scales_q_in_place,
            "under torch.no_grad()", "changed its argument `Q` in place")


@pytest.mark.parametrize("checker, matrix, fn, fragments", MATRIX_ONLY,
                         ids=[entry[2].__name__ for entry in MATRIX_ONLY])
def test_only_the_condition_matrix_rejects(checker, matrix, fn, fragments, monkeypatch):
    _EXPANDED.clear()
    rejects(checker, fn, *fragments)
    _EXPANDED.clear()
    from book.checks import ch11
    monkeypatch.setattr(ch11, matrix, lambda fn: None)
    accepts(checker, fn)


# -- Red-team round 13 (writer F) ------------------------------------------------------------

from checkers_support import redteam_entry  # noqa: E402


@pytest.mark.parametrize("module, name, fragments", [
    # Keys capped (16384 "block_size cap", 9216 "preallocated stats buffer"): 64 queries
    # against 16411 keys, each query's best key among the last two.
    ("round13_ch11_online", "W_18_block_size_capped",
     ("64 queries, 16411 keys", "leaves the later keys out")),
    ("round13_ch11_online_b", "W_08_keys_capped",
     ("64 queries, 16411 keys", "leaves the later keys out")),
    # The whole score matrix under torch.no_grad() only.
    ("round13_ch11_online_c", "W_02_nograd_full_matrix",
     ("16411 keys, d=2, block_size=256, under torch.no_grad() (inference), the peak memory",
      "times the whole 64 x 16411 score matrix", "Under torch.no_grad() too",
      "A path of its own for torch.no_grad()")),
], ids=lambda x: x if isinstance(x, str) and x[:2] == "W_" else "")
def test_round13_many_keys_and_inference_memory(module, name, fragments):
    rejects(check_online_softmax_attention, redteam_entry(module, name), *fragments)


def test_round14_lazy_rescale_float16_overflows():
    """Round 14, W_16: a lazy rescaling (the running max moved only once a block's max passes
    it by more than 12) with float16 sums: exp(s - m) reaches e^12 > 65504, inf, then NaN.
    Named by the float16 case whose block maxima rise by 11.125 to 12."""
    rejects(check_online_softmax_attention,
            redteam_entry("round14_ch11_online", "W_16_lazy_rescale_half_native"),
            "the output contains NaN on batch 1, 8 queries, 3 keys, d=4, block_size=1, "
            "float16 inputs", "rise by 11.1 to 12", "lazy rescaling",
            "update the running max at every block")
