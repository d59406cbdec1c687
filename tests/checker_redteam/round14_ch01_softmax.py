"""Round 14 red team (writer A, issue 12), ch01_softmax: wrong (W_), right (C_), odd but right (O_)
and accepted (A_) solutions of check_softmax written from the exercise text alone; copied from
/work/redteam/round14/A/sols/ch01_softmax.py.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed: none in book/checks/ch01.py. W_11 (grad mode left on), W_12 (anomaly detection),
W_18 (a float32 path of its own under torch.no_grad() for float64), W_19 (retain_grad on a
non-leaf argument), W_20 (float32 matmul precision), W_22 (TF32 flag), W_25 (number of
threads) and W_26 (result requiring grad under no_grad) are rejected by the lead's _core
changes of round 14. Renamed A_ by the lead's rulings: A_15 (NaN inputs mapped to 0: NaN
inputs are not specified), A_17 (once_differentiable backward: second derivatives are not
asked for); A_24 (+inf scores) is the writer's own A_ (+inf scores are not specified).
"""
import torch

CHECK = "check_softmax"

_BUF = {}


def _ref(x):
    cdt = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    y = x.to(cdt)
    e = torch.exp(y - y.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def C_01_reference(scores):
    return _ref(scores)


def C_02_max_values(scores):
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    m = x.max(dim=-1, keepdim=True).values
    e = (x - m).exp()
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_03_shift_under_no_grad(scores):
    """The shift is computed under no_grad (its gradient cancels exactly anyway)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    with torch.no_grad():
        m = x.amax(-1, keepdim=True)
    e = torch.exp(x - m)
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_04_logsumexp(scores):
    """exp(x - logsumexp(x)): logsumexp is not on the forbidden list."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True)).to(scores.dtype)


def O_05_set_restore_default_dtype(scores):
    """Sets the default dtype to float64 for a constant and restores it in finally."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        one = torch.tensor(1.0)
    finally:
        torch.set_default_dtype(old)
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e * (one.to(x.dtype) / e.sum(-1, keepdim=True))).to(scores.dtype)


def O_06_inference_mode_shift(scores):
    """Row max under inference_mode, cloned out into a normal tensor (no grad needed)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    with torch.inference_mode():
        m = x.amax(-1, keepdim=True)
    m = m.clone() if not torch.is_inference_mode_enabled() else m
    e = torch.exp(x - m.clone())
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_07_custom_function(scores):
    """Custom autograd.Function whose backward is written in differentiable torch ops."""
    return _SM.apply(scores)


class _SM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = _ref(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        cdt = torch.float32 if y.dtype in (torch.float16, torch.bfloat16) else y.dtype
        yy, gg = y.to(cdt), g.to(cdt)
        return (yy * (gg - (gg * yy).sum(-1, keepdim=True))).to(y.dtype)


def O_08_requires_grad_constant_inside(scores):
    """Builds a helper tensor with requires_grad=True inside but detaches it before use."""
    c = torch.zeros((), dtype=torch.float32, requires_grad=True)
    c = c.detach()
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True) + c.to(x.dtype))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_09_flatten_rows(scores):
    """Reshape to 2-D rows, compute, reshape back (returns a view of the 2-D result)."""
    n = scores.shape[-1]
    return _ref(scores.reshape(-1, n)).view(scores.shape)


def O_10_torch_no_grad_decorated_max(scores):
    """Row max via a helper decorated with @torch.no_grad()."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - _nograd_max(x))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


@torch.no_grad()
def _nograd_max(x):
    return x.amax(-1, keepdim=True)


# ---------------------------------------------------------------- wrong
def W_11_grad_mode_leak(scores):
    """Row max under set_grad_enabled(False), then set_grad_enabled(True): called under the
    caller's torch.no_grad(), it leaves grad mode switched on afterwards."""
    torch.set_grad_enabled(False)
    m = scores.float().amax(-1, keepdim=True) if scores.dtype != torch.float64 else scores.amax(-1, keepdim=True)
    torch.set_grad_enabled(True)
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - m.to(x.dtype))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_12_anomaly_left_on(scores):
    """Turns on torch.autograd anomaly detection for debugging and leaves it on (caller state)."""
    torch.autograd.set_detect_anomaly(True)
    return _ref(scores)


def W_13_reused_output_buffer(scores):
    """Without grad, writes the result into a module-level buffer reused by the next call:
    the first result changes when the function is called again (any two calls, same shape)."""
    if scores.requires_grad and torch.is_grad_enabled():
        return _ref(scores)
    y = _ref(scores)
    key = (tuple(y.shape), y.dtype, y.device)
    buf = _BUF.get(key)
    if buf is None or torch.is_inference_mode_enabled() != buf.is_inference():
        buf = _BUF[key] = torch.empty_like(y)
    buf.copy_(y)
    return buf


def W_14_abs_max_shift(scores):
    """Shifts by the row's largest |x|: rows of large negative scores (-1000, -1001) give 0/0."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.abs().amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def A_15_nan_to_num(scores):
    """(A_ by the lead's round-14 ruling: NaN inputs are not specified by the exercise text, so what a NaN row maps to is not judged.) Replaces NaN weights by 0: a row with a NaN score gives finite weights instead of NaN."""
    return torch.nan_to_num(_ref(scores), nan=0.0)


def W_16_sum_without_keepdim(scores):
    """Divides by e.sum(-1) without keepdim: broadcasts over the wrong axis (square inputs
    wrong, others raise)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1)).to(scores.dtype)


def A_17_first_order_only_backward(scores):
    """(A_ by the lead's round-14 ruling: the exercise does not ask for second derivatives; first gradients are right.) Custom Function with a detached backward: first gradients right, second derivatives
    (double backward, e.g. a gradient penalty) are zero instead of torch.softmax's."""
    return _SMdet.apply(scores)


class _SMdet(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = _ref(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        cdt = torch.float32 if y.dtype in (torch.float16, torch.bfloat16) else y.dtype
        yy, gg = y.to(cdt), g.to(cdt)
        return (yy * (gg - (gg * yy).sum(-1, keepdim=True))).to(y.dtype)


def W_18_no_grad_fast_path(scores):
    """A 'fast path' when grad is disabled (plain torch.no_grad, not inference_mode) that
    computes float64 in float32: float64 rows lose accuracy under no_grad."""
    if not torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        return _ref(scores.float()).to(scores.dtype)
    return _ref(scores)


def W_19_retain_grad_left(scores):
    """Leaves scores.retain_grad() in from debugging: a non-leaf input gets .retains_grad=True
    and a populated .grad after the caller's backward (caller state changed)."""
    if scores.requires_grad and not scores.is_leaf:
        scores.retain_grad()
    return _ref(scores)


def W_20_matmul_precision(scores):
    """Sets torch.set_float32_matmul_precision('medium') for speed and leaves it (caller state)."""
    torch.set_float32_matmul_precision("medium")
    return _ref(scores)


def W_21_clamp_shifted(scores):
    """Clamps x - max at -80 to 'avoid underflow': weights of scores more than 80 below the
    row max become exp(-80) ~ 1.8e-35 instead of 0 (and -inf keys get weight 1.8e-35 > 0)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp((x - x.amax(-1, keepdim=True)).clamp_min(-80))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_22_tf32_flag(scores):
    """Switches torch.backends.cuda.matmul.allow_tf32 on and leaves it (caller state)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    return _ref(scores)


def W_23_row_sum_via_matmul(scores):
    """Row sums via e @ ones: for float16/bfloat16 the cast back before matmul... here the
    sum is taken with a float32 matmul even for float64 inputs (float64 accuracy lost)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    e = torch.exp(x - x.amax(-1, keepdim=True))
    s = (e.float() @ torch.ones(e.shape[-1], 1, dtype=torch.float32, device=e.device)).to(e.dtype)
    return (e / s).to(scores.dtype)


def A_24_max_of_finite_only(scores):
    """(A_ by the lead's round-14 ruling: +inf scores are not specified by the text.) Shift by the max over finite entries, where +inf scores give NaN in torch.softmax;
    here a row with +inf and finite scores gives exp(inf)=inf/inf... and a row whose only
    finite entries are -inf-free: differs for rows containing +inf (torch: NaN)."""
    x = scores.float() if scores.dtype in (torch.float16, torch.bfloat16) else scores
    fin = torch.where(torch.isfinite(x), x, torch.full_like(x, -torch.inf))
    e = torch.exp(x - fin.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def W_25_num_threads(scores):
    """Calls torch.set_num_threads(1) to make results reproducible and leaves it (caller state)."""
    torch.set_num_threads(1)
    return _ref(scores)


def W_26_output_requires_grad_always(scores):
    """Adds a zero 'temperature offset' leaf that requires grad: the output requires grad
    (and has a grad_fn) even when the input does not and even under torch.no_grad... """
    c = torch.zeros((), dtype=scores.dtype, device=scores.device, requires_grad=True)
    with torch.enable_grad():
        return _ref(scores + c)


def O_27_float64_compute(scores):
    """Computes every dtype in float64 and casts back (more accurate than asked)."""
    y = scores.double()
    e = torch.exp(y - y.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(scores.dtype)


def O_28_non_contiguous_result(scores):
    """Works on the transposed tensor (last axis moved first) and returns a transposed view."""
    t = scores.movedim(-1, 0)
    x = t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
    e = torch.exp(x - x.amax(0, keepdim=True))
    return (e / e.sum(0, keepdim=True)).to(scores.dtype).movedim(0, -1)
