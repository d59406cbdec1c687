"""Round 13 red team (writer F, issue 12), ch11_online: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch11_online_softmax.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_18 (attends only to the first 16384 keys) was accepted: the checker's largest
key count was 8192. check_online_softmax_attention now runs 64 queries against 16411 keys
(_check_online_many_keys: each query's best key among the last two; memory and values with
autograd on and under torch.no_grad(), values in float64)."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _causal_hide(s, start, end, causal, nq):
    if not causal:
        return s
    i = torch.arange(nq, device=s.device)[:, None]
    j = torch.arange(start, end, device=s.device)[None, :]
    return s.masked_fill(j > i, float("-inf"))


def _online(Q, K, V, block_size, causal=False, scale=None, maxfn=None, post=None):
    b, nq, d = Q.shape
    nk = K.shape[1]
    if scale is None:
        scale = 1 / math.sqrt(d)
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = (Q @ K[:, start:end].transpose(1, 2)) * scale
        if post is not None:
            s = post(s)
        s = _causal_hide(s, start, end, causal, nq)
        bm = s.amax(-1, keepdim=True) if maxfn is None else maxfn(s)
        m_new = torch.maximum(m, bm)
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def C_01_reference(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def O_02_detached_max(Q, K, V, block_size, causal=False):
    """The running max detached: the output does not depend on it, so gradients are exact."""
    return _online(Q, K, V, block_size, causal, maxfn=lambda s: s.detach().amax(-1, keepdim=True))


def O_03_float32_stats_for_halves(Q, K, V, block_size, causal=False):
    """Half inputs computed in float32 and cast back (an upcast is allowed)."""
    if Q.dtype in (torch.float16, torch.bfloat16):
        return _online(Q.float(), K.float(), V.float(), block_size, causal).to(Q.dtype)
    return _online(Q, K, V, block_size, causal)


# ---- wrong ----
def W_04_scale_sqrt_of_int_tensor(Q, K, V, block_size, causal=False):
    """Scale 1/torch.sqrt(torch.tensor(d)): a float32 0-d tensor, so float64 inputs are scaled by
    a float32-rounded 1/sqrt(d) (d = 8, 32, 128...; exact only for d = 4^k). Float64 accuracy lost."""
    d = Q.shape[-1]
    return _online(Q, K, V, block_size, causal, scale=1 / torch.sqrt(torch.tensor(d)))


def W_05_batch_wide_max(Q, K, V, block_size, causal=False):
    """Running max over the whole batch and all queries instead of per query: a query whose
    scores sit 200 below another query's underflows to 0/0 in float32."""
    return _online(Q, K, V, block_size, causal, maxfn=lambda s: s.amax(dim=(0, 1, 2), keepdim=True).expand(s.shape[0], s.shape[1], 1))


def W_06_max_shared_across_batch(Q, K, V, block_size, causal=False):
    """Running max per query index, shared by the batch: batch elements at different score
    scales (one near 0, another near 500) underflow."""
    return _online(Q, K, V, block_size, causal, maxfn=lambda s: s.amax(dim=(0, 2), keepdim=True).expand(s.shape[0], s.shape[1], 1))


def W_07_clamp_scores(Q, K, V, block_size, causal=False):
    """Clamps scores to +-3e4 'to keep float16 finite': float32 scores of 1e5 and 1e5-1 merge."""
    return _online(Q, K, V, block_size, causal, post=lambda s: s.clamp(-3e4, 3e4))


def W_08_single_key_view(Q, K, V, block_size, causal=False):
    """Shortcut for one key: returns V expanded (a view of the caller's V, not a new tensor)."""
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1])
    return _online(Q, K, V, block_size, causal)


def W_09_K_detached(Q, K, V, block_size, causal=False):
    """Scores against K.detach(): no gradient reaches K."""
    return _online(Q, K.detach(), V, block_size, causal)


def W_10_sum_detached(Q, K, V, block_size, causal=False):
    """Running sum detached (treated like the max): wrong gradients for Q and K."""
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
        l = (l * alpha + p.sum(-1, keepdim=True)).detach()
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_11_scale_by_value_dim(Q, K, V, block_size, causal=False):
    """Scales by 1/sqrt(value_dim) (V.shape[-1]) instead of 1/sqrt(d)."""
    return _online(Q, K, V, block_size, causal, scale=1 / math.sqrt(V.shape[-1]))


def W_12_reverse_blocks(Q, K, V, block_size, causal=False):
    """Walks the blocks from last to first: causal query 0 sees nothing in the last blocks,
    m = -inf and exp(-inf - -inf) = NaN."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    starts = list(range(0, nk, block_size))[::-1]
    for start in starts:
        end = min(start + block_size, nk)
        s = _causal_hide((Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d), start, end, causal, nq)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_13_causal_offset_bottom_right_bug(Q, K, V, block_size, causal=False):
    """Causal mask built from the block-local key index (j = 0..len-1) instead of the global one."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = _causal_hide((Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d), 0, end - start, causal, nq)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_14_drop_last_short_block(Q, K, V, block_size, causal=False):
    """Only whole blocks: the last, shorter block is skipped (num_keys % block_size != 0)."""
    nk = K.shape[1]
    full = (nk // block_size) * block_size or nk
    if causal:
        return _online(Q, K, V, block_size, causal)
    return _online(Q, K[:, :full], V[:, :full], block_size, causal)


def W_15_m_init_zero(Q, K, V, block_size, causal=False):
    """Running max starts at 0 (not -inf): scores all below about -100 underflow in float32."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.zeros((b, nq, 1), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = _causal_hide((Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d), start, end, causal, nq)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_16_mutates_Q_scale(Q, K, V, block_size, causal=False):
    """Scales Q in place and divides back afterwards: the caller's Q comes back rounded
    (and the version bump breaks autograd when Q is a leaf that requires grad: guarded)."""
    d = Q.shape[-1]
    if Q.requires_grad:
        return _online(Q, K, V, block_size, causal)
    with torch.no_grad():
        Q.mul_(1 / math.sqrt(d))
        out = _online(Q, K, V, block_size, causal, scale=1.0)
        Q.mul_(math.sqrt(d))
    return out


def W_17_exp2_with_rounded_log2e(Q, K, V, block_size, causal=False):
    """exp2 trick with log2(e) rounded to 1.4427: all scores scaled by 1.44270/1.442695 (relative
    error 3.4e-6), visible in float64 (and at large score gaps in float32)."""
    b, nq, d = Q.shape
    c = 1.4427 / math.sqrt(d)
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = _causal_hide((Q @ K[:, start:end].transpose(1, 2)) * c, start, end, causal, nq)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        alpha = torch.exp2(m - m_new)
        p = torch.exp2(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_18_block_size_capped(Q, K, V, block_size, causal=False):
    """Caps the block at 256 keys and ... uses 64 when block_size > 256 (wrong: ignores the
    argument, but the result is the same) -- plus drops keys beyond 8192*2."""
    nk = K.shape[1]
    keep = min(nk, 16384)
    return _online(Q, K[:, :keep], V[:, :keep], min(block_size, 256), causal)
