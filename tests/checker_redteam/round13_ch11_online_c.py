"""Round 13 red team (writer F, issue 12), ch11_online_c: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch11_online_softmax_c.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_02 (the whole score matrix under torch.no_grad()) was accepted: the memory
was measured with autograd on only; now also under torch.no_grad() (64 queries against 16411
keys). W_03 and W_07 (autograd keyed on Q, or on Q or K: no gradient when only K and V, or
only V, require grad) and W_06 (bfloat16 under torch.inference_mode()) are the lead's, in
_core (expect_conditions: one run per differentiable argument with only that one requiring
grad, and INFERENCE in STANDARD)."""
# flake8: noqa
import math
import torch

from round13_ch11_online import _online  # noqa: E402

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _standard(Q, K, V, causal):
    s = (Q @ K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
    if causal:
        n = Q.shape[1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ V


def C_01_reference(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def W_02_nograd_full_matrix(Q, K, V, block_size, causal=False):
    """Under torch.no_grad (inference) uses the plain full score matrix 'since nothing is
    stored for backward': O(n^2) memory at inference, e.g. 2048 queries and keys."""
    if not torch.is_grad_enabled():
        return _standard(Q, K, V, causal)
    return _online(Q, K, V, block_size, causal)


def W_03_grad_keyed_on_Q(Q, K, V, block_size, causal=False):
    """Grad mode keyed on Q alone: when only K and V require grad (a frozen query side),
    nothing flows to K and V."""
    with torch.set_grad_enabled(torch.is_grad_enabled() and Q.requires_grad):
        return _online(Q, K, V, block_size, causal)


def W_04_nograd_bf16(Q, K, V, block_size, causal=False):
    """Under torch.no_grad computes float32/float64 inputs in bfloat16 'for speed': large errors."""
    if not torch.is_grad_enabled() and Q.dtype in (torch.float32, torch.float64):
        return _online(Q.bfloat16(), K.bfloat16(), V.bfloat16(), block_size, causal).to(Q.dtype)
    return _online(Q, K, V, block_size, causal)


def W_05_global_max_shift(Q, K, V, block_size, causal=False):
    """Running max per query, but each block's exponentials shifted by the block's max over all
    queries and batch (one number): queries 100 below the rest underflow (float32)."""
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for start in range(0, nk, block_size):
        end = min(start + block_size, nk)
        s = (Q @ K[:, start:end].transpose(1, 2)) / math.sqrt(d)
        if causal:
            i = torch.arange(nq)[:, None]
            j = torch.arange(start, end)[None, :]
            s = s.masked_fill(j > i, float("-inf"))
        m_new = torch.maximum(m, s.max())
        alpha = torch.exp(m - m_new)
        p = torch.exp(s - m_new)
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ V[:, start:end]
        m = m_new
    return acc / l


def W_06_inference_mode_bf16(Q, K, V, block_size, causal=False):
    """Under torch.inference_mode() (serving) float32/float64 inputs are computed in bfloat16."""
    if torch.is_inference_mode_enabled() and Q.dtype in (torch.float32, torch.float64):
        return _online(Q.bfloat16(), K.bfloat16(), V.bfloat16(), block_size, causal).to(Q.dtype)
    return _online(Q, K, V, block_size, causal)


def W_07_grad_keyed_on_Q_and_K(Q, K, V, block_size, causal=False):
    """Autograd skipped unless Q or K requires grad: training only the value side gets no grad."""
    with torch.set_grad_enabled(torch.is_grad_enabled() and (Q.requires_grad or K.requires_grad)):
        return _online(Q, K, V, block_size, causal)
