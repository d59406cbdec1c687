"""Round 6 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round6/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F
CHECK = "check_chunked_attention"

def C_01_plain(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, dim=1)

def O_02_split_prealloc(Q, K, V, chunk_size):
    # preallocated output with the right dtype, torch.split
    b, m, d = Q.shape
    out = V.new_empty(b, m, V.shape[-1])
    i = 0
    for q in torch.split(Q, chunk_size, dim=1):
        out[:, i:i + q.shape[1]] = torch.softmax(q @ K.mT * d ** -0.5, -1) @ V
        i += q.shape[1]
    return out

def O_03_fused_per_chunk(Q, K, V, chunk_size):
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)

def W_01_torch_chunk_count(Q, K, V, chunk_size):
    # torch.chunk takes the NUMBER of chunks, not their size
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
                      for q in Q.chunk(chunk_size, dim=1)], dim=1)

def W_02_hardcoded_64(Q, K, V, chunk_size):
    # ignores chunk_size: always 64 queries at a time
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
                      for q in Q.split(64, dim=1)], dim=1)

def W_03_prealloc_default_dtype(Q, K, V, chunk_size):
    # torch.zeros without dtype: float64/float16 inputs come back float32
    b, m, d = Q.shape
    out = torch.zeros(b, m, V.shape[-1], device=Q.device)
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d), -1) @ V
    return out

def W_04_chunk_wide_max(Q, K, V, chunk_size):
    # own softmax with ONE max per chunk (not per row): rows far below it underflow to 0/0
    d = Q.shape[-1]
    outs = []
    for q in Q.split(chunk_size, dim=1):
        s = q @ K.mT / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)

def W_05_no_max_subtraction(Q, K, V, chunk_size):
    # exp(s) / sum: overflows in float16 (exp(12) > 65504) and for large scores
    d = Q.shape[-1]
    outs = []
    for q in Q.split(chunk_size, dim=1):
        e = torch.exp(q @ K.mT / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)

def W_06_keeps_all_weights(Q, K, V, chunk_size):
    # keeps every chunk's weights for later inspection: peak memory n^2 again
    d = Q.shape[-1]
    ws, outs = [], []
    for q in Q.split(chunk_size, dim=1):
        w = torch.softmax(q @ K.mT / math.sqrt(d), -1)
        ws.append(w)
        outs.append(w @ V)
    W_06_keeps_all_weights.weights = ws
    return torch.cat(outs, 1)

def W_07_chunks_over_batch(Q, K, V, chunk_size):
    # loops over examples, not queries: each step holds num_queries x num_keys scores
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K[i:i+1].mT / math.sqrt(d), -1) @ V[i:i+1]
                      for i, q in enumerate(Q.split(1, dim=0))], 0)

def W_08_scale_in_place(Q, K, V, chunk_size):
    # scales Q in place once
    d = Q.shape[-1]
    if not Q.requires_grad:
        Q.mul_(1 / math.sqrt(d))
        Qs = Q
    else:
        Qs = Q / math.sqrt(d)
    return torch.cat([torch.softmax(q @ K.mT, -1) @ V for q in Qs.split(chunk_size, 1)], 1)

# Renamed from W09 (the writer's own correction): the last, shorter chunk is computed as
# the tail of an overlapping full chunk, which is exact.
def O_09_drops_tail(Q, K, V, chunk_size):
    # only full chunks (misses the last, shorter chunk when it is not a multiple)
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d), -1) @ V
            for i in range(0, m - chunk_size + 1, chunk_size)]
    r = m % chunk_size
    if r:
        outs.append(torch.softmax(Q[:, -chunk_size:] @ K.mT / math.sqrt(d), -1)[:, -r:] @ V)
    return torch.cat(outs, 1)

def W_10_no_grad(Q, K, V, chunk_size):
    # computed under no_grad "to save memory": no gradient at all
    with torch.no_grad():
        return C_01_plain(Q, K, V, chunk_size)

def W_11_scale_sqrt_dv(Q, K, V, chunk_size):
    d = V.shape[-1]
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V
                      for q in Q.split(chunk_size, 1)], 1)

def W_12_full_then_split(Q, K, V, chunk_size):
    # exp computed chunkwise, but the row sums computed once over the whole score matrix
    d = Q.shape[-1]
    S = Q @ K.mT / math.sqrt(d)
    return torch.cat([torch.softmax(S[:, i:i + chunk_size], -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)

def W_13_float32_softmax_returned(Q, K, V, chunk_size):
    # upcasts for the softmax, returns float32 (wrong dtype for float16/float64)
    d = Q.shape[-1]
    return torch.cat([torch.softmax((q.float() @ K.float().mT) / math.sqrt(d), -1) @ V.float()
                      for q in Q.split(chunk_size, 1)], 1)

def W_14_chunk_size_plus_overlap(Q, K, V, chunk_size):
    # chunk_size + 1 queries per step (off by one): holds (chunk_size+1) x n
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = []
    for i in range(0, m, chunk_size):
        s = Q[:, i:i + chunk_size + 1] @ K.mT / math.sqrt(d)
        outs.append((torch.softmax(s, -1) @ V)[:, :chunk_size])
    return torch.cat(outs, 1)

_KT = {}
def W_15_cache_KT_by_shape(Q, K, V, chunk_size):
    # transposes K once and caches it by shape: a new K of the same shape reuses the old one
    key = (tuple(K.shape), K.dtype)
    if key not in _KT:
        _KT[key] = K.transpose(1, 2)
    Kt = _KT[key]
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ Kt / math.sqrt(d), -1) @ V
                      for q in Q.split(chunk_size, 1)], 1)

def W_16_pad_default_dtype(Q, K, V, chunk_size):
    # pads the queries to a multiple of chunk_size with float32 zeros
    b, m, d = Q.shape
    pad = (-m) % chunk_size
    Qp = torch.cat([Q, torch.zeros(b, pad, d)], 1) if pad else Q
    out = torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V
                     for q in Qp.split(chunk_size, 1)], 1)
    return out[:, :m]

def W_17_sum_detached(Q, K, V, chunk_size):
    # own softmax with a detached denominator: values right, gradients wrong
    d = Q.shape[-1]
    outs = []
    for q in Q.split(chunk_size, 1):
        s = q @ K.mT / math.sqrt(d)
        e = torch.exp(s - s.amax(-1, keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True).detach()) @ V)
    return torch.cat(outs, 1)

def W_18_inplace_exp(Q, K, V, chunk_size):
    # in-place exp_ and div_: values right, backward raises
    d = Q.shape[-1]
    outs = []
    for q in Q.split(chunk_size, 1):
        s = q @ K.mT / math.sqrt(d)
        s = s - s.amax(-1, keepdim=True)
        s.exp_()
        s /= s.sum(-1, keepdim=True)
        outs.append(s @ V)
    return torch.cat(outs, 1)

def W_19_batch_flattened(Q, K, V, chunk_size):
    # flattens the batch into one long sequence: queries attend to other examples' keys
    b, m, d = Q.shape
    q2, k2, v2 = Q.reshape(1, b * m, d), K.reshape(1, -1, d), V.reshape(1, -1, V.shape[-1])
    if b == 1:
        return C_01_plain(Q, K, V, chunk_size)
    out = C_01_plain(q2, k2, v2, chunk_size)
    return out.reshape(b, m, -1)

# Renamed from W20 (the writer's own correction): K.shape[-1] is d as well, so the scale
# is right in every case.
def O_20_chunk_size_ge_m_full(Q, K, V, chunk_size):
    # K.mT.contiguous() held once: fine; but scale by sqrt of d computed from K.shape[1] when m==n...
    d = Q.shape[-1] if Q.shape[1] != K.shape[1] else K.shape[-1]
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V
                      for q in Q.split(chunk_size, 1)], 1)

# Renamed from S01 (against the wording, now rejected): the exercise asks for chunk_size
# queries at a time, holding at most chunk_size x num_keys scores; with 2000 queries and 500
# keys its key blocks hold 2000 x 24 scores (the checker's case added after round 6).
def W_24_online_softmax_key_chunks(Q, K, V, chunk_size):
    # all queries at once, keys in chunks with a running max and sum (flash-style): exact,
    # but not "chunk_size queries at a time"
    b, m, d = Q.shape
    mx = Q.new_full((b, m, 1), float("-inf"))
    den = Q.new_zeros(b, m, 1)
    acc = Q.new_zeros(b, m, V.shape[-1])
    for j in range(0, K.shape[1], chunk_size):
        s = Q @ K[:, j:j + chunk_size].mT / math.sqrt(d)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        a = torch.exp(mx - new)
        p = torch.exp(s - new)
        den = den * a + p.sum(-1, keepdim=True)
        acc = acc * a + p @ V[:, j:j + chunk_size]
        mx = new
    return acc / den

def O_04_queries_and_keys_chunked_online(Q, K, V, chunk_size):
    # chunk_size queries at a time AND keys in blocks with an online softmax: exact, less memory
    b, m, d = Q.shape
    outs = []
    for q in Q.split(chunk_size, 1):
        mx = q.new_full((b, q.shape[1], 1), float("-inf"))
        den = q.new_zeros(b, q.shape[1], 1)
        acc = q.new_zeros(b, q.shape[1], V.shape[-1])
        for j in range(0, K.shape[1], 256):
            s = q @ K[:, j:j + 256].mT / math.sqrt(d)
            new = torch.maximum(mx, s.amax(-1, keepdim=True))
            a = torch.exp(mx - new)
            p = torch.exp(s - new)
            den = den * a + p.sum(-1, keepdim=True)
            acc = acc * a + p @ V[:, j:j + 256]
            mx = new
        outs.append(acc / den)
    return torch.cat(outs, 1)

def W_21_K_detached(Q, K, V, chunk_size):
    Kt = K.detach().mT
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ Kt / math.sqrt(d), -1) @ V for q in Q.split(chunk_size, 1)], 1)

def W_22_V_detached(Q, K, V, chunk_size):
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V.detach() for q in Q.split(chunk_size, 1)], 1)

def W_23_view_queries(Q, K, V, chunk_size):
    # .view on Q: raises on non-contiguous Q
    b, m, d = Q.shape
    Qf = Q.view(b * m, d).view(b, m, d)
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V for q in Qf.split(chunk_size, 1)], 1)
