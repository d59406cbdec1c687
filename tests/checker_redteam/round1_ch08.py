"""Round 1 red team, chapter 8: check_mlm_masking (8.1) and check_bert_param_count (8.2).

Entries: (checker_name, short_description, kind, callable). From the exercise text:
mask_tokens(tokens, vocab) chooses each ordinary position independently with p = 0.15;
of those 80% -> [MASK], 10% -> a random ordinary token, 10% unchanged; returns
(inputs, labels) with labels = original token at chosen positions, IGNORE (-100)
elsewhere; tokens unchanged. bert_param_count(vocab_size, num_hiddens, ffn_num_hiddens,
num_blks, max_len) counts book.bert.BERTModel's parameters by formula.
"""
import random

import numpy as np
import torch

from book.bert import IGNORE

MLM = "check_mlm_masking"
CNT = "check_bert_param_count"


def _finish(tokens, vocab, chosen, action):
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    random_tokens = torch.randint(vocab.num_specials, len(vocab), tokens.shape,
                                  device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, random_tokens, inputs)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    return inputs, labels


# ------------------------------------------------------------------ 8.1 masking: wrong

def mlm_per_row(tokens, vocab):
    """Kind 4: one draw per row: a whole sequence is chosen (15% of rows) or not."""
    ordinary = tokens >= vocab.num_specials
    row = torch.rand(tokens.shape[0], 1, device=tokens.device) < 0.15
    chosen = ordinary & row
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_fixed_count(tokens, vocab):
    """Kind 4: exactly round(0.15 * ordinary count) positions per row (BERT's and
    d2l's implementation): no spread of counts across rows."""
    ordinary = tokens >= vocab.num_specials
    chosen = torch.zeros_like(ordinary)
    for r in range(tokens.shape[0]):
        idx = ordinary[r].nonzero().flatten()
        k = round(0.15 * len(idx))
        pick = idx[torch.randperm(len(idx), device=tokens.device)[:k]]
        chosen[r, pick] = True
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_per_column(tokens, vocab):
    """Kind 4: one draw per position index, shared by every row."""
    ordinary = tokens >= vocab.num_specials
    col = torch.rand(1, tokens.shape[1], device=tokens.device) < 0.15
    return _finish(tokens, vocab, ordinary & col,
                   torch.rand(tokens.shape, device=tokens.device))


def mlm_seed_inside(tokens, vocab):
    """Kind 4: torch.manual_seed(0) inside 'for reproducibility': the same masks on
    every call (and the global RNG is reset)."""
    torch.manual_seed(0)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15).to(tokens.device)
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape).to(tokens.device))


def mlm_generator_inside(tokens, vocab):
    """Kind 4: a private torch.Generator seeded with 0 at every call."""
    g = torch.Generator().manual_seed(0)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15).to(tokens.device)
    action = torch.rand(tokens.shape, generator=g).to(tokens.device)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd.to(tokens.device), inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_sequential_random(tokens, vocab):
    """Kind 4/5: a second independent draw for 'random' among the non-masked chosen
    ones with p = 0.1 (instead of 0.5): 2% random, 18% unchanged."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    to_mask = chosen & (torch.rand(tokens.shape, device=tokens.device) < 0.8)
    to_random = chosen & ~to_mask & (torch.rand(tokens.shape, device=tokens.device) < 0.1)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_labels_changed_only(tokens, vocab):
    """Kind 5: labels only where the input changed (the 10% kept tokens get IGNORE):
    the label rate is 13.5%, not 15%."""
    inputs, labels = _finish(tokens, vocab, (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15),
        torch.rand(tokens.shape, device=tokens.device))
    labels = torch.where(inputs != tokens, labels, torch.full_like(labels, IGNORE))
    return inputs, labels


def mlm_specials_chosen(tokens, vocab):
    """Kind 5: chooses among all positions, special tokens included."""
    chosen = torch.rand(tokens.shape, device=tokens.device) < 0.15
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_random_any_id(tokens, vocab):
    """Kind 5: the random token may be a special one (randint(0, len(vocab)))."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(0, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_random_off_by_one(tokens, vocab):
    """Kind 5: randint(num_specials, len(vocab) - 1): the last ordinary token is never
    drawn."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(vocab.num_specials, len(vocab) - 1, tokens.shape,
                        device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_one_random_token(tokens, vocab):
    """Kind 4: one random token for the whole batch (a scalar randint)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = int(torch.randint(vocab.num_specials, len(vocab), ()))
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, torch.full_like(tokens, rnd), inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_inplace(tokens, vocab):
    """Kind 5: writes into tokens and returns it."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, device=tokens.device) < 0.15)
    labels = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    action = torch.rand(tokens.shape, device=tokens.device)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    tokens[to_random] = rnd[to_random]
    tokens[chosen & (action < 0.8)] = vocab.mask
    return tokens, labels


def mlm_labels_everywhere(tokens, vocab):
    """Kind 5: labels = tokens everywhere (no IGNORE)."""
    inputs, _ = _finish(tokens, vocab, (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15),
        torch.rand(tokens.shape, device=tokens.device))
    return inputs, tokens.clone()


def mlm_labels_new_input(tokens, vocab):
    """Kind 5: labels hold the new input ([MASK] id etc.), not the original token."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    inputs, _ = _finish(tokens, vocab, chosen, torch.rand(tokens.shape,
                                                          device=tokens.device))
    return inputs, torch.where(chosen, inputs, torch.full_like(inputs, IGNORE))


def mlm_numpy(tokens, vocab):
    """Kind 6: numpy arrays out."""
    t = tokens.cpu().numpy()
    rng = np.random.default_rng()
    chosen = (t >= vocab.num_specials) & (rng.random(t.shape) < 0.15)
    action = rng.random(t.shape)
    inputs = np.where(chosen & (action < 0.8), vocab.mask, t)
    inputs = np.where(chosen & (action >= 0.8) & (action < 0.9),
                      rng.integers(vocab.num_specials, len(vocab), t.shape), inputs)
    return inputs, np.where(chosen, t, IGNORE)


def mlm_float_labels(tokens, vocab):
    """Kind 6: labels as float (torch.full with -100.0)."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    inputs, _ = _finish(tokens, vocab, chosen, torch.rand(tokens.shape,
                                                          device=tokens.device))
    labels = torch.where(chosen, tokens.float(), torch.full(tokens.shape, -100.0,
                                                            device=tokens.device))
    return inputs, labels


def mlm_rate_012(tokens, vocab):
    """Kind 4: p = 0.12 ('15% times 80%'), a few points off."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.12)
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_rate_016(tokens, vocab):
    """Kind 4: p = 0.16 (a typo), 1 point off."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.16)
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_split_85_75(tokens, vocab):
    """Kind 4: split 85 / 7.5 / 7.5 (action < 0.85, < 0.925): a few points off."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.85)
    to_random = chosen & (action >= 0.85) & (action < 0.925)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_split_82_9_9(tokens, vocab):
    """Kind 4: split 82 / 9 / 9 (action < 0.82, < 0.91): two points off, about 6
    standard errors on 128,000 positions."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.82)
    to_random = chosen & (action >= 0.82) & (action < 0.91)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_random_half_vocab(tokens, vocab):
    """Kind 5: random replacements drawn from the first half of the ordinary ids only
    (randint(num_specials, len(vocab) // 2))."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    to_mask = chosen & (action < 0.8)
    to_random = chosen & (action >= 0.8) & (action < 0.9)
    rnd = torch.randint(vocab.num_specials, len(vocab) // 2, tokens.shape,
                        device=tokens.device)
    inputs = torch.where(to_mask, torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(to_random, rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_pairs_correlated(tokens, vocab):
    """Kind 4: draws per pair of neighbouring positions (whole-word style): the right
    rate, but positions 2j and 2j+1 are chosen together."""
    b, n = tokens.shape
    pair = torch.rand(b, (n + 1) // 2, device=tokens.device) < 0.15
    chosen = pair.repeat_interleave(2, dim=1)[:, :n] & (tokens >= vocab.num_specials)
    return _finish(tokens, vocab, chosen, torch.rand(tokens.shape, device=tokens.device))


def mlm_action_per_row(tokens, vocab):
    """Kind 4: the 80/10/10 decision is drawn once per row."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape[0], 1, device=tokens.device).expand(tokens.shape)
    return _finish(tokens, vocab, chosen, action)


# ------------------------------------------------------------------ 8.1 masking: right

def mlm_single_uniform(tokens, vocab):
    """Right: one uniform per position for both decisions (r < .12 mask, < .135
    random, < .15 keep)."""
    r = torch.rand(tokens.shape, device=tokens.device)
    chosen = (tokens >= vocab.num_specials) & (r < 0.15)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = torch.where(chosen & (r < 0.12), torch.full_like(tokens, vocab.mask), tokens)
    inputs = torch.where(chosen & (r >= 0.12) & (r < 0.135), rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


def mlm_python_random(tokens, vocab):
    """Right: a Python loop with the random module (not seeded by torch)."""
    inputs, labels = tokens.clone(), torch.full_like(tokens, IGNORE)
    flat_t, flat_i, flat_l = tokens.reshape(-1).tolist(), [], []
    for t in flat_t:
        if t >= vocab.num_specials and random.random() < 0.15:
            flat_l.append(t)
            r = random.random()
            if r < 0.8:
                flat_i.append(vocab.mask)
            elif r < 0.9:
                flat_i.append(random.randrange(vocab.num_specials, len(vocab)))
            else:
                flat_i.append(t)
        else:
            flat_l.append(IGNORE)
            flat_i.append(t)
    inputs = torch.tensor(flat_i, dtype=tokens.dtype).reshape(tokens.shape)
    labels = torch.tensor(flat_l, dtype=tokens.dtype).reshape(tokens.shape)
    return inputs.to(tokens.device), labels.to(tokens.device)


def mlm_bernoulli_multinomial(tokens, vocab):
    """Right: torch.bernoulli for the choice, torch.multinomial for 80/10/10."""
    p = torch.full(tokens.shape, 0.15, device=tokens.device)
    chosen = torch.bernoulli(p).bool() & (tokens >= vocab.num_specials)
    probs = torch.tensor([0.8, 0.1, 0.1], device=tokens.device)
    action = torch.multinomial(probs, tokens.numel(), replacement=True).reshape(tokens.shape)
    rnd = torch.randint(vocab.num_specials, len(vocab), tokens.shape, device=tokens.device)
    inputs = tokens.clone()
    inputs[chosen & (action == 0)] = vocab.mask
    sel = chosen & (action == 1)
    inputs[sel] = rnd[sel]
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def mlm_random_not_original(tokens, vocab):
    """Right (a common variant): the random token is drawn until it differs from the
    original one."""
    chosen = (tokens >= vocab.num_specials) & (
        torch.rand(tokens.shape, device=tokens.device) < 0.15)
    action = torch.rand(tokens.shape, device=tokens.device)
    n_ord = len(vocab) - vocab.num_specials
    offset = torch.randint(1, n_ord, tokens.shape, device=tokens.device)
    rnd = (tokens - vocab.num_specials + offset) % n_ord + vocab.num_specials
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(tokens, vocab.mask),
                         tokens)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), rnd, inputs)
    return inputs, torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))


# ------------------------------------------------------------ 8.2 param count: wrong

def _parts(V, H, F, L, P, *, emb_ln=True, pos=True, seg=True, att_bias=True,
           ffn_bias=True, block_ln=True, pooler=True, mlm_ln=True, mlm_hidden=True,
           mlm_out_bias=True, tied=False, nsp_bias=True, ln=2):
    embeddings = V * H + (2 * H if seg else 0) + (P * H if pos else 0) + \
        (ln * H if emb_ln else 0)
    block = 4 * (H * H + (H if att_bias else 0)) + (H * F + F) + (F * H + H) \
        if ffn_bias else 4 * (H * H + (H if att_bias else 0)) + H * F + F * H
    block += 2 * ln * H if block_ln else 0
    pool = H * H + H if pooler else 0
    mlm = ((H * H + H) if mlm_hidden else 0) + (ln * H if mlm_ln else 0) + \
        (0 if tied else H * V) + (V if mlm_out_bias else 0)
    nsp = 2 * H + (2 if nsp_bias else 0)
    return embeddings + L * block + pool + mlm + nsp


def count_no_mlm_ln(V, H, F, L, P):
    """Kind 5: forgets the LayerNorm inside the MLM head."""
    return _parts(V, H, F, L, P, mlm_ln=False)


def count_no_emb_ln(V, H, F, L, P):
    """Kind 5: forgets the embeddings' LayerNorm (d2l's BERT has none)."""
    return _parts(V, H, F, L, P, emb_ln=False)


def count_tied(V, H, F, L, P):
    """Kind 5: counts the MLM output matrix as tied to the token embeddings."""
    return _parts(V, H, F, L, P, tied=True)


def count_no_att_bias(V, H, F, L, P):
    """Kind 5: attention projections without biases (the chapter 7 default)."""
    return _parts(V, H, F, L, P, att_bias=False)


def count_no_pooler(V, H, F, L, P):
    """Kind 5: forgets the pooler."""
    return _parts(V, H, F, L, P, pooler=False)


def count_no_nsp_bias(V, H, F, L, P):
    """Kind 5: NSP head 2H, no bias."""
    return _parts(V, H, F, L, P, nsp_bias=False)


def count_no_position(V, H, F, L, P):
    """Kind 5: no position table (thinks BERT uses the fixed sinusoid)."""
    return _parts(V, H, F, L, P, pos=False)


def count_no_mlm_out_bias(V, H, F, L, P):
    """Kind 5: the MLM output layer without its bias."""
    return _parts(V, H, F, L, P, mlm_out_bias=False)


def count_no_ffn_bias(V, H, F, L, P):
    """Kind 5: the FFN without biases."""
    return _parts(V, H, F, L, P, ffn_bias=False)


def count_ln_one_per_feature(V, H, F, L, P):
    """Kind 5: a LayerNorm counted as H parameters (scale only)."""
    return _parts(V, H, F, L, P, ln=1)


def count_ffn_4h(V, H, F, L, P):
    """Kind 3: uses 4 H instead of ffn_num_hiddens (right whenever F == 4 H)."""
    return _parts(V, H, 4 * H, L, P)


def count_max_len_512(V, H, F, L, P):
    """Kind 3: hard-codes max_len = 512 (right for BERT-base's 512 only)."""
    return _parts(V, H, F, L, 512)


def count_no_mlm_hidden(V, H, F, L, P):
    """Kind 5: the MLM head as LayerNorm + output layer only (no hidden Linear)."""
    return _parts(V, H, F, L, P, mlm_hidden=False)


def count_tuple(V, H, F, L, P):
    """Kind 6: returns (total, breakdown dict)."""
    return _parts(V, H, F, L, P), {"total": _parts(V, H, F, L, P)}


def count_segment_max_len(V, H, F, L, P):
    """Kind 5: segment embeddings sized max_len x H (confused with positions)."""
    return _parts(V, H, F, L, P) - 2 * H + P * H


def count_builds_model(V, H, F, L, P):
    """Kind 5: builds the model on the meta device and counts (forbidden: 'do not
    build the model')."""
    from book.bert import BERTModel
    with torch.device("meta"):
        model = BERTModel(V, H, F, 1, L, 0.0, max_len=P)
    return sum(p.numel() for p in model.parameters())


def count_one_block_ln(V, H, F, L, P):
    """Kind 5: one LayerNorm per block instead of two."""
    return _parts(V, H, F, L, P) - L * 2 * H


def count_none(V, H, F, L, P):
    """Kind 6: prints the count instead of returning it."""
    print(_parts(V, H, F, L, P))


def count_string(V, H, F, L, P):
    """Kind 6: returns a formatted string '110,106,428'."""
    return f"{_parts(V, H, F, L, P):,}"


# ------------------------------------------------------------ 8.2 param count: right

def count_numpy_int(V, H, F, L, P):
    """Right: numpy arithmetic, returns numpy.int64."""
    return np.int64(_parts(V, H, F, L, P))


def count_float_exact(V, H, F, L, P):
    """Right in value: a float with an integer value (e.g. from a / somewhere)."""
    return float(_parts(V, H, F, L, P))


def count_tensor(V, H, F, L, P):
    """Right in value: a 0-d int64 tensor."""
    return torch.tensor(_parts(V, H, F, L, P))


def count_reference_layout(V, H, F, L, P):
    """Right: a different grouping of the same terms."""
    linear = lambda a, b: a * b + b  # noqa: E731
    norm = 2 * H
    emb = (V + 2 + P) * H + norm
    blk = 4 * linear(H, H) + linear(H, F) + linear(F, H) + 2 * norm
    heads = linear(H, H) + linear(H, H) + norm + linear(H, V) + linear(H, 2)
    return emb + L * blk + heads


WRONG = [
    (MLM, "one draw per row", 4, mlm_per_row),
    (MLM, "exactly round(15%) per row (BERT/d2l style)", 4, mlm_fixed_count),
    (MLM, "one draw per column, shared by rows", 4, mlm_per_column),
    (MLM, "torch.manual_seed(0) inside", 4, mlm_seed_inside),
    (MLM, "private generator seeded 0 inside", 4, mlm_generator_inside),
    (MLM, "sequential draws: 2% random, 18% kept", 4, mlm_sequential_random),
    (MLM, "labels only where the input changed", 5, mlm_labels_changed_only),
    (MLM, "special tokens can be chosen", 5, mlm_specials_chosen),
    (MLM, "random token may be special", 5, mlm_random_any_id),
    (MLM, "random token never the last id", 5, mlm_random_off_by_one),
    (MLM, "one random token for the whole batch", 4, mlm_one_random_token),
    (MLM, "writes into tokens", 5, mlm_inplace),
    (MLM, "labels everywhere", 5, mlm_labels_everywhere),
    (MLM, "labels hold the new input", 5, mlm_labels_new_input),
    (MLM, "numpy arrays out", 6, mlm_numpy),
    (MLM, "float labels", 6, mlm_float_labels),
    (MLM, "p = 0.12", 4, mlm_rate_012),
    (MLM, "p = 0.16", 4, mlm_rate_016),
    (MLM, "85 / 7.5 / 7.5 split", 4, mlm_split_85_75),
    (MLM, "neighbouring pairs chosen together", 4, mlm_pairs_correlated),
    (MLM, "82 / 9 / 9 split", 4, mlm_split_82_9_9),
    (MLM, "random tokens from half the vocabulary", 5, mlm_random_half_vocab),
    (MLM, "80/10/10 action drawn per row", 4, mlm_action_per_row),
    (CNT, "no MLM LayerNorm", 5, count_no_mlm_ln),
    (CNT, "no embedding LayerNorm", 5, count_no_emb_ln),
    (CNT, "MLM output tied to token embeddings", 5, count_tied),
    (CNT, "attention projections without biases", 5, count_no_att_bias),
    (CNT, "no pooler", 5, count_no_pooler),
    (CNT, "NSP without bias", 5, count_no_nsp_bias),
    (CNT, "no position embeddings", 5, count_no_position),
    (CNT, "MLM output without bias", 5, count_no_mlm_out_bias),
    (CNT, "FFN without biases", 5, count_no_ffn_bias),
    (CNT, "LayerNorm = H parameters", 5, count_ln_one_per_feature),
    (CNT, "FFN size 4H instead of ffn_num_hiddens", 3, count_ffn_4h),
    (CNT, "max_len hard-coded 512", 3, count_max_len_512),
    (CNT, "MLM head without its hidden Linear", 5, count_no_mlm_hidden),
    (CNT, "returns (total, breakdown)", 6, count_tuple),
    (CNT, "segment embeddings max_len x H", 5, count_segment_max_len),
    (CNT, "builds the model on meta (forbidden)", 5, count_builds_model),
    (CNT, "one LayerNorm per block", 5, count_one_block_ln),
    (CNT, "prints, returns None", 6, count_none),
    (CNT, "returns a formatted string", 6, count_string),
]

RIGHT_BUT_UNUSUAL = [
    (MLM, "one uniform for both decisions", 0, mlm_single_uniform),
    (MLM, "python random loop", 0, mlm_python_random),
    (MLM, "bernoulli + multinomial", 0, mlm_bernoulli_multinomial),
    (MLM, "random token differs from the original", 0, mlm_random_not_original),
    (CNT, "numpy.int64 result", 0, count_numpy_int),
    (CNT, "float with an integer value", 0, count_float_exact),
    (CNT, "0-d int64 tensor", 0, count_tensor),
    (CNT, "another grouping of the same terms", 0, count_reference_layout),
]
