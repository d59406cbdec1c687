"""Round 9 red team (writer C, issue 12), ch08_mlm: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/C/sols/ch08_mlm.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). W_25 and W_27 (the 80/10/10 decision read off a
neighbour's choosing uniform) and W_26 (an 80.8/10.1/9.1 split, passing on some seeds) passed
in round 9, before the [MASK] shares among chosen neighbours and the 40,000-row split call.
S_01 (the [MASK] id and the number of specials written as constants, true for every
book.bert.Vocab) is accepted; S_ are not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import math
import numpy as np
import torch

from book.bert import IGNORE

CHECK = "check_mlm_masking"


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def O_01_one_uniform(tokens, vocab):
    """One uniform per position: u < .15 chooses; u/.15 decides the action."""
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    a = u / 0.15
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = tokens.clone()
    inputs[chosen & (a < 0.8)] = vocab.mask
    r = chosen & (a >= 0.8) & (a < 0.9)
    inputs[r] = rnd[r]
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def O_02_numpy_global(tokens, vocab):
    """NumPy's global generator (book.set_seed seeds it too)."""
    t = tokens.numpy()
    chosen = (t >= vocab.num_specials) & (np.random.rand(*t.shape) < 0.15)
    a = np.random.rand(*t.shape)
    rnd = np.random.randint(vocab.num_specials, len(vocab), size=t.shape)
    inp = np.where(chosen & (a < 0.8), vocab.mask, t)
    inp = np.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inp)
    lab = np.where(chosen, t, IGNORE)
    return torch.from_numpy(inp).to(tokens.dtype), torch.from_numpy(lab).to(tokens.dtype)


def O_03_bernoulli_and_compact_random(tokens, vocab):
    chosen = torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    chosen &= tokens >= vocab.num_specials
    masked = chosen & torch.bernoulli(torch.full(tokens.shape, 0.8)).bool()
    rand = chosen & ~masked & torch.bernoulli(torch.full(tokens.shape, 0.5)).bool()
    inputs = tokens.clone()
    inputs[masked] = vocab.mask
    inputs[rand] = torch.randint(vocab.num_specials, len(vocab), (int(rand.sum()),))
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def _mask(tokens, vocab, chosen, action, rnd):
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_01_random_token_excludes_original(tokens, vocab):
    """Random replacement never equals the original (the text: the original included)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    if n_ord > 1:
        off = torch.randint(1, n_ord, tokens.shape)
        rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    else:
        rnd = tokens
    return _mask(tokens, vocab, chosen, action, rnd)


def W_02_random_token_skips_last_id(tokens, vocab):
    """randint's high taken as inclusive: the last ordinary id is never drawn."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(len(vocab) - 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_03_random_token_skips_first_ordinary(tokens, vocab):
    """Starts the random ids at num_specials + 1 (off by one at the other end)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    lo = min(vocab.num_specials + 1, len(vocab) - 1)
    rnd = torch.randint(lo, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_04_random_token_up_to_batch_max(tokens, vocab):
    """Random ids up to the batch's largest id instead of len(vocab)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(int(tokens.max()) + 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_05_random_tokens_per_column(tokens, vocab):
    """One random token per column, shared by every row (broadcast (1, n))."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1]))
    return _mask(tokens, vocab, chosen, action, rnd)


def W_06_action_per_row(tokens, vocab):
    """One action draw per row: all chosen positions of a row get the same treatment."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_07_random_pool_cached(tokens, vocab, _pool={}):
    """A pool of random ids drawn once (first call) and reused by every later call."""
    key = len(vocab)
    if key not in _pool:
        _pool[key] = torch.randint(vocab.num_specials, len(vocab), (1 << 20,))
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = _pool[key][: tokens.numel()].reshape(tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_08_row_count_stochastic_round(tokens, vocab):
    """Each row gets floor(.15 * #ordinary + U) chosen positions at random: the right
    rate, but the choices within a row are not independent."""
    ordinary = tokens >= vocab.num_specials
    chosen = torch.zeros_like(ordinary)
    for r in range(tokens.shape[0]):
        idx = ordinary[r].nonzero().flatten()
        k = math.floor(0.15 * len(idx) + float(torch.rand(())))
        if k:
            chosen[r, idx[torch.randperm(len(idx))[:k]]] = True
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_09_skips_only_pad_cls_sep(tokens, vocab):
    """Never chooses [PAD], [CLS], [SEP] but may choose [MASK] and [UNK]."""
    special = (tokens == vocab.pad) | (tokens == vocab.cls) | (tokens == vocab.sep)
    chosen = ~special & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_10_may_choose_unk(tokens, vocab):
    """Excludes [PAD], [CLS], [SEP], [MASK] by name, but [UNK] can be chosen."""
    special = torch.isin(tokens, torch.tensor([vocab.pad, vocab.cls, vocab.sep, vocab.mask]))
    chosen = ~special & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_11_sequential_conditionals_wrong(tokens, vocab):
    """80% [MASK]; of the rest, a random token with prob 0.1 (should be 0.5)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    m = chosen & (torch.rand(tokens.shape) < 0.8)
    r = chosen & ~m & (torch.rand(tokens.shape) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(m, vocab.mask, tokens)
    inputs = torch.where(r, rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_12_labels_only_changed(tokens, vocab):
    """Labels only where the input changed ([MASK] or random), IGNORE where kept."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs, _ = _mask(tokens, vocab, chosen, action, rnd)
    return inputs, torch.where(chosen & (action < 0.9), tokens, IGNORE)


def W_13_contiguous_alias_mutation(tokens, vocab):
    """inputs = tokens.contiguous() is tokens itself when contiguous: mutated in place."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    labels = torch.where(chosen, tokens, IGNORE)
    inputs = tokens.contiguous()
    inputs[chosen & (action < 0.8)] = vocab.mask
    r = chosen & (action >= 0.8) & (action < 0.9)
    inputs[r] = rnd[r]
    return inputs, labels


def W_14_private_generator_seeded_from_global(tokens, vocab, _g=[]):
    """A private torch.Generator seeded once from the global RNG on the first call:
    later book.set_seed calls no longer reproduce the masks."""
    if not _g:
        _g.append(torch.Generator().manual_seed(int(torch.randint(0, 2**31, ()))))
    g = _g[0]
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_15_choice_rate_over_all_positions(tokens, vocab):
    """Draws 15% of ALL positions then drops the special ones: rate .15 * ordinary share
    is right per ordinary position, but then renormalises: p = .15 * n / #ordinary."""
    ordinary = tokens >= vocab.num_specials
    frac = ordinary.float().mean().clamp(min=1e-9)
    p = min(0.15 / float(frac), 1.0) if float(frac) < 1 else 0.15
    chosen = ordinary & (torch.rand(tokens.shape) < p)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_16_float_labels(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs, labels = _mask(tokens, vocab, chosen, action, rnd)
    return inputs, labels.float()


def W_17_random_token_from_same_row_position_shift(tokens, vocab):
    """Random id = (original + uniform offset) mod ordinary count: uniform marginally,
    but the offset is the same for the whole call."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    off = int(torch.randint(0, n_ord, ()))
    rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    return _mask(tokens, vocab, chosen, action, rnd)


def W_18_mask_split_thresholds_inclusive_wrong(tokens, vocab):
    """action <= .8 mask, action > .9 random, between: unchanged -> same rates, but the
    random tokens come with replacement of (action > .9) & drawn per row."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1))
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


_U = {}


def W_19_choice_uniform_cached_per_shape(tokens, vocab):
    """The choosing uniform is drawn once per shape and reused: the same positions are
    chosen at every call on a batch of that shape (actions and tokens are fresh)."""
    if tokens.shape not in _U:
        _U[tokens.shape] = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (_U[tokens.shape] < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_20_action_per_column(tokens, vocab):
    """One action draw per column (1, n), shared by all rows: within a row the actions are
    independent, across rows they are the same."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1])
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_21_at_least_one_per_row(tokens, vocab):
    """Forces one chosen position in any row with an ordinary token but none chosen."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    empty = ordinary.any(1) & ~chosen.any(1)
    for r in empty.nonzero().flatten().tolist():
        idx = ordinary[r].nonzero().flatten()
        chosen[r, idx[torch.randint(len(idx), ())]] = True
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_22_multinomial_without_replacement(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    r = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    n = int(r.sum())
    ids = torch.multinomial(torch.ones(len(vocab) - vocab.num_specials), n,
                            replacement=False) + vocab.num_specials
    inputs = inputs.clone()
    inputs[r] = ids
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_23_view_flat(tokens, vocab):
    """tokens.view(-1): fails on a non-contiguous batch."""
    flat = tokens.view(-1)
    ordinary = flat >= vocab.num_specials
    chosen = ordinary & (torch.rand(flat.shape) < 0.15)
    action = torch.rand(flat.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), flat.shape)
    inputs, labels = _mask(flat, vocab, chosen, action, rnd)
    return inputs.view(tokens.shape), labels.view(tokens.shape)


def W_25_action_from_neighbour_uniform(tokens, vocab):
    """The action of position j reuses the choosing uniform of position j-1 (saves a draw):
    marginals right, but a chosen right neighbour of a chosen position is always [MASK]."""
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    action = u.roll(1, dims=1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)


def W_26_split_808_101_091(tokens, vocab):
    """action = u / .15 * .99 on chosen positions: shares 80.8% / 10.1% / 9.1% (not 80/10/10)."""
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, u / 0.15 * 0.99, rnd)


def O_04_random_id_from_action_uniform(tokens, vocab):
    """The random id is read off the action uniform inside its [.8, .9) band (uniform)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape, dtype=torch.float64)
    n_ord = len(vocab) - vocab.num_specials
    rnd = vocab.num_specials + ((a - 0.8) / 0.1 * n_ord).floor().long().clamp(0, n_ord - 1)
    return _mask(tokens, vocab, chosen, a, rnd)


def S_01_hardcoded_ids(tokens, vocab):
    """[MASK] = 4 and 5 specials written as constants (true for every book.bert.Vocab)."""
    ordinary = tokens >= 5
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(5, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), 4, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_27_overlapping_slices_of_one_draw(tokens, vocab):
    """One draw of numel + 1 uniforms, sliced [:-1] for the choice and [1:] for the action
    (meant to be two disjoint halves): the action of a position is the choice uniform of
    the next one."""
    r = torch.rand(tokens.numel() + 1)
    chosen = (tokens >= vocab.num_specials) & (r[:-1].view(tokens.shape) < 0.15)
    action = r[1:].view(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _mask(tokens, vocab, chosen, action, rnd)
