"""Device and seed helpers, with the same calls as d2l's (`try_gpu`, `try_all_gpus`)."""
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
