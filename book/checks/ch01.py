"""Checkers for chapter 1's exercises: a stable softmax and top-k attention pooling."""
import contextlib

import torch
from torch.overrides import TorchFunctionMode

from ._core import (BFLOAT16, EXPANDED, FLOAT16, FLOAT16_NOT_BFLOAT16, FLOAT64,
                    FLOAT64_HINT, INFERENCE_HINT, NO_GRAD, NONCONTIGUOUS, PLAIN, REPEAT, STANDARD,
                    Condition, call, checker, expect_close,
                    expect_conditions, expect_gradients, expect_tensor, fail, forbidden,
                    is_close, scaled, view_hint)

# -- Exercise 1.1: softmax ------------------------------------------------------------------

_SOFTMAXES = [(torch, "softmax"), (torch, "log_softmax"),
              (torch.Tensor, "softmax", "a softmax of PyTorch (torch.Tensor.softmax, which "
               "torch.nn.functional.softmax, nn.Softmax, torch.nn.functional.softmin and "
               "nn.Softmin call)"),
              (torch.Tensor, "log_softmax", "a log_softmax of PyTorch (torch.Tensor."
               "log_softmax, which torch.nn.functional.log_softmax calls)"),
              (torch.special, "softmax"),
              (torch.special, "log_softmax"),
              (torch.ops.aten, "_softmax"), (torch.ops.aten, "_log_softmax"),
              (torch.ops.aten, "softmax"), (torch.ops.aten, "log_softmax"),
              (torch.ops.aten, "special_softmax"),
              (torch.ops.aten, "special_log_softmax")]  # F.softmax, nn.Softmax: Tensor's

# forbidden() replaces an op packet such as torch.ops.aten.softmax by a plain function,
# which has no overloads: torch.ops.aten.softmax.int would raise the checker's own
# AttributeError.
_ATEN_OVERLOADS = {attribute: getattr(torch.ops.aten, attribute).overloads()
                   for owner, attribute, *_ in _SOFTMAXES if owner is torch.ops.aten}


@contextlib.contextmanager
def _no_softmax(why):
    """forbidden(_SOFTMAXES, why), with the overloads of the refused aten packets
    (torch.ops.aten.softmax.int, ...) refused too (added after red-team round 8)."""
    with forbidden(_SOFTMAXES, why):
        for attribute, overloads in _ATEN_OVERLOADS.items():
            refusal = getattr(torch.ops.aten, attribute)
            for overload in overloads:
                def refuse(*args, _name=f"torch.ops.aten.{attribute}.{overload}", **kwargs):
                    __tracebackhide__ = True
                    fail(f"your function calls {_name}: {why}")
                setattr(refusal, overload, refuse)
        yield


def _softmax_cases():
    g = torch.Generator().manual_seed(1)
    mixed = 1000 * torch.randn(3, 4, generator=g)
    dominated = torch.randn(4, 7, generator=g)
    dominated[torch.arange(4), torch.tensor([0, 3, 6, 2])] += 80.0   # one score dominates
    return [
        ("a (2, 5) matrix of small scores", torch.randn(2, 5, generator=g)),
        ("a (3, 4) matrix of large scores (values near +-1000)", mixed),
        ("a (4, 7) matrix in which one score per row is about 80 above the others",
         dominated),
        ("a (3, 4) matrix whose rows lie near -1000, -10 and +1000",
         torch.randn(3, 4, generator=g) + torch.tensor([[-1000.0], [-10.0], [1000.0]])),
        ("a (2, 3, 4) batch (softmax over the last axis)", torch.randn(2, 3, 4, generator=g)),
        ("a vector of 6 scores (1-D input)", torch.randn(6, generator=g)),
        ("a (1, 3) row of equal scores", torch.full((1, 3), 7.0)),
        ("a (2, 1, 3) tensor with a size-1 axis", torch.randn(2, 1, 3, generator=g)),
        ("a (3, 1) matrix (one key per row)", torch.randn(3, 1, generator=g)),
        ("a (3, 5) float16 matrix with scores up to about 30",
         (10 * torch.randn(3, 5, generator=g)).half()),
        ("a (2, 4) float64 matrix of large scores", 500 * torch.randn(2, 4, generator=g,
                                                                       dtype=torch.float64)),
        # A view that is not contiguous: .view(-1, n) cannot flatten it (a transposed 2-D
        # matrix still views, a 3-D one does not).
        ("a (2, 3, 4) batch that is a transposed view, not contiguous in memory "
         "(torch.randn(3, 2, 4).transpose(0, 1))",
         torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(13)).transpose(0, 1)),
        *_softmax_cases_round5(),
        *_softmax_cases_round6(),
        *_softmax_cases_round10(),
        *_softmax_cases_round11(),
    ]


def _softmax_cases_round11():
    """Added after red-team round 11: batches whose rows lie far apart inside one matrix
    and across the matrices of one example. One maximum per example (over every axis but the
    first), per matrix (over the last two axes) or the first row's maximum per example is
    each row's own in 1-D and 2-D, but in 3-D and 4-D the rows far below that maximum
    underflow to 0/0 (e.g. [[0, 1, 2], [-800, -799, -798]])."""
    g = torch.Generator().manual_seed(21)
    rows3 = torch.tensor([[[0.0], [-800.0]], [[-800.0], [0.0]]])              # (2, 2, 1)
    rows4 = torch.tensor([[[[0.0], [0.0]], [[-900.0], [-900.0]]],             # (2, 2, 2, 1)
                          [[[500.0], [-500.0]], [[0.0], [0.0]]]])
    return [("a (2, 2, 3) batch whose two rows in each matrix lie near 0 and near -800 "
             "(in the first matrix [[0, 1, 2] + noise, [-800, -799, -798] + noise])",
             torch.tensor([0.0, 1.0, 2.0]) + rows3 + 0.1 * torch.randn(2, 2, 3, generator=g)),
            ("a (2, 2, 2, 3) batch, 2 examples of 2 matrices: example 0's first matrix has "
             "both rows near 0, its second both near -900; example 1's first matrix has "
             "rows near +500 and -500", rows4 + torch.randn(2, 2, 2, 3, generator=g))]


def _softmax_cases_round10():
    """Added after red-team round 10: a -inf next to finite float64 scores far below -1e9
    (scores of -1e10 are finite), where a stand-in for -inf such as nan_to_num(neginf=-1e9)
    outranks every real score and takes all the weight."""
    inf = float("inf")
    return [("a (1, 3) float64 row [-1e10, -inf, -2e10] (a masked score next to finite "
             "scores far below -1e9)",
             torch.tensor([[-1e10, -inf, -2e10]], dtype=torch.float64))]


def _softmax_cases_round7():
    """Added after red-team round 7: bfloat16 (the result keeps the input's dtype, as for
    float16 and float64); run after the gradients, which numpy (no bfloat16) must not
    hide."""
    g = torch.Generator().manual_seed(17)
    return [("a (2, 5) bfloat16 matrix of scores up to about 10",
             (4 * torch.randn(2, 5, generator=g)).bfloat16()),
            # float64 asks for float64 accuracy (_core.expect_float64_accuracy)
            ("a (3, 5) float64 matrix of ordinary scores",
             torch.randn(3, 5, generator=g, dtype=torch.float64))]


def _softmax_cases_round9():
    """Added after red-team round 9: large scores on a 1-D input (a branch for vectors
    without the shift overflows), and bfloat16 scores above 65504, the largest float16 (a
    bfloat16 input taken up through float16 becomes inf)."""
    return [("a vector of 4 large scores [1000, 0, 999, -1000] (1-D input)",
             torch.tensor([1000.0, 0.0, 999.0, -1000.0])),
            ("a (2, 3) bfloat16 matrix with scores beyond float16's range (65504): rows "
             "[1e5, 0, 1] and [7e4, 7e4, -1e5]",
             torch.tensor([[1e5, 0.0, 1.0], [7e4, 7e4, -1e5]]).bfloat16())]


def _check_softmax_repeat_call(fn, why):
    """Added after red-team round 9: a second call without gradients on a permutation of
    the first call's scores (the same shape, dtype, sums and maxima): a cache keyed on such
    a summary returns the first call's weights."""
    g = torch.Generator().manual_seed(19)
    first = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 2.5, 0.0]]) \
        + 0.1 * torch.randn(2, 4, generator=g)
    second = first.flip(-1)
    case = ("the (2, 4) matrix of the call before with each row reversed (the same shape, "
            "dtype, sums and maxima; other order)")
    earlier = _check_softmax_case(fn, "a (2, 4) matrix of scores", first, why)
    earlier = earlier.detach().clone()
    with _no_softmax(why):
        out = call(fn, second, name="softmax", case=case, hint_on_error=_no_keepdim_hint)
    if isinstance(out, torch.Tensor) and out.shape == earlier.shape \
            and torch.equal(out.detach(), earlier):
        fail(f"softmax(scores) on {case} is what your function returned on the call "
             "before: the result depends on an earlier call.",
             "compute the weights from this call's scores every time: keep no cache keyed "
             "on the shape, dtype, sum or maximum of the scores (other scores share "
             "them).")
    _check_softmax_case(fn, case, second, why)


def _softmax_cases_round6():
    """Added after red-team round 6: -inf scores (masked, as in exercise 1.2 and chapter 3)
    next to finite scores below -1e4, where a finite stand-in for -inf (nan_to_num(neginf=
    -1e4), a clamp) outranks the real scores."""
    inf = float("inf")
    return [("a (2, 4) matrix with -inf entries (masked scores): rows [-inf, -20000, -20001, "
             "-inf] and [0.5, -inf, 1, 2]",
             torch.tensor([[-inf, -2e4, -2e4 - 1, -inf], [0.5, -inf, 1.0, 2.0]]))]


def _softmax_cases_round5():
    """Added after red-team round 5: square inputs whose rows have different maxima, where a
    maximum without keepdim broadcasts along the wrong axis without an error."""
    g = torch.Generator().manual_seed(15)
    square = torch.randn(4, 4, generator=g)
    square[torch.arange(4), torch.tensor([2, 0, 3, 1])] += torch.tensor([6.0, 1, 9, 3])
    return [
        ("a square (2, 2) matrix [[0, 1], [5, 0]] (rows with different maxima)",
         torch.tensor([[0.0, 1.0], [5.0, 0.0]])),
        ("a square (4, 4) matrix whose rows have different maxima", square),
        ("a (2, 3, 3) batch of square matrices", 3 * torch.randn(2, 3, 3, generator=g)),
    ]


def _failing_line(error):
    """The source line of the innermost frame of the error's traceback ('' if none)."""
    import linecache
    tb, line = error.__traceback__, ""
    while tb is not None:
        text = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno).strip()
        line = text or line
        tb = tb.tb_next
    return line


def _no_keepdim_hint(error):
    if "must match the size" in str(error):
        line = _failing_line(error)
        if "max" in line and "sum" not in line:
            return ("take the maximum over dim=-1 with keepdim=True (scores.amax(dim=-1, "
                    "keepdim=True), or scores.max(dim=-1, keepdim=True).values), so that "
                    "the (..., 1) maxima broadcast against the (..., n) scores; without "
                    "keepdim they line up with the last axis (and, for a square input, "
                    "subtract another row's maximum without an error).")
        return ("reduce over dim=-1 with keepdim=True (the maximum and the sum), so that "
                "the (..., 1) results broadcast against the (..., n) scores and "
                "exponentials.")
    return view_hint(error, "the input (a transpose or a slice)",
                     "work on the last axis directly (amax and sum over dim=-1, "
                     "keepdim=True)")


class _ExpWatch(TorchFunctionMode):
    """Records what the learner's exp() returned: inf (overflow), or a row of zeros along
    the last axis (underflow of every entry, so that the row divides 0 by 0); and whether
    any float16 tensor held inf (`half_inf`: bfloat16 taken through float16)."""

    def __init__(self):
        super().__init__()
        self.overflow = self.underflow = self.half_inf = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.dtype == torch.float16 and out.numel():
            self.half_inf |= bool(torch.isinf(out.detach()).any())
        if getattr(func, "__name__", "") in ("exp", "exp_") \
                and isinstance(out, torch.Tensor) and out.is_floating_point() \
                and out.numel():
            values = out.detach()
            self.overflow |= bool(torch.isinf(values).any())
            self.underflow |= bool((values == 0).all(dim=-1).any()) if values.dim() else \
                bool(values == 0)
        return out


def _nan_hint(fn, scores, why):
    """Why softmax gave NaN: run it again and look at what its exp() returned."""
    watch = _ExpWatch()
    try:
        with _no_softmax(why), watch:
            fn(scores.clone())
    except Exception:  # noqa: BLE001 - only a diagnosis; the first call already ran
        pass
    overflow = ("exp() overflows for large scores (exp(89) is inf in float32, exp(12) in "
                "float16; yours returned inf, and inf / inf is NaN): subtract each row's "
                "maximum first.")
    finite = scores[torch.isfinite(scores)]
    if scores.dtype == torch.bfloat16 and watch.half_inf and finite.numel() \
            and float(finite.abs().max()) > 65504:   # added after red-team round 9
        return ("your function takes the bfloat16 scores through float16 (.half()), whose "
                "range ends at 65504: a score of 1e5 becomes inf there, and inf - inf is "
                "NaN. bfloat16 has float32's range: go up from it to float32 directly "
                "(x.float(), or torch.promote_types(x.dtype, torch.float32)).")
    if watch.underflow and not watch.overflow:
        return ("exp() returned 0 for every score of a row, so that row divides 0 by 0: "
                "exp() underflowed, because the constant you subtract lies far above that "
                "row's scores (one maximum for the whole tensor, per example or per "
                "matrix, another row's maximum, or max |x|). Subtract each row's own "
                "maximum, scores.amax(dim=-1, keepdim=True), so that the largest exponent "
                "of every row is e^0 = 1.")
    if watch.underflow:
        return overflow + " (exp() also underflowed to 0 for every score of a row: the " \
            "maximum must be each row's own, amax(dim=-1, keepdim=True).)"
    if not watch.overflow:
        return ("a row's exponentials summed to 0, and 0/0 is NaN (exp() returned no inf: "
                "this is no overflow). The exponentials you keep underflowed to 0, or were "
                "replaced by 0: the constant you subtract lies far above that row's finite "
                "scores (a stand-in for -inf, such as 0, counted in the maximum; one maximum "
                "for the whole tensor). Subtract each row's own maximum, scores.amax(dim=-1, "
                "keepdim=True): -inf needs no special case, since exp(-inf - max) = 0.")
    return overflow


@checker("softmax")
def check_softmax(fn):
    """Check `fn(scores)`: softmax over the last axis, finite for large scores, input untouched,
    input dtype kept, torch.softmax not called, and gradients equal to torch.softmax's."""
    why = "the exercise asks you to write the softmax yourself (exp, sum, division)."
    for case, scores in _softmax_cases():
        _check_softmax_case(fn, case, scores, why)
    g = torch.Generator().manual_seed(11)
    for case, scores in [("a (3, 6) matrix of scores", 3 * torch.randn(3, 6, generator=g)),
                         ("a (2, 3, 4) batch", torch.randn(2, 3, 4, generator=g)),
                         ("a (2, 4) matrix of scores near +-1000 with a dominating one",
                          torch.tensor([[1000.0, 999.0, 998.5, -1000.0],
                                        [-1000.0, -999.0, -1001.0, -1002.5]])),
                         ("a (2, 4) matrix with -inf entries (masked scores)",
                          torch.tensor([[-float("inf"), 1.5, -0.5, 0.25],
                                        [2.0, -float("inf"), -float("inf"), -1.0]])),
                         # added after red-team round 9: float64 gradients are held to
                         # float64 accuracy (a backward written in float32 is 1e-8 off)
                         ("a (3, 5) float64 matrix of scores",
                          2 * torch.randn(3, 5, generator=g, dtype=torch.float64)),
                         # added after red-team round 10: one key per row. Every weight is
                         # 1 and the gradient is 0, but it must exist: a constant
                         # (torch.ones_like) has no graph, and backward() raises.
                         ("a (3, 1) matrix (one key per row: weights 1, gradient 0)",
                          torch.randn(3, 1, generator=g))]:
        def learner(s):
            with _no_softmax(why):
                return fn(s)
        if scores.shape[-1] == 1:   # added after red-team round 10
            out = call(learner, scores.clone().requires_grad_(True), name="softmax",
                       case=case)
            if isinstance(out, torch.Tensor) and not out.requires_grad:
                fail(f"softmax(scores) has requires_grad=False on {case}, although the "
                     "scores require grad: with one key per row every weight is 1, but it "
                     "must still be computed from the scores (a constant such as "
                     "torch.ones_like(scores) has no graph, and loss.backward() raises).",
                     "no shortcut for a last axis of size 1: the general formula gives "
                     "e^x / e^x = 1 there, and autograd gives its gradient, 0.")
        expect_gradients(learner, lambda s: torch.softmax(s, dim=-1), [("scores", scores)],
                         name="softmax", case=case)
    for case, scores in _softmax_cases_round7() + _softmax_cases_round9():
        _check_softmax_case(fn, case, scores, why)
    _check_softmax_repeat_call(fn, why)
    _softmax_matrix(fn, why)
    _check_softmax_large(fn, why)


_HUGE_SCORES_HINT = (
    "scores of 1e5 or 1e8 are ordinary float32 and float64 numbers: subtract each row's "
    "own maximum, amax(dim=-1, keepdim=True), and keep the scores as they are (no clamp, "
    "no cast to float16, whose range ends at 65504).")
# The standard conditions but float16 and bfloat16 (for rows far apart; see each docstring).
_NO_HALF = (PLAIN, REPEAT, NONCONTIGUOUS, EXPANDED, FLOAT64)


def _same_ends(args):
    """The scores with the first and last entries kept, the others moved by one place."""
    (scores,) = args
    flat = scores.flatten()
    if flat.numel() < 4:
        return None
    middle = flat[1:-1].roll(1)
    return (torch.cat([flat[:1], middle, flat[-1:]]).reshape(scores.shape),)


# Added after red-team round 12: a result kept between calls, keyed on the shape, the dtype
# and a few entries (the first and last), served on a call without gradients.
_SAME_ENDS = Condition(
    "a second call under torch.no_grad(), with the same first and last entries but other "
    "values between them", change=_same_ends, no_grad=True,
    hint="compute every call from its own scores: nothing may be kept between calls (a "
         "result keyed on the shape, the dtype or a few entries).")


def _softmax_matrix(fn, why):
    """The condition matrix (_core.expect_conditions, session 12) on small cases: a (2, 3,
    5) batch and one key per row as given, called again with other values, non-contiguous,
    expanded, in float64, float16 and bfloat16, and times 1e5 in float32 and float64; a 3-D
    batch whose rows lie near 0, -1000 and +1000 under the same conditions but the half
    ones, and one whose rows lie near 0, -10 and +10 in float16 and bfloat16 (exp(-20)
    underflows in float16: one maximum for several rows gives 0/0). Values and gradients
    against torch.softmax in float64. Dropped: rows near +-1000 in float16 and bfloat16,
    where a right exp(x - logsumexp(x)) computed in the half dtype rounds the log-sum-exp by
    up to 0.25 (bfloat16: 2), so its weights err by far more than 32 eps (the rulings let
    the max, exp and sum run in the half dtype). Added after red-team round 12: a second
    call under torch.no_grad() with the same first and last entries (a result kept between
    calls), and a float16 (2, 3) matrix of close scores near +-100, 100.25 and 99.75, one
    number in bfloat16 (a float16 input computed through bfloat16 gives (0.5, 0.5) for
    (0.62, 0.38); a right float16 computation errs by at most half a float16 step there,
    0.03, within the 32 eps tolerance)."""
    g = torch.Generator().manual_seed(120)

    def rows_near(*offsets):
        return torch.randn(2, 3, 4, generator=g) + torch.tensor(offsets)[:, None]
    general = [("a (2, 3, 5) batch of scores", (torch.randn(2, 3, 5, generator=g),)),
               ("a (3, 1) matrix (one key per row)", (torch.randn(3, 1, generator=g),))]
    far = [("a (2, 3, 4) batch whose rows lie near 0, -1000 and +1000",
            (rows_near(0.0, -1000.0, 1000.0),))]
    near = [("a (2, 3, 4) batch whose rows lie near 0, -10 and +10",
             (rows_near(0.0, -10.0, 10.0),))]
    huge = tuple(scaled(1e5, (0,), "scores times 1e5", _HUGE_SCORES_HINT))

    def learner(scores):
        with _no_softmax(why):
            return fn(scores)
    close = [("a (2, 3) matrix of close scores near +-100 (100.25 and 99.75: one number in "
              "bfloat16)",
              (torch.tensor([[100.25, 99.75, 96.0], [-99.75, -100.25, -104.0]]),))]
    for cases, conditions in ((general, STANDARD[:1] + (_SAME_ENDS,) + STANDARD[1:] + huge),
                              (far, _NO_HALF + huge), (near, (FLOAT16, BFLOAT16)),
                              (close, (PLAIN, FLOAT16_NOT_BFLOAT16))):
        expect_conditions(learner, lambda s: torch.softmax(s, dim=-1), cases,
                          name="softmax", differentiable=(0,), conditions=conditions)


def _softmax_large():
    """Added after red-team round 13: two matrices above any size switch, a (67, 9) one
    (rows > 64) and a (3, 4099) one (keys > 4096), whose rows lie near -1000 to +1000
    (evenly spaced, plus noise); in every odd row one score lies 100 above the others, in
    the long rows past key 1024 (exp(100) overflows float32 without the row's own maximum,
    and a maximum of the first keys only is 100 too low)."""
    g = torch.Generator().manual_seed(130)
    cases = []
    for rows, keys, past in ((67, 9, 2), (3, 4099, 1024)):
        scores = torch.linspace(-1000.0, 1000.0, rows)[:, None] \
            + 2 * torch.randn(rows, keys, generator=g)
        odd = torch.arange(1, rows, 2)
        scores[odd, past + (odd * 47) % (keys - past)] += 100.0
        cases.append((f"a ({rows}, {keys}) matrix whose rows lie near -1000 to +1000, in "
                      f"every odd row one score past key {past} lies 100 above the others",
                      scores))
    return cases


def _check_softmax_large(fn, why):
    """Added after red-team round 13 (size-keyed paths, rows above 64 and keys above 4096):
    the matrices of _softmax_large as given, under torch.no_grad() (an in-place shift there
    changes the caller's scores) and in float64 (float64 accuracy, values and gradients),
    and divided by 40 (rows near -25 to +25, one score 2.5 above) in float16 (e^12
    overflows float16 without the shift); then a (1, 4099) float32 row of -inf next to
    finite scores between -3.4e38 and -3.3e38 (a finite stand-in for -inf, -1e30, -3e38 or
    finfo.min / 2, outranks them)."""
    def learner(scores):
        with _no_softmax(why):
            return fn(scores)
    large = _softmax_large()
    expect_conditions(learner, lambda s: torch.softmax(s, dim=-1),
                      [(words, (scores,)) for words, scores in large],
                      name="softmax", differentiable=(0,),
                      conditions=(PLAIN.but(hint=_LARGE_HINT),
                                  NO_GRAD.but(hint=_LARGE_HINT + " " + INFERENCE_HINT),
                                  FLOAT64.but(hint=_LARGE_HINT + " " + FLOAT64_HINT)))
    expect_conditions(learner, lambda s: torch.softmax(s, dim=-1),
                      [(words.replace("-1000 to +1000", "-25 to +25").replace(
                          "100 above", "2.5 above") + " (divided by 40)", (scores / 40,))
                       for words, scores in large],
                      name="softmax", differentiable=(0,),
                      conditions=(FLOAT16.but(gradients=False, hint=_LARGE_HINT),))
    g = torch.Generator().manual_seed(131)
    row = -3.3e38 - 1e37 * torch.rand(1, 4099, generator=g)
    row[:, ::5] = float("-inf")
    _check_softmax_case(fn, "a (1, 4099) float32 row: -inf at every 5th key, the other "
                        "scores finite, between -3.4e38 and -3.3e38", row, why)


_LARGE_HINT = ("the same computation for every size: subtract each row's own maximum over "
               "the whole last axis (amax(dim=-1, keepdim=True)) for long rows and many rows "
               "too, keep the input's dtype (float64 stays float64), and never change the "
               "caller's scores in place: no faster path above some number of rows or keys.")


def _check_softmax_case(fn, case, scores, why):
    """One forward case of check_softmax: shape, NaN, input untouched, dtype, values."""
    before = scores.clone()
    with _no_softmax(why):
        out = call(fn, scores, name="softmax", case=case, hint_on_error=_no_keepdim_hint,
                   inplace_hint="use `scores - max` (a new tensor), not `scores -= max` "
                                "or `.sub_()`.")
    if isinstance(out, tuple):
        fail(f"softmax returned a tuple of {len(out)} on {case}; return only the weights.")
    nan_hint = None
    if isinstance(out, torch.Tensor) and out.is_floating_point() \
            and torch.isnan(out).any():
        nan_hint = _nan_hint(fn, scores, why)
    expect_tensor(out, scores.shape, what="softmax(scores)", case=case,
                  hint="return a tensor of the input's shape: the softmax runs over the "
                       "last axis and keeps every axis (no .squeeze(), no flattening).",
                  nan_hint=nan_hint)
    if not torch.equal(scores, before):
        fail(f"softmax changed its input in place on {case}.",
             "use `scores - max` (a new tensor), not `scores -= max` or `.sub_()`.")
    expect_tensor(out, dtype=scores.dtype, what="softmax(scores)", case=case)
    # Rounding: shifting by the max is exact, exp(x - logsumexp(x)) (also right) is off by
    # about eps * |x|, so the tolerance grows with the dtype's eps and the scores' size.
    eps = torch.finfo(scores.dtype).eps
    finite = scores[torch.isfinite(scores)]
    largest = finite.abs().max().item() if finite.numel() else 0.0
    tol = dict(atol=max(1e-5, 8 * eps * largest, 4 * eps), rtol=1e-4)
    masked = scores == float("-inf")
    if bool((out.detach()[masked] != 0).any()):
        at = tuple(int(i) for i in (masked & (out.detach() != 0)).nonzero()[0])
        fail(f"softmax(scores) gives weight {out[at].item():.4g} to a score of -inf at "
             f"index {at} on {case}: e^-inf = 0, so a -inf score must get weight "
             "exactly 0.",
             "keep -inf as it is: replacing it with a finite number (nan_to_num, a clamp, "
             "a fill with -1e4 or -1e9) gives it weight when the row's other scores lie "
             "below that number, and finite scores can lie below any such number. "
             "exp(-inf - max) is 0 as long as the row has a finite score.")
    sums = out.double().sum(dim=-1)
    if not is_close(sums, torch.ones_like(sums), atol=tol["atol"], rtol=0):
        hint = "divide by the sum over dim=-1 (keepdim=True), not by the max and not " \
               "over another axis."
        if (sums == 0).any():
            hint = ("a row came out all zeros: exp() of every score in it underflowed "
                    "(or overflowed and was replaced). Subtract each row's own maximum "
                    "(amax over dim=-1, keepdim=True), not one maximum for the whole "
                    "tensor.")
        elif out.numel() > out.shape[-1] and abs(float(sums.sum()) - 1) < 1e-3:
            hint = ("all the rows together sum to 1: you divide by the sum of the whole "
                    "tensor. Divide by each row's own sum, exp.sum(dim=-1, keepdim=True).")
        elif (sums < 0.5).any():
            hint = ("a row sums to much less than 1: either exp() underflowed for every "
                    "score but one maximum taken over the whole tensor, or the sum runs "
                    "over the wrong axis. Subtract each row's own maximum and divide by "
                    "each row's own sum (dim=-1, keepdim=True).")
        if bool((out.detach() < 0).any()):   # added after red-team round 9
            hint = ("some weights are negative, which no softmax gives (e^x > 0): exp() "
                    "was never applied to them"
                    + (", and your function returned the scores themselves"
                       if torch.equal(out.detach(), scores) else "")
                    + ". Apply exp and divide by the row sum on every input, with no "
                    "shortcut: even a single key per row (a last axis of size 1) gets "
                    "weight e^x / e^x = 1.")
        fail(f"the rows of softmax(scores) must sum to 1 over the last axis on {case}; "
             f"they sum to {[round(s, 4) for s in sums.flatten()[:4].tolist()]}.", hint)
    expected = torch.softmax(scores.double(), dim=-1)
    expect_close(out, expected, what="softmax(scores)", case=case, **tol,
                 hint="softmax(x)_i = exp(x_i - max_j x_j) / sum_k exp(x_k - max_j x_j), "
                      "over the last axis; shifting by the row's maximum must not change "
                      "the result (clamping or subtracting a mean does).")
    return out


# -- Exercise 1.2: top-k attention pooling ------------------------------------------------------

def _topk_reference(queries, keys, values, score, k):
    """In float64 from the scores the learner's code also gets (score(queries, keys))."""
    scores = score(queries, keys).double()
    kth = scores.topk(k, dim=-1).values[:, -1:]
    weights = torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)
    return weights @ values.double(), weights


def _dot(queries, keys):
    return queries @ keys.T


def _bilinear(matrix):
    """An asymmetric score q^T M k: score(k, q) is not score(q, k).T."""
    def score(queries, keys):
        return queries @ matrix.to(queries.dtype) @ keys.T
    return score


def _shifted(queries, keys):
    return queries @ keys.T + 400.0


def _constant(queries, keys):
    return torch.zeros(queries.shape[0], keys.shape[0], dtype=queries.dtype)


def _gaussian(queries, keys):
    return -0.5 * ((queries[:, None, :] - keys[None, :, :]) ** 2).sum(-1)


def _topk_cases():
    g = torch.Generator().manual_seed(2)

    def qkv(n_q, n_k, d, d_v, scale=1.0, dtype=torch.float32):
        return [(scale * torch.randn(n, dd, generator=g)).to(dtype)
                for n, dd in ((n_q, d), (n_k, d), (n_k, d_v))]

    M = torch.randn(4, 4, generator=g)
    far = qkv(3, 6, 2, 3)    # keys in a small cluster, queries about 170 away: scores near
    far[1] = 0.01 * far[1]   # -1.4e4 that differ by a few units (no weight underflows)
    far[0] = 0.01 * far[0] + 120.0
    # Small integers, so the dot products are exact and the ties real. Scores per query:
    # [2, 1, 1, 0, 0] and [0, 0, 0, -1, -3] keep 3 keys at k=2, [2, 1, 1, 1, 3] keeps 2.
    tied = [torch.tensor([[1.0, 0.0], [0.0, -1.0], [1.0, 1.0]]),        # (3 queries, 2)
            torch.tensor([[2.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 3.0]]),
            torch.randn(5, 3, generator=torch.Generator().manual_seed(3))]  # values
    return [
        ("4 queries, 6 keys, k=2, dot score", *qkv(4, 6, 3, 3), _dot, 2),
        ("1 query, 5 keys, k=1, dot score", *qkv(1, 5, 2, 2), _dot, 1),
        ("3 queries, 7 keys, k=7 (all keys), dot score", *qkv(3, 7, 4, 4), _dot, 7),
        ("4 queries, 5 keys, k=2, asymmetric score q^T M k", *qkv(4, 5, 4, 3), _bilinear(M), 2),
        ("3 queries, 6 keys, k=2, Gaussian score of queries far from every key (scores near "
         "-1.4e4)", *far, _gaussian, 2),
        ("2 queries, 8 keys, k=3, score = dot score + 400 (large scores)",
         *qkv(2, 8, 4, 3), _shifted, 3),
        ("5 queries, 60 keys, k=10, dot score", *qkv(5, 60, 6, 2), _dot, 10),
        ("3 queries, 6 keys, k=2, dot score in float16", *qkv(3, 6, 4, 3, dtype=torch.half),
         _dot, 2),
        # Tied scores: every key whose score equals the k-th best is kept (the exercise's
        # rule), so a query may give weight to more than k keys.
        ("3 queries, 5 keys, k=2, dot score with ties: for the first two queries other "
         "keys tie with the 2nd-best score", *tied, _dot, 2),
        ("2 queries, 4 keys, k=1, constant score (every key ties)",
         *qkv(2, 4, 3, 2), _constant, 1),
        # A near-tie is not a tie: scores [2, 1, 0.9998, 0] keep 2 keys at k=2.
        ("1 query, 4 keys, k=2, dot scores [2, 1, 0.9998, 0] (the 3rd key is 2e-4 below the "
         "2nd: not a tie)", torch.tensor([[1.0, 0.0]]),
         torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.9998, 0.0], [0.0, 1.0]]),
         torch.randn(4, 3, generator=torch.Generator().manual_seed(4)), _dot, 2),
        *_topk_cases_round5(),
        *_topk_cases_round6(),
        *_topk_cases_round7(),
        *_topk_cases_round9(),
        *_topk_cases_round10(),
        *_topk_cases_round11(),
        *_topk_cases_round13(),
        *_topk_cases_round14(),
    ]


def _topk_large():
    """Added after red-team round 13: two cases above any size switch, 67 queries with 9
    keys (queries > 64) and 3 queries with 4099 keys (keys > 4096), k=3. The points have
    small integer coordinates (-2 to 2), so the dot products are exact and many keys tie
    with the k-th best; the score is the dot score + 400 (exp overflows without the shift)."""
    g = torch.Generator().manual_seed(132)
    cases = []
    for n_q, n_k in ((67, 9), (3, 4099)):
        q, kk = (torch.randint(-2, 3, (n, 2), generator=g).float() for n in (n_q, n_k))
        cases.append((f"{n_q} queries, {n_k} keys, k=3, score = dot score + 400 (large "
                      "scores) of points with integer coordinates (many keys tie with the "
                      "3rd best)", q, kk, torch.randn(n_k, 2, generator=g), _shifted, 3))
    return cases


def _topk_cases_round13():
    """Added after red-team round 13: near-ties one step of the dtype apart, [1, 1 - 2^-53]
    in float64 and [1, 1 - 2^-24] in float32 (k=1): a tolerance of one ulp
    (nextafter(kth, -inf)) calls them ties; and the large cases of _topk_large."""
    g = torch.Generator().manual_seed(133)
    cases = []
    for dtype, bits in ((torch.float64, 53), (torch.float32, 24)):
        below = 1 - 2.0 ** -bits
        cases.append((f"1 query, 3 keys, k=1, {str(dtype)[6:]} dot scores [1, 1 - 2^-{bits}, "
                      f"0] (the 2nd key is one {str(dtype)[6:]} step below the best: not a "
                      "tie)", torch.tensor([[1.0]], dtype=dtype),
                      torch.tensor([[1.0], [below], [0.0]], dtype=dtype),
                      torch.randn(3, 2, generator=g, dtype=dtype), _dot, 1))
    return cases + _topk_large()


def _transposed_dot(queries, keys):
    """The dot score computed key-major and returned transposed: a (num_queries, num_keys)
    tensor that is not contiguous in memory (a valid score; .view() on it raises)."""
    return (keys @ queries.T).T


def _topk_cases_round14():
    """Added after red-team round 14: dot scores that tie exactly in the inputs' dtype
    only through its rounding: the query [1, 1] and the keys [0.1, 0.2] and [0.3, 0] give
    0.1 + 0.2 and 0.3, one number in float32 (and in bfloat16) but not in float64, k=1:
    both keys are kept. A mask taken from scores recomputed in a higher precision
    (score(queries.double(), keys.double())) keeps one. And a score returned transposed
    (not contiguous): .view() on the scores raises."""
    g = torch.Generator().manual_seed(140)
    cases = []
    for dtype in (torch.float32, torch.bfloat16):
        name = str(dtype)[6:]
        cases.append((f"2 queries [1, 1] and [0, 1], 3 keys [0.1, 0.2], [0.3, 0], [0, 0] in "
                      f"{name}, k=1, the first query's dot scores [0.1 + 0.2, 0.3, 0]: the "
                      f"first two are one {name} number (a tie in the inputs' dtype, although "
                      "not in float64)",
                      torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=dtype),
                      torch.tensor([[0.1, 0.2], [0.3, 0.0], [0.0, 0.0]], dtype=dtype),
                      torch.randn(3, 2, generator=g).to(dtype), _dot, 1))
    cases.append(("4 queries, 6 keys, k=2, dot score returned transposed, (keys @ "
                  "queries.T).T (a score tensor that is not contiguous in memory)",
                  *[torch.randn(n, d, generator=g) for n, d in ((4, 3), (6, 3), (6, 2))],
                  _transposed_dot, 2))
    return cases


def _higher_precision_ties(kept, ref_kept, queries, keys, score, k):
    """Added after red-team round 14: True if `kept` is the mask of the scores recomputed in
    float64 (score(queries.double(), keys.double())), where that differs from the right
    mask (ties of the inputs' dtype broken by the higher precision)."""
    if queries.dtype == torch.float64:
        return False
    try:
        scores = score(queries.double(), keys.double())
    except RuntimeError:
        return False
    mask = scores >= scores.topk(k, dim=-1).values[:, -1:]
    return torch.equal(mask, kept) and not torch.equal(mask, ref_kept)


def _topk_cases_round11():
    """Added after red-team round 11: float32 and float64 scores far beyond float16's range
    (65504) whose gap decides the weights. Scores clamped "for half precision"
    (scores.clamp(-6e4, 6e4), for every dtype) make 1e5 and 99999 equal: weights 0.5 and
    0.5 instead of 0.731 and 0.269."""
    g = torch.Generator().manual_seed(42)
    f64 = dict(dtype=torch.float64)
    return [("1 query, 3 keys, k=2, dot scores [1e5, 99999, 0] (float32 scores beyond "
             "float16's range)", torch.tensor([[1.0]]),
             torch.tensor([[1e5], [1e5 - 1], [0.0]]), torch.randn(3, 2, generator=g),
             _dot, 2),
            ("1 query, 4 keys, k=2, float64 dot scores [2e5, 2e5 - 0.25, -2e5, 3] (scores "
             "beyond float16's range)", torch.tensor([[1.0]], **f64),
             torch.tensor([[2e5], [2e5 - 0.25], [-2e5], [3.0]], **f64),
             torch.randn(4, 2, generator=g, **f64), _dot, 2)]


def _clamped_pair(weights, scores):
    """Added after red-team round 11: two kept keys of one query whose scores differ (by
    0.1 or more) and lie beyond 1e4 in magnitude but got the same weight, as after a clamp
    of the scores (to +-6e4, +-1e4) or a cast into a narrower range; None if none."""
    w, s = weights.detach().double(), scores.detach().double()
    for row in range(w.shape[0]):
        kept = ((w[row] > 0) & (s[row].abs() > 1e4)).nonzero().flatten().tolist()
        for i, a in enumerate(kept):
            for b in kept[i + 1:]:
                if abs(float(s[row, a] - s[row, b])) >= 0.1 and \
                        abs(float(w[row, a] - w[row, b])) <= 1e-3 * float(w[row, a]):
                    return float(s[row, a]), float(s[row, b])
    return None


def _topk_cases_round10():
    """Added after red-team round 10: a single key (k=1): every weight is 1 and every
    output is that key's value (see also _check_topk_single_key_gradients)."""
    g = torch.Generator().manual_seed(40)
    return [("3 queries, 1 key, k=1, dot score (a single key)",
             *[torch.randn(n, d, generator=g) for n, d in ((3, 4), (1, 4), (1, 2))],
             _dot, 1)]


def _check_topk_single_key_gradients(fn):
    """Added after red-team round 10: one key, with gradients. Every weight is 1 and its
    gradient 0, but the weights must still come from score(queries, keys): a shortcut that
    returns torch.ones(num_queries, 1) has no graph, so a loss on the weights cannot be
    backpropagated (the outputs, ones @ values, still reach the values)."""
    g = torch.Generator().manual_seed(41)
    q, kk, v = (torch.randn(n, d, generator=g) for n, d in ((2, 3), (1, 3), (1, 2)))
    case = ("2 queries, 1 key, k=1, dot score (a single key: weights 1, gradients of "
            "outputs and weights)")
    leaves = [t.clone().requires_grad_(True) for t in (q, kk, v)]
    result = call(fn, *leaves, _dot, 1, name="topk_attention_pool", case=case,
                  hint_on_error=_fill_hint)
    if isinstance(result, (tuple, list)) and len(result) == 2:
        for what, tensor in zip(("outputs", "weights"), result):
            if isinstance(tensor, torch.Tensor) and not tensor.requires_grad:
                fail(f"the {what} have requires_grad=False on {case}, although the "
                     "queries, keys and values require grad: with a single key every "
                     "weight is 1, but the weights must still be computed from "
                     "score(queries, keys) (a constant such as torch.ones(num_queries, 1) "
                     "has no graph, and backward() through it raises).",
                     "no shortcut for a single key: the general computation (score, mask "
                     "below the k-th best, softmax) gives weight 1 there, and autograd its "
                     "gradient, 0.")
    expect_gradients(lambda a, b, c: fn(a, b, c, _dot, 1),
                     lambda a, b, c: _topk_reference(a, b, c, _dot, 1),
                     [("queries", q), ("keys", kk), ("values", v)],
                     name="topk_attention_pool", case=case)


def _topk_matrix(fn):
    """The condition matrix (_core.expect_conditions, session 12) on three small cases: 4
    queries and 5 keys with an asymmetric score q^T M k, k=2; a single key (k=1); and 3
    queries whose scores lie near 0, -1000 and +1000 (a third feature of each query, times a
    key feature of 1). Each runs as given, called again with other values, non-contiguous,
    expanded (every query and key equal: all keys tie and are kept), in float64, and with
    the queries times 1e5 (scores near 1e5 to 1e8) in float32 and float64; the first two
    also in float16 and bfloat16 (each query's 2nd and 3rd best scores are at least 1.1
    apart, so that a half-precision computation keeps the same top k). Dropped for the far
    rows: float16 and bfloat16, where a score near 1000 is rounded by up to 0.25 (bfloat16:
    2), which moves a right half computation's weights far from the reference's (rows far
    apart are the float32 and float64 conditions' job). Added after red-team round 12: two
    float16 cases with dot scores near 100 and 50 (exp overflows without the max shift),
    whose two best, 100.25 and 99.75 (50.125 and 49.875), are one number in bfloat16: k=1
    ranked through bfloat16 keeps both. Outputs and weights, and their gradients, against
    the float64 reference on the same scores."""
    g = torch.Generator().manual_seed(121)
    M = torch.randn(3, 3, generator=g)

    def randn(*shape):
        return torch.randn(*shape, generator=g)
    far_q = torch.cat([randn(3, 2), torch.tensor([[0.0], [-1000.0], [1000.0]])], dim=1)
    far_k = torch.cat([randn(4, 2), torch.ones(4, 1)], dim=1)
    general = [("4 queries, 5 keys, d=3, value size 2, k=2, asymmetric score q^T M k",
                (randn(4, 3), randn(5, 3), randn(5, 2), _bilinear(M), 2)),
               ("3 queries, 1 key, k=1 (a single key), dot score",
                (randn(3, 3), randn(1, 3), randn(1, 2), _dot, 1))]
    far = [("3 queries whose dot scores lie near 0, -1000 and +1000, 4 keys, k=2",
            (far_q, far_k, randn(4, 2), _dot, 2))]
    huge = tuple(scaled(1e5, (0,), "queries times 1e5 (scores near 1e5 to 1e8)",
                        "scores of 1e5 are ordinary float32 and float64 numbers: keep them "
                        "as score() returns them (no clamp, no cast to float16), mask with "
                        "-inf and let the softmax subtract each row's maximum."))
    # Added after red-team round 12: float16 scores near 100 (exp overflows without the
    # max shift), 100.25 and 99.75 (or 50.125 and 49.875) one number in bfloat16: ranked
    # or weighted through bfloat16 they tie, and k=1 keeps both.
    close = [("2 queries (1 and 0.5), 4 keys (100.25, 99.75, 96, 0), dot score near 100 "
              "and 50, k=1 (the two best one number in bfloat16)",
              (torch.tensor([[1.0], [0.5]]),
               torch.tensor([[100.25], [99.75], [96.0], [0.0]]), randn(4, 2), _dot, 1)),
             ("2 queries (1 and 0.5), 4 keys (100.25, 99.75, 96, 0), dot score near 100 "
              "and 50, k=2", (torch.tensor([[1.0], [0.5]]),
                             torch.tensor([[100.25], [99.75], [96.0], [0.0]]),
                             randn(4, 2), _dot, 2))]
    large = [(words, tuple(args)) for words, *args in _topk_large()]   # round 13
    large_hint = ("the same computation for every size: keep every key tied with the k-th "
                  "best, subtract each row's maximum, keep float64 in float64, and never "
                  "change an argument: no faster path above some number of queries or keys.")
    for cases, conditions in ((general, STANDARD + huge),
                              (far, _NO_HALF + huge),
                              (close, (PLAIN, FLOAT16_NOT_BFLOAT16)),
                              (large, (NO_GRAD.but(hint=large_hint + " " + INFERENCE_HINT),
                                       FLOAT64.but(hint=large_hint + " " + FLOAT64_HINT)))):
        expect_conditions(lambda q, kk, v, score, k: fn(q, kk, v, score, k),
                          lambda q, kk, v, score, k: _topk_reference(q, kk, v, score, k),
                          cases, name="topk_attention_pool", differentiable=(0, 1, 2),
                          conditions=conditions)


def _topk_cases_round5():
    """Added after red-team round 5: float64 inputs (the outputs keep float64)."""
    g = torch.Generator().manual_seed(25)
    return [("3 queries, 6 keys, k=2, dot score in float64",
             *[torch.randn(n, d, generator=g, dtype=torch.float64)
               for n, d in ((3, 4), (6, 4), (6, 3))], _dot, 2)]


def _topk_cases_round6():
    """Added after red-team round 6: as many queries as keys, where a k-th best score
    without its keys axis (values[:, -1], shape (num_queries,)) broadcasts without an error
    and compares query i's scores with query j's k-th best."""
    g = torch.Generator().manual_seed(28)
    return [("4 queries, 4 keys, k=2, dot score (as many queries as keys)",
             *[torch.randn(n, d, generator=g) for n, d in ((4, 3), (4, 3), (4, 2))], _dot, 2)]


def _topk_cases_round7():
    """Added after red-team round 7: bfloat16 (outputs and weights keep it), and a near-tie
    one float32 step from a tie: scores [40, 1, 1 - 1e-6] (exact dot products of 1-D
    points). torch.isclose counts the 3rd key as tied (a tolerance); so does a top-k taken
    on the softmax weights, where 1 - 40 and 1 - 1e-6 - 40 round to the same float32."""
    g = torch.Generator().manual_seed(29)
    return [("3 queries, 6 keys, k=2, dot score in bfloat16",
             *[torch.randn(n, d, generator=g).bfloat16() for n, d in ((3, 4), (6, 4), (6, 3))],
             _dot, 2),
            ("1 query, 3 keys, k=2, dot scores [40, 1, 1 - 1e-6] (the 3rd key is 1e-6 below "
             "the 2nd: not a tie)", torch.tensor([[1.0]]),
             torch.tensor([[40.0], [1.0], [1.0 - 1e-6]]),
             torch.randn(3, 2, generator=g), _dot, 2)]


def _topk_cases_round9():
    """Added after red-team round 9: queries whose scores lie in very different ranges (a
    softmax shifted by one maximum for the whole matrix underflows to 0/0 in the low row);
    large scores with k = num_keys (a branch for 'all keys' without the shift overflows);
    near-ties below float32's resolution in float64 (1e-12) and below 6 decimals in
    float32 (1e-7): a comparison on scores cast to float32, or rounded, calls them ties."""
    g = torch.Generator().manual_seed(36)
    f64 = dict(dtype=torch.float64)
    return [("2 queries, 3 keys, k=2, dot score: query 0's scores [1, 0.995, 0.99], query "
             "1's [-1000, -995, -990] (rows of very different ranges)",
             torch.tensor([[1.0], [-1000.0]]), torch.tensor([[1.0], [0.995], [0.99]]),
             torch.randn(3, 2, generator=g), _dot, 2),
            ("2 queries, 4 keys, k=4 (all keys), score = dot score + 400 (large scores)",
             torch.randn(2, 3, generator=g), torch.randn(4, 3, generator=g),
             torch.randn(4, 2, generator=g), _shifted, 4),
            ("1 query, 3 keys, k=2, dot scores [40, 1, 1 - 1e-7] (the 3rd key is 1e-7 "
             "below the 2nd: not a tie)", torch.tensor([[1.0]]),
             torch.tensor([[40.0], [1.0], [1.0 - 1e-7]]), torch.randn(3, 2, generator=g),
             _dot, 2),
            ("1 query, 3 keys, k=2, float64 dot scores [1, 0.5, 0.5 - 1e-12] (the 3rd key "
             "is 1e-12 below the 2nd: not a tie)", torch.tensor([[1.0]], **f64),
             torch.tensor([[1.0], [0.5], [0.5 - 1e-12]], **f64),
             torch.randn(3, 2, generator=g, **f64), _dot, 2)]


def _rounded_ties(kept, ref_kept, scores, k):
    """The dtype (float16, bfloat16, float32 for float64 scores) whose rounding of the
    scores gives exactly the keys the learner kept, where that differs from the right keys
    (distinct scores merged into ties by a cast); None if none does."""
    scores = scores.detach()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        if torch.finfo(dtype).eps <= torch.finfo(scores.dtype).eps:
            continue
        rounded = scores.to(dtype)
        mask = rounded >= rounded.topk(k, dim=-1).values[:, -1:]
        if torch.equal(mask, kept) and not torch.equal(mask, ref_kept):
            return dtype
    return None


def _kth_without_keys_axis(weights, scores, k):
    """True if `weights` keep, in row i, the keys j with scores[i, j] >= the k-th best score
    of query j (the k-th best taken without keepdim, broadcast along the keys axis), which
    differs from the right mask; a row that keeps no key is NaN."""
    n_q, n_k = scores.shape
    if n_q != n_k or n_q == 1 or tuple(weights.shape) != (n_q, n_k) \
            or not weights.is_floating_point():
        return False
    kth = scores.topk(k, dim=-1).values[:, -1]
    wrong, right = scores >= kth, scores >= kth[:, None]
    if torch.equal(wrong, right):
        return False
    w = weights.detach()
    nan_rows = torch.isnan(w).any(dim=-1)
    return torch.equal(nan_rows, ~wrong.any(dim=-1)) \
        and torch.equal((w != 0)[~nan_rows], wrong[~nan_rows])


def _short_rows_hint(weights, ref_weights, scores, sums):
    """Added after red-team round 8: the right keys keep a weight but the rows sum to less
    than 1. Either the softmax over every key was zeroed outside the top k without being
    renormalised, or it was renormalised with a constant added to the denominator
    (w / (w.sum() + 1e-3)): tell which."""
    kept = ref_weights != 0
    full = torch.softmax(scores.double(), dim=-1)
    w = weights.detach().double()
    if is_close(w, torch.where(kept, full, 0.0), atol=1e-5, rtol=1e-3):
        return ("mask the scores before the softmax (fill with -inf), rather than zeroing "
                "weights after it: zeroing leaves rows that sum to less than 1 (or divide "
                "the kept weights by their own sum).")
    ratio = (w / ref_weights.clamp_min(1e-300)).where(kept, 0.0)
    row = ratio.amax(dim=-1, keepdim=True)
    if is_close(ratio, torch.where(kept, row, 0.0), atol=0, rtol=1e-2):
        low = float(sums.min())
        return (f"the kept keys and their proportions are right, but a row sums to "
                f"{low:.4g}, not 1: the denominator is too large. Divide the kept weights "
                "by exactly their sum, with no small constant added (w / (w.sum() + 1e-3) "
                "is wrong), or mask the scores with -inf before the softmax.")
    return ("mask the scores before the softmax (fill with -inf), rather than zeroing "
            "weights after it: zeroing leaves rows that sum to less than 1.")


def _fill_hint(error):
    if "same dtype" in str(error) or "dtype" in str(error) and "match" in str(error):
        return ("a tensor of another dtype entered the computation (e.g. 1e4 * mask or "
                "torch.tensor(...) is float32): keep everything in the scores' dtype.")
    if "overflow" in str(error) or "Half" in str(error):
        return ("in float16 the fill value must fit (float16 ends near -65504): use "
                "float('-inf'), which every dtype has, or torch.finfo(scores.dtype).min.")
    if "must match the size" in str(error):
        return ("the k-th best score of each query must keep a keys axis of size 1 to "
                "broadcast against the (num_queries, num_keys) scores: "
                "topk(k, dim=-1).values[:, -1:] (or [:, -1, None]), not [:, -1], which has "
                "shape (num_queries,) and lines up with the keys axis.")
    # added after red-team round 14: a score may return a transposed (non-contiguous) tensor
    return view_hint(error, what="the tensor score() returned (a score may return a "
                     "transposed or sliced one)", better="no flattening at all: topk, masked_fill "
                     "and softmax along dim=-1 work on the (num_queries, num_keys) scores "
                     "as they are")


@checker("topk_attention_pool")
def check_topk_attention_pool(fn):
    """Check `fn(queries, keys, values, score, k)` -> (outputs, weights) for top-k attention
    pooling, on asymmetric scores, large and far-off scores, 60 keys, float16, tied scores
    (all keys tied with the k-th best are kept), and gradients."""
    kept_before = {}   # (num_queries, num_keys, k) -> (case, which weights were not 0)
    for case, queries, keys, values, score, k in _topk_cases():
        n_q, n_k, d_v = queries.shape[0], keys.shape[0], values.shape[1]
        result = call(fn, queries, keys, values, score, k, name="topk_attention_pool",
                      case=case, hint_on_error=_fill_hint)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            fail(f"topk_attention_pool should return a tuple (outputs, weights), got "
                 f"{type(result).__name__} on {case}.")
        outputs, weights = result
        if isinstance(outputs, torch.Tensor) and isinstance(weights, torch.Tensor) \
                and d_v != n_k and tuple(outputs.shape) == (n_q, n_k) \
                and tuple(weights.shape) == (n_q, d_v):
            fail(f"the pair looks swapped on {case}: the first tensor has the weights' shape "
                 f"({n_q}, {n_k}) and the second the outputs' ({n_q}, {d_v}).",
                 "return (outputs, weights), in this order.")
        if isinstance(weights, torch.Tensor) \
                and _kth_without_keys_axis(weights, score(queries, keys), k):
            fail(f"the weights are wrong on {case}: row i keeps key j where scores[i, j] "
                 "reaches the k-th best score of query j, instead of query i's own k-th best "
                 "score.",
                 "the k-th best scores, topk(k, dim=-1).values[:, -1], have shape "
                 "(num_queries,); compared with the (num_queries, num_keys) scores they line "
                 "up with the keys axis, without an error when num_queries == num_keys. Keep "
                 "a keys axis of size 1: values[:, -1:] (or [:, -1, None]).")
        overflow = ("exp() overflows for large scores, or underflows to 0/0 when every score "
                    "is very negative: use torch.softmax, or subtract each row's maximum "
                    "before exp.")
        if isinstance(weights, torch.Tensor) and tuple(weights.shape) == (n_q, n_k) \
                and weights.is_floating_point() and torch.isnan(weights).any():
            scores = score(queries, keys).double()
            best = scores.amax(dim=-1)
            kth = scores.topk(k, dim=-1).values[:, -1]
            rows = torch.isnan(weights).any(dim=-1)
            if bool((best[rows] < kth.max()).all()) and float(scores.abs().max()) < 80 \
                    and not bool((best[rows] == kth[rows]).all()):
                overflow = (
                    "every key of such a query was masked, and its scores are small (no "
                    "overflow): each of these queries' best score lies below the k-th best "
                    "of another query. Take the k-th best score per query, "
                    "topk(k, dim=-1).values[:, -1:] (one per row), not one threshold from "
                    "a single query or from the whole tensor.")
            elif bool((best[rows] < best.max() - 80).all()):   # added after round 9
                overflow = (
                    "the scores of such a query all lie far below another query's best "
                    "score: a softmax shifted by one maximum for the whole matrix "
                    "(scores.max()) makes every exp() of that row underflow to 0, and 0/0 "
                    "is NaN. Subtract each row's own maximum, amax(dim=-1, keepdim=True), "
                    "or use torch.softmax.")
            elif bool((best[rows] == kth[rows]).all()):
                overflow = (
                    "every key of such a query was masked. In these rows the best score "
                    "ties with the k-th best, so a threshold that drops the k-th best "
                    "itself (mask scores <= kth, keep scores > kth, or compare with the "
                    "(k+1)-th best) masks them all, and the softmax of a row of -inf is "
                    "NaN. Mask only the scores below the k-th best: scores < topk(k, "
                    "dim=-1).values[:, -1:].")
        expect_tensor(weights, (n_q, n_k), what="weights", case=case, nan_hint=overflow)
        expect_tensor(outputs, (n_q, d_v), what="outputs", case=case, nan_hint=overflow)
        expect_tensor(weights, dtype=queries.dtype, what="weights", case=case)
        expect_tensor(outputs, dtype=queries.dtype, what="outputs", case=case)
        ref_out, ref_weights = _topk_reference(queries, keys, values, score, k)
        kept_keys, earlier = weights.detach() != 0, kept_before.get((n_q, n_k, k))
        if earlier is not None and torch.equal(kept_keys, earlier[1]) \
                and not torch.equal(kept_keys, ref_weights != 0):
            fail(f"the weights are wrong on {case}: they keep the same keys as on "
                 f"{earlier[0]} (the same sizes and k, other inputs), not the keys with "
                 "this call's k highest scores.",
                 "compute everything from this call's arguments: keep nothing between calls "
                 "(no cache or global keyed on the shapes or k).")
        kept_before[(n_q, n_k, k)] = (case, kept_keys)
        tol = dict(atol=2e-3, rtol=2e-3) if queries.dtype == torch.half else \
            dict(atol=2e-2, rtol=2e-2) if queries.dtype == torch.bfloat16 else \
            dict(atol=1e-5, rtol=1e-4)
        sums = weights.double().sum(dim=-1)
        if not is_close(sums, torch.ones_like(sums), atol=tol["atol"], rtol=0):
            hint = ("mask the scores before the softmax (fill with -inf), rather than zeroing "
                    "weights after it: zeroing leaves rows that sum to less than 1.")
            if (sums == 0).any():
                hint = ("a query kept no key (its weights are all 0): its best score lies "
                        "below the threshold it was given, which came from another query or "
                        "from the whole tensor (and a NaN row replaced by 0 hides this). "
                        "Take each query's own k-th best score, topk(k, dim=-1).values"
                        "[:, -1:], one per row.")
            elif bool((sums <= 1 + tol["atol"]).all()) \
                    and torch.equal(weights.detach() != 0, ref_weights != 0):
                hint = _short_rows_hint(weights, ref_weights, score(queries, keys), sums)
            elif (sums > 1 + tol["atol"]).any():
                hint = ("some rows hold weights that belong to other queries: row i must be "
                        "built from scores[i] alone. weights[:, idx] = ... writes into every "
                        "row; mask each row's own scores (masked_fill) or scatter along "
                        "dim=-1 instead.")
            fail(f"each query's weights must sum to 1 on {case}; they sum to "
                 f"{[round(s, 4) for s in sums.tolist()]}.", hint)
        kept, ref_kept = (weights != 0).sum(dim=-1), (ref_weights != 0).sum(dim=-1)
        if not torch.equal(kept, ref_kept):
            hint = ("keep the k largest scores of each row (topk over the keys axis, dim=-1), "
                    "and give the others weight exactly 0 (fill their scores with -inf; a "
                    "finite fill such as -1e4 still leaves them weight when scores are "
                    "large).")
            if bool((kept > ref_kept).any()) and bool((ref_kept == k).all()) \
                    and "not a tie" in case:
                hint = ("only keys whose score equals the k-th best exactly are kept: mask "
                        "scores < topk(k).values[:, -1:] without a tolerance (torch.isclose "
                        "is one) and without rounding (torch.round, a cast to a lower "
                        "precision), on the scores themselves in their own dtype (not on "
                        "the softmax weights, where rounding makes near scores equal): a "
                        "key 2e-4, 1e-6 or 1e-7 below the k-th best (1e-12 in float64) is "
                        "not tied with it.")
            if bool((kept <= ref_kept).all()) and bool((kept < ref_kept).any()) \
                    and not bool((ref_kept > k).any()):
                hint = ("too few keys keep a weight: the k-th best score itself must stay. "
                        "Take it as topk(k, dim=-1).values[:, -1:] (the last of the k, not "
                        "the (k-1)-th) and mask the scores strictly below it, scores < kth "
                        "(not scores <= kth); and use the k passed in, unchanged (no cap "
                        "such as min(k, n // 2)).")
            fewer = int(kept[0])
            if bool((kept == fewer).all()) and fewer < k - 1 \
                    and not bool((ref_kept > k).any()):
                hint = (f"every query keeps {fewer} keys, not k={k}: take the k passed in "
                        "as it is, topk(k, dim=-1) (k never exceeds the number of keys, "
                        "scores.shape[-1], here)."
                        + (f" {fewer} is the number of queries, scores.shape[0]."
                           if fewer == n_q else ""))
            if (ref_kept > k).any() and bool((kept <= ref_kept).all()):
                hint = ("keys whose score equals the k-th best score are all kept (the "
                        "exercise's rule for ties): mask the scores below the k-th best "
                        "(scores < topk(k).values[:, -1:]) instead of keeping the k indices "
                        "that topk returns, which picks among tied keys arbitrarily.")
            if _higher_precision_ties(weights.detach() != 0, ref_weights != 0, queries,
                                      keys, score, k):   # added after red-team round 14
                hint = ("you keep the keys of the scores recomputed in a higher precision "
                        "(e.g. score(queries.double(), keys.double())), where scores that "
                        "are one number in the inputs' dtype differ, so a tie is broken: "
                        "take the mask from the scores score(queries, keys) returns, in "
                        "their own dtype; their ties are the exercise's ties.")
            rounded = _rounded_ties(weights.detach() != 0, ref_weights != 0,
                                    score(queries, keys), k)
            if rounded is not None and "not a tie" not in case:   # after red-team round 9
                hint = (f"you keep the keys whose scores, rounded to "
                        f"{str(rounded).replace('torch.', '')} (or more coarsely), reach "
                        "the k-th best: distinct scores that round to the same number "
                        "become ties. Compare the scores themselves, exactly and in their "
                        "own dtype: no cast (.half(), .float(), .to(values.dtype)), no "
                        "torch.round, no tolerance.")
            fail(f"each query should give weight to exactly k={k} keys, or more where other "
                 f"keys tie with the k-th best score, on {case}; the number of keys with "
                 f"weight != 0 per query is {kept.tolist()}, expected {ref_kept.tolist()}.",
                 hint)
        if not is_close(weights, ref_weights, **tol):
            pair = _clamped_pair(weights, score(queries, keys))
            if pair is not None:   # added after red-team round 11
                fail(f"the weights are wrong on {case}: keys with the distinct scores "
                     f"{pair[0]:.10g} and {pair[1]:.10g} get the same weight.",
                     "your scores were clamped (scores.clamp(-6e4, 6e4) makes both 6e4) or "
                     "cast into a narrower range (float16 ends at 65504). Keep the scores "
                     "as score() returns them, for every dtype: the softmax's shift by the "
                     "row maximum already keeps exp() from overflowing, and -inf masks "
                     "exactly; float32 and float64 scores of 1e5 need no protection.")
            alternatives = [
                (lambda q, kk: score(kk, q).T,
                 "your weights are those of score(keys, queries).T: call score(queries, "
                 "keys), in this order. A score need not be symmetric (this one is q^T M k)."),
                (lambda q, kk: score(q, kk).abs(),
                 "your weights rank the keys by |score|: keep the k highest scores (most "
                 "positive), not the largest in magnitude."),
                (lambda q, kk: -score(q, kk),
                 "your weights keep the k lowest scores: use topk(k, dim=-1) (largest=True)."),
            ]
            for alt_score, why in alternatives:
                try:
                    _, alt = _topk_reference(queries, keys, values, alt_score, k)
                except RuntimeError:
                    continue
                same = (alt != 0) == (weights != 0)
                if alt.shape == weights.shape and bool(same.all()) \
                        and not bool(((alt != 0) == (ref_weights != 0)).all()):
                    fail(f"the weights are wrong on {case}: {why}")
            expect_close(weights, ref_weights, what="weights", case=case, **tol,
                         hint="the kept keys must be the k with the highest scores for that "
                              "query, and their weights the softmax of those k scores.")
        expect_close(outputs, ref_out, what="outputs", case=case, **tol,
                     hint="the output is weights @ values (the values, not the keys).")
    _check_topk_repeat_calls(fn)
    g = torch.Generator().manual_seed(12)
    score = _bilinear(torch.randn(4, 4, generator=g))
    q, kk, v = torch.randn(3, 4, generator=g), torch.randn(7, 4, generator=g), \
        torch.randn(7, 2, generator=g)
    expect_gradients(lambda a, b, c: fn(a, b, c, score, 3),
                     lambda a, b, c: _topk_reference(a, b, c, score, 3),
                     [("queries", q), ("keys", kk), ("values", v)],
                     name="topk_attention_pool",
                     case="3 queries, 7 keys, k=3, asymmetric score (gradients of outputs "
                          "and weights)")
    _check_topk_single_key_gradients(fn)
    _topk_matrix(fn)


def _check_topk_repeat_calls(fn):
    """Added after red-team round 7: three calls with the same sizes, k, score and dtype:
    fresh queries, then the same tensor objects after an in-place change of the keys (as an
    optimiser step changes a parameter). A cache keyed on the sizes, k, score and dtype, or
    on the tensors themselves (functools.lru_cache hashes a tensor by its identity), returns
    an earlier call's result."""
    g = torch.Generator().manual_seed(30)
    queries, keys = torch.randn(4, 3, generator=g), torch.randn(7, 3, generator=g)
    values, score = torch.randn(7, 2, generator=g), _dot
    calls = [("4 queries, 7 keys, k=2, dot score", queries, None),
             ("the same sizes, k, score and dtype with 4 other queries",
              torch.randn(4, 3, generator=g), None),
             ("the same tensor objects as the call before, after keys.mul_(-1) changed the "
              "keys in place", None, lambda: keys.mul_(-1))]
    earlier = []   # (case, weights) of the calls before
    for case, new_queries, change in calls:
        if new_queries is not None:
            queries = new_queries
        if change is not None:
            change()
        result = call(fn, queries, keys, values, score, 2, name="topk_attention_pool",
                      case=case, hint_on_error=_fill_hint)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            fail(f"topk_attention_pool should return a tuple (outputs, weights), got "
                 f"{type(result).__name__} on {case}.")
        outputs, weights = result
        expect_tensor(weights, (4, 7), what="weights", case=case)
        ref_out, ref_weights = _topk_reference(queries, keys, values, score, 2)
        if not is_close(weights, ref_weights):
            for before, old in earlier:
                if torch.equal(old, weights.detach()) or torch.equal(
                        old != 0, weights.detach() != 0) and not torch.equal(
                        old != 0, ref_weights != 0):
                    fail(f"the weights on {case} are (or keep the same keys as) those your "
                         f"function returned on {before}: the result depends on an earlier "
                         "call.",
                         "compute everything from this call's arguments and keep nothing "
                         "between calls: no cache or global keyed on the sizes, k, the score "
                         "or the dtype, and no functools.lru_cache on tensors (it hashes a "
                         "tensor by its identity, so it misses an in-place change).")
        expect_close(weights, ref_weights, what="weights", case=case,
                     hint="the kept keys must be the k with the highest scores for that "
                          "query, and their weights the softmax of those k scores.")
        expect_close(outputs, ref_out, what="outputs", case=case,
                     hint="the output is weights @ values (the values, not the keys).")
        earlier.append((case, weights.detach().clone()))
