"""Round 5 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/a1_chunked.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_chunked_attention"


def _attend(q, K, V):
    s = q @ K.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ V


def C_01_standard(Q, K, V, chunk_size):
    outs = [_attend(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_02_split(Q, K, V, chunk_size):
    return torch.cat([_attend(q, K, V) for q in Q.split(chunk_size, dim=1)], dim=1)


def O_03_preallocated(Q, K, V, chunk_size):
    b, m, _ = Q.shape
    out = Q.new_empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _attend(Q[:, i:i + chunk_size], K, V)
    return out


def O_04_fused_sdpa_per_chunk(Q, K, V, chunk_size):
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def W_01_not_chunked(Q, K, V, chunk_size):
    return _attend(Q, K, V)


def W_02_chunks_keys(Q, K, V, chunk_size):
    # softmax inside each key chunk, then average the chunks: not exact
    outs = [_attend(Q, K[:, j:j + chunk_size], V[:, j:j + chunk_size])
            for j in range(0, K.shape[1], chunk_size)]
    return torch.stack(outs).mean(0)


def W_03_drops_last_chunk(Q, K, V, chunk_size):
    m = Q.shape[1]
    outs = [_attend(Q[:, i:i + chunk_size], K, V)
            for i in range(0, m - chunk_size + 1, chunk_size)]
    return torch.cat(outs, dim=1)


def W_04_scale_by_chunk(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = q @ K.transpose(1, 2) / math.sqrt(q.shape[1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, dim=1)


def W_05_full_scores_then_chunk_softmax(Q, K, V, chunk_size):
    s = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    outs = [torch.softmax(s[:, i:i + chunk_size], -1) @ V for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_06_float32_result(Q, K, V, chunk_size):
    return C_01_standard(Q.float(), K.float(), V.float(), chunk_size)


def W_07_exp_without_max(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        e = s.exp()
        outs.append(e / e.sum(-1, keepdim=True) @ V)
    return torch.cat(outs, dim=1)


def W_08_slice_off_by_one(Q, K, V, chunk_size):
    outs = [_attend(Q[:, i:i + chunk_size - 1], K, V) if chunk_size > 1 else
            _attend(Q[:, i:i + 1], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_09_softmax_over_queries(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        outs.append(torch.softmax(s, 1) @ V)
    return torch.cat(outs, dim=1)


def W_10_batch_zero_only(Q, K, V, chunk_size):
    outs = [_attend(Q[:1, i:i + chunk_size], K[:1], V[:1]) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1).expand(Q.shape[0], -1, -1)


def W_11_no_grad(Q, K, V, chunk_size):
    with torch.no_grad():
        return C_01_standard(Q, K, V, chunk_size)


def W_12_inplace_scale(Q, K, V, chunk_size):
    Q /= math.sqrt(Q.shape[-1])
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_13_zeros_default_dtype(Q, K, V, chunk_size):
    b, m, _ = Q.shape
    out = torch.zeros(b, m, V.shape[-1], device=Q.device)
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _attend(Q[:, i:i + chunk_size], K, V)
    return out


def W_14_chunks_batch(Q, K, V, chunk_size):
    # loops over examples instead of query chunks: n^2 scores per example
    return torch.cat([_attend(Q[j:j + 1], K[j:j + 1], V[j:j + 1]) for j in range(Q.shape[0])])


def W_15_scale_by_value_dim(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(V.shape[-1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, dim=1)


_kept = []


def W_16_keeps_every_chunks_weights(Q, K, V, chunk_size):
    # keeps the weights of every chunk "for plotting": all n^2 weights are alive at the end
    _kept.clear()
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), -1)
        _kept.append(w)
        outs.append(w @ V)
    return torch.cat(outs, dim=1)


def W_17_fixed_chunk_ignores_argument(Q, K, V, chunk_size):
    return C_01_standard(Q, K, V, 64)


def W_18_numchunks_not_size(Q, K, V, chunk_size):
    # treats chunk_size as the number of chunks
    return torch.cat([_attend(q, K, V) for q in Q.chunk(chunk_size, dim=1)], dim=1)


def W_19_kt_materialised_per_chunk_float64(Q, K, V, chunk_size):
    # computes in float64 for accuracy and casts back; doubles memory but also fine? no:
    # casts the scores to float16 before softmax to "save memory"
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])).half()
        outs.append(torch.softmax(s.float(), -1).to(V.dtype) @ V)
    return torch.cat(outs, dim=1)


def O_05_loop_examples_and_chunks(Q, K, V, chunk_size):
    return torch.stack([C_01_standard(Q[j:j + 1], K[j:j + 1], V[j:j + 1], chunk_size)[0]
                        for j in range(Q.shape[0])])


def W_20_view_flattens_keys(Q, K, V, chunk_size):
    # flattens K and V with .view: raises on non-contiguous K or V (e.g. from a transpose)
    b, n, d = K.shape
    Kf, Vf = K.view(b * n, d), V.view(b * n, -1)
    outs = []
    for j in range(b):
        Kj, Vj = Kf[j * n:(j + 1) * n], Vf[j * n:(j + 1) * n]
        outs.append(torch.cat([_attend(Q[j, i:i + chunk_size], Kj, Vj)
                               for i in range(0, Q.shape[1], chunk_size)]))
    return torch.stack(outs)


def S_01_fused_sdpa_unchunked(Q, K, V, chunk_size):
    return F.scaled_dot_product_attention(Q, K, V)


def W_21_squeeze_habit(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] @ K.transpose(1, 2)).squeeze() / math.sqrt(Q.shape[-1])
        outs.append(torch.softmax(s, -1) @ V.squeeze())
    return torch.cat(outs, dim=-2).reshape(Q.shape[0], Q.shape[1], V.shape[-1])


def W_22_keys_detached(Q, K, V, chunk_size):
    return C_01_standard(Q, K.detach(), V, chunk_size)


def W_23_values_detached(Q, K, V, chunk_size):
    return C_01_standard(Q, K, V.detach(), chunk_size)
