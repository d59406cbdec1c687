"""Round 10 red team (writer D, issue 12), ch11_online: online_softmax_attention (exercise 11.1).
Wrong (W_), right (C_), odd but right (O_) and against-the-wording (S_) solutions written
from the exercise text alone; copied from /work/redteam/round10/D/sols/ch11_online.py with
the names W01_x written W_01_x. Wrong ones the checker accepts on purpose are named A_
(not tested), with the reason beside them. tests/test_checks_redteam.py runs every W_
entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
import math
import torch

CHECK = "check_online_softmax_attention"
CHECK_MOD = "book.checks.ch11"


def _wd(dt):
    return torch.float64 if dt == torch.float64 else torch.float32


def _online(Q, K, V, block_size, causal=False, init_m=float("-inf"), fill=float("-inf"),
            full_mask=False, rev=False, shift="running"):
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    scale = 1 / math.sqrt(d)
    mx = torch.full((b, m, 1), init_m, dtype=wd)
    l = torch.zeros(b, m, 1, dtype=wd)
    acc = torch.zeros(b, m, v.shape[-1], dtype=wd)
    qi = torch.arange(m)[:, None]
    if full_mask and causal:
        M = torch.ones(m, n, dtype=torch.bool).tril()
    starts = list(range(0, n, block_size))
    if rev:
        starts = starts[::-1]
    m0 = None
    for s in starts:
        kb, vb = k[:, s:s + block_size], v[:, s:s + block_size]
        sc = q @ kb.transpose(1, 2) * scale
        if causal:
            if full_mask:
                sc = sc.masked_fill(~M[:, s:s + block_size], fill)
            else:
                kj = torch.arange(s, s + kb.shape[1])[None, :]
                sc = sc.masked_fill(kj > qi, fill)
        if shift == "first":
            if m0 is None:
                m0 = sc.amax(-1, keepdim=True)
            p = (sc - m0).exp()
            l = l + p.sum(-1, keepdim=True)
            acc = acc + p @ vb
            continue
        if shift == "perbatch":
            bm = sc.amax(dim=(-2, -1), keepdim=True).expand(b, m, 1)
        else:
            bm = sc.amax(-1, keepdim=True)
        new = torch.maximum(mx, bm)
        alpha = (mx - new).exp()
        p = (sc - new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ vb
        mx = new
    return (acc / l).to(dt)


def C_01_reference(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal)


def W_16_reverse_block_order_nan_in_causal(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, rev=True)


# Was O03 (renamed W_27: W_03 is taken): in-place accumulators (acc.mul_(alpha),
# sc.sub_(new).exp_()) give the right forward, but backward() fails (a tensor autograd saved
# was overwritten). Exercise 11.1 now says that the function must be differentiable and
# that the checker runs backward(): wrong.
def W_27_inplace_accumulators_was_O03(Q, K, V, block_size, causal=False):
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd) / math.sqrt(Q.shape[-1]), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    mx = torch.full((b, m, 1), float("-inf"), dtype=wd)
    l = torch.zeros(b, m, 1, dtype=wd)
    acc = torch.zeros(b, m, v.shape[-1], dtype=wd)
    for s in range(0, n, block_size):
        sc = q @ k[:, s:s + block_size].transpose(1, 2)
        if causal:
            kj = torch.arange(s, min(s + block_size, n))
            sc.masked_fill_(kj[None, :] > torch.arange(m)[:, None], float("-inf"))
        new = torch.maximum(mx, sc.amax(-1, keepdim=True))
        alpha = (mx - new).exp_()
        sc.sub_(new).exp_()
        l.mul_(alpha).add_(sc.sum(-1, keepdim=True))
        acc.mul_(alpha).add_(sc @ v[:, s:s + block_size])
        mx = new
    return acc.div_(l).to(dt)


def W_01_full_bool_causal_mask(Q, K, V, block_size, causal=False):
    # one (m, n) boolean tril mask built once, sliced per block
    return _online(Q, K, V, block_size, causal, full_mask=True)


def W_02_shift_by_first_block_max(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, shift="first")


def W_03_max_per_batch_element_over_queries(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, shift="perbatch")


def W_04_init_max_minus_1e4(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, init_m=-1e4)


def O_05_fill_finfo_min(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, block_size, causal, fill=torch.finfo(torch.float32).min)


def W_06_drop_partial_last_block(Q, K, V, block_size, causal=False):
    n = K.shape[1]
    if n > block_size and n % block_size:
        keep = n - n % block_size
        return _online(Q, K[:, :keep], V[:, :keep], block_size, causal)
    return _online(Q, K, V, block_size, causal)


def W_07_view_flatten(Q, K, V, block_size, causal=False):
    b, m, d = Q.shape
    Qv = Q.view(b * m, d).view(b, m, d)
    Kv = K.view(-1, d).view(K.shape)
    return _online(Qv, Kv, V, block_size, causal)


def W_08_scale_by_value_dim(Q, K, V, block_size, causal=False):
    return _online(Q * math.sqrt(Q.shape[-1] / V.shape[-1]), K, V, block_size, causal)


def O_09_causal_ge_i_plus_1_with_where_guard(Q, K, V, block_size, causal=False):
    # causal compares local block index with query index (forgets block start) when
    # block_size >= queries... implemented as kj = arange(len block)
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    mx = torch.full((b, m, 1), float("-inf"), dtype=wd)
    l = torch.zeros(b, m, 1, dtype=wd)
    acc = torch.zeros(b, m, v.shape[-1], dtype=wd)
    for s in range(0, n, block_size):
        sc = q @ k[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            kj = torch.arange(s, s + sc.shape[-1])
            sc = sc.masked_fill(kj[None, :] >= torch.arange(1, m + 1)[:, None] + (s > 0) * 0,
                                float("-inf"))
        new = torch.maximum(mx, sc.amax(-1, keepdim=True))
        new_safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        alpha = (mx - new_safe).exp()
        p = (sc - new_safe).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, s:s + block_size]
        mx = new
    return (acc / l).to(dt)


def W_10_half_accumulate_in_half_for_bf16_via_f16(Q, K, V, block_size, causal=False):
    if Q.dtype == torch.bfloat16:
        return _online(Q.half(), K.half(), V.half(), block_size, causal).bfloat16()
    return C_01_reference(Q, K, V, block_size, causal)


def W_11_detach_running_max_and_scores(Q, K, V, block_size, causal=False):
    # "the max does not matter for the gradient": detach the scores for the shift and
    # also the weights p
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    mx = torch.full((b, m, 1), float("-inf"), dtype=wd)
    l = torch.zeros(b, m, 1, dtype=wd)
    acc = torch.zeros(b, m, v.shape[-1], dtype=wd)
    for s in range(0, n, block_size):
        with torch.no_grad():
            sc = q @ k[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
            if causal:
                kj = torch.arange(s, s + sc.shape[-1])
                sc = sc.masked_fill(kj[None, :] > torch.arange(m)[:, None], float("-inf"))
            new = torch.maximum(mx, sc.amax(-1, keepdim=True))
            alpha = (mx - new).exp()
            p = (sc - new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, s:s + block_size]
        mx = new
    return (acc / l).to(dt)


def W_12_mutates_Q_scale_inplace(Q, K, V, block_size, causal=False):
    with torch.no_grad():
        Qs = Q.mul_(1.0) if Q.requires_grad else Q.mul_(1 / math.sqrt(Q.shape[-1]))
    if Q.requires_grad:
        return C_01_reference(Q, K, V, block_size, causal)
    out = _online(Qs * math.sqrt(Q.shape[-1]), K, V, block_size, causal)
    return out


def W_13_nan_to_num_alpha(Q, K, V, block_size, causal=False):
    # alpha = exp(-inf - -inf) = NaN for rows not started: fix with nan_to_num, but the
    # initial max is 0 (l, acc start at zero so it "does not matter")
    return _online(Q, K, V, block_size, causal, init_m=0.0)


# Against the wording, not tested: it uses blocks of 64 keys when asked for more. Its memory
# is below the budget (smaller blocks), and telling it would need a lower bound on memory.
def S_14_block_size_capped_at_64(Q, K, V, block_size, causal=False):
    return _online(Q, K, V, min(block_size, 64), causal)


def W_15_single_key_special_case_returns_V_alias(Q, K, V, block_size, causal=False):
    if K.shape[1] == 1:
        return V.expand(Q.shape[0], Q.shape[1], V.shape[-1])
    return C_01_reference(Q, K, V, block_size, causal)


def O_17_logsumexp_merge(Q, K, V, block_size, causal=False):
    # keep a running log-sum-exp and a normalised output; merge with logaddexp
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    lse = torch.full((b, m, 1), float("-inf"), dtype=wd)
    out = torch.zeros(b, m, v.shape[-1], dtype=wd)
    for s in range(0, n, block_size):
        sc = q @ k[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            kj = torch.arange(s, s + sc.shape[-1])
            sc = sc.masked_fill(kj[None, :] > torch.arange(m)[:, None], float("-inf"))
        blse = torch.logsumexp(sc, -1, keepdim=True)
        new = torch.logaddexp(lse, blse)
        w_old = torch.where(torch.isinf(new), torch.zeros_like(new), (lse - new).exp())
        w_blk = torch.where(torch.isinf(blse), torch.zeros_like(blse), (blse - new).exp())
        pb = torch.softmax(sc, -1).nan_to_num(0.0) if causal else torch.softmax(sc, -1)
        out = out * w_old + w_blk * (pb @ v[:, s:s + block_size])
        lse = new
    return out.to(dt)


def W_18_mask_cache_keyed_on_block_only(Q, K, V, block_size, causal=False,
                                       _c={}):
    # caches each block's causal mask keyed on (block start, block size): ignores m
    dt = Q.dtype
    wd = _wd(dt)
    q, k, v = Q.to(wd), K.to(wd), V.to(wd)
    b, m, d = q.shape
    n = k.shape[1]
    mx = torch.full((b, m, 1), float("-inf"), dtype=wd)
    l = torch.zeros(b, m, 1, dtype=wd)
    acc = torch.zeros(b, m, v.shape[-1], dtype=wd)
    for s in range(0, n, block_size):
        sc = q @ k[:, s:s + block_size].transpose(1, 2) / math.sqrt(d)
        if causal:
            key = (s, block_size)
            if key not in _c or _c[key].shape[0] < m:
                _c[key] = torch.arange(s, s + block_size)[None, :] > torch.arange(m)[:, None]
            sc = sc.masked_fill(_c[key][:m, :sc.shape[-1]], float("-inf"))
        new = torch.maximum(mx, sc.amax(-1, keepdim=True))
        alpha = (mx - new).exp()
        p = (sc - new).exp()
        l = l * alpha + p.sum(-1, keepdim=True)
        acc = acc * alpha + p @ v[:, s:s + block_size]
        mx = new
    return (acc / l).to(dt)


def W_19_half_shift_first_block(Q, K, V, block_size, causal=False):
    if Q.dtype in (torch.float16, torch.bfloat16):
        return _online(Q, K, V, block_size, causal, shift="first")
    return C_01_reference(Q, K, V, block_size, causal)


def W_20_detach_in_half(Q, K, V, block_size, causal=False):
    if Q.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(Q.detach(), K.detach(), V.detach(), block_size, causal)
    return C_01_reference(Q, K, V, block_size, causal)


# Was S21 (against the wording: not blockwise for float16 and bfloat16): the checker now
# measures the peak memory on a float16 input too (512 queries and keys), so it is refused.
def W_21_full_softmax_for_half(Q, K, V, block_size, causal=False):
    # half inputs: just do full attention in float32 (not blockwise)
    if Q.dtype in (torch.float16, torch.bfloat16):
        q, k, v = Q.float(), K.float(), V.float()
        s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
        return (torch.softmax(s, -1) @ v).to(Q.dtype)
    return C_01_reference(Q, K, V, block_size, causal)


def W_22_causal_ignored_for_half(Q, K, V, block_size, causal=False):
    if Q.dtype in (torch.float16, torch.bfloat16):
        return C_01_reference(Q, K, V, block_size, False)
    return C_01_reference(Q, K, V, block_size, causal)


def O_23_float64_separate_path(Q, K, V, block_size, causal=False):
    # float64 path written separately, with j < i (diagonal hidden) -> NaN row 0 ... uses
    # where guard so row 0 gets 0
    if Q.dtype == torch.float64 and causal:
        n = K.shape[1]
        out = C_01_reference(Q[:, 1:], K, V, block_size, False)  # placeholder
        return O_09_causal_ge_i_plus_1_with_where_guard(Q, K, V, block_size, True)
    return C_01_reference(Q, K, V, block_size, causal)


def W_24_single_key_returns_V_copy_no_grad(Q, K, V, block_size, causal=False):
    if K.shape[1] == 1:
        return V.detach().expand(Q.shape[0], Q.shape[1], V.shape[-1]).clone()
    return C_01_reference(Q, K, V, block_size, causal)


def W_25_scale_rounded_in_float16(Q, K, V, block_size, causal=False):
    # sqrt(d) computed as a float16 tensor (rounded), for every dtype
    d = float(torch.tensor(Q.shape[-1], dtype=torch.float16).sqrt())
    return _online(Q * (math.sqrt(Q.shape[-1]) / d), K, V, block_size, causal)


def W_26_output_scaled_1_0002(Q, K, V, block_size, causal=False):
    return C_01_reference(Q * 1.0002, K, V, block_size, causal)
