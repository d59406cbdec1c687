"""Attention pooling, scoring functions and attention layers (chapters 1, 3, 5, 6 and A1)."""
import math

import torch
from torch import nn


# -- Chapter 1: attention pooling ---------------------------------------------------------

def attention_pool(queries, keys, values, score):
    """Attention pooling: average the values with weights softmax(score(query, key))."""
    scores = score(queries, keys)            # (num_queries, num_keys): any real numbers
    weights = torch.softmax(scores, dim=-1)  # (num_queries, num_keys): rows sum to 1
    return weights @ values, weights         # (num_queries, value_dim), weights


def dot_score(queries, keys):
    """Score = q . k: large when the query and the key point the same way."""
    return queries @ keys.T  # (num_queries, d) @ (d, num_keys) -> (num_queries, num_keys)


def gaussian_score(queries, keys):
    """Score = -||q - k||^2 / 2: large when the key is close to the query."""
    return -0.5 * torch.cdist(queries, keys) ** 2  # (num_queries, num_keys)


def constant_score(queries, keys):
    """Score = 0 for every pair: the query is ignored, pooling becomes a plain average."""
    shape = (queries.shape[0], keys.shape[0])  # (num_queries, num_keys)
    return torch.zeros(shape, dtype=keys.dtype, device=keys.device)


def entropy(weights):
    """Entropy of each row of attention weights, in nats (0 log 0 counted as 0).

    log(n) for a uniform row over n keys, 0 for a row with all its weight on one key.
    """
    return -(weights * torch.log(weights.clamp_min(1e-12))).sum(dim=-1)


# -- Chapter 3: scoring functions and masking ---------------------------------------------

def masked_softmax(X, valid_lens):
    """Softmax over the last axis of X that only looks at the first `valid_lens` keys.

    X: (batch, num_queries, num_keys). valid_lens: None, (batch,) with one length per
    sequence, or (batch, num_queries) with one length per query. Masked keys get weight 0;
    a row with no valid key gets all-zero weights (d2l's version gives a uniform average
    over the padding, a -inf fill would give NaN).
    """
    if valid_lens is None:
        return torch.softmax(X, dim=-1)
    if X.dim() != 3 or valid_lens.shape not in {X.shape[:1], X.shape[:2]}:
        raise ValueError(f"masked_softmax expects X of shape (batch, queries, keys) and "
                         f"valid_lens of shape (batch,) or (batch, queries); got X "
                         f"{tuple(X.shape)} and valid_lens {tuple(valid_lens.shape)}")
    if valid_lens.dim() == 1:                   # the same length for all queries
        valid_lens = valid_lens[:, None]        # (b, 1), broadcast over the queries
    positions = torch.arange(X.shape[-1], device=X.device)      # (num_keys,)
    keep = positions < valid_lens[..., None]    # (b, m or 1, n)
    X = X.masked_fill(~keep, torch.finfo(X.dtype).min)  # finite: safe in float16 too
    weights = torch.softmax(X, dim=-1)          # a row with no valid key: uniform here
    # Only a row with no valid key needs the pass below. The test reads a value back from
    # the device: on a GPU it makes the CPU wait, which may cost more than the pass.
    if not keep.any(dim=-1).all():
        weights = weights * keep                # zero out rows that had no valid key
    return weights


class AdditiveAttention(nn.Module):
    """Additive attention: score(q, k) = w_v^T tanh(W_q q + W_k k); q, k of any sizes."""

    def __init__(self, num_hiddens, dropout, query_size=None, key_size=None):
        super().__init__()
        # Without sizes, the layers infer them on the first call (like d2l's LazyLinear).
        self.W_q = _linear(query_size, num_hiddens)
        self.W_k = _linear(key_size, num_hiddens)
        self.w_v = _linear(num_hiddens, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        queries, keys = self.W_q(queries), self.W_k(keys)  # (b, m, d_h), (b, n, d_h)
        # Every query plus every key by broadcasting: (b, m, 1, d_h) + (b, 1, n, d_h)
        features = torch.tanh(queries.unsqueeze(2) + keys.unsqueeze(1))  # (b, m, n, d_h)
        scores = self.w_v(features).squeeze(-1)                          # (b, m, n)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return torch.bmm(self.dropout(self.attention_weights), values)   # (b, m, d_v)


class DotProductAttention(nn.Module):
    """Scaled dot-product attention: softmax(Q K^T / sqrt(d)) V, with optional masking."""

    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        d = queries.shape[-1]
        # Scaling the queries (m * d numbers) equals scaling the scores (m * n) up to
        # rounding; it is the cheaper of the two when d < n.
        scores = torch.bmm(queries / math.sqrt(d), keys.transpose(1, 2))  # (b, m, n)
        self.attention_weights = masked_softmax(scores, valid_lens)       # (b, m, n)
        return torch.bmm(self.dropout(self.attention_weights), values)    # (b, m, d_v)


def _linear(in_features, out_features, bias=False):
    """nn.Linear if the input size is known, else nn.LazyLinear (sized on first call)."""
    if in_features is None:
        return nn.LazyLinear(out_features, bias=bias)
    return nn.Linear(in_features, out_features, bias=bias)


# -- Chapter 5: multi-head attention ------------------------------------------------------

def transpose_qkv(X, num_heads):
    """Split the last axis into heads and fold the heads into the batch axis."""
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)  # (batch, n, heads, d/heads)
    X = X.permute(0, 2, 1, 3)                             # (batch, heads, n, d/heads)
    return X.reshape(-1, X.shape[2], X.shape[3])          # (batch*heads, n, d/heads)


def transpose_output(X, num_heads):
    """Undo transpose_qkv: unfold the heads from the batch axis and concatenate them."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])  # (batch, heads, n, d/heads)
    X = X.permute(0, 2, 1, 3)                             # (batch, n, heads, d/heads)
    return X.reshape(X.shape[0], X.shape[1], -1)          # (batch, n, d)


class MultiHeadAttention(nn.Module):
    """Multi-head attention: `num_heads` scaled dot-product attentions side by side."""

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, fused=False):
        super().__init__()
        if num_hiddens % num_heads:
            raise ValueError(f"num_hiddens={num_hiddens} must be divisible by "
                             f"num_heads={num_heads}")
        self.num_heads, self.fused = num_heads, fused
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.fused:  # the same function on PyTorch's fused kernel (appendix A1)
            return fused_multihead_attention(self, queries, keys, values, valid_lens)
        queries = transpose_qkv(self.W_q(queries), self.num_heads)  # (batch*h, q, d/h)
        keys = transpose_qkv(self.W_k(keys), self.num_heads)        # (batch*h, k, d/h)
        values = transpose_qkv(self.W_v(values), self.num_heads)    # (batch*h, k, d/h)
        if valid_lens is not None:  # each head of an example gets the example's lengths
            valid_lens = valid_lens.repeat_interleave(self.num_heads, dim=0)
        output = self.attention(queries, keys, values, valid_lens)  # (batch*h, q, d/h)
        return self.W_o(transpose_output(output, self.num_heads))   # (batch, q, d)


def fused_multihead_attention(mha, queries, keys, values, valid_lens=None):
    """What `MultiHeadAttention(..., fused=True)` computes: the same function as the
    readable path, with torch's `scaled_dot_product_attention` (faster, less memory),
    which never stores the attention weights (`attention_weights` is set to None)."""
    batch, num_queries, num_keys = *queries.shape[:2], keys.shape[1]

    def heads(X):  # (batch, n, d) -> (batch, heads, n, d/heads): no folding needed
        return X.reshape(batch, X.shape[1], mha.num_heads, -1).transpose(1, 2)

    mask = empty = None
    if valid_lens is not None:  # bool mask, True = attend (nn.MHA: True = ignore)
        lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
        mask = torch.arange(num_keys, device=keys.device) < lens[..., None]
        mask = mask.unsqueeze(1)  # (batch, 1, q or 1, keys): the same for all heads
        empty = ~mask.any(dim=-1, keepdim=True)  # rows with no valid key at all
        mask = mask | empty  # let them attend anywhere (no NaN on any backend) ...
    dropout = mha.attention.dropout.p if mha.training else 0.0
    output = nn.functional.scaled_dot_product_attention(
        heads(mha.W_q(queries)), heads(mha.W_k(keys)), heads(mha.W_v(values)),
        attn_mask=mask, dropout_p=dropout)                  # (batch, heads, q, d/h)
    if empty is not None:  # ... then output zeros there, as masked_softmax gives
        output = output.masked_fill(empty, 0.0)
    mha.attention.attention_weights = None
    return mha.W_o(output.transpose(1, 2).reshape(batch, num_queries, -1))  # (b, q, d)


# -- Chapter 6: positional encoding -------------------------------------------------------

class PositionalEncoding(nn.Module):
    """Sinusoidal positional encoding: add P[i, 2j] = sin(i / 10000^(2j/d)) and the
    cosine of the same angle at P[i, 2j+1]. d2l's call; P moves with .to(device)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
        two_j = torch.arange(0, num_hiddens, 2, dtype=torch.float32)     # 0, 2, 4, ...
        X = position / torch.pow(10000, two_j / num_hiddens)  # (max_len, ceil(d/2))
        P = torch.zeros(1, max_len, num_hiddens)
        P[:, :, 0::2] = torch.sin(X)
        P[:, :, 1::2] = torch.cos(X[:, : num_hiddens // 2])  # odd d: one cosine fewer
        self.register_buffer("P", P, persistent=False)  # moves with .to(device)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence of length {X.shape[1]} is longer than "
                             f"max_len={self.P.shape[1]}; create PositionalEncoding "
                             "with a larger max_len")
        X = X + self.P[:, : X.shape[1], :].to(X.dtype)  # (batch, n, d) + (1, n, d)
        return self.dropout(X)
