"""Round 14 red team (writer A, issue 12), ch01_topk: wrong (W_), right (C_), odd but right (O_)
and accepted (A_) solutions of check_topk_attention_pool written from the exercise text alone; copied from
/work/redteam/round14/A/sols/ch01_topk.py.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).

Holes fixed (book/checks/ch01.py, _topk_cases_round14): W_08 (mask from scores recomputed in
float64): queries [1, 1] and [0, 1] and keys [0.1, 0.2], [0.3, 0], [0, 0], k=1, dot scores 0.1 + 0.2
and 0.3 one number in float32 and in bfloat16 but not in float64 (both keys must be kept),
with the hint from _higher_precision_ties; W_12 (.view on the scores): a score returned
transposed, (keys @ queries.T).T, not contiguous, and a view_hint in _fill_hint that names
the score's tensor. W_13 (float32 path under no_grad), W_14 (grad mode left on), W_15
(TF32 flag), W_16 (matmul precision), W_22 (outputs requiring grad under no_grad) and W_23
(anomaly detection) are rejected by the lead's _core changes of round 14. Renamed A_ by
the lead's rulings: A_18 (NaN weights mapped to 0: NaN inputs are not specified), A_19
(once_differentiable backward: second derivatives are not asked for); A_11 is the writer's
own A_.
"""
import torch

CHECK = "check_topk_attention_pool"


def _sm(s):
    cdt = torch.float32 if s.dtype in (torch.float16, torch.bfloat16) else s.dtype
    x = s.to(cdt)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    return (e / e.sum(-1, keepdim=True)).to(s.dtype)


def _pool(scores, values, k):
    kth = scores.topk(k, dim=-1).values[:, -1:]
    masked = scores.masked_fill(scores < kth, float("-inf"))
    w = torch.softmax(masked, dim=-1)
    return w @ values, w


def C_01_reference(queries, keys, values, score, k):
    return _pool(score(queries, keys), values, k)


def C_02_sort_threshold(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.sort(dim=-1, descending=True).values[:, k - 1 : k]
    w = torch.softmax(torch.where(s >= kth, s, torch.full_like(s, -torch.inf)), dim=-1)
    return w @ values, w


def O_03_mask_under_no_grad(queries, keys, values, score, k):
    """Threshold found under no_grad (comparisons carry no gradient anyway)."""
    s = score(queries, keys)
    with torch.no_grad():
        keep = s >= s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def O_04_renormalise_after_softmax(queries, keys, values, score, k):
    """Softmax of all scores, zero the dropped ones, renormalise (same weights)."""
    s = score(queries, keys)
    keep = s >= s.topk(k, dim=-1).values[:, -1:]
    x = s.float() if s.dtype in (torch.float16, torch.bfloat16) else s
    m = x.masked_fill(~keep, float("-inf")).amax(-1, keepdim=True)
    e = torch.exp(x - m) * keep
    w = (e / e.sum(-1, keepdim=True)).to(s.dtype)
    return w @ values, w


def O_05_inference_mode_index(queries, keys, values, score, k):
    """Mask computed in inference_mode from detached inputs, then cloned out."""
    with torch.inference_mode():
        s0 = score(queries.detach(), keys.detach())
        keep = s0 >= s0.topk(k, dim=-1).values[:, -1:]
    keep = keep.clone()
    s = score(queries, keys)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def O_06_kthvalue(queries, keys, values, score, k):
    """k-th highest as the (n - k + 1)-th smallest via kthvalue (float32 compute for halves)."""
    s = score(queries, keys)
    n = s.shape[-1]
    x = s.float() if s.dtype in (torch.float16, torch.bfloat16) else s
    kth = x.kthvalue(n - k + 1, dim=-1, keepdim=True).values.to(s.dtype)
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def O_07_manual_softmax(queries, keys, values, score, k):
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.masked_fill(s < kth, float("-inf")))
    return w @ values, w


# ---------------------------------------------------------------- wrong
def W_08_mask_from_float64_scores(queries, keys, values, score, k):
    """Finds the kept keys from score(q.double(), k.double()): keys whose scores tie in the
    input dtype (float32 rounding) but not in float64 are dropped, e.g. dot scores 0.1+0.2."""
    s = score(queries, keys)
    s64 = score(queries.detach().double(), keys.detach().double())
    keep = s64 >= s64.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def W_09_compare_in_float32(queries, keys, values, score, k):
    """Compares the scores with the k-th after casting to float32: float64 scores that differ
    by less than float32 resolution count as ties and are kept."""
    s = score(queries, keys)
    s32 = s.detach().float()
    keep = s32 >= s32.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def W_10_compare_in_half(queries, keys, values, score, k):
    """Compares in float16 for speed: float32 scores that differ below float16 resolution
    (e.g. 1000.0 and 1000.25) tie and both are kept."""
    s = score(queries, keys)
    sh = s.detach().half()
    keep = sh >= sh.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def A_11_inplace_fill(queries, keys, values, score, k):
    """(A_: shown benign -- an expanded score has identical rows, so the shared writes agree;
    writing into the score's result is accepted on purpose.) masked_fill_ in place: raises when the score returns a
    broadcast (expanded) tensor, e.g. a query-independent score zeros(1, n).expand(q, n)."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    s.masked_fill_(s < kth, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ values, w


def W_12_view_scores(queries, keys, values, score, k):
    """Uses .view on the scores: raises when the score returns a non-contiguous tensor
    (e.g. (keys @ queries.T).T)."""
    s = score(queries, keys)
    q, n = s.shape
    flat = s.view(-1)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = torch.softmax(flat.view(q, n).masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def W_13_no_grad_fast_path(queries, keys, values, score, k):
    """Under plain torch.no_grad (not inference_mode) a 'fast path' pools in float32, so
    float64 inputs lose float64 accuracy there."""
    if not torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        o, w = _pool(score(queries.float(), keys.float()), values.float(), k)
        return o.to(values.dtype), w.to(values.dtype)
    return _pool(score(queries, keys), values, k)


def W_14_grad_mode_leak(queries, keys, values, score, k):
    """Mask under set_grad_enabled(False) ... set_grad_enabled(True): under the caller's
    torch.no_grad it leaves grad mode on afterwards."""
    s = score(queries, keys)
    torch.set_grad_enabled(False)
    keep = s >= s.topk(k, dim=-1).values[:, -1:]
    torch.set_grad_enabled(True)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    return w @ values, w


def W_15_tf32_left_on(queries, keys, values, score, k):
    """Turns TF32 matmuls on for speed and leaves the global flag changed (caller state;
    on an Ampere+ GPU every later float32 matmul of the caller loses precision)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    return _pool(score(queries, keys), values, k)


def W_16_matmul_precision(queries, keys, values, score, k):
    """torch.set_float32_matmul_precision('medium') left changed (caller state)."""
    torch.set_float32_matmul_precision("medium")
    return _pool(score(queries, keys), values, k)


def W_17_k_minus_one_clamp(queries, keys, values, score, k):
    """Clamps k to num_keys - 1 'to be safe': with k == num_keys one key is dropped."""
    s = score(queries, keys)
    k = min(k, s.shape[-1] - 1) if s.shape[-1] > 1 else k
    return _pool(s, values, k)


def A_18_nan_to_num_weights(queries, keys, values, score, k):
    """(A_ by the lead's round-14 ruling: NaN inputs are not specified by the exercise text, so what a NaN row maps to is not judged.) nan_to_num on the weights: a query whose scores are NaN gets zero weights instead of
    NaN (hides the error)."""
    s = score(queries, keys)
    o, w = _pool(s, values, k)
    w = torch.nan_to_num(w, nan=0.0)
    return w @ values, w


def A_19_double_backward_lost(queries, keys, values, score, k):
    """(A_ by the lead's round-14 ruling: the exercise does not ask for second derivatives; first gradients are right.) Weights through a once_differentiable softmax: first gradients right, second
    derivatives raise/are lost."""
    s = score(queries, keys)
    kth = s.topk(k, dim=-1).values[:, -1:]
    w = _SMdet.apply(s.masked_fill(s < kth, float("-inf")))
    return w @ values, w


class _SMdet(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = _sm(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return y * (g - (g * y).sum(-1, keepdim=True))


def W_20_sorted_k_unique(queries, keys, values, score, k):
    """k-th highest among the *distinct* scores (unique): with ties among the top scores,
    more than the allowed keys are kept (e.g. scores [3, 3, 2], k=2 keeps all three)."""
    s = score(queries, keys)
    rows = []
    for r in s.detach():
        u = torch.unique(r, sorted=True).flip(0)
        rows.append(u[min(k, len(u)) - 1])
    kth = torch.stack(rows)[:, None]
    w = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=-1)
    return w @ values, w


def W_21_values_inplace_restore_view(queries, keys, values, score, k):
    """Returns outputs that are a view into a buffer shared across calls (no-grad only): the
    first call's outputs change after a second call."""
    o, w = _pool(score(queries, keys), values, k)
    if o.requires_grad or torch.is_inference_mode_enabled():
        return o, w
    key = (tuple(o.shape), o.dtype)
    buf = _BUF.setdefault(key, torch.empty_like(o))
    buf.copy_(o)
    return buf, w


_BUF = {}


def W_22_output_requires_grad_always(queries, keys, values, score, k):
    """Adds a zero leaf that requires grad: outputs require grad and build a graph even when
    no input requires grad / under the caller's torch.no_grad."""
    c = torch.zeros((), dtype=values.dtype, device=values.device, requires_grad=True)
    with torch.enable_grad():
        o, w = _pool(score(queries, keys), values + c, k)
    return o, w


def W_23_anomaly_left_on(queries, keys, values, score, k):
    """torch.autograd.set_detect_anomaly(True) left on from debugging (caller state)."""
    torch.autograd.set_detect_anomaly(True)
    r = _pool(score(queries, keys), values, k)
    return r


def O_24_softmax_in_float64(queries, keys, values, score, k):
    """Scores and mask in the input dtype; softmax and pooling in float64, cast back."""
    s = score(queries, keys)
    keep = s >= s.topk(k, dim=-1).values[:, -1:]
    w = _sm(s.double().masked_fill(~keep, float("-inf")))
    return (w @ values.double()).to(values.dtype), w.to(values.dtype)


def O_25_transposed_weights(queries, keys, values, score, k):
    """Builds the weights key-major and returns a transposed (non-contiguous) view."""
    s = score(queries, keys).T  # (n, q)
    kth = s.topk(k, dim=0).values[-1:, :]
    wT = torch.softmax(s.masked_fill(s < kth, float("-inf")), dim=0)
    return (values.T @ wT).T, wT.T
