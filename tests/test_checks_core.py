"""What every checker shares (book/checks/_core.py), issue 12 and issue 13 item 2:

* a check cell prints one short block: on failure the checker's sentence and hint, without
  a chained traceback or frames inside book/checks, in a Jupyter kernel (IPython, as in
  JupyterLab and Colab) and in plain python; on success one line, the same in every chapter;
* a failure is an AssertionError (CheckFailed);
* checkers never crash bare on odd results, and leave the learner's random state alone.
"""
import random
import subprocess
import sys
import textwrap

import nbformat
import numpy as np
import pytest
import torch
from nbclient import NotebookClient

from book import checks
from book.checks import _core
from book.checks._core import checker
from checkers_support import accepts, rejects, run
from conftest import ROOT

STUB = "def softmax(scores):\n    raise NotImplementedError('write your solution here')\n"
WRONG = "def softmax(scores):\n    return scores.exp() / scores.exp().sum(-1, keepdim=True)\n"
RIGHT = ("def softmax(scores):\n    e = (scores - scores.amax(-1, keepdim=True)).exp()\n"
         "    return e / e.sum(-1, keepdim=True)\n")
CHECK = "checks.check_softmax(softmax)"
SUCCESS = "softmax: all checks passed."


def _short(lines):
    text = "\n".join(lines)
    assert "During handling" not in text and "direct cause" not in text, text
    assert "book/checks" not in text and "_core.py" not in text, text
    assert "Traceback" not in text, text
    assert len(lines) <= 6, text
    return text


def test_a_check_cell_in_a_jupyter_kernel_prints_one_short_block():
    """The same IPython machinery as JupyterLab and Colab: a real kernel runs the cells."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from book import checks"),
                nbformat.v4.new_code_cell(STUB + CHECK),
                nbformat.v4.new_code_cell(WRONG + CHECK),
                nbformat.v4.new_code_cell(RIGHT + CHECK)]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    stub, wrong, right = (cell.outputs for cell in nb.cells[1:])
    assert [o.output_type for o in stub] == ["error"]
    assert stub[0].ename == "CheckFailed"
    text = _short(stub[0].traceback)
    assert text.startswith("CheckFailed: softmax is not implemented yet")
    assert [o.output_type for o in wrong] == ["error"]
    text = _short(wrong[0].traceback)
    assert text.startswith("CheckFailed: softmax(scores) contains NaN on")
    assert "\nHint: exp() overflows" in text
    assert [o.output_type for o in right] == ["execute_result"]
    assert right[0].data["text/plain"] == SUCCESS  # one line, no quotes


def _python(code, interactive=False):
    args = [sys.executable] + (["-i"] if interactive else ["-c", code])
    return subprocess.run(args, input=code if interactive else None, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_a_failed_check_in_plain_python_is_one_short_block():
    result = _python("from book import checks\n" + STUB + CHECK + "\n")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    text = _short(lines)
    assert "CheckFailed: softmax is not implemented yet" in text
    assert 'File "<string>"' in text  # the learner's own line stays


def test_a_passed_check_in_plain_python_prints_one_line():
    script = _python("from book import checks\n" + RIGHT + CHECK + "\n")
    assert script.returncode == 0 and script.stdout == SUCCESS + "\n", script.stdout
    repl = _python("from book import checks\n" + RIGHT + "\n" + CHECK + "\n", interactive=True)
    assert repl.stdout.count(SUCCESS) == 1 and f"'{SUCCESS}'" not in repl.stdout, repl.stdout


def test_failures_are_assertion_errors_without_a_chain():
    text = rejects(checks.check_softmax, lambda s: s.no_such_method(), "AttributeError")
    assert "in <lambda>, line" in text  # the learner's line, instead of a chained traceback


ODD_RESULTS = [None, "a string", 3.0, (), [1, 2], torch.zeros(1), torch.zeros(2, 3, 4, 5),
               np.zeros(3), torch.zeros(3, dtype=torch.float64), torch.ones(2, 2).bool()]


FUNCTION_CHECKERS = ["check_softmax", "check_topk_attention_pool", "check_epanechnikov_pool",
                     "check_masked_softmax", "check_scaled_dot_product_attention",
                     "check_bahdanau_step", "check_transpose_qkv", "check_transpose_output",
                     "check_causal_mask", "check_mlm_masking", "check_bert_param_count",
                     "check_chunked_attention"]


@pytest.mark.parametrize("checker", FUNCTION_CHECKERS)
@pytest.mark.parametrize("odd", range(len(ODD_RESULTS)))
def test_odd_results_give_a_message_not_a_crash(checker, odd):
    """Whatever the learner returns, the check says what is wrong (a CheckFailed with the
    checker's own words, not the fallback for a crash inside the checker)."""
    value = ODD_RESULTS[odd]
    text = rejects(getattr(checks, checker), lambda *args, **kwargs: value)
    assert "stopped with" not in text, text


@pytest.mark.parametrize("checker, solution", [
    ("check_softmax", lambda s: torch.softmax(s, -1)),
    ("check_mlm_masking", lambda t, v: __import__("book.bert").bert.mask_tokens(t, v)),
    ("check_chunked_attention", lambda Q, K, V, c: torch.softmax(
        Q @ K.transpose(1, 2) / Q.shape[-1] ** 0.5, -1) @ V)])
def test_checks_leave_the_learners_random_state_alone(checker, solution):
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    expected = (torch.rand(2), random.random(), np.random.rand())
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    try:
        getattr(checks, checker)(solution)
    except AssertionError:
        pass
    assert torch.equal(torch.rand(2), expected[0])
    assert random.random() == expected[1] and np.random.rand() == expected[2]


@pytest.mark.parametrize("seed", [0, 1, 99])
def test_verdicts_and_messages_do_not_depend_on_the_learners_seed(seed):
    naive = textwrap.dedent("""
        def fn(tokens, vocab):
            import torch
            from book.bert import IGNORE
            chosen = (tokens >= vocab.num_specials) & (torch.rand(tokens.shape) < 0.16)
            return torch.where(chosen, vocab.mask, tokens), torch.where(chosen, tokens, IGNORE)
    """)
    namespace = {}
    exec(naive, namespace)
    with pytest.raises(AssertionError) as info:
        run(checks.check_mlm_masking, namespace["fn"], seed=seed)
    assert str(info.value) == _REFERENCE_MESSAGE.setdefault("mlm", str(info.value))


_REFERENCE_MESSAGE = {}


MY_LEARNER_COPIES = ["01_attention_cues", "02_nadaraya_watson", "03_scoring_functions",
                     "04_bahdanau", "05_multihead_attention",
                     "06_self_attention_positional_encoding", "07_transformer", "08_bert",
                     "a1_attention_cost"]


@pytest.mark.parametrize("name", MY_LEARNER_COPIES)
def test_every_stub_of_the_learner_copies_gets_the_short_not_implemented_message(name):
    """The learner's first run of a check cell: the stub as generated by make exercises."""
    nb = nbformat.read(ROOT / "exercises" / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    namespace = {}
    exec(compile(code[0].source, f"{name}: setup", "exec"), namespace)
    checked = 0
    for i, cell in enumerate(code):
        if "checks.check_" not in cell.source:
            continue
        stub = next(c for c in reversed(code[:i]) if "NotImplementedError" in c.source)
        exec(compile(stub.source, f"{name}: stub", "exec"), namespace)
        with pytest.raises(checks.CheckFailed) as info:
            exec(compile(cell.source, f"{name}: check", "exec"), namespace)
        assert "is not implemented yet" in str(info.value), str(info.value)
        assert len(info.value._render_traceback_()) <= 2
        checked += 1
    assert checked >= 1


def test_forbidden_also_refuses_a_name_bound_before_the_check():
    """`from book.attention import masked_softmax` before the check binds the function object
    itself: forbidden swaps that object's code too, and restores it afterwards."""
    import torch

    from book import attention
    from book.attention import masked_softmax
    from book.checks._core import forbidden

    X, valid_lens = torch.randn(2, 2, 4), torch.tensor([2, 3])
    expected = masked_softmax(X, valid_lens)
    with pytest.raises(checks.CheckFailed, match="your function calls masked_softmax: no"):
        with forbidden([(attention, "masked_softmax", "masked_softmax")], "no"):
            masked_softmax(X, valid_lens)
    assert attention.masked_softmax is masked_softmax
    assert torch.equal(masked_softmax(X, valid_lens), expected)


# -- Results a later call changes (round 6: output buffers kept between calls) -------------

@checker("twice")
def _check_twice(fn):
    """A checker that calls `fn` on two inputs of the same shape, through `call`."""
    from book.checks._core import call
    first = call(fn, torch.arange(6.0).reshape(2, 3), name="twice", case="the first input")
    call(fn, -torch.arange(6.0).reshape(2, 3), name="twice", case="the second input")
    return first


def test_a_result_changed_by_a_later_call_fails_with_both_cases_named():
    buffer = {}

    def reuses_a_buffer(x):
        return buffer.setdefault(x.shape, torch.empty_like(x)).copy_(x * 2)

    rejects(_check_twice, reuses_a_buffer, "twice changed what it returned earlier",
            "its result on the first input is different after the call on the second input",
            "do not keep an output buffer")


def test_a_view_of_the_input_and_a_new_tensor_are_not_results_changed_later():
    accepts(_check_twice, lambda x: x.t())    # a view of the argument: not kept
    accepts(_check_twice, lambda x: x * 2)    # a new tensor every call


# -- The float64 rule (session 21): a float64 input asks for float64 accuracy, told last ----

@checker("float64 twice")
def _check_float64(fn):
    """expect_close on a float64 case, then an ordinary float32 case with a 1e-3 tolerance."""
    from book.checks._core import expect_close
    x = torch.linspace(-1, 1, 7, dtype=torch.float64)
    expect_close(fn(x), torch.tanh(x), case="a float64 vector")
    y = torch.linspace(-1, 1, 5)
    expect_close(fn(y), torch.tanh(y), case="a float32 vector", atol=1e-3)


def test_a_float64_input_computed_in_float32_fails_with_the_float64_message():
    rejects(_check_float64, lambda x: torch.tanh(x.float()).to(x.dtype),
            "from the float64 reference on a float64 vector", "float64 accuracy",
            "torch.tensor(d) is float32")
    accepts(_check_float64, torch.tanh)


def test_a_float64_failure_waits_until_every_other_check_has_passed():
    # float32 detour AND a fault the float32 case shows: the fault is told, not float64
    message = rejects(_check_float64, lambda x: torch.tanh(x.float()).to(x.dtype) + (
        0.1 if x.dtype == torch.float32 else 0.0), "is wrong on a float32 vector")
    assert "float64" not in message


def test_float64_gradients_are_held_to_float64_accuracy():
    from book.checks._core import expect_gradients

    class Float32Backward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.tanh(x)

        @staticmethod
        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return (grad.float() * (1 - torch.tanh(x.float()) ** 2)).to(grad.dtype)

    @checker("float64 gradient")
    def check(fn):
        x = torch.linspace(-1, 1, 7, dtype=torch.float64)
        expect_gradients(fn, torch.tanh, [("x", x)], name="fn", case="a float64 vector")

    rejects(check, Float32Backward.apply, "the gradient with respect to x is",
            "from the float64 reference")
    accepts(check, torch.tanh)

    @checker("float64 gradient, float32 steps allowed")
    def check_waived(fn):
        x = torch.linspace(-1, 1, 7, dtype=torch.float64)
        expect_gradients(fn, torch.tanh, [("x", x)], name="fn", case="a float64 vector",
                         atol=1e-6, rtol=1e-6, float64_accuracy=False)

    accepts(check_waived, Float32Backward.apply)  # float32 accuracy is within 1e-6 here
    rejects(check_waived, lambda x: torch.tanh(x.detach()), "no gradient can flow back")
    rejects(check_waived, lambda x: torch.tanh(x) + 1e-3 * (x - x.detach()),
            "the gradient with respect to x is wrong")


def test_gradient_cases_are_rerun_in_half_precision():
    # round 10: .detach() only for float16/bfloat16 inputs passed every float32 gradient case
    from book.checks._core import expect_gradients

    @checker("half gradients")
    def check(fn):
        x = torch.linspace(-1, 1, 7)
        expect_gradients(fn, torch.tanh, [("x", x)], name="fn", case="a float32 vector")

    def detached_in_half(x):
        return torch.tanh(x.detach() if x.dtype in (torch.float16, torch.bfloat16) else x)

    def one_input_lost_in_bfloat16(x, y):
        return torch.tanh(x) + (y.detach() if x.dtype == torch.bfloat16 else y)

    rejects(check, detached_in_half, "a float32 vector with the inputs cast to float16",
            "requires_grad=False", "only for float16/bfloat16 inputs")

    @checker("half gradients, two inputs")
    def check_two(fn):
        x, y = torch.linspace(-1, 1, 7), torch.linspace(0, 1, 7)
        expect_gradients(fn, lambda a, b: torch.tanh(a) + b, [("x", x), ("y", y)],
                         name="fn", case="two float32 vectors")

    rejects(check_two, one_input_lost_in_bfloat16, "no gradient reaches y",
            "cast to bfloat16, while in float32 one does")
    accepts(check, torch.tanh)
    accepts(check_two, lambda a, b: torch.tanh(a) + b)

    def refuses_half(x):  # a refusal is left to the checker's own half-precision cases
        if x.dtype in (torch.float16, torch.bfloat16):
            raise TypeError("no half precision here")
        return torch.tanh(x)

    accepts(check, refuses_half)
    # told last: another fault of the same solution is told first
    message = rejects(check, lambda x: detached_in_half(x) * (2 if x.dtype == torch.float32
                                                              else 1), "is wrong")
    assert "float16" not in message


def test_a_sparse_result_gets_a_message():
    from book.checks._core import expect_tensor

    @checker("dense")
    def check(fn):
        expect_tensor(fn(torch.eye(3)), (3, 3), case="the identity")

    rejects(check, lambda x: x.to_sparse(), "is a sparse_coo tensor on the identity",
            "no .to_sparse()")
    accepts(check, lambda x: x * 1)


def test_close_values_are_shown_with_enough_digits_to_differ():
    # round 11: "expected -1.591, got -1.591" for an eps of 1e-3 instead of 1e-5
    from book.checks._core import _shown, expect_close

    assert _shown(-1.5914, -1.5912) == ("-1.5914", "-1.5912")
    assert _shown(0.25, 0.75) == ("0.25", "0.75")

    @checker("digits")
    def check(fn):
        expect_close(fn(torch.tensor([-1.5914])), torch.tensor([-1.5914]), atol=1e-5, rtol=0)

    rejects(check, lambda x: x + 0.0002, "expected -1.5914, got -1.5912")


# -- The condition matrix (expect_conditions) ---------------------------------------------

def _matrix_softmax_check(fn):
    from book.checks._core import STANDARD, expect_conditions, scaled
    g = torch.Generator().manual_seed(3)
    cases = [("a (2, 3, 5) batch", (torch.randn(2, 3, 5, generator=g),)),
             ("one key per row", (torch.randn(3, 1, generator=g),))]
    conditions = STANDARD + tuple(scaled(1e5, (0,), "scores times 1e5", "shift by the max"))

    @checker("matrix softmax")
    def check(f):
        expect_conditions(f, lambda s: torch.softmax(s, -1), cases, name="softmax",
                          differentiable=(0,), conditions=conditions)
    return check(fn)


def _softmax_right(X):
    e = (X - X.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


_CACHE = {}


def _softmax_cached(X):
    if X.shape not in _CACHE:
        _CACHE[X.shape] = _softmax_right(X)
    return _CACHE[X.shape]


@pytest.mark.parametrize("fn, fragment", [
    (lambda X: _softmax_right(X.detach() if X.dtype == torch.float16 else X),
     "no gradient can flow back through softmax on a (2, 3, 5) batch, float16 arguments"),
    (lambda X: _softmax_right(X.float()).to(X.dtype), "from the float64 reference on a "
     "(2, 3, 5) batch, float64 arguments"),
    (lambda X: X.exp() / X.exp().sum(-1, keepdim=True),
     "contains NaN on a (2, 3, 5) batch, scores times 1e5, float32"),
    (lambda X: _softmax_right(X.view(-1, X.shape[-1])).view(X.shape) if X.is_contiguous()
     else _softmax_right(X.reshape(X.shape[0], -1)).reshape(X.shape),
     "every argument non-contiguous (the same values)"),
    (_softmax_cached, "a second call, with other values of the same shapes: at index"),
    (lambda X: torch.ones_like(X) if X.shape[-1] == 1 else _softmax_right(X),
     "no gradient can flow back through softmax on one key per row, as given"),
    (lambda X: _softmax_right(X[:1]).expand_as(X) if X.stride(0) == 0 else _softmax_right(X),
     None),  # right: an expanded input has equal entries along the first axis
])
def test_the_condition_matrix_rejects_faults_that_show_under_one_condition(fn, fragment):
    _CACHE.clear()
    if fragment is None:
        assert str(_matrix_softmax_check(fn)) == "matrix softmax: all checks passed."
        return
    with pytest.raises(checks.CheckFailed) as failure:
        _matrix_softmax_check(fn)
    assert fragment in str(failure.value), str(failure.value)


def test_the_condition_matrix_accepts_a_right_softmax_and_restores_random_state():
    state = torch.get_rng_state()
    assert str(_matrix_softmax_check(_softmax_right)) == "matrix softmax: all checks passed."
    assert torch.equal(torch.get_rng_state(), state)


def test_a_condition_copied_with_changes_keeps_every_other_field():
    from book.checks._core import FLOAT16, FLOAT16_NOT_BFLOAT16, FLOAT64
    copy = FLOAT64.but(hint="another hint")
    assert (copy.hint, copy.label, copy.dtype, copy.change) == \
        ("another hint", FLOAT64.label, torch.float64, FLOAT64.change)
    assert FLOAT64.hint != "another hint"  # the original is unchanged
    x = torch.ones(2, dtype=torch.float64)  # the condition casts first, then changes
    assert copy.change((x,))[0][0].item() == 1 + 2 ** -30  # float64's extra digits kept
    assert FLOAT16_NOT_BFLOAT16.dtype == FLOAT16.dtype and not FLOAT16_NOT_BFLOAT16.gradients
    with pytest.raises(TypeError, match="no field"):
        FLOAT64.but(tolerance=1)


# -- Round 13: the caller's state, inference mode, partial gradients, the global generator ---

def _weighted_check(fn):
    """A two-argument differentiable function (softmax(s) @ v) under STANDARD."""
    from book.checks._core import STANDARD, expect_conditions
    g = torch.Generator().manual_seed(4)
    cases = [("a (2, 3, 5) batch", (torch.randn(2, 3, 5, generator=g),
                                    torch.randn(2, 5, 4, generator=g)))]

    @checker("weighted")
    def check(f):
        expect_conditions(f, lambda s, v: torch.softmax(s, -1) @ v, cases, name="weighted",
                          differentiable=(0, 1), conditions=STANDARD)
    return check(fn)


def _weighted_right(s, v):
    return _softmax_right(s) @ v


def _inference_path(s, v):
    if torch.is_inference_mode_enabled():
        return (_softmax_right(s.bfloat16()) @ v.bfloat16()).to(s.dtype)
    return _weighted_right(s, v)


def _graph_only_for_s(s, v):
    return _weighted_right(s, v if s.requires_grad else v.detach())


def _draws(s, v):
    order = torch.randperm(s.shape[-1])  # the same result in any order, but a draw
    return _softmax_right(s[..., order]) @ v[..., order, :]


def _default_dtype(s, v):
    torch.set_default_dtype(s.dtype)
    return _weighted_right(s, v)


def _requires_grad(s, v):
    s.requires_grad_()
    return _weighted_right(s, v)


def _hooked(s, v):
    if s.requires_grad:
        s.register_hook(lambda g: g.nan_to_num(0))
    return _weighted_right(s, v)


def _grad_cleared(s, v):
    s.grad = None  # "a fresh gradient for this call"
    return _weighted_right(s, v)


def _grad_zeroed(s, v):
    if s.grad is not None:
        s.grad.zero_()
    return _weighted_right(s, v)


@torch.inference_mode()
def _decorated(s, v):
    return _weighted_right(s, v)


@pytest.mark.parametrize("fn, fragment", [
    (_inference_path, "under torch.inference_mode(), with other values"),
    (_graph_only_for_s, "only `v` requiring grad (argument 2"),
    (_draws, "drew from torch's global random generator"),
    (_default_dtype, "changed torch's default dtype from torch.float32 to torch.float64"),
    (_requires_grad, "changed the requires_grad of the argument `s` from False to True"),
    (_hooked, "changed the hooks of the argument `s` (it had 0, now 1: register_hook)"),
    (_grad_cleared, "changed the .grad of the argument `s` (the gradient the caller had accumulated)"),
    (_grad_zeroed, "changed the .grad of the argument `s` (the gradient the caller had accumulated)"),
    (_decorated, "returned an inference tensor"),
])
def test_round13_side_effects_and_modes_are_rejected(fn, fragment):
    with pytest.raises(checks.CheckFailed) as failure:
        _weighted_check(fn)
    assert fragment in str(failure.value), str(failure.value)
    assert torch.get_default_dtype() == torch.float32  # put back by the check


def test_round13_conditions_accept_a_right_two_argument_function():
    assert str(_weighted_check(_weighted_right)) == "weighted: all checks passed."


# -- Round 14: torch's global switches, the three random generators, retain_grad, graphs ------
# built under the caller's no_grad, and each dtype's values again under no_grad

def _switch(turn):
    def fn(s, v):
        turn()
        return _weighted_right(s, v)
    return fn


def _in_float32_without_grad(s, v):
    if not torch.is_grad_enabled() and s.dtype == torch.float64:
        return _weighted_right(s.float(), v.float()).double()
    return _weighted_right(s, v)


def _graph_under_no_grad(s, v):
    with torch.enable_grad():
        return _weighted_right(s, v) + torch.zeros((), requires_grad=True)


def _retains(s, v):
    if s.requires_grad and not s.is_leaf:
        s.retain_grad()
    return _weighted_right(s, v)


def _numpy_draw(s, v):
    import numpy
    numpy.random.random()
    return _weighted_right(s, v)


def _python_draw(s, v):
    import random
    random.random()
    return _weighted_right(s, v)


def _reseeded(s, v):
    torch.manual_seed(torch.initial_seed())  # a fresh seed: no draw, but a rewound stream
    return _weighted_right(s, v)


@pytest.mark.parametrize("fn, fragment", [
    (_switch(lambda: torch.set_grad_enabled(True)), "changed autograd's grad mode"),
    (_switch(lambda: torch.autograd.set_detect_anomaly(True)), "changed anomaly detection"),
    (_switch(lambda: torch.set_flush_denormal(True)), "subnormal numbers to zero"),
    (_switch(lambda: torch.set_num_threads(torch.get_num_threads() + 1)),
     "torch's number of threads"),
    (_switch(lambda: torch.set_float32_matmul_precision("medium")), "matmul precision"),
    (_switch(lambda: setattr(torch.backends.cudnn, "benchmark", True)),
     "torch.backends.cudnn.benchmark"),
    (_switch(lambda: torch.use_deterministic_algorithms(True)), "deterministic algorithms"),
    (_numpy_draw, "drew from NumPy's global random generator"),
    (_python_draw, "drew from Python's random module"),
    (_reseeded, "drew from torch's global random generator (or seeded it)"),
    (_retains, "a non-leaf tensor, to keep its .grad (retain_grad()"),
    (_graph_under_no_grad, "returned a result that requires grad"),
    (_in_float32_without_grad, "float64 arguments, again under torch.no_grad()"),
])
def test_round14_switches_generators_and_no_grad_paths_are_rejected(fn, fragment):
    settings = [get() for _, get, _, _ in _core._SETTINGS]
    with pytest.raises(checks.CheckFailed) as failure:
        _weighted_check(fn)
    assert fragment in str(failure.value), str(failure.value)
    assert [get() for _, get, _, _ in _core._SETTINGS] == settings  # put back by the check


def test_round14_a_random_checker_lets_its_function_draw():
    @checker("draws", random=True)
    def check(fn):
        return _core.call(fn, torch.ones(3), name="draws")

    numpy = pytest.importorskip("numpy")
    assert check(lambda x: x * torch.rand(1) * numpy.random.random()) == "draws: all checks passed."
    with pytest.raises(checks.CheckFailed, match="drew from torch's global random generator"):
        _weighted_check(_draws)  # a deterministic checker still refuses a draw


def test_round14_a_random_function_must_repeat_from_a_seed():
    @checker("repeat", random=True)
    def check(fn):
        _core.expect_repeatable(fn, torch.ones(50), name="masking", case="50 ones")

    def right(x):
        return x * (torch.rand_like(x) < 0.5)

    def reseeds_after(x):
        out = right(x)
        torch.seed()  # from the clock
        return out

    def python_reseeded(x):
        out = right(x)
        random.seed()
        return out

    private = torch.Generator()
    private.seed()

    def own_generator(x):
        return x * (torch.rand(x.shape, generator=private) < 0.5)

    assert check(right) == "repeat: all checks passed."
    rejects(check, reseeds_after, "draws next from torch's global random generator",
            "torch.seed()")
    rejects(check, python_reseeded, "Python's random module")
    rejects(check, own_generator, "gave two different results", "a seeded run does not repeat")
    with pytest.raises(checks.CheckFailed, match="changed the requires_grad"):
        check(lambda x: (x.requires_grad_(), right(x))[1])
    with pytest.raises(checks.CheckFailed, match="subclass of torch.Tensor"):
        check(lambda x: right(x).as_subclass(type("Mask", (torch.Tensor,), {})))


def test_round14_gradients_reach_every_pair_of_three_arguments():
    from book.checks._core import STANDARD, expect_conditions
    g = torch.Generator().manual_seed(5)
    cases = [("q (2, 3, 4), k (2, 5, 4), v (2, 5, 3)",
              tuple(torch.randn(*s, generator=g) for s in [(2, 3, 4), (2, 5, 4), (2, 5, 3)]))]

    def attention(q, k, v):
        return _softmax_right(q @ k.transpose(1, 2)) @ v

    @checker("attention")
    def check(fn):
        expect_conditions(fn, attention, cases, name="attention", differentiable=(0, 1, 2))

    def keys_lost_without_queries(q, k, v):
        return attention(q, k if q.requires_grad or not v.requires_grad else k.detach(), v)

    assert check(attention) == "attention: all checks passed."
    rejects(check, keys_lost_without_queries, "no gradient reaches `k` (argument 2)",
            "only `k` and `v` requiring grad (arguments 2 and 3", "frozen weights")


def _grad_on_inside(s, v):
    with torch.enable_grad():
        return _weighted_right(s, v) * 1


def test_round14_a_graph_built_inside_under_no_grad_is_rejected():
    # arguments requiring grad (a model's weights) under the caller's no_grad: enable_grad
    # inside records a graph anyway
    rejects(_weighted_check, _grad_on_inside, "returned a result that requires grad",
            "again under torch.no_grad()")


def test_round14_a_global_module_hook_left_registered_is_rejected_and_removed():
    from torch.nn.modules import module

    def hooked(s, v):
        torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)
        return _weighted_right(s, v)

    before = dict(module._global_forward_hooks)
    rejects(_weighted_check, hooked, "torch.nn's global module hooks")
    assert dict(module._global_forward_hooks) == before  # removed again by the check
