"""Round 13 red team (writer F, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round13/F/sols/ch11_gqa.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: none: every wrong entry of this file was rejected before round 13's fixes."""
# flake8: noqa
import math
import torch

CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _attn(Q, K, V, scale=None, softmax_dtype=None):
    hs = Q.shape[-1]
    s = (Q @ K.transpose(-1, -2)) * (1 / math.sqrt(hs) if scale is None else scale)
    if softmax_dtype is not None:
        return torch.softmax(s.to(softmax_dtype), -1).to(Q.dtype) @ V
    return torch.softmax(s, -1) @ V


def _groups(Q, K):
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 0 or h % hkv:
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    return h // hkv


def C_01_reference(Q, K, V):
    g = _groups(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def C_02_grouped_view(Q, K, V):
    g = _groups(Q, K)
    b, h, nq, hs = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.reshape(b, hkv, g, nq, hs), K[:, :, None], V[:, :, None])
    return out.reshape(b, h, nq, V.shape[-1])


def O_03_queries_stacked(Q, K, V):
    """Consecutive heads of a group stacked as extra query rows: (b, hkv, g*nq, hs)."""
    g = _groups(Q, K)
    b, h, nq, hs = Q.shape
    out = _attn(Q.reshape(b, K.shape[1], g * nq, hs), K, V)
    return out.reshape(b, h, nq, V.shape[-1])


# ---- wrong ----
def W_04_scale_sqrt_int_tensor(Q, K, V):
    """Scale 1/torch.sqrt(torch.tensor(head_size)): a float32 0-d tensor, so float64 inputs get
    a float32-rounded scale (head_size 8, 32, ...; exact for 4^k). Float64 accuracy lost."""
    g = _groups(Q, K)
    hs = Q.shape[-1]
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1),
                 scale=1 / torch.sqrt(torch.tensor(hs)))


def W_05_repeat_interleaved(Q, K, V):
    """K.repeat(1, g, 1, 1): query head i uses kv head i % hkv, not i // g."""
    g = _groups(Q, K)
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def W_06_only_more_kv_rejected(Q, K, V):
    """Raises only when num_kv_heads > num_heads; 6 query heads with 4 kv heads are grouped by
    floor(i / 1) and the last kv heads... (wrong: no ValueError)."""
    h, hkv = Q.shape[1], K.shape[1]
    if hkv > h:
        raise ValueError("more kv heads than query heads")
    g = h // hkv
    idx = torch.arange(h, device=Q.device) // g
    idx = idx.clamp(max=hkv - 1)
    return _attn(Q, K[:, idx], V[:, idx])


class _Rep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, g, mode):
        ctx.g, ctx.mode = g, mode
        return X.repeat_interleave(g, 1)

    @staticmethod
    def backward(ctx, grad):
        b, h, n, d = grad.shape
        gg = grad.reshape(b, h // ctx.g, ctx.g, n, d)
        if ctx.mode == "mean":
            return gg.mean(2), None, None
        return gg[:, :, 0], None, None


def W_07_rep_backward_mean(Q, K, V):
    """Custom repeat whose backward averages over the group instead of summing: K and V grads
    divided by g (g > 1)."""
    g = _groups(Q, K)
    return _attn(Q, _Rep.apply(K, g, "mean"), _Rep.apply(V, g, "mean"))


def W_08_rep_backward_first_head(Q, K, V):
    """Custom repeat whose backward keeps only the group's first query head's gradient."""
    g = _groups(Q, K)
    return _attn(Q, _Rep.apply(K, g, "first"), _Rep.apply(V, g, "first"))


class _Recompute(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V, low):
        ctx.save_for_backward(Q, K, V)
        ctx.low = low
        return C_01_reference(Q, K, V)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        dt = Q.dtype
        with torch.enable_grad():
            q, k, v = (t.detach().to(ctx.low).requires_grad_() for t in (Q, K, V))
            out = C_01_reference(q, k, v)
            gs = torch.autograd.grad(out, (q, k, v), g.to(ctx.low))
        return tuple(x.to(dt) for x in gs) + (None,)


def W_09_float64_grads_in_float32(Q, K, V):
    """Custom backward recomputing in float32: float64 inputs get float32-accurate gradients."""
    if Q.dtype == torch.float64:
        return _Recompute.apply(Q, K, V, torch.float32)
    return C_01_reference(Q, K, V)


def W_10_half_V_detached(Q, K, V):
    """In float16/bfloat16, V.detach() ('values need no grad in inference'): no gradient to V."""
    if Q.dtype in (torch.float16, torch.bfloat16):
        V = V.detach()
    return C_01_reference(Q, K, V)


def W_11_single_key_view(Q, K, V):
    """One key: returns V (expanded), a view of the caller's V, not a new tensor."""
    g = _groups(Q, K)
    if K.shape[2] == 1 and g == 1:
        return V.expand(-1, -1, Q.shape[2], -1)
    return C_01_reference(Q, K, V)


def W_12_bf16_through_f16(Q, K, V):
    """bfloat16 inputs computed in float16: values beyond 65504 (bfloat16 V of 1e5) become inf."""
    if Q.dtype == torch.bfloat16:
        return C_01_reference(Q.half(), K.half(), V.half()).to(torch.bfloat16)
    return C_01_reference(Q, K, V)


def W_13_f64_softmax_f32(Q, K, V):
    """Softmax in float32 for every dtype: float64 loses accuracy."""
    g = _groups(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), softmax_dtype=torch.float32)


def W_14_mqa_batch0(Q, K, V):
    """With one kv head (MQA) uses batch 0's K and V for every batch element."""
    g = _groups(Q, K)
    if K.shape[1] == 1:
        return _attn(Q, K[:1], V[:1])
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_15_scale_by_num_keys(Q, K, V):
    """Scales by 1/sqrt(num_keys) when num_keys == head_size is not assumed... (uses K.shape[-2])."""
    g = _groups(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale=1 / math.sqrt(K.shape[-2]))


def W_16_no_max_shift_f32(Q, K, V):
    """exp without the max shift (computed in float64 for float32 only 'to be safe'): float16/
    bfloat16 scores in the hundreds overflow."""
    g = _groups(Q, K)
    K, V = K.repeat_interleave(g, 1), V.repeat_interleave(g, 1)
    s = (Q @ K.transpose(-1, -2)) / math.sqrt(Q.shape[-1])
    if s.dtype == torch.float32:
        return torch.softmax(s, -1) @ V
    e = torch.exp(s)
    return (e / e.sum(-1, keepdim=True)) @ V


def W_17_mutates_Q(Q, K, V):
    """Scales the caller's Q in place when it does not require grad."""
    if not Q.requires_grad:
        with torch.no_grad():
            Q.mul_(1 / math.sqrt(Q.shape[-1]))
        g = _groups(Q, K)
        return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale=1.0)
    return C_01_reference(Q, K, V)


def W_18_group_by_modulo_in_view(Q, K, V):
    """Q.reshape(b, g, hkv, ...) grouping: interleaved heads."""
    g = _groups(Q, K)
    b, h, nq, hs = Q.shape
    hkv = K.shape[1]
    out = _attn(Q.reshape(b, g, hkv, nq, hs), K[:, None], V[:, None])
    return out.reshape(b, h, nq, V.shape[-1])


def W_19_float64_grad_only_via_float32_V(Q, K, V):
    """Float64: V's gradient computed through a float32 round trip (custom identity whose
    backward rounds to float32)."""
    class R(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            return v.view_as(v)

        @staticmethod
        def backward(ctx, g):
            return g.float().to(g.dtype)
    if V.dtype == torch.float64:
        V = R.apply(V)
    return C_01_reference(Q, K, V)


def W_20_bf16_kv_through_f16(Q, K, V):
    """Only K and V of bfloat16 moved through float16 (the 'cache dtype'): V beyond 65504 -> inf,
    and K loses range too."""
    if K.dtype == torch.bfloat16:
        K, V = K.half().to(torch.bfloat16), V.half().to(torch.bfloat16)
    return C_01_reference(Q, K, V)
