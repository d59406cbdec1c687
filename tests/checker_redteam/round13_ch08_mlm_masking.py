"""Round 13 red team (writer D, issue 12), ch08_mlm_masking: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round13/D/sols/ch08_mlm_masking.py (the writer's header: mask_tokens(tokens, vocab) -> (inputs, labels).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: W_18 (rows
in pairs sharing their uniforms) and W_25 (uniforms for at most 65,536 rows, tiled) by
_check_rows_independent: for every lag between rows, a z-score of the association of the
choices (and of the [MASK] decisions) in the same column, on the main calls and on the
120,000-row call (tolerance 8); W_24 (a generator seeded from one random byte) by
_check_maskings_vary: 100 calls on one 4 x 32 batch may not repeat a masking twice. W_27
(inference mode) is rejected by _core."""
# flake8: noqa
import torch

from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _finish(tokens, vocab, chosen, action, random_tokens):
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(to_mask, vocab.mask, tokens)
    inputs = torch.where(to_random, random_tokens, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def C_02_bernoulli_multinomial(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    kind = torch.multinomial(torch.tensor([0.8, 0.1, 0.1]), tokens.numel(), replacement=True)
    kind = kind.reshape(tokens.shape)
    rnd = torch.randint_like(tokens, vocab.num_specials, len(vocab))
    inputs = torch.where(chosen & (kind == 0), vocab.mask, tokens)
    inputs = torch.where(chosen & (kind == 1), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_03_integer_percent(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.randint(0, 100, tokens.shape) < 15)
    act = torch.randint(0, 10, tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (act < 8), vocab.mask, tokens)
    inputs = torch.where(chosen & (act == 8), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_04_compressed_draws(tokens, vocab):
    """Draw the action and random ids only for the chosen positions (fewer numbers)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    idx = chosen.nonzero(as_tuple=True)
    k = idx[0].numel()
    action = torch.rand(k)
    rnd = torch.randint(vocab.num_specials, len(vocab), (k,), dtype=tokens.dtype)
    new = tokens[idx].clone()
    new = torch.where(action < 0.8, torch.full_like(new, vocab.mask), new)
    new = torch.where((action >= 0.8) & (action < 0.9), rnd, new)
    inputs = tokens.clone()
    inputs[idx] = new
    labels = torch.full_like(tokens, IGNORE)
    labels[idx] = tokens[idx]
    return inputs, labels


def W_05_columns_shared(tokens, vocab):
    """One choice uniform per column, broadcast over the batch: every row masks the same
    columns (perfectly correlated between examples); any batch >= 2."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(1, tokens.shape[1]) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_06_action_columns_shared(tokens, vocab):
    """Action uniform per column, shared by all rows: whether column j becomes [MASK] is
    the same in every row; any batch >= 2."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1]).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_07_random_ids_columns_shared(tokens, vocab):
    """One random id per column shared by all rows; any batch >= 2 with two random
    replacements in one column."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand(tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_08_forgot_unk(tokens, vocab):
    """Excludes [PAD], [CLS], [SEP], [MASK] by name but forgets [UNK]: [UNK] can be chosen."""
    special = ((tokens == vocab.pad) | (tokens == vocab.cls) | (tokens == vocab.sep)
               | (tokens == vocab.mask))
    chosen = ~special & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_09_labels_int32(tokens, vocab):
    """labels in int32: cross_entropy(..., labels) raises 'expected target dtype to be Long';
    int64 tokens."""
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, labels.to(torch.int32)


def W_10_vocab_from_batch(tokens, vocab):
    """Random ids drawn up to tokens.max() (the vocabulary size guessed from the batch):
    ids above the batch's largest never appear; a batch without the top ids."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(int(tokens.max()) + 1, vocab.num_specials + 1) if tokens.numel() else len(vocab)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_11_clamped_ids(tokens, vocab):
    """randint(0, len(vocab)).clamp(min=num_specials): the first ordinary id gets 6 shares."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(0, len(vocab), tokens.shape).clamp(min=vocab.num_specials)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_12_ignore_when_same(tokens, vocab):
    """Label IGNORE where the random token happens to equal the original: the chosen rate
    drops by 1.5%/V_ordinary (to 13.5% with one ordinary id)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs, labels = _finish(tokens, vocab, chosen, action, rnd)
    labels = torch.where(to_random & (rnd == tokens), IGNORE, labels)
    return inputs, labels


def W_13_at_least_one(tokens, vocab):
    """Forces at least one chosen position per row that has an ordinary token: rows with
    one or two ordinary tokens are chosen far more often than 15%."""
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape)
    chosen = ordinary & (u < 0.15)
    empty = ordinary.any(1) & ~chosen.any(1)
    if empty.any():
        first = torch.where(ordinary, u, 2.0).argmin(1)
        chosen[empty, first[empty]] = True
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_14_exclude_original(tokens, vocab):
    """The random token is never the original one (resampled): text says 'original
    included'; visible with a tiny vocabulary (2 ordinary ids)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    if n_ord > 1:
        off = torch.randint(1, n_ord, tokens.shape)
        rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    else:
        rnd = torch.full_like(tokens, vocab.num_specials)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_15_upper_exclusive(tokens, vocab):
    """randint(num_specials, len(vocab) - 1): the last id is never drawn (and a vocabulary
    with one ordinary id crashes); any vocabulary."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(len(vocab) - 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_16_same_seed_each_call(tokens, vocab):
    """A private generator seeded with torch.initial_seed(): every call after one set_seed
    gives the same masks (the masking never changes between epochs)."""
    g = torch.Generator().manual_seed(torch.initial_seed())
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_17_rate_of_all_positions(tokens, vocab):
    """Aims at 15% of all positions: p = 0.15 * n / n_ordinary per row, so rows with
    specials are over-masked (a row of 32 with 4 specials: 17.1%)."""
    ordinary = tokens >= vocab.num_specials
    n_ord = ordinary.sum(1, keepdim=True).clamp(min=1)
    p = (0.15 * tokens.shape[1] / n_ord).clamp(max=1.0)
    chosen = ordinary & (torch.rand(tokens.shape) < p)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_18_checkerboard_rows(tokens, vocab):
    """Row pairs share draws: row 2k+1 reuses row 2k's uniforms (batch processed in pairs
    to halve the random numbers); any batch >= 2."""
    b = tokens.shape[0]
    h = (b + 1) // 2
    u = torch.rand(h, tokens.shape[1]).repeat_interleave(2, 0)[:b]
    a = torch.rand(h, tokens.shape[1]).repeat_interleave(2, 0)[:b]
    ordinary = tokens >= vocab.num_specials
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, ordinary & (u < 0.15), a, rnd)


def W_19_random_ids_permuted_vocab(tokens, vocab):
    """Random ids via randperm of the ordinary ids, one permutation tiled over positions:
    within a call each id appears at most once per V positions (no repeats; not i.i.d.)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    perm = torch.randperm(n_ord) + vocab.num_specials
    reps = -(-tokens.numel() // n_ord)
    rnd = perm.repeat(reps)[:tokens.numel()].reshape(tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_20_choice_depends_on_token(tokens, vocab):
    """Choice uniform hashed from (position, token): the same token at the same column is
    chosen in every row (draw u per (column, id) pair); any batch with repeated tokens."""
    ordinary = tokens >= vocab.num_specials
    table = torch.rand(tokens.shape[1], len(vocab))
    cols = torch.arange(tokens.shape[1]).expand(tokens.shape)
    u = table[cols, tokens.clamp(0, len(vocab) - 1)]
    chosen = ordinary & (u < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_21_diagonal_stream(tokens, vocab):
    """One stream s of b+n uniforms, u[i, j] = s[i + j] (a Hankel table): within a row all
    draws are distinct, but row i+1 is row i shifted by one column; any batch >= 2."""
    b, n = tokens.shape
    idx = torch.arange(b)[:, None] + torch.arange(n)[None, :]
    u = torch.rand(b + n)[idx]
    a = torch.rand(b + n)[idx]
    ordinary = tokens >= vocab.num_specials
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, ordinary & (u < 0.15), a, rnd)


def W_22_tiled_1024_rows(tokens, vocab):
    """Fresh uniforms for at most 1024 rows per call, tiled over bigger batches: rows i and
    i + 1024 get identical choices and actions; batch > 1024."""
    b, n = tokens.shape
    r = min(b, 1024)
    reps = -(-b // r) if b else 1
    u = torch.rand(r, n).repeat(reps, 1)[:b]
    a = torch.rand(r, n).repeat(reps, 1)[:b]
    rnd = torch.randint(vocab.num_specials, len(vocab), (r, n)).repeat(reps, 1)[:b]
    ordinary = tokens >= vocab.num_specials
    return _finish(tokens, vocab, ordinary & (u < 0.15), a, rnd)


def W_23_action_from_next_choice(tokens, vocab):
    """The action of position j reuses the choice uniform of position j+1 (saves a draw):
    given j became [MASK], j+1 is chosen with P(u<0.15 | u<0.8) = 18.75%, not 15%."""
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape[0], tokens.shape[1] + 1)
    chosen = ordinary & (u[:, :-1] < 0.15)
    action = u[:, 1:]
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_24_byte_seed(tokens, vocab):
    """Private generator seeded with one random byte drawn from the global generator: new at
    each call and reproducible under set_seed, but only 256 different maskings exist (the
    model sees at most 256 masks of a batch over all epochs)."""
    g = torch.Generator().manual_seed(int(torch.randint(0, 256, (1,))))
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    action = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_25_tiled_65536_rows(tokens, vocab):
    """Like a uniform table capped at 65,536 rows: rows i and i + 65536 get identical
    choices, actions and random ids; batch > 65,536 rows (the checker's 120,000)."""
    b, n = tokens.shape
    r = min(b, 65536)
    reps = -(-b // r) if b else 1
    u = torch.rand(r, n).repeat(reps, 1)[:b]
    a = torch.rand(r, n).repeat(reps, 1)[:b]
    rnd = torch.randint(vocab.num_specials, len(vocab), (r, n)).repeat(reps, 1)[:b]
    ordinary = tokens >= vocab.num_specials
    return _finish(tokens, vocab, ordinary & (u < 0.15), a, rnd)


def W_26_tiled_16_columns(tokens, vocab):
    """Uniforms drawn for 16 columns and repeated along the row: positions j and j + 16 of
    a row always get the same decision; n > 16 (the checker's n = 32)."""
    b, n = tokens.shape
    c = min(n, 16)
    reps = -(-n // c) if n else 1
    u = torch.rand(b, c).repeat(1, reps)[:, :n]
    a = torch.rand(b, c).repeat(1, reps)[:, :n]
    rnd = torch.randint(vocab.num_specials, len(vocab), (b, c)).repeat(1, reps)[:, :n]
    ordinary = tokens >= vocab.num_specials
    return _finish(tokens, vocab, ordinary & (u < 0.15), a, rnd)


@torch.inference_mode()
def W_27_inference_mode(tokens, vocab):
    """Decorated with @torch.inference_mode() ("data preparation needs no gradient"): labels
    are inference tensors, and cross_entropy(logits, labels).backward() in the training step
    raises 'Inference tensors cannot be saved for backward'; any batch."""
    return C_01_reference(tokens, vocab)
