"""Round 10 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch

CHECK = "check_chunked_attention"


def _block(q, K, V, scale):
    s = torch.bmm(q, K.transpose(1, 2)) / scale
    return torch.bmm(torch.softmax(s, dim=-1), V)


def W_01_drop_remainder(Q, K, V, chunk_size):
    m, d = Q.shape[1], Q.shape[-1]
    outs = [_block(Q[:, i * chunk_size:(i + 1) * chunk_size], K, V, math.sqrt(d))
            for i in range(m // chunk_size)]
    return torch.cat(outs, dim=1)


def W_02_scale_value_dim(Q, K, V, chunk_size):
    outs = [_block(Q[:, i:i + chunk_size], K, V, math.sqrt(V.shape[-1]))
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_03_naive_exp(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(d))
        outs.append(torch.bmm(e / e.sum(-1, keepdim=True), V))
    return torch.cat(outs, dim=1)


def W_04_buffer_default_dtype(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = torch.zeros(b, m, V.shape[-1], device=Q.device)
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _block(Q[:, i:i + chunk_size], K, V, math.sqrt(d))
    return out.to(Q.dtype)


def W_05_torch_chunk_count(Q, K, V, chunk_size):
    # Tensor.chunk takes the NUMBER of chunks, not their size
    d = Q.shape[-1]
    return torch.cat([_block(q, K, V, math.sqrt(d)) for q in Q.chunk(chunk_size, dim=1)], 1)


def W_06_no_grad(Q, K, V, chunk_size):
    with torch.no_grad():
        return torch.cat([_block(Q[:, i:i + chunk_size], K, V, math.sqrt(Q.shape[-1]))
                          for i in range(0, Q.shape[1], chunk_size)], dim=1)


def W_07_detach_scores(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(d)).detach()
        outs.append(torch.bmm(torch.softmax(s, -1), V))
    return torch.cat(outs, dim=1)


def W_08_slice_batch_axis(Q, K, V, chunk_size):
    d = Q.shape[-1]
    return torch.cat([_block(Q[i:i + chunk_size], K[i:i + chunk_size], V[i:i + chunk_size],
                             math.sqrt(d)) for i in range(0, Q.shape[0], chunk_size)], 0)


def W_09_scale_num_queries(Q, K, V, chunk_size):
    outs = [_block(Q[:, i:i + chunk_size], K, V, math.sqrt(Q.shape[1]))
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_10_scale_chunk_len(Q, K, V, chunk_size):
    # scale from the chunk's own shape[1] (its number of queries), not d
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        outs.append(_block(q, K, V, math.sqrt(q.shape[-1] if q.shape[1] == 0 else q.shape[-1])
                           * (1.0 if i + chunk_size <= Q.shape[1] else 1.0001)))
    return torch.cat(outs, dim=1)


def O_04_end_aligned_last_chunk(Q, K, V, chunk_size):
    # last chunk aligned to the end (m - chunk_size): recomputes a few rows, still exact
    m, d = Q.shape[1], Q.shape[-1]
    outs = []
    for i in range(0, m, chunk_size):
        j = min(i, max(m - chunk_size, 0))
        o = _block(Q[:, j:j + chunk_size], K, V, math.sqrt(d))
        outs.append(o[:, i - j:])
    return torch.cat(outs, dim=1)


def W_12_half_scores_softmax_no_upcast_overflow(Q, K, V, chunk_size):
    # scales after the product, then exp in the input dtype via exp-normalise without max
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(d)
        s = s - s.mean(-1, keepdim=True)
        e = s.exp()
        outs.append(torch.bmm(e / e.sum(-1, keepdim=True), V))
    return torch.cat(outs, dim=1)


def W_13_keys_chunked_too(Q, K, V, chunk_size):
    # also cuts the keys into chunks and averages the per-chunk results
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        parts = [_block(q, K[:, j:j + chunk_size], V[:, j:j + chunk_size], math.sqrt(d))
                 for j in range(0, K.shape[1], chunk_size)]
        outs.append(torch.stack(parts).mean(0))
    return torch.cat(outs, dim=1)


def W_14_float32_for_float64(Q, K, V, chunk_size):
    scale = torch.tensor(Q.shape[-1], dtype=torch.float32).sqrt()
    outs = [_block(Q[:, i:i + chunk_size], K, V, scale) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def C_01_reference(Q, K, V, chunk_size):
    d = Q.shape[-1]
    return torch.cat([_block(Q[:, i:i + chunk_size], K, V, math.sqrt(d))
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def O_02_split_prescale(Q, K, V, chunk_size):
    Kt = K.transpose(1, 2)
    return torch.cat([torch.softmax(q @ Kt * Q.shape[-1] ** -0.5, -1) @ V
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def O_03_preallocated_right_dtype(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = Q.new_empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = _block(Q[:, i:i + chunk_size], K, V, math.sqrt(d))
    return out


def S_01_online_softmax_over_key_chunks(Q, K, V, chunk_size):
    # exact, but chunks the KEYS: holds num_queries x chunk_size scores
    d = Q.shape[-1]
    b, m, _ = Q.shape
    mx = torch.full((b, m, 1), float("-inf"), dtype=Q.dtype, device=Q.device)
    den = torch.zeros(b, m, 1, dtype=Q.dtype, device=Q.device)
    acc = torch.zeros(b, m, V.shape[-1], dtype=Q.dtype, device=Q.device)
    for j in range(0, K.shape[1], chunk_size):
        s = torch.bmm(Q, K[:, j:j + chunk_size].transpose(1, 2)) / math.sqrt(d)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        c = torch.exp(mx - new)
        e = torch.exp(s - new)
        den = den * c + e.sum(-1, keepdim=True)
        acc = acc * c + torch.bmm(e, V[:, j:j + chunk_size])
        mx = new
    return acc / den


def W_15_small_input_fast_path(Q, K, V, chunk_size):
    # skips the chunking when the whole score matrix is "small": holds m x n scores
    d = Q.shape[-1]
    if Q.shape[1] * K.shape[1] <= 100_000:
        return _block(Q, K, V, math.sqrt(d))
    return C_01_reference(Q, K, V, chunk_size)


_KT = {}


def W_16_cache_scaled_KT_by_shape(Q, K, V, chunk_size):
    key = (tuple(K.shape), K.dtype)
    if key not in _KT:
        _KT[key] = K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    Kt = _KT[key]
    return torch.cat([torch.softmax(torch.bmm(q, Kt), -1) @ V
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def W_17_prescale_Q_inplace(Q, K, V, chunk_size):
    # saves memory by scaling Q in place: changes the caller's Q
    Qs = Q.detach()
    Qs.mul_(Q.shape[-1] ** -0.5)
    return torch.cat([torch.softmax(torch.bmm(q, K.transpose(1, 2)), -1) @ V
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def O_05_scores_buffer_reused(Q, K, V, chunk_size):
    # writes every chunk's scores into one chunk-sized buffer (overwritten each chunk;
    # nothing saved for backward refers to it, so still exact)
    d = Q.shape[-1]
    b, m, _ = Q.shape
    buf = Q.new_empty(b, min(chunk_size, m), K.shape[1])
    outs = []
    for i in range(0, m, chunk_size):
        q = Q[:, i:i + chunk_size]
        s = buf[:, :q.shape[1]]
        torch.bmm(q, K.transpose(1, 2), out=s) if not (Q.requires_grad or K.requires_grad) \
            else s.copy_(torch.bmm(q, K.transpose(1, 2)))
        outs.append(torch.bmm(torch.softmax(s / math.sqrt(d), -1), V))
    return torch.cat(outs, dim=1)


def W_19_chunk_wide_max(Q, K, V, chunk_size):
    # one maximum per chunk (over all its queries), not per query row
    d = Q.shape[-1]
    outs = []
    for q in Q.split(chunk_size, dim=1):
        s = torch.bmm(q, K.transpose(1, 2)) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append(torch.bmm(e / e.sum(-1, keepdim=True), V))
    return torch.cat(outs, dim=1)


def O_06_pad_queries_to_multiple(Q, K, V, chunk_size):
    b, m, d = Q.shape
    pad = (-m) % chunk_size
    Qp = torch.cat([Q, Q.new_zeros(b, pad, d)], dim=1) if pad else Q
    out = torch.cat([_block(Qp[:, i:i + chunk_size], K, V, math.sqrt(d))
                     for i in range(0, m + pad, chunk_size)], dim=1)
    return out[:, :m]


LAST_WEIGHTS = []


def W_20_keeps_every_chunks_weights(Q, K, V, chunk_size):
    # keeps all chunks' weights alive (for "inspection"): peak memory m x n again
    d = Q.shape[-1]
    LAST_WEIGHTS.clear()
    outs = []
    for q in Q.split(chunk_size, dim=1):
        w = torch.softmax(torch.bmm(q, K.transpose(1, 2)) / math.sqrt(d), -1)
        LAST_WEIGHTS.append(w)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_21_transpose_inplace(Q, K, V, chunk_size):
    # transpose_ changes the caller's K to (batch, d, num_keys)
    Kt = K.transpose_(1, 2) if not K.requires_grad else K.transpose(1, 2)
    return torch.cat([torch.softmax(torch.bmm(q, Kt) / math.sqrt(Q.shape[-1]), -1) @ V
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def O_07_fused_sdpa_per_chunk(Q, K, V, chunk_size):
    F = torch.nn.functional
    return torch.cat([F.scaled_dot_product_attention(q, K, V) for q in Q.split(chunk_size, 1)],
                     dim=1)


def W_22_single_key_returns_V_view(Q, K, V, chunk_size):
    # one key: every weight is 1, so it returns V expanded: a view that aliases the input V
    # (for one query it IS V's memory; in-place ops on the result change V)
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1])
    return C_01_reference(Q, K, V, chunk_size)
