"""Device and seed helpers, with the same calls as d2l's (`try_gpu`, `try_all_gpus`)."""
import contextlib
import os
import random

import numpy as np
import torch


def cpu():
    """The CPU device."""
    return torch.device("cpu")


def num_gpus():
    """How many CUDA GPUs this machine has."""
    return torch.cuda.device_count()


def try_gpu(i=0):
    """Return GPU `i` if it exists, otherwise the CPU, so the same code runs everywhere."""
    if num_gpus() >= i + 1:
        return torch.device(f"cuda:{i}")
    return cpu()


def try_all_gpus():
    """Return all GPUs, or `[cpu]` if there are none (d2l 1.0.3 returns `[]` there instead)."""
    return [torch.device(f"cuda:{i}") for i in range(num_gpus())] or [cpu()]


def set_seed(seed=0):
    """Seed Python, NumPy and PyTorch (CPU and every GPU) so a notebook's outputs repeat."""
    if not isinstance(seed, int):
        raise TypeError(f"set_seed expects an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    os.environ["PYTHONHASHSEED"] = str(seed)


@contextlib.contextmanager
def one_cpu_thread(device=None):
    """Run a tiny model's training on one CPU thread (restored afterwards).

    Splitting a 32-wide matrix product over threads costs more than it saves, and on a
    busy machine waiting threads can slow training down twentyfold. No effect on a GPU.
    """
    threads = torch.get_num_threads()
    if torch.device(device or "cpu").type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
