"""Positional encoding and self-attention (chapter 6): equal to d2l's, the rotation property,
the timing helper, the explorer's compute function and the reversal task."""
import itertools
import math
import time
from collections import Counter
from fractions import Fraction

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
    best = float(selfattention.best_order_blind_accuracy(task["min_len"], task["max_len"],
                                                         task["vocab_size"]))
    # 500 test sequences: a sampling error of about 1 point, so 3 points of tolerance.
    assert accuracy["sin"] >= 0.85 and accuracy["none"] <= best + 0.03


# -- Counting and timing the layers (chapter 6, "Cost, counted" and "Cost, measured") ----

def test_count_operations_is_exact():
    lengths, d = [16, 64, 256], 32
    counts = selfattention.count_operations(lengths, num_hiddens=d)
    for i, n in enumerate(lengths):
        assert counts["CNN (Conv1d, k=3)"][i] == 2 * 3 * d * d * n         # k d x d per position
        assert counts["RNN (GRU)"][i] == 2 * n * 2 * 3 * d * d             # 3 gates, x and h
        assert counts["self-attention"][i] == 8 * n * d**2 + 4 * n**2 * d  # projections + n^2


def test_time_layers_counts_cpu_time_of_the_thread_on_the_cpu():
    assert selfattention._clock(torch.device("cpu")) in (time.thread_time, time.perf_counter)
    if time.get_clock_info("thread_time").resolution <= 1e-6:
        assert selfattention._clock(torch.device("cpu")) is time.thread_time
    assert selfattention._clock(torch.device("cuda")) is time.perf_counter


def test_memory_write_times():
    new, reused = selfattention.memory_write_times([16, 64], num_heads=2)
    assert len(new) == len(reused) == 2 and min(new + reused) > 0


# -- The best a model blind to order can do on reversal ----------------------------------

def brute_force_order_blind_best(min_len, max_len, symbols):
    """Enumerate every sequence; the best order-blind rule answers each (symbol, bag) with
    the symbol most often at the mirrored position over all sequences with that bag."""
    right = Fraction(0)
    for n in range(min_len, max_len + 1):
        tally = {}
        for seq in itertools.product(range(1, symbols + 1), repeat=n):
            bag = tuple(sorted(seq))
            for t, a in enumerate(seq):
                tally.setdefault((bag, a), Counter())[seq[n - 1 - t]] += 1
        right += Fraction(sum(max(c.values()) for c in tally.values()), symbols ** n)
    return right / sum(range(min_len, max_len + 1))


@pytest.mark.parametrize("min_len, max_len, symbols", [(1, 5, 2), (2, 6, 3), (3, 4, 4), (4, 5, 5)])
def test_best_order_blind_accuracy_equals_brute_force(min_len, max_len, symbols):
    exact = selfattention.best_order_blind_accuracy(min_len, max_len, symbols + 1)
    assert exact == brute_force_order_blind_best(min_len, max_len, symbols)


def test_best_order_blind_accuracy_on_the_chapter_task():
    task = selfattention.REVERSAL
    best = selfattention.best_order_blind_accuracy(task["min_len"], task["max_len"],
                                                   task["vocab_size"])
    assert best == Fraction(8950934, 26573415) and round(float(best), 3) == 0.337
    # One symbol per position: a single-symbol alphabet is always right.
    assert selfattention.best_order_blind_accuracy(3, 6, 2) == 1
    with pytest.raises(ValueError, match="min_len"):
        selfattention.best_order_blind_accuracy(5, 4, 12)


def test_mirror_share():
    lens = torch.tensor([3, 4])
    perfect = torch.zeros(2, 1, 4, 4)
    for b, n in enumerate(lens.tolist()):
        for t in range(n):
            perfect[b, 0, t, n - 1 - t] = 1.0
    assert selfattention.mirror_share(perfect, lens) == pytest.approx(1.0)
    uniform = torch.zeros(2, 1, 4, 4)
    for b, n in enumerate(lens.tolist()):
        uniform[b, 0, :, :n] = 1.0 / n
    assert selfattention.mirror_share(uniform, lens) == pytest.approx(2 / 7)  # (1 + 1) / 7


def test_attention_maps_shape():
    model = selfattention.OrderModel(PositionalEncoding, vocab_size=12, num_hiddens=16)
    X, lens, _ = selfattention.reversal_batch(3, 2, 5, 12, torch.Generator().manual_seed(0))
    maps = selfattention.attention_maps(model, X, lens)
    assert maps.shape == (2, 3, 4, 5, 5)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 3, 4, 5))
