"""Round 2 red team (writer R2), ch08_mlm: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch08_mlm.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch
from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _ordinary(tokens, vocab):
    return tokens >= vocab.num_specials


def C_reference(tokens, vocab):
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    a = torch.rand(tokens.shape, device=tokens.device)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(chosen & (a < 0.8), torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def O_bernoulli_multinomial(tokens, vocab):
    """Bernoulli choice, then one categorical draw (0: mask, 1: random, 2: keep) per position;
    returns the masks via clone + index assignment."""
    chosen = torch.bernoulli(torch.full(tokens.shape, 0.15, device=tokens.device)).bool()
    chosen &= tokens >= vocab.num_specials
    action = torch.multinomial(torch.tensor([0.8, 0.1, 0.1], device=tokens.device),
                               tokens.numel(), replacement=True).reshape(tokens.shape)
    inputs = tokens.clone()
    inputs[chosen & (action == 0)] = vocab.mask
    r = chosen & (action == 1)
    inputs[r] = torch.randint(vocab.num_specials, len(vocab), (int(r.sum()),), device=tokens.device)
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def W_specials_too(tokens, vocab):
    """Chooses special positions too."""
    chosen = torch.rand(tokens.shape) < 0.15
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_independent_draws(tokens, vocab):
    """Two independent draws for mask (0.8) and random (0.1): 72/10/18."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    to_mask = chosen & (torch.rand(tokens.shape) < 0.8)
    to_rand = chosen & (torch.rand(tokens.shape) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(to_mask, vocab.mask, tokens)
    inputs = torch.where(to_rand, rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_random_any_token(tokens, vocab):
    """The random replacement may be a special token ([MASK], [PAD], ...)."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(0, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_random_excludes_last(tokens, vocab):
    """randint's high is exclusive: len(vocab) - 1 never drawn."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab) - 1, tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_labels_inverted(tokens, vocab):
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, IGNORE, tokens)


def W_labels_from_inputs(tokens, vocab):
    """Labels hold the corrupted input, not the original."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, inputs, IGNORE)


def W_mutates_tokens(tokens, vocab):
    """inputs = tokens (no clone), then index assignment."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    labels = torch.where(chosen, tokens, IGNORE)
    a = torch.rand(tokens.shape)
    inputs = tokens
    inputs[chosen & (a < 0.8)] = vocab.mask
    r = chosen & (a >= 0.8) & (a < 0.9)
    inputs[r] = torch.randint(vocab.num_specials, len(vocab), (int(r.sum()),))
    return inputs, labels


def W_exact_15_percent(tokens, vocab):
    """Exactly round(15%) of each row's ordinary positions (not independent)."""
    chosen = torch.zeros(tokens.shape, dtype=torch.bool)
    for b in range(tokens.shape[0]):
        idx = torch.nonzero(tokens[b] >= vocab.num_specials).flatten()
        k = int(round(0.15 * len(idx)))
        chosen[b, idx[torch.randperm(len(idx))[:k]]] = True
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_action_per_row(tokens, vocab):
    """One action draw per row: every chosen position of a row gets the same treatment."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_choice_per_column(tokens, vocab):
    """Chooses positions per column (the same positions in every row)."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(1, tokens.shape[1]) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_seed_inside(tokens, vocab):
    """torch.manual_seed(0) inside: the same mask on every call."""
    torch.manual_seed(0)
    return C_reference(tokens, vocab)


def W_no_unchanged(tokens, vocab):
    """80% mask, 20% random (forgets the unchanged 10%)."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_unchanged_ignored(tokens, vocab):
    """The unchanged 10% get label IGNORE."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen & (a < 0.9), tokens, IGNORE)


def W_float_labels(tokens, vocab):
    """Labels built with torch.full(..., -100.) are float."""
    inputs, labels = C_reference(tokens, vocab)
    out = torch.full(tokens.shape, -100.0)
    out[labels != IGNORE] = tokens[labels != IGNORE].float()
    return inputs, out


def W_one_random_token(tokens, vocab):
    """One random token (a scalar) for every random position."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rnd = int(torch.randint(vocab.num_specials, len(vocab), ()))
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_rate_of_all_positions(tokens, vocab):
    """Draws 15% of *all* positions, then drops the specials: with many specials the rate
    among ordinary tokens is right, but here it divides by the wrong count: it chooses
    0.15 * n / n_ordinary... (over-corrects): p = 0.15 * total / ordinary."""
    ordn = _ordinary(tokens, vocab)
    p = 0.15 * tokens.numel() / max(int(ordn.sum()), 1)
    chosen = ordn & (torch.rand(tokens.shape) < p)
    a = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def Q_random_never_same(tokens, vocab):
    """Random replacement forced to differ from the original: the 'random' 10% never keep the
    token (then the unchanged share is exactly 10%, not 10% + 10%/V); tiny, probably
    undetectable, listed as a probe."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    off = torch.randint(1, n_ord, tokens.shape)
    rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_single_draw(tokens, vocab):
    """One uniform draw per position: < 0.12 mask, < 0.135 random, < 0.15 keep (same joint
    distribution as choosing then splitting 80/10/10)."""
    u = torch.rand(tokens.shape, device=tokens.device)
    ordn = tokens >= vocab.num_specials
    chosen = ordn & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(ordn & (u < 0.12), torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(ordn & (u >= 0.12) & (u < 0.135), rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def W_int32_labels(tokens, vocab):
    """Labels built as int32 (cross_entropy needs int64)."""
    inputs, labels = C_reference(tokens, vocab)
    return inputs, labels.to(torch.int32)


def W_random_from_batch(tokens, vocab):
    """The random replacement is a token drawn from the batch (unigram), not uniform over the
    vocabulary."""
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    pool = tokens[tokens >= vocab.num_specials]
    rnd = pool[torch.randint(0, len(pool), tokens.shape)]
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


_GEN = torch.Generator().manual_seed(1234)


# Right in rounds 2 to 6; wrong since round 7: book.set_seed(s) twice must give the same masks
# (the exercise leaves the seeding to the caller), and a generator seeded at import ignores it.
def W_module_generator(tokens, vocab):
    """A module-level generator seeded once at import: fresh masks on every call, but not
    controlled by torch.manual_seed / book.set_seed."""
    g = _GEN
    chosen = _ordinary(tokens, vocab) & (torch.rand(tokens.shape, generator=g) < 0.15)
    a = torch.rand(tokens.shape, generator=g)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def Q_numpy_rng(tokens, vocab):
    """NumPy's global RNG for the draws (not torch's)."""
    import numpy as np
    chosen = _ordinary(tokens, vocab) & torch.from_numpy(np.random.rand(*tokens.shape) < 0.15)
    a = torch.from_numpy(np.random.rand(*tokens.shape))
    rnd = torch.from_numpy(np.random.randint(vocab.num_specials, len(vocab), tokens.shape)).to(tokens.dtype)
    inputs = torch.where(chosen & (a < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)
