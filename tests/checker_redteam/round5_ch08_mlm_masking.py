"""Round 5 red team (writer R5-B, issue 12), ch08_mlm_masking: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch08_mlm_masking.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch

from book.bert import IGNORE

CHECK = "check_mlm_masking"


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(to_mask, vocab.mask, tokens)
    inputs = torch.where(to_random, rnd, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def O_02_one_uniform(tokens, vocab):
    # one uniform per position decides everything: u < .12 mask, .12-.135 random, .135-.15 keep
    u = torch.rand(tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (u < 0.12), vocab.mask, tokens)
    inputs = torch.where(chosen & (u >= 0.12) & (u < 0.135), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


# Right in rounds 5 and 6; wrong since round 7: book.set_seed(s) twice must give the same
# masks (the exercise leaves the seeding to the caller), and default_rng() without a seed
# draws fresh OS entropy that book.set_seed cannot fix.
def W_03_numpy_rng(tokens, vocab):
    rng = np.random.default_rng()  # fresh OS entropy each call: not seeded by the learner
    shape = tuple(tokens.shape)
    t = tokens.numpy()
    chosen = (t >= vocab.num_specials) & (rng.random(shape) < 0.15)
    a = rng.random(shape)
    inputs = t.copy()
    inputs[chosen & (a < 0.8)] = vocab.mask
    r = chosen & (a >= 0.8) & (a < 0.9)
    inputs[r] = rng.integers(vocab.num_specials, len(vocab), size=int(r.sum()))
    labels = np.where(chosen, t, IGNORE)
    return torch.from_numpy(inputs), torch.from_numpy(labels)


def O_04_multinomial_action(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    action = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), tokens.numel(),
                               replacement=True).reshape(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = tokens.clone()
    inputs[chosen & (action == 0)] = vocab.mask
    sel = chosen & (action == 1)
    inputs[sel] = rnd[sel]
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def _apply(tokens, vocab, chosen, action, rnd):
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


# Accepted on purpose: exactly 15% of the batch's ordinary positions, drawn at random: sampling without replacement, indistinguishable from independent draws except through the total (accepted on purpose, as in round 1's batch-wide count).
def A_01_exact_count_global(tokens, vocab):
    # exactly 15% of the ordinary positions (a random subset of fixed size), not independent
    ordinary = tokens >= vocab.num_specials
    idx = ordinary.flatten().nonzero().squeeze(1)
    k = round(0.15 * len(idx))
    pick = idx[torch.randperm(len(idx))[:k]]
    chosen = torch.zeros(tokens.numel(), dtype=torch.bool)
    chosen[pick] = True
    chosen = chosen.reshape(tokens.shape)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


# Accepted on purpose: exactly 80/10/10 of the chosen positions, in random places: the same policy as the exact batch-wide count.
def A_02_exact_split(tokens, vocab):
    # independent choice, but exactly 80% / 10% / 10% of the chosen (a permutation)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    idx = chosen.flatten().nonzero().squeeze(1)
    idx = idx[torch.randperm(len(idx))]
    n8, n9 = round(0.8 * len(idx)), round(0.9 * len(idx))
    inputs = tokens.clone().flatten()
    inputs[idx[:n8]] = vocab.mask
    inputs[idx[n8:n9]] = torch.randint(vocab.num_specials, len(vocab), (n9 - n8,))
    return inputs.reshape(tokens.shape), torch.where(chosen, tokens, IGNORE)


def W_03_action_per_row(tokens, vocab):
    # one action draw per row: all chosen positions of a row get the same treatment
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    return _apply(tokens, vocab, chosen, action,
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_04_choice_per_column(tokens, vocab):
    # the chosen positions drawn once per column and shared by every row
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(1, tokens.shape[1]) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_05_random_token_per_row(tokens, vocab):
    # one random token per row, used at every "random" position of that row
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand(tokens.shape)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), rnd)


def W_06_random_excludes_last(tokens, vocab):
    # randint's high is exclusive; learner subtracts 1 anyway: the last id is never drawn
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab) - 1, tokens.shape))


# Accepted in round 5 (invisible with 60 ordinary ids); rejected since round 6, by the call with
# a vocabulary of 2 ordinary ids ([MASK] 83.3% of the chosen instead of 80%).
def W_07_random_includes_mask(tokens, vocab):
    # random ids from vocab.mask on: [MASK] itself can be "a random token"
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.mask, len(vocab), tokens.shape))


def W_08_random_up_to_batch_max(tokens, vocab):
    # the vocabulary size taken from the batch
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, int(tokens.max()) + 1, tokens.shape))


# Accepted in round 5 (invisible with 60 ordinary ids); rejected since round 6, by the call with
# a vocabulary of 2 ordinary ids (unchanged 10% instead of 10% + 10%/2).
def W_09_random_not_original(tokens, vocab):
    # a random token that is never the original one
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    V = len(vocab) - vocab.num_specials
    off = torch.randint(1, V, tokens.shape)
    rnd = vocab.num_specials + (tokens - vocab.num_specials + off) % V
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), rnd)


def W_10_first_ordinary_never(tokens, vocab):
    ordinary = tokens > vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_11_only_pad_excluded(tokens, vocab):
    ordinary = tokens != vocab.pad
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_12_labels_only_masked(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    inputs, _ = _apply(tokens, vocab, chosen, action,
                       torch.randint(vocab.num_specials, len(vocab), tokens.shape))
    return inputs, torch.where(chosen & (action < 0.8), tokens, IGNORE)


def W_13_inplace_tokens(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    labels = torch.where(chosen, tokens, IGNORE)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    tokens[chosen & (action < 0.8)] = vocab.mask
    sel = chosen & (action >= 0.8) & (action < 0.9)
    tokens[sel] = rnd[sel]
    return tokens, labels


def W_14_seeded_inside(tokens, vocab):
    g = torch.Generator().manual_seed(1234)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape, generator=g),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g))


def W_15_labels_float(tokens, vocab):
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, labels.float()


def W_16_ignore_minus_one(tokens, vocab):
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, torch.where(labels == IGNORE, -1, labels)


def W_17_unchanged_not_labelled(tokens, vocab):
    # the 10% left unchanged get IGNORE (nothing to predict, thinks the learner)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    inputs, _ = _apply(tokens, vocab, chosen, action,
                       torch.randint(vocab.num_specials, len(vocab), tokens.shape))
    return inputs, torch.where(chosen & (action < 0.9), tokens, IGNORE)


def W_18_action_reuses_choice_draw(tokens, vocab):
    # the same uniform u both chooses (u < .15) and splits with thresholds .8/.9 on u:
    # every chosen position has u < .15 < .8, so all become [MASK]
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _apply(tokens, vocab, chosen, u,
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_19_random_draw_correlated_with_action(tokens, vocab):
    # random token derived from the action uniform without rescaling: only a slice of the
    # vocabulary ever appears
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    V = len(vocab) - vocab.num_specials
    rnd = vocab.num_specials + (a * V).long().clamp(max=V - 1)
    return _apply(tokens, vocab, chosen, a, rnd)


def W_20_action_per_column(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1]).expand(tokens.shape)
    return _apply(tokens, vocab, chosen, action,
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


_STATE = {"calls": 0}


def W_21_alternating_rate(tokens, vocab):
    # a counter between calls: rate drifts 0.14, 0.15, 0.16 (state kept between calls)
    _STATE["calls"] += 1
    p = 0.14 + 0.01 * ((_STATE["calls"] - 1) % 3)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < p)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_22_neighbours_never_both(tokens, vocab):
    # a position next to a chosen one is never chosen (learner avoids two masks in a row)
    ordinary = tokens >= vocab.num_specials
    c = ordinary & (torch.rand(tokens.shape) < 0.15 / 0.85)
    prev = torch.zeros_like(c)
    prev[:, 1:] = c[:, :-1]
    chosen = c & ~prev
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_23_int32_output(tokens, vocab):
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs.int(), labels.int()


def W_24_random_from_batch_unique_ids(tokens, vocab):
    # random token drawn from tokens.unique() (ids present in this batch, uniformly)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    ids = tokens[ordinary].unique()
    rnd = ids[torch.randint(len(ids), tokens.shape)]
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), rnd)


def W_25_half_batch_same_draw(tokens, vocab):
    # the rand draw for the second half of the batch copies the first half
    half = (tokens.shape[0] + 1) // 2
    u = torch.rand(half, tokens.shape[1])
    u = torch.cat([u, u])[: tokens.shape[0]]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


_CHOICE = {}


def W_26_choice_cached_between_calls(tokens, vocab):
    # the choice draw is made once (first call) and reused; only the 80/10/10 is new
    if tokens.shape not in _CHOICE:
        _CHOICE[tokens.shape] = torch.rand(tokens.shape) < 0.15
    chosen = (tokens >= vocab.num_specials) & _CHOICE[tokens.shape]
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_27_pairs_chosen_together(tokens, vocab):
    # one draw per pair of neighbouring positions (positive dependence)
    b, n = tokens.shape
    u = torch.rand(b, (n + 1) // 2).repeat_interleave(2, dim=1)[:, :n]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_28_rows_tiled(tokens, vocab):
    # a block of 50 rows of draws tiled over the batch (rows repeat every 50)
    b, n = tokens.shape
    u = torch.rand(50, n).repeat((b + 49) // 50, 1)[:b]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_29_no_adjacent_cyclic(tokens, vocab):
    # never two chosen neighbours (cyclically), marginal rate still 15% at every position
    q = (1 - (1 - 4 * 0.15) ** 0.5) / 2
    c = torch.rand(tokens.shape) < q
    chosen = (tokens >= vocab.num_specials) & c & ~torch.roll(c, 1, dims=1)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_30_action_and_random_same_row_order(tokens, vocab):
    # random replacement ids sorted along each row (not independent within a row)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape).sort(dim=1).values
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), rnd)


def W_31_random_token_per_column(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand(tokens.shape)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), rnd)


_RND = {}


def W_32_random_tokens_cached(tokens, vocab):
    # the table of random replacement ids is drawn once and reused by every call
    key = (tokens.shape, len(vocab))
    if key not in _RND:
        _RND[key] = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape), _RND[key])


_ACT = {}


def W_33_action_cached(tokens, vocab):
    # the 80/10/10 draw made once and reused: a position's fate is fixed across calls
    if tokens.shape not in _ACT:
        _ACT[tokens.shape] = torch.rand(tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    return _apply(tokens, vocab, chosen, _ACT[tokens.shape],
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_34_d2l_exact_per_row(tokens, vocab):
    # d2l's way: exactly max(1, round(0.15 * ordinary)) positions per row
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape).masked_fill(~ordinary, 2.0)
    k = (0.15 * ordinary.sum(1)).round().clamp(min=1).long()
    rank = u.argsort(1).argsort(1)
    chosen = ordinary & (rank < k[:, None])
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_35_cap_per_row(tokens, vocab):
    # BERT's max_predictions_per_seq: at most 8 chosen per row (keeps the first 8)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    chosen = chosen & (chosen.long().cumsum(1) <= 8)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))


def W_36_cap_per_row_6(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    chosen = chosen & (chosen.long().cumsum(1) <= 6)
    return _apply(tokens, vocab, chosen, torch.rand(tokens.shape),
                  torch.randint(vocab.num_specials, len(vocab), tokens.shape))
