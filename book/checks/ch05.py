"""Checkers for chapter 5's exercises: the reshapes that run all heads in parallel.

The test inputs hold their own coordinates (X[b, t, c] = 10000 b + 100 t + c), so when an
entry lands in the wrong place the message can say where it came from.
"""
import torch

from ._core import INTEGER, NONFINITE, STANDARD, call, checker, expect_conditions, \
    expect_gradients, expect_tensor, fail, view_hint, worst

_CASES = [  # (batch, n, num_hiddens, num_heads): odd sizes, a batch of one, n = 1 and n = 51
    (2, 3, 8, 2), (3, 4, 12, 3), (1, 5, 8, 4), (2, 2, 6, 1), (2, 4, 8, 8), (2, 5, 7, 7),
    (3, 1, 6, 2), (1, 51, 12, 3), (2, 3, 10, 5),
    (9, 67, 12, 3)]  # round 13: a batch above 8 and n above 64 (chunks, "fast paths")


def _reshape_hint(error):
    text = str(error)
    if "float" in text:
        return ("num_hiddens / num_heads is a float: use num_hiddens // num_heads (integer "
                "division), or -1 in reshape.")
    if "invalid for input of size" in text:
        return ("the sizes must come from X and the num_heads argument: p = num_hiddens // "
                "num_heads (or -1 in reshape), not a fixed number.")
    return view_hint(error, "the tensor after permute")


def _coordinates(batch, n, num_hiddens):
    b, t, c = torch.meshgrid(torch.arange(batch), torch.arange(n), torch.arange(num_hiddens),
                             indexing="ij")
    return (10000 * b + 100 * t + c).float()  # (batch, n, num_hiddens)


def _where(value, name="X"):
    value = int(round(float(value)))
    return f"{name}[{value // 10000}, {value % 10000 // 100}, {value % 100}]"


def _split_heads(X, num_heads):  # the reference
    batch, n, num_hiddens = X.shape
    X = X.reshape(batch, n, num_heads, num_hiddens // num_heads)
    return X.permute(0, 2, 1, 3).reshape(batch * num_heads, n, num_hiddens // num_heads)


def _layout_message(out, expected, what, case, explain, name="X"):
    index = tuple(int(i) for i in (out != expected).nonzero()[0])
    return (f"{what} has the right shape but the wrong layout on {case}: at index {index} "
            f"it holds {_where(out[index], name)} but should hold "
            f"{_where(expected[index], name)}. {explain}")


_QKV_RULE = ("Row i of the output must be example i // num_heads, head i % num_heads, and head "
             "h is the slice X[:, :, h*p:(h+1)*p] of the features (p = num_hiddens // num_heads).")
_QKV_HINT = ("split the LAST axis: X.reshape(batch, n, num_heads, p), then move the heads next "
             "to the batch with .permute(0, 2, 1, 3), then .reshape(batch * num_heads, n, p). "
             "Reshaping straight to (batch * num_heads, n, p) mixes positions and features.")


def _shape_hint(shape, expected, names):
    """Say which axis is wrong: `names` are the expected axes' meanings."""
    if len(shape) != len(expected):
        return (f"the result must be {len(expected)}-D, ({', '.join(names)}); yours is "
                f"{len(shape)}-D.")
    wrong = [f"axis {i} ({names[i]}) is {s}, expected {e}"
             for i, (s, e) in enumerate(zip(shape, expected)) if s != e]
    if shape[1:] == expected[1:] and shape[0] < expected[0]:
        wrong.append("rows are missing: a loop over chunks of the batch must keep the last, "
                     "shorter chunk (range(0, batch, chunk), not range(batch // chunk))")
    return "; ".join(wrong) + "."


def _not_contiguous(X):
    """The same values as X, laid out transposed in memory: X.is_contiguous() is False."""
    return X.transpose(-1, -2).contiguous().transpose(-1, -2)


_STRIDED = (" This X is not contiguous (a transposed view: X.is_contiguous() is False), "
            "and your function is right on a contiguous X with the same values: it reads "
            "the memory as if X were contiguous (as_strided, set_, or a view of X's "
            "storage does).")
_STRIDED_HINT = ("use only reshape and permute (or transpose), which follow any strides: "
                 "real inputs are often views, e.g. the output of another permute.")


def _same_shape_cases(shape, output=False):
    """(sizes, how) for calls on one X shape with num_heads 2, 3, 4 and 6 in turn: what is
    computed once per X shape (a cached index) must also depend on num_heads."""
    first = None
    for h in (2, 3, 4, 6):
        if output:  # X is (batch * h, n, p)
            sizes = (shape[0] // h, shape[1], shape[2] * h, h)
        else:  # X is (batch, n, num_hiddens)
            sizes = (*shape, h)
        how = "" if first is None else (
            f" (the same X shape as the call with num_heads={first} before it: a result that "
            "fits that call reuses something computed for it, e.g. an index cached under "
            "X.shape without num_heads)")
        first = first or h
        yield sizes, how


def _inputs(make, float64=False):
    """(sizes, X, how) for every case: contiguous float32 first, then the same values not
    contiguous; with float64=True, two cases in float64 instead.
    `make(batch, n, num_hiddens, num_heads)` builds X."""
    if float64:
        for sizes in (_CASES[0], _CASES[4]):
            yield sizes, make(*sizes).double(), ", in float64"
        return
    for sizes in _CASES:
        yield sizes, make(*sizes), ""
    for sizes in _CASES:
        X = _not_contiguous(make(*sizes))
        if not X.is_contiguous():
            yield sizes, X, ", not contiguous"


def _integer_inputs(make):
    """(sizes, X, how) for two cases in int64: these functions only move entries, so they
    keep any dtype (no arithmetic such as X * 1.0, which makes an integer X float32)."""
    for sizes in (_CASES[0], _CASES[4]):
        yield sizes, make(*sizes).long(), ", in int64 (the functions only move entries: " \
            "any dtype is kept)"


def _changed_values(out, X, what, case):
    """A reshape only moves entries: fail if `out` holds a value X does not hold."""
    new = ~torch.isin(out, X)
    if new.any():
        index = tuple(int(i) for i in new.nonzero()[0])
        value = float(out[index])
        nearest = X.flatten()[(X.flatten() - value).abs().argmin()]
        fail(f"{what} holds at index {index} the value {value:g} on {case}, which is not "
             f"an entry of the input (the nearest is {_where(nearest)} = "
             f"{float(nearest):g}): it must only move the entries, never change them.",
             "keep the input's dtype all the way: a round trip through float16, bfloat16 "
             "or an integer type rounds the values.")


def _arithmetic(fn, X, num_heads, shape, what, case):
    """Fail if `fn` on random values (same shape, seeded) returns values that are not
    entries of its input: a mean or sum of entries can hit another coordinate, not this."""
    g = torch.Generator().manual_seed(55)
    R = torch.randn(X.shape, generator=g).to(X.dtype)
    try:
        out = fn(R, num_heads)
    except Exception:  # the layout message that follows says enough
        return
    if not isinstance(out, torch.Tensor) or out.shape != shape:
        return
    new = ~torch.isin(out, R)
    if new.any():
        index = tuple(int(i) for i in new.nonzero()[0])
        fail(f"{what} computes new values on {case}: with random values in X instead of "
             f"coordinates, at index {index} it holds {float(out[index]):.4g}, which is "
             "not an entry of X (a mean, sum or product of entries): it must only move the "
             "entries, never combine them.",
             "use only reshape and permute (or transpose): no mean, sum, repeat of a "
             "reduced tensor, or arithmetic on the values.")


_NEGATED = ("the two inputs have the same shape and the same first entry, and differ "
            "everywhere else", "X there is -X here")
_PERMUTED = ("the two inputs have the same shape, the same values in another order, so the "
             "same sum and sum of squares", "X here is X there with its positions reversed, "
             "X.flip(1)")


def _second_x(fn, first, second, expected, earlier, num_heads, what, case, how=_NEGATED):
    """Call `fn` on `second`, an X of the same shape, num_heads and dtype as `first` (called
    earlier) that differs from it in every entry but the first (or holds its values in
    another order: `how` says which, for the message): a result that is the earlier
    call's, or a buffer shared by both calls (caught by `call`), fails here."""
    out = call(fn, second, num_heads, name=what.split("(")[0], case=case,
               hint_on_error=_reshape_hint)
    expect_tensor(out, expected.shape, dtype=second.dtype, what=what, case=case)
    if torch.equal(out, expected):
        return
    if torch.equal(out, earlier):
        fail(f"{what} on {case} returns its result of an earlier call, on {first}: "
             f"{how[0]}.",
             "compute the result from the whole input at every call: a result kept from an "
             "earlier call (a memo keyed on the shape, num_heads, a few entries or a "
             "checksum such as the sum) is stale as soon as the values change.")
    where, want, got, _ = worst(out, expected)
    fail(f"{what} is wrong on {case}: at index {where} expected {want:g}, got {got:g}, "
         f"although it was right on {first}, which has the same shape ({how[1]}): the "
         "result must depend only on this call's X and num_heads.",
         "compute the result from the whole input at every call, with no state kept "
         "between calls.")


_HEAD_MAJOR = ("The rows are ordered head by head (row i * batch + b holds head i of "
               "example b), not example by example.")
_HEAD_MAJOR_HINT = ("keep the batch axis first: .permute(0, 2, 1, 3) on (batch, n, "
                    "num_heads, p) gives (batch, num_heads, n, p), so that the reshape to "
                    "(batch * num_heads, n, p) puts the heads of one example together. "
                    "permute(2, 0, 1, 3), or splitting and concatenating along the batch, "
                    "orders them head by head.")


@checker("transpose_qkv")
def check_transpose_qkv(fn):
    """Check `fn(X, num_heads)`: (batch, n, num_hiddens) -> (batch * num_heads, n, p), on odd
    sizes, a batch of one, n = 1 and n = 51, on inputs that are not contiguous, on float64
    and int64 inputs (the dtype is kept), and its gradient."""
    def one(sizes, X, how):
        batch, n, num_hiddens, num_heads = sizes
        p = num_hiddens // num_heads
        case = f"X of shape ({batch}, {n}, {num_hiddens}) with num_heads={num_heads}{how}"
        before = X.clone()
        out = call(fn, X, num_heads, name="transpose_qkv", case=case,
                   hint_on_error=_reshape_hint)
        expect_tensor(out, None, what="transpose_qkv(X, num_heads)", case=case)
        if tuple(out.shape) != (batch * num_heads, n, p):
            fail(f"transpose_qkv(X, num_heads) has shape {tuple(out.shape)} on {case}; expected "
                 f"(batch * num_heads, n, num_hiddens // num_heads) = {(batch * num_heads, n, p)}.",
                 _shape_hint(tuple(out.shape), (batch * num_heads, n, p),
                             ("batch * num_heads", "n", "num_hiddens // num_heads"))
                 + " Fold the heads into the batch axis, and use the num_heads argument "
                 "rather than a fixed number.")
        if not torch.equal(X, before):
            fail(f"transpose_qkv changed its input in place on {case}.")
        expected = _split_heads(X, num_heads)
        expect_tensor(out, dtype=X.dtype, what="transpose_qkv(X, num_heads)", case=case)
        if not torch.equal(out, expected):
            _changed_values(out, X, "transpose_qkv(X, num_heads)", case)
            _arithmetic(fn, X, num_heads, out.shape, "transpose_qkv(X, num_heads)", case)
            if how == ", not contiguous":
                fail(_layout_message(out, expected, "transpose_qkv(X, num_heads)", case,
                                     _QKV_RULE + _STRIDED), _STRIDED_HINT)
            head_major = expected.reshape(batch, num_heads, n, p).transpose(0, 1)
            if torch.equal(out, head_major.reshape(batch * num_heads, n, p)):
                fail(_layout_message(out, expected, "transpose_qkv(X, num_heads)", case,
                                     _QKV_RULE + " " + _HEAD_MAJOR), _HEAD_MAJOR_HINT)
            fail(_layout_message(out, expected, "transpose_qkv(X, num_heads)", case, _QKV_RULE),
                 _QKV_HINT)

    def coordinates(batch, n, num_hiddens, num_heads):
        return _coordinates(batch, n, num_hiddens)

    for sizes, X, how in _inputs(coordinates):
        one(sizes, X, how)
    for sizes, how in _same_shape_cases((2, 4, 12)):  # one X shape, num_heads 2, 3, 4, 6
        one(sizes, coordinates(*sizes), how)
    X = coordinates(*_CASES[0])  # -X: the same shape and first entry (0), all else differ
    _second_x(fn, "X of shape (2, 3, 8) with num_heads=2", -X, _split_heads(-X, 2),
              _split_heads(X, 2), 2, "transpose_qkv(X, num_heads)",
              "-X for the X of shape (2, 3, 8) with num_heads=2 (a second X of that shape)")
    with torch.no_grad():  # the same values in another order: a memo keyed on a checksum
        _second_x(fn, "X of shape (2, 3, 8) with num_heads=2", X.flip(1),
                  _split_heads(X.flip(1), 2), _split_heads(X, 2), 2,
                  "transpose_qkv(X, num_heads)", "X.flip(1) for the X of shape (2, 3, 8) "
                  "with num_heads=2 (its positions reversed: the same values in another "
                  "order), under torch.no_grad()", _PERMUTED)
    g = torch.Generator().manual_seed(5)
    X = torch.randn(2, 4, 6, generator=g)
    expect_gradients(lambda x: fn(x, 3), lambda x: _split_heads(x, 3), [("X", X)],
                     name="transpose_qkv",
                     case="X of shape (2, 4, 6) with num_heads=3 (gradient)")
    for sizes, X, how in _inputs(coordinates, float64=True):
        one(sizes, X, how)
    for sizes, X, how in _integer_inputs(coordinates):
        one(sizes, X, how)
    _matrix_qkv(fn)


@checker("transpose_output")
def check_transpose_output(fn):
    """Check `fn(X, num_heads)`: (batch * num_heads, n, p) -> (batch, n, num_heads * p), on odd
    sizes, a batch of one, n = 1 and n = 51, on inputs that are not contiguous, on float64
    and int64 inputs (the dtype is kept), and its gradient."""
    def heads_of(batch, n, num_hiddens, num_heads):  # what transpose_qkv gives, contiguous
        return _split_heads(_coordinates(batch, n, num_hiddens), num_heads).contiguous()

    def one(sizes, heads, how):
        batch, n, num_hiddens, num_heads = sizes
        case = f"X of shape ({batch * num_heads}, {n}, {num_hiddens // num_heads}) with " \
               f"num_heads={num_heads} (batch {batch}){how}"
        X = _coordinates(batch, n, num_hiddens).to(heads.dtype)  # (batch, n, num_hiddens)
        out = call(fn, heads, num_heads, name="transpose_output", case=case,
                   hint_on_error=_reshape_hint)
        expect_tensor(out, None, what="transpose_output(X, num_heads)", case=case)
        if tuple(out.shape) != (batch, n, num_hiddens):
            hint = _shape_hint(tuple(out.shape), (batch, n, num_hiddens),
                               ("batch", "n", "num_heads * p"))
            if out.dim() >= 1 and out.shape[0] == batch * num_heads and num_heads > 1:
                hint += (" The first axis of X is batch * num_heads: the batch is "
                         "X.shape[0] // num_heads.")
            fail(f"transpose_output(X, num_heads) has shape {tuple(out.shape)} on {case}; "
                 f"expected (batch, n, num_heads * p) = {(batch, n, num_hiddens)}.",
                 hint + " Unfold the heads from the batch axis and concatenate them along "
                 "the last axis.")
        expect_tensor(out, dtype=X.dtype, what="transpose_output(X, num_heads)", case=case)
        if not torch.equal(out, X):
            _changed_values(out, X, "transpose_output(X, num_heads)", case)
            explain = ("(Z is the (batch, n, num_hiddens) tensor that transpose_qkv split "
                       "into these heads: transpose_output must give Z back, "
                       "transpose_output(transpose_qkv(Z, h), h) == Z.)")
            _arithmetic(fn, heads, num_heads, out.shape, "transpose_output(X, num_heads)",
                        case)
            if how == ", not contiguous":
                fail(_layout_message(out, X, "transpose_output(X, num_heads)", case,
                                     explain + _STRIDED, name="Z"), _STRIDED_HINT)
            fail(_layout_message(out, X, "transpose_output(X, num_heads)", case, explain,
                                 name="Z"),
                 "reverse the three steps: .reshape(-1, num_heads, n, p), then "
                 ".permute(0, 2, 1, 3), then .reshape(batch, n, num_heads * p).")

    for sizes, heads, how in _inputs(heads_of):
        one(sizes, heads, how)
    for sizes, how in _same_shape_cases((12, 4, 3), output=True):  # X (12, 4, 3), h 2..6
        one(sizes, heads_of(*sizes), how)
    X = heads_of(*_CASES[0])  # -X: the same shape and first entry (0), all else differ
    _second_x(fn, "X of shape (4, 3, 4) with num_heads=2 (batch 2)", -X,
              _merge_heads(-X, 2), _merge_heads(X, 2), 2, "transpose_output(X, num_heads)",
              "-X for the X of shape (4, 3, 4) with num_heads=2 (batch 2) (a second X of "
              "that shape)")
    with torch.no_grad():  # the same values in another order: a memo keyed on a checksum
        _second_x(fn, "X of shape (4, 3, 4) with num_heads=2 (batch 2)", X.flip(1),
                  _merge_heads(X.flip(1), 2), _merge_heads(X, 2), 2,
                  "transpose_output(X, num_heads)", "X.flip(1) for the X of shape (4, 3, 4) "
                  "with num_heads=2 (batch 2) (its positions reversed: the same values in "
                  "another order), under torch.no_grad()", _PERMUTED)
    g = torch.Generator().manual_seed(6)
    X = torch.randn(6, 4, 2, generator=g)
    expect_gradients(lambda x: fn(x, 3), lambda x: _merge_heads(x, 3), [("X", X)],
                     name="transpose_output",
                     case="X of shape (6, 4, 2) with num_heads=3 (batch 2) (gradient)")
    for sizes, heads, how in _inputs(heads_of, float64=True):
        one(sizes, heads, how)
    for sizes, heads, how in _integer_inputs(heads_of):
        one(sizes, heads, how)
    _matrix_output(fn)


# The condition matrix (issue 12, session 12): the small cases below run as given, on a second
# call with other values, non-contiguous, expanded (stride 0), in float64, float16, bfloat16
# and int64 (these functions only move entries: every dtype is kept, and exactly), and with
# +inf and -inf among the entries (round 12: a matmul or einsum against a 0/1 matrix is exact
# on finite numbers, but inf * 0 = NaN spreads one infinite entry over its row), values
# and gradients. No new_tensor: transpose_output may return a view (the course's ruling),
# and transpose_qkv's reshape returns one too where it can (one head, or n = 1).
_MATRIX = (*STANDARD, INTEGER, NONFINITE)
_MATRIX_SIZES = [  # (batch, n, num_hiddens, num_heads, words)
    (2, 3, 6, 3, "the general shape"), (3, 1, 4, 2, "one position (n = 1)"),
    (2, 5, 4, 1, "one head")]


def _matrix_cases(shape):
    """[(words, (X, num_heads))] with seeded random X of `shape(batch, n, num_hiddens,
    num_heads)`: random values, so that any entry out of place shows (int64: 10 X rounded)."""
    g = torch.Generator().manual_seed(512)
    cases = []
    for batch, n, num_hiddens, num_heads, words in _MATRIX_SIZES:
        size = shape(batch, n, num_hiddens, num_heads)
        cases.append((f"{words}: X of shape {size} with num_heads={num_heads}",
                      (torch.randn(size, generator=g), num_heads)))
    return cases


def _matrix_qkv(fn):
    __tracebackhide__ = True
    expect_conditions(fn, _split_heads, _matrix_cases(lambda b, n, d, h: (b, n, d)),
                      name="transpose_qkv", differentiable=(0,), conditions=_MATRIX,
                      hint=_QKV_HINT)


def _matrix_output(fn):
    __tracebackhide__ = True
    expect_conditions(fn, _merge_heads,
                      _matrix_cases(lambda b, n, d, h: (b * h, n, d // h)),
                      name="transpose_output", differentiable=(0,), conditions=_MATRIX,
                      hint="reverse the three steps: .reshape(-1, num_heads, n, p), then "
                           ".permute(0, 2, 1, 3), then .reshape(batch, n, num_heads * p).")


def _merge_heads(X, num_heads):  # the reference of transpose_output
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    return X.permute(0, 2, 1, 3).reshape(X.shape[0], X.shape[2], -1)
