"""Round 9 red team (writer A, issue 12), a1_chunked: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/A/sols/a1_chunked.py with the names W01_x written
W_01_x. The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass);
S_ entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import math
import torch
CHECK = "check_chunked_attention"


def C_01_reference(Q, K, V, chunk_size):
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def O_02_split_einsum(Q, K, V, chunk_size):
    scale = Q.shape[-1] ** -0.5
    return torch.cat([torch.einsum("bqk,bkv->bqv",
                                   torch.softmax(torch.einsum("bqd,bkd->bqk", q * scale, K), -1),
                                   V)
                      for q in torch.split(Q, chunk_size, dim=1)], dim=1)


def O_03_preallocated_output(Q, K, V, chunk_size):
    b, m, d = Q.shape
    out = Q.new_empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        j = min(i + chunk_size, m)
        out[:, i:j] = torch.softmax(Q[:, i:j] @ K.mT / math.sqrt(d), -1) @ V
    return out


def W_01_scale_float32_tensor(Q, K, V, chunk_size):
    # sqrt(d) as a float32 tensor: rounded for d not a perfect square (float64 accuracy)
    scale = torch.tensor(Q.shape[-1]).sqrt()
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / scale
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def W_02_manual_softmax_no_max(Q, K, V, chunk_size):
    # softmax by hand without the max shift: overflows on large scores
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


def W_03_manual_softmax_chunk_max(Q, K, V, chunk_size):
    # shifts by the chunk-wide max (one number per chunk): rows far below it underflow
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d)
        e = torch.exp(s - s.amax(dim=(1, 2), keepdim=True))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


def W_04_keeps_all_weights(Q, K, V, chunk_size):
    # keeps every chunk's weights in a list (to return them later): n^2 alive at the end
    d = Q.shape[-1]
    outs, ws = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(d), -1)
        ws.append(w)
        outs.append(w @ V)
    W_04_keeps_all_weights.last_weights = ws
    return torch.cat(outs, dim=1)


def W_05_scale_value_dim(Q, K, V, chunk_size):
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(V.shape[-1])
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def W_06_exp_then_power_scale(Q, K, V, chunk_size):
    # computes exp(QK^T) then raises to the power 1/sqrt(d): same math, overflows early.
    # Renamed from O_06 after round 12 (lead's ruling): NaN gradients wherever exp(s)
    # underflows to 0 (0 ** 0.58 has an infinite derivative); the matrix now compares the
    # gradients under Q times 1e5.
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2)
        s = s - s.amax(-1, keepdim=True)
        e = torch.exp(s) ** (1 / math.sqrt(d))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, dim=1)


def W_07_chunks_over_keys_no_rescale(Q, K, V, chunk_size):
    # chunks the keys and averages the per-chunk softmax outputs (not exact)
    d = Q.shape[-1]
    n = K.shape[1]
    out = 0
    for j in range(0, n, chunk_size):
        s = Q @ K[:, j:j + chunk_size].transpose(1, 2) / math.sqrt(d)
        out = out + torch.softmax(s, -1) @ V[:, j:j + chunk_size] * (min(chunk_size, n - j) / n)
    return out


def W_08_float16_accumulate_out_buffer(Q, K, V, chunk_size):
    # preallocates the output without dtype: float32 for float16/float64 inputs
    b, m, d = Q.shape
    out = torch.empty(b, m, V.shape[-1])
    for i in range(0, m, chunk_size):
        out[:, i:i + chunk_size] = torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d),
                                                 -1) @ V
    return out.to(Q.dtype)


def W_09_chunk_grows(Q, K, V, chunk_size):
    # doubles the chunk after each step ("warm-up"): later chunks exceed chunk_size
    d = Q.shape[-1]
    outs, i, c = [], 0, chunk_size
    while i < Q.shape[1]:
        s = Q[:, i:i + c] @ K.transpose(1, 2) / math.sqrt(d)
        outs.append(torch.softmax(s, -1) @ V)
        i += c
        c = min(2 * c, chunk_size * 2)
    return torch.cat(outs, dim=1)


def W_10_exp_of_float16_in_float32_then_matmul_fp32(Q, K, V, chunk_size):
    # softmax by hand with the row max, sum in the input dtype, returns float32 for float16
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = (Q[:, i:i + chunk_size] @ K.transpose(1, 2)).float() / math.sqrt(d)
        w = torch.softmax(s, -1)
        outs.append(w @ V.float())
    out = torch.cat(outs, dim=1)
    return out if Q.dtype == torch.float16 else out.to(Q.dtype)


def O_11_last_chunk_recomputed_overlap(Q, K, V, chunk_size):
    # last chunk taken as the final chunk_size queries (overlaps), right values, but the
    # loop count is computed with floor division so a remainder is covered by an overlap
    d = Q.shape[-1]
    m = Q.shape[1]
    outs = []
    nfull = m // chunk_size
    for c in range(nfull):
        i = c * chunk_size
        outs.append(torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d), -1) @ V)
    r = m - nfull * chunk_size
    if r:
        last = torch.softmax(Q[:, -chunk_size:] @ K.mT / math.sqrt(d), -1) @ V
        outs.append(last[:, -r:])
    return torch.cat(outs, dim=1)


def W_12_values_transposed_when_square(Q, K, V, chunk_size):
    # multiplies by V.mT when V is square per example (a shape "fix" that works only there)
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d), -1)
        outs.append(w @ (V if V.shape[1] != V.shape[2] else V.mT))
    return torch.cat(outs, dim=1)


def W_13_torch_chunk_count(Q, K, V, chunk_size):
    # torch.chunk takes the NUMBER of chunks: chunks of ceil(m / chunk_size) queries
    d = Q.shape[-1]
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V
                      for q in torch.chunk(Q, chunk_size, dim=1)], dim=1)


def O_14_torch_chunk_right(Q, K, V, chunk_size):
    d = Q.shape[-1]
    n = -(-Q.shape[1] // chunk_size)
    return torch.cat([torch.softmax(q @ K.mT / math.sqrt(d), -1) @ V
                      for q in torch.chunk(Q, n, dim=1)], dim=1)


def W_15_dropout_left_in(Q, K, V, chunk_size):
    # copied F.dropout(p=0.1) from the chapter's module with training=False... but only
    # for the first chunk it forgot training=False
    d = Q.shape[-1]
    outs = []
    for c, i in enumerate(range(0, Q.shape[1], chunk_size)):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d), -1)
        if c == 1 and Q.shape[1] >= 1000:
            w = torch.nn.functional.dropout(w, 0.1)
        outs.append(w @ V)
    return torch.cat(outs, dim=1)


def W_16_bfloat16_for_big_inputs(Q, K, V, chunk_size):
    # "speed trick": large inputs computed in bfloat16 and cast back
    if Q.shape[1] * K.shape[1] >= 500_000:
        return C_01_reference(Q.bfloat16(), K.bfloat16(), V.bfloat16(), chunk_size).to(Q.dtype)
    return C_01_reference(Q, K, V, chunk_size)


def W_17_no_grad_inside(Q, K, V, chunk_size):
    # wraps the loop in torch.no_grad() "to save memory": the result has no gradient
    with torch.no_grad():
        return C_01_reference(Q, K, V, chunk_size)


def O_18_softmax_in_input_dtype_float16(Q, K, V, chunk_size):
    # manual softmax with row max, all in the input dtype (float16 sum of 1000 exps)
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.mT / math.sqrt(d)
        e = torch.exp(s - s.amax(-1, keepdim=True))
        outs.append((e @ V) / e.sum(-1, keepdim=True))
    return torch.cat(outs, dim=1)


def S_19_fused_sdpa_no_chunks(Q, K, V, chunk_size):
    # ignores chunk_size and calls the fused kernel on all queries at once
    return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def O_20_fused_sdpa_per_chunk(Q, K, V, chunk_size):
    return torch.cat([torch.nn.functional.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def W_21_keys_detached(Q, K, V, chunk_size):
    return C_01_reference(Q, K.detach(), V, chunk_size)


def W_22_values_detached(Q, K, V, chunk_size):
    return C_01_reference(Q, K, V.detach(), chunk_size)


_kt = {}


def W_23_kv_cache_by_shape(Q, K, V, chunk_size):
    # "KV cache": keeps K^T / sqrt(d) per (shape, dtype) when no gradient is needed
    d = Q.shape[-1]
    key = (tuple(K.shape), K.dtype)
    if K.requires_grad or key not in _kt:
        kt = K.mT / math.sqrt(d)
        if not K.requires_grad:
            _kt[key] = kt
    else:
        kt = _kt[key]
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ kt, -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_24_precedence_d_half(Q, K, V, chunk_size):
    # d ** 1/2 is (d ** 1) / 2 = d / 2: equal to sqrt(d) only for d = 4
    d = Q.shape[-1]
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.mT / d ** 1/2, -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_25_isqrt(Q, K, V, chunk_size):
    # integer square root of d (right for perfect squares only)
    d = Q.shape[-1]
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.mT / math.isqrt(d), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_26_view_on_inputs(Q, K, V, chunk_size):
    # flattens the batch with .view for one 2-D projection-like step: crashes on
    # non-contiguous (head-split, transposed) inputs
    B, m, d = Q.shape
    n = K.shape[1]
    Kt = (K.view(B * n, d) / math.sqrt(d)).view(B, n, d).transpose(1, 2)
    Vv = V.view(B * n, -1).view(B, n, -1)
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ Kt, -1) @ Vv
            for i in range(0, m, chunk_size)]
    return torch.cat(outs, dim=1)


def W_27_one_chunk_fast_path_no_shift(Q, K, V, chunk_size):
    # chunk_size >= num_queries: one-shot path with a hand-written softmax, no shift
    if chunk_size >= Q.shape[1]:
        e = torch.exp(Q @ K.mT / math.sqrt(Q.shape[-1]))
        return (e / e.sum(-1, keepdim=True)) @ V
    return C_01_reference(Q, K, V, chunk_size)
