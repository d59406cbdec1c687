"""Round 6 red team (writer D, issue 12), ch11_online: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/D/sols/ch11_online.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"
import math
import torch


def _core(Q, K, V, block_size, causal=False, fill=float("-inf"), scale_dim=None,
          order=None, detach_m=False, inplace=False, init_m=float("-inf")):
    b, nq, d = Q.shape
    nk = K.shape[1]
    sd = d if scale_dim is None else scale_dim
    m = torch.full((b, nq, 1), init_m, dtype=Q.dtype, device=Q.device)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype, device=Q.device)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype, device=Q.device)
    qi = torch.arange(nq, device=Q.device)[:, None]
    starts = list(range(0, nk, block_size))
    if order == "reverse":
        starts = starts[::-1]
    for s in starts:
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(sd)
        if causal:
            kj = torch.arange(s, s + Kb.shape[1], device=Q.device)[None, :]
            S = S.masked_fill(kj > qi, fill)
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        if detach_m:
            m_new = m_new.detach()
        alpha = torch.exp(m - m_new)
        P = torch.exp(S - m_new)
        if inplace:
            l.mul_(alpha).add_(P.sum(-1, keepdim=True))
            acc.mul_(alpha).add_(P @ Vb)
        else:
            l = l * alpha + P.sum(-1, keepdim=True)
            acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def C_01_reference(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal)


def O_02_detached_running_max(Q, K, V, block_size, causal=False):
    # the max is a constant for softmax: detaching it leaves gradients exact
    return _core(Q, K, V, block_size, causal, detach_m=True)


def O_03_float64_state(Q, K, V, block_size, causal=False):
    return _core(Q.double(), K.double(), V.double(), block_size, causal).to(Q.dtype)


def O_04_finite_init_minus_1e30(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, init_m=-1e30)


# ---- wrong ----

def W_01_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, scale_dim=V.shape[-1])


def W_02_mask_fill_minus_1e4(Q, K, V, block_size, causal=False):
    # "a large negative number" for the masked keys
    return _core(Q, K, V, block_size, causal, fill=-1e4)


def W_03_mask_fill_minus_1000(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, fill=-1000.0)


def W_04_blocks_in_reverse(Q, K, V, block_size, causal=False):
    # order does not matter... except a fully masked first block gives -inf - -inf
    return _core(Q, K, V, block_size, causal, order="reverse")


def O_05_inplace_running_state(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, inplace=True)


def W_06_drop_last_partial_block(Q, K, V, block_size, causal=False):
    nk = K.shape[1]
    full = (nk // block_size) * block_size if nk >= block_size else nk
    return _core(Q, K[:, :full], V[:, :full], block_size, causal and full == nk) if full < nk and not causal else _core(Q, K, V, block_size, causal)


def W_07_zero_pad_to_block_multiple(Q, K, V, block_size, causal=False):
    nk = K.shape[1]
    pad = (-nk) % block_size
    if pad and not causal:
        K = torch.cat([K, K.new_zeros(K.shape[0], pad, K.shape[2])], 1)
        V = torch.cat([V, V.new_zeros(V.shape[0], pad, V.shape[2])], 1)
    return _core(Q, K, V, block_size, causal)


def W_08_scale_inputs_inplace(Q, K, V, block_size, causal=False):
    # pre-scales Q once, in place, "to save a multiply per block"
    Q = Q.detach().mul_(1.0 / math.sqrt(Q.shape[-1])) if not Q.requires_grad else Q.mul(1.0 / math.sqrt(Q.shape[-1]))
    return _core(Q, K, V, block_size, causal, scale_dim=1)


def O_09_nan_to_num_after_reverse(Q, K, V, block_size, causal=False):
    # reverse block order, NaN from a fully masked block cleaned with nan_to_num
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in list(range(0, nk, block_size))[::-1]:
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + Kb.shape[1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        alpha = torch.nan_to_num(torch.exp(m - m_new))
        P = torch.nan_to_num(torch.exp(S - m_new))
        l = l * alpha + P.sum(-1, keepdim=True)
        acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def W_10_causal_local_index(Q, K, V, block_size, causal=False):
    # the mask compares the key's index inside its block with the query's index
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, nk, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(Kb.shape[1])[None, :] + (s if s < nq // 2 else 0) > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        alpha, P = torch.exp(m - m_new), torch.exp(S - m_new)
        l = l * alpha + P.sum(-1, keepdim=True)
        acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def W_11_skip_blocks_after_first_query(Q, K, V, block_size, causal=False):
    # causal: stops at the block of the LAST query of the first block of queries
    if not causal:
        return _core(Q, K, V, block_size)
    nk = K.shape[1]
    stop = min(nk, max(block_size, nk - block_size))
    return _core(Q, K[:, :stop], V[:, :stop], block_size, True) if False else _core2(Q, K, V, block_size, stop)


def _core2(Q, K, V, block_size, stop):
    b, nq, d = Q.shape
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, stop, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        S = S.masked_fill(torch.arange(s, s + Kb.shape[1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        alpha, P = torch.exp(m - m_new), torch.exp(S - m_new)
        l = l * alpha + P.sum(-1, keepdim=True)
        acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def W_12_m_not_updated_in_l(Q, K, V, block_size, causal=False):
    # rescales acc but forgets to rescale l when the max grows (right if first block holds max)
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"), dtype=Q.dtype)
    l = torch.zeros((b, nq, 1), dtype=Q.dtype)
    acc = torch.zeros((b, nq, V.shape[-1]), dtype=Q.dtype)
    qi = torch.arange(nq)[:, None]
    for s in range(0, nk, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + Kb.shape[1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        alpha, P = torch.exp(m - m_new), torch.exp(S - m_new)
        l = l * torch.where(alpha > 0.5, alpha, torch.ones_like(alpha)) + P.sum(-1, keepdim=True)
        acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def W_13_output_float32_for_half(Q, K, V, block_size, causal=False):
    return _core(Q.float(), K.float(), V.float(), block_size, causal)


def W_14_global_max_first_pass_full_scores(Q, K, V, block_size, causal=False):
    # computes the max on the full score matrix, then blocks (memory!)
    S = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if causal:
        S = S.masked_fill(torch.ones(S.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    P = torch.exp(S - S.amax(-1, keepdim=True))
    return (P @ V) / P.sum(-1, keepdim=True)


def W_15_view_needs_contiguous(Q, K, V, block_size, causal=False):
    # flattens batch and queries with .view: crashes on a transposed Q (valid input)
    b, nq, d = Q.shape
    Qf = Q.view(b * nq, d).view(b, nq, d)
    Kt = K.transpose(1, 2).view(b, d, -1) if K.is_contiguous() else K.transpose(1, 2).view(b, d, -1)
    return _core(Qf, K, V, block_size, causal)


def W_16_truncated_graph_acc_detach(Q, K, V, block_size, causal=False):
    # detaches the running state each block "to keep the graph small"
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"))
    l = torch.zeros((b, nq, 1))
    acc = torch.zeros((b, nq, V.shape[-1]))
    qi = torch.arange(nq)[:, None]
    for s in range(0, nk, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        if causal:
            S = S.masked_fill(torch.arange(s, s + Kb.shape[1])[None, :] > qi, float("-inf"))
        m_new = torch.maximum(m, S.amax(-1, keepdim=True))
        alpha, P = torch.exp(m - m_new), torch.exp(S - m_new)
        l = l.detach() * alpha + P.sum(-1, keepdim=True)
        acc = acc.detach() * alpha + P @ Vb
        m = m_new
    return acc / l


# Was O_ until session 21: under the float64 rule a float64 input asks for float64 accuracy,
# and this keeps its running state in float32 (3.1e-7 off).
def W_17_state_in_float32_cast_back(Q, K, V, block_size, causal=False):
    # state always float32 on the CPU: float64 inputs lose precision (and CUDA crashes)
    b, nq, d = Q.shape
    out = _core(Q.float(), K.float(), V.float(), block_size, causal)
    return out.to(Q.dtype)


_buf = {}


def W_18_reused_output_buffer(Q, K, V, block_size, causal=False):
    y = _core(Q, K, V, block_size, causal)
    key = (tuple(y.shape), y.dtype)
    if key not in _buf:
        _buf[key] = torch.empty_like(y)
    return _buf[key].copy_(y)


def O_19_causal_skips_future_blocks(Q, K, V, block_size, causal=False):
    if not causal:
        return _core(Q, K, V, block_size)
    nq = Q.shape[1]
    stop = min(K.shape[1], nq)  # keys >= nq are never seen; blocks past the last query skipped
    return _core(Q, K[:, :stop], V[:, :stop], block_size, True)


def _mult(Q, K, V, block_size, causal, visible_max):
    b, nq, d = Q.shape
    nk = K.shape[1]
    m = torch.full((b, nq, 1), float("-inf"))
    l = torch.zeros((b, nq, 1))
    acc = torch.zeros((b, nq, V.shape[-1]))
    qi = torch.arange(nq)[:, None]
    for s in range(0, nk, block_size):
        Kb, Vb = K[:, s:s + block_size], V[:, s:s + block_size]
        S = Q @ Kb.transpose(1, 2) / math.sqrt(d)
        keep = (torch.arange(s, s + Kb.shape[1])[None, :] <= qi) if causal else torch.ones(nq, Kb.shape[1], dtype=torch.bool)
        Smax = S.masked_fill(~keep, float("-inf")) if visible_max else S
        m_new = torch.maximum(m, Smax.amax(-1, keepdim=True))
        safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
        alpha = torch.exp(m - safe)
        P = torch.exp(S.masked_fill(~keep, 0.0) - safe) * keep
        l = l * alpha + P.sum(-1, keepdim=True)
        acc = acc * alpha + P @ Vb
        m = m_new
    return acc / l


def W_19_multiplicative_mask_max_over_all(Q, K, V, block_size, causal=False):
    # exp(s - m) * mask, with the running max taken over the hidden keys too
    return _mult(Q, K, V, block_size, causal, visible_max=False)


def W_20_mult_mask_fill0_inf_times_0(Q, K, V, block_size, causal=False):
    return _mult(Q, K, V, block_size, causal, visible_max=True)
