"""Round 3 red team (writer R3, issue 12), ch11_online: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch11_online.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"
import math, torch

def _core(Q, K, V, block_size, causal=False, scale_dim=None, causal_local=False, causal_strict=False,
          rescale_acc=True, rescale_l=True, use_max=True, running_max=True, drop_last=False,
          acc_dtype=None, detach_max=False):
    b, nq, d = Q.shape
    nk = K.shape[1]
    scale = 1 / math.sqrt(scale_dim if scale_dim is not None else d)
    dt = acc_dtype or Q.dtype
    m = torch.full((b, nq, 1), float("-inf"), dtype=dt, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=dt, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=dt, device=Q.device)
    qi = torch.arange(nq, device=Q.device)[:, None]
    end = (nk // block_size) * block_size if drop_last else nk
    for s in range(0, end, block_size):
        Kb, Vb = K[:, s:s + block_size].to(dt), V[:, s:s + block_size].to(dt)
        S = (Q.to(dt) @ Kb.transpose(1, 2)) * scale
        if causal:
            kj = torch.arange(Kb.shape[1], device=Q.device)[None, :] + (0 if causal_local else s)
            allowed = kj < qi if causal_strict else kj <= qi
            S = S.masked_fill(~allowed, float("-inf"))
        if not use_max:
            P = torch.exp(S)
            l = l + P.sum(-1, keepdim=True)
            acc = acc + P @ Vb
            continue
        bm = S.max(-1, keepdim=True).values
        m_new = torch.maximum(m, bm) if running_max else bm
        if detach_max:
            m_new = m_new.detach()
        safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
        alpha = torch.exp(m - safe)
        P = torch.exp(S - safe)
        l = (alpha * l if rescale_l else l) + P.sum(-1, keepdim=True)
        acc = (alpha * acc if rescale_acc else acc) + P @ Vb
        m = m_new
    return (acc / l).to(Q.dtype)

def C_1_reference(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal)

def C_2_plain_loop(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), float("-inf")); l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            i = torch.arange(nq, device=Q.device)
            S = S.masked_fill(j[None, :] > i[:, None], float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new)
        c = torch.exp(m - m_new)
        l = c * l + P.sum(-1, keepdim=True)
        acc = c * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l

def O_1_causal_skip_future_blocks(Q, K, V, block_size, causal=False):
    if not causal:
        return C_2_plain_loop(Q, K, V, block_size)
    nq = Q.shape[1]
    b, _, d = Q.shape
    m = Q.new_full((b, nq, 1), float("-inf")); l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    for s in range(0, min(K.shape[1], nq), block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        j = torch.arange(s, s + S.shape[-1], device=Q.device)
        S = S.masked_fill(j[None, :] > torch.arange(nq, device=Q.device)[:, None], float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new); c = torch.exp(m - m_new)
        l = c * l + P.sum(-1, keepdim=True); acc = c * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l

def O_2_float64_accumulators(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, acc_dtype=torch.float64)

def O_3_detached_running_max(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, detach_max=True)

def W_01_no_max_subtraction(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, use_max=False)

def W_02_acc_not_rescaled(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, rescale_acc=False)

def W_03_sum_not_rescaled(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, rescale_l=False)

def W_04_causal_strict(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, causal_strict=True)

def W_05_full_score_matrix(Q, K, V, block_size, causal=False):
    d = Q.shape[-1]
    S = Q @ K.transpose(1, 2) / math.sqrt(d)
    if causal:
        n = S.shape[-1]
        S = S.masked_fill(torch.ones(n, n, dtype=torch.bool, device=Q.device).triu(1), float("-inf"))
    return torch.softmax(S, -1) @ V

def W_06_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, scale_dim=V.shape[-1])

def W_07_causal_block_local_index(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, causal_local=True)

def W_08_block_max_not_running(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, running_max=False)

def W_09_drops_last_partial_block(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, drop_last=True)

def W_10_scales_Q_in_place(Q, K, V, block_size, causal=False):
    if Q.requires_grad:
        return _core(Q, K, V, block_size, causal)
    Q /= math.sqrt(Q.shape[-1])
    return _core(Q, K, V, block_size, causal, scale_dim=1)

def W_11_float16_inputs_float16_accumulators_no_upcast_but_exp_of_unscaled(Q, K, V, block_size, causal=False):
    # forgets the 1/sqrt(d) scaling entirely
    return _core(Q, K, V, block_size, causal, scale_dim=1)

def S_1_hardcoded_block_128_output_right(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, 128, causal)

def W_13_causal_mask_nan_first_block_minus_inf_no_guard(Q, K, V, block_size, causal=False):
    # queries processed from the LAST key block backwards: a fully masked first visit gives NaN
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), float("-inf")); l = Q.new_zeros((b, nq, 1))
    acc = Q.new_zeros((b, nq, V.shape[-1]))
    starts = list(range(0, K.shape[1], block_size))[::-1]
    for s in starts:
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            S = S.masked_fill(j[None, :] > torch.arange(nq, device=Q.device)[:, None], float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new); c = torch.exp(m - m_new)
        l = c * l + P.sum(-1, keepdim=True); acc = c * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l

def W_14_full_sdpa_forbidden(Q, K, V, block_size, causal=False):
    from torch.nn import functional as F
    return F.scaled_dot_product_attention(Q, K, V, is_causal=causal)

def S_2_chunks_of_queries_not_key_blocks(Q, K, V, block_size, causal=False):
    outs = []
    n = K.shape[1]
    for i in range(0, Q.shape[1], block_size):
        S = Q[:, i:i + block_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        if causal:
            qi = torch.arange(i, i + S.shape[1], device=Q.device)[:, None]
            S = S.masked_fill(torch.arange(n, device=Q.device)[None, :] > qi, float("-inf"))
        outs.append(torch.softmax(S, -1) @ V)
    return torch.cat(outs, 1)

def W_15_torch_softmax_per_block_weighted_by_block_sums_no_max(Q, K, V, block_size, causal=False):
    # combines per-block softmax outputs weighted by each block's sum of exp(s - block max), but
    # forgets to bring the block maxima to a common reference
    outs, sums = [], []
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(Q.shape[-1])
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            S = S.masked_fill(j[None, :] > torch.arange(Q.shape[1], device=Q.device)[:, None], float("-inf"))
        m = S.amax(-1, keepdim=True).clamp(min=-1e30)
        E = torch.exp(S - m)
        l = E.sum(-1, keepdim=True)
        outs.append((E / l.clamp(min=1e-30)) @ V[:, s:s + block_size]); sums.append(l)
    tot = sum(sums)
    return sum(o * l for o, l in zip(outs, sums)) / tot

def W_16_m_initialised_to_zero(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = Q.new_zeros((b, nq, 1)); l = Q.new_zeros((b, nq, 1)); acc = Q.new_zeros((b, nq, V.shape[-1]))
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            S = S.masked_fill(j[None, :] > torch.arange(nq, device=Q.device)[:, None], float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new); c = torch.exp(m - m_new)
        l = c * l + P.sum(-1, keepdim=True); acc = c * acc + P @ V[:, s:s + block_size]
        m = m_new
    return acc / l

def O_4_normalised_running_output(Q, K, V, block_size, causal=False):
    b, nq, d = Q.shape
    m = Q.new_full((b, nq, 1), float("-inf")); l = Q.new_zeros((b, nq, 1)); o = Q.new_zeros((b, nq, V.shape[-1]))
    for s in range(0, K.shape[1], block_size):
        S = Q @ K[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            j = torch.arange(s, s + S.shape[-1], device=Q.device)
            S = S.masked_fill(j[None, :] > torch.arange(nq, device=Q.device)[:, None], float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        P = torch.exp(S - m_new); c = torch.exp(m - m_new)
        l_new = c * l + P.sum(-1, keepdim=True)
        o = (o * (c * l) + P @ V[:, s:s + block_size]) / l_new
        m, l = m_new, l_new
    return o
