"""Round 8 red team (writer D, issue 12), ch11_online: online_softmax_attention (exercise
11.1). Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions
written from the exercise text alone; copied from
/work/redteam/round8/D/sols/ch11_online.py with the names W01_x written W_01_x. Wrong
ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_
entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _wd(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _online(Q, K, V, block_size, causal=False, *, init_m=float("-inf"),
            fill=float("-inf"), order=None, acc_like_q=False, scale_d=None,
            work=None, drop_last=False, first_block_max=False, mask_local=False):
    wd = work or _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    dv = v.shape[-1]
    scale = 1 / math.sqrt(scale_d or d)
    M = torch.full((b, m, 1), init_m, dtype=wd, device=Q.device)
    L = torch.zeros((b, m, 1), dtype=wd, device=Q.device)
    acc = torch.zeros((b, m, d if acc_like_q else dv), dtype=wd, device=Q.device)
    rows = torch.arange(m, device=Q.device)[:, None]
    starts = list(range(0, n, block_size))
    if drop_last:
        starts = list(range(0, (n // block_size) * block_size, block_size)) or [0]
    if order == "reverse":
        starts = starts[::-1]
    for idx, s0 in enumerate(starts):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) * scale
        if causal:
            cols = torch.arange(s0, s0 + kb.shape[1], device=Q.device)[None, :]
            if mask_local:
                cols = cols - s0
            s = s.masked_fill(cols > rows, fill)
        if first_block_max and idx > 0:
            M_new = M
        else:
            M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)


# ---------------------------------------------------------------- correct / odd
def C_01_online(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def O_02_reverse_blocks_guarded(Q, K, V, block_size, causal=False):
    """Processes key blocks from last to first; guards exp(-inf - -inf) with where()."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    rows = torch.arange(m)[:, None]
    for s0 in reversed(range(0, n, block_size)):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isinf(M_new), torch.zeros_like(M_new), M_new)
        alpha = torch.exp(M - safe)
        p = torch.exp(s - safe)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)


def O_03_finfo_min_init_and_fill(Q, K, V, block_size, causal=False):
    """Running max starts at finfo.min and hidden keys get finfo.min (float32 work):
    exp(finfo.min - score) is 0, as with -inf."""
    f = torch.finfo(_wd(Q)).min
    return _online(Q, K, V, block_size, causal, init_m=f, fill=f)


def O_04_skip_blocks_above_diagonal(Q, K, V, block_size, causal=False):
    """Stops at the first block that starts after the last query (causal)."""
    if not causal:
        return _online(Q, K, V, block_size)
    m = Q.shape[1]
    n_eff = min(K.shape[1], m)
    return _online(Q, K[:, :n_eff], V[:, :n_eff], block_size, True)


# ---------------------------------------------------------------- wrong
def W_01_scale_by_value_dim(Q, K, V, block_size, causal=False):
    """Scales by 1/sqrt(value_dim) instead of 1/sqrt(d)."""
    return _online(Q, K, V, block_size, causal, scale_d=V.shape[-1])


def W_02_acc_shaped_like_Q(Q, K, V, block_size, causal=False):
    """Accumulator zeros_like(Q): (batch, m, d); right only when value_dim == d."""
    return _online(Q, K, V, block_size, causal, acc_like_q=True)


def W_03_reverse_blocks_unguarded(Q, K, V, block_size, causal=False):
    """Blocks from last to first, no guard: exp(-inf - (-inf)) = NaN for causal rows whose
    first processed block is fully hidden."""
    return _online(Q, K, V, block_size, causal, order="reverse")


def W_04_drops_partial_last_block(Q, K, V, block_size, causal=False):
    """range(0, n // block_size * block_size, block_size): the short last block is lost."""
    return _online(Q, K, V, block_size, causal, drop_last=True)


def W_05_max_from_first_block_only(Q, K, V, block_size, causal=False):
    """Takes the maximum from the first block and never updates it."""
    return _online(Q, K, V, block_size, causal, first_block_max=True)


def W_06_fill_minus_1e4(Q, K, V, block_size, causal=False):
    """Hidden keys get -1e4 (a 'large negative number')."""
    return _online(Q, K, V, block_size, causal, fill=-1e4)


# Accepted on purpose (A_), for now: float16 running statistics are what the exercise's
# own solution and 29 right entries of rounds 4 to 7 do, and the text only says "float16
# inputs". They drift with the number of blocks: 64 queries, 2048 float16 keys in 128
# blocks of 16, V = 3 + randn: 1.6e-2 from the float64 reference, against 9.6e-4 to
# 1.1e-3 with float32 running statistics (writer D: 4.2e-2 vs 9.8e-4 at 8192 keys).
# Requiring float32 (as FlashAttention does) means renaming those 29 entries: the lead's
# call (round-8 fixer D report).
def A_07_float16_accumulators(Q, K, V, block_size, causal=False):
    """Works in the input dtype: float16 scores, running sum and weighted sum."""
    if Q.dtype == torch.float16:
        return _online(Q, K, V, block_size, causal, work=torch.float16)
    return _online(Q, K, V, block_size, causal)


def W_08_causal_mask_block_local(Q, K, V, block_size, causal=False):
    """Compares the query index with the key's index inside its block."""
    return _online(Q, K, V, block_size, causal, mask_local=True)


def W_09_init_max_zero(Q, K, V, block_size, causal=False):
    """Running max starts at 0: all-negative scores (-5000) underflow to 0/0."""
    return _online(Q, K, V, block_size, causal, init_m=0.0)


def W_10_query_blocks_full_keys(Q, K, V, block_size, causal=False):
    """Blocks the queries (exact softmax against all keys per block of queries): right
    values, but a (block_size, num_keys) score matrix per step, not key blocks."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    m, n = q.shape[1], k.shape[1]
    outs = []
    for s0 in range(0, m, block_size):
        s = q[:, s0:s0 + block_size] @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        if causal:
            rows = torch.arange(s0, min(s0 + block_size, m))[:, None]
            s = s.masked_fill(torch.arange(n)[None] > rows, float("-inf"))
        outs.append(torch.softmax(s, -1) @ v)
    return torch.cat(outs, 1).to(Q.dtype)


def W_11_full_causal_mask_bool(Q, K, V, block_size, causal=False):
    """Builds the whole (m, n) boolean causal mask once, then slices it per block."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    full = torch.ones(m, n, dtype=torch.bool).triu(1) if causal else None
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(full[:, s0:s0 + block_size], float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)


def W_12_batch_wide_max_per_row_of_batch(Q, K, V, block_size, causal=False):
    """One running max per batch element (over all its queries), not per query."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    M = torch.full((b, 1, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    rows = torch.arange(m)[:, None]
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        M_new = torch.maximum(M, s.amax((-1, -2), keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)


def O_13_inplace_running_sums(Q, K, V, block_size, causal=False):
    """Updates the running sums in place (mul_/add_). I expected backward to raise; it
    gives the reference gradients (checked by hand), so this is right."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    rows = torch.arange(m)[:, None]
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L.mul_(alpha).add_(p.sum(-1, keepdim=True))
        acc.mul_(alpha).add_(p @ vb)
        M = M_new
    return (acc / L).to(Q.dtype)


def W_14_no_grad_for_memory(Q, K, V, block_size, causal=False):
    """Runs under torch.no_grad() 'to keep memory low': no gradient at all."""
    with torch.no_grad():
        return _online(Q, K, V, block_size, causal)


def W_15_causal_strict(Q, K, V, block_size, causal=False):
    """Query i sees keys j < i (hides the diagonal); row 0 then uses... guards with
    nan_to_num."""
    if not causal:
        return _online(Q, K, V, block_size)
    wd = _wd(Q)
    out = _online(Q[:, :, :], K, V, block_size, False) * 0  # shape helper
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    m = q.shape[1]
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(m, m, dtype=torch.bool).triu(0), float("-inf"))
    w = torch.softmax(s, -1).nan_to_num()
    return (w @ v).to(Q.dtype) + out


def W_16_split_k_store_partials(Q, K, V, block_size, causal=False):
    """Split-K: stores every block's (max, sum, partial output) and combines at the end:
    right values, but keeps num_keys / block_size partial outputs of shape
    (num_queries, value_dim), not one running triple."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    rows = torch.arange(m)[:, None]
    Ms, Ls, Os = [], [], []
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        mb = s.amax(-1, keepdim=True)
        mb_safe = torch.where(torch.isinf(mb), torch.zeros_like(mb), mb)
        p = torch.exp(s - mb_safe)
        Ms.append(mb); Ls.append(p.sum(-1, keepdim=True)); Os.append(p @ vb)
    M = torch.stack(Ms).amax(0)
    L = sum(l * torch.exp(mb - M) for mb, l in zip(Ms, Ls))
    O = sum(o * torch.exp(mb - M) for mb, o in zip(Ms, Os))
    return (O / L).to(Q.dtype)


def W_17_scales_Q_in_place(Q, K, V, block_size, causal=False):
    """Q /= sqrt(d) (and then no scaling inside): changes the caller's Q."""
    d = Q.shape[-1]
    Q /= math.sqrt(d)
    return _online(Q, K, V, block_size, causal, scale_d=1)


def O_18_normalised_accumulator(Q, K, V, block_size, causal=False):
    """Keeps the running output already divided by the running sum (as FlashAttention-1's
    paper writes it)."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    O = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    rows = torch.arange(m)[:, None]
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        a = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L_new = L * a + p.sum(-1, keepdim=True)
        O = (O * (L * a) + p @ vb) / L_new
        M, L = M_new, L_new
    return O.to(Q.dtype)


_mask_cache = {}


def W_19_causal_masks_cached_by_block(Q, K, V, block_size, causal=False):
    """(Right: the cached mask is rebuilt when its shape differs.) Caches each block mask per (block_size, block start), built for the first
    sequence length seen; later lengths slice or broadcast the stale masks."""
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    for s0 in range(0, n, block_size):
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            key = (block_size, s0)
            if key not in _mask_cache:
                rows = torch.arange(m)[:, None]
                _mask_cache[key] = torch.arange(s0, s0 + kb.shape[1])[None] > rows
            mask = _mask_cache[key]
            if mask.shape != s.shape[1:]:
                mask = torch.arange(s0, s0 + kb.shape[1])[None] > torch.arange(m)[:, None]
                _mask_cache[key] = mask
            s = s.masked_fill(mask, float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)


def S_20_calls_sdpa(Q, K, V, block_size, causal=False):
    """Calls F.scaled_dot_product_attention (forbidden by the text); CPU SDPA has a
    memory-efficient flash kernel, so the memory budget may not see it."""
    from torch.nn import functional as F
    return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)


def S_21_sdpa_via_getattr(Q, K, V, block_size, causal=False):
    """Calls torch.nn.functional.scaled_dot_product_attention through getattr (hidden
    from a source grep) on the whole input."""
    import importlib
    fn = getattr(importlib.import_module("torch.nn.functional"),
                 "scaled_" + "dot_product_attention")
    return fn(Q, K, V, is_causal=causal)


# S_22 and S_23 reach the same kernel through torch._C._nn and torch.ops.aten: deliberate
# bypasses of the 'do not call scaled_dot_product_attention' rule, not a learner's
# mistake; left as S_ (not tested).
def S_22_sdpa_via_torch_C(Q, K, V, block_size, causal=False):
    """Adversarial, not a learner's mistake: the C binding torch._C._nn.
    scaled_dot_product_attention."""
    return torch._C._nn.scaled_dot_product_attention(Q, K, V, is_causal=causal)


def S_23_sdpa_via_aten_op(Q, K, V, block_size, causal=False):
    """Adversarial: torch.ops.aten.scaled_dot_product_attention."""
    return torch.ops.aten.scaled_dot_product_attention(Q, K, V, is_causal=causal)


def W_24_bfloat16_returns_float32(Q, K, V, block_size, causal=False):
    """Returns float32 for bfloat16 inputs (float16 handled)."""
    out = _online(Q, K, V, block_size, causal)
    return out.float() if Q.dtype == torch.bfloat16 else out


_plans = {}


def W_25_block_plan_cached_by_block_size(Q, K, V, block_size, causal=False):
    """Caches the list of block starts per block_size, built for the first num_keys seen:
    a later call with more keys never visits the extra blocks (fewer: empty slices)."""
    if block_size not in _plans:
        _plans[block_size] = list(range(0, K.shape[1], block_size))
    starts = _plans[block_size]
    wd = _wd(Q)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    M = torch.full((b, m, 1), float("-inf"), dtype=wd)
    L = torch.zeros((b, m, 1), dtype=wd)
    acc = torch.zeros((b, m, v.shape[-1]), dtype=wd)
    rows = torch.arange(m)[:, None]
    for s0 in starts:
        kb, vb = k[:, s0:s0 + block_size], v[:, s0:s0 + block_size]
        if kb.shape[1] == 0:
            continue
        s = q @ kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(s0, s0 + kb.shape[1])[None] > rows, float("-inf"))
        M_new = torch.maximum(M, s.amax(-1, keepdim=True))
        alpha = torch.exp(M - M_new)
        p = torch.exp(s - M_new)
        L = L * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        M = M_new
    return (acc / L).to(Q.dtype)
