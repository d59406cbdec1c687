"""Exercise checkers: `check_x(fn)` passes silently-ish (returns a message) or raises AssertionError.

Every checker is tested against the reference solution and against known-wrong solutions
(`tests/test_checks_*.py`).
"""
from ._core import CheckFailed
from .ch01 import check_softmax, check_topk_attention_pool

__all__ = ["CheckFailed", "check_softmax", "check_topk_attention_pool"]
