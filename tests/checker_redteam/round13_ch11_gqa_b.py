"""Round 13 red team (writer F, issue 12), ch11_gqa_b: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch11_gqa_b.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: W_02 and W_06 (autograd keyed on Q, or on Q or K) and W_07 (bfloat16 under
torch.inference_mode()) are the lead's, in _core (expect_conditions: one run per
differentiable argument with only that one requiring grad, and INFERENCE in STANDARD);
check_grouped_query_attention's matrix uses STANDARD, so it gets them."""
# flake8: noqa
import math
import torch

from round13_ch11_gqa import C_01_reference as _ref, _groups, _attn  # noqa: E402

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def C_01_reference(Q, K, V):
    return _ref(Q, K, V)


def W_02_grad_keyed_on_Q(Q, K, V):
    """Grad mode keyed on Q.requires_grad: if only K and V require grad, none reaches them."""
    with torch.set_grad_enabled(torch.is_grad_enabled() and Q.requires_grad):
        return _ref(Q, K, V)


def W_03_nograd_bf16(Q, K, V):
    """Under torch.no_grad (inference) float32/float64 computed in bfloat16 'for speed'."""
    if not torch.is_grad_enabled() and Q.dtype in (torch.float32, torch.float64):
        return _ref(Q.bfloat16(), K.bfloat16(), V.bfloat16()).to(Q.dtype)
    return _ref(Q, K, V)


def W_04_as_strided_repeat(Q, K, V):
    """Repeats K and V with as_strided assuming contiguous strides: wrong for a transposed
    (b, n, h, hs).transpose(1, 2) K or V, the layout projections produce."""
    g = _groups(Q, K)
    b, hkv, nk, hs = K.shape

    def rep(X):
        x = X.as_strided((b, hkv, g, nk, X.shape[-1]), (hkv * nk * X.shape[-1], nk * X.shape[-1], 0, X.shape[-1], 1))
        return x.reshape(b, hkv * g, nk, X.shape[-1])
    return _attn(Q, rep(K), rep(V))


def W_05_global_max_shift(Q, K, V):
    """Softmax shifted by the max over the whole score tensor: rows 20 (float16) or 100
    (float32) below the global max underflow to 0/0."""
    g = _groups(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = (Q @ K.transpose(-1, -2)) / math.sqrt(Q.shape[-1])
    e = torch.exp(s - s.max())
    return (e / e.sum(-1, keepdim=True)) @ V


def W_06_grad_keyed_on_any_but_V(Q, K, V):
    """Skips autograd unless Q or K requires grad: fine-tuning only the value side gets no grad."""
    with torch.set_grad_enabled(torch.is_grad_enabled() and (Q.requires_grad or K.requires_grad)):
        return _ref(Q, K, V)


def W_07_inference_mode_bf16(Q, K, V):
    """Under torch.inference_mode() (serving) float32/float64 are computed in bfloat16."""
    if torch.is_inference_mode_enabled() and Q.dtype in (torch.float32, torch.float64):
        return _ref(Q.bfloat16(), K.bfloat16(), V.bfloat16()).to(Q.dtype)
    return _ref(Q, K, V)
