"""Round 4 red team (writer R4-B, issue 12), ch08_mlm_masking: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round4/B/sols/ch08_mlm_masking.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import random

import numpy as np
import torch

from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _finish(tokens, vocab, chosen, to_mask, to_random, random_tokens):
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, random_tokens, inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


# ---------------------------------------------------------------- correct and odd
def C_01_two_draws(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, to_mask, to_random, rnd)


def O_02_one_uniform_draw(tokens, vocab):
    """A single uniform per position: r < .12 mask, .12-.135 random, .135-.15 keep."""
    ordinary = tokens >= vocab.num_specials
    r = torch.rand(tokens.shape)
    chosen = ordinary & (r < 0.15)
    to_mask = chosen & (r < 0.12)
    to_random = chosen & (r >= 0.12) & (r < 0.135)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, to_mask, to_random, rnd)


def O_03_bernoulli_multinomial(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    action = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), tokens.numel(),
                               replacement=True).reshape(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action == 0), chosen & (action == 1), rnd)


# Right in rounds 4 to 6; wrong since round 7: book.set_seed(s) twice must give the same
# masks (the exercise leaves the seeding to the caller), and default_rng() without a seed
# draws fresh OS entropy that book.set_seed cannot fix.
def W_04_numpy_fresh_generator(tokens, vocab):
    """numpy's default_rng() without a seed (fresh OS entropy on every call)."""
    rng = np.random.default_rng()
    t = tokens.numpy()
    chosen = (t >= vocab.num_specials) & (rng.random(t.shape) < 0.15)
    action = rng.random(t.shape)
    rnd = rng.integers(vocab.num_specials, len(vocab), t.shape)
    inputs = np.where(chosen & (action < 0.8), vocab.mask, t)
    inputs = np.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    labels = np.where(chosen, t, IGNORE)
    return torch.from_numpy(inputs), torch.from_numpy(labels)


# Right in round 4; since round 6 the checker also passes a non-contiguous batch (a column
# slice), where tokens.view(-1) raises: a wrong solution now.
def W_38_python_random_loop_view(tokens, vocab):
    """Python's random module, position by position (flattened with .view)."""
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
    flat_t, flat_i, flat_l = tokens.view(-1).tolist(), inputs.view(-1), labels.view(-1)
    out_i, out_l = list(flat_t), [IGNORE] * len(flat_t)
    for k, tok in enumerate(flat_t):
        if tok >= vocab.num_specials and random.random() < 0.15:
            out_l[k] = tok
            u = random.random()
            if u < 0.8:
                out_i[k] = vocab.mask
            elif u < 0.9:
                out_i[k] = random.randrange(vocab.num_specials, len(vocab))
    return (torch.tensor(out_i, dtype=tokens.dtype).reshape(tokens.shape),
            torch.tensor(out_l, dtype=tokens.dtype).reshape(tokens.shape))


# ---------------------------------------------------------------- wrong
def W_01_exactly_15_percent_per_row(tokens, vocab):
    """d2l's way: exactly round(15%) of each row's ordinary positions (no binomial spread)."""
    ordinary = tokens >= vocab.num_specials
    chosen = torch.zeros_like(ordinary)
    for r in range(tokens.shape[0]):
        pos = ordinary[r].nonzero().flatten()
        k = max(1, round(0.15 * len(pos))) if len(pos) else 0
        chosen[r, pos[torch.randperm(len(pos))[:k]]] = True
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_02_random_includes_specials(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(0, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_03_random_misses_last_id(tokens, vocab):
    """randint's upper bound is exclusive: len(vocab) - 1 never draws the last id."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab) - 1, tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_04_action_per_row(tokens, vocab):
    """One 80/10/10 decision per row: all chosen positions of a row get the same action."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_05_random_token_per_row(tokens, vocab):
    """One random replacement token per row, shared by its positions."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand(
        tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_06_conditional_probability_bug(tokens, vocab):
    """Of the not-masked 20%, a random token with probability 0.1 (should be 0.5)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    to_mask = chosen & (torch.rand(tokens.shape) < 0.8)
    to_random = chosen & ~to_mask & (torch.rand(tokens.shape) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, to_mask, to_random, rnd)


def W_07_independent_overriding_draws(tokens, vocab):
    """Mask with p .8, then independently random with p .1 overriding: 72/10/18."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    to_mask = chosen & (torch.rand(tokens.shape) < 0.8)
    to_random = chosen & (torch.rand(tokens.shape) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


# Accepted on purpose in round 4 (invisible with 60 ordinary ids); since round 6 a call with
# 2 ordinary ids shows it: 'unchanged' 10% instead of 15%.
def W_39_random_excludes_original(tokens, vocab):
    """Redraws a random token equal to the original (not uniform over the ordinary ids)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    off = torch.randint(1, n_ord, tokens.shape)
    rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


# Accepted on purpose: column 0 always holds [CLS] in the checker's batch, as in every BERT input, so the choice there is moot.
def A_09_never_first_column(tokens, vocab):
    """Skips column 0 ('that is always [CLS]'): ordinary tokens there are never chosen."""
    ordinary = tokens >= vocab.num_specials
    ordinary[:, 0] = False
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_10_labels_only_changed(tokens, vocab):
    """Labels only where the input changed (the 10% unchanged get IGNORE)."""
    inputs, labels = C_01_two_draws(tokens, vocab)
    return inputs, torch.where(inputs != tokens, labels, torch.full_like(labels, IGNORE))


def W_11_labels_are_inputs(tokens, vocab):
    inputs, labels = C_01_two_draws(tokens, vocab)
    return inputs, torch.where(labels != IGNORE, inputs, labels)


_NOISE = {}


def W_12_noise_cached_per_shape(tokens, vocab):
    """Draws the random numbers once per shape and reuses them (same masking each call)."""
    if tokens.shape not in _NOISE:
        _NOISE[tokens.shape] = (torch.rand(tokens.shape), torch.rand(tokens.shape),
                                torch.randint(vocab.num_specials, len(vocab), tokens.shape))
    u, action, rnd = _NOISE[tokens.shape]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_13_module_generator_seeded_each_call(tokens, vocab):
    """A private generator re-seeded from the tokens' sum: 'reproducible' masking."""
    g = torch.Generator().manual_seed(int(tokens.sum()))
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_14_mutates_tokens(tokens, vocab):
    labels_src = tokens.clone()
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    tokens[chosen & (action < 0.8)] = vocab.mask
    sel = chosen & (action >= 0.8) & (action < 0.9)
    tokens[sel] = torch.randint(vocab.num_specials, len(vocab), (int(sel.sum()),))
    return tokens, torch.where(chosen, labels_src, torch.full_like(labels_src, IGNORE))


def W_15_float_labels(tokens, vocab):
    inputs, labels = C_01_two_draws(tokens, vocab)
    return inputs, labels.float()


def W_16_rate_of_all_positions(tokens, vocab):
    """15% of ALL positions, then the specials among them dropped: the rate among
    ordinary tokens is right, but here the draw is renormalised to the wrong base:
    chosen = 15% * (n / ordinary count) per row, capped."""
    ordinary = tokens >= vocab.num_specials
    frac = ordinary.float().mean(dim=1, keepdim=True).clamp(min=1e-6)
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15 * frac)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_17_antithetic_neighbours(tokens, vocab):
    """'Variance reduction': odd positions reuse 1 - u of their left neighbour."""
    u = torch.rand(tokens.shape)
    u[:, 1::2] = 1 - u[:, 0::2][:, : u[:, 1::2].shape[1]]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_18_random_tokens_from_position_hash(tokens, vocab):
    """Random token = a fixed function of the position (cheap 'randomness')."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    pos = torch.arange(tokens.numel()).reshape(tokens.shape)
    rnd = (pos * 7919) % n_ord + vocab.num_specials
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_19_random_token_from_action_draw(tokens, vocab):
    """Rescales the action draw in [0.8, 0.9) to pick the random token: uniform and
    independent of the mask/keep decision, so correct (odd)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    # within [0.8, 0.9) rescale the action to [0, 1) and pick a token from it
    rnd = ((action - 0.8).clamp(0, 0.0999999) * 10 * n_ord).long() + vocab.num_specials
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_20_int32_inputs(tokens, vocab):
    inputs, labels = C_01_two_draws(tokens, vocab)
    return inputs.int(), labels.int()


_RND = {}


def W_21_random_tokens_cached(tokens, vocab):
    """Choices and actions drawn anew, but the table of replacement tokens is drawn once
    per shape and reused: a given position always gets the same 'random' token."""
    if tokens.shape not in _RND:
        _RND[tokens.shape] = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), _RND[tokens.shape])


def W_22_random_token_per_column(tokens, vocab):
    """One replacement token per column, shared by every row."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand(
        tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_23_mask_decision_per_column(tokens, vocab):
    """The 80/10/10 action drawn once per column (shared by all rows)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1]).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_24_choice_per_column(tokens, vocab):
    """The 15% choice drawn per column: every row masks the same columns."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(1, tokens.shape[1]) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_25_random_tokens_drawn_first(tokens, vocab):
    """Correct; it just draws the replacement tokens BEFORE the choices."""
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_26_action_drawn_first(tokens, vocab):
    """Correct; the 80/10/10 draw comes before the 15% draw."""
    action = torch.rand(tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_27_randint_scalar_then_C01(tokens, vocab):
    """Correct; a stray torch.randint of the same shape (e.g. left from debugging)."""
    torch.randint(0, 10, tokens.shape)
    return C_01_two_draws(tokens, vocab)


def O_28_rand_1d_then_reshape(tokens, vocab):
    """Correct; draws flat and reshapes."""
    u = torch.rand(tokens.numel()).reshape(tokens.shape)
    a = torch.rand(tokens.numel()).reshape(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.numel(),)).reshape(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    return _finish(tokens, vocab, chosen, chosen & (a < 0.8),
                   chosen & (a >= 0.8) & (a < 0.9), rnd)


def W_29_ordinary_off_by_one(tokens, vocab):
    """tokens > num_specials: the first ordinary id (the most frequent) is never chosen."""
    ordinary = tokens > vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_30_only_pad_excluded(tokens, vocab):
    """Excludes [PAD] only: [CLS], [SEP] can be chosen."""
    ordinary = tokens != vocab.pad
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def W_31_unseeded_private_generator(tokens, vocab):
    """torch.Generator() without a seed: the same default seed at every call."""
    g = torch.Generator()
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


# Accepted on purpose: replacements drawn evenly from a pool: uniform over the vocabulary and close to independent; indistinguishable at this size.
def A_32_stratified_random_tokens(tokens, vocab):
    """Random tokens from a shuffled, evenly filled pool: every id exactly equally often
    (draws without replacement: dependent across positions)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    rnd = (torch.randperm(tokens.numel()) % n_ord + vocab.num_specials).reshape(tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_33_thresholds_reordered(tokens, vocab):
    """random for action < .1, keep for .1-.2, [MASK] above: the same distribution."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action >= 0.2), chosen & (action < 0.1),
                   rnd)


def O_34_boolean_index_assignment(tokens, vocab):
    """Draws replacement tokens only for the positions that need them."""
    inputs = tokens.clone()
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[chosen & (action < 0.8)] = vocab.mask
    inputs[to_random] = torch.randint(vocab.num_specials, len(vocab), (int(to_random.sum()),))
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


# Accepted on purpose: one draw per pair of neighbouring positions: 9 equal pairs in 205 against about 3, below the checker's resolution.
def A_35_random_token_equals_neighbour_draw(tokens, vocab):
    """Random token shared by each pair of neighbouring positions (one draw per 2)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    half = torch.randint(vocab.num_specials, len(vocab),
                         (tokens.shape[0], (tokens.shape[1] + 1) // 2))
    rnd = half.repeat_interleave(2, dim=1)[:, : tokens.shape[1]]
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


_RND2 = {}


def W_36_random_tokens_cached_after_choices(tokens, vocab):
    """As W21 (replacement tokens drawn once per shape and reused at every call), but
    the cached table is drawn after the choices."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    if tokens.shape not in _RND2:
        _RND2[tokens.shape] = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), _RND2[tokens.shape])


def W_37_random_not_restricted_to_chosen(tokens, vocab):
    """to_random forgets `chosen &`: 10% of ALL positions get a random token."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   (action >= 0.8) & (action < 0.9), rnd)


def O_38_float64_draws(tokens, vocab):
    """Correct; the uniforms in float64 (choice drawn first, as in the hint)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, dtype=torch.float64) < 0.15)
    action = torch.rand(tokens.shape, dtype=torch.float64)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 0.8),
                   chosen & (action >= 0.8) & (action < 0.9), rnd)


def O_39_choice_by_randperm_threshold(tokens, vocab):
    """Correct; a random permutation's rank < 15% of n is NOT independent, so instead:
    uniform via randint(0, 10**6) < 150000 (choice drawn first)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.randint(0, 10 ** 6, tokens.shape) < 150000)
    action = torch.randint(0, 10, tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (action < 8), chosen & (action == 8), rnd)


def O_40_transposed_draw(tokens, vocab):
    """Correct; draws (n, batch) uniforms and transposes them."""
    u = torch.rand(tokens.shape[1], tokens.shape[0]).T
    a = torch.rand(tokens.shape[1], tokens.shape[0]).T
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, chosen & (a < 0.8),
                   chosen & (a >= 0.8) & (a < 0.9), rnd)
