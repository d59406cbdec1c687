"""Round 14 red team (writer F, issue 12), ch11_gqa: grouped_query_attention (exercise 11.2).
Wrong (W_), right (C_), odd but right (O_) and accepted-on-purpose (A_) solutions written
from the exercise text alone; copied from /work/redteam/round14/F/sols/ch11_gqa.py.
Wrong ones the checker accepts on purpose are named A_ (not tested), with the reason beside
them. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass).
Holes fixed: none: every wrong entry of this file was rejected on main. A_14 (1/sqrt(d)
rounded in the input dtype) is accepted on purpose (standing ruling: Q K^T in the input dtype
is accepted)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F
CHECK = "check_grouped_query_attention"
CHECK_MOD = "book.checks.ch11"


def _heads(Q, K):
    h, hkv = Q.shape[1], K.shape[1]
    if hkv == 0 or h % hkv:
        raise ValueError(f"num_kv_heads={hkv} does not divide num_heads={h}")
    return h, hkv, h // hkv


def _attn(Q, K, V, scale=None, up=True):
    ct = torch.float32 if (up and Q.dtype in (torch.float16, torch.bfloat16)) else Q.dtype
    s = (Q.to(ct) @ K.to(ct).transpose(-1, -2)) * (1 / math.sqrt(Q.shape[-1]) if scale is None else scale)
    return (torch.softmax(s, dim=-1) @ V.to(ct)).to(Q.dtype)


def C_01_repeat_interleave(Q, K, V):
    h, hkv, g = _heads(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def C_02_grouped_broadcast(Q, K, V):
    h, hkv, g = _heads(Q, K)
    b, _, nq, d = Q.shape
    q = Q.reshape(b, hkv, g, nq, d)
    return _attn(q, K.unsqueeze(2), V.unsqueeze(2)).reshape(b, h, nq, d)


def O_03_index_under_no_grad(Q, K, V):
    """The head index is built under no_grad (it is not differentiated): right."""
    h, hkv, g = _heads(Q, K)
    with torch.no_grad():
        idx = torch.arange(h, device=Q.device) // g
    return _attn(Q, K[:, idx], V[:, idx])


def O_04_native_dtype(Q, K, V):
    """softmax natively in the input dtype (accepted for half types)."""
    h, hkv, g = _heads(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), up=False)


def O_05_expand_view(Q, K, V):
    h, hkv, g = _heads(Q, K)
    b, _, nk, d = K.shape
    Ke = K[:, :, None].expand(b, hkv, g, nk, d).reshape(b, h, nk, d)
    Ve = V[:, :, None].expand(b, hkv, g, nk, d).reshape(b, h, nk, d)
    return _attn(Q, Ke, Ve)


def O_06_default_dtype_restored(Q, K, V):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return C_01_repeat_interleave(Q, K, V)
    finally:
        torch.set_default_dtype(old)


def O_07_einsum(Q, K, V):
    h, hkv, g = _heads(Q, K)
    b, _, nq, d = Q.shape
    ct = torch.float32 if Q.dtype in (torch.float16, torch.bfloat16) else Q.dtype
    q = Q.to(ct).reshape(b, hkv, g, nq, d)
    s = torch.einsum("bkgqd,bknd->bkgqn", q, K.to(ct)) / math.sqrt(d)
    o = torch.einsum("bkgqn,bknd->bkgqd", s.softmax(-1), V.to(ct))
    return o.reshape(b, h, nq, d).to(Q.dtype)


def W_08_interleaved_heads(Q, K, V):
    """Query head i uses kv head i % h_kv (K.repeat) instead of i // g: wrong for h_kv > 1, g > 1."""
    h, hkv, g = _heads(Q, K)
    return _attn(Q, K.repeat(1, g, 1, 1), V.repeat(1, g, 1, 1))


def W_09_scale_by_num_queries(Q, K, V):
    """Scale 1/sqrt(Q.shape[-2]) (num_queries) instead of head_size: wrong when they differ."""
    h, hkv, g = _heads(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale=1 / math.sqrt(Q.shape[-2]))


def W_10_no_divisibility_check(Q, K, V):
    """g = h // h_kv without a check: h=6, h_kv=4 gives g=1 and a shape error/garbage, no ValueError."""
    g = max(1, Q.shape[1] // K.shape[1])
    Ke = K.repeat_interleave(g, 1)[:, :Q.shape[1]]
    Ve = V.repeat_interleave(g, 1)[:, :Q.shape[1]]
    return _attn(Q, Ke, Ve)


def W_11_check_only_greater(Q, K, V):
    """Raises only when h_kv > h: h=6, h_kv=4 passes silently (with floor(i*h_kv/h) heads)."""
    h, hkv = Q.shape[1], K.shape[1]
    if hkv > h:
        raise ValueError(f"num_kv_heads={hkv} > num_heads={h}")
    idx = torch.arange(h) * hkv // h
    return _attn(Q, K[:, idx], V[:, idx])


def W_12_view_flatten(Q, K, V):
    """Flattens with .view: a RuntimeError for transposed (non-contiguous) inputs, e.g.
    Q = X.transpose(-1, -2) with num_queries == head_size."""
    h, hkv, g = _heads(Q, K)
    b, _, nq, d = Q.shape
    nk = K.shape[2]
    q = Q.view(b * hkv, g * nq, d)
    k = K.view(b * hkv, nk, d)
    v = V.view(b * hkv, nk, d)
    o = _attn(q, k, v)
    return o.view(b, h, nq, d)


def W_13_kv_mapping_differs(Q, K, V):
    """K grouped consecutively but V interleaved: wrong for h_kv > 1, g > 1."""
    h, hkv, g = _heads(Q, K)
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat(1, g, 1, 1))


def A_14_scale_in_input_dtype(Q, K, V):
    """1/sqrt(head_size) rounded to float16/bfloat16: off for head sizes that are not powers
    of 4 (e.g. 8, bfloat16, scores in the hundreds). Accepted on purpose (standing ruling, Q K^T
    in the input dtype is accepted): the scale's rounding changes the scores by about one step
    of the input dtype (2^-9 relative in bfloat16), no more than the rounding of Q K^T
    itself in that dtype, which the book's own formula does."""
    h, hkv, g = _heads(Q, K)
    sc = float(torch.tensor(Q.shape[-1], dtype=Q.dtype).rsqrt())
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale=sc)


def W_15_scale_float32_for_float64(Q, K, V):
    """Scale as a float32 number also for float64: float64 accuracy lost (scores in hundreds)."""
    h, hkv, g = _heads(Q, K)
    sc = float(torch.tensor(float(Q.shape[-1]), dtype=torch.float32).rsqrt())
    return _attn(Q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), scale=sc)


def W_16_index_inference_mode(Q, K, V):
    """Head index built under inference_mode: K[:, idx] saves it for backward, which raises."""
    h, hkv, g = _heads(Q, K)
    with torch.inference_mode():
        idx = torch.arange(h, device=Q.device) // g
    return _attn(Q, K.index_select(1, idx), V.index_select(1, idx))


def W_17_mean_of_group_queries(Q, K, V):
    """Heads of a group share... the query too: averages the group's queries (a 'shared' head)."""
    h, hkv, g = _heads(Q, K)
    b, _, nq, d = Q.shape
    qm = Q.reshape(b, hkv, g, nq, d).mean(2, keepdim=True).expand(b, hkv, g, nq, d).reshape(b, h, nq, d)
    return _attn(qm, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1))


def W_18_single_key_view(Q, K, V):
    """With one key every query's output is V's row: returns V[:, idx].expand(...) for grouped
    heads, and V.expand(...) itself (a view of the argument V, not a new tensor) when
    num_kv_heads == num_heads: writing into the result then writes into V."""
    h, hkv, g = _heads(Q, K)
    if K.shape[2] == 1:
        b, _, nq, d = Q.shape
        src = V if g == 1 else V.repeat_interleave(g, 1)
        return src.expand(b, h, nq, V.shape[-1])
    return C_01_repeat_interleave(Q, K, V)


def W_19_softmax_float16_for_bf16(Q, K, V):
    """Computes bfloat16 inputs in float16 (half): bfloat16 values beyond 65504 become inf."""
    h, hkv, g = _heads(Q, K)
    dt = Q.dtype
    if dt == torch.bfloat16:
        o = _attn(Q.half(), K.half().repeat_interleave(g, 1), V.half().repeat_interleave(g, 1))
        return o.to(dt)
    return C_01_repeat_interleave(Q, K, V)


def W_20_batch_head_flatten_wrong(Q, K, V):
    """Reshapes Q to (b, g, h_kv, ...) (groups strided) instead of (b, h_kv, g, ...): query head
    i gets kv head i % h_kv."""
    h, hkv, g = _heads(Q, K)
    b, _, nq, d = Q.shape
    q = Q.reshape(b, g, hkv, nq, d).transpose(1, 2)
    o = _attn(q, K.unsqueeze(2), V.unsqueeze(2))
    return o.transpose(1, 2).reshape(b, h, nq, d)


def W_21_no_grad_values(Q, K, V):
    """Repeats V under no_grad ('just copying'): V gets no gradient."""
    h, hkv, g = _heads(Q, K)
    with torch.no_grad():
        Ve = V.repeat_interleave(g, 1)
    return _attn(Q, K.repeat_interleave(g, 1), Ve)


def W_22_type_error(Q, K, V):
    """Raises TypeError/AssertionError instead of ValueError for h_kv not dividing h."""
    h, hkv = Q.shape[1], K.shape[1]
    assert h % hkv == 0, f"{hkv} does not divide {h}"
    return C_01_repeat_interleave(Q, K, V)


class _GQAFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Q, K, V):
        ctx.save_for_backward(Q, K, V)
        with torch.no_grad():
            return C_01_repeat_interleave(Q, K, V)

    @staticmethod
    def backward(ctx, g):
        Q, K, V = ctx.saved_tensors
        h, hkv, gr = _heads(Q, K)
        with torch.enable_grad():
            q = Q.detach().requires_grad_()
            Ke = K.detach().repeat_interleave(gr, 1).requires_grad_()
            Ve = V.detach().repeat_interleave(gr, 1).requires_grad_()
            out = _attn(q, Ke, Ve)
            gq, gk, gv = torch.autograd.grad(out, (q, Ke, Ve), g)
        b, _, nk, d = K.shape
        # wrong: takes the first head of each group instead of summing over the group
        gk = gk.reshape(b, hkv, gr, nk, d)[:, :, 0]
        gv = gv.reshape(b, hkv, gr, nk, d)[:, :, 0]
        return gq, gk, gv


def W_23_custom_backward_no_group_sum(Q, K, V):
    """Forward right; the hand-written backward gives K and V the gradient of the group's
    first query head only, not the sum over the group (wrong for num_heads > num_kv_heads)."""
    _heads(Q, K)
    return _GQAFn.apply(Q, K, V)


def O_24_non_contiguous_result(Q, K, V):
    """Computes in (b, num_queries, num_heads, head_size) layout and returns the transpose: a
    right, non-contiguous new tensor."""
    h, hkv, g = _heads(Q, K)
    o = C_01_repeat_interleave(Q, K, V)
    return o.transpose(1, 2).contiguous().transpose(1, 2)
