"""Round 4 red team (writer R4-C, issue 12), ch11_online_softmax: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/C/sols/ch11_online_softmax.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"
NEG = float("-inf")


def _online(Q, K, V, block_size, causal=False, *, scale=None, m0=NEG, rescale_acc=True,
            rescale_l=True, use_max=True, order=None, mask_off=0, safe=True,
            global_max=False, drop_last=False, inv=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    scale = 1 / math.sqrt(d) if scale is None else scale
    m = torch.full((b, nq, 1), m0, dtype=Q.dtype, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    starts = list(range(0, nk, block_size))
    if drop_last:
        starts = list(range(0, nk - block_size + 1, block_size))
    if order == "reverse":
        starts = starts[::-1]
    qi = torch.arange(nq, device=Q.device)[:, None]
    for s in starts:
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = (Q @ Kb.transpose(1, 2)) * scale
        if causal:
            kj = torch.arange(s, s + Kb.shape[1], device=Q.device)[None, :]
            S = S.masked_fill(kj > qi - mask_off, NEG)
        if use_max:
            if global_max:
                bm = S.amax().reshape(1, 1, 1).expand_as(m)
            else:
                bm = S.amax(-1, keepdim=True)
            m_new = torch.maximum(m, bm)
        else:
            m_new = torch.zeros_like(m)
        if safe:
            m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        else:
            m_use = m_new
        alpha = torch.exp(m - m_use) if not inv else torch.exp(m_use - m)
        P = torch.exp(S - m_use)
        l = (alpha * l if rescale_l else l) + P.sum(-1, keepdim=True)
        acc = (alpha * acc if rescale_acc else acc) + P @ Vb
        m = m_new
    return acc / l


def C_01_online(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def C_02_written_out(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), NEG)
    l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            i = torch.arange(nq, device=Q.device)
            S = S.masked_fill(j[None, :] > i[:, None], NEG)
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        # rows with nothing seen yet keep m_new = -inf; guard the exp
        shift = torch.where(m_new == NEG, torch.zeros_like(m_new), m_new)
        P = torch.exp(S - shift)
        corr = torch.exp(m - shift)
        l = corr * l + P.sum(-1, keepdim=True)
        acc = corr * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def O_01_reverse_block_order_safe(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, order="reverse")


def O_02_float64_inside(Q, K, V, block_size, causal=False):
    return _online(Q.double(), K.double(), V.double(), block_size, causal).to(Q.dtype)


def O_03_two_pass_exact_max(Q, K, V, block_size, causal=False):
    # first pass: exact row max over blocks; second pass: sums. Same memory per block.
    d = Q.shape[-1]
    nq = Q.shape[1]
    i = torch.arange(nq, device=Q.device)[:, None]
    m = Q.new_full((Q.shape[0], nq, 1), NEG)
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1], device=Q.device)[None] > i, NEG)
        m = torch.maximum(m, S.amax(-1, keepdim=True))
    l = torch.zeros_like(m)
    acc = Q.new_zeros(Q.shape[0], nq, V.shape[-1])
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1], device=Q.device)[None] > i, NEG)
        P = torch.exp(S - m)
        l = l + P.sum(-1, keepdim=True)
        acc = acc + P @ V[:, s:s + block_size]
    return acc / l


def W_01_acc_not_rescaled(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, rescale_acc=False)


def W_02_sum_not_rescaled(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, rescale_l=False)


def W_03_no_max(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, use_max=False)


def W_04_max_starts_at_zero(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, m0=0.0)


def W_05_causal_off_by_one(Q, K, V, block_size, causal=False):
    # query i sees keys j < i ... and query 0 sees key 0 only by accident? no: j <= i - 1
    return _online(Q, K, V, block_size, causal, mask_off=-1)


def W_06_block_level_causal(Q, K, V, block_size, causal=False):
    # causal: skip whole blocks that start after the query, no masking inside a block
    if not causal:
        return C_01_online(Q, K, V, block_size)
    outs = []
    for i in range(Q.shape[1]):
        last = (i // block_size + 1) * block_size
        outs.append(_online(Q[:, i:i + 1], K[:, :last], V[:, :last], block_size))
    return torch.cat(outs, 1)


def W_07_full_scores(Q, K, V, block_size, causal=False):
    S = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if causal:
        n = S.shape[-1]
        S = S.masked_fill(torch.ones(n, n, dtype=torch.bool, device=Q.device).triu(1), NEG)
    return torch.softmax(S, -1) @ V


def W_08_drops_short_last_block(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, drop_last=True)


def W_09_scale_by_d(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, scale=1 / Q.shape[-1])


def W_10_reverse_order_unsafe(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, order="reverse", safe=False)


def W_11_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, scale=1 / math.sqrt(V.shape[-1]))


def W_12_global_scalar_max(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, global_max=True)


def W_13_flatten_batch(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    out = _online(Q.reshape(1, b * nq, d), K.reshape(1, -1, d), V.reshape(1, -1, V.shape[-1]),
                  block_size, False)
    if causal:
        return C_01_online(Q, K, V, block_size, causal)
    return out.reshape(b, nq, -1)


def W_14_inverted_correction(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, inv=True)


def W_15_first_batch_only(Q, K, V, block_size, causal=False):
    out = _online(Q[:1], K[:1], V[:1], block_size, causal)
    return out.expand(Q.shape[0], -1, -1)


def O_04_nan_to_num_never_triggered(Q, K, V, block_size, causal=False):
    # unsafe exp(-inf - -inf) patched afterwards with nan_to_num
    return torch.nan_to_num(_online(Q, K, V, block_size, causal, safe=False))


def W_17_block_size_ignored_one_block(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, K.shape[1], causal)


def W_18_causal_ignored(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, False)


def W_19_per_block_softmax_averaged(Q, K, V, block_size, causal=False):
    # softmax inside each block, then a plain mean of the block outputs
    outs = []
    d = Q.shape[-1]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(S, -1) @ V[:, s:s + block_size])
    if causal:
        return C_01_online(Q, K, V, block_size, causal)
    return torch.stack(outs).mean(0)


def O_05_detached_running_max(Q, K, V, block_size, causal=False):
    # the shift cancels in acc / l, so detaching it keeps the gradient exact
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), NEG)
    l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    i = torch.arange(nq, device=Q.device)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1], device=Q.device)[None] > i, NEG)
        m_new = torch.maximum(m, S.detach().amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        corr = torch.exp(m - m_new)
        l = corr * l + P.sum(-1, keepdim=True)
        acc = corr * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l


def _loop(Q, K, V, block_size, causal, patch, detach=None, local_mask=False, full_mask=False,
          batch_max=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = Q.new_full((b, nq, 1), NEG)
    l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    i = torch.arange(nq, device=Q.device)[:, None]
    starts = list(range(0, nk, block_size))
    if patch:
        starts = starts[::-1]
    if full_mask and causal:
        fm = torch.full((nq, nk), NEG, device=Q.device).triu(1)
    for s in starts:
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        if detach == "V":
            Vb = Vb.detach()
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            if full_mask:
                S = S + fm[:, s:s + block_size]
            else:
                j = torch.arange(Kb.shape[1], device=Q.device)[None] + (0 if local_mask else s)
                S = S.masked_fill(j > i, NEG)
        bm = S.amax(-1, keepdim=True)
        if batch_max:
            bm = bm.amax(0, keepdim=True).expand_as(m)
        m_new = torch.maximum(m, bm)
        corr = torch.exp(m - m_new)
        P = torch.exp(S - m_new)
        if patch:
            corr = torch.where(torch.isnan(corr), torch.zeros_like(corr), corr)
            P = torch.where(torch.isnan(P), torch.zeros_like(P), P)
        l = corr * l + P.sum(-1, keepdim=True)
        acc = corr * acc + P @ Vb
        if detach == "l":
            l = l.detach()
        m = m_new
    return acc / l


def O_06_reverse_order_where_patched(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=True)


def W_21_detach_values(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=False, detach="V")


def W_22_detach_running_sum(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=False, detach="l")


def W_23_causal_mask_block_local_index(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=False, local_mask=True)


def W_24_full_causal_mask_precomputed(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=False, full_mask=True)


def W_25_max_shared_across_batch(Q, K, V, block_size, causal=False):
    return _loop(Q, K, V, block_size, causal, patch=False, batch_max=True)


def W_26_keeps_all_block_scores(Q, K, V, block_size, causal=False):
    # stores every block's scores, then one softmax at the end
    d = Q.shape[-1]
    blocks = []
    for s in range(0, K.shape[1], block_size):
        blocks.append(Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d))
    S = torch.cat(blocks, -1)
    if causal:
        n = S.shape[-1]
        S = S.masked_fill(torch.ones(n, n, dtype=torch.bool, device=Q.device).triu(1), NEG)
    return torch.softmax(S, -1) @ V


def W_27_returns_float64(Q, K, V, block_size, causal=False):
    return _online(Q.double(), K.double(), V.double(), block_size, causal)


def O_07_in_place_running_updates(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), NEG)
    l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    i = torch.arange(nq, device=Q.device)[:, None]
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1], device=Q.device)[None] > i, NEG)
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        alpha = torch.exp(m - m_new)
        l.mul_(alpha).add_(P.sum(-1, keepdim=True))
        acc.mul_(alpha).add_(P @ V[:, s:s + block_size])
        m = m_new
    return acc / l


def S_01_calls_sdpa(Q, K, V, block_size, causal=False):
    from torch.nn import functional as F
    return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)


# S_ (against the wording: blocks of queries, not of keys, and no running statistics). Since
# round 4 the checker measures the memory on 64 queries against 8192 keys and rejects it:
# tests/test_checks_ch11.py asserts the message.
def S_02_query_chunks_exact_softmax(Q, K, V, block_size, causal=False):
    # blocks of queries against all keys: exact softmax, no running statistics
    d = Q.shape[-1]
    outs = []
    nk = K.shape[1]
    for s in range(0, Q.shape[1], block_size):
        S = Q[:, s:s + block_size] @ K.transpose(1, 2) / math.sqrt(d)
        if causal:
            i = torch.arange(s, s + S.shape[1], device=Q.device)[:, None]
            S = S.masked_fill(torch.arange(nk, device=Q.device)[None] > i, NEG)
        outs.append(torch.softmax(S, -1) @ V)
    return torch.cat(outs, 1)
