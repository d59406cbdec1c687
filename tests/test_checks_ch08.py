"""Chapter 8's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch08.py), and kinds that round 1 missed. Also: the masking
checker's false-failure rate for a right solution, recomputed from its tolerances."""
import functools
import math
import random

import numpy as np
import pytest
import torch

from book import checks
from book.bert import IGNORE, mask_tokens
from book.checks import ch08
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects


def reference_masking(tokens, vocab):
    return mask_tokens(tokens, vocab)


def exact_count_masking(tokens, vocab):
    """d2l's variant: exactly round(15%) of each row's ordinary positions. Not what the
    exercise asks ("each ordinary position independently")."""
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
    for i, row in enumerate(tokens):
        candidates = (row >= vocab.num_specials).nonzero().flatten()
        chosen = candidates[torch.randperm(len(candidates))[: max(1, round(0.15 * len(candidates)))]]
        for j in chosen.tolist():
            labels[i, j] = row[j]
            u = torch.rand(()).item()
            if u < 0.8:
                inputs[i, j] = vocab.mask
            elif u < 0.9:
                inputs[i, j] = torch.randint(vocab.num_specials, len(vocab), ()).item()
    return inputs, labels


def masking(p=0.15, shares=(0.8, 0.1), specials_too=False, random_from=None, label_all=False,
            unchosen_label=IGNORE):
    """A masking function with one thing changed from the reference."""
    def fn(tokens, vocab):
        candidates = torch.ones_like(tokens, dtype=torch.bool) if specials_too else tokens >= vocab.num_specials
        chosen = candidates & (torch.rand(tokens.shape) < p)
        action = torch.rand(tokens.shape)
        low = vocab.num_specials if random_from is None else random_from
        random_tokens = torch.randint(low, len(vocab), tokens.shape)
        inputs = torch.where(chosen & (action < shares[0]), vocab.mask, tokens)
        to_random = chosen & (action >= shares[0]) & (action < shares[0] + shares[1])
        inputs = torch.where(to_random, random_tokens, inputs)
        labelled = (tokens >= vocab.num_specials) if label_all else chosen
        return inputs, torch.where(labelled, tokens, unchosen_label)
    return fn


def in_place(tokens, vocab):
    inputs, labels = mask_tokens(tokens, vocab)
    tokens.copy_(inputs)
    return tokens, labels


def every_seventh(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.arange(tokens.shape[1]) % 7 == 3)
    return torch.where(chosen, vocab.mask, tokens), torch.where(chosen, tokens, IGNORE)


def one_random_token(tokens, vocab):
    inputs, labels = mask_tokens(tokens, vocab)
    swapped = (labels != IGNORE) & (inputs != tokens) & (inputs != vocab.mask)
    return torch.where(swapped, vocab.num_specials, inputs), labels


def stub(*args):
    raise NotImplementedError("write your solution here")


def batch_wide_count(tokens, vocab):
    """Exactly 15% of all the batch's ordinary positions, spread at random over the batch:
    only the total is fixed; every row's count is (all but) binomial. Not told apart from
    independent draws, and harmless: accepted."""
    ordinary = (tokens >= vocab.num_specials).flatten().nonzero().flatten()
    pick = ordinary[torch.randperm(len(ordinary))[: round(0.15 * len(ordinary))]]
    chosen = torch.zeros(tokens.numel(), dtype=torch.bool)
    chosen[pick] = True
    chosen = chosen.reshape(tokens.shape)
    action = torch.rand(tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def python_seeded(tokens, vocab):
    """Python's random, seeded inside 'for reproducibility'."""
    rng = random.Random(0)
    chosen = torch.tensor([[rng.random() < 0.15 for _ in row] for row in tokens.tolist()])
    chosen &= tokens >= vocab.num_specials
    return torch.where(chosen, vocab.mask, tokens), torch.where(chosen, tokens, IGNORE)


def unk_replacement(tokens, vocab):
    inputs, labels = mask_tokens(tokens, vocab)
    swapped = (labels != IGNORE) & (inputs != tokens) & (inputs != vocab.mask)
    return torch.where(swapped, vocab.unk, inputs), labels


def mask_only_the_masked(tokens, vocab):
    """The 10% left unchanged get no label (only [MASK] and random ones are labelled)."""
    inputs, labels = mask_tokens(tokens, vocab)
    return inputs, torch.where(inputs != tokens, labels, IGNORE)


def _finish(tokens, vocab, chosen, action, replacements=None):
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape) \
        if replacements is None else replacements
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def action_per_column(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    return _finish(tokens, vocab, chosen, torch.rand(1, tokens.shape[1]).expand(tokens.shape))


def from_the_row(tokens, vocab):
    """The random token is another ordinary token of the same row."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    ordinary = tokens >= vocab.num_specials
    shuffled = tokens.clone()
    for r in range(tokens.shape[0]):
        idx = ordinary[r].nonzero().flatten()
        shuffled[r, idx] = tokens[r, idx[torch.randperm(len(idx))]]
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape), shuffled)


def spans_of_three(tokens, vocab):
    start = torch.rand(tokens.shape) < 0.05
    chosen = (start | start.roll(1, 1) | start.roll(2, 1)) & (tokens >= vocab.num_specials)
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape))


WRONG_MASKINGS = {
    "wrong rate: 10%": (masking(p=0.10), "15%"),
    "wrong rate: 30%": (masking(p=0.30), "15%"),
    "no 80/10/10 split: all [MASK]": (masking(shares=(1.0, 0.0)), "80%"),
    "split swapped: 10% [MASK], 80% unchanged": (masking(shares=(0.1, 0.1)), "80%"),
    "no random tokens: 90% [MASK]": (masking(shares=(0.9, 0.0)), "80%"),
    "special tokens masked": (masking(specials_too=True), "special token"),
    "labels on unmasked positions": (masking(label_all=True), "only the chosen 15%"),
    "label 0 instead of -100": (masking(unchosen_label=0), "-100"),
    "random token may be special": (masking(random_from=0), "special token"),
    "always the same random token": (one_random_token, "are not spread over the 60"),
    "a fixed pattern": (every_seventh, "gave the same masks"),
    "changes its input": (in_place, "changed its argument `tokens` in place"),
    "returns only the inputs": (lambda t, v: mask_tokens(t, v)[0], "tuple"),
    "returns floats": (lambda t, v: tuple(x.float() for x in mask_tokens(t, v)), "dtype"),
    "unimplemented stub": (stub, "not implemented yet"),
    "exactly round(15%) of each row": (exact_count_masking, "dispersion index"),
    # kinds round 1 missed
    "Python's random seeded inside": (python_seeded, "gave the same masks"),
    "[UNK] as the random token": (unk_replacement, "special token [UNK]"),
    "the unchanged 10% without labels": (mask_only_the_masked, "must still have a label"),
    "80/10/10 decision per column": (action_per_column, "[MASK] share of the chosen"),
    "random token taken from the same row": (from_the_row, "taken from the batch or the row"),
    "spans of three tokens": (spans_of_three, "positions are chosen together"),
}

R1_EXPECTED = {
    "one draw per row": "the rows differ more than independent choices allow",
    "exactly round(15%) per row (BERT/d2l style)": "a fixed number of positions per row",
    "one draw per column, shared by rows": "one draw per column",
    "torch.manual_seed(0) inside": "do not seed inside the function",
    "private generator seeded 0 inside": "gave the same masks",
    "sequential draws: 2% random, 18% kept": "the unchanged share is",
    "labels only where the input changed": "must still have a label",
    "special tokens can be chosen": "a special token was chosen",
    "random token may be special": "was replaced by the special token",
    "random token never the last id": "ids [64] appear [0] times",
    "one random token for the whole batch": "not spread over the 60 ordinary tokens",
    "writes into tokens": "changed its argument `tokens` in place",
    "labels everywhere": "only the chosen 15% get one",
    "labels hold the new input": "the label of a chosen position is the token it had",
    "numpy arrays out": "got a ndarray",
    "float labels": "expected int64 (torch.long)",
    "p = 0.12": "the share of ordinary positions chosen",
    "p = 0.16": "the share of ordinary positions chosen",
    "85 / 7.5 / 7.5 split": "standard errors off for [MASK]",
    "neighbouring pairs chosen together": "neighbouring positions are not chosen",
    "82 / 9 / 9 split": "standard errors off for [MASK]",
    "random tokens from half the vocabulary": "not spread over the 60 ordinary tokens",
    "80/10/10 action drawn per row": "not drawn for each position on its own",
    "no MLM LayerNorm": "leaves out the MLM head's LayerNorm",
    "no embedding LayerNorm": "leaves out the LayerNorm after the embeddings",
    "MLM output tied to token embeddings": "does not tie to the token embeddings",
    "attention projections without biases": "the biases of the four attention projections",
    "no pooler": "leaves out the pooler",
    "NSP without bias": "the bias of the NSP head",
    "no position embeddings": "the position embeddings",
    "MLM output without bias": "the bias of the MLM output layer",
    "FFN without biases": "the biases of the FFN",
    "LayerNorm = H parameters": "counts a LayerNorm(H) as H parameters",
    "FFN size 4H instead of ffn_num_hiddens": "uses 4 x num_hiddens",
    "max_len hard-coded 512": "uses max_len = 512",
    "MLM head without its hidden Linear": "the MLM head's hidden layer",
    "returns (total, breakdown)": "should return a whole number",
    "segment embeddings max_len x H": "segment embeddings max_len rows",
    "builds the model on meta (forbidden)": "calls book.bert.BERTModel.__init__",
    "one LayerNorm per block": "one LayerNorm per block instead of two",
    "prints, returns None": "got NoneType None",
    "returns a formatted string": "got str",
}


def test_check_mlm_masking_accepts_the_reference_and_a_batch_wide_count():
    accepts(checks.check_mlm_masking, reference_masking)
    accepts(checks.check_mlm_masking, batch_wide_count)


@pytest.mark.parametrize("seed", range(12))
def test_check_mlm_masking_accepts_the_reference_whatever_the_random_draws(seed):
    def own_stream(tokens, vocab):
        """Other draws for every test seed, still following the caller's seed (book.set_seed
        twice must give the same masks: a generator seeded once outside is refused)."""
        start = int(torch.randint(2 ** 62, ())) ^ seed
        return mask_tokens(tokens, vocab, generator=torch.Generator().manual_seed(start))
    accepts(checks.check_mlm_masking, own_stream)


@pytest.mark.parametrize("name", WRONG_MASKINGS)
def test_check_mlm_masking_rejects_wrong_solutions(name):
    fn, message = WRONG_MASKINGS[name]
    rejects(checks.check_mlm_masking, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch08", "check_mlm_masking",
                                                 expected=R1_EXPECTED))
def test_check_mlm_masking_rejects_round1(fn, fragment):
    rejects(checks.check_mlm_masking, fn, fragment)


# Right in rounds 1 and 2, wrong since round 6 (the text says "drawn uniformly from the
# ordinary ids", the original included): a vocabulary of 2 ordinary ids shows it.
NOT_THE_ORIGINAL = {"random token differs from the original", "Q_random_never_same"}


@pytest.mark.parametrize("fn, fragment", [
    p for p in redteam("round1_ch08", "check_mlm_masking", "RIGHT_BUT_UNUSUAL")
    if p.id not in NOT_THE_ORIGINAL])
def test_check_mlm_masking_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_mlm_masking, fn)


def test_check_mlm_masking_rejects_random_tokens_that_avoid_the_original():
    from checker_redteam import round1_ch08 as r1
    from checker_redteam import round2_ch08_mlm as r2

    for fn in (r1.mlm_random_not_original, r2.Q_random_never_same):
        rejects(checks.check_mlm_masking, fn, "vocabulary of 2 ordinary tokens",
                "avoid the original token")


def _binomial_tails(n, p, low, high):
    """P(X <= low) + P(X >= high) for X ~ Binomial(n, p), summed in log space."""
    def term(x):
        return math.exp(math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1)
                        + x * math.log(p) + (n - x) * math.log1p(-p))
    total = 0.0
    for start, step in ((max(low, -1), -1), (high, 1)):
        x = start
        while 0 <= x <= n:
            t = term(x)
            total += t
            if t < 1e-30 and abs(x - n * p) > 10 * math.sqrt(n * p):
                break
            x += step
    return total


def test_the_masking_checkers_false_failure_rate_is_below_one_in_a_million():
    """The tolerances of ch08's table, on the checker's own batch, with exact binomial tails
    for the rates and the replacement counts and normal tails (x 2 for skewness) for the
    dispersion indices and the column z-scores."""
    vocab = ch08._masking_vocab()
    tokens = ch08._masking_batch(vocab)
    ordinary = tokens >= vocab.num_specials
    n_ord = ch08.CALLS * int(ordinary.sum())
    n_chosen = round(n_ord * ch08.P_CHOOSE)
    k = ch08.SE_TOLERANCE

    def rate_tail(n, p):
        se = math.sqrt(n * p * (1 - p))
        return _binomial_tails(n, p, math.floor(n * p - k * se), math.ceil(n * p + k * se))
    normal = math.erfc(k / math.sqrt(2))
    column = math.erfc(ch08.COLUMN_TOLERANCE / math.sqrt(2))
    n_rep = round(n_chosen * 0.1 * (1 - 1 / 60))
    low, high = ch08._replacement_bounds(n_rep, 60)
    replacement = 60 * _binomial_tails(n_rep, 1 / 60, low - 1, high + 1)
    rates = {
        "chosen share": rate_tail(n_ord, ch08.P_CHOOSE),
        "[MASK] share": rate_tail(n_chosen, ch08.P_MASK),
        "unchanged share": rate_tail(n_chosen, ch08.P_KEEP),
        "row dispersion": 2 * normal,
        "[MASK] dispersion": 2 * normal,
        "columns": tokens.shape[1] * column,
        "[MASK] columns": tokens.shape[1] * column,
        "replacements from the row": normal + 2e-9,  # plus a slack: smaller, in fact
        "replacements": replacement,
    }
    # the call with a vocabulary of 2 ordinary ids: [MASK] share 80%, unchanged 15%
    tiny = ch08._masking_vocab(2)
    tiny_tokens = ch08._masking_batch(tiny, num_rows=8000, seed=5)
    n_tiny = round(int((tiny_tokens >= tiny.num_specials).sum()) * ch08.P_CHOOSE)
    assert 25_000 < n_tiny < 29_000
    rates["tiny vocabulary, [MASK] share"] = rate_tail(n_tiny, ch08.P_MASK)
    rates["tiny vocabulary, unchanged share"] = rate_tail(n_tiny, 0.15)
    assert rates["tiny vocabulary, unchanged share"] < 5e-8
    assert 250_000 < n_ord < 290_000
    assert rates["chosen share"] < 5e-8 and rates["[MASK] share"] < 5e-8
    assert replacement < 1e-7, (low, high, replacement)
    assert sum(rates.values()) < 1e-6, rates


def test_the_tolerances_catch_small_deviations_with_room_to_spare():
    """p = 0.16 and an 82/10/8 split must be far outside the tolerance, not near it."""
    vocab = ch08._masking_vocab()
    n_ord = ch08.CALLS * int((ch08._masking_batch(vocab) >= vocab.num_specials).sum())
    se_rate = math.sqrt(0.15 * 0.85 / n_ord)
    se_mask = math.sqrt(0.8 * 0.2 / (0.15 * n_ord))
    assert 0.01 / se_rate > ch08.SE_TOLERANCE + 5
    assert 0.02 / se_mask > ch08.SE_TOLERANCE + 3


def test_check_mlm_masking_leaves_the_learners_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.check_mlm_masking(reference_masking)
    assert torch.equal(torch.rand(3), expected)


# -- the parameter count by formula ----------------------------------------------------------

def count(V, H, F, L, P, attention_bias=True, layernorms=True, positions=True, pooler=True,
          mlm_output=True, blocks=None):
    ln = 2 * H if layernorms else 0
    attention = 4 * (H * H + (H if attention_bias else 0))
    block = attention + ln + (H * F + F) + (F * H + H) + ln
    embeddings = V * H + 2 * H + (P * H if positions else 0) + ln
    heads = (H * H + H if pooler else 0) + (H * H + H + 2 * H) + (H * V + V if mlm_output else 0)
    return embeddings + (L if blocks is None else blocks) * block + heads + 2 * H + 2


WRONG_COUNTS = {
    "no attention biases": (lambda *a: count(*a, attention_bias=False), "biases of the four"),
    "no LayerNorms": (lambda *a: count(*a, layernorms=False), "too few"),
    "no position embeddings": (lambda *a: count(*a, positions=False), "position embeddings"),
    "no pooler": (lambda *a: count(*a, pooler=False), "pooler"),
    "MLM output tied to the embeddings": (lambda *a: count(*a, mlm_output=False),
                                          "MLM output layer"),
    "one block only": (lambda *a: count(*a, blocks=1), "too few"),
    "returns a string": (lambda *a: str(count(*a)), "whole number"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "three attention projections per block": (
        lambda V, H, F, L, P: count(V, H, F, L, P) - L * (H * H + H), "three attention"),
    "no NSP head": (lambda V, H, F, L, P: count(V, H, F, L, P) - 2 * H - 2, "the NSP head"),
    "a bool": (lambda *a: True, "whole number"),
    "no LayerNorms and no pooler": (lambda *a: count(*a, layernorms=False, pooler=False),
                                    "count part by part"),
}


def test_check_bert_param_count_accepts_the_formula_and_numpy_and_tensor_ints():
    accepts(checks.check_bert_param_count, count)
    accepts(checks.check_bert_param_count, lambda *a: np.int64(count(*a)))
    accepts(checks.check_bert_param_count, lambda *a: torch.tensor(count(*a)))


@pytest.mark.parametrize("name", WRONG_COUNTS)
def test_check_bert_param_count_rejects_wrong_counts(name):
    fn, message = WRONG_COUNTS[name]
    rejects(checks.check_bert_param_count, fn, message)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch08", "check_bert_param_count",
                                                 expected=R1_EXPECTED))
def test_check_bert_param_count_rejects_round1(fn, fragment):
    rejects(checks.check_bert_param_count, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch08", "check_bert_param_count",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_bert_param_count_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_bert_param_count, fn)


def test_the_slips_formula_is_the_model():
    for config in [(100, 16, 40, 1, 20), (500, 32, 64, 3, 64), (7, 8, 12, 5, 9)]:
        assert ch08._count(*config) == ch08._reference_param_count(*config)


def test_masking_failure_message_names_what_was_seen_and_expected():
    text = rejects(checks.check_mlm_masking, masking(shares=(1.0, 0.0)), "Hint:")
    assert "expected 80% [MASK]" in text and "got [MASK] 100" in text


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch08_mlm", ("W_",)))
def test_check_mlm_masking_rejects_round2(fn):
    rejects(checks.check_mlm_masking, fn)


@pytest.mark.parametrize("fn", [
    p for p in redteam_entries("round2_ch08_mlm", ("C_", "O_", "Q_"))
    if p.id not in NOT_THE_ORIGINAL])
def test_check_mlm_masking_accepts_round2_right_solutions(fn):
    accepts(checks.check_mlm_masking, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch08_count", ("W_",)))
def test_check_bert_param_count_rejects_round2(fn):
    rejects(checks.check_bert_param_count, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch08_count", ("C_", "O_", "Q_")))
def test_check_bert_param_count_accepts_round2_right_solutions(fn):
    accepts(checks.check_bert_param_count, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch08_*.py; every entry runs in
# tests/test_checks_redteam.py): the messages name the fault ------------------------------

def test_round4_masking_messages_name_the_fault():
    from checker_redteam import round4_ch08_mlm_masking as r4

    rejects(checks.check_mlm_masking, r4.W_05_random_token_per_row,
            "pairs of random replacements that share a row", "not one per row")
    rejects(checks.check_mlm_masking, r4.W_36_random_tokens_cached_after_choices,
            "got the same token both times", "anew at every call")
    rejects(checks.check_mlm_masking, r4.W_18_random_tokens_from_position_hash,
            "got the same token both times")
    rejects(checks.check_mlm_masking, r4.W_29_ordinary_off_by_one,
            "was never chosen", ">=, not >")
    rejects(checks.check_mlm_masking, r4.W_37_random_not_restricted_to_chosen,
            "but has label -100: only chosen positions may change")


def test_round4_masking_accepts_other_orders_of_the_draws():
    """The global generators are seeded with CHECK_SEED, not the batch's seed: a right
    solution that draws in another order was rejected when the two streams coincided."""
    from checker_redteam import round4_ch08_mlm_masking as r4

    for fn in (r4.O_25_random_tokens_drawn_first, r4.O_26_action_drawn_first,
               r4.O_27_randint_scalar_then_C01):
        accepts(checks.check_mlm_masking, fn)


def test_round4_count_overflow_is_named():
    from checker_redteam import round4_ch08_bert_param_count as r4

    rejects(checks.check_bert_param_count, r4.W_20_int32_overflow, "overflowed a 32-bit")


def test_round5_masking_messages_name_the_fault():
    """Round 5 (tests/checker_redteam/round5_ch08_mlm_masking.py): what the pooled rates
    cannot see."""
    from checker_redteam import round5_ch08_mlm_masking as r5

    expected = {
        r5.W_26_choice_cached_between_calls: "are chosen again in call 2",
        r5.W_33_action_cached: "got the same treatment",
        r5.W_21_alternating_rate: "each call must choose 15%",
        r5.W_08_random_up_to_batch_max: "ids the batch does not hold",
        r5.W_24_random_from_batch_unique_ids: "ids the batch does not hold",
        r5.W_25_half_batch_same_draw: "rows further down",
        r5.W_35_cap_per_row: "capped",
    }
    for fn, fragment in expected.items():
        rejects(checks.check_mlm_masking, fn, fragment)


# -- Round 6 red team (tests/checker_redteam/round6_ch08_*.py) -------------------------------

def test_round6_masking_messages_name_the_fault():
    from checker_redteam import round6_ch08_mlm as r6

    expected = {
        r6.W_22_mask_token_counts_as_ordinary: ("holds [MASK]", "never predicted"),
        r6.W_27_view_flatten: ("not contiguous in memory", ".reshape()"),
        r6.W_28_multinomial_per_row: ("rows that hold no ordinary token",
                                      "nothing to choose"),
        r6.W_16_random_may_be_special_mask: ("vocabulary of 2 ordinary tokens",
                                             "include [MASK]"),
        r6.W_02_random_excludes_original: ("expected 10% + 10% x 1/2 = 15%",
                                           "avoid the original token"),
        r6.W_14_seed_from_call_counter: ("seeds a random generator at every call",
                                         "Generator.manual_seed"),
        r6.W_19_global_seed_counter: ("seeds a random generator", "torch.manual_seed"),
        r6.W_09_rate_over_all_positions: ("chosen depends on the row",
                                          "not of all positions"),
    }
    for fn, fragments in expected.items():
        rejects(checks.check_mlm_masking, fn, *fragments)


def _masked(tokens, vocab, chosen, a, rnd):
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def seeded_from_the_callers_stream(tokens, vocab):
    """A private generator seeded from torch's global stream: it follows the caller's seed
    (book.set_seed), so it is harmless and accepted."""
    g = torch.Generator().manual_seed(int(torch.randint(2 ** 62, ())))
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape, generator=g) < 0.15)
    a = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _masked(tokens, vocab, chosen, a, rnd)


def numpy_seeded_by_a_counter(tokens, vocab, _calls=[0]):
    _calls[0] += 1
    rng = np.random.RandomState(_calls[0])
    shape = tuple(tokens.shape)
    draws = torch.from_numpy(rng.random_sample(shape))
    chosen = (tokens >= vocab.num_specials) & (draws < 0.15)
    a = torch.from_numpy(rng.random_sample(shape))
    rnd = torch.from_numpy(rng.randint(vocab.num_specials, len(vocab), shape))
    return _masked(tokens, vocab, chosen, a, rnd)


def numpy_global_seeded_by_a_counter(tokens, vocab, _calls=[0]):
    _calls[0] += 1
    np.random.seed(_calls[0])
    shape = tuple(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & torch.from_numpy(
        np.random.random_sample(shape) < 0.15)
    a = torch.from_numpy(np.random.random_sample(shape))
    rnd = torch.from_numpy(np.random.randint(vocab.num_specials, len(vocab), shape))
    return _masked(tokens, vocab, chosen, a, rnd)


def test_seeding_inside_is_refused_unless_it_follows_the_callers_seed():
    accepts(checks.check_mlm_masking, seeded_from_the_callers_stream)
    rejects(checks.check_mlm_masking, numpy_seeded_by_a_counter,
            "numpy.random.RandomState with a seed")
    rejects(checks.check_mlm_masking, numpy_global_seeded_by_a_counter,
            "numpy.random.seed with a seed")


# -- Round 7 red team (tests/checker_redteam/round7_ch08_*.py) -----------------------------

def test_round7_masking_messages_name_the_fault():
    from checker_redteam import round7_ch08_mlm as r7

    expected = {
        r7.W_11_choice_skips_neighbours: ("neighbouring positions are not chosen",
                                          "makes its neighbour less likely"),
        r7.W_20_span_pairs: ("neighbouring positions are not chosen independently",
                             "positions are chosen together"),
        r7.W_23_at_least_one_per_row: ("rows with only one or two ordinary tokens",
                                       "do not force a choice"),
        r7.W_17_ordinary_mask_cached_per_shape: ("a special token was chosen",
                                                 "keep something between calls"),
        # since round 12 told on the 60-id vocabulary, before the 3-id one
        r7.W_09_rounded_random_ids: ("are not spread uniformly over the 60 ordinary ids",
                                     "chi-square"),
        r7.W_07_module_level_generator: ("book.set_seed", "gave different masks"),
        r7.W_06_exact_80_10_10_split: ("exactly 80% of the chosen positions became [MASK]",
                                       "not by splitting"),
    }
    for fn, fragments in expected.items():
        rejects(checks.check_mlm_masking, fn, *fragments)


def test_round7_fixed_count_per_row_keeps_the_dispersion_message():
    """A fixed count per row ties every pair of a row alike (lag 1 and lag 5): the
    neighbour test leaves it to the dispersion test, which names it."""
    from checker_redteam import round7_ch08_mlm as r7

    rejects(checks.check_mlm_masking, r7.W_13_rate_per_row_of_ordinary,
            "a fixed number of positions per row")


def test_round7_count_messages_name_the_fault():
    from checker_redteam import round7_ch08_bertcount as r7

    rejects(checks.check_bert_param_count, r7.W_05_float32_torch, "float32 rounding",
            "exact on every configuration below 2^24")
    rejects(checks.check_bert_param_count, r7.W_09_embeddings_cached_by_vocab, "max_len=50",
            "keep something between calls")
    calls = [0]

    def right_then_wrong(V, H, F, L, P):  # a stale answer on a repeated call
        calls[0] += 1     # 7 configurations, num_blks=0 (round 10), 4 more, then the 7 again
        return count(V, H, F, L, P) + (calls[0] > 12)
    rejects(checks.check_bert_param_count, right_then_wrong, "when called again",
            "depend only on the arguments")


def test_the_new_round7_tests_cost_little_of_the_budget():
    """The round-7 tests' false-failure probabilities for a right solution: the short rows
    (exact binomial, 1,440 positions, 6 SE), neighbour dependence (normal tail at 6, x 2),
    the 3 ids of the tiny vocabulary (normal tails at 6.5, x 2), the exact split (at most
    3 / sqrt(2 pi n 0.16) per call, product over the check's calls)."""
    vocab = ch08._masking_vocab()
    short = ch08._awkward_batch(vocab)
    ordinary = short >= vocab.num_specials
    per_row = ordinary.sum(1)
    n = 2 * int(ordinary[(per_row == 1) | (per_row == 2)].sum())
    assert n == 1440
    se = math.sqrt(n * 0.15 * 0.85)
    k = ch08.COLUMN_TOLERANCE
    rates = {
        "short rows": _binomial_tails(n, 0.15, math.floor(n * 0.15 - k * se),
                                      math.ceil(n * 0.15 + k * se)),
        "neighbours": 2 * math.erfc(k / math.sqrt(2)),
        "three ids": 3 * 2 * math.erfc(6.5 / math.sqrt(2)),
    }
    main = round(ch08.CALLS * int((ch08._masking_batch(vocab) >= vocab.num_specials).sum())
                 / ch08.CALLS * 0.15)
    per_call = [3.1 / math.sqrt(2 * math.pi * m * 0.16) for m in [main] * 4 + [26_000] * 2]
    rates["exact split"] = math.prod(per_call)
    assert all(r < 1e-8 for r in rates.values()), rates
    assert sum(rates.values()) < 2e-8, rates


# -- Round 8 red team (tests/checker_redteam/round8_ch08_*.py, writer C) -------------------


def test_check_mlm_masking_round8_unchanged_positions_unlabelled():
    from checker_redteam import round8_ch08_mlm as r8
    rejects(checks.check_mlm_masking, r8.W_06_labels_only_changed,
            "kept their original token", "about 90% of 15%",
            "you labelled only the positions you changed")


@pytest.mark.parametrize("name, fragment", [
    ("W_04_output_proj_no_bias", "the bias of the attention's output projection W_o"),
    ("W_15_segment_as_2", "counts the segment embeddings as 2 numbers"),
    ("W_21_segment_three", "gives the segment embeddings 3 rows instead of 2"),
    ("W_22_blocks_plus_one", "counts num_blks + 1 blocks"),
    ("W_23_pos_max_len_plus_one", "position embeddings max_len + 1 rows"),
])
def test_check_bert_param_count_round8_slips(name, fragment):
    from checker_redteam import round8_ch08_bertcount as r8
    rejects(checks.check_bert_param_count, getattr(r8, name), fragment)


# -- Round 9 red team (tests/checker_redteam/round9_ch08_*.py, writer C) -------------------


def test_check_mlm_masking_round9_decision_from_a_neighbours_uniform():
    """The 80/10/10 decision read off the left neighbour's choosing uniform (u.roll(1)), or
    off the right one's (overlapping slices of one draw): exact 80/10/10 marginals, and
    [MASK] whenever that neighbour is chosen."""
    from checker_redteam import round9_ch08_mlm as r9
    rejects(checks.check_mlm_masking, r9.W_25_action_from_neighbour_uniform,
            "whose left neighbour is chosen too", "100.0% became [MASK]",
            "never a neighbour's")
    rejects(checks.check_mlm_masking, r9.W_27_overlapping_slices_of_one_draw,
            "whose right neighbour is chosen too", "100.0% became [MASK]")


def test_check_mlm_masking_round9_split_off_by_a_point():
    """80.8/10.1/9.1 passed the main batch on some seeds; the big call (40,000 rows in round
    9, 120,000 since round 10) catches it."""
    from checker_redteam import round9_ch08_mlm as r9
    rejects(checks.check_mlm_masking, r9.W_26_split_808_101_091,
            "120,000 BERT inputs", "standard errors off", "rescale it by 0.15 exactly")
    rejects(checks.check_mlm_masking, masking(shares=(0.81, 0.1)),
            "120,000 BERT inputs", "[MASK] share is")


def test_the_round9_tests_cost_little_of_the_budget_and_see_a_point():
    """The neighbours' [MASK] shares (exact binomial at 6 SE on the expected number of
    chosen pairs) and the big call's split (40,000 rows in round 9, 120,000 since round 10;
    exact binomial at 5.5 SE): below 1e-7 together. A split 1 point off is 9 standard errors
    off or more there (16 since round 10)."""
    vocab = ch08._masking_vocab()
    tokens = ch08._masking_batch(vocab)
    ordinary = tokens >= vocab.num_specials
    pairs = round(ch08.CALLS * int((ordinary[:, :-1] & ordinary[:, 1:]).sum())
                  * ch08.P_CHOOSE ** 2)
    assert 5_000 < pairs < 5_700

    def tail(n, p, k):
        se = math.sqrt(n * p * (1 - p))
        return _binomial_tails(n, p, math.floor(n * p - k * se), math.ceil(n * p + k * se))
    big = ch08._masking_batch(vocab, num_rows=ch08.SPLIT_ROWS, seed=9)
    n = round(int((big >= vocab.num_specials).sum()) * ch08.P_CHOOSE)
    assert 395_000 < n < 408_000
    rates = {"left neighbour": tail(pairs, ch08.P_MASK, ch08.COLUMN_TOLERANCE),
             "right neighbour": tail(pairs, ch08.P_MASK, ch08.COLUMN_TOLERANCE),
             "[MASK] share": tail(n, ch08.P_MASK, ch08.SE_TOLERANCE),
             "unchanged share": tail(n, 0.1 + 0.1 / 60, ch08.SE_TOLERANCE)}
    assert sum(rates.values()) < 1e-7, rates
    assert 0.01 / math.sqrt(0.16 / n) > 9 and 0.01 / math.sqrt(0.09 / n) > 11


# -- Round 10 red team (tests/checker_redteam/round10_ch08_*.py, writer C) ------------------


def test_check_mlm_masking_round10_replacements_drawn_for_each_position():
    """W_18: neighbours (2i, 2i + 1) share one random replacement; W_22: one draw per row
    shifted by the position (two replacements in a row never agree). Both passed round 10;
    the agreement of neighbouring replacements and of pairs in one row now fails them. A
    pair (2i + 1, 2i + 2) sharing a draw is caught by the odd family."""
    def shared_odd_pairs(tokens, vocab):
        chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
        action = torch.rand(tokens.shape)
        b, n = tokens.shape
        draw = torch.randint(vocab.num_specials, len(vocab), (b, n // 2 + 1))
        rnd = draw.repeat_interleave(2, dim=1)[:, 1:n + 1]      # (1, 2), (3, 4), ...
        inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
        inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
        return inputs, torch.where(chosen, tokens, IGNORE)

    rejects(checks.check_mlm_masking,
            redteam_entry("round10_ch08_mlm", "W_18_random_token_shared_by_pairs"),
            "120,000 BERT inputs", "pairs of neighbouring positions (j, j + 1), j even",
            "the neighbours share one draw", "not one per pair of neighbours")
    rejects(checks.check_mlm_masking, shared_odd_pairs, "(j, j + 1), j odd",
            "the neighbours share one draw")
    rejects(checks.check_mlm_masking,
            redteam_entry("round10_ch08_mlm", "W_22_replacement_row_offset_plus_position"),
            "pairs of random replacements in one row", "0 are the same token",
            "avoid each other", "one per row combined with the position")


def test_check_mlm_masking_round10_bfloat16_uniforms():
    """W_01: choosing and deciding with bfloat16 uniforms (8 bits) chooses 15.19%: 8.5
    standard errors off on the 120,000-row call."""
    rejects(checks.check_mlm_masking,
            redteam_entry("round10_ch08_mlm", "W_01_bfloat16_uniforms"),
            "120,000 BERT inputs", "15.19% of the 2,676,994 ordinary positions were chosen",
            "bfloat16 uniforms (8 bits)")


def test_the_round10_tests_cost_little_of_the_budget_and_see_bfloat16():
    """The big call's chosen share (exact binomial at 5.5 SE) and the four agreement tests
    (cut-offs at 1e-9 each, checked here on the call's expected numbers of pairs, at both
    ends of the agreement probability of a right solution, 58/59^2 to 1/59): below 5e-8
    together, so the module's total stays below 7.7e-7 (7.2e-7 before round 10, plus these
    and the third rate of the big call). bfloat16 uniforms choose with probability 0.15187
    (measured on 5e7 draws): 8 standard errors or more there."""
    vocab = ch08._masking_vocab()
    big = ch08._masking_batch(vocab, num_rows=ch08.SPLIT_ROWS, seed=9)
    n_ord = int((big >= vocab.num_specials).sum())
    assert n_ord == 2_676_994
    se = math.sqrt(n_ord * 0.15 * 0.85)
    k = ch08.SE_TOLERANCE
    rates = {"chosen share": _binomial_tails(n_ord, 0.15, math.floor(n_ord * 0.15 - k * se),
                                             math.ceil(n_ord * 0.15 + k * se))}
    p_low, p_high = 58 / 59 ** 2, 1 / 59
    for name, m in (("neighbours, j even", 100), ("neighbours, j odd", 90),
                    ("pairs in a row", 5_100), ("pairs in a row, more", 5_500)):
        low, high = ch08._binomial_cutoffs(m, p_low, p_high)
        below = _binomial_tails(m, p_low, low - 1, m + 1)
        above = _binomial_tails(m, p_high, -1, high)
        assert below <= ch08.PAIR_TAIL and above <= ch08.PAIR_TAIL, (name, below, above)
        rates[name] = below + above
    assert rates["chosen share"] < 4e-8
    assert sum(rates.values()) < 5e-8, rates
    assert (0.15187 - 0.15) / math.sqrt(0.15 * 0.85 / n_ord) > 8


def test_check_bert_param_count_round10_messages():
    """W_21 (max(num_blks, 1)) fails on num_blks=0; W_09 (max_len + 2 position rows) and
    W_16 (dense2's bias left out) are told their own faults, W_16 with the other count that
    fits (W_o's bias)."""
    count = checks.check_bert_param_count
    entry = functools.partial(redteam_entry, "round10_ch08_param")
    rejects(count, entry("W_21_at_least_one_block"), "num_blks=0", "the model has 4,294",
            "max(num_blks, 1)", "multiply the per-block count by num_blks itself")
    text = rejects(count, entry("W_09_position_off_by_one"),
                   "position embeddings max_len + 2 rows")
    assert "segment embeddings 3 rows" not in text
    rejects(count, entry("W_16_ffn_dense2_no_bias"), "the bias of the FFN's second layer",
            "the bias of the attention's output projection W_o")
    rejects(count, entry("W_19_mlm_hidden_no_bias"), "the bias of the MLM head's hidden "
            "layer", "the bias of the pooler")
    assert ch08._reference_param_count(100, 16, 40, 0, 20) == 4294


# -- Round 11 red team (tests/checker_redteam/round11_ch08_*.py, writer C) ------------------


def _from_a_neighbour(decision=None, token=None):
    """The reference with the 80/10/10 decision, or the random token, made from a
    neighbour's choosing uniform: `decision` / `token` map u to the uniform used."""
    def fn(tokens, vocab):
        u = torch.rand(tokens.shape)
        chosen = (tokens >= vocab.num_specials) & (u < 0.15)
        action = torch.rand(tokens.shape) if decision is None else decision(u)
        k = len(vocab) - vocab.num_specials
        rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape) if token is None \
            else vocab.num_specials + (token(u) * k).long().clamp(0, k - 1)
        inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
        inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
        return inputs, torch.where(chosen, tokens, IGNORE)
    return fn


def test_check_mlm_masking_round11_decision_from_the_row_above_or_below():
    """W_27: the decision taken from the choosing uniform of the row above (u.roll(1, 0));
    the same from the row below. The [MASK] share is exactly 80% overall and 100% where
    that neighbour is chosen."""
    entry = functools.partial(redteam_entry, "round11_ch08_mlm")
    rejects(checks.check_mlm_masking, entry("W_27_choice_uniform_reused_next_row"),
            "whose neighbour in the row above (the same column) is chosen too",
            "100.0% became [MASK]", "never a neighbour's")
    rejects(checks.check_mlm_masking, _from_a_neighbour(decision=lambda u: u.roll(-1, 0)),
            "whose neighbour in the row below (the same column) is chosen too",
            "100.0% became [MASK]")


def test_check_mlm_masking_round11_random_token_from_a_neighbour():
    """W_28: the random token made from the left neighbour's choosing uniform (the first 9
    of the 60 ids whenever that neighbour is chosen); the same from the row above's 1 - u
    (the last 9)."""
    entry = functools.partial(redteam_entry, "round11_ch08_mlm")
    rejects(checks.check_mlm_masking, entry("W_28_random_from_neighbour_uniform"),
            "120,000 BERT inputs", "random replacements whose left neighbour is chosen too",
            "are among the first 9 of the 60 ordinary ids", "never from a neighbour's")
    rejects(checks.check_mlm_masking,
            _from_a_neighbour(token=lambda u: 1 - u.roll(1, 0)),
            "whose neighbour in the row above (the same column) is chosen too",
            "among the last 9 of the 60")


def test_check_mlm_masking_round11_returns_new_tensors_when_nothing_is_chosen():
    """W_26 returned tokens itself when nothing was chosen: a batch of special tokens only
    now shows it; a view of tokens is refused too."""
    def view_when_none(tokens, vocab):
        inputs, labels = mask_tokens(tokens, vocab)
        return (tokens.view(tokens.shape) if (labels == IGNORE).all() else inputs), labels

    rejects(checks.check_mlm_masking,
            redteam_entry("round11_ch08_mlm", "W_26_return_tokens_when_none"),
            "special tokens only", "where nothing can be chosen",
            "inputs is the `tokens` tensor itself, not a new tensor",
            "also when nothing is chosen")
    rejects(checks.check_mlm_masking, view_when_none, "inputs is a view of `tokens`")


def test_the_round11_tests_cost_little_of_the_budget():
    """The [MASK] share among chosen positions whose neighbour in the row above (below) is
    chosen (exact binomial at 6 SE on the expected number of chosen vertical pairs, 3
    calls), and the first-9 / last-9 shares among the replacements of the 120,000-row call
    whose left, right, upper or lower neighbour is chosen (cut-offs at 1e-9 each, checked
    at p = 9/59 for the expected counts and a range around them): below 1.5e-8 together,
    so the module's total stays below 7.9e-7 (7.7e-7 before round 11), under one in a
    million."""
    vocab = ch08._masking_vocab()
    tokens = ch08._masking_batch(vocab)
    ordinary = tokens >= vocab.num_specials
    pairs = round(ch08.CALLS * int((ordinary[:-1] & ordinary[1:]).sum()) * ch08.P_CHOOSE ** 2)
    assert 4_800 < pairs < 5_400

    def tail(n, p, k):
        se = math.sqrt(n * p * (1 - p))
        return _binomial_tails(n, p, math.floor(n * p - k * se), math.ceil(n * p + k * se))
    rates = {side: tail(pairs, ch08.P_MASK, ch08.COLUMN_TOLERANCE)
             for side in ("row above", "row below")}
    big = ch08._masking_batch(vocab, num_rows=ch08.SPLIT_ROWS, seed=9)
    o = big >= vocab.num_specials
    share = ch08.P_CHOOSE * ch08.P_KEEP * 59 / 60 * ch08.P_CHOOSE   # replaced, neighbour chosen
    expected = {"in a row": int((o[:, :-1] & o[:, 1:]).sum()) * share,
                "in a column": int((o[:-1] & o[1:]).sum()) * share}
    assert all(4_800 < m < 5_500 for m in expected.values()), expected
    for where, m in expected.items():
        worst = 0.0
        for n in range(round(m) - 400, round(m) + 401, 50):
            high = ch08._binomial_cutoffs(n, 8 / 59, 9 / 59)[1]
            worst = max(worst, _binomial_tails(n, 9 / 59, -1, high))
        assert worst <= ch08.PAIR_TAIL, (where, worst)
        for side in ("first", "second"):
            for end in ("first 9", "last 9"):
                rates[f"{where}, {side} side, {end}"] = ch08.PAIR_TAIL
    assert sum(rates.values()) < 1.5e-8, rates
    assert 7.7e-7 + sum(rates.values()) < 7.9e-7


# -- Round 12 red team (tests/checker_redteam/round12_ch08_mlm.py, writer C) ----------------

@pytest.mark.parametrize("name", ["W_23_random_id_modulo_bias", "W_24_random_id_mild_skew",
                                  "W_21_random_id_skewed_sqrt"])
def test_check_mlm_masking_round12_random_ids_not_uniform(name):
    """Replacement ids that are not uniform (a modulo bias, u ** a) are told so (W_21 was told
    its replacements come from the row)."""
    text = rejects(checks.check_mlm_masking, redteam_entry("round12_ch08_mlm", name),
                   "are not spread uniformly over the 60 ordinary ids", "chi-square",
                   "torch.randint(vocab.num_specials, len(vocab), tokens.shape)")
    assert "not from the row" not in text


def test_check_mlm_masking_round12_every_id_of_200_drawn():
    """Uniform over the first 100 ordinary ids only: uniform on the 60-id vocabulary, 40% of
    the replacements beyond the batch's ids on the 200-id one (the bound is 35%), but ids
    105 to 204 are never drawn."""
    def first_100_only(tokens, vocab):
        ordinary = tokens >= vocab.num_specials
        chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
        action = torch.rand(tokens.shape)
        k = min(len(vocab) - vocab.num_specials, 100)
        random_ids = torch.randint(vocab.num_specials, vocab.num_specials + k, tokens.shape)
        inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
        inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
        return inputs, torch.where(chosen, tokens, IGNORE)

    rejects(checks.check_mlm_masking, first_100_only,
            "100 of the 200 ordinary ids (ids 105 to 204) were never drawn")


def test_the_uniformity_cut_and_the_coverage_bound():
    """The chi-square cut-off is the 1e-12 tail of 59 degrees of freedom (170.2), and the
    200-id call misses an id of a right solution with probability about 1e-12."""
    cut = ch08._chi2_cut(59)
    assert 170 < cut < 170.5
    upper = torch.special.gammaincc(torch.tensor(29.5, dtype=torch.float64),
                                    torch.tensor(cut / 2, dtype=torch.float64)).item()
    assert 0.9e-12 < upper <= 1e-12
    big = ch08._masking_vocab(200)
    tokens = ch08._masking_batch(big, num_rows=20_000, seed=13)
    ordinary = tokens[tokens >= big.num_specials] - big.num_specials
    R = torch.bincount(ordinary, minlength=200).double() * ch08.P_CHOOSE * ch08.P_KEEP \
        * 199 / 200                                  # expected replacements per original
    n = R.sum()
    assert 6_500 < n < 7_000
    assert ((1 - 1 / 199) ** (n - R)).sum() < 2e-12


# -- Round 13 red team (tests/checker_redteam/round13_ch08_*.py, writer D) -----------------

R13_MLM = {
    # rows 2k and 2k + 1 share their uniforms
    "W_18_checkerboard_rows": ("the rows are not drawn independently", "rows 1 apart",
                               "no draws shared between rows"),
    # a private generator seeded from one random byte: 256 maskings of a batch at most
    "W_24_byte_seed": ("different maskings", "a few random bits", "seed of full size"),
    # uniforms for at most 65,536 rows, tiled down the 120,000-row call
    "W_25_tiled_65536_rows": ("120,000", "rows 65,536 apart", "repeated down a long batch"),
    # @torch.inference_mode(): labels cannot be saved for backward by cross_entropy
    "W_27_inference_mode": ("inference tensor",),
}


@pytest.mark.parametrize("name", R13_MLM)
def test_check_mlm_masking_round13_names_the_fault(name):
    rejects(checks.check_mlm_masking, redteam_entry("round13_ch08_mlm_masking", name),
            *R13_MLM[name])


def test_the_round13_mlm_tests_cost_little_of_the_budget():
    """The repeated-masking test: two maskings of one of the 128 positions agree with
    probability c (not chosen, [MASK], unchanged or the same random token), all 128 with
    c^128; two or more coinciding pairs among the 4,950 pairs of calls are then far below
    1e-20. The row test: P(N > 8) x 2 x 120,000 lags x 8.6 (Edgeworth) per test, 4 tests."""
    k = 60
    c = 0.85 ** 2 + (0.15 * 0.8) ** 2 + (0.15 * 0.1 * (1 + 1 / k)) ** 2 + \
        (k - 1) * (0.15 * 0.1 / k) ** 2
    assert 0.737 < c < 0.7372
    pairs = ch08.REPEAT_CALLS * (ch08.REPEAT_CALLS - 1) // 2
    assert pairs * c ** 128 < 1e-13 and (pairs * c ** 128) ** 2 < 1e-26
    tail = 0.5 * math.erfc(ch08.ROW_TOLERANCE / math.sqrt(2))
    assert 4 * 2 * 120_000 * 8.6 * tail < 1e-8
    assert 7.9e-7 + 4 * 2 * 120_000 * 8.6 * tail + 1e-26 < 8.0e-7  # the module's total


def test_check_mlm_masking_rejects_rows_shared_in_pairs_of_any_offset():
    """Not only neighbours: row i + 7 reusing row i's uniforms (blocks of 14 rows)."""

    def shared_at_7(tokens, vocab):
        b, n = tokens.shape
        u, a = torch.rand(b, n), torch.rand(b, n)
        idx = torch.arange(b)
        src = torch.where((idx % 14) >= 7, idx - 7, idx)
        u, a = u[src], a[src]
        chosen = (tokens >= vocab.num_specials) & (u < 0.15)
        rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
        inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
        inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
        return inputs, torch.where(chosen, tokens, IGNORE)
    rejects(checks.check_mlm_masking, shared_at_7, "rows 7 apart")


@pytest.mark.parametrize("name", ["W_18_ln_half", "W_23_heads_of_four"])
def test_check_bert_param_count_round13_names_an_odd_num_hiddens(name):
    rejects(checks.check_bert_param_count,
            redteam_entry("round13_ch08_bert_param_count", name), "num_hiddens=15",
            "multiple of 4", "whatever the number of heads")


@pytest.mark.parametrize("name, generator", [
    ("W_08_reseed_after", "torch's global random generator"),
    ("W_24_python_random_reseed", "Python's random module"),
    ("W_25_numpy_reseed", "NumPy's global random generator")])
def test_check_mlm_masking_round14_names_a_reseed_after_the_draws(name, generator):
    """Right masks, then torch.seed(), random.seed() or np.random.seed(): the caller's
    next draws no longer repeat under its seed (_core.expect_repeatable)."""
    rejects(checks.check_mlm_masking, redteam_entry("round14_ch08_mlm_masking", name),
            "a batch of 4 rows of 32 ordinary tokens", generator, "re-seeded")
