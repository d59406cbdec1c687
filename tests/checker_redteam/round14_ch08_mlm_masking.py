"""Round 14 red team (writer D, issue 12), ch08_mlm_masking: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round14/D/sols/ch08_mlm_masking.py (the writer's header: Round 14, writer D, check_mlm_masking: wrong 80/10/10 maskings by new mechanisms.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: W_08 (torch.seed() after the draws), W_24 (random.seed()) and
W_25 (np.random.seed()) by _core.expect_repeatable, called last in check_mlm_masking on a
batch of 4 x 32 ordinary tokens: two runs from one seed must give the same masks and leave
the caller's next draws alike ("the random numbers the caller draws next from torch's global
random generator are not the same in two runs from the same seed"). W_31 (grad mode left
off) is rejected by _core. A_14 (the random token from the action uniform) and A_23
(float16 action uniforms) are beyond any case / accepted by ruling."""
# flake8: noqa
import numpy as np
import torch

from book.bert import IGNORE

CHECK = "check_mlm_masking"


def _finish(tokens, vocab, chosen, action, rand_tok):
    to_mask = chosen & (action < 0.8)
    to_rand = chosen & (action >= 0.8) & (action < 0.9)
    inputs = torch.where(to_mask, vocab.mask, tokens)
    inputs = torch.where(to_rand, rand_tok, inputs)
    labels = torch.where(chosen, tokens, IGNORE)
    return inputs, labels


def C_01_reference(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    action = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, action, rt)


def C_02_bernoulli(tokens, vocab):
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & torch.bernoulli(torch.full(tokens.shape, 0.15)).bool()
    u = torch.rand(tokens.shape)
    rt = torch.empty_like(tokens).random_(vocab.num_specials, len(vocab))
    return _finish(tokens, vocab, chosen, u, rt)


def O_03_one_uniform_rescaled(tokens, vocab):
    """Right: one uniform u per position; chosen iff u < 0.15 and the action from u / 0.15
    (uniform on [0, 1) given u < 0.15): the same joint law as two draws."""
    ordinary = tokens >= vocab.num_specials
    u = torch.rand(tokens.shape)
    chosen = ordinary & (u < 0.15)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, u / 0.15, rt)


def O_04_integer_percent(tokens, vocab):
    """Right: integer draws, 15 of 100 chosen, then 8/1/1 of 10 (exact rates)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.randint(0, 100, tokens.shape) < 15)
    a = torch.randint(0, 10, tokens.shape).float() / 10
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def O_05_numpy_global(tokens, vocab):
    """Right: numpy's global generator (seeded by book.set_seed like torch's)."""
    ordinary = tokens >= vocab.num_specials
    shape = tuple(tokens.shape)
    chosen = ordinary & torch.from_numpy(np.random.random_sample(shape) < 0.15)
    a = torch.from_numpy(np.random.random_sample(shape))
    rt = torch.from_numpy(np.random.randint(vocab.num_specials, len(vocab), size=shape))
    return _finish(tokens, vocab, chosen, a, rt)


def O_06_private_gen_from_global(tokens, vocab):
    """Right: a private generator seeded with 62 bits drawn from the global one (new per call,
    reproducible under the caller's seed)."""
    seed = int(torch.randint(0, 2 ** 62, ()).item())
    g = torch.Generator().manual_seed(seed)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    a = torch.rand(tokens.shape, generator=g)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, a, rt)


def O_07_shift_mod(tokens, vocab):
    """Right: the random token is (original + uniform offset) mod the ordinary ids: uniform
    over all ordinary ids, the original included."""
    ns, V = vocab.num_specials, len(vocab) - vocab.num_specials
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    off = torch.randint(0, max(V, 1), tokens.shape)
    rt = (tokens - ns + off) % max(V, 1) + ns
    return _finish(tokens, vocab, chosen, a, rt)


def W_08_reseed_after(tokens, vocab):
    """Right masks, then torch.seed() at the end 'so the next call draws anew': the caller's
    generator is left in a random state (set_seed(s); f(); torch.rand(1) not reproducible)."""
    out = C_01_reference(tokens, vocab)
    torch.seed()
    return out


def W_09_antithetic_rows(tokens, vocab):
    """Antithetic rows: row r + B/2 uses 1 - u of row r; choices of paired rows are never
    both made (u < .15 and 1 - u < .15 exclusive): not independent; any even batch."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    h = (B + 1) // 2
    u = torch.rand(h, n)
    U = torch.cat([u, 1 - u])[:B]
    chosen = ordinary & (U < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_10_antithetic_half_row(tokens, vocab):
    """Antithetic within a row: position j + n/2 uses 1 - u of position j."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    h = (n + 1) // 2
    u = torch.rand(B, h)
    U = torch.cat([u, 1 - u], dim=1)[:, :n]
    chosen = ordinary & (U < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_11_action_antithetic_rows(tokens, vocab):
    """The action draws of row r + B/2 are 1 - those of row r: a [MASK] above forces no
    [MASK] below unless..., correlated actions."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    h = (B + 1) // 2
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(h, n)
    A = torch.cat([a, 1 - a])[:B]
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, A, rt)


def W_12_sobol_column_major(tokens, vocab):
    """Scrambled Sobol points laid out column-major: low-discrepancy, consecutive rows of a
    column are stratified (not independent)."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    seed = int(torch.randint(0, 2 ** 31, ()).item())
    eng = torch.quasirandom.SobolEngine(2, scramble=True, seed=seed)
    pts = eng.draw(B * n).reshape(n, B, 2).transpose(0, 1)
    chosen = ordinary & (pts[..., 0] < 0.15)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, pts[..., 1].contiguous(), rt)


def W_13_lcg_own(tokens, vocab):
    """Own multiplicative generator seeded from the global one: u_k = frac(k * phi + s)
    (a Weyl sequence): neighbours are deterministic functions of each other."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    s = torch.rand(()).double()
    k = torch.arange(B * n, dtype=torch.float64)
    u = torch.frac(k * 0.6180339887498949 + s).reshape(B, n).float()
    chosen = ordinary & (u < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def A_14_rand_token_from_action(tokens, vocab):
    """Random token reuses the action uniform (rescaled from [0.8, 0.9)) in float32: a
    random token is a function of the action draw; biased bins, and float32 (u - 0.8) / 0.1
    has about 1.7M levels: vocabularies larger than that get gaps."""
    ns, V = vocab.num_specials, len(vocab) - vocab.num_specials
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rt = ns + ((a - 0.8) / 0.1 * V).long().clamp(0, max(V - 1, 0))
    return _finish(tokens, vocab, chosen, a, rt)


def W_15_labels_int32(tokens, vocab):
    """labels as int32: cross_entropy needs int64 targets (RuntimeError)."""
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs, labels.int()


def W_16_inputs_int32(tokens, vocab):
    """inputs as int32 while tokens are int64: dtype changed."""
    inputs, labels = C_01_reference(tokens, vocab)
    return inputs.int(), labels


def W_17_forgets_unk(tokens, vocab):
    """Specials spelled out (PAD, CLS, SEP, MASK) but [UNK] forgotten: [UNK] gets chosen."""
    ordinary = ((tokens != vocab.pad) & (tokens != vocab.cls) & (tokens != vocab.sep)
                & (tokens != vocab.mask))
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_18_fork_rng_state_restore(tokens, vocab):
    """Saves and restores the global RNG state around its draws: every call (without
    reseeding) gives the same masks; draws are not anew."""
    state = torch.get_rng_state()
    out = C_01_reference(tokens, vocab)
    torch.set_rng_state(state)
    return out


def W_19_systematic_rows(tokens, vocab):
    """Systematic sampling: each row chooses positions where frac(j * 0.15 + phase) < 0.15
    with one random phase per row: exactly every ~6.7th position, not independent."""
    ordinary = tokens >= vocab.num_specials
    B, n = tokens.shape
    phase = torch.rand(B, 1)
    j = torch.arange(n)[None]
    u = torch.frac(j * 0.15 + phase)
    chosen = ordinary & (u < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_20_seed_from_counter(tokens, vocab):
    """A private generator seeded from initial_seed() + a call counter: new masks per call,
    but set_seed(s) before two calls gives different masks (counter), and a fresh process
    repeats them."""
    W_20_seed_from_counter.k = getattr(W_20_seed_from_counter, "k", 0) + 1
    g = torch.Generator().manual_seed(torch.initial_seed() + W_20_seed_from_counter.k)
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    a = torch.rand(tokens.shape, generator=g)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    return _finish(tokens, vocab, chosen, a, rt)


def W_21_random_excludes_last(tokens, vocab):
    """randint(num_specials, len(vocab) - 1): the last ordinary id is never drawn."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    hi = max(len(vocab) - 1, vocab.num_specials + 1)
    rt = torch.randint(vocab.num_specials, hi, tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_22_mask_tokens_view(tokens, vocab):
    """Returns inputs as tokens.view_as(tokens) then writes into it: changes tokens."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    inputs = tokens.clone() if not tokens.is_contiguous() else tokens.view_as(tokens)
    inputs[chosen & (a < 0.8)] = vocab.mask
    sel = chosen & (a >= 0.8) & (a < 0.9)
    inputs[sel] = rt[sel]
    return inputs, torch.where(chosen, tokens, IGNORE)


def A_23_action_float16(tokens, vocab):
    """Random-token band 0.8 <= a <= 0.9 and keep a > 0.9 (fine) but [MASK] a < 0.8 using
    float16 comparison of a rounded action draw: bins shift by float16 rounding near 0.8
    (0.7998 -> 0.7998, 0.8999 -> 0.9 ...)."""
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape).half().float()
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_24_python_random_reseed(tokens, vocab):
    """Right masks, then random.seed() (Python's global generator reseeded from the OS clock
    'to keep things fresh'): the caller's Python draws after set_seed no longer repeat."""
    import random
    out = C_01_reference(tokens, vocab)
    random.seed()
    return out


def W_25_numpy_reseed(tokens, vocab):
    """Right masks, then np.random.seed() (NumPy's global generator reseeded from entropy)."""
    out = C_01_reference(tokens, vocab)
    np.random.seed()
    return out


def W_26_random_token_per_type(tokens, vocab):
    """One random replacement per token type per call (a lookup table drawn per call):
    every replaced occurrence of the same word gets the same random token: not drawn for
    each position on its own."""
    ns, V = vocab.num_specials, len(vocab)
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    table = torch.randint(ns, V, (V,))
    return _finish(tokens, vocab, chosen, a, table[tokens])


def W_27_action_per_type(tokens, vocab):
    """One action draw per token type per call: all chosen occurrences of a word get the
    same fate ([MASK] / random / kept)."""
    ns, V = vocab.num_specials, len(vocab)
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(V)[tokens]
    rt = torch.randint(ns, V, tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_28_reseed_torch_at_start_from_time(tokens, vocab):
    """torch.seed() before drawing ('fresh randomness every call'): ignores the caller's
    seed; set_seed(s) before two calls gives different masks."""
    torch.seed()
    return C_01_reference(tokens, vocab)


def W_29_random_token_same_as_neighbour_col(tokens, vocab):
    """Random tokens drawn per column (one per position index, shared by all rows)."""
    ns, V = vocab.num_specials, len(vocab)
    ordinary = tokens >= ns
    chosen = ordinary & (torch.rand(tokens.shape) < 0.15)
    a = torch.rand(tokens.shape)
    rt = torch.randint(ns, V, (1, tokens.shape[1])).expand(tokens.shape)
    return _finish(tokens, vocab, chosen, a, rt)


def W_30_cuda_rng_fallback(tokens, vocab):
    """Draws its uniforms from a generator cloned from the global state, then advances the
    global one by only one draw: the next call's masks overlap this call's (shifted)."""
    g = torch.Generator()
    g.set_state(torch.get_rng_state())
    ordinary = tokens >= vocab.num_specials
    chosen = ordinary & (torch.rand(tokens.shape, generator=g) < 0.15)
    a = torch.rand(tokens.shape, generator=g)
    rt = torch.randint(vocab.num_specials, len(vocab), tokens.shape, generator=g)
    torch.rand(tokens.shape[1])
    return _finish(tokens, vocab, chosen, a, rt)


def W_31_grad_left_disabled(tokens, vocab):
    """torch.set_grad_enabled(False) as a statement ('integer masks need no graph'), never
    restored: the caller's training step afterwards computes no gradients."""
    torch.set_grad_enabled(False)
    return C_01_reference(tokens, vocab)
