"""Checkers for chapter 3's exercises: masked softmax and scaled dot-product attention."""
import itertools
import math

import torch

from .. import attention as _attention
from ._core import (FLOAT16, FLOAT16_NOT_BFLOAT16, FLOAT64, NO_GRAD, PLAIN, STANDARD,
                    WITHOUT_GRAD, call, checker, expect_close,
                    expect_conditions, expect_float64_accuracy, expect_gradients, scaled,
                    shifted, expect_new_tensor, expect_tensor, fail, forbidden, is_close,
                    view_hint)

# Exercise 3.1: "Write masked_softmax(X, valid_lens) without looking at book.attention".
_BOOK_MASKED_SOFTMAX = [(_attention, "masked_softmax")]
_OWN_MASK = ("the exercise asks you to write masked_softmax yourself, without "
             "book.attention's (build the mask from valid_lens, fill, softmax).")


def _lens_2d(valid_lens, shape):
    """(batch, queries) lengths from None, (batch,) or (batch, queries) lengths."""
    if valid_lens is None:
        return torch.full(shape[:2], shape[-1])
    lens = valid_lens[:, None] if valid_lens.dim() == 1 else valid_lens
    return lens.expand(shape[:2])


def _reference_masked_softmax(X, valid_lens, offset=0, lens=None):
    """The reference in float64 (offset=+1 / -1: a mask one key too wide / too narrow)."""
    X = X.double()
    if valid_lens is None and lens is None:
        return torch.softmax(X, dim=-1)
    lens = _lens_2d(valid_lens, X.shape) if lens is None else lens
    keep = torch.arange(X.shape[-1]) < (lens[..., None] + offset)
    return torch.softmax(X.masked_fill(~keep, torch.finfo(X.dtype).min), dim=-1) * keep


def _masked_softmax_cases():
    g = torch.Generator().manual_seed(3)
    X = torch.randn(2, 3, 5, generator=g)
    low = -2e4 + 10 * torch.randn(2, 3, 6, generator=g)          # every score near -2e4
    high = torch.randn(2, 3, 6, generator=g)
    high[0, :, 2:] = 3e4                                          # padded scores dominate
    high[1, :, 4:] = 3e4
    half = (4 * torch.randn(2, 2, 5, generator=g))
    half[0, :, 3:] = 6e4                                          # near float16's largest
    half[1, :, 1:] = 6e4
    return [
        ("X of shape (2, 3, 5), valid_lens [2, 4] (one length per sequence)",
         X, torch.tensor([2, 4])),
        ("X of shape (2, 3, 5), valid_lens [[1, 3, 5], [2, 4, 1]] (one length per query)",
         X, torch.tensor([[1, 3, 5], [2, 4, 1]])),
        ("X of shape (2, 3, 5), valid_lens None (no mask)", X, None),
        ("X of shape (2, 3, 5), valid_lens [3, 0] (example 1 has no valid key)",
         X, torch.tensor([3, 0])),
        ("X of shape (2, 3, 5), valid_lens [[2, 0, 5], [1, 1, 0]] (some rows fully masked)",
         X, torch.tensor([[2, 0, 5], [1, 1, 0]])),
        ("float16 X = 8 * randn(2, 3, 5), valid_lens [4, 0]",
         (8 * X).half(), torch.tensor([4, 0])),
        ("a batch of one: X of shape (1, 2, 4), valid_lens [0] (no valid key)",
         torch.randn(1, 2, 4, generator=g), torch.tensor([0])),
        ("a batch of one: X of shape (1, 3, 4), valid_lens [[0, 2, 4]]",
         torch.randn(1, 3, 4, generator=g), torch.tensor([[0, 2, 4]])),
        ("X of shape (2, 3, 6) with every score near -2e4, valid_lens [3, 5]",
         low, torch.tensor([3, 5])),
        ("X of shape (2, 3, 6) whose padded keys score 3e4 (far above the valid ones), "
         "valid_lens [2, 4]", high, torch.tensor([2, 4])),
        ("float16 X of shape (2, 2, 5) whose padded keys score 6e4, valid_lens [3, 1]",
         half.half(), torch.tensor([3, 1])),
        ("X of shape (2, 2, 60), valid_lens [55, 7] (long rows)",
         torch.randn(2, 2, 60, generator=g), torch.tensor([55, 7])),
        ("X of shape (2, 2, 60), valid_lens [[60, 0], [1, 59]] (long rows)",
         torch.randn(2, 2, 60, generator=g), torch.tensor([[60, 0], [1, 59]])),
        ("float64 X of shape (2, 3, 5), valid_lens [[5, 0, 2], [3, 3, 3]]",
         torch.randn(2, 3, 5, generator=g, dtype=torch.float64),
         torch.tensor([[5, 0, 2], [3, 3, 3]])),
        *_masked_softmax_cases_round4(),
    ]


def _masked_softmax_cases_round4():
    """Cases added after red-team round 4 (their own generator: the data above stays)."""
    g = torch.Generator().manual_seed(33)
    constant = torch.tensor([0.0, 2.5, -1.0, 7.0]).reshape(2, 2, 1).expand(2, 2, 4).clone()
    return [
        # A valid row whose scores are all equal is uniform: 1/n over a full row.
        ("X of shape (2, 2, 4) whose rows are constant (all 4 scores of a row equal), "
         "valid_lens [[4, 2], [4, 0]]", constant, torch.tensor([[4, 2], [4, 0]])),
        # .view() cannot flatten a transposed batch.
        ("X of shape (2, 3, 5) that is a transposed view, not contiguous in memory "
         "(torch.randn(2, 5, 3).transpose(1, 2)), valid_lens [[1, 3, 5], [2, 4, 0]]",
         torch.randn(2, 5, 3, generator=g).transpose(1, 2),
         torch.tensor([[1, 3, 5], [2, 4, 0]])),
        # float16 holds the integers only up to 2048: lengths or positions cast to X.dtype
        # round (2049 -> 2048, 4099 -> 4100).
        ("float16 X of shape (1, 2, 4100), valid_lens [[2049, 4100]] (lengths above 2048)",
         torch.randn(1, 2, 4100, generator=g).half(), torch.tensor([[2049, 4100]])),
        # Added after red-team round 14 (its own generator): bfloat16 holds the integers
        # only up to 256 (257 -> 256).
        ("bfloat16 X of shape (1, 2, 300), valid_lens [[257, 300]] (lengths above 256)",
         torch.randn(1, 2, 300, generator=torch.Generator().manual_seed(314)).bfloat16(),
         torch.tensor([[257, 300]])),
        *_masked_softmax_cases_round5(),
    ]


def _masked_softmax_cases_round5():
    """Cases added after red-team round 5: valid lengths above the number of keys (nothing
    is masked; the lengths must come back unchanged) and float16 without a mask."""
    g = torch.Generator().manual_seed(35)
    return [
        ("X of shape (2, 3, 5), valid_lens [7, 2] (a length above the 5 keys: every key is "
         "valid)", torch.randn(2, 3, 5, generator=g), torch.tensor([7, 2])),
        ("X of shape (2, 2, 4), valid_lens [[9, 0], [4, 6]] (lengths above the 4 keys)",
         torch.randn(2, 2, 4, generator=g), torch.tensor([[9, 0], [4, 6]])),
        ("float16 X = 2 * randn(2, 3, 5), valid_lens None (no mask)",
         (2 * torch.randn(2, 3, 5, generator=g)).half(), None),
        ("float64 X of shape (2, 3, 5), valid_lens None (no mask)",
         torch.randn(2, 3, 5, generator=g, dtype=torch.float64), None),
        *_masked_softmax_cases_round6(),
    ]


def _masked_softmax_cases_round6():
    """Cases added after red-team round 6: one key (a shortcut for it must not write into X)."""
    g = torch.Generator().manual_seed(36)
    return [
        ("X of shape (2, 3, 1) (one key), valid_lens [1, 0]",
         torch.randn(2, 3, 1, generator=g), torch.tensor([1, 0])),
        ("X of shape (2, 3, 1) (one key), valid_lens None (no mask)",
         torch.randn(2, 3, 1, generator=g), None),
        *_masked_softmax_cases_round7(),
    ]


def _masked_softmax_cases_round7():
    """Cases added after red-team round 7: square X (as many queries as keys, as in
    self-attention: a mask on the wrong axis has the right shape there)."""
    g = torch.Generator().manual_seed(37)
    return [
        ("square X of shape (2, 4, 4) (as many queries as keys), valid_lens [[1, 2, 3, 4], "
         "[4, 0, 2, 1]]", torch.randn(2, 4, 4, generator=g),
         torch.tensor([[1, 2, 3, 4], [4, 0, 2, 1]])),
        ("square X of shape (2, 4, 4) (as many queries as keys), valid_lens None (no mask)",
         torch.randn(2, 4, 4, generator=g), None),
        *_masked_softmax_cases_round8(),
    ]


def _masked_softmax_cases_round8():
    """Cases added after red-team round 8: per-query lengths that are a transposed view
    (.view() cannot flatten them) and float32 lengths above 255 (a cast to uint8 or int8
    wraps them around; the float16 case with 4,100 keys caught it, under float16's hint)."""
    g = torch.Generator().manual_seed(308)
    return [
        ("X of shape (2, 3, 5), valid_lens torch.tensor([[1, 2], [3, 4], [5, 0]]).T (the "
         "per-query lengths [[1, 3, 5], [2, 4, 0]] as a transposed view, not contiguous in "
         "memory)", torch.randn(2, 3, 5, generator=g),
         torch.tensor([[1, 2], [3, 4], [5, 0]]).T),
        ("X of shape (2, 2, 300), valid_lens [[257, 300], [3, 299]] (lengths above 255)",
         torch.randn(2, 2, 300, generator=g), torch.tensor([[257, 300], [3, 299]])),
        *_masked_softmax_cases_round9(),
    ]


def _masked_softmax_cases_round9():
    """Cases added after red-team round 9: large scores without a mask (a None branch of its
    own needs the max shift too), three in a row of one shape and dtype (a result kept in a
    buffer shared between no-mask calls is changed by the next call)."""
    g = torch.Generator().manual_seed(309)
    return [
        ("X of shape (2, 3, 5) with every score near 1000 (1000 + randn), valid_lens None "
         "(no mask)", 1000 + torch.randn(2, 3, 5, generator=g), None),
        ("X = 200 + 10 * randn(2, 3, 5) (scores near 200), valid_lens None (no mask)",
         200 + 10 * torch.randn(2, 3, 5, generator=g), None),
        ("X of shape (2, 3, 5) with every score near -1000 (randn - 1000), valid_lens None "
         "(no mask)", torch.randn(2, 3, 5, generator=g) - 1000, None),
        *_masked_softmax_cases_round11(),
    ]


def _beyond_half(dtype, g):
    """(2, 2, 5) scores of 1e5 or more in size, beyond float16's range (+-65504), a few
    units apart (multiples of 1/4: exact in float32): rows near 1e5 and 1.5e5 (masked) and
    near -1e5 and -1.2e5 (every key valid)."""
    base = torch.tensor([[1e5, -1e5], [1.5e5, -1.2e5]], dtype=dtype)
    return base[..., None] + torch.randint(-8, 9, (2, 2, 5), generator=g).to(dtype) / 4


def _masked_softmax_cases_round11():
    """Cases added after red-team round 11: the rows of one example far apart (one maximum
    shared by the rows underflows the rows far below it; the gradient case caught it, told
    as a backward fault), and float32 and float64 scores beyond float16's range (scores
    clamped to +-6e4 for every dtype become equal)."""
    g = torch.Generator().manual_seed(311)
    offsets = torch.tensor([[0.0, -800.0, 1000.0], [1000.0, 0.0, -800.0]])
    far = offsets[..., None] + torch.randn(2, 3, 4, generator=g)
    return [
        ("X of shape (2, 3, 4) whose rows lie far apart within one example (near 0, -800 "
         "and +1000), valid_lens [[4, 3, 2], [2, 4, 3]]", far,
         torch.tensor([[4, 3, 2], [2, 4, 3]])),
        ("float32 X of shape (2, 2, 5) with scores near 1e5, -1e5, 1.5e5 and -1.2e5 "
         "(beyond float16's range, a few units apart), valid_lens [[3, 5], [4, 5]]",
         _beyond_half(torch.float32, g), torch.tensor([[3, 5], [4, 5]])),
        ("float64 X of shape (2, 2, 5) with scores near 1e5, -1e5, 1.5e5 and -1.2e5 "
         "(beyond float16's range, a few units apart), valid_lens [[5, 5], [2, 5]]",
         _beyond_half(torch.float64, g), torch.tensor([[5, 5], [2, 5]])),
        *_masked_softmax_cases_round13(),
    ]


def _masked_softmax_cases_round13():
    """Cases added after red-team round 13: lengths above num_keys beyond int16's and
    int32's range (a cast to torch.int16 wraps 65536 to 0, one to torch.int32 wraps 2**32 + 2
    to 2), and padded keys that score -inf, as an earlier mask leaves them (-inf * 0 is
    NaN: the padded scores must be replaced, not multiplied by the mask)."""
    g = torch.Generator().manual_seed(313)
    lens = torch.tensor([[2, 3, 5], [1, 0, 4]])
    X = torch.randn(2, 3, 5, generator=g)
    X = X.masked_fill(torch.arange(5) >= lens[..., None], -math.inf)
    return [
        ("X of shape (2, 2, 6), valid_lens [[4294967298, 65536], [40000, 3]] (lengths "
         "above the 6 keys, beyond the range of int16 and int32: every key valid but in "
         "the last row)", torch.randn(2, 2, 6, generator=g),
         torch.tensor([[2 ** 32 + 2, 2 ** 16], [40000, 3]])),
        ("X of shape (2, 3, 5) whose padded keys score -inf (as an earlier mask leaves "
         "them), valid_lens [[2, 3, 5], [1, 0, 4]]", X, lens),
    ]


def _masked_softmax_cases_bfloat16():
    """bfloat16 with scores of -1e5, below float16's -65504 (no fill for bfloat16); added
    after red-team round 7, checked after the gradients."""
    g = torch.Generator().manual_seed(39)
    # bfloat16 is 512 apart near 1e5, so the valid keys of a row share one score (any gap
    # would be 512 or more: one key takes every weight); the padded keys score near 0.
    lens = torch.tensor([[3, 1], [2, 4]])
    low = torch.where(torch.arange(4) < lens[..., None], torch.tensor(-1e5),
                      torch.randn(2, 2, 4, generator=g))
    return [
        ("bfloat16 X of shape (2, 2, 4) whose valid keys score -1e5 (below float16's "
         "-65504) and padded keys near 0, valid_lens [[3, 1], [2, 4]]", low.bfloat16(),
         lens),
    ]


_EARLIER_HINT = ("compute the mask from this call's valid_lens every time: lengths of the "
                 "same shape are not the same lengths, and a tensor changed in place is "
                 "still the same object (functools.lru_cache and dicts compare tensors by "
                 "identity, not by value).")


def _stale_lens(W, X, valid_lens, earlier, atol, case):
    """Fail if the weights are what an earlier call's valid_lens (X and lengths of the same
    shapes) give: the function kept a mask from an earlier call."""
    __tracebackhide__ = True
    old = earlier.get((tuple(X.shape), tuple(valid_lens.shape)))
    if old is not None and not torch.equal(old, valid_lens) and is_close(
            W, _reference_masked_softmax(X, old), atol=atol, rtol=1e-3):
        fail(f"the weights are wrong on {case}: they are what an earlier call's valid_lens "
             f"{old.tolist()} (of the same shape) give: your function keeps a mask computed "
             "in an earlier call (a cache keyed by shape, a default argument, a global).",
             _EARLIER_HINT)


# Integer dtypes a learner may cast the lengths to (8 bits: added after red-team round 8;
# 16 and 32 bits, where a length above num_keys such as 65536 or 2**32 wraps to 0, after
# round 13).
_INT_CASTS = ((torch.uint8, "torch.uint8 (.byte())", 8), (torch.int8, "torch.int8 (.char())", 8),
              (torch.int16, "torch.int16 (.short())", 16),
              (torch.int32, "torch.int32 (.int())", 32))


def _wrap_casts(lens, gives):
    """[(name, bits, wrapped lengths)] of the integer casts that change `lens` (batch,
    queries) and whose wrapped lengths give the result seen (`gives(wrapped)` is True)."""
    if int(lens.max()) < 128:
        return []
    found = []
    for dtype, name, bits in _INT_CASTS:
        wrapped = lens.to(dtype).long()
        if not torch.equal(wrapped, lens) and gives(wrapped):
            found.append((name, bits, wrapped))
    return found


def _wrap_fail(found, lens, what, case):
    """Fail naming the casts of `found` (from _wrap_casts)."""
    __tracebackhide__ = True
    name, bits, wrapped = found[0]
    at = tuple((lens != wrapped).nonzero()[0])
    widths = " or ".join(dict.fromkeys(str(b) for _, b, _ in found))
    casts = " or ".join(n for n, _, _ in found)
    fail(f"{what} wrong on {case}: {'they are' if what.endswith('are') else 'it is'} what "
         f"the lengths give after a cast to {casts}, which keeps only their lowest {widths} "
         f"bits (a length of {int(lens[at])} becomes {int(wrapped[at])}).",
         "keep valid_lens in its integer dtype (torch.long): compare "
         "torch.arange(num_keys) with valid_lens[..., None] as they are. A length above "
         "num_keys (65536, 2**32) is legal and makes every key valid.")


def _wrapped_lens(W, X, lens, atol, case):
    """Fail if the weights are what the lengths cast to a narrower integer dtype give (they
    wrap around: 257 becomes 1 in 8 bits, 65536 becomes 0 in 16 bits, 2**32 in 32)."""
    __tracebackhide__ = True
    found = _wrap_casts(lens, lambda wrapped: is_close(
        W, _reference_masked_softmax(X, None, lens=wrapped), atol=atol, rtol=1e-3))
    if found:  # lengths such as 2049 and 4100 wrap alike in 8 bits: then both are named
        _wrap_fail(found, lens, "the weights are", case)


def _masked_changed_in_place(fn):
    """Call fn twice on the same X and valid_lens objects, changing both in place between
    the calls (as a caller that reuses its buffers does): the second result must be that of
    the new values."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(38)
    X = torch.randn(2, 3, 5, generator=g)
    lens = torch.tensor([[1, 4, 2], [5, 0, 3]])
    first_case = "X of shape (2, 3, 5), valid_lens [[1, 4, 2], [5, 0, 3]]"
    with forbidden(_BOOK_MASKED_SOFTMAX, _OWN_MASK):
        first = call(fn, X, lens, name="masked_softmax", case=first_case)
    expect_close(first, _reference_masked_softmax(X, lens), what="masked_softmax(X, "
                 "valid_lens)", case=first_case, atol=1e-5, rtol=1e-3)
    old_X, old_lens = X.clone(), lens.clone()
    X.copy_(torch.randn(2, 3, 5, generator=g))
    lens.copy_(torch.tensor([[3, 1, 5], [2, 4, 0]]))
    case = ("a second call on the same X and valid_lens tensors, changed in place since the "
            "first call to new scores and valid_lens [[3, 1, 5], [2, 4, 0]]")
    with forbidden(_BOOK_MASKED_SOFTMAX, _OWN_MASK):
        out = call(fn, X, lens, name="masked_softmax", case=case)
    expect_tensor(out, X.shape, dtype=X.dtype, what="masked_softmax(X, valid_lens)",
                  case=case)
    if is_close(out, _reference_masked_softmax(X, lens), atol=1e-5, rtol=1e-3):
        return
    for what, x, n in (("lengths", X, old_lens), ("scores", old_X, lens),
                       ("scores and lengths", old_X, old_lens)):
        if is_close(out, _reference_masked_softmax(x, n), atol=1e-5, rtol=1e-3):
            fail(f"the weights are wrong on {case}: they are what the first call's {what} "
                 "give: your result depends on an earlier call (a cache keyed on the "
                 "tensors, such as functools.lru_cache, which tells tensors apart by "
                 "identity, not by value).", _EARLIER_HINT)
    expect_close(out, _reference_masked_softmax(X, lens), what="masked_softmax(X, "
                 "valid_lens)", case=case, atol=1e-5, rtol=1e-3,
                 hint="compute everything from this call's X and valid_lens: the result "
                      "must not depend on an earlier call.")


def _fill_overflow_hint(error, transposed="X (a transpose)"):
    if "num_classes" in str(error):
        return ("a valid length may exceed the number of keys (then every key is valid): "
                "one_hot (or an index of that size) cannot hold it. Compare positions "
                "instead: torch.arange(num_keys) < valid_lens[..., None].")
    if "overflow" in str(error):
        return ("your fill value does not fit in float16 (its range ends near -65504): use "
                "torch.finfo(X.dtype).min, which fits every dtype.")
    if view_hint(error):
        return view_hint(error, transposed, "broadcast the mask against X: "
                         "torch.arange(num_keys) < valid_lens[..., None]")
    if "must match the size" in str(error):
        return ("the positions to compare with valid_len are those of the keys: "
                "torch.arange(X.shape[-1]), broadcast against valid_lens[:, None, None] "
                "(one length per sequence) or valid_lens[..., None] (one per query).")
    return None


def _sdpa_error_hint(error):
    if view_hint(error):
        return view_hint(error, "queries, keys or values (a transpose, as head splitting "
                         "gives)", "keep the batch axis and use batched products, "
                         "torch.bmm(queries, keys.transpose(1, 2)) or @")
    return _fill_overflow_hint(error)


def _lens_unchanged(given, valid_lens, name, case):
    if valid_lens is not None and not (isinstance(given, torch.Tensor)
                                       and given.shape == valid_lens.shape
                                       and torch.equal(given, valid_lens)):
        fail(f"{name} changed valid_lens in place on {case}.",
             "build new tensors (valid_lens[:, None], not valid_lens.unsqueeze_(-1)): the "
             "caller uses the same lengths again, e.g. for every head.")


def _shared_max_hint(X, lens, rows):
    """A hint naming one maximum shared by several rows, if a row among `rows` (batch,
    queries) that has valid keys lies more than 100 below the highest valid score of another
    row (exp() of every one of its shifted scores underflows to 0); else None (added after
    red-team round 11)."""
    keep = torch.arange(X.shape[-1]) < lens[..., None]
    top = X.double().masked_fill(~keep, -math.inf).amax(dim=-1)      # (batch, queries)
    far = rows & (lens > 0) & (top < top.max() - 100)
    if not far.any():
        return None
    b, i = (int(t) for t in far.nonzero()[0])
    return (f"row (example {b}, query {i}) has valid keys, but its scores lie about "
            f"{float(top.max() - top[b, i]):.0f} below those of another row, so exp() of "
            "each of its shifted scores underflowed to 0: the maximum you subtract is not "
            "the row's own (one maximum per example, per matrix or for the whole tensor). "
            "Subtract each row's own maximum, amax(dim=-1, keepdim=True) over its valid "
            "keys (after the fill), as torch.softmax does.")


# Clamps a learner may put on the scores "for float16" (added after red-team round 11).
_CLAMPS = (1e4, 3e4, 5e4, 6e4, 65504.0)


def _clamp_hint(found):
    """(why, hint) for scores clamped to each bound of `found` (several: alike here)."""
    bound = (f"+-{found[0]:g}" if len(found) == 1 else
             f"a bound between +-{min(found):g} and +-{max(found):g} (alike on this case)")
    return (f"the scores are clamped to {bound}: scores beyond the clamp become equal, so "
            "1e5 and 7e4 get the same weight.",
            "a float32 or float64 score may lie far beyond float16's range (+-65504): do "
            "not clamp the scores. Subtracting each row's maximum already keeps exp() from "
            "overflowing in every dtype (torch.softmax does), and a float16 input holds "
            "only float16 numbers anyway.")


_NAN_GRAD_HINT = ("an additive -inf mask (X + mask) makes the backward compute NaN for a row "
                  "with no valid key, even when nan_to_num or torch.where hides it in the "
                  "forward: use X.masked_fill(~keep, torch.finfo(X.dtype).min), then multiply "
                  "the weights by keep.")


@checker("masked_softmax")
def check_masked_softmax(fn):
    """Check `fn(X, valid_lens)`: softmax over the last axis that ignores keys >= valid_len, on
    1-D and 2-D lengths, empty rows, batches of one, huge and dominating scores (also without
    a mask), rows of one example far apart, float32 and float64 scores beyond float16's
    range, float16,
    float64, bfloat16, rows of 60 keys, square X, transposed X and lengths, lengths above 255,
    a second call on the same tensors changed in place, and gradients (fully masked rows and
    one key included)."""
    earlier = {}  # (X's shape, valid_lens's shape) -> the first such valid_lens

    def check_case(case, X, valid_lens):
        __tracebackhide__ = True
        before = X.clone()
        lens_given = None if valid_lens is None else valid_lens.clone()
        with forbidden(_BOOK_MASKED_SOFTMAX, _OWN_MASK):
            out = call(fn, X, lens_given, name="masked_softmax", case=case,
                       hint_on_error=lambda error: _fill_overflow_hint(
                           error, "valid_lens (a transpose)" if valid_lens is not None
                           and not valid_lens.is_contiguous() else "X (a transpose)"),
                       inplace_hint="build new tensors: X.masked_fill(...), not X[...] = "
                                    "or masked_fill_ (d2l's version has this bug: it "
                                    "writes the fill value into X), and valid_lens[:, "
                                    "None], not valid_lens.unsqueeze_(-1).")
        _lens_unchanged(lens_given, valid_lens, "masked_softmax", case)
        lens = _lens_2d(valid_lens, X.shape)                          # (batch, queries)
        empty = lens == 0
        positions = torch.arange(X.shape[-1])
        padded = positions >= lens[..., None]                         # (batch, queries, keys)
        if isinstance(out, torch.Tensor) and out.is_floating_point() \
                and tuple(out.shape) == tuple(X.shape) and torch.isnan(out).any():
            rows = torch.isnan(out).any(dim=-1)
            if bool((torch.isinf(X) & padded).any()):
                b, i = (int(t) for t in rows.nonzero()[0])
                fail(f"masked_softmax returned NaN on {case}, in row (example {b}, query "
                     f"{i}), whose valid_len is {int(lens[b, i])}.",
                     "a padded key may score -inf (an earlier mask leaves that), and -inf * 0 "
                     "is NaN: replace the padded scores, X.masked_fill(~keep, "
                     "torch.finfo(X.dtype).min) or torch.where(keep, X, fill), instead of "
                     "multiplying X by the mask; then multiply the weights (not the scores) "
                     "by keep.")
            if bool(empty[rows].all()):
                half = (" In float16, -1e6 and -1e9 overflow to -inf too."
                        if X.dtype == torch.half else "")
                fail(f"masked_softmax returned NaN on {case}, in the rows with no valid key.",
                     "a row whose keys are all masked gives exp(-inf - (-inf)) = NaN with an "
                     "-inf fill. Fill with a finite number, torch.finfo(X.dtype).min, and "
                     f"multiply the result by the mask so that such a row is all zeros.{half}")
            fail(f"masked_softmax returned NaN on {case}, in rows that have valid keys.",
                 _shared_max_hint(X, lens, rows) or
                 "exp() overflows for large scores (exp(12) is inf in float16, exp(89) in "
                 "float32): subtract each row's maximum before exp, as torch.softmax does.")
        expect_tensor(out, X.shape, what="masked_softmax(X, valid_lens)", case=case)
        if not torch.equal(X, before):
            fail(f"masked_softmax changed its input X on {case}.",
                 "build a new tensor with X.masked_fill(...), not X[...] = or masked_fill_ "
                 "(d2l's version has this bug: it writes the fill value into X).")
        expect_tensor(out, dtype=X.dtype, what="masked_softmax(X, valid_lens)", case=case)
        ref = _reference_masked_softmax(X, valid_lens)
        atol = {torch.half: 2e-3, torch.bfloat16: 1.6e-2}.get(X.dtype, 1e-5)
        W = out.double()
        if valid_lens is not None and not is_close(W, ref, atol=atol, rtol=1e-3):
            _stale_lens(W, X, valid_lens, earlier, atol, case)
            _wrapped_lens(W, X, lens, atol, case)
            if valid_lens.dim() == 2 and X.shape[1] == X.shape[2]:
                # valid_lens[:, None, :]: query i keeps key j when i < valid_lens[b, j]
                keep = torch.arange(X.shape[1])[:, None] < valid_lens[:, None, :]
                flipped = torch.softmax(X.double().masked_fill(~keep, -math.inf), dim=-1)
                if is_close(W, torch.nan_to_num(flipped) * keep, atol=atol, rtol=1e-3):
                    fail(f"the weights are wrong on {case}: the per-query lengths are laid "
                         "along the keys axis (valid_lens[:, None, :]), which has the right "
                         "shape only because there are as many queries as keys.",
                         "valid_lens[b, i] is the length of query i: compare "
                         "torch.arange(num_keys) with valid_lens[..., None], (batch, "
                         "queries, 1), whatever the shapes.")
        earlier.setdefault((tuple(X.shape), tuple(valid_lens.shape)) if valid_lens is not None
                           else None, valid_lens)
        sums = W.sum(dim=-1)[~empty]
        if not is_close(sums, torch.ones_like(sums), atol=atol, rtol=0):
            over_queries = W.sum(dim=1)[(~padded).any(dim=1)]         # keys someone may see
            if is_close(over_queries, torch.ones_like(over_queries), atol=atol, rtol=0):
                fail(f"the softmax runs over the wrong axis on {case}: the weights sum to 1 "
                     "over the queries (dim=1), not over the keys.",
                     "take the softmax over the last axis, dim=-1: one row per query.")
            if X.abs().max() > 1e4:
                hint = ("the fill value must lie below every score: a fill such as -1e4 (or "
                        "an additive -1e4 mask) is not small next to scores near -2e4 or "
                        "padded scores near 3e4. Fill with torch.finfo(X.dtype).min. If you "
                        "mask after the softmax (zero the padding and renormalise), the "
                        "valid keys' weights have already underflowed to 0 when the padding "
                        "dominates: mask the scores before the softmax.")
            elif valid_lens is None:
                hint = ("with valid_lens=None there is no mask: return the plain softmax of X "
                        "over the last axis (the None branch must apply the softmax too).")
            else:
                hint = ("mask the scores before the softmax; zeroing weights after it leaves "
                        "rows that sum to less than 1.")
            zero_rows = (W == 0).all(dim=-1) & ~empty             # valid keys, no weight
            if zero_rows.any() and _shared_max_hint(X, lens, zero_rows):
                hint = _shared_max_hint(X, lens, zero_rows)
            elif zero_rows.any() and X.abs().max() <= 1e4 and valid_lens is not None:
                b, i = (int(t) for t in zero_rows.nonzero()[0])
                if bool(((W != 0) & padded).any()):
                    hint = (f"row (example {b}, query {i}) came out all zeros, while "
                            "padded keys of other rows kept a weight: the mask runs along "
                            "the wrong axis. valid_len counts the keys of each query, so "
                            "compare the key positions, torch.arange(num_keys) (the last "
                            "axis), with it, not the query positions.")
                else:
                    hint = (f"row (example {b}, query {i}) has valid_len {int(lens[b, i])} "
                            "but came out all zeros: only a row whose own valid_len is 0 "
                            "is all zeros. Multiply the weights by the mask (it zeroes "
                            "exactly the padded keys, and so the empty rows) instead of "
                            "zeroing whole rows by a test on the weights (a valid row of "
                            "equal scores is uniform too) or on the lengths of other rows.")
            fail(f"each query's weights over its valid keys must sum to 1 on {case}; "
                 f"they sum to {[round(x, 3) for x in sums.tolist()[:8]]}.", hint)
        if valid_lens is not None and padded.any() and is_close(
                W, torch.softmax(X.double(), dim=-1), atol=atol, rtol=1e-3):
            fail(f"masked_softmax ignores valid_lens on {case}: the weights are those of a "
                 "plain softmax.",
                 "test for a missing mask with `valid_lens is None`: `if not valid_lens` "
                 "treats tensor([0]) as no mask (and fails for longer tensors)."
                 if valid_lens.numel() == 1 else
                 "mask every key at a position >= valid_len before the softmax.")
        if empty.any() and not (W[empty] == 0).all():
            b, i = (int(t) for t in (empty & (W != 0).any(-1)).nonzero()[0])
            hint = ("a row of equal fill values comes out of the softmax uniform: multiply "
                    "the weights by the mask afterwards, so that such a row is all zeros.")
            if W[b, i, 0] > 1 - atol and bool((W[b, i, 1:] == 0).all()):
                hint = ("the row attends to key 0 alone, as if its valid_len were 1: do not "
                        "clamp the lengths to at least 1 (valid_lens.clamp(min=1)); a length "
                        "of 0 means no valid key, and multiplying the weights by the mask "
                        "makes such a row all zeros.")
            fail(f"a row with no valid key should have all-zero weights on {case}; row "
                 f"(example {b}, query {i}) got {[round(x, 3) for x in W[b, i].tolist()[:8]]}.",
                 hint)
        leaks = (W != 0) & padded
        if leaks.any():
            b, i, j = (int(t) for t in leaks.nonzero()[0])
            at_len = positions == lens[..., None]                     # first padded key
            only_first = not (leaks & ~at_len).any() and bool(
                (leaks | ~at_len.any(dim=-1, keepdim=True) | ~at_len).all())
            hint = ("the mask is off by one: keep positions < valid_len (not <=)." if only_first
                    else "mask every key at a position >= valid_len before the softmax; with "
                    "per-query lengths (a 2-D valid_lens), use each query's own length.")
            if valid_lens is not None and valid_lens.dim() == 1 and X.shape[0] > 1:
                tiled = valid_lens.repeat(X.shape[1]).reshape(X.shape[:2])
                if torch.equal(W != 0, positions < tiled[..., None]):
                    hint = ("a (batch,) valid_lens holds one length per sequence: every query "
                            "of example b uses valid_lens[b]. valid_lens.repeat(num_queries) "
                            "tiles the lengths in the wrong order; valid_lens[:, None] "
                            "broadcasts them (or repeat_interleave repeats each in place).")
            fail(f"key {j} of query {i} in example {b} has weight {W[b, i, j].item():.3g} on "
                 f"{case}, but that query's valid length is {int(lens[b, i])}: keys at "
                 "positions >= valid_len must get weight 0.", hint)
        last = (positions == lens[..., None] - 1) & ~empty[..., None]
        if (W[last] == 0).any():
            fail(f"the last valid key of some query has weight 0 on {case}.",
                 "float16 holds the integers exactly only up to 2048 (2049 rounds to "
                 "2048, 4099 to 4100), bfloat16 only up to 256 (257 rounds to 256): "
                 "compare integer positions, torch.arange(num_keys), with the integer "
                 "valid_lens; do not cast the lengths or the positions to X.dtype."
                 if (X.dtype == torch.half and int(lens.max()) > 2048)
                 or (X.dtype == torch.bfloat16 and int(lens.max()) > 256) else
                 "the mask is off by one: keep positions < valid_len, not < valid_len - 1.")
        if not is_close(W, ref, atol=atol, rtol=1e-3):
            found = [c for c in _CLAMPS if X.abs().max() > c and is_close(
                W, _reference_masked_softmax(X.double().clamp(-c, c), valid_lens),
                atol=atol, rtol=1e-3)]
            if found:
                why, hint = _clamp_hint(found)
                fail(f"the weights are wrong on {case}: {why}", hint)
        expect_close(out, ref, what="masked_softmax(X, valid_lens)", case=case,
                     atol=atol, rtol=1e-3,
                     hint="softmax over the last axis (dim=-1) of the scores, with the keys "
                          "at positions >= valid_len left out.")
    for case, X, valid_lens in _masked_softmax_cases():
        check_case(case, X, valid_lens)
    _masked_changed_in_place(fn)
    g = torch.Generator().manual_seed(31)
    for case, X, valid_lens in [
            ("X of shape (2, 3, 5), valid_lens [[2, 0, 5], [1, 1, 0]] (some rows fully masked)",
             torch.randn(2, 3, 5, generator=g), torch.tensor([[2, 0, 5], [1, 1, 0]])),
            ("X of shape (2, 3, 5), valid_lens [3, 0] (example 1 has no valid key)",
             torch.randn(2, 3, 5, generator=g), torch.tensor([3, 0])),
            ("X of shape (1, 2, 4), valid_lens None", torch.randn(1, 2, 4, generator=g), None),
            ("X = 30 * randn(2, 2, 6), valid_lens [2, 5]",
             30 * torch.randn(2, 2, 6, generator=g), torch.tensor([2, 5]))]:
        lens = _lens_2d(valid_lens, X.shape)

        def describe(label, at, lens=lens):
            if lens[at[0], at[1]] == 0:
                return f"example {at[0]}, query {at[1]}: a row with no valid key"
            return "a padded key" if at[2] >= lens[at[0], at[1]] else ""
        expect_gradients(lambda x, lens=valid_lens: fn(x, lens),
                         lambda x, lens=valid_lens: _reference_masked_softmax(x, lens),
                         [("X", X)], name="masked_softmax", case=case + " (gradients)",
                         describe=describe, nan_hint=_NAN_GRAD_HINT)
    _masked_one_key_gradients(fn)
    for case, X, valid_lens in _masked_softmax_cases_bfloat16():
        check_case(case, X, valid_lens)
    _matrix_masked_softmax(fn)


_ONE_KEY_GRAPH_HINT = (
    "with one key every weight is 1 (or 0 where valid_len is 0), but a constant "
    "(torch.ones_like(X), the mask cast to X's dtype) has no autograd graph: compute one key "
    "the way you compute many (mask, softmax, multiply by the mask). Its gradient is zero, "
    "but it must exist: a model backpropagates through your function.")


def _masked_one_key_gradients(fn):
    """Gradients on one key (added after red-team round 10: a shortcut for one key that
    returns a constant has the right values and no graph, so backward() raises)."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(310)
    for case, X, valid_lens in [
            ("X of shape (2, 3, 1) (one key), valid_lens [1, 0]",
             torch.randn(2, 3, 1, generator=g), torch.tensor([1, 0])),
            ("X of shape (2, 3, 1) (one key), valid_lens None (no mask)",
             torch.randn(2, 3, 1, generator=g), None)]:
        case += " (gradients)"
        leaf = X.clone().requires_grad_(True)
        with forbidden(_BOOK_MASKED_SOFTMAX, _OWN_MASK):
            out = call(fn, leaf, None if valid_lens is None else valid_lens.clone(),
                       name="masked_softmax", case=case)
        if isinstance(out, torch.Tensor) and out.is_floating_point() \
                and not out.requires_grad:
            fail(f"no gradient can flow back through masked_softmax on {case}: its output "
                 "has requires_grad=False although X requires grad.", _ONE_KEY_GRAPH_HINT)
        expect_gradients(lambda x, lens=valid_lens: fn(x, lens),
                         lambda x, lens=valid_lens: _reference_masked_softmax(x, lens),
                         [("X", X)], name="masked_softmax", case=case,
                         nan_hint=_NAN_GRAD_HINT)


def _attend(queries, keys, values, valid_lens, scale=None, dim=-1, offset=0,
            keys_t=None, after=1.0, uniform_empty=False, clamp=None):
    """Reference scaled dot-product attention (float64) and its common mistakes."""
    queries, keys, values = queries.double(), keys.double(), values.double()
    d = queries.shape[-1]
    keys_t = keys.transpose(1, 2) if keys_t is None else keys_t.double()
    scores = queries @ keys_t / (math.sqrt(d) if scale is None else scale)
    if clamp is not None:
        scores = scores.clamp(-clamp, clamp)
    if dim == -1:
        weights = _reference_masked_softmax(scores, valid_lens, offset)
        if uniform_empty and valid_lens is not None:
            lens = _lens_2d(valid_lens, scores.shape)
            weights = torch.where((lens == 0)[..., None],
                                  torch.full_like(weights, 1 / scores.shape[-1]), weights)
    else:  # softmax over the queries axis, masked the same way
        weights = torch.softmax(scores, dim=dim)
        if valid_lens is not None:
            weights = weights * (_reference_masked_softmax(scores, valid_lens) > 0)
    return (weights / after) @ values


def _additive_mask(q, k, v, valid_lens):
    """softmax(scores - 1e4 outside the mask) V, in float64: the additive -1e4 mistake."""
    scores = q.double() @ k.double().transpose(1, 2) / math.sqrt(q.shape[-1])
    lens = _lens_2d(valid_lens, scores.shape)
    keep = torch.arange(scores.shape[-1]) < lens[..., None]
    return torch.softmax(scores - 1e4 * (~keep), dim=-1) @ v.double()


def _attention_cases():
    g = torch.Generator().manual_seed(4)

    def qkv(b, n_q, n_k, d, d_v, scale=1.0, dtype=torch.float32):
        return [(scale * torch.randn(b, n, dd, generator=g)).to(dtype)
                for n, dd in ((n_q, d), (n_k, d), (n_k, d_v))]

    q, k, v = qkv(2, 3, 5, 16, 6)
    far_q = 141.4 + 0.01 * torch.randn(2, 3, 1, generator=g)    # scores q k near -2e4,
    far_k = -141.4 + 0.01 * torch.randn(2, 5, 1, generator=g)   # a few units apart
    return [
        ("queries (2, 3, 16), keys (2, 5, 16), values (2, 5, 6), valid_lens None",
         q, k, v, None, 1e-5),
        ("the same tensors with valid_lens [2, 4]", q, k, v, torch.tensor([2, 4]), 1e-5),
        ("the same tensors with per-query valid_lens [[1, 3, 5], [2, 2, 4]]",
         q, k, v, torch.tensor([[1, 3, 5], [2, 2, 4]]), 1e-5),
        ("the same tensors with valid_lens [3, 0] (example 1 has no valid key)",
         q, k, v, torch.tensor([3, 0]), 1e-5),
        ("a batch of one: queries (1, 4, 8), keys (1, 6, 8), values (1, 6, 3), valid_lens [4]",
         *qkv(1, 4, 6, 8, 3), torch.tensor([4]), 1e-5),
        ("a batch of one with one query: queries (1, 1, 8), keys (1, 5, 8), values (1, 5, 2), "
         "valid_lens None", *qkv(1, 1, 5, 8, 2), None, 1e-5),
        ("queries (2, 3, 1), keys (2, 5, 1) with every score near -2e4, values (2, 5, 4), "
         "valid_lens [2, 4]", far_q, far_k, torch.randn(2, 5, 4, generator=g),
         torch.tensor([2, 4]), 5e-3),
        ("queries and keys 30 * randn(2, 3, 4) and (2, 5, 4) (scores up to about 1000), "
         "values (2, 5, 3), valid_lens [5, 3]", *qkv(2, 3, 5, 4, 3, scale=30.0)[:2],
         torch.randn(2, 5, 3, generator=g), torch.tensor([5, 3]), 1e-3),
        ("queries (2, 3, 8), keys (2, 60, 8), values (2, 60, 5), valid_lens [55, 9]",
         *qkv(2, 3, 60, 8, 5), torch.tensor([55, 9]), 1e-5),
        ("float16 queries (2, 3, 8), keys (2, 4, 8), values (2, 4, 3), valid_lens [3, 0]",
         *qkv(2, 3, 4, 8, 3, dtype=torch.half), torch.tensor([3, 0]), 5e-3),
        ("queries (2, 3, 4), keys (2, 5, 4) whose padded keys score about 1.8e4 (higher than "
         "every valid key), values (2, 5, 5) (as many values as keys, value size 5), "
         "valid_lens [3, 2]", *_padding_wins(g), torch.tensor([3, 2]), 1e-5),
        *_attention_cases_round5(),
    ]


def _attention_cases_round5():
    """Cases added after red-team round 5 (their own generator: the data above stays)."""
    g = torch.Generator().manual_seed(45)

    def qkv(dtype=torch.float32):
        return [torch.randn(2, n, dd, generator=g).to(dtype) for n, dd in ((3, 8), (5, 8),
                                                                           (5, 4))]

    def transposed(b, n, dd):
        return torch.randn(b, dd, n, generator=g).transpose(1, 2)

    return [
        ("float64 queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens [2, 4]",
         *qkv(torch.float64), torch.tensor([2, 4]), 1e-7),
        ("float64 queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens None",
         *qkv(torch.float64), None, 1e-7),
        ("float16 queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens None",
         *qkv(torch.half), None, 5e-3),
        ("queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens [7, 2] (a length "
         "above the 5 keys: every key is valid)", *qkv(), torch.tensor([7, 2]), 1e-5),
        ("queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens [[9, 1, 5], "
         "[0, 6, 3]] (lengths above the 5 keys)", *qkv(),
         torch.tensor([[9, 1, 5], [0, 6, 3]]), 1e-5),
        ("queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4) that are transposed views, "
         "not contiguous in memory (torch.randn(2, 8, 3).transpose(1, 2), as head "
         "splitting gives), valid_lens [2, 4]", transposed(2, 3, 8), transposed(2, 5, 8),
         transposed(2, 5, 4), torch.tensor([2, 4]), 1e-5),
        *_attention_cases_round8(),
    ]


def _attention_cases_round8():
    """Cases added after red-team round 8: as many queries as examples with one length per
    example (a test on the shape reads it as per-query lengths), and values of the keys'
    shape that are not the keys (the value size is d)."""
    g = torch.Generator().manual_seed(408)
    return [
        ("queries (2, 2, 4), keys (2, 5, 4), values (2, 5, 3), valid_lens [3, 1] (one length "
         "per example, and as many queries as examples)",
         *[torch.randn(2, n, dd, generator=g) for n, dd in ((2, 4), (5, 4), (5, 3))],
         torch.tensor([3, 1]), 1e-5),
        ("queries (2, 3, 4), keys (2, 5, 4), values (2, 5, 4) (the value size is d, and the "
         "values are not the keys), valid_lens None",
         *[torch.randn(2, n, 4, generator=g) for n in (3, 5, 5)], None, 1e-5),
        *_attention_cases_round9(),
    ]


def _attention_cases_round9():
    """Cases added after red-team round 9: large scores without a mask (a None branch of its
    own needs the max shift too), new queries, keys and values of the first case's shapes
    with the first case's valid_lens (weights kept from an earlier call of the same shapes
    and lengths), and a batch of two with more than 3 queries."""
    g = torch.Generator().manual_seed(409)
    first = ((3, 16), (5, 16), (5, 6))
    return [
        ("queries and keys 30 * randn(2, 3, 4) and (2, 5, 4) (scores up to about 1000), "
         "values (2, 5, 3), valid_lens None",
         *[30 * torch.randn(2, n, 4, generator=g) for n in (3, 5)],
         torch.randn(2, 5, 3, generator=g), None, 1e-3),
        ("new queries (2, 3, 16), keys (2, 5, 16), values (2, 5, 6) (the first case's "
         "shapes), valid_lens None (as in the first case)",
         *[torch.randn(2, n, dd, generator=g) for n, dd in first], None, 1e-5),
        ("queries (2, 6, 8), keys (2, 7, 8), values (2, 7, 3) (a batch of two with 6 "
         "queries), valid_lens [[7, 1, 3, 0, 5, 2], [4, 6, 7, 2, 1, 3]]",
         *[torch.randn(2, n, dd, generator=g) for n, dd in ((6, 8), (7, 8), (7, 3))],
         torch.tensor([[7, 1, 3, 0, 5, 2], [4, 6, 7, 2, 1, 3]]), 1e-5),
        *_attention_cases_round10(),
    ]


def _attention_cases_round10():
    """Cases added after red-team round 10: one key (every weight is 1, or 0 without a valid
    key; a shortcut that returns values.expand(...) gives the values' own memory back)."""
    g = torch.Generator().manual_seed(410)
    return [
        ("queries (2, 1, 4), keys (2, 1, 4), values (2, 1, 3) (one query, one key), "
         "valid_lens None", *[torch.randn(2, 1, dd, generator=g) for dd in (4, 4, 3)],
         None, 1e-5),
        ("queries (2, 3, 4), keys (2, 1, 4), values (2, 1, 3) (one key), valid_lens [1, 0]",
         *[torch.randn(2, n, dd, generator=g) for n, dd in ((3, 4), (1, 4), (1, 3))],
         torch.tensor([1, 0]), 1e-5),
        *_attention_cases_round11(),
    ]


def _beyond_half_qkv(dtype, g):
    """Queries (2, 3, 1) of +-1 and +-2, keys (2, 5, 1) near 1e5 (multiples of 1/4
    apart), values (2, 5, 3): d = 1, so every score, 1e5 to 2e5 in size and beyond float16's
    range, is exact in float32 and a few units from its row's others."""
    signs = torch.tensor([[1.0, -1.0, 2.0], [-2.0, 1.0, -1.0]])
    keys = 1e5 + torch.randint(-8, 9, (2, 5, 1), generator=g) / 4
    values = torch.randn(2, 5, 3, generator=g)
    return [t.to(dtype) for t in (signs[..., None], keys, values)]


def _half_long_qkv():
    """float16 queries (1, 2, 4) of ones, keys (1, 4100, 4) of -4 (score -8) but for keys
    2048 and 4099 (zeros: score 0, about 0.6 and 0.3 of the weight), values zero but for
    those two keys: exact scores, and an output that the weights of keys 2048 and 4099
    decide."""
    q = torch.ones(1, 2, 4)
    k = torch.full((1, 4100, 4), -4.0)
    v = torch.zeros(1, 4100, 3)
    k[0, [2048, 4099]] = 0.0
    v[0, 2048] = torch.tensor([1.0, -1.0, 0.5])
    v[0, 4099] = torch.tensor([-1.0, 2.0, 1.0])
    return [t.half() for t in (q, k, v)]


def _attention_cases_round11():
    """Cases added after red-team round 11: float32 and float64 scores beyond float16's
    range (scores clamped to +-6e4 become equal), and float16 with lengths above 2048 (mask
    positions or lengths cast to float16 round: 2049 -> 2048, 4099 -> 4100)."""
    g = torch.Generator().manual_seed(411)
    return [
        # float32 is 1/128 apart near 1e5: a softmax that rounds a number of that size (a
        # log-sum-exp, accepted on the other cases) errs by up to about 1e-2 here
        ("float32 queries (2, 3, 1), keys (2, 5, 1), values (2, 5, 3) with scores of 1e5 "
         "to 2e5 in size (beyond float16's range, a few units apart), valid_lens "
         "[[5, 3, 4], [2, 5, 3]]", *_beyond_half_qkv(torch.float32, g),
         torch.tensor([[5, 3, 4], [2, 5, 3]]), 1e-2),
        ("float64 queries (2, 3, 1), keys (2, 5, 1), values (2, 5, 3) with scores of 1e5 "
         "to 2e5 in size (beyond float16's range, a few units apart), valid_lens [4, 5]",
         *_beyond_half_qkv(torch.float64, g), torch.tensor([4, 5]), 1e-7),
        ("float16 queries (1, 2, 4), keys (1, 4100, 4), values (1, 4100, 3) whose keys "
         "2048 and 4099 take most of the weight, valid_lens [[2049, 4100]] (lengths above "
         "2048)",
         *_half_long_qkv(), torch.tensor([[2049, 4100]]), 5e-3),
        *_attention_cases_round13(),
    ]


def _attention_cases_round13():
    """Cases added after red-team round 13: lengths above num_keys beyond int16's and
    int32's range (cast to torch.int16, 65536 wraps to 0; to torch.int32, 2**32 + 2 wraps
    to 2)."""
    g = torch.Generator().manual_seed(413)
    return [
        ("queries (2, 2, 4), keys (2, 6, 4), values (2, 6, 3), valid_lens [[4294967298, "
         "65536], [40000, 3]] (lengths above the 6 keys, beyond the range of int16 and "
         "int32: every key valid but for the last query)",
         *[torch.randn(2, n, dd, generator=g) for n, dd in ((2, 4), (6, 4), (6, 3))],
         torch.tensor([[2 ** 32 + 2, 2 ** 16], [40000, 3]]), 1e-5),
    ]


def _padding_wins(g):
    """Queries near 3, valid keys random, padded keys (positions 2 and up) 3000: a padded
    key scores about 1.8e4 after the scaling, so an additive -1e4 mask still lets it win."""
    q = 3.0 + 0.1 * torch.randn(2, 3, 4, generator=g)
    k = torch.randn(2, 5, 4, generator=g)
    k[0, 3:] = 3000.0
    k[1, 2:] = 3000.0
    return q, k, torch.randn(2, 5, 5, generator=g)


def _scale_mistakes(q, k, v):
    """(kind, scale, why): the scales a learner may divide the scores by instead of sqrt(d),
    leaving out any that equals sqrt(d) on these sizes."""
    d, n_q, n_k, d_v = q.shape[-1], q.shape[1], k.shape[1], v.shape[-1]
    mistakes = [
        ("none", 1.0, "the scores are not scaled: divide Q K^T by sqrt(d)."),
        ("d", float(d), "the scores are divided by d: divide by sqrt(d), the square root of "
                        "the query size."),
        ("half", d / 2, f"the scores are divided by d / 2 = {d / 2:g}: in Python d ** 1/2 is "
                        "(d ** 1) / 2; write d ** 0.5 or math.sqrt(d)."),
        ("twice", 2.0 * d, f"the scores are divided by 2 d = {2 * d}: in Python "
                           "scores / d ** 1/2 is (scores / d) / 2; write scores / d ** 0.5 or "
                           "scores / math.sqrt(d)."),
        ("isqrt", float(math.isqrt(d)),
         f"the scores are divided by sqrt(d) rounded down to an integer, {math.isqrt(d)} "
         f"for d = {d} (int(math.sqrt(d)) or math.isqrt(d) do that): divide by "
         "math.sqrt(d), a float."),
    ]
    for kind, size, what in (("d_v", d_v, "the value size"), ("m", n_q, "the number of queries"),
                             ("n", n_k, "the number of keys")):
        mistakes.append((kind, math.sqrt(size), f"the scale uses {what}: d is the size of the "
                                                "queries and keys (their last axis)."))
    return [m for m in mistakes if not math.isclose(m[1], math.sqrt(d))]


# Sizes on which no two scale mistakes give the same scale (sqrt(12) = 3.46; 1, 12, 6, 24,
# 3, sqrt(3), sqrt(5), sqrt(7)): where a case cannot tell two of them apart, this one does.
_SCALE_PROBE = "queries (1, 5, 12), keys (1, 7, 12), values (1, 7, 3), valid_lens None"


def _scale_probe():
    g = torch.Generator().manual_seed(46)
    return [torch.randn(1, n, dd, generator=g) for n, dd in ((5, 12), (7, 12), (7, 3))]


def _diagnose_scale(fn, out, q, k, v, valid_lens, atol, case):
    """Fail naming the scale the output was computed with, if it is one of the usual
    mistakes; a scale shared by two mistakes on this case is told apart on _SCALE_PROBE."""
    __tracebackhide__ = True
    found = [(kind, scale, why) for kind, scale, why in _scale_mistakes(q, k, v)
             if is_close(out, _attend(q, k, v, valid_lens, scale=scale), atol=atol, rtol=1e-3)]
    if not found:
        return
    if len(found) == 1:
        fail(f"the output is wrong on {case}: {found[0][2]}")
    probe = _scale_probe()
    seen = call(fn, *[t.clone() for t in probe], None, name="scaled_dot_product_attention",
                case=_SCALE_PROBE, hint_on_error=_sdpa_error_hint)
    kinds = [kind for kind, scale, why in _scale_mistakes(*probe)
             if isinstance(seen, torch.Tensor) and seen.is_floating_point()
             and is_close(seen, _attend(*probe, None, scale=scale), atol=1e-5, rtol=1e-3)]
    named = [why for kind, scale, why in found if kind in kinds]
    if len(named) == 1:
        fail(f"the output is wrong on {case}: {named[0]}")
    d = q.shape[-1]
    scales = " or ".join(dict.fromkeys(f"{scale:.4g}" for kind, scale, why in found))
    fail(f"the output is wrong on {case}: the scores are divided by {scales}, not by "
         f"sqrt(d) = sqrt({d}) = {math.sqrt(d):.4g}.",
         "d is the size of the queries and keys, queries.shape[-1]: divide Q K^T by "
         "math.sqrt(d).")


def _masks_queries(out, q, k, v, valid_lens, atol):
    """Whether valid_lens was applied to the queries axis: exactly the queries at positions
    >= valid_len come out all zeros, or they come out as the mean of the values and the
    others as unmasked attention."""
    if valid_lens is None or valid_lens.dim() != 1:
        return False
    n_q = q.shape[1]
    past = torch.arange(n_q) >= valid_lens[:, None]                 # (batch, queries)
    if torch.equal(past, (valid_lens == 0)[:, None].expand(-1, n_q)):
        return False            # every length is 0 or >= num_queries: nothing to tell apart
    if torch.equal((out == 0).all(dim=-1), past):
        return True
    plain = _attend(q, k, v, None)
    mean = v.double().mean(dim=1, keepdim=True).expand_as(plain)
    return any(is_close(out, torch.where(past[..., None], other, plain), atol=atol, rtol=1e-3)
               for other in (torch.zeros_like(plain), mean))


# A 2-D valid_lens reduced to one length per example; the probe's lengths tell the three
# apart in both examples (first 3 and 4, smallest 1 and 2, largest 5).
_REDUCTIONS = [(lambda lens: lens[:, 0], "its first query's length"),
               (lambda lens: lens.amin(dim=1), "the smallest of its per-query lengths"),
               (lambda lens: lens.amax(dim=1), "the largest of its per-query lengths")]
_LENS_PROBE = ("queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), per-query valid_lens "
               "[[3, 1, 5], [4, 5, 2]]")


def _lens_probe():
    g = torch.Generator().manual_seed(47)
    return [torch.randn(2, n, dd, generator=g) for n, dd in ((3, 8), (5, 8), (5, 4))] + [
        torch.tensor([[3, 1, 5], [4, 5, 2]])]


_EARLIER_QKV_HINT = ("compute everything from this call's queries, keys and values: inputs "
                     "of the same shape are not the same inputs, and a tensor changed in "
                     "place is still the same object (functools.lru_cache and dicts tell "
                     "tensors apart by identity, not by value).")


def _stale_qkv(out, tensors, valid_lens, earlier, atol, case):
    """Fail if the output is what an earlier call's queries, keys or values of the same
    shape and dtype give: the function kept something computed in an earlier call."""
    __tracebackhide__ = True
    names = ("queries", "keys", "values")
    for old in earlier:
        same = [i for i in range(3) if old[i].shape == tensors[i].shape
                and old[i].dtype == tensors[i].dtype and not torch.equal(old[i], tensors[i])]
        for subset in ((1,), (2,), (1, 2), (0,), (0, 1), (0, 2), (0, 1, 2)):
            if not set(subset) <= set(same):
                continue
            mixed = [old[i] if i in subset else t for i, t in enumerate(tensors)]
            if is_close(out, _attend(*mixed, valid_lens), atol=atol, rtol=1e-3):
                which = " and ".join(names[i] for i in subset)
                fail(f"the output is wrong on {case}: it is what an earlier call's {which} "
                     f"(of the same shape) give: your function keeps something computed in "
                     "an earlier call (a cache keyed by shape or dtype, a default argument, "
                     "a global).", _EARLIER_QKV_HINT)


def _stale_scale(out, q, k, v, valid_lens, earlier, atol, case):
    """Fail if the scores are divided by sqrt(d) of an earlier call's d (added after red-team
    round 10: a scale computed at the first call and kept, which d ** 1/2 was blamed for
    where d/2 happened to equal it)."""
    __tracebackhide__ = True
    d = q.shape[-1]
    for old in dict.fromkeys(t[0].shape[-1] for t in earlier):
        if old != d and is_close(out, _attend(q, k, v, valid_lens, scale=math.sqrt(old)),
                                 atol=atol, rtol=1e-3):
            fail(f"the output is wrong on {case}: the scores are divided by "
                 f"{math.sqrt(old):.4g} = sqrt({old}), the scale of an earlier call (queries "
                 f"of size d = {old}), not by sqrt({d}) = {math.sqrt(d):.4g} for this call's "
                 f"queries: your function keeps the scale from an earlier call (a global, a "
                 "cache, a default argument).",
                 "compute d = queries.shape[-1] and math.sqrt(d) in every call, from this "
                 "call's queries.")


def _sdpa_changed_in_place(fn):
    """Call fn twice on the same tensors, changing them in place between the calls (as a
    training step changes a parameter): the second output must be that of the new values."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(48)
    tensors = [torch.randn(2, n, dd, generator=g) for n, dd in ((3, 8), (5, 8), (5, 4))]
    lens = torch.tensor([[2, 5, 1], [4, 0, 3]])
    first_case = ("queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), valid_lens "
                  "[[2, 5, 1], [4, 0, 3]]")
    first = call(fn, *tensors, lens, name="scaled_dot_product_attention", case=first_case,
                 hint_on_error=_sdpa_error_hint)
    expect_close(first, _attend(*tensors, lens), what="the output", case=first_case,
                 atol=1e-5, rtol=1e-3)
    old = [t.clone() for t in tensors] + [lens.clone()]
    for t in tensors:
        t.copy_(torch.randn(t.shape, generator=g))
    lens.copy_(torch.tensor([[4, 1, 3], [0, 5, 2]]))
    case = ("a second call on the same queries, keys, values and valid_lens tensors, "
            "changed in place since the first call (new values, valid_lens [[4, 1, 3], "
            "[0, 5, 2]])")
    out = call(fn, *tensors, lens, name="scaled_dot_product_attention", case=case,
               hint_on_error=_sdpa_error_hint)
    expect_tensor(out, (2, 3, 4), dtype=torch.float32, what="the output", case=case)
    new = tensors + [lens]
    if is_close(out, _attend(*new), atol=1e-5, rtol=1e-3):
        return
    names = ("queries", "keys", "values", "valid_lens")
    for size in (1, 2, 3, 4):
        for subset in itertools.combinations(range(4), size):
            mixed = [old[i] if i in subset else t for i, t in enumerate(new)]
            if is_close(out, _attend(*mixed), atol=1e-5, rtol=1e-3):
                which = " and ".join(names[i] for i in subset)
                fail(f"the output is wrong on {case}: it is what the first call's {which} "
                     "give: your result depends on an earlier call (a cache keyed on the "
                     "tensors, such as functools.lru_cache, which tells tensors apart by "
                     "identity, not by value).", _EARLIER_QKV_HINT)
    expect_close(out, _attend(*new), what="the output", case=case, atol=1e-5, rtol=1e-3,
                 hint="compute everything from this call's inputs: the output must not "
                      "depend on an earlier call.")


_MASK_HINT = (
    "the output was right on these same tensors with other valid_lens (or none), so the "
    "fault lies in the mask: a 1-D valid_lens (batch,) gives example b's queries the length "
    "valid_lens[b] (valid_lens[:, None, None]), a 2-D one (batch, num_queries) gives query i "
    "of example b the length valid_lens[b, i] (valid_lens[..., None]); compare them with the "
    "key positions torch.arange(num_keys), and replace the masked scores with "
    "masked_fill(~mask, torch.finfo(scores.dtype).min) (a masked score multiplied by 0 is "
    "0, which still gets a weight).")


def _diagnose_round8(out, q, k, v, valid_lens, atol, case):
    """Name the mistakes red-team round 8 found: the values used for the scores, one length
    per example read as per-query lengths, example 0's lengths used for the whole batch."""
    __tracebackhide__ = True
    if v.shape == k.shape and not torch.equal(v, k) and any(
            is_close(out, _attend(q, keys, values, valid_lens), atol=atol, rtol=1e-3)
            for keys, values in ((v, v), (v, k))):
        fail(f"the output is wrong on {case}: the scores are computed with the values, "
             "not the keys (the values here have the keys' shape).",
             "scores = Q K^T / sqrt(d) with the keys; the weights then multiply the values.")
    if valid_lens is None or q.shape[0] == 1:
        return
    b, m = q.shape[:2]
    if valid_lens.dim() == 1 and b == m and is_close(
            out, _attend(q, k, v, valid_lens[None, :].expand(b, m)), atol=atol, rtol=1e-3):
        fail(f"the output is wrong on {case}: the 1-D valid_lens is read as one length per "
             "query (query i uses valid_lens[i] in every example).",
             "a 1-D valid_lens (batch,) always holds one length per example, also when "
             "batch == num_queries: tell the two forms apart by valid_lens.dim(), not by "
             "their size, and broadcast a 1-D one as valid_lens[:, None, None].")
    first = valid_lens[:1].expand_as(valid_lens)
    if not torch.equal(first, valid_lens) and is_close(
            out, _attend(q, k, v, first), atol=atol, rtol=1e-3):
        fail(f"the output is wrong on {case}: every example uses the lengths of example 0 "
             "(valid_lens[0]).", "example b uses its own lengths, valid_lens[b]: broadcast "
                                 "the whole valid_lens against the key positions.")


def _attend_keep(q, k, v, keep):
    """softmax(Q K^T / sqrt(d)) V in float64 with the keys kept where `keep` (batch,
    queries, keys) holds."""
    scores = q.double() @ k.double().transpose(1, 2) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1)
    return (weights * keep) @ v.double()


def _diagnose_round11(out, q, k, v, valid_lens, atol, case):
    """Name the mistakes red-team round 11 found: scores clamped into float16's range for
    every dtype, key positions or lengths compared in float16 (2049 rounds to 2048), and a
    shortcut for one key that ignores valid_lens."""
    __tracebackhide__ = True
    top = float((q.double() @ k.double().transpose(1, 2)).abs().max()) \
        / math.sqrt(q.shape[-1])
    found = [c for c in _CLAMPS if top > c and is_close(
        out, _attend(q, k, v, valid_lens, clamp=c), atol=atol, rtol=1e-3)]
    if found:
        why, hint = _clamp_hint(found)
        fail(f"the output is wrong on {case}: {why}", hint)
    if q.dtype == torch.half and valid_lens is not None and int(valid_lens.max()) > 2048:
        lens = _lens_2d(valid_lens, (q.shape[0], q.shape[1], k.shape[1]))[..., None]
        positions = torch.arange(k.shape[1])
        for keep in (positions.half() < lens.half(), positions < lens.half().long()):
            if not torch.equal(keep, positions < lens) and is_close(
                    out, _attend_keep(q, k, v, keep), atol=atol, rtol=1e-3):
                fail(f"the output is wrong on {case}: the mask compares positions or "
                     "lengths in float16, which holds the integers exactly only up to 2048 "
                     "(2049 rounds to 2048, 4099 to 4100), so a valid key is masked.",
                     "compare integer positions, torch.arange(num_keys), with the integer "
                     "valid_lens; do not cast the lengths or the positions to the scores' "
                     "dtype.")
    if k.shape[1] == 1 and valid_lens is not None and bool((valid_lens == 0).any()) \
            and is_close(out, _attend(q, k, v, None), atol=atol, rtol=1e-3):
        fail(f"the output is wrong on {case}: every query got the value of the one key, "
             "also a query whose valid_len is 0: a shortcut for one key ignores "
             "valid_lens.",
             "with one key every weight is 1, except for a query with no valid key "
             "(valid_len 0), whose weights, and output, are all zeros: a shortcut must "
             "still apply valid_lens (multiply by the mask), or compute one key the way "
             "you compute many.")


_LENS_STATE_PROBE = ("queries (3, 2, 5), keys (3, 6, 5), values (3, 6, 2) (shapes no "
                     "other case has), valid_lens {}")


def _masks_on_probe(fn, per_query):
    """Whether fn masks right on shapes that no case has (a cache keyed by the shapes
    cannot hold them), with per-query (2-D) lengths or one per example."""
    g = torch.Generator().manual_seed(412)
    q, k, v = (torch.randn(3, n, dd, generator=g) for n, dd in ((2, 5), (6, 5), (6, 2)))
    lens = torch.tensor([[1, 3], [4, 6], [2, 5]] if per_query else [1, 4, 2])
    seen = call(fn, q.clone(), k.clone(), v.clone(), lens.clone(),
                name="scaled_dot_product_attention",
                case=_LENS_STATE_PROBE.format(lens.tolist()),
                hint_on_error=_sdpa_error_hint)
    return isinstance(seen, torch.Tensor) and seen.is_floating_point() \
        and tuple(seen.shape) == (3, 2, 2) \
        and is_close(seen, _attend(q, k, v, lens), atol=1e-5, rtol=1e-3)


def _stale_lens_sdpa(fn, out, q, k, v, valid_lens, earlier, atol, case):
    """Fail if the output is what an earlier call's valid_lens give on tensors of these
    shapes (added after red-team round 11: weights cached by the shapes were told
    "valid_lens is ignored"); where that is also the unmasked output, only if fn masks right
    on the probe's new shapes."""
    __tracebackhide__ = True
    for oq, ok, _, old in earlier:
        if oq.shape != q.shape or ok.shape != k.shape or oq.dtype != q.dtype:
            continue
        if (old is None and valid_lens is None) or (
                old is not None and valid_lens is not None and old.shape == valid_lens.shape
                and torch.equal(old, valid_lens)):
            continue
        if not any(is_close(out, _attend(a, b, v, old), atol=atol, rtol=1e-3)
                   for a, b in ((q, k), (oq, ok))):
            continue
        probed = valid_lens is not None and is_close(out, _attend(q, k, v, None),
                                                     atol=atol, rtol=1e-3)
        if probed and not _masks_on_probe(fn, valid_lens.dim() == 2):
            return  # as if valid_lens were ignored, on new shapes too: told below
        given = "valid_lens None" if old is None else f"valid_lens {old.tolist()}"
        fail(f"the output is wrong on {case}: it is what an earlier call on tensors of "
             f"these shapes with {given} gave"
             f"{', while your function masks right on new shapes' if probed else ''}: it "
             "keeps something computed in an earlier call (a cache keyed by the shapes, a "
             "default argument, a global).",
             "keep nothing between calls (no cache or global keyed on the shapes): compute "
             "the scores, the mask and the weights from this call's queries, keys and "
             "valid_lens every time.")


# (keyword arguments of _attend from the keys, why): mistakes other than the scale.
_SDPA_MISTAKES = [
    (lambda k: dict(scale=1.0, after=math.sqrt(k.shape[-1])),
     "the weights, not the scores, are divided by sqrt(d): scale the scores before the "
     "softmax."),
    (lambda k: dict(dim=1), "the softmax runs over the queries: take it over the keys, the "
                            "last axis of the (batch, queries, keys) scores."),
    (lambda k: dict(offset=1), "the mask is off by one: keep keys at positions < valid_len."),
    (lambda k: dict(keys_t=k.reshape(k.shape[0], k.shape[2], k.shape[1])),
     "the keys are reshaped to (batch, d, n), which mixes their entries: transpose them, "
     "keys.transpose(1, 2)."),
    (lambda k: dict(uniform_empty=True),
     "a query with no valid key gets a uniform average of the values; its output should be "
     "all zeros (all its weights are 0): multiply the weights by the mask."),
]


@checker("scaled_dot_product_attention")
def check_scaled_dot_product_attention(fn):
    """Check `fn(queries, keys, values, valid_lens)` -> softmax(Q K^T / sqrt(d)) V, masked, on
    batches of one, huge and large scores (also without valid_lens), float32 and float64
    scores beyond float16's range, 60 keys, float16 (also with 4,100 keys and lengths above
    2048), float64, as many queries as examples, a batch of two with 6 queries, values of
    the keys' shape, new tensors of an earlier call's shapes, one key (the output a new
    tensor, not a view of the values), a second call on the same tensors changed in place,
    and gradients (one key too)."""
    earlier = []  # the (queries, keys, values, valid_lens) of the calls that were right
    for case, q, k, v, valid_lens, atol in _attention_cases():
        given = [q.clone(), k.clone(), v.clone()]
        lens_given = None if valid_lens is None else valid_lens.clone()
        out = call(fn, *given, lens_given, name="scaled_dot_product_attention", case=case,
                   hint_on_error=_sdpa_error_hint)
        _lens_unchanged(lens_given, valid_lens, "scaled_dot_product_attention", case)
        if isinstance(out, tuple):
            fail(f"scaled_dot_product_attention should return only the output tensor, got a "
                 f"tuple of {len(out)} on {case}.")
        shape = (q.shape[0], q.shape[1], v.shape[2])
        if isinstance(out, torch.Tensor) and tuple(out.shape) == shape \
                and out.is_floating_point() and torch.isnan(out).any():
            rows = torch.isnan(out).any(dim=-1)
            lens = _lens_2d(valid_lens, (q.shape[0], q.shape[1], k.shape[1]))
            if bool((lens == 0)[rows].all()):
                fail(f"the output contains NaN on {case}, for the queries with no valid key.",
                     "a query with no valid key must not give NaN: mask with a finite fill "
                     "value (torch.finfo(dtype).min) and zero its weights, as in the "
                     "masked_softmax exercise.")
            fail(f"the output contains NaN on {case}.",
                 "exp() overflows for large scores: use a softmax that subtracts each row's "
                 "maximum (your masked_softmax, or torch.softmax).")
        expect_tensor(out, shape, what="the output", case=case,
                      hint="keep the batch axis, also for a batch of one (no .squeeze())."
                      if q.shape[0] == 1 else None)
        for name, before, after in zip(("queries", "keys", "values"), (q, k, v), given):
            if not torch.equal(before, after):
                fail(f"scaled_dot_product_attention changed `{name}` in place on {case}.")
        expect_new_tensor(out, [(f"`{n}`", n, t) for n, t in
                                zip(("queries", "keys", "values"), given)], case,
                          "return a new tensor, as torch's functions do: with one key every "
                          "weight is 1 (or 0), and torch.bmm(weights, values) computes that "
                          "output too (a shortcut needs .clone()).")
        expect_tensor(out, dtype=q.dtype, what="the output", case=case)
        ref = _attend(q, k, v, valid_lens)
        if is_close(out, ref, atol=atol, rtol=1e-3):
            expect_float64_accuracy(out, ref, case=case)
            earlier.append((q, k, v, valid_lens))
            continue
        _stale_qkv(out, (q, k, v), valid_lens, earlier, atol, case)
        _stale_scale(out, q, k, v, valid_lens, earlier, atol, case)
        _stale_lens_sdpa(fn, out, q, k, v, valid_lens, earlier, atol, case)
        _diagnose_round11(out, q, k, v, valid_lens, atol, case)
        if valid_lens is not None:  # lengths cast to a narrower integer dtype (round 13)
            lens = _lens_2d(valid_lens, (q.shape[0], q.shape[1], k.shape[1]))
            found = _wrap_casts(lens, lambda wrapped: is_close(
                out, _attend(q, k, v, wrapped), atol=atol, rtol=1e-3))
            if found:
                _wrap_fail(found, lens, "the output is", case)
        _diagnose_scale(fn, out, q, k, v, valid_lens, atol, case)
        for kwargs, why in _SDPA_MISTAKES:
            if is_close(out, _attend(q, k, v, valid_lens, **kwargs(k)), atol=atol, rtol=1e-3):
                fail(f"the output is wrong on {case}: {why}")
        if _masks_queries(out, q, k, v, valid_lens, atol):
            fail(f"the output is wrong on {case}: the outputs of the queries at positions "
                 ">= valid_len came out all zeros (or the mean of the values): valid_lens "
                 "masks the queries here, not the keys.",
                 "valid_len counts the valid keys of each query: compare the key positions, "
                 "torch.arange(num_keys) (the last axis of the (batch, queries, keys) "
                 "scores), with valid_lens[:, None, None], so that every query keeps a "
                 "softmax over its first valid_len keys.")
        if q.shape[0] > 1:
            for which, mixed in (("keys", (q, k[:1].expand_as(k), v)),
                                 ("values", (q, k, v[:1].expand_as(v))),
                                 ("keys and values", (q, k[:1].expand_as(k),
                                                      v[:1].expand_as(v)))):
                if is_close(out, _attend(*mixed, valid_lens), atol=atol, rtol=1e-3):
                    fail(f"the output is wrong on {case}: every example of the batch uses "
                         f"the {which} of example 0 (example 0 is right, the others are "
                         "not).", "keep the batch axis: torch.bmm(queries, "
                                  "keys.transpose(1, 2)) pairs example b's queries with "
                                  "example b's keys (keys[0] or a transpose that moves the "
                                  "batch axis mixes them).")
        _diagnose_round8(out, q, k, v, valid_lens, atol, case)
        if valid_lens is not None and valid_lens.dim() == 2:
            found = [how for reduce, how in _REDUCTIONS
                     if is_close(out, _attend(q, k, v, reduce(valid_lens)), atol=atol,
                                 rtol=1e-3)]
            if len(found) > 1:  # these lengths cannot tell them apart: the probe can
                probe = _lens_probe()
                seen = call(fn, *[t.clone() for t in probe], name="scaled_dot_product_"
                            "attention", case=_LENS_PROBE, hint_on_error=_sdpa_error_hint)
                found = [how for reduce, how in _REDUCTIONS
                         if isinstance(seen, torch.Tensor) and seen.is_floating_point()
                         and is_close(seen, _attend(*probe[:3], reduce(probe[3])),
                                      atol=1e-5, rtol=1e-3)] or found
            if found:
                fail(f"the output is wrong on {case}: each example uses {found[0]} for "
                     "every query.",
                     "a 2-D valid_lens of shape (batch, num_queries) gives every query "
                     "its own length: pass it to masked_softmax as it is (compare "
                     "torch.arange(num_keys) with valid_lens[..., None]), without "
                     "reducing it to one length per sequence.")
        if v.shape[1] == v.shape[2] and is_close(out, _attend(q, k, v.transpose(1, 2),
                                                              valid_lens), atol=atol, rtol=1e-3):
            fail(f"the output is wrong on {case}: it is weights @ values.transpose(1, 2), "
                 "which has the right shape only because there are as many values as the "
                 "value size.", "output = weights @ values, with values (batch, n, d_v) as "
                                "they are.")
        if "padded keys score" in case and is_close(out, _additive_mask(q, k, v, valid_lens),
                                                    atol=atol, rtol=1e-3):
            fail(f"the output is wrong on {case}: it is what an additive -1e4 mask gives, "
                 "where the padded keys still win.",
                 "the padded keys score about 1.8e4 here, so adding -1e4 to their scores (or "
                 "filling them with -1e4) leaves them the highest: replace their scores with "
                 "masked_fill(~mask, torch.finfo(scores.dtype).min), as in the "
                 "masked_softmax exercise.")
        if valid_lens is not None and is_close(out, _attend(q, k, v, None), atol=atol,
                                               rtol=1e-3):
            fail(f"the output is wrong on {case}: valid_lens is ignored.",
                 "mask the scores of keys at positions >= valid_len before the softmax.")
        again = call(fn, q.clone(), k.clone(), v.clone(),
                     None if valid_lens is None else valid_lens.clone(),
                     name="scaled_dot_product_attention", case=case)
        if isinstance(again, torch.Tensor) and again.shape == out.shape \
                and not torch.equal(again, out):
            fail(f"the output is wrong on {case}, and two calls on the same inputs give "
                 "different outputs: your function is random.",
                 "dropout with training=True (F.dropout's default) changes the weights at "
                 "random: this function has no dropout; compute softmax(...) V alone.")
        hint = ("output = softmax(Q K^T / sqrt(d), masked) V, with the values (not the keys) "
                "and torch.bmm or @ over the batch.")
        if valid_lens is not None and any(t[0] is q and t[1] is k and t[2] is v
                                          for t in earlier):
            hint = _MASK_HINT  # right on these tensors with other valid_lens
        lens = _lens_2d(valid_lens, (q.shape[0], q.shape[1], k.shape[1]))
        zero = (out == 0).all(dim=-1) & (lens > 0)
        scores = q.double() @ k.double().transpose(1, 2) / math.sqrt(q.shape[-1])
        if zero.any() and scores.abs().max() > 1e4:
            hint = ("every weight of a query that has valid keys came out 0: with scores near "
                    "-2e4, either exp() underflowed (subtract each row's maximum before exp) "
                    "or the fill value lies above the scores (-1e4 > -2e4: fill with "
                    "torch.finfo(scores.dtype).min, as in the masked_softmax exercise).")
        elif zero.any():
            b, i = (int(t) for t in zero.nonzero()[0])
            hint = (f"the output of query {i} of example {b} came out all zeros, although its "
                    f"valid_len is {int(lens[b, i])}: only a query with no valid key "
                    "(valid_len 0) has an all-zero output. Mask the keys at positions >= "
                    "valid_len (the last axis of the scores), each query with its own length.")
        expect_close(out, ref, what="the output", case=case, atol=atol, rtol=1e-3, hint=hint)
    _sdpa_changed_in_place(fn)
    g = torch.Generator().manual_seed(41)
    for lens in (torch.tensor([3, 0]), torch.tensor([[1, 3, 0], [0, 2, 4]])):
        q, k, v = (torch.randn(2, 3, 8, generator=g), torch.randn(2, 5, 8, generator=g),
                   torch.randn(2, 5, 4, generator=g))
        rows = _lens_2d(lens, (2, 3, 5))

        def describe(label, at, rows=rows):
            return "a query with no valid key" if label == "queries" and \
                rows[at[0], at[1]] == 0 else ""
        expect_gradients(lambda a, b, c, lens=lens: fn(a, b, c, lens),
                         lambda a, b, c, lens=lens: _attend(a, b, c, lens),
                         [("queries", q), ("keys", k), ("values", v)],
                         name="scaled_dot_product_attention",
                         case=f"queries (2, 3, 8), keys (2, 5, 8), values (2, 5, 4), "
                              f"valid_lens {lens.tolist()} (gradients)",
                         describe=describe, nan_hint=_NAN_GRAD_HINT)
    # Added after red-team round 10: one key (the gradients of the queries and keys are 0,
    # that of the values sums the outputs' gradients; a shortcut must keep the graph).
    g = torch.Generator().manual_seed(411)
    for lens in (None, torch.tensor([[1, 0, 1], [0, 1, 1]])):
        q, k, v = (torch.randn(2, n, dd, generator=g) for n, dd in ((3, 8), (1, 8), (1, 4)))
        expect_gradients(lambda a, b, c, lens=lens: fn(a, b, c, lens),
                         lambda a, b, c, lens=lens: _attend(a, b, c, lens),
                         [("queries", q), ("keys", k), ("values", v)],
                         name="scaled_dot_product_attention",
                         case=f"queries (2, 3, 8), keys (2, 1, 8), values (2, 1, 4) (one key), "
                              f"valid_lens {None if lens is None else lens.tolist()} "
                              "(gradients)", nan_hint=_NAN_GRAD_HINT)
    _matrix_sdpa(fn)


# -- The condition matrix (issue 12, session 12) ---------------------------------------------
# The checkers above end with the condition matrix (_core.expect_conditions): a few small
# cases run as given, on a second call with other values of the same shapes, non-contiguous,
# expanded (stride 0), in float64, float16 and bfloat16, and (float32 and float64) with the
# scores times 1e5, far beyond float16's range; values and gradients against the float64
# reference. Nothing of STANDARD is dropped: no ruling accepts a fault these cases show.

_BEYOND_HINT = ("a float32 or float64 score may lie far beyond float16's range (+-65504): "
                "do not clamp the scores or fill with a fixed number such as -1e4 or -6e4. "
                "Fill the masked scores with torch.finfo(X.dtype).min and subtract each row's "
                "own maximum (torch.softmax does), which keeps exp() in range in every dtype.")


def _large_lens(g, rows, keys):
    """(1, rows) lengths for the larger case: 0, 1, keys - 1, keys, keys + 101 first, then
    random ones from 0 to keys + 100."""
    lens = torch.randint(0, keys + 101, (1, rows), generator=g)
    lens[0, :5] = torch.tensor([0, 1, keys - 1, keys, keys + 101])
    return lens


_BFLOAT16_HINT = ("bfloat16 has float32's range (up to about 3e38) with fewer digits: "
                  "compute a bfloat16 input in bfloat16 or in float32 (x.float(), then cast "
                  "back), never through float16, which overflows to inf above 65504.")


def _matrix_masked_softmax(fn):
    """masked_softmax under every condition of the matrix."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(312)
    offsets = torch.tensor([[0.0, -1000.0, 1000.0], [1000.0, 0.0, -1000.0]])

    def learner(X, valid_lens):
        with forbidden(_BOOK_MASKED_SOFTMAX, _OWN_MASK):
            return fn(X, valid_lens)

    cases = [
        ("X of shape (2, 3, 5), valid_lens [[1, 3, 5], [2, 0, 4]]",
         (torch.randn(2, 3, 5, generator=g), torch.tensor([[1, 3, 5], [2, 0, 4]]))),
        ("X of shape (2, 3, 1) (one key), valid_lens [1, 0]",
         (torch.randn(2, 3, 1, generator=g), torch.tensor([1, 0]))),
        ("X of shape (2, 3, 4) whose rows lie far apart within one example (near 0, -1000 "
         "and +1000), valid_lens [[4, 3, 2], [2, 4, 3]]",
         (offsets[..., None] + torch.randn(2, 3, 4, generator=g),
          torch.tensor([[4, 3, 2], [2, 4, 3]]))),
        ("X of shape (2, 2, 3), valid_lens None (no mask)",
         (torch.randn(2, 2, 3, generator=g), None)),
    ]
    # Added after red-team round 12: float16 valid scores near -3e4, below a fixed fill
    # such as -1e4 (which then takes the weight), and a float16 case of close scores near
    # +-100 that bfloat16 rounds to one number (a float16 input computed through bfloat16).
    below_fill = tuple(shifted(
        -3e4, (0,), "X minus 3e4 (valid scores near -3e4)",
        "a valid float16 score may lie below -1e4 (float16 reaches -65504): a fixed fill "
        "such as -1e4 then outweighs it. Fill with torch.finfo(X.dtype).min (or -inf, with "
        "fully masked rows set to 0 afterwards).", dtypes=(torch.float16,)))
    close = [("X of shape (1, 2, 4) with close scores near +-100 (100.25 and 99.75: one "
              "number in bfloat16), valid_lens [3]",
              (torch.tensor([[[100.25, 99.75, 96.0, 0.0], [-99.75, -100.25, -104.0, 0.0]]]),
               torch.tensor([3])))]
    hint = ("softmax over the last axis (dim=-1) of the scores, with the keys at positions "
            ">= valid_len left out.")
    expect_conditions(
        learner, _reference_masked_softmax, cases, name="masked_softmax",
        differentiable=(0,),
        conditions=STANDARD + tuple(scaled(1e5, (0,), "X times 1e5", _BEYOND_HINT))
        + below_fill, hint=hint)
    expect_conditions(learner, _reference_masked_softmax, close, name="masked_softmax",
                      differentiable=(0,), conditions=(FLOAT16_NOT_BFLOAT16,), hint=hint)
    # Added after red-team round 13 (the lead's ruling on size-keyed faults): one larger
    # case, above the usual switch points of a "fast path": 67 rows (odd, > 64) of 4,099
    # keys (> 4096), per-row lengths from 0 to above num_keys.
    large = [("X = 3 * randn(1, 67, 4099) (67 rows of 4,099 keys), per-row valid_lens from "
              "0 to 4200", (3 * torch.randn(1, 67, 4099, generator=g), _large_lens(g, 67, 4099)))]
    expect_conditions(
        learner, _reference_masked_softmax, large, name="masked_softmax", differentiable=(0,),
        conditions=(PLAIN, NO_GRAD, FLOAT64, FLOAT16) + tuple(scaled(
            1e5, (0,), "X times 1e5", _BEYOND_HINT, dtypes=(torch.float32,))), hint=hint)
    expect_conditions(learner, _reference_masked_softmax, cases, name="masked_softmax",
                      conditions=WITHOUT_GRAD)


def _far_apart_qkv():
    """Queries (2, 3, 4), keys (2, 4, 4) and values (2, 4, 3) whose score rows lie near 400,
    0 and -400 (query entry 0 is +-800 or 0, key entry 0 is 1), the scores of a row 4 to 24
    apart before the scaling (no ties: times 1e5, one key takes every weight): every entry an
    even integer, so that each score and partial sum, also scaled by 1 / sqrt(4), is exact in
    float16 and bfloat16 (and times 1e5 in float32)."""
    g = torch.Generator().manual_seed(64)  # a seed whose rows have no two scores closer than 4
    q = torch.cat([torch.tensor([[800.0, 0.0, -800.0], [-800.0, 800.0, 0.0]])[..., None],
                   2.0 * torch.randint(-2, 3, (2, 3, 3), generator=g)], dim=-1)
    k = torch.cat([torch.ones(2, 4, 1), 2.0 * torch.randint(-2, 3, (2, 4, 3), generator=g)],
                  dim=-1)
    return q, k, torch.randn(2, 4, 3, generator=g)


def _matrix_sdpa(fn):
    """scaled_dot_product_attention under every condition of the matrix."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(412)

    def qkv(n_q, n_k, d, d_v):
        return tuple(torch.randn(2, n, dd, generator=g) for n, dd in ((n_q, d), (n_k, d),
                                                                      (n_k, d_v)))

    far = ("queries (2, 3, 4), keys (2, 4, 4), values (2, 4, 3) whose score rows lie far "
           "apart within one example (near 400, 0 and -400), valid_lens [[4, 3, 2], "
           "[2, 4, 3]]", (*_far_apart_qkv(), torch.tensor([[4, 3, 2], [2, 4, 3]])))
    cases = [
        ("queries (2, 3, 4), keys (2, 5, 4), values (2, 5, 3), valid_lens [[1, 3, 5], "
         "[2, 0, 4]]", (*qkv(3, 5, 4, 3), torch.tensor([[1, 3, 5], [2, 0, 4]]))),
        ("queries (2, 3, 4), keys (2, 1, 4), values (2, 1, 2) (one key), valid_lens [1, 0]",
         (*qkv(3, 1, 4, 2), torch.tensor([1, 0]))),
        ("queries (2, 2, 3), keys (2, 3, 3), values (2, 3, 2), valid_lens None",
         (*qkv(2, 3, 3, 2), None)),
        # added after red-team round 12: 2-D lengths with batch == num_queries (a square
        # valid_lens: read transposed, it still fits)
        ("queries (2, 2, 4), keys (2, 3, 4), values (2, 3, 2), valid_lens [[1, 3], [2, 1]] "
         "(batch 2 == 2 queries: valid_lens[i, j] is example i, query j)",
         (*qkv(2, 3, 4, 2), torch.tensor([[1, 3], [2, 1]]))),
    ]
    # added after red-team round 12: float16 scores near 100 and 50 (exp overflows without
    # the max shift), the two best one number in bfloat16 (100.25 and 99.75)
    close = [("queries (1, 2, 1) = [1, 0.5], keys (1, 4, 1) = [100.25, 99.75, 96, 0] (d=1: "
              "scores near 100 and 50, the two best one number in bfloat16), values "
              "(1, 4, 2), valid_lens [3]",
              (torch.tensor([[[1.0], [0.5]]]),
               torch.tensor([[[100.25], [99.75], [96.0], [0.0]]]),
               torch.randn(1, 4, 2, generator=g), torch.tensor([3])))]
    conditions = STANDARD + tuple(scaled(
        1e5, (0,), "queries times 1e5 (scores beyond float16's range)", _BEYOND_HINT))
    hint = ("output = softmax(Q K^T / sqrt(d), masked) V, with the values (not the keys) and "
            "torch.bmm or @ over the batch.")
    for chosen, differentiable in ((cases, (0, 1, 2)), ([far], (0, 2))):
        # The keys' gradient on the far-apart rows is the queries' entries (800) times the
        # weights' derivatives: a right float32 log-sum-exp softmax (scores near 400 rounded
        # to 3e-5) errs there by 3e-3, far above float32 noise elsewhere: the keys' gradient
        # is compared on the other cases.
        expect_conditions(fn, lambda q, k, v, lens: _attend(q, k, v, lens), chosen,
                          name="scaled_dot_product_attention", differentiable=differentiable,
                          conditions=conditions, hint=hint)
    # Added after red-team round 13: bfloat16 values of 1e5, beyond float16's range (a
    # bfloat16 input computed through float16 overflows to inf), and one larger case
    # (the lead's ruling on size-keyed faults): 67 queries (odd, > 64), 4,099 keys (> 4096).
    expect_conditions(fn, lambda q, k, v, lens: _attend(q, k, v, lens), cases,
                      name="scaled_dot_product_attention", differentiable=(0, 1, 2),
                      conditions=tuple(scaled(1e5, (2,), "values times 1e5 (beyond "
                                              "float16's range)", _BFLOAT16_HINT,
                                              dtypes=(torch.bfloat16,))), hint=hint)
    large = [("queries (1, 67, 8), keys (1, 4099, 8), values (1, 4099, 3) (67 queries, "
              "4,099 keys), per-query valid_lens from 0 to 4200",
              (*[torch.randn(1, n, dd, generator=g) for n, dd in ((67, 8), (4099, 8),
                                                                   (4099, 3))],
               _large_lens(g, 67, 4099)))]
    expect_conditions(fn, lambda q, k, v, lens: _attend(q, k, v, lens), large,
                      name="scaled_dot_product_attention", differentiable=(0, 1, 2),
                      conditions=(PLAIN, NO_GRAD, FLOAT64, FLOAT16) + tuple(scaled(
                          1e5, (0,), "queries times 1e5 (scores beyond float16's range)",
                          _BEYOND_HINT, dtypes=(torch.float32,))), hint=hint)
    expect_conditions(fn, lambda q, k, v, lens: _attend(q, k, v, lens), close,
                      name="scaled_dot_product_attention", differentiable=(0, 1, 2),
                      conditions=(FLOAT16_NOT_BFLOAT16,), hint=hint)
    expect_conditions(fn, lambda q, k, v, lens: _attend(q, k, v, lens), cases + [far],
                      name="scaled_dot_product_attention", conditions=WITHOUT_GRAD)
