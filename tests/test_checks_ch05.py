"""Chapter 5's checkers pass right reshapes (also unusual ones) and reject wrong ones, saying
where entries went: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch05.py), and kinds that round 1 missed."""
import pytest
import torch

from book import checks
from book.attention import transpose_output, transpose_qkv
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects


def stub(*args):
    raise NotImplementedError("write your solution here")


def p_of(X, h):
    return X.shape[-1] // h


WRONG_QKV = {  # name -> (function, part of the expected message)
    "reshape without permute (positions and features mixed)":
        (lambda X, h: X.reshape(X.shape[0] * h, X.shape[1], p_of(X, h)), "wrong layout"),
    "splits the sequence axis instead of the features":
        (lambda X, h: X.reshape(X.shape[0], h, X.shape[1], p_of(X, h))
         .reshape(-1, X.shape[1], p_of(X, h)), "wrong layout"),
    "interleaved heads (head index varies fastest)":
        (lambda X, h: X.reshape(X.shape[0], X.shape[1], p_of(X, h), h).permute(0, 3, 1, 2)
         .reshape(-1, X.shape[1], p_of(X, h)), "wrong layout"),
    "heads before examples in the folded axis":
        (lambda X, h: X.reshape(X.shape[0], X.shape[1], h, -1).permute(2, 0, 1, 3)
         .reshape(-1, X.shape[1], p_of(X, h)), "wrong layout"),
    "keeps a 4-D (batch, heads, n, p) result":
        (lambda X, h: X.reshape(X.shape[0], X.shape[1], h, -1).permute(0, 2, 1, 3),
         r"shape \(2, 2, 3, 4\)"),
    "ignores num_heads (always 2)":
        (lambda X, h: transpose_qkv(X, 2), "has shape"),
    "view after permute crashes":
        (lambda X, h: X.reshape(X.shape[0], X.shape[1], h, -1).permute(0, 2, 1, 3)
         .view(-1, X.shape[1], p_of(X, h)), "RuntimeError"),
    "changes its input": (lambda X, h: transpose_qkv(X.mul_(1.0).add_(1.0), h), "in place"),
    "forgets to return": (lambda X, h: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "view straight to (batch * heads, n, p)":
        (lambda X, h: X.view(X.shape[0] * h, X.shape[1], -1), "wrong layout"),
    "clone().detach()": (lambda X, h: transpose_qkv(X, h).clone().detach(),
                         "no gradient can flow back"),
    "float16 result": (lambda X, h: transpose_qkv(X, h).half(), "dtype"),
}

WRONG_OUTPUT = {
    "reshape without permute":
        (lambda X, h: X.reshape(X.shape[0] // h, X.shape[1], -1), "wrong layout"),
    "heads before examples":
        (lambda X, h: X.reshape(h, -1, X.shape[1], X.shape[2]).permute(1, 2, 0, 3)
         .reshape(X.shape[0] // h, X.shape[1], -1), "wrong layout"),
    "interleaves the head features":
        (lambda X, h: X.reshape(-1, h, X.shape[1], X.shape[2]).permute(0, 2, 3, 1)
         .reshape(X.shape[0] // h, X.shape[1], -1), "wrong layout"),
    "keeps 4-D (batch, n, heads, p)":
        (lambda X, h: X.reshape(-1, h, X.shape[1], X.shape[2]).permute(0, 2, 1, 3), "has shape"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "reshape to (batch, n, -1) without unfolding": (lambda X, h: X.reshape(
        X.shape[0] // h, X.shape[1], -1), "wrong layout"),
    "a fixed number of heads (2)": (lambda X, h: transpose_output(X, 2), "has shape"),
    "rebuilt with torch.tensor": (lambda X, h: torch.tensor(transpose_output(X, h).tolist()),
                                  "no gradient can flow back"),
}

R1_EXPECTED = {
    "qkv: one reshape, no permute": "split the LAST axis",
    "qkv: features split (p, heads): interleaved heads": "head h is the slice",
    "qkv: permute(2, 0, 1, 3): heads-outer rows": "example i // num_heads",
    "qkv: transpose(1, 2) then reshape": "wrong layout",
    "qkv: detached": "no gradient can flow back",
    "qkv: numpy round trip": "no gradient can flow back",
    "qkv: p hard-coded as num_heads": "not a fixed number",
    "qkv: permute(0, 2, 3, 1): (n, p) swapped": "wrong layout",
    "qkv: no final reshape (4-D result)": "the result must be 3-D",
    "qkv: under torch.no_grad()": "no gradient can flow back",
    "qkv: cat(chunk(h, -1), dim=0): heads-outer rows": "example i // num_heads",
    "qkv: float p = d / h in reshape": "use num_hiddens // num_heads",
    "output: one reshape, no permute": "reverse the three steps",
    "output: reshape(h, b, n, p): heads-outer rows": "wrong layout",
    "output: permute(0, 2, 3, 1): interleaved features": "wrong layout",
    "output: detached": "no gradient can flow back",
    "output: numpy round trip": "no gradient can flow back",
    "output: .view after permute (always raises)": "Use .reshape()",
    "output: returns (b, n, h, p)": "the result must be 3-D",
    "output: cat(chunk(h, dim=0), -1): heads-outer rows": "wrong layout",
    "output: final reshape uses batch*heads as batch": "the batch is X.shape[0] // num_heads",
    "output: transpose(1, 2) before unfolding": "wrong layout",
    "output: under torch.no_grad()": "no gradient can flow back",
}


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch05", "check_transpose_qkv",
                                                 expected=R1_EXPECTED))
def test_check_transpose_qkv_rejects_round1(fn, fragment):
    rejects(checks.check_transpose_qkv, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch05", "check_transpose_output",
                                                 expected=R1_EXPECTED))
def test_check_transpose_output_rejects_round1(fn, fragment):
    rejects(checks.check_transpose_output, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch05", "check_transpose_qkv",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_transpose_qkv_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_transpose_qkv, fn)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch05", "check_transpose_output",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_transpose_output_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_transpose_output, fn)


def test_check_transpose_qkv_accepts_the_reference():
    assert "passed" in checks.check_transpose_qkv(transpose_qkv)


def test_check_transpose_qkv_accepts_an_equivalent_solution():
    def with_transpose(X, h):  # transpose(1, 2) is permute(0, 2, 1, 3)
        return X.unflatten(-1, (h, -1)).transpose(1, 2).flatten(0, 1)
    assert "passed" in checks.check_transpose_qkv(with_transpose)


@pytest.mark.parametrize("name", WRONG_QKV)
def test_check_transpose_qkv_rejects_wrong_solutions(name):
    fn, message = WRONG_QKV[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_transpose_qkv(fn)


def test_wrong_layouts_have_the_right_shape_and_fail_only_on_layout():
    """At least four wrong solutions give the right shape: only the layout check catches them."""
    X = torch.randn(2, 3, 8)
    right_shape = [name for name, (fn, message) in WRONG_QKV.items() if message == "wrong layout"]
    assert len(right_shape) >= 4
    for name in right_shape:
        assert WRONG_QKV[name][0](X.clone(), 2).shape == transpose_qkv(X, 2).shape, name


def test_layout_message_says_where_the_entry_came_from():
    with pytest.raises(AssertionError) as info:
        checks.check_transpose_qkv(WRONG_QKV["reshape without permute (positions and features mixed)"][0])
    text = str(info.value)
    assert "holds X[0, 0, 4] but should hold X[0, 1, 0]" in text and "Hint:" in text


def test_check_transpose_output_accepts_the_reference():
    assert "passed" in checks.check_transpose_output(transpose_output)


@pytest.mark.parametrize("name", WRONG_OUTPUT)
def test_check_transpose_output_rejects_wrong_solutions(name):
    fn, message = WRONG_OUTPUT[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_transpose_output(fn)


@pytest.mark.parametrize("bad", [None, 42])
def test_checkers_reject_non_functions(bad):
    with pytest.raises(AssertionError, match="None|function"):
        checks.check_transpose_qkv(bad)


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch05_qkv", ("W_",)))
def test_check_transpose_qkv_rejects_round2(fn):
    rejects(checks.check_transpose_qkv, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch05_qkv", ("C_", "O_", "Q_")))
def test_check_transpose_qkv_accepts_round2_right_solutions(fn):
    accepts(checks.check_transpose_qkv, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch05_out", ("W_",)))
def test_check_transpose_output_rejects_round2(fn):
    rejects(checks.check_transpose_output, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch05_out", ("C_", "O_", "Q_")))
def test_check_transpose_output_accepts_round2_right_solutions(fn):
    accepts(checks.check_transpose_output, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch05_*.py; tests/test_checks_redteam.py
# runs every entry): inputs that are not contiguous and float64 inputs ----------------

R4_QKV = {
    "W_09_float32_cast": "has dtype torch.float32 on X of shape (2, 3, 8) with "
                         "num_heads=2, in float64; expected torch.float64",
    "W_16_as_strided_assumes_contiguous": "This X is not contiguous",
    "W_17_float16_roundtrip": "which is not an entry of the input",
    "W_20_contiguous_only_view_trick": "This X is not contiguous",
}
R4_OUTPUT = {
    "W_08_float32_cast": "in float64; expected torch.float64",
    "W_15_as_strided_assumes_contiguous": "This X is not contiguous",
}


@pytest.mark.parametrize("name", R4_QKV)
def test_check_transpose_qkv_round4_messages(name):
    rejects(checks.check_transpose_qkv, redteam_entry("round4_ch05_transpose_qkv", name),
            R4_QKV[name])


@pytest.mark.parametrize("name", R4_OUTPUT)
def test_check_transpose_output_round4_messages(name):
    rejects(checks.check_transpose_output,
            redteam_entry("round4_ch05_transpose_output", name), R4_OUTPUT[name])


def test_a_solution_that_reads_the_storage_as_contiguous_is_told_so():
    def through_storage(X, h):  # right only when X is contiguous
        flat = torch.as_strided(X, (X.numel(),), (1,), X.storage_offset())
        return transpose_qkv(flat.reshape(X.shape), h)

    text = rejects(checks.check_transpose_qkv, through_storage, "not contiguous",
                   "use only reshape and permute")
    assert "right on a contiguous X with the same values" in text


# -- Round 5 red team (tests/checker_redteam/round5_ch05_*.py; tests/test_checks_redteam.py
# runs every entry): the messages
R5_QKV = {
    "W_02_head_major": "The rows are ordered head by head",
    "W_03_chunk_cat": "The rows are ordered head by head",
}
R5_OUTPUT = {
    "W_11_mean_heads": "computes new values",
}


@pytest.mark.parametrize("name", R5_QKV)
def test_check_transpose_qkv_round5_messages(name):
    rejects(checks.check_transpose_qkv, redteam_entry("round5_ch05_transpose_qkv", name),
            R5_QKV[name])


@pytest.mark.parametrize("name", R5_OUTPUT)
def test_check_transpose_output_round5_messages(name):
    rejects(checks.check_transpose_output,
            redteam_entry("round5_ch05_transpose_output", name), R5_OUTPUT[name],
            "no mean, sum")


def test_an_index_cached_under_the_shape_only_is_named():
    """Round 7 (W07, W09): a gather index cached under X.shape, without num_heads, is
    caught by calls on one X shape with num_heads 2, 3, 4 and 6, and named."""
    rejects(checks.check_transpose_qkv,
            redteam_entry("round7_ch05_transpose_qkv", "W_07_gather_cache_without_heads"),
            "cached under X.shape without num_heads")
    rejects(checks.check_transpose_output,
            redteam_entry("round7_ch05_transpose_output", "W_09_index_cache_without_heads"),
            "cached under X.shape without num_heads")


def test_a_buffer_or_memo_shared_by_two_inputs_of_one_shape_is_caught():
    """Round 9 (qkv W18/W19, output W11/W15): an output buffer per shape filled with copy_
    (it keeps autograd), and a memo keyed on the shape and X[0, 0, 0], are caught by a second
    X of an earlier shape, -X (the same first entry, every other entry different)."""
    for checker, module, buffer, memo in (
            (checks.check_transpose_qkv, "round9_ch05_transpose_qkv",
             "W_18_reused_buffer_with_grad", "W_19_returns_previous_result_same_shape"),
            (checks.check_transpose_output, "round9_ch05_transpose_output",
             "W_11_reused_buffer_with_grad", "W_15_memo_keyed_on_first_entry")):
        rejects(checker, redteam_entry(module, buffer),
                "changed what it returned earlier", "a second X of that shape",
                "do not keep an output buffer")
        rejects(checker, redteam_entry(module, memo),
                "returns its result of an earlier call", "a memo keyed on")


def test_an_integer_input_keeps_its_dtype():
    """Round 11 (qkv W_20, output W_17): X * 1.0 makes an int64 X float32; both functions
    only move entries, so they keep any dtype (two int64 cases)."""
    for checker, module, name in (
            (checks.check_transpose_qkv, "round11_ch05_transpose_qkv", "W_20_times_one_float"),
            (checks.check_transpose_output, "round11_ch05_transpose_output",
             "W_17_times_one_float")):
        rejects(checker, redteam_entry(module, name), "has dtype torch.float32",
                "in int64", "expected torch.int64")


# The condition matrix (issue 12, session 12): wrong solutions that only its conditions reject.
def _half_in_float32(move):
    """float16/bfloat16 moved in float32 'for safety', the result left in float32."""
    def fn(X, h):
        return move(X.float() if X.dtype in (torch.float16, torch.bfloat16) else X, h)
    return fn


def _bfloat16_in_float32(move):
    def fn(X, h):
        return move(X.float(), h) if X.dtype == torch.bfloat16 else move(X, h)
    return fn


def _cached_while_training(move):
    """A result cache for inputs that require grad, keyed on the shape, num_heads and dtype."""
    cache = {}

    def fn(X, h):
        if not X.requires_grad:
            return move(X, h)
        key = (tuple(X.shape), h, X.dtype)
        if key not in cache:
            cache[key] = move(X, h)
        return cache[key]
    return fn


def _one_example_repeated(X, h):
    """An expanded X (stride 0: every example the same) split once and repeated: in the
    wrong order (repeat_interleave puts the copies of one head together)."""
    if X.stride(0) == 0:
        return transpose_qkv(X[:1], h).repeat_interleave(X.shape[0], dim=0)
    return transpose_qkv(X, h)


@pytest.mark.parametrize("fn, fragments", [
    (_half_in_float32(transpose_qkv), ("dtype torch.float32", "float16 arguments")),
    (_cached_while_training(transpose_qkv), ("a second call, with other values",)),
    (_one_example_repeated, ("expanded along its first axis",))])
def test_the_condition_matrix_rejects_transpose_qkvs_the_cases_miss(fn, fragments):
    rejects(checks.check_transpose_qkv, fn, *fragments)


@pytest.mark.parametrize("fn, fragments", [
    (_half_in_float32(transpose_output), ("dtype torch.float32", "float16 arguments")),
    (_bfloat16_in_float32(transpose_output), ("dtype torch.float32", "bfloat16 arguments")),
    (_cached_while_training(transpose_output), ("a second call, with other values",))])
def test_the_condition_matrix_rejects_transpose_outputs_the_cases_miss(fn, fragments):
    rejects(checks.check_transpose_output, fn, *fragments)


def test_round12_a_zero_one_matmul_is_told_that_inf_times_zero_is_nan():
    """Red-team round 12: moving entries with a 0/1 matrix is exact on finite numbers; the
    condition matrix's +inf/-inf arguments show the NaN it spreads."""
    from checker_redteam import round12_ch05_transpose_output as out
    from checker_redteam import round12_ch05_transpose_qkv as qkv

    for checker, fn in ((checks.check_transpose_qkv, qkv.W_01_permutation_matmul),
                        (checks.check_transpose_qkv, qkv.W_11_einsum_with_ones),
                        (checks.check_transpose_output, out.W_01_identity_matmul_copy),
                        (checks.check_transpose_output, out.W_12_einsum_selection)):
        rejects(checker, fn, "contains NaN", "arguments holding +inf and -inf",
                "inf * 0 is NaN")


R13 = {  # red-team round 13 (writer C): the message names the fault
    "W_23_cache_keyed_on_checksum": ("X.flip(1)", "returns its result of an earlier call",
                                     "same sum and sum of squares", "checksum"),
    "W_24_chunked_batch_drops_tail": ("(9, 67, 12)", "rows are missing",
                                      "the last, shorter chunk"),
    "W_25_long_seq_fast_path": ("(9, 67, 12)", "wrong layout"),
}


@pytest.mark.parametrize("name", R13)
@pytest.mark.parametrize("checker, module", [
    (checks.check_transpose_qkv, "round13_ch05_transpose_qkv"),
    (checks.check_transpose_output, "round13_ch05_transpose_output")])
def test_round13_messages(checker, module, name):
    fragments = R13[name]
    if module.endswith("output") and name != "W_23_cache_keyed_on_checksum":
        fragments = ("(27, 67, 4)",) + fragments[1:]
    rejects(checker, redteam_entry(module, name), *fragments)
