"""Round 5 red team (writer R5-C, issue 12), ch11_online_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/C/sols/ch11_online_softmax.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _online(Q, K, V, block_size, causal=False, m_init=float("-inf"), rescale_acc=True,
            scale=None, local_causal=False, strict=False, detach_m=False, drop_tail=False,
            shared_max=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    scale = 1 / math.sqrt(d) if scale is None else scale
    m = torch.full((b, nq, 1), m_init, dtype=Q.dtype, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    qi = torch.arange(nq, device=Q.device)[:, None]
    stop = nk - block_size + 1 if drop_tail else nk
    for s in range(0, stop, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) * scale
        if causal:
            kj = torch.arange(s, s + Kb.shape[1], device=Q.device)[None, :]
            if local_causal:
                kj = kj - s
            hide = kj >= qi if strict else kj > qi
            S = S.masked_fill(hide, float("-inf"))
        if shared_max:
            m_new = torch.maximum(m, S.amax().expand_as(m))
        else:
            m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        if detach_m:
            m_new = m_new.detach()
        # for rows whose blocks are all hidden so far, m_new = -inf: avoid -inf - -inf
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        P = torch.exp(S - safe)
        alpha = torch.exp(m - safe)
        l = alpha * l + P.sum(-1, keepdim=True)
        acc = (alpha if rescale_acc else 1) * acc + P @ Vb
        m = m_new
    return acc / l


def C_01_running_max_sum_acc(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def O_02_detached_running_max(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, detach_m=True)


def O_03_logsumexp_blocks(Q, K, V, block_size, causal=False):
    # keeps a running log-sum-exp and a normalised output instead of max and sum
    b, nq, d = Q.shape
    lse = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    out = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        blse = torch.logsumexp(S, -1, keepdim=True)
        new = torch.logaddexp(lse, blse)
        newf = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        bl = torch.where(torch.isinf(blse), torch.zeros_like(blse), blse)
        out = out * torch.exp(lse - newf) + torch.exp(blse - newf) * (
            torch.softmax(S.masked_fill(torch.isinf(blse).expand_as(S), 0.0), -1)
            @ V[:, s:s + block_size])
        lse = new
    return out


def W_01_exp_without_max(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        P = torch.exp(S)
        l = l + P.sum(-1, keepdim=True)
        acc = acc + P @ V[:, s:s + block_size]
    return acc / l


def W_02_max_initialised_to_zero(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, m_init=0.0)


def W_03_acc_not_rescaled(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, rescale_acc=False)


def W_04_causal_block_local_index(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, local_causal=True)


def W_05_full_score_matrix(Q, K, V, block_size, causal=False):
    S = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if causal:
        n = S.shape[-1]
        S = S.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(S, -1) @ V


def W_06_full_causal_mask_up_front(Q, K, V, block_size, causal=False):
    nq, nk = Q.shape[1], K.shape[1]
    hide = torch.arange(nk)[None, :] > torch.arange(nq)[:, None]  # (nq, nk) bool
    hide = hide.float() * -1e30  # additive mask in float
    b, _, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"))
    l = torch.zeros((b, nq, 1))
    acc = torch.zeros((b, nq, V.shape[-1]))
    for s in range(0, nk, block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S + hide[:, s:s + block_size]
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        a = torch.exp(m - m_new)
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def W_07_scale_by_d(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, scale=1 / Q.shape[-1])


def W_08_drops_short_last_block(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, drop_tail=True)


def W_09_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, scale=1 / math.sqrt(V.shape[-1]))


def W_10_causal_strict(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, strict=True)


def W_11_one_max_for_everything(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, shared_max=True)


def W_12_blocks_of_queries(Q, K, V, block_size, causal=False):
    outs = []
    nk = K.shape[1]
    for s in range(0, Q.shape[1], block_size):
        S = Q[:, s:s + block_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        if causal:
            qi = torch.arange(s, s + S.shape[1])[:, None]
            S = S.masked_fill(torch.arange(nk)[None, :] > qi, float("-inf"))
        outs.append(torch.softmax(S, -1) @ V)
    return torch.cat(outs, 1)


def W_13_ignores_causal(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, False)


def O_05_nan_to_num_never_triggers_was_W14(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"))
    l = torch.zeros((b, nq, 1))
    acc = torch.zeros((b, nq, V.shape[-1]))
    qi = torch.arange(nq)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.nan_to_num(torch.exp(S - m_new))
        a = torch.nan_to_num(torch.exp(m - m_new))
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def W_15_in_place_accumulators_alias_V(Q, K, V, block_size, causal=False):
    # normalises in place and returns; the first block's values are scaled in place
    out = _online(Q, K, V, block_size, causal)
    with torch.no_grad():
        V.mul_(1.0)
        Q.div_(1.0)
    return out.detach().requires_grad_(Q.requires_grad)


def W_16_per_block_softmax_averaged(Q, K, V, block_size, causal=False):
    # normalises each block on its own, then weights the blocks by their sums without the
    # max correction: right only when all blocks share the same maximum
    b, nq, d = Q.shape
    outs, sums = [], []
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        P = torch.softmax(S, -1)
        outs.append(P @ V[:, s:s + block_size])
        sums.append(torch.ones(b, nq, 1) * S.shape[-1])
    w = torch.stack(sums)
    return (torch.stack(outs) * w).sum(0) / w.sum(0)


def _rev(Q, K, V, block_size, causal, safe):
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    starts = list(range(0, nk, block_size))[::-1]
    for s in starts:
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        if safe:
            m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        else:
            m_use = m_new
        P = torch.exp(S - m_use)
        a = torch.exp(m - m_use)
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def O_04_blocks_in_reverse_order_safe(Q, K, V, block_size, causal=False):
    return _rev(Q, K, V, block_size, causal, True)


def W_17_blocks_in_reverse_order_nan(Q, K, V, block_size, causal=False):
    return _rev(Q, K, V, block_size, causal, False)


def O_06_reverse_order_nan_to_num_was_W18(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in list(range(0, nk, block_size))[::-1]:
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.nan_to_num(torch.exp(S - m_new))
        a = torch.nan_to_num(torch.exp(m - m_new))
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def S_01_float32_accumulators_was_W19(Q, K, V, block_size, causal=False):
    return _online(Q.float(), K.float(), V.float(), block_size, causal)


def W_20_in_place_scaling_of_Q(Q, K, V, block_size, causal=False):
    if not Q.requires_grad:
        Q /= math.sqrt(Q.shape[-1])
    else:
        Q = Q / math.sqrt(Q.shape[-1])
    return _online(Q, K, V, block_size, causal, scale=1.0)


def W_21_tril_mask_sliced_per_block(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for s in range(0, nk, block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            keep = torch.ones(nq, nk, dtype=torch.bool).tril()[:, s:s + block_size]
            S = S.masked_fill(~keep, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        a = torch.exp(m - m_new)
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def _online2(Q, K, V, block_size, causal=False, detach_l=False, detach_alpha=False,
             per_batch_max=False):
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > qi, float("-inf"))
        if per_batch_max:
            bm = S.amax(dim=(1, 2), keepdim=True).expand_as(m)
        else:
            bm = S.amax(-1, keepdim=True)
        m_new = torch.maximum(m, bm)
        P = torch.exp(S - m_new)
        a = torch.exp(m - m_new)
        if detach_alpha:
            a = a.detach()
        l = a * l + P.sum(-1, keepdim=True)
        if detach_l:
            l = l.detach()
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def W_22_max_per_batch_not_per_query(Q, K, V, block_size, causal=False):
    return _online2(Q, K, V, block_size, causal, per_batch_max=True)


def W_23_running_sum_detached(Q, K, V, block_size, causal=False):
    return _online2(Q, K, V, block_size, causal, detach_l=True)


def W_24_rescale_factor_detached(Q, K, V, block_size, causal=False):
    return _online2(Q, K, V, block_size, causal, detach_alpha=True)


def W_25_triu_diagonal_sign(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            hide = torch.ones(nq, S.shape[-1], dtype=torch.bool).triu(1 + s)
            S = S.masked_fill(hide, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        P = torch.exp(S - m_use)
        a = torch.exp(m - m_use)
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def W_26_causal_by_multiplying_after_exp(Q, K, V, block_size, causal=False):
    # the running max also sees the hidden (future) keys; the mask multiplies exp(...)
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        if causal:
            P = P * (torch.arange(s, s + S.shape[-1])[None, :] <= qi)
        a = torch.exp(m - m_new)
        l = a * l + P.sum(-1, keepdim=True)
        acc = a * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l
