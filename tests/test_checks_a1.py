"""Appendix A1's checker passes right solutions (also unusual ones) and rejects wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_a1.py), and kinds that round 1 missed."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from book import checks
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects


def chunked_reference(Q, K, V, chunk_size):
    outputs = []
    for i in range(0, Q.shape[1], chunk_size):
        scores = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        outputs.append(torch.softmax(scores, dim=-1) @ V)
    return torch.cat(outputs, dim=1)


def no_scale(Q, K, V, chunk_size):
    return chunked_reference(Q * math.sqrt(Q.shape[-1]), K, V, chunk_size)


def softmax_over_queries(Q, K, V, chunk_size):
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=1) @ V


def drops_last_chunk(Q, K, V, chunk_size):
    n = Q.shape[1] - Q.shape[1] % chunk_size if Q.shape[1] > chunk_size else Q.shape[1]
    return chunked_reference(Q[:, :n], K, V, chunk_size)


def chunks_the_keys(Q, K, V, chunk_size):
    """A softmax per chunk of keys, summed: each chunk's weights sum to 1 on its own."""
    out = 0
    for j in range(0, K.shape[1], chunk_size):
        scores = Q @ K[:, j:j + chunk_size].transpose(1, 2) / math.sqrt(Q.shape[-1])
        out = out + torch.softmax(scores, dim=-1) @ V[:, j:j + chunk_size]
    return out


def full_matrix_then_chunks(Q, K, V, chunk_size):
    weights = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1)
    return torch.cat([weights[:, i:i + chunk_size] @ V
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def returns_the_chunks(Q, K, V, chunk_size):
    return [chunked_reference(Q[:, i:i + chunk_size], K, V, chunk_size)
            for i in range(0, Q.shape[1], chunk_size)]



def stub(*args):
    raise NotImplementedError("write your solution here")


def fused_all_at_once(Q, K, V, chunk_size):
    """torch's fused kernel on all queries: little memory, but no chunks."""
    return F.scaled_dot_product_attention(Q, K, V)


def chunks_off_by_one(Q, K, V, chunk_size):
    """Q[:, i:i + chunk_size - 1]: one query of every chunk is lost."""
    return torch.cat([chunked_reference(Q[:, i:i + chunk_size - 1], K, V, chunk_size)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def cat_along_batch(Q, K, V, chunk_size):
    return torch.cat([chunked_reference(Q[:, i:i + chunk_size], K, V, chunk_size)
                      for i in range(0, Q.shape[1], chunk_size)], dim=0)


def online_softmax_keys(Q, K, V, chunk_size):
    """Key chunks with a running maximum and sum (the online softmax), all queries at once:
    exact, but not chunk_size queries at a time. Accepted until red-team round 6 (only square
    cases were counted); with more queries than keys it holds num_queries x chunk_size
    scores, more than the chunk_size x num_keys the exercise allows."""
    scale = Q.shape[-1] ** -0.5
    m = torch.full(Q.shape[:2] + (1,), float("-inf"), dtype=Q.dtype)
    total = torch.zeros_like(m)
    acc = torch.zeros(Q.shape[:2] + (V.shape[-1],), dtype=Q.dtype)
    for j in range(0, K.shape[1], chunk_size):
        s = Q @ K[:, j:j + chunk_size].transpose(1, 2) * scale
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        e = torch.exp(s - m_new)
        total = total * torch.exp(m - m_new) + e.sum(-1, keepdim=True)
        acc = acc * torch.exp(m - m_new) + e @ V[:, j:j + chunk_size]
        m = m_new
    return acc / total


WRONG = {
    "forgets the 1/sqrt(d) scale": (no_scale, "without the scale"),
    "softmax over the queries": (softmax_over_queries, "over the queries"),
    "drops the last, shorter chunk": (drops_last_chunk, "last, shorter chunk is missing"),
    "chunks the keys with a softmax per chunk": (chunks_the_keys, "cut into chunks"),
    "builds the full matrix, then slices it": (full_matrix_then_chunks,
                                               "more than one chunk's scores at once"),
    "returns a list of chunks": (returns_the_chunks, "list of chunks"),
    "forgets to return": (lambda Q, K, V, c: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
    "float64 output": (lambda Q, K, V, c: chunked_reference(Q, K, V, c).double(), "dtype"),
    # kinds round 1 missed
    "the fused kernel on all queries at once": (fused_all_at_once,
                                                 "queries at once to scaled_dot_product"),
    "chunks one query short": (chunks_off_by_one, "exactly once"),
    "chunks joined along the batch": (cat_along_batch, "has shape"),
    "chunks concatenated in reverse": (
        lambda Q, K, V, c: torch.cat([chunked_reference(Q[:, i:i + c], K, V, c)
                                      for i in range(0, Q.shape[1], c)][::-1], dim=1),
        "concatenate the chunks along the queries"),
}

R1_EXPECTED = {
    "no chunking": "more than one chunk's scores at once",
    "key chunks, per-chunk softmax": "the keys are cut into chunks",
    "drops a shorter last chunk": "the last, shorter chunk is missing",
    "zero-pads the rest instead of a short chunk": "the last, shorter chunk was not computed",
    "scales by sqrt(value_dim)": "the square root of the value size",
    "scales by sqrt(chunk_size)": "the square root of the chunk size",
    "under torch.no_grad()": "no gradient can flow back",
    "detached chunk outputs": "no gradient can flow back",
    "preallocated output filled under no_grad": "no gradient can flow back",
    "exp without max subtraction": "exp() overflows",
    "keeps every chunk's weights": "more than one chunk's scores at once",
    "all scores first, softmax per chunk": "more than one chunk's scores at once",
    "loops over the batch, not the queries": "more than one chunk's scores at once",
    "returns float64": "expected torch.float32",
    "returns (output, n_chunks)": "return only the output tensor",
    "batch 1 only (Q[0], expanded)": "every example of the batch gets the output of example 0",
    "numpy chunks": "no gradient can flow back",
}


def test_check_chunked_attention_accepts_the_reference():
    accepts(checks.check_chunked_attention, chunked_reference)


def test_an_online_softmax_over_all_queries_at_once_is_rejected():
    rejects(checks.check_chunked_attention, online_softmax_keys, "2000 queries, 500 keys",
            "cut the queries, not the keys")


@pytest.mark.parametrize("name", WRONG)
def test_check_chunked_attention_rejects_wrong_solutions(name):
    fn, message = WRONG[name]
    rejects(checks.check_chunked_attention, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_a1", "check_chunked_attention",
                                                 expected=R1_EXPECTED))
def test_check_chunked_attention_rejects_round1(fn, fragment):
    rejects(checks.check_chunked_attention, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_a1", "check_chunked_attention",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_chunked_attention_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_chunked_attention, fn)


def test_the_fused_kernel_is_restored_after_the_check():
    fused = F.scaled_dot_product_attention
    rejects(checks.check_chunked_attention, fused_all_at_once, "at once")
    assert F.scaled_dot_product_attention is fused


def test_failure_message_names_the_case_and_the_values():
    text = rejects(checks.check_chunked_attention,
                   lambda Q, K, V, c: chunked_reference(Q, K, V, c) * 1.01, "Hint:")
    assert "on batch 2, 8 queries" in text and "expected" in text


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_a1_chunked", ("W_",)))
def test_check_chunked_attention_rejects_round2(fn):
    rejects(checks.check_chunked_attention, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_a1_chunked", ("C_", "O_", "Q_")))
def test_check_chunked_attention_accepts_round2_right_solutions(fn):
    accepts(checks.check_chunked_attention, fn)


# -- Round 3 red team (tests/checker_redteam/round3_a1_chunked.py) ---------------------------

@pytest.mark.parametrize("fn", redteam_entries("round3_a1_chunked", ("W_",)))
def test_check_chunked_attention_rejects_round3(fn):
    rejects(checks.check_chunked_attention, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_a1_chunked", ("C_", "O_")))
def test_check_chunked_attention_accepts_round3_right_solutions(fn):
    accepts(checks.check_chunked_attention, fn)


# -- Round 4 red team (tests/checker_redteam/round4_a1_chunked.py): the messages ------------

def keeps_every_chunks_weights(Q, K, V, chunk_size):
    """Keeps each chunk's weights in a list, never concatenated: every tensor it computes is
    one chunk's, but together they hold the whole n x n matrix."""
    kept, outputs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        weights = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2)
                                / math.sqrt(Q.shape[-1]), dim=-1)
        kept.append(weights)
        outputs.append(weights @ V)
    return torch.cat(outputs, dim=1)


def product_summed_over_d(Q, K, V, chunk_size):
    """Scores as a broadcast product summed over d: d times one chunk's scores at once."""
    outputs = []
    for i in range(0, Q.shape[1], chunk_size):
        scores = (Q[:, i:i + chunk_size, None] * K[:, None]).sum(-1) / math.sqrt(Q.shape[-1])
        outputs.append(torch.softmax(scores, dim=-1) @ V)
    return torch.cat(outputs, dim=1)


ROUND4_MESSAGES = {
    # torch.chunk(Q, chunk_size) makes chunk_size chunks: 42 queries each at chunk_size 24
    "W_25_torch_chunk_confuses_count_and_size": ("the scores of 42 queries",
                                                 "torch.chunk(Q, chunk_size, dim=1) cuts Q "
                                                 "into chunk_size pieces"),
    # a fixed chunk of 64, whatever chunk_size says
    "S_02_fixed_chunk_64": ("the scores of 64 queries", "chunk_size=24",
                            "not a fixed size"),
    "W_21_chunk_size_plus_one": ("the scores of 25 queries", "chunk_size + 1 queries"),
    "W_22_chunk_doubled": ("the scores of 48 queries", "not a multiple of it"),
    # the output allocated like Q (d columns), not value_dim
    "W_07_empty_like_Q": ("raised RuntimeError", "value_dim = V.shape[-1] columns"),
}


@pytest.mark.parametrize("name", ROUND4_MESSAGES)
def test_check_chunked_attention_names_the_round4_faults(name):
    rejects(checks.check_chunked_attention, redteam_entry("round4_a1_chunked", name), *ROUND4_MESSAGES[name])


def test_a_float64_chunk_with_named_temporaries_is_accepted():
    """O08: four live float64 chunk buffers still grow like chunk_size x n (it was rejected
    by the peak memory at chunk_size 64 with a hint that chunk_size was unused)."""
    accepts(checks.check_chunked_attention, redteam_entry("round4_a1_chunked", "O_08_float64_manual_named"))


def test_every_chunks_weights_kept_is_caught_by_the_peak_memory():
    rejects(checks.check_chunked_attention, keeps_every_chunks_weights, "peak memory",
            "a list of every chunk's weights")


def test_a_product_summed_over_d_is_named():
    rejects(checks.check_chunked_attention, product_summed_over_d,
            "summed over d holds d times the scores")


# -- Round 5 red team (tests/checker_redteam/round5_a1_chunked.py) -------------------------

ROUND5_MESSAGES = {
    # .view() on transposed (non-contiguous) K and V
    "W_20_view_flattens_keys": ["not contiguous in memory", "Use .reshape()"],
    # .squeeze() drops the size-1 chunk axis at chunk_size=1
    "W_21_squeeze_habit": ["chunk_size=1", ".squeeze() without a dim"],
}


@pytest.mark.parametrize("name", ROUND5_MESSAGES)
def test_round5_messages_point_at_the_fault(name):
    from checker_redteam import round5_a1_chunked as r5

    text = rejects(checks.check_chunked_attention, vars(r5)[name], *ROUND5_MESSAGES[name])
    assert "the last chunk may be shorter" not in text


# -- Round 6 red team (tests/checker_redteam/round6_a1_chunked.py) -------------------------

ROUND6_MESSAGES = {
    # K^T cached by shape: the second call with new tensors of the first case's shapes
    "W_15_cache_KT_by_shape": ["a second call with new Q, K and V",
                               "it is what an earlier call's K (of the same shape) gives",
                               "compute everything from this call's Q, K and V"],
    # all queries at once against chunks of keys (an online softmax): exact values, but
    # num_queries x chunk_size scores, more than chunk_size x num_keys with 2000 queries
    # and 500 keys
    "W_24_online_softmax_key_chunks": ["2000 queries, 500 keys", "shape (1, 2000, 24)",
                                       "the scores of all 2000 queries for 24 keys",
                                       "cut the queries, not the keys"],
}


@pytest.mark.parametrize("name", ROUND6_MESSAGES)
def test_round6_messages_point_at_the_fault(name):
    rejects(checks.check_chunked_attention, redteam_entry("round6_a1_chunked", name),
            *ROUND6_MESSAGES[name])


def cached_values(Q, K, V, chunk_size, _kept={}):
    """Keeps the first V of each shape (a mutable default argument)."""
    V = _kept.setdefault(tuple(V.shape), V)
    return chunked_reference(Q, K, V, chunk_size)


def test_values_kept_from_an_earlier_call_are_named():
    rejects(checks.check_chunked_attention, cached_values,
            "it is what an earlier call's V (of the same shape) gives")


def test_key_blocks_with_all_queries_pass_the_square_case_and_fail_the_other():
    """The writer's S01 holds num_queries x chunk_size scores: no more than chunk_size x n on
    1000 queries and keys (why it passed round 6), four times more on 2000 and 500."""
    from book.checks import a1

    fn = redteam_entry("round6_a1_chunked", "W_24_online_softmax_key_chunks")
    X = torch.randn(1, 1000, 8)
    a1._largest_chunk(fn, X, X, X, 24, "square")                  # passes
    Q, K, V = (torch.randn(1, n, 4) for n in (2000, 500, 500))
    with pytest.raises(checks.CheckFailed, match="48000 numbers"):
        a1._largest_chunk(fn, Q, K, V, 24, "more queries than keys")
    a1._largest_chunk(chunked_reference, Q, K, V, 24, "the reference")  # passes


# -- Round 7 red team (tests/checker_redteam/round7_a1_chunked.py) -------------------------

ROUND7_MESSAGES = {
    # K^T / sqrt(d) memoised on the K tensor (lru_cache: identity), stale after K changes in
    # place
    "W_21_lru_cache_KT": ["changed in place since the first call", "the first call's K gives",
                          "depends on an earlier call", "lru_cache"],
    # bfloat16 in, float32 out (the text: the result keeps the inputs' dtype)
    "W_20_bfloat16_returns_float32": ["bfloat16 inputs", "expected torch.bfloat16"],
}


@pytest.mark.parametrize("name", ROUND7_MESSAGES)
def test_round7_messages_point_at_the_fault(name):
    rejects(checks.check_chunked_attention, redteam_entry("round7_a1_chunked", name),
            *ROUND7_MESSAGES[name])


# -- Round 8 red team (tests/checker_redteam/round8_a1_chunked.py) -------------------------

ROUND8_MESSAGES = {
    # chunks larger than chunk_size: rounded up to a multiple of 8, or a fixed 16
    "W_14_round_chunk_up_to_multiple_of_8": ["chunk_size=10", "shape (1, 16, 200)",
                                             "use the chunk_size argument itself"],
    "W_17_fixed_chunk_16_ignores_argument": ["chunk_size=10", "shape (1, 16, 200)"],
    # one maximum per chunk: rows underflow to 0 / 0 (nothing overflows)
    "W_13_max_over_whole_matrix_chunk": ["contains NaN", "0 / 0 is NaN",
                                         "each row's own maximum"],
    # tensor_split parts of chunk_size + 1 (nothing overlaps)
    "W_16_tensor_split_sections": ["shape (1, 25, 1000)", "tensor_split", "Q.split("],
}


@pytest.mark.parametrize("name", ROUND8_MESSAGES)
def test_round8_messages_point_at_the_fault(name):
    rejects(checks.check_chunked_attention, redteam_entry("round8_a1_chunked", name),
            *ROUND8_MESSAGES[name])


def test_the_largest_tensor_counts_only_what_the_function_computes():
    """The check's own comparisons in call() (the in-place check, the earlier results)
    are not counted: a right function passes chunk_size 10 after a 1000-query call."""
    from book.checks import _core, a1

    with _core._results_kept():  # as inside a check: every result is kept and compared
        X = torch.randn(1, 1000, 8)
        a1._largest_chunk(chunked_reference, X, X, X, 24, "1000 queries")
        X = torch.randn(1, 200, 8)
        a1._largest_chunk(chunked_reference, X, X, X, 10, "200 queries")


# -- Round 9 red team (tests/checker_redteam/round9_a1_chunked.py) -------------------------

ROUND9_MESSAGES = {
    # sqrt(d) as a float32 tensor: caught on float64 with d=6 (exact for d=4)
    "W_01_scale_float32_tensor": ["float64 inputs", "d=6", "from the float64 reference"],
    # the 1000 x 1000 run computed another way (dropout, bfloat16): its output is compared
    "W_15_dropout_left_in": ["1000 queries and keys", "drew from torch's global random generator", "no random order, jitter or dropout"],
    "W_16_bfloat16_for_big_inputs": ["1000 queries and keys", "right on the small inputs",
                                     "not bfloat16"],
    # one chunk of every query, through a hand-written softmax without the shift
    "W_27_one_chunk_fast_path_no_shift": ["chunk_size=8 (one chunk holds every query)",
                                          "contains NaN", "each row's own maximum"],
    # V.mT where num_keys == value_dim
    "W_12_values_transposed_when_square": ["as many keys as the value size",
                                           "weights @ V.transpose(1, 2)"],
    # math.isqrt(d): on d=3 it equals no scale; the probe with d=8 names it
    "W_25_isqrt": ["d=3", "sqrt(d) rounded down to an integer, 1 for d = 3",
                   "math.isqrt(d)"],
}


@pytest.mark.parametrize("name", ROUND9_MESSAGES)
def test_round9_messages_point_at_the_fault(name):
    text = rejects(checks.check_chunked_attention, redteam_entry("round9_a1_chunked", name),
                   *ROUND9_MESSAGES[name])
    assert "without the scale" not in text


def test_round9_no_scale_is_not_named_an_integer_sqrt():
    """The isqrt probe (d=8) tells a missing scale from sqrt(d) rounded down (alike on d=3)."""
    text = rejects(checks.check_chunked_attention, no_scale, "without the scale")
    assert "rounded down" not in text


def test_round9_isqrt_is_named_where_d_tells_it_apart():
    """On d=8 (60 queries) sqrt(d) rounded down is 2, neither 1 nor sqrt(8): named there
    without the probe (the d=2 and d=3 cases are skipped here by a right answer on them)."""
    def isqrt_from_d8(Q, K, V, chunk_size):
        d = Q.shape[-1]
        scale = math.isqrt(d) if d == 8 else math.sqrt(d)
        return chunked_reference(Q * math.sqrt(d) / scale, K, V, chunk_size)
    rejects(checks.check_chunked_attention, isqrt_from_d8, "d=8",
            "sqrt(d) rounded down to an integer, 2 for d = 8")


# -- Round 10 red team (tests/checker_redteam/round10_a1_chunked.py) -----------------------

def test_round10_one_key_view_of_V():
    """V.expand(...) for one key: with one query the output is V's own memory."""
    text = rejects(checks.check_chunked_attention,
                   redteam_entry("round10_a1_chunked", "W_22_single_key_returns_V_view"),
                   "1 query, 1 key", "shares memory with the argument V", "out.mul_(2)",
                   ".clone()")
    assert "without the scale" not in text


def test_round10_one_key_shortcut_with_its_own_tensor_is_accepted():
    """The same shortcut with .clone() is right (values, gradients, memory)."""
    def one_key_clone(Q, K, V, chunk_size):
        if K.shape[1] == 1:
            return V.expand(Q.shape[0], Q.shape[1], V.shape[-1]).clone()
        return chunked_reference(Q, K, V, chunk_size)
    accepts(checks.check_chunked_attention, one_key_clone)


def test_round10_one_key_shortcut_without_a_graph_is_caught():
    """A one-key shortcut that leaves autograd: the one-key gradient case catches it."""
    def one_key_detached(Q, K, V, chunk_size):
        if K.shape[1] == 1:
            return V.detach().expand(Q.shape[0], Q.shape[1], V.shape[-1]).clone()
        return chunked_reference(Q, K, V, chunk_size)
    rejects(checks.check_chunked_attention, one_key_detached, "1 key", "(one key, gradients)")


@pytest.mark.parametrize("size, what", [
    (lambda Q, K: Q.shape[1], "the square root of the number of queries, 8."),
    (lambda Q, K: K.shape[1], "the square root of the number of keys, 8.")])
def test_round10_num_queries_and_num_keys_are_told_apart(size, what):
    """The first case has 8 queries and 8 keys: a probe with 5 and 7 tells the two apart."""
    def scaled_by(Q, K, V, chunk_size):
        return chunked_reference(Q * math.sqrt(Q.shape[-1]) / math.sqrt(size(Q, K)), K, V,
                                 chunk_size)
    text = rejects(checks.check_chunked_attention, scaled_by, "8 queries, 8 keys", what)
    assert "alike" not in text


def test_round10_sizes_alike_everywhere_are_both_named():
    """A scale that is sqrt(8) wherever there are 8 queries and 8 keys, and right elsewhere:
    the probe cannot tell, so both sizes are named."""
    def sqrt8_when_square(Q, K, V, chunk_size):
        scale = math.sqrt(8) if Q.shape[1] == K.shape[1] == 8 else math.sqrt(Q.shape[-1])
        return chunked_reference(Q * math.sqrt(Q.shape[-1]) / scale, K, V, chunk_size)
    rejects(checks.check_chunked_attention, sqrt8_when_square,
            "the number of keys or of the number of queries, 8 (alike on this case)")


# -- Round 11 red team (tests/checker_redteam/round11_a1_chunked.py) -----------------------

def test_round11_scores_clamped_to_float16_range_are_named():
    """Scores clamped to +-1e4 for every dtype: float32 scores of 1e5 become equal."""
    rejects(checks.check_chunked_attention,
            redteam_entry("round11_a1_chunked", "W_15_clamp_scores_1e4"),
            "float32 inputs whose scores are 1e5 to 2e5", "the scores are clamped to",
            "do not clamp")


def test_round11_right_variants_pass_the_scores_beyond_float16():
    """Scores of 1e5 to 2e5 (exact in float32, d = 1): a softmax through log-sum-exp, which
    rounds a number near 1e5 (about 1e-2 off in float32), and the scale split between Q and
    K (as torch's attention does) pass."""
    def lse(Q, K, V, chunk_size):
        outs = []
        for i in range(0, Q.shape[1], chunk_size):
            s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
            outs.append(torch.exp(s - torch.logsumexp(s, -1, keepdim=True)) @ V)
        return torch.cat(outs, dim=1)

    def split_scale(Q, K, V, chunk_size):
        r = Q.shape[-1] ** -0.25
        return torch.cat([torch.softmax((Q[:, i:i + chunk_size] * r) @ (K * r).mT, -1) @ V
                          for i in range(0, Q.shape[1], chunk_size)], dim=1)
    accepts(checks.check_chunked_attention, lse)
    accepts(checks.check_chunked_attention, split_scale)


# -- The condition matrix (session 12): wrong solutions only the matrix rejects -----------

def _chunks(Q, K, V, chunk_size, detach_half_total=False):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        scores = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        exps = (scores - scores.amax(-1, keepdim=True)).exp()
        total = exps.sum(-1, keepdim=True)
        if detach_half_total and Q.dtype in (torch.float16, torch.bfloat16):
            total = total.detach()
        outs.append(exps / total @ V)
    return torch.cat(outs, dim=1)


def _chunked_half_detached_total(Q, K, V, chunk_size):
    return _chunks(Q, K, V, chunk_size, detach_half_total=True)


_KEYS_MEMO = {}


def _chunked_training_cache_of_keys(Q, K, V, chunk_size):
    """While training, K^T / sqrt(d) is kept per shape ('K is the same within a step')."""
    key = (K.shape, K.dtype, K.requires_grad)
    if K.requires_grad and key in _KEYS_MEMO:
        keys_t = _KEYS_MEMO[key]
    else:
        keys_t = K.transpose(1, 2) / math.sqrt(K.shape[-1])
        if K.requires_grad:
            _KEYS_MEMO[key] = keys_t.detach()
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ keys_t, dim=-1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def _chunked_float32_when_training(Q, K, V, chunk_size):
    """float64 with gradients computed in float32 ('float64 training is slow')."""
    if Q.requires_grad and Q.dtype == torch.float64:
        return _chunks(Q.float(), K.float(), V.float(), chunk_size).double()
    return _chunks(Q, K, V, chunk_size)


@pytest.mark.parametrize("fn, fragment", [
    (_chunked_half_detached_total,
     "(argument 1) is wrong on batch 2, 5 queries, 7 keys, d=3, "
     "value size 2, chunk_size=2 (the last chunk has 1 query), float16"),
    (_chunked_training_cache_of_keys,
     "a second call, with other values of the same shapes"),
    (_chunked_float32_when_training,
     "from the float64 reference on batch 2, 5 queries, 7 keys, d=3, value size 2, "
     "chunk_size=2 (the last chunk has 1 query), float64 arguments"),
])
def test_check_chunked_condition_matrix_rejects(fn, fragment):
    _KEYS_MEMO.clear()
    rejects(checks.check_chunked_attention, fn, fragment)


# -- Round 12 red team (tests/checker_redteam/round12_a1_chunked.py) ----------------------

@pytest.mark.parametrize("name, fragments", [
    ("W_11_single_key_returns_V_expand_clone", ["4 equal keys", "the mean of the values"]),
    ("W_13_half_scores_no_upcast_big", ["scores near 100 and 50", "contains NaN"]),
    ("W_16_float16_through_bfloat16", ["one number in bfloat16", "never through bfloat16"]),
])
def test_round12_messages_point_at_the_fault(name, fragments):
    rejects(checks.check_chunked_attention, redteam_entry("round12_a1_chunked", name),
            *fragments)


def test_round9_exp_then_power_has_nan_gradients_under_huge_scores():
    """Round 9's W_06 (was O_06): exp(s) ** (1 / sqrt(d)) has NaN gradients wherever exp(s)
    underflows; the matrix compares the gradients with Q times 1e5."""
    rejects(checks.check_chunked_attention,
            redteam_entry("round9_a1_chunked", "W_06_exp_then_power_scale"),
            "Q times 1e5")


# -- Round 13 red team (tests/checker_redteam/round13_a1_chunked.py) ----------------------

@pytest.mark.parametrize("name, fragments", [
    ("W_06_numpy_scores", ["computed a tensor of 1000000 numbers at once", "aten.bmm.out",
                           "through out= into a buffer"]),
    ("W_12_bf16_via_half", ["V times 1e5 (beyond float16's range), bfloat16",
                            "never through float16"]),
    ("W_20_chunk_by_product", ["batch 1, 67 queries, 4099 keys", "the scores of 65 queries"]),
])
def test_round13_messages_point_at_the_fault(name, fragments):
    rejects(checks.check_chunked_attention, redteam_entry("round13_a1_chunked", name),
            *fragments)


def _chunked_whole_in_numpy(Q, K, V, chunk_size):
    """The whole computation in NumPy without autograd (no torch operation for the counter
    or the profiler to see): tracemalloc sees its n x n scores."""
    if Q.requires_grad or K.requires_grad or V.requires_grad or Q.dtype == torch.bfloat16:
        return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2)
                                        / math.sqrt(Q.shape[-1]), dim=-1) @ V
                          for i in range(0, Q.shape[1], chunk_size)], dim=1)
    q, k, v = (t.detach().numpy() for t in (Q, K, V))
    s = q @ k.transpose(0, 2, 1) / np.sqrt(np.array(q.shape[-1], dtype=q.dtype))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return torch.from_numpy(np.ascontiguousarray((s / s.sum(axis=-1, keepdims=True)) @ v))


def test_round13_whole_matrix_in_numpy_is_seen_by_tracemalloc():
    rejects(checks.check_chunked_attention, _chunked_whole_in_numpy,
            "outside torch's tensors", "tracemalloc")


# -- Round 14 red team (tests/checker_redteam/round14_a1_chunked.py) ----------------------

@pytest.mark.parametrize("name, fragments", [
    ("W_21_full_for_float64", ["float64 inputs: batch 1, 200 queries and keys",
                               "40000 numbers at once", "but float64 inputs were not"]),
    ("W_22_full_for_float16", ["float16 inputs: batch 1, 200 queries and keys",
                               "40000 numbers at once", "but float16 inputs were not"]),
    ("W_23_full_when_grad", ["float32 Q, K and V that require grad", "40000 numbers at once",
                             "but inputs that require grad were not"]),
    ("W_25_full_when_batch_gt1", ["float32 inputs of batch 2", "80000 numbers at once "
                                  "(40000 per example)", "but a batch of 2 were not"]),
    ("W_34_scores_out_of_band_numpy_free_cache", ["1000000 numbers at once", "aten.bmm.out",
                                                  "through out= into a buffer"]),
])
def test_round14_messages_point_at_the_fault(name, fragments):
    rejects(checks.check_chunked_attention, redteam_entry("round14_a1_chunked", name),
            *fragments)


def _chunked_into_a_slice_in_place(Q, K, V, chunk_size):
    """Every score written in place into a slice of a buffer kept between calls (no new
    tensor larger than a chunk): the count sees what an in-place operation writes."""
    b, m, n = Q.shape[0], Q.shape[1], K.shape[1]
    buf = _chunked_into_a_slice_in_place.__dict__.setdefault("buf", {})
    if buf.get(Q.dtype) is None or buf[Q.dtype].numel() < b * m * n:
        buf[Q.dtype] = torch.zeros(4 * b * m * n, dtype=Q.dtype)
    s = buf[Q.dtype][b * m * n:2 * b * m * n].view(b, m, n)
    for i in range(0, m, chunk_size):
        s[:, i:i + chunk_size] = Q[:, i:i + chunk_size] @ K.transpose(1, 2)
    s.mul_(1 / math.sqrt(Q.shape[-1]))
    return torch.cat([torch.softmax(s[:, i:i + chunk_size], -1) @ V
                      for i in range(0, m, chunk_size)], dim=1)


def test_round14_scores_written_in_place_into_a_kept_buffer_are_counted():
    from book.checks import a1
    X = torch.randn(1, 200, 8, generator=torch.Generator().manual_seed(1))
    _chunked_into_a_slice_in_place(X, X, X, 10)  # the buffer exists before the counted call
    with pytest.raises(checks.CheckFailed, match="40000 numbers at once.*aten.mul_"):
        a1._largest_chunk(_chunked_into_a_slice_in_place, X, X, X, 10, "batch 1, 200 keys")
