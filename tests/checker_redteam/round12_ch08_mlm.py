"""Round 12 red team (writer C, issue 12), ch08_mlm: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round12/C/sols/ch08_mlm.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); S_07 (five specials and [MASK] = 4 hard-coded, true of every book.bert.Vocab)
is not tested. Accepted in round 12, now rejected: W_23 (randint(0, 100) % 60: ids 0..39
twice as likely) and W_24 (floor(u ** 0.85 * k): skewed to high ids) passed the bounds on
each id's count; the replacements of the 120,000-row call that differ from their original
are now tested against uniform on the other 59 ids (chi-square, 59 degrees of freedom, cut
at its 1e-12 tail, 170: W_23 about 3,200, W_24 about 950), and a last call with 200 ordinary
ids must draw every id (W_23 never draws 100 of them). Message: W_21 (u ** 0.75) was told
its replacements come from the row; it is now told they are not uniform."""
# flake8: noqa
import numpy as np
import torch
from book.bert import IGNORE

CHECK = "check_mlm_masking"


def C_01_reference_like(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd.to(tokens.dtype),
                         inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_02_one_uniform_split(tokens, vocab):
    """One uniform per position: chosen when u < 0.15; u/0.15 is again uniform and splits."""
    u = torch.rand(tokens.shape, device=tokens.device)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    inputs = tokens.clone()
    to_mask = chosen & (u < 0.12)
    to_rand = chosen & (u >= 0.12) & (u < 0.135)
    inputs[to_mask] = vocab.mask
    n = int(to_rand.sum())
    inputs[to_rand] = torch.randint(vocab.num_specials, len(vocab), (n,),
                                    device=tokens.device).to(tokens.dtype)
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def O_03_numpy_global_rng(tokens, vocab):
    """NumPy's global generator (book.set_seed seeds it too)."""
    shape = tuple(tokens.shape)
    t = tokens.cpu().numpy()
    chosen = (t >= vocab.num_specials) & (np.random.random(shape) < 0.15)
    a = np.random.random(shape)
    rnd = np.random.randint(vocab.num_specials, len(vocab), shape)
    inp = np.where(chosen & (a < 0.8), vocab.mask, t)
    inp = np.where(chosen & (a >= 0.8) & (a < 0.9), rnd, inp).astype(t.dtype)
    lab = np.where(chosen, t, IGNORE).astype(t.dtype)
    return torch.from_numpy(inp).to(tokens.device), torch.from_numpy(lab).to(tokens.device)


def W_01_action_per_column(tokens, vocab):
    """The 80/10/10 draw is made once per column and shared by every row."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[1])                       # (n,): broadcast over rows
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_02_random_token_per_column(tokens, vocab):
    """The random replacement token is drawn once per column."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[1],))
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_03_random_token_per_row(tokens, vocab):
    """One random replacement token per row (shared by the row's replaced positions)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1))
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_04_randint_high_exclusive_off_by_one(tokens, vocab):
    """randint(low, len(vocab) - 1): thinks high is inclusive, never draws the last id."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(len(vocab) - 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_05_random_excludes_original(tokens, vocab):
    """Redraws the random token when it equals the original (the text includes it)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    if n_ord > 1:
        off = torch.randint(1, n_ord, tokens.shape)
        rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    else:
        rnd = tokens
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_06_random_token_from_first_ordinary_plus_one(tokens, vocab):
    """randint(num_specials + 1, len(vocab)): never the first (the most frequent) id."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    lo = min(vocab.num_specials + 1, len(vocab) - 1)
    rnd = torch.randint(lo, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def S_07_hardcoded_specials(tokens, vocab):
    """Special ids hard-coded as 0..4 and [MASK] as 4 (right only for this Vocab)."""
    ordinary = tokens >= 5
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(5, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), 4, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_08_mask_allowed_to_be_chosen(tokens, vocab):
    """Excludes [PAD], [CLS], [SEP] but not [UNK] or [MASK]."""
    special = (tokens == vocab.pad) | (tokens == vocab.cls) | (tokens == vocab.sep)
    chosen = ~special & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_09_labels_int32(tokens, vocab):
    """labels built with torch.full(..., IGNORE, dtype=torch.int32)."""
    inputs, labels = C_01_reference_like(tokens, vocab)
    return inputs, labels.to(torch.int32)


def O_10_inputs_dtype_from_randint(tokens, vocab):
    """The random ids (int64) promote the inputs: int32 tokens come back as int64."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), torch.tensor(vocab.mask), tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    labels = torch.where(chosen, tokens.long(), torch.tensor(IGNORE))
    return inputs, labels


def O_11_action_draw_only_over_chosen_col_order(tokens, vocab):
    """Draws actions for the chosen positions only, but assigns them in column-major
    order while the mask is read row-major (still one draw per chosen position)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    n = int(chosen.sum())
    a = torch.rand(n)
    action = torch.ones(tokens.shape)
    action.T[chosen.T] = a   # fills the chosen positions in column order
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_12_rate_over_all_positions(tokens, vocab):
    """Scales the rate so that 15% of ALL positions (specials included) get chosen."""
    ordinary = tokens >= vocab.num_specials
    frac = ordinary.float().mean().clamp(min=1e-6)
    p = min(0.15 / float(frac), 1.0)
    chosen = ordinary & (torch.rand(tokens.shape) < p)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_13_action_draw_reused_for_random_id(tokens, vocab):
    """The random id is derived from the action draw: id = specials + floor(frac * V_ord),
    with frac = (action - 0.8) / 0.1, so the id is tied to the same uniform."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    frac = ((action - 0.8) / 0.1).clamp(0, 1 - 1e-7)
    rnd = vocab.num_specials + (frac * n_ord).long()
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_14_rows_of_ties_last_dim_view(tokens, vocab):
    """Flattens with .view(-1): fails on a non-contiguous slice."""
    flat = tokens.view(-1)
    i, l = C_01_reference_like(flat[None], vocab)
    return i.view(tokens.shape), l.view(tokens.shape)


def W_15_uniform_over_batch_tokens_vocab(tokens, vocab):
    """Random ids uniform over the ordinary ids that occur in the batch."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    ids = torch.unique(tokens[ordinary])
    if ids.numel() == 0:
        ids = torch.arange(vocab.num_specials, len(vocab))
    rnd = ids[torch.randint(0, ids.numel(), tokens.shape)]
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_16_random_ids_round_robin(tokens, vocab):
    """Random ids from a shuffled list of the ordinary ids, cycled: every id equally often
    (a 'fair' spread), but two replacements within len(vocab) positions never agree."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    to_rand = chosen & (action >= 0.8) & (action < 0.9)
    n_ord = len(vocab) - vocab.num_specials
    n = int(to_rand.sum())
    perm = torch.randperm(n_ord) + vocab.num_specials
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs[to_rand] = perm[torch.arange(n) % n_ord].to(tokens.dtype)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_17_action_per_row(tokens, vocab):
    """The 80/10/10 draw is made once per row."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_18_choice_per_pair(tokens, vocab):
    """One choice draw per pair of neighbouring positions (whole-word style)."""
    b, n = tokens.shape
    u = torch.rand(b, (n + 1) // 2).repeat_interleave(2, dim=1)[:, :n]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_19_random_ids_no_repeat_in_row(tokens, vocab):
    """Random ids drawn without replacement within each row (randperm per row)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    b, n = tokens.shape
    if n_ord >= n:
        rnd = torch.argsort(torch.rand(b, n_ord), dim=1)[:, :n] + vocab.num_specials
    else:
        rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd.to(tokens.dtype),
                         inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_20_random_id_round_not_floor(tokens, vocab):
    """id = specials + round(u * (V_ord - 1)): the first and last ids get half the weight
    of the others (round instead of floor)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    rnd = vocab.num_specials + (torch.rand(tokens.shape) * (n_ord - 1)).round().long()
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_21_random_id_skewed_sqrt(tokens, vocab):
    """id = specials + floor(sqrt(u) * V_ord): a 'random' id skewed towards rare ids
    (density 2x at the top, near 0 at the bottom)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    u = torch.rand(tokens.shape) ** 0.75
    rnd = vocab.num_specials + (u * n_ord).long().clamp(max=n_ord - 1)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def O_22_python_random_per_position(tokens, vocab):
    """Python's global random module (seeded by book.set_seed) for the random ids."""
    import random
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    to_rand = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    n = int(to_rand.sum())
    ids = [random.randrange(vocab.num_specials, len(vocab)) for _ in range(n)]
    inputs[to_rand] = torch.tensor(ids, dtype=tokens.dtype)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_23_random_id_modulo_bias(tokens, vocab):
    """id = specials + randint(0, 100) % V_ord: with 60 ordinary ids, ids 0..39 are twice
    as likely as ids 40..59 (modulo bias); with more than 100 ordinary ids the top ones
    never come."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    rnd = vocab.num_specials + torch.randint(0, 100, tokens.shape) % n_ord
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_24_random_id_mild_skew(tokens, vocab):
    """id = specials + floor(u ** 0.85 * V_ord): skewed towards high ids (up to 1.5x)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    u = torch.rand(tokens.shape) ** 0.85
    rnd = vocab.num_specials + (u * n_ord).long().clamp(max=n_ord - 1)
    inputs = torch.where(chosen & (action < 0.8), vocab.mask, tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)
