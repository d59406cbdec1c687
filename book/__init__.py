"""Attention & Transformers, an executable course: the code the chapters teach.

Every component a chapter teaches lives here once; the chapter shows it in a visible cell
(a test checks the cell equals this source) and later chapters import it from here.
"""
from .device import cpu, num_gpus, one_cpu_thread, set_seed, try_all_gpus, try_gpu

__version__ = "0.1.0"
__all__ = ["cpu", "num_gpus", "one_cpu_thread", "set_seed", "try_all_gpus", "try_gpu"]
