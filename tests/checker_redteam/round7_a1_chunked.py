"""Round 7 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round7/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_chunked_attention"


def C_01_reference(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def O_02_preallocated_output(Q, K, V, chunk_size):
    # writes each chunk into a preallocated output
    b, m, d = Q.shape
    out = V.new_empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        s = torch.bmm(Q[:, i:i + chunk_size], K.transpose(1, 2)) * d ** -0.5
        out[:, i:i + chunk_size] = torch.bmm(torch.softmax(s, -1), V)
    return out


def O_03_split_and_sdpa(Q, K, V, chunk_size):
    # torch.split into chunks, PyTorch's fused kernel per chunk
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in torch.split(Q, chunk_size, dim=1)], dim=1)


def O_04_scale_Q_once_contiguous_KT(Q, K, V, chunk_size):
    # scales all the queries once and makes K^T contiguous once (O(n d) each, not n^2)
    Qs = Q / math.sqrt(Q.shape[-1])
    Kt = K.transpose(1, 2).contiguous()
    return torch.cat([torch.softmax(Qs[:, i:i + chunk_size] @ Kt, -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_01_chunk_keys(Q, K, V, chunk_size):
    # chunks the keys with a softmax per chunk, averaged: not exact
    d = Q.shape[-1]
    parts = []
    for j in range(0, K.shape[1], chunk_size):
        s = Q @ K[:, j:j + chunk_size].transpose(1, 2) / math.sqrt(d)
        parts.append(torch.softmax(s, -1) @ V[:, j:j + chunk_size])
    return sum(parts) / len(parts)


def W_02_keeps_all_weights(Q, K, V, chunk_size):
    # keeps every chunk's weights in a list (to inspect them later): peak memory n^2
    d = Q.shape[-1]
    weights, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        weights.append(w)
        outs.append(w @ V)
    chunked_attention_weights = torch.cat(weights, 1)  # noqa: F841
    return torch.cat(outs, 1)


def W_03_torch_chunk_count(Q, K, V, chunk_size):
    # torch.chunk(Q, chunk_size): chunk_size CHUNKS, not chunk_size queries per chunk
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
                      for q in torch.chunk(Q, chunk_size, dim=1)], 1)


def W_04_full_sdpa_ignores_chunks(Q, K, V, chunk_size):
    # ignores chunk_size and calls the fused kernel on everything
    return F.scaled_dot_product_attention(Q, K, V)


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_05_float32_inside(Q, K, V, chunk_size):
    # computes in float32 whatever the input, casts back
    return C_01_reference(Q.float(), K.float(), V.float(), chunk_size).to(Q.dtype)


def W_06_scale_by_value_dim(Q, K, V, chunk_size):
    d = V.shape[-1]
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2)
                                    / math.sqrt(d), -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_07_inplace_scale_Q(Q, K, V, chunk_size):
    # scales Q in place to save a copy
    Q.mul_(Q.shape[-1] ** -0.5)
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2), -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


_OUT = {}


def W_08_reused_output_buffer(Q, K, V, chunk_size):
    # one output buffer per shape, returned each time
    b, m, d = Q.shape
    key = (b, m, V.shape[-1], Q.dtype, Q.device)
    if key not in _OUT:
        _OUT[key] = V.new_empty(b, m, V.shape[-1])
    out = _OUT[key]
    for i in range(0, m, chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        out[:, i:i + chunk_size] = torch.softmax(s, -1) @ V
    return out


def W_09_fp16_own_softmax_no_max(Q, K, V, chunk_size):
    # own softmax without the max subtraction: exp overflows in float16
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def W_10_chunk_over_batch(Q, K, V, chunk_size):
    # chunks the batch axis instead of the queries
    d = Q.shape[-1]
    return torch.cat([torch.softmax(Q[i:i + chunk_size] @ K[i:i + chunk_size].transpose(1, 2)
                                    / math.sqrt(d), -1) @ V[i:i + chunk_size]
                      for i in range(0, Q.shape[0], chunk_size)], 0)


def W_11_drops_short_last_chunk(Q, K, V, chunk_size):
    # pads the queries to a multiple of chunk_size, forgets to drop the padding... no:
    # computes the last short chunk with the previous chunk's end (off by one overlap)
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = []
    for i in range(0, m, chunk_size):
        j = min(i + chunk_size, m)
        start = max(0, j - chunk_size)  # last chunk re-aligned to full size
        s = Q[:, start:j] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append((torch.softmax(s, -1) @ V)[:, :j - i])
    return torch.cat(outs, 1)


_KT = {}


def W_12_cached_KT_by_shape(Q, K, V, chunk_size):
    # caches K^T / sqrt(d) per shape (keys reused across calls in a decoder)
    key = (tuple(K.shape), K.dtype)
    if key not in _KT:
        _KT[key] = K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    Kt = _KT[key]
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ Kt, -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_13_full_scores_chunked_softmax(Q, K, V, chunk_size):
    # computes all scores at once, then the softmax chunk by chunk
    S = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.cat([torch.softmax(S[:, i:i + chunk_size], -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_14_expanded_K_per_chunk(Q, K, V, chunk_size):
    # broadcasts queries against keys elementwise: (b, c, n, d) products per chunk
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size, None, :] * K[:, None, :, :]).sum(-1) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def O_05_tensor_split_equal_parts(Q, K, V, chunk_size):
    # ceil(m / chunk_size) nearly equal parts: every part has at most chunk_size queries
    parts = max(1, math.ceil(Q.shape[1] / chunk_size))
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
                      for q in torch.tensor_split(Q, parts, dim=1)], 1)


def W_15_no_grad_inside(Q, K, V, chunk_size):
    # wraps the loop in torch.no_grad() "to save memory": no gradient flows back
    with torch.no_grad():
        return C_01_reference(Q, K, V, chunk_size)


def W_16_chunk_global_max(Q, K, V, chunk_size):
    # own softmax that subtracts the max of the whole chunk, not of each row
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def O_06_view_same_shape(Q, K, V, chunk_size):
    # .view to the same shape works on any strides (was meant as a wrong one)
    b, m, d = Q.shape
    Qv = Q.view(b, m, d)
    Kt = K.view(b, K.shape[1], d).transpose(1, 2)
    return torch.cat([torch.softmax(Qv[:, i:i + chunk_size] @ Kt / math.sqrt(d), -1) @ V
                      for i in range(0, m, chunk_size)], 1)


def W_17_flatten_view(Q, K, V, chunk_size):
    # flattens batch and queries with .view: fails on a non-contiguous Q
    b, m, d = Q.shape
    Qf = Q.view(b * m, d)
    out = []
    for bi in range(b):
        Kt = K[bi].T / math.sqrt(d)
        for i in range(0, m, chunk_size):
            q = Qf[bi * m + i: bi * m + min(i + chunk_size, m)]
            out.append(torch.softmax(q @ Kt, -1) @ V[bi])
    return torch.cat(out, 0).view(b, m, V.shape[-1])


def O_07_float64_per_chunk(Q, K, V, chunk_size):
    # each chunk's softmax in float64 (twice the bytes per score), cast back
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] @ K.transpose(1, 2)).double() / math.sqrt(d)
        outs.append(torch.softmax(s, -1).to(Q.dtype) @ V)
    return torch.cat(outs, 1)


def O_08_manual_softmax_temporaries(Q, K, V, chunk_size):
    # hand-written stable softmax: several chunk-sized temporaries alive at once
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        m = s.amax(-1, keepdim=True)
        z = s - m
        e = torch.exp(z)
        w = e / e.sum(-1, keepdim=True)
        outs.append(w @ V)
    return torch.cat(outs, 1)


def W_18_keeps_weights_in_list(Q, K, V, chunk_size):
    # keeps every chunk's weights alive in a list (for a plot later), without a cat:
    # no single operation is too big, but the peak memory is num_queries x num_keys
    d = Q.shape[-1]
    kept, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        kept.append(w)
        outs.append(w @ V)
    chunked_attention.last_weights = kept
    return torch.cat(outs, 1)


def chunked_attention():
    pass


def W_19_overlapping_chunks_plus_one(Q, K, V, chunk_size):
    # slices one query too many per chunk (i:i + chunk_size + 1) and drops it afterwards
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size + 1] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append((torch.softmax(s, -1) @ V)[:, :chunk_size])
    return torch.cat(outs, 1)


def S_01_caps_chunk_at_16(Q, K, V, chunk_size):
    # uses min(chunk_size, 16) queries at a time "for the cache": not chunk_size
    return C_01_reference(Q, K, V, min(chunk_size, 16))


def W_20_bfloat16_returns_float32(Q, K, V, chunk_size):
    if Q.dtype == torch.bfloat16:
        return C_01_reference(Q.float(), K.float(), V.float(), chunk_size)
    return C_01_reference(Q, K, V, chunk_size)


import functools


@functools.lru_cache(maxsize=8)
def _kt(K):
    return K.transpose(1, 2) / math.sqrt(K.shape[-1])


def W_21_lru_cache_KT(Q, K, V, chunk_size):
    # memoises K^T / sqrt(d) with lru_cache (tensor identity): stale after K.add_(...)
    Kt = _kt(K)
    return torch.cat([torch.softmax(Q[:, i:i + chunk_size] @ Kt, -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_22_detached_V(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V.detach(), chunk_size)


def W_23_detached_K(Q, K, V, chunk_size):
    return C_01_reference(Q, K.detach(), V, chunk_size)
