"""Round 11 red team (writer C, issue 12), ch08_mlm: wrong (W_), right (C_) and odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round11/C/sols/ch08_mlm.py with the names W01_x written W_01_x.
Round 11 found three holes, all closed now. W_27 took the 80/10/10 decision from the choosing
uniform of the row above (u.roll(1, 0)): a chosen position under a chosen one was always
[MASK] (5,146 such positions, 100.0%, 35.9 standard errors from 80%); the [MASK] share is
now also tested among the chosen positions whose neighbour in the same column of the row
above (below) is chosen, besides the left and right neighbours. W_28 made the random token
from the left neighbour's choosing uniform: when that neighbour was chosen, the token was
always among the first 9 of the 60 ordinary ids (4,852 of 4,852 on the 120,000-row call); the
share of the first 9 and of the last 9 ids is now tested among the replacements whose left,
right, upper or lower neighbour is chosen. W_26 returned `tokens` itself as inputs when
nothing was chosen; a batch of special tokens only is now given, and inputs or labels that
are tokens or a view of it are refused on every call. A_07 (uniforms drawn in float16) is
accepted on purpose: float16 rand chooses with probability 0.15029 and splits at 0.79970 and
0.89989 (writer's measurement), 1.3 standard errors from 15% on the 120,000-row call (one
standard error 0.022 points); telling it apart at 5.5 standard errors would need about 18
times as many positions (48 million), and the uniforms' dtype cannot be seen from outside.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import torch
from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _finish(tokens, vocab, chosen, action, rnd):
    to_mask = chosen & (action < 0.8)
    to_rand = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_rand, rnd, inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


def C_01_plain(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def O_02_bernoulli_nested(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    a = torch.rand(tokens.shape)
    to_rand = chosen & (a < 0.1)                      # 10% random first
    to_mask = chosen & (a >= 0.2)                     # 80% mask, [0.1, 0.2) unchanged
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = tokens.clone()
    inputs[to_mask] = vocab.mask
    inputs[to_rand] = rnd[to_rand]
    labels = torch.full_like(tokens, IGNORE)
    labels[chosen] = tokens[chosen]
    return inputs, labels


def O_03_draw_only_for_chosen(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    idx = chosen.nonzero(as_tuple=True)
    k = idx[0].numel()
    a = torch.rand(k)
    r = torch.randint(vocab.num_specials, len(vocab), (k,))
    inputs = tokens.clone()
    vals = tokens[idx].clone()
    vals = torch.where(a < 0.8, torch.full_like(vals, vocab.mask), vals)
    vals = torch.where((a >= 0.8) & (a < 0.9), r, vals)
    inputs[idx] = vals
    labels = torch.full_like(tokens, IGNORE)
    labels[idx] = tokens[idx]
    return inputs, labels


def W_01_same_columns_all_rows(tokens, vocab):
    # one draw per column, shared by every row
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape[1]) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_02_random_token_per_row(tokens, vocab):
    # one random replacement token per row, used at all its random positions
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (tokens.shape[0], 1)).expand_as(tokens)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_03_random_token_per_column(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), (1, tokens.shape[1])).expand_as(tokens)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_04_unk_choosable(tokens, vocab):
    # excludes [PAD], [CLS], [SEP], [MASK] but forgets [UNK]
    ordinary = ((tokens != vocab.pad) & (tokens != vocab.cls) & (tokens != vocab.sep)
                & (tokens != vocab.mask))
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_05_random_excludes_last(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab) - 1, tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_06_random_never_original(tokens, vocab):
    # the random token is shifted when it equals the original (never the original)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    if n_ord > 1:
        off = torch.randint(1, n_ord, tokens.shape)
        rnd = (tokens - vocab.num_specials + off) % n_ord + vocab.num_specials
    else:
        rnd = tokens.clone()
    return _finish(tokens, vocab, chosen, action, rnd)


def A_07_float16_uniforms(tokens, vocab):
    # Accepted on purpose (A_): float16 uniforms choose with probability 0.15029, 1.3
    # standard errors from 15% on the checker's largest call; see the docstring.
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, dtype=torch.float16) < 0.15)
    action = torch.rand(tokens.shape, dtype=torch.float16)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action.float(), rnd)


def W_08_action_per_row(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape[0], 1).expand_as(tokens)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_09_ordinary_gt(tokens, vocab):
    ordinary = tokens > vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_10_random_from_specials_too(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.mask, len(vocab), tokens.shape)  # [MASK] can come out too
    return _finish(tokens, vocab, chosen, action, rnd)


def O_11_action_from_choice_uniform(tokens, vocab):
    # reuses the choice uniform for the action: u < 0.15 chosen, u/0.15 split
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape)
    chosen = ordinary & (u < 0.15)
    action = u / 0.15
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def O_12_random_from_action_uniform(tokens, vocab):
    # random token derived from the action uniform (dependent on the action draw)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    frac = ((action - 0.8) / 0.1).clamp(0, 0.999999)
    rnd = vocab.num_specials + (frac * n_ord).long()
    return _finish(tokens, vocab, chosen, action, rnd)


def W_13_random_per_position_pair(tokens, vocab):
    # random tokens drawn for half the row and repeated (memory-saving)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    b, n = tokens.shape
    half = torch.randint(vocab.num_specials, len(vocab), (b, (n + 1) // 2))
    rnd = half.repeat_interleave(2, dim=1)[:, :n]
    return _finish(tokens, vocab, chosen, action, rnd)


def W_14_cumulative_thresholds_off(tokens, vocab):
    # random for 0.8 <= a <= 0.9 (closed), negligible; and mask for a < 0.8; but
    # "unchanged" positions get label IGNORE (only changed tokens labelled)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs, labels = _finish(tokens, vocab, chosen, action, rnd)
    labels = torch.where(chosen & (action >= 0.9), torch.full_like(labels, IGNORE), labels)
    return inputs, labels


def W_15_labels_int32(tokens, vocab):
    inputs, labels = C_01_plain(tokens, vocab)
    return inputs, labels.to(torch.int32)


def O_16_uniforms_drawn_transposed(tokens, vocab):
    # draws uniforms as (n, batch) and transposes: right marginals, but for a
    # non-contiguous input works the same; fine... except it reads ordinary from tokens.T
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape[1], tokens.shape[0]).T
    chosen = ordinary & (u < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_17_numpy_rng_random(tokens, vocab):
    # random tokens from numpy's generator with a fixed seed made once
    import numpy as np
    global _RS
    try:
        _RS
    except NameError:
        _RS = np.random.RandomState(torch.initial_seed() % 2**32)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.from_numpy(_RS.randint(vocab.num_specials, len(vocab), tuple(tokens.shape)))
    return _finish(tokens, vocab, chosen, action, rnd.to(tokens.dtype))


def W_18_random_from_batch_ids(tokens, vocab):
    # random token drawn uniformly from the ordinary ids that occur in the batch
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    ids = tokens[ordinary].unique()
    if ids.numel() == 0:
        ids = torch.arange(vocab.num_specials, len(vocab))
    rnd = ids[torch.randint(0, ids.numel(), tokens.shape)]
    return _finish(tokens, vocab, chosen, action, rnd)


def W_19_mask_choosable(tokens, vocab):
    # ordinary = ids after [SEP]: [MASK] (id 4) counts as ordinary
    ordinary = tokens > vocab.sep
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_20_flat_view(tokens, vocab):
    flat = tokens.view(-1)
    inputs, labels = C_01_plain(flat[None, :], vocab)
    return inputs.view(tokens.shape), labels.view(tokens.shape)


def W_21_at_least_one_per_row(tokens, vocab):
    # like d2l: every row with an ordinary token predicts at least one
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    none = (chosen.sum(1) == 0) & (ordinary.sum(1) > 0)
    if none.any():
        score = torch.rand(tokens.shape).masked_fill(~ordinary, -1.0)
        first = score.argmax(1)
        rows = none.nonzero(as_tuple=True)[0]
        chosen[rows, first[rows]] = True
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def O_22_integer_percent(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.randint(0, 100, tokens.shape) < 15)
    a = torch.randint(0, 10, tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = torch.where(chosen & (a < 8), vocab.mask, tokens)
    inputs = torch.where(chosen & (a == 8), rnd, inputs)
    return inputs, torch.where(chosen, tokens, IGNORE)


def W_23_action_per_column(tokens, vocab):
    # one 80/10/10 decision per column, shared by all rows
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(1, tokens.shape[1]).expand_as(tokens)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_25_fork_rng(tokens, vocab):
    # "leave the caller's generator alone": the global state is restored after drawing
    with torch.random.fork_rng():
        return C_01_plain(tokens, vocab)


def W_26_return_tokens_when_none(tokens, vocab):
    # fast path: nothing chosen -> hand back tokens itself
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    if not chosen.any():
        return tokens, torch.full_like(tokens, IGNORE)
    action = torch.rand(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_27_choice_uniform_reused_next_row(tokens, vocab):
    # the action for row i is the choice uniform of row i - 1 (saves a draw)
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape)
    chosen = ordinary & (u < 0.15)
    action = u.roll(1, dims=0)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rnd)


def W_28_random_from_neighbour_uniform(tokens, vocab):
    # random token made from the left neighbour's choice uniform (saves a draw)
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape)
    chosen = ordinary & (u < 0.15)
    action = torch.rand(tokens.shape)
    n_ord = len(vocab) - vocab.num_specials
    rnd = vocab.num_specials + (u.roll(1, dims=1) * n_ord).long().clamp(max=n_ord - 1)
    return _finish(tokens, vocab, chosen, action, rnd)
