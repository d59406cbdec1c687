"""Round 13 red team (writer C, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round13/C/sols/ch06_learned_pe.py.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: the red team's snapshot accepted W_20 (the dropout scale rounded to float16),
W_23 (the scale rounded through bfloat16) and W_24 (the mask from decile draws: drops
ceil(10 p) / 10): the rates tried were 0.5 and 0.2, whose scales 2 and 1.25 are exact in
every format and at which the decile draw is exact. Now also 0.25 (scale 4/3, exact in
neither float16 nor bfloat16; the decile draw drops 0.3), on X of shape (8, 50, 16), checked
for the share dropped (5.5 standard errors: 3%) and for the exact scale, with a message of
its own for a rounded scale. A_21_index_on_cpu (positions built on the CPU) is not proven
wrong on a CPU-only run; the check's setup uses book.try_gpu(), so a GPU run would show it.
"""
# flake8: noqa
import math
import torch
from torch import nn
import torch.nn.functional as F
CHECK = "check_learned_positional_encoding"


class C_01_reference(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class C_02_embedding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise IndexError(f"length {n} > max_len {self.max_len}")
        pos = torch.arange(n, device=X.device)
        return self.dropout(X + self.emb(pos)[None])


class O_03_manual_dropout(nn.Module):
    """Inverted dropout by hand from torch.rand_like (global generator): right."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[0]:
            raise ValueError("too long")
        Y = X + self.P[: X.shape[1]]
        if self.training and self.p > 0:
            keep = torch.rand_like(Y) >= self.p
            Y = Y * keep / (1 - self.p)
        return Y


class O_04_parameter_list(nn.Module):
    """One nn.Parameter per position (ParameterList), stacked at each call: right."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(num_hiddens)) for _ in range(max_len)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > len(self.ps):
            raise ValueError("too long")
        return self.dropout(X + torch.stack(list(self.ps[:n]))[None])


def _base(cls_forward):
    class K(nn.Module):
        def __init__(self, num_hiddens, dropout, max_len=1000):
            super().__init__()
            self.p = dropout
            self.dropout = nn.Dropout(dropout)
            self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        forward = cls_forward
    return K


class W_05_mask_shared_over_batch(nn.Module):
    """Dropout mask drawn once per (position, feature) and shared by every example in the batch:
    examples are not dropped independently (batch >= 2, training mode, p in (0, 1))."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand(1, *Y.shape[1:], device=Y.device, dtype=Y.dtype) >= self.p)
            Y = Y * keep / (1 - self.p)
        return Y


class W_06_keep_prob_is_p(nn.Module):
    """Keeps each entry with probability p (not 1 - p), scaling by 1/(1-p): right in
    distribution only at p = 0.5; at p = 0.1 it zeroes 90%."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            keep = torch.rand_like(Y) < self.p if self.p < 1 else torch.zeros_like(Y, dtype=torch.bool)
            Y = Y * keep / (1 - self.p) if self.p < 1 else Y * 0
        return Y


class W_07_length_check_on_batch_axis(nn.Module):
    """Checks X.shape[0] (batch) against max_len: raises for batch > max_len with a legal length
    (e.g. max_len=4, batch=8, n=3)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if len(X) > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_08_same_mask_every_call(nn.Module):
    """Forks the RNG and seeds it from torch.initial_seed() in forward 'for reproducibility':
    every training call draws the same mask."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch.initial_seed())
            return self.dropout(Y)


class W_09_mask_cached_per_shape(nn.Module):
    """Draws the dropout mask once per shape and reuses it at every later call (training mode,
    second call with the same shape)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self._masks = {}

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if not self.training or self.p == 0:
            return Y
        key = tuple(Y.shape)
        if key not in self._masks:
            self._masks[key] = F.dropout(torch.ones_like(Y), self.p, True)
        return Y * self._masks[key].to(Y.dtype)


class W_10_alpha_dropout(nn.Module):
    """nn.AlphaDropout at the rate given: dropped entries are not 0 and kept ones are affinely
    transformed (training mode, p > 0)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.AlphaDropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_11_mask_shared_over_positions(nn.Module):
    """Mask (batch, 1, d): one draw per feature per example, shared over positions."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            if self.p >= 1:
                return Y * 0
            keep = torch.rand(Y.shape[0], 1, Y.shape[2], device=Y.device, dtype=Y.dtype) >= self.p
            Y = Y * keep / (1 - self.p)
        return Y


class W_12_dropout2d_features(nn.Module):
    """F.dropout1d on (batch, n, d) treated as channels = n: drops whole positions."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return F.dropout1d(X + self.P[:, : X.shape[1]], self.p, self.training)


class W_13_eq_max_len_raises(nn.Module):
    """Off by one: raises for n == max_len (1000 positions with the default do not fit)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_14_rows_right_aligned(nn.Module):
    """Uses the last n rows of the table: position i's vector depends on n."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, self.P.shape[1] - n:])


class W_15_dropout_skipped_first_calls(nn.Module):
    """'Warm-up': no dropout for the first 10 training calls."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.calls = 0

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training:
            self.calls += 1
            if self.calls <= 10:
                return Y
        return self.dropout(Y)


class W_16_broadcast_positions_on_batch(nn.Module):
    """Table (max_len, d) added as P[:n, None, :]: only broadcasts right when batch == n or
    n == 1; for batch == n example b gets p_b at every position."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + self.P[: X.shape[1], None, :])


class W_17_lru_shared_table(nn.Module):
    """Instances with the same (max_len, num_hiddens) share one Parameter (cached factory)."""
    _tables = {}

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        key = (max_len, num_hiddens)
        if key not in W_17_lru_shared_table._tables:
            W_17_lru_shared_table._tables[key] = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = W_17_lru_shared_table._tables[key]

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_18_dropout_p_not_rescaled(nn.Module):
    """Dropout by hand without the 1/(1-p) rescale: kept entries are X + P, not (X + P)/(1-p)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            Y = Y * (torch.rand_like(Y) >= self.p)
        return Y


class W_19_init_uniform_01(nn.Module):
    """Table from torch.rand (uniform [0, 1)): every vector has mean 0.5 (a shared offset on all
    positions) and std 0.29, not std ~1 around 0."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.rand(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_20_dropout_mask_in_float16(nn.Module):
    """Mask scaled in float16 then multiplied: for float64 X, 1/(1-p) rounded to float16 (p=0.1:
    1.111 vs 1.1111111) -- kept entries off by 1e-4 relative."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            if self.p >= 1:
                return Y * 0
            m = (torch.rand_like(Y) >= self.p).half() / (1 - self.p)
            Y = Y * m.to(Y.dtype)
        return Y


class A_21_index_on_cpu(nn.Module):
    """nn.Embedding with position ids built on the CPU: crashes on a CUDA model (device). A_: no
    GPU in this session and the meta device does not show it, so not proven here."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise IndexError("too long")
        return self.dropout(X + self.emb(torch.arange(n))[None])


class W_22_dropout_in_float32(nn.Module):
    """Dropout done on (X + P).float() and cast back: a .double() model in training mode gets
    X + P rounded to float32 (digits past 1e-7 lost)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        return F.dropout(Y.float(), self.p, self.training).to(Y.dtype)


class W_23_scale_bfloat16(nn.Module):
    """Inverse keep rate rounded through bfloat16 ('mixed precision'): p = 0.1 scales kept
    entries by 1.109375 instead of 1.1111 (0.16% off); exact at p = 0.5 and 0.2 (and 0.75)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            if self.p >= 1:
                return Y * 0
            scale = float(torch.tensor(1 / (1 - self.p), dtype=torch.bfloat16))
            Y = Y * (torch.rand_like(Y) >= self.p) * scale
        return Y


class W_24_mask_from_decile_uniforms(nn.Module):
    """Mask from torch.randint(0, 10) 'cheaper than float uniforms': keep iff draw >= 10 * p,
    so the drop rate is ceil(10 p) / 10: right for p = 0.5 and 0.2, but p = 0.25 drops 30%
    (and scales by 1/0.75 the 70% it keeps)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            if self.p >= 1:
                return Y * 0
            keep = torch.randint(0, 10, Y.shape, device=Y.device) >= 10 * self.p
            Y = Y * keep / (1 - self.p)
        return Y
