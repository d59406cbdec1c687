"""book.fast_attention: the online softmax, tiled attention (masks, causal skipping, empty
rows, gradients, memory), the HBM byte counts, and key-value heads shared between
queries."""
import math

import pytest
import torch
import torch.nn.functional as F

from book.attention import MultiHeadAttention
from book.cost import fit_power_law, peak_memory
from book.fast_attention import (GroupedQueryAttention, hbm_numbers, largest_block,
                                 online_softmax, running_max_and_sum, share_kv_heads,
                                 standard_attention, tile_grid, tiled_attention)


def test_online_softmax_equals_softmax_and_is_stable():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 50, generator=g, dtype=torch.float64)
    for block in (1, 7, 50, 64):
        assert torch.allclose(online_softmax(x, block), torch.softmax(x, -1), atol=1e-12)
    big = torch.tensor([1e4, 1e4 - 1, 3.0, 1e4 + 2])
    assert torch.isfinite(online_softmax(big)).all()
    assert torch.allclose(online_softmax(big), torch.softmax(big, -1), atol=1e-6)
    maxima, sums = running_max_and_sum(big, 1)
    assert maxima.tolist() == [1e4, 1e4, 1e4, 1e4 + 2]
    expected = torch.exp(big - big.max()).sum().item()
    assert math.isclose(sums[-1].item(), expected, rel_tol=1e-6)


CASES = {"no mask": {}, "causal": dict(causal=True),
         "lengths per sequence, one 0": dict(valid_lens=torch.tensor([37, 0, 5])),
         "lengths per query": dict(valid_lens=torch.randint(0, 38, (3, 29),
                                                           generator=torch.Generator()
                                                           .manual_seed(1))),
         "causal and lengths": dict(causal=True, valid_lens=torch.tensor([37, 3, 0]))}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("block", [1, 8, (4, 16), 64])
def test_tiled_equals_standard(name, block):
    g = torch.Generator().manual_seed(2)
    m = 29 if name == "lengths per query" else 37
    Q, K, V = (torch.randn(3, m, 8, generator=g), torch.randn(3, 37, 8, generator=g),
               torch.randn(3, 37, 5, generator=g))
    if CASES[name].get("causal"):
        Q = Q[:, :37]
    out = tiled_attention(Q, K, V, block, **CASES[name])
    ref = standard_attention(Q.double(), K.double(), V.double(), **CASES[name])
    assert (out - ref).abs().max() < 1e-6


def test_empty_rows_are_zero_and_gradients_match():
    g = torch.Generator().manual_seed(3)
    leaves = [torch.randn(2, 10, 4, generator=g, dtype=torch.float64).requires_grad_()
              for _ in range(3)]
    lens = torch.tensor([0, 6])
    out = tiled_attention(*leaves, 3, valid_lens=lens, causal=True)
    assert (out[0] == 0).all()
    w = torch.randn(out.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((out * w).sum(), leaves)
    ref = torch.autograd.grad((standard_attention(*leaves, valid_lens=lens, causal=True)
                               * w).sum(), leaves)
    for a, b in zip(grads, ref):
        assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-10)


def test_causal_skips_the_tiles_above_the_diagonal():
    stats = {}
    X = torch.randn(1, 64, 4)
    tiled_attention(X, X, X, 16, causal=True, stats=stats)
    assert stats == {"visited": 10, "skipped": 6}
    assert tile_grid(64, 64, 16, causal=True).sum() == 10
    assert tile_grid(64, 64, 16).sum() == 16
    stats = {}
    tiled_attention(X, X, X, 16, valid_lens=torch.tensor([20]), stats=stats)
    assert stats == {"visited": 8, "skipped": 8}     # keys 32.. unseen by every query


def test_matches_torch_sdpa():
    g = torch.Generator().manual_seed(4)
    Q, K, V = (torch.randn(2, 50, 16, generator=g) for _ in range(3))
    for causal in (False, True):
        ref = F.scaled_dot_product_attention(Q, K, V, is_causal=causal)
        assert torch.allclose(tiled_attention(Q, K, V, 16, causal=causal), ref, atol=1e-5)


def test_bad_input_is_refused():
    X = torch.randn(2, 5, 4)
    with pytest.raises(ValueError, match="valid_lens"):
        tiled_attention(X, X, X, 2, valid_lens=torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="block"):
        tiled_attention(X, X, X, 0)
    with pytest.raises(ValueError, match="expects"):
        tiled_attention(X[0], X[0], X[0], 2)
    with pytest.raises(ValueError, match="kind"):
        hbm_numbers(64, 8, "flash")
    with pytest.raises(ValueError, match="multiple"):
        GroupedQueryAttention(16, 4, 3, 0.0)
    with pytest.raises(ValueError, match="multiple"):
        share_kv_heads(torch.zeros(1, 3, 2, 2), 4)


def test_memory_grows_linearly():
    peaks = []
    ns = [512, 1024, 2048]
    for n in ns:
        X = torch.randn(1, n, 32)
        with torch.no_grad():
            peaks.append(peak_memory(lambda: tiled_attention(X, X, X, 128)))
    assert fit_power_law(ns, peaks)[0] < 1.2


def test_hbm_numbers():
    assert hbm_numbers(1024, 64) == 4 * 1024 * 64 + 4 * 1024 ** 2
    assert hbm_numbers(256, 64, "tiled", 64) == 2 * 256 * 64 + 16 * 2 * 64 * 64
    assert hbm_numbers(256, 64, "tiled", 64, causal=True) == 2 * 256 * 64 + 10 * 2 * 64 * 64
    assert largest_block(64, 228 * 1024, 2) == 128
    assert largest_block(64, 1024 ** 2, 2) > 128


@pytest.mark.parametrize("kv", [1, 2, 4])
def test_grouped_query_attention(kv):
    torch.manual_seed(0)
    layer = GroupedQueryAttention(16, 4, kv, dropout=0.0)
    assert layer.W_k.out_features == kv * 4 and layer.W_q.out_features == 16
    X = torch.randn(2, 7, 16)
    lens = torch.tensor([7, 3])
    out = layer(X, X, X, lens)
    # The same function as multi-head attention whose K and V projections repeat the
    # shared heads' rows, group by group:
    mha = MultiHeadAttention(16, 4, dropout=0.0)
    state = layer.state_dict()
    for name in ("W_k.weight", "W_v.weight"):
        state[name] = state[name].reshape(kv, 4, 16).repeat_interleave(4 // kv, 0)
        state[name] = state[name].reshape(16, 16)
    mha.load_state_dict(state)
    assert torch.allclose(out, mha(X, X, X, lens), atol=1e-6)
    layer.fused = True
    assert torch.allclose(layer(X, X, X), mha(X, X, X), atol=1e-5)
    with pytest.raises(ValueError, match="valid_lens"):
        layer(X, X, X, lens)


def test_share_kv_heads_order():
    X = torch.arange(2).float().reshape(1, 2, 1, 1)            # kv heads 0 and 1
    assert share_kv_heads(X, 6).flatten().tolist() == [0, 0, 0, 1, 1, 1]
