"""Chapter 6's helpers: timing a CNN, an RNN and self-attention; the geometry of the
sinusoidal encoding; and an order-sensitive task (reversal) to compare positional encodings.
"""
import math
import time
from collections import Counter
from fractions import Fraction

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from .attention import MultiHeadAttention, PositionalEncoding
from .device import one_cpu_thread


# -- CNN vs RNN vs self-attention, measured ------------------------------------------------

def sequence_layers(num_hiddens=64, num_heads=4, kernel_size=3):
    """Three layers that map a (batch, n, d) sequence to a (batch, n, d) sequence."""
    conv = nn.Conv1d(num_hiddens, num_hiddens, kernel_size, padding=kernel_size // 2)
    gru = nn.GRU(num_hiddens, num_hiddens, batch_first=True)
    attention = MultiHeadAttention(num_hiddens, num_heads, dropout=0.0)
    return {
        "CNN (Conv1d, k=3)": lambda X: conv(X.transpose(1, 2)).transpose(1, 2),
        "RNN (GRU)": lambda X: gru(X)[0],
        "self-attention": lambda X: attention(X, X, X),
    }, nn.ModuleList([conv, gru, attention])


@torch.no_grad()
def count_operations(lengths, num_hiddens=64):
    """Floating-point operations (a multiply-add counts 2) of one forward pass of each layer
    at each sequence length, counted by PyTorch's FlopCounterMode: an exact count of the
    matrix products and convolutions, the same on every machine. (On the CPU: a GPU's GRU
    runs as one fused cuDNN call, which the counter does not see.)"""
    layers, _ = sequence_layers(num_hiddens)
    counts = {name: [] for name in layers}
    with one_cpu_thread():
        for n in lengths:
            X = torch.randn(1, n, num_hiddens)                       # (1, n, d)
            for name, layer in layers.items():
                with FlopCounterMode(display=False) as counter:
                    layer(X)
                counts[name].append(counter.get_total_flops())
    return counts


def _clock(device):
    """On the CPU, the CPU time of this thread: it stops while other programs run, so a
    busy machine does not inflate the measurement. On a GPU (or where the thread clock is
    coarse, as on Windows), wall-clock time."""
    fine = time.get_clock_info("thread_time").resolution <= 1e-6
    return time.thread_time if device.type == "cpu" and fine else time.perf_counter


def _synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@torch.no_grad()
def time_layers(lengths, num_hiddens=64, batch_size=1, device=None, budget=0.1):
    """Forward time in seconds of each layer at each sequence length.

    Each time is the fastest of at least 3 runs (more for fast layers, up to `budget`
    seconds): the minimum is the least disturbed by other programs on the machine. On the
    CPU the layers run on one thread, timed by that thread's CPU time, so that the clock
    counts the layer's own work, not the time it waits while other programs run.
    """
    device = torch.device(device or "cpu")
    layers, modules = sequence_layers(num_hiddens)
    modules.to(device).eval()
    times = {name: [] for name in layers}
    with one_cpu_thread(device):
        _time_all(layers, times, lengths, num_hiddens, batch_size, device, budget)
    return times


def _time_all(layers, times, lengths, num_hiddens, batch_size, device, budget):
    clock = _clock(device)
    for n in lengths:
        X = torch.randn(batch_size, n, num_hiddens, device=device)  # (batch, n, d)
        for name, layer in layers.items():
            layer(X)  # warm-up: the first call allocates memory
            times[name].append(_fastest(lambda: layer(X), device, clock, budget))


def _fastest(run, device, clock, budget=0.1):
    runs, spent, best = 0, 0.0, math.inf
    while runs < 3 or (spent < budget and runs < 20):
        _synchronize(device)
        start = clock()
        run()
        _synchronize(device)
        seconds = clock() - start
        runs, spent, best = runs + 1, spent + seconds, min(best, seconds)
    return best


@torch.no_grad()
def memory_write_times(lengths, num_heads=4, device=None):
    """Seconds to write a (num_heads, n, n) float32 tensor, the size of self-attention's
    weights, at each length n: into memory allocated afresh for each write (as every
    forward pass does) and into memory allocated once and reused. Returns (new, reused)."""
    device = torch.device(device or "cpu")
    clock, new, reused = _clock(device), [], []
    with one_cpu_thread(device):
        for n in lengths:
            shape = (num_heads, n, n)
            new.append(_fastest(lambda: torch.empty(shape, device=device).fill_(1.0),
                                device, clock))
            buffer = torch.empty(shape, device=device)
            reused.append(_fastest(lambda: buffer.fill_(1.0), device, clock))
    return new, reused


def loglog_slope(lengths, seconds):
    """Slope of log(time) against log(n) by least squares: time ~ n^slope."""
    return float(np.polyfit(np.log(lengths), np.log(seconds), 1)[0])


# -- The geometry of the sinusoidal encoding -----------------------------------------------

def sinusoidal_table(num_positions, num_hiddens):
    """The matrix P (num_positions, num_hiddens) that PositionalEncoding adds."""
    return PositionalEncoding(num_hiddens, 0.0, max_len=num_positions).P[0]


def frequencies(num_hiddens):
    """w_j = 1 / 10000^(2j/d), one per sine-cosine pair."""
    return 1.0 / torch.pow(10000, torch.arange(0, num_hiddens, 2, dtype=torch.float64)
                           / num_hiddens)                                  # (d/2,)


def rotation(delta, num_hiddens):
    """The (d, d) matrix M with p_{i+delta} = M p_i for every i: a rotation by delta*w_j
    in each (sin, cos) plane, block-diagonal; it does not depend on i."""
    M = torch.zeros(num_hiddens, num_hiddens, dtype=torch.float64)
    for j, w in enumerate(frequencies(num_hiddens)):
        c, s = math.cos(delta * w), math.sin(delta * w)
        M[2 * j: 2 * j + 2, 2 * j: 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    return M


def explore_encoding(num_hiddens, position, num_positions=100):
    """For the explorer widget: P, and the similarity of `position` with every position."""
    P = sinusoidal_table(num_positions, num_hiddens)                     # (positions, d)
    similarity = P @ P[position] / (num_hiddens / 2)                     # (positions,)
    return P, similarity


# -- An order-sensitive task: reverse the sequence -----------------------------------------

PAD = 0  # token 0 is padding; tokens 1 .. vocab_size-1 are symbols

# The settings chapter 6 and its exercise checker use: sequences of 4 to 8 symbols out of
# 11, a 2-block encoder with d = 32, 400 steps of Adam (warm-up 50 steps, clipping).
REVERSAL = dict(min_len=4, max_len=8, vocab_size=12, num_hiddens=32, lr=1e-3, warmup=50,
                num_steps=400)


def reversal_batch(batch_size, min_len, max_len, vocab_size=20, generator=None,
                   device=None):
    """Random sequences of lengths in [min_len, max_len], padded to max_len, and their
    reversals: returns X, valid_lens, Y (the padding of Y is PAD and is not scored)."""
    lens = torch.randint(min_len, max_len + 1, (batch_size,), generator=generator)  # (b,)
    X = torch.randint(1, vocab_size, (batch_size, max_len), generator=generator)    # (b, n)
    positions = torch.arange(max_len)                                               # (n,)
    valid = positions < lens[:, None]                                               # (b, n)
    X = X.masked_fill(~valid, PAD)
    source = (lens[:, None] - 1 - positions).clamp(min=0)    # Y[b, t] = X[b, len_b - 1 - t]
    Y = X.gather(1, source).masked_fill(~valid, PAD)                                # (b, n)
    return X.to(device), lens.to(device), Y.to(device)


class NoPositionalEncoding(nn.Module):
    """The baseline: adds nothing, so the model sees a set, not a sequence."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X)


class OrderModel(nn.Module):
    """Embedding, positional encoding, Transformer encoder blocks, a symbol per position."""

    def __init__(self, pos_encoding_class, vocab_size=20, num_hiddens=64, num_heads=4,
                 num_blks=2, max_len=1000):
        from .transformer import TransformerEncoderBlock  # chapter 7's block, used as is

        super().__init__()
        self.embedding = nn.Embedding(vocab_size, num_hiddens)
        nn.init.normal_(self.embedding.weight, std=1.0)   # the same size as the encodings
        self.pos_encoding = pos_encoding_class(num_hiddens, 0.0, max_len=max_len)
        self.blks = nn.ModuleList([TransformerEncoderBlock(num_hiddens, 2 * num_hiddens,
                                                           num_heads, 0.0)
                                   for _ in range(num_blks)])
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def forward(self, X, valid_lens):
        H = self.pos_encoding(self.embedding(X))           # (batch, n, d)
        for blk in self.blks:
            H = blk(H, valid_lens)                         # (batch, n, d)
        return self.dense(H)                               # (batch, n, vocab)


def reversal_accuracy(model, min_len, max_len, num_examples=500, vocab_size=20, seed=123):
    """Fraction of the real (non-padding) positions reversed correctly, on new sequences."""
    device = next(model.parameters()).device
    X, lens, Y = reversal_batch(num_examples, min_len, max_len, vocab_size,
                                torch.Generator().manual_seed(seed), device)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        correct = model(X, lens).argmax(dim=-1) == Y      # (batch, n)
    model.train(was_training)
    valid = torch.arange(max_len, device=device) < lens[:, None]
    return (correct & valid).sum().item() / valid.sum().item()


def _partitions(n, largest=None):
    """The ways to write n as a sum of positive counts, largest first: 3 = 3, 2+1, 1+1+1."""
    largest = n if largest is None else largest
    if n == 0:
        yield ()
        return
    for first in range(min(n, largest), 0, -1):
        for rest in _partitions(n - first, first):
            yield (first,) + rest


def best_order_blind_accuracy(min_len, max_len, vocab_size):
    """The highest expected share of positions that a model blind to order (permutation-
    equivariant) can reverse correctly on `reversal_batch`'s sequences: exact, as a Fraction.

    Such a model sees a position's symbol a and the bag of the sequence's symbols, so it
    gives every copy of a the same answer; the best answer is the symbol most likely to
    stand at the mirrored position. For a sequence of length n with c_b copies of symbol b
    that is the symbol with the largest c_b when n is odd (a copy of a in the middle is its
    own mirror), and with the largest of c_b (b != a) and c_a - 1 when n is even. This
    counts every bag by the profile of its counts (a partition of n), for each length.
    """
    if not 1 <= min_len <= max_len or vocab_size < 2:
        raise ValueError(f"need 1 <= min_len <= max_len and vocab_size >= 2, got "
                         f"min_len={min_len}, max_len={max_len}, vocab_size={vocab_size}")
    symbols = vocab_size - 1                                    # token 0 is padding
    correct = Fraction(0)
    for n in range(min_len, max_len + 1):                       # each length equally likely
        for counts in _partitions(n):
            if len(counts) > symbols:
                continue
            bags = math.perm(symbols, len(counts))              # which symbols get the counts
            for repeats in Counter(counts).values():
                bags //= math.factorial(repeats)
            orders = math.factorial(n)                          # arrangements of one bag
            for c in counts:
                orders //= math.factorial(c)
            if n % 2:
                right = Fraction(sum(c * max(counts) for c in counts), n)
            else:
                right = Fraction(sum(c * max([c - 1] + list(counts[:i] + counts[i + 1:]))
                                     for i, c in enumerate(counts)), n - 1)
            correct += Fraction(bags * orders, symbols ** n) * right   # expected, per length
    return correct / sum(range(min_len, max_len + 1))           # right / all positions


@torch.no_grad()
def attention_maps(model, X, valid_lens):
    """The attention weights of every block of an OrderModel on X:
    (blocks, batch, heads, n, n)."""
    model.eval()
    model(X, valid_lens)
    batch, n = X.shape
    return torch.stack([blk.attention.attention.attention_weights.reshape(batch, -1, n, n)
                        for blk in model.blks])


def mirror_share(weights, valid_lens):
    """The average weight a query at position t puts on the mirrored position n - 1 - t:
    weights (batch, heads, n, n), averaged over heads and the real positions."""
    lens = valid_lens.to(weights.device)
    t = torch.arange(weights.shape[-1], device=weights.device)          # (n,)
    mirror = (lens[:, None] - 1 - t).clamp(min=0)                        # (batch, n)
    index = mirror[:, None, :, None].expand(-1, weights.shape[1], -1, 1)
    on_mirror = weights.gather(-1, index)[..., 0].mean(dim=1)            # (batch, n)
    valid = t < lens[:, None]
    return (on_mirror * valid).sum().item() / valid.sum().item()


def train_order_model(pos_encoding_class, num_steps=600, min_len=8, max_len=16,
                      vocab_size=20, batch_size=64, lr=5e-4, warmup=100, seed=0,
                      device=None, **sizes):
    """Train an OrderModel to reverse sequences. Adam with `warmup` steps of linear warm-up
    and gradient clipping at norm 1 (without them training spikes and collapses).
    Returns the model and its losses."""
    torch.manual_seed(seed)
    model = OrderModel(pos_encoding_class, vocab_size, **sizes).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 lambda step: min(1.0, (step + 1) / warmup))
    data = torch.Generator().manual_seed(seed + 1)
    losses = []
    with one_cpu_thread(device):
        for _ in range(num_steps):
            X, lens, Y = reversal_batch(batch_size, min_len, max_len, vocab_size, data,
                                        device)         # X, Y: (batch, n); lens: (batch,)
            logits = model(X, lens)                                    # (batch, n, vocab)
            loss = nn.functional.cross_entropy(logits.reshape(-1, vocab_size),
                                               Y.reshape(-1), ignore_index=PAD)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
    return model, losses
