"""Round 13 red team (writer F, issue 12), ch11_online_b: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch11_online_softmax_b.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_08 (keys capped at 9216, 'a preallocated stats buffer') was accepted: the
checker's largest key count was 8192; now 64 queries against 16411 keys
(_check_online_many_keys). A_03 (one query row at a time against all keys, no key blocks)
passed and is accepted on purpose: its extra memory (1 x num_keys scores) stays below one
copy of K, within the text's budget; the text's 'all queries at once against one block of
keys' is an ambiguity for the authors, not a fault the budget can show."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"
from round13_ch11_online import _online, _causal_hide  # noqa: E402


def C_01_reference(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def W_02_full_causal_bool_mask(Q, K, V, block_size, causal=False):
    """Builds the whole (num_queries, num_keys) causal mask as bool up front and slices it per
    block: O(n^2) memory (a quarter of the float32 score matrix), which the text forbids."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    hide = torch.ones(nq, nk, dtype=torch.bool, device=Q.device).triu(1) if causal else None
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = (Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d)
        if causal:
            s = s.masked_fill(hide[:, start:end], float("-inf"))
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def A_03_one_query_at_a_time(Q, K, V, block_size, causal=False):
    """Exact softmax of one query row against all keys at a time (no key blocks): memory grows
    with num_keys (1 x num_keys scores), not with block_size; 1 query vs 1e6 keys with
    block_size 16 holds 1e6 scores instead of at most 16 x 16."""
    b, nq, d = Q.shape
    outs = []
    for i in range(nq):
        s = (Q[:, i:i + 1] @ K.transpose(1, 2)) / math.sqrt(d)
        if causal:
            s = s.masked_fill(torch.arange(K.shape[1], device=Q.device) > i, float("-inf"))
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, block_size, causal, low, nocausal_bwd):
        ctx.save_for_backward(Q, K, V)
        ctx.cfg = (block_size, causal, low, nocausal_bwd)
        return _online(Q, K, V, block_size, causal)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        block_size, causal, low, nocausal_bwd = ctx.cfg
        dt = Q.dtype
        with torch.enable_grad():
            q, k, v = (t.detach().to(low or dt).requires_grad_() for t in (Q, K, V))
            out = _online(q, k, v, block_size, causal and not nocausal_bwd)
            gq, gk, gv = torch.autograd.grad(out, (q, k, v), g.to(out.dtype))
        return gq.to(dt), gk.to(dt), gv.to(dt), None, None, None, None


def W_04_float64_grads_in_float32(Q, K, V, block_size, causal=False):
    """Recompute-style custom backward that recomputes in float32: float64 inputs get
    float32-accurate gradients (relative error ~1e-7 instead of ~1e-15)."""
    low = torch.float32 if Q.dtype == torch.float64 else None
    return _Recompute.apply(Q, K, V, block_size, causal, low, False)


def W_05_backward_forgets_causal(Q, K, V, block_size, causal=False):
    """Recompute backward that recomputes without the causal mask: causal gradients wrong."""
    return _Recompute.apply(Q, K, V, block_size, causal, None, True)


def W_06_half_sum_detached(Q, K, V, block_size, causal=False):
    """Running sum detached only for float16/bfloat16 ('to save autograd memory'): gradients of
    Q and K wrong in half precision."""
    half = Q.dtype in (torch.float16, torch.bfloat16)
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = _causal_hide((Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d), start, end, causal, nq)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        if half:
            l = l.detach()
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_07_half_K_grad_dropped(Q, K, V, block_size, causal=False):
    """In float16/bfloat16 the scores use K.detach(): no gradient reaches K in half precision."""
    if Q.dtype in (torch.float16, torch.bfloat16):
        return _online(Q, K.detach(), V, block_size, causal)
    return _online(Q, K, V, block_size, causal)


def W_08_keys_capped(Q, K, V, block_size, causal=False):
    """Silently attends only to the first 8192 + 1024 keys (a preallocated stats buffer):
    wrong for num_keys > 9216."""
    keep = min(K.shape[1], 9216)
    return _online(Q, K[:, :keep], V[:, :keep], block_size, causal)


def W_09_grad_V_mean(Q, K, V, block_size, causal=False):
    """Custom backward that returns V's gradient divided by the number of blocks."""
    class F_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.view_as(v)

        @staticmethod
        def backward(ctx, g):
            nb = -(-K.shape[1] // block_size)
            return g / nb
    return _online(Q, K, F_.apply(V), block_size, causal)
