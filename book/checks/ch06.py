"""Checker for chapter 6's exercise: a learned positional encoding.

The learner writes a class with the call of `PositionalEncoding`:
`cls(num_hiddens, dropout, max_len=1000)`, whose `forward(X)` takes (batch, n, num_hiddens)
and returns dropout(X + P[:n]), P a trainable table with one vector per position.

What is checked, in this order (the learner's modules are built with the RNG seeded, so every
message is the same on every run):

1. the call, the shape and dtype (X's, float32 and float64), X left unchanged, n = max_len
   accepted;
2. trainable parameters exist, none in a lower precision than X (float16), two instances
   do not share one (a class-level table), and building one leaves torch's global random
   generator alone (no torch.manual_seed in __init__: seeding is the caller's job);
3. in eval mode the output is X + E, with E the same for every X, every example of the batch,
   every call, and, for position i, every sequence length (a table sliced from its start);
   with dropout 0.0, train mode gives what eval mode gives (a rate read as the keep
   probability, positions added only in training); the parameters receive gradients;
4. E is position-dependent (50 positions, all different) and *per-position trainable*: the
   Jacobian of E (10 positions x 16 features) with respect to the parameters has full rank
   160, so every entry of every position's vector can be learned on its own (one scale times
   the sinusoid has rank 1, one scalar per position rank 10), and so has it at a second
   width, 5 positions x 40 features (no fixed number of free features tiled across the
   width); a sequence of max_len positions gives every trainable number a gradient (no row
   that no position reads: a table of max_len + 1 rows read from row 1); a table of random
   values follows the caller's seed (built after two different seeds it differs: no private
   generator with a fixed seed, no torch.manual_seed inside fork_rng; a table computed
   without randomness, such as the sinusoid, is told apart by its smoothness along the
   positions); and the output follows a
   change of the parameters (no copy of the table kept from an earlier call), and the table
   is read anew after a first call under torch.no_grad() (a training call at the same
   length gives gradients) and after .double() (float64 values and gradients, and a
   change of the parameters changes the output: no view of the table kept from __init__);
   the table follows max_len (max_len=1200, above the default 1000: at least 1200 x 16
   trainable numbers, and a sequence of 1200 accepted; with max_len left at its default,
   1000 positions accepted and 1001 refused), and a sequence longer than max_len
   raises an error (no position is wrapped, clamped or given a row past max_len: tried
   with max_len + 1 too), a batch larger than max_len is accepted; forward leaves the
   parameters unchanged (no max_norm renormalisation);
5. in train mode with dropout 0.5 and 0.2, every entry is 0 or (X + E) / (1 - p), a share
   p of them 0: dropout on the sum, at the given rate (the placement the exercise asks
   for); and the keep-masks of two calls, of two examples, of two features and of two
   positions agree no more often than independent draws (Hoeffding bound, a right dropout,
   nn.Dropout or hand-written, fails with probability below 1e-9 per test): no mask
   reused between calls, shared by the batch, or dropping whole position vectors; and the
   very first call of a fresh instance drops its share too (no call counter); instances
   built and called after two different seeds drop different entries (no private
   generator seeded in __init__); forward changes no parameter (no in-place clamp_); in a
   float64
   model, after a float64 change of the parameters, the values added are not float32
   numbers (no table cast with .float() in forward);
6. (train=True) the encoding helps: the chapter's reversal model with it reverses at least
   30 points more positions than the best any model blind to order can do (33.7%,
   computed exactly by book.selfattention.best_order_blind_accuracy).
"""
import functools
import math

import torch

from ..selfattention import REVERSAL, best_order_blind_accuracy, reversal_accuracy, \
    train_order_model
from ._core import call, checker, expect_tensor, fail, seeded

# The training test: reverse sequences of 4 to 8 symbols (vocabulary 12, token 0 = padding)
# with a 2-block Transformer encoder (d = 32), 400 Adam steps with warm-up and clipping. With
# these settings the course's reference solution reaches 100% of the positions, the
# sinusoidal encoding about 90%, and the same model without positional encoding about 34%
# (the best possible without positions is 33.7%).
TASK = REVERSAL
MARGIN = 0.30  # the learned encoding must be right on at least 30 points more positions
# The rates tried in train mode. Round 13: 0.25, whose scale 1 / (1 - p) = 4/3 is exact in
# neither float16 (1.333) nor bfloat16 (1.336), so a scale rounded through them shows, and
# which a mask from decile draws (keep iff randint(0, 10) >= 10 p) drops at 0.3; tried on
# 50 positions (6400 entries: 5.5 standard errors are 0.03).
DROPOUTS = (0.5, 0.2, 0.25)
DROPOUT_LENGTHS = {0.25: 50}  # positions of X per rate (20 by default)
SE_TOLERANCE = 5.5  # the dropout share may differ from the rate by 5.5 standard errors
LONG_MAX_LEN = 1200  # a max_len above the default 1000: the table must follow max_len
WIDE = 40  # a second width for the rank test (a fixed number of free features shows)
SMOOTH_CORRELATION = 0.3  # neighbouring positions: random values about 0 (+-0.04), the
# sinusoid 0.81; a seed-independent table below this is random values from a fixed seed


def _order_model(pos_encoding_class, seed=0):
    with torch.random.fork_rng(devices=[]):  # leave the learner's random state alone
        model, _ = train_order_model(pos_encoding_class, seed=seed, **TASK)
    return reversal_accuracy(model, TASK["min_len"], TASK["max_len"],
                             vocab_size=TASK["vocab_size"])


@functools.lru_cache(maxsize=1)
def baseline_accuracy():
    """The best share of positions any model blind to order can reverse (exact)."""
    return float(best_order_blind_accuracy(TASK["min_len"], TASK["max_len"],
                                           TASK["vocab_size"]))


def _make(cls, case, *args, **kwargs):
    with seeded(0):  # the same module, and so the same messages, on every run
        module = call(cls, *args, name="your class", case=case, **kwargs)  # global hooks: _core
    if not isinstance(module, torch.nn.Module):
        fail(f"your class should build an nn.Module (subclass nn.Module), got a "
             f"{type(module).__name__} from {case}.")
    return module


def _slice_hint(error):
    if "must match the size" in str(error):
        return ("slice the table along the positions to the length of X: P[:, :n] for a "
                "(1, max_len, num_hiddens) table, P[:n] for a (max_len, num_hiddens) one, "
                "with n = X.shape[1].")
    return None


def _max_len_hint(error):
    return _slice_hint(error) or (
        "a sequence of exactly max_len positions fits: its positions are 0 to max_len - 1, "
        "all in the table. Refuse only a longer one: n > max_len (not n >= max_len).")


def _forward(module, X, case, hint_on_error=_slice_hint):
    out = call(module, X, name="forward", case=case, hint_on_error=hint_on_error)
    expect_tensor(out, X.shape, what="forward(X)", case=case)
    if out.dtype != X.dtype:
        tables = ", ".join(f"`{name}` {p.dtype}" for name, p in module.named_parameters()
                           if p.dtype != X.dtype)
        fail(f"forward(X) has dtype {out.dtype} on {case}, while X is {X.dtype}"
             + (f" (your parameters: {tables})" if tables else "") + ": the encoding must "
             "keep X's dtype, or the layers after it (float32 weights) fail on its output.",
             "create the table with the default dtype, float32 (torch.randn(1, max_len, "
             "num_hiddens) without dtype=), as every other parameter of the model.")
    return out


def _start_std(cls, num_hiddens):
    """Standard deviation of what a freshly built encoding adds to zeros (seeded, eval)."""
    module = _make(cls, "cls(16, 0.0, max_len=50)", num_hiddens, 0.0, max_len=50)
    with torch.no_grad():
        return module.eval()(torch.zeros(1, 8, num_hiddens)).std().item()


def _scale_hint(std):
    return (f"at the start your encoding's values have standard deviation {std:.3f}, while the "
            "token embeddings they are added to have standard deviation 1 (in the checker's "
            "model, as with nn.Embedding's default). An encoding much smaller than the "
            "embeddings is drowned out and learns slowly: initialise it with std about 1, "
            "as the exercise asks, e.g. nn.init.normal_(P), or use an "
            "nn.Embedding(max_len, num_hiddens). (GPT-2's and BERT's std 0.02 goes with "
            "their long trainings; in this check's short training such a table does not "
            "learn.)")


def _jacobian_rank(module, n, d):
    """Rank of d(encoding of n positions) / d(trainable parameters), in eval mode, and the
    positions whose vector no parameter moves (a frozen row, such as padding_idx's)."""
    params = [p for p in module.parameters() if p.requires_grad]
    E = module(torch.zeros(1, n, d)).reshape(-1)
    if not E.requires_grad:
        fail("in eval mode no gradient reaches your encoding's parameters: the output of "
             f"forward on zeros of shape (1, {n}, {d}) does not require grad (in train "
             "mode it does). The parameters must receive gradients in both modes: a "
             "model in eval mode is still differentiated (fine-tuning with dropout off, "
             "gradient checks, saliency maps).",
             "read the parameter itself in every mode: self.dropout(X + self.P[:, :n]); "
             "no self.P.detach(), self.P.data or torch.no_grad() when not self.training.")
    rows = []
    for k in range(E.numel()):
        grads = torch.autograd.grad(E[k], params, retain_graph=True, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                               for g, p in zip(grads, params)]))
    J = torch.stack(rows).double()  # (n * d, number of parameters)
    frozen = [i for i in range(n) if not J[i * d:(i + 1) * d].any()]
    return int(torch.linalg.matrix_rank(J)), frozen


def _expect_full_rank(module, n, d, narrow=None):
    """Every entry of every position's vector can be learned on its own: the Jacobian of the
    encoding of n positions with respect to the parameters has rank n * d. `narrow`: a
    smaller width at which the check has passed (a fixed number of free features)."""
    rank, frozen = _jacobian_rank(module, n, d)
    if rank >= n * d:
        return
    what = {1: "one trainable number for all of them (e.g. a scale times the fixed "
               "sinusoid)", n: "one trainable number per position, the same for every "
                               "feature",
            d: "one trainable vector shared by all positions"}
    if frozen:
        rows = ", ".join(str(i) for i in frozen)
        why = ((f"the vector of position {rows} is not trainable: no parameter moves it"
                if len(frozen) == 1 else f"the vectors of positions {rows} are not "
                "trainable: no parameter moves them")
               + (" (nn.Embedding's padding_idx=0 freezes position 0 at the zero "
                  "vector)" if frozen == [0] else ""))
    elif narrow is not None:
        with torch.no_grad():
            E = module(torch.zeros(1, n, d))[0]  # (n, d)
        same = [(j, k) for k in range(d) for j in range(k)
                if torch.allclose(E[:, j], E[:, k], atol=1e-6)]
        repeat = (f" (feature {same[0][1]} always equals feature {same[0][0]})"
                  if same else "")
        why = (f"at num_hiddens={narrow} every entry was free, so your encoding has a "
               f"fixed number of free features per position{repeat}, not num_hiddens: "
               "features repeated (tiled) or tied across the width")
    else:
        why = what.get(rank, "every position's vector is trainable, but they are tied "
                             "together: a factorised (low-rank) table such as A @ B "
                             "with an inner size below num_hiddens, or parameters "
                             "shared between positions, lets the vectors of the "
                             "positions move only within a common subspace")
    fail(f"for {n} positions of {d} features your encoding can learn only {rank} "
         f"independent directions, not {n} x {d} = {n * d}: {why}."
         " A learned encoding gives every position its own trainable vector.",
         "a table with one row of num_hiddens trainable numbers per position: "
         "nn.Parameter(torch.randn(1, max_len, num_hiddens)), or nn.Embedding(max_len, "
         "num_hiddens) looked up at positions 0..n-1.")


def _expect_every_row_trained(module, d):
    """A sequence of max_len positions reaches every trainable number: no row of the table
    that no position reads (a table of max_len + 1 rows read from row 1, p_0 never used)."""
    max_len = 50
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    weights = torch.randn(1, max_len, d, generator=torch.Generator().manual_seed(12))
    out = module.eval()(torch.zeros(1, max_len, d))
    if not out.requires_grad:
        return  # told by the gradient checks
    grads = torch.autograd.grad((out * weights).sum(), [p for _, p in params],
                                allow_unused=True)
    dead, total = [], 0
    for (name, p), grad in zip(params, grads):
        total += p.numel()
        idle = torch.ones_like(p, dtype=torch.bool) if grad is None else grad == 0
        if not idle.any():
            continue
        where = ""
        if p.dim() >= 2 and p.shape[-1] == d:
            rows = idle.reshape(-1, p.shape[-2], d).all(0).all(-1).nonzero().flatten()
            if 0 < len(rows) < p.shape[-2]:
                shown = ", ".join(str(int(i)) for i in rows[:5]) + \
                    (", ..." if len(rows) > 5 else "")
                where = f" (row{'s' if len(rows) > 1 else ''} {shown} of its {p.shape[-2]})"
        dead.append((f"`{name}`{where}", int(idle.sum())))
    if dead:
        count = sum(k for _, k in dead)
        names = ", ".join(name for name, _ in dead)
        fail(f"with a sequence of max_len = {max_len} positions (cls(16, 0.0, max_len=50), "
             f"eval mode), {count} of your {total} trainable numbers get no gradient: "
             f"{names}. No sequence the encoding accepts reaches them, so they are never "
             "trained: a table has exactly max_len rows, p_0 to p_{max_len - 1}, and "
             "forward adds p_0 ... p_{n-1}, the first n rows.",
             "nn.Parameter(torch.randn(1, max_len, num_hiddens)) sliced from row 0: "
             "self.P[:, :n] (not a table of max_len + 1 rows read from row 1, and no "
             "parameter that forward does not use).")


def _lag_one_correlation(E):
    """Correlation of each position's vector with the next one's (features centred): about 0
    for random values, high for a smooth function of the position such as the sinusoid."""
    E = E - E.mean(0)
    return float((E[1:] * E[:-1]).sum() / (E * E).sum())


def _expect_seed_followed(cls, d):
    """A table of random values is drawn from the generator the caller seeded: built after
    torch.manual_seed(1) and after torch.manual_seed(2), the tables differ (no private
    generator with a fixed seed, no torch.manual_seed inside torch.random.fork_rng()). A
    table computed without randomness (the sinusoid, say) is the same under every seed: it
    is smooth along the positions, which random values are not."""
    tables = []
    for seed in (1, 2):
        case = f"cls(16, 0.0, max_len=50) built after torch.manual_seed({seed}), eval mode"
        with seeded(seed):
            module = call(cls, d, 0.0, max_len=50, name="your class", case=case)
            with torch.no_grad():
                tables.append(_forward(module.eval(), torch.zeros(1, 50, d),
                                       f"zeros of shape (1, 50, 16) with {case}")[0])
    with seeded(1):  # two instances one after the other: two draws, two tables
        case = ("cls(16, 0.0, max_len=50) built twice in a row after torch.manual_seed(1), "
                "eval mode")
        pair = []
        for _ in range(2):
            module = call(cls, d, 0.0, max_len=50, name="your class", case=case)
            with torch.no_grad():
                pair.append(_forward(module.eval(), torch.zeros(1, 50, d),
                                     f"zeros of shape (1, 50, 16) with {case}")[0])
    if torch.equal(*pair) and pair[0].std() > 1e-6 \
            and _lag_one_correlation(pair[0]) < SMOOTH_CORRELATION:
        fail(f"two instances of your class built one after the other ({case}) start from "
             "the same table of random-looking values: it draws them without moving the "
             "global generator on (inside torch.random.fork_rng(), or with the state saved "
             "and restored). Two encodings of one model (an encoder's and a decoder's) then "
             "start identical, and the next layer's initialisation draws the very numbers of "
             "your table.",
             "draw the table from the global generator and leave it where the draw left "
             "it: nn.Parameter(torch.randn(1, max_len, num_hiddens)), with no fork_rng, "
             "generator= or seeding in your class.")
    E = tables[0]
    if not torch.equal(*tables) or E.std() < 1e-6:
        return
    correlation = _lag_one_correlation(E)
    if correlation < SMOOTH_CORRELATION:
        fail("built once after torch.manual_seed(1) and once after torch.manual_seed(2), "
             "your class starts from the same table of random-looking values (the "
             f"correlation of neighbouring positions is {correlation:.2f}, as for "
             "independent draws): it draws them from a generator of its own with a fixed "
             "seed (torch.Generator().manual_seed(...), or torch.manual_seed inside "
             "torch.random.fork_rng()). The caller's seed then has no effect on it: every "
             "model starts from the same positions, and training from several seeds does "
             "not vary them.",
             "draw the table from the global generator, which the caller seeds: "
             "nn.Parameter(torch.randn(1, max_len, num_hiddens)), with no generator= "
             "argument and no seeding in your class.")


def _expect_float64_table(cls, d):
    """In a float64 model the encoding adds the float64 table: after a float64 change of the
    parameters (what training does), the values added are not all float32 numbers (a table
    cast with .float() in forward, then added to float64 X, would be)."""
    case = ("zeros of shape (1, 7, 16) in float64, cls(16, 0.0, max_len=50).double() (eval "
            "mode), after a float64 change of its parameters")
    module = _make(cls, "cls(16, 0.0, max_len=50)", d, 0.0, max_len=50).double().eval()
    zeros = torch.zeros(1, 7, d, dtype=torch.float64)
    g = torch.Generator().manual_seed(13)
    with torch.no_grad():
        before = _forward(module, zeros, "zeros of shape (1, 7, 16) in float64, "
                                         "cls(16, 0.0, max_len=50).double() (eval mode)")
        for p in module.parameters():
            if p.requires_grad and p.dtype == torch.float64:
                p.add_(0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64))
        E = _forward(module, zeros, case)
    if torch.equal(E, before):
        return  # the parameters are not read: told by the other checks
    rounded = (E == E.float().double()).double().mean().item()
    if rounded > 0.5:
        fail(f"on {case}, {rounded:.0%} of the values your encoding adds are float32 "
             "numbers, while its float64 parameters are not: forward rounds the table to "
             "float32 (a .float() or dtype=torch.float32 in forward), so a float64 model "
             "adds positions about 1e-8 off (relative) instead of float64's 1e-16.",
             "add the table in X's dtype: return self.dropout(X + self.P[:, :n]) (or "
             "self.P[:, :n].to(X.dtype)); no .float() in forward.")


def _one_of(Y, choices, atol=1e-5):
    """Is every entry of Y equal to the same entry of one of `choices`?"""
    hit = torch.zeros_like(Y, dtype=torch.bool)
    for c in choices:
        hit |= torch.isclose(Y, c, atol=atol, rtol=1e-5)
    return bool(hit.all())


# The gradient test's upstream gradient: its sum over the batch has entries at least 0.03
# apart (and at least 0.015 from 0), so each entry of a right table's gradient names the one
# position and feature it belongs to, in any layout (a (1, max_len, d) or (max_len, d)
# parameter, an nn.Embedding, a transposed table); float32 rounding is below 1e-5.
GRAD_TOL = 1e-4


def _upstream(b, n, d, gen):
    ranks = torch.randperm(n * d, generator=gen).reshape(n, d).double()
    jitter = torch.rand(n, d, generator=gen, dtype=torch.float64) - 0.5
    S = ((ranks - (n * d - 1) / 2) * 0.05 + 0.02 * jitter).float()  # the batch sum
    G = torch.randn(b, n, d, generator=gen)
    G[-1] = S - G[:-1].sum(0)
    return G, G.sum(0).double()


def _locate(values, targets, tol):
    """For each of `values`, the index of the nearest of `targets` and whether it is within
    tol (relative above 1)."""
    order = targets.argsort()
    ordered = targets[order]
    right = torch.searchsorted(ordered, values).clamp(max=len(ordered) - 1)
    left = (right - 1).clamp(min=0)
    pick = torch.where((values - ordered[left]).abs() < (values - ordered[right]).abs(),
                       left, right)
    near = (values - ordered[pick]).abs() <= tol * (1 + values.abs())
    return order[pick], near


def _entry_name(params, j):
    for name, p in params:
        if j < p.numel():
            index = [int(i) for i in torch.unravel_index(torch.tensor(int(j)), p.shape)]
            return f"`{name}`{index}" if p.dim() else f"`{name}`"
        j -= p.numel()
    return "?"


def _fmt(values):
    return "[" + ", ".join(f"{float(v):.4g}" for v in values) + "]"


def _scale_of(a, b):
    """c with sorted(a) = c * sorted(b) (a, b: the same number of entries), or None."""
    a, b = a.sort().values, b.sort().values
    if a.numel() != b.numel() or a.numel() == 0:
        return None
    if (a[0] < 0) != (b[0] < 0):
        a = a.flip(0)
    c = float((a * b).sum() / (b * b).sum())
    return c if torch.allclose(a, c * b, atol=1e-4, rtol=1e-4) else None


def _expect_table_itself(cls, d):
    """In eval mode, what forward adds is the table itself, and the gradient each trainable
    number receives is the reference's: for the entry of position i, feature k the sum over
    the batch of the upstream gradient at (i, k), for every other number 0. Found without
    assuming a layout: the upstream gradient's batch sums are all different, so each
    gradient entry names its (i, k). Then the same with X in float16 and bfloat16: a
    gradient reaches the table."""
    b, n, max_len = 3, 7, 50
    case = (f"cls(16, 0.0, max_len={max_len}) in eval mode, X of shape ({b}, {n}, {d}), "
            "upstream gradient G")
    module = _make(cls, f"cls(16, 0.0, max_len={max_len})", d, 0.0, max_len=max_len).eval()
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(15)
    X = torch.randn(b, n, d, generator=gen)
    G, S = _upstream(b, n, d, gen)
    out = _forward(module, X, case)
    if not out.requires_grad:
        return  # told by the gradient checks
    E = (out - X).detach()[0].double()  # (n, d): what each position gets
    grads = torch.autograd.grad(out, [p for _, p in params], G, allow_unused=True)
    _expect_dense(params, grads, case)
    g = torch.cat([(torch.zeros_like(p) if gr is None else gr).reshape(-1).double()
                   for (_, p), gr in zip(params, grads)])
    v = torch.cat([p.detach().reshape(-1).double() for _, p in params])
    live = (g.abs() > GRAD_TOL).nonzero().flatten()
    where, near = _locate(g[live], S.reshape(-1), GRAD_TOL)
    hits = torch.bincount(where[near], minlength=n * d)
    # where forward's values sit among the parameters, if anywhere
    at, found = _locate(E.reshape(-1), v, 1e-5)
    if bool(near.all()) and bool((hits == 1).all()):
        # every gradient entry belongs to one (i, k), and each (i, k) has one entry
        j = torch.empty(n * d, dtype=torch.long)
        j[where] = live
        wrong = ((v[j] - E.reshape(-1)).abs() > 1e-5 * (1 + E.reshape(-1).abs())).nonzero()
        if len(wrong):
            ik = int(wrong[0])
            i, k = divmod(ik, d)
            _fail_not_table(E, v, found, at, params, i, k, j[ik], case)
        return
    if not bool(found.all()):
        ik = int((~found).nonzero()[0])
        i, k = divmod(ik, d)
        scale = _scale_of(g[live], S.reshape(-1))
        _fail_not_table(E, v, found, at, params, i, k, None, case,
                        scale if scale is not None and abs(scale - 1) > 1e-3 else None)
    # forward adds the parameters' values; the gradient is not what autograd gives for it
    expected = S.reshape(-1)
    got = g[at]  # the gradient of the entry that holds the value added at (i, k)
    extra = torch.ones_like(g, dtype=torch.bool)
    extra[at] = False
    stray = (extra & (g.abs() > GRAD_TOL)).nonzero().flatten()
    bad = ((got - expected).abs() > GRAD_TOL * (1 + expected.abs())).nonzero().flatten()
    if len(bad) == 0 and len(stray):
        j = int(stray[0])
        name = _entry_name(params, j).split("[")[0]
        fail(f"on {case}, your encoding adds its table, and the table gets the right "
             f"gradient, but {name} gets a gradient too ({g[j]:.4g} at "
             f"{_entry_name(params, j)}, which no single position and feature of the "
             "table gets): forward uses it for more than one position (a vector shared by "
             "all positions, such as a bias, or a gain on X). The exercise asks for "
             "X + p_i, with p_i, the vector of position i, the only thing added.",
             "return self.dropout(X + self.P[:, :n]): one table, its first n rows added, "
             "and no other parameter.")
    if len(bad) == 0:  # values and gradients right, but some entry is reached twice
        return
    ik = int(bad[0])
    i, k = divmod(ik, d)
    ratio = _scale_of(got, expected)
    if ratio is not None and abs(ratio - 1) > 1e-3:
        why = (f" (1/{b}, one over the batch size: nn.Embedding(..., "
               "scale_grad_by_freq=True) looked up with positions repeated for every "
               "example of the batch, or a division by the batch size with the rest "
               "added back detached)" if abs(ratio - 1 / b) < 1e-3 else "")
        fail(f"on {case}, the gradient reaching your table is {ratio:.4g} times the "
             f"right one{why}: at position {i}, feature {k} the entry "
             f"{_entry_name(params, at[ik])} gets {got[ik]:.4g}, while X + p_i gives it "
             f"the sum over the batch of G[:, {i}, {k}], {expected[ik]:.4g}. With Adam the "
             "scale hardly shows in training, but any other optimizer, gradient clipping "
             "or a learning-rate schedule sees the wrong gradient.",
             "add the table's rows to X plainly, self.dropout(X + self.P[:, :n]) (or "
             "nn.Embedding(max_len, num_hiddens) without scale_grad_by_freq, looked up at "
             "torch.arange(n)), and let autograd compute the gradient.")
    clamped = got.abs().max() < expected.abs().max() - GRAD_TOL
    fail(f"on {case}, the gradient reaching your table is not what autograd gives for "
         f"X + p_i: at position {i}, feature {k} the entry {_entry_name(params, at[ik])} "
         f"gets {got[ik]:.4g}, while the right gradient is the sum over the batch of "
         f"G[:, {i}, {k}], {expected[ik]:.4g}"
         + (f" (no entry gets more than {got.abs().max():.4g} in size: the gradient is "
            "clamped)" if clamped else "")
         + ": something changes the table's gradient (a hook registered on the "
         "parameter, a custom autograd.Function, a detach trick), so the optimizer does "
         "not follow the loss.",
         "add the table's rows to X plainly, self.dropout(X + self.P[:, :n]), with no "
         "register_hook on the parameter: gradient clipping belongs to the training loop "
         "(torch.nn.utils.clip_grad_norm_).")


def _fail_not_table(E, v, found, at, params, i, k, j, case, scale=None):
    d = E.shape[1]
    row = E[i, :4]
    known = ""
    if scale is not None:
        known = (f" The gradient reaching your table is {scale:.4g} times the right one: "
                 f"forward adds {scale:.4g} times the table (a scale such as "
                 "sqrt(num_hiddens) applied in forward).")
    elif (E.abs() <= 1 + 1e-6).all() and E.abs().max() > 0.5 and j is None:
        known = " Every value added lies within [-1, 1] (a tanh, sine or cosine?)."
    where = ("no trainable number of your encoding holds that value." if j is None else
             f"the entry whose gradient belongs to that position and feature, "
             f"{_entry_name(params, j)}, holds {v[j]:.4g}.")
    fail(f"on {case}, in eval mode forward(X) - X is not your table: position {i} gets "
         f"{_fmt(row)}{' ...' if d > 4 else ''} added (feature {k}: {E[i, k]:.4g}), and "
         f"{where}{known} Forward must add "
         "the learned vectors themselves, p_0 ... p_{n-1}: not a fixed encoding (such as "
         "the sinusoid) plus a table, nor the table rescaled, normalised or passed "
         "through a function, which changes what the vectors can learn and the "
         "gradient they get.",
         "return self.dropout(X + self.P[:, :n]). To start from the sinusoid, copy it "
         "into the table in __init__ (self.P.data.copy_(...)) rather than adding it in "
         "forward; to start at std s, initialise the table with it "
         "(torch.randn(...) * s), not a scale in forward.")


def _expect_dense(params, grads, case):
    """A sparse gradient (nn.Embedding(sparse=True)) is refused by Adam and AdamW."""
    for (name, _), grad in zip(params, grads):
        if grad is not None and grad.layout != torch.strided:
            fail(f"on {case}, the gradient of your parameter `{name}` is a sparse tensor "
                 "(nn.Embedding(..., sparse=True)): torch.optim.Adam and AdamW, which "
                 "train the course's models, refuse sparse gradients (\"Adam does not "
                 "support sparse gradients\"), and gradient clipping does too.",
                 "nn.Embedding(max_len, num_hiddens) without sparse=True (a dense "
                 "gradient), or an nn.Parameter table.")


def _expect_half_gradient(cls, d):
    """X in float16 and bfloat16 (the module in float32): a gradient reaches the table."""
    module = _make(cls, "cls(16, 0.0, max_len=50)", d, 0.0, max_len=50).eval()
    params = [p for p in module.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(16)
    X = torch.randn(2, 7, d, generator=gen)
    G = torch.randn(2, 7, d, generator=gen)
    for dtype in (torch.float16, torch.bfloat16):
        case = (f"X of shape (2, 7, 16) in {str(dtype)[6:]}, cls(16, 0.0, max_len=50) in "
                "float32, eval mode")
        try:  # lower precisions are not asked: an error is not a fault here
            out = module(X.to(dtype))
        except Exception:
            continue
        grads = torch.autograd.grad(out, params, G.to(out.dtype), allow_unused=True) \
            if isinstance(out, torch.Tensor) and out.requires_grad else []
        if not any(gr is not None and gr.abs().sum() > 0 for gr in grads):
            fail(f"on {case}, no gradient reaches your encoding's parameters (in float32 "
                 "it does): a half-precision X must not cut the table off from the "
                 "gradient (no .detach() or torch.no_grad() for some dtypes).",
                 "return self.dropout(X + self.P[:, :n]) for every dtype of X.")
        if any(gr is not None and not torch.isfinite(gr).all() for gr in grads):
            fail(f"on {case}, the gradient of your encoding's parameters contains NaN or "
                 "inf.")


@checker("learned positional encoding", random=True)  # initialisation, dropout
def check_learned_positional_encoding(cls, train=True):
    """Check a learned positional encoding class: the call and shape; a trainable table with
    one vector per position, added to X, as many as max_len (tried with 1200), a longer
    sequence refused, float64 kept; dropout on the sum in train mode; and (with
    `train=True`, about 10 s on a laptop CPU) that it helps on a task where order matters:
    reversing a sequence."""
    d = 16
    case = "cls(num_hiddens=16, dropout=0.0, max_len=50)"
    module = _make(cls, case, num_hiddens=d, dropout=0.0, max_len=50)
    fresh = _make(cls, "cls(16, 0.0) (max_len left at its default)", d, 0.0)
    g = torch.Generator().manual_seed(6)
    X = torch.randn(3, 7, d, generator=g)
    before = X.clone()
    _forward(module, X, f"X of shape (3, 7, 16) with {case}")
    if not torch.equal(X, before):
        fail("forward(X) changed X in place; return a new tensor (X + P, not X += P).")
    _forward(module, torch.randn(2, 50, d, generator=g),
             "X of shape (2, 50, 16), as long as max_len", hint_on_error=_max_len_hint)
    _forward(module, torch.randn(60, 5, d, generator=g),
             "X of shape (60, 5, 16): 60 sequences of length 5 with max_len=50 (a batch "
             "larger than max_len is fine: the length to compare with max_len is "
             "X.shape[1], not X.shape[0])")
    _expect_float64(cls, d)
    if not any(p.requires_grad for p in fresh.parameters()):
        fail("cls(16, 0.0) has no trainable parameters once built: an optimizer created then "
             "(as in every training loop) would train nothing.",
             "create the table in __init__ as nn.Parameter(...) (or an nn.Embedding); a "
             "plain tensor attribute, a registered buffer, or a table made later in forward "
             "is never trained.")
    trainable = [p for p in module.parameters() if p.requires_grad]
    if not trainable:
        fail("your encoding has no trainable parameters, so nothing about it can be learned.",
             "store the table as nn.Parameter(...) (or use an nn.Embedding); a plain tensor "
             "attribute or a registered buffer is never trained.")

    _expect_precision(module, X.dtype)
    _expect_own_parameters(cls, module, d)
    _expect_global_rng_left_alone(cls, d)

    module.eval()
    X1, X2 = torch.randn(2, 7, d, generator=g), torch.randn(2, 7, d, generator=g)
    with torch.no_grad():
        out1 = _forward(module, X1, "X of shape (2, 7, 16), eval mode")
        again = _forward(module, X1, "X of shape (2, 7, 16), eval mode")
    if not torch.equal(out1, again):
        fail("in eval mode (dropout off) your encoding gives two different outputs for the "
             "same X: the position vectors change from call to call.",
             "create the table once, in __init__, as a parameter, and only look it up in "
             "forward (no torch.randn in forward); apply dropout with nn.Dropout, which "
             "is off in eval mode.")
    _expect_train_equals_eval(cls, module, X1, out1)
    module.eval()
    with torch.no_grad():
        out2 = _forward(module, X2, "another X of shape (2, 7, 16), eval mode")
        short = _forward(module, X1[:, :3], "X of shape (2, 3, 16), eval mode")
    E1, E2 = out1 - X1, out2 - X2
    if torch.allclose(out1, out2, atol=1e-6):
        fail("forward(X) does not depend on X (two different X give the same output).",
             "forward must return X plus the encoding: the token embeddings X carry the "
             "symbols, the encoding only says where they are.")
    if not torch.allclose(E1, E2, atol=1e-5):
        _expect_x_unscaled(X1, X2, out1, out2)
        fail("forward(X) - X changes with X: the encoding must be added to X, and not depend "
             "on it (out = X + P[:n]).",
             "X * P (multiplying) or a layer applied to X is not a positional encoding: "
             "add the position vectors to X.")
    if not torch.allclose(E1, E1[:1].expand_as(E1), atol=1e-6):
        fail("the encoding differs between the examples of a batch: position i must get the "
             "same vector in every sequence.",
             "add a table of shape (1, n, num_hiddens) (or (n, num_hiddens)), broadcast over "
             "the batch.")
    if not torch.allclose(short - X1[:, :3], E1[:, :3], atol=1e-6):
        fail("position 0 gets a different vector in a sequence of 3 than in a sequence of 7: "
             "each position i must have its own vector whatever the sequence length.",
             "slice the table from its start, P[:, :n] (the first n rows), not its end.")

    with torch.no_grad():
        added = module(torch.zeros(1, 50, d))[0]  # (50, d): what each position gets
    distinct = torch.cdist(added, added) + torch.eye(50) > 1e-6
    if not distinct.all():
        i, j = [int(k) for k in (~distinct).nonzero()[0]]
        std = _start_std(cls, d)
        size = sum(p.numel() for p in module.parameters() if p.requires_grad)
        if std < 1e-6 and size >= 50 * d:  # a table that starts as one constant
            fail(f"at initialisation your encoding gives every position the same vector "
                 f"(positions {i} and {j} alike): the table starts as one constant. It is "
                 "trainable, but it starts unable to tell positions apart and learns them "
                 "slowly: trained on this checker's reversal task, a zero-initialised table "
                 "stays near the accuracy of a model without positional information.",
                 _scale_hint(std))
        fail(f"your encoding is not position-dependent: positions {i} and {j} get the same "
             "vector, so the model cannot tell them apart.",
             "give every position its own vector: a table of shape (1, max_len, num_hiddens), "
             "sliced to the sequence length, not one vector broadcast over all positions.")

    module.train()
    weights = torch.randn(2, 7, d, generator=g)
    out = call(module, torch.randn(2, 7, d, generator=g), name="forward")
    grads = []
    if out.requires_grad:
        grads = torch.autograd.grad((out * weights).sum(), trainable, allow_unused=True)
        _expect_dense([(name, p) for name, p in module.named_parameters()
                       if p.requires_grad], grads, "X of shape (2, 7, 16), train mode")
    if not any(gr is not None and gr.abs().sum() > 0 for gr in grads):
        fail("no gradient reaches your encoding's parameters: training would never change them.",
             "use the parameter itself in forward (X + self.P[:, :n]), not self.P.detach(), "
             "self.P.data or a copy made in __init__.")
    if any(gr is not None and not torch.isfinite(gr).all() for gr in grads):
        fail("the gradient of your encoding's parameters contains NaN or inf.")
    module.eval()
    _expect_full_rank(module, 10, d)
    wide = _make(cls, f"cls(num_hiddens={WIDE}, dropout=0.0, max_len=50)", WIDE, 0.0,
                 max_len=50)
    _expect_full_rank(wide.eval(), 5, WIDE, narrow=d)
    _expect_seed_followed(cls, d)

    _expect_current_parameters(cls, module, d)
    _expect_table_read_anew(cls, d)

    long_len = LONG_MAX_LEN
    long_case = f"cls(num_hiddens=16, dropout=0.0, max_len={long_len})"
    long = _make(cls, long_case, num_hiddens=d, dropout=0.0, max_len=long_len)
    size = sum(p.numel() for p in long.parameters() if p.requires_grad)
    if 0 < size < long_len * d:
        small = sum(p.numel() for p in module.parameters() if p.requires_grad)
        if small == size:  # no table at all: a function of the position
            fail(f"{long_case} has {size} trainable numbers, fewer than max_len x "
                 f"num_hiddens = {long_len * d}, and as many as with max_len=50: your "
                 "position vectors are computed by a function of the position with a "
                 "fixed number of parameters (such as an MLP of i / max_len), not looked "
                 "up in a table, so it cannot give each of the "
                 f"{long_len} positions its own vector.",
                 "a learned encoding is a table with one trainable vector per position: "
                 "nn.Parameter(torch.randn(1, max_len, num_hiddens)) (or "
                 "nn.Embedding(max_len, num_hiddens)), sliced to the sequence length.")
        fail(f"{long_case} has {size} trainable numbers, fewer than max_len x num_hiddens = "
             f"{long_len * d}: it cannot give each of the {long_len} positions its own "
             "vector.",
             "build the table from the max_len argument, nn.Parameter(torch.randn(1, "
             "max_len, num_hiddens)), not from a fixed size (such as the default 1000).")
    with torch.no_grad():
        _forward(long.eval(), torch.randn(1, long_len, d,
                                          generator=torch.Generator().manual_seed(60)),
                 f"X of shape (1, {long_len}, 16) with {long_case}")
    _expect_too_long_refused(module, d)
    _expect_default_max_len(fresh, d)
    _expect_every_row_trained(module, d)
    _expect_table_itself(cls, d)
    _expect_half_gradient(cls, d)

    _check_dropout(cls, d)
    _expect_float64_table(cls, d)
    if not train:
        return None

    accuracy = _order_model(cls)
    baseline = baseline_accuracy()
    if accuracy < baseline + MARGIN:
        std = _start_std(cls, d)
        fail(f"trained to reverse sequences of {TASK['min_len']} to {TASK['max_len']} symbols, "
             f"the model with your encoding gets {accuracy:.0%} of the positions right; the "
             f"best any model without positional information can do is {baseline:.1%}. Yours "
             f"must be at least {MARGIN * 100:.0f} points better.",
             _scale_hint(std) if std < 0.3 else
             "check the training of your table: it must be the encoding's only job to say "
             "where each token is, with values about as large as the embeddings (std 1).")
    return None


def _default_max_len_hint(error):
    return ("keep the signature of the exercise, cls(num_hiddens, dropout, max_len=1000), "
            "as PositionalEncoding's: a model built without max_len must accept sequences "
            "of up to 1000 positions.")


def _expect_default_max_len(module, d):
    """Built without max_len, the encoding must take 1000 positions (the default), and
    refuse 1001 (a larger default, such as the PyTorch tutorial's 5000, accepts it)."""
    X = torch.randn(1, 1001, d, generator=torch.Generator().manual_seed(65))
    with torch.no_grad():
        _forward(module.eval(), X[:, :1000], "X of shape (1, 1000, 16) with cls(16, 0.0), "
                 "max_len left at its default, 1000", hint_on_error=_default_max_len_hint)
        try:
            module(X)
        except Exception:  # any error: the learner's, or the failing slice's
            return
    size = sum(p.numel() for p in module.parameters() if p.requires_grad)
    fail("forward accepted X of shape (1, 1001, 16) with cls(16, 0.0), max_len left at its "
         f"default, without an error (your module has {size} trainable numbers): the "
         "default max_len is not 1000, so a model built without max_len silently takes "
         "positions the exercise's encoding has no vectors for.",
         "keep the signature of the exercise, cls(num_hiddens, dropout, max_len=1000), as "
         "PositionalEncoding's (not the PyTorch tutorial's max_len=5000).")


def _expect_float64(cls, d):
    """A float64 model (module.double()) on float64 X must give float64: the encoding keeps
    X's dtype, it does not cast to a fixed one."""
    case = "X of shape (2, 7, 16) in float64, cls(16, 0.0, max_len=50).double() (eval mode)"
    module = _make(cls, "cls(16, 0.0, max_len=50)", d, 0.0, max_len=50).double().eval()
    X = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(64)).double()
    with torch.no_grad():
        out = call(module, X, name="forward", case=case, hint_on_error=_slice_hint)
    expect_tensor(out, X.shape, what="forward(X)", case=case)
    if out.dtype != X.dtype:
        fail(f"forward(X) has dtype {out.dtype} on {case}, while X and every parameter are "
             f"{X.dtype}: the encoding must keep X's dtype (a float64 model, e.g. for a "
             "gradient check, must stay float64 throughout).",
             "do not cast the result or the table to a fixed dtype (.float(), "
             "dtype=torch.float32 in forward): return self.dropout(X + self.P[:, :n]), "
             "or cast with .to(X.dtype).")


def _expect_x_unscaled(X1, X2, out1, out2, when=""):
    """forward(X) = c X + E with c != 1: X is scaled (the Transformer's sqrt(d) habit)."""
    dX, dY = X1 - X2, out1 - out2
    c = float((dX * dY).sum() / (dX * dX).sum())
    if abs(c - 1) > 1e-3 and torch.allclose(dY, c * dX, atol=1e-4):
        d = X1.shape[-1]
        which = f" (sqrt(num_hiddens) = sqrt({d}))" if abs(c - math.sqrt(d)) < 1e-3 else ""
        fail(f"forward(X) - X changes with X{when}: your forward returns {c:.4g} * X + "
             f"P{which}, not X + P: it scales X before adding the encoding.",
             "do not scale X: return self.dropout(X + self.P[:, :n]). Multiplying the "
             "embeddings by sqrt(num_hiddens) is the model's job, done before the encoding "
             "is called (the course's PositionalEncoding does not scale X either).")


def _expect_too_long_refused(module, d):
    """A sequence longer than max_len has no vectors for its last positions: forward must
    raise (as PositionalEncoding and a sliced table do), not wrap, clamp or read rows past
    max_len. Tried with n = 60 and n = max_len + 1 = 51 (a table of max_len + 1 rows)."""
    for n in (60, 51):
        _expect_length_refused(module, d, n)


def _expect_length_refused(module, d, n):
    max_len = 50
    case = f"X of shape (1, {n}, 16) (longer than max_len={max_len})"
    X = torch.randn(1, n, d, generator=torch.Generator().manual_seed(61))
    module.eval()
    with torch.no_grad():
        try:
            out = module(X)
        except Exception:  # any error: the learner's, or the failing slice's
            return
        table = module(torch.zeros(1, max_len, d))[0]  # (max_len, d): each row's vector
    past = f"the positions 50 to {n - 1} get vectors" if n > 51 else \
        "position 50 gets a vector"
    if isinstance(out, torch.Tensor) and out.shape == X.shape:
        extra = (out - X)[0, max_len:]  # what positions 50..59 got
        size = sum(p.numel() for p in module.parameters() if p.requires_grad)
        if torch.allclose(extra, table[:n - max_len], atol=1e-5):
            past = ("the positions 50 to 59 reuse the vectors of positions 0 to 9 (i % "
                    "max_len): the model cannot tell position 55 from position 5")
        elif torch.allclose(extra, table[-1:].expand_as(extra), atol=1e-5):
            past = "the positions 50 to 59 all reuse the vector of position 49 (clamped)"
        elif size == (max_len + 1) * d:
            past = (f"your table has max_len + 1 = {max_len + 1} rows, one too many: the "
                    f"positions i < max_len are 0 to {max_len - 1}")
        elif size >= n * d:
            past = (f"your module has {size} trainable numbers, room for at least {n} "
                    f"positions: its table does not follow max_len={max_len}")
    fail(f"forward accepted {case} without an error: {past}. A learned table has one "
         "vector per position i < max_len; a longer sequence must raise an error, as the "
         "course's PositionalEncoding does (ValueError), or the model silently computes "
         "with positions it has no vectors for.",
         "build the table from max_len, nn.Parameter(torch.randn(1, max_len, "
         "num_hiddens)), and slice it, self.P[:, :n]: for n > max_len the sum then "
         "fails (or raise ValueError yourself). Do not wrap (i % max_len) or clamp the "
         "positions.")


def _expect_precision(module, dtype):
    """A table stored in a lower precision than X (float16, bfloat16) cannot be trained."""
    for name, p in module.named_parameters():
        if p.is_floating_point() and torch.finfo(p.dtype).eps > torch.finfo(dtype).eps:
            digits = round(-math.log10(torch.finfo(p.dtype).eps))
            adam = ", and Adam's eps=1e-8 is 0 in float16: in this checker's training " \
                "such a table makes the loss NaN after the first step" \
                if p.dtype == torch.float16 else ""
            fail(f"your encoding's parameter `{name}` has dtype {p.dtype}, while X and the "
                 f"rest of the model are {dtype}: {p.dtype} keeps only about {digits} "
                 f"significant digits, so small training steps on it are rounded away"
                 f"{adam}.",
                 "create the table with the default dtype, float32 (torch.randn(1, "
                 "max_len, num_hiddens) without .half() or dtype=).")


def _storages(module):
    return {p.untyped_storage().data_ptr(): name for name, p in module.named_parameters()
            if p.requires_grad and p.numel() > 0}


def _expect_own_parameters(cls, module, d):
    """Two instances must not share a parameter (a class attribute or a module cache):
    `module` against a second instance, and a third built right after the second with the
    same arguments (a single class-level slot, replaced when the shape changes)."""
    other = _make(cls, "a second cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0,
                  max_len=50)
    third = _make(cls, "a third cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0,
                  max_len=50)
    for first, second in ((module, other), (other, third)):
        shared = set(_storages(first)) & set(_storages(second))
        if shared:
            break
    if shared:
        name = _storages(first)[min(shared)]
        fail("two instances of your class, cls(16, 0.0, max_len=50) built twice, share "
             f"the parameter `{name}`: training one model would change the other, and "
             "every model would start from the same table whatever its seed.",
             "create the table in __init__ for each instance: self.P = nn.Parameter("
             "torch.randn(1, max_len, num_hiddens)), not in a class attribute, a dict kept "
             "between instances, or a module-level cache.")


def _expect_global_rng_left_alone(cls, d):
    """Building an instance must not reseed the global generator (torch.manual_seed in
    __init__): built under two different seeds, the generator must end in two states."""
    states = []
    for seed in (1, 2):
        with seeded(seed):
            call(cls, d, 0.0, max_len=50, name="your class",
                 case=f"cls(16, 0.0, max_len=50) built after torch.manual_seed({seed})")
            states.append(torch.random.get_rng_state())
    if torch.equal(*states):
        fail("building your class resets torch's global random generator: after "
             "cls(16, 0.0, max_len=50) built once after torch.manual_seed(1) and once "
             "after torch.manual_seed(2), the generator is in the same state. Every "
             "instance then starts from the same table, and every later draw (the other "
             "layers' initialisation, dropout, the batches) is the same whatever seed the "
             "caller set: training from three seeds gives one model three times.",
             "do not call torch.manual_seed (or torch.random.set_rng_state) in your class: "
             "seeding is the caller's job (book.set_seed at the top of a script), and "
             "torch.randn draws from the generator the caller seeded.")


def _expect_train_equals_eval(cls, module, X, out_eval):
    """With dropout 0.0, train mode must give what eval mode gives: only dropout differs."""
    case = "X of shape (2, 7, 16), cls(16, dropout=0.0), train mode"
    with torch.no_grad():
        out = _forward(module.train(), X, case)
    if torch.allclose(out, out_eval, atol=1e-6):
        return
    if (out == 0).all():
        fail(f"on {case} every entry of the output is 0: with dropout=0.0 your dropout "
             "drops everything, as nn.Dropout(1.0) would.",
             "the dropout argument is the share of entries dropped (the rate), not the "
             "share kept: nn.Dropout(dropout), not nn.Dropout(1 - dropout).")
    kept = out != 0
    ratio = (out[kept] / out_eval[kept]).median().item()
    dropped_like = _one_of(out, [torch.zeros_like(out), out_eval * ratio], atol=1e-4)
    if (out == 0).any() and dropped_like:
        _check_dropout(cls, X.shape[-1])  # a fixed rate: said at dropout 0.5, as always
        fail(f"on {case} {(out == 0).double().mean().item():.0%} of the entries are "
             f"dropped and the others scaled by {ratio:.3g}, a dropout rate of "
             f"{1 - 1 / ratio:.2g}: with dropout=0.0 nothing may be dropped.",
             "use the constructor's dropout argument as the rate (the share dropped): "
             "nn.Dropout(dropout); do not fix the rate, and do not pass 1 - dropout.")
    if torch.allclose(out_eval, X, atol=1e-6):
        fail("in eval mode your encoding returns X unchanged, while in train mode it adds "
             "the position vectors: the positions must be added in both modes (the model "
             "needs them at test time too); only dropout is off in eval mode.",
             "return self.dropout(X + P[:, :n]) in every mode: nn.Dropout switches itself "
             "off in eval mode, nothing else should depend on self.training.")
    fail(f"on {case} the output differs from eval mode's, although dropout=0.0 drops "
         "nothing: only dropout may differ between train and eval mode.",
         "return self.dropout(X + P[:, :n]) in every mode, with self.dropout = "
         "nn.Dropout(dropout); nothing else should depend on self.training.")


def _expect_current_parameters(cls, module, d):
    """After a change of the parameters (an optimizer step), the output must follow them:
    a module called before the change must give what a twin called only after it gives."""
    twin = _make(cls, "a second cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0,
                 max_len=50).eval()
    X = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():
        before = _forward(module.eval(), X, "X of shape (2, 7, 16), eval mode")
        for (_, p), (_, q) in zip(module.named_parameters(), twin.named_parameters()):
            if p.requires_grad and p.is_floating_point():
                step = 0.5 * torch.randn(p.shape, generator=g).to(p.dtype)
                p.add_(step)
                q.add_(step)
        after = _forward(module, X, "the same X after a change of the parameters")
        fresh = _forward(twin, X, "the same X, on a twin module built and changed alike")
    if torch.allclose(after, fresh, atol=1e-5):
        _expect_added_after_change(module, X, after)
    _expect_forward_leaves_parameters(module, X, g)
    if not torch.allclose(after, fresh, atol=1e-5):
        same = torch.allclose(after, before, atol=1e-6)
        fail("after a change of your encoding's parameters (what an optimizer step does), "
             "its output " + ("stays what it was before" if same else "is not what the "
             "changed parameters give") + ": forward uses a copy of the table made at an "
             "earlier call, so the training would never show in the output.",
             "look the table up anew in every forward: return self.dropout(X + "
             "self.P[:, :n]); keep no copies (.clone(), a cached slice) between calls.")


def _expect_added_after_change(module, X, out):
    """After a change of the parameters, forward(X) - X is still the same for every X: no
    parameter acts on X (a learnable gain started at 1 looks right before training)."""
    X2 = torch.randn(X.shape, generator=torch.Generator().manual_seed(17))
    with torch.no_grad():
        out2 = _forward(module, X2, "another X of shape (2, 7, 16) after a change of the "
                                    "parameters")
    if torch.allclose(out - X, out2 - X2, atol=1e-5):
        return
    _expect_x_unscaled(X, X2, out, out2, " after a change of its parameters (what an "
                       "optimizer step does): a trainable gain on X, started at 1, looks "
                       "right before training, but training moves it")
    fail("after a change of your encoding's parameters (what an optimizer step does), "
         "forward(X) - X changes with X: a parameter acts on X itself, so once trained "
         "the output is no longer X plus the position vectors.",
         "add the table to X and do nothing else to X: return self.dropout(X + "
         "self.P[:, :n]).")


def _expect_table_read_anew(cls, d):
    """The table is read anew at every call, whatever came before: after a first call under
    torch.no_grad() (a validation pass), a training call at the same length gives the
    parameters gradients; after .double() following a first call, the output follows the
    float64 parameters and their gradients are float64 (no slice kept from a call before)."""
    X = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(9))
    weights = torch.randn(2, 7, d, generator=torch.Generator().manual_seed(10))
    module = _make(cls, "cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0, max_len=50)
    with torch.no_grad():
        _forward(module.eval(), X, "X of shape (2, 7, 16), eval mode, under torch.no_grad()")
    out = _forward(module.train(), X, "the same X, train mode, with autograd on")
    params = [p for p in module.parameters() if p.requires_grad]
    grads = torch.autograd.grad((out * weights).sum(), params, allow_unused=True) \
        if out.requires_grad else []
    if not any(g is not None and g.abs().sum() > 0 for g in grads):
        fail("after a first call under torch.no_grad() (in eval mode: a validation pass), a "
             "training call at the same length, 7, gives your encoding's parameters no "
             "gradient: forward reuses something it made at the first call (such as a "
             "slice of the table kept per length), made without autograd, so no training "
             "step after a validation pass would change the table.",
             "look the table up anew in every forward: return self.dropout(X + "
             "self.P[:, :n]); keep no slices or copies between calls.")

    module = _make(cls, "cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0, max_len=50)
    twin = _make(cls, "a second cls(num_hiddens=16, dropout=0.0, max_len=50)", d, 0.0,
                 max_len=50).double().eval()
    _forward(module.eval(), X, "X of shape (2, 7, 16), eval mode")
    module.double()
    with torch.no_grad():
        unchanged = _forward(module, X.double(), "X of shape (2, 7, 16) in float64, after "
                             ".double() on a module called before in float32")
    g = torch.Generator().manual_seed(11)
    with torch.no_grad():  # an optimizer step on both, in float64
        for p, q in zip(module.parameters(), twin.parameters()):
            if p.requires_grad and p.is_floating_point():
                step = 0.5 * torch.randn(p.shape, generator=g, dtype=torch.float64)
                p.add_(step.to(p.dtype))
                q.add_(step.to(q.dtype))
    case = ("X of shape (2, 7, 16) in float64, after .double() on a module called before "
            "in float32 (and a change of its parameters)")
    out = _forward(module, X.double(), case)
    with torch.no_grad():
        fresh = _forward(twin, X.double(), "the same X, on a twin module made float64 "
                                           "before any call")
    if not torch.allclose(out, fresh, atol=1e-5):
        fail(f"on {case}, your output is not what the float64 parameters give: forward "
             "uses a slice or copy of the table made at the first call, before .double() "
             "replaced the parameters' data, so neither the conversion nor later training "
             "shows in the output.",
             "look the table up anew in every forward: return self.dropout(X + "
             "self.P[:, :n]); keep no slices or copies between calls.")
    if torch.allclose(out, unchanged, atol=1e-6):
        fail(f"on {case}, your output is what it was before the change of the "
             "parameters: after .double() forward no longer reads the parameters. It "
             "uses a tensor taken from the table before the conversion (in __init__ or at "
             "an earlier call, e.g. self.table = self.P[0]: a view of the float32 data, "
             "which .double() replaces), so a float64 model never shows its training.",
             "look the table up anew in every forward, from the parameter itself: return "
             "self.dropout(X + self.P[:, :n]); keep no views, slices or copies of it in "
             "attributes.")
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    if out.requires_grad:
        grads = torch.autograd.grad((out * weights.double()).sum(), [p for _, p in params],
                                    allow_unused=True)
        for (name, p), grad in zip(params, grads):
            if grad is not None and grad.dtype != p.dtype:
                fail(f"on {case}, the gradient of your parameter `{name}` is {grad.dtype}, "
                     f"the parameter {p.dtype}: forward computes with a tensor of the table "
                     "kept from a call before .double().",
                     "look the table up anew in every forward: return self.dropout(X + "
                     "self.P[:, :n]); keep no slices or copies between calls.")


def _expect_forward_leaves_parameters(module, X, g):
    """Fail if forward (eval mode, no_grad) writes into the parameters, e.g. the in-place
    renormalisation of nn.Embedding(max_norm=...) or an in-place clamp_ of the table (after
    a change of the parameters of std 0.5, some entries lie beyond any bound a learner
    would pick)."""
    with torch.no_grad():
        for p in module.parameters():
            if p.requires_grad and p.is_floating_point():
                p.add_(0.5 * torch.randn(p.shape, generator=g).to(p.dtype))
        before = [p.detach().clone() for p in module.parameters()]
        module(X)
    for (name, p), old in zip(module.named_parameters(), before):
        if not torch.equal(p, old):
            fail(f"forward changes your encoding's parameter `{name}` in place (in eval "
                 "mode, under torch.no_grad): the output is not what the parameters give, "
                 "and every call rewrites what the optimizer has learned. An in-place "
                 "operation on the table in forward (self.P.clamp_(...), .renorm_, "
                 ".div_, .copy_, even under torch.no_grad()) does this, and so does "
                 "nn.Embedding(..., max_norm=...): it renormalises in place every row it "
                 "looks up whose norm exceeds max_norm.",
                 "forward must only read the table: return self.dropout(X + "
                 "self.P[:, :n]) with no in-place operation on self.P, or "
                 "nn.Embedding(max_len, num_hiddens) without max_norm.")


def _check_dropout(cls, d):
    """Train mode at two rates (0.5 and 0.2, so that a rate read as the keep probability
    shows): every entry is 0 or (X + E) / (1 - p), a share p of them 0, the mask drawn anew
    for every entry and every call; and also on the first call of a fresh instance."""
    for p in DROPOUTS:
        _check_dropout_at(cls, d, p)
    _check_first_call_dropout(cls, d, DROPOUTS[0])
    _expect_dropout_follows_seed(cls, d, DROPOUTS[0])


def _expect_dropout_follows_seed(cls, d, p):
    """The dropout masks come from the generator the caller seeded: an instance built and
    called after torch.manual_seed(1) and one built and called after torch.manual_seed(2)
    drop different entries (no private generator seeded in __init__, which drops the same
    entries at every instance's k-th call whatever the seed, and which lives on the CPU
    only). A right dropout gives equal masks with probability 2 ** -2560."""
    X = torch.randn(8, 20, d, generator=torch.Generator().manual_seed(68))
    kept = []
    for seed in (1, 2):
        case = (f"cls(16, dropout={p}, max_len=50) built and called in train mode after "
                f"torch.manual_seed({seed}), X of shape (8, 20, 16)")
        with torch.no_grad(), seeded(seed):
            module = call(cls, d, p, max_len=50, name="your class", case=case)
            kept.append(_forward(module.train(), X, case) != 0)
    if torch.equal(*kept):
        fail(f"built and called in train mode once after torch.manual_seed(1) and once "
             f"after torch.manual_seed(2), cls(16, dropout={p}, max_len=50) drops the same "
             "entries of X of shape (8, 20, 16): your dropout masks come from a generator "
             "of your own with a fixed seed (torch.Generator().manual_seed(...) made in "
             "__init__), not from the one the caller seeds. Every model then drops the "
             "same entries at its k-th step whatever its seed, and the generator lives on "
             "the CPU, so on a GPU model the masks are on the wrong device.",
             "draw the masks from the global generator: self.dropout = nn.Dropout(dropout) "
             "(or F.dropout, or torch.rand without generator=); seeding is the caller's job.")


def _check_first_call_dropout(cls, d, p):
    """The very first call of a fresh instance, in train mode, drops a share p too (no
    warm-up or call counter kept on the module)."""
    case = (f"the first call of a fresh cls(16, dropout={p}, max_len=50), in train mode, "
            "X of shape (8, 20, 16)")
    module = _make(cls, f"cls(16, dropout={p}, max_len=50)", d, p, max_len=50)
    X = torch.randn(8, 20, d, generator=torch.Generator().manual_seed(67))
    with torch.no_grad(), seeded(3):
        Y = _forward(module.train(), X, case)
        E = _forward(module.eval(), torch.zeros(1, 20, d), "zeros of shape (1, 20, 16), "
                     "eval mode, after that first call")
    Z = X + E
    if not _one_of(Y, [torch.zeros_like(Z), Z / (1 - p)]):
        fail(f"on {case} the output is not dropout(X + P[:, :n])"
             + (": no entry is dropped" if torch.allclose(Y, Z, atol=1e-5) else "")
             + ", while later calls of an instance are right: forward behaves differently "
             "at its first call (a call counter or other state kept on the module).",
             "apply dropout at every call in train mode, the first one too: return "
             "self.dropout(X + self.P[:, :n]), with nothing kept between calls.")
    dropped = (Y == 0).double().mean().item()
    se = math.sqrt(p * (1 - p) / Y.numel())
    if abs(dropped - p) > SE_TOLERANCE * se:
        fail(f"on {case}, {dropped:.1%} of the entries are dropped (0); expected {p:.0%} "
             f"(tolerance {SE_TOLERANCE} standard errors, {SE_TOLERANCE * se:.1%}), while "
             "later calls of an instance drop the right share: forward behaves "
             "differently at its first call.",
             "apply dropout at every call in train mode, the first one too: return "
             "self.dropout(X + self.P[:, :n]), with nothing kept between calls.")


def _agreement(a, b):
    """Share of entries where two keep-masks agree, and the most a share of independent
    draws (each entry kept with the observed rate) reaches but with probability < 1e-9."""
    keep = torch.cat([a.reshape(-1), b.reshape(-1)]).double().mean().item()
    expected = keep ** 2 + (1 - keep) ** 2
    # Hoeffding's bound, plus 0.05 for the error of the observed rate
    margin = math.sqrt(math.log(1e9) / (2 * a.numel())) + 0.05
    return (a == b).double().mean().item(), expected + margin


def _expect_independent_masks(module, X, kept, kept_again, p, case):
    """Dropout decides every entry on its own: the masks of two calls, of two examples of
    the batch, of two features and of two positions agree only as often as independent
    draws do (a share p**2 + (1 - p)**2)."""
    d = X.shape[-1]
    agree, most = _agreement(kept, kept_again)
    if agree > most:
        fail(f"on {case}, two calls on the same X drop the same entries ({agree:.0%} of "
             f"the entries alike; independent draws agree on about "
             f"{p ** 2 + (1 - p) ** 2:.0%}): "
             "the dropout mask is drawn once and reused, so the same units are dropped at "
             "every training step.",
             "draw a new mask at every call: self.dropout = nn.Dropout(dropout) does; keep "
             "no mask between calls.")
    agree, most = _agreement(kept[0::2], kept[1::2])
    if agree > most:
        fail(f"on {case}, the examples of the batch get the same dropout mask ({agree:.0%} "
             f"of the entries alike between examples; independent draws agree on about "
             f"{p ** 2 + (1 - p) ** 2:.0%}): dropout must decide every entry on its own.",
             "apply nn.Dropout(dropout) to the whole (batch, n, num_hiddens) sum, not a "
             "mask of shape (1, n, num_hiddens) broadcast over the batch.")
    agree, most = _agreement(kept[..., 0::2], kept[..., 1::2])
    if agree > most:
        whole = (~kept).all(-1).double().mean().item()
        fail(f"on {case}, the features of a position are dropped together: in {whole:.0%} "
             f"of the positions all {d} features are 0 (independent dropout of each entry: "
             f"{p ** d:.0e}). Dropout must decide every entry on its own, not whole "
             "position vectors.",
             "apply nn.Dropout(dropout) to the sum X + P[:, :n] itself, not a mask of "
             "shape (batch, n, 1).")
    agree, most = _agreement(kept[:, 0::2], kept[:, 1::2])
    if agree > most:
        fail(f"on {case}, the positions of a sequence get the same dropout mask "
             f"({agree:.0%} of the entries alike between positions; independent draws "
             f"agree on about {p ** 2 + (1 - p) ** 2:.0%}): dropout must decide every "
             "entry on its own.",
             "apply nn.Dropout(dropout) to the sum X + P[:, :n] itself, not a mask of "
             "shape (batch, 1, num_hiddens).")


def _check_dropout_at(cls, d, p):
    """Train mode, dropout p: every entry is 0 or (X + E) / (1 - p), a share p of them 0,
    drawn independently."""
    n = DROPOUT_LENGTHS.get(p, 20)
    case = f"cls(16, dropout={p}) in train mode, X of shape (8, {n}, 16)"
    module = _make(cls, f"cls(16, dropout={p}, max_len=50)", d, p, max_len=50)
    g = torch.Generator().manual_seed(66)
    X = torch.randn(8, n, d, generator=g)
    with torch.no_grad(), seeded(1):
        E = _forward(module.eval(), torch.zeros(1, n, d), f"zeros of shape (1, {n}, 16), "
                     f"eval mode, dropout={p}")
        E2 = _forward(module, torch.zeros(1, n, d), "the same, again")
        Y = _forward(module.train(), X, case)
        Y_again = _forward(module, X, f"the same X again, dropout={p}, train mode")
    if not torch.equal(E, E2):
        fail(f"in eval mode your encoding with dropout={p} gives different outputs for the "
             "same input: dropout must be off in eval mode.",
             "use nn.Dropout (or F.dropout(x, p, training=self.training)).")
    Z, scale = X + E, 1 / (1 - p)
    if _one_of(Y, [torch.zeros_like(Z), Z * scale]):
        dropped = (Y == 0).double().mean().item()
        if 0.02 < dropped < 0.98:
            _expect_independent_masks(module, X, Y != 0, Y_again != 0, p, case)
        se = math.sqrt(p * (1 - p) / Y.numel())
        if abs(dropped - p) <= SE_TOLERANCE * se:
            return
        fail(f"on {case}, {dropped:.1%} of the entries are dropped (0); expected "
             f"{p:.0%} (tolerance {SE_TOLERANCE} standard errors, {SE_TOLERANCE * se:.1%}).",
             "use the dropout argument as the rate (the share dropped): "
             "nn.Dropout(dropout), not nn.Dropout(1 - dropout)."
             if abs(dropped - (1 - p)) <= SE_TOLERANCE * se else
             "drop each entry with probability exactly p, the dropout argument: "
             "nn.Dropout(dropout) does, or by hand keep = torch.rand_like(Y) >= p. A coarse "
             "draw (keep iff torch.randint(0, 10) >= 10 * p drops ceil(10 p) / 10) or a "
             "rate changed on the way is not the rate given.")
    if torch.allclose(Y, Z, atol=1e-5):
        fail(f"on {case} no entry is dropped: your forward applies no dropout in train mode.",
             "the exercise asks forward to add the position vectors and apply dropout: "
             "return self.dropout(X + P[:, :n]) with self.dropout = nn.Dropout(dropout).")
    kept = Y != 0
    ratio = (Y[kept] / Z[kept]).median().item()
    if _one_of(Y, [torch.zeros_like(Z), Z * ratio], atol=1e-4) \
            and abs(ratio / scale - 1) > 0.01:
        fail(f"on {case} the kept entries are (X + P) times {ratio:.3g}, the scaling of a "
             f"dropout rate {1 - 1 / ratio:.2g}, not the dropout argument {p}.",
             "pass the constructor's dropout argument to nn.Dropout as the rate (the share "
             "dropped, not kept); do not fix the rate.")
    if _one_of(Y, [torch.zeros_like(Z), Z * ratio], atol=1e-4):
        rounded = [f"{name} gives {torch.tensor(scale).to(dtype).item():.7g}"
                   for name, dtype in (("float16", torch.float16), ("bfloat16", torch.bfloat16))]
        fail(f"on {case} the kept entries are (X + P) times {ratio:.7g}, not 1 / (1 - {p}) "
             f"= {scale:.7g} (off by {abs(ratio / scale - 1):.1e} of it): the dropout scale "
             f"is rounded ({', '.join(rounded)}), so every kept entry is off by that much "
             "and the output's mean is no longer X + P's.",
             "scale the kept entries by 1 / (1 - p) in X's dtype: nn.Dropout(dropout) does; "
             "by hand, Y * keep / (1 - p) with p the Python float, never a scale or mask "
             "computed in float16 or bfloat16.")
    if _one_of(Y, [X, X + E * scale]):
        fail(f"on {case} dropout acts on the position vectors only (X + dropout(P)).",
             "apply dropout to the sum: dropout(X + P[:, :n]), as PositionalEncoding does.")
    if _one_of(Y, [E, X * scale + E]):
        fail(f"on {case} dropout acts on X only (dropout(X) + P).",
             "apply dropout to the sum: dropout(X + P[:, :n]), as PositionalEncoding does.")
    fail(f"on {case} the output is not dropout(X + P[:, :n]): each entry should be either 0 "
         f"or (X + P) / (1 - {p}).",
         "apply dropout once, to the sum X + P[:, :n], with the constructor's rate.")
