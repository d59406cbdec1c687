"""Chapter 10's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that name the input, the expected and the seen values, and point at the fault
(issue 12's kinds: broken gradients, float16 and float32, only right on easy inputs such as
positions from 0, powers of 2 or small n, not what the exercise asks, messages)."""
import math

import pytest
import torch

from book import positions
from book.checks import ch10 as checks
from checkers_support import accepts, redteam_entries, redteam_entry, rejects


def stub(*args):
    raise NotImplementedError("write your solution here")


# -- Exercise 10.1: apply_rope ------------------------------------------------------------------

def _even(x):
    if x.shape[-1] % 2:
        raise ValueError(f"the feature size must be even, got {x.shape[-1]}")


def rope(x, positions, theta=None, sign=1.0, angle_dtype=torch.float32):
    """The solution notebook's answer, with knobs for the wrong ones below."""
    _even(x)
    d = x.shape[-1]
    if theta is None:
        theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=angle_dtype) / d)   # (d/2,)
    angles = positions.to(angle_dtype)[:, None] * theta.to(angle_dtype)    # (n, d/2)
    cos, sin = angles.cos().to(x.dtype), sign * angles.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def rope_complex(x, positions):  # unusual: the chapter's complex multiplication
    _even(x)
    return positions_module().apply_rope(x, positions)


def rope_matrices(x, positions):  # unusual: a (d, d) rotation matrix per position
    _even(x)
    return positions_module().apply_rope_rotation(x, positions)


def rope_rotate_pairs(x, positions):  # unusual: x cos + rot(x) sin, cos and sin repeated
    _even(x)
    d = x.shape[-1]
    theta = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = (positions.double()[:, None] * theta).repeat_interleave(2, dim=-1)  # (n, d)
    rotated = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
    return x * angles.cos().to(x.dtype) + rotated * angles.sin().to(x.dtype)


def rope_float64(x, positions):  # unusual: everything in float64, cast back at the end
    return rope(x.double(), positions, angle_dtype=torch.float64).to(x.dtype)


def positions_module():
    return positions


def ignores_positions(x, positions):
    return rope(x, torch.arange(x.shape[-2]))


def relative_to_first(x, positions):
    return rope(x, positions - positions[0])


def half_pairing(x, positions):  # GPT-NeoX / Hugging Face's rotate_half convention
    _even(x)
    return positions_module().apply_rope(x, positions, "half")


def clockwise(x, positions):
    return rope(x, positions, sign=-1.0)


def halves_layout(x, positions):  # the rotated pairs put back with torch.cat
    _even(x)
    y = rope(x, positions)
    return torch.cat([y[..., 0::2], y[..., 1::2]], dim=-1)


def exponent_j_over_d(x, positions):  # theta_j = 10000^(-j/d)
    d = x.shape[-1]
    return rope(x, positions, theta=10000.0 ** (-torch.arange(d // 2) / d))


def no_minus(x, positions):  # theta_j = 10000^(2j/d)
    d = x.shape[-1]
    return rope(x, positions, theta=10000.0 ** (torch.arange(0, d, 2) / d))


def one_frequency(x, positions):  # every pair rotated by the position itself
    return rope(x, positions, theta=torch.ones(x.shape[-1] // 2))


def uses_n_for_d(x, positions):  # the frequencies from x.shape[-2] (n), not d
    n, d = x.shape[-2], x.shape[-1]
    return rope(x, positions, theta=10000.0 ** (-torch.arange(0, d, 2) / n))


def angles_in_x_dtype(x, positions):  # float16 angles: 2000 rad to the nearest 1
    return rope(x, positions, angle_dtype=x.dtype)


def detaches(x, positions):
    return rope(x.detach(), positions)


def through_numpy(x, positions):
    return torch.from_numpy(rope(x.detach(), positions).numpy())


def in_place(x, positions):
    y = rope(x, positions)
    if not x.requires_grad:
        x.copy_(y)
        return x
    return y


def float32_for_float16(x, positions):
    return rope(x.float(), positions)


def float64_result(x, positions):
    return rope(x.double(), positions, angle_dtype=torch.float64)


def scales_instead_of_rotating(x, positions):  # x cos + x sin: no mixing of the pair
    _even(x)
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2) / d)
    angles = (positions[:, None] * theta).repeat_interleave(2, dim=-1)
    return x * angles.cos() + x * angles.sin()


def silently_drops_a_feature(x, positions):  # odd d: rotates the first d - 1 features
    d = x.shape[-1] - x.shape[-1] % 2
    return torch.cat([rope(x[..., :d], positions), x[..., d:]], dim=-1)


def crashes_on_odd(x, positions):  # odd d: a reshape error from inside torch
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2) / d)
    angles = positions[:, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def bare_value_error(x, positions):
    if x.shape[-1] % 2:
        raise ValueError()
    return rope(x, positions)


WRONG_ROPE = {
    "ignores positions (0..n-1)": (ignores_positions, "positions 0..n-1"),
    "rotates at positions - positions[0]": (relative_to_first, "KV cache"),
    "first half with second half (rotate_half)": (half_pairing, "rotate_half"),
    "rotates clockwise": (clockwise, "clockwise"),
    "pairs put back as two halves": (halves_layout, "wrong places"),
    "theta_j = 10000^(-j/d)": (exponent_j_over_d, "pair 0 (frequency 1) is right"),
    "theta_j = 10000^(+2j/d)": (no_minus, "pair 0 (frequency 1) is right"),
    "one frequency for every pair": (one_frequency, "pair 0 (frequency 1) is right"),
    "frequencies from n, not d": (uses_n_for_d, "frequencies"),
    "angles in float16": (angles_in_x_dtype, "float16"),
    "detaches x": (detaches, "no gradient"),
    "a NumPy round trip": (through_numpy, "no gradient"),
    "writes into x": (in_place, "in place"),
    "float32 for float16 input": (float32_for_float16, "dtype"),
    "float64 for float32 input": (float64_result, "dtype"),
    "scales instead of rotating": (scales_instead_of_rotating, "length"),
    "odd size: drops the last feature": (silently_drops_a_feature, "instead of refusing"),
    "odd size: torch's reshape error": (crashes_on_odd, "raise ValueError"),
    "odd size: ValueError without a message": (bare_value_error, "without a message"),
    "forgets to return": (lambda x, positions: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
}


@pytest.mark.parametrize("fn", [rope, rope_complex, rope_matrices, rope_rotate_pairs,
                                rope_float64],
                         ids=["reference", "complex", "matrices", "rotate pairs", "float64"])
def test_check_apply_rope_accepts_right_solutions(fn):
    accepts(checks.check_apply_rope, fn)


@pytest.mark.parametrize("name", WRONG_ROPE)
def test_check_apply_rope_rejects_wrong_solutions(name):
    fn, fragment = WRONG_ROPE[name]
    rejects(checks.check_apply_rope, fn, fragment)


def test_rope_messages_name_the_input_the_expected_and_the_seen_values():
    text = rejects(checks.check_apply_rope, relative_to_first, "positions 100..104",
                   "expected", "got", "Hint:")
    assert "(position 10" in text


def test_rope_verdicts_are_deterministic_and_leave_the_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = [str(pytest.raises(AssertionError, checks.check_apply_rope, fn).value)
             for fn in (clockwise, angles_in_x_dtype)]
    assert torch.equal(torch.get_rng_state(), state)
    again = [str(pytest.raises(AssertionError, checks.check_apply_rope, fn).value)
             for fn in (clockwise, angles_in_x_dtype)]
    assert first == again


# -- Exercise 10.2: alibi_bias ------------------------------------------------------------------

def paper_slopes(h):
    c = 2 ** math.floor(math.log2(h))
    base = [2 ** (-8 * k / c) for k in range(1, c + 1)]
    return base + (paper_slopes(2 * c)[0::2][:h - c] if c < h else [])


def bias_from(slopes, n, dtype=torch.float32):
    m = torch.tensor(slopes, dtype=dtype)
    i = torch.arange(n)
    return -m[:, None, None] * (i[:, None] - i[None, :]).to(dtype)          # (h, n, n)


def alibi(h, n):
    """The solution notebook's answer."""
    return bias_from(paper_slopes(h), n)


def alibi_key_positions(h, n):  # the paper's code, m * j: off by m * i per row (rejected)
    m = torch.tensor(paper_slopes(h))
    return (m[:, None, None] * torch.arange(n, dtype=torch.float32)).expand(h, n, n)


def alibi_symmetric(h, n):  # unusual: -m |i - j| (the same below the diagonal)
    i = torch.arange(n)
    return -torch.tensor(paper_slopes(h))[:, None, None] * (i[:, None] - i).abs().float()


def alibi_masked_above(h, n):  # unusual: -inf above the diagonal already
    return alibi(h, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))


def alibi_loop(h, n):  # unusual: loops, and a float64 computation cast at the end
    out = torch.zeros(h, n, n, dtype=torch.float64)
    for head, m in enumerate(paper_slopes(h)):
        for i in range(n):
            for j in range(i + 1):
                out[head, i, j] = -m * (i - j)
    return out.float()


def geometric_for_any_h(h, n):
    return bias_from([2 ** (-8 * k / h) for k in range(1, h + 1)], n)


def sign_flipped(h, n):
    return -alibi(h, n)


def transposed(h, n):
    return alibi(h, n).transpose(1, 2)


def reversed_slopes(h, n):
    return bias_from(paper_slopes(h)[::-1], n)


def halves(h, n):  # 1/2, 1/4, ...: right for 8 heads only
    return bias_from([2.0 ** -k for k in range(1, h + 1)], n)


def k_from_zero(h, n):
    return bias_from([2 ** (-8 * k / h) for k in range(h)], n)


def next_power_truncated(h, n):  # the slopes for the next power of 2, cut to h
    c = 2 ** math.ceil(math.log2(h))
    return bias_from(paper_slopes(c)[:h], n)


def every_other_from_the_second(h, n):
    c = 2 ** math.floor(math.log2(h))
    extra = paper_slopes(2 * c)[1::2][:h - c] if c < h else []
    return bias_from(paper_slopes(c) + extra, n)


def extra_slopes_first(h, n):
    c = 2 ** math.floor(math.log2(h))
    extra = paper_slopes(2 * c)[0::2][:h - c] if c < h else []
    return bias_from(extra + paper_slopes(c), n)


def computed_in_float16(h, n):
    return bias_from(paper_slopes(h), n, dtype=torch.float16).float()


def float64_result(h, n):
    return bias_from(paper_slopes(h), n, dtype=torch.float64)


def squared_distance(h, n):
    i = torch.arange(n)
    return -torch.tensor(paper_slopes(h))[:, None, None] * ((i[:, None] - i) ** 2).float()


def one_matrix_for_all_heads(h, n):  # forgets the head axis
    return alibi(h, n)[0]


def masked_by_multiplying(h, n):  # -inf * 0 = NaN wherever the mask is 0
    above = torch.ones(n, n).triu(1)
    return alibi(h, n) * (1 - above) + float("-inf") * above


WRONG_ALIBI = {
    "2^(-8k/h) for every h": (geometric_for_any_h, "power of 2 only"),
    "rewards distance (+m (i - j))": (sign_flipped, "rewards distance"),
    "transposed: -m (j - i)": (transposed, "rewards distance"),
    "slopes in reverse order": (reversed_slopes, "reverse order"),
    "1/2, 1/4, ... (right for 8 heads only)": (halves, "for 8 heads only"),
    "k counted from 0": (k_from_zero, "count k from 1"),
    "next power of 2, cut to h": (next_power_truncated, "every other one"),
    "every other slope from the second": (every_other_from_the_second, "every other one"),
    "the extra slopes first": (extra_slopes_first, "every other one"),
    "computed in float16": (computed_in_float16, "float16"),
    "float64 result": (float64_result, "float32"),
    "squared distance": (squared_distance, "linear in the distance"),
    "no head axis": (one_matrix_for_all_heads, "shape"),
    "masks by multiplying with -inf (NaN)": (masked_by_multiplying, "NaN"),
    "forgets to return": (lambda h, n: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
}


@pytest.mark.parametrize("fn", [alibi, alibi_symmetric,
                                alibi_masked_above, alibi_loop, positions.alibi_bias],
                         ids=["reference", "-m |i - j|",
                              "-inf above the diagonal", "loops in float64", "book"])
def test_check_alibi_bias_accepts_right_solutions(fn):
    accepts(checks.check_alibi_bias, fn)


@pytest.mark.parametrize("name", WRONG_ALIBI)
def test_check_alibi_bias_rejects_wrong_solutions(name):
    fn, fragment = WRONG_ALIBI[name]
    rejects(checks.check_alibi_bias, fn, fragment)


def test_alibi_messages_name_the_input_the_expected_and_the_seen_slopes():
    text = rejects(checks.check_alibi_bias, geometric_for_any_h, "num_heads=6, n=12",
                   "expected [0.25, 0.0625", "got [0.3969")
    assert "Hint:" in text


def test_the_checkers_are_exported():
    from book import checks as exported   # book/checks/__init__.py must import ch10
    assert {"check_apply_rope", "check_alibi_bias"} <= set(exported.__all__)


def test_alibi_bias_off_by_a_constant_per_row_is_rejected_with_its_own_message():
    """The exercise defines the entry as -m_h (i - j); the paper's m * j is off by m * i."""
    rejects(checks.check_alibi_bias, alibi_key_positions, "plus a constant in each query row")


# -- Round 3 red team (tests/checker_redteam/round3_ch10_*.py) ---------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round3_ch10_alibi", ("W_",)))
def test_check_alibi_bias_rejects_round3(fn):
    rejects(checks.check_alibi_bias, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch10_alibi", ("C_", "O_")))
def test_check_alibi_bias_accepts_round3_right_solutions(fn):
    accepts(checks.check_alibi_bias, fn)


def test_alibi_round3_messages_name_the_wrong_part():
    from checker_redteam import round3_ch10_alibi as r3

    rejects(checks.check_alibi_bias, r3.W_10_distance_plus_one,
            "plus a constant in each query row")
    text = rejects(checks.check_alibi_bias, r3.W_06_lower_triangle_zero,
                   "0 at every entry below the diagonal")
    assert "slopes are wrong" not in text
    text = rejects(checks.check_alibi_bias,
                   r3.W_14_row_shift_only_upper_triangle_filled_with_zero, "wrong on it")
    assert "slopes are wrong" not in text


@pytest.mark.parametrize("fn", redteam_entries("round3_ch10_rope", ("W_",)))
def test_check_apply_rope_rejects_round3(fn):
    rejects(checks.check_apply_rope, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch10_rope", ("C_", "O_")))
def test_check_apply_rope_accepts_round3_right_solutions(fn):
    accepts(checks.check_apply_rope, fn)


def test_apply_rope_round3_messages():
    from checker_redteam import round3_ch10_rope as r3

    rejects(checks.check_apply_rope, r3.W_14_degree_theta_base_1e4_float16_positions_int32,
            "above 32767")
    rejects(checks.check_apply_rope, r3.W_16_ValueError_vague_message, "does not say")


# -- Round 4 red team (tests/checker_redteam/round4_ch10_*.py) ------------------------------

def test_apply_rope_round4_messages_name_the_fault():
    from checker_redteam import round4_ch10_rope as r4

    # cos and sin cached per shape: the first case's shape again, at positions 10..19.
    text = rejects(checks.check_apply_rope, r4.W_23_cos_sin_cached_by_shape,
                   "again, now at positions 10..19",
                   "an earlier call with x of the same shape")
    assert "positions 0..n-1" not in text
    # x.view(...) of q.transpose(1, 2).
    rejects(checks.check_apply_rope, r4.W_26_view_flatten_leading_dims, "not contiguous",
            "Use .reshape()")
    # Frequencies from 64 for d > 64: head size 128.
    rejects(checks.check_apply_rope, r4.W_24_theta_from_n_when_square, "head size 128",
            "check the frequencies", "pairs [1, 2, 3, 4, 5, ... 63]")


def test_alibi_round4_messages_name_the_fault():
    from checker_redteam import round4_ch10_alibi as r4

    # A bias cached per head count: 8 heads again with a longer n.
    rejects(checks.check_alibi_bias, r4.W_11_cached_by_heads_only, "num_heads=8, n=40",
            "an earlier call's output (num_heads=8, n=10)")
    # NaN where the causal mask hides the bias: not a fill the exercise allows.
    text = rejects(checks.check_alibi_bias, r4.W_17_upper_triangle_nan,
                   "NaN above the diagonal", "NaN + (-inf) is NaN")
    assert "exp() overflowing" not in text


def test_alibi_nan_anywhere_else_keeps_the_general_message():
    def nan_on_the_diagonal(h, n):
        return alibi(h, n).masked_fill(torch.eye(n, dtype=torch.bool), float("nan"))

    text = rejects(checks.check_alibi_bias, nan_on_the_diagonal, "contains NaN")
    assert "above the diagonal" not in text


# -- Round 5 red team (tests/checker_redteam/round5_ch10_*.py) -----------------------------

def test_alibi_round5_plus_inf_above_the_diagonal_and_integer_slopes():
    from checker_redteam import round5_ch10_alibi as r5
    rejects(checks.check_alibi_bias, r5.W_21_plus_inf_above_diagonal,
            "+inf above the diagonal", "a finite number or -inf")
    rejects(checks.check_alibi_bias, r5.W_17_integer_slope_exponent,
            "8 // 16 (integer division)")


# -- Round 6 red team (tests/checker_redteam/round6_ch10_*.py) -----------------------------

def test_apply_rope_round6_cache_by_first_position_and_x_itself():
    from checker_redteam import round6_ch10_rope as r6
    # cos and sin cached by (positions[0], n, d): the first shape once more, first position
    # 0 again, the later positions not 1, 2, ...
    rejects(checks.check_apply_rope, r6.W_02_cache_keyed_on_first_position,
            "once more, at positions [0, 7, 3", "an earlier call with x of the same shape")
    # Every position 0 returns x itself: the result must be a new tensor.
    rejects(checks.check_apply_rope, r6.W_12_shortcut_returns_x_at_zero,
            "positions [0, 0, 0, 0]", "returned x itself", "a new tensor")
    # An output buffer kept between calls (call() compares the earlier results).
    rejects(checks.check_apply_rope, r6.W_16_reused_output_buffer,
            "changed what it returned earlier")


# -- Round 7 red team (tests/checker_redteam/round7_ch10_*.py) -----------------------------

def test_apply_rope_round7_caches_keyed_on_part_of_the_positions():
    from checker_redteam import round7_ch10_rope as r7
    # (positions[0], positions[-1], n, d) and (n, d, sum, min, max): [0, 3, 6, 9], then
    # [0, 4, 5, 9], which shares all of them.
    for fn in (r7.W_04_cos_cache_keyed_on_first_and_last_position,
               r7.W_18_cos_cache_keyed_on_fingerprint):
        rejects(checks.check_apply_rope, fn, "at positions [0, 4, 5, 9]",
                "an earlier call with x of the same shape")
    # id(positions): a decoding loop that frees each step's positions tensor.
    rejects(checks.check_apply_rope, r7.W_17_cos_cache_keyed_on_id_of_positions,
            "decoding loop", "id(positions)")
    # theta cached per d in the dtype of the first (float16) call.
    rejects(checks.check_apply_rope, r7.W_03_theta_cache_keyed_on_d_only,
            "float16 x of shape (1, 2, 4, 20) at positions 3001..3004")


def test_apply_rope_round7_half_precision():
    from checker_redteam import round7_ch10_rope as r7
    rejects(checks.check_apply_rope, r7.W_02_positions_cast_to_x_dtype,
            "positions 3001..3004", "a position above 2048 to the nearest even number")
    rejects(checks.check_apply_rope, r7.W_15_bfloat16_angles_for_low_precision,
            "not as exact as float16 allows", "not in bfloat16")
    rejects(checks.check_apply_rope, r7.W_16_float32_output_for_bfloat16,
            "bfloat16 x of shape", "expected torch.bfloat16")
    rejects(checks.check_apply_rope, r7.W_21_odd_d_message_says_nothing,
            "bad input shape", "names none of odd, even, pair, partner")


def test_alibi_round7_cache_by_n_and_rounded_values():
    from checker_redteam import round7_ch10_alibi as r7
    rejects(checks.check_alibi_bias, r7.W_08_cache_keyed_on_n_only,
            "num_heads=5, n=10", "the bias depends on num_heads too")
    text = rejects(checks.check_alibi_bias, r7.W_16_rounded_to_3_decimals,
                   "rounded to 3 decimals")
    assert "at long distances" not in text


def test_apply_rope_round8_caches_and_messages():
    from checker_redteam import round8_ch10_rope as r8
    # cos and sin cached by the positions alone: the same positions at head sizes 8 and 16.
    rejects(checks.check_apply_rope, r8.W_19_cache_keyed_on_positions_only,
            "x of shape (2, 4, 16) at positions [0, 3, 6, 9]",
            "with head size 8, this one has 16")
    # cos and sin cached in the first call's dtype: float32 after float16.
    rejects(checks.check_apply_rope, r8.W_20_cache_cos_sin_ignores_dtype,
            "float32, after a float16 call", "rounded to torch.float16")
    # a cache keyed by data_ptr(): one positions tensor moved on in place, every run.
    rejects(checks.check_apply_rope, r8.W_17_cache_keyed_on_data_ptr,
            "keeps one positions tensor", "positions.data_ptr()")
    # a ValueError on an even d: the message says the d is even and valid (since round 10
    # the first d that is not a multiple of 4 is 18, in the float64 case at large positions).
    rejects(checks.check_apply_rope, r8.W_04_rejects_d_not_multiple_of_4,
            "raised ValueError: d = 18 must be even", "18 is even, a valid feature size")


_bfloat16_trig = {}


def rope_bfloat16_trig_cached(x, positions):  # wrong: cos and sin cached after bfloat16
    key = (tuple(positions.tolist()), x.shape[-1])
    if x.dtype == torch.bfloat16 and key not in _bfloat16_trig:
        d = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angles = positions.double()[:, None] * theta
        _bfloat16_trig[key] = (angles.cos().bfloat16(), angles.sin().bfloat16())
    if key not in _bfloat16_trig:
        return rope(x, positions, angle_dtype=torch.float64 if x.dtype == torch.float64
                    else torch.float32)
    cos, sin = (t.to(x.dtype) for t in _bfloat16_trig[key])
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def test_apply_rope_round8_float32_after_bfloat16():
    _bfloat16_trig.clear()
    # Since round 13 the float64 gradient case (after the bfloat16 calls) meets the stale
    # bfloat16 tables first: the gradient is 0.006 off there.
    rejects(checks.check_apply_rope, rope_bfloat16_trig_cached,
            "the gradient with respect to x is wrong on float64 x")


def test_alibi_round8_state_and_huge_numbers_above_the_diagonal():
    from checker_redteam import round8_ch10_alibi as r8
    # a cached slope list extended in place: a second call gives another shape.
    rejects(checks.check_alibi_bias, r8.W_01_cached_slope_list_mutated,
            "shape (7, 9, 9) on num_heads=5, n=9",
            "a second call with the same num_heads=5, n=9 returns (8, 9, 9)",
            "keeps state between calls")
    rejects(checks.check_alibi_bias, r8.W_18_upper_filled_with_float32_max,
            "3.4e+38 above the diagonal", "a huge positive number",
            "torch.finfo(torch.float32).max")
    upper = lambda n: torch.ones(n, n, dtype=torch.bool).triu(1)  # noqa: E731
    rejects(checks.check_alibi_bias, lambda h, n: alibi(h, n).masked_fill(upper(n), 1e30),
            "1e+30 above the diagonal")
    # Large negative numbers hide the entry as -inf does: accepted, as is the natural
    # -m (i - j) above the diagonal (up to about 150 at n = 300; the solution's answer).
    for fill in (torch.finfo(torch.float32).min, -1e9):
        accepts(checks.check_alibi_bias,
                lambda h, n, fill=fill: alibi(h, n).masked_fill(upper(n), fill))
    accepts(checks.check_alibi_bias, alibi)


# -- Round 9 red team (tests/checker_redteam/round9_ch10_*.py) -----------------------------

def test_apply_rope_round9_gradient_at_zero_pairs():
    from checker_redteam import round9_ch10_rope as r9
    # Polar form (sqrt, atan2): NaN where a pair of features is (0, 0).
    rejects(checks.check_apply_rope, r9.W_05_grad_nan_via_where,
            "contains NaN or inf", "some pairs of features (0, 0)",
            "which is (0, 0)", "no derivative at (0, 0)")
    # The unit pair rotated and scaled back by its length: gradient 0 there.
    rejects(checks.check_apply_rope, r9.W_15_norm_rescaled,
            "the gradient with respect to x is wrong", "which is (0, 0)",
            "RoPE is linear in x")


def test_alibi_round9_transposed_is_named():
    from checker_redteam import round9_ch10_alibi as r9
    rejects(checks.check_alibi_bias, r9.W_10_transposed,
            "positive below the diagonal", "the transpose of the right bias",
            "bias[h, j, i]", "swap the query and key axes")


# -- Round 10 red team (tests/checker_redteam/round10_ch10_*.py) ---------------------------

class _RopeHalfWrongBackward(torch.autograd.Function):
    """RoPE whose backward rotates by +angle (R, not R^T): right values, wrong gradient."""

    @staticmethod
    def forward(ctx, x, positions):
        ctx.save_for_backward(positions)
        return rope(x, positions)

    @staticmethod
    def backward(ctx, grad):
        positions, = ctx.saved_tensors
        return rope(grad, positions), None


def half_wrong_backward(x, positions):  # a custom backward only on the half-precision path
    if x.dtype in (torch.float16, torch.bfloat16):
        return _RopeHalfWrongBackward.apply(x, positions)
    return rope(x, positions)


def bfloat16_detached(x, positions):  # .data only for bfloat16
    return rope(x.data if x.dtype == torch.bfloat16 else x, positions)


def base_10000_5(x, positions):  # a mistyped constant: 10000.5
    d = x.shape[-1]
    return rope(x, positions, theta=10000.5 ** (-torch.arange(0, d, 2) / d))


def test_apply_rope_round10_half_precision_gradients():
    from checker_redteam import round10_ch10_rope as r10
    # .detach() only for float16/bfloat16 x: told on the float16 gradient case.
    detach_when_half = r10.W_11_grad_through_no_grad_angles_x_detach_when_half
    rejects(checks.check_apply_rope, detach_when_half, "no gradient can flow back",
            "float16 x of shape (2, 3, 6, 8)")
    rejects(checks.check_apply_rope, bfloat16_detached, "no gradient can flow back",
            "bfloat16 x of shape (2, 3, 6, 8)")
    # Gradients that flow but are wrong (R in place of R^T) in half precision only.
    rejects(checks.check_apply_rope, half_wrong_backward,
            "the gradient with respect to x is wrong", "float16 x of shape (2, 3, 6, 8)",
            "R^T times the upstream gradient")


def test_apply_rope_round10_x_itself_at_position_0_in_every_rank_and_dtype():
    from checker_redteam import round10_ch10_rope as r10
    rejects(checks.check_apply_rope, r10.W_16_alias_zero_positions_half_only,
            "returned x itself", "float16 x of shape (1, 2, 1, 8) at position [0]")
    rejects(checks.check_apply_rope, r10.W_17_alias_zero_positions_4d_only,
            "returned x itself", "x of shape (2, 3, 5, 8) (4-D)")


def test_apply_rope_round10_a_wrong_base_is_named():
    from checker_redteam import round10_ch10_rope as r10
    # A base of 10001: caught in float64 at large positions, before any float16 case, and
    # the base is named (it was blamed on float16 angle rounding).
    text = rejects(checks.check_apply_rope, r10.W_18_theta_base_10000_rounded,
                   "float64 x of shape (2, 2, 5, 18) at positions [20000, 23456,",
                   "a base of 10001, not 10000", "the constant (10000 exactly")
    assert "float16" not in text
    rejects(checks.check_apply_rope, base_10000_5, "a base of 10000.5, not 10000")
    # 10000^(-2j/(d - 2)): the base that fits is 10000^(d/(d-2)); the exponent is named.
    rejects(checks.check_apply_rope, r10.W_09_theta_d_minus_2, "a base of 215443",
            "10000^(-2j/6), a division by 6 where d = x.shape[-1] = 8 belongs")
    # bfloat16 angles: the bfloat16 rounding is named.
    rejects(checks.check_apply_rope, r10.W_14_theta_float16_angle_for_bf16,
            "bfloat16 keeps 8 significant bits")


# -- Round 11 red team (tests/checker_redteam/round11_ch10_*.py) ---------------------------

def decode_step_detached_after_start(x, positions):  # no_grad for n = 1 past position 0
    if positions.numel() == 1 and int(positions[0]) > 0:
        with torch.no_grad():
            return rope(x, positions)
    return rope(x, positions)


def decode_step_detached_when_half(x, positions):  # .detach() for a half-precision n = 1
    if positions.numel() == 1 and x.dtype in (torch.float16, torch.bfloat16):
        return rope(x.detach(), positions)
    return rope(x, positions)


def decode_step_float16_clamped(x, positions):  # n = 1 positions clamped to 65504
    if positions.numel() == 1 and x.dtype == torch.float16:
        return rope(x, positions.clamp(max=65504))
    return rope(x, positions)


def decode_step_bfloat16_angles(x, positions):  # n = 1 angles in bfloat16
    if positions.numel() == 1 and x.dtype == torch.bfloat16:
        return rope(x, positions, angle_dtype=torch.bfloat16)
    return rope(x, positions)


_same_memory_cache = {}


def cache_on_data_ptr_late(x, positions):
    """cos and sin cached by (data_ptr, _version, n, d), only from position 900 on: only the
    decoding loop that places each step's positions in the previous step's memory meets it
    (every other case computes afresh), so the verdict does not depend on the allocator."""
    if int(positions[0]) < 900:
        return rope(x, positions)
    key = (positions.data_ptr(), positions._version, len(positions), x.shape[-1])
    if key not in _same_memory_cache:
        _same_memory_cache[key] = positions.clone()
    return rope(x, _same_memory_cache[key])


def test_apply_rope_round11_one_vector_and_all_zero_positions_need_gradients():
    from checker_redteam import round11_ch10_rope as r11
    rejects(checks.check_apply_rope, r11.W_01_zero_positions_detached_copy,
            "no gradient can flow back", "x of shape (2, 4, 6) at positions [0, 0, 0, 0] "
            "(every angle 0: the output equals x, but gradients must still flow)")
    rejects(checks.check_apply_rope, r11.W_16_single_vector_at_zero_detached,
            "no gradient reaches x", "x of shape (2, 3, 1, 8) at position [0] (one vector")
    rejects(checks.check_apply_rope, r11.W_19_decode_step_detached,
            "no gradient can flow back", "at position [0] (one vector")
    rejects(checks.check_apply_rope, decode_step_detached_after_start,
            "no gradient can flow back", "x of shape (2, 3, 1, 8) at position [5000]")
    rejects(checks.check_apply_rope, decode_step_detached_when_half,
            "no gradient", "float16 x of shape (2, 3, 1, 8) at position [3001] (one vector")


def test_apply_rope_round11_one_vector_at_large_positions_in_half_precision():
    from checker_redteam import round11_ch10_rope as r11
    rejects(checks.check_apply_rope, r11.W_18_decode_step_angles_in_x_dtype,
            "float16 x of shape (2, 3, 1, 16) at position [3001] (one vector",
            "in float16, an angle of 2000 radians is stored to the nearest 1")
    rejects(checks.check_apply_rope, decode_step_float16_clamped,
            "float16 x of shape (1, 4, 1, 8) at position [70000] (one vector")
    rejects(checks.check_apply_rope, decode_step_bfloat16_angles,
            "bfloat16 x of shape (2, 3, 1, 16) at position [1000] (one vector",
            "bfloat16 keeps 8 significant bits")


def test_apply_rope_round11_a_cache_on_data_ptr_is_told_it_keeps_state():
    from checker_redteam import round11_ch10_rope as r11
    # Rejected where the allocator first reuses memory; told that it keeps state (not that
    # the scores depend on more than the distance).
    text = rejects(checks.check_apply_rope, r11.W_14_cache_on_data_ptr_and_version,
                   "gives another result for the same input", "called again with a new "
                   "positions tensor holding the same values", "keeps state between calls",
                   "positions.data_ptr()")
    assert "depend only on the distance" not in text
    # The decoding loop that places each step's positions in the previous step's memory
    # rejects such a cache on every run.
    rejects(checks.check_apply_rope, cache_on_data_ptr_late,
            "positions 904..907 (step 2 of a decoding loop whose new positions tensor lies "
            "in the memory of the previous step's one", "gives another result",
            "keeps state between calls")


def test_alibi_round11_many_heads_and_long_sequences():
    from checker_redteam import round11_ch10_alibi as r11
    rejects(checks.check_alibi_bias, r11.W_17_geometric_above_16,
            "the slopes are wrong for num_heads=20", "0.8409, 0.5946",
            "2^(-8k/h) is the rule for a power of 2 only; 20 is not one")
    rejects(checks.check_alibi_bias, r11.W_20_large_n_distances_float16,
            "num_heads=1, n=2050", "distance 2049", "2049 is stored as 2048")


def nan_above_65504_for_one_vector(x, positions):  # the same NaN at every call: no state
    if positions.numel() == 1 and x.dtype == torch.float16 and int(positions[0]) > 65504:
        return torch.full_like(x, math.nan)
    return rope(x, positions)


def test_apply_rope_round11_the_same_nan_twice_is_not_called_state():
    text = rejects(checks.check_apply_rope, nan_above_65504_for_one_vector,
                   "float16 x of shape (1, 4, 1, 8) at position [70000] (one vector")
    assert "another result" not in text and "keeps state" not in text


def test_alibi_round11_bfloat16_distances_are_told_close_but_not_exact():
    from checker_redteam import round11_ch10_alibi as r11
    text = rejects(checks.check_alibi_bias, r11.W_07_distance_bfloat16,
                   "num_heads=16, n=300", "distance 257", "close but not exact",
                   "bfloat16")
    assert "linear in the distance" not in text


# -- The condition matrix (issue 12, session 12) ------------------------------------------------

def rope_positions_by_memory(x, positions):
    """Wrong: reads the positions by memory layout (as_strided with stride 1), which is
    another tensor's memory when positions is a non-contiguous slice."""
    return rope(x, torch.as_strided(positions, (len(positions),), (1,)))


def rope_single_pair_half_detached(x, positions):
    """Wrong: d = 2 in the half dtypes taken through a detached float32 copy."""
    if x.dtype in (torch.float16, torch.bfloat16) and x.shape[-1] == 2:
        return rope(x.detach().float(), positions).to(x.dtype)
    return rope(x, positions)


_MEMO = {}


def rope_memo_by_sums(x, positions):
    """Wrong: the output memoised under x's shape, dtype and sum and the positions' sum (a
    second call with the same numbers in other places gets the first call's output)."""
    key = (x.shape, x.dtype, float(x.detach().double().sum()), int(positions.sum()))
    out = rope(x, positions)
    return out - out.detach() + _MEMO.setdefault(key, out.detach())


def test_rope_condition_matrix_catches_what_the_other_cases_do_not(monkeypatch):
    check = checks.check_apply_rope
    wrong = [(rope_positions_by_memory, ("every argument non-contiguous",
                                         "index by shape and never by memory layout")),
             (rope_single_pair_half_detached, ("(d = 2, a single pair)",
                                               "float16 arguments",
                                               "no gradient can flow back")),
             (rope_memo_by_sums, ("a second call, with other values",
                                  "nothing may be kept between calls"))]
    for fn, fragments in wrong:
        _MEMO.clear()
        rejects(check, fn, *fragments)
    monkeypatch.setattr(checks, "_rope_matrix", lambda fn: None)
    for fn, _ in wrong:                      # only the matrix rejects them
        _MEMO.clear()
        accepts(check, fn)


def test_alibi_condition_matrix_passes_the_right_fills_above_the_diagonal():
    """The matrix compares only the entries at and below the diagonal: any fill above it
    that the exercise allows passes (the checker's own cases refuse NaN and +inf there)."""
    for fn in (alibi, alibi_masked_above, alibi_symmetric):
        checks._alibi_matrix(fn)


def test_rope_round12_a_table_of_2_17_angles_is_caught():
    """Red-team round 12: Llama's table of max_seq_len * 2 = 131072 angles, indexed (an
    IndexError at position 131072) or wrapped (told that its angles repeat)."""
    from checker_redteam import round12_ch10_rope as r12

    rejects(checks.check_apply_rope, r12.W_19_llama_freqs_table_131072,
            "positions [131072, 131073, 200000", "IndexError")
    rejects(checks.check_apply_rope, r12.W_07_table_of_131072_positions_wraps,
            "positions [131072, 131073, 200000", "RoPE at positions % 131,072 (2**17)")


# -- Round 13 (writer E) ------------------------------------------------------------------


def test_rope_rejects_float64_x_detached():
    rejects(checks.check_apply_rope,
            redteam_entry("round13_ch10_rope2", "W_23_float64_detached"),
            "float64 x of shape (2, 3, 7, 8)", "requires_grad=False",
            "keep float64 x in the graph")


def test_rope_rejects_a_fixed_number_of_axes():
    rejects(checks.check_apply_rope, redteam_entry("round13_ch10_rope3", "W_27_up_to_4d"),
            "(2, 2, 3, 5, 8)", "too many values to unpack", "any number of leading axes")


# -- Red-team round 14 (writer E) -------------------------------------------------------------


def test_round14_rope_result_requires_grad_under_no_grad():
    rejects(checks.check_apply_rope,
            redteam_entry("round14_ch10_rope", "W_21_grad_enable_inside"),
            "returned a result that requires grad", "called under torch.no_grad()",
            "torch.enable_grad()")


def test_round14_alibi_grad_mode_left_on_under_no_grad():
    # set_grad_enabled(False) ... set_grad_enabled(True): grad mode on in the caller's no_grad.
    rejects(checks.check_alibi_bias,
            redteam_entry("round14_ch10_alibi", "W_20_grad_mode_left_on"),
            "autograd's grad mode", "called under torch.no_grad()")
