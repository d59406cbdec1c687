"""Round 12 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/A/sols/a1_chunked.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_11 (all keys equal treated like one key: a matrix case with 4 equal keys),
W_13 (float16 softmax without the max shift) and W_16 (float16 through bfloat16): a float16
case with scores near 100 and 50 whose two best are one number in bfloat16.
"""
# flake8: noqa
import math
import torch

CHECK = "check_chunked_attention"


def _block(q, K, V, d):
    up = q.dtype in (torch.float16, torch.bfloat16)
    s = torch.bmm(q, K.transpose(1, 2)) / math.sqrt(d)
    w = torch.softmax(s.float() if up else s, dim=-1).to(q.dtype)
    return torch.bmm(w, V)


# ---------------- correct / odd ----------------
def C_01_loop_cat(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = [_block(Q[:, i:i + chunk_size], K, V, d)
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_02_split_preallocated(Q, K, V, chunk_size):
    """torch.split, results written into a preallocated output (autograd follows the
    slice writes)."""
    d = Q.shape[-1]
    out = Q.new_empty(Q.shape[0], Q.shape[1], V.shape[-1])
    i = 0
    for q in torch.split(Q, chunk_size, dim=1):
        out[:, i:i + q.shape[1]] = _block(q, K, V, d)
        i += q.shape[1]
    return out


def O_03_overlapping_last_chunk(Q, K, V, chunk_size):
    """Every chunk has exactly chunk_size queries: the last one starts earlier and
    overlaps (rows are recomputed, identical)."""
    m, d = Q.shape[1], Q.shape[-1]
    c = min(chunk_size, m)
    outs, done = [], 0
    while done < m:
        start = min(done, m - c)
        o = _block(Q[:, start:start + c], K, V, d)
        outs.append(o[:, done - start:])
        done = start + c
    return torch.cat(outs, dim=1)


# ---------------- wrong ----------------
def W_04_tensor_chunk(Q, K, V, chunk_size):
    """Q.chunk(chunk_size, dim=1): chunk_size PIECES, not pieces of chunk_size queries
    (with m = 1000, chunk_size = 10: pieces of 100 queries)."""
    d = Q.shape[-1]
    return torch.cat([_block(q, K, V, d) for q in Q.chunk(chunk_size, dim=1)], dim=1)


def W_05_online_init_max_zero(Q, K, V, chunk_size):
    """Chunks over the keys with an online softmax whose running max starts at 0 instead
    of -inf: with every score below about -100 (float32) the sums underflow -> NaN."""
    d = Q.shape[-1]
    up = Q.dtype in (torch.float16, torch.bfloat16)
    q = Q.float() if up else Q
    k_ = K.float() if up else K
    v_ = V.float() if up else V
    b, m, _ = q.shape
    mx = q.new_zeros(b, m, 1)
    l = q.new_zeros(b, m, 1)
    acc = q.new_zeros(b, m, v_.shape[-1])
    for j in range(0, k_.shape[1], chunk_size):
        s = torch.bmm(q, k_[:, j:j + chunk_size].transpose(1, 2)) / math.sqrt(d)
        new = torch.maximum(mx, s.amax(-1, keepdim=True))
        e = torch.exp(s - new)
        scale = torch.exp(mx - new)
        l = l * scale + e.sum(-1, keepdim=True)
        acc = acc * scale + torch.bmm(e, v_[:, j:j + chunk_size])
        mx = new
    return (acc / l).to(Q.dtype)


def W_06_keeps_weights_list(Q, K, V, chunk_size):
    """Keeps every chunk's weights in a list (for plotting later, d2l's attention_weights
    habit): no single op is large, but the peak memory is num_queries x num_keys."""
    d = Q.shape[-1]
    W_06_keeps_weights_list.weights = []
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = torch.bmm(q, K.transpose(1, 2)) / math.sqrt(d)
        w = torch.softmax(s.float() if q.dtype == torch.float16 else s, -1).to(Q.dtype)
        W_06_keeps_weights_list.weights.append(w)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_07_scale_by_chunk_size(Q, K, V, chunk_size):
    """Divides by sqrt(q.shape[1]) (the chunk's number of queries) instead of sqrt(d): right
    when chunk_size == d."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = torch.bmm(q, K.transpose(1, 2)) / math.sqrt(chunk_size)
        w = torch.softmax(s.float() if q.dtype == torch.float16 else s, -1).to(Q.dtype)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_08_kv_chunked_no_rescale(Q, K, V, chunk_size):
    """Chunks the keys (not the queries) and averages the per-chunk attention outputs: the
    'cutting the keys' the exercise says is not exact."""
    d = Q.shape[-1]
    outs = [_block(Q, K[:, j:j + chunk_size], V[:, j:j + chunk_size], d)
            for j in range(0, K.shape[1], chunk_size)]
    return torch.stack(outs).mean(0)


def O_09_preallocated_buffer(Q, K, V, chunk_size):
    """(Meant wrong, is right:) empty_like(Q) buffer when value_dim == d, else new_empty."""
    d = Q.shape[-1]
    out = torch.empty_like(Q) if V.shape[-1] == d else Q.new_empty(Q.shape[0], Q.shape[1],
                                                                  V.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _block(Q[:, i:i + chunk_size], K, V, d)
    return out if V.shape[-1] == d else out


def W_10_per_chunk_max_shift(Q, K, V, chunk_size):
    """Manual softmax with one max per chunk (amax over queries and keys of the chunk):
    a chunk holding a query with huge scores and one with small scores underflows the
    small one."""
    d = Q.shape[-1]
    up = Q.dtype in (torch.float16, torch.bfloat16)
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = torch.bmm(q.float() if up else q, (K.float() if up else K).transpose(1, 2))
        s = s / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        w = e / e.sum(-1, keepdim=True)
        outs.append(torch.bmm(w.to(Q.dtype), V))
    return torch.cat(outs, dim=1)


def W_11_single_key_returns_V_expand_clone(Q, K, V, chunk_size):
    """Shortcut for one key, extended to 'all keys identical' (weights uniform), where it
    returns V[:, 0] instead of the MEAN of V: K = ones(1, 3, 2), V = [0, 1, 2] gives 0
    instead of 1. (Low plausibility.)"""
    if K.shape[1] == 1 or bool((K == K[:, :1]).all()):
        return V[:, :1].expand(-1, Q.shape[1], -1).clone()
    return C_01_loop_cat(Q, K, V, chunk_size)


def W_12_range_m_minus_1(Q, K, V, chunk_size):
    """range(0, m - 1, chunk_size): when (m - 1) is a multiple of chunk_size, the last
    query is dropped; patched by appending the last query computed in full... no: the
    learner pads with a copy of the previous row."""
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = [_block(Q[:, i:i + chunk_size], K, V, d) for i in range(0, m - 1, chunk_size)]
    out = torch.cat(outs, dim=1) if outs else Q.new_zeros(Q.shape[0], 0, V.shape[-1])
    if out.shape[1] < m:
        out = torch.cat([out, out[:, -1:] if out.shape[1] else
                         _block(Q[:, -1:], K, V, d)], dim=1)
    return out


def W_13_half_scores_no_upcast_big(Q, K, V, chunk_size):
    """float16: softmax in float16 without the max shift (manual exp): overflow for
    scores above ~11."""
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(d)
        if s.dtype == torch.float16:
            e = torch.exp(s)
            w = e / e.sum(-1, keepdim=True)
        else:
            w = torch.softmax(s, -1)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_14_chunk_capped_at_256(Q, K, V, chunk_size):
    """Uses min(chunk_size, 256) 'to bound memory' -- smaller chunks are allowed, so this
    is right... Wrong variant: max(chunk_size, 64) 'so the matmuls stay efficient'."""
    c = max(chunk_size, 64)
    return C_01_loop_cat(Q, K, V, c)


def W_15_float64_scale_from_float32(Q, K, V, chunk_size):
    """Scales by torch.rsqrt(torch.tensor(d)) (a float32 scalar tensor): float64 inputs are
    multiplied by a float32-rounded 1/sqrt(d)."""
    d = Q.shape[-1]
    sc = torch.rsqrt(torch.tensor(float(d)))
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = torch.bmm(q, K.transpose(1, 2)) * sc.to(q.dtype)
        w = torch.softmax(s.float() if q.dtype == torch.float16 else s, -1).to(Q.dtype)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_16_float16_through_bfloat16(Q, K, V, chunk_size):
    """float16 inputs computed in bfloat16 ('no overflow'), result cast back."""
    if Q.dtype == torch.float16:
        return C_01_loop_cat(Q.to(torch.bfloat16), K.to(torch.bfloat16),
                            V.to(torch.bfloat16), chunk_size).to(torch.float16)
    return C_01_loop_cat(Q, K, V, chunk_size)


def W_17_K_transposed_contiguous_per_batch_cache(Q, K, V, chunk_size):
    """Caches K^T per (K.shape, K.dtype) across calls ('computed once'): a later call with
    other keys of the same shape reuses the old K."""
    cache = W_17_K_transposed_contiguous_per_batch_cache.__dict__.setdefault("c", {})
    key = (tuple(K.shape), K.dtype, K.requires_grad)
    if key not in cache or K.requires_grad:
        cache[key] = K.transpose(1, 2).contiguous()
    Kt = cache[key]
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = torch.bmm(q, Kt) / math.sqrt(d)
        w = torch.softmax(s.float() if q.dtype == torch.float16 else s, -1).to(Q.dtype)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_18_half_returns_float32(Q, K, V, chunk_size):
    """float16 inputs computed in float32 and returned in float32 (no cast back)."""
    if Q.dtype == torch.float16:
        return C_01_loop_cat(Q.float(), K.float(), V.float(), chunk_size)
    return C_01_loop_cat(Q, K, V, chunk_size)
