"""Round 10 red team (writer C, issue 12), ch08_mlm: wrong (W_), right (C_) and odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round10/C/sols/ch08_mlm.py with the names W01_x written W_01_x.
Round 10 found three holes, all caught now by the 120,000-row call (formerly 40,000 rows):
W_01 (uniforms drawn in bfloat16: 15.19% chosen, 8.5 standard errors off there), W_18
(neighbours (2i, 2i + 1) share one random replacement: a test of the agreement of
neighbouring replacements) and W_22 (one draw per row shifted by the position: two
replacements in a row never agree; the agreement of pairs in one row is now tested on both
sides). W_13 returns int32 labels (its name says otherwise). No wrong one is accepted on
purpose (no A_). tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and
O_ entry (must pass)."""
# flake8: noqa
import torch
from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _finish(tokens, vocab, chosen, action, random_tokens):
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, random_tokens.to(tokens.dtype), inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def O_02_one_uniform(tokens, vocab):
    # one uniform per position: u < 0.15 chooses, and u / 0.15 splits 80/10/10
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, u / 0.15, rnd)


def O_03_draws_only_for_chosen(tokens, vocab):
    chosen = (tokens >= vocab.num_specials) & torch.bernoulli(
        torch.full(tokens.shape, 0.15)).bool()
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
    idx = chosen.nonzero(as_tuple=True)
    labels[idx] = tokens[idx]
    a = torch.rand(idx[0].numel())
    vals = tokens[idx].clone()
    vals[a < 0.8] = vocab.mask
    r = (a >= 0.8) & (a < 0.9)
    vals[r] = torch.randint(vocab.num_specials, len(vocab), (int(r.sum()),)).to(vals.dtype)
    inputs[idx] = vals
    return inputs, labels


def W_01_bfloat16_uniforms(tokens, vocab):
    # uniforms drawn in bfloat16 to save memory: only 8 bits, rates 0.1515 and 0.098
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, dtype=torch.bfloat16) < 0.15)
    action = torch.rand(tokens.shape, dtype=torch.bfloat16)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_02_chosen_shared_across_batch(tokens, vocab):
    # one draw per column, shared by every row
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(1, tokens.shape[1]) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_03_action_shared_across_batch(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1]).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_04_random_token_per_row(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand(
        tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_05_random_token_per_column(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand(
        tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_06_random_never_original(tokens, vocab):
    # resamples until the random token differs from the original
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


def W_07_randint_up_to_batch_max(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    hi = max(int(tokens.max()) + 1, vocab.num_specials + 1)
    rnd = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


_GEN = torch.Generator().manual_seed(1234)


def W_08_module_generator(tokens, vocab):
    # a private generator seeded once: draws anew, but ignores the caller's seed
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=_GEN) < 0.15)
    action = torch.rand(tokens.shape, generator=_GEN)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=_GEN)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_09_rate_per_row_rescaled(tokens, vocab):
    # 15% of every row's positions, concentrated on the ordinary ones
    ordinary = tokens >= vocab.num_specials
    frac = ordinary.float().mean(dim=1, keepdim=True).clamp(min=1e-9)
    chosen = ordinary & (torch.rand(tokens.shape) < (0.15 / frac).clamp(max=1))
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_10_view_flat(tokens, vocab):
    flat = tokens.view(-1)
    ordinary = flat >= vocab.num_specials
    chosen = ordinary & (torch.rand(flat.shape) < 0.15)
    action = torch.rand(flat.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), flat.shape)
    i, l = _finish(flat, vocab, chosen, action, rnd)
    return i.view(tokens.shape), l.view(tokens.shape)


def W_11_antithetic_pairs(tokens, vocab):
    # "variance reduction": the second half of each row uses 1 - u of the first half
    ordinary = tokens >= vocab.num_specials
    b, n = tokens.shape
    h = (n + 1) // 2
    u = torch.rand(b, h)
    u = torch.cat([u, 1 - u], dim=1)[:, :n]
    chosen = ordinary & ((u < 0.15) | (u > 0.85) & (torch.arange(n) < h)[None] & False
                         | (u < 0.15))
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_12_action_from_choice_uniform_wrong(tokens, vocab):
    # reuses the choice uniform without rescaling: chosen u < 0.15 is always < 0.8,
    # so every chosen token becomes [MASK]... unless rescaled by 1/0.15 ... learner used
    # u * 6 (thinking 1/0.15 ~ 6): split 90/0/10-ish
    u = torch.rand(tokens.shape)
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, u * 6, rnd)


def W_13_labels_share_inputs_storage(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs, labels = _finish(tokens, vocab, chosen, action, rnd)
    return inputs, labels.to(torch.int32)


def W_14_mask_not_special(tokens, vocab):
    # only [PAD], [CLS], [SEP] excluded; [MASK] and [UNK] can be chosen
    special = (tokens == vocab.pad) | (tokens == vocab.cls) | (tokens == vocab.sep)
    chosen = ~special & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_15_chosen_by_block(tokens, vocab):
    # whole-word-ish: pairs of neighbours chosen together (half the draws)
    b, n = tokens.shape
    u = torch.rand(b, (n + 1) // 2).repeat_interleave(2, dim=1)[:, :n]
    chosen = (tokens >= vocab.num_specials) & (u < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_16_action_per_row(tokens, vocab):
    # one 80/10/10 decision per row, applied to all its chosen positions
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_17_action_shared_by_pairs(tokens, vocab):
    # neighbouring positions (0,1), (2,3)... share their 80/10/10 decision
    b, n = tokens.shape
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(b, (n + 1) // 2).repeat_interleave(2, dim=1)[:, :n]
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_18_random_token_shared_by_pairs(tokens, vocab):
    b, n = tokens.shape
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (b, (n + 1) // 2))
    rnd = rnd.repeat_interleave(2, dim=1)[:, :n]
    return _finish(tokens, vocab, chosen, action, rnd)


def W_19_randint_high_off_by_one(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, max(len(vocab) - 1, vocab.num_specials + 1),
                        tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_20_choice_and_action_lagged(tokens, vocab):
    # the action of position j reuses the choice uniform of position j - 1 (rescaled):
    # per-position marginals right, but neighbours' decisions depend on each other
    b, n = tokens.shape
    u = torch.rand(b, n + 1)
    chosen = (tokens >= vocab.num_specials) & (u[:, 1:] < 0.15)
    action = u[:, :-1]
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_21_replacement_by_token_map(tokens, vocab):
    # one random permutation of the ordinary ids per call: the same original token always
    # gets the same replacement
    ns, V = vocab.num_specials, len(vocab)
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    perm = torch.randperm(V - ns) + ns
    table = torch.cat([torch.arange(ns), perm])
    rnd = table[tokens]
    return _finish(tokens, vocab, chosen, action, rnd)


def W_22_replacement_row_offset_plus_position(tokens, vocab):
    ns, V = vocab.num_specials, len(vocab)
    b, n = tokens.shape
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    base = torch.randint(0, V - ns, (b, 1))
    rnd = (base + torch.arange(n)[None, :]) % (V - ns) + ns
    return _finish(tokens, vocab, chosen, action, rnd)
