"""Round 14 red team (writer F, issue 12), ch11_online: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round14/F/sols/ch11_online_softmax.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_16 (lazy rescaling: the running max moved only when a block's max passes
it by more than 12, sums kept in float16; exp(s - m) reaches e^12 > 65504, inf, then NaN) was
accepted: no float16 case had a block max 11.1 to 12 above the running max.
check_online_softmax_attention now has the float16 case _ONLINE_RISING_F16 (1 batch, 8
queries, 3 keys, block_size=1, query i's scores 0, J_i, 2 J_i with J_i = 11.125 .. 12), which
every lazy threshold of 11.125 or more fails in float16, with a hint naming the lagging max.
A_14 (1/sqrt(d) rounded in the input dtype) is accepted on purpose (standing ruling: Q K^T in
the input dtype is accepted)."""
# flake8: noqa
import math
import torch
CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"

_HALF = (torch.float16, torch.bfloat16)


def _ref(Q, K, V, block_size, causal=False, *, ct=None, order=None, mask_ctx=None,
         detach_max=False, scale=None, lazy=None, mask_local=False, keep_last=True,
         alpha_acc=True, stop_early=True, full_mask=False, inplace=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    dtype = Q.dtype
    if ct is None:
        ct = torch.float32 if dtype in _HALF else dtype
    sc = 1.0 / math.sqrt(d) if scale is None else scale
    q = Q.to(ct)
    m = torch.full((b, nq, 1), float("-inf"), dtype=ct, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=ct, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=ct, device=Q.device)
    starts = list(range(0, nk, block_size))
    if not keep_last:
        starts = [s for s in starts if s + block_size <= nk] or [0]
    if order == "reverse":
        starts = starts[::-1]
    qi = torch.arange(nq, device=Q.device)[:, None]
    if full_mask and causal:
        big = qi < torch.arange(nk, device=Q.device)[None]
    for s0 in starts:
        if causal and stop_early and s0 > nq - 1 and order is None:
            break
        kb = K[:, s0:s0 + block_size].to(ct)
        vb = V[:, s0:s0 + block_size].to(ct)
        s = (q @ kb.transpose(1, 2)) * sc
        if causal:
            if full_mask:
                mask = big[:, s0:s0 + kb.shape[1]]
            else:
                ctx = mask_ctx() if mask_ctx else torch.no_grad()
                with ctx:
                    kj = torch.arange(kb.shape[1], device=Q.device)[None]
                    mask = qi < (kj if mask_local else kj + s0)
            s = s.masked_fill(mask, float("-inf"))
        bm = s.amax(-1, keepdim=True)
        if detach_max:
            with torch.no_grad():
                m_new = torch.maximum(m, bm)
        else:
            m_new = torch.maximum(m, bm)
        if lazy is not None:
            # keep the old max unless the new one exceeds it by more than `lazy`
            keep = (m_new - m) <= lazy
            m_new = torch.where(keep & torch.isfinite(m), m, m_new)
        safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        alpha = torch.exp(m - safe)
        p = torch.exp(s - safe)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = (acc * alpha if alpha_acc else acc) + p @ vb
        m = m_new
    return (acc / l).to(dtype)


def C_01_reference(Q, K, V, block_size, causal=False):
    return _ref(Q, K, V, block_size, causal)


def C_02_native_dtype(Q, K, V, block_size, causal=False):
    """Accumulators in the input dtype (accepted for half types by earlier rulings)."""
    return _ref(Q, K, V, block_size, causal, ct=Q.dtype)


def O_03_reverse_block_order(Q, K, V, block_size, causal=False):
    """Blocks visited right to left; fully hidden first blocks handled (m stays -inf)."""
    return _ref(Q, K, V, block_size, causal, order="reverse")


def O_04_detached_running_max(Q, K, V, block_size, causal=False):
    """The running max is computed under no_grad: the shift cancels, so gradients are exact."""
    return _ref(Q, K, V, block_size, causal, detach_max=True)


def O_05_lazy_rescale_float32(Q, K, V, block_size, causal=False):
    """FlashAttention-4 style lazy rescaling (threshold 8) with float32 accumulators: exact."""
    return _ref(Q, K, V, block_size, causal, lazy=8.0)


def O_06_default_dtype_set_and_restored(Q, K, V, block_size, causal=False):
    """Sets the default dtype to the input's float type for its zeros, restores it."""
    old = torch.get_default_dtype()
    try:
        if Q.dtype in (torch.float32, torch.float64):
            torch.set_default_dtype(Q.dtype)
        return _ref(Q, K, V, block_size, causal)
    finally:
        torch.set_default_dtype(old)


class _LSE(torch.autograd.Function):
    """Forward without a graph, backward recomputed blockwise (as FlashAttention does)."""

    @staticmethod
    def forward(ctx, Q, K, V, block_size, causal):
        with torch.no_grad():
            out = _ref(Q, K, V, block_size, causal)
        ctx.save_for_backward(Q, K, V)
        ctx.bs, ctx.causal = block_size, causal
        return out

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = _ref(q, k, v, ctx.bs, ctx.causal)
            gq, gk, gv = torch.autograd.grad(out, (q, k, v), g, allow_unused=True)
        return gq, gk, gv, None, None


def O_07_custom_function_recompute(Q, K, V, block_size, causal=False):
    """A custom autograd.Function that recomputes in backward (memory-light, exact)."""
    return _LSE.apply(Q, K, V, block_size, causal)


def W_08_acc_not_rescaled(Q, K, V, block_size, causal=False):
    """The weighted sum is not multiplied by exp(m - m_new) when the max grows: wrong whenever
    a later block holds a larger score (random inputs, several blocks)."""
    return _ref(Q, K, V, block_size, causal, alpha_acc=False)


def W_09_mask_local_index(Q, K, V, block_size, causal=False):
    """Causal mask compares query i with the key's index inside its block, not its global index:
    wrong from the second block on."""
    return _ref(Q, K, V, block_size, causal, mask_local=True)


def W_10_mask_built_in_inference_mode(Q, K, V, block_size, causal=False):
    """The causal mask is built under torch.inference_mode() ('a constant'): masked_fill saves it
    for backward, so backward() raises 'Inference tensors cannot be saved for backward'."""
    return _ref(Q, K, V, block_size, causal, mask_ctx=torch.inference_mode)


def W_11_full_causal_mask(Q, K, V, block_size, causal=False):
    """Builds the whole (num_queries, num_keys) bool mask once: memory grows as nq * nk, beyond
    the 16-block bound for small blocks (e.g. 8192 queries and keys, block_size 16)."""
    return _ref(Q, K, V, block_size, causal, full_mask=True)


def W_12_drops_partial_last_block(Q, K, V, block_size, causal=False):
    """The last, shorter block is skipped: wrong when num_keys % block_size != 0."""
    return _ref(Q, K, V, block_size, causal, keep_last=False)


def W_13_scale_by_value_dim(Q, K, V, block_size, causal=False):
    """Scales by 1/sqrt(value_dim) instead of 1/sqrt(d): wrong when value_dim != d."""
    return _ref(Q, K, V, block_size, causal, scale=1.0 / math.sqrt(V.shape[-1]))


def A_14_scale_in_input_dtype(Q, K, V, block_size, causal=False):
    """1/sqrt(d) rounded to the input dtype (float16/bfloat16): for d not a power of 4 (e.g. 8,
    bfloat16 scores in the hundreds) the exponent is off. Accepted on purpose (standing ruling,
    Q K^T in the input dtype is accepted): the scale's rounding changes the scores by about one
    step of the input dtype (2^-9 relative in bfloat16), no more than the rounding of Q K^T
    itself in that dtype, which the book's own formula does."""
    sc = float(torch.tensor(Q.shape[-1], dtype=Q.dtype).rsqrt())
    return _ref(Q, K, V, block_size, causal, scale=sc)


def W_15_scale_float32_for_float64(Q, K, V, block_size, causal=False):
    """1/sqrt(d) taken as a float32 number also for float64 inputs: float64 accuracy is lost
    (relative error ~1e-8 in the exponent, x scores of 1e4)."""
    sc = float(torch.tensor(float(Q.shape[-1]), dtype=torch.float32).rsqrt())
    return _ref(Q, K, V, block_size, causal, scale=sc)


def W_16_lazy_rescale_half_native(Q, K, V, block_size, causal=False):
    """Lazy rescaling with threshold 12 and accumulators in float16: exp(12) = 162755 > 65504
    overflows the running sum (float16, scores in the hundreds spread over blocks)."""
    return _ref(Q, K, V, block_size, causal, ct=Q.dtype if Q.dtype in _HALF else None, lazy=12.0)


def W_17_first_block_max_only(Q, K, V, block_size, causal=False):
    """Shift by the first block's max only, never updated: overflow when a later block holds a
    score far above it (scores of 1e4 in a later block)."""
    b, nq, d = Q.shape
    ct = torch.float32 if Q.dtype in _HALF else Q.dtype
    q = Q.to(ct) / math.sqrt(d)
    m = None
    l = 0
    acc = 0
    for s0 in range(0, K.shape[1], block_size):
        s = q @ K[:, s0:s0 + block_size].to(ct).transpose(1, 2)
        if causal:
            kj = torch.arange(s.shape[-1], device=Q.device)[None] + s0
            s = s.masked_fill(torch.arange(nq, device=Q.device)[:, None] < kj, float("-inf"))
        if m is None:
            m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m)
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ V[:, s0:s0 + block_size].to(ct)
    return (acc / l).to(Q.dtype)


def W_18_single_key_returns_view(Q, K, V, block_size, causal=False):
    """With one key the output is V broadcast: returns V.expand(...), a view of the input, not a
    new tensor (writing into the result writes into V)."""
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1])
    return _ref(Q, K, V, block_size, causal)


def W_19_index_select_inference_idx(Q, K, V, block_size, causal=False):
    """Gathers each block's keys with an index built under inference_mode: index_select saves the
    index for backward, which then raises (any input with requires_grad)."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    with torch.inference_mode():
        idx = torch.arange(nk, device=Q.device)
    Kp = K.index_select(1, idx)
    return _ref(Q, Kp, V, block_size, causal)


def W_20_float64_exp_in_float32(Q, K, V, block_size, causal=False):
    """Running sum/acc kept in float64, but the exponentials computed in float32 (torch.exp of a
    .float() copy): float64 accuracy lost (relative 1e-7)."""
    if Q.dtype != torch.float64:
        return _ref(Q, K, V, block_size, causal)
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for s0 in range(0, K.shape[1], block_size):
        s = Q @ K[:, s0:s0 + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            kj = torch.arange(s.shape[-1])[None] + s0
            s = s.masked_fill(torch.arange(nq)[:, None] < kj, float("-inf"))
        mn = torch.maximum(m, s.amax(-1, keepdim=True))
        a = torch.exp((m - mn).float()).double()
        p = torch.exp((s - mn).float()).double()
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ V[:, s0:s0 + block_size]
        m = mn
    return acc / l


def W_21_causal_stop_off_by_one(Q, K, V, block_size, causal=False):
    """Causal: stops at blocks whose start >= num_queries - 1, dropping the last key when it
    opens a block of its own (num_keys = k*block_size + 1)."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    if causal:
        stop = max(1, min(nk, ((nq - 1) // block_size) * block_size if (nq - 1) % block_size == 0 and nq > 1 else nk))
        return _ref(Q[:, :], K[:, :stop], V[:, :stop], block_size, False) if False else _ref_causal_trunc(Q, K, V, block_size, stop)
    return _ref(Q, K, V, block_size, causal)


def _ref_causal_trunc(Q, K, V, block_size, stop):
    out = _ref(Q, K[:, :stop], V[:, :stop], block_size, True)
    return out


def W_22_mask_le_instead_of_lt(Q, K, V, block_size, causal=False):
    """Causal mask hides j >= i (the diagonal too) except query 0 keeps key 0: query i sees
    only j < i (i >= 1)."""
    b, nq, d = Q.shape
    ct = torch.float32 if Q.dtype in _HALF else Q.dtype
    if not causal:
        return _ref(Q, K, V, block_size)
    q = Q.to(ct) / math.sqrt(d)
    m = torch.full((b, nq, 1), float("-inf"), dtype=ct)
    l = torch.zeros((b, nq, 1), dtype=ct)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=ct)
    qi = torch.arange(nq)[:, None]
    for s0 in range(0, K.shape[1], block_size):
        s = q @ K[:, s0:s0 + block_size].to(ct).transpose(1, 2)
        kj = torch.arange(s.shape[-1])[None] + s0
        hide = (qi <= kj) & ~((qi == 0) & (kj == 0))
        s = s.masked_fill(hide, float("-inf"))
        mn = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isfinite(mn), mn, torch.zeros_like(mn))
        a = torch.exp(m - safe)
        p = torch.exp(s - safe)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ V[:, s0:s0 + block_size].to(ct)
        m = mn
    return (acc / l).to(Q.dtype)


def W_23_block_size_ignored(Q, K, V, block_size, causal=False):
    """Ignores block_size and uses blocks of 512 keys: peak memory 512/block_size times the
    16-block bound for small block sizes (2048 queries, block_size 8)."""
    return _ref(Q, K, V, 512, causal)


class _NoCausalBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, block_size, causal):
        with torch.no_grad():
            out = _ref(Q, K, V, block_size, causal)
        ctx.save_for_backward(Q, K, V)
        ctx.bs = block_size
        return out

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (Q, K, V))
            out = _ref(q, k, v, ctx.bs, False)   # recomputed without the causal mask
            gq, gk, gv = torch.autograd.grad(out, (q, k, v), g)
        return gq, gk, gv, None, None


def W_24_recompute_backward_forgets_causal(Q, K, V, block_size, causal=False):
    """Forward right; a FlashAttention-style backward recomputes without the causal mask:
    gradients wrong for causal=True (values exact)."""
    return _NoCausalBwd.apply(Q, K, V, block_size, causal)


def O_25_query_tiles_too(Q, K, V, block_size, causal=False):
    """Tiles the queries as well (blocks of 256 queries), each tile with its own running
    statistics: right, and lighter on memory."""
    outs = []
    nq = Q.shape[1]
    for q0 in range(0, nq, 256):
        q = Q[:, q0:q0 + 256]
        if causal:
            # queries q0.. see keys j <= i: shift by running the tile against all keys with an offset mask
            outs.append(_tile_causal(q, K, V, block_size, q0))
        else:
            outs.append(_ref(q, K, V, block_size, False))
    return torch.cat(outs, 1)


def _tile_causal(q, K, V, block_size, q0):
    b, nq, d = q.shape
    ct = torch.float32 if q.dtype in _HALF else q.dtype
    qq = q.to(ct)
    m = torch.full((b, nq, 1), float("-inf"), dtype=ct, device=q.device)
    l = torch.zeros((b, nq, 1), dtype=ct, device=q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=ct, device=q.device)
    qi = torch.arange(q0, q0 + nq, device=q.device)[:, None]
    for s0 in range(0, min(K.shape[1], q0 + nq), block_size):
        kb = K[:, s0:s0 + block_size].to(ct)
        s = (qq @ kb.transpose(1, 2)) / math.sqrt(d)
        s = s.masked_fill(qi < torch.arange(s0, s0 + kb.shape[1], device=q.device)[None], float("-inf"))
        mn = torch.maximum(m, s.amax(-1, keepdim=True))
        safe = torch.where(torch.isfinite(mn), mn, torch.zeros_like(mn))
        a = torch.exp(m - safe)
        p = torch.exp(s - safe)
        l = l * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ V[:, s0:s0 + block_size].to(ct)
        m = mn
    return (acc / l).to(q.dtype)


def O_26_non_contiguous_result(Q, K, V, block_size, causal=False):
    """Returns a right, non-contiguous new tensor (transpose of a contiguous copy)."""
    return _ref(Q, K, V, block_size, causal).transpose(1, 2).contiguous().transpose(1, 2)
