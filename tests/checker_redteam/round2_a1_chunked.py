"""Round 2 red team (writer R2), a1_chunked: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/a1_chunked.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import math

import torch
import torch.nn.functional as F

CHECK = "check_chunked_attention"


def _att(q, K, V):
    s = q @ K.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, -1) @ V


def C_loop(Q, K, V, chunk_size):
    outs = [_att(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def O_split_sdpa(Q, K, V, chunk_size):
    """torch.split and the fused kernel per chunk."""
    return torch.cat([F.scaled_dot_product_attention(q, K, V)
                      for q in Q.split(chunk_size, dim=1)], dim=1)


def O_preallocated_like(Q, K, V, chunk_size):
    """Preallocated output of the right dtype, filled chunk by chunk (autograd-safe copy)."""
    out = Q.new_empty(Q.shape[0], Q.shape[1], V.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _att(Q[:, i:i + chunk_size], K, V)
    return out


def W_full(Q, K, V, chunk_size):
    """No chunking at all."""
    return _att(Q, K, V)


def W_drops_remainder(Q, K, V, chunk_size):
    """n // chunk_size chunks: loses the last partial chunk."""
    outs = [_att(Q[:, i * chunk_size:(i + 1) * chunk_size], K, V)
            for i in range(Q.shape[1] // chunk_size)]
    return torch.cat(outs, dim=1)


def W_range_minus_chunk(Q, K, V, chunk_size):
    """range(0, n - chunk_size, chunk_size): off by one chunk."""
    outs = [_att(Q[:, i:i + chunk_size], K, V)
            for i in range(0, max(Q.shape[1] - chunk_size, 1), chunk_size)]
    return torch.cat(outs, dim=1)


def W_chunk_keys(Q, K, V, chunk_size):
    """Chunks the keys and averages per-chunk softmaxes: wrong normalisation."""
    outs = [_att(Q, K[:, i:i + chunk_size], V[:, i:i + chunk_size])
            for i in range(0, K.shape[1], chunk_size)]
    return torch.stack(outs).mean(0)


def W_scale_chunk(Q, K, V, chunk_size):
    """Scales by sqrt(chunk_size)."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(chunk_size)
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_float32_buffer(Q, K, V, chunk_size):
    """torch.zeros output buffer in float32: float64 inputs come back float32."""
    out = torch.zeros(Q.shape[0], Q.shape[1], V.shape[-1], device=Q.device)
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _att(Q[:, i:i + chunk_size], K, V)
    return out


def W_keeps_weights(Q, K, V, chunk_size):
    """Keeps every chunk's weights in a list (for plotting): memory grows like n^2."""
    outs, self_weights = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), -1)
        self_weights.append(w)
        outs.append(w @ V)
    W_keeps_weights.weights = torch.cat(self_weights, 1)
    return torch.cat(outs, 1)


def W_chunk_batch(Q, K, V, chunk_size):
    """Chunks along the batch axis."""
    return torch.cat([_att(Q[i:i + chunk_size], K[i:i + chunk_size], V[i:i + chunk_size])
                      for i in range(0, Q.shape[0], chunk_size)], 0)


def W_scores_first(Q, K, V, chunk_size):
    """Computes all scores at once, then the softmax per chunk."""
    s = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.cat([torch.softmax(s[:, i:i + chunk_size], -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], 1)


def W_no_grad(Q, K, V, chunk_size):
    """Runs under torch.no_grad to save memory: no gradients."""
    with torch.no_grad():
        return C_loop(Q, K, V, chunk_size)


def W_naive_softmax(Q, K, V, chunk_size):
    """Own softmax without max subtraction."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]))
        outs.append((e / e.sum(-1, keepdim=True)) @ V)
    return torch.cat(outs, 1)


def W_mT_batch_one(Q, K, V, chunk_size):
    """K[0].T: uses the first example's keys for the whole batch (right for batch 1)."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K[0].T / math.sqrt(Q.shape[-1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_value_dim_as_d(Q, K, V, chunk_size):
    """Scales by sqrt(value_dim)."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(V.shape[-1])
        outs.append(torch.softmax(s, -1) @ V)
    return torch.cat(outs, 1)


def W_chunk_of_two_fixed(Q, K, V, chunk_size):
    """Ignores chunk_size, always chunks of 256 (fine on memory at 1024)."""
    return C_loop(Q, K, V, 256)


def W_range_num_keys(Q, K, V, chunk_size):
    """Loops over range(0, num_keys, chunk_size): right when num_queries <= num_keys."""
    outs = [_att(Q[:, i:i + chunk_size], K, V) for i in range(0, K.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_float16_upcast(Q, K, V, chunk_size):
    """Upcasts each chunk to float32 and never casts back."""
    outs = [_att(Q[:, i:i + chunk_size].float(), K.float(), V.float())
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1)


def W_inplace_scale(Q, K, V, chunk_size):
    """Scales Q in place once (saves a copy): changes the caller's tensor."""
    if Q.requires_grad:
        Q = Q * Q.shape[-1] ** -0.5
    else:
        Q.mul_(Q.shape[-1] ** -0.5)
    outs = [torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2), -1) @ V
            for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, 1)
