"""Chapter 11: how attention is made fast.

* `online_softmax`: the softmax of a row in one pass over its entries, block by block, with
  a running maximum and a running sum (Milakov and Gimelshein 2018).
* `tiled_attention`: FlashAttention's forward pass (Dao et al. 2022) in plain PyTorch:
  blocks of queries against blocks of keys, keeping per query only a running maximum, sum
  and weighted sum of values; padding masks (valid lengths), the causal mask (blocks above
  the diagonal are skipped and counted) and rows with no valid key (output zero).
* `hbm_numbers`: how many numbers move between the GPU's large memory (HBM) and its on-chip
  memory (SRAM) in standard and in tiled attention, as in the paper's analysis.
* `GroupedQueryAttention`: chapter 5's `MultiHeadAttention` with fewer key-value heads than
  query heads (multi-query attention: one; grouped-query attention: a few).
"""
import math

import torch
from torch import nn

from .attention import MultiHeadAttention, transpose_output, transpose_qkv


# -- The online softmax -----------------------------------------------------------------

def running_max_and_sum(scores, block_size=1):
    """One pass over `scores` (..., n), `block_size` entries at a time. After each block,
    the running maximum mu of the entries so far and the running sum l of exp(entry - mu).
    Returns (maxima, sums), each (..., number of blocks): the last ones are the max and the
    softmax's denominator, sum_j exp(s_j - max)."""
    shape = scores.shape[:-1]
    mu = torch.full(shape, float("-inf"), dtype=scores.dtype, device=scores.device)
    l = torch.zeros(shape, dtype=scores.dtype, device=scores.device)
    maxima, sums = [], []
    for start in range(0, scores.shape[-1], block_size):
        block = scores[..., start:start + block_size]             # (..., block)
        mu_new = torch.maximum(mu, block.amax(dim=-1))            # the new running max
        # What was summed relative to the old max is rescaled to the new one:
        l = l * torch.exp(mu - mu_new) + torch.exp(block - mu_new[..., None]).sum(dim=-1)
        mu = mu_new
        maxima.append(mu)
        sums.append(l)
    return torch.stack(maxima, dim=-1), torch.stack(sums, dim=-1)


def online_softmax(scores, block_size=1):
    """softmax(scores) over the last axis, its max and denominator found in one pass of
    `block_size` entries at a time (then one more pass writes the probabilities)."""
    maxima, sums = running_max_and_sum(scores, block_size)
    m, l = maxima[..., -1:], sums[..., -1:]                       # (..., 1) each
    return torch.exp(scores - m) / l


# -- Attention tiled over queries and keys ------------------------------------------------

def _key_mask(valid_lens, batch, num_queries, device):
    """valid_lens None, (batch,) or (batch, num_queries) -> (batch, num_queries) lengths."""
    if valid_lens is None:
        return None
    if valid_lens.shape not in {(batch,), (batch, num_queries)}:
        raise ValueError(f"valid_lens must have shape (batch,) = ({batch},) or (batch, "
                         f"num_queries) = ({batch}, {num_queries}); got "
                         f"{tuple(valid_lens.shape)}")
    lens = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None]
    return lens.to(device).expand(batch, num_queries)


def tiled_attention(Q, K, V, block_size=64, valid_lens=None, causal=False, stats=None):
    """softmax(Q K^T / sqrt(d)) V for Q (batch, m, d), K (batch, n, d), V (batch, n, d_v),
    computed on tiles of `block_size` queries x `block_size` keys (an int, or a pair
    (query block, key block)). Each query keeps only a running max, sum and weighted sum of
    values, so no (m, n) matrix is ever held.

    valid_lens (batch,) or (batch, m): key j is seen only when j < length (chapter 3);
    causal: query i sees keys j <= i (chapter 7), and tiles wholly above the diagonal are
    skipped, as are tiles wholly beyond every valid length. A query that sees no key gets
    output 0, as `masked_softmax` gives. If `stats` is a dict, it gets the number of tiles
    "visited" and "skipped"."""
    if Q.dim() != 3 or K.dim() != 3 or V.dim() != 3:
        raise ValueError("tiled_attention expects Q (batch, m, d), K (batch, n, d), "
                         f"V (batch, n, d_v); got {tuple(Q.shape)}, {tuple(K.shape)}, "
                         f"{tuple(V.shape)}")
    Bq, Bk = (block_size, block_size) if isinstance(block_size, int) else block_size
    if Bq < 1 or Bk < 1:
        raise ValueError(f"block sizes must be at least 1, got {block_size}")
    batch, m, d = Q.shape
    n = K.shape[1]
    lens = _key_mask(valid_lens, batch, m, Q.device)           # (batch, m) or None
    scale = 1 / math.sqrt(d)
    visited = skipped = 0
    outputs = []
    for i in range(0, m, Bq):                                  # a block of queries
        q = Q[:, i:i + Bq]                                      # (batch, bq, d)
        rows = torch.arange(i, i + q.shape[1], device=Q.device)  # the queries' positions
        row_max = torch.full(q.shape[:2], float("-inf"), dtype=Q.dtype, device=Q.device)
        row_sum = torch.zeros(q.shape[:2], dtype=Q.dtype, device=Q.device)
        acc = torch.zeros(*q.shape[:2], V.shape[-1], dtype=V.dtype, device=V.device)
        last_key = n if lens is None else int(lens[:, i:i + Bq].max().clamp(max=n))
        for j in range(0, n, Bk):                              # a block of keys
            if (causal and j > rows[-1]) or j >= last_key:      # nothing visible: skip
                skipped += 1
                continue
            visited += 1
            cols = torch.arange(j, min(j + Bk, n), device=Q.device)
            s = q @ K[:, j:j + Bk].transpose(1, 2) * scale      # (batch, bq, bk)
            if causal or lens is not None:                      # mask what is not seen
                visible = cols <= rows[:, None] if causal else cols >= 0   # (bq, bk)
                if lens is not None:
                    visible = visible & (cols < lens[:, i:i + Bq, None])  # (b, bq, bk)
                s = s.masked_fill(~visible, float("-inf"))
            new_max = torch.maximum(row_max, s.amax(dim=-1))   # (batch, bq)
            safe = new_max.masked_fill(new_max == float("-inf"), 0.0)  # no key seen yet
            p = torch.exp(s - safe[..., None])                  # (batch, bq, bk), <= 1
            rescale = torch.exp(row_max - safe)                 # old sums to the new max
            row_sum = row_sum * rescale + p.sum(dim=-1)
            acc = acc * rescale[..., None] + p @ V[:, j:j + Bk]  # (batch, bq, d_v)
            row_max = new_max
        empty = row_sum == 0                                    # no visible key at all
        outputs.append(acc / row_sum.masked_fill(empty, 1.0)[..., None])
    if stats is not None:
        stats.update(visited=visited, skipped=skipped)
    return torch.cat(outputs, dim=1)                            # (batch, m, d_v)


def standard_attention(Q, K, V, valid_lens=None, causal=False):
    """The reference: the whole (m, n) score matrix, masked, softmax, times V; rows with no
    visible key give 0."""
    m, n = Q.shape[1], K.shape[1]
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])     # (batch, m, n)
    if not causal and valid_lens is None:
        return torch.softmax(scores, dim=-1) @ V                # (batch, m, d_v)
    visible = torch.ones(m, n, dtype=torch.bool, device=Q.device)
    if causal:
        visible = visible.tril()                                # key j <= query i
    if valid_lens is not None:
        lens = _key_mask(valid_lens, Q.shape[0], m, Q.device)
        visible = visible & (torch.arange(n, device=Q.device) < lens[..., None])
    visible = visible.expand(scores.shape)
    weights = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
    weights = weights.masked_fill(~visible.any(dim=-1, keepdim=True), 0.0)  # empty rows
    return weights @ V                                          # (batch, m, d_v)


def tile_grid(num_queries, num_keys, block_size, causal=False):
    """Which tiles a causal (or full) tiled pass visits: a bool (query blocks, key blocks)
    matrix, True = visited."""
    rows = torch.arange(0, num_queries, block_size)
    last = (rows + block_size).clamp(max=num_queries) - 1      # each block's last query
    cols = torch.arange(0, num_keys, block_size)
    if not causal:
        return torch.ones(len(rows), len(cols), dtype=torch.bool)
    return cols[None, :] <= last[:, None]


# -- Bytes between HBM and SRAM -----------------------------------------------------------

def largest_block(head_size, sram_bytes, bytes_per_number):
    """The largest power-of-two block B whose tiles fit on chip: a block of queries, of
    keys, of values and of outputs (4 B d numbers) and the B x B scores."""
    block = 1
    while (4 * 2 * block * head_size + (2 * block) ** 2) * bytes_per_number <= sram_bytes:
        block *= 2
    return block


def hbm_numbers(n, head_size, kind="standard", block_size=None, causal=False):
    """Numbers read from and written to HBM by one head's attention over n tokens, forward.

    standard (the paper's Algorithm 0): read Q, K, write S = QK^T; read S, write P =
    softmax(S); read P and V, write O: 4nd + 4n^2.
    tiled (queries outside, keys inside, as `tiled_attention`): read each query block once
    and write its output once (2nd), and read a key block and a value block (2Bd) for every
    tile visited; with `causal`, only the tiles on or below the diagonal."""
    d = head_size
    if kind == "standard":
        return 4 * n * d + 4 * n * n
    if kind != "tiled":
        raise ValueError(f"kind must be 'standard' or 'tiled', got {kind!r}")
    if block_size is None:
        raise ValueError("tiled attention needs a block_size (see largest_block)")
    tiles = int(tile_grid(n, n, block_size, causal).sum())
    return 2 * n * d + tiles * 2 * block_size * d


# -- Sharing keys and values between heads -------------------------------------------------

def share_kv_heads(X, num_heads):
    """(batch, kv_heads, n, head_size) -> (batch, num_heads, n, head_size): query head i
    reads key-value head i // (num_heads // kv_heads), so each group of consecutive query
    heads shares one key-value head."""
    kv_heads = X.shape[1]
    if num_heads % kv_heads:
        raise ValueError(f"num_heads={num_heads} must be a multiple of the {kv_heads} "
                         "key-value heads")
    return X.repeat_interleave(num_heads // kv_heads, dim=1)


class GroupedQueryAttention(MultiHeadAttention):
    """Chapter 5's multi-head attention with `num_kv_heads` key-value heads shared by the
    `num_heads` query heads: 1 is multi-query attention, num_heads is plain multi-head
    attention, anything in between grouped-query attention. W_k and W_v shrink to
    num_kv_heads * head_size outputs; everything else is the parent's."""

    def __init__(self, num_hiddens, num_heads, num_kv_heads, dropout, bias=False,
                 fused=False):
        super().__init__(num_hiddens, num_heads, dropout, bias=bias, fused=fused)
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} must be a multiple of "
                             f"num_kv_heads={num_kv_heads} >= 1")
        self.num_kv_heads = num_kv_heads
        kv_size = num_kv_heads * (num_hiddens // num_heads)
        self.W_k = nn.Linear(num_hiddens, kv_size, bias=bias)
        self.W_v = nn.Linear(num_hiddens, kv_size, bias=bias)

    def kv_heads(self, X, W):
        """(batch, n, d) -> the key or value heads each query head reads:
        (batch * num_heads, n, head_size), chapter 5's folded layout."""
        heads = transpose_qkv(W(X), self.num_kv_heads)          # (batch * kv, n, hs)
        heads = heads.reshape(-1, self.num_kv_heads, *heads.shape[1:])  # (b, kv, n, hs)
        return share_kv_heads(heads, self.num_heads).flatten(0, 1)     # (b * h, n, hs)

    def forward(self, queries, keys, values, valid_lens=None):
        if self.fused:
            return self._fused(queries, keys, values, valid_lens)
        Q = transpose_qkv(self.W_q(queries), self.num_heads)    # (batch * h, q, hs)
        K, V = self.kv_heads(keys, self.W_k), self.kv_heads(values, self.W_v)
        if valid_lens is not None:  # each head of an example gets the example's lengths
            valid_lens = valid_lens.repeat_interleave(self.num_heads, dim=0)
        output = self.attention(Q, K, V, valid_lens)            # (batch * h, q, hs)
        return self.W_o(transpose_output(output, self.num_heads))  # (batch, q, d)

    def _fused(self, queries, keys, values, valid_lens=None):
        """The same function on torch's kernel, which shares the heads itself
        (enable_gqa=True); no valid_lens on this path."""
        if valid_lens is not None:
            raise ValueError("the fused path of GroupedQueryAttention takes no valid_lens")
        batch, num_queries = queries.shape[:2]

        def heads(X, count):  # (batch, n, count * hs) -> (batch, count, n, hs)
            return X.reshape(batch, X.shape[1], count, -1).transpose(1, 2)

        dropout = self.attention.dropout.p if self.training else 0.0
        out = nn.functional.scaled_dot_product_attention(
            heads(self.W_q(queries), self.num_heads),
            heads(self.W_k(keys), self.num_kv_heads),
            heads(self.W_v(values), self.num_kv_heads), dropout_p=dropout,
            enable_gqa=True)                                    # (batch, h, q, hs)
        self.attention.attention_weights = None
        return self.W_o(out.transpose(1, 2).reshape(batch, num_queries, -1))
