"""Round 1 red team, appendix A1: check_chunked_attention (exercise A1.1).

Entries: (checker_name, short_description, kind, callable). From the exercise text:
chunked_attention(Q, K, V, chunk_size) = softmax(Q K^T / sqrt(d)) V for Q (b, n_q, d),
K (b, n_k, d), V (b, n_k, v), computed chunk_size queries at a time (never more than
chunk_size x num_keys scores per example); the last chunk may be shorter; the checker
measures peak memory on 1024 queries and keys.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

C = "check_chunked_attention"


def _chunk(Qc, K, V):
    scores = Qc @ K.transpose(1, 2) / math.sqrt(Qc.shape[-1])
    return torch.softmax(scores, dim=-1) @ V


# --------------------------------------------------------------------------- wrong

def ca_no_chunks(Q, K, V, chunk_size):
    """Kind 5: ignores chunk_size: the full n x n scores."""
    return _chunk(Q, K, V)


def ca_key_chunks(Q, K, V, chunk_size):
    """Kind 5: chunks the keys, softmax per key chunk, sums the pieces."""
    out = 0
    for j in range(0, K.shape[1], chunk_size):
        out = out + _chunk(Q, K[:, j:j + chunk_size], V[:, j:j + chunk_size])
    return out


def ca_drops_last(Q, K, V, chunk_size):
    """Kind 3: range(0, n - chunk_size + 1, chunk_size): drops a shorter last chunk."""
    outs = [_chunk(Q[:, i:i + chunk_size], K, V)
            for i in range(0, Q.shape[1] - chunk_size + 1, chunk_size)]
    return torch.cat(outs, dim=1)


def ca_pads_last(Q, K, V, chunk_size):
    """Kind 3: assumes every chunk is full: reshapes Q to (b, n // c, c, d)."""
    b, n, d = Q.shape
    Qr = Q[:, : (n // chunk_size) * chunk_size].reshape(b, -1, chunk_size, d)
    outs = [_chunk(Qr[:, i], K, V) for i in range(Qr.shape[1])]
    out = torch.cat(outs, dim=1)
    if out.shape[1] < n:   # 'pad' the rest with zeros
        out = torch.cat([out, out.new_zeros(b, n - out.shape[1], V.shape[-1])], dim=1)
    return out


def ca_scale_value_dim(Q, K, V, chunk_size):
    """Kind 3: scales by sqrt(V.shape[-1]) (right when value_dim == d)."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(V.shape[-1])
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def ca_scale_chunk(Q, K, V, chunk_size):
    """Kind 3: scales by sqrt(chunk_size) (a variable mix-up)."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        s = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(chunk_size)
        outs.append(torch.softmax(s, dim=-1) @ V)
    return torch.cat(outs, dim=1)


def ca_no_grad(Q, K, V, chunk_size):
    """Kind 1: the loop under torch.no_grad() 'to save memory'."""
    with torch.no_grad():
        return torch.cat([_chunk(Q[:, i:i + chunk_size], K, V)
                          for i in range(0, Q.shape[1], chunk_size)], dim=1)


def ca_detach(Q, K, V, chunk_size):
    """Kind 1: detaches each chunk's output before storing it."""
    return torch.cat([_chunk(Q[:, i:i + chunk_size], K, V).detach()
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def ca_preallocated_no_grad(Q, K, V, chunk_size):
    """Kind 1: preallocates the output and fills it under no_grad."""
    out = Q.new_empty(Q.shape[0], Q.shape[1], V.shape[-1])
    with torch.no_grad():
        for i in range(0, Q.shape[1], chunk_size):
            out[:, i:i + chunk_size] = _chunk(Q[:, i:i + chunk_size], K, V)
    return out


def ca_naive_exp(Q, K, V, chunk_size):
    """Kind 2: its own softmax without max subtraction."""
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        e = torch.exp(Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]))
        outs.append(e / e.sum(-1, keepdim=True) @ V)
    return torch.cat(outs, dim=1)


def ca_keeps_weights(Q, K, V, chunk_size):
    """Kind 5: keeps every chunk's weights in a list 'for plotting': n x n alive."""
    outs, weights = [], []
    for i in range(0, Q.shape[1], chunk_size):
        w = torch.softmax(Q[:, i:i + chunk_size] @ K.transpose(1, 2)
                          / math.sqrt(Q.shape[-1]), dim=-1)
        weights.append(w)
        outs.append(w @ V)
    chunked_attention_weights = torch.cat(weights, dim=1)  # noqa: F841
    return torch.cat(outs, dim=1)


def ca_scores_first(Q, K, V, chunk_size):
    """Kind 5: computes all scores first, then softmaxes them chunk by chunk."""
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.cat([torch.softmax(scores[:, i:i + chunk_size], -1) @ V
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def ca_batch_loop(Q, K, V, chunk_size):
    """Kind 5: loops over the batch instead of the queries."""
    return torch.stack([_chunk(Q[b:b + 1], K[b:b + 1], V[b:b + 1])[0]
                        for b in range(Q.shape[0])])


def ca_float64(Q, K, V, chunk_size):
    """Kind 6: computes and returns float64."""
    Q, K, V = Q.double(), K.double(), V.double()
    return torch.cat([_chunk(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def ca_tuple(Q, K, V, chunk_size):
    """Kind 6: returns (output, number of chunks)."""
    outs = [_chunk(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)]
    return torch.cat(outs, dim=1), len(outs)


def ca_batch1(Q, K, V, chunk_size):
    """Kind 3: works on Q[0] 'one example': batch 1 only."""
    q, k, v = Q[0], K[0], V[0]
    outs = [torch.softmax(q[i:i + chunk_size] @ k.T / math.sqrt(q.shape[-1]), -1) @ v
            for i in range(0, q.shape[0], chunk_size)]
    return torch.cat(outs, dim=0)[None].expand(Q.shape[0], -1, -1)


def ca_numpy(Q, K, V, chunk_size):
    """Kind 1: numpy chunks."""
    q, k, v = (t.detach().cpu().numpy() for t in (Q, K, V))
    outs = []
    for i in range(0, q.shape[1], chunk_size):
        s = q[:, i:i + chunk_size] @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        e = np.exp(s - s.max(-1, keepdims=True))
        outs.append((e / e.sum(-1, keepdims=True)) @ v)
    return torch.from_numpy(np.concatenate(outs, axis=1)).to(Q.device)


# --------------------------------------------------------------------------- right

def ca_split(Q, K, V, chunk_size):
    """Right: torch.split over the queries."""
    return torch.cat([_chunk(q, K, V) for q in Q.split(chunk_size, dim=1)], dim=1)


def ca_preallocated(Q, K, V, chunk_size):
    """Right: preallocated output, slices written with autograd on."""
    out = Q.new_zeros(Q.shape[0], Q.shape[1], V.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _chunk(Q[:, i:i + chunk_size], K, V)
    return out


def ca_fused_per_chunk(Q, K, V, chunk_size):
    """Right: torch's fused kernel on each chunk."""
    return torch.cat([F.scaled_dot_product_attention(Q[:, i:i + chunk_size], K, V)
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def ca_online_softmax(Q, K, V, chunk_size):
    """Right: query chunks, and inside each an online softmax over key chunks."""
    d = Q.shape[-1]
    outs = []
    for i in range(0, Q.shape[1], chunk_size):
        q = Q[:, i:i + chunk_size] / math.sqrt(d)
        m = q.new_full((q.shape[0], q.shape[1], 1), float("-inf"))
        s = q.new_zeros(q.shape[0], q.shape[1], 1)
        acc = q.new_zeros(q.shape[0], q.shape[1], V.shape[-1])
        for j in range(0, K.shape[1], chunk_size):
            sc = q @ K[:, j:j + chunk_size].transpose(1, 2)
            m_new = torch.maximum(m, sc.amax(-1, keepdim=True))
            scale = torch.exp(m - m_new)
            p = torch.exp(sc - m_new)
            s = s * scale + p.sum(-1, keepdim=True)
            acc = acc * scale + p @ V[:, j:j + chunk_size]
            m = m_new
        outs.append(acc / s)
    return torch.cat(outs, dim=1)


def ca_float64_inside(Q, K, V, chunk_size):
    """Right: float64 inside, cast back."""
    return ca_float64(Q, K, V, chunk_size).to(Q.dtype)


WRONG = [
    (C, "no chunking", 5, ca_no_chunks),
    (C, "key chunks, per-chunk softmax", 5, ca_key_chunks),
    (C, "drops a shorter last chunk", 3, ca_drops_last),
    (C, "zero-pads the rest instead of a short chunk", 3, ca_pads_last),
    (C, "scales by sqrt(value_dim)", 3, ca_scale_value_dim),
    (C, "scales by sqrt(chunk_size)", 3, ca_scale_chunk),
    (C, "under torch.no_grad()", 1, ca_no_grad),
    (C, "detached chunk outputs", 1, ca_detach),
    (C, "preallocated output filled under no_grad", 1, ca_preallocated_no_grad),
    (C, "exp without max subtraction", 2, ca_naive_exp),
    (C, "keeps every chunk's weights", 5, ca_keeps_weights),
    (C, "all scores first, softmax per chunk", 5, ca_scores_first),
    (C, "loops over the batch, not the queries", 5, ca_batch_loop),
    (C, "returns float64", 6, ca_float64),
    (C, "returns (output, n_chunks)", 6, ca_tuple),
    (C, "batch 1 only (Q[0], expanded)", 3, ca_batch1),
    (C, "numpy chunks", 1, ca_numpy),
]

RIGHT_BUT_UNUSUAL = [
    (C, "torch.split over queries", 0, ca_split),
    (C, "preallocated output, autograd on", 0, ca_preallocated),
    (C, "fused kernel per chunk", 0, ca_fused_per_chunk),
    (C, "online softmax over key chunks", 0, ca_online_softmax),
    (C, "float64 inside, cast back", 0, ca_float64_inside),
]
