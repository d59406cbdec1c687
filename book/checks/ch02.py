"""Checkers for chapter 2's exercises: Epanechnikov-kernel attention pooling."""
import torch
from torch.overrides import TorchFunctionMode

from .. import kernel_regression as _kr
from ._core import (EXPANDED, FLOAT64, NONCONTIGUOUS, PLAIN, REPEAT, Condition, call,
                    checker, expect_close, expect_conditions, expect_gradients,
                    expect_tensor, fail, forbidden, is_close, shifted)

# Exercise 2.1 asks for the pooling "from scratch (without calling book.kernel_regression)".
_BOOK_POOLING = [(_kr, "nadaraya_watson"), (_kr, "epanechnikov"), (_kr, "boxcar"),
                 (_kr, "gaussian"), (_kr, "NWKernelRegression")]
_FROM_SCRATCH = ("the exercise asks you to write the pooling from scratch, without calling "
                 "book.kernel_regression (compute u, the kernel and the weights yourself).")


def _epanechnikov_reference(queries, keys, values, width):
    """In float64; clamp_min keeps both the forward and the gradients free of 0/0."""
    u = (queries.reshape(-1, 1).double() - keys.reshape(1, -1).double()) / width  # (n_q, n_k)
    K = (1 - u ** 2).clamp_min(0)                                     # 3/4 cancels
    total = K.sum(dim=-1, keepdim=True)
    weights = K / total.clamp_min(torch.finfo(K.dtype).tiny)
    return weights @ values.double(), weights


def _epanechnikov_cases():
    g = torch.Generator().manual_seed(2)
    keys = torch.sort(torch.rand(8, generator=g) * 4).values
    values = torch.randn(8, generator=g)
    queries = torch.tensor([0.3, 1.1, 2.0, 2.7, 3.6])
    order = torch.randperm(12, generator=g)
    shuffled_keys, shuffled_values = torch.rand(12, generator=g) * 5, torch.randn(12, generator=g)
    many_keys, many_values = torch.rand(60, generator=g) * 6, torch.randn(60, generator=g)
    return [
        ("5 queries, 8 keys in [0, 4), width 1", queries, keys, values, 1.0),
        ("the same inputs, width 0.7", queries, keys, values, 0.7),
        ("3 queries, 8 keys, width 2.5 (wide windows)", queries[:3], keys, values, 2.5),
        ("queries 1.0 and 10.0 with keys 0, 0.5, ..., 3.5, width 1 (no key near 10)",
         torch.tensor([1.0, 10.0]), torch.arange(0, 4, 0.5), torch.arange(8.0) - 3, 1.0),
        ("6 unsorted queries, 12 keys in random order in [0, 5), width 0.8",
         torch.tensor([4.1, 0.2, 2.5, 3.3, 1.4, 5.6]), shuffled_keys[order],
         shuffled_values[order], 0.8),
        ("7 queries, 60 keys in random order in [0, 6), width 0.5",
         torch.tensor([0.1, 5.9, 3.0, 1.7, 4.4, 2.2, 0.9]), many_keys, many_values, 0.5),
        ("float64: 4 queries, 10 keys in random order, width 0.9",
         torch.tensor([-0.5, 1.0, 2.2, 3.1], dtype=torch.float64),
         torch.rand(10, generator=g, dtype=torch.float64) * 3,
         torch.randn(10, generator=g, dtype=torch.float64), 0.9),
        ("6 queries, 6 keys in random order in [0, 5), width 1.2 (as many queries as keys)",
         torch.tensor([0.3, 4.6, 2.2, 1.0, 3.7, 2.9]), shuffled_keys[order][:6],
         shuffled_values[order][:6], 1.2),
        ("float64: query 1.49999925 with keys 0 and 5, width 1.5 (the only key in the window "
         "sits at u = 0.9999995, where K(u) is about 7.5e-7)",
         torch.tensor([1.49999925], dtype=torch.float64),
         torch.tensor([0.0, 5.0], dtype=torch.float64),
         torch.tensor([2.0, -1.0], dtype=torch.float64), 1.5),
        *_epanechnikov_cases_round6(),
        *_epanechnikov_cases_round7(),
        *_epanechnikov_cases_round8(),
        *_epanechnikov_cases_round9(),
        *_epanechnikov_cases_round10(),
        *_epanechnikov_cases_round13(),
    ]


def _epanechnikov_cases_round13():
    """Added after red-team round 13: a key on the edge of a window of width 0.85
    (float32 0.85 * (1 / 0.85) rounds above 1: u computed with the reciprocal of the width
    and not clamped gives K a tiny negative value, and the lone key weight 1); and a case
    above any size switch, 65 queries (> 64, odd: chunks of 64 leave a tail of one query)
    and 4099 keys (> 4096; 266,435 pairs, > 2^16) in random order, in float32 and float64,
    with three queries whose windows are empty (a uniform average or a 0/0 replaced
    afterwards shows there). Points on a grid of 0.3 with width 0.5: no |u| comes near 1."""
    g = torch.Generator().manual_seed(134)
    keys = 0.3 * torch.randint(0, 100, (4099,), generator=g).double()
    queries = 0.3 * torch.randint(0, 100, (65,), generator=g).double()
    queries[torch.tensor([5, 33, 40])] = torch.tensor([40.2, -12.0, 35.1], dtype=torch.float64)
    values = torch.randn(4099, generator=g, dtype=torch.float64)
    words = ("65 queries (3 of them, 40.2, -12 and 35.1, with empty windows), 4099 keys in "
             "random order in [0, 30), width 0.5")
    return [("query 0.85 (float32: 0.8500000238) with keys 0, 5 and 9, width 0.85 (key 0 "
             "sits on the window's edge, |u| = 1 in float32, where K = 0: the window is "
             "empty)", torch.tensor([0.85]),
             torch.tensor([0.0, 5.0, 9.0]), torch.tensor([2.0, -1.0, 0.5]), 0.85),
            (words, queries.float(), keys.float(), values.float(), 0.5),
            ("float64: " + words, queries, keys, values, 0.5)]


def _edge_case():
    """Added after red-team round 10 (float32): query 1 whose only key in reach, 0.5, sits
    exactly on the window's edge (width 0.5, u = 1, K = 0): the window is empty although
    |u| <= 1 holds."""
    return ("query 1.0 with keys 0.5 and 3.0, width 0.5 (key 0 sits exactly on the edge "
            "of the window, u = 1, where K = 0: the window is empty)",
            torch.tensor([1.0]), torch.tensor([0.5, 3.0]), torch.tensor([2.0, -1.0]), 0.5)


def _epanechnikov_cases_round10():
    """Added after red-team round 10: a float32 window whose only key sits at the float
    just below 1 (K about 8.9e-8), under a floor on the sum at torch.finfo(float32).eps;
    and a key exactly on the window's edge (_edge_case), where a window called non-empty
    because |u| <= 1 divides 0 by 0. (A float64 floor at 1e-12 is what F.normalize(K, p=1)
    does, accepted in round 8: no case puts a window's whole kernel sum below 1e-12.)"""
    below_one = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0))   # 1 - 2^-24
    return [("query 0 with keys 0.99999994 (the float32 just below 1) and 3, width 1 (the "
             "only key in the window has K(u) about 8.9e-8, below float32's eps)",
             torch.tensor([0.0]), torch.stack([below_one, torch.tensor(3.0)]),
             torch.tensor([2.0, 5.0]), 1.0),
            _edge_case()]


def _check_gradients_key_on_the_edge(fn):
    """Added after red-team round 10: the gradient on _edge_case, with respect to the
    values (the weights are 0, so it is 0). The kernel has a kink at |u| = 1, so right
    solutions differ there in the gradients with respect to the queries and keys; the
    values' gradient is NaN only where the weights are."""
    case, queries, keys, values, width = _edge_case()
    expect_gradients(lambda v: fn(queries, keys, v, width),
                     lambda v: _epanechnikov_reference(queries, keys, v, width),
                     [("values", values)], name="epanechnikov_pool",
                     case=case + " (gradient of the outputs with respect to the values)",
                     nan_hint="a window is empty when its kernel sum is 0, also when "
                              "some key has |u| <= 1: a key exactly on the edge has K = 0. "
                              f"Guard the division by the sum itself, K / {_TINY} or K / "
                              "torch.where(total > 0, total, 1), not by a test on u.")


def _epanechnikov_cases_round9():
    """Added after red-team round 9 (float64): keys just outside a window (u = 1 + 5e-7),
    alone in one query's window and next to a key inside in another's, where a window with
    a tolerance (|d| < width + 1e-6) and no clamp gives a negative kernel value; windows
    whose only key sits at u = 1 - 1e-9 and 1 - 1e-12, where K(u) is about 1.5e-9 and
    1.5e-12 (a guard total.clamp(min=1e-8) shrinks such weights); and every window empty."""
    f64 = dict(dtype=torch.float64)
    return [("float64: queries 0 and 10, keys 1.0000005, 10.5 and 11.0000005, width 1 "
             "(keys 0 and 2 lie just outside the windows, at u = -1.0000005: query 0's "
             "window is empty)", torch.tensor([0.0, 10.0], **f64),
             torch.tensor([1 + 5e-7, 10.5, 11 + 5e-7], **f64),
             torch.tensor([2.0, -1.0, 0.5], **f64), 1.0),
            ("float64: queries 1.5 (1 - 1e-9) and 20 + 1.5 (1 - 1e-12) with keys 0, 5, 20 "
             "and 25, width 1.5 (each window's only key sits at u = 1 - 1e-9 or 1 - 1e-12, "
             "where K(u) is about 1.5e-9 or 1.5e-12)",
             torch.tensor([1.5 * (1 - 1e-9), 20 + 1.5 * (1 - 1e-12)], **f64),
             torch.tensor([0.0, 5.0, 20.0, 25.0], **f64),
             torch.tensor([2.0, -1.0, 3.0, 0.5], **f64), 1.5),
            ("float64: queries 10 and 20 with keys 0, 1 and 2.5, width 0.5 (every window "
             "is empty)", torch.tensor([10.0, 20.0], **f64),
             torch.tensor([0.0, 1.0, 2.5], **f64), torch.tensor([1.0, -2.0, 0.5], **f64),
             0.5)]


def _check_gradients_every_window_empty(fn):
    """Added after red-team round 9: float64, every window empty. The outputs are zeros,
    but they must still come from the inputs (a shortcut returning torch.zeros has no graph:
    loss.backward() in a training loop raises)."""
    f64 = dict(dtype=torch.float64)
    expect_gradients(lambda q, k, v: fn(q, k, v, 0.5),
                     lambda q, k, v: _epanechnikov_reference(q, k, v, 0.5),
                     [("queries", torch.tensor([10.0, 20.0], **f64)),
                      ("keys", torch.tensor([0.0, 1.0, 2.5], **f64)),
                      ("values", torch.tensor([1.0, -2.0, 0.5], **f64))],
                     name="epanechnikov_pool",
                     case="float64: queries 10 and 20 with keys 0, 1 and 2.5, width 0.5 "
                          "(every window is empty; gradients of outputs and weights)")


def _epanechnikov_cases_round8():
    """Added after red-team round 8: points near 1000 again, now 40 queries and 40 keys.
    Above 25 points torch.cdist switches to its matrix-multiply path, sqrt(q^2 + k^2 - 2qk),
    which cancels as the expanded square does (the round-7 case has fewer points, where
    cdist subtracts directly)."""
    g = torch.Generator().manual_seed(35)
    return [("40 queries, 40 keys in random order, all near 1000 (in [1000, 1004)), "
             "width 0.5", 1000 + 4 * torch.rand(40, generator=g),
             1000 + 4 * torch.rand(40, generator=g), torch.randn(40, generator=g), 0.5)]


def _epanechnikov_cases_round7():
    """Added after red-team round 7: points near 1000, where (q - k)^2 expanded as q^2 -
    2qk + k^2 cancels catastrophically in float32 (q^2 is about 1e6, rounded to 0.06),
    while q - k is exact. Fewer than 26 points, so that torch.cdist computes the distances
    directly."""
    g = torch.Generator().manual_seed(33)
    keys = 1000 + 4 * torch.rand(10, generator=g)
    return [("5 queries, 10 keys in random order, all near 1000 (in [1000, 1004)), width 0.5",
             torch.tensor([1000.3, 1003.1, 1001.7, 1000.9, 1002.4]), keys,
             torch.randn(10, generator=g), 0.5)]


def _epanechnikov_cases_round6():
    """Added after red-team round 6: the first case's sizes and width (5 queries, 8 keys,
    width 1, float32) on other points, so that weights kept from an earlier call (a cache
    keyed on the sizes or the width) come out wrong."""
    g = torch.Generator().manual_seed(31)
    keys, values = torch.rand(8, generator=g) * 4, torch.randn(8, generator=g)
    return [("5 other queries, 8 other keys in random order, width 1 (the sizes and width of "
             "the first case, other points)", torch.tensor([0.6, 3.3, 1.8, 2.6, 0.1]), keys,
             values, 1.0)]


_DIVISIONS = {"div", "div_", "divide", "true_divide", "__truediv__", "__rtruediv__",
              "__itruediv__"}


class _NanFromDivision(TorchFunctionMode):
    """Records the first division whose result has a NaN its inputs did not have (0/0), and
    whether torch.cdist was called (`cdist`)."""

    def __init__(self):
        super().__init__()
        self.seen = self.cdist = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.cdist |= getattr(func, "__name__", "") == "cdist"
        if getattr(func, "__name__", "") in _DIVISIONS and isinstance(out, torch.Tensor) \
                and out.is_floating_point() and bool(torch.isnan(out).any()) \
                and not any(isinstance(a, torch.Tensor) and a.is_floating_point()
                            and bool(torch.isnan(a).any()) for a in args):
            self.seen = True
        return out


def _describe(queries, keys, width, i, j):
    u = (float(queries[i]) - float(keys[j])) / width
    digits = 3 if max(abs(float(queries[i])), abs(float(keys[j]))) < 100 else 6
    while digits < 17 and abs(float(f"{abs(u):.{digits}g}") - 1) < 1e-300 and abs(u) != 1:
        digits += 1   # u near +-1: enough digits to tell inside from outside
    return (f"query {i} ({float(queries[i]):.{max(4, digits + 1)}g}) and key {j} "
            f"({float(keys[j]):.{max(4, digits + 1)}g}), u = (query - key) / width = "
            f"{u:.{digits}g}")


_TINY = "total.clamp_min(torch.finfo(total.dtype).tiny)"
_EMPTY_HINT = ("a query with no key inside its window has kernel sum 0, and 0/0 is NaN: give "
               f"such a query all-zero weights (divide by {_TINY}, or by "
               "torch.where(total > 0, total, 1)).")
_CDIST_HINT = ("torch.cdist computes the distances of more than 25 points as sqrt(q^2 + "
               "k^2 - 2qk), a matrix product: far from 0 that subtracts numbers near 1e6, "
               "each rounded in float32 by about 0.06, and the difference is lost. "
               "Subtract first, u = (queries[:, None] - keys[None, :]) / width, then "
               "1 - u ** 2 (q - k is exact for nearby points).")


@checker("epanechnikov_pool")
def check_epanechnikov_pool(fn):
    """Check `fn(queries, keys, values, width)` -> (outputs, weights), Epanechnikov pooling, on
    sorted and shuffled keys, 60 keys, as many queries as keys, float64, a key at the window's
    edge, and gradients; a division that gives 0/0 (NaN replaced afterwards) is refused."""
    returned = []   # (case, (queries, keys), weights) of the earlier calls
    for case, queries, keys, values, width in _epanechnikov_cases():
        given = [queries.clone(), keys.clone(), values.clone()]
        with _NanFromDivision() as divisions, forbidden(_BOOK_POOLING, _FROM_SCRATCH):
            result = call(fn, *given, width, name="epanechnikov_pool", case=case)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            fail(f"epanechnikov_pool should return a tuple (outputs, weights), got "
                 f"{type(result).__name__} on {case}.")
        for name, before, after in zip(("queries", "keys", "values"),
                                       (queries, keys, values), given):
            if not torch.equal(before, after):
                fail(f"epanechnikov_pool changed its argument `{name}` in place on {case}.",
                     "compute new tensors (u = (q - k) / width), never `/=` or `.div_()` on "
                     "an argument: the caller still needs it.")
        outputs, weights = result
        n_q, n_k = len(queries), len(keys)
        ref_outputs, ref_weights = _epanechnikov_reference(queries, keys, values, width)
        if isinstance(weights, torch.Tensor):
            for before, points, earlier in returned:
                other_points = not all(a.shape == b.shape and torch.equal(a, b)
                                       for a, b in zip(points, (queries, keys)))
                if other_points and earlier.shape == weights.shape \
                        and earlier.dtype == weights.dtype \
                        and torch.equal(earlier, weights.detach()) \
                        and not is_close(earlier, ref_weights):
                    fail(f"the weights on {case} are those your function returned on "
                         f"{before} (the same sizes, other points): they must be computed "
                         "from this call's queries and keys.",
                         "keep nothing between calls (no cache or global keyed on the sizes "
                         "or the width): compute u, the kernel and the weights anew every "
                         "call.")
            returned.append((case, (queries, keys), weights.detach().clone()))
        empty = ref_weights.sum(dim=-1) == 0
        if isinstance(weights, torch.Tensor) and weights.is_floating_point() \
                and tuple(weights.shape) == (n_q, n_k) and torch.isnan(weights).any():
            rows = torch.isnan(weights).any(dim=-1)
            hint = _EMPTY_HINT if bool(empty[rows].all()) else \
                "NaN came from a query whose window holds keys: look for 0/0 or inf - inf."
            u = (queries.double()[:, None] - keys.double()[None, :]) / width
            edge = (u.abs() == 1) & empty[:, None] & rows[:, None]
            if edge.any():   # added after red-team round 10
                i, j = (int(t) for t in edge.nonzero()[0])
                hint = (f"key {j} sits exactly on the edge of query {i}'s window "
                        f"({_describe(queries, keys, width, i, j)}), where K = 3/4 (1 - 1) "
                        "= 0: the window is empty (kernel sum 0) although |u| <= 1 holds "
                        "for that key. Decide by the sum, not by |u| <= 1: divide by "
                        f"{_TINY}, or by torch.where(total > 0, total, 1).")
            fail(f"the weights contain NaN on {case}, for the queries "
                 f"{queries[rows].tolist()}.", hint)
        if divisions.seen and isinstance(outputs, torch.Tensor) \
                and outputs.is_floating_point() and bool(torch.isnan(outputs).any()):
            rows = torch.isnan(outputs.reshape(len(outputs), -1)).any(dim=-1) \
                if outputs.dim() and len(outputs) == n_q else None
            where = (f", for the queries {[round(x, 4) for x in queries[rows].tolist()]}"
                     if rows is not None else "")
            fail(f"the outputs contain NaN on {case}{where}: a division inside "
                 "epanechnikov_pool gave 0/0 (a query with no key in its window has kernel "
                 "sum 0).",
                 "guard every division by the kernel sum, also the one that gives the "
                 f"outputs: divide by {_TINY}, or by torch.where(total > 0, total, 1), or "
                 "compute the outputs as weights @ values from the guarded weights.")
        if divisions.seen:
            fail(f"a division inside epanechnikov_pool gave NaN (0/0) on {case}, and the NaN "
                 "was replaced afterwards (nan_to_num, or torch.where on the result).",
                 "the exercise asks you to guard the denominator itself: divide by "
                 f"{_TINY}, or by torch.where(total > 0, total, 1), so that no 0/0 is ever "
                 "computed (its NaN also reaches the gradients).")
        expect_tensor(weights, (n_q, n_k), what="weights", case=case)
        expect_tensor(weights, dtype=queries.dtype, what="weights", case=case)
        if float(queries.abs().max()) > 100 and not is_close(weights, ref_weights):
            i, j = (int(t) for t in (~torch.isclose(weights.double(), ref_weights,
                                                     atol=1e-5, rtol=1e-4)).nonzero()[0])
            fail(f"the weights are wrong on {case}, though they were right on every earlier "
                 f"case (points near 0): weights[{i}, {j}] is {weights[i, j].item():.4g}, "
                 f"expected {ref_weights[i, j].item():.4g}, for "
                 f"{_describe(queries, keys, width, i, j)}.",
                 _CDIST_HINT if divisions.cdist else
                 "far from 0, float32 loses the difference if you expand the square: q^2 - "
                 "2qk + k^2 subtracts numbers near 1e6, each rounded by about 0.06. Subtract "
                 "first and square the difference, u = (queries[:, None] - keys[None, :]) / "
                 "width, then 1 - u ** 2 (q - k is exact for nearby points).")
        u = (queries.double()[:, None] - keys.double()[None, :]) / width
        W = weights.double()
        uniform = empty & (W - 1 / n_k).abs().le(1e-6).all(dim=-1)
        if uniform.any():
            fail(f"a query with no key inside its window should get all-zero weights on {case};"
                 f" query {queries[uniform][0].item():.4g} got uniform weights 1/{n_k}.",
                 "when the sum of the kernel values is 0, keep the weights 0 (guard the "
                 "division) instead of spreading them over keys that are outside the window.")
        outside = (u.abs() > 1 + 1e-6) & (weights != 0)
        window = _window_size(u, weights) if outside.any() else None
        if window is not None and window[0] > 1 and not bool((weights < 0).any()):
            i, j = (int(t) for t in outside.nonzero()[0])
            fail(f"weights[{i}, {j}] is {weights[i, j].item():.3g} on {case}, for "
                 f"{_describe(queries, keys, width, i, j)}: that key lies outside the "
                 "window |u| <= 1 and must get weight 0.",
                 _width_hint(window, width, "wider"))
        if outside.any():
            i, j = (int(t) for t in outside.nonzero()[0])
            fail(f"weights[{i}, {j}] is {weights[i, j].item():.3g} on {case}, for "
                 f"{_describe(queries, keys, width, i, j)}: that key lies outside the window "
                 "|u| <= 1 and must get weight 0.",
                 "the kernel must be exactly 0 outside the window: do not add a small constant "
                 "to K or to the weights (an empty window must give zeros, not uniform "
                 "weights)." if float(weights[outside].abs().max()) < 1e-6 else
                 "outside the window |u| > 1 the kernel is 0, not 1 - u^2 < 0: clamp it at 0; "
                 "and every pair counts, u[i, j] = (queries[i] - keys[j]) / width over all "
                 "keys in the order given (they are not sorted)."
                 if bool((weights < 0).any()) else
                 "the window is |u| <= 1 with u[i, j] = (queries[i] - keys[j]) / width, shape "
                 "(n_q, n_k); scale the distance by the width before squaring ((d / width)^2, "
                 "not d^2 / width), and keep the keys in the order given (column j of the "
                 "weights belongs to keys[j]).")
        if (weights < 0).any():
            i, j = (int(t) for t in (weights < 0).nonzero()[0])
            fail(f"some weights are negative on {case}: weights[{i}, {j}] = "
                 f"{weights[i, j].item():.3g} for {_describe(queries, keys, width, i, j)}.",
                 "inside the window the kernel 3/4 (1 - u^2) is positive; outside it is "
                 "0, not 1 - u^2 < 0: clamp 1 - u ** 2 at 0 (or mask it with |u| <= 1 "
                 "exactly; a window with a tolerance, |d| < width + 1e-6, takes in keys "
                 "just outside it, where 1 - u^2 is negative).")
        inside = (u.abs() < 1 - 1e-6) & (weights == 0) & ~empty[:, None]
        if inside.any():
            i, j = (int(t) for t in inside.nonzero()[0])
            hint = ("every key with |u| < 1 counts, wherever it sits in `keys` (they are "
                    "not sorted, and there may be many): compute u for all pairs, shape "
                    "(n_q, n_k).")
            window = _window_size(u, weights)
            if window is not None and window[1] < 1:
                hint = _width_hint(window, width, "narrower")
            fail(f"weights[{i}, {j}] is 0 on {case}, for {_describe(queries, keys, width, i, j)}:"
                 " that key lies inside the window and must get a weight > 0.", hint)
        if empty.any() and not torch.equal(weights[empty], torch.zeros_like(weights[empty])):
            hint = ("when the sum of the kernel values is 0, keep the weights 0 (guard the "
                    "division) instead of spreading them over keys that are outside the "
                    "window.")
            i = int((empty & (weights.detach() != 0).any(dim=-1)).nonzero()[0])
            j = int((weights[i].detach() != 0).nonzero()[0])
            if abs(float(u[i, j])) <= 1 + 1e-5:   # added after red-team round 9
                where = _describe(queries, keys, width, i, j)
                hint = (f"key {j} lies just outside query {i}'s window ({where}), so its "
                        "kernel value is 0, not 3/4 (1 - u^2) < 0: clamp 1 - u ** 2 at 0, "
                        "or keep |u| <= 1 exactly (a window with a tolerance, |d| < width "
                        "+ 1e-6, takes in such a key, and its kernel value divided by "
                        "itself gives it weight 1).")
            fail(f"a query with no key inside its window should get all-zero weights on {case}; "
                 f"query {queries[empty][0].item():.4g} got "
                 f"{[round(w, 4) for w in weights[empty][0].tolist()]}.", hint)
        sums = weights.double().sum(dim=-1)
        if not is_close(sums[~empty], torch.ones_like(sums[~empty]), atol=1e-5, rtol=0):
            i = int((~is_close_rows(sums, empty)).nonzero()[0])
            hint = ("divide by the sum over the keys of that query." if sums[i] >= 1 else
                    "divide each kernel value by the sum over the keys (dim=-1) of that "
                    "query, exactly: adding a small constant to the sum (K / (sum + "
                    "1e-6)), or clamping the sum at one (total.clamp_min(1e-6)), is wrong "
                    "when every K in a window is small, e.g. a key at the window's edge. "
                    f"Only an empty window needs a guard: {_TINY} (the smallest positive "
                    "number of the dtype, not 1e-6 or the dtype's eps), or "
                    "torch.where(total > 0, total, 1).")
            if sums[i] == 0:   # added after red-team round 8
                j = int(ref_weights[i].argmax())
                u_ij, digits = (float(queries[i]) - float(keys[j])) / width, 7
                while digits < 17 and float(f"{abs(u_ij):.{digits}g}") == 1:
                    digits += 1   # added after red-team round 9: 1 - 1e-9 is not 1
                hint = (f"key {j} ({float(keys[j]):.4g}) lies inside query {i}'s window, at u "
                        f"= {u_ij:.{digits}g}, yet the query's weights are all 0: your "
                        "code treats the window as empty. A window is empty only "
                        "when its kernel sum is exactly 0: do not call a small sum empty "
                        "(total > 1e-3), and do not test the window on a rounded copy of u "
                        "(u.half(), which rounds 0.9999995 to 1; u in float32 for float64 "
                        "inputs, which rounds 1 - 1e-9 to 1): clamp 1 - u ** 2 at 0 "
                        "(or test |u| <= 1 on u itself, in the input's dtype) and guard "
                        f"only the division, with {_TINY} or torch.where(total > 0, total, "
                        "1).")
            fail(f"each query's weights must sum to 1 on {case}; query {i} "
                 f"({queries[i].item():.6g}) has weights summing to {sums[i].item():.6g}.",
                 hint)
        expect_tensor(outputs, (n_q,), what="outputs", case=case)
        expect_tensor(outputs, dtype=queries.dtype, what="outputs", case=case)
        expect_close(weights, ref_weights, what="weights", case=case,
                     hint="the weight of key j is K(u_j) / sum_i K(u_i), with u = (query - "
                          "key) / width, K(u) = 3/4 (1 - u^2) for |u| <= 1, for the pairs "
                          "(query i, key j) in this order: weights[i, j].")
        hint = ("the output of a query is the weighted sum of the values, with values[j] "
                "belonging to keys[j] (not the keys; not reordered).")
        if isinstance(outputs, torch.Tensor) and empty.any() and not is_close(
                outputs[empty], ref_outputs[empty]) and is_close(outputs[~empty],
                                                                 ref_outputs[~empty]):
            hint = ("a query whose window holds no key has all-zero weights, so its "
                    "output, the weighted sum of the values, is 0: return weights @ "
                    "values for every query, without a fallback (a mean of the values, "
                    "the nearest key's value) for the empty windows.")
        expect_close(outputs, ref_outputs, what="outputs", case=case, hint=hint)
    g = torch.Generator().manual_seed(21)
    keys, values = torch.rand(10, generator=g) * 4, torch.randn(10, generator=g)
    queries = torch.tensor([0.35, 1.9, 3.05, 9.0, 2.45])   # 9.0: an empty window
    empty_row = "query 3, 9.0, whose window holds no key"
    expect_gradients(lambda q, k, v: fn(q, k, v, 0.8),
                     lambda q, k, v: _epanechnikov_reference(q, k, v, 0.8),
                     [("queries", queries), ("keys", keys), ("values", values)],
                     name="epanechnikov_pool",
                     case="5 queries (one with an empty window), 10 keys in random order, "
                          "width 0.8 (gradients of outputs and weights)",
                     describe=lambda label, at: empty_row if label == "queries" and at == (3,)
                     else "",
                     nan_hint="the forward hides a 0/0 (nan_to_num, or torch.where(total > 0,"
                              " K / total, 0)), but the backward still divides by the zero "
                              f"total: guard the denominator itself, K / {_TINY} or K / "
                              "torch.where(total > 0, total, 1).")
    _check_gradients_where_a_query_is_a_key(fn)
    _check_after_in_place_change(fn)
    _check_gradients_every_window_empty(fn)
    _check_gradients_key_on_the_edge(fn)
    _epanechnikov_matrix(fn)


def _other_keys(args):
    """The same queries, values and first key; the other keys moved by one place."""
    queries, keys, values, width = args
    if keys.numel() < 3:
        return None
    return queries, torch.cat([keys[:1], keys[1:].roll(1)]), values, width


# Added after red-team round 12 (its W_15): a kernel matrix kept between calls, keyed on the
# shapes, the width, sum(queries) and keys[0], served on a call without gradients.
_OTHER_KEYS = Condition(
    "a second call under torch.no_grad(), with the same queries and first key but the "
    "other keys moved", change=_other_keys, no_grad=True,
    hint="compute every call from its own arguments: nothing may be kept between calls (a "
         "kernel matrix or result keyed on the shapes, the width or a few entries).")


def _epanechnikov_matrix(fn):
    """The condition matrix (_core.expect_conditions, session 12) on two small cases: 5
    queries (one with an empty window) and 7 keys in random order, and 2 queries with a
    single key (one inside its window, one not). Every point lies on a grid of 0.3 and the
    width is 0.5 (dividing by it is exact), so that no |u| comes near 1 (the kink, where
    right gradients differ) under any condition. Each runs as given, called again with other
    values, under torch.no_grad() with the same queries and first key but the other keys
    moved (round 12), non-contiguous, expanded (every query, key and value equal to the
    first; round 10's O_04, queries.detach().div_(1.0), raises there: ruled wrong, W_04),
    in float64, and with queries and keys shifted by 1000 in float32 and float64 (q - k
    stays exact there; q^2 - 2qk + k^2 does not); outputs and weights, and their gradients,
    against the float64 reference. Dropped: float16 and bfloat16 (exercise 2.1 says the check passes
    float32 and float64, not float16: float16 Epanechnikov is accepted, ruled in rounds 10
    and 11)."""
    cases = [("5 queries (query 9 has an empty window), 7 keys in random order, width 0.5",
              (torch.tensor([0.3, 1.5, 2.7, 3.9, 9.0]),
               torch.tensor([0.6, 2.4, 3.3, 0.9, 4.5, 1.8, 3.0]),
               torch.tensor([0.3, -1.2, 2.0, 0.7, -0.4, 1.5, -2.1]), 0.5)),
             ("queries 0.6 and 3.0 with a single key 0.9, width 0.5 (query 3.0's window is "
              "empty)", (torch.tensor([0.6, 3.0]), torch.tensor([0.9]), torch.tensor([2.0]),
                         0.5))]

    def learner(queries, keys, values, width):
        with forbidden(_BOOK_POOLING, _FROM_SCRATCH):
            return fn(queries, keys, values, width)
    conditions = (PLAIN, _OTHER_KEYS, REPEAT, NONCONTIGUOUS, EXPANDED,
                  FLOAT64) + tuple(shifted(
        1000.0, (0, 1), "queries and keys shifted by 1000",
        "subtract first, u = (queries[:, None] - keys[None, :]) / width, then 1 - u ** 2: "
        "near 1000, q^2 - 2qk + k^2 (or torch.cdist's matrix-product path) subtracts "
        "numbers near 1e6, each rounded in float32 by about 0.06."))
    expect_conditions(learner, _epanechnikov_reference, cases, name="epanechnikov_pool",
                      differentiable=(0, 1, 2), conditions=conditions)


def _check_after_in_place_change(fn):
    """Added after red-team round 7: the same tensor objects again after an in-place change
    of the keys (as an optimiser step changes a parameter): functools.lru_cache hashes a
    tensor by its identity, so a cache on it returns the earlier call's weights."""
    g = torch.Generator().manual_seed(34)
    queries = torch.tensor([0.4, 1.5, 2.3, 3.2])
    keys, values = torch.rand(9, generator=g) * 4, torch.randn(9, generator=g)
    first = "4 queries, 9 keys in random order, width 0.8"
    result = call(fn, queries, keys, values, 0.8, name="epanechnikov_pool", case=first)
    earlier = result[1].detach().clone() if isinstance(result, (tuple, list)) \
        and len(result) == 2 and isinstance(result[1], torch.Tensor) else None
    keys.add_(0.5)
    case = ("the same tensor objects as the call before, after keys.add_(0.5) changed the "
            "keys in place, width 0.8")
    result = call(fn, queries, keys, values, 0.8, name="epanechnikov_pool", case=case)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(f"epanechnikov_pool should return a tuple (outputs, weights), got "
             f"{type(result).__name__} on {case}.")
    outputs, weights = result
    ref_outputs, ref_weights = _epanechnikov_reference(queries, keys, values, 0.8)
    if isinstance(weights, torch.Tensor) and earlier is not None \
            and earlier.shape == weights.shape and torch.equal(earlier, weights.detach()) \
            and not is_close(weights, ref_weights):
        fail(f"the weights on {case} are those your function returned on {first}: the "
             "result depends on an earlier call.",
             "compute u, the kernel and the weights anew every call and keep nothing "
             "between calls: functools.lru_cache on tensors hashes a tensor by its "
             "identity, so it misses an in-place change of the same tensor.")
    expect_close(weights, ref_weights, what="weights", case=case)
    expect_close(outputs, ref_outputs, what="outputs", case=case)


def _check_gradients_where_a_query_is_a_key(fn):
    """Added after red-team round 6: queries equal to keys (u = 0), as when a model is
    evaluated at its training inputs (exercise 2.3); |u| written as sqrt(u * u) has a 0/0
    derivative there."""
    g = torch.Generator().manual_seed(32)
    keys, values = torch.rand(9, generator=g) * 3, torch.randn(9, generator=g)
    pairs = ((0, 2), (1, 5), (2, 7))   # query i is keys[j]
    queries = torch.cat([keys[[j for _, j in pairs]], torch.tensor([1.2])])

    def describe(label, at):
        for i, j in pairs:
            if (label, at) in (("queries", (i,)), ("keys", (j,))):
                return f"query {i} equals key {j}: u = 0"
        return ""

    expect_gradients(lambda q, k, v: fn(q, k, v, 0.9),
                     lambda q, k, v: _epanechnikov_reference(q, k, v, 0.9),
                     [("queries", queries), ("keys", keys), ("values", values)],
                     name="epanechnikov_pool",
                     case="4 queries, 3 of them equal to a key (u = 0), 9 keys in random "
                          "order, width 0.9 (gradients of outputs and weights)",
                     describe=describe,
                     nan_hint="the derivative of your kernel is 0/0 at u = 0: |u| written as "
                              "sqrt(u * u) (or (u * u) ** 0.5) has derivative u / |u| there. K "
                              "needs only u^2: compute 1 - u ** 2 and clamp it at 0 (or mask "
                              "it with |u| <= 1, a comparison, which autograd does not "
                              "differentiate).")


def _window_size(u, weights):
    """c if the keys with weight != 0 are exactly those with |u| < c (one c for every query,
    as when the learner's window or u is scaled by the width in another way), else None."""
    kept = weights.detach() != 0
    if not kept.any() or kept.all():
        return None
    a, b = float(u.abs()[kept].max()), float(u.abs()[~kept].min())
    return (a, b) if a < b else None


def _width_hint(window, width, wider):
    a, b = window
    return (f"your window is {wider} than |u| <= 1: at width {width:g} the keys with |u| "
            f"up to {a:.3g} get a weight and those from {b:.3g} on do not: scale the "
            "distance by the width once, u = (query - key) / width, before squaring ((d / "
            "width)^2, not d^2 / width; not d / width ** 2; the width passed in, not a "
            "fixed one), and keep the keys with |u| <= 1 (not |u| <= width).")


def is_close_rows(sums, empty):
    """True for rows that sum to 1 (or are empty)."""
    return empty | ((sums - 1).abs() <= 1e-5)
