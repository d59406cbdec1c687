"""Chapter 2's checker passes right solutions (also unusual ones) and rejects wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch02.py), and kinds that round 1 missed."""
import pytest
import torch

from book import checks
from checkers_support import accepts, redteam, redteam_entries, rejects


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


def normalised_over_everything(queries, keys, values, width=1.0):
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    K = (1 - u ** 2).clamp_min(0)
    weights = K / K.sum()
    return weights @ values, weights


def where_equal_zero(queries, keys, values, width=1.0):
    """where(total == 0, 0, K / total): the forward is right, the backward divides by 0."""
    u = (queries.reshape(-1, 1) - keys.reshape(1, -1)) / width
    K = (1 - u ** 2) * (u.abs() <= 1)
    total = K.sum(dim=-1, keepdim=True)
    return (torch.where(total == 0, 0.0, K / total) @ values,
            torch.where(total == 0, 0.0, K / total))


def transposed_weights(queries, keys, values, width=1.0):
    outputs, weights = reference(queries, keys, values, width)
    return outputs, weights.T


def relu_kernel(queries, keys, values, width=1.0):
    """Right: relu instead of clamp, strict |u| < 1 (the kernel is 0 at the edge anyway)."""
    u = (queries[:, None] - keys[None, :]) / width
    K = torch.relu(1 - u * u)
    total = K.sum(-1, keepdim=True)
    weights = K / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ values, weights


WRONG = {
    "triangular kernel 1 - |u| (d2l's 'epanechikov')":
        (with_kernel(lambda u: (1 - u.abs()).clamp_min(0)), "wrong on"),
    "forgets to divide by the width": (with_kernel(lambda u: (1 - u ** 2).clamp_min(0),
                                                   width_used=False), "outside the window"),
    "does not clamp 1 - u^2 at 0": (with_kernel(lambda u: 1 - u ** 2), "clamp it at 0"),
    "NaN for a query with an empty window": (with_kernel(lambda u: (1 - u ** 2).clamp_min(0),
                                                         guard=False), "NaN"),
    "no normalisation": (not_normalised, "sum to 1"),
    "normalises over the queries": (normalised_over_queries, "sum to 1"),
    "Gaussian kernel instead": (with_kernel(lambda u: torch.exp(-u ** 2 / 2)),
                                "outside the window"),
    "softmax of the kernel values": (softmax_of_kernel, "outside the window"),
    "uniform weights for an empty window": (uniform_when_empty, "all-zero weights"),
    "pools the keys, not the values": (pools_keys, "not the keys"),
    "returns only the weights": (lambda q, k, v, w: reference(q, k, v, w)[1],
                                 "tuple (outputs, weights)"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "normalised over all queries and keys": (normalised_over_everything, "sum to 1"),
    "where(total == 0, 0, K / total)": (where_equal_zero, "guard the denominator itself"),
    "weights transposed": (transposed_weights, "weights has shape"),
    "int(width)": (lambda q, k, v, w: reference(q, k, v, max(int(w), 1)), "outside the window"),
}

R1_EXPECTED = {
    "window via searchsorted (assumes sorted keys)": "they are not sorted",
    "sorts keys but not values": "keep the keys in the order given",
    "no guard: empty window is NaN": "a query with no key inside its window",
    "mask-multiply kernel, 0/0 then nan_to_num": "guard the denominator itself",
    "mask-multiply kernel, where(total > 0, K / total, 0)": "guard the denominator itself",
    "no clamp: negative kernel outside the window": "clamp it at 0",
    "forgets to divide by width": "scale the distance by the width",
    "divides u^2 by width, not width^2": "not d^2 / width",
    "reshape instead of transpose of (n_k, n_q)": "u[i, j] = (queries[i] - keys[j]) / width",
    "numpy round trip": "no gradient can flow back",
    "K / (sum + 1e-6)": "adding a small constant to the sum",
    "empty window gives uniform weights": "do not add a small constant",
    "outputs of shape (n_q, 1)": "outputs has shape (5, 1)",
    "float32 constants (float64 inputs)": "tensors of two dtypes met",
    "divides the queries in place": "changed its argument `queries` in place",
    "only the first 32 keys": "every key with |u| < 1 counts",
}


def test_check_epanechnikov_accepts_the_reference_and_a_relu_kernel():
    accepts(checks.check_epanechnikov_pool, reference)
    accepts(checks.check_epanechnikov_pool, relu_kernel)


@pytest.mark.parametrize("name", WRONG)
def test_check_epanechnikov_rejects_wrong_solutions(name):
    fn, message = WRONG[name]
    rejects(checks.check_epanechnikov_pool, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch02", "check_epanechnikov_pool",
                                                 expected=R1_EXPECTED))
def test_check_epanechnikov_rejects_round1(fn, fragment):
    rejects(checks.check_epanechnikov_pool, fn, fragment)


# Issue 12, round 3: exercise 2.1 says "guard the division itself rather than replacing NaN
# afterwards". These compute 0/0 and replace the NaN (their gradients stay finite only
# because clamp's backward passes nothing where the clamp is active); earlier rounds accepted
# them, the checker now refuses any division that gives NaN.
NAN_REPLACED = {"clamp_min kernel, 0/0 then nan_to_num (gradient safe)", "Q_nan_to_num",
                "Q_where_nan_grad"}


@pytest.mark.parametrize("fn, fragment", [
    p for p in redteam("round1_ch02", "check_epanechnikov_pool", "RIGHT_BUT_UNUSUAL")
    if p.id not in NAN_REPLACED])
def test_check_epanechnikov_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_epanechnikov_pool, fn)


@pytest.mark.parametrize("fn", [
    p.values[0] for p in redteam("round1_ch02", "check_epanechnikov_pool", "RIGHT_BUT_UNUSUAL")
    if p.id in NAN_REPLACED])
def test_check_epanechnikov_rejects_nan_replaced_after_the_division(fn):
    rejects(checks.check_epanechnikov_pool, fn, "gave NaN (0/0)", "guard the denominator")


def test_failure_messages_name_the_input_and_the_values():
    text = rejects(checks.check_epanechnikov_pool,
                   WRONG["triangular kernel 1 - |u| (d2l's 'epanechikov')"][0], "Hint:")
    assert "on 5 queries, 8 keys" in text and "expected" in text and "got" in text
    assert "1 - u^2" in text


@pytest.mark.parametrize("fn", redteam_entries("round2_ch02_epan", ("W_",)))
def test_check_epanechnikov_pool_rejects_round2(fn):
    rejects(checks.check_epanechnikov_pool, fn)


@pytest.mark.parametrize("fn", [p for p in redteam_entries("round2_ch02_epan", ("C_", "O_", "Q_"))
                                if p.id not in NAN_REPLACED])
def test_check_epanechnikov_pool_accepts_round2_right_solutions(fn):
    accepts(checks.check_epanechnikov_pool, fn)


@pytest.mark.parametrize("fn", [p for p in redteam_entries("round2_ch02_epan", ("Q_",))
                                if p.id in NAN_REPLACED])
def test_check_epanechnikov_pool_rejects_round2_nan_replaced(fn):
    rejects(checks.check_epanechnikov_pool, fn, "gave NaN (0/0)")


# -- Round 3 red team (tests/checker_redteam/round3_ch02_epan.py) -----------------------------

@pytest.mark.parametrize("fn", redteam_entries("round3_ch02_epan", ("W_",)))
def test_check_epanechnikov_pool_rejects_round3(fn):
    rejects(checks.check_epanechnikov_pool, fn)


@pytest.mark.parametrize("fn", redteam_entries("round3_ch02_epan", ("C_", "O_")))
def test_check_epanechnikov_pool_accepts_round3_right_solutions(fn):
    accepts(checks.check_epanechnikov_pool, fn)


def test_round3_nan_replaced_after_the_division_and_transposed_weights():
    from checker_redteam import round3_ch02_epan as r3

    for name in ("W_01_nan_to_num", "W_05_where_after_division"):
        rejects(checks.check_epanechnikov_pool, vars(r3)[name], "gave NaN (0/0)")
    rejects(checks.check_epanechnikov_pool, r3.W_08_weights_transposed, "as many queries")


# -- Round 4 red team (tests/checker_redteam/round4_ch02_epanechnikov.py) ------------------

ROUND4_MESSAGES = {
    # the exercise says "from scratch (without calling book.kernel_regression)"
    "S_01_calls_book_nadaraya_watson": [
        "your function calls book.kernel_regression.nadaraya_watson", "from scratch"],
    "S_02_calls_book_kernel_only": [
        "your function calls book.kernel_regression.epanechnikov", "from scratch"],
    # an empty window's output is 0, not a fallback
    "W_12_mean_output_for_empty": ["expected 0", "is 0", "without a fallback"],
    # the width scaling, not the order of the keys
    "W_10_strict_window_open": ["your window is narrower than |u| <= 1",
                                "not |u| <= width"],
    "W_13_width_squared": ["your window is narrower than |u| <= 1", "not d / width ** 2"],
    "W_22_width_default_ignored": ["your window is narrower than |u| <= 1", "at width 1",
                                   "not a fixed one"],
    "W_05_ignores_width": ["your window is wider than |u| <= 1"],
}


@pytest.mark.parametrize("name", ROUND4_MESSAGES)
def test_round4_messages_point_at_the_fault(name):
    from checker_redteam import round4_ch02_epanechnikov as r4

    text = rejects(checks.check_epanechnikov_pool, vars(r4)[name], *ROUND4_MESSAGES[name])
    assert "they are not sorted" not in text and "not reordered" not in text


def test_round4_book_kernel_regression_is_back_after_the_check():
    from book import kernel_regression as kr
    from checker_redteam import round4_ch02_epanechnikov as r4

    nadaraya_watson, epanechnikov = kr.nadaraya_watson, kr.epanechnikov
    rejects(checks.check_epanechnikov_pool, r4.S_01_calls_book_nadaraya_watson)
    assert kr.nadaraya_watson is nadaraya_watson and kr.epanechnikov is epanechnikov


# -- Round 5 red team (tests/checker_redteam/round5_ch02_epanechnikov.py) ------------------

def test_round5_unguarded_output_division_is_named():
    # the weights are guarded, the outputs divide by the raw sum: NaN in the returned
    # outputs, nothing was replaced afterwards
    from checker_redteam import round5_ch02_epanechnikov as r5

    text = rejects(checks.check_epanechnikov_pool, r5.W_26_output_from_unguarded_division,
                   "the outputs contain NaN", "also the one that gives the outputs")
    assert "replaced afterwards" not in text


# -- Round 6 red team (tests/checker_redteam/round6_ch02_epan.py) --------------------------

ROUND6_MESSAGES = {
    # |u| as sqrt(u * u): NaN gradient where a query equals a key (the new gradient case)
    "W_13_sqrt_norm_grad": ["query 0 equals key 2: u = 0", "sqrt(u * u)"],
    # weights cached by the width and the sizes (the new case repeats the first one's)
    "W_19_kernel_cached_by_width": ["are those your function returned on",
                                    "keep nothing between calls"],
}


@pytest.mark.parametrize("name", ROUND6_MESSAGES)
def test_round6_messages_point_at_the_fault(name):
    from checker_redteam import round6_ch02_epan as r6

    text = rejects(checks.check_epanechnikov_pool, vars(r6)[name], *ROUND6_MESSAGES[name])
    assert "they are not sorted" not in text and "replaced afterwards" not in text


def test_round6_same_points_at_another_width_is_not_called_state():
    # a kernel that ignores the width returns the same weights for the same points at widths
    # 1 and 0.7: that is the width's fault, not state kept between calls
    def ignores_width(queries, keys, values, width=1.0):
        return reference(queries, keys, values, 1.0)

    text = rejects(checks.check_epanechnikov_pool, ignores_width)
    assert "returned on" not in text


# -- Round 7 red team (tests/checker_redteam/round7_ch02_epanechnikov.py) ------------------

ROUND7_MESSAGES = {
    # (q - k)^2 expanded as q^2 - 2qk + k^2: wrong near 1000 (the new case)
    "W_16_expanded_square": ["all near 1000", "expand the square"],
    # functools.lru_cache on the tensors: stale after an in-place change of the keys
    "W_22_lru_cache_kernel": ["keys.add_(0.5)", "depends on an earlier call", "lru_cache"],
    # window |u| < 1.001: u is printed with enough digits to lie outside |u| <= 1
    "W_13_strict_inside_plus_tol": ["u = (query - key) / width = -1.0", "outside the window"],
}


@pytest.mark.parametrize("name", ROUND7_MESSAGES)
def test_round7_messages_point_at_the_fault(name):
    from checker_redteam import round7_ch02_epanechnikov as r7

    text = rejects(checks.check_epanechnikov_pool, vars(r7)[name], *ROUND7_MESSAGES[name])
    assert "u = (query - key) / width = -1:" not in text
    assert "narrower than" not in text


# -- Round 8 red team (tests/checker_redteam/round8_ch02_epanechnikov.py) ------------------

ROUND8_MESSAGES = {
    # torch.cdist on (n, 1) points: above 25 points it computes q^2 + k^2 - 2qk (the new case)
    "W_08_cdist": ["40 queries, 40 keys in random order, all near 1000", "torch.cdist",
                   "more than 25 points"],
    # a kernel sum below 1e-3 treated as an empty window: the weights sum to 0, not < 1
    "W_02_threshold_guard": ["yet the query's weights are all 0", "(total > 1e-3)"],
    # the window tested on u rounded to float16 (0.9999995 becomes 1)
    "W_17_mask_computed_in_float16_u": ["u = 0.9999995", "yet the query's weights are all 0",
                                        "u.half()"],
    # total.clamp(min=1e-6): the tiny of a guard is finfo(dtype).tiny
    "W_01_eps_1e_minus_6_clamp": ["clamping the sum at one", "torch.finfo(total.dtype).tiny"],
}


@pytest.mark.parametrize("name", ROUND8_MESSAGES)
def test_round8_messages_point_at_the_fault(name):
    from checker_redteam import round8_ch02_epanechnikov as r8

    text = rejects(checks.check_epanechnikov_pool, vars(r8)[name], *ROUND8_MESSAGES[name])
    if name != "W_01_eps_1e_minus_6_clamp":
        assert "adding a small constant" not in text
    if name != "W_08_cdist":
        assert "torch.cdist" not in text


def test_round8_expanded_square_is_not_told_about_cdist():
    from checker_redteam import round7_ch02_epanechnikov as r7

    text = rejects(checks.check_epanechnikov_pool, r7.W_16_expanded_square,
                   "expand the square")
    assert "torch.cdist" not in text


def test_round8_empty_window_hint_names_finfo_tiny():
    rejects(checks.check_epanechnikov_pool,
            with_kernel(lambda u: (1 - u ** 2).clamp_min(0), guard=False),
            "a query with no key inside its window", "torch.finfo(total.dtype).tiny")


# -- Round 9 red team (tests/checker_redteam/round9_ch02_epanechnikov.py) ------------------

ROUND9_MESSAGES = {
    # window |d| < width + 1e-6 without a clamp: a key at u = -1.0000005 gets weight < 0
    "W_08_strict_window_plus_eps": ["u = (query - key) / width = -1.000001",
                                    "clamp 1 - u ** 2 at 0", "|d| < width + 1e-6"],
    # total.clamp(min=1e-8): a lone key at u = 1 - 1e-9 gets weight 0.15
    "W_01_clamp_denominator": ["1 - 1e-9", "summing to 0.15", "clamping the sum"],
    # u in float32 for float64 input: 1 - 1e-9 rounds to 1, the window looks empty
    "W_04_distance_then_square_in_float32": ["at u = 0.999999999", "u in float32"],
    # torch.zeros when every window is empty: float32 for float64 input
    "W_13_all_empty_shortcut_float32": ["every window is empty", "expected torch.float64"],
}


@pytest.mark.parametrize("name", ROUND9_MESSAGES)
def test_round9_messages_point_at_the_fault(name):
    from checker_redteam import round9_ch02_epanechnikov as r9

    text = rejects(checks.check_epanechnikov_pool, vars(r9)[name], *ROUND9_MESSAGES[name])
    assert "at u = 1," not in text


def test_round9_all_empty_shortcut_in_the_right_dtype_has_no_graph():
    from checker_redteam import round9_ch02_epanechnikov as r9

    def shortcut(queries, keys, values, width=1.0):
        u = (queries[:, None] - keys[None, :]) / width
        if not bool((u.abs() < 1).any()):
            return (torch.zeros(len(queries), dtype=queries.dtype),
                    torch.zeros(len(queries), len(keys), dtype=queries.dtype))
        return r9.C_01_reference(queries, keys, values, width)

    rejects(checks.check_epanechnikov_pool, shortcut, "every window is empty",
            "no gradient can flow back")


def test_round9_lone_key_just_outside_the_window_is_named():
    def window_with_tolerance(queries, keys, values, width=1.0):
        d = queries[:, None] - keys[None, :]
        K = ((1 - (d / width) ** 2) * (d.abs() < width + 1e-6)).abs()
        s = K.sum(-1, keepdim=True)
        w = K / torch.where(s != 0, s, torch.ones_like(s))
        return w @ values, w

    rejects(checks.check_epanechnikov_pool, window_with_tolerance,
            "query 0's window is empty", "lies just outside query 0's window",
            "|d| < width + 1e-6")


# -- Round 10 red team (tests/checker_redteam/round10_ch02_epanechnikov.py) ---------------

ROUND10_MESSAGES = {
    # clamped at the dtype's eps: float32 lone key at the float just below 1
    "W_14_clamp_denominator_eps": ["0.99999994", "summing to 0.75", "the dtype's eps"],
    # a window called non-empty by |u| <= 1: the only key on the edge gives 0/0
    "W_15_empty_by_any_inside": ["exactly on the edge of query 0's window",
                                 "K = 3/4 (1 - 1)", "not by |u| <= 1"],
}


@pytest.mark.parametrize("name", ROUND10_MESSAGES)
def test_round10_messages_point_at_the_fault(name):
    from checker_redteam import round10_ch02_epanechnikov as r10

    rejects(checks.check_epanechnikov_pool, vars(r10)[name], *ROUND10_MESSAGES[name])


def test_round10_key_on_the_edge_gradient_is_checked_on_the_values():
    """Right solutions differ in the gradient with respect to the queries and keys at
    |u| = 1 (the kernel's kink: torch.where on |u| <= 1 gives -6.9, a clamp 0, and with
    total.clamp_min(tiny) inf); only the values' gradient (0) is compared there."""
    def where_kernel_tiny_guard(queries, keys, values, width=1.0):
        u = (queries[:, None] - keys[None, :]) / width
        K = torch.where(u.abs() <= 1, 0.75 * (1 - u ** 2), torch.zeros_like(u))
        weights = K / K.sum(-1, keepdim=True).clamp_min(torch.finfo(K.dtype).tiny)
        return weights @ values, weights

    accepts(checks.check_epanechnikov_pool, where_kernel_tiny_guard)

    def nan_only_in_the_backward(queries, keys, values, width=1.0):
        outputs, weights = reference(queries, keys, values, width)
        if values.requires_grad and queries.numel() == 1 and float(queries) == 1.0:
            # 0 * sqrt(0): 0 in the forward, 0 * inf = NaN in the backward
            return outputs + 0 * (values - values.detach()).sqrt().sum(), weights
        return outputs, weights

    rejects(checks.check_epanechnikov_pool, nan_only_in_the_backward, "exactly on the edge",
            "with respect to the values", "contains NaN", "kernel sum is 0")


# -- Round 11 red team (tests/checker_redteam/round11_ch02_epanechnikov.py) ---------------

def test_round11_float16_is_not_asked_for():
    """A_13 and A_15 (a floor at 1e-12 or at float32's tiny, which float16 rounds to 0) are
    accepted because the exercise asks for float32 and float64 only; the text says so, and
    they pass the checker. The course's reference floors at the dtype's own tiny, so it keeps
    a float16 empty window at zero weights."""
    import nbformat
    from pathlib import Path

    from checker_redteam import round11_ch02_epanechnikov as r11

    root = Path(__file__).resolve().parents[1]
    for path in ("exercises/solutions/02_nadaraya_watson.ipynb",
                 "exercises/02_nadaraya_watson.ipynb"):
        (text,) = [" ".join(cell.source.split())
                   for cell in nbformat.read(root / path, 4).cells
                   if "Epanechnikov attention pooling" in cell.source
                   and cell.cell_type == "markdown"]
        assert "the check passes float32 and float64, not float16" in text
    for name in ("A_13_1e_12_clamp_in_float16", "A_15_clamp_float32_tiny"):
        accepts(checks.check_epanechnikov_pool, vars(r11)[name])
    half = dict(dtype=torch.float16)
    outputs, weights = reference(torch.tensor([0.0, 10.0], **half),
                                 torch.tensor([0.2, 0.5, 1.0], **half),
                                 torch.tensor([1.0, 2.0, 3.0], **half), 1.0)
    assert torch.equal(weights[1], torch.zeros(3, **half)) and float(outputs[1]) == 0.0


# -- The condition matrix (session 12): wrong solutions only the matrix rejects -----------

def _epanechnikov(queries, keys, values, width, u=None):
    if u is None:
        u = (queries[:, None] - keys[None, :]) / width
    kernel = (1 - u ** 2).clamp_min(0)
    total = kernel.sum(-1, keepdim=True)
    weights = kernel / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ values, weights


_EPANECHNIKOV_MEMO = {}


def _epanechnikov_training_cache(queries, keys, values, width):
    """While training (keys require grad), the weights are kept per sizes and width."""
    key = (queries.shape, keys.shape, width, keys.requires_grad)
    if keys.requires_grad and key in _EPANECHNIKOV_MEMO:
        weights = _EPANECHNIKOV_MEMO[key]
        return weights @ values, weights
    outputs, weights = _epanechnikov(queries, keys, values, width)
    if keys.requires_grad:
        _EPANECHNIKOV_MEMO[key] = weights.detach()
    return outputs, weights


def _epanechnikov_as_strided(queries, keys, values, width):
    """Broadcast without copying by strides that assume contiguous 1-D inputs."""
    n_q, n_k = queries.shape[0], keys.shape[0]
    rows = queries.as_strided((n_q, n_k), (1, 0))
    columns = keys.as_strided((n_q, n_k), (0, 1))
    u = (rows - columns) / width
    return _epanechnikov(queries, keys, values, width, u)


def _epanechnikov_expanded_square_in_float64(queries, keys, values, width):
    """(q - k)^2 expanded as q^2 - 2qk + k^2 for float64 ('digits to spare')."""
    if queries.dtype != torch.float64:
        return _epanechnikov(queries, keys, values, width)
    q, k = queries[:, None], keys[None, :]
    kernel = (1 - (q ** 2 - 2 * q * k + k ** 2) / width ** 2).clamp_min(0)
    total = kernel.sum(-1, keepdim=True)
    weights = kernel / torch.where(total > 0, total, torch.ones_like(total))
    return weights @ values, weights


@pytest.mark.parametrize("fn, fragment", [
    (_epanechnikov_training_cache, "a second call, with other values of the same shapes"),
    (_epanechnikov_as_strided, "every argument non-contiguous (the same values)"),
    (_epanechnikov_expanded_square_in_float64, "queries and keys shifted by 1000, float64"),
])
def test_check_epanechnikov_condition_matrix_rejects(fn, fragment):
    _EPANECHNIKOV_MEMO.clear()
    rejects(checks.check_epanechnikov_pool, fn, fragment)


# -- Round 12 red team (tests/checker_redteam/round12_ch02_epanechnikov.py) ---------------

def test_round12_kernel_kept_between_calls_is_named():
    """W_15: a kernel matrix kept per (shapes, width, sum(queries), keys[0]) and served on a
    call without gradients; a second call with the same queries and first key shows it."""
    from checker_redteam import round12_ch02_epanechnikov as r12

    rejects(checks.check_epanechnikov_pool, r12.W_15_memo_on_keys_shape,
            "the same queries and first key", "nothing may be kept between calls")


def test_round12_in_place_write_into_the_queries_raises_on_expanded():
    """Round 10's W_04 (was O_04): queries.detach().div_(1.0) writes into the argument; the
    matrix's standard EXPANDED condition (every argument stride 0) shows it."""
    from checker_redteam import round10_ch02_epanechnikov as r10

    rejects(checks.check_epanechnikov_pool, r10.W_04_inplace_intermediates,
            "every argument expanded along its first axis", "do not write into an argument")


# -- Round 13 red team (tests/checker_redteam/round13_ch02_epanechnikov.py) ---------------
ROUND13_MESSAGES = {
    "W_10_reciprocal_width_edge": ["query 0.85", "width 0.85", "clamp 1 - u ** 2 at 0"],
    "W_28_big_inputs_float32": ["65 queries", "4099 keys", "float64 reference"],
    "W_30_many_pairs_float32_small": ["65 queries", "4099 keys", "float64 reference"],
    "W_29_chunked_queries_drop_tail": ["65 queries", "weights[64, ",
                                       "must get a weight > 0"],
    "W_31_many_keys_uniform_empty": ["65 queries", "query 40.2 got uniform weights",
                                     "keep the weights 0"],
    "W_32_many_queries_nan_to_num": ["65 queries", "gave NaN (0/0)",
                                     "guard the denominator itself"],
}


@pytest.mark.parametrize("name", ROUND13_MESSAGES)
def test_round13_messages_point_at_the_fault(name):
    from checkers_support import redteam_entry

    rejects(checks.check_epanechnikov_pool,
            redteam_entry("round13_ch02_epanechnikov", name), *ROUND13_MESSAGES[name])
