"""Round 7 red team (writer R7-C, issue 12), ch08_mlm: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/C/sols/ch08_mlm.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch
from book.bert import IGNORE

CHECK = "check_mlm_masking"


def C_01_reference_style(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_02_one_uniform_decides_everything(tokens, vocab):
    """One draw r per position: r < .15 chosen, r < .12 mask, .12 <= r < .135 random;
    the random token re-uses the same r rescaled (conditionally uniform, independent)."""
    r = torch.rand(tokens.shape, dtype=torch.float64)
    chosen = (tokens >= vocab.num_specials) & (r < 0.15)
    n_ord = len(vocab) - vocab.num_specials
    u = ((r - 0.12) / 0.015).clamp(0, 1 - 1e-12)          # uniform on [0,1) given random
    rnd = vocab.num_specials + (u * n_ord).long()
    inputs = torch.where(chosen & (r < 0.12), torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(chosen & (r >= 0.12) & (r < 0.135), rnd.to(tokens.dtype), inputs)
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def O_03_numpy_rng_sequential_split(tokens, vocab):
    """numpy's global RNG (book.set_seed seeds it); 80% mask, then half of the rest random;
    the random tokens drawn only for the positions that need them."""
    t = tokens.cpu().numpy()
    chosen = (t >= vocab.num_specials) & (np.random.random_sample(t.shape) < 0.15)
    to_mask = chosen & (np.random.random_sample(t.shape) < 0.8)
    rest = chosen & ~to_mask
    to_random = rest & (np.random.random_sample(t.shape) < 0.5)
    inputs = t.copy()
    inputs[to_mask] = vocab.mask
    inputs[to_random] = np.random.randint(vocab.num_specials, len(vocab),
                                          size=int(to_random.sum()))
    labels = np.where(chosen, t, IGNORE)
    return (torch.from_numpy(inputs).to(tokens.device),
            torch.from_numpy(labels).to(tokens.device))


def W_01_random_token_excludes_last_id(tokens, vocab):
    """randint's high is exclusive; the learner subtracts 1 anyway: the last id never drawn."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, max(len(vocab) - 1, vocab.num_specials + 1),
                        tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_02_random_token_never_the_original(tokens, vocab):
    """Random replacement drawn among the OTHER ordinary ids (text: original included)."""
    ns, n_ord = vocab.num_specials, len(vocab) - vocab.num_specials
    chosen = (tokens >= ns) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    if n_ord > 1:
        shift = torch.randint(1, n_ord, tokens.shape)
        rnd = (tokens - ns + shift) % n_ord + ns
    else:
        rnd = tokens
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_03_same_columns_every_row(tokens, vocab):
    """One draw per column, shared by all rows: positions independent within a row,
    rates right, but every row has the same chosen columns."""
    n = tokens.shape[1]
    chosen = (tokens >= vocab.num_specials) & (torch.rand(1, n) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_04_action_per_row(tokens, vocab):
    """One 80/10/10 draw per row: all chosen tokens of a row get the same treatment."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_05_random_token_per_row(tokens, vocab):
    """One random replacement token per row, used for every 'random' position of the row."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand(
        tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_06_exact_80_10_10_split(tokens, vocab):
    """Exactly 80% / 10% / 10% of the chosen positions (a shuffled split of the batch's
    chosen positions): the actions are dependent, not independent draws."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    idx = chosen.flatten().nonzero().squeeze(1)
    idx = idx[torch.randperm(len(idx))]
    k_mask, k_rand = round(0.8 * len(idx)), round(0.1 * len(idx))
    flat = tokens.flatten().clone()
    flat[idx[:k_mask]] = vocab.mask
    r = idx[k_mask:k_mask + k_rand]
    flat[r] = torch.randint(vocab.num_specials, len(vocab), (len(r),), dtype=flat.dtype)
    return flat.view(tokens.shape), torch.where(chosen, tokens, IGNORE)


_G = torch.Generator().manual_seed(1234)


def W_07_module_level_generator(tokens, vocab):
    """A private generator seeded once at import: draws anew each call, but book.set_seed
    (the caller's seed) has no effect on it."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape, generator=_G) < 0.15)
    action = torch.rand(tokens.shape, generator=_G)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=_G)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_08_contiguous_alias_mutates(tokens, vocab):
    """tokens.contiguous() returns tokens itself when already contiguous: the in-place
    edits change the caller's batch (but not for a non-contiguous slice)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, dtype=tokens.dtype)
    labels = torch.where(chosen, tokens, IGNORE)
    inputs = tokens.contiguous()
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs[chosen & (action < 0.8)] = vocab.mask
    inputs[to_random] = rnd[to_random]
    return inputs, labels


def W_09_rounded_random_ids(tokens, vocab):
    """Random id = round(u * (n_ord - 1)): the first and last ordinary ids get half weight."""
    ns, n_ord = vocab.num_specials, len(vocab) - vocab.num_specials
    chosen = (tokens >= ns) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = ns + torch.round(torch.rand(tokens.shape) * (n_ord - 1)).long()
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_10_unchanged_get_ignore_label(tokens, vocab):
    """Labels only where the input was altered ([MASK] or random): the 10% kept-as-is
    positions are not predicted."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen & (action < 0.9), tokens, IGNORE)


def W_11_choice_skips_neighbours(tokens, vocab):
    """'No two masks side by side': a position right after a chosen one is never chosen.
    Rate corrected so that the overall rate stays about 0.15."""
    q = 0.15 / (1 - 0.15)  # so that P(chosen) = q (1 - P(chosen)) = 0.15 on long rows
    r = torch.rand(tokens.shape)
    ordinary = tokens >= vocab.num_specials
    chosen = torch.zeros_like(ordinary)
    for j in range(tokens.shape[1]):
        prev = chosen[:, j - 1] if j else torch.zeros_like(chosen[:, 0])
        chosen[:, j] = ordinary[:, j] & (r[:, j] < q) & ~prev
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_12_random_from_rank_not_uniform(tokens, vocab):
    """Random token = an ordinary id drawn with torch.multinomial over 1/rank weights
    ('frequent words are more plausible replacements')."""
    ns, n_ord = vocab.num_specials, len(vocab) - vocab.num_specials
    chosen = (tokens >= ns) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    w = 1.0 / torch.arange(1, n_ord + 1, dtype=torch.float)
    rnd = ns + torch.multinomial(w, tokens.numel(), replacement=True).view(tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_13_rate_per_row_of_ordinary(tokens, vocab):
    """Chooses round(0.15 * number of ordinary tokens) positions per row, at random."""
    ordinary = tokens >= vocab.num_specials
    score = torch.rand(tokens.shape).masked_fill(~ordinary, 2.0)
    k = (0.15 * ordinary.sum(1, keepdim=True)).round().long()
    rank = score.argsort(1).argsort(1)
    chosen = ordinary & (rank < k)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_14_random_overrides_mask(tokens, vocab):
    """Two independent 10%/80% draws; where both fire the random token wins: rates
    72% mask, 10% random, 18% unchanged."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    to_mask = chosen & (torch.rand(tokens.shape) < 0.8)
    to_random = chosen & (torch.rand(tokens.shape) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(to_mask, vocab.mask, tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_15_labels_dtype_from_where_scalar_float(tokens, vocab):
    """labels built as float (torch.where with a float IGNORE) then cast back with
    .to(tokens.dtype): right values ... but inputs returned as int64 always."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    labels = torch.where(chosen, tokens.float(), float(IGNORE))
    return inputs, labels


def O_04_ordinary_as_above_mask_id(tokens, vocab):
    """ordinary = tokens > vocab.mask ([MASK] is the last special id, 4 = num_specials-1)."""
    chosen = (tokens > vocab.mask) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


_RND_BY_SHAPE = {}


def W_16_random_table_drawn_once_per_shape(tokens, vocab):
    """The table of random replacement ids is drawn once per shape and reused."""
    key = (tuple(tokens.shape), len(vocab))
    if key not in _RND_BY_SHAPE:
        _RND_BY_SHAPE[key] = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    rnd = _RND_BY_SHAPE[key]
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


_ORD_BY_SHAPE = {}


def W_17_ordinary_mask_cached_per_shape(tokens, vocab):
    """Which positions are ordinary is cached per shape: a new batch of the same shape
    re-uses the old batch's special positions."""
    key = tuple(tokens.shape)
    if key not in _ORD_BY_SHAPE:
        _ORD_BY_SHAPE[key] = tokens >= vocab.num_specials
    chosen = _ORD_BY_SHAPE[key] & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


_CHOICE = {}


def W_18_choice_drawn_once_per_shape(tokens, vocab):
    """The chosen positions are drawn once per shape; only the 80/10/10 actions are new."""
    key = tuple(tokens.shape)
    if key not in _CHOICE:
        _CHOICE[key] = torch.rand(tokens.shape) < 0.15
    chosen = (tokens >= vocab.num_specials) & _CHOICE[key]
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_19_view_on_noncontiguous(tokens, vocab):
    """Works on flat views: tokens.view(-1) fails on a non-contiguous batch."""
    flat = tokens.view(-1)
    chosen = (flat >= vocab.num_specials) & (torch.rand(flat.shape) < 0.15)
    action = torch.rand(flat.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), flat.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, flat)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs.view(tokens.shape), torch.where(chosen, flat, IGNORE).view(tokens.shape)


def W_20_span_pairs(tokens, vocab):
    """Span masking: a start is chosen with prob. 0.075 and masks itself and the next
    ordinary position (SpanBERT-like, length-2 spans): rate ~0.15, clustered."""
    ordinary = tokens >= vocab.num_specials
    start = ordinary & (torch.rand(tokens.shape) < 0.0784)
    nxt = torch.zeros_like(start)
    nxt[:, 1:] = start[:, :-1]
    chosen = ordinary & (start | nxt)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_21_random_without_chosen(tokens, vocab):
    """Forgets `chosen &` on the random replacement: 10% of all ordinary positions get a
    random token, chosen or not."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(ordinary & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_22_vocab_size_from_batch_max(tokens, vocab):
    """Random ids up to tokens.max() (the largest id in the batch), not len(vocab)."""
    chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(int(tokens.max()) + 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_23_at_least_one_per_row(tokens, vocab):
    """Independent 15% choices, but a row that got none has one ordinary position forced
    ('else the MLM loss of that row is empty'), as d2l's max(1, ...) does."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    none = ~chosen.any(1) & ordinary.any(1)
    if none.any():
        pick = torch.rand(tokens.shape).masked_fill(~ordinary, -1.0).argmax(1)
        force = torch.zeros_like(chosen)
        force[torch.arange(tokens.shape[0]), pick] = True
        chosen = chosen | (force & none[:, None])
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)
