"""Round 14 red team (writer B, issue 12), a1_chunked: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_chunked_attention; copied from
/work/redteam/round14/B/sols/ch_a1_chunked.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_21, W_22, W_23, W_25 (the whole score matrix for float64, float16, inputs
that require grad, or batch > 1: the operation count now also runs, forward only, on 200
queries and keys, chunk_size 10, in float64, in float16, with batch 2 (bound chunk_size x
num_keys per example) and with Q, K and V requiring grad), W_34 (the scores written through
torch.bmm(..., out=) into a slice of a module-level buffer: the count now takes the result of
every operation but a view, in-place and out= results included). Accepted: A_07 (rejected
anyway: its requires_grad zero makes autograd keep every chunk) and A_29 (the writer's, right).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

CHECK = "check_chunked_attention"


def _full(Q, K, V):
    s = torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
    return torch.bmm(torch.softmax(s, -1), V)


def C_01_reference(Q, K, V, chunk_size):
    outs = [_full(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def C_02_split_preallocated(Q, K, V, chunk_size):
    out = V.new_empty(Q.shape[0], Q.shape[1], V.shape[-1])
    for i, q in enumerate(torch.split(Q, chunk_size, dim=1)):
        out[:, i * chunk_size:i * chunk_size + q.shape[1]] = _full(q, K, V)
    return out


def O_03_checkpointed_chunks(Q, K, V, chunk_size):
    """Each chunk under torch.utils.checkpoint (saves memory in backward too)."""
    outs = [checkpoint(_full, Q[:, i:i + chunk_size], K, V, use_reentrant=False)
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_04_online_softmax_over_keys_too(Q, K, V, chunk_size):
    """Flash-style: key blocks as well, with exact running max / sum rescaling."""
    scale = 1 / math.sqrt(Q.shape[-1])
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        m = None
        for j in range(0, K.shape[1], chunk_size):
            s = torch.bmm(q, K[:, j:j + chunk_size].transpose(1, 2)) * scale
            bm = s.max(-1, keepdim=True).values
            if m is None:
                m = bm
                p = torch.exp(s - m)
                l = p.sum(-1, keepdim=True)
                acc = torch.bmm(p, V[:, j:j + chunk_size])
            else:
                mn = torch.maximum(m, bm)
                a = torch.exp(m - mn)
                p = torch.exp(s - mn)
                l = l * a + p.sum(-1, keepdim=True)
                acc = acc * a + torch.bmm(p, V[:, j:j + chunk_size])
                m = mn
        outs.append(acc / l)
    return torch.cat(outs, dim=1)


def O_05_fused_per_chunk(Q, K, V, chunk_size):
    """F.scaled_dot_product_attention per chunk."""
    return torch.cat([F.scaled_dot_product_attention(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def O_06_upcast_half(Q, K, V, chunk_size):
    if Q.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(Q.float(), K.float(), V.float(), chunk_size).to(Q.dtype)
    return C_01_reference(Q, K, V, chunk_size)


def A_07_scratch_grad_and_no_grad_index(Q, K, V, chunk_size):
    """Chunk starts computed under no_grad as a tensor; a requires_grad zero added."""
    with torch.no_grad():
        starts = torch.arange(0, Q.shape[1], chunk_size).tolist()
    z = torch.zeros((), dtype=Q.dtype, requires_grad=True)
    return torch.cat([_full(Q[:, s:s + chunk_size] + z, K, V) for s in starts], dim=1)


# ------------------------------------------------------------------ wrong
def W_20_full_below_a_million(Q, K, V, chunk_size):
    """Computes all scores at once when num_queries * num_keys < 1e6 ('small enough'):
    holds num_queries x num_keys scores on, e.g., 800 x 800 with chunk 100."""
    if Q.shape[1] * K.shape[1] < 1_000_000:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_21_full_for_float64(Q, K, V, chunk_size):
    """float64 inputs computed in one piece ('for accuracy'): holds n x n scores."""
    if Q.dtype == torch.float64:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_22_full_for_float16(Q, K, V, chunk_size):
    """float16 inputs computed in one piece."""
    if Q.dtype == torch.float16:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_23_full_when_grad(Q, K, V, chunk_size):
    """Computes in one piece when any input requires grad."""
    if Q.requires_grad or K.requires_grad or V.requires_grad:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_24_full_when_not_dividing(Q, K, V, chunk_size):
    """One piece when chunk_size does not divide num_queries."""
    if Q.shape[1] % chunk_size:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_25_full_when_batch_gt1(Q, K, V, chunk_size):
    """One piece when batch > 1 (chunks only for a single example)."""
    if Q.shape[0] > 1:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_26_full_for_small_d(Q, K, V, chunk_size):
    """One piece when d <= 16."""
    if Q.shape[-1] <= 16:
        return _full(Q, K, V)
    return C_01_reference(Q, K, V, chunk_size)


def W_27_keeps_all_weights(Q, K, V, chunk_size):
    """Keeps every chunk's weights in a list (for 'inspection'): peak memory n x n."""
    ws, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
        w = torch.softmax(s, -1)
        ws.append(w)
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def W_28_keeps_half_the_weights_fp16(Q, K, V, chunk_size):
    """Keeps a float16 copy of every chunk's weights: peak memory n x n x 2 bytes."""
    ws, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
        w = torch.softmax(s, -1)
        ws.append(w.to(torch.bfloat16) if w.dtype != torch.bfloat16 else w.clone())
        outs.append(torch.bmm(w, V))
    return torch.cat(outs, dim=1)


def A_29_recompute_last_partial_chunk(Q, K, V, chunk_size):
    """Last partial chunk computed with the previous chunk's rows (off by one window)."""
    m = Q.shape[1]
    outs = []
    for i in range(0, m, chunk_size):
        j = min(i + chunk_size, m)
        outs.append(_full(Q[:, i:j], K, V))
    out = torch.cat(outs, dim=1)
    if m % chunk_size and m > chunk_size:
        out = torch.cat([out[:, :m - m % chunk_size], _full(Q[:, m - m % chunk_size - 0:], K, V)], 1)
    return out.contiguous()


def W_30_chunk_keys(Q, K, V, chunk_size):
    """Cuts the keys (softmax per key chunk, averaged)."""
    outs = [_full(Q, K[:, i:i + chunk_size], V[:, i:i + chunk_size])
            for i in range(0, K.shape[1], chunk_size)]
    return sum(outs) / len(outs)


def W_31_scale_sqrt_chunk(Q, K, V, chunk_size):
    """Scales by sqrt(d) of the value dim."""
    return torch.cat([torch.bmm(torch.softmax(torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2))
                                              / math.sqrt(V.shape[-1]), -1), V)
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_32_one_key_view(Q, K, V, chunk_size):
    """One key and one query: V.expand(...).contiguous() is V itself."""
    if K.shape[1] == 1:
        return V.expand(-1, Q.shape[1], -1).contiguous()
    return C_01_reference(Q, K, V, chunk_size)


def W_33_float32_for_float64(Q, K, V, chunk_size):
    """Softmax in float32 for every dtype."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
        outs.append(torch.bmm(torch.softmax(s.float(), -1).to(V.dtype), V))
    return torch.cat(outs, 1)


def W_34_scores_out_of_band_numpy_free_cache(Q, K, V, chunk_size, _buf={}):
    """Full scores written into a module-level buffer kept between calls (allocated on the
    first call, so later calls allocate nothing new): holds n x n scores."""
    b, m, n = Q.shape[0], Q.shape[1], K.shape[1]
    key = Q.dtype
    buf = _buf.get(key)
    if buf is None or buf.numel() < b * m * n:
        buf = _buf[key] = torch.empty(max(b * m * n, 4_000_000), dtype=Q.dtype)
    if Q.requires_grad or K.requires_grad or V.requires_grad:
        return C_01_reference(Q, K, V, chunk_size)
    s = buf[:b * m * n].view(b, m, n)
    torch.bmm(Q, K.transpose(1, 2), out=s)
    s.div_(math.sqrt(Q.shape[-1]))
    torch.softmax(s, -1, out=s) if False else s.copy_(torch.softmax(s, -1)) if False else None
    outs = [torch.bmm(torch.softmax(s[:, i:i + chunk_size], -1), V) for i in range(0, m, chunk_size)]
    return torch.cat(outs, 1)


def W_35_mutates_Q_float64(Q, K, V, chunk_size):
    """Q.to(float64) is Q itself for a float64 input; scaled in place."""
    if Q.requires_grad:
        return C_01_reference(Q, K, V, chunk_size)
    q = Q.to(torch.float64)
    q.mul_(1 / math.sqrt(Q.shape[-1]))
    outs = [torch.bmm(torch.softmax(torch.bmm(q[:, i:i + chunk_size], K.to(q.dtype).transpose(1, 2)), -1),
                      V.to(q.dtype)) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, 1).to(Q.dtype)


def W_36_cat_in_float32(Q, K, V, chunk_size):
    """Chunks concatenated into a float32 result for float16 inputs (dtype not kept)."""
    out = torch.cat([_full(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)], 1)
    return out.float() if out.dtype == torch.float16 else out


def W_37_global_max_shift(Q, K, V, chunk_size):
    """Softmax shifted by the chunk's overall max, not per row: rows far below underflow."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) / math.sqrt(Q.shape[-1])
        e = torch.exp(s - s.max().detach())
        outs.append(torch.bmm(e / e.sum(-1, keepdim=True), V))
    return torch.cat(outs, 1)
