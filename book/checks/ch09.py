"""Checkers for chapter 9's exercises: the top-p (nucleus) filter and one attention step with
a key-value cache."""
import itertools
import math

import torch

from ._core import FLOAT64, FLOAT64_TOL, INPLACE_HINT, STANDARD, CheckFailed, \
    call, checker, expect_conditions, expect_float64_accuracy, expect_tensor, fail, \
    expect_no_graph_under_no_grad, passed, scaled, view_hint

# -- Exercise 9.1: top-p ----------------------------------------------------------------------


def _nucleus(logits, p):
    """The reference, straight from the definition, in float64: token j is kept when the
    tokens more probable than j have total probability below p. Returns (kept, probs).
    Sorted once per row; tied tokens share the mass above the first of them."""
    probs = torch.softmax(logits.double(), dim=-1)                       # (batch, V)
    kept = (_mass_above(probs) < p) & (probs > 0)   # a -inf logit is never kept
    renormalised = torch.where(kept, probs, torch.zeros_like(probs))
    return kept, renormalised / renormalised.sum(dim=-1, keepdim=True)


def _mass_above(probs):
    """For every token, the total probability of the tokens strictly more probable."""
    srt, idx = probs.sort(dim=-1, descending=True)
    exclusive = srt.cumsum(dim=-1) - srt                                  # ties: not yet
    new_group = torch.ones_like(srt, dtype=torch.bool)
    new_group[:, 1:] = srt[:, 1:] != srt[:, :-1]
    group = new_group.long().cumsum(dim=-1) - 1                           # tie group id
    starts = torch.where(new_group, exclusive, torch.full_like(srt, math.inf))
    first = torch.full_like(srt, math.inf).scatter_reduce(-1, group, starts, "amin")
    mass_sorted = first.gather(-1, group)
    return torch.empty_like(probs).scatter(-1, idx, mass_sorted)


LN2 = math.log(2.0)


def _logits_from(probs):
    return torch.tensor(probs).log()


def _top_p_cases():
    """(case, logits, p): asymmetric, unsorted, ties, long rows, -inf entries, large
    logits, float16, a mass that reaches p exactly, near-ties (also one that float16
    cannot tell apart, and one 5e-6 apart in relative terms), a mass 5e-6 below p, a
    non-contiguous input, long bfloat16 rows, p just below 1 (1 - 1e-9, 0.99999, 0.9995),
    bfloat16 logits beyond float16's range, float64 masses 1e-10 from p.
    Apart from the exact case, the masses just below p (5e-6, and 4.8e-7 with dyadic
    probabilities, exact in float32), the 4,096-token rows (1.1e-4 and 1.9e-4 in float16,
    4.7e-4 in bfloat16), the rows at p = 1 - 1e-9 (1.9e-5), p = 0.9995 (1.9e-4) and
    p = 0.99999 (5e-6), and the float64 rows (1e-10, which float64 resolves), every case
    keeps a margin of at least 1e-3 between p and the mass above any token, so float32
    rounding cannot change the verdict."""
    g = torch.Generator().manual_seed(9)
    shuffled = torch.randn(4, 10, generator=g) * 2.0
    long_rows = torch.randn(3, 257, generator=g) * 3.0
    after_top_k = torch.randn(2, 12, generator=g) * 2.0
    after_top_k[after_top_k < after_top_k.topk(5, dim=-1).values[:, -1:]] = float("-inf")
    return [
        ("4 rows of 10 unsorted logits, p=0.5", shuffled, 0.5),
        ("the same 4 rows, p=0.9", shuffled, 0.9),
        ("probabilities [0.1, 0.4, 0.2, 0.2, 0.1] (two tied at 0.2), p=0.5: the token "
         "that crosses p is tied with another", _logits_from([[0.1, 0.4, 0.2, 0.2, 0.1]]), 0.5),
        ("logits [1, 3, 3, 0] (tied maximum), p=0.1", torch.tensor([[1.0, 3.0, 3.0, 0.0]]), 0.1),
        ("two rows with different spreads, p=0.7",
         torch.tensor([[4.0, 0.0, 1.0, 0.5, 3.5, 0.2], [0.3, 0.1, 0.0, 0.2, 0.4, 0.5]]), 0.7),
        ("3 rows of 257 logits, p=0.8", long_rows, 0.8),
        ("p=1.0 (every token kept)", shuffled[:2], 1.0),
        ("a tiny p=1e-6 (only the most probable token)", shuffled[:2], 1e-6),
        ("one token in the vocabulary", torch.tensor([[0.7], [-2.0]]), 0.5),
        ("logits already filtered by top-k (-inf entries), p=0.8", after_top_k, 0.8),
        ("large logits (near 1000) in float32, p=0.9",
         torch.tensor([[1000.0, 998.0, 999.5, 990.0, 1001.0]]), 0.9),
        # Rows far apart: exp(logits - one maximum for the whole batch) is 0 for the whole
        # second row, and 0 / 0 NaN.
        ("two rows far apart, one near 1000 and one near 0, float32, p=0.8",
         torch.tensor([[1000.0, 999.0, 998.0, 990.0], [0.0, -1.0, -3.0, -5.0]]), 0.8),
        ("float16 logits near 10000, p=0.9",
         torch.tensor([[10000.0, 9998.0, 9999.0, 9990.0, 10001.0]], dtype=torch.float16), 0.9),
        # The mass above tokens 0 and 3 is exactly 0.75 = p (probabilities 1/2, 1/4, 1/8, 1/8
        # are exact in float32 and float64): they are removed ("below p", not "at most p").
        ("probabilities [1/8, 1/4, 1/2, 1/8], p=0.75 (the mass above the two 1/8 tokens is "
         "exactly p)", torch.tensor([[-2.0, -1.0, 0.0, -2.0]]) * LN2, 0.75),
        ("the same probabilities in float64, p=0.75",
         torch.tensor([[0.0, -2.0, -1.0, -2.0]], dtype=torch.float64) * LN2, 0.75),
        # A near-tie that is not a tie: 0.29995 is removed although 0.3 is kept.
        ("probabilities [0.3, 0.4, 0.00005, 0.29995], p=0.6 (0.29995 is not tied with 0.3)",
         _logits_from([[0.3, 0.4, 0.00005, 0.29995]]), 0.6),
        # A near-tie 5 parts in a million apart (1.5e-6, 25 float32 steps of 0.3): a
        # tolerant tie rule such as torch.isclose (rtol 1e-5) keeps it.
        ("probabilities [0.4, 0.3 * (1 - 5e-6), 1.5e-6, 0.3], p=0.6 (token 1 is 5 parts in "
         "a million below token 3: not a tie)",
         _logits_from([[0.4, 0.3 * (1 - 5e-6), 1.5e-6, 0.3]]), 0.6),
        # The mass above token 1 is 5e-6 below p (about 80 float32 steps of 0.6): a "safety
        # margin" such as mass < p - 1e-5 removes it.
        ("probabilities [0.599995, 0.3, 0.100005], p=0.6 (the mass above token 1 is "
         "0.599995, just below p: token 1 is kept)",
         _logits_from([[0.6 - 5e-6, 0.3, 0.1 + 5e-6]]), 0.6),
        ("p=1.0 on logits already filtered by top-k (the -inf stay -inf)",
         torch.cat([_filtered_row(), after_top_k]), 1.0),
        # Every token is kept: the smallest probability, 1.9e-5, is far above 1 - p. A
        # float32 running sum ends a few steps from 1 (0.99999988 in three of the rows, with
        # the portable kernels too), below p, so a count of the sums below p, plus one, is
        # V + 1.
        ("4 rows of 1,000 logits, p = 1 - 1e-9 (just below 1: every token is kept)",
         torch.randn(4, 1000, generator=torch.Generator().manual_seed(5)), 1 - 1e-9),
        # Long float16 rows: float16 rounding in a softmax or cumsum moves the boundary by
        # several tokens. Seed 46 leaves 1.1e-4 between p and the mass above any token, far
        # above float32 rounding (tests/test_checks_ch09.py checks the margin). 4,096 tokens
        # keep an O(V^2) pairwise solution within memory.
        ("2 rows of 4,096 float16 logits (2 * randn), p=0.9", _long_float16(), 0.9),
        # Float16 numbers near 0.75 are 0.00049 apart, and 0.75 is one of them: a running
        # sum kept in float16 rounds a mass within 0.00024 below p up to p. Seed 246 puts
        # the mass above one token of each row 1.9e-4 and 2.0e-4 below p (those tokens are
        # kept) and leaves 1.9e-4 between p and the mass above any token.
        ("2 rows of 4,096 float16 logits (2 * randn, another draw), p=0.75 (the mass above "
         "the last kept token of each row is about 2e-4 below p)", _long_float16(246),
         0.75),
        # The same in bfloat16 (8 significant bits, a sum near 0.9 grows in steps of 0.004):
        # a solution that computes in float32 for float16 only moves the boundary by about
        # 25 tokens. Seed 56 leaves 4.7e-4 between p and the mass above any token.
        ("2 rows of 4,096 bfloat16 logits (2 * randn), p=0.9", _long_half(torch.bfloat16),
         0.9),
        # Tokens 3 and 4 (logits 2^-13 apart) have probabilities 1.2e-4 apart in relative
        # terms: far apart in float32 (6e-8) and float64, equal once rounded to float16
        # (3 significant digits). The mass above them, 0.838 and 0.905, is far from p.
        ("float16 logits [2, 1, 0, -0.11865, -0.11877, -1], p=0.87: tokens 3 and 4 differ "
         "in probability by about 1 part in 8,000 (not a tie), less than float16 resolves",
         torch.tensor([[2.0, 1.0, 0.0, -0.11865234375, -0.1187744140625, -1.0]],
                      dtype=torch.float16), 0.87),
        # A model's logits for the last position, out[:, -1, :], are not contiguous.
        ("the last position of (2, 3, 10) logits, logits[:, -1, :] (not contiguous), p=0.9",
         _last_position(shuffled[:2]), 0.9),
        # The mass above token 0 is 0.75, 2^-21 (4.8e-7, 8 float32 steps of 0.75) below p:
        # token 0 is kept. The probabilities are exact in float32 (and within 1e-9 of
        # these in float64), p too. A "safety margin" such as mass < p - 1e-6 removes it.
        ("probabilities [1/8, 1/2, 1/16, 1/4, 1/16], p=0.75 + 2^-21 = 0.75000048 (the mass "
         "above token 0, 0.75, is 4.8e-7 below p: token 0 is kept)",
         torch.tensor([[-3.0, -1.0, -4.0, -2.0, -4.0]]) * LN2, 0.75 + 2 ** -21),
        # bfloat16 holds float32's range: logits near 100,000 (bfloat16 rounds them in steps
        # of 512, so row 0 has two tied tokens and row 1 one token with probability 1).
        # Computed through float16 they are inf, and every token is removed.
        ("bfloat16 logits near 100,000, beyond float16's largest number 65,504 (bfloat16, "
         "like float32, holds them), p=0.9",
         torch.tensor([[1e5, 0.0, 99990.0, -1e5, 99000.0],
                       [70000.0, 69632.0, -70000.0, 0.0, 1.0]], dtype=torch.bfloat16), 0.9),
        # p just below 1 is not p = 1: the tail tokens whose mass is below 1 - p go. The
        # mass above them is 2e-4 (row 0) and 2.5e-4 (row 1) above p, thousands of float32
        # steps.
        ("logits [5, 4, 3, -3, -4] and probabilities [0.5, 0.3, 0.19975, 0.0002, 5e-5], "
         "p=0.9995 (the last two tokens of each row, 3.1e-4 and 2.5e-4 of the mass, are "
         "removed)",
         torch.cat([torch.tensor([[5.0, 4.0, 3.0, -3.0, -4.0]]),
                    _logits_from([[0.5, 0.3, 0.19975, 0.0002, 0.00005]])]), 0.9995),
        # The mass above tokens 2 and 3 is 5e-6 above p (about 80 float32 steps of 1).
        ("probabilities [0.6, 0.399995, 3e-6, 2e-6], p=0.99999 (the last two tokens, 5e-6 "
         "of the mass, are removed)", _logits_from([[0.6, 0.399995, 3e-6, 2e-6]]), 0.99999),
        # Round 13: a running sum rounded to bfloat16 (a sum near 0.95 grows in steps of
        # 0.004, so thousands of small probabilities stall it) at p = 0.95, where the
        # bfloat16 ties of the 2 * randn rows above do not hide it: it keeps 111 and 64
        # tokens for 109 and 65. Seed 27 leaves 2.1e-4 between p and the mass above any
        # token (tests/test_checks_ch09.py).
        ("bfloat16 logits, 2 rows of 4,096 (4 * randn), p=0.95 (the running sum in float32: "
         "bfloat16 sums near 0.95 are 0.004 apart)", _long_half(torch.bfloat16, 27, 4.0),
         0.95),
        # Round 13: a nucleus of about 3,600 tokens in 3 flat rows of 4,099 (0.1 * randn):
        # a search among the top 1,024, 2,048 or 4,096 tokens only is cut there. Seed 26
        # leaves 9e-5 between p and the mass above any token (probabilities near 2.4e-4).
        ("3 flat rows of 4,099 float32 logits (0.1 * randn), p=0.9 (about 3,613 tokens "
         "kept in each row)", torch.randn(3, 4099, generator=torch.Generator()
                                          .manual_seed(26)) * 0.1, 0.9),
        # Last (float64 accuracy is told after any other fault): float64 logits whose masses
        # lie 1e-10 from p, far beyond float64 rounding (1e-16) and far within float32's
        # (3e-8 near 0.3; p itself is 0.30000001 in float32). Computed in float32 (or with p
        # rounded to float32), both rows are the same numbers, and one of them is wrong.
        ("float64 probabilities [0.2, 0.1 + d, 0.098, ...] with d = 1e-10 in row 0 and "
         "-1e-10 in row 1, p=0.3: the mass above token 2 is 0.3 + 1e-10 (removed) in row 0 "
         "and 0.3 - 1e-10 (kept) in row 1", _float64_near_p(), 0.3),
    ]


def _float64_near_p():
    """Two rows of float64 logits: probabilities 0.2, 0.1 + d, then 0.098 down to 0.07 and
    0.028 - d, with d = 1e-10 and -1e-10: the mass above token 2 is 0.3 + d."""
    tail = [0.098, 0.094, 0.09, 0.086, 0.082, 0.078, 0.074, 0.07]
    return torch.tensor([[0.2, 0.1 + d] + tail + [0.028 - d] for d in (1e-10, -1e-10)],
                        dtype=torch.float64).log()


def _filtered_row():
    """A row whose float32 probabilities add up to just below 1: a computation that turns
    its -inf into finite numbers keeps them at p=1."""
    row = torch.randn(1, 12, generator=torch.Generator().manual_seed(0)) * 2
    return row.masked_fill(row < row.topk(5, dim=-1).values[:, -1:], float("-inf"))


def _last_position(rows):
    """`rows` (b, V) as the last position of a (b, 3, V) model output: a strided view."""
    out = torch.zeros(len(rows), 3, rows.shape[-1])
    out[:, -1] = rows
    return out[:, -1, :]


def _long_float16(seed=46):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 4096, generator=g) * 2).half()


def _long_half(dtype, seed=56, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 4096, generator=g) * scale).to(dtype)


HALF = (torch.float16, torch.bfloat16)


def _ids(mask_row):
    return [int(i) for i in torch.nonzero(mask_row).flatten()]


def _short_ids(mask_row):
    ids = _ids(mask_row)
    return str(ids) if len(ids) <= 20 else f"{len(ids):,} tokens ({ids[:5]}...)"


@checker("top_p_filter")
def check_top_p_filter(fn):
    """Check `fn(logits, p)` for logits (batch, V): a tensor like `logits` whose softmax is
    the nucleus distribution: zero outside the smallest set of most probable tokens whose
    probabilities reach p (the token that crosses p, and any tied with it, kept), the kept
    probabilities renormalised. Every row gets its own nucleus. Runs backward() too."""
    for case, logits, p in _top_p_cases():
        out = _call_top_p(fn, logits, p, case)
        for row in range(len(logits) if len(logits) > 1 else 0):
            alone = _call_top_p(fn, logits[row:row + 1], p, f"{case}, row {row} alone")
            if not torch.equal(torch.isfinite(alone[0]), torch.isfinite(out[row])):
                _expect_minus_inf_kept(logits[row], out[row], alone[0], p, case, row)
                _expect_no_state(fn, logits, p, case)
                _batch_differs(logits[row:row + 1], p, out[row], alone[0],
                               f"on {case}, row {row}", batch=logits)
        try:
            _compare_nucleus(out, logits, p, case)
        except CheckFailed:
            _expect_no_state(fn, logits, p, case)
            raise
    _check_top_p_gradient(fn)
    expect_no_graph_under_no_grad(
        fn, (torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, -0.5, 3.0, 0.0]]), 0.5),
        "top_p_filter", "logits [[2, 1, 0, -1], [0.5, -0.5, 3, 0]] requiring grad, p=0.5, "
        "called under torch.no_grad()")
    _top_p_matrix(fn)
    return passed("top_p_filter")


def _top_p_reference(logits, p):
    """The nucleus in float64: the logits with -inf for the removed tokens (differentiable)."""
    return logits.masked_fill(~_nucleus(logits.detach(), p)[0], float("-inf"))


def _softmax_of(result):
    """The matrix compares softmax(output) (a row shifted by a constant is right), in the
    output's dtype."""
    return [torch.softmax(t, dim=-1) for t in (result if isinstance(result, (tuple, list))
                                               else [result])]


def _top_p_matrix_cases():
    """Small cases for the condition matrix: unsorted rows of odd width, one token (V = 1),
    and rows far apart (offsets +-1000). Under every condition (float16 and bfloat16
    rounding, the rolled values of a second call, row 0 repeated) the mass above any token
    is at least 0.01 from p (tests/test_checks_ch09.py checks it), so float32 rounding
    cannot change the verdict."""
    g = torch.Generator().manual_seed(1209)
    rows = (torch.randint(-12, 13, (3, 7), generator=g) / 4.0)
    far = (torch.randint(-12, 13, (3, 5), generator=g) / 4.0
           + torch.tensor([[1000.0], [0.0], [-1000.0]]))
    return [("3 rows of 7 unsorted logits, p=0.7", (rows, 0.7)),
            ("one token in the vocabulary (V = 1), p=0.5", (torch.tensor([[0.75], [-2.0]]),
                                                            0.5)),
            ("3 rows far apart (near 1000, 0 and -1000), p=0.8", (far, 0.8))]


TOP_P_LARGE_HINT = ("logits this large overflow exp() unless each row's maximum is "
                    "subtracted first: use torch.softmax(logits, dim=-1) (in float32 or "
                    "float64) on each row, never exp() of the raw logits or one maximum "
                    "for the whole batch.")


def _top_p_matrix(fn):
    """The condition matrix (issue 12): the small cases as given, on a second call with
    other values, non-contiguous, expanded (row 0 repeated, stride 0), in float64, float16
    and bfloat16 (values and gradients), and the logits times 1e5 in float32 and float64;
    softmax of the output against the reference's, and the gradient through it. Nothing is
    dropped: no ruling accepts a top-p fault under these conditions."""
    *cases, far = _top_p_matrix_cases()
    large = tuple(scaled(1e5, (0,), "logits times 1e5", TOP_P_LARGE_HINT))
    kwargs = dict(name="top_p_filter", differentiable=(0,), outputs=_softmax_of)
    expect_conditions(fn, _top_p_reference, cases, conditions=STANDARD + large, **kwargs)
    # Rows near +-1000 in float64 fail by overflow (exp without a row maximum), not by
    # float32 accuracy (told last, apart): the float64 condition gets the overflow hint.
    expect_conditions(fn, _top_p_reference, [far], conditions=tuple(
        _far_float64(TOP_P_LARGE_HINT) if c is FLOAT64 else c for c in STANDARD) + large,
        **kwargs)


def _far_float64(hint):
    """The float64 condition for rows far apart: a wrong value there is exp() overflowing
    or underflowing (float64 accuracy is told apart, last), so its hint says that."""
    return FLOAT64.but(hint=hint)


def _expect_minus_inf_kept(row_logits, in_batch, alone, p, case, row):
    """For a row kept differently in the batch and alone: fail if a -inf of the input is
    finite in either answer (a -inf replaced by a number taken from the batch, say)."""
    for answer, how in ((in_batch, "in the batch"), (alone, "when it is passed alone")):
        revived = torch.isneginf(row_logits) & torch.isfinite(answer)
        if revived.any():
            j = int(revived.nonzero()[0])
            fail(f"on {case}, row {row}: token {j} is -inf in the input (removed "
                 f"before, by top-k), but your output {how} gives it the logit "
                 f"{answer[j].item():.4g}, so it can be kept: the row keeps tokens "
                 f"{_short_ids(torch.isfinite(in_batch))} in the batch and "
                 f"{_short_ids(torch.isfinite(alone))} alone.",
                 "-inf entries must stay -inf: a token with probability 0 is never kept. "
                 "Do not replace -inf by a finite number (a minimum of the logits, "
                 "nan_to_num, torch.where(torch.isinf(logits), ...)): torch.softmax "
                 "handles -inf as it is, and masked_fill only adds more of them.")


def _batch_differs(row_logits, p, in_batch, alone, where, batch=None):
    """Fail for a row kept differently in the batch and alone, naming the wrong one."""
    kept = _nucleus(row_logits, p)[0][0]
    in_batch, alone = torch.isfinite(in_batch), torch.isfinite(alone)
    far = ""
    if batch is not None:
        finite = lambda x: x[torch.isfinite(x)].double()  # noqa: E731
        gap = finite(batch).max() - finite(row_logits).max()
        limit = 11 if batch.dtype == torch.float16 else 88  # exp(-limit) ~ 0 beyond
        if gap > limit and torch.equal(alone, kept):
            far = (f" This row's largest logit is {gap.item():g} below the batch's: "
                   "exp(logits - one maximum for the whole batch) underflows to 0 on the "
                   "whole row, and 0 / 0 is NaN. Subtract each row's own maximum, "
                   "logits.amax(dim=-1, keepdim=True), or use torch.softmax(logits, "
                   "dim=-1), which does.")
    seen = (f"{where} keeps tokens {_short_ids(in_batch)} in the batch but "
            f"{_short_ids(alone)} when it is passed alone")
    if torch.equal(in_batch, kept):
        fail(f"{seen} (a batch of one row); the batch's answer is the right one.",
             "a batch of one row is a batch too: keep the batch axis (no squeeze(), no "
             "[0] indexing) and work along the last axis (dim=-1) for any batch size.")
    fail(f"{seen}.",
         "every row gets its own nucleus: softmax, sort and cumsum along the last axis "
         "(dim=-1) of each row, never over the whole batch." + far)


_FRESH = itertools.count(1)  # widths never used before in this process (see below)


def _expect_no_state(fn, logits, p, case):
    """Fail if the learner's answer depends on earlier calls (a sort order, threshold or
    mask kept between calls, say in a dict keyed by the shape): the same rows, widened by
    -inf columns to a shape not used before, are filtered right at a first call of that
    shape, and wrongly after a right answer on other logits (the rows reversed) at a second
    new shape. Returns quietly if that is not the fault."""
    width = logits.shape[-1]
    expected = _nucleus(logits, p)[0]
    try:
        answers = []
        for first in (None, logits.flip(-1)):
            extra = 101 + next(_FRESH)
            widen = lambda x: torch.cat(  # noqa: E731
                [x, x.new_full((len(x), extra), float("-inf"))], dim=-1)
            if first is not None:
                kept_first = torch.isfinite(_call_top_p(fn, widen(first), p, case))
                if not torch.equal(kept_first[:, :width], _nucleus(first, p)[0]):
                    return      # wrong on a first call too: not (only) a matter of state
            answers.append(torch.isfinite(_call_top_p(fn, widen(logits), p, case)))
    except CheckFailed:
        return
    fresh, after = (a[:, :width] for a in answers)
    if torch.equal(fresh, expected) and not torch.equal(after, fresh):
        row = int((after != fresh).any(dim=-1).nonzero()[0])
        fail(f"on {case}, your answer depends on what your function was called with "
             f"before: row {row} keeps tokens {_short_ids(fresh[row])} (right) at the first "
             f"call of its shape, but {_short_ids(after[row])} after a call on other logits "
             "of the same shape (the same rows, widened with -inf columns to a new shape).",
             "compute everything from each call's own arguments: a sort order, threshold "
             "or mask kept between calls (a global, a dict keyed by the shape, a default "
             "argument, functools.cache) is stale for the next logits.")


def _call_top_p(fn, logits, p, case):
    """Call the learner's filter; check what comes back is a tensor like `logits`."""
    before = logits.clone()
    try:
        out = call(fn, logits, p, name="top_p_filter", case=case,
                   hint_on_error=lambda error: _view_hint(error) or _index_hint(error, p))
    except CheckFailed as error:
        message = str(error).split("\nHint:")[0]
        if logits.dtype == torch.float16 and "overflow" in message:
            fail(message, "a fill such as -1e9 does not exist in float16 (its largest "
                          "magnitude is 65504): fill with float('-inf'), as the exercise "
                          "asks.")
        if _overflow_note(logits):
            fail(message, _overflow_note(logits).strip())
        raise
    if isinstance(out, torch.Tensor) and out.is_floating_point() and torch.isnan(out).any():
        fail(f"your output contains NaN on {case} (first positions: "
             f"{torch.isnan(out).nonzero()[:3].tolist()}).",
             ("multiplying a -inf logit by a 0/1 mask gives NaN (-inf x 0): use masked_fill "
              "to put -inf where tokens are removed." + _overflow_note(logits)))
    expect_tensor(out, logits.shape, logits.dtype, what="top_p_filter's output", case=case)
    if not torch.equal(torch.nan_to_num(logits), torch.nan_to_num(before)):
        fail(f"top_p_filter changed its input in place on {case}.",
             "use masked_fill (a new tensor), not masked_fill_ or an assignment into logits.")
    if out is logits or _shares_memory(out, logits):
        what = "logits itself" if out is logits else "a view of logits"
        fail(f"top_p_filter returned {what} on {case}, not a new tensor: a caller that "
             "writes into the result (say out[0, 0] = -inf) changes its own logits.",
             "return a new tensor like logits, also when every token is kept (p >= 1): "
             "logits.masked_fill(remove, float('-inf')) always makes one, or "
             "logits.clone().")
    return out


def _shares_memory(a, b):
    return (isinstance(a, torch.Tensor) and a.numel() > 0 and b.numel() > 0
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _index_hint(error, p):
    """For an index past a row's end (or before its start) in a gather or indexing: the
    count of kept tokens came out 0 or V + 1."""
    if not (isinstance(error, IndexError) or "out of bounds" in str(error)):
        return None
    at_one = (f" At p = {'1' if p >= 1 else f'{p:.12g}, just below 1,'} the running sum "
              "may never reach p (float rounding, or tokens of probability 0 from -inf "
              "logits), so (cumsum < p).sum() is V, and + 1 is V + 1, past the last index."
              if p > 1 - 1e-6 else "")
    return ("an index past the end of a row (or below 0): the number of kept tokens must "
            "be between 1 and V." + at_one + " Count the tokens whose mass above, "
            "cumsum - probs, is below p: that count is at least 1 and at most V.")


def _view_hint(error):
    return view_hint(error, "this input (a slice such as logits[:, -1, :], or a transposed "
                     "tensor such as q.transpose(1, 2), as a model makes them)")


def _overflow_note(logits):
    """For large logits, the likeliest cause of a wrong answer."""
    finite = logits[torch.isfinite(logits)].double()
    limit = 11 if logits.dtype == torch.float16 else 88  # exp overflows beyond
    if logits.dtype == torch.bfloat16 and finite.abs().max() > FLOAT16_MAX:
        return (f" These bfloat16 logits reach {finite.abs().max().item():,.0f}, beyond "
                f"float16's largest number ({FLOAT16_MAX:,}): cast to float16 "
                "(logits.half() for every half dtype) they are inf, and softmax of them "
                "NaN. bfloat16 has float32's range: compute the probabilities in float32 "
                "(logits.float()), for bfloat16 as for float16.")
    if finite.abs().max() > limit:
        return (f" With logits this large ({finite.abs().max().item():g}), exp() overflows "
                f"in {str(logits.dtype).replace('torch.', '')}: use torch.softmax, which "
                "subtracts each row's maximum first.")
    return ""


def _compare_nucleus(out, logits, p, case):
    kept, expected = _nucleus(logits, p)
    probs = torch.softmax(out.double(), dim=-1)                       # (batch, V)
    if torch.isposinf(out).any():
        fail(f"your output has +inf (not -inf) on {case} (first positions: "
             f"{torch.isposinf(out).nonzero()[:3].tolist()}), so its softmax is NaN.",
             "do no arithmetic that mixes the -inf entries already in the logits with "
             "others (logits - logits.mean(), or x - x.max() on an all -inf row, give "
             "+inf or NaN): keep the logits as they are and only masked_fill the removed "
             "tokens with -inf.")
    if torch.isnan(probs).any():
        mixes = ""
        if torch.isneginf(logits).any():
            mixes = (" This input already has -inf entries: arithmetic that mixes them "
                     "with the others (logits - logits.mean() is -inf or NaN everywhere, "
                     "-inf - (-inf) is NaN) makes the probabilities NaN, and then no token "
                     "passes the test. Compute softmax on the logits as they are.")
        fail(f"softmax of your output has NaN on {case}: a row has no token left (all -inf).",
             "the most probable token is always kept (the mass above it is 0 < p)."
             + mixes + _overflow_note(logits))
    if ((out >= 0).all() and (out <= 1).all() and (out.double().sum(-1) <= 1 + 1e-3).all()
            and not torch.allclose(probs, expected, atol=1e-3)):
        fail(f"your output on {case} looks like probabilities (between 0 and 1, each row "
             "summing to at most 1): the function should return logits, which sample_next "
             "turns into probabilities.",
             "return the logits with -inf for the removed tokens (masked_fill), not "
             "probabilities.")
    yours = probs > 0
    for row in range(len(out)):
        if not torch.equal(yours[row], kept[row]):
            _explain_wrong_set(out[row], logits[row], kept[row], yours[row], p,
                               f"on {case}, row {row}")
    removed = ~kept & ~torch.isneginf(out)
    if removed.any():
        row, j = (int(v) for v in removed.nonzero()[0])
        was = "" if torch.isfinite(logits[row, j]) else " (it was already -inf in the input)"
        fail(f"the right tokens are kept on {case}, but removed token {j} of row {row} has "
             f"the logit {out[row, j].item():.4g}{was}; the exercise asks for -inf "
             f"({int(removed.sum())} removed token(s) are not -inf).",
             "fill the removed tokens with float('-inf') (masked_fill(remove, "
             "float('-inf'))); a large negative number such as -1e9 or finfo.min only looks "
             "like probability 0, and nan_to_num turns the -inf already in the logits into "
             "a finite number.")
    tol = 2e-3 if logits.dtype in HALF else 1e-5
    if not torch.allclose(probs, expected, atol=tol, rtol=0):
        diff = (probs - expected).abs()
        row, j = (int(v) for v in torch.nonzero(diff == diff.max())[0])
        fail(f"the right tokens are kept on {case}, but their probabilities are wrong: at "
             f"row {row}, token {j} expected {expected[row, j].item():.4g}, got "
             f"{probs[row, j].item():.4g} (after softmax of your output).",
             "keep the kept tokens' logits as they are (or shift a whole row by one "
             "constant): the kept probabilities must stay in the same ratios and sum to 1.")
    if out.dtype == torch.float64:
        expect_float64_accuracy(probs, expected, what="the softmax of your output",
                                case=case)


def _explain_wrong_set(out, logits, kept, yours, p, where):
    """Fail with what the learner's kept set (one row) says about the fault."""
    want, got = _ids(kept), _ids(yours)
    missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
    if len(kept) <= 20:
        where = f"{where}: expected tokens {want} kept, got {got}"
    else:
        where = (f"{where} ({len(kept):,} tokens): expected {len(want):,} tokens kept, got "
                 f"{len(got):,} ({len(extra)} kept that should be removed, e.g. {extra[:5]}; "
                 f"{len(missing)} removed that should be kept, e.g. {missing[:5]})")
    probs = torch.softmax(logits.double(), dim=-1)
    softmax_out = torch.softmax(out.double(), dim=-1)
    _float64_boundary(logits, probs, extra + missing, p, where)
    if _overflow_note(logits):
        fail(f"{where}.", _overflow_note(logits).strip() + " Your kept set is wrong only "
             "here, where exp() of the raw logits is inf and inf / inf is NaN.")
    n_got = len(got)
    if len(missing) >= 10 and not extra and probs[missing].max() <= probs[got].min() and (
            n_got & (n_got - 1) == 0 or n_got % 100 == 0):
        # A cap (round 13): the nucleus searched among the top 1,024 or 2,048 tokens only
        # (a round count: told before the float16/bfloat16 rounding below).
        nxt = missing[int(probs[missing].argmax())]
        mass = _mass_above(probs[None])[0][nxt].item()
        fail(f"{where}: you keep the {len(got):,} most probable tokens and stop there, "
             f"although the mass of the tokens ranked above token {nxt} (the next one) is "
             f"{mass:.4g}, still below p={p}: the nucleus has {len(want):,} tokens here.",
             "a flat distribution has a nucleus of thousands of tokens: sort the whole "
             "row, probs.sort(dim=-1, descending=True), and take the running sum over all "
             "of it, not over topk(k) for a fixed k or some part of the vocabulary.")
    if logits.dtype in HALF and len(kept) > 1000:
        name, digits, step = (("float16", "about 3 significant digits", "0.0005")
                              if logits.dtype == torch.float16 else
                              ("bfloat16", "2 to 3 significant digits", "0.004"))
        # On the float16 rows (before the bfloat16 ones), the probabilities were computed
        # in float16 or cast back to it; on the bfloat16 rows, float16 has passed: the
        # upcast is likely made for float16 only.
        which = ("not only for float16, " if logits.dtype == torch.bfloat16 else "")
        near_p = f"{p:g}" if 0.5 <= p < 1 else "0.9"  # the steps hold from 0.5 to 1
        fail(f"{where}.",
             f"on long {name} rows, {name} rounding in the softmax and the running sum "
             f"moves the boundary ({name} has {digits}, and a sum near {near_p} grows in "
             f"steps of {step}): compute the probabilities and their cumsum in float32 or "
             f"float64 for every dtype (logits.float(); float64 logits stay float64), "
             f"{which}and "
             f"keep them there through the sort and the cumsum: probabilities computed in "
             f"float32 and cast back (probs.to(logits.dtype)) are {name} numbers again. "
             "Cast only the returned logits to the logits' dtype.")
    replaced = [j for j in extra if out[j] != logits[j]]
    if replaced:
        j = replaced[0]
        fail(f"{where}; token {j} should be removed, but your output gives it the logit "
             f"{out[j].item():g} (probability {softmax_out[j].item():.2g} after softmax).",
             "a removed token needs probability exactly 0: fill with float('-inf'); a "
             "logit of 0, or -1e4, is not probability 0.")
    if extra and not missing and probs[extra].max() < probs[want].min():
        mass = _mass_above(probs[None])[0]
        if (mass[extra] - p).abs().max() < 1e-6:
            fail(f"{where}: token(s) {extra} are kept although the tokens more probable than "
                 f"them have a total probability of exactly p={p}.",
                 "keep token j when the mass above it is below p (mass < p), not at most p "
                 "(mass <= p): the nucleus stops at the token whose probability makes the "
                 "running sum reach p.")
        near = probs[want].min().item()
        half = probs.half()
        if (logits.dtype == torch.float16 and half[extra].max() == half[want].min()
                and probs[extra].max().item() < near):
            fail(f"{where}: token(s) {extra} (probability {probs[extra].max().item():.6g}) "
                 f"are kept although they are less probable than the last kept token "
                 f"(probability {near:.6g}); rounded to float16, both are "
                 f"{half[want].min().item():.6g}.",
                 "compare the probabilities in float32 or float64 (the dtype you computed "
                 "them in), not after casting them or the threshold to float16, where "
                 "probabilities that differ in the 4th digit become equal; cast only the "
                 "returned logits to the input's dtype.")
        if probs[extra].max().item() > near * (1 - 1e-2):
            fail(f"{where}: token(s) {extra} (probability {probs[extra].max().item():.6g}) "
                 f"are kept although they are not tied with the last kept token "
                 f"(probability {near:.6g}).",
                 "only exact ties with the token that crosses p are kept: compare with "
                 "probs >= threshold (or mass_above < p) without a tolerance (no "
                 "torch.isclose, no threshold - eps).")
        every = p < 1 and torch.equal(yours, torch.isfinite(logits))
        fail(f"{where}: your nucleus is too large (it keeps {extra} after the mass of the "
             f"kept tokens has reached p={p}).",
             "stop at the token that crosses p: keep a token when the probability of the "
             "tokens ranked above it is still below p."
             + (f" You keep every token: p = {p:.12g} is below 1, so the least probable "
                "tokens, whose total is below 1 - p, go; only p = 1 keeps them all (no "
                "shortcut for p near 1)." if every else ""))
    if missing and not extra:
        crossing = probs[missing].max().item()
        if any(math.isclose(probs[i].item(), crossing, rel_tol=1e-6) for i in got):
            fail(f"{where}: token(s) {missing} are tied with a kept token but dropped.",
                 "a tie must not depend on the order of the tokens: keep every token whose "
                 "probability equals that of the token crossing p.")
        fail(f"{where}: token(s) {missing} are missing; the most probable one of them has "
             f"probability {crossing:.3g}.",
             "the token that crosses p belongs to the nucleus: keep token j when the mass "
             "of the tokens ranked above j (not including j) is below p (mass < p exactly, "
             "with no safety margin such as p - 1e-5).")
    if got == list(range(len(want))):
        fail(f"{where}: you keep the first {len(want)} positions of the vocabulary.",
             "the decision is made in sorted order: map it back to the tokens' own "
             "positions (scatter with the sort's indices, or compare each probability with "
             "the threshold), not the sorted ones." + _overflow_note(logits))
    order = probs.sort(descending=True, stable=True).indices
    if torch.equal(yours, kept[order][order]):
        fail(f"{where}: your kept set is the decision made in sorted order, read back with "
             "the sort's indices a second time (keep_sorted.gather(-1, idx)).",
             "gather(-1, idx) applies the sort's permutation again instead of undoing it: "
             "put each sorted decision back at its token's position with "
             "keep_sorted.scatter(-1, idx, keep_sorted), or compare each probability with "
             "the threshold (probs >= the probability of the last kept token).")
    if int(probs.argmax()) not in got:
        fail(f"{where}: the most probable token, {int(probs.argmax())}, is dropped.",
             "sort in descending order (descending=True): the nucleus is made of the most "
             "probable tokens." + _overflow_note(logits))
    fail(f"{where}.",
         "keep the most probable tokens of each row, up to and including the one that "
         "crosses p." + _overflow_note(logits))


def _float64_boundary(logits, probs, tokens, p, where):
    """For float64 logits: fail, naming float32, if every wrongly kept or removed token has
    a mass above it within float32 resolution of p but not exactly p (the case of masses
    1e-10 from p)."""
    if logits.dtype != torch.float64 or not tokens:
        return
    mass = _mass_above(probs[None])[0][tokens]
    gap = mass - p
    if not ((gap.abs() < 1e-6) & (gap != 0)).all():
        return
    j, m = tokens[0], mass[0].item()
    side = "above" if m > p else "below"
    step = torch.finfo(torch.float32).eps * 2.0 ** math.floor(math.log2(p))
    p32 = float(torch.tensor(p, dtype=torch.float32))
    fail(f"{where}: the tokens more probable than token {j} have a total probability of "
         f"{m:.12g}, {abs(m - p):.2g} {side} p={p} (so token {j} is "
         f"{'removed' if m >= p else 'kept'}); float64 resolves that, float32 (steps of "
         f"{step:.2g} here) does not.",
         "float64 logits get float64 accuracy: compute the probabilities, their running "
         "sum and the comparison with p in float64 (logits.to(torch.promote_types("
         "logits.dtype, torch.float32)) keeps float64 and turns float16 into float32)."
         + (f" A float32 tensor compared with p rounds p to float32 too ({p:g} becomes "
            f"{p32:.8g})." if p32 != p else ""))


def _gradient_cases():
    """(case, logits, p) for backward(): float32 at p = 0.8 and at p = 1 (every token kept:
    the gradient must flow there too), float16 and bfloat16 at p = 0.8 (a .detach() taken
    only for half logits). Every mass above a token is at least 0.014 from p (at p = 1,
    3.9e-4, the smallest probability), far beyond float32 rounding
    (tests/test_checks_ch09.py checks it)."""
    g = torch.Generator().manual_seed(10)
    logits = torch.randn(3, 9, generator=g) * 2
    half = torch.randn(3, 9, generator=torch.Generator().manual_seed(28)) * 2
    return [("3 rows of 9 logits with p=0.8, backward() through softmax(output)", logits,
             0.8),
            ("3 rows of 9 logits with p=1.0 (every token kept), backward() through "
             "softmax(output)", logits, 1.0)] + [
        (f"3 rows of 9 {str(dtype)[6:]} logits with p=0.8, backward() through "
         "softmax(output)", half.to(dtype), 0.8) for dtype in HALF]


def _check_top_p_gradient(fn):
    weights = torch.randn(3, 9, generator=_weights_generator())
    for case, values, p in _gradient_cases():
        _top_p_gradient(fn, values, p, weights, case)


def _weights_generator():
    """The generator of the gradient weights: the draw after the float32 logits of seed 10
    (the weights of the first gradient case since round 2)."""
    g = torch.Generator().manual_seed(10)
    torch.randn(3, 9, generator=g)
    return g


def _top_p_gradient(fn, values, p, weights, case):
    logits = values.clone().requires_grad_()
    half = logits.dtype in HALF
    out = call(fn, logits, p, name="top_p_filter", case=case)
    if not out.requires_grad:
        if half:
            fail(f"no gradient reaches the logits through your output on {case}: it has "
                 "requires_grad=False (in float32 it has one).",
                 "a path taken only for float16/bfloat16 logits leaves autograd: "
                 "logits.float() keeps the graph, logits.detach().float() (or "
                 "torch.no_grad(), .data) does not. Compute the mask from a copy if you "
                 "like, but apply it to the logits themselves: logits.masked_fill(remove, "
                 "float('-inf')).")
        fail(f"no gradient reaches the logits through your output on {case}.",
             "do not detach (no .detach(), .item(), .numpy() or torch.no_grad() on the "
             "logits): mask them with masked_fill, which the gradient passes through"
             + (", also when every token is kept (p >= 1): return logits.clone(), not "
                "logits.detach().clone()." if p >= 1 else "."))
    (torch.softmax(out.float(), dim=-1) * weights).sum().backward()
    reference = values.detach().double().requires_grad_()
    kept, _ = _nucleus(reference.detach(), p)
    filtered = reference.masked_fill(~kept, float("-inf"))
    (torch.softmax(filtered, dim=-1) * weights).sum().backward()
    if logits.grad is None or not torch.isfinite(logits.grad).all():
        fail(f"the gradient with respect to the logits is NaN or missing on {case}; the "
             "forward values are right.",
             "the backward pass met an infinite derivative: torch.where (or indexing) "
             "still sends gradient into the branch it does not pick, and 0 x inf is NaN. "
             "Typical sources: log(0) of a removed token (the log of renormalised "
             "probabilities), or logits * inf. Compute nothing infinite from the removed "
             "logits: put -inf in their place with masked_fill(remove, float('-inf')).")
    # A half gradient is the float32 one rounded to the half dtype (3e-3 of it at most).
    if not torch.allclose(logits.grad.double(), reference.grad, atol=1e-2 if half else 1e-5,
                          rtol=1e-2 if half else 1e-5):
        diff = (logits.grad.double() - reference.grad).abs().max().item()
        fail(f"the gradient with respect to the logits is wrong on {case} (largest "
             f"difference {diff:.3g}).",
             "the kept logits should pass through unchanged, the removed ones be replaced "
             "by -inf.")


# -- Exercise 9.2: one attention step with a KV cache -------------------------------------------


def _full_causal(Q, K, V, start=0):
    """Causal attention over a whole sequence, in float64: (b, h, n, hs) -> (b, h, n, hs).
    With `start`, only rows start..n-1 are computed (the others are 0): a long prompt's
    rows are never needed, and n x n scores of a prompt of thousands would be large."""
    Q, K, V = Q[:, :, start:].double(), K.double(), V.double()
    n = K.shape[2]
    scores = Q @ K.transpose(2, 3) / math.sqrt(Q.shape[-1])         # (b, h, n - start, n)
    future = torch.arange(n)[None, :] > torch.arange(start, n)[:, None]  # (n - start, n)
    rows = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ V
    return torch.cat([rows.new_zeros(*rows.shape[:2], start, rows.shape[3]), rows], dim=2)


def _step_cases():
    g = torch.Generator().manual_seed(11)
    return [
        ("batch 2, 3 heads, head size 5, 6 steps", torch.randn(3, 2, 3, 6, 5, generator=g),
         torch.float32, 1e-5),
        ("batch 1, 2 heads, head size 8, 60 steps", torch.randn(3, 1, 2, 60, 8, generator=g),
         torch.float32, 1e-5),
        ("large scores (queries times 40, scores in the hundreds), float32",
         torch.randn(3, 2, 2, 9, 4, generator=g) * torch.tensor([40.0, 1, 1])[:, None, None,
                                                                             None, None],
         torch.float32, 1e-4),
        ("float16, scores up to about 60", torch.randn(3, 2, 2, 7, 4, generator=g)
         * torch.tensor([6.0, 3, 1])[:, None, None, None, None], torch.float16, 2e-2),
        ("batch 2, 2 heads, head size 1, 4 steps", torch.randn(3, 2, 2, 4, 1, generator=g),
         torch.float32, 1e-5),
        (f"float16, q . k up to about 94,000, beyond float16's largest number "
         f"{FLOAT16_MAX:,} (the scaled scores, up to about 47,000, fit)", _beyond_float16(),
         torch.float16, 2e-2),
        # bfloat16 (8 significant bits): the output must be bfloat16 too. A computation in
        # bfloat16 itself is within 0.03 of the reference here (30 seeds), one in float32
        # within 0.008; the tolerance 0.1 leaves a margin of 3.
        ("bfloat16, batch 2, 2 heads, head size 4, scores up to about 30, 7 steps",
         torch.randn(3, 2, 2, 7, 4, generator=torch.Generator().manual_seed(15))
         * torch.tensor([3.0, 2, 1])[:, None, None, None, None], torch.bfloat16, 1e-1),
        # bfloat16 has float32's range: q . k here (up to about 200,000) is beyond
        # float16's largest number. Computed in float16 it is inf, and the output NaN.
        (f"bfloat16, q . k up to about 200,000 and values up to about 110,000, beyond "
         f"float16's largest number {FLOAT16_MAX:,} (bfloat16, like float32, holds them)",
         _beyond_float16_in_bf16(),
         torch.bfloat16, 1e-1),
        # Zero rows are keys and values like any others (a solution that takes them for
        # padding and masks them is wrong): a zero key has score 0.
        ("a key of zeros at position 2, a value of zeros at position 4 and both at "
         "position 5 (batch 2, 2 heads, head size 4, 7 steps)", _zero_rows(), torch.float32,
         1e-5),
        # float64 in, float64 out; its accuracy is checked last (check_attention_step).
        ("float64, batch 2, 3 heads, head size 3, 4 steps",
         torch.randn(3, 2, 3, 4, 3, generator=g), torch.float64, 1e-5),
    ]


FLOAT16_MAX = 65504


def _zero_rows():
    """(Q, K, V), batch 2, 2 heads, head size 4, 7 steps, with the key of position 2, the
    value of position 4 and both of position 5 all zeros (every sequence and head)."""
    Q, K, V = torch.randn(3, 2, 2, 7, 4, generator=torch.Generator().manual_seed(24))
    K[:, :, 2] = K[:, :, 5] = V[:, :, 4] = V[:, :, 5] = 0
    return Q, K, V


def _beyond_float16():
    """(Q, K, V), batch 1, 2 heads, head size 4, 6 steps, whose raw products q . k (up to
    94,500) pass float16's largest number, while the scaled scores (up to 47,250) do not:
    q's first feature is 200..210, the keys' 250..450 in steps of 40, in a shuffled order,
    the other features standard normal. The scores of one query differ by 4,000 or more,
    so the attention is one-hot in every precision (float16 rounds numbers near 40,000 in
    steps of 32): a solution that scales q first, or computes the scores in float32, is
    exact. q @ keys^T in float16 is inf, and the output NaN: accepted (the formula taken
    literally, as the chapter's model computes it, fails loudly). nan_to_num makes every
    overflowing score 65,504, a tie: a silent wrong answer, rejected."""
    g = torch.Generator().manual_seed(16)
    Q, K, V = torch.randn(3, 1, 2, 6, 4, generator=g)
    Q[..., 0] = 200 + 10 * torch.rand(1, 2, 6, generator=g)
    order = torch.stack([torch.randperm(6, generator=g) for _ in range(2)])   # (heads, n)
    K[..., 0] = 250.0 + 40 * order[None]
    return Q, K, V


def _beyond_float16_in_bf16():
    """(Q, K, V), batch 1, 2 heads, head size 4, 6 steps, for bfloat16: q's first feature is
    300..310, the keys' 450..650 in steps of 40 (shuffled), so every raw product q . k
    (135,000 to 202,000) and every scaled score (67,000 to 101,000) is beyond float16's
    largest number, 65,504. The scores of one query differ by 6,000 or more: the attention
    is one-hot in float32 and in bfloat16 itself (which rounds numbers near 90,000 in steps
    of 512), and the output is a value row, exact. Round 14: the values' first feature is
    beyond float16's range too (+-69,632 to +-109,568, multiples of 1,024, exact in
    bfloat16), so that bfloat16 inputs cast to float16 (then float32) give inf or NaN."""
    g = torch.Generator().manual_seed(21)
    Q, K, V = torch.randn(3, 1, 2, 6, 4, generator=g)
    Q[..., 0] = 300 + 10 * torch.rand(1, 2, 6, generator=g)
    order = torch.stack([torch.randperm(6, generator=g) for _ in range(2)])   # (heads, n)
    K[..., 0] = 450.0 + 40 * order[None]
    sign = torch.randint(0, 2, (1, 2, 6), generator=g) * 2 - 1
    V[..., 0] = sign * (69632.0 + 1024 * torch.randint(0, 40, (1, 2, 6), generator=g))
    return Q, K, V


def _bf16_beyond_float16(Q, K, t, V=None):
    """For bfloat16 inputs whose products q . k pass float16's largest number, the hint
    for a NaN or wrong output (computed in float16); otherwise ''."""
    if Q.dtype != torch.bfloat16:
        return ""
    raw = _raw_scores(Q, K, t).abs().max()
    entry = max(X[:, :, :t + 1].double().abs().max() for X in (Q, K, V) if X is not None)
    if raw <= FLOAT16_MAX and entry <= FLOAT16_MAX:
        return ""
    what = (f"q . k reaches {raw.item():,.0f}" if raw > FLOAT16_MAX else "")
    if entry > FLOAT16_MAX:
        what += (" and " if what else "") + (f"q, k or v has entries up to "
                                             f"{entry.item():,.0f}")
    return (f"{what} here: beyond float16's largest number "
            f"({FLOAT16_MAX:,}), well within bfloat16's and float32's range. Computed in "
            "float16 (or cast to float16 on the way), the scores or values are inf and the "
            "output NaN (or, clamped, wrong): compute "
            "in float32 for bfloat16 inputs, as for float16 ones (q.float(), "
            "keys.float(), values.float()), and cast the output back to bfloat16.")


def _half_precision(out, Q, K, V, t, diff):
    """For float16 or bfloat16 inputs, a hint when the output is what a computation in the
    other 16-bit dtype gives (bfloat16 keeps 8 significant bits, float16 11 and a range up
    to 65,504 only); otherwise ''."""
    other = {torch.float16: torch.bfloat16, torch.bfloat16: torch.float16}.get(Q.dtype)
    if other is None or not torch.isfinite(out).all():
        return ""
    q, keys, values = (X.to(other) for X in (Q[:, :, t:t + 1], K[:, :, :t + 1],
                                              V[:, :, :t + 1]))
    weights = torch.softmax(q @ keys.transpose(2, 3) / math.sqrt(Q.shape[-1]), dim=-1)
    theirs = (weights @ values).to(Q.dtype).double()
    if not torch.isfinite(theirs).all():
        return ""
    close = (out.double() - theirs).abs().max().item()
    if close > diff.max().item() / 4:
        return ""
    name = lambda dtype: str(dtype).replace("torch.", "")  # noqa: E731
    near = f"within {close:.2g} of" if close else "equal to"
    return (f"your output is off by {diff.max().item():.2g}, and {near} the "
            f"same attention computed in {name(other)}: {name(Q.dtype)} inputs computed in "
            f"{name(other)}"
            + (" (8 significant bits; float16 has 11)" if other == torch.bfloat16 else
               f" (whose largest number is {FLOAT16_MAX:,})")
            + ". Compute in float32 for float16 and bfloat16 inputs (q.float(), "
            f"keys.float(), values.float()) and cast the output back to {name(Q.dtype)}.")


def _cache_cases():
    """Caches the caller owns: (case, sequences, start). A prompt already in the cache at
    the first call (q, k, v and the cache as transposed views of (batch, n, heads,
    head_size) tensors, as a model makes them: not contiguous), and two sequences decoded
    in turn. A cache kept between calls (a global, a closure, a buffer) goes stale on
    both. Then a prompt of 120 positions, longer than the chapter model's block_size (64):
    a cache or attention limited to a window of the last 64 (or any number up to 120)
    positions is wrong there. Last, prompts of LONG_PROMPT positions (one head of size
    2, two steps: cheap), longer than the usual sliding windows (256, 1,024, 4,096), and
    of LONGEST_PROMPT, longer than a cache capped at 8,192 or 16,384 positions (round 12).
    check_attention_step then decodes two other sequences in turn under torch.no_grad()."""
    g = torch.Generator().manual_seed(14)
    prompt = [x.transpose(1, 2) for x in torch.randn(3, 2, 9, 2, 4, generator=g)]
    two = _two_sequences(generator=g)
    long_prompt = tuple(torch.randn(3, 1, 2, 123, 8,
                                    generator=torch.Generator().manual_seed(17)))
    longer = tuple(torch.randn(3, 1, 1, LONG_PROMPT + 2, 2,
                               generator=torch.Generator().manual_seed(18)))
    longest = tuple(torch.randn(3, 1, 1, LONGEST_PROMPT + 2, 2,
                                generator=torch.Generator().manual_seed(19)))
    return [
        ("a prompt of 5 positions already cached at the first call (batch 2, 2 heads, head "
         "size 4; q, k, v and the cache are transposed views, not contiguous), steps 5..8",
         [tuple(prompt)], 5),
        ("two sequences decoded in turn, one step of each (batch 1, 2 heads, head size 4, "
         "5 steps)", two, 0),
        ("a prompt of 120 positions already cached at the first call (batch 1, 2 heads, "
         "head size 8), steps 120..122", [long_prompt], 120),
        ("repeated tokens: step 3's key and value equal step 2's, and step 5's key equals "
         "step 4's (its value differs); batch 1, 2 heads, head size 4, steps 0..5",
         [_repeated_tokens()], 0),
        (f"a prompt of {LONG_PROMPT:,} positions already cached at the first call (batch "
         f"1, 1 head, head size 2), steps {LONG_PROMPT}..{LONG_PROMPT + 1}", [longer],
         LONG_PROMPT),
        (f"a prompt of {LONGEST_PROMPT:,} positions already cached at the first call "
         f"(batch 1, 1 head, head size 2), steps {LONGEST_PROMPT}..{LONGEST_PROMPT + 1}",
         [longest], LONGEST_PROMPT),
    ]


def _repeated_tokens():
    """(Q, K, V) of batch 1, 2 heads, 6 steps, head size 4 in which a token repeats: step
    3's key and value are step 2's, step 5's key is step 4's. Each is a new position all the
    same (round 13: a cache that skips a key equal to the last one does not grow)."""
    Q, K, V = torch.randn(3, 1, 2, 6, 4, generator=torch.Generator().manual_seed(27))
    K[:, :, 3], V[:, :, 3], K[:, :, 5] = K[:, :, 2], V[:, :, 2], K[:, :, 4]
    return Q, K, V


REPEATED_HINT = ("a token may repeat (\"the the\", spaces): a new key equal to the last "
                 "cached one is a new position all the same. Append k and v at every step, "
                 "torch.cat([past_keys, k], dim=2), without comparing them with the cache: "
                 "the cache must grow by one at every call.")


FAR_PROMPT = 4099  # gradients reach past a window of 2,048 or 4,096 positions (round 13)
LONG_PROMPT = 4200  # beyond a sliding window of 4,096 (Mistral's), 1,024 or 256
# Round 12: beyond a cache capped at 8,192 or 16,384 positions (a model's context length);
# one head of size 2 and two steps: about 0.1 s.
LONGEST_PROMPT = 16400
TWO_NO_GRAD = ("two other sequences decoded in turn under torch.no_grad() (generation; "
               "they share their first position, one prompt sampled twice), one step of "
               "each (batch 1, 2 heads, head size 4, 5 steps)")


def _two_sequences(seed=None, generator=None, shared=0):
    """Two (Q, K, V) of batch 1, 2 heads, 5 steps, head size 4; the second's first `shared`
    positions are the first's (one prompt, two continuations: a cache kept by the
    solution and keyed on the cache's shape and first key mixes them, round 13)."""
    g = generator or torch.Generator().manual_seed(seed)
    first, second = (tuple(torch.randn(3, 1, 2, 5, 4, generator=g)) for _ in range(2))
    second = tuple(torch.cat([a[:, :, :shared], b[:, :, shared:]], dim=2)
                   for a, b in zip(first, second))
    return [first, second]


def _diagnose_step(out, Q, K, V, t, hs, later=None, one_head=None, small=None):
    """A hint for a wrong output at step t, from what it equals instead. `later()` gives
    the learner's output at step 2 (from a right cache), or None: at step 1, attending to
    key 0 only is both 'the past only' and is_causal's top-left mask; step 2 tells them
    apart."""
    q, keys, values = (X.double() for X in (Q[:, :, t:t + 1], K[:, :, :t + 1],
                                            V[:, :, :t + 1]))

    def attend(keys, values, scale, q=q):
        return torch.softmax(q @ keys.transpose(2, 3) * scale, dim=-1) @ values

    same = lambda x: torch.allclose(out.double(), x, atol=1e-3)  # noqa: E731
    zero = _zero_rows_hint(out, q, keys, values, hs ** -0.5, t)
    if zero:    # before 'not itself': at the step of a zero key, both fit
        return zero
    if t == 1 and same(values[:, :, :1]):
        at_2 = later() if later is not None and Q.shape[2] > 2 else None
        if at_2 is not None and torch.allclose(
                at_2.double(), attend(K[:, :, :2].double(), V[:, :, :2].double(),
                                      hs ** -0.5, q=Q[:, :, 2:3].double()), atol=1e-3):
            return ("the new token does not attend to itself: at step 1 it sees key 0 "
                    "only, and at step 2 keys 0 and 1 only (the past, without itself). "
                    "Append k and v to the cache first, then attend over all t + 1 keys.")
        return ("the new token sees only key 0, not itself: with one query and t + 1 keys, "
                "scaled_dot_product_attention's is_causal=True aligns its mask to the top "
                "left and hides every key but the first. Use no mask in a cached step, and "
                "append k and v to the cache before attending.")
    if t > 1 and same(values[:, :, :1]):
        return ("only the first key is attended: with one query and t + 1 keys, "
                "scaled_dot_product_attention's is_causal=True aligns its mask to the top "
                "left, so the query sees key 0 alone. The new query may see every cached "
                "key: no mask is needed in a cached step.")
    if t > 1 and same(attend(keys[:, :, :-1], values[:, :, :-1], hs ** -0.5)):
        return ("the new token does not attend to itself: append k and v to the cache "
                "first, then attend over all t + 1 keys.")
    if t > 0 and same(values[:, :, -1:]):
        return ("the new token attends only to itself: attend over the cached keys and "
                "values as well, all t + 1 of them.")
    full = attend(keys, values, hs ** -0.5)
    window = _window(out, q, keys, values, hs ** -0.5, full)
    if window is not None:
        return (f"the new token attends over the last {window} positions only (a sliding "
                f"window): attend over all t + 1 = {t + 1} keys, the cache plus the new "
                "one; how many positions to keep is the caller's decision.")
    if same(values.sum(dim=2, keepdim=True)):
        return "the softmax runs over the wrong axis: normalise over the keys (dim=-1)."
    if same(attend(keys, values, 1.0)):
        return "the scores are not scaled: divide q . k by sqrt(head size)."
    heads = Q.shape[1]
    if t > 0 and hs != t + 1 and any(same(attend(keys, values, scale))
                                     for scale in ((t + 1) ** -0.5, 1.0 / (t + 1))):
        return ("the scale is wrong: it changes with the number of keys (t + 1 = "
                f"{t + 1} here). Divide q . k by sqrt(head size), q.shape[-1] = {hs}, "
                "the same at every step.")
    if heads > 1 and heads != hs and any(same(attend(keys, values, scale))
                                         for scale in (heads ** -0.5, 1.0 / heads)):
        return (f"the scale is wrong: it uses the number of heads ({heads}, "
                f"q.shape[1]); divide q . k by sqrt(head size), q.shape[-1] = {hs}.")
    if any(same(attend(keys, values, scale))
           for scale in (1.0 / hs, hs ** 0.5, (heads * hs) ** -0.5, 1.0 / (heads * hs))):
        return "the scale is wrong: divide q . k by sqrt(head size), the last axis of q."
    if same(attend(values, keys, hs ** -0.5)):
        return "keys and values are swapped: scores come from the keys, outputs from values."
    right = (out.double() - full).abs().amax(dim=(2, 3)) < 1e-3
    clamped = _clamp_hint(out, q, keys, values, hs ** -0.5, right, small)
    if clamped:
        return clamped
    if right.any():  # (batch, heads): right for some sequences or heads only
        wrong = [tuple(int(i) for i in ij) for ij in torch.nonzero(~right)[:3]]
        return (f"some (sequence, head) pairs are right and others wrong, e.g. {wrong}: every "
                "sequence of the batch and every head attends over its own keys (batched "
                "matrix products over the leading axes, no indexing of one sequence).")
    if heads > 1 and one_head is not None and one_head(t):
        return (f"with one head (head 0 alone) your output is right, with {heads} heads it "
                "is not: the heads are mixed (a permute or reshape that mixes heads with "
                "positions, or an einsum that sums over the heads). Every head attends "
                "over its own keys: keep (batch, heads) as leading batch axes, q @ "
                "keys.transpose(2, 3), shapes (batch, heads, 1, t + 1).")
    return ("compute softmax(q K^T / sqrt(head size)) V over the keys of all t + 1 "
            "positions (the cache plus the new one), with max subtraction (torch.softmax).")


def _window(out, q, keys, values, scale, full):
    """The w (2 <= w <= t) for which the output is attention over the last w keys only (a
    sliding window), the closest such match; None if none matches. Every window at once:
    sums over the last w positions are reversed running sums (float64). Over thousands of
    keys, windows a few keys apart give outputs within 1e-3 of each other: the closest one
    is the learner's (within float32 rounding of it)."""
    n = keys.shape[2]
    if n < 3:
        return None
    scores = q @ keys.transpose(2, 3) * scale                           # (b, h, 1, n)
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    totals = e.flip(-1).cumsum(-1).transpose(2, 3)                      # (b, h, n, 1)
    sums = (e.transpose(2, 3) * values).flip(2).cumsum(2)              # (b, h, n, hs)
    windows = sums / totals                   # row w - 1: attention over the last w keys
    off = (windows - out.double()).abs().amax(dim=(0, 1, 3))           # (n,)
    far = (windows - full).abs().amax(dim=(0, 1, 3))
    # A window's output far from the full one, or (over many keys, where windows differ
    # little) one that the output matches to within float32 rounding, 1000 times closer.
    fits = (off <= 1e-3) & ((far > 1e-2) | (off < far / 1000))
    fits[0] = fits[-1] = False                                          # w = 1 or t + 1
    if not fits.any():
        return None
    return int(torch.where(fits, off, torch.full_like(off, math.inf)).argmin()) + 1


def _zero_rows_hint(out, q, keys, values, scale, t):
    """For a cache with all-zero keys or values: the hint if the output is attention with
    those positions masked out (taken for padding); otherwise ''."""
    zero_keys = (keys == 0).all(-1)[:, :, None, :]                      # (b, h, 1, t + 1)
    zero_values = (values == 0).all(-1)[:, :, None, :]
    scores = q @ keys.transpose(2, 3) * scale
    for what, mask in (("key", zero_keys), ("value", zero_values),
                       ("key and value", zero_keys & zero_values),
                       ("key or value", zero_keys | zero_values)):
        if not mask.any() or mask.all(-1).any():
            continue
        masked = torch.softmax(scores.masked_fill(mask, -math.inf), dim=-1) @ values
        if torch.allclose(out.double(), masked, atol=1e-3):
            where = sorted({int(j) for j in mask.nonzero()[:, -1]})
            return (f"the {what} at position(s) {where} of the cache (of {t + 1}) is all "
                    "zeros, and your output is the attention with those positions left "
                    "out: a zero key is a key like any other (its score q . 0 = 0 gets the "
                    "weight exp(0 - max) / sum), and a zero value is averaged in like any "
                    "other. Nothing in the cache is padding: attend over all t + 1 "
                    "positions, with no mask.")
    return ""


BOUNDS = (5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 88, 100)  # clamps a solution may use


def _small_scores(fn, Q, K, V):
    """right(t): whether the learner's step t, from a right cache, is right when q is scaled
    down so that every score of step t is at most 4 in size; False if that fails."""
    def right(t):
        q = Q[:, :, t:t + 1].double()
        size = (q @ K[:, :, :t + 1].double().transpose(2, 3)).abs().max().item()
        Qs = Q.clone()
        Qs[:, :, t:t + 1] = (q * (4 * math.sqrt(Q.shape[-1]) / max(size, 1e-9))).to(Q.dtype)
        try:
            out = _step(fn, Qs, K, V, t, K[:, :, :t], V[:, :, :t], "small scores")[0]
        except CheckFailed:
            return False
        expected = _full_causal(Qs[:, :, :t + 1], K[:, :, :t + 1], V[:, :, :t + 1],
                                start=t)[:, :, t:t + 1]
        return (isinstance(out, torch.Tensor) and out.shape == expected.shape
                and bool((out.double() - expected).abs().max() <= 1e-4))
    return right


def _clamp_hint(out, q, keys, values, scale, right, small=None):
    """For an output right where every score is small and wrong where some are large: the
    hint that the scores are clamped (naming the bounds that fit), or, where no clamp of
    BOUNDS fits, that large scores are changed (if `small(t)` says the learner's step is
    right with q scaled down to small scores); otherwise ''."""
    scores = q @ keys.transpose(2, 3) * scale                           # (b, h, 1, t + 1)
    size = scores.abs().amax(dim=(2, 3))                                # (b, h)
    if right.all() or size.max() <= 5:
        return ""
    full = torch.softmax(scores, -1) @ values
    # Several bounds may fit one step (two scores of -60 and -100 clamped to [-5, 5] or to
    # [-30, 30] tie either way): all that fit are named.
    fits = {}
    for c in BOUNDS:
        for kind, lo, hi, bound in (("both", -c, c, f"[-{c}, {c}]"),
                                    ("max", None, c, f"at most {c}"),
                                    ("min", -c, None, f"at least -{c}")):
            capped = torch.softmax(scores.clamp(lo, hi), dim=-1) @ values
            if (capped - full).abs().max() > 1e-2 and \
                    torch.allclose(out.double(), capped, atol=1e-3):
                fits.setdefault(kind, []).append(bound)
    if fits:
        bounds = fits.get("both") or fits.get("max") or fits["min"]
        named = (bounds[0] if len(bounds) == 1 else
                 f"a bound such as {bounds[0]} or {bounds[-1]} (both give your output "
                 "here)")
        return (f"your output is the attention with the scores clamped to {named}; they "
                f"reach {size.max().item():.4g} in size here. A clamp changes every score "
                "beyond it, and the weights with them. exp() needs no guard: subtract each "
                "row's maximum before exp (torch.softmax does), which keeps every score as "
                "it is.")
    if ((~right).any() and right.any() and size[~right].min() > size[right].max()
            and small is not None and small(keys.shape[2] - 1)):
        return (f"your output is right for every (sequence, head) whose scores are small "
                f"(at most {size[right].max().item():.3g} in size) and wrong for those "
                f"with large ones ({size[~right].min().item():.3g} or more): large scores "
                "are changed (clamped or capped, or exp() guarded). Subtract each row's "
                "maximum before exp (torch.softmax does), and keep every score as it is.")
    return ""


@checker("attention_step")
def check_attention_step(fn):
    """Check `fn(q, k, v, past_keys, past_values)` -> (output, keys, values): one decoding
    step of causal attention with a KV cache. q, k, v are the new token's (batch, heads, 1,
    head_size); the cache holds (batch, heads, t, head_size), t = 0 at the first step. The
    output must equal row t of full causal attention over the sequence, and the returned
    cache the t + 1 keys and values in order; gradients must reach every position."""
    first = _first_call(fn)  # the very first call already carries a prompt: judged below
    for case, (Q, K, V), dtype, tol in _step_cases():
        Q, K, V = Q.to(dtype), K.to(dtype), V.to(dtype)
        _run_steps(fn, [(Q, K, V)], case, tol)
    for case, sequences, start in _cache_cases():
        _run_steps(fn, sequences, case, 1e-5, start=start)
    # Generation runs under torch.no_grad(): a path taken only there (its own cache reused
    # when the shapes match past_keys, round 12) mixes two sequences decoded in turn.
    with torch.no_grad():
        _run_steps(fn, _two_sequences(15, shared=1), TWO_NO_GRAD, 1e-5)
    _judge_first_call(fn, first)
    _check_step_gradient(fn)
    _check_step_gradient_without_q(fn)
    _check_long_gradients(fn)
    _check_half_gradients(fn)
    _check_fork(fn)
    # Last, so that a solution with another fault is told that one first: float64 inputs
    # are computed in float64 (within 1e-15 of the reference here; one computed in float32
    # and cast back is about 1e-7 off).
    for case, (Q, K, V), dtype, tol in _step_cases():
        if dtype == torch.float64:
            _run_steps(fn, [(Q.double(), K.double(), V.double())], case, FLOAT64_TOL)
    _step_matrix(fn)
    return passed("attention_step")


def _step_reference(q, k, v, past_keys, past_values):
    """One cached step in float64: (output, keys, values)."""
    keys, values = torch.cat([past_keys, k], dim=2), torch.cat([past_values, v], dim=2)
    weights = torch.softmax(q @ keys.transpose(2, 3) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ values, keys, values


def _dyadic(*shape, generator):
    """Multiples of 1/4 in [-2, 2]: with head size 4 (sqrt = 2) every score is exact in
    float32, also next to an offset of 1000, so that float32 rounding of the scores cannot
    move a right answer off the float64 reference."""
    return torch.randint(-8, 9, shape, generator=generator) / 4.0


def _step_matrix_cases():
    """(general, one key, rows far apart): one step of batch 2, 3 heads, head size 4 after
    t = 5 cached positions; the first step (t = 0, the new key alone); and batch 3, 2 heads,
    t = 4 whose (batch) rows of scores lie near +1000, 0 and -1000 (every key has a first
    feature 1, the query's first feature is 2 x the offset)."""
    g = torch.Generator().manual_seed(1292)
    q, k, v = (_dyadic(2, 3, 1, 4, generator=g) for _ in range(3))
    past_k, past_v = (_dyadic(2, 3, 5, 4, generator=g) for _ in range(2))
    q1, k1, v1 = (_dyadic(2, 1, 1, 4, generator=g) for _ in range(3))
    empty = torch.zeros(2, 1, 0, 4)
    fq, fk, fv = (_dyadic(3, 2, 1, 4, generator=g) for _ in range(3))
    fpk, fpv = (_dyadic(3, 2, 4, 4, generator=g) for _ in range(2))
    fk[..., 0], fpk[..., 0] = 1.0, 1.0
    fq[..., 0] = torch.tensor([2000.0, 0.0, -2000.0])[:, None, None]
    return ([("one step of batch 2, 3 heads, head size 4 after t = 5 cached positions",
              (q, k, v, past_k, past_v)),
             ("the first step (t = 0: an empty cache, the new key alone), batch 2, 1 head",
              (q1, k1, v1, empty, empty))],
            [("batch 3, 2 heads, t = 4, whose scores lie near +1000, 0 and -1000 (one "
              "batch entry each)", (fq, fk, fv, fpk, fpv))])


STEP_LARGE_HINT = ("scores this large overflow exp() unless each row's maximum is "
                   "subtracted first: torch.softmax(scores, dim=-1) does, over the last "
                   "axis of each (batch, head) row; never one maximum for the whole batch "
                   "or a clamp of the scores.")


def _step_matrix(fn):
    """The condition matrix (issue 12) on single steps: values and gradients (q, k, v and
    both caches) against the float64 reference, as given, on a second call with other
    values, non-contiguous, expanded (stride 0) and in float64; the general and t = 0 cases
    also in float16 and bfloat16, and with q times 1e5 (scores near 1e5, exact in float32)
    in float32 and float64.
    Dropped: float16/bfloat16 for the rows far apart (and 1e5 is float32/float64 only),
    since a step computed in the half dtype is ruled right (rounds 10 and 11) and float16
    scores near 1000 are rounded to 0.5 (near 1e5 they overflow: NaN from the literal
    formula, ruled acceptable); the rows far apart times 1e5 too, since their scores near
    2e8 are rounded in float32 and a tie of two keys could tip either way.
    Not covered by the matrix (the checker's own cases do it): several steps in a row, a
    prompt already cached, two sequences in turn, forks under no_grad, long caches."""
    cases, far = _step_matrix_cases()
    large = tuple(scaled(1e5, (0,), "q times 1e5 (scores near 1e5)", STEP_LARGE_HINT))
    kwargs = dict(name="attention_step", differentiable=(0, 1, 2, 3, 4))
    expect_conditions(fn, _step_reference, cases, conditions=STANDARD + large, **kwargs)
    exact = tuple(_far_float64(STEP_LARGE_HINT) if c is FLOAT64 else c for c in STANDARD
                  if c.dtype not in HALF)
    expect_conditions(fn, _step_reference, far, conditions=exact, **kwargs)


FIRST_CALL = ("the very first call, with a prompt of 5 positions already in the cache "
              "(batch 2, 2 heads, head size 4), step t=5")


def _first_call_inputs():
    g = torch.Generator().manual_seed(19)
    Q, K, V = torch.randn(3, 2, 2, 6, 4, generator=g)
    return Q, K, V


def _first_call(fn):
    """Call the learner's step once, before any other call, with a prompt already cached
    (so that 'the first call is t = 0' is wrong). Returns (result, None) or (None, the
    failure); _judge_first_call judges it once every other case has passed, so that a
    solution with another fault is told that one first."""
    Q, K, V = _first_call_inputs()
    try:
        return _step(fn, Q, K, V, 5, K[:, :, :5], V[:, :, :5], FIRST_CALL, owned=True), None
    except CheckFailed as error:
        return None, error


def _judge_first_call(fn, first):
    result, error = first
    if error is not None:
        raise error
    Q, K, V = _first_call_inputs()
    expected = _full_causal(Q, K, V)[:, :, 5:6]
    out, keys, values = result
    right = (isinstance(out, torch.Tensor) and out.shape == expected.shape
             and (out.double() - expected).abs().max() <= 1e-5
             and all(isinstance(x, torch.Tensor) and x.shape == full.shape
                     and torch.equal(x, full) for x, full in ((keys, K), (values, V))))
    if right:
        return
    again = _step(fn, Q, K, V, 5, K[:, :, :5], V[:, :, :5], FIRST_CALL + ", called again")
    shapes = ", ".join(f"{name} {tuple(x.shape) if isinstance(x, torch.Tensor) else '?'}"
                       for name, x in (("output", out), ("keys", keys), ("values", values)))
    later = ("the same call made again now is right" if
             (again[0].double() - expected).abs().max() <= 1e-5 else "")
    fail(f"your function's answer on {FIRST_CALL} is wrong ({shapes}; expected output "
         f"{tuple(expected.shape)}, keys and values {tuple(K.shape)})"
         + (f", while {later}" if later else "") + ": it treats its first call "
         "differently (as t = 0, say, with a call counter or a cache started then).",
         OWN_CACHE_HINT)


OWN_CACHE_HINT = (
    "build the returned cache from the arguments, torch.cat([past_keys, k], dim=2), and "
    "attend over it: the caller owns the cache. It may pass a prompt's keys and values at "
    "the first call, or decode several sequences in turn, so a cache kept between calls (a "
    "global or closure variable, a buffer written in place) goes stale.")


def _step(fn, Q, K, V, t, past_k, past_v, where, owned=False):
    """The learner's step t of one sequence: (output, keys, values), checked for type."""
    try:
        result = call(fn, Q[:, :, t:t + 1], K[:, :, t:t + 1], V[:, :, t:t + 1], past_k,
                      past_v, name="attention_step", case=where,
                      hint_on_error=lambda error: _view_hint(error) or _ones_hint(Q))
    except CheckFailed as error:
        if "Sizes of tensors must match" in str(error) or "size of tensor" in str(error):
            fail(str(error).split("\nHint:")[0], OWN_CACHE_HINT if owned else
                 "the cache grows along the positions axis: torch.cat([past_keys, k], "
                 "dim=2), shapes (batch, heads, t, head_size).")
        raise
    if not isinstance(result, tuple) or len(result) != 3:
        fail(f"attention_step should return a tuple (output, keys, values), got "
             f"{type(result).__name__} on {where}.")
    return result


def _ones_hint(Q):
    """For a crash on inputs with an axis of size 1 (every case before them has passed):
    squeeze() without a dim drops that axis too."""
    b, h, _, hs = Q.shape
    ones = [name for name, size in (("the batch", b), ("the number of heads", h),
                                    ("the head size", hs)) if size == 1]
    if not ones:
        return None
    return (f"here {' and '.join(ones)} is 1, and the earlier cases passed: squeeze() "
            "without a dim drops every axis of size 1, not only the query axis, and the "
            "shapes no longer line up. Name the axis, q.squeeze(2), or keep q 4-d: "
            "q @ keys.transpose(2, 3) gives the scores (batch, heads, 1, t + 1).")


def _one_head(fn, Q, K, V):
    """right(t): whether the learner's step t on head 0 alone (contiguous copies, a right
    cache) is right; False if that fails."""
    def right(t):
        Q1, K1, V1 = (x[:, :1].contiguous() for x in (Q, K, V))
        try:
            out = _step(fn, Q1, K1, V1, t, K1[:, :, :t], V1[:, :, :t], "head 0 alone")[0]
        except CheckFailed:
            return False
        return (isinstance(out, torch.Tensor) and out.shape == Q1[:, :, :1].shape
                and bool((out.double() - _full_causal(Q1, K1, V1)[:, :, t:t + 1])
                         .abs().max() <= 1e-3))
    return right


def _later(fn, Q, K, V):
    """The learner's output at step 2 from a right cache, or None if that fails."""
    def run():
        try:
            out = _step(fn, Q, K, V, 2, K[:, :, :2], V[:, :, :2], "step 2")[0]
        except CheckFailed:
            return None
        ok = isinstance(out, torch.Tensor) and out.shape == Q[:, :, :1].shape
        return out.detach() if ok else None
    return run


def _run_steps(fn, sequences, case, tol, start=0):
    """Decode `sequences` [(Q, K, V)] step by step from t = start (the cache then holds
    positions 0..start-1), one step of each sequence in turn."""
    b, h, n, hs = sequences[0][0].shape
    expected = [_full_causal(*qkv, start=start) for qkv in sequences]   # (b, h, n, hs)
    caches = [(K[:, :, :start], V[:, :, :start]) for Q, K, V in sequences]
    owned = start > 0 or len(sequences) > 1
    for t in range(start, n):
        for s, (Q, K, V) in enumerate(sequences):
            which = f", sequence {s}" if len(sequences) > 1 else ""
            where = f"{case}{which}, step t={t} ({t} positions cached)"
            out, keys, values = _step(fn, Q, K, V, t, *caches[s], where, owned)
            overflow = _float16_overflow(Q, K, t)
            if overflow and isinstance(out, torch.Tensor) and out.is_floating_point() \
                    and tuple(out.shape) == (b, h, 1, hs):
                # softmax(q @ keys^T / sqrt(d)) taken literally in float16 overflows to inf
                # here, and its output is NaN: a loud failure, as the course's own model
                # would give, and accepted. A finite wrong answer (nan_to_num) is not.
                honest = torch.isnan(out).any(-1, keepdim=True) & _overflowing_rows(Q, K, t)
                out = torch.where(honest, expected[s][:, :, t:t + 1].to(out.dtype), out)
            expect_tensor(out, (b, h, 1, hs), Q.dtype, what="the output", case=where,
                          nan_hint=_nan_hint(out, Q, K, t, V))
            repeated = t > 0 and torch.equal(K[:, :, t], K[:, :, t - 1])
            for name, got, full in (("keys", keys, K), ("values", values, V)):
                _expect_no_window(got, full, t, name, where)
                expect_tensor(got, (b, h, t + 1, hs), Q.dtype,
                              what=f"the returned tensor of {name}", case=where,
                              hint=REPEATED_HINT if repeated else
                              OWN_CACHE_HINT if owned else None)
                if not torch.equal(got, full[:, :, :t + 1]):
                    hint = ("append the new one at the end (dim=2), after the cached ones: "
                            "torch.cat([past, new], dim=2).")
                    if owned:
                        hint = OWN_CACHE_HINT
                    if repeated:
                        hint = REPEATED_HINT
                    if t > 0 and torch.equal(got, torch.cat([full[:, :, t:t + 1],
                                                             full[:, :, :t]], dim=2)):
                        hint = ("the new position is put first: positions must stay in "
                                "order, torch.cat([past, new], dim=2).")
                    if name == "keys" and torch.equal(got, V[:, :, :t + 1]):
                        hint = "the keys cache holds the values: keep k and v apart."
                    reference = full[:, :, :t + 1].double()
                    if name == "keys" and any(
                            torch.allclose(got.double(), reference * scale, rtol=1e-3,
                                           atol=1e-4)
                            for scale in (hs ** -0.5, 1.0 / hs, hs ** 0.5) if hs > 1):
                        hint = ("the order is right, but the cached keys are scaled: the "
                                "cache must hold k itself, as the caller passed it. Scale "
                                "the scores, q @ keys^T / sqrt(head size), not the keys "
                                "you return.")
                    new = full[:, :, t]
                    if (hint.startswith("append the new one")
                            and got.shape == reference.shape
                            and torch.equal(got[:, :, :t], full[:, :, :t])
                            and not torch.equal(got[:, :, t], new)):
                        size = (got[:, :, t].double() - new.double()).abs().max().item()
                        single = name[:-1]
                        what = (f"are in order, but altered: positions 0..{t - 1} are "
                                f"the cached ones, as given, but position {t}" if t else
                                "(one position): position 0")
                        fail(f"the returned {name} on {where} {what} is not the {single} "
                             f"you were given (largest difference {size:.3g}).",
                             f"the cache must hold the new {single} itself, as the caller "
                             f"passed it: torch.cat([past_{name}, {single[0]}], dim=2). "
                             "Normalise, scale or cast only what you compute the scores "
                             "with, never what you return.")
                    fail(f"the returned {name} on {where} are not the {t + 1} {name} of "
                         f"positions 0..{t} in order.", hint)
            diff = (out.double() - expected[s][:, :, t:t + 1]).abs()
            if not diff.max() <= tol:
                where_max = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
                if tol == FLOAT64_TOL and Q.dtype == torch.float64:  # the last check
                    size = diff.max().item()
                    fail(f"the output on {where} is {size:.2g} from the float64 reference "
                         f"(at index {where_max} expected "
                         f"{expected[s][:, :, t:t + 1][where_max].item():.12g}, got "
                         f"{out.double()[where_max].item():.12g}): "
                         + ("float32's accuracy, not float64's" if size > 1e-8 else
                            "more than float64 rounding")
                         + f" (a computation in float64 is within {FLOAT64_TOL:g}).",
                         "compute in q's dtype when it is float64: cast to float32 only "
                         "from float16 or bfloat16, e.g. dtype = torch.promote_types("
                         "q.dtype, torch.float32), compute with q.to(dtype), "
                         "keys.to(dtype) and values.to(dtype), and cast the output back "
                         "to q.dtype.")
                hint = _diagnose_step(out, Q, K, V, t, hs, later=_later(fn, Q, K, V),
                                      one_head=None if owned else _one_head(fn, Q, K, V),
                                      small=_small_scores(fn, Q, K, V))
                scores = (Q[:, :, t:t + 1].double() @ K[:, :, :t + 1].double()
                          .transpose(2, 3)) / math.sqrt(hs)                 # (b, h, 1, t+1)
                limit = 11 if Q.dtype == torch.float16 else 88  # exp overflows beyond
                zero = ((out.double().abs().amax(-1) == 0)
                        & (expected[s][:, :, t:t + 1].abs().amax(-1) > 0))
                if scores.max() > limit and zero.any():
                    hint = (f"your output is 0 where a score exceeds {limit} (here up "
                            f"to {scores.max().item():.4g}): exp() overflowed to inf, "
                            "inf / inf is NaN, and something (nan_to_num?) turned it into "
                            "0. Subtract each row's maximum score before exp, or use "
                            "torch.softmax, which does.")
                if owned and hint.startswith("compute softmax"):
                    hint = ((t >= LONG_PROMPT and _long_cache_hint(fn, Q, K, V, t))
                            or OWN_CACHE_HINT)
                if hint.startswith("compute softmax"):
                    hint = (_bf16_beyond_float16(Q, K, t, V)
                            or _half_precision(out, Q, K, V, t, diff) or hint)
                if overflow:
                    hint = overflow.format(f"; nan_to_num or a clamp turns every such "
                                           f"score into {FLOAT16_MAX:,}, and they tie")
                fail(f"the output is wrong on {where}: at index {where_max} expected "
                     f"{expected[s][:, :, t:t + 1][where_max].item():.4g}, got "
                     f"{out.double()[where_max].item():.4g} (largest difference "
                     f"{diff.max().item():.3g}).", hint)
            caches[s] = (keys, values)


def _long_cache_hint(fn, Q, K, V, t):
    """For a wrong output on the long prompt (every shorter cache has passed): the learner's
    step with caches of 128, 256, ... positions, each passed in whole at one call. If it is
    right on some and wrong from some length on, the hint says so (the fault grows with the
    number of keys, not with a cache kept between calls); otherwise None."""
    right = wrong = None
    for n in (128, 256, 512, 1024, 2048, 4096):
        if n >= t:
            break
        try:
            out = _step(fn, Q, K, V, n, K[:, :, :n], V[:, :, :n],
                        f"a cache of {n} positions")[0]
        except CheckFailed:
            return None
        expected = _full_causal(Q[:, :, :n + 1], K[:, :, :n + 1], V[:, :, :n + 1],
                                start=n)[:, :, n:n + 1]
        if (isinstance(out, torch.Tensor) and out.shape == expected.shape
                and (out.double() - expected).abs().max() <= 1e-5):
            if wrong is not None:
                return None     # right again after a wrong one: no pattern to name
            right = n + 1
        elif right is None:
            return None         # wrong on the shortest: nothing tells this from stale state
        elif wrong is None:
            wrong = n + 1
    seen = (f"right with {right:,} keys and wrong with {wrong:,}" if wrong else
            f"right with up to {right:,} keys and wrong with {t + 1:,}")
    return (f"given its whole cache at one call, your step is {seen} (caches of 128, 256, "
            "... positions passed in): the error grows with the number of keys, so it is "
            "not a cache kept between calls. A softmax taken over blocks of keys (an "
            "online softmax, as in flash attention) must rescale the running output and "
            "the running sum by exp(m_old - m_new) whenever the running maximum grows; or "
            "take torch.softmax over all t + 1 scores at once.")


def _expect_no_window(got, full, t, name, where):
    """Fail, naming the window, if the returned cache holds only the last positions."""
    if not (isinstance(got, torch.Tensor) and got.dim() == 4 and got.dtype == full.dtype
            and 0 < got.shape[2] < t + 1 and got.shape[:2] == full.shape[:2]
            and got.shape[3] == full.shape[3]):
        return
    window = got.shape[2]
    if torch.equal(got, full[:, :, t + 1 - window:t + 1]):
        fail(f"the returned tensor of {name} has shape {tuple(got.shape)} on {where}: "
             f"the last {window} positions only; expected "
             f"{tuple(full[:, :, :t + 1].shape)}, all {t + 1} positions 0..{t}.",
             "keep every position: the cache is torch.cat([past, new], dim=2), however "
             "long it grows. A window (the model's block_size, say) is the caller's "
             "decision, and attending over the last positions only changes the output of "
             "a longer sequence.")


def _nan_hint(out, Q, K, t, V=None):
    """The hint for NaN in the output at step t: exp() overflowing, or, where the NaN rows'
    own scores are small but far below the largest score of the whole tensor, whole rows
    underflowing to 0 after subtracting one maximum for the whole tensor (0/0)."""
    hint = ("exp() overflows for large scores: subtract each row's maximum before exp, or "
            "use torch.softmax, which does.")
    if _bf16_beyond_float16(Q, K, t, V):
        return _bf16_beyond_float16(Q, K, t, V)
    if not (isinstance(out, torch.Tensor) and out.is_floating_point()
            and out.shape == Q[:, :, :1].shape):
        return hint
    nan_rows = torch.isnan(out).any(-1)                                 # (b, h, 1)
    scores = _raw_scores(Q, K, t) / math.sqrt(Q.shape[-1])             # (b, h, 1, t + 1)
    row_max = scores.amax(-1)                                           # (b, h, 1)
    gap = scores.max() - row_max            # how far each row's maximum is below the top
    limit, tiny = (11, 15) if Q.dtype == torch.float16 else (88, 80)   # exp overflows,
    if (nan_rows.any() and (row_max[nan_rows] <= limit).all()          # exp(-tiny) ~ 0
            and (gap[nan_rows] > tiny).all()):
        row = tuple(int(i) for i in nan_rows.nonzero()[0][:2])
        return (f"every exp() of a whole row underflows to 0, and 0 / 0 is NaN: in the NaN "
                f"rows, e.g. (batch, head) {row}, every score (at most "
                f"{row_max[nan_rows].max().item():.3g}) lies far below the largest score "
                f"of the whole tensor (by {gap[nan_rows].min().item():.4g} or more), so "
                "subtracting one maximum for the whole tensor (scores.max()) makes "
                "exp(score - max) 0 for the whole row. Subtract each row's own maximum, "
                "scores.amax(dim=-1, keepdim=True), or use torch.softmax, which does.")
    return hint


def _raw_scores(Q, K, t):
    """q . k of step t before the scale, in float64: (b, h, 1, t + 1)."""
    return Q[:, :, t:t + 1].double() @ K[:, :, :t + 1].double().transpose(2, 3)


def _overflowing_rows(Q, K, t):
    """(b, h, 1, 1): the rows where a raw product q . k is above float16's largest number,
    so that q @ keys^T in float16 has +inf (and softmax of it is NaN)."""
    return (_raw_scores(Q, K, t) > FLOAT16_MAX).any(-1, keepdim=True)


def _float16_overflow(Q, K, t):
    """For float16 inputs whose raw products q . k at step t pass float16's largest number,
    the hint, with {} where the consequence goes; otherwise ''."""
    if Q.dtype != torch.float16:
        return ""
    raw = _raw_scores(Q, K, t).abs().max()
    if raw <= FLOAT16_MAX:
        return ""
    return (f"in float16, q @ keys^T overflows before the scale: q . k reaches "
            f"{raw.item():,.0f} here, beyond float16's largest number {FLOAT16_MAX:,}, so "
            "the score is inf, although the scaled score fits{}. Divide q by sqrt(head size) "
            "before the product, or compute the scores in float32 (q.float(), "
            "keys.float()) and cast the output back to q's dtype.")


FORK = ("two continuations of one sequence from the same cache (as beam search or sampling "
        "several continuations makes them), under torch.no_grad(): batch 1, 2 heads, head "
        "size 4, steps 0..3 decoded with your cache, then step t=4 of continuation {}")


def _check_fork(fn):
    """Two calls from the same cache, under torch.no_grad() (where a solution may take a
    fast path): the second must change nothing the first returned. A cache returned as a
    prefix view of a buffer that each call extends in place (keys = buf[:, :, :t + 1] after
    buf[:, :, t] = k) is right while one sequence is decoded, and here the second call
    overwrites the first one's newest key and value. call()'s earlier-results check does not
    see it: those results share their memory with the cache passed in, which that check
    leaves to the in-place check, and the in-place check sees only the positions 0..t - 1
    that past_keys shows."""
    g = torch.Generator().manual_seed(22)
    Q, K, V = torch.randn(3, 1, 2, 5, 4, generator=g)
    other = [x.clone() for x in (Q, K, V)]
    for x, new in zip(other, torch.randn(3, 1, 2, 1, 4, generator=g)):
        x[:, :, 4:] = new
    with torch.no_grad():
        past_k, past_v = K[:, :, :0], V[:, :, :0]
        for t in range(4):
            _, past_k, past_v = _step(fn, Q, K, V, t, past_k, past_v,
                                      FORK.format("A") + f" (step t={t})")
        results = []
        for which, (Qs, Ks, Vs) in zip("AB", ((Q, K, V), other)):
            result = _step(fn, Qs, Ks, Vs, 4, past_k, past_v, FORK.format(which))
            results.append((result, [x.clone() if isinstance(x, torch.Tensor) else x
                                     for x in result]))
    (first, copies), _ = results
    for what, now, then in zip(("output", "keys", "values"), first, copies):
        if isinstance(now, torch.Tensor) and isinstance(then, torch.Tensor) and \
                now.shape == then.shape and not torch.equal(now, then):
            newest = ""
            if what != "output" and now.dim() == 4 and now.shape[2] == 5:
                given = (K if what == "keys" else V)[:, :, 4:5]
                from_b = (other[1] if what == "keys" else other[2])[:, :, 4:5]
                if torch.equal(then[:, :, 4:5], given) and \
                        torch.equal(now[:, :, 4:5], from_b):
                    newest = (f": its newest position (4) now holds continuation B's "
                              f"{what[:-1]}")
            fail(f"on {FORK.format('B')}, the second call changed the {what} that the call "
                 f"for continuation A returned{newest}. Your cache shares memory between "
                 "calls (a buffer written in place, the returned cache a view of it), so "
                 "two calls that extend the same cache overwrite each other.",
                 "return new tensors: torch.cat([past_keys, k], dim=2) makes one at every "
                 "call, and leaves the cache passed in, and every cache returned before, "
                 "as they were, with or without torch.no_grad(). The caller owns the cache "
                 "and may extend it twice.")
    for (result, _), which, (Qs, Ks, Vs) in zip(results, "AB", ((Q, K, V), other)):
        out, keys, values = result
        expected = _full_causal(Qs, Ks, Vs, start=4)[:, :, 4:5]
        if not (isinstance(out, torch.Tensor) and out.shape == expected.shape
                and (out.double() - expected).abs().max() <= 1e-5
                and all(isinstance(x, torch.Tensor) and torch.equal(x, full)
                        for x, full in ((keys, Ks), (values, Vs)))):
            fail(f"your output or returned cache is wrong on {FORK.format(which)}, while "
                 "the same steps were right when each call had a cache of its own.",
                 OWN_CACHE_HINT)


def _check_step_gradient(fn):
    g = torch.Generator().manual_seed(12)
    Q, K, V = (torch.randn(2, 2, 7, 4, generator=g).requires_grad_() for _ in range(3))
    weights = torch.randn(2, 2, 7, 4, generator=g)
    case = "batch 2, 2 heads, head size 4, 7 steps, backward() through every output"
    past_k = past_v = torch.zeros(2, 2, 0, 4)
    outputs = []
    for t in range(7):
        out, past_k, past_v = call(fn, Q[:, :, t:t + 1], K[:, :, t:t + 1], V[:, :, t:t + 1],
                                   past_k, past_v, name="attention_step", case=case)
        outputs.append(out)
    out = torch.cat(outputs, dim=2)
    if not out.requires_grad:
        fail(f"no gradient flows through the output on {case}.",
             "do not detach (no .detach(), .item(), .numpy() or torch.no_grad()).")
    try:
        (out * weights).sum().backward()
    except RuntimeError as error:
        fail(f"backward() through your steps failed on {case}: "
             f"{str(error).split('Hint:')[0].strip()}",
             INPLACE_HINT + " In a step: e = e / e.sum(-1, keepdim=True), not e /= ...; "
             "and extend the cache with torch.cat, not by writing into a buffer.")
    Q2, K2, V2 = (x.detach().clone().requires_grad_() for x in (Q, K, V))
    (_full_causal(Q2, K2, V2).float() * weights).sum().backward()
    for name, x, ref in (("queries", Q, Q2), ("keys", K, K2), ("values", V, V2)):
        if x.grad is None and name == "queries":
            others = " and ".join(n for n, y in (("keys", K), ("values", V))
                                  if y.grad is not None)
            fail(f"no gradient reaches the queries on {case}"
                 + (f" (the {others} get one)." if others else "."),
                 "the queries are never cached, so the cache is not the cause: the "
                 "attention weights are computed outside autograd (under torch.no_grad(), "
                 "or from q.detach() or q.data). Compute the scores and their softmax "
                 "with autograd on; the weights depend on q and the keys.")
        if x.grad is None or not torch.isfinite(x.grad).all():
            fail(f"the gradient with respect to the {name} is missing or not finite on {case}.",
                 "the cache must keep the keys and values as computed (no .detach()), so "
                 "later steps send gradient back to earlier positions; and the attention "
                 "weights must be computed with autograd on (no torch.no_grad(), .detach() "
                 "or .data on the scores).")
        if not torch.allclose(x.grad, ref.grad, atol=1e-5, rtol=1e-4):
            t = int((x.grad - ref.grad).abs().amax(dim=(0, 1, 3)).argmax())
            fail(f"the gradient with respect to the {name} is wrong on {case}, first at "
                 f"position {t}.",
                 "a cache that stores detached keys or values cuts the gradient from later "
                 "steps to earlier positions: store k and v themselves.")


def _check_step_gradient_without_q(fn):
    """Gradients for the keys and values when q needs none (a frozen query projection, or a
    gradient wanted for the cache only): a prompt of 3 positions already cached (slices of
    keys and values that require grad), steps 3..6, q without grad. A cache or attention
    computed under torch.set_grad_enabled(q.requires_grad) loses the graph here."""
    g = torch.Generator().manual_seed(23)
    Q, K, V = torch.randn(3, 2, 2, 7, 4, generator=g)
    K, V = K.requires_grad_(), V.requires_grad_()
    weights = torch.randn(2, 2, 4, 4, generator=g)
    case = ("batch 2, 2 heads, head size 4, a prompt of 3 positions already cached, steps "
            "3..6, backward() through every output; q needs no gradient, the keys and "
            "values (the cached ones too) do")
    past_k, past_v = K[:, :, :3], V[:, :, :3]
    outputs = []
    for t in range(3, 7):
        out, past_k, past_v = _step(fn, Q, K, V, t, past_k, past_v, case + f", step t={t}")
        outputs.append(out)
    out = torch.cat(outputs, dim=2)
    if not out.requires_grad:
        fail(f"no gradient flows through the output on {case}.",
             "the output depends on the keys and values as well as on q: build the cache "
             "and compute the attention with autograd on whether or not q requires grad "
             "(no torch.no_grad(), torch.set_grad_enabled(q.requires_grad) or .detach() "
             "around them).")
    try:
        (out * weights).sum().backward()
    except RuntimeError as error:
        fail(f"backward() through your steps failed on {case}: "
             f"{str(error).split('Hint:')[0].strip()}",
             INPLACE_HINT + " In a step: e = e / e.sum(-1, keepdim=True), not e /= ...; "
             "and extend the cache with torch.cat, not by writing into a buffer.")
    K2, V2 = (x.detach().clone().requires_grad_() for x in (K, V))
    (_full_causal(Q, K2, V2, start=3)[:, :, 3:].float() * weights).sum().backward()
    for name, x, ref in (("keys", K, K2), ("values", V, V2)):
        if x.grad is None or not torch.isfinite(x.grad).all():
            fail(f"the gradient with respect to the {name} is missing or not finite on "
                 f"{case}.",
                 "the cache must keep the keys and values as given (no .detach()), and the "
                 "attention must be computed with autograd on, whether or not q requires "
                 "grad.")
        if not torch.allclose(x.grad, ref.grad, atol=1e-5, rtol=1e-4):
            t = int((x.grad - ref.grad).abs().amax(dim=(0, 1, 3)).argmax())
            fail(f"the gradient with respect to the {name} is wrong on {case}, first at "
                 f"position {t}.",
                 "a cache that stores detached keys or values cuts the gradient from later "
                 "steps to earlier positions: store k and v themselves.")


def _decode_with_grad(fn, Q, K, V, start, case):
    """Decode steps start..n-1 of (Q, K, V) (leaves that require grad; the prompt 0..start-1
    already cached as slices of K and V), backward() through every output with seeded
    weights, and return the weights (or fail with a message if no gradient flows)."""
    weights = torch.randn(*Q[:, :, start:].shape,
                          generator=torch.Generator().manual_seed(25))
    past_k, past_v = K[:, :, :start], V[:, :, :start]
    outputs = []
    for t in range(start, Q.shape[2]):
        out, past_k, past_v = _step(fn, Q, K, V, t, past_k, past_v, f"{case}, step t={t}")
        outputs.append(out)
    out = torch.cat(outputs, dim=2)
    if not out.requires_grad:
        half = Q.dtype in HALF
        fail(f"no gradient flows through the output on {case}: it has requires_grad=False"
             + (" (in float32 it has one)." if half else "."),
             ("a path taken only for float16/bfloat16 inputs leaves autograd: q.float() "
              "keeps the graph, q.detach().float() (or torch.no_grad(), .data) does not. "
              "Mixed-precision training runs exactly these dtypes." if half else
              "do not detach (no .detach(), .item(), .numpy() or torch.no_grad())."))
    try:
        (out.double() * weights).sum().backward()
    except RuntimeError as error:
        fail(f"backward() through your steps failed on {case}: "
             f"{str(error).split('Hint:')[0].strip()}",
             INPLACE_HINT + " In a step: e = e / e.sum(-1, keepdim=True), not e /= ...; "
             "and extend the cache with torch.cat, not by writing into a buffer.")
    return weights


def _span(first, last):
    return f"{first}" if first == last else f"{first}..{last}"


def _check_long_gradients(fn):
    """Gradients that reach far back: a prompt of 300 positions already cached, two steps,
    a prompt of 36, four steps (40 positions), and one of FAR_PROMPT (4,099) positions with
    one head of size 2, two steps (round 13: windows of 512 or 2,048). A cache that
    detaches its positions
    older than 32 (or 256) steps, truncated backpropagation, has right outputs and the
    right gradient for the last positions, and none (or too little) for the early ones.
    Few calls: every call compares the results of all earlier calls (_core's check that
    later calls change nothing), so a long decode costs far more than its attention."""
    g = torch.Generator().manual_seed(26)
    for case, (Q, K, V), start in (
            ("batch 1, 2 heads, head size 4, a prompt of 300 positions already cached (the "
             "keys and values require grad), steps 300..301, backward() through both "
             "outputs", torch.randn(3, 1, 2, 302, 4, generator=g), 300),
            ("batch 1, 2 heads, head size 4, a prompt of 36 positions already cached (the "
             "keys and values require grad), steps 36..39, backward() through every output",
             torch.randn(3, 1, 2, 40, 4, generator=g), 36),
            # Round 13: a gradient window of 512 or 2,048 positions (older keys or values
            # detached). One head of size 2, two steps: cheap.
            (f"batch 1, 1 head, head size 2, a prompt of {FAR_PROMPT:,} positions already "
             f"cached (the keys and values require grad), steps {FAR_PROMPT}.."
             f"{FAR_PROMPT + 1}, backward() through both outputs",
             torch.randn(3, 1, 1, FAR_PROMPT + 2, 2, generator=g), FAR_PROMPT)):
        Q, K, V = (x.requires_grad_() for x in (Q, K, V))
        weights = _decode_with_grad(fn, Q, K, V, start, case)
        refs = [x.detach().clone().requires_grad_() for x in (Q, K, V)]
        (_full_causal(*refs, start=start)[:, :, start:] * weights).sum().backward()
        for name, x, ref in (("queries", Q, refs[0]), ("keys", K, refs[1]),
                             ("values", V, refs[2])):
            got = x.grad if name != "queries" or x.grad is None else x.grad[:, :, start:]
            want = ref.grad if name != "queries" else ref.grad[:, :, start:]
            # Over thousands of positions each gets a small share: the tolerances scale
            # with the largest gradient (1 or more on the short prompts, as before).
            big = min(1.0, want.abs().max().item())
            if got is not None and torch.isfinite(got).all() and \
                    torch.allclose(got, want.float(), atol=1e-5 * big, rtol=1e-4):
                continue
            if got is None or not torch.isfinite(got).all():
                fail(f"the gradient with respect to the {name} is missing or not finite "
                     f"on {case}.",
                     "the cache must keep the keys and values as given (no .detach()), and "
                     "the attention must be computed with autograd on.")
            wrong = (got.double() - want).abs().amax(dim=(0, 1, 3)) > 1e-4 * big  # (n,)
            none = (got == 0).all(-1).all(0).all(0) & (want != 0).any(-1).any(0).any(0)
            last = int(wrong.nonzero().max())
            cut = int(none.long().cumprod(0).sum())         # positions 0..cut - 1 get none
            # A window cuts a prefix: every position up to `last` wrong, or (over thousands
            # of positions, where some gradients are tiny anyway) all but `last` none.
            if name != "queries" and (wrong[:last + 1].all() or cut >= last) and \
                    last + 1 < len(wrong):
                got_there = (f"{_span(0, cut - 1)} get none (0)" if cut else "")
                if cut <= last:
                    got_there += (", positions " if cut else "") + (
                        f"{_span(cut, last)} get too little (the later steps' share is "
                        "missing)")
                fail(f"the gradient with respect to the {name} is cut on {case}: positions "
                     f"{got_there}, while positions {_span(last + 1, x.shape[2] - 1)} get "
                     "the right one; the last steps see every "
                     "position, and their outputs depend on all of them.",
                     "keep the whole cache in the graph: no .detach() of older positions "
                     "(truncated backpropagation through the cache) and no window. Store "
                     "k and v themselves; where to cut the gradient is the caller's "
                     "decision.")
            first = int(wrong.nonzero().min()) + (start if name == "queries" else 0)
            fail(f"the gradient with respect to the {name} is wrong on {case}, first at "
                 f"position {first}.",
                 "a cache that stores detached keys or values cuts the gradient from later "
                 "steps to earlier positions: store k and v themselves.")


def _check_half_gradients(fn):
    """backward() in float16 and bfloat16: a prompt of 4 positions cached, steps 4..5. The
    gradients must flow (a .detach() taken only for half inputs fails here) and be near the
    float64 reference's. Computed in the half dtype itself, they are within 0.011 x (1 + the
    largest gradient) of it for 300 seeds (bfloat16; float16 0.002); in float32, within
    0.005. The tolerance is 0.1 x (1 + the largest gradient)."""
    for dtype in HALF:
        name = str(dtype).replace("torch.", "")
        g = torch.Generator().manual_seed(27)
        Q, K, V = (torch.randn(3, 1, 2, 6, 4, generator=g)
                   * torch.tensor([2.0, 1, 1])[:, None, None, None, None]).to(dtype)
        Q, K, V = (x.requires_grad_() for x in (Q, K, V))
        case = (f"{name}, batch 1, 2 heads, head size 4, a prompt of 4 positions already "
                "cached, steps 4..5, backward() through every output")
        weights = _decode_with_grad(fn, Q, K, V, 4, case)
        refs = [x.detach().double().requires_grad_() for x in (Q, K, V)]
        (_full_causal(*refs, start=4)[:, :, 4:] * weights).sum().backward()
        for what, x, ref in (("queries", Q, refs[0]), ("keys", K, refs[1]),
                             ("values", V, refs[2])):
            if x.grad is None or not torch.isfinite(x.grad).all():
                fail(f"the gradient with respect to the {what} is missing or not finite on "
                     f"{case} (in float32 it is right).",
                     "a path taken only for float16/bfloat16 inputs leaves autograd: "
                     "q.float() keeps the graph, q.detach().float() (or torch.no_grad(), "
                     ".data) does not; compute with autograd on in every dtype.")
            size = (x.grad.double() - ref.grad).abs().max().item()
            if size > 0.1 * (1 + ref.grad.abs().max().item()):
                fail(f"the gradient with respect to the {what} is wrong on {case}: it is "
                     f"{size:.3g} from the float64 reference (largest gradient "
                     f"{ref.grad.abs().max().item():.3g}), while in float32 it is right.",
                     "a path taken only for float16/bfloat16 inputs computes something "
                     "outside autograd (a detached copy, .data, torch.no_grad()): cast "
                     "with q.float(), keys.float(), values.float(), which keep the graph.")
