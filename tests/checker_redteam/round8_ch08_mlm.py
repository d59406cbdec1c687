"""Round 8 red team (writer C, issue 12), ch08_mlm: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/C/sols/ch08_mlm.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_); there are no S_ entries. Round 11 renamed
O_06 (inputs returned as tokens itself when nothing changes) to
W_06_returns_tokens_when_unchanged: inputs must be a new tensor also when nothing is
chosen (round 11's W_26 is the same shortcut).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_mlm_masking"
import numpy as np
import torch
from book.bert import IGNORE

_G = torch.Generator().manual_seed(1234)


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15).to(tokens.device)
    action = torch.rand(tokens.shape).to(tokens.device)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape).to(tokens.device)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def O_02_one_uniform(tokens, vocab):
    """One uniform per position: u < .12 mask, .12 <= u < .135 random, .135 <= u < .15 keep."""
    u = torch.rand(tokens.shape, device=tokens.device)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = tokens.clone()
    inputs[chosen & (u < 0.12)] = vocab.mask
    sel = chosen & (u >= 0.12) & (u < 0.135)
    inputs[sel] = rnd[sel]
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def O_03_numpy_global(tokens, vocab):
    """Numpy's global generator (seeded by book.set_seed too), multinomial action."""
    shape = tuple(tokens.shape)
    t = tokens.cpu().numpy()
    chosen = (t >= vocab.num_specials) & (np.random.random_sample(shape) < 0.15)
    action = np.random.choice(3, size=shape, p=[0.8, 0.1, 0.1])
    rnd = np.random.randint(vocab.num_specials, len(vocab), size=shape)
    inp = np.where(chosen & (action == 0), vocab.mask, t)
    inp = np.where(chosen & (action == 1), rnd, inp)
    lab = np.where(chosen, t, IGNORE)
    return (torch.as_tensor(inp, dtype=tokens.dtype).to(tokens.device),
            torch.as_tensor(lab, dtype=tokens.dtype).to(tokens.device))


def O_04_bernoulli_chain(tokens, vocab):
    """torch.bernoulli for the choice, then bernoulli(0.8) for mask, bernoulli(0.5) of the rest."""
    full = lambda p: torch.full(tokens.shape, p, device=tokens.device)
    chosen = torch.bernoulli(full(0.15)).bool() & (tokens >= vocab.num_specials)
    masked = chosen & torch.bernoulli(full(0.8)).bool()
    randomised = chosen & ~masked & torch.bernoulli(full(0.5)).bool()
    rnd = torch.randint_like(tokens, vocab.num_specials, len(vocab))
    inputs = tokens.masked_fill(masked, vocab.mask)
    inputs = torch.where(randomised, rnd, inputs)
    return inputs, tokens.masked_fill(~chosen, IGNORE)


def _core(tokens, vocab, chosen, action, rnd):
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_01_choice_per_column(tokens, vocab):
    """One draw per column, shared by every row: positions independent along a row, but
    every row masks the same columns."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape[1]) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_02_exact_split(tokens, vocab):
    """Exact 80/10/10 split of the chosen positions (by a permutation)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    idx = chosen.flatten().nonzero().squeeze(1)
    idx = idx[torch.randperm(len(idx))]
    n = len(idx)
    action = torch.ones(tokens.numel())
    action[idx[: round(0.8 * n)]] = 0.0
    action[idx[round(0.8 * n): round(0.9 * n)]] = 0.85
    action[idx[round(0.9 * n):]] = 0.95
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action.view(tokens.shape), rnd)


def W_03_random_includes_specials(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(0, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_04_random_excludes_original(tokens, vocab):
    """Random token drawn from the other ordinary ids (never the original)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    off = torch.randint(1, max(n_ord, 2), tokens.shape)
    rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    rnd = torch.where(tokens >= vocab.num_specials, rnd, tokens)
    return _core(tokens, vocab, chosen, action, rnd)


def W_05_forgets_unk_and_mask(tokens, vocab):
    """Excludes [PAD], [CLS], [SEP] by name; forgets [UNK] and [MASK]."""
    ordinary = (tokens != vocab.pad) & (tokens != vocab.cls) & (tokens != vocab.sep)
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_06_labels_only_changed(tokens, vocab):
    """Labels only where the input was changed (the unchanged 10% get IGNORE)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs, _ = _core(tokens, vocab, chosen, action, rnd)
    return inputs, torch.where(chosen & (action < 0.9), tokens, IGNORE)


def W_07_inplace(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    labels = torch.where(chosen, tokens, IGNORE)
    inputs = tokens
    inputs[chosen & (action < 0.8)] = vocab.mask
    sel = chosen & (action >= 0.8) & (action < 0.9)
    inputs[sel] = rnd[sel]
    return inputs, labels


def W_08_private_generator(tokens, vocab):
    """A module-level generator seeded once: draws anew, but ignores the caller's seed."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape, generator=_G) < 0.15)
    action = torch.rand(tokens.shape, generator=_G)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=_G)
    return _core(tokens, vocab, chosen, action, rnd)


def W_09_seeds_inside(tokens, vocab):
    torch.manual_seed(0)
    return C_01_reference(tokens, vocab)


def O_07_random_band_from_action(tokens, vocab):
    """Reuses the action draw (in [0.8, 0.9)) for the random id: ids depend on the choice."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    frac = ((action - 0.8) / 0.1).clamp(0, 0.999999)
    rnd = vocab.num_specials + (frac * n_ord).long()
    return _core(tokens, vocab, chosen, action, rnd)


def W_11_labels_int32(tokens, vocab):
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, labels.int()


def W_12_view_flat(tokens, vocab):
    """tokens.view(-1): fails on a non-contiguous slice."""
    flat = tokens.view(-1)
    inputs, labels = C_01_reference(flat, vocab)
    return inputs.view(tokens.shape), labels.view(tokens.shape)


def W_13_random_up_to_batch_max(tokens, vocab):
    """Random ids from num_specials to the largest id in the batch."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(int(tokens.max()) + 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_14_random_off_by_one(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, max(len(vocab) - 1, vocab.num_specials + 1), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_15_exact_count_per_row(tokens, vocab):
    """Chooses exactly round(0.15 x ordinary) positions per row (d2l-style), no binomial spread."""
    ordinary = tokens >= vocab.num_specials
    score = torch.rand(tokens.shape).masked_fill(~ordinary, 2.0)
    k = (ordinary.sum(1) * 0.15).round().long()
    rank = score.argsort(1).argsort(1)
    chosen = ordinary & (rank < k[:, None])
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_16_at_least_one_per_row(tokens, vocab):
    """Forces at least one chosen position in every row with an ordinary token."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    none = (chosen.sum(1) == 0) & ordinary.any(1)
    if none.any():
        score = torch.rand(tokens.shape).masked_fill(~ordinary, -1.0)
        first = score.argmax(1)
        extra = torch.zeros_like(chosen)
        extra[torch.arange(len(tokens)), first] = True
        chosen = chosen | (extra & none[:, None])
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_17_action_per_row(tokens, vocab):
    """The 80/10/10 decision once per row."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_18_random_token_per_row(tokens, vocab):
    """One random id per row, used at every 'random' position of that row."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand(tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_19_inputs_float(tokens, vocab):
    """torch.where with a float fill promotes: inputs come back float."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), float(vocab.mask), tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd.float(), inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_05_partition_reordered(tokens, vocab):
    """<= 0.15 and '<' slightly shifted: 0.8 / 0.9 swapped into 0.9 / 0.8 (random 80%...)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.1), rnd, tokens)
    inputs = torch.where(chosen & (action >= 0.1) & (action < 0.9), vocab.mask, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_21_neighbour_block(tokens, vocab):
    """Masks pairs: a chosen position also takes its right neighbour (span masking), rate halved."""
    ordinary = tokens >= vocab.num_specials
    start = torch.rand(tokens.shape) < 0.075
    nxt = torch.zeros_like(start)
    nxt[:, 1:] = start[:, :-1]
    chosen = ordinary & (start | nxt)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_06_returns_tokens_when_unchanged(tokens, vocab):
    """Returns tokens itself as inputs when nothing changes in the batch (aliasing): fine, but
    labels reuse the same storage as inputs for the ignore rows? -> labels = inputs view.
    Written O_06 in round 8; W_ since round 11 (issue 12): a caller that writes into inputs
    changes its own tokens (round 11's W_26 is the same shortcut), and the checker now gives
    a batch where nothing can be chosen and refuses inputs that are tokens itself."""
    inputs, labels = C_01_reference(tokens, vocab)
    if bool((inputs == tokens).all()):
        return tokens, labels
    return inputs, labels


def O_08_generator_seeded_from_global(tokens, vocab):
    """A fresh generator seeded by a draw from the global one: new every call, follows set_seed."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _core(tokens, vocab, chosen, action, rnd)


def W_23_random_per_column(tokens, vocab):
    """One random id per column, shared by all rows."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand(tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_24_random_substitution(tokens, vocab):
    """A random permutation of the ordinary ids per call: the same token always gets the same
    replacement within a call."""
    n_ord = len(vocab) - vocab.num_specials
    perm = torch.randperm(n_ord) + vocab.num_specials
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = perm[(tokens - vocab.num_specials).clamp(min=0)]
    return _core(tokens, vocab, chosen, action, rnd)


def W_25_ordinary_off_by_one(tokens, vocab):
    """tokens > vocab.num_specials: the first ordinary id is never chosen."""
    chosen = (tokens > vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


_TABLE = {}


def W_26_cached_random_ids(tokens, vocab):
    """Random replacement ids drawn once per (shape, vocab size) and reused in later calls."""
    key = (tuple(tokens.shape), len(vocab))
    if key not in _TABLE:
        _TABLE[key] = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    return _core(tokens, vocab, chosen, action, _TABLE[key])


_ACT = {}


def W_27_cached_action(tokens, vocab):
    """The 80/10/10 decision table drawn once per shape and reused."""
    key = tuple(tokens.shape)
    if key not in _ACT:
        _ACT[key] = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, _ACT[key], rnd)


def O_09_int64_for_int32_tokens(tokens, vocab):
    """int32 tokens -> int64 inputs and labels (as book.bert.mask_tokens and torch.where promotion do)."""
    inputs, labels = C_01_reference(tokens.long(), vocab)
    return inputs, labels


def W_29_labels_are_inputs(tokens, vocab):
    """Labels hold the new input (e.g. [MASK]) instead of the original token."""
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, torch.where(labels != IGNORE, inputs, IGNORE)


def W_30_rate_of_sequence(tokens, vocab):
    """15% of the whole row length, spread over its ordinary tokens (rate n / n_ordinary x 0.15)."""
    ordinary = tokens >= vocab.num_specials
    rate = (0.15 * tokens.shape[1] / ordinary.sum(1, keepdim=True).clamp(min=1)).clamp(max=1)
    chosen = ordinary & (torch.rand(tokens.shape) < rate)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _core(tokens, vocab, chosen, action, rnd)


def W_31_clamped_random(tokens, vocab):
    """randint over the whole vocabulary, clamped up to the first ordinary id."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(0, len(vocab), tokens.shape).clamp(min=vocab.num_specials)
    return _core(tokens, vocab, chosen, action, rnd)


def W_32_random_10_of_rest(tokens, vocab):
    """[MASK] with 0.8; of the rest, random with probability 0.1 (not 0.5): 2% random, 18% kept."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    m = torch.rand(tokens.shape) < 0.8
    r = torch.rand(tokens.shape) < 0.1
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & m, vocab.mask, tokens)
    inputs = torch.where(chosen & ~m & r, rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_33_seed_from_tokens(tokens, vocab):
    """A generator seeded from the batch contents: the same batch always gets the same masks."""
    g = torch.Generator().manual_seed(int(tokens.sum()) + tokens.numel())
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _core(tokens, vocab, chosen, action, rnd)
