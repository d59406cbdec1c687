"""What every checker shares: call the learner's code, and fail with a message they can act on.

A checker raises `AssertionError` saying which input was used, what was expected and what
was seen, and where to look. It never lets a bare traceback from deep inside escape.
"""
import torch


class CheckFailed(AssertionError):
    """A learner's solution is not right yet (an AssertionError, so `assert`-style tools see it)."""


class Passed(str):
    """A checker's success message; shown without quotes at the end of a notebook cell."""

    def __repr__(self):
        return str(self)


def passed(what):
    return Passed(f"{what}: all checks passed.")


def fail(message, hint=None):
    raise CheckFailed(message + (f"\nHint: {hint}" if hint else ""))


def call(fn, *args, name="your function", case="", **kwargs):
    """Call the learner's `fn`; turn a missing function, the stub, or a crash into a clear message."""
    if fn is None:
        fail(f"{name} is None: pass the function itself, e.g. check(my_function), not its result.")
    if not callable(fn):
        fail(f"{name} should be a function (or class), got a {type(fn).__name__}.")
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        fail(f"{name} is not implemented yet: replace the `raise NotImplementedError(...)` line with your code.")
    except CheckFailed:
        raise
    except Exception as error:  # the learner's code crashed: say on what
        raise CheckFailed(f"{name} raised {type(error).__name__}: {error}\n  on {case or 'the test input'}") from error


def expect_tensor(value, shape=None, dtype=None, what="the output", case=""):
    """`value` must be a finite tensor of the given shape and dtype."""
    on = f" on {case}" if case else ""
    if value is None:
        fail(f"{what} is None{on}: did you forget to `return` it?")
    if not isinstance(value, torch.Tensor):
        fail(f"{what} should be a torch.Tensor{on}, got a {type(value).__name__}.")
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(value.shape)}{on}; expected {tuple(shape)}.")
    if dtype is not None and value.dtype != dtype:
        fail(f"{what} has dtype {value.dtype}{on}; expected {dtype}.",
             "keep the input's dtype: avoid creating tensors with a fixed dtype inside your function.")
    if value.is_floating_point() and torch.isnan(value).any():
        rows = torch.isnan(value).nonzero()[:3].tolist()
        fail(f"{what} contains NaN{on} (first positions: {rows}).",
             "NaN usually comes from exp() overflowing, 0/0, or -inf - -inf; see the hint of this exercise.")
    return value


def expect_close(value, expected, what="the output", case="", atol=1e-5, rtol=1e-4, hint=None):
    """`value` must equal `expected` within the tolerance; report the worst entry."""
    expect_tensor(value, expected.shape, what=what, case=case)
    if not torch.allclose(value.to(expected.dtype), expected, atol=atol, rtol=rtol):
        diff = (value.to(expected.dtype) - expected).abs()
        where = tuple(int(i) for i in torch.nonzero(diff == diff.max())[0])
        fail(f"{what} is wrong on {case}: at index {where} expected {expected[where].item():.4g}, "
             f"got {value[where].item():.4g} (largest difference {diff.max().item():.3g}).", hint)
    return value
