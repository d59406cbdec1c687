"""Checker for appendix A1's exercise: attention computed a chunk of queries at a time."""
import math
import tracemalloc

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..cost import peak_memory
from ._core import EXPANDED, FLOAT16, FLOAT16_NOT_BFLOAT16, FLOAT64, NO_GRAD, NONCONTIGUOUS, \
    PLAIN, REPEAT, STANDARD, call, checker, expect_close, expect_conditions, expect_gradients, \
    expect_new_tensor, expect_tensor, fail, is_close, scaled, view_hint

NEW_TENSOR_HINT = ("return a new tensor, as torch's functions do: with one key every weight is "
                   "1, and softmax(...) @ V computes that output too (a shortcut needs .clone()).")
HINT = ("each chunk of queries gives softmax(Q_chunk K^T / sqrt(d)) V, with d = Q.shape[-1], "
        "the softmax over the keys (the last axis); concatenate the chunks along the queries.")


def _attention(Q, K, V, scale=True, dim=-1, clamp=None):
    """In float64: the reference and its common mistakes."""
    Q, K, V = Q.double(), K.double(), V.double()
    scores = Q @ K.transpose(-2, -1)                     # (batch, queries, keys)
    if scale is True:
        scores = scores / math.sqrt(Q.shape[-1])
    elif scale:
        scores = scores / scale
    if clamp is not None:
        scores = scores.clamp(-clamp, clamp)
    return torch.softmax(scores, dim=dim) @ V            # (batch, queries, value_dim)


# NaN from a hand-written softmax: inf / inf (exp overflows) or 0 / 0 (one maximum for many
# rows: the rows far below it underflow to 0; told apart in round 8).
_NAN_HINT = ("a hand-written softmax gives NaN when exp() overflows (exp(89) is inf in "
             "float32: inf / inf), or when the maximum it subtracts is not the row's own (one "
             "maximum for a whole chunk or batch): the rows whose scores lie far below it "
             "underflow to 0, and 0 / 0 is NaN. Subtract each row's own maximum, "
             "scores.amax(dim=-1, keepdim=True), or use torch.softmax.")

# Clamps a learner may put on the scores "for float16" (added after red-team round 11).
_CLAMPS = (1e4, 3e4, 5e4, 6e4, 65504.0)


def _beyond_half(batch, n_q, n_k, dtype, g):
    """Q (batch, n_q, 1) of +-1 and +-2, K (batch, n_k, 1) of 1e5 + a multiple of 1/4, V
    (batch, n_k, 5): d = 1, so every score, 1e5 to 2e5 in size (beyond float16's range), is
    exact in float32 and a few units from its row's others."""
    signs = torch.tensor([1.0, -1.0, 2.0, -2.0])
    Q = signs[torch.randint(0, 4, (batch, n_q, 1), generator=g)]
    K = 1e5 + torch.randint(-8, 9, (batch, n_k, 1), generator=g) / 4
    V = torch.randn(batch, n_k, 5, generator=g)
    return [t.to(dtype) for t in (Q, K, V)]


def _isqrt_fail(case, d):
    __tracebackhide__ = True
    fail(f"the output is wrong on {case}: the scores are divided by sqrt(d) rounded down to "
         f"an integer, {math.isqrt(d)} for d = {d} (int(math.sqrt(d)) or math.isqrt(d) do "
         "that).", "divide by math.sqrt(d), a float, d = Q.shape[-1].")


# d=8: sqrt(d) rounded down (2) is neither 1 (no scale) nor sqrt(8): where a case's d makes
# the two alike (d = 2 or 3), this call tells them apart (added after red-team round 9).
_ISQRT_PROBE = "batch 1, 5 queries, 6 keys, d=8, chunk_size=4"


def _isqrt_on_probe(fn):
    g = torch.Generator().manual_seed(19)
    Q, K, V = (torch.randn(1, n, dd, generator=g) for n, dd in ((5, 8), (6, 8), (6, 5)))
    seen = call(fn, Q, K, V, 4, name="chunked_attention", case=_ISQRT_PROBE,
                hint_on_error=_chunks_hint)
    return isinstance(seen, torch.Tensor) and seen.is_floating_point() \
        and tuple(seen.shape) == (1, 5, 5) \
        and is_close(seen, _attention(Q, K, V, scale=2.0), atol=1e-5, rtol=1e-4)


def _scale_sizes(Q, K, V, chunk):
    """(size, what): the sizes whose square root a learner may divide the scores by."""
    return [(V.shape[-1], "the value size V.shape[-1]"), (chunk, "the chunk size"),
            (K.shape[1], "the number of keys"), (Q.shape[1], "the number of queries")]


# All five square roots differ here (d = 4, value size 3, chunk size 2, 7 keys, 5 queries):
# where a case has two of these sizes alike (8 queries and 8 keys), this call tells the two
# scale mistakes apart (added after red-team round 10).
_SIZES_PROBE = "batch 1, 5 queries, 7 keys, d=4, value_dim=3, chunk_size=2"


def _scale_sizes_on_probe(fn):
    """The `what` of every size whose square root fn's scores are divided by on the probe."""
    g = torch.Generator().manual_seed(110)
    Q, K, V = (torch.randn(1, n, dd, generator=g) for n, dd in ((5, 4), (7, 4), (7, 3)))
    seen = call(fn, Q, K, V, 2, name="chunked_attention", case=_SIZES_PROBE,
                hint_on_error=_chunks_hint)
    if not (isinstance(seen, torch.Tensor) and seen.is_floating_point()
            and tuple(seen.shape) == (1, 5, 3)):
        return set()
    return {what for size, what in _scale_sizes(Q, K, V, 2)
            if is_close(seen, _attention(Q, K, V, scale=math.sqrt(size)), atol=1e-5,
                        rtol=1e-4)}


def _diagnose(fn, out, ref, Q, K, V, chunk, case, tol):
    __tracebackhide__ = True
    d = Q.shape[-1]
    top = float((Q.double() @ K.double().transpose(1, 2)).abs().max()) / math.sqrt(d)
    found = [c for c in _CLAMPS if top > c and is_close(out, _attention(Q, K, V, clamp=c),
                                                        **tol)]
    if found:
        bound = (f"+-{found[0]:g}" if len(found) == 1 else f"a bound between "
                 f"+-{min(found):g} and +-{max(found):g} (alike on this case)")
        fail(f"the output is wrong on {case}: the scores are clamped to {bound}: scores "
             "beyond the clamp become equal, so 1e5 and 7e4 get the same weight.",
             "a float32 or float64 score may lie far beyond float16's range (+-65504): do "
             "not clamp the scores. torch.softmax subtracts each row's maximum, which "
             "keeps exp() from overflowing in every dtype, and a float16 input holds only "
             "float16 numbers anyway.")
    if math.isqrt(d) not in (1, math.sqrt(d)) and is_close(
            out, _attention(Q, K, V, scale=float(math.isqrt(d))), **tol):
        _isqrt_fail(case, d)
    if V.shape[1] == V.shape[2] and is_close(out, _attention(Q, K, V.transpose(1, 2)),
                                             **tol):
        fail(f"the output is wrong on {case}: it is weights @ V.transpose(1, 2), which has "
             "the right shape only because there are as many keys as the value size.",
             "each chunk's output is weights @ V, with V (batch, num_keys, value_dim) as it "
             "is.")
    found = [(size, what) for size, what in _scale_sizes(Q, K, V, chunk)
             if size != d and is_close(out, _attention(Q, K, V, scale=math.sqrt(size)), **tol)]
    if len(found) > 1:  # sizes alike on this case (8 queries, 8 keys): the probe tells
        on_probe = _scale_sizes_on_probe(fn)
        found = [(size, what) for size, what in found if what in on_probe] or found
    if found:
        fail(f"the output is wrong on {case}: the scores are divided by the square root "
             f"of {' or of '.join(what for size, what in found)}, {found[0][0]}"
             f"{' (alike on this case)' if len(found) > 1 else ''}.",
             "d is the size of the queries and keys, Q.shape[-1].")
    if is_close(out, _attention(Q, K, V, scale=float(d)), **tol):
        fail(f"the output is wrong on {case}: the scores are divided by d, not sqrt(d).")
    by_keys = sum(_attention(Q, K[:, j:j + chunk], V[:, j:j + chunk])
                  for j in range(0, K.shape[1], chunk))
    if is_close(out, by_keys, **tol):
        fail(f"the output is wrong on {case}: the keys are cut into chunks, each with its own "
             "softmax, and the pieces added up.",
             "a query's softmax must see all of its keys: cut the queries into chunks, "
             "Q[:, i:i + chunk_size], and use all of K and V for each.")
    if Q.shape[0] > 1 and bool((out == out[:1]).all()) and not bool((ref == ref[:1]).all()):
        fail(f"the output is wrong on {case}: every example of the batch gets the output of "
             "example 0.", "keep the batch axis: Q[:, i:i + chunk_size], not Q[0].")


def _spied(fn, Q, K, V, chunk):
    """Run fn(Q, K, V, chunk), failing if it hands more than `chunk` queries at once to
    torch's fused attention (which needs little memory, but is not chunking)."""
    fused = torch.nn.functional.scaled_dot_product_attention

    def spy(query, *args, **kwargs):
        __tracebackhide__ = True
        if query.shape[-2] > chunk:
            fail(f"chunked_attention hands {query.shape[-2]} queries at once to "
                 f"scaled_dot_product_attention (chunk_size={chunk}): the exercise asks for "
                 "chunk_size queries at a time.",
                 "loop over Q[:, i:i + chunk_size]; torch's fused kernel may do each chunk.")
        return fused(query, *args, **kwargs)
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        return fn(Q, K, V, chunk)
    finally:
        torch.nn.functional.scaled_dot_product_attention = fused


class _LargestNew(TorchDispatchMode):
    """Records the largest tensor an operation computes: how many numbers the function
    computes at once. Every operation's result counts except a view's (which computes
    nothing): a new tensor, and (added after red-team round 14) what an in-place operation
    or one with out= writes, also into a slice of a buffer kept elsewhere (a module-level
    cache filled through torch.bmm(..., out=buffer[...]))."""

    def __init__(self):
        super().__init__()
        self.numel, self.shape, self.op = 0, None, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if getattr(func, "is_view", False):
            return out
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.shape, self.op = t.numel(), tuple(t.shape), func
        return out


def _traced_peak(run):
    """run() and return the peak of the memory allocated through Python's allocators
    meanwhile (NumPy arrays, Python objects; torch's tensors are not seen), in bytes."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    else:
        tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        run()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def _largest_chunk(fn, Q, K, V, chunk, case, widened=None):
    """Fail if fn computes a tensor of more numbers than one chunk's scores, chunk_size x
    num_keys per example (the exercise's bound; counted, so deterministic)."""
    batch, n_q, n = Q.shape[0], Q.shape[1], K.shape[1]
    largest = _LargestNew()

    def counted(Q, K, V, chunk):
        with largest:  # fn alone: not the check's own comparisons in call()
            return _spied(fn, Q, K, V, chunk)
    out = call(counted, Q, K, V, chunk, name="chunked_attention", case=case,
               hint_on_error=_chunks_hint)
    if largest.numel <= batch * chunk * n:
        return out
    rows = largest.numel / n / batch
    what = f"the scores of {rows:g} queries" if rows == int(rows) else "more than that"
    by_keys = n_q != n and largest.shape[-2:] == (n_q, min(chunk, n))  # every query at once
    if by_keys:
        what = f"the scores of all {n_q} queries for {min(chunk, n)} keys"
    hint = ("use the chunk_size argument itself for the chunks (not a fixed size, not a "
            "multiple of it), and compute the scores of one chunk only, "
            "Q[:, i:i + chunk_size] @ K^T, inside the loop; do not build the whole "
            "(num_queries, num_keys) matrix first.")
    if by_keys:
        hint = ("cut the queries, not the keys: Q[:, i:i + chunk_size] against all of K and "
                "V at each step. A loop over chunks of keys (with an online softmax) holds "
                "the scores of every query at once, num_queries x chunk_size, which is more "
                "than chunk_size x num_keys when there are more queries than keys.")
    elif rows == math.ceil(n_q / chunk) and rows > chunk:
        hint = (f"torch.chunk(Q, chunk_size, dim=1) cuts Q into chunk_size pieces (here "
                f"{chunk} pieces of {rows:g} queries), not into pieces of chunk_size queries: "
                "use Q.split(chunk_size, dim=1), or Q[:, i:i + chunk_size] in a loop.")
    elif rows == chunk * Q.shape[-1]:
        hint = ("a (chunk_size, num_keys, d) product summed over d holds d times the scores: "
                "the matrix product Q[:, i:i + chunk_size] @ K.transpose(1, 2) never stores "
                "it.")
    elif rows == chunk + 1:
        hint = ("a chunk holds chunk_size + 1 queries: Q[:, i:i + chunk_size] already holds "
                "chunk_size queries (the end is excluded), so a slice one longer overlaps "
                "the next chunk; and Q.tensor_split(num_queries // chunk_size, dim=1) cuts "
                "Q into that many nearly equal parts, up to chunk_size + 1 long when "
                "chunk_size does not divide num_queries. Use Q.split(chunk_size, dim=1), or "
                "Q[:, i:i + chunk_size] for i in range(0, num_queries, chunk_size).")
    if largest.op is not None and largest.op._schema.is_mutable:
        hint = ("writing the numbers into memory that already exists (in place, or through "
                "out= into a buffer or a slice of one, kept between calls) computes them all "
                "the same. " + hint[0].upper() + hint[1:])
    if widened:
        hint = (f"float32 inputs of batch 1 without grad were cut into chunks, but {widened} "
                "were not: the bound holds for every input, whatever its dtype, its batch "
                "size or whether it requires grad. Use the same loop over "
                "Q[:, i:i + chunk_size] for all of them. " + hint[0].upper() + hint[1:])
    per = f" ({largest.numel // batch} per example)" if batch > 1 else ""
    fail(f"on {case}, chunked_attention computed a tensor of {largest.numel} numbers at once"
         f"{per} (shape {largest.shape}, from {largest.op}): {what}, more than one chunk's "
         f"scores at once (chunk_size x num_keys = {chunk} x {n} = {chunk * n} per example).",
         hint)


def _counted_widely(fn):
    """The count of _largest_chunk on other inputs than float32, batch 1, without grad
    (added after red-team round 14: one piece for float64, for float16, for batch > 1 or
    when an input requires grad held the whole score matrix there): 200 queries and keys,
    d=8, chunk_size=10, in float64, in float16, with batch 2, and with Q, K and V requiring
    grad (the forward only: the count needs no backward)."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(214)
    X = torch.randn(2, 200, 8, generator=g)
    for what, widened, inputs in (
            ("float64 inputs: batch 1", "float64 inputs", [X[:1].double()] * 3),
            ("float16 inputs: batch 1", "float16 inputs", [X[:1].half()] * 3),
            ("float32 inputs of batch 2", "a batch of 2", [X] * 3),
            ("float32 Q, K and V that require grad: batch 1", "inputs that require grad",
             [X[:1].clone().requires_grad_() for _ in range(3)])):
        _largest_chunk(fn, *inputs, 10, f"{what}, 200 queries and keys, d=8, chunk_size=10",
                       widened)


def _big_right(fn, Q, K, V, chunk, case):
    """The number of values counted and the output right too on a large input (added after
    red-team round 9: a function that computes large inputs another way, in bfloat16 or
    with dropout, was right on every small case)."""
    __tracebackhide__ = True
    out = _largest_chunk(fn, Q, K, V, chunk, case)
    expect_tensor(out, (Q.shape[0], Q.shape[1], V.shape[-1]), dtype=Q.dtype,
                  what="the output", case=case, nan_hint=_NAN_HINT)
    ref = _attention(Q, K, V)
    tol = dict(atol=1e-5, rtol=1e-4)
    if not is_close(out, ref, **tol):
        _diagnose(fn, out, ref, Q, K, V, chunk, case, tol)
    expect_close(out, ref, what="the output", case=case, **tol,
                 hint="the output was right on the small inputs: compute a large input the "
                      "same way, in its own dtype (not bfloat16 or float16 to save time) and "
                      "without dropout. " + HINT[0].upper() + HINT[1:])


def _stale(out, tensors, earlier, tol, case):
    """Fail if the output is what an earlier call's Q, K or V of the same shape and dtype
    give (`earlier` maps (name, shape, dtype) to the first such tensor): the function kept
    something computed from an earlier call."""
    __tracebackhide__ = True
    old = {x: earlier.get((x, t.shape, t.dtype)) for x, t in zip("QKV", tensors)}
    for names in ("K", "V", "KV", "Q", "QK", "QV", "QKV"):
        if any(old[x] is None for x in names):
            continue
        mixed = [old[x] if x in names else t for x, t in zip("QKV", tensors)]
        if is_close(out, _attention(*mixed), **tol):
            fail(f"the output is wrong on {case}: it is what an earlier call's "
                 f"{' and '.join(names)} (of the same shape) give"
                 f"{'s' if len(names) == 1 else ''}: your function keeps something "
                 "computed from an earlier call (a cache keyed by shape or dtype, a default "
                 "argument, a global).",
                 "compute everything from this call's Q, K and V: inputs of the same shape "
                 "are not the same inputs.")


def _bfloat16(fn):
    """bfloat16 inputs (added after red-team round 7): the result keeps the inputs' dtype.
    Checked after the gradients, so that a NumPy round trip (NumPy has no bfloat16) is told
    about its gradients first."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(7)
    Q, K, V = (torch.randn(2, n, dd, generator=g).bfloat16()
               for n, dd in ((9, 4), (7, 4), (7, 5)))
    case = "bfloat16 inputs: batch 2, 9 queries, 7 keys, d=4, chunk_size=4"
    out = call(fn, Q, K, V, 4, name="chunked_attention", case=case,
               hint_on_error=_chunks_hint)
    expect_tensor(out, (2, 9, 5), what="the output", case=case)
    expect_tensor(out, dtype=torch.bfloat16, what="the output", case=case)
    # bfloat16 keeps 8 bits: steps of 1/128 near 1; right solutions err by about 4e-3 here
    expect_close(out, _attention(Q, K, V), what="the output", case=case, atol=4e-2,
                 rtol=2e-2, hint=HINT)


def _changed_in_place(fn):
    """Call fn twice on the same Q, K and V objects, changing them in place between the
    calls (as a training step changes a parameter): the second output must be that of the
    new values."""
    __tracebackhide__ = True
    g = torch.Generator().manual_seed(77)
    tensors = [2.0 * torch.randn(2, n, dd, generator=g) for n, dd in ((8, 4), (6, 4), (6, 5))]
    first_case = "batch 2, 8 queries, 6 keys, d=4, chunk_size=3"
    first = call(fn, *tensors, 3, name="chunked_attention", case=first_case,
                 hint_on_error=_chunks_hint)
    expect_close(first, _attention(*tensors), what="the output", case=first_case,
                 atol=1e-5, rtol=1e-4)
    old = [t.clone() for t in tensors]
    for t in tensors:
        t.copy_(2.0 * torch.randn(t.shape, generator=g))
    case = ("a second call on the same Q, K and V tensors, changed in place since the first "
            "call (batch 2, 8 queries, 6 keys, d=4, chunk_size=3)")
    out = call(fn, *tensors, 3, name="chunked_attention", case=case,
               hint_on_error=_chunks_hint)
    expect_tensor(out, (2, 8, 5), dtype=torch.float32, what="the output", case=case)
    if is_close(out, _attention(*tensors), atol=1e-5, rtol=1e-4):
        return
    for names in ("K", "V", "KV", "Q", "QK", "QV", "QKV"):
        mixed = [old[i] if x in names else t for i, (x, t) in enumerate(zip("QKV", tensors))]
        if is_close(out, _attention(*mixed), atol=1e-5, rtol=1e-4):
            fail(f"the output is wrong on {case}: it is what the first call's "
                 f"{' and '.join(names)} give{'s' if len(names) == 1 else ''}: your result "
                 "depends on an earlier call (a cache keyed on the tensors, such as "
                 "functools.lru_cache, which tells tensors apart by identity, not by value).",
                 "compute everything from this call's Q, K and V: a tensor changed in place "
                 "is still the same object, with new values.")
    expect_close(out, _attention(*tensors), what="the output", case=case, atol=1e-5,
                 rtol=1e-4, hint="compute everything from this call's Q, K and V: the "
                                 "output must not depend on an earlier call.")


def _chunks_hint(error, chunk=None):
    if view_hint(error):
        return view_hint(error, "Q, K or V (a transpose, as head splitting makes)",
                         "keep the batch axis and use batched products "
                         "(Q[:, i:i + chunk_size] @ K.transpose(1, 2))")
    if chunk == 1 and ("must match the size" in str(error)
                       or "invalid for input" in str(error)):
        return ("with chunk_size=1 each chunk's queries axis has size 1: .squeeze() "
                "without a dim drops it (and the batch axis of a batch of one). Keep every "
                "axis: "
                "Q[:, i:i + chunk_size] is (batch, chunk, d) with chunk = 1.")
    if "must match the existing size" in str(error):
        return ("the output has value_dim = V.shape[-1] columns, not d = Q.shape[-1]: "
                "allocate it as Q.new_empty(batch, num_queries, V.shape[-1]), or collect the "
                "chunks in a list and torch.cat them along the queries.")
    if "must match the size" in str(error) or "invalid for input" in str(error):
        return ("the last chunk may be shorter: Q[:, i:i + chunk_size] simply ends at "
                "num_queries, so do not reshape Q into equal chunks.")
    return None


@checker("chunked_attention")
def check_chunked_attention(fn):
    """Check `fn(Q, K, V, chunk_size)`: equal to full attention (shorter last chunk, chunk
    larger than n, 60 queries, large scores, also in one chunk, scores beyond float16's
    range in float32 and float64, float64 with d=4 and d=6,
    float16, bfloat16, as many keys as the value size, one key (the output a new tensor,
    not a view of V), a second call on new inputs of the same shapes and one on the same
    inputs changed in place), its gradients (one key too), no tensor larger than one
    chunk's scores (counted on 1000 queries and keys, and on 2000 queries and 500 keys,
    chunk_size 24; on 200 queries and keys, chunk_size 10, also in float64, float16, with
    batch 2 and with inputs that require grad; in-place and out= results counted too; the
    outputs of the float32 runs compared too), and a peak memory far below n x n."""
    g = torch.Generator().manual_seed(0)
    cases = [("batch 2, 8 queries, 8 keys, d=4, chunk_size=4", 2, 8, 8, 4, 4, 2.0),
             ("batch 1, 10 queries, 6 keys, d=3, chunk_size=4 (the last chunk has 2 queries)",
              1, 10, 6, 3, 4, 2.0),
             ("batch 3, 5 queries, 7 keys, d=2, chunk_size=1", 3, 5, 7, 2, 1, 2.0),
             ("batch 1, 6 queries, 6 keys, d=4, chunk_size=16 (larger than n)",
              1, 6, 6, 4, 16, 2.0),
             ("batch 2, 60 queries, 55 keys, d=8, chunk_size=16 (the last chunk has 12)",
              2, 60, 55, 8, 16, 1.0),
             ("batch 2, 9 queries, 7 keys, d=4, chunk_size=4, Q and K = 30 * randn (scores up "
              "to about 1000)", 2, 9, 7, 4, 4, 30.0)]
    cases = [c + (torch.float32,) for c in cases] + [
        ("float64 inputs: batch 2, 9 queries, 7 keys, d=4, chunk_size=4", 2, 9, 7, 4, 4, 2.0,
         torch.float64),
        ("float16 inputs: batch 2, 9 queries, 7 keys, d=4, chunk_size=4", 2, 9, 7, 4, 4, 1.0,
         torch.float16)]
    # Added after red-team round 5: transposed views (the layout head splitting gives),
    # which .view() cannot flatten; from their own generator, so the data above stays.
    g5 = torch.Generator().manual_seed(5)
    cases = [c + ("",) for c in cases] + [
        ("Q, K and V that are transposed views, not contiguous in memory "
         "(torch.randn(2, 4, 7).transpose(1, 2)): batch 2, 7 queries, 9 keys, d=4, "
         "chunk_size=3", 2, 7, 9, 4, 3, 2.0, torch.float32, "strided"),
        # Added after red-team round 6: new tensors of the first case's shapes (catches a
        # result kept between calls, e.g. K^T cached by shape).
        ("a second call with new Q, K and V of the first case's shapes: batch 2, 8 queries, "
         "8 keys, d=4, chunk_size=4", 2, 8, 8, 4, 4, 2.0, torch.float32, "again"),
        # Added after red-team round 9 (from their own generator, g9): float64 with d not a
        # perfect square (sqrt(d) computed in float32 is rounded there, exact for d=4),
        # large scores with one chunk that holds every query, and as many keys as the value
        # size (V.mT has V's shape there).
        ("float64 inputs: batch 2, 9 queries, 7 keys, d=6, chunk_size=4", 2, 9, 7, 6, 4,
         2.0, torch.float64, "round9"),
        ("batch 2, 6 queries, 7 keys, d=4, chunk_size=8 (one chunk holds every query), Q "
         "= 10 + randn, K = 10 + 0.1 * randn (scores near 200, weights up to about 0.5)", 2,
         6, 7, 4, 8, 1.0, torch.float32, "shifted"),
        ("batch 2, 6 queries, 5 keys, d=4, value_dim=5 (as many keys as the value size), "
         "chunk_size=4", 2, 6, 5, 4, 4, 2.0, torch.float32, "round9"),
        # Added after red-team round 10 (their own generator, g10): one key, where every
        # weight is 1 and the output is V's row for every query (a shortcut that returns
        # V.expand(...) gives V's own memory back).
        ("batch 2, 1 query, 1 key, d=4, chunk_size=4 (one key: every weight is 1)", 2, 1,
         1, 4, 4, 2.0, torch.float32, "one key"),
        ("batch 2, 5 queries, 1 key, d=4, chunk_size=2 (one key: every weight is 1)", 2, 5,
         1, 4, 2, 2.0, torch.float32, "one key"),
        # Added after red-team round 11 (their own generator, g11): scores of 1e5 to 2e5 in
        # size, beyond float16's range (scores clamped to +-1e4 or +-6e4 become equal).
        ("float32 inputs whose scores are 1e5 to 2e5 in size (beyond float16's range, a "
         "few units apart): batch 2, 5 queries, 6 keys, d=1, chunk_size=2", 2, 5, 6, 1, 2,
         1.0, torch.float32, "huge"),
        ("float64 inputs whose scores are 1e5 to 2e5 in size (beyond float16's range, a "
         "few units apart): batch 2, 5 queries, 6 keys, d=1, chunk_size=2", 2, 5, 6, 1, 2,
         1.0, torch.float64, "huge")]
    g9 = torch.Generator().manual_seed(9)
    g6 = torch.Generator().manual_seed(6)
    g10 = torch.Generator().manual_seed(10)
    g11 = torch.Generator().manual_seed(11)
    earlier = {}  # (name, shape, dtype) -> the first such Q, K or V
    for case, batch, n_q, n_k, d, chunk, scale, dtype, layout in cases:
        if layout == "strided":
            Q = 2.0 * torch.randn(batch, d, n_q, generator=g5).transpose(1, 2)
            K = 2.0 * torch.randn(batch, d, n_k, generator=g5).transpose(1, 2)
            V = torch.randn(batch, 5, n_k, generator=g5).transpose(1, 2)
        elif layout == "huge":
            Q, K, V = _beyond_half(batch, n_q, n_k, dtype, g11)
        elif layout in ("again", "round9", "shifted", "one key"):
            g_new = {"again": g6, "one key": g10}.get(layout, g9)
            # "shifted": every score large, the keys close, so that no key takes every weight
            shift, spread = (10.0, 0.1) if layout == "shifted" else (0.0, 1.0)
            Q = (shift + scale * torch.randn(batch, n_q, d, generator=g_new)).to(dtype)
            K = (shift + spread * scale * torch.randn(batch, n_k, d, generator=g_new)).to(dtype)
            V = torch.randn(batch, n_k, 5, generator=g_new).to(dtype)
        else:
            Q = (scale * torch.randn(batch, n_q, d, generator=g)).to(dtype)
            K = (scale * torch.randn(batch, n_k, d, generator=g)).to(dtype)
            V = torch.randn(batch, n_k, 5, generator=g).to(dtype)
        given = [Q.clone(), K.clone(), V.clone()]
        out = call(fn, *given, chunk, name="chunked_attention", case=case,
                   hint_on_error=lambda error, chunk=chunk: _chunks_hint(error, chunk))
        if isinstance(out, (list, tuple)):
            if any(isinstance(o, torch.Tensor) and tuple(o.shape) == (batch, n_q, 5)
                   for o in out):
                fail(f"chunked_attention returned a {type(out).__name__} of {len(out)} on "
                     f"{case}; return only the output tensor.")
            fail(f"chunked_attention returned a {type(out).__name__} of chunks on {case}; "
                 "return one tensor.", "torch.cat(chunks, dim=1) joins them along the "
                                       "queries.")
        if isinstance(out, torch.Tensor) and out.dim() == 3 and out.shape[0] == batch \
                and out.shape[1] < n_q:
            if out.shape[1] == n_q - n_q % chunk:
                fail(f"the output has {out.shape[1]} queries on {case}; expected all {n_q}: "
                     "the last, shorter chunk is missing.",
                     "range(0, num_queries, chunk_size) starts a chunk at every multiple of "
                     "chunk_size, and Q[:, i:i + chunk_size] is simply shorter at the end.")
            fail(f"the output has {out.shape[1]} queries on {case}; expected all {n_q}: the "
                 "chunks do not cover every query exactly once.",
                 "for i in range(0, num_queries, chunk_size): Q[:, i:i + chunk_size].")
        expect_tensor(out, (batch, n_q, 5), what="the output", case=case,
                      nan_hint=_NAN_HINT)
        expect_tensor(out, dtype=Q.dtype, what="the output", case=case)
        for name, before, after in zip("QKV", (Q, K, V), given):
            if not torch.equal(before, after):
                fail(f"chunked_attention changed its argument {name} in place on {case}.")
        expect_new_tensor(out, [(f"the argument {n}", n, t) for n, t in zip("QKV", given)],
                          case, NEW_TENSOR_HINT)
        if is_close(out, _attention(Q, K, V, scale=False), atol=1e-5, rtol=1e-4) and not \
                is_close(_attention(Q, K, V), _attention(Q, K, V, scale=False)):  # one key
            if math.isqrt(d) == 1 < d and _isqrt_on_probe(fn):
                _isqrt_fail(case, d)
            fail(f"the output equals softmax(Q K^T) V without the scale on {case}.",
                 "divide the scores by sqrt(d), d = Q.shape[-1] (chapter 3 says why).")
        if n_q > 1 and is_close(out, _attention(Q, K, V, dim=-2)[:, :n_q], atol=1e-5,
                                rtol=1e-4):
            fail(f"the softmax runs over the queries, not the keys, on {case}.",
                 "softmax(scores, dim=-1): each query's weights over the keys sum to 1.")
        if out.shape[1] == n_q and (out[:, -1] == 0).all() and n_q % chunk:
            fail(f"the last queries' outputs are all zeros on {case}: the last, shorter chunk "
                 "was not computed.",
                 "Q[:, i:i + chunk_size] is simply shorter at the end; compute it too.")
        tol = dict(atol=1e-3 if scale > 10 or layout == "shifted" else 1e-5, rtol=1e-4)
        if dtype == torch.float16:
            tol = dict(atol=5e-3, rtol=5e-3)
        if layout == "huge" and dtype == torch.float32:
            # float32 is 1/128 apart near 1e5: a softmax that rounds a number of that size
            # (a log-sum-exp, a scale split between Q and K) errs by up to about 1e-2
            tol = dict(atol=1e-2, rtol=1e-2)
        ref = _attention(Q, K, V)
        if not is_close(out, ref, **tol):
            _stale(out, (Q, K, V), earlier, tol, case)
            _diagnose(fn, out, ref, Q, K, V, chunk, case, tol)
        expect_close(out, ref, what="the output", case=case, hint=HINT, **tol)
        for x, t in zip("QKV", (Q, K, V)):
            earlier.setdefault((x, t.shape, t.dtype), t)
    _changed_in_place(fn)
    Q, K, V = (torch.randn(2, 7, 4, generator=g), torch.randn(2, 6, 4, generator=g),
               torch.randn(2, 6, 3, generator=g))
    expect_gradients(lambda q, k, v: fn(q, k, v, 3), _attention,
                     [("Q", Q), ("K", K), ("V", V)], name="chunked_attention",
                     case="batch 2, 7 queries, 6 keys, d=4, chunk_size=3 (gradients)")
    # Added after red-team round 10: one key (every weight is 1: the gradients of Q and K
    # are 0, that of V sums the outputs' gradients; a shortcut must keep V's graph).
    Q, K, V = (torch.randn(2, n, dd, generator=g10) for n, dd in ((3, 4), (1, 4), (1, 3)))
    expect_gradients(lambda q, k, v: fn(q, k, v, 2), _attention,
                     [("Q", Q), ("K", K), ("V", V)], name="chunked_attention",
                     case="batch 2, 3 queries, 1 key, d=4, chunk_size=2 (one key, gradients)")
    _bfloat16(fn)
    # Every tensor it computes at once holds at most chunk_size x n numbers (counted exactly:
    # catches a fixed chunk, torch.chunk's chunk count, chunk_size + 1 rows, the full matrix).
    X = torch.randn(1, 1000, 8, generator=g)
    _big_right(fn, X, X, X, 24, "batch 1, 1000 queries and keys, d=8, chunk_size=24")
    # Added after red-team round 6: more queries than keys, so that all queries at once
    # against chunk_size keys (a loop over the keys) holds more than chunk_size x num_keys.
    g6 = torch.Generator().manual_seed(66)
    Q, K, V = (torch.randn(1, n, 4, generator=g6) for n in (2000, 500, 500))
    _big_right(fn, Q, K, V, 24, "batch 1, 2000 queries, 500 keys, d=4, value_dim=4, "
                                "chunk_size=24")
    # Added after red-team round 8: a chunk_size below 16 that is not a multiple of 8
    # (catches chunks rounded up to a multiple of 8, or a fixed chunk of 16).
    g8 = torch.Generator().manual_seed(88)
    X = torch.randn(1, 200, 8, generator=g8)
    _big_right(fn, X, X, X, 10, "batch 1, 200 queries and keys, d=8, chunk_size=10")
    _counted_widely(fn)
    # Added after red-team round 13 (the lead's ruling on size-keyed faults): 67 queries
    # (odd, > 64) and 4,099 keys (> 4096, above the 1,000 of the cases above: catches a
    # chunk that grows with the number of keys).
    g13 = torch.Generator().manual_seed(113)
    Q, K, V = (torch.randn(1, n, dd, generator=g13) for n, dd in ((67, 8), (4099, 8),
                                                                   (4099, 3)))
    _big_right(fn, Q, K, V, 16, "batch 1, 67 queries, 4099 keys, d=8, value_dim=3, "
                                "chunk_size=16")
    # Its peak memory stays far below the n x n matrix (catches every chunk's weights kept).
    # At chunk_size 16 one chunk's float32 scores take 1/62 of it: room for a float64
    # computation with several named temporaries (4 float64 chunks: 1/8 of it).
    n, chunk = 1000, 16
    X = torch.randn(1, n, 16, generator=g)
    full = n * n * 4  # bytes of one float32 (n, n) score matrix
    # Added after red-team round 13: memory outside torch's allocator too (NumPy arrays,
    # Python lists), which the profiler does not see and tracemalloc does: the whole score
    # matrix in a NumPy buffer, filled with torch.bmm(..., out=) and in-place steps.
    held = _traced_peak(lambda: _spied(fn, X, X, X, chunk))
    budget = chunk * n * 4  # bytes of one chunk's float32 (chunk_size, n) scores
    if held > full / 2:
        fail(f"on batch 1, {n} queries and keys, chunk_size={chunk}, chunked_attention "
             f"held {held / 2**20:.2f} MiB outside torch's tensors (NumPy arrays or Python "
             f"objects, measured with tracemalloc), {held / budget:.0f} times the "
             f"{budget / 2**10:.1f} KiB of one chunk's scores (chunk_size x n x 4 bytes) and "
             f"{held / full:.1f} times the whole {n} x {n} score matrix "
             f"({full / 2**20:.1f} MiB): memory held in a NumPy buffer is held all the same.",
             "compute each chunk's scores with torch, Q[:, i:i + chunk_size] @ "
             "K.transpose(1, 2), and keep only the current chunk's scores and weights alive; "
             "do not allocate the whole (num_queries, num_keys) matrix anywhere, in NumPy "
             "either.")
    peak = peak_memory(lambda: _spied(fn, X, X, X, chunk))
    if peak > full / 2:
        fail(f"on batch 1, {n} queries and keys, chunk_size={chunk}, the peak memory was "
             f"{peak / 2**20:.2f} MiB, {peak / budget:.0f} times the {budget / 2**10:.1f} "
             f"KiB of one chunk's scores (chunk_size x n x 4 bytes) and "
             f"{peak / full:.1f} times the whole {n} x {n} score matrix "
             f"({full / 2**20:.1f} MiB): your function holds far more than one chunk's "
             f"scores at once.",
             "keep only the current chunk's scores and weights alive, and only each chunk's "
             "(chunk_size, value_dim) result: a list of every chunk's weights (or scores) "
             "holds the whole n x n matrix again.")
    _chunked_matrix(fn)


def _chunked_matrix(fn):
    """The condition matrix (_core.expect_conditions, session 12) on three small cases:
    batch 2, 5 queries, 7 keys, d=3, value size 2, chunk_size=2 (a shorter last chunk); one
    key (3 queries, chunk_size=2); and batch 2, 4 queries whose scores lie near 0, -1000,
    +1000 and +500 (a fourth feature of each query, times a key feature of 2: d=4, so the
    scale is exactly 2), chunk_size=3. Each runs as given, called again with other values,
    non-contiguous, expanded (every example equal to the first), in float64, and with Q
    times 1e5 in float32 and float64 (values only); the first two also in float16 and
    bfloat16. The output must be a new tensor (one key: not a view of V). Outputs and the
    gradients of Q, K and V against the float64 reference. Dropped for the far rows: float16
    and bfloat16, where a score near 1000 is rounded by up to 0.25 (bfloat16: 2) in a right
    half computation, which moves its weights far beyond 32 eps. Added after red-team round
    12: 4 equal keys (every weight 1/4: the mean of the values) under the standard
    conditions, the gradients also under Q times 1e5, and a float16 case with scores near
    100 and 50 whose two best (100.25 and 99.75) are one number in bfloat16."""
    g = torch.Generator().manual_seed(122)

    def randn(*shape):
        return torch.randn(*shape, generator=g)
    offsets = torch.tensor([0.0, -1000.0, 1000.0, 500.0])[:, None].expand(2, 4, 1)
    far_Q = torch.cat([randn(2, 4, 3), offsets], dim=-1)
    far_K = torch.cat([randn(2, 5, 3), torch.full((2, 5, 1), 2.0)], dim=-1)
    general = [("batch 2, 5 queries, 7 keys, d=3, value size 2, chunk_size=2 (the last "
                "chunk has 1 query)", (randn(2, 5, 3), randn(2, 7, 3), randn(2, 7, 2), 2)),
               ("batch 2, 3 queries, 1 key, d=4, chunk_size=2 (one key: every weight is 1)",
                (randn(2, 3, 4), randn(2, 1, 4), randn(2, 1, 3), 2))]
    far = [("batch 2, 4 queries whose scores lie near 0, -1000, +1000 and +500, 5 keys, "
            "d=4, chunk_size=3", (far_Q, far_K, randn(2, 5, 3), 3))]
    # Added after red-team round 12: every key equal (every weight 1/n: the mean of the
    # values, not the first value), and float16 scores near 100 and 50 (exp overflows
    # without the max shift), the two best one number in bfloat16 (100.25 and 99.75).
    equal = [("batch 2, 3 queries, 4 equal keys, chunk_size=2 (every weight 1/4: the "
                    "mean of the values)", (randn(2, 3, 2), randn(2, 1, 2).expand(2, 4, 2)
                                            .contiguous(), randn(2, 4, 3), 2))]
    close = [("batch 1, queries [1, 0.5], keys [100.25, 99.75, 96, 0] (d=1: scores near "
              "100 and 50, the two best one number in bfloat16), chunk_size=1",
              (torch.tensor([[[1.0], [0.5]]]), torch.tensor([[[100.25], [99.75], [96.0],
                                                              [0.0]]]), randn(1, 4, 2), 1))]
    large = [("batch 1, 67 queries, 4099 keys, d=8, value size 3, chunk_size=16 (the last "
              "chunk has 3 queries)", (randn(1, 67, 8), randn(1, 4099, 8), randn(1, 4099, 3),
                                       16))]
    huge = tuple(scaled(1e5, (0,), "Q times 1e5 (scores near 1e5)",
                        "scores of 1e5 are ordinary float32 and float64 numbers: do not "
                        "clamp them or cast them to float16; a softmax that subtracts each "
                        "row's own maximum (torch.softmax) needs no protection."))
    # Q times 1e5: values and gradients (round 9's W_06, exp(s) ** (1 / sqrt(d)), has NaN
    # gradients wherever exp(s) underflows to 0: 0 ** 0.58 has an infinite derivative). Not
    # for the equal keys: scores near 1e5 that tie are rounded apart by a float32 matmul
    # (1 ulp = 0.008), which moves a right gradient of Q by 3e-3 from the exact 0.
    for cases, conditions, grads in (
            (general + equal, STANDARD, (0, 1, 2)),
            (far, (PLAIN, REPEAT, NONCONTIGUOUS, EXPANDED, FLOAT64), (0, 1, 2)),
            (general + far, huge, (0, 1, 2)),
            (close, (PLAIN, FLOAT16_NOT_BFLOAT16), (0, 1, 2)),
            # Added after red-team round 13: bfloat16 values of 1e5, beyond float16's range
            # (a bfloat16 input computed through float16 overflows to inf), and one larger
            # case (the lead's ruling on size-keyed faults): 67 queries (odd, > 64) of 4,099
            # keys (> 4096).
            (general, tuple(scaled(1e5, (2,), "V times 1e5 (beyond float16's range)",
                                   "bfloat16 has float32's range (up to about 3e38) with "
                                   "fewer digits: compute a bfloat16 input in bfloat16 or "
                                   "in float32 (x.float(), then cast back), never through "
                                   "float16, which overflows to inf above 65504.",
                                   dtypes=(torch.bfloat16,))), (0, 1, 2)),
            (large, (PLAIN, NO_GRAD, FLOAT64, FLOAT16) + huge[:1], (0, 1, 2))):
        expect_conditions(lambda Q, K, V, chunk: _spied(fn, Q, K, V, chunk),
                          lambda Q, K, V, chunk: _attention(Q, K, V), cases,
                          name="chunked_attention", differentiable=grads,
                          conditions=conditions, new_tensor=True, hint=HINT)
