"""Round 4 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/a1_chunked.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
import torch.nn.functional as F

CHECK = "check_chunked_attention"


def _attn(q, K, V):
    s = q @ K.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ V


def C_01_reference(Q, K, V, chunk_size):
    outs = [_attn(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_02_split(Q, K, V, chunk_size):
    return torch.cat([_attn(q, K, V) for q in Q.split(chunk_size, dim=1)], dim=1)


def O_03_preallocated_out(Q, K, V, chunk_size):
    out = Q.new_empty(Q.shape[0], Q.shape[1], V.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _attn(Q[:, i:i + chunk_size], K, V)
    return out


# Listed as right (O_04) until round 8: under issue 12's float64 rule (a float64 input
# asks for float64 accuracy) it is wrong: float32 accumulators for every dtype: a float64
# input comes out 3.8e-7 off.
def W_29_online_softmax_key_chunks_was_O_04(Q, K, V, chunk_size):
    # flash-style: chunks over keys too, with a running max and sum (float32 accumulators)
    outs = []
    scale = 1 / math.sqrt(Q.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size].float() * scale
        m = torch.full(q.shape[:2] + (1,), float("-inf"), device=Q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(q.shape[0], q.shape[1], V.shape[-1], device=Q.device)
        for j in range(0, K.shape[1], chunk_size):
            s = q @ K[:, j:j + chunk_size].float().transpose(1, 2)
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m_new)
            corr = torch.exp(m - m_new)
            l = l * corr + p.sum(-1, keepdim=True)
            acc = acc * corr + p @ V[:, j:j + chunk_size].float()
            m = m_new
        outs.append((acc / l).to(Q.dtype))
    return torch.cat(outs, dim=1)


def O_05_torch_sdpa_per_chunk(Q, K, V, chunk_size):
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def W_01_full_scores_then_chunk_softmax(Q, K, V, chunk_size):
    S = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.cat([torch.softmax(S[:, i:i + chunk_size], -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def W_02_chunks_keys_no_online_softmax(Q, K, V, chunk_size):
    # splits the keys and adds up per-chunk softmaxes: wrong normalisation
    out = 0
    for j in range(0, K.shape[1], chunk_size):
        out = out + _attn(Q, K[:, j:j + chunk_size], V[:, j:j + chunk_size])
    return out / math.ceil(K.shape[1] / chunk_size)


def W_03_drops_last_partial_chunk(Q, K, V, chunk_size):
    n = Q.shape[1]
    outs = [_attn(Q[:, i:i + chunk_size], K, V) for i in range(0, n - chunk_size + 1, chunk_size)]
    done = sum(o.shape[1] for o in outs)
    if done < n:  # pads the tail with zeros to keep the shape
        outs.append(Q.new_zeros(Q.shape[0], n - done, V.shape[-1]))
    return torch.cat(outs, 1)


def W_04_num_chunks_floor(Q, K, V, chunk_size):
    n = Q.shape[1]
    outs = [_attn(Q[:, i * chunk_size:(i + 1) * chunk_size], K, V) for i in range(n // chunk_size)]
    return torch.cat(outs, 1)


def W_05_scale_by_chunk(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size]
        s = q @ K.transpose(1, 2) / math.sqrt(q.shape[1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_06_zeros_float32_out(Q, K, V, chunk_size):
    out = torch.zeros(Q.shape[0], Q.shape[1], V.shape[-1], device=Q.device)
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _attn(Q[:, i:i + chunk_size], K, V)
    return out


def W_07_empty_like_Q(Q, K, V, chunk_size):
    out = torch.empty_like(Q)
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _attn(Q[:, i:i + chunk_size], K, V)
    return out


def W_08_softmax_over_queries(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        outs.append(torch.softmax(s, dim=1) @ V)
    return torch.cat(outs, 1)


def W_09_chunks_batch_not_queries(Q, K, V, chunk_size):
    # Q.split(chunk_size) splits dim 0 (batch): every example still holds n x n scores
    return torch.cat([_attn(q, k, v) for q, k, v in
                      zip(Q.split(chunk_size), K.split(chunk_size), V.split(chunk_size))], 0)


def W_10_scale_by_value_dim(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(V.shape[-1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_11_no_grad(Q, K, V, chunk_size):
    with torch.no_grad():
        return C_01_reference(Q, K, V, chunk_size)


def W_12_keeps_all_weights_list(Q, K, V, chunk_size):
    # keeps every chunk's weights (for plotting) in a list: the memory is n x n again
    ws, outs = [], []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        w = torch.softmax(s, -1)
        ws.append(w)
        outs.append(w @ V)
    W_12_keeps_all_weights_list.weights = torch.cat(ws, 1)
    return torch.cat(outs, 1)


def W_13_ignores_chunk_size_full(Q, K, V, chunk_size):
    return _attn(Q, K, V)


def W_14_float16_no_upcast_naive_exp(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        e = torch.exp(s)
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def W_15_K_chunked_same_as_Q(Q, K, V, chunk_size):
    # slices K and V with the query chunk too (diagonal blocks only)
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        outs.append(_attn(Q[:, i:i + chunk_size], K[:, i:i + chunk_size], V[:, i:i + chunk_size]))
    return torch.cat(outs, 1)


def W_16_step_off_by_one(Q, K, V, chunk_size):
    # range(0, n, chunk_size) but slices i:i+chunk_size-1 ... then fills the gaps twice
    outs = []
    n = Q.shape[1]
    i = 0
    while i < n:
        j = min(i + chunk_size, n)
        outs.append(_attn(Q[:, i:j], K, V))
        i = j - 1 if j < n and chunk_size > 1 else j
    return torch.cat(outs, 1)[:, :n]


def W_17_float64_output(Q, K, V, chunk_size):
    Q, K, V = Q.double(), K.double(), V.double()
    return C_01_reference(Q, K, V, chunk_size)


def W_18_cat_on_batch_dim(Q, K, V, chunk_size):
    outs = [_attn(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, 0).reshape(Q.shape[0], Q.shape[1], V.shape[-1])


def W_19_chunk_size_rows_of_flattened_batch(Q, K, V, chunk_size):
    # flattens batch*queries and chunks over that: a chunk mixes examples' queries,
    # then uses the keys of the first example in the chunk
    b, m, d = Q.shape
    q = Q.reshape(b * m, d)
    outs = []
    for i in range(0, b * m, chunk_size):
        ex = i // m
        outs.append(_attn(q[i:i + chunk_size][None], K[ex:ex + 1], V[ex:ex + 1])[0])
    return torch.cat(outs, 0).reshape(b, m, -1)


def S_01_torch_sdpa_unchunked(Q, K, V, chunk_size):
    # no chunking at all: PyTorch's fused CPU kernel keeps the memory low by itself
    return F.scaled_dot_product_attention(Q, K, V)


def S_02_fixed_chunk_64(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V, 64)


def S_03_one_query_at_a_time(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V, 1)


def W_20_full_in_float16_for_memory(Q, K, V, chunk_size):
    # "saves memory" by computing the full n x n scores in half precision (2 MiB at n=1024)
    s = (Q.half() @ K.half().transpose(1, 2)) / math.sqrt(Q.shape[-1])
    w = torch.softmax(s.float(), -1).half() if False else torch.softmax(s, -1)
    return (w @ V.half()).to(Q.dtype)


def W_21_chunk_size_plus_one(Q, K, V, chunk_size):
    # slices chunk_size + 1 queries (inclusive end) but steps by chunk_size: right values,
    # overlapping chunks, cat then trims
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        outs.append(_attn(Q[:, i:i + chunk_size + 1], K, V)[:, :chunk_size])
    return torch.cat(outs, 1)


def W_22_chunk_doubled(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V, 2 * chunk_size)


def W_23_chunk_times4(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V, 4 * chunk_size)


def W_24_fixed_chunk_256(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V, 256)


def W_25_torch_chunk_confuses_count_and_size(Q, K, V, chunk_size):
    # torch.chunk(x, n) makes n chunks, not chunks of n: chunk_size chunks of
    # ceil(num_queries / chunk_size) queries each
    return torch.cat([_attn(q, K, V) for q in torch.chunk(Q, chunk_size, dim=1)], dim=1)


def W_26_K_detached(Q, K, V, chunk_size):
    Kd = K.detach()
    return torch.cat([_attn(Q[:, i:i + chunk_size], Kd, V)
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_27_weights_detached(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        outs.append(torch.softmax(s, -1).detach() @ V)
    return torch.cat(outs, 1)


# Against the wording in round 4 (S_); rejected since round 6, which counts the scores on
# 2000 queries and 500 keys: all queries at once is not 'chunk_size queries at a time'.
def W_05_all_queries_key_chunks_online(Q, K, V, chunk_size):
    # chunks the KEYS (online softmax), all queries at once: the same memory bound
    # (num_queries x chunk_size scores), but not "chunk_size queries at a time"
    scale = 1 / math.sqrt(Q.shape[-1])
    q = Q.float() * scale
    m = torch.full(q.shape[:2] + (1,), float("-inf"), device=Q.device)
    l = torch.zeros_like(m)
    acc = torch.zeros(q.shape[0], q.shape[1], V.shape[-1], device=Q.device)
    for j in range(0, K.shape[1], chunk_size):
        s = q @ K[:, j:j + chunk_size].float().transpose(1, 2)
        m_new = torch.maximum(m, s.amax(-1, keepdim=True))
        p = torch.exp(s - m_new)
        corr = torch.exp(m - m_new)
        l = l * corr + p.sum(-1, keepdim=True)
        acc = acc * corr + p @ V[:, j:j + chunk_size].float()
        m = m_new
    return (acc / l).to(Q.dtype)


def W_28_chunk_over_keys_plain_softmax_renorm_wrong_max(Q, K, V, chunk_size):
    # online softmax that forgets to rescale the accumulator when the max changes
    scale = 1 / math.sqrt(Q.shape[-1])
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size] * scale
        m = None
        l = acc = 0
        for j in range(0, K.shape[1], chunk_size):
            s = q @ K[:, j:j + chunk_size].transpose(1, 2)
            m = s.amax(-1, keepdim=True) if m is None else torch.maximum(m, s.amax(-1, keepdim=True))
            p = torch.exp(s - m)
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ V[:, j:j + chunk_size]
        outs.append(acc / l)
    return torch.cat(outs, 1)


def O_06_manual_softmax_named_temporaries(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for start in range(0, Q.shape[1], chunk_size):
        q = Q[:, start:start + chunk_size]
        scores = q @ K.transpose(1, 2) / math.sqrt(d)
        shifted = scores - scores.max(dim=-1, keepdim=True).values
        exps = torch.exp(shifted)
        weights = exps / exps.sum(dim=-1, keepdim=True)
        outs.append(weights @ V)
    return torch.cat(outs, dim=1)


def O_07_float64_inside(Q, K, V, chunk_size):
    # accumulates in float64 for accuracy, casts the result back
    outs = []
    Kd, Vd = K.double(), V.double()
    for start in range(0, Q.shape[1], chunk_size):
        q = Q[:, start:start + chunk_size].double()
        w = torch.softmax(q @ Kd.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1)
        outs.append((w @ Vd).to(Q.dtype))
    return torch.cat(outs, dim=1)


def O_08_float64_manual_named(Q, K, V, chunk_size):
    outs = []
    for start in range(0, Q.shape[1], chunk_size):
        q = Q[:, start:start + chunk_size].double()
        scores = q @ K.double().transpose(1, 2) / math.sqrt(Q.shape[-1])
        shifted = scores - scores.max(dim=-1, keepdim=True).values
        exps = torch.exp(shifted)
        weights = exps / exps.sum(dim=-1, keepdim=True)
        outs.append((weights @ V.double()).to(Q.dtype))
    return torch.cat(outs, dim=1)
