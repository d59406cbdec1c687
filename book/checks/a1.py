"""Checker for appendix A1's exercise: attention computed a chunk of queries at a time."""
import math

import torch

from ..cost import peak_memory
from ._core import call, expect_close, expect_tensor, fail

HINT = ("each chunk of queries gives softmax(Q_chunk K^T / sqrt(d)) V, with d = Q.shape[-1], "
        "the softmax over the keys (the last axis); concatenate the chunks along the queries.")


def _attention(Q, K, V, scale=True, dim=-1):
    scores = Q @ K.transpose(-2, -1)                     # (batch, queries, keys)
    if scale:
        scores = scores / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=dim) @ V            # (batch, queries, value_dim)


def check_chunked_attention(fn):
    """Check `fn(Q, K, V, chunk_size)`: equal to full attention, with memory like chunk * n."""
    g = torch.Generator().manual_seed(0)
    cases = [("batch 2, 8 queries, 8 keys, d=4, chunk_size=4", 2, 8, 8, 4, 4),
             ("batch 1, 10 queries, 6 keys, d=3, chunk_size=4 (the last chunk has 2 queries)",
              1, 10, 6, 3, 4),
             ("batch 3, 5 queries, 7 keys, d=2, chunk_size=1", 3, 5, 7, 2, 1),
             ("batch 1, 6 queries, 6 keys, d=4, chunk_size=16 (larger than n)", 1, 6, 6, 4, 16)]
    for case, batch, n_q, n_k, d, chunk in cases:
        Q = 2 * torch.randn(batch, n_q, d, generator=g)
        K = 2 * torch.randn(batch, n_k, d, generator=g)
        V = torch.randn(batch, n_k, 5, generator=g)
        out = call(fn, Q, K, V, chunk, name="chunked_attention", case=case)
        if isinstance(out, (list, tuple)):
            fail(f"chunked_attention returned a {type(out).__name__} of chunks on {case}; "
                 "return one tensor.", "torch.cat(chunks, dim=1) joins them along the queries.")
        if isinstance(out, torch.Tensor) and out.dim() == 3 and out.shape[1] < n_q:
            fail(f"the output has {out.shape[1]} queries on {case}; expected all {n_q}: "
                 "the last, shorter chunk is missing.",
                 "range(0, num_queries, chunk_size) starts a chunk at every multiple of "
                 "chunk_size, and Q[:, i:i + chunk_size] is simply shorter at the end.")
        expect_tensor(out, (batch, n_q, 5), Q.dtype, what="the output", case=case)
        if torch.allclose(out, _attention(Q, K, V, scale=False), atol=1e-5):
            fail(f"the output equals softmax(Q K^T) V without the scale on {case}.",
                 "divide the scores by sqrt(d), d = Q.shape[-1] (chapter 3 says why).")
        if n_q > 1 and torch.allclose(out, _attention(Q, K, V, dim=-2)[:, :n_q], atol=1e-5):
            fail(f"the softmax runs over the queries, not the keys, on {case}.",
                 "softmax(scores, dim=-1): each query's weights over the keys sum to 1.")
        expect_close(out, _attention(Q, K, V), what="the output", case=case, hint=HINT)
    n, chunk = 1024, 64
    X = torch.randn(1, n, 16, generator=g)
    full = n * n * 4  # bytes of one float32 (n, n) score matrix
    peak = peak_memory(lambda: fn(X, X, X, chunk))
    if peak > full / 2:
        fail(f"on batch 1, {n} queries and keys, chunk_size={chunk}, the peak memory was "
             f"{peak / 2**20:.1f} MiB, while the whole {n} x {n} score matrix takes "
             f"{full / 2**20:.0f} MiB: your function builds (nearly) all of it.",
             "compute the scores of one chunk only, Q[:, i:i + chunk_size] @ K^T, inside the "
             "loop, and keep only that chunk's (chunk_size, value_dim) result.")
    return "chunked_attention: all checks passed."
