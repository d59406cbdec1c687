"""What attention costs (appendix A1): time and memory measured, and power laws fitted.

The benchmarks in `benchmarks/` use the same functions, so the book and the benchmark
tables measure the same way.
"""
import contextlib
import math
import os
import sys
import time

import numpy as np
import torch


def _synchronize(device):
    """Wait for a GPU to finish its queued work (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn, repeat=5, warmup=1, device="cpu", clock=time.perf_counter):
    """Call fn() `warmup` times untimed, then `repeat` times; return each call's seconds.

    On a GPU the work runs asynchronously, so the clock is read only after a synchronize.
    Report the minimum or the median: a busy machine only ever adds time.
    """
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeat):
        _synchronize(device)
        start = clock()
        fn()
        _synchronize(device)
        seconds.append(clock() - start)
    return seconds


@contextlib.contextmanager
def _quiet_stderr():
    """Silence C++ log lines (the CPU profiler prints some) that would land in a notebook."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn, device="cpu"):
    """The most memory fn() holds at any moment beyond what existed before, in bytes.

    On a GPU, PyTorch's allocator keeps this statistic. On the CPU, the profiler records
    every allocation and release; the peak is the largest running total.
    """
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):  # under heavy load the profiler has missed every allocation
        with _quiet_stderr():
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                fn()
            records = prof.profiler.kineto_results.events()
        events = sorted((e.start_ns(), e.nbytes()) for e in records
                        if e.name() == "[memory]" and e.device_type().name == "CPU")
        if events or not any(e.name() != "[memory]" for e in records):
            break  # allocations recorded, or fn ran no operator (so it allocates nothing)
    else:
        raise RuntimeError("peak_memory: the CPU profiler recorded operators but no "
                           "allocation in 3 runs of fn (heavy load can make it miss them): "
                           "run the cell again; a fn that works in place allocates nothing")
    held = peak = 0
    for _, nbytes in events:  # + for an allocation, - for a release, in time order
        held += nbytes
        peak = max(peak, held)
    return peak


def fit_power_law(ns, ys):
    """Fit y = c * n^s by least squares on log y = log c + s log n; return (s, c)."""
    log_n, log_y = np.log(np.asarray(ns, dtype=float)), np.log(np.asarray(ys, dtype=float))
    s, log_c = np.polyfit(log_n, log_y, deg=1)  # slope and intercept of the straight line
    return float(s), float(math.exp(log_c))


def training_step(layer, X, valid_lens=None):
    """A closure that runs one forward and backward pass of a self-attention layer on X."""
    def step():
        layer.zero_grad(set_to_none=True)
        X.grad = None
        layer(X, X, X, valid_lens).sum().backward()
    return step


# -- Counting: operations and memory from the formulas --------------------------------------

def attention_macs(num_steps, num_hiddens):
    """Multiply-adds of self-attention on n tokens: (projections, attention).

    The four d x d projections cost 4 n d^2; the scores Q K^T and the weighted sum of the
    values cost n^2 d each, whatever the number of heads (the heads split d between them).
    """
    n, d = num_steps, num_hiddens
    return 4 * n * d ** 2, 2 * n ** 2 * d


GiB = 2 ** 30
BYTES_PER_VALUE = {"float32": 4, "float16": 2}


def weights_memory(num_steps, num_heads, batch_size=1, dtype="float32"):
    """Bytes of one layer's attention weights: batch * heads * n * n values."""
    return batch_size * num_heads * num_steps ** 2 * BYTES_PER_VALUE[dtype]


def longest_fitting(memory_bytes, num_heads, batch_size=1, dtype="float32"):
    """The longest sequence whose attention weights (one layer) fit in `memory_bytes`."""
    per_position_pair = batch_size * num_heads * BYTES_PER_VALUE[dtype]
    return int(math.isqrt(int(memory_bytes // per_position_pair)))
