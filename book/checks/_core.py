"""What every checker shares: call the learner's code, and fail with a message they can act on.

A checker raises `CheckFailed` (an `AssertionError`) saying which input was used, what was
expected and what was seen, and where to look. A failed check shows as one short block:

* in IPython (JupyterLab, Colab, the terminal) `CheckFailed._render_traceback_` replaces the
  traceback by the message itself;
* in plain `python` a hook prints the learner's own lines of the traceback and the message,
  without the frames inside `book/checks` and without chained exceptions
  ("During handling of the above exception...");
* a checker decorated with `@checker(name)` also re-raises every failure `from None`.

A passed check returns `Passed`, a string shown without quotes: "name: all checks passed."
(in a plain `python` script, where nothing displays a cell's value, it is also printed).

Checkers are pure functions of the learner's code and of seeded data: `@checker` runs the
check with torch's, Python's and NumPy's global random generators seeded (and restores the
learner's states afterwards), and every test tensor is built on the CPU. The global seed,
CHECK_SEED, is one that no checker's own data generator uses: a learner's random draws (dropout,
masking) must not repeat the stream that built the test data, or they would be correlated
with it (round 4 found a right masking rejected that way).
"""
import contextlib
import functools
import math
import os
import random
import sys
import types
import traceback

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_BOOK = os.path.dirname(_HERE)


class CheckFailed(AssertionError):
    """A learner's solution is not right yet (an AssertionError, so `assert`-style tools see it)."""

    def _render_traceback_(self):
        """IPython shows these lines instead of a traceback: only the checker's sentence."""
        return [f"{type(self).__name__}: {line}" if i == 0 else line
                for i, line in enumerate(str(self).splitlines() or [""])]


class Passed(str):
    """A checker's success message; shown without quotes at the end of a notebook cell."""

    def __repr__(self):
        return str(self)

    def _repr_pretty_(self, printer, cycle):  # IPython's display, explicitly
        printer.text(str(self))


def _in_ipython():
    ipython = sys.modules.get("IPython")
    return ipython is not None and ipython.get_ipython() is not None


def passed(what):
    """The one success line of every checker: `what: all checks passed.`"""
    message = Passed(f"{what}: all checks passed.")
    if _float64_failures:  # the checker fails after all (see checker())
        return message
    if not _in_ipython() and not hasattr(sys, "ps1") and not sys.flags.interactive:
        print(message)  # a plain script shows no value: print the line once
    return message


def fail(message, hint=None):
    __tracebackhide__ = True
    raise CheckFailed(message + (f"\nHint: {hint}" if hint else "")) from None


# -- One short block in plain python ----------------------------------------------------------

def _inside_checks(filename):
    return os.path.abspath(filename).startswith(_HERE + os.sep)


def _excepthook(previous):
    def hook(kind, value, tb):
        if not isinstance(value, CheckFailed):
            return previous(kind, value, tb)
        frames = [f for f in traceback.extract_tb(tb) if not _inside_checks(f.filename)]
        text = "".join(traceback.format_list(frames))
        sys.stderr.write(text + "".join(f"{line}\n" for line in value._render_traceback_()))
    hook.book_checks = True
    return hook


if not getattr(sys.excepthook, "book_checks", False):
    sys.excepthook = _excepthook(sys.excepthook)


# -- Seeded, isolated randomness ----------------------------------------------------------

CHECK_SEED = 271828  # the global generators' seed during a check; no test data uses it

@contextlib.contextmanager
def seeded(seed=0, advanced=False):
    """Seed torch's (CPU), Python's and NumPy's global generators; restore them afterwards.
    advanced=True: one draw from each after seeding, so that a function that re-seeds one
    (torch.manual_seed(torch.initial_seed())) changes its state, and `call` can tell."""
    python_state = random.getstate()
    numpy = sys.modules.get("numpy")
    numpy_state = numpy.random.get_state() if numpy is not None else None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        if numpy is not None:
            numpy.random.seed(seed)
        if advanced:
            torch.rand(1), random.random(), numpy is not None and numpy.random.random()
        try:
            yield
        finally:
            random.setstate(python_state)
            if numpy is not None:
                numpy.random.set_state(numpy_state)


class _Failures(list):
    active = False  # True while a check runs
    half_probes = 0  # gradient cases re-run in half precision (_expect_half_gradients)


_float64_failures = _Failures()  # float64-accuracy failures of the running check, told last


def checker(name, random=False):
    """Decorate `check(fn, ...)`: seeded and isolated randomness, one short failure (no chained
    traceback), a checker-side crash turned into a message, and `passed(name)` on success.
    A float64-accuracy failure (expect_float64_accuracy) is reported only once every other
    check has passed, so that a solution with another fault is told that one.
    random=False: the function is deterministic, and every `call` fails if it changed the state
    of torch's, Python's or NumPy's global random generator (a draw, or a seed); random=True
    (random masking, dropout in training) leaves that to the checker (`draws_allowed`)."""
    def decorate(check):
        @functools.wraps(check)
        def run(fn, *args, **kwargs):
            __tracebackhide__ = True
            outer = not getattr(_float64_failures, "active", False)
            try:
                with seeded(CHECK_SEED, advanced=not random), torch.inference_mode(False), \
                        torch.enable_grad(), _results_kept(), _collecting(outer), \
                        draws_allowed(random):
                    result = check(fn, *args, **kwargs)
                    if outer and _float64_failures:
                        fail(*_float64_failures[0])
            except CheckFailed as failure:
                error = CheckFailed(str(failure))
            except Exception as crash:  # noqa: BLE001 - a checker must not crash bare
                error = CheckFailed(
                    f"checking {name} stopped with {type(crash).__name__}: {crash}\n"
                    "This usually means your function returned something of an unexpected "
                    "type, dtype or device. If the result looks right to you, please report "
                    "this message as a bug of the checker.")
            else:
                return result if isinstance(result, Passed) else passed(name)
            raise error from None
        return run
    return decorate


@contextlib.contextmanager
def _collecting(outer):
    """The outermost check collects float64-accuracy failures (a nested one adds to them)."""
    if not outer:
        yield
        return
    _float64_failures.clear()
    _float64_failures.active = True
    _float64_failures.half_probes = 0
    try:
        yield
    finally:
        _float64_failures.active = False
        _float64_failures.clear()


# -- Calling the learner's code -----------------------------------------------------------

def _learner_line(error):
    """Where in the learner's own code `error` was raised: 'line 4 of f: x = y', or ''."""
    frames = traceback.extract_tb(error.__traceback__)[1:]  # [0] is `call` itself
    library = (os.path.dirname(torch.__file__), _BOOK, "<frozen")
    own = [f for f in frames if not f.filename.startswith(library)
           and "site-packages" not in f.filename]
    if not own:
        return ""
    frame = own[-1]
    line = (frame.line or "").strip()
    return f"\n  in {frame.name}, line {frame.lineno}" + (f": {line}" if line else "")


_DTYPE_ERRORS = ("same dtype", "expected scalar type", "did not match", "dtype")


def view_hint(error, what="this input", better=""):
    """The hint for `.view()` on a tensor that is not contiguous in memory (a transpose or a
    slice), or None for any other error. `what` names the tensor and why it is not
    contiguous; `better` is a way that needs no flattening at all."""
    if "view size is not compatible" not in str(error):
        return None
    return (f"{what} is not contiguous in memory, and .view() cannot flatten it without a "
            "copy. Use .reshape(), which copies when it must" + (f", or better, {better}"
                                                                  if better else "") + ".")


def call(fn, *args, name="your function", case="", hint_on_error=None, inplace_hint=None,
         **kwargs):
    """Call the learner's `fn`; turn a missing function, the stub, or a crash into a clear
    message that names the input and the learner's line. `hint_on_error(error)` may return a
    hint for a crash. Every tensor argument is copied before the call and compared after it:
    a changed input fails the check ("changed its input in place", `inplace_hint`), so that
    no expectation is ever computed from a mutated input."""
    __tracebackhide__ = True
    if fn is None:
        fail(f"{name} is None: pass the function itself, e.g. check(my_function), not its result.")
    if not callable(fn):
        fail(f"{name} should be a function (or class), got a {type(fn).__name__}.")
    before = _snapshot(args, kwargs)
    state = _caller_state(args, kwargs)
    generators = None if _DRAWS.allowed else _generator_states()
    try:
        result = fn(*args, **kwargs)
    except CheckFailed:
        raise
    except Exception as error:  # the learner's code crashed: say on what, and where
        if isinstance(error, NotImplementedError) and "not implemented for" not in str(error):
            fail(f"{name} is not implemented yet: replace the `raise NotImplementedError(...)` "
                 "line with your code.")  # (a torch kernel's "not implemented for 'Long'" is
            #                                a crash like any other)
        hint = hint_on_error(error) if hint_on_error is not None else None
        hint = hint or view_hint(error)
        if hint is None and any(words in str(error) for words in _DTYPE_ERRORS):
            hint = ("tensors of two dtypes met: keep the input's dtype throughout (constants "
                    "made with torch.tensor(...) or .float() are float32).")
        failure = (f"{name} raised {type(error).__name__}: {error}\n  on {case or 'the test input'}"
                   f"{_learner_line(error)}", hint)
    else:
        _expect_caller_state_kept(fn, state, name, case, arguments=False)
        if generators is not None:
            _expect_no_draws(generators, name, case)
        _expect_no_inference_tensors(result, name, case)
        expect_unchanged(fn, before, args, kwargs, name=name, case=case, hint=inplace_hint)
        _expect_caller_state_kept(fn, state, name, case)  # after: x.copy_(y) is told in place
        _expect_earlier_results_kept(name, case)
        _remember(result, before, case)
        return result
    _expect_caller_state_kept(fn, state, name, case)
    fail(*failure)


# -- The caller's state: what a function must leave as it found it ---------------------------
# Added after red-team round 13: functions that returned right values and changed what the
# caller owns: `x.requires_grad_()` on an argument, `x.grad = None`, a hook registered on an
# argument (a NaN-zeroing hook hides a NaN gradient of the caller's own later losses), and
# torch.set_default_dtype left changed.

def _hooks(t):
    return sum(len(getattr(t, attr, None) or {})
               for attr in ("_backward_hooks", "_post_accumulate_grad_hooks"))


def _caller_state(args, kwargs):
    return ([get() for _, get, _, _ in _SETTINGS],
            [(key, path, t, t.requires_grad, _grad(t), _copy(_grad(t)), _hooks(t),
              t.retains_grad) for key, path, t in _tensors(args, kwargs)])


# Added after red-team round 14: process-wide switches a function turned and left turned
# (torch.set_grad_enabled(True) as a statement, set_detect_anomaly, set_flush_denormal, ...).
# (words, get, set, what it does to the caller); default dtype first (its own message).
def _flushes_denormals():
    return bool((torch.full((1,), 1e-40) * 1.0).item() == 0.0)  # 1e-40 is subnormal in float32


def _attribute(owner, name):
    return (lambda: getattr(owner, name)), (lambda value: setattr(owner, name, value))


_SETTINGS = [
    ("torch's default dtype", torch.get_default_dtype, torch.set_default_dtype, ""),
    ("autograd's grad mode (torch.set_grad_enabled)", torch.is_grad_enabled,
     torch.set_grad_enabled,
     "every later operation of the caller is recorded by autograd, or none is, whatever the "
     "caller's own torch.no_grad() blocks say"),
    ("anomaly detection (torch.autograd.set_detect_anomaly), as (enabled, check_nan)",
     lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
     lambda value: torch.set_anomaly_enabled(*value),
     "every later backward() of the caller runs slowly and raises where it met a NaN"),
    ("the flushing of subnormal numbers to zero (torch.set_flush_denormal)",
     _flushes_denormals, torch.set_flush_denormal,
     "every later computation of the caller turns numbers below 1.2e-38 into 0"),
    ("deterministic algorithms (torch.use_deterministic_algorithms), as (enabled, "
     "warn_only)", lambda: (torch.are_deterministic_algorithms_enabled(),
                            torch.is_deterministic_algorithms_warn_only_enabled()),
     lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1]),
     "every later operation of the caller without a deterministic kernel raises"),
    ("torch's number of threads (torch.set_num_threads)", torch.get_num_threads,
     torch.set_num_threads, "every later computation of the caller runs on other threads"),
    ("torch's float32 matmul precision (torch.set_float32_matmul_precision)",
     torch.get_float32_matmul_precision, torch.set_float32_matmul_precision,
     "every later float32 matrix product of the caller may be computed with fewer digits"),
    *[(f"torch.backends.{owner}.{attr}", *_attribute(module, attr),
       "every later computation of the caller on a GPU takes other kernels")
      for owner, module, attr in [
          ("cudnn", torch.backends.cudnn, "enabled"),
          ("cudnn", torch.backends.cudnn, "benchmark"),
          ("cudnn", torch.backends.cudnn, "deterministic"),
          ("cudnn", torch.backends.cudnn, "allow_tf32"),
          ("cuda.matmul", torch.backends.cuda.matmul, "allow_tf32"),
          ("cuda.matmul", torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
          ("cuda.matmul", torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
      ]],
]
def _global_module_hooks():
    """torch.nn's global module hooks (register_module_forward_hook and the like): their
    keys, and a setter that removes the ones added since."""
    from torch.nn.modules import module
    hooks = [getattr(module, n) for n in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
        "_global_backward_pre_hooks", "_global_module_registration_hooks",
        "_global_parameter_registration_hooks", "_global_buffer_registration_hooks")
        if isinstance(getattr(module, n, None), dict)]

    def get():
        return tuple(tuple(h) for h in hooks)

    def put(keys):
        for h, kept in zip(hooks, keys):
            for key in [k for k in h if k not in kept]:
                del h[key]
    return get, put


_SETTINGS.append(("torch.nn's global module hooks (register_module_forward_hook and the "
                  "like; their keys)", *_global_module_hooks(),
                  "every module the caller runs later calls the hook"))
if hasattr(torch, "get_default_device"):
    _SETTINGS.append(("torch's default device (torch.set_default_device)",
                      torch.get_default_device, torch.set_default_device,
                      "every later torch.zeros or torch.randn of the caller lands there"))


# -- The random generators of a deterministic function --------------------------------------
# Round 13 found deterministic functions that drew from torch's global generator (checked in
# expect_conditions then); round 14 found draws from NumPy's and Python's generators, and a
# re-seed (torch.manual_seed(torch.initial_seed())) that a freshly seeded generator hid.
# Every `call` inside a deterministic check (`checker(name)`, `draws_allowed(False)`) now
# compares the three generators' states before and after.

_DRAWS = types.SimpleNamespace(allowed=True)  # outside a check nothing is judged


@contextlib.contextmanager
def draws_allowed(allowed):
    """Within this block, `call` lets the learner's function draw from (or seed) the global
    random generators (allowed=True: random masking, dropout in training), or fails it."""
    before, _DRAWS.allowed = _DRAWS.allowed, allowed
    try:
        yield
    finally:
        _DRAWS.allowed = before


def expect_repeatable(fn, *args, name, case, seed=14):
    """For a random function (masking, dropout; its checker is `checker(name, random=True)`):
    called twice from the same seed of the global generators, its results and the random
    numbers the caller draws next must repeat (added after red-team round 14: right masks,
    then torch.seed(), random.seed() or np.random.seed() with no argument, which re-seed
    from the clock, so that `book.set_seed` no longer makes the caller's run repeat)."""
    __tracebackhide__ = True
    numpy = sys.modules.get("numpy")
    runs = []
    for _ in range(2):
        with seeded(seed), draws_allowed(True):
            result = call(fn, *args, name=name, case=case)
            following = (torch.rand(3), random.random(),
                         numpy.random.random() if numpy is not None else None)
        runs.append((_as_list(result) if isinstance(result, (tuple, list, torch.Tensor))
                     else [result], following))
    (first, after1), (second, after2) = runs
    if not all(_same(a, b) if isinstance(a, torch.Tensor) else a == b
               for a, b in zip(first, second)):
        fail(f"{name} gave two different results on {case}, each called right after the "
             "same seed of the global random generators (torch.manual_seed, random.seed, "
             "np.random.seed): a seeded run does not repeat.",
             "draw from torch's global generator (torch.rand, torch.randint, dropout, ...), "
             "not from a generator of your own seeded from the clock or created at import.")
    which = [words for words, same in [
        ("torch's global random generator", torch.equal(after1[0], after2[0])),
        ("Python's random module", after1[1] == after2[1]),
        ("NumPy's global random generator", after1[2] == after2[2])] if not same]
    if which:
        fail(f"after {name} on {case}, the random numbers the caller draws next from "
             f"{' and '.join(which)} are not the same in two runs from the same seed: it "
             "re-seeded that generator from the clock (torch.seed(), random.seed() or "
             "np.random.seed() with no argument), so that a seeded program no longer repeats.",
             "draw what you need and leave the generators' seeds alone: no torch.seed(), "
             "random.seed() or np.random.seed() inside the function.")


def _generator_states():
    numpy = sys.modules.get("numpy")
    return (torch.get_rng_state(), random.getstate(),
            numpy.random.get_state() if numpy is not None else None)


def _same_numpy_state(a, b):
    return a is None or b is None or (a[0] == b[0] and a[2:] == b[2:]
                                      and bool((a[1] == b[1]).all()))


def _expect_no_draws(before, name, case):
    __tracebackhide__ = True
    after = _generator_states()
    which = [words for words, same in [
        ("torch's global random generator", torch.equal(before[0], after[0])),
        ("Python's random module", before[1] == after[1]),
        ("NumPy's global random generator", _same_numpy_state(before[2], after[2]))]
        if not same]
    if which:
        fail(f"{name} drew from {' and '.join(which)} (or seeded it) on {case or 'the test input'} "
             "(torch.rand, randn, randperm, dropout, random.random, np.random, manual_seed, "
             "...): the result must not depend on chance, and a draw or a seed changes every "
             "later random number of the caller, so that a seeded run no longer repeats.",
             "use no randomness here: no random order, jitter or dropout, and no "
             "torch.manual_seed, random.seed or np.random.seed either (a function leaves the "
             "caller's random generators as it found them).")


def _copy(t):
    return None if t is None else t.detach().clone()


def _grad(t):
    return t.grad if t.is_leaf else None  # (.grad of a non-leaf warns, and is None)


CALLER_STATE_HINT = (
    "a function leaves what it was given as it found it: compute on new tensors (y = x * 1, "
    "x.detach(), torch.where) instead of changing an argument's requires_grad, .grad, hooks "
    "or retain_grad, pass dtypes explicitly (torch.zeros(..., dtype=x.dtype)) instead of "
    "torch.set_default_dtype, and leave torch's global switches alone (use `with "
    "torch.no_grad():` blocks, which put the mode back, not torch.set_grad_enabled(False)).")


def _expect_caller_state_kept(fn, state, name, case, arguments=True):
    __tracebackhide__ = True
    settings, tensors = state
    changed = [(setting, was, setting[1]()) for setting, was in zip(_SETTINGS, settings)]
    changed = [(setting, was, now) for setting, was, now in changed if now != was]
    for (_, _, put, _), was, _ in changed:
        put(was)  # put every one back, so that nothing else is affected
    for (words, _, _, effect), was, now in changed[:1]:
        if words == "torch's default dtype":
            fail(f"{name} changed torch's default dtype from {was} to {now} (set_default_dtype) "
                 f"on {case or 'the test input'} and left it so: every later torch.zeros or "
                 "torch.randn of the caller comes out in the wrong dtype.", CALLER_STATE_HINT)
        fail(f"{name} changed {words} from {was} to {now} on {case or 'the test input'} and "
             f"left it so: {effect}.", CALLER_STATE_HINT)
    for key, path, t, requires_grad, grad, grad_copy, hooks, retains in \
            tensors if arguments else ():
        label = f"`{_argument_name(fn, key)}{path}`"
        what = (f"the requires_grad of the argument {label} from {requires_grad} to "
                f"{t.requires_grad}" if t.requires_grad != requires_grad else
                f"the .grad of the argument {label} (the gradient the caller had accumulated)"
                if _grad(t) is not grad or (grad is not None and not _same(grad, grad_copy))
                else f"the hooks of the argument {label} (it had {hooks}, now {_hooks(t)}: "
                "register_hook)" if _hooks(t) != hooks else
                f"the argument {label}, a non-leaf tensor, to keep its .grad (retain_grad(): "
                "the caller's tensor then holds a gradient after every backward)"
                if t.retains_grad != retains else None)
        if what:
            fail(f"{name} changed {what} on {case or 'the test input'}.", CALLER_STATE_HINT)


def _expect_no_inference_tensors(result, name, case):
    """Added after red-team round 13: a function decorated with @torch.inference_mode()
    returns right values that training cannot use (backward refuses inference tensors).
    Round 14: no tensor subclass either (one can answer every comparison: a mask whose
    __eq__ or __torch_function__ says "equal")."""
    __tracebackhide__ = True
    for t in result if isinstance(result, (tuple, list)) else [result]:
        if isinstance(t, torch.Tensor) and type(t) not in (torch.Tensor, torch.nn.Parameter):
            fail(f"{name} returned {_a(type(t).__name__)}, a subclass of torch.Tensor, on "
                 f"{case or 'the test input'}; expected a plain torch.Tensor.",
                 "return an ordinary tensor (torch.zeros, torch.tril, x * 1, ...): a "
                 "subclass changes what every operation on it does.")
    if torch.is_inference_mode_enabled():
        return
    outputs = result if isinstance(result, (tuple, list)) else [result]
    if any(isinstance(t, torch.Tensor) and t.is_inference() for t in outputs):
        fail(f"{name} returned an inference tensor on {case or 'the test input'} (computed "
             "under torch.inference_mode()), outside inference mode: training cannot use it "
             "(backward() refuses to save an inference tensor).",
             "do not decorate the function with @torch.inference_mode() or turn it on "
             "inside: the caller decides whether autograd records (torch.no_grad() or "
             "inference_mode around the call).")


# -- Results a later call must not change -------------------------------------------------
# A function that keeps an output buffer between calls (`return buf.copy_(y)`), or returns a
# view of a tensor it caches, returns right values, and then overwrites them at its next call:
# `a = f(x1); b = f(x2)` changes `a`. Within one check, every result `call` returns is copied,
# and after each later call compared with its copy.

_KEPT = []       # a stack: one list of (tensor, copy, case) per running check
_KEPT_NUMEL = 2_000_000  # copies kept per check, in numbers (small cases show the fault)


@contextlib.contextmanager
def _results_kept():
    _KEPT.append([])
    try:
        yield
    finally:
        _KEPT.pop()


def _remember(result, before, case):
    if not _KEPT:
        return
    kept = _KEPT[-1]
    inputs = {_storage_ptr(t) for _, _, t, _ in before}
    used = sum(copy.numel() for _, copy, _ in kept)
    for _, _, tensor in _tensors((result,), {}):
        pointer = _storage_ptr(tensor)
        if pointer is None or pointer in inputs or used + tensor.numel() > _KEPT_NUMEL:
            continue  # a view of an input (the in-place check covers those), or too large
        kept.append((tensor, tensor.detach().clone(), case))
        used += tensor.numel()


def _storage_ptr(tensor):
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage
        return None


def _expect_earlier_results_kept(name, case):
    __tracebackhide__ = True
    for tensor, copy, earlier in _KEPT[-1] if _KEPT else ():
        if not _same(tensor.detach(), copy):
            fail(f"{name} changed what it returned earlier: its result on "
                 f"{earlier or 'an earlier input'} is different after the call on "
                 f"{case or 'the next input'}. A caller keeps every result it gets.",
                 "return a new tensor from every call: do not keep an output buffer between "
                 "calls (buffer.copy_(y)), and do not return a view of a tensor you keep "
                 "and change later.")


def _tensors(args, kwargs):
    """(position or keyword, path, tensor) for every tensor argument, also inside lists,
    tuples and dicts. (A loop, not a recursive closure: a closure that calls itself is a
    reference cycle, which would keep the arguments alive until the garbage collector runs.)"""
    found = []
    stack = [(k, "", v) for k, v in reversed(list(kwargs.items()))]
    stack += [(i, "", v) for i, v in reversed(list(enumerate(args)))]
    while stack:
        key, path, value = stack.pop()
        if isinstance(value, torch.Tensor):
            found.append((key, path, value))
        elif isinstance(value, (list, tuple)):
            stack += [(key, f"{path}[{i}]", item)
                      for i, item in reversed(list(enumerate(value)))]
        elif isinstance(value, dict):
            stack += [(key, f"{path}[{k!r}]", item)
                      for k, item in reversed(list(value.items()))]
    return found


def _snapshot(args, kwargs):
    """Copies of every tensor argument, taken before the learner's code runs."""
    return [(key, path, t, t.detach().clone()) for key, path, t in _tensors(args, kwargs)]


def _same(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _argument_name(fn, key):
    if isinstance(key, str):
        return key
    import inspect
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn  # a module: its forward
    try:
        names = [p.name for p in inspect.signature(target).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    return names[key] if key < len(names) else f"number {key + 1} (counting from 1)"


INPLACE_ARGUMENT_HINT = (
    "build new tensors (x = x / s, x.masked_fill(...), torch.cat(...)) instead of changing "
    "an argument in place (x /= s, x += y, x.zero_(), masked_fill_, x[...] = ...): the "
    "caller still needs its tensor, and a changed input makes later results wrong.")


def expect_unchanged(fn, before, args=(), kwargs=None, *, name="your function", case="",
                     hint=None):
    """Fail if a tensor argument differs from its copy in `before` (from `_snapshot`): the
    learner's code changed its input in place. Shape, dtype and values are compared."""
    __tracebackhide__ = True
    for key, path, tensor, copy in before:
        if tensor.shape != copy.shape or tensor.dtype != copy.dtype or \
                not _same(tensor.detach(), copy):
            label = _argument_name(fn, key) + path
            what = ""
            if tensor.shape == copy.shape and tensor.dtype == copy.dtype:
                where, want, got, diff = worst(tensor, copy)
                want, got = _shown(want, got)
                what = (f": at index {where} it held {want} before the call and {got} after "
                        f"(changed by {diff:.3g})")
            fail(f"{name} changed its argument `{label}` in place on "
                 f"{case or 'the test input'}{what}.", hint or INPLACE_ARGUMENT_HINT)


@contextlib.contextmanager
def forbidden(calls, why):
    """Within the block, calling any of `calls` ((owner, attribute name) pairs, or triples
    with the name to show) fails the check with `why` (e.g. 'the exercise asks you not to use
    torch.softmax')."""
    saved, codes = [], []
    for owner, attribute, *display in calls:
        own, original = attribute in vars(owner), vars(owner).get(attribute)
        saved.append((owner, attribute, own, original))

        owner_name = owner.__name__ if isinstance(owner, type(contextlib)) else \
            f"{owner.__module__}.{owner.__name__}"

        name = display[0] if display else f"{owner_name}.{attribute}"

        def refuse(*args, _name=name, **kwargs):
            __tracebackhide__ = True
            fail(f"your function calls {_name}: {why}")
        setattr(owner, attribute, refuse)
        if isinstance(original, types.FunctionType) and original.__closure__ is None \
                and original.__module__.startswith("book."):
            # A name bound before the check (from book.attention import masked_softmax)
            # still points at the course's function: swap its code for the refusal too.
            codes.append((original, original.__code__))
            original.__code__ = _refusal_code(name, why)
    try:
        yield
    finally:
        for function, code in reversed(codes):
            function.__code__ = code
        for owner, attribute, own, value in reversed(saved):
            if own:
                setattr(owner, attribute, value)
            else:
                delattr(owner, attribute)


def _refusal_code(name, why):
    """The code object of a function that fails the check with 'your function calls name'."""
    namespace = {}
    exec("def refuse(*args, **kwargs):\n"
         "    __tracebackhide__ = True\n"
         "    from book.checks._core import fail\n"
         f"    fail({f'your function calls {name}: {why}'!r})\n", namespace)
    return namespace["refuse"].__code__


# -- Looking at the result ----------------------------------------------------------------

def _a(word):
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _on(case):
    return f" on {case}" if case else ""


def expect_new_tensor(out, inputs, case, hint):
    """Fail if `out` shares memory with one of `inputs`, [(label, name, tensor)]: a view of an
    input (x.expand(...), x[...] or x itself) lets a caller's out.mul_(2) change that input.
    Opt-in per checker: some exercises (transpose_output) may return a view."""
    __tracebackhide__ = True
    where = _storage_ptr(out)
    for label, name, tensor in inputs:
        if where is not None and where == _storage_ptr(tensor):
            fail(f"the output shares memory with {label} on {case}: it is a view of {name} "
                 f"({name}.expand(...), {name}[...] or {name} itself), not a new tensor, so a "
                 f"caller that changes the output in place (out.mul_(2)) changes its {name} "
                 "too.", hint)


def expect_tensor(value, shape=None, dtype=None, what="the output", case="", hint=None,
                  nan_hint=None, device="cpu"):
    """`value` must be a NaN-free tensor of the given shape and dtype, on `device` (the
    checkers build every input on the CPU); `hint` for a wrong type or shape, `nan_hint`
    for NaN."""
    __tracebackhide__ = True
    on = _on(case)
    if value is None:
        fail(f"{what} is None{on}: did you forget to `return` it?")
    if not isinstance(value, torch.Tensor):
        kind = type(value).__name__
        fail(f"{what} should be a torch.Tensor{on}, got {_a(kind)}.",
             "convert with torch.as_tensor, or better, compute with torch from the start "
             "(a NumPy or Python detour also cuts the gradient)." if kind in
             ("ndarray", "list", "float", "int") else hint)
    if device is not None and value.device.type != torch.device(device).type:
        fail(f"{what} is on {value.device}{on}, while the inputs are on {device}.",
             "keep the inputs' device: create new tensors with device=input.device (or "
             "torch.zeros_like and friends) and do not move results with .cuda() or .to().")
    if value.layout != torch.strided:
        fail(f"{what} is a {str(value.layout).replace('torch.', '')} tensor{on}; expected an "
             "ordinary (dense) tensor.", "return the dense tensor itself (no .to_sparse()).")
    if shape is not None and tuple(value.shape) != tuple(shape):
        fail(f"{what} has shape {tuple(value.shape)}{on}; expected {tuple(shape)}.", hint)
    if dtype is not None and value.dtype != dtype:
        fail(f"{what} has dtype {value.dtype}{on}; expected {dtype}, the dtype of the input.",
             "keep the input's dtype: if you compute in another dtype, cast the result back "
             "with .to(input.dtype), and create constants with dtype=input.dtype. Compute "
             "in float32 only for float16 or bfloat16 inputs: float64 stays float64.")
    if value.is_floating_point() and torch.isnan(value).any():
        rows = torch.isnan(value).nonzero()[:3].tolist()
        fail(f"{what} contains NaN{on} (first positions: {rows}).",
             nan_hint or "NaN usually comes from exp() overflowing, 0/0, or -inf - (-inf); "
             "see the hint of this exercise.")
    return value


def _index(flat, shape):
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) \
        if len(shape) else ()


def worst(value, expected):
    """(index, expected value, seen value, largest difference) of the worst entry; NaN first."""
    a = value.detach().to("cpu", torch.float64)
    b = expected.detach().to("cpu", torch.float64)
    diff = (a - b).abs()
    diff = torch.where(torch.isnan(diff) & ~(torch.isnan(a) & torch.isnan(b)),
                       torch.full_like(diff, math.inf), diff.nan_to_num(0.0))
    flat = int(diff.flatten().argmax()) if diff.numel() else 0
    where = _index(flat, a.shape)
    return where, b[where].item(), a[where].item(), diff[where].item()


def _shown(want, got):
    """`want` and `got` with the fewest significant digits (4 to 12) that tell them apart:
    never "expected -1.591, got -1.591"."""
    for digits in range(4, 13):
        a, b = f"{want:.{digits}g}", f"{got:.{digits}g}"
        if a != b:
            return a, b
    return f"{want:.12g}", f"{got:.12g}"


def is_close(value, expected, atol=1e-5, rtol=1e-4):
    """Elementwise closeness computed in float64 (any dtypes); NaN only matches NaN."""
    a = value.detach().to("cpu", torch.float64)
    b = expected.detach().to("cpu", torch.float64)
    return a.shape == b.shape and bool(torch.isclose(a, b, atol=atol, rtol=rtol,
                                                     equal_nan=True).all())


FLOAT64_TOL = 1e-10
FLOAT64_HINT = (
    "a float64 input asks for float64 accuracy: compute in the input's dtype, and go up to "
    "float32 only from float16 or bfloat16, e.g. dtype = torch.promote_types(x.dtype, "
    "torch.float32), compute with x.to(dtype), and cast the result back to x.dtype. "
    "Constants too: torch.tensor(d) is float32; use math.sqrt(d) (a Python float) or "
    "dtype=x.dtype.")


def expect_float64_accuracy(value, expected, what="the output", case=""):
    """A float64 `value` must be within FLOAT64_TOL of the float64 `expected` (computing in
    float32 and casting back is about 1e-8 off); no-op for other dtypes. Inside a checker the
    failure waits until every other check has passed (see checker())."""
    __tracebackhide__ = True
    if value.dtype != torch.float64 or is_close(value, expected, FLOAT64_TOL, FLOAT64_TOL):
        return value
    where, want, got, diff = worst(value, expected)
    failure = (f"{what} is {diff:.2g} from the float64 reference{_on(case)} (at index {where} "
               f"expected {want:.12g}, got {got:.12g}): more than float64's rounding (a "
               f"computation in float64 is within {FLOAT64_TOL:g}; one step in float32 costs "
               "about 1e-8).", FLOAT64_HINT)
    if not _float64_failures.active:
        fail(*failure)
    _float64_failures.append(failure)  # told once every other check has passed
    return value


def expect_close(value, expected, what="the output", case="", atol=1e-5, rtol=1e-4, hint=None):
    """`value` must equal `expected` within the tolerance; report the worst entry. A float64
    `value` must also have float64 accuracy (expect_float64_accuracy)."""
    __tracebackhide__ = True
    expect_tensor(value, expected.shape, what=what, case=case)
    if not is_close(value, expected, atol, rtol):
        where, want, got, diff = worst(value, expected)
        want, got = _shown(want, got)
        fail(f"{what} is wrong{_on(case)}: at index {where} expected {want}, "
             f"got {got} (largest difference {diff:.3g}).", hint)
    expect_float64_accuracy(value, expected, what, case)
    return value


# -- Gradients ----------------------------------------------------------------------------

DETACHED_HINT = ("keep every step in PyTorch with autograd on: no torch.no_grad(), .detach(), "
                 ".data, NumPy or .item()/.tolist() round trips, and no torch.tensor(...) "
                 "rebuilt from values. Your function is used inside models that are trained, "
                 "so gradients must flow through it.")
STALE_HINT = ("one of your outputs comes from an earlier computation (a cached or stored "
              "tensor, such as a module's attention_weights, or a result kept from an "
              "earlier call): compute every output in this call.")
INPLACE_HINT = ("an in-place operation (exp_(), /=, masked_fill_, x[...] = ...) overwrote a "
                "tensor that autograd saved for the backward pass: build new tensors instead.")


def _as_list(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def cotangents(tensors, seed=0):
    """Seeded weights in [-1, 1] for a scalar loss sum(output * weight)."""
    g = torch.Generator().manual_seed(seed)
    return [2 * torch.rand(t.shape, generator=g, dtype=torch.float64) - 1 for t in tensors]


def expect_gradients(fn, reference, inputs, *, name, case, extra=(), params=(),
                     reference_dtype=torch.float64, outputs=None, atol=1e-4, rtol=1e-3,
                     nan_hint=None, wrong_hint=None, describe=None, float64_accuracy=True):
    """Backpropagate a seeded loss through `fn(*inputs, *extra)` and compare the gradients
    with those of `reference(*inputs, *extra)`.

    inputs: [(label, tensor)], the differentiable arguments (leaves are made here);
    params: [(label, parameter)] of a module both functions use (gradients compared too);
    outputs: picks the differentiable tensors from a result (default: the tensor, or every
    tensor of a tuple); reference_dtype: the reference runs in float64 unless None;
    describe(label, index) -> words for an entry (e.g. 'a row with no valid key');
    float64_accuracy=False: float64 inputs are judged by atol and rtol only, where a ruling
    allows a float64 input a float32 step (RoPE's angles).
    """
    __tracebackhide__ = True
    pick = outputs or _as_list
    ref_leaves = [t.detach().clone().to(reference_dtype or t.dtype).requires_grad_(True)
                  for _, t in inputs]
    ref_out = pick(reference(*ref_leaves, *extra))
    weights = cotangents(ref_out)
    ref_loss = sum((o.double() * w).sum() for o, w in zip(ref_out, weights))
    wrt = ref_leaves + [p for _, p in params]
    ref_grads = torch.autograd.grad(ref_loss, wrt, allow_unused=True)

    leaves = [t.detach().clone().requires_grad_(True) for _, t in inputs]
    result = call(fn, *leaves, *extra, name=name, case=case)
    out = pick(result) if isinstance(result, (tuple, list)) or outputs else [result]
    if len(out) != len(ref_out):
        fail(f"{name} returned {len(out)} tensor(s) on {case}; expected {len(ref_out)}.")
    for o, r in zip(out, ref_out):
        expect_tensor(o, r.shape, what=f"the output of {name}", case=case)
    if not any(o.requires_grad for o in out):
        fail(f"no gradient can flow back through {name} on {case}: its output has "
             "requires_grad=False although the inputs require grad.", DETACHED_HINT)
    loss = sum((o.double() * w).sum() for o, w in zip(out, weights) if o.requires_grad)
    try:
        grads = torch.autograd.grad(loss, leaves + [p for _, p in params], allow_unused=True)
    except RuntimeError as error:
        fail(f"backward() through {name} failed on {case}: {error}",
             STALE_HINT if "a second time" in str(error) else INPLACE_HINT)
    labels = [label for label, _ in inputs] + [label for label, _ in params]
    for label, grad, ref in zip(labels, grads, ref_grads):
        ref = torch.zeros(()) if ref is None else ref
        if grad is None:
            if (ref != 0).any():
                fail(f"no gradient reaches {label} through {name} on {case}, while the "
                     "reference's gradient there is not zero.", DETACHED_HINT)
            continue
        bad = ~torch.isfinite(grad)
        if bad.any():
            where = tuple(int(i) for i in bad.nonzero()[0])
            about = describe(label, where) if describe else ""
            about = f" ({about})" if about else ""
            fail(f"the gradient with respect to {label} contains NaN or inf on {case}: "
                 f"{int(bad.sum())} entries, the first at index {where}{about}, where the "
                 f"right gradient is {ref.broadcast_to(grad.shape)[where].item():.4g}. The "
                 "forward values are fine; the backward pass is not.",
                 nan_hint or "a NaN hidden in the forward pass (0/0 or -inf - (-inf), later "
                 "replaced with nan_to_num or torch.where) still flows through the backward: "
                 "avoid creating it at all.")
        if not is_close(grad, ref.broadcast_to(grad.shape), atol, rtol):
            where, want, got, diff = worst(grad, ref.broadcast_to(grad.shape))
            want, got = _shown(want, got)
            about = describe(label, where) if describe else ""
            about = f" ({about})" if about else ""
            fail(f"the gradient with respect to {label} is wrong on {case}: at index "
                 f"{where}{about} expected {want}, got {got} (largest difference "
                 f"{diff:.3g}). The forward values are right, so part of the computation is "
                 "hidden from autograd or computed differently in the backward.",
                 wrong_hint or DETACHED_HINT)
        if ref.dtype == torch.float64 and float64_accuracy:  # float64 gradients (told last)
            expect_float64_accuracy(grad, ref.broadcast_to(grad.shape),
                                    what=f"the gradient with respect to {label}", case=case)
    if not params:
        _expect_half_gradients(fn, inputs, extra, pick, outputs, name, case,
                               [label for label, grad in zip(labels, grads) if grad is not None])
    return result


_HALF_PROBES = 3  # float32/float64 gradient cases per check that are re-run in half precision


def _expect_half_gradients(fn, inputs, extra, pick, outputs, name, case, reached):
    """Run a gradient case again in float16 and bfloat16: gradients must still flow (a
    .detach(), no_grad() or NumPy path taken only for half-precision inputs passes every
    float32 case). Only whether gradients flow is judged here, not their values; a call that
    raises is left to the checker's own half-precision cases. Told last, like float64
    accuracy, so that a checker's own messages come first."""
    if (not _float64_failures.active or _float64_failures.half_probes >= _HALF_PROBES
            or any(t.dtype in (torch.float16, torch.bfloat16) for _, t in inputs)
            or sum(t.numel() for _, t in inputs) > 100_000):
        return
    _float64_failures.half_probes += 1
    for dtype in (torch.float16, torch.bfloat16):
        leaves = [t.detach().to(dtype).requires_grad_(True) for _, t in inputs]
        try:
            with torch.random.fork_rng(devices=[]):
                result = fn(*leaves, *extra)
                out = pick(result) if isinstance(result, (tuple, list)) or outputs else [result]
                out = [o for o in out if isinstance(o, torch.Tensor) and o.is_floating_point()]
                if not out:
                    return
                flowing = [o for o in out if o.requires_grad]
                grads = (torch.autograd.grad(sum(o.float().sum() for o in flowing), leaves,
                                             allow_unused=True) if flowing else [])
        except Exception:  # noqa: BLE001 - refused or crashed: the checker's own cases judge
            return
        where = f"{case} with the inputs cast to {str(dtype)[6:]}"
        if not flowing:
            failure = (f"no gradient can flow back through {name} on {where}: its output "
                       "has requires_grad=False, although the inputs require grad (in "
                       "float32 they get gradients).")
        else:
            lost = [label for (label, _), grad in zip(inputs, grads)
                    if grad is None and label in reached]
            if not lost:
                continue
            failure = (f"no gradient reaches {lost[0]} through {name} on {where}, while in "
                       "float32 one does.")
        _float64_failures.append(
            (failure, "a path taken only for float16/bfloat16 inputs leaves autograd "
                      "(.detach(), torch.no_grad(), .data, NumPy or a tensor rebuilt from "
                      "values). Mixed-precision training runs exactly these dtypes: keep "
                      "every step in PyTorch operations on the inputs."))
        return


# -- The condition matrix (issue 12, after red-team round 11) --------------------------------
# Rounds 6 to 11 kept finding the same input conditions missing, one checker at a time: one
# key, a non-contiguous or expanded argument, float64 kept exact, float16/bfloat16 forward
# and backward, a second call with other values of the same shapes, scores far beyond
# float16's range. `expect_conditions` runs a checker's own small cases under every such
# condition against the checker's reference, values and gradients, so that no checker can
# miss one again.

class Condition:
    """How one case is varied: `dtype` casts the floating tensor arguments (None keeps
    them), `change(args)` then maps the arguments to new ones with autograd-friendly
    operations (or returns None where it does not apply), and `hint` says what to fix."""

    def __init__(self, label, dtype=None, change=None, hint=None, gradients=True,
                 no_grad=False, same_tensors=False, inference=False, only=None):
        self.label, self.dtype, self.change, self.hint = label, dtype, change, hint
        self.gradients = gradients  # False: compare values only under this condition
        self.no_grad = no_grad  # True: plain arguments, the call inside torch.no_grad()
        self.inference = inference  # True: plain arguments, inside torch.inference_mode()
        self.only = only  # positions: only those arguments require grad (the rest constants)
        self.same_tensors = same_tensors  # True: a first call, then new values written
        #                                   into the same tensors, then the judged call

    def but(self, **changes):
        """A copy of this condition with some fields changed: FLOAT64.but(hint=...)."""
        fields = dict(vars(self))
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"Condition has no field {sorted(unknown)}: {sorted(fields)}")
        return Condition(**{**fields, **changes})


def _map_tensors(args, function, which=None):
    """args with function(tensor) applied to each tensor argument (at positions `which`)."""
    return tuple(function(a) if isinstance(a, torch.Tensor) and (which is None or i in which)
                 else a for i, a in enumerate(args))


def _strided(t):
    """The same values, not contiguous in memory (every other element of a wider tensor)."""
    return torch.stack([t, t], dim=-1)[..., 0] if t.numel() > 1 else t


def _expanded(t):
    """Entry 0 of the first axis, repeated along it with stride 0 (x[:1].expand_as(x))."""
    return t[:1].expand_as(t) if t.dim() and t.shape[0] > 1 else t


def _other_values(t):
    """Other values of the same shape and dtype (the elements moved by one place)."""
    return t.flatten().roll(1).reshape(t.shape) if t.numel() > 1 else t


PLAIN = Condition("as given")
NONCONTIGUOUS = Condition(
    "every argument non-contiguous (the same values)",
    change=lambda a: _map_tensors(a, _strided),
    hint="a tensor that is not contiguous in memory (a slice or a transpose of another) must "
         "give the same result: use .reshape() (not .view()), index by shape and never by "
         "memory layout (no .storage(), .data_ptr() or as_strided).")
EXPANDED = Condition(
    "every argument expanded along its first axis (x[:1].expand_as(x), stride 0)",
    change=lambda a: _map_tensors(a, _expanded),
    hint="an expanded tensor shares one memory location between its entries: do not write "
         "into an argument (in place), and do not rely on its strides.")
FLOAT64 = Condition(  # times 1 + 2^-30: digits that a float32 round trip loses
    "float64 arguments", torch.float64, hint=FLOAT64_HINT,
    change=lambda a: _map_tensors(a, lambda t: t * (1 + 2 ** -30) if t.is_floating_point()
                                  else t))
FLOAT16 = Condition(
    "float16 arguments", torch.float16,
    hint="float16 holds numbers up to 65504 with about 3 significant digits: subtract a "
         "maximum before exp(), or compute in float32 (x.float()) and cast the result back "
         "to the input's dtype. Keep every step differentiable in this dtype too.")
BFLOAT16 = Condition(
    "bfloat16 arguments", torch.bfloat16,
    hint="bfloat16 has float32's range but only about 2 significant digits: compute in "
         "float32 (x.float()) and cast the result back to the input's dtype, and do not go "
         "through float16 (which overflows at 65504). Keep every step differentiable.")
# Added after red-team round 12: float16 computed through bfloat16 ("wider range") rounds
# 100.25 and 99.75 to one number (bfloat16 keeps 8 bits: 0.5 apart near 100), so the
# weights (0.62, 0.38) come out (0.5, 0.5), far beyond 32 float16 eps. For a case of close
# scores near 100 (ch01's softmax and top-k, ch03, a1).
# Values only: with keys near 100, a right float16 log-sum-exp's gradient with respect to
# the queries (a sum of weight errors times keys near 100) errs by 0.13 (measured).
FLOAT16_NOT_BFLOAT16 = FLOAT16.but(
    gradients=False,
    hint="float16 keeps 11 bits (about 3 digits), bfloat16 only 8: compute a float16 input "
         "in float16 or in float32 (x.float(), then cast back), never through bfloat16, "
         "which rounds scores near 100 to steps of 0.5. Subtract each row's maximum before "
         "exp().")
REPEAT = Condition(
    "a second call, with other values of the same shapes",
    change=lambda a: _map_tensors(a, _other_values),
    hint="compute everything from this call's arguments: nothing may be kept between calls "
         "(a result, a buffer or a table keyed on the shapes, the first call's dtype or "
         "values).")


def expanded(which):
    """EXPANDED for the arguments at positions `which` only."""
    names = ", ".join(str(i + 1) for i in which)
    return Condition(f"arguments {names} expanded along their first axis (x[:1].expand_as(x), "
                     "stride 0)",
                     change=lambda a: _map_tensors(a, _expanded, which), hint=EXPANDED.hint)


NO_GRAD = Condition(
    "under torch.no_grad() (inference), with other values of the same shapes",
    change=lambda a: _map_tensors(a, _other_values), no_grad=True,
    hint="inference (torch.no_grad(), arguments without requires_grad) must give what "
         "training gives: no path of its own that writes into an argument, reuses a stored "
         "result or buffer, or skips a step.")
# Added after red-team round 13: a path of its own under torch.inference_mode() (which
# no_grad does not take: torch.is_inference_mode_enabled()), bfloat16 there, say.
INFERENCE = Condition(
    "under torch.inference_mode(), with other values of the same shapes",
    change=lambda a: _map_tensors(a, lambda t: t.flatten().roll(2).reshape(t.shape)
                                  if t.numel() > 2 else t), inference=True,
    hint="inference (torch.inference_mode(), as serving code runs) must give what training "
         "gives: no path of its own that computes in another dtype, reuses a stored result "
         "or skips a step.")
PARTIAL_GRAD_HINT = (
    "a model often trains only some inputs (frozen weights, a fixed query): the gradient "
    "must reach every argument that requires grad, whichever the others do. Do not decide "
    "whether to build the graph from one argument's requires_grad, and do not detach or "
    "compute under torch.no_grad() on such a test.")
SAME_TENSORS = Condition(
    "the same tensors again, after new values were written into them",
    same_tensors=True,
    hint="a cache keyed on the tensors themselves (id(), data_ptr(), storage, "
         "functools.lru_cache) returns a stale result once the caller writes new values "
         "into them (as an optimizer does): compute from the values every call.")
INFERENCE_HINT = (
    "arguments that do not require grad (inference, torch.no_grad()) need the same care: "
    "never change an argument in place, and return a new tensor from every call (no "
    "output buffer kept between calls).")
# Arguments that do not require grad, with autograd on (run with differentiable=()): once,
# and on a second call with other values of the same shapes, so that an in-place shortcut
# or an output buffer kept only for such calls shows (NO_GRAD runs inside torch.no_grad()).
WITHOUT_GRAD = (
    Condition("arguments that do not require grad (inference)", hint=INFERENCE_HINT),
    Condition("arguments that do not require grad (inference), a second call with other "
              "values of the same shapes", change=REPEAT.change, hint=INFERENCE_HINT))
STANDARD = (PLAIN, REPEAT, NO_GRAD, INFERENCE, SAME_TENSORS, NONCONTIGUOUS, EXPANDED, FLOAT64,
            FLOAT16, BFLOAT16)
# With PLAIN among the conditions and two or more differentiable arguments, expect_conditions
# also runs PLAIN once per differentiable argument with only that one requiring grad.


INTEGER = Condition(
    "int64 arguments", torch.int64,
    hint="moving data around needs no floating point: use reshape, permute and indexing "
         "only (no matmul, no float constants), so that an integer tensor works too and "
         "keeps its dtype.")  # opt-in: for pure data movement (reshapes, transposes, patches)


def _with_infinities(t):
    """t with +inf at flat index 1 and -inf at the middle (floating tensors of 3+ entries)."""
    if not t.is_floating_point() or t.numel() < 3:
        return t
    flat = torch.zeros(t.numel(), dtype=torch.int8)
    flat[1], flat[t.numel() // 2] = 1, -1
    marks = flat.reshape(t.shape)
    inf = torch.tensor(math.inf, dtype=t.dtype)
    return torch.where(marks == 1, inf, torch.where(marks == -1, -inf, t))


NONFINITE = Condition(  # opt-in: for pure data movement, where inf must arrive unchanged
    "arguments holding +inf and -inf", change=lambda a: _map_tensors(a, _with_infinities),
    hint="inf * 0 is NaN: moving entries with a matmul or einsum against a 0/1 matrix (or "
         "any arithmetic) spreads one infinite value over a whole row. Move data with "
         "reshape, permute and indexing only.")


def scaled(factor, which, label, hint, dtypes=(torch.float32, torch.float64)):
    """The floating arguments at positions `which` times `factor`, in each of `dtypes`."""
    return [Condition(f"{label}, {str(dtype)[6:]}", dtype,
                      change=lambda a: _map_tensors(a, lambda t: t * factor, which), hint=hint)
            for dtype in dtypes]


def shifted(shift, which, label, hint, dtypes=(torch.float32, torch.float64)):
    """The floating arguments at positions `which` plus `shift`, in each of `dtypes`."""
    return [Condition(f"{label}, {str(dtype)[6:]}", dtype,
                      change=lambda a: _map_tensors(a, lambda t: t + shift, which), hint=hint)
            for dtype in dtypes]


def _cast(args, dtype, grad):
    """Floating tensors cast to `dtype` (int64: rounded), as new leaves; `grad` positions
    require grad. Returns (args, leaves)."""
    out, leaves = [], []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            if dtype is not None and not dtype.is_floating_point:
                a = (a * 10).round().to(dtype)
            else:
                a = a.detach().to(dtype or a.dtype).clone()
                if i in grad:
                    a.requires_grad_(True)
                    a.grad = torch.full_like(a, 0.25)  # as if the caller had accumulated
                    leaves.append((i, a))                # some: it must stay as it is
        out.append(a)
    return tuple(out), leaves


def _rounded_like(r, a):
    """r with the values of a (rounded in a's dtype), its gradient still reaching r's leaf."""
    if not (isinstance(r, torch.Tensor) and r.is_floating_point()
            and isinstance(a, torch.Tensor) and a.shape == r.shape):
        return r
    a = a.detach().to(r.dtype)
    return torch.where(torch.isfinite(a), r + (a - r).detach(), a)


def _half_tol(dtype, expected):
    eps = torch.finfo(dtype).eps
    scale = max(1.0, float(expected.detach().abs().nan_to_num(0, 0, 0).max())
                if expected.numel() else 1.0)
    return dict(atol=32 * eps * scale, rtol=32 * eps)


def _partial_subsets(differentiable):
    """Each differentiable argument alone, and (from three on) all of them but one: round 13
    found gradients lost when only V requires grad; round 14 when keys and values require
    grad and the queries do not (a frozen query path over a trained encoder's output)."""
    alone = [(i,) for i in differentiable]
    but_one = [tuple(j for j in differentiable if j != i) for i in differentiable]
    return alone + (but_one if len(differentiable) > 2 else [])


def _partial_label(fn, subset):
    names = [f"`{_argument_name(fn, i)}`" for i in subset]
    numbers = [str(i + 1) for i in subset]
    return (f"only {' and '.join(names)} requiring grad (argument{'s' if len(subset) > 1 else ''}"
            f" {' and '.join(numbers)}; the others constants, as frozen weights are)")


def expect_conditions(fn, reference, cases, *, name, differentiable=(), conditions=STANDARD,
                      atol=1e-5, rtol=1e-4, outputs=None, new_tensor=False, hint=None,
                      exact=False, random=False):
    """Run `fn` on every case under every condition and compare with `reference`.

    cases: [(words, args)], args a tuple of positional arguments (tensors and others);
    reference(*args) gets the floating tensors in float64 (rounded to the condition's dtype
    first) and returns the expected result; differentiable: positions of the arguments whose
    gradients are compared (a seeded loss, reference in float64); outputs picks the tensors
    of a result (default: the tensor, or each tensor of a tuple); new_tensor: each output
    must not share memory with an argument; exact: values and gradients must be exact in
    every dtype (pure data movement); random: the function may draw from torch's global
    random generator (otherwise a draw fails: a deterministic function that draws shifts
    every later random number of the caller).
    """
    __tracebackhide__ = True
    pick = outputs or _as_list
    if PLAIN in conditions and len(differentiable) > 1:
        conditions = tuple(conditions) + tuple(
            PLAIN.but(label=_partial_label(fn, subset), only=subset, hint=PARTIAL_GRAD_HINT)
            for subset in _partial_subsets(differentiable))
    for words, base in cases:
        for condition in conditions:
            dtype = condition.dtype
            if dtype is not None and not any(isinstance(a, torch.Tensor)
                                             and a.is_floating_point() for a in base):
                continue
            grad = (() if condition.no_grad or condition.inference else differentiable
                    if condition.only is None else condition.only)
            args, leaves = _cast(base, dtype, grad)
            wide = torch.float64 if dtype is None or dtype.is_floating_point else dtype
            ref_args, ref_leaves = _cast(args, wide, grad)
            if condition.change is not None:
                args, ref_args = condition.change(args), condition.change(ref_args)
                if args is None:
                    continue
                # the reference sees the very numbers the learner's code gets (a scaled
                # float32 argument is rounded), with its gradient still reaching its leaf
                ref_args = tuple(_rounded_like(r, a) for r, a in zip(ref_args, args))
            case = f"{words}, {condition.label}"
            if condition.same_tensors:  # a first call, then new values in the same tensors
                with draws_allowed(random):
                    call(fn, *args, name=name, case=f"{words} (a first call)")
                with torch.no_grad():
                    for a, r in zip(args, ref_args):
                        if isinstance(a, torch.Tensor) and a.is_floating_point():
                            a.copy_(_other_values(a.detach().clone()))
                            r.copy_(a.detach().to(r.dtype))
            mode = (torch.inference_mode() if condition.inference else torch.no_grad()
                    if condition.no_grad else contextlib.nullcontext())
            with mode, draws_allowed(random):  # a draw fails inside call() unless random
                result = call(fn, *args, name=name, case=case, hint_on_error=lambda error: (
                    INPLACE_ARGUMENT_HINT if "in-place" in str(error) else condition.hint))
            got = pick(result) if isinstance(result, (tuple, list)) or outputs else [result]
            want = pick(reference(*ref_args))
            if len(got) != len(want):
                fail(f"{name} returned {len(got)} tensor(s) on {case}; expected {len(want)}.")
            for out, ref in zip(got, want):
                _expect_condition_output(out, ref, args, name, case, condition, atol, rtol,
                                         hint, new_tensor, exact)
            if condition.no_grad or condition.inference:
                _expect_no_graph(got, name, case, args)
            if leaves and condition.gradients and (dtype is None or dtype.is_floating_point):
                _expect_condition_gradients(fn, got, want, leaves, ref_leaves, name, case,
                                            condition, atol, rtol, hint, exact)
            if dtype is not None and dtype.is_floating_point and not (
                    condition.no_grad or condition.inference):
                # Added after red-team round 14: a path of its own under torch.no_grad()
                # that computes float64 in float32 (or float16 through bfloat16) passed
                # every float32 no_grad case: each dtype's values again, under no_grad,
                # the arguments as they are (those requiring grad still do, as a model's
                # weights do in evaluation: torch.enable_grad() inside shows then).
                again = f"{case}, again under torch.no_grad()"
                plain = args
                with torch.no_grad(), draws_allowed(random):
                    result = call(fn, *plain, name=name, case=again)
                got = pick(result) if isinstance(result, (tuple, list)) or outputs else [result]
                if len(got) != len(want):
                    fail(f"{name} returned {len(got)} tensor(s) on {again}; expected "
                         f"{len(want)}.")
                for out, ref in zip(got, want):
                    _expect_condition_output(out, ref, plain, name, again, condition, atol,
                                             rtol, hint, new_tensor, exact)
                _expect_no_graph(got, name, again, plain)


def expect_no_graph_under_no_grad(fn, args, name, case):
    """Added after red-team round 14: called under the caller's torch.no_grad() with a
    first argument that requires grad (a parameter, a tensor from a training step;
    used by checkers that do not run every dtype condition), nothing
    of the result may require grad: no_grad records nothing, whatever the arguments. A
    function that turns autograd back on inside (torch.enable_grad()) builds a graph the
    caller asked not to build. (_core's no_grad conditions pass arguments without
    requires_grad, where such a result cannot require grad.)"""
    __tracebackhide__ = True
    first = args[0].detach().clone().requires_grad_(True)
    with torch.no_grad():
        result = call(fn, first, *args[1:], name=name, case=case)
    outputs = result if isinstance(result, (tuple, list)) else [result]
    if any(isinstance(o, torch.Tensor) and o.grad_fn is not None for o in outputs):
        fail(f"{name} returned a result that requires grad on {case}: under torch.no_grad() "
             "nothing is recorded, even when an argument requires grad, but your function "
             "records a graph of its own, which the caller asked not to build (memory and "
             "time).",
             "do not turn autograd on inside (torch.enable_grad(), torch.set_grad_enabled"
             "(True)): the caller decides whether a graph is recorded.")


def _expect_no_graph(outputs, name, case, args=()):
    """Under torch.no_grad() or inference_mode, with no argument requiring grad, nothing of
    the result may require grad (added after red-team round 14: torch.enable_grad() inside,
    or a hidden tensor created with requires_grad=True, builds a graph the caller asked not
    to build)."""
    __tracebackhide__ = True
    # (a view taken under no_grad of an argument that requires grad reports requires_grad
    # but has no grad_fn: nothing is recorded; a recorded operation has a grad_fn)
    # (an argument returned as it is carries the caller's own graph, not one recorded here)
    if any(isinstance(o, torch.Tensor) and o.grad_fn is not None
           and not any(o is a for a in args) for o in outputs):
        fail(f"{name} returned a result that requires grad on {case}, where no argument "
             "requires grad and the caller turned autograd off: it records a graph of its "
             "own, which the caller asked not to build (memory and time).",
             "do not turn autograd on inside (torch.enable_grad(), torch.set_grad_enabled"
             "(True)) and create no tensor with requires_grad=True: the caller decides "
             "whether a graph is recorded.")


def _expect_condition_output(out, ref, args, name, case, condition, atol, rtol, hint,
                             new_tensor, exact):
    __tracebackhide__ = True
    what = f"the output of {name}"
    floating = ref.is_floating_point()
    dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor)
                  and (a.is_floating_point() or condition.dtype == torch.int64)), None)
    expect_tensor(out, ref.shape, dtype=(dtype if floating or condition.dtype == torch.int64
                                         else ref.dtype), what=what, case=case,
                  hint=condition.hint, nan_hint=condition.hint)
    if new_tensor:
        expect_new_tensor(out, [(f"argument {i + 1}", "its argument", a)
                                for i, a in enumerate(args) if isinstance(a, torch.Tensor)],
                          case, hint)
    if not floating or not out.is_floating_point():
        if not _same(out.detach().to(ref.dtype), ref):
            where, want, got, _ = worst(out, ref)
            fail(f"{what} is wrong on {case}: at index {where} expected {want:g}, got {got:g}.",
                 condition.hint or hint)
        return
    tol = (dict(atol=0, rtol=0) if exact else _half_tol(out.dtype, ref)
           if out.dtype in (torch.float16, torch.bfloat16) else dict(atol=atol, rtol=rtol))
    expect_close(out, ref, what=what, case=case, hint=condition.hint or hint, **tol)


def _expect_condition_gradients(fn, got, want, leaves, ref_leaves, name, case, condition, atol,
                                rtol, hint, exact=False):
    __tracebackhide__ = True
    lost_hint = (condition.hint if condition in (REPEAT, FLOAT16, BFLOAT16)
                 or condition.only is not None else DETACHED_HINT)
    pairs = [(o, r) for o, r in zip(got, want) if r.is_floating_point()]
    if not any(r.requires_grad for _, r in pairs):  # the condition cut the graph itself
        return
    weights = cotangents([r for _, r in pairs], seed=5)
    if exact:  # multiples of 1/64: exact in every dtype, so are sums of a few of them
        weights = [w.mul(64).round().div(64) for w in weights]
    flowing = [(o, w) for (o, _), w in zip(pairs, weights)
               if isinstance(o, torch.Tensor) and o.requires_grad]
    ref_grads = torch.autograd.grad(sum((r * w).sum() for (_, r), w in zip(pairs, weights)),
                                    [t for _, t in ref_leaves], allow_unused=True)
    if not flowing:  # with only one argument requiring grad, fine where the reference's
        #               gradient is zero (the first step's output is v, whatever q is)
        if any(r.requires_grad for _, r in pairs) and (condition.only is None or any(
                g is not None and bool((g != 0).any()) for g in ref_grads)):
            fail(f"no gradient can flow back through {name} on {case}: its output has "
                 "requires_grad=False although the arguments require grad.", lost_hint)
        return
    try:
        grads = torch.autograd.grad(sum((o.double() * w).sum() for o, w in flowing),
                                    [t for _, t in leaves], allow_unused=True)
    except RuntimeError as error:
        fail(f"backward() through {name} failed on {case}: {error}",
             STALE_HINT if "a second time" in str(error) else INPLACE_HINT)
    for (position, leaf), grad, ref in zip(leaves, grads, ref_grads):
        named = _argument_name(fn, position)
        label = (f"argument {position + 1}" if named.startswith("number ") else
                 f"`{named}` (argument {position + 1})")
        ref = torch.zeros(leaf.shape, dtype=torch.float64) if ref is None else ref
        if grad is None:
            if (ref != 0).any():
                fail(f"no gradient reaches {label} through {name} on {case}, while the "
                     "reference's gradient there is not zero.", lost_hint)
            continue
        bad = ~torch.isfinite(grad) & torch.isfinite(ref)
        if bad.any():
            where = tuple(int(i) for i in bad.nonzero()[0])
            fail(f"the gradient with respect to {label} contains NaN or inf on {case}, "
                 f"first at index {where}, where the right gradient is "
                 f"{ref[where].item():.4g}. The forward values are fine; the backward pass "
                 "is not.", condition.hint or hint)
        scale = max(1.0, float(ref.abs().max())) if ref.numel() else 1.0
        tol = (dict(atol=0, rtol=0) if exact else _half_tol(grad.dtype, ref)
               if grad.dtype in (torch.float16, torch.bfloat16)
               else dict(atol=10 * atol * scale, rtol=10 * rtol))
        if not is_close(grad, ref, **tol):
            where, want, seen, diff = worst(grad, ref)
            want, seen = _shown(want, seen)
            fail(f"the gradient with respect to {label} is wrong on {case}: at index {where} "
                 f"expected {want}, got {seen} (largest difference {diff:.3g}). The forward "
                 "values are right, so part of the computation is hidden from autograd or "
                 "computed differently in the backward.", condition.hint or DETACHED_HINT)
        if grad.dtype == torch.float64:
            expect_float64_accuracy(grad, ref, what=f"the gradient with respect to {label}",
                                    case=case)
