"""Checkers for chapter 8's exercises: BERT's 80/10/10 masking, and its parameter count.

The masking checker is statistical. It calls the learner's function three times on the same
batch of 4000 x 32 tokens (ordinary ids drawn by Zipf's law, so that replacements copied from
the batch are far from uniform) (89,353 ordinary positions per call; the global random generators
are seeded first, so the verdict is the same on every run) and tests, on the pooled calls
(268,059 ordinary positions, about 40,200 chosen, about 3,950 random replacements):

  test                                          tolerance      false failure of a right
                                                               solution
  share of ordinary positions chosen = 0.15     5.5 SE         3.8e-8 (exact binomial)
  share of chosen positions made [MASK] = 0.8   5.5 SE         3.9e-8 (exact binomial)
  share of chosen positions left unchanged
    = 0.1 + 0.1 q, q in [0, 1/60] (a random
    token may equal the original one)           5.5 SE + slack < 4.1e-8 (exact binomial)
  chosen counts per row: dispersion index = 1   5.5 SE         < 5.7e-8 (normal, upper tail
                                                               Edgeworth-corrected)
  [MASK] counts among each row's chosen
    positions: dispersion index = 1             5.5 SE         < 5.7e-8 (same)
  chosen share per column against the pooled
    share (32 columns, the largest |z|)         6 SE           32 x 2.0e-9 = 6.3e-8
  [MASK] share per column among the chosen,
    against the pooled share (the largest |z|)  6 SE           32 x 2.0e-9 = 6.3e-8
  share of replacements already present in
    their own row (about 23%)                   5.5 SE + slack < 4e-8 (normal)
  count of each of the 60 ordinary ids among
    the replacements (mean about 66)            5 to 123       4.5e-9 (exact binomial)
  every ordinary id (each occurs 900 times or
    more) chosen at least once                  -              0.85^300 < 1e-21
  replacements in one row agreeing (1/60)       > 1/4 of >= 50
                                                pairs          < 3e-12 (binomial)
  replacements of one position in two calls
    agreeing (1/60)                             > 1/2 of >= 20 < 1e-13 x 3 pairs of calls
  each call's chosen share = 0.15               5.5 SE         3 x 3.8e-8
  positions chosen in one call chosen again in
    another (0.15); same 80/10/10 decision for
    a position chosen twice (0.66)              > 1/2; > 0.9   < 1e-100 (binomial)
  the same column chosen 1, 2, R/4, R/3, R/2
    rows further down (0.15)                    > 1/2          < 1e-100
  rows with 9 or more chosen (a cap per row)    5.5 SE below   1.9e-8 (normal)
  one more call, vocabulary of 200: share of
    replacements beyond the batch's ids (0.7)   < 0.35         < 1e-40
  two calls on 1,200 rows holding [MASK] and
    rows without an ordinary token (contiguous,
    then another batch of the same shape as a
    non-contiguous column slice): no special
    position chosen or changed                  exact          0
  one call, vocabulary of 2 ordinary ids (8,000
    rows, about 26,800 chosen): [MASK] share
    0.8; unchanged share 0.1 + 0.1/2 = 0.15     5.5 SE each    2 x 3.8e-8 (exact binomial)
  neighbours chosen together or apart:
    Mantel-Haenszel z of positions 1 apart
    (strata: call x column), and |z5| < |z1|/2 6 SE           3.9e-9 (normal, x 2)
  rows with 1 or 2 ordinary tokens, both calls
    of the awkward batches (1,440 positions):
    chosen share 0.15                           6 SE           4.4e-9 (exact binomial)
  one call, vocabulary of 3 ordinary ids: each
    id's count among the chosen positions not
    made [MASK] (1/2 [original] + 1/6 each)     6.5 SE         4.8e-10 (normal, x 2)
  book.set_seed(s) twice: the same masks        exact          0
  the [MASK] count within one position of 80%
    of the chosen at every one of the 8 calls   -              < 1e-12 (product of
                                                               3 / sqrt(2 pi n 0.16))
  [MASK] share among the chosen positions
    whose left (right) neighbour is chosen too
    (about 5,300 each), and whose neighbour in
    the same column of the row above (below)
    is (about 5,100 each) = 0.8                 6 SE           2 x 2.3e-9 + 2 x 2.5e-9
                                                               (exact binomial)
  a batch of special tokens only (nothing to
    choose): inputs = tokens, labels -100, and
    neither is tokens itself or a view of it   exact          0
  one more call on 120,000 rows (2,676,994
    ordinary positions, about 401,500 chosen):
    chosen share 0.15; [MASK] share 0.8;
    unchanged share 0.1 + 0.1/60                5.5 SE each    3 x 3.9e-8 (exact binomial)
  the random replacements of that call: pairs
    of neighbours (j, j + 1), j even and j odd
    (about 100 each), agreeing (1/60); pairs
    in one row (1st and 2nd, 3rd and 4th, ...;
    about 5,100), agreeing (1/60)               cut-offs at    4 x 1e-9 (exact binomial,
                                                1e-9           at 58/59^2 and 1/59)
  the random replacements of that call whose
    left (right) neighbour, or whose neighbour
    in the same column of the row above
    (below), is chosen (about 5,200 and 5,000
    each): share among the first 9 of the 60
    ordinary ids, and among the last 9 (9/60)   cut-off at     8 x 1e-9 (exact binomial,
                                                1e-9           upper tail at 9/59)
  the random replacements of that call that
    differ from their original (about 39,500):
    counts of the 60 ids, against uniform on
    the 59 ids other than the original
    (chi-square, 59 degrees of freedom; Monte
    Carlo of 50,000 right calls: mean 59.0,
    variance 118)                               > 170          1e-12 (chi-square tail)
  one more call, vocabulary of 200 ordinary
    ids, 20,000 rows (about 6,700 random
    replacements): every id drawn               -              1.0e-12 (union bound)
  choices and [MASK] decisions of rows i and
    i + s, same column, for every lag s (the
    main calls' 12,000 rows and the 120,000-row
    call; the 8 most ordinary columns)          |z| > 8        4 x 1.3e-9 (normal, x 8.6
                                                               Edgeworth, x 2 x lags)
  100 calls on one batch of 4 x 32 ordinary
    tokens: two or more pairs of calls with
    the same masking                            -              < 1e-26
  total                                                        < 8.0e-7, below one in a
                                                               million

Seeding inside the function (torch.manual_seed, a torch.Generator's manual_seed, numpy's
seed, RandomState, default_rng with a seed, random.seed with a value) is watched during the
first of those two calls (sys.setprofile, and numpy's constructors wrapped); it fails the
check only when the masks then ignore the caller's seed (the same seed twice gives other
masks, or two seeds the same ones): a call counter or the clock. Since round 7 every
solution must follow the caller's seed (book.set_seed(s) before two calls gives the same
masks twice), so a generator made without a seed (default_rng(), random.Random()) or kept at
module level fails too, with its own message. When the rows spread too much, the chosen
share is compared between rows with different numbers of ordinary tokens (z-scores divided
by the square root of the dispersion index), so that a rate rescaled per row is named as
such.

The dispersion indices are computed at the observed (pooled) rates, and the tests that find a
structural fault (which positions, which rows, which replacements) run before the overall
rates, which such a fault also disturbs: their messages name the fault.

The dispersion index of counts c_r ~ Binomial(m_r, p) over independent rows is
D = mean_r (c_r - m_r p)^2 / (m_r p (1 - p)): its mean is exactly 1 and its variance is
sum_r (2 + (1 - 6 p (1 - p)) / (m_r p (1 - p))) / R^2, which the checker computes from the
data (R = 12,000 rows, standard error about 0.013). Its skewness is about 0.03, so at 5.5 SE
the upper tail is at most 1.8 times the normal one. One draw per row gives D near 20,
exactly 15% of every row (d2l's and BERT's own scheme, not what the exercise asks) gives D
near 0, neighbouring positions chosen together give D near 2. Choosing exactly 15% of the
whole batch at random cannot be told apart from independent draws (only the total is
fixed) and is accepted. `tests/test_checks_ch08.py` recomputes these rates.
"""
import functools
import math
import numbers
import random
import sys

import torch

from ._core import call, checker, expect_repeatable, fail, forbidden, seeded

IGNORE = -100
SE_TOLERANCE = 5.5      # the rates and dispersion indices
COLUMN_TOLERANCE = 6.0  # the largest of the 32 per-column z-scores
CALLS = 3
MIN_OCCURRENCES = 300  # an id this frequent must be chosen at least once
P_CHOOSE, P_MASK, P_KEEP = 0.15, 0.8, 0.1


def _masking_vocab(size=60):
    from ..bert import Vocab

    words = [f"w{i:03d}" if size > 60 else f"w{i}" for i in range(size)]
    return Vocab([words], min_freq=1)  # 5 special tokens + `size` ordinary ones


def _masking_batch(vocab, num_rows=4000, max_len=32, seed=0):
    """BERT-shaped rows: [CLS] a [SEP] b [SEP] [PAD]..., with a few [UNK] inside."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(vocab.num_specials, len(vocab), (num_rows, max_len), generator=g)
    # The ordinary ids follow Zipf's law (id i with probability proportional to 1 / (i + 1)),
    # as words do: replacements drawn from the batch are then far from uniform. A generator
    # of their own keeps the lengths and splits below as they were.
    k = len(vocab) - vocab.num_specials
    zipf = 1.0 / torch.arange(1, k + 1, dtype=torch.float64)
    skewed = torch.multinomial(zipf, num_rows * max_len, replacement=True,
                               generator=torch.Generator().manual_seed(seed + 1))
    tokens = vocab.num_specials + skewed.view(num_rows, max_len)
    tokens[torch.rand(tokens.shape, generator=g) < 0.03] = vocab.unk
    lengths = torch.randint(20, max_len + 1, (num_rows,), generator=g)  # valid lengths
    split = torch.randint(4, 10, (num_rows,), generator=g)              # where b starts
    rows = torch.arange(num_rows)
    tokens[:, 0] = vocab.cls
    tokens[rows, split - 1] = vocab.sep
    tokens[rows, lengths - 1] = vocab.sep
    tokens[torch.arange(max_len) >= lengths[:, None]] = vocab.pad
    return tokens


def _share(mask, within):
    return mask[within].float().mean().item() if within.any() else 0.0


def _z(count, total, p):
    return (count - total * p) / math.sqrt(total * p * (1 - p)) if total else 0.0


def _dispersion(counts, trials, p):
    """Dispersion index of binomial counts per row, and its standard error (rows with
    trials >= 1)."""
    use = trials > 0
    c, m = counts[use].double(), trials[use].double()
    var = m * p * (1 - p)
    D = ((c - m * p) ** 2 / var).mean().item()
    se = math.sqrt((2 + (1 - 6 * p * (1 - p)) / var).sum().item()) / use.sum().item()
    return D, se


def _one_call(fn, tokens, vocab, case, hint=None, given=None, log=None):
    """Call fn on a copy of `tokens` (or on `given`, equal to it: a non-contiguous view);
    `log` collects each call's (number chosen, number made [MASK])."""
    given = tokens.clone() if given is None else given
    result = call(fn, given, vocab, name="mask_tokens", case=case,
                  hint_on_error=(lambda error: hint) if hint else None)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(f"mask_tokens should return a tuple (inputs, labels), got "
             f"{type(result).__name__} on {case}.")
    inputs, labels = result
    for name, value in (("inputs", inputs), ("labels", labels)):
        if not isinstance(value, torch.Tensor):
            fail(f"{name} should be a torch.Tensor on {case}, got a {type(value).__name__}.",
                 "build them with torch (torch.where, torch.rand...), not NumPy.")
        if tuple(value.shape) != tuple(tokens.shape):
            fail(f"{name} has shape {tuple(value.shape)} on {case}; expected "
                 f"{tuple(tokens.shape)}, the shape of tokens.")
        if value.dtype != torch.long:
            fail(f"{name} has dtype {value.dtype} on {case}; expected int64 (torch.long), "
                 "the dtype of tokens.",
                 "token ids and cross_entropy's labels are int64 (torch.long); int32 and "
                 "floats are refused: build them from tokens, e.g. torch.where(chosen, tokens, "
                 "IGNORE), which keeps the dtype, or convert with .long().")
    if not torch.equal(given, tokens):
        fail("mask_tokens changed the `tokens` tensor it was given.",
             "build new tensors (torch.where, or tokens.clone() first): the caller may "
             "need the original tokens, and they are the labels.")
    for name, value in (("inputs", inputs), ("labels", labels)):
        if _shares_memory(value, given):
            what = "the `tokens` tensor itself" if value is given else "a view of `tokens`"
            fail(f"on {case}, {name} is {what}, not a new tensor: a caller that writes "
                 f"into {name} (say, to mask one more position) changes its own tokens, "
                 "which the exercise says not to change.",
                 "return new tensors, also when nothing is chosen: torch.where(...) always "
                 "makes one, or tokens.clone(); never tokens itself, tokens.view(...) or "
                 "tokens[...] slices.")
    inputs, labels = inputs.cpu(), labels.cpu()
    if log is not None:
        chosen = labels != IGNORE
        log.append((int(chosen.sum()), int((chosen & (inputs == vocab.mask)).sum())))
    return inputs, labels


def _shares_memory(a, b):
    return (a.numel() > 0 and b.numel() > 0
            and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


def _check_labels(inputs, labels, tokens, vocab, previous=None):
    special = tokens < vocab.num_specials
    ordinary = ~special
    labelled = labels != IGNORE
    changed = inputs != tokens
    if labelled[ordinary].float().mean() > 0.5:
        fail(f"{labelled[ordinary].float().mean():.0%} of the ordinary positions have a label:"
             " only the chosen 15% get one (their original token); every other position "
             "gets -100 (book.bert.IGNORE), which cross_entropy(..., ignore_index=-100) "
             "skips.")
    if (changed & ~labelled).any():
        i, j = (changed & ~labelled).nonzero()[0].tolist()
        fail(f"position [{i}, {j}] was changed (from {tokens[i, j].item()} to "
             f"{inputs[i, j].item()}) but has label -100: only chosen positions may change "
             "([MASK] or a random token), and every chosen one is predicted, so its label "
             "is the original token.",
             "apply the 80/10/10 decision only where `chosen` is true, e.g. "
             "torch.where(chosen & (u < 0.8), vocab.mask, inputs).")
    touched = (changed | labelled) & special
    if touched.any():
        i, j = touched.nonzero()[0].tolist()
        name = vocab.idx_to_token[tokens[i, j].item()]
        fail(f"a special token was chosen: position [{i}, {j}] holds {name}, and mask_tokens "
             f"changed it or gave it a label. The special tokens ([PAD], [UNK], [CLS], "
             "[SEP], and [MASK] too, which an input may already hold) are never predicted; "
             "choose only ordinary tokens."
             + (" The batch before this one had the same shape and an ordinary token "
                "there: does your function keep something between calls (which positions "
                "are ordinary, cached per shape)?"
                if previous is not None and previous[i, j] >= vocab.num_specials else ""),
             "ordinary tokens are those with id >= vocab.num_specials (vocab.mask is the "
             "last special id, not the first ordinary one).")
    wrong_label = labelled & (labels != tokens)
    if wrong_label.any():
        i, j = wrong_label.nonzero()[0].tolist()
        fail(f"labels[{i}, {j}] is {labels[i, j].item()}, but the original token there is "
             f"{tokens[i, j].item()}: the label of a chosen position is the token it had "
             "before masking; positions that were not chosen get -100.")
    bad = labelled & changed & (inputs != vocab.mask) & (inputs < vocab.num_specials)
    if bad.any():
        i, j = bad.nonzero()[0].tolist()
        fail(f"position [{i}, {j}] was replaced by the special token "
             f"{vocab.idx_to_token[inputs[i, j].item()]}: draw random replacements from the "
             "ordinary tokens, ids vocab.num_specials to len(vocab) - 1.")


def _rate_fail(what, seen, expected, total, tolerance, hint):
    se = math.sqrt(expected * (1 - expected) / total)
    fail(f"{what}: {seen:.2%}, expected {expected:.0%} (measured on {total:,} positions over "
         f"{CALLS} calls: {abs(seen - expected) / se:.1f} standard errors off, the tolerance "
         f"is {tolerance}).", hint)


@checker("mask_tokens", random=True)
def check_mlm_masking(fn):
    """Check `fn(tokens, vocab)` -> (inputs, labels), BERT's masking: the rates, the
    independence of the choices within rows and between calls, the 80/10/10 decision per
    position, and random replacements over the whole vocabulary (see the module's doc)."""
    vocab = _masking_vocab()
    tokens = _masking_batch(vocab)
    case = f"a batch of {tokens.shape[0]} BERT inputs of length {tokens.shape[1]}"
    log = []  # (chosen, [MASK]) per call, for the exact-split test at the end
    results = [_one_call(fn, tokens, vocab, case, log=log) for _ in range(CALLS)]
    for inputs, labels in results:
        _check_labels(inputs, labels, tokens, vocab)
    if all(torch.equal(results[0][1], r[1]) and torch.equal(results[0][0], r[0])
           for r in results[1:]):
        fail(f"{CALLS} calls of mask_tokens on the same tokens gave the same masks: the "
             "choices must be random, and new at every call.",
             "draw with torch.rand from the global random generator (or one passed in), and "
             "do not seed inside the function (no torch.manual_seed, no Generator or random "
             "module seeded there); do not choose by a fixed pattern.")

    T = tokens.repeat(CALLS, 1)
    inputs = torch.cat([r[0] for r in results])
    labels = torch.cat([r[1] for r in results])
    ordinary = T >= vocab.num_specials
    labelled = labels != IGNORE
    changed = inputs != T
    to_mask = labelled & (inputs == vocab.mask)
    kept = labelled & ~changed
    to_random = labelled & changed & (inputs != vocab.mask)
    n_ord, n_chosen = int(ordinary.sum()), int(labelled.sum())

    # Labelled only where the input changed: the kept ones are then at most the random
    # replacements that happen to equal the original (1 in 60 of ~11%, 0.2%), not 10%.
    if n_chosen and kept.sum() < 0.02 * n_chosen and to_random.sum() > 0:
        some = ("none" if kept.sum() == 0 else
                f"only {int(kept.sum()):,} ({kept.sum().item() / n_chosen:.1%}, random "
                "replacements that happen to equal the original)")
        fail(f"{some} of the {n_chosen:,} labelled positions kept "
             f"{'its' if kept.sum() == 0 else 'their'} original token, and "
             f"{n_chosen / n_ord:.1%} of the ordinary positions are labelled, about 90% of "
             "15%: the 10% of chosen positions that stay unchanged must still have a label "
             "(their original token); you labelled only the positions you changed.",
             "labels = torch.where(chosen, tokens, IGNORE), with `chosen` the 15% drawn "
             "first, whatever happens to the input there.")
    _check_neighbours_independent(labelled, ordinary)
    busy = ordinary.sum(0) > 0
    pooled = n_chosen / max(n_ord, 1)  # homogeneity: each column against the pooled rate
    col_z = torch.tensor([_z(int(labelled[:, j].sum()), int(ordinary[:, j].sum()), pooled)
                          for j in range(T.shape[1]) if busy[j] and 0 < pooled < 1])
    if 0 < pooled < 1 and col_z.numel() and col_z.abs().max() > COLUMN_TOLERANCE:
        col_rates = labelled.sum(0)[busy].double() / ordinary.sum(0)[busy].double()
        fail("the chosen share differs between positions in the sequence more than chance "
             f"allows (from {col_rates.min():.1%} to {col_rates.max():.1%}, largest z-score "
             f"{col_z.abs().max():.1f}, tolerance {COLUMN_TOLERANCE}): choose the positions "
             "at random, not by a fixed pattern or one draw per column.")

    _check_every_ordinary_id_chosen(T, labelled, vocab)
    rows_c, rows_m = labelled.sum(1), ordinary.sum(1)
    D, se = _dispersion(rows_c, rows_m, pooled) if 0 < pooled < 1 else (1.0, 1.0)
    if abs(D - 1) > SE_TOLERANCE * se:
        if D > 1:
            _check_rate_same_in_every_row(rows_c, rows_m, pooled, D)
            why = ("the rows differ more than independent choices allow: positions are "
                   "chosen together (a draw per row, per pair of neighbours, or per span).")
        else:
            why = ("the rows are more alike than independent choices allow: a fixed number "
                   "of positions per row (e.g. round(15%) of each row) is not 'each position "
                   "independently'.")
        fail(f"the number of chosen positions per row spreads with a dispersion index of "
             f"{D:.2f} (variance of the counts over the binomial variance); independent "
             f"choices give 1 +- {se:.3f} (tolerance {SE_TOLERANCE} standard errors). {why}",
             "draw one random number per position (torch.rand(tokens.shape) < 0.15), not "
             "per row, and do not fix the count.")

    rate = n_chosen / max(n_ord, 1)
    if abs(_z(n_chosen, n_ord, P_CHOOSE)) > SE_TOLERANCE:
        _rate_fail("the share of ordinary positions chosen (labelled)", rate, P_CHOOSE, n_ord,
                   f"{SE_TOLERANCE} standard errors",
                   "choose each ordinary position with probability 0.15, e.g. "
                   "torch.rand(tokens.shape) < 0.15, and label every chosen one.")

    mask_share = to_mask.sum().item() / max(n_chosen, 1)
    keep_share = kept.sum().item() / max(n_chosen, 1)
    seen = (f"[MASK] {mask_share:.1%}, random {to_random.sum().item() / max(n_chosen, 1):.1%}"
            f", unchanged {keep_share:.1%}")
    split_hint = ("draw one uniform number per chosen position: < 0.8 -> [MASK], 0.8 to 0.9 "
                  "-> a random ordinary token, otherwise keep the token.")
    col_mask = labelled.sum(0) > 0
    pooled_mask = to_mask.sum().item() / max(n_chosen, 1)
    mask_z = torch.tensor([_z(int(to_mask[:, j].sum()), int(labelled[:, j].sum()), pooled_mask)
                           for j in range(T.shape[1]) if col_mask[j] and 0 < pooled_mask < 1])
    if 0 < pooled_mask < 1 and mask_z.numel() and mask_z.abs().max() > COLUMN_TOLERANCE:
        shares = to_mask.sum(0)[col_mask].double() / labelled.sum(0)[col_mask].double()
        fail("the [MASK] share of the chosen positions differs between positions in the "
             f"sequence more than chance allows (from {shares.min():.1%} to "
             f"{shares.max():.1%}, largest z-score {mask_z.abs().max():.1f}, tolerance "
             f"{COLUMN_TOLERANCE}): the 80/10/10 decision is not drawn for each position.",
             split_hint)

    D2, se2 = _dispersion(to_mask.sum(1), labelled.sum(1), pooled_mask) \
        if 0 < pooled_mask < 1 else (1.0, 1.0)
    if abs(D2 - 1) > SE_TOLERANCE * se2:
        fail(f"the [MASK] count among each row's chosen positions spreads with a dispersion "
             f"index of {D2:.2f}; independent 80/10/10 decisions give 1 +- {se2:.3f}: the "
             "decision is not drawn for each position on its own (e.g. once per row).",
             split_hint)

    if abs(_z(to_mask.sum().item(), n_chosen, P_MASK)) > SE_TOLERANCE:
        fail(f"of the chosen positions, expected 80% [MASK], 10% a random token, 10% "
             f"unchanged; got {seen} ({abs(_z(to_mask.sum().item(), n_chosen, P_MASK)):.1f} "
             f"standard errors off for [MASK], tolerance {SE_TOLERANCE}).", split_hint)
    _check_decisions_apart_from_neighbours(labelled, to_mask, tokens.shape[0])

    replacements = inputs[to_random]
    counts = torch.bincount(replacements - vocab.num_specials,
                            minlength=len(vocab) - vocab.num_specials)
    low, high = _replacement_bounds(len(replacements), len(vocab) - vocab.num_specials)
    if (counts < low).any() or (counts > high).any():
        ids = (counts < low).nonzero().flatten() + vocab.num_specials
        rare = f"ids {ids[:6].tolist()} appear {counts[counts < low][:6].tolist()} times" \
            if len(ids) else f"the most frequent appears {counts.max().item()} times"
        fail(f"the {len(replacements):,} random replacements are not spread over the "
             f"{len(counts)} ordinary tokens: {rare}, while each should appear about "
             f"{len(replacements) / len(counts):.0f} times (allowed: {low} to {high}).",
             "draw replacements uniformly from all ordinary ids: torch.randint("
             "vocab.num_specials, len(vocab), ...) (randint's upper bound is excluded), "
             "not tokens taken from the batch or the row (the test batch's ids are far "
             "from uniform).")
    _check_replacements_not_from_the_row(T, inputs, to_random, vocab)
    _check_replacements_drawn_anew(inputs, to_random, vocab)

    q = 1 / (len(vocab) - vocab.num_specials)  # chance that a random token is the original
    centre, slack = P_KEEP * (1 + q / 2), P_KEEP * q / 2
    se_keep = math.sqrt(centre * (1 - centre) / max(n_chosen, 1))
    if abs(keep_share - centre) > slack + SE_TOLERANCE * se_keep:
        fail(f"of the chosen positions, expected 80% [MASK], 10% a random token, 10% "
             f"unchanged; got {seen} (the unchanged share is "
             f"{abs(keep_share - centre) / se_keep:.1f} standard errors off, tolerance "
             f"{SE_TOLERANCE}).", split_hint + (
                 " If your split is right, your random tokens equal the original too often: "
                 "a replacement drawn uniformly from the 60 ordinary ids equals it 1 time in "
                 "60, whatever the batch holds; one fixed token, or tokens copied from the "
                 "batch, match the frequent ids far more often." if keep_share > centre
                 else ""))

    # What the pooled rates cannot see: state kept between calls, rows copied, a cap per
    # row, replacements drawn from the batch's ids only.
    _check_calls_independent(results, tokens, vocab)
    _check_rows_drawn_apart(labelled, tokens.shape[0])
    _check_rows_independent(labelled, ordinary, to_mask, f"the {CALLS} calls on {case} "
                            "(their rows one after the other)",
                            columns=ordinary.sum(0).topk(ROW_COLUMNS).indices.sort().values)
    _check_no_cap_per_row(rows_c, rows_m, pooled)
    _check_replacements_from_the_whole_vocabulary(fn, tokens, log)
    # Inputs the main batch does not hold, and what a tiny vocabulary shows.
    _check_awkward_batches(fn, vocab, log)
    # Before the tiny vocabularies, where a split off by a point also moves the unchanged
    # share (and would be taken for random tokens that avoid the original).
    _check_split_precisely(fn, vocab)
    _check_tiny_vocabulary(fn, log)
    _check_three_ids(fn, log)
    _check_split_not_exact(log)
    # Last, so that the random draws of the calls above stay as they were before round 11.
    _check_nothing_to_choose(fn, vocab)
    _check_every_id_drawn(fn)  # round 12, after all the others for the same reason
    _check_maskings_vary(fn, vocab)  # round 13, last for the same reason
    # round 14, last for the same reason: a seeded run must repeat, and leave the global
    # generators where a seeded run leaves them (no torch.seed(), random.seed() or
    # np.random.seed() after the draws)
    g = torch.Generator().manual_seed(22)
    small = torch.randint(vocab.num_specials, len(vocab), (4, 32), generator=g)
    expect_repeatable(fn, small, vocab, name="mask_tokens",
                      case="a batch of 4 rows of 32 ordinary tokens")


REPEAT_CALLS = 100  # calls on one small batch: a right solution never repeats a masking


def _check_maskings_vary(fn, vocab):
    """REPEAT_CALLS calls on one batch of 4 x 32 ordinary tokens: each gives a masking
    (inputs and labels) of its own. Two independent maskings of one position agree with
    probability c = 0.85^2 + 0.12^2 + (0.015 (1 + 1/60))^2 + 59 (0.015 / 60)^2 = 0.7371
    (not chosen, [MASK], unchanged or the same random token), of all 128 positions
    c^128 = 1.1e-17: over the 4,950 pairs of calls, two or more coinciding pairs have
    probability below 1e-26. A private generator seeded from a few random bits (one byte:
    256 seeds) has only that many maskings of a batch: 100 calls give about 19 coinciding
    pairs (fewer than 2 with probability 1e-7); a 32-bit seed gives 2 with probability
    below 1e-12."""
    g = torch.Generator().manual_seed(21)
    tokens = torch.randint(vocab.num_specials, len(vocab), (4, 32), generator=g)
    case = "a batch of 4 rows of 32 ordinary tokens, called repeatedly"
    seen = {}
    for number in range(REPEAT_CALLS):
        inputs, labels = _one_call(fn, tokens, vocab, case)
        key = (inputs.numpy().tobytes(), labels.numpy().tobytes())
        seen[key] = seen.get(key, 0) + 1
    pairs = sum(count * (count - 1) // 2 for count in seen.values())
    if pairs >= 2:
        fail(f"{REPEAT_CALLS} calls of mask_tokens on one batch of 4 x 32 ordinary tokens "
             f"gave only {len(seen)} different maskings ({pairs} pairs of calls gave the "
             "same inputs and labels); independent draws on 128 positions repeat a masking "
             "with probability about 1e-17 per pair: your draws come from a small set of "
             "random streams (a generator seeded with a few random bits, such as one random "
             "byte), so over many epochs the model sees only a few maskings of each batch.",
             "draw from torch's global generator (torch.rand, torch.randint), which the "
             "caller seeds with book.set_seed; a generator of your own needs a seed of full "
             "size, e.g. int(torch.randint(2**62, ())), not a byte or a few bits.")


def _check_every_id_drawn(fn):
    """One more call, with a vocabulary of 200 ordinary ids, on 20,000 rows (about 446,000
    ordinary positions, 6,729 random replacements that differ from the original with the
    reference, 34 per id): every ordinary id is drawn at least once. Id j is missed with
    probability (1 - 1/199)^(n - R_j), R_j the replacements whose original is j (they
    cannot draw it; under Zipf's law the most frequent id is the original of 17% of them):
    summed over the 200 ids, 1.0e-12.
    A draw from a fixed range taken modulo the number of ids (randint(0, 100) % k) never
    reaches the ids beyond that range."""
    big = _masking_vocab(200)
    tokens = _masking_batch(big, num_rows=20_000, seed=13)
    case = (f"a batch of {tokens.shape[0]:,} BERT inputs of length {tokens.shape[1]} with a "
            "vocabulary of 200 ordinary tokens")
    inputs, labels = _one_call(fn, tokens, big, case)
    _check_labels(inputs, labels, tokens, big)
    to_random = (labels != IGNORE) & (inputs != tokens) & (inputs != big.mask)
    k = len(big) - big.num_specials
    if int(to_random.sum()) < 20 * k:
        return  # the rates are tested on the main batch
    drawn = torch.bincount(inputs[to_random] - big.num_specials, minlength=k)
    never = (drawn == 0).nonzero().flatten() + big.num_specials
    if len(never):
        ids = never.tolist()
        span = f"ids {ids[0]} to {ids[-1]}" if len(ids) > 6 else f"ids {ids}"
        fail(f"on {case}, {len(ids)} of the {k} ordinary ids ({span}) were never drawn "
             f"among the {int(to_random.sum()):,} random replacements, where uniform draws "
             f"give each about {int(to_random.sum()) / k:.0f} times.",
             "draw replacements uniformly from all ordinary ids: torch.randint("
             "vocab.num_specials, len(vocab), tokens.shape), with the bounds taken from the "
             "vocabulary (not a fixed range such as randint(0, 100) % k, nor a fixed "
             "vocabulary size).")


def _check_rate_same_in_every_row(rows_c, rows_m, pooled, D):
    """Run when the rows spread too much: is it because the choice probability depends on
    the row (rescaled by its length or its share of ordinary tokens)? The rows are grouped
    by their number of ordinary tokens; each group's chosen share is compared with the
    pooled one, its z-score divided by sqrt(D) (so that choices made together, which
    inflate every z-score by that much, are not taken for a rate that depends on the row)."""
    groups = []
    for m in sorted(set(rows_m.tolist())):
        rows = rows_m == m
        trials = int(rows_m[rows].sum())
        if trials >= 2000:
            chosen = int(rows_c[rows].sum())
            groups.append((m, chosen / trials, _z(chosen, trials, pooled) / math.sqrt(D)))
    if len(groups) < 2 or max(abs(z) for _, _, z in groups) <= COLUMN_TOLERANCE:
        return
    low, high = min(groups, key=lambda g: g[1]), max(groups, key=lambda g: g[1])
    fail(f"the share of ordinary positions chosen depends on the row: {low[1]:.1%} in rows "
         f"with {low[0]} ordinary tokens, {high[1]:.1%} in rows with {high[0]} (overall "
         f"{pooled:.1%}, expected 15%).",
         "choose every ordinary position with probability 0.15, whatever the rest of the row "
         "holds: do not rescale it by the row's length or its share of ordinary tokens (15% "
         "of the ordinary positions, not of all positions).")


def _awkward_batch(vocab, num_rows=1200, max_len=32, seed=3):
    """Inputs a real batch may hold and the main batch does not: [MASK] tokens already in
    the input (book.bert.tokenize maps the text "[MASK]" to it), rows without any
    ordinary token ("[CLS] [SEP] [PAD] ...", "[CLS] [MASK] [SEP] [PAD] ..."), and rows with
    one or two ordinary tokens ("[CLS] w [SEP] [PAD] ...", "[CLS] w w [SEP] [PAD] ...")."""
    tokens = _masking_batch(vocab, num_rows, max_len, seed)
    g = torch.Generator().manual_seed(seed + 10)
    ordinary = tokens >= vocab.num_specials
    tokens[ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)] = vocab.mask
    empty = num_rows // 10
    tokens[:empty, 1] = vocab.sep
    tokens[:empty, 2:] = vocab.pad
    tokens[empty:2 * empty, 1] = vocab.mask
    tokens[empty:2 * empty, 2] = vocab.sep
    tokens[empty:2 * empty, 3:] = vocab.pad
    k = len(vocab) - vocab.num_specials
    for width, rows in ((1, slice(2 * empty, 4 * empty)), (2, slice(4 * empty, 6 * empty))):
        ids = torch.arange(2 * empty * width).view(2 * empty, width) % k
        ids = ids + vocab.num_specials
        tokens[rows, 1:1 + width] = ids
        tokens[rows, 1 + width] = vocab.sep
        tokens[rows, 2 + width:] = vocab.pad
    return tokens


# Names of the functions that seed a random generator (torch, NumPy, Python's random).
_SEEDING = {"manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state",
            "setstate", "set_state"}


def _seeding_spy(fn):
    """`fn` wrapped so that every seeding call made while it runs is recorded in the list
    `seen` (by name): torch.manual_seed, a torch.Generator's manual_seed, numpy.random.seed,
    random.seed with a value... A generator created without a seed (numpy's default_rng(),
    random.Random()) draws from the operating system's entropy and is not seeding."""
    seen = []
    torch_dir = torch.__file__.rsplit("/", 1)[0]

    def profile(frame, event, arg):
        if event == "c_call":
            name = getattr(arg, "__name__", "")
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, random.Random):
                return  # seen at the Python level below, where its argument shows
            if name in _SEEDING and owner is not None and not isinstance(owner, type(random)):
                if isinstance(owner, torch.Generator) and name == "seed" \
                        and owner is not torch.default_generator:
                    return  # a private generator seeded from entropy: like default_rng()
                seen.append(f"{type(owner).__name__}.{name}")
            elif name in _SEEDING and owner is not None:
                seen.append(f"{owner.__name__}.{name}")
        elif event == "call" and frame.f_code.co_name in _SEEDING:
            where = frame.f_code.co_filename
            if where.startswith(torch_dir):
                seen.append(f"torch.{frame.f_code.co_name}")
            elif where == getattr(random, "__file__", None):
                own = frame.f_locals.get("self")
                if frame.f_code.co_name == "seed" and (
                        frame.f_locals.get("a") is not None or own is random._inst):
                    seen.append("random.seed")

    numpy = sys.modules.get("numpy")
    makers = ["default_rng", "RandomState", "SeedSequence", "PCG64", "PCG64DXSM", "MT19937",
              "Philox", "SFC64", "seed"]  # numpy's generators and its global seed

    def note(name, args, kwargs):
        if (args and args[0] is not None) or kwargs.get("seed") is not None \
                or kwargs.get("entropy") is not None:
            seen.append(f"numpy.random.{name} with a seed")

    def watched(name, original):
        if isinstance(original, type):  # a class: a subclass, so isinstance still works
            class Watched(original):
                def __new__(cls, *args, **kwargs):
                    note(name, args, kwargs)
                    return original(*args, **kwargs)
            return Watched

        def make(*args, **kwargs):
            note(name, args, kwargs)
            return original(*args, **kwargs)
        return make

    @functools.wraps(fn)
    def spied(*args, **kwargs):
        saved = [(name, getattr(numpy.random, name)) for name in makers
                 if numpy is not None and hasattr(numpy.random, name)]
        for name, original in saved:
            setattr(numpy.random, name, watched(name, original))
        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setprofile(previous)
            for name, original in saved:
                setattr(numpy.random, name, original)
    return spied, seen


def _follows_the_callers_seed(fn, tokens, vocab):
    """Returns (same seed twice gives the same masks, another seed gives the same ones).
    A function that seeds a generator of its own from the caller's random stream (e.g.
    torch.Generator().manual_seed(int(torch.randint(2**62, ())))) is harmless: under the
    same caller seed it gives the same masks, under another seed other ones. Seeded from a
    call counter or the clock, it gives other masks under the same seed; drawn from a
    generator book.set_seed does not seed (made at import, or default_rng()), too."""
    outputs = []
    for seed in (CALLER_SEEDS[0], CALLER_SEEDS[0], CALLER_SEEDS[1]):
        with seeded(seed):
            outputs.append(_one_call(fn, tokens, vocab, "a batch of 200 rows, after "
                                     f"book.set_seed({seed})"))
    same = [torch.equal(a, b) for a, b in zip(outputs[0], outputs[1])]
    other = [torch.equal(a, b) for a, b in zip(outputs[0], outputs[2])]
    return all(same), all(other)


CALLER_SEEDS = (31337, 4242)  # seeds of no data generator, nor CHECK_SEED


def _check_awkward_batches(fn, vocab, log):
    """[MASK] in the input, rows without an ordinary token and rows with one or two (a
    contiguous batch, while watching for seeding calls), then another batch of the same
    shape (its rows in reverse order: the short rows where the other had long ones) as a
    column slice, which is not contiguous in memory (`.view(-1)` fails on it; trimming
    padding makes such slices). Then: the short rows' chosen share, and the caller's
    seed."""
    tokens = _awkward_batch(vocab)
    case = (f"a batch of {tokens.shape[0]} rows of length {tokens.shape[1]} whose input "
            "already "
            "holds [MASK] tokens (15% of the ordinary positions), with rows that hold no "
            "ordinary token ([CLS] [SEP] [PAD] ..., [CLS] [MASK] [SEP] [PAD] ...)")
    spied, seen = _seeding_spy(fn)
    inputs, labels = _one_call(
        spied, tokens, vocab, case, log=log,
        hint="some rows of this batch hold no ordinary token; such a row has nothing to "
             "choose: it comes back unchanged, "
             "with labels all -100 (no torch.multinomial over an all-zero row, no division "
             "by its number of ordinary tokens).")
    reproducible = _follows_the_callers_seed(fn, tokens[-200:], vocab)
    if seen and reproducible != (True, False):
        fail(f"mask_tokens seeds a random generator at every call (it calls {seen[0]}): the "
             "exercise says do not seed inside the function. Seeded there (from a constant, a "
             "call counter or the clock), the masks ignore the caller's seed (book.set_seed), "
             "and torch.manual_seed inside also resets the caller's global generator.",
             "draw from torch's global generator (torch.rand(tokens.shape), "
             "torch.randint(...)) and leave the seeding to the caller: book.set_seed(0) once, at the top of the "
             "notebook.")
    if not reproducible[0]:
        fail(f"after book.set_seed({CALLER_SEEDS[0]}), two calls on the same batch (the "
             "last 200 rows of the batch above) gave different masks: your function draws "
             "from a random generator that book.set_seed does not seed (a torch.Generator "
             "or numpy.random.default_rng made at import or without a seed, the "
             "clock...), so a run cannot be reproduced. The exercise leaves the seeding to "
             "the caller.",
             "draw from torch's global generator (torch.rand(tokens.shape), "
             "torch.randint(...)), which book.set_seed seeds, or a generator passed in by "
             "the caller; keep no private generator.")
    _check_labels(inputs, labels, tokens, vocab)
    short = [(tokens, labels)]
    other = _awkward_batch(vocab, seed=4).flip(0)
    wide = torch.cat([other, other[:, :8]], dim=1)
    case = (f"another batch of the same shape {tuple(other.shape)}, the short rows at the "
            "bottom this time, given as the column slice "
            f"tokens[:, :{other.shape[1]}] of a {tuple(wide.shape)} tensor (not contiguous "
            "in memory)")
    given = wide.clone()[:, :other.shape[1]]
    inputs, labels = _one_call(fn, other, vocab, case, given=given, log=log)
    _check_labels(inputs, labels, other, vocab, previous=tokens)
    short.append((other, labels))
    _check_short_rows(short, vocab)


def _check_nothing_to_choose(fn, vocab):
    """A batch without any ordinary token (special tokens only: nothing can be chosen):
    inputs equal to tokens, labels all -100, and both new tensors (_one_call refuses tokens
    itself or a view of it, which a shortcut for "nothing chosen" may return)."""
    c, s, p, m, u = vocab.cls, vocab.sep, vocab.pad, vocab.mask, vocab.unk
    tokens = torch.tensor([[c, s, p, p, p, p], [c, m, s, p, p, p], [c, u, s, m, s, p]])
    case = ("a batch of 3 rows holding special tokens only ([CLS] [SEP] [PAD] ..., [CLS] "
            "[MASK] [SEP] [PAD] ..., [CLS] [UNK] [SEP] [MASK] [SEP] [PAD]), where nothing "
            "can be chosen")
    inputs, labels = _one_call(
        fn, tokens, vocab, case,
        hint="a batch may hold no ordinary token at all; then nothing is chosen: inputs "
             "equal to tokens (a new tensor) and labels all -100.")
    _check_labels(inputs, labels, tokens, vocab)


def _check_short_rows(calls, vocab):
    """Rows with one or two ordinary tokens (480 rows, 720 positions per call, two calls):
    each position is chosen with probability 0.15 there too. Forcing a choice into a row
    that got none (d2l's max(1, ...)) makes it 100% and 51%. Failing needs 6 standard errors
    (1,440 positions: 5.6 points); exact binomial tail below 2e-9."""
    n = chosen = 0
    shares = {}
    for tokens, labels in calls:
        ordinary = tokens >= vocab.num_specials
        per_row = ordinary.sum(1)
        for width in (1, 2):
            rows = per_row == width
            trials, hits = int(ordinary[rows].sum()), int((labels[rows] != IGNORE).sum())
            t, h = shares.get(width, (0, 0))
            shares[width] = (t + trials, h + hits)
            n, chosen = n + trials, chosen + hits
    if n and abs(_z(chosen, n, P_CHOOSE)) > COLUMN_TOLERANCE:
        seen = ", ".join(f"{h / t:.0%} in rows with {w} ordinary "
                         f"token{'s' if w > 1 else ''}"
                         for w, (t, h) in sorted(shares.items()) if t)
        fail(f"in rows with only one or two ordinary tokens ([CLS] w [SEP] [PAD] ...), the "
             f"share chosen is {seen}; expected 15% ({abs(_z(chosen, n, P_CHOOSE)):.1f} "
             f"standard errors off on {n:,} positions, tolerance {COLUMN_TOLERANCE})."
             + (" A row where nothing was chosen must stay so: do not force a choice into "
                "it (d2l's max(1, ...))." if chosen > n * P_CHOOSE else ""),
             "choose each ordinary position independently with probability 0.15, whatever "
             "the rest of its row holds; a row may end up with no chosen position (its "
             "labels are all -100, which cross_entropy skips).")


def _mantel_haenszel(labelled, ordinary, lag):
    """Are positions `lag` apart chosen independently? For each column pair (j, j + lag) of
    each call, a 2 x 2 table over the rows (first chosen or not, second chosen or not); the
    Mantel-Haenszel z-score over all of them (strata by call and column, so a rate that
    differs between columns does not count). Also the share chosen after a chosen position
    and after an unchosen one."""
    first, second = labelled[:, :-lag], labelled[:, lag:]
    both = (ordinary[:, :-lag] & ordinary[:, lag:]).view(CALLS, -1, first.shape[1]).double()
    first = first.reshape(CALLS, -1, first.shape[1]).double() * both
    second = second.reshape(CALLS, -1, second.shape[1]).double() * both
    N, n1, m1 = both.sum(1), first.sum(1), second.sum(1)
    a = (first * second).sum(1)
    use = N > 1
    N, n1, m1, a = N[use], n1[use], m1[use], a[use]
    var = (n1 * (N - n1) * m1 * (N - m1) / (N ** 2 * (N - 1))).sum().item()
    if var < 100:
        return 0.0, 0.0, 0.0
    z = (a - n1 * m1 / N).sum().item() / math.sqrt(var)
    after = a.sum().item() / max(n1.sum().item(), 1)
    not_after = (m1 - a).sum().item() / max((N - n1).sum().item(), 1)
    return z, after, not_after


def _check_neighbours_independent(labelled, ordinary):
    """Neighbouring positions are chosen independently: the Mantel-Haenszel z-score of
    positions 1 apart against that of positions 5 apart (a fixed count per row or a draw per
    row ties every pair of a row alike; that is the dispersion test's business). A position
    after a chosen one never chosen, or spans of two, give z1 below -30 or above 30 and z5
    near 0. Failing needs |z1| > 6 (normal tail 2e-9, x 2 for safety) and |z5| < |z1| / 2
    (the effect is the neighbours', not the whole row's)."""
    z1, after, not_after = _mantel_haenszel(labelled, ordinary, 1)
    z5 = _mantel_haenszel(labelled, ordinary, 5)[0]
    if abs(z1) > COLUMN_TOLERANCE and abs(z5) < abs(z1) / 2:
        fail(f"neighbouring positions are not chosen independently: of the ordinary "
             f"positions right after a chosen one, {after:.1%} are chosen; right after one "
             f"that was not chosen, {not_after:.1%} (z-score {z1:.1f}; for positions 5 "
             f"apart {z5:.1f}; tolerance {COLUMN_TOLERANCE}). "
             + ("So positions are chosen together (spans, pairs, whole words)."
                if z1 > 0 else "A chosen position makes its neighbour less likely "
                "(skipping or spacing the choices)."),
             "draw one random number per position (torch.rand(tokens.shape) < 0.15) and "
             "choose each position on its own, whatever its neighbours got.")


def _neighbour_pairs(chosen, rows_per_call):
    """For each of four neighbours (left and right in the row; the same column of the row
    above and below, within one call: `chosen` stacks the calls' rows): its name, the
    positions where it and its neighbour are both chosen, and a function that picks from a
    tensor shaped like `chosen` the entries those positions stand for (the position
    itself, not its neighbour), aligned with them."""
    calls = chosen.shape[0] // rows_per_call

    def by_call(t):
        return t.view(calls, rows_per_call, t.shape[1])
    in_row = chosen[:, :-1] & chosen[:, 1:]
    in_column = by_call(chosen)[:, :-1] & by_call(chosen)[:, 1:]
    return [("left neighbour", in_row, lambda t: t[:, 1:]),
            ("right neighbour", in_row, lambda t: t[:, :-1]),
            ("neighbour in the row above (the same column)", in_column,
             lambda t: by_call(t)[:, 1:]),
            ("neighbour in the row below (the same column)", in_column,
             lambda t: by_call(t)[:, :-1])]


def _check_decisions_apart_from_neighbours(labelled, to_mask, rows_per_call):
    """The 80/10/10 decision of a position is its own: among the chosen positions whose
    left neighbour is chosen too, 80% are [MASK], and as many among those whose right
    neighbour is, or whose neighbour in the same column of the row above (below) is.
    Given which positions are chosen, a right solution's decisions are independent draws,
    so each count is exactly Binomial(n, 0.8) (about 5,300 pairs of chosen neighbours in a
    row and 5,100 in a column on the 3 calls: one standard error is 0.55 points). A
    decision read off the left neighbour's choosing uniform (u.roll(1)), off the next
    position's (overlapping slices of one draw, r[:-1] and r[1:]), or off the row above's
    (u.roll(1, 0)) makes one of the shares 100% (about 40 standard errors). Failing needs
    6 standard errors: exact binomial tails 2 x 2.3e-9 (in a row) + 2 x 2.5e-9 (in a
    column)."""
    for side, both, at in _neighbour_pairs(labelled, rows_per_call):
        n = int(both.sum())
        if n < 500:
            continue
        count = int((at(to_mask) & both).sum())
        z = _z(count, n, P_MASK)
        if abs(z) > COLUMN_TOLERANCE:
            overall = to_mask.sum().item() / max(int(labelled.sum()), 1)
            fail(f"of the {n:,} chosen positions whose {side} is chosen too, "
                 f"{count / n:.1%} became [MASK] ({abs(z):.1f} standard errors from 80%, "
                 f"tolerance {COLUMN_TOLERANCE}), while {overall:.1%} of all chosen "
                 "positions did: the 80/10/10 decision of a position depends on that "
                 "neighbour's draws (its choosing uniform reused as the "
                 "decision, by a roll or by overlapping slices of one draw).",
                 "draw the decision of each position from its own numbers: a second "
                 "uniform per position, action = torch.rand(tokens.shape), or the "
                 "position's own choosing uniform rescaled (u / 0.15), never a "
                 "neighbour's (not u.roll(...), not r[:-1] and r[1:] of one draw).")


SPLIT_ROWS = 120_000  # the call that measures the rates and the 80/10/10 split precisely
PAIR_TAIL = 1e-9       # each agreement test of that call: its binomial tail for a right one


def _binomial_cutoffs(n, p_low, p_high, tail=PAIR_TAIL):
    """(low, high): for X ~ Binomial(n, p) with p_low <= p <= p_high, P(X < low) <= tail
    (at p_low) and P(X >= high) <= tail (at p_high); exact sums in log space."""
    def pmf(k, p):
        return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                        + k * math.log(p) + (n - k) * math.log1p(-p))
    low, total = 0, 0.0
    while low <= n and total + pmf(low, p_low) <= tail:
        total += pmf(low, p_low)
        low += 1
    high, total = n + 1, 0.0
    while high > 0 and total + pmf(high - 1, p_high) <= tail:
        total += pmf(high - 1, p_high)
        high -= 1
    return low, high


def _check_split_precisely(fn, vocab):
    """One more call, on 120,000 rows (2,676,994 ordinary positions, about 401,500 chosen,
    about 40,000 random replacements), measures the rates to a tenth of a point or better:
    one standard error is 0.022 points for the chosen share, 0.063 for the [MASK] share and
    0.048 for the unchanged share (10% + 10%/60: a random token is the original 1 time in
    60). A split 1 point off (81/10/9, or 80/11/9) is 16 or 21 standard errors off, and
    80.8/10.1/9.1 is 13 and 19; bfloat16 uniforms (8 bits: 15.19% chosen) put the chosen
    share 8.6 standard errors off. Failing needs 5.5 standard errors: exact binomial tails
    3 x 3.9e-8. Then the random replacements of that call: two in neighbouring positions
    (j, j + 1), j even, and j odd (two families of disjoint pairs, about 100 each), and two
    in one row (its 1st and 2nd, its 3rd and 4th, ...: disjoint, about 5,500 pairs) agree
    with probability 1/60 for independent uniform draws, and between 58/59^2 and 1/59 for
    draws that avoid the original token; a pair tied together (one draw per pair of
    neighbours) agrees far more, one draw per row shifted by the position never. Failing
    needs a count beyond the exact binomial cut-offs at PAIR_TAIL = 1e-9: 4 x 1e-9."""
    tokens = _masking_batch(vocab, num_rows=SPLIT_ROWS, seed=9)
    case = (f"a batch of {tokens.shape[0]:,} BERT inputs of length {tokens.shape[1]} (the "
            "split measured to a tenth of a point)")
    inputs, labels = _one_call(fn, tokens, vocab, case)
    _check_labels(inputs, labels, tokens, vocab)
    labelled = labels != IGNORE
    n = int(labelled.sum())
    if n < 10_000:
        return  # the chosen rate is tested on the main batch
    n_ord = int((tokens >= vocab.num_specials).sum())
    z = _z(n, n_ord, P_CHOOSE)
    if abs(z) > SE_TOLERANCE:
        se = math.sqrt(P_CHOOSE * (1 - P_CHOOSE) / n_ord)
        fail(f"on {case}, {n / n_ord:.2%} of the {n_ord:,} ordinary positions were chosen; "
             f"expected 15% ({abs(z):.1f} standard errors off: one standard error is "
             f"{se:.3%} here, tolerance {SE_TOLERANCE}).",
             "choose with probability 0.15 exactly: torch.rand(tokens.shape) < 0.15, with "
             "float32 uniforms (the default). A low-precision draw rounds the threshold: "
             "bfloat16 uniforms (8 bits) fall below 0.15 with probability 0.1519, and "
             "below 0.8 or 0.9 off by as much.")
    masked = int((labelled & (inputs == vocab.mask)).sum())
    kept = int((labelled & (inputs == tokens)).sum())
    p_kept = P_KEEP * (1 + 1 / (len(vocab) - vocab.num_specials))
    seen = (f"[MASK] {masked / n:.2%}, random {(n - masked - kept) / n:.2%}, unchanged "
            f"{kept / n:.2%}")
    for what, count, p in (("[MASK]", masked, P_MASK), ("unchanged", kept, p_kept)):
        z = _z(count, n, p)
        if abs(z) > SE_TOLERANCE:
            se = math.sqrt(p * (1 - p) / n)
            fail(f"on {case}, of the {n:,} chosen positions: {seen}; expected 80% [MASK], "
                 f"10% a random token, 10% unchanged (plus the random tokens that happen "
                 f"to be the original, 10% x 1/60: {p_kept:.2%} unchanged). The {what} "
                 f"share is {abs(z):.1f} standard errors off (one standard error is "
                 f"{se:.2%} here, tolerance {SE_TOLERANCE}).",
                 "draw one uniform number u per chosen position and compare it with the "
                 "exact thresholds: u < 0.8 -> [MASK], 0.8 <= u < 0.9 -> a random token, "
                 "otherwise unchanged (if you reuse the choosing uniform, u / 0.15 is "
                 "uniform on [0, 1): rescale it by 0.15 exactly); draw float32 uniforms "
                 "(the default), not bfloat16 or float16 ones.")
    to_random = labelled & (inputs != tokens) & (inputs != vocab.mask)
    _check_replacement_pairs(inputs, to_random, vocab, case)
    _check_replacements_apart_from_neighbours(inputs, labelled, to_random, vocab, case)
    _check_replacements_uniform(inputs, tokens, to_random, vocab, case)
    ordinary = tokens >= vocab.num_specials
    _check_rows_independent(labelled, ordinary, labelled & (inputs == vocab.mask), case,
                            columns=ordinary.sum(0).topk(ROW_COLUMNS).indices.sort().values)


UNIFORM_TAIL = 1e-12  # the uniformity test's cut-off: the chi-square tail of a right solution


@functools.lru_cache(maxsize=None)
def _chi2_cut(df, tail=UNIFORM_TAIL):
    """The value a chi-square with df degrees of freedom exceeds with probability `tail`
    (bisection on the regularised upper incomplete gamma function)."""
    def upper(x):
        return torch.special.gammaincc(torch.tensor(df / 2, dtype=torch.float64),
                                       torch.tensor(x / 2, dtype=torch.float64)).item()
    low, high = float(df), float(df) + 100 * math.sqrt(2 * df)
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if upper(mid) > tail else (low, mid)
    return high


def _uniformity(inputs, tokens, to_random, vocab):
    """How far the random replacements are from uniform draws. Given its original token o, a
    replacement that differs from it (the positions `to_random`: a uniform draw from all k
    ordinary ids that missed o, or a draw that avoids o) is uniform on the k - 1 other ids,
    independently from position to position. The counts c of the ids then have mean
    E = sum_o R_o q_o and covariance S = sum_o R_o (diag(q_o) - q_o q_o^T), R_o the number of
    such positions with original o, q_o uniform on the ids other than o; the statistic
    (c - E)^T S^+ (c - E) is chi-square with k - 1 degrees of freedom (normal limit: about
    600 draws per id here). Returns (statistic, counts, expected)."""
    k = len(vocab) - vocab.num_specials
    drawn = torch.bincount(inputs[to_random] - vocab.num_specials, minlength=k).double()
    R = torch.bincount(tokens[to_random] - vocab.num_specials, minlength=k).double()
    Q = (1 - torch.eye(k, dtype=torch.float64)) / (k - 1)            # row o: q_o
    expected = Q.T @ R
    S = torch.diag(expected) - (Q.T * R) @ Q
    deviation = drawn - expected
    statistic = (deviation @ torch.linalg.pinv(S, hermitian=True) @ deviation).item()
    return statistic, drawn, expected


def _uniformity_failure(inputs, tokens, to_random, vocab, case):
    """The message for replacements that are not uniform, or None if they look uniform."""
    k = len(vocab) - vocab.num_specials
    n = int(to_random.sum())
    if k < 3 or n < 30 * k:
        return None
    statistic, drawn, expected = _uniformity(inputs, tokens, to_random, vocab)
    cut = _chi2_cut(k - 1)
    if statistic <= cut:
        return None
    tenth = max(k // 10, 1)
    return (f"on {case}, the {n:,} random replacements (those that differ from the original "
            f"token) are not spread uniformly over the {k} ordinary ids: the first {tenth} "
            f"ids were drawn {drawn[:tenth].sum():,.0f} times in all, the last {tenth} "
            f"{drawn[-tenth:].sum():,.0f} times, where uniform draws give about "
            f"{expected[:tenth].sum():,.0f} and {expected[-tenth:].sum():,.0f} (the largest "
            f"count is {drawn.max():,.0f}, the smallest {drawn.min():,.0f}; chi-square "
            f"{statistic:,.0f} with {k - 1} degrees of freedom, where uniform draws exceed "
            f"{cut:.0f} with probability below {UNIFORM_TAIL:g}).",
            "draw each replacement uniformly from all ordinary ids: torch.randint("
            "vocab.num_specials, len(vocab), tokens.shape). A uniform number bent by a "
            "power (u ** a), or a draw from a fixed range taken modulo the number of ids "
            "(randint(0, 100) % k, which favours the low ids), is not uniform.")


def _check_replacements_uniform(inputs, tokens, to_random, vocab, case):
    """The random replacements of the 120,000-row call (about 39,500 that differ from their
    original token, about 660 per id) are uniform over the 60 ordinary ids: failing needs a
    chi-square (59 degrees of freedom) beyond its 1e-12 tail, 170. A right solution gives
    about 59 +- 11; ids 0..39 twice as likely as 40..59 (randint(0, 100) % 60) give about
    3,300, u ** 0.85 scaled to the ids about 780, u ** 0.75 about 2,300."""
    failure = _uniformity_failure(inputs, tokens, to_random, vocab, case)
    if failure:
        fail(*failure)


def _check_replacement_pairs(inputs, to_random, vocab, case):
    """Pairs of random replacements, each pair's agreement a Bernoulli of probability
    between 58/59^2 and 1/59 for a right solution, the pairs of one family disjoint (so
    independent): neighbours (j, j + 1) for j even and for j odd, and the 1st and 2nd
    replacement of a row, its 3rd and 4th, ..."""
    k = len(vocab) - vocab.num_specials
    p_low, p_high = (k - 2) / (k - 1) ** 2, 1 / (k - 1)    # avoiding the original, or not
    hint = ("draw one random token for each position on its own: torch.randint("
            "vocab.num_specials, len(vocab), tokens.shape), not one per pair of neighbours "
            "(a draw of half the length, repeated) or one per row combined with the "
            "position, and not tokens drawn without replacement.")
    n = inputs.shape[1]
    for parity, which in ((0, "even"), (1, "odd")):
        left, right = slice(parity, n - 1, 2), slice(parity + 1, n, 2)
        both = to_random[:, left] & to_random[:, right]
        m = int(both.sum())
        if m < 30:
            continue
        same = int((inputs[:, left][both] == inputs[:, right][both]).sum())
        high = _binomial_cutoffs(m, p_low, p_high)[1]
        if same >= high:
            fail(f"on {case}, of the {m} pairs of neighbouring positions (j, j + 1), j "
                 f"{which}, that both got a random token, {same} got the same token "
                 f"({same / m:.0%}); independent draws from the {k} ordinary tokens "
                 f"agree 1 time in {k} (at most {high - 1} of {m} here): the neighbours "
                 "share one draw.", hint)
    where = to_random.nonzero()                   # row-major: a row's replacements in order
    values = inputs[to_random]
    rank = (to_random.cumsum(1) - 1)[to_random]      # 0, 1, 2, ... within each row
    first = ((rank % 2 == 0)[:-1] & (where[1:, 0] == where[:-1, 0])).nonzero().flatten()
    m = len(first)
    if m < 1000:
        return
    same = int((values[first] == values[first + 1]).sum())
    low, high = _binomial_cutoffs(m, p_low, p_high)
    if same < low or same >= high:
        fail(f"on {case}, of the {m:,} pairs of random replacements in one row (a row's "
             f"1st and 2nd, its 3rd and 4th, ...), {same} are the same token "
             f"({same / m:.2%}); "
             f"independent draws from the {k} ordinary tokens agree 1 time in {k}, "
             f"{low} to {high - 1} times here: "
             + ("your replacements in one row avoid each other; they are not drawn for "
                "each position on its own." if same < low else
                "your replacements in one row are tied together."), hint)



WINDOW = 9  # the first (last) 9 of the 60 ordinary ids: 15% of them, as a choosing u < 0.15


def _check_replacements_apart_from_neighbours(inputs, labelled, to_random, vocab, case):
    """The random token of a position is its own draw, whatever its neighbours' choices:
    of the random replacements whose left (right) neighbour, or whose neighbour in the same
    column of the row above (below), is chosen (about 5,200 each in the row and 5,000 each
    in the column on the 120,000-row call), a share 9/60 falls among the first 9 ordinary
    ids, and as many among the last 9. For a right solution each replacement lands there
    with probability 9/60, or between 8/59 and 9/59 if it avoids the original token,
    independently of the others; a token made from
    a chosen neighbour's choosing uniform (u < 0.15, so u * 60 < 9) lands among the first
    9 every time (1 - u among the last 9). Failing needs a count at or beyond the exact
    binomial cut-off at PAIR_TAIL = 1e-9 (at p = 9/59): 4 neighbours x 2 ends x 1e-9."""
    k = len(vocab) - vocab.num_specials
    if k < 4 * WINDOW:
        return
    index = inputs - vocab.num_specials                   # 0 .. k - 1 where replaced
    for side, both, at in _neighbour_pairs(labelled, inputs.shape[0]):
        here = at(to_random) & both
        m = int(here.sum())
        if m < 500:
            continue
        high = _binomial_cutoffs(m, (WINDOW - 1) / (k - 1), WINDOW / (k - 1))[1]
        ids = at(index)[here]
        for end, inside in (("first", ids < WINDOW), ("last", ids >= k - WINDOW)):
            count = int(inside.sum())
            if count >= high:
                fail(f"on {case}, of the {m:,} random replacements whose {side} is "
                     f"chosen too, {count:,} ({count / m:.0%}) are among the {end} "
                     f"{WINDOW} of the {k} ordinary ids; drawn on their own, "
                     f"{WINDOW / k:.0%} would be (at most {high - 1:,} here): the random "
                     "token of a position depends on that neighbour's draws (its choosing "
                     "uniform, below 0.15 since it was chosen, turned into a token).",
                     "draw the random tokens on their own: torch.randint("
                     "vocab.num_specials, len(vocab), tokens.shape), or from the "
                     "position's own uniform, never from a neighbour's (no u.roll(...), no "
                     "overlapping slices of one draw).")

def _check_split_not_exact(log):
    """The 80/10/10 decision is drawn for each chosen position on its own, so the [MASK]
    count of a call spreads like a binomial (about 46 positions either way on 13,400
    chosen). An exact split (80% of the chosen positions, rounded) lands within one position
    of 80% at every call. A right solution does so with probability at most 3 times the
    largest binomial probability, 3 / sqrt(2 pi n 0.16), per call: on the check's calls with
    1,000 chosen or more, a product far below 1e-9 (computed here; the test is skipped if
    it is not)."""
    calls = [(n, m) for n, m in log if n >= 1000]
    bound = math.prod(min(1.0, 3.1 / math.sqrt(2 * math.pi * n * P_MASK * (1 - P_MASK)))
                      for n, _ in calls)
    if len(calls) >= 5 and bound < 1e-9 and all(abs(m - P_MASK * n) <= 1 for n, m in calls):
        fail(f"in each of the {len(calls)} calls, exactly 80% of the chosen positions "
             "became [MASK] (to within one position: "
             + ", ".join(f"{m:,} of {n:,}" for n, m in calls[:4])
             + ", ...); independent 80/10/10 decisions vary by about "
             f"{math.sqrt(calls[0][0] * 0.16):.0f} positions from call to call.",
             "decide for each chosen position on its own, with one uniform number per "
             "position (< 0.8 -> [MASK], 0.8 to 0.9 -> a random token, else unchanged), "
             "not by splitting the chosen positions into exact shares.")


def _check_tiny_vocabulary(fn, log):
    """One more call with a vocabulary of 2 ordinary tokens, where a random replacement is
    the original token half the time: of the chosen positions, exactly 80% must be [MASK]
    (a random token that may be [MASK] makes it 80% + 10%/3) and 10% + 10%/2 = 15% unchanged
    (a random token that avoids the original makes it 10%). About 26,800 chosen positions:
    5.5 standard errors are 1.3 and 1.2 points; the two faults move the shares by 3.3 and
    5 points (13.6 and 22.9 standard errors). False failure of a right solution: 2 x 3.8e-8
    (exact binomial)."""
    tiny = _masking_vocab(2)
    tokens = _masking_batch(tiny, num_rows=8000, seed=5)
    k = len(tiny) - tiny.num_specials
    case = (f"a batch of {tokens.shape[0]} BERT inputs with a vocabulary of {k} ordinary "
            "tokens")
    inputs, labels = _one_call(fn, tokens, tiny, case, log=log)
    _check_labels(inputs, labels, tokens, tiny)
    labelled = labels != IGNORE
    n = int(labelled.sum())
    if n < 1000:
        return  # the chosen rate is tested on the main batch
    masked = int((labelled & (inputs == tiny.mask)).sum())
    kept = int((labelled & (inputs == tokens)).sum())
    p_kept = P_KEEP * (1 + 1 / k)
    if abs(_z(masked, n, P_MASK)) > SE_TOLERANCE:
        fail(f"with a vocabulary of {k} ordinary tokens, {masked / n:.1%} of the {n:,} chosen "
             f"positions became [MASK]; expected 80% ({abs(_z(masked, n, P_MASK)):.1f} "
             f"standard errors off, tolerance {SE_TOLERANCE})."
             + (" Your random tokens include [MASK]: with so few ordinary ids, it shows."
                if masked / n > P_MASK else ""),
             "draw the random token from the ordinary ids only: torch.randint("
             "vocab.num_specials, len(vocab), ...); vocab.mask is the last special id, not "
             "the first ordinary one.")
    if abs(_z(kept, n, p_kept)) > SE_TOLERANCE:
        avoid = kept / n < p_kept
        fail(f"with a vocabulary of {k} ordinary tokens, {kept / n:.1%} of the {n:,} chosen "
             f"positions kept their token; expected 10% + 10% x 1/{k} = {p_kept:.0%} (the 10% "
             f"left unchanged, plus the random tokens that happen to be the original one, 1 "
             f"time in {k}); {abs(_z(kept, n, p_kept)):.1f} standard errors off, tolerance "
             f"{SE_TOLERANCE}."
             + (" Your random tokens avoid the original token." if avoid else
                " Your random tokens are the original token too often."),
             "draw the random token uniformly from all ordinary ids, the original one "
             "included: torch.randint(vocab.num_specials, len(vocab), tokens.shape), with no "
             "redraw or shift to avoid the original.")


def _check_three_ids(fn, log):
    """One more call with a vocabulary of 3 ordinary tokens (8,000 rows): a chosen position
    that is not made [MASK] is kept (probability 1/2) or gets a random token, each id with
    probability 1/3; so it shows id i with probability 1/2 [original = i] + 1/6, and the
    count of each id is a sum of independent Bernoullis (expected and variance computed from
    the batch). An id drawn as round(u (k - 1)) gives the end ids half weight (25/50/25%):
    about 13 standard errors on the middle id (with 2 ids that rounding is exactly uniform).
    Failing needs |z| > 6.5 for one of the 3 ids: normal tails 3 x 8e-11, x 2 for safety."""
    vocab = _masking_vocab(3)
    tokens = _masking_batch(vocab, num_rows=8000, seed=7)
    k = len(vocab) - vocab.num_specials
    case = (f"a batch of {tokens.shape[0]} BERT inputs with a vocabulary of {k} ordinary "
            "tokens")
    inputs, labels = _one_call(fn, tokens, vocab, case, log=log)
    _check_labels(inputs, labels, tokens, vocab)
    rest = (labels != IGNORE) & (inputs != vocab.mask)
    if rest.sum() < 500:
        return
    original, shown = tokens[rest], inputs[rest]
    for i in range(vocab.num_specials, len(vocab)):
        p = 0.5 * (original == i).double() + 0.5 / k
        z = ((shown == i).sum().item() - p.sum().item()) / math.sqrt(
            (p * (1 - p)).sum().item())
        if abs(z) > 6.5:
            share = ((shown != original) & (shown == i)).sum().item() / max(
                int((shown != original).sum()), 1)
            fail(f"with a vocabulary of {k} ordinary tokens, the chosen positions that "
                 f"were not made [MASK] show {vocab.idx_to_token[i]} (id {i}) "
                 f"{(shown == i).sum().item():,} times, expected about "
                 f"{p.sum().item():,.0f} (half of them kept, half a random token, each of "
                 f"the {k} ids with probability 1/{k}; z-score {z:.1f}, tolerance 6.5): "
                 "your random tokens are not uniform over the ordinary ids "
                 f"({share:.0%} of the changed ones are id {i}).",
                 "draw the random token with torch.randint(vocab.num_specials, len(vocab), "
                 "shape): every ordinary id equally likely. Rounding u * (k - 1) gives the "
                 "first and last ids half the weight of the others.")


def _action(inputs, labels, tokens, vocab):
    """Per position: -1 not chosen, 0 [MASK], 1 a random token, 2 kept."""
    labelled = labels != IGNORE
    action = torch.full(tokens.shape, -1)
    action[labelled & (inputs == vocab.mask)] = 0
    action[labelled & (inputs != vocab.mask) & (inputs != tokens)] = 1
    action[labelled & (inputs == tokens)] = 2
    return action


def _check_calls_independent(results, tokens, vocab):
    """Each call draws anew: its own rate (a counter kept between calls drifts), its own
    choice (a position chosen in one call is chosen in another 15% of the time) and its own
    80/10/10 decision (a position chosen twice gets the same treatment 66% of the time).
    Failing needs 5.5 standard errors on a call's rate (89,353 positions: 0.7 points), or an
    overlap above 1/2 of at least 1,000 positions, or agreement above 0.9 on at least 500:
    binomial tails below 1e-100 for a right solution."""
    ordinary = tokens >= vocab.num_specials
    n = int(ordinary.sum())
    actions = [_action(inputs, labels, tokens, vocab) for inputs, labels in results]
    for number, action in enumerate(actions, 1):
        chosen = int((action >= 0).sum())
        if abs(_z(chosen, n, P_CHOOSE)) > SE_TOLERANCE:
            shares = ", ".join(f"{(a >= 0).sum().item() / n:.2%}" for a in actions)
            fail(f"the {CALLS} calls chose {shares} of the {n:,} ordinary positions; each call "
                 f"must choose 15% (call {number} is {abs(_z(chosen, n, P_CHOOSE)):.1f} standard "
                 f"errors off, tolerance {SE_TOLERANCE}).",
                 "use the same probability 0.15 at every call; keep no counter or other "
                 "state between calls.")
    for a in range(CALLS):
        for b in range(a + 1, CALLS):
            first, second = actions[a] >= 0, actions[b] >= 0
            if first.sum() >= 1000 and (first & second).sum() / first.sum() > 0.5:
                fail(f"{(first & second).sum() / first.sum():.0%} of the positions chosen in "
                     f"call {a + 1} are chosen again in call {b + 1}; fresh draws choose "
                     "15% of them again.",
                     "draw the choice anew at every call (torch.rand(tokens.shape) < 0.15 "
                     "inside the function), not once and kept.")
            both = first & second
            same = (actions[a][both] == actions[b][both]).double().mean().item() \
                if both.sum() else 0.0
            if both.sum() >= 500 and same > 0.9:
                fail(f"the positions chosen in both call {a + 1} and call {b + 1} got the "
                     f"same treatment ([MASK], random or kept) {same:.0%} of the time; fresh "
                     "80/10/10 decisions agree 66% of the time.",
                     "draw the 80/10/10 decision anew at every call, not once and kept.")


def _check_replacements_from_the_whole_vocabulary(fn, tokens, log):
    """One more call with a vocabulary of 200 ordinary tokens, on the same batch (which uses
    only the first 60): replacements uniform over the vocabulary land beyond id 64 seven
    times in ten; drawn from the batch's ids (tokens.max(), tokens.unique()) never."""
    big = _masking_vocab(200)
    inputs, labels = _one_call(fn, tokens, big, "the same batch with a vocabulary of 200 "
                               "ordinary tokens (the batch uses the first 60)", log=log)
    labelled = labels != IGNORE
    replaced = labelled & (inputs != tokens) & (inputs != big.mask)
    if replaced.sum() < 100:
        return
    beyond = (inputs[replaced] > tokens.max()).double().mean().item()
    if beyond < 0.35:
        fail(f"with a vocabulary of 200 ordinary tokens, of which the batch uses only the "
             f"first 60, {beyond:.0%} of the random replacements are ids the batch does not "
             "hold; drawn from the whole vocabulary, 70% would be.",
             "draw replacements from all ordinary ids of the vocabulary: torch.randint("
             "vocab.num_specials, len(vocab), ...), not from the ids in the batch "
             "(tokens.max(), tokens.unique()).")


def _check_no_cap_per_row(rows_c, rows_m, p):
    """Rows with many chosen positions occur as often as independent choices make them: a
    cap per row (BERT's max_predictions_per_seq) leaves none. Failing needs fewer rows with
    9 or more chosen than expected minus 5.5 standard errors (of a sum of Bernoullis)."""
    if not 0 < p < 1:
        return
    def at_least_9(m):  # P(Binomial(m, p) >= 9)
        return 1 - sum(math.comb(m, k) * p ** k * (1 - p) ** (m - k) for k in range(9))

    tails = {m: at_least_9(m) for m in set(rows_m.tolist())}
    tail = torch.tensor([tails[m] for m in rows_m.tolist()], dtype=torch.float64)
    expected, var = tail.sum().item(), (tail * (1 - tail)).sum().item()
    seen = int((rows_c >= 9).sum())
    if expected >= 30 and seen < expected - SE_TOLERANCE * math.sqrt(var):
        fail(f"{seen} rows have 9 or more chosen positions; independent choices give about "
             f"{expected:.0f}: the number chosen per row is capped.",
             "choose each ordinary position independently with probability 0.15, with no "
             "maximum per row.")


def _check_rows_drawn_apart(labelled, num_rows):
    """Rows draw apart: a position chosen in one row is chosen in the same column of another
    row 15% of the time. A draw copied between rows (the second half of the batch reusing
    the first half's) agrees far more. Failing needs an overlap above 1/2 of at least 1,000
    positions."""
    first = labelled[:num_rows]                     # the first call's rows
    for shift in sorted({1, 2, num_rows // 4, num_rows // 3, (num_rows + 1) // 2}):
        a, b = first[:-shift], first[shift:]
        if a.sum() >= 1000 and (a & b).sum() / a.sum() > 0.5:
            fail(f"{(a & b).sum() / a.sum():.0%} of the chosen positions are chosen again "
                 f"{shift} rows further down, in the same column; independent draws give 15%.",
                 "draw one random number per position of the whole batch "
                 "(torch.rand(tokens.shape)), not one row's draws repeated.")


ROW_TOLERANCE = 8.0     # the largest z-score over every lag between rows (see below)
ROW_MIN_PAIRS = 2000    # lags with fewer pairs of positions are not scored
ROW_COLUMNS = 8         # the columns scored (those with the most ordinary positions)


def _row_lag_scores(events, trials):
    """For each lag s (0 .. R - 1) between rows: a z-score of the association, column by
    column, between the positions of row i and of row i + s, and the number of those pairs.
    events[i, j] (chosen, or made [MASK]) is a Bernoulli of probability p_j, the pooled
    share of column j, wherever trials[i, j] (an ordinary position, or a chosen one) holds.
    With x = events - p_j trials, independent rows give sum_i,j x[i, j] x[i + s, j] mean
    0 and variance sum_i,j v[i, j] v[i + s, j], v = p_j (1 - p_j) trials: z_s is their
    ratio. Every lag at once from autocorrelations along the rows (FFTs, zero-padded)."""
    events, trials = events.double().T, trials.double().T          # (columns, R)
    p = events.sum(1) / trials.sum(1).clamp(min=1)
    x = events - p[:, None] * trials
    n, R = x.shape
    size = 1 << (2 * R - 1).bit_length()
    f = torch.fft.rfft(torch.cat([x, trials]), n=size, dim=1)
    power = f.real ** 2 + f.imag ** 2
    spectra = torch.stack([power[:n].sum(0), (power[n:] * ((p * (1 - p)) ** 2)[:, None]).sum(0),
                           power[n:].sum(0)])
    num, den, pairs = torch.fft.irfft(spectra, n=size, dim=1)[:, :R]
    pairs = pairs.round()
    z = torch.where((pairs >= ROW_MIN_PAIRS) & (den > 0), num / den.clamp(min=1e-300).sqrt(),
                    torch.zeros_like(num))
    z[0] = 0.0
    return z, pairs


def _check_rows_independent(labelled, ordinary, to_mask, case, columns=None):
    """Each row draws apart from every other: the position in column j of row i is chosen,
    and made [MASK], independently of the same column of row i + s, for every lag s (on
    `columns` only, if given: the check scores the ROW_COLUMNS columns with the most
    ordinary positions, which keeps the FFTs cheap; a shared draw shows in any of them). Rows that share their draws (rows in pairs: row 2k + 1
    reusing row 2k's uniforms; a table of uniforms for at most 65,536 rows repeated down a
    longer batch) tie some lag together: its z-score is then in the hundreds. A right
    solution's z-score at each lag is a sum of at least ROW_MIN_PAIRS = 2,000 products of
    independent centred Bernoullis (skewness of a product at most 3.9, of the sum at most
    0.09), close to a standard normal: the first Edgeworth term multiplies the tail beyond
    8 by at most 1 + 0.09 x 8 x 63 / 6 = 8.6, so with one test per lag the false failure is
    below 2 x 120,000 x 8.6 x P(N > 8) = 1.3e-9 for each of the four tests (choice and
    [MASK] decision, on the main calls and on the 120,000-row call)."""
    if columns is not None:
        labelled, ordinary, to_mask = labelled[:, columns], ordinary[:, columns], \
            to_mask[:, columns]
    for events, trials, what, share, hint in (
            (labelled, ordinary, "chosen", P_CHOOSE,
             "draw one random number per position of the whole batch, "
             "torch.rand(tokens.shape) < 0.15: no draws shared between rows (rows in pairs "
             "or groups, or a table of rows repeated down a long batch)."),
            (to_mask, labelled, "made [MASK]", P_MASK,
             "draw the 80/10/10 decision for each position of the whole batch on its own, "
             "torch.rand(tokens.shape): no uniforms shared between rows (rows in pairs or "
             "groups, or a table of rows repeated down a long batch).")):
        z, pairs = _row_lag_scores(events, trials)
        lag = int(z.abs().argmax())
        if z[lag].abs() <= ROW_TOLERANCE:
            continue
        first = events[:-lag] & trials[lag:]
        again = (first & events[lag:]).sum().item() / max(first.sum().item(), 1)
        direction = "more" if z[lag] > 0 else "less"
        fail(f"on {case}, the rows are not drawn independently: of the positions "
             f"{what} in a row (where the row {lag:,} further down has "
             f"{'an ordinary token' if what == 'chosen' else 'a chosen position'} in the "
             f"same column), {again:.1%} are {what} there too, where independent draws "
             f"give {share:.0%} ({int(pairs[lag]):,} pairs, z-score {z[lag]:.1f}, tolerance "
             f"{ROW_TOLERANCE} over every distance between rows): rows {lag:,} apart are "
             f"{what} together {direction} often than chance.", hint)


def _check_every_ordinary_id_chosen(T, labelled, vocab):
    """An id that occurs MIN_OCCURRENCES times or more is chosen at least once, except with
    probability 0.85^300 < 1e-21."""
    ids = T[T >= vocab.num_specials]
    occurrences = torch.bincount(ids, minlength=len(vocab))
    chosen = torch.bincount(T[labelled], minlength=len(vocab))
    never = ((occurrences >= MIN_OCCURRENCES) & (chosen == 0)).nonzero().flatten()
    if len(never):
        i = never[0].item()
        fail(f"the ordinary token {vocab.idx_to_token[i]} (id {i}) occurs "
             f"{occurrences[i].item():,} times in the batch but was never chosen: every "
             "ordinary token may be chosen.",
             "ordinary ids are those >= vocab.num_specials (the first ordinary id is "
             "vocab.num_specials itself: >=, not >).")


def _check_replacements_drawn_anew(inputs, to_random, vocab):
    """Each random replacement is a fresh uniform draw, so two of them agree 1 time in 60:
    two in the same row, and the two replacements of one position in two calls. A token per
    row, a token computed from the position, or a table kept between calls agree far more
    often. Failing needs an agreement share above 1/4 over at least 50 pairs or above 1/2 over
    at least 20 positions; for a right solution (agreement 1/60, or 1/59 for one that avoids
    the original token) the binomial tails are below 3e-12 and 1e-13."""
    k = len(vocab) - vocab.num_specials
    counts = torch.zeros(inputs.shape[0], len(vocab))
    counts.index_put_((to_random.nonzero()[:, 0], inputs[to_random]),
                      torch.ones(int(to_random.sum())), accumulate=True)   # (rows, ids)
    per_row = counts.sum(1)
    pairs = (per_row * (per_row - 1) / 2).sum().item()
    equal = (counts * (counts - 1) / 2).sum().item()
    if pairs >= 50 and equal / pairs > 0.25:
        fail(f"{equal:,.0f} of the {pairs:,.0f} pairs of random replacements that share a row "
             f"are the same token ({equal / pairs:.0%}); independent draws from the {k} "
             f"ordinary tokens agree 1 time in {k}.",
             "draw one random token per position, e.g. torch.randint(vocab.num_specials, "
             "len(vocab), tokens.shape), not one per row.")
    calls = inputs.view(CALLS, -1, inputs.shape[1])
    random_in = to_random.view(CALLS, -1, inputs.shape[1])
    for a in range(CALLS):
        for b in range(a + 1, CALLS):
            both = random_in[a] & random_in[b]
            n = int(both.sum())
            same = int((calls[a][both] == calls[b][both]).sum())
            if n >= 20 and same / n > 0.5:
                fail(f"{same} of the {n} positions that got a random token in both call "
                     f"{a + 1} and call {b + 1} got the same token both times; fresh draws "
                     f"from the {k} ordinary tokens agree 1 time in {k}.",
                     "draw the replacement tokens anew at every call: no table kept between "
                     "calls, no token computed from the position.")


def _check_replacements_not_from_the_row(T, inputs, to_random, vocab):
    """A uniform replacement lands on an id already in its row with probability (number of
    distinct ordinary ids in the row) / 60; a replacement drawn from the row itself always
    does. The centre allows both the uniform draw and one that avoids the original token."""
    k = len(vocab) - vocab.num_specials
    rows = to_random.nonzero()[:, 0]
    if len(rows) == 0:
        return
    present = torch.zeros(T.shape[0], len(vocab), dtype=torch.bool)
    present.scatter_(1, T, True)
    present[:, : vocab.num_specials] = False
    distinct = present.sum(1).double()                           # per row
    hit = present[rows, inputs[to_random]].double()
    uniform = (distinct[rows] / k).mean().item()
    avoiding = ((distinct[rows] - 1) / (k - 1)).mean().item()
    centre, slack = (uniform + avoiding) / 2, abs(uniform - avoiding) / 2
    se = math.sqrt(centre * (1 - centre) / len(rows))
    share = hit.mean().item()
    if abs(share - centre) > slack + SE_TOLERANCE * se:
        failure = _uniformity_failure(inputs, T, to_random, vocab, "the main batch")
        if failure:  # ids not uniform: a draw that is skewed, not one copied from the row
            fail(*failure)
        if share < centre:
            fail(f"only {share:.0%} of the random replacements are tokens that already "
                 f"occur in their own row; a token drawn uniformly from the whole "
                 f"vocabulary does so {centre:.0%} of the time: your replacements avoid "
                 "the tokens of their row (or favour the ids that are rare in this batch, "
                 "whose ids follow Zipf's law).",
                 "draw replacements uniformly from all ordinary ids, torch.randint("
                 "vocab.num_specials, len(vocab), tokens.shape), whatever the row holds.")
        fail(f"{share:.0%} of the random replacements are tokens that already occur in their "
             f"own row; a token drawn from the whole vocabulary does so {centre:.0%} of the "
             "time.", "draw replacements from the vocabulary's ordinary ids, "
                      "torch.randint(vocab.num_specials, len(vocab), ...), not from the row.")


def _replacement_bounds(n, k):
    """Bounds for the count of each of k ids among n uniform draws: below 5 is all but
    impossible (P(count <= 4) < 1e-9 for n / k >= 30); above mean + 7 SE too."""
    mean, se = n / k, math.sqrt(n * (1 / k) * (1 - 1 / k))
    return (5 if mean >= 30 else 0), math.ceil(mean + 7 * se)


# -- Exercise 8.2: the parameter count --------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _reference_param_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    from ..bert import BERTModel, num_params

    heads = 1  # the number of heads does not change the count
    init = torch.nn.init.normal_
    torch.nn.init.normal_ = lambda tensor, *args, **kwargs: tensor  # shapes only: skip the
    try:                                                             # first call's 2 s import
        with torch.device("meta"):
            model = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, heads, num_blks, 0.0,
                              max_len)
    finally:
        torch.nn.init.normal_ = init
    return num_params(model)


def _count(V, H, F, L, P, *, emb_ln=True, pos=True, seg=2, att=4, att_bias=True,
           ffn_bias=True, block_lns=2, pooler=True, mlm_ln=True, mlm_hidden=True,
           mlm_out_bias=True, tied=False, nsp=True, nsp_bias=True, ln=2):
    """BERTModel's count by parts, with switches for the usual slips."""
    embeddings = V * H + seg * H + (P * H if pos else 0) + (ln * H if emb_ln else 0)
    block = att * (H * H + (H if att_bias else 0)) + H * F + F * H + \
        ((F + H) if ffn_bias else 0) + block_lns * ln * H
    mlm = ((H * H + H) if mlm_hidden else 0) + (ln * H if mlm_ln else 0) + \
        (0 if tied else H * V) + (V if mlm_out_bias else 0)
    return embeddings + L * block + ((H * H + H) if pooler else 0) + mlm + \
        ((2 * H + (2 if nsp_bias else 0)) if nsp else 0)


_SLIPS = [  # (switches, what a count with them does)
    (dict(mlm_ln=False), "leaves out the MLM head's LayerNorm (2 x num_hiddens)"),
    (dict(mlm_hidden=False), "leaves out the MLM head's hidden layer (num_hiddens x "
                             "num_hiddens + num_hiddens)"),
    (dict(emb_ln=False), "leaves out the LayerNorm after the embeddings (2 x num_hiddens)"),
    (dict(pooler=False), "leaves out the pooler (a num_hiddens x num_hiddens layer with "
                         "bias)"),
    (dict(pos=False), "leaves out the position embeddings (max_len x num_hiddens)"),
    (dict(seg=0), "leaves out the segment embeddings (2 x num_hiddens)"),
    (dict(att_bias=False), "leaves out the biases of the four attention projections "
                           "(4 x num_hiddens per block)"),
    (dict(ffn_bias=False), "leaves out the biases of the FFN (ffn_num_hiddens + num_hiddens "
                           "per block)"),
    (dict(block_lns=1), "counts one LayerNorm per block instead of two (2 x num_hiddens "
                        "missing per block)"),
    (dict(block_lns=0), "leaves out the two LayerNorms of every block (4 x num_hiddens per "
                        "block)"),
    (dict(mlm_out_bias=False), "leaves out the bias of the MLM output layer (vocab_size)"),
    (dict(tied=True), "leaves out the MLM output layer's weight (num_hiddens x vocab_size), "
                      "which BERTModel does not tie to the token embeddings"),
    (dict(nsp_bias=False), "leaves out the bias of the NSP head (2)"),
    (dict(nsp=False), "leaves out the NSP head (num_hiddens x 2 + 2)"),
    (dict(att=3), "counts three attention projections per block instead of four (W_q, "
                  "W_k, W_v and the output projection W_o)"),
    (dict(ln=1), "counts a LayerNorm(H) as H parameters; it has 2H (a scale and a shift per "
                 "feature)"),
    (dict(F=4), "uses 4 x num_hiddens as the FFN's hidden size instead of ffn_num_hiddens"),
    (dict(P=512), "uses max_len = 512 instead of the max_len argument"),
    (dict(seg="P"), "gives the segment embeddings max_len rows instead of 2"),
    (dict(seg=3), "gives the segment embeddings 3 rows instead of 2 (3 x num_hiddens)"),
    (dict(seg_numbers=True), "counts the segment embeddings as 2 numbers instead of 2 rows "
                             "of num_hiddens (2 x num_hiddens)"),
    (dict(wo_bias=False), "leaves out the bias of the attention's output projection W_o "
                          "(num_hiddens per block)"),
    (dict(extra_blk=True), "counts num_blks + 1 blocks (one block too many: an off-by-one "
                           "in the loop over the blocks?)"),
    (dict(extra_pos=1), "gives the position embeddings max_len + 1 rows instead of "
                        "max_len"),
    (dict(extra_pos=2), "gives the position embeddings max_len + 2 rows instead of "
                        "max_len (RoBERTa's offset for the padding id; BERTModel has "
                        "max_len rows)"),
    (dict(ffn2_bias=False), "leaves out the bias of the FFN's second layer, dense2 "
                            "(num_hiddens per block)"),
    (dict(ffn1_bias=False), "leaves out the bias of the FFN's first layer, dense1 "
                            "(ffn_num_hiddens per block)"),
    (dict(mlm_hidden_bias=False), "leaves out the bias of the MLM head's hidden layer "
                                  "(num_hiddens)"),
    (dict(pooler_bias=False), "leaves out the bias of the pooler (num_hiddens)"),
]


def _slip_count(config, kw):
    V, H, F, L, P = config
    kw = dict(kw)
    F = 4 * H if kw.pop("F", None) == 4 else F
    P = 512 if kw.pop("P", None) == 512 else P
    if kw.get("seg") == "P":
        kw["seg"] = P
    L = L + 1 if kw.pop("extra_blk", False) else L
    extra = -L * H if kw.pop("wo_bias", True) is False else 0
    extra -= L * H if kw.pop("ffn2_bias", True) is False else 0
    extra -= L * F if kw.pop("ffn1_bias", True) is False else 0
    extra -= H if kw.pop("mlm_hidden_bias", True) is False else 0
    extra -= H if kw.pop("pooler_bias", True) is False else 0
    extra += H * kw.pop("extra_pos", 0)
    if kw.pop("seg_numbers", False):
        kw["seg"], extra = 0, extra + 2
    return _count(V, H, F, L, P, **kw) + extra


def _named_slips(got, configs):
    """Every slip (or pair of slips) whose count equals the learner's on every
    configuration (several when they cannot be told apart, e.g. two LayerNorms of 2H)."""
    found = [what for kw, what in _SLIPS
             if all(_slip_count(c, kw) == g for c, g in zip(configs, got))]
    if found:
        return found
    for i, (kw1, what1) in enumerate(_SLIPS):
        for kw2, what2 in _SLIPS[i + 1:]:
            if set(kw1) & set(kw2):
                continue
            if all(_slip_count(c, {**kw1, **kw2}) == g for c, g in zip(configs, got)):
                found.append(f"{what1}, and {what2}")
    return found


def _as_int(got):
    """The learner's count as a Python int, if it is one in value (numpy ints, 0-d tensors
    and integral floats included); None otherwise."""
    if isinstance(got, bool):
        return None
    if isinstance(got, torch.Tensor):
        if got.numel() != 1:
            return None
        got = got.item()
    if hasattr(got, "item") and getattr(got, "shape", None) == ():  # a NumPy scalar/0-d array
        got = got.item()
    if isinstance(got, numbers.Integral):
        return int(got)
    if isinstance(got, float) and got.is_integer():
        return int(got)
    return None


def _building_refused():
    from .. import bert, transformer

    return [(bert.BERTModel, "__init__"), (bert.BERTEncoder, "__init__"),
            (bert.MaskLM, "__init__"), (transformer.TransformerEncoderBlock, "__init__")]


@checker("bert_param_count", random=True)  # a model built to count draws
def check_bert_param_count(fn):
    """Check `fn(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)` -> int, the
    number of parameters of book.bert.BERTModel, against the model itself (meta device), on
    seven configurations, one with an odd num_hiddens (15: BERTModel builds it with 1, 3 or
    5 heads; a count that divides num_hiddens by 4 heads or 2 is off there), the last above
    2^31 parameters (a count in int32 overflows there); a wrong count is matched against
    the usual slips on all seven (every slip that fits is named). Then num_blks=0 (the
    model builds; max(num_blks, 1) is named), and more configurations and the seven again
    (a count that keeps state)."""
    cases = [(100, 16, 40, 1, 20), (100, 15, 40, 2, 20), (500, 32, 64, 3, 64),
             (1293, 128, 256, 2, 64),
             (30522, 768, 3072, 12, 512), (30522, 1024, 4096, 24, 512),
             (250000, 4096, 16384, 48, 2048)]
    expected = [_reference_param_count(*c) for c in cases]
    got, returned = [], []
    why = "the exercise asks for the count by formula (do not build the model)."
    for (V, H, F, L, P), want in zip(cases, expected):
        case = (f"vocab_size={V}, num_hiddens={H}, ffn_num_hiddens={F}, num_blks={L}, "
                f"max_len={P}")
        with forbidden(_building_refused(), why):
            value = call(fn, V, H, F, L, P, name="bert_param_count", case=case)
        count = _as_int(value)
        if count is None:
            fail(f"bert_param_count should return a whole number, got "
                 f"{type(value).__name__} {str(value)[:60]} on {case}.",
                 "return the total only, as a number (an int; a float with a whole value "
                 "is accepted too): no tuple, string or print.")
        got.append(count)
        returned.append(value)
    if got == expected:
        _check_no_blocks(fn)
        _check_count_keeps_no_state(fn, cases)
        return None
    for (V, H, F, L, P), want, count, value in zip(cases, expected, got, returned):
        if count != want:
            case = (f"vocab_size={V}, num_hiddens={H}, ffn_num_hiddens={F}, num_blks={L}, "
                    f"max_len={P}")
            diff = count - want
            break
    if diff % 2 ** 32 == 0:  # the right count, wrapped around in 32-bit integers
        fail(f"bert_param_count gives {count:,} on {case}; the model has {want:,}: your "
             "count overflowed a 32-bit integer (it wraps around beyond 2^31 - 1).",
             "compute with Python ints (int(...) of every argument), not numpy.int32 or "
             "torch.int32 values.")
    floating = isinstance(value, float) or (isinstance(value, torch.Tensor)
                                            and value.is_floating_point()) \
        or type(value).__module__ == "numpy" and "float" in type(value).__name__
    if floating and count == int(torch.tensor(float(want), dtype=torch.float32).item()):
        # exactly the right count rounded to float32
        fail(f"bert_param_count gives {count:,} on {case}; the model has {want:,}, "
             f"{abs(diff):,} {'more' if diff > 0 else 'fewer'}. You returned a float "
             f"({type(value).__name__}): counts this large are rounded in floating point.",
             "return an int and compute with Python ints throughout (no float32 tensors, "
             "numpy floats, / or math.pow): 4 * H ** 2, not a tensor product.")
    if all(g == w or abs(g - w) <= 1e-6 * w for g, w in zip(got, expected)) and all(
            g == w for g, w in zip(got, expected) if w < 2 ** 24):
        # right below 2^24, a few units off above: float32 arithmetic (24-bit significand)
        fail(f"bert_param_count gives {count:,} on {case}; the model has {want:,} "
             f"({abs(diff):,} {'more' if diff > 0 else 'fewer'}), while it is exact on "
             "every configuration below 2^24 = 16,777,216 parameters: that is float32 "
             "rounding, not a missing part (float32 holds whole numbers exactly only up to "
             "2^24).",
             "compute with Python ints (int(...) of every argument; no float32 tensors, "
             "numpy float32 values, / or math.pow), and return an int.")
    slips = _named_slips(got, cases)
    slips = slips if len(slips) <= 3 else []  # too many ways to get there: say nothing
    direction = f"{-diff:,} too few" if diff < 0 else f"{diff:,} too many"
    odd = [c for c, g, w in zip(cases, got, expected) if g != w]
    hint = (f"on all {len(cases)} configurations your count equals a count that "
            + "; or one that ".join(slips) + "." if slips else
            f"your count is right on every configuration whose num_hiddens is a multiple of "
            f"4 and wrong on num_hiddens={odd[0][1]}: it rounds num_hiddens down somewhere "
            "(num_hiddens // 4 columns for each of 4 heads, or a LayerNorm counted as "
            "halves, num_hiddens // 2). BERTModel's attention projections are num_hiddens x "
            "num_hiddens (plus num_hiddens biases) whatever the number of heads, and a "
            "LayerNorm has 2 x num_hiddens parameters; keep the count in whole num_hiddens."
            if all(c[1] % 4 for c in odd) else
            "count part by part: embeddings (token, segment, position, LayerNorm), num_blks x "
            "(attention 4(H^2+H), FFN H*F+F + F*H+H, two LayerNorms 2 x 2H), pooler H^2+H, MLM "
            "head (H^2+H, LayerNorm 2H, H*V+V), NSP head 2H+2.")
    fail(f"bert_param_count gives {count:,} on {case}; the model has {want:,} "
         f"(yours is {direction}).", hint)


def _check_no_blocks(fn):
    """num_blks=0: BERTModel builds (embeddings, pooler and heads, no encoder block), and
    its count is the formula's with no block term. A count that keeps at least one block
    (max(num_blks, 1)) is one block's parameters too many there."""
    config = V, H, F, L, P = (100, 16, 40, 0, 20)
    case = (f"vocab_size={V}, num_hiddens={H}, ffn_num_hiddens={F}, num_blks={L}, "
            f"max_len={P} (no encoder block: BERTModel builds with num_blks=0)")
    with forbidden(_building_refused(), "the exercise asks for the count by formula (do "
                   "not build the model)."):
        value = call(fn, *config, name="bert_param_count", case=case)
    count, want = _as_int(value), _reference_param_count(*config)
    if count == want:
        return
    shown = f"{count:,}" if count is not None else f"{type(value).__name__} {value!s:.60}"
    block = _count(V, H, F, 1, P) - _count(V, H, F, 0, P)
    one_block = count is not None and count - want == block
    fail(f"bert_param_count gives {shown} on {case}; the model has {want:,}"
         + (f", {block:,} fewer: yours counts one block's parameters ({block:,}) with no "
            "block there, as if it kept at least one (max(num_blks, 1)?)." if one_block else
            ". It was right on every configuration with one block or more."),
         "multiply the per-block count by num_blks itself: with 0 blocks the blocks add "
         "nothing, and the embeddings, pooler and heads remain.")


def _check_count_keeps_no_state(fn, cases):
    """The count depends on the arguments only: configurations that share vocab_size and
    num_hiddens with an earlier one (another max_len, ffn_num_hiddens, num_blks), then every
    configuration again in reverse order. A cache keyed on some of the arguments reuses a
    stale count there."""
    more = [(100, 16, 40, 1, 50), (100, 16, 64, 2, 20), (500, 32, 128, 1, 64),
            (30522, 768, 3072, 12, 128)]
    why = "the exercise asks for the count by formula (do not build the model)."
    for config in more + cases[::-1]:
        V, H, F, L, P = config
        case = (f"vocab_size={V}, num_hiddens={H}, ffn_num_hiddens={F}, num_blks={L}, "
                f"max_len={P}")
        with forbidden(_building_refused(), why):
            value = call(fn, V, H, F, L, P, name="bert_param_count", case=case)
        count, want = _as_int(value), _reference_param_count(*config)
        if count == want:
            continue
        shown = f"{count:,}" if count is not None else \
            f"{type(value).__name__} {value!s:.60}"
        if config in cases:
            fail(f"bert_param_count gives {shown} on {case} when called again; it gave the "
                 f"right count, {want:,}, the first time: the count must depend only on "
                 "the arguments.",
                 "keep nothing between calls (no dict, global or cache keyed on only some "
                 "of the arguments); functools.lru_cache on all five is fine.")
        earlier = next(c for c in cases if c[:2] == config[:2])
        fail(f"bert_param_count gives {shown} on {case}; the model has {want:,}. It was "
             f"right on every earlier configuration, among them vocab_size={earlier[0]}, "
             f"num_hiddens={earlier[1]}, ffn_num_hiddens={earlier[2]}, "
             f"num_blks={earlier[3]}, max_len={earlier[4]} (the same vocab_size and "
             "num_hiddens): does your function keep something between calls?",
             "the count must depend on all five arguments and nothing else: no dict, "
             "global or cache keyed on only some of them (functools.lru_cache on all five "
             "is fine).")
