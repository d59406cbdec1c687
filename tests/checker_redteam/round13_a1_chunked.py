"""Round 13 red team (writer B, issue 12), a1_chunked: wrong (W_), right (C_), odd but right (O_)
solutions written from the exercise text alone, checked by check_chunked_attention; copied from
/work/redteam/round13/B/sols/a1_chunked.py. The tests run every W_ entry (must fail) and every C_ and
O_ entry (must pass); A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: W_06 (the whole score matrix in a NumPy buffer: memory outside torch is
measured with tracemalloc on the 1,000-key run), W_12 (bfloat16 through float16: the matrix
with bfloat16 V times 1e5), W_20 (a chunk that grows above 1,000 keys: the lead's size
ruling, a counted case of 67 queries and 4,099 keys, also in the matrix). Left for _core (and
rejected there now): W_23 (randperm: a draw from the global generator). Accepted: A_11
(float16 Q K^T overflowing before the scale: the solution notebook's own formula); A_21 and
A_22 were the writer's (both rejected).
"""
# flake8: noqa
import math
import numpy as np
import torch
import torch.nn.functional as F

CHECK = "check_chunked_attention"


def _attn(q, K, V):
    d = q.shape[-1]
    return torch.softmax((q / math.sqrt(d)) @ K.transpose(1, 2), -1) @ V


def C_01_reference(Q, K, V, chunk_size):
    return torch.cat([_attn(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def O_02_prealloc(Q, K, V, chunk_size):
    b, m, _ = Q.shape
    out = Q.new_empty(b, m, V.shape[-1])
    Kt = K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = torch.softmax(Q[:, i:i + chunk_size] @ Kt, -1) @ V
    return out


def O_03_sdpa_per_chunk(Q, K, V, chunk_size):
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def W_04_torch_chunk_count(Q, K, V, chunk_size):
    """torch.chunk(Q, chunk_size, 1) makes chunk_size chunks, not chunks of chunk_size: with
    chunk_size 1 (or any c < sqrt(m)) a chunk holds m/c > c queries: 1000 x 1000 scores at c=1."""
    return torch.cat([_attn(q, K, V) for q in torch.chunk(Q, chunk_size, dim=1)], dim=1)


def W_05_split_along_batch(Q, K, V, chunk_size):
    """Q.split(chunk_size) splits dim 0 (batch): every example's full m x n scores at once."""
    return torch.cat([_attn(q, k, v) for q, k, v in
                      zip(Q.split(chunk_size), K.split(chunk_size), V.split(chunk_size))], 0)


def W_06_numpy_scores(Q, K, V, chunk_size):
    """Memory cheat: the full (b, m, n) scores live in a numpy buffer (torch never allocates
    them: bmm(out=) and in-place softmax), so it holds m x n scores, not chunk_size x n."""
    if torch.is_grad_enabled() and (Q.requires_grad or K.requires_grad or V.requires_grad):
        return C_01_reference(Q, K, V, chunk_size)
    b, m, d = Q.shape
    n = K.shape[1]
    npdt = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16}
    if Q.dtype not in npdt or Q.device.type != "cpu":
        return C_01_reference(Q, K, V, chunk_size)
    S = torch.from_numpy(np.empty((b, m, n), dtype=npdt[Q.dtype]))
    torch.bmm(Q, K.transpose(1, 2), out=S)
    S.mul_(1 / math.sqrt(d))
    S.sub_(S.amax(-1, keepdim=True)).exp_()
    S.div_(S.sum(-1, keepdim=True))
    return torch.bmm(S, V)


def W_07_min_chunk_64(Q, K, V, chunk_size):
    """Chunk size floored at 64 'for speed': with chunk_size < 64 it holds 64 x n scores."""
    return C_01_reference(Q, K, V, max(chunk_size, 64))


def W_08_one_key_view(Q, K, V, chunk_size):
    """One key: V.expand(b, m, d_v).contiguous() is V itself (a view) when m == 1."""
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1]).contiguous()
    return C_01_reference(Q, K, V, chunk_size)


def W_09_chunk_wide_max(Q, K, V, chunk_size):
    """exp shifted by the max of the whole chunk, not per row: a query whose scores lie ~200
    below another query's in the same chunk (float32) underflows to 0/0 = NaN."""
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


_BUF = {}


def W_10_reused_output_buffer(Q, K, V, chunk_size):
    """Without autograd, returns a buffer cached per shape: a second call overwrites the first."""
    if torch.is_grad_enabled() and (Q.requires_grad or K.requires_grad or V.requires_grad):
        return C_01_reference(Q, K, V, chunk_size)
    key = (Q.shape[0], Q.shape[1], V.shape[-1], V.dtype, V.device)
    out = _BUF.get(key)
    if out is None:
        out = _BUF[key] = torch.empty(key[:3], dtype=key[3], device=key[4])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _attn(Q[:, i:i + chunk_size], K, V)
    return out


def A_11_fp16_scale_after_matmul(Q, K, V, chunk_size):
    """Scale after the matmul in float16: Q K^T above 65504 overflows before / sqrt(d).

    Accepted on purpose (fixer, round 13): the solution notebook computes exactly this
    (scores = Q[:, i:i + chunk_size] @ K.transpose(1, 2), then / sqrt(d)), in the inputs'
    dtype as the text asks; float16 inputs whose unscaled products pass 65504 are beyond
    what the exercise's float16 requirement covers, and rejecting this would reject the
    book's own solution (see round13_ch03_sdpa.A_06)."""
    d = Q.shape[-1]
    return torch.cat([torch.softmax((Q[:, i:i + chunk_size] @ K.transpose(1, 2)) / math.sqrt(d), -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_12_bf16_via_half(Q, K, V, chunk_size):
    """bfloat16 computed via float16: values above 65504 overflow to inf."""
    if Q.dtype == torch.bfloat16:
        return C_01_reference(Q.half(), K.half(), V.half(), chunk_size).to(torch.bfloat16)
    return C_01_reference(Q, K, V, chunk_size)


def W_13_key_chunks_averaged(Q, K, V, chunk_size):
    """Cuts the keys (softmax per key chunk, outputs averaged): wrong unless one key chunk."""
    outs = [_attn(Q, K[:, j:j + chunk_size], V[:, j:j + chunk_size])
            for j in range(0, K.shape[1], chunk_size)]
    return sum(outs) / len(outs)


_KEEP = []


def W_14_keeps_all_weights(Q, K, V, chunk_size):
    """Keeps every chunk's weights (for inspection) until the end: peak m x n scores."""
    d = Q.shape[-1]
    ws, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        ws.append(w)
        outs.append(w @ V)
    out = torch.cat(outs, 1)
    del ws
    return out


def W_15_broadcast_product(Q, K, V, chunk_size):
    """Scores by broadcasting (b, c, 1, d) * (b, 1, n, d) then sum: c x n x d numbers per op."""
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size, None, :] * K[:, None, :, :]).sum(-1) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_16_scale_by_value_dim(Q, K, V, chunk_size):
    """Scales by sqrt(value_dim): wrong when value_dim != d."""
    dv = V.shape[-1]
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(dv), -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_17_float32_inside(Q, K, V, chunk_size):
    """float64 computed in float32 and cast back: no float64 accuracy."""
    return C_01_reference(Q.float(), K.float(), V.float(), chunk_size).to(Q.dtype)


def W_18_last_chunk_overlap_wrong(Q, K, V, chunk_size):
    """Last partial chunk taken as Q[:, -rem:] but written at out[:, i:i+chunk] shifted: uses
    Q[:, m-chunk:] for the tail, so the tail rows get earlier queries' outputs."""
    b, m, _ = Q.shape
    outs = []
    for i in range(0, m, chunk_size):
        if i + chunk_size > m and m >= chunk_size:
            o = _attn(Q[:, m - chunk_size:], K, V)[:, :m - i]
        else:
            o = _attn(Q[:, i:i + chunk_size], K, V)
        outs.append(o)
    return torch.cat(outs, 1)


def W_19_scale_inplace_on_Q(Q, K, V, chunk_size):
    """Scales each chunk of Q in place (Q[:, i:j] /= sqrt(d)) when no grad: mutates the caller's Q."""
    d = Q.shape[-1]
    if Q.requires_grad:
        return C_01_reference(Q, K, V, chunk_size)
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        q /= math.sqrt(d)
        outs.append(torch.softmax(q @ K.transpose(1, 2), -1) @ V)
    return torch.cat(outs, 1)


def W_20_chunk_by_product(Q, K, V, chunk_size):
    """Treats chunk_size as a budget of scores per batch (chunk = chunk_size // b queries... no:
    chunk = chunk_size * n // 1000): holds more than chunk_size x n when n > 1000 keys."""
    c = max(1, chunk_size * max(K.shape[1], 1000) // 1000)
    return C_01_reference(Q, K, V, c)


def A_21_whole_sdpa(Q, K, V, chunk_size):
    """Ignores chunk_size; F.sdpa whole (CPU flash kernel may not hold n x n). Not chunked."""
    return F.scaled_dot_product_attention(Q, K, V)


def A_22_no_grad(Q, K, V, chunk_size):
    """Computed under no_grad (the text never asks for gradients)."""
    with torch.no_grad():
        return C_01_reference(Q, K, V, chunk_size)


def W_21_detached_denominator(Q, K, V, chunk_size):
    """Manual softmax with a detached denominator in each chunk: values right, gradients wrong."""
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] / math.sqrt(d)) @ K.transpose(1, 2)
        e = torch.exp(s - s.amax(-1, keepdim=True).detach())
        outs.append((e / e.sum(-1, keepdim=True).detach()) @ V)
    return torch.cat(outs, 1)


def W_22_K_detached_after_first_chunk(Q, K, V, chunk_size):
    """Detaches K after the first chunk ('the graph of K is already built'): dK only from
    the first chunk's queries."""
    outs = []
    for j, i in enumerate(range(0, Q.shape[1], chunk_size)):
        outs.append(_attn(Q[:, i:i + chunk_size], K if j == 0 else K.detach(), V))
    return torch.cat(outs, 1)


def W_23_global_rng(Q, K, V, chunk_size):
    """Shuffles the query order with torch.randperm (global RNG) and unshuffles: right values,
    but the caller's random stream is advanced."""
    perm = torch.randperm(Q.shape[1], device=Q.device)
    inv = torch.empty_like(perm); inv[perm] = torch.arange(perm.numel(), device=Q.device)
    return C_01_reference(Q[:, perm], K, V, chunk_size)[:, inv]
