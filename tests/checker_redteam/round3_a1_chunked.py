"""Round 3 red team (writer R3, issue 12), a1_chunked: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/a1_chunked.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_chunked_attention"
import math, torch
from torch.nn import functional as F

def _att(q, K, V, scale_dim=None, sm_dim=-1, manual=False):
    S = q @ K.transpose(1, 2) / math.sqrt(scale_dim or q.shape[-1])
    if manual:
        E = torch.exp(S); W = E / E.sum(-1, keepdim=True)
    else:
        W = torch.softmax(S, sm_dim)
    return W @ V

def C_1_loop_cat(Q, K, V, chunk_size):
    return torch.cat([_att(Q[:, i:i + chunk_size], K, V) for i in range(0, Q.shape[1], chunk_size)], 1)

def O_1_split_sdpa(Q, K, V, chunk_size):
    return torch.cat([F.scaled_dot_product_attention(q, K, V) for q in Q.split(chunk_size, dim=1)], 1)

def O_2_float64_compute_cast_back(Q, K, V, chunk_size):
    out = [_att(q.double(), K.double(), V.double()).to(Q.dtype) for q in Q.split(chunk_size, 1)]
    return torch.cat(out, 1)

def W_01_chunks_of_keys_averaged(Q, K, V, chunk_size):
    outs = [_att(Q, K[:, i:i + chunk_size], V[:, i:i + chunk_size]) for i in range(0, K.shape[1], chunk_size)]
    return torch.stack(outs).mean(0)

def W_02_drops_last_chunk(Q, K, V, chunk_size):
    n = (Q.shape[1] // chunk_size) * chunk_size
    out = [_att(Q[:, i:i + chunk_size], K, V) for i in range(0, n, chunk_size)]
    if n < Q.shape[1]:
        out.append(torch.zeros(Q.shape[0], Q.shape[1] - n, V.shape[-1], dtype=Q.dtype, device=Q.device))
    return torch.cat(out, 1)

def W_03_scale_value_dim(Q, K, V, chunk_size):
    return torch.cat([_att(q, K, V, scale_dim=V.shape[-1]) for q in Q.split(chunk_size, 1)], 1)

def W_04_full_matrix(Q, K, V, chunk_size):
    return _att(Q, K, V)

def W_05_softmax_over_queries(Q, K, V, chunk_size):
    return torch.cat([_att(q, K, V, sm_dim=-2) for q in Q.split(chunk_size, 1)], 1)

def W_06_chunks_over_batch(Q, K, V, chunk_size):
    return torch.cat([_att(Q[i:i + chunk_size], K[i:i + chunk_size], V[i:i + chunk_size])
                      for i in range(0, Q.shape[0], chunk_size)], 0)

def W_07_scales_Q_in_place(Q, K, V, chunk_size):
    if not Q.requires_grad:
        Q /= math.sqrt(Q.shape[-1])
        return torch.cat([_att(q, K, V, scale_dim=1) for q in Q.split(chunk_size, 1)], 1)
    return C_1_loop_cat(Q, K, V, chunk_size)

def W_08_no_max_subtraction(Q, K, V, chunk_size):
    return torch.cat([_att(q, K, V, manual=True) for q in Q.split(chunk_size, 1)], 1)

def W_09_hardcoded_scale_8(Q, K, V, chunk_size):
    return torch.cat([_att(q, K, V, scale_dim=64) for q in Q.split(chunk_size, 1)], 1)

def W_10_preallocated_default_dtype_cpu(Q, K, V, chunk_size):
    out = torch.zeros(Q.shape[0], Q.shape[1], V.shape[-1])
    for i in range(0, Q.shape[1], chunk_size):
        out[:, i:i + chunk_size] = _att(Q[:, i:i + chunk_size], K, V).detach().cpu().float()
    return out

def S_1_one_query_at_a_time_output_right(Q, K, V, chunk_size):
    return torch.cat([_att(Q[:, i:i + 1], K, V) for i in range(Q.shape[1])], 1)

def W_12_chunks_keys_with_queries_local(Q, K, V, chunk_size):
    return torch.cat([_att(Q[:, i:i + chunk_size], K[:, i:i + chunk_size], V[:, i:i + chunk_size])
                      for i in range(0, Q.shape[1], chunk_size)], 1)

def W_13_full_sdpa_no_chunking(Q, K, V, chunk_size):
    return F.scaled_dot_product_attention(Q, K, V)
