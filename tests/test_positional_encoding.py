"""Positional encoding and self-attention (chapter 6): equal to d2l's, the rotation property,
the timing helper, the explorer's compute function and the reversal task."""
import math

import pytest
import torch

from book import selfattention
from book.attention import MultiHeadAttention, PositionalEncoding


@pytest.mark.parametrize("num_hiddens", [4, 32, 128])
def test_equals_d2l_positional_encoding(num_hiddens):
    d2l = pytest.importorskip("d2l.torch")
    X = torch.randn(2, 50, num_hiddens)
    ours = PositionalEncoding(num_hiddens, 0.0).eval()(X)
    theirs = d2l.PositionalEncoding(num_hiddens, 0.0).eval()(X)
    torch.testing.assert_close(ours, theirs, atol=0, rtol=0)


def test_the_formula_entry_by_entry():
    P = selfattention.sinusoidal_table(30, 16).double()
    i, j = 7, 3                                     # position 7, pair 3 (columns 6 and 7)
    angle = i / 10000 ** (2 * j / 16)
    assert P[i, 2 * j].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert P[i, 2 * j + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_odd_width_and_too_long_sequences():
    assert PositionalEncoding(5, 0.0)(torch.zeros(1, 3, 5)).shape == (1, 3, 5)
    with pytest.raises(ValueError, match="max_len"):
        PositionalEncoding(8, 0.0, max_len=10)(torch.zeros(1, 11, 8))


def test_encoding_moves_with_the_module_and_is_not_a_parameter():
    encoding = PositionalEncoding(8, 0.0)
    assert list(encoding.parameters()) == [] and "P" in dict(encoding.named_buffers())
    assert "P" not in encoding.state_dict()         # computed, not saved


@pytest.mark.parametrize("delta", [1, 3, 17, 100])
def test_shift_by_delta_is_one_fixed_rotation(delta):
    d = 64
    P = selfattention.sinusoidal_table(400, d).double()      # (400, d)
    M = selfattention.rotation(delta, d)
    torch.testing.assert_close(P[delta:], P[:-delta] @ M.T, atol=2e-4, rtol=0)
    torch.testing.assert_close(M @ M.T, torch.eye(d, dtype=M.dtype))  # orthogonal
    assert torch.linalg.det(M).item() == pytest.approx(1.0)           # a rotation
    # It is not the identity, and a different delta gives a different matrix.
    assert not torch.allclose(M, torch.eye(d, dtype=M.dtype))
    assert not torch.allclose(M, selfattention.rotation(delta + 1, d))


def test_rotation_fails_for_a_wrong_matrix():
    """The identity check above can fail: with the transposed rotation it does."""
    P = selfattention.sinusoidal_table(50, 16).double()
    M = selfattention.rotation(2, 16)
    assert (P[2:] - P[:-2] @ M).abs().max() > 0.1


def test_dot_products_depend_only_on_the_offset():
    P = selfattention.sinusoidal_table(100, 32).double()
    S = P @ P.T
    torch.testing.assert_close(S[1:, 1:], S[:-1, :-1], atol=2e-4, rtol=0)


def test_explorer_compute_function():
    P, similarity = selfattention.explore_encoding(32, 10, num_positions=100)
    assert P.shape == (100, 32) and similarity.shape == (100,)
    assert similarity[10].item() == pytest.approx(1.0, abs=1e-5)
    assert int(similarity.argmax()) == 10
    # The chapter's reading of the widget: narrow encodings ripple (a farther position can
    # look more similar than a nearer one), wide ones fall off more smoothly with distance.
    ripple = {}
    for d in (16, 128):
        _, s = selfattention.explore_encoding(d, 0)
        ripple[d] = (s[1:51] - s[:50]).max().item()  # largest rise with distance
    assert ripple[16] > 0.1 and ripple[128] < ripple[16] / 2


def test_self_attention_without_positions_is_permutation_equivariant():
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 4, 0.0).eval()
    X = torch.randn(2, 6, 16)
    order = torch.randperm(6)
    Y = layer(X, X, X)
    Xp = X[:, order]
    torch.testing.assert_close(layer(Xp, Xp, Xp), Y[:, order], atol=1e-6, rtol=0)
    encoding = PositionalEncoding(16, 0.0)           # with positions it is not
    Xe, Xpe = encoding(X), encoding(Xp)
    assert not torch.allclose(layer(Xpe, Xpe, Xpe), layer(Xe, Xe, Xe)[:, order], atol=1e-3)


def test_time_layers_returns_positive_times_and_restores_threads():
    threads = torch.get_num_threads()
    times = selfattention.time_layers([16, 32], num_hiddens=16, budget=0.0)
    assert set(times) == {"CNN (Conv1d, k=3)", "RNN (GRU)", "self-attention"}
    assert all(len(t) == 2 and min(t) > 0 for t in times.values())
    assert torch.get_num_threads() == threads


def test_sequence_layers_keep_the_shape():
    layers, _ = selfattention.sequence_layers(num_hiddens=8, num_heads=2)
    X = torch.randn(2, 10, 8)
    for layer in layers.values():
        assert layer(X).shape == X.shape


def test_loglog_slope():
    n = [10, 20, 40, 80]
    assert selfattention.loglog_slope(n, [3 * x ** 2 for x in n]) == pytest.approx(2.0)
    assert selfattention.loglog_slope(n, [0.1 * x for x in n]) == pytest.approx(1.0)


def test_reversal_batch():
    X, lens, Y = selfattention.reversal_batch(5, 3, 6, vocab_size=10,
                                              generator=torch.Generator().manual_seed(0))
    assert X.shape == Y.shape == (5, 6) and lens.shape == (5,)
    for x, n, y in zip(X, lens, Y):
        n = int(n)
        assert 3 <= n <= 6 and (x[:n] > 0).all() and (x[n:] == 0).all()
        assert torch.equal(y[:n], x[:n].flip(0)) and (y[n:] == 0).all()


def test_reversal_needs_positions():
    """The chapter's claim on the chapter's settings: about 5 s per model on a laptop."""
    task = selfattention.REVERSAL
    accuracy = {}
    for name, cls in [("sin", PositionalEncoding), ("none", selfattention.NoPositionalEncoding)]:
        model, losses = selfattention.train_order_model(cls, **task)
        assert len(losses) == task["num_steps"]
        accuracy[name] = selfattention.reversal_accuracy(model, task["min_len"], task["max_len"],
                                                         vocab_size=task["vocab_size"])
    assert accuracy["sin"] >= 0.8 and accuracy["none"] <= 0.45
