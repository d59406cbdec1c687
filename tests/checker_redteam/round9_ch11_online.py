"""Round 9 red team (writer D, issue 12), ch11_online: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round9/D/sols/ch11_online.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch
from torch.nn import functional as F

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _core(Q, K, V, block_size, causal=False, *, wt=None, order=None, init_m=None,
          strict=False, scale_dim=None, mask_fill=None):
    b, m, d = Q.shape
    n = K.shape[1]
    wt = wt or torch.promote_types(Q.dtype, torch.float32)
    q = Q.to(wt) / math.sqrt(scale_dim if scale_dim is not None else d)
    mx = torch.full((b, m, 1), float("-inf") if init_m is None else init_m, dtype=wt,
                    device=Q.device)
    l = torch.zeros((b, m, 1), dtype=wt, device=Q.device)
    acc = torch.zeros((b, m, V.shape[-1]), dtype=wt, device=Q.device)
    starts = list(range(0, n, block_size))
    if order == "reverse":
        starts = starts[::-1]
    rows = torch.arange(m, device=Q.device)[:, None]
    for s in starts:
        k = K[:, s:s + block_size].to(wt)
        v = V[:, s:s + block_size].to(wt)
        S = q @ k.transpose(1, 2)
        if causal:
            cols = torch.arange(s, s + k.shape[1], device=Q.device)[None, :]
            hide = cols >= rows if strict else cols > rows
            S = S.masked_fill(hide, float("-inf") if mask_fill is None else mask_fill)
        m_new = torch.maximum(mx, S.amax(-1, keepdim=True))
        p = torch.exp(S - m_new)
        c = torch.exp(mx - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        acc = acc * c + p @ v
        mx = m_new
    return (acc / l).to(Q.dtype)


def C_01_reference(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal)


def O_02_split_and_skip_future_blocks(Q, K, V, block_size, causal=False):
    """torch.split over the keys; with causal, blocks wholly in the future of every query
    are skipped, and a first-block-finite init (finfo.min)."""
    b, m, d = Q.shape
    wt = torch.promote_types(Q.dtype, torch.float32)
    q = Q.to(wt) * (1.0 / math.sqrt(d))
    mx = torch.full((b, m, 1), torch.finfo(wt).min, dtype=wt)
    l = torch.zeros((b, m, 1), dtype=wt)
    acc = torch.zeros((b, m, V.shape[-1]), dtype=wt)
    s = 0
    for k, v in zip(K.split(block_size, 1), V.split(block_size, 1)):
        if causal and s > m - 1:
            break
        S = torch.einsum("bmd,bnd->bmn", q, k.to(wt))
        if causal:
            S = S.masked_fill(torch.arange(s, s + k.shape[1])[None, :] >
                              torch.arange(m)[:, None], float("-inf"))
        m_new = torch.maximum(mx, S.amax(-1, keepdim=True))
        p = (S - m_new).exp()
        c = (mx - m_new).exp()
        l = c * l + p.sum(-1, keepdim=True)
        acc = c * acc + torch.einsum("bmn,bnv->bmv", p, v.to(wt))
        mx = m_new
        s += k.shape[1]
    return (acc / l).to(Q.dtype)


def S_01_two_pass(Q, K, V, block_size, causal=False):
    """First pass over the blocks for the exact max and sum, second pass for the weighted
    sum: right output, but not the one-pass running statistics the exercise asks for."""
    b, m, d = Q.shape
    n = K.shape[1]
    wt = torch.promote_types(Q.dtype, torch.float32)
    q = Q.to(wt) / math.sqrt(d)
    rows = torch.arange(m)[:, None]

    def block(s):
        S = q @ K[:, s:s + block_size].to(wt).transpose(1, 2)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > rows, float("-inf"))
        return S
    mx = torch.full((b, m, 1), float("-inf"), dtype=wt)
    for s in range(0, n, block_size):
        mx = torch.maximum(mx, block(s).amax(-1, keepdim=True))
    l = torch.zeros((b, m, 1), dtype=wt)
    acc = torch.zeros((b, m, V.shape[-1]), dtype=wt)
    for s in range(0, n, block_size):
        p = (block(s) - mx).exp()
        l = l + p.sum(-1, keepdim=True)
        acc = acc + p @ V[:, s:s + block_size].to(wt)
    return (acc / l).to(Q.dtype)


def W_01_no_grad(Q, K, V, block_size, causal=False):
    """Right values under torch.no_grad(): no gradient flows to Q, K or V."""
    with torch.no_grad():
        return _core(Q, K, V, block_size, causal)


def W_02_reverse_blocks(Q, K, V, block_size, causal=False):
    """Visits blocks last to first: with causal, the first block seen by early queries is
    fully hidden: exp(-inf - -inf) = NaN."""
    return _core(Q, K, V, block_size, causal, order="reverse")


def W_03_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, scale_dim=V.shape[-1])


def W_04_strict_causal(Q, K, V, block_size, causal=False):
    """Query i sees j < i; query 0 gets no key: it returns ... (guards l == 0 by 1)."""
    b, m, d = Q.shape
    out = _core(Q, K, V, block_size, causal, strict=True)
    return torch.nan_to_num(out)


def W_05_scales_Q_in_place(Q, K, V, block_size, causal=False):
    if not Q.requires_grad:
        Q.div_(math.sqrt(Q.shape[-1]))
        return _core(Q, K, V, block_size, causal, scale_dim=1)
    return _core(Q, K, V, block_size, causal)


def W_06_drops_last_partial_block(Q, K, V, block_size, causal=False):
    n = K.shape[1]
    keep = max((n // block_size) * block_size, min(n, block_size))
    return _core(Q, K[:, :keep], V[:, :keep], block_size, causal)


def W_07_init_max_zero(Q, K, V, block_size, causal=False):
    """Running max starts at 0 instead of -inf: exp(S - 0) underflows for scores of -5000."""
    return _core(Q, K, V, block_size, causal, init_m=0.0)


def O_05_inplace_accumulators(Q, K, V, block_size, causal=False):
    """Updates the accumulators in place (acc.mul_, l.mul_): fine without gradients,
    breaks backward()."""
    b, m, d = Q.shape
    n = K.shape[1]
    wt = torch.promote_types(Q.dtype, torch.float32)
    q = Q.to(wt) / math.sqrt(d)
    mx = torch.full((b, m, 1), float("-inf"), dtype=wt)
    l = torch.zeros((b, m, 1), dtype=wt)
    acc = torch.zeros((b, m, V.shape[-1]), dtype=wt)
    rows = torch.arange(m)[:, None]
    for s in range(0, n, block_size):
        S = q @ K[:, s:s + block_size].to(wt).transpose(1, 2)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > rows, float("-inf"))
        m_new = torch.maximum(mx, S.amax(-1, keepdim=True))
        p = torch.exp(S - m_new)
        c = torch.exp(mx - m_new)
        l.mul_(c).add_(p.sum(-1, keepdim=True))
        acc.mul_(c).add_(p @ V[:, s:s + block_size].to(wt))
        mx = m_new
    return (acc / l).to(Q.dtype)


def W_10_float32_accum_float64(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal, wt=torch.float32)


def O_04_mask_with_finfo_min(Q, K, V, block_size, causal=False):
    return _core(Q, K, V, block_size, causal,
                 mask_fill=torch.finfo(torch.promote_types(Q.dtype, torch.float32)).min)


def S_02_one_block_when_short(Q, K, V, block_size, causal=False):
    """For a short key sequence (n <= 4 * block_size) does it in one block: full scores."""
    n = K.shape[1]
    if n <= 4 * block_size:
        return _core(Q, K, V, n, causal)
    return _core(Q, K, V, block_size, causal)


def W_13_float32_scale_tensor(Q, K, V, block_size, causal=False):
    """The scale as torch.tensor(d).rsqrt(), a float32 number: float64 inputs are scaled
    with float32 precision (errors ~1e-8 instead of ~1e-16)."""
    scale = torch.tensor(Q.shape[-1]).rsqrt()          # float32 0-dim tensor
    return _core(Q * scale, K, V, block_size, causal, scale_dim=1)


def W_14_rescale_under_no_grad(Q, K, V, block_size, causal=False):
    """The rescale factor exp(m - m_new) computed under no_grad ('bookkeeping'), while the
    block weights keep m_new attached: values right, gradients wrong."""
    b, m, d = Q.shape
    n = K.shape[1]
    wt = torch.promote_types(Q.dtype, torch.float32)
    q = Q.to(wt) / math.sqrt(d)
    mx = torch.full((b, m, 1), float("-inf"), dtype=wt)
    l = torch.zeros((b, m, 1), dtype=wt)
    acc = torch.zeros((b, m, V.shape[-1]), dtype=wt)
    rows = torch.arange(m)[:, None]
    for s in range(0, n, block_size):
        S = q @ K[:, s:s + block_size].to(wt).transpose(1, 2)
        if causal:
            S = S.masked_fill(torch.arange(s, s + S.shape[-1])[None, :] > rows, float("-inf"))
        m_new = torch.maximum(mx, S.amax(-1, keepdim=True))
        with torch.no_grad():
            c = torch.exp(mx - m_new)
        p = torch.exp(S - m_new)
        l = l * c + p.sum(-1, keepdim=True)
        acc = acc * c + p @ V[:, s:s + block_size].to(wt)
        mx = m_new
    return (acc / l).to(Q.dtype)


def W_15_single_key_returns_V_view(Q, K, V, block_size, causal=False):
    """Shortcut: with one key every weight is 1, so return V expanded (a stride-0 view of
    the input V, not a new tensor)."""
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1])
    return _core(Q, K, V, block_size, causal)
