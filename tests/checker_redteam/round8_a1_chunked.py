"""Round 8 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch

CHECK = "check_chunked_attention"

LAST_WEIGHTS = []


def C_01_reference(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, dim=1)


def O_02_split_and_preallocated_output(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = torch.empty(b, m, V.shape[-1], dtype=V.dtype, device=V.device)
    for i, q in zip(range(0, m, chunk_size), Q.split(chunk_size, dim=1)):
        w = torch.softmax(torch.bmm(q, K.transpose(1, 2)) / d ** 0.5, dim=-1)
        out[:, i:i + q.shape[1]] = torch.bmm(w, V)
    return out


def O_03_online_softmax_over_key_blocks(Q, K, V, chunk_size):
    # flash-style: query chunks and key blocks with a running max (exact up to rounding)
    b, m, d = Q.shape
    n = K.shape[1]
    outs = []
    for i in range(0, m, chunk_size):
        q = Q[:, i:i + chunk_size] / math.sqrt(d)
        mx = None
        for j in range(0, n, chunk_size):
            s = q @ K[:, j:j + chunk_size].transpose(1, 2)
            bm = s.amax(-1, keepdim=True)
            if mx is None:
                mx = bm
                e = torch.exp(s - mx)
                den = e.sum(-1, keepdim=True)
                acc = e @ V[:, j:j + chunk_size]
            else:
                new = torch.maximum(mx, bm)
                a = torch.exp(mx - new)
                e = torch.exp(s - new)
                den = den * a + e.sum(-1, keepdim=True)
                acc = acc * a + e @ V[:, j:j + chunk_size]
                mx = new
        outs.append(acc / den)
    return torch.cat(outs, 1)


def W_17_fixed_chunk_16_ignores_argument(Q, K, V, chunk_size):
    # never holds more than chunk_size x n scores, but ignores the argument
    return C_01_reference(Q, K, V, 16)


def S_02_scales_all_queries_once(Q, K, V, chunk_size):
    # Q / sqrt(d) once: an m x d tensor (the size of the input), not a score matrix
    Qs = Q / math.sqrt(Q.shape[-1])
    outs = [torch.softmax(Qs[:, i:i + chunk_size] @ K.transpose(1, 2), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, 1)


def W_01_tensor_chunk_confusion(Q, K, V, chunk_size):
    # Tensor.chunk takes the NUMBER of chunks, not their size
    d = Q.shape[-1]
    outs = [torch.softmax(q @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
            for q in Q.chunk(chunk_size, dim=1)]
    return torch.cat(outs, 1)


def W_02_reshape_requires_divisible(Q, K, V, chunk_size):
    # reshape the queries into (batch * chunks, chunk, d): needs chunk_size | num_queries,
    # and does all chunks in one bmm (holds everything at once)
    b, m, d = Q.shape
    c = m // chunk_size
    q = Q.reshape(b, c, chunk_size, d)
    outs = []
    for j in range(c):
        outs.append(torch.softmax(q[:, j] @ K.transpose(1, 2) / math.sqrt(d), -1) @ V)
    return torch.cat(outs, 1)


def W_03_no_grad_to_save_memory(Q, K, V, chunk_size):
    with torch.no_grad():
        return C_01_reference(Q, K, V, chunk_size)


def W_04_keeps_weights_for_plotting(Q, K, V, chunk_size):
    # appends every chunk's weights to a module-level list: the whole n x n matrix stays alive
    d = Q.shape[-1]
    LAST_WEIGHTS.clear()
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        LAST_WEIGHTS.append(w)
        outs.append(w @ V)
    return torch.cat(outs, 1)


def W_05_scale_by_chunk_length(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        outs.append(torch.softmax(q @ K.transpose(1, 2) / math.sqrt(q.shape[1]), -1) @ V)
    return torch.cat(outs, 1)


def W_06_scale_by_value_dim(Q, K, V, chunk_size):
    d = V.shape[-1]
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, 1)


def W_07_float32_output(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = torch.zeros(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        out[:, i:i + chunk_size] = w @ V
    return out


def W_08_chunks_over_keys_naive(Q, K, V, chunk_size):
    # chunks the keys and adds the per-chunk softmax outputs weighted by chunk size
    d = Q.shape[-1]
    n = K.shape[1]
    out = 0
    for j in range(0, n, chunk_size):
        k = K[:, j:j + chunk_size]
        w = torch.softmax(Q @ k.transpose(1, 2) / math.sqrt(d), -1)
        out = out + w @ V[:, j:j + chunk_size] * (k.shape[1] / n)
    return out


def W_09_off_by_one_stop(Q, K, V, chunk_size):
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = []
    for i in range(0, m - 1, chunk_size):
        outs.append(torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1) @ V)
    if m % chunk_size == 1:
        outs.append(torch.softmax(Q[:, -1:] @ K.transpose(1, 2) / math.sqrt(d), -1) @ V)
    return torch.cat(outs, 1)


def W_10_exp_without_max(Q, K, V, chunk_size):
    # unstable softmax (fine on unit-variance data; float16 overflows above 11)
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def W_11_chunk_over_batch_too(Q, K, V, chunk_size):
    # flattens batch and queries, then chunks: chunks straddle examples -> mixes batches
    b, m, d = Q.shape
    q = Q.reshape(b * m, d)
    outs = []
    for i in range(0, b * m, chunk_size):
        qi = q[i:i + chunk_size]
        ex = i // m
        w = torch.softmax(qi @ K[ex].T / math.sqrt(d), -1)
        outs.append(w @ V[ex])
    return torch.cat(outs, 0).reshape(b, m, -1)


def W_13_max_over_whole_matrix_chunk(Q, K, V, chunk_size):
    # hand-written softmax subtracting the chunk's global max: rows far below it underflow
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(-2, -1), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def _att(q, K, V):
    return torch.softmax(q @ K.transpose(1, 2) / math.sqrt(q.shape[-1]), -1) @ V


def W_14_round_chunk_up_to_multiple_of_8(Q, K, V, chunk_size):
    # "aligned" chunks: rounds chunk_size up to a multiple of 8
    cs = (chunk_size + 7) // 8 * 8
    return torch.cat([_att(Q[:, i:i + cs], K, V) for i in range(0, Q.shape[1], cs)], 1)


def W_15_merge_remainder_into_last_chunk(Q, K, V, chunk_size):
    # avoids a short last chunk by merging the remainder into the previous chunk
    m = Q.shape[1]
    starts = list(range(0, max(m - chunk_size + 1, 1), chunk_size))
    ends = starts[1:] + [m]
    return torch.cat([_att(Q[:, s:e], K, V) for s, e in zip(starts, ends)], 1)


def W_16_tensor_split_sections(Q, K, V, chunk_size):
    # tensor_split into m // chunk_size nearly equal parts: parts can exceed chunk_size
    parts = Q.tensor_split(max(Q.shape[1] // chunk_size, 1), dim=1)
    return torch.cat([_att(q, K, V) for q in parts], 1)


def O_04_fused_sdpa_per_chunk(Q, K, V, chunk_size):
    import torch.nn.functional as F
    return torch.cat([F.scaled_dot_product_attention(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def S_03_fused_sdpa_whole(Q, K, V, chunk_size):
    # no chunks at all: PyTorch's CPU flash kernel never materialises the n x n scores
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(Q, K, V)


def W_18_inplace_scale_of_query_slice(Q, K, V, chunk_size):
    # scales each chunk in place: Q[:, i:j] is a view, so the caller's Q is divided
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        if not q.requires_grad:
            q /= math.sqrt(d)
        else:
            q = q / math.sqrt(d)
        outs.append(torch.softmax(q @ K.transpose(1, 2), -1) @ V)
    return torch.cat(outs, 1)


def W_19_at_least_32_queries(Q, K, V, chunk_size):
    # "tiny chunks are slow": never fewer than 32 queries per chunk
    cs = max(chunk_size, 32)
    return torch.cat([_att(Q[:, i:i + cs], K, V) for i in range(0, Q.shape[1], cs)], 1)


def W_20_V_rebuilt_with_torch_tensor(Q, K, V, chunk_size):
    V = torch.tensor(V)
    return torch.cat([_att(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_21_K_rebuilt_with_torch_tensor(Q, K, V, chunk_size):
    K = torch.tensor(K)
    return torch.cat([_att(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], 1)

