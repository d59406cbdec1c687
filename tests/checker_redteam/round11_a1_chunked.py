"""Round 11 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
CHECK = "check_chunked_attention"


def _chunk(q, K, V, d):
    return torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), dim=-1) @ V


def C_01_standard(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = [_chunk(Q[:, i:i + chunk_size], K, V, d)
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_02_split_and_float32(Q, K, V, chunk_size):
    half = Q.dtype in (torch.float16, torch.bfloat16)
    d = Q.shape[-1]
    Kt = K.transpose(1, 2)
    outs = []
    for q in torch.split(Q, chunk_size, dim=1):
        s = torch.bmm(q, Kt) / math.sqrt(d)
        w = torch.softmax(s.float() if half else s, dim=-1).to(Q.dtype)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def O_03_preallocated_out(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = Q.new_empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _chunk(Q[:, i:i + chunk_size], K, V, d)
    return out


def W_01_tensor_chunk(Q, K, V, chunk_size):
    # Tensor.chunk(chunk_size) makes chunk_size pieces, not pieces of chunk_size
    d = Q.shape[-1]
    return torch.cat([_chunk(q, K, V, d) for q in Q.chunk(chunk_size, dim=1)], dim=1)


def O_04_overlapping_last_chunk(Q, K, V, chunk_size):
    m, d = Q.shape[1], Q.shape[-1]
    outs = [_chunk(Q[:, i:i + chunk_size], K, V, d)
            for i in range(0, m - chunk_size + 1, chunk_size)]
    if m % chunk_size:
        outs.append(_chunk(Q[:, m - chunk_size:], K, V, d)[:, chunk_size - m % chunk_size:]
                    if m >= chunk_size else _chunk(Q, K, V, d))
    return torch.cat(outs, dim=1)


def W_03_keeps_weights(Q, K, V, chunk_size, _log=[]):
    # keeps every chunk's weights "for plotting": holds all num_queries x num_keys
    d = Q.shape[-1]
    outs = []
    _log.clear()
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        _log.append(w)
        outs.append(w @ V)
    return torch.cat(outs, dim=1)


def W_04_chunks_over_keys(Q, K, V, chunk_size):
    # chunks the keys and averages the per-chunk outputs (not exact)
    d = Q.shape[-1]
    outs = [_chunk(Q, K[:, i:i + chunk_size], V[:, i:i + chunk_size], d)
            for i in range(0, K.shape[1], chunk_size)]
    return torch.stack(outs).mean(0)


def W_05_inplace_manual_softmax(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        s = s - s.amax(-1, keepdim=True)
        s.exp_()
        s /= s.sum(-1, keepdim=True)
        outs.append(s @ V)
    return torch.cat(outs, dim=1)


def W_06_out_default_dtype(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = torch.zeros(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _chunk(Q[:, i:i + chunk_size], K, V, d)
    return out


def W_07_full_scores_then_chunk_softmax(Q, K, V, chunk_size):
    # computes all scores at once, then the softmax chunk by chunk
    d = Q.shape[-1]
    S = Q @ K.transpose(1, 2) / math.sqrt(d)
    outs = [torch.softmax(S[:, i:i + chunk_size], -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_08_single_chunk_returns_view(Q, K, V, chunk_size):
    # one key: weights are all 1, so the output is V broadcast (a view)
    if K.shape[1] == 1:
        return V.expand(-1, Q.shape[1], -1)
    return C_01_standard(Q, K, V, chunk_size)


def O_05_convoluted_but_right_scale(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        outs.append(_chunk(q, K, V, q.shape[1] if q.shape[1] == d else d) if False else
                    torch.softmax(q @ K.transpose(1, 2) / math.sqrt(K.shape[1] ** 0 * d), -1) @ V)
    return torch.cat(outs, dim=1)


def W_10_float16_exp_no_shift(Q, K, V, chunk_size):
    # manual softmax without the max shift
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


# S_: right values within the exercise's memory bound (chunk_size x b*n scores per chunk
# = b x chunk_size x n), but b times the multiply-adds: the text bounds the memory, not
# the work, so it stays S_ (not run).
def S_01_batch_flattened_chunks(Q, K, V, chunk_size):
    # flattens (batch, queries) and takes chunk_size rows across examples: every row
    # scores against every example's keys, the others masked -> b x more scores held
    b, m, d = Q.shape
    n = K.shape[1]
    Qf = Q.reshape(b * m, d)
    Kf = K.reshape(b * n, d)
    Vf = V.reshape(b * n, -1)
    own = torch.arange(b).repeat_interleave(m)
    keyex = torch.arange(b).repeat_interleave(n)
    outs = []
    for i in range(0, b * m, chunk_size):
        s = Qf[i:i + chunk_size] @ Kf.T / math.sqrt(d)
        s = s.masked_fill(own[i:i + chunk_size, None] != keyex[None, :], float("-inf"))
        outs.append(torch.softmax(s, -1) @ Vf)
    return torch.cat(outs).reshape(b, m, -1)


def W_12_float16_softmax_in_float32_returns_float32(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size].float() @ K.float().transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V.float())
    out = torch.cat(outs, dim=1)
    return out.double() if Q.dtype == torch.float64 else out


def W_13_chunk_size_in_total_rows(Q, K, V, chunk_size):
    # treats chunk_size as the total over the batch: chunk_size // batch queries per
    # chunk, but at least 1... and at most chunk_size -> fine; wrong when batch > chunk
    b, m, d = Q.shape
    step = max(chunk_size // b, 1) * 2
    outs = [_chunk(Q[:, i:i + step], K, V, d) for i in range(0, m, step)]
    return torch.cat(outs, dim=1)


def W_14_scale_by_value_dim(Q, K, V, chunk_size):
    d = V.shape[-1]
    outs = [_chunk(Q[:, i:i + chunk_size], K, V, d) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_15_clamp_scores_1e4(Q, K, V, chunk_size):
    # clamps the scores to +-1e4 "so float16 cannot overflow", for every dtype
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)).clamp(-1e4, 1e4)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, dim=1)


def W_16_scores_detached_max_shift_wrong_axis(Q, K, V, chunk_size):
    # max shift over the chunk's queries (axis 1) instead of the keys
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


def O_06_F_sdpa_per_chunk(Q, K, V, chunk_size):
    F = torch.nn.functional
    return torch.cat([F.scaled_dot_product_attention(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def W_17_scale_Q_in_place_no_grad(Q, K, V, chunk_size):
    d = Q.shape[-1]
    Qs = Q.mul_(1 / math.sqrt(d)) if not Q.requires_grad else Q / math.sqrt(d)
    outs = [torch.softmax(Qs[:, i:i + chunk_size] @ K.transpose(1, 2), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_18_max_per_chunk_matrix(Q, K, V, chunk_size):
    # one max per chunk and example (over the chunk's queries and keys)
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True).detach())
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


def W_19_scores_under_no_grad(Q, K, V, chunk_size):
    # computes the weights under no_grad "to save memory": no gradient for Q and K
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        with torch.no_grad():
            w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        outs.append(w @ V)
    return torch.cat(outs, dim=1)


def W_20_inclusive_end_chunks(Q, K, V, chunk_size):
    # off by one: chunks of chunk_size + 1 queries (inclusive end index)
    d = Q.shape[-1]
    outs = [_chunk(Q[:, i:i + chunk_size + 1], K, V, d)
            for i in range(0, Q.shape[1], chunk_size + 1)]
    return torch.cat(outs, dim=1)
