"""Round 11 red team (writer B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Accepted in round 11, now rejected: W_08 (nn.Embedding(scale_grad_by_freq=True) looked
up with positions repeated over the batch: gradient 1/b of the true one), W_22 (P / b +
P.detach() * (1 - 1 / b): the same), W_21 (a hook clamping the table's gradient): the
gradient each trainable number receives is now compared with the reference's, in any
layout; W_07 (the fixed sinusoid plus a table started at 0), W_20 (F.normalize(P) *
sqrt(d)), W_24 (tanh(P)), W_25 (std 1 / sqrt(d), times sqrt(d) in forward): in eval mode
forward(X) - X must be the table's entries themselves. Messages: W_19 (a learnable gain on
X, started at 1) is told that X is scaled (after a change of the parameters); W_10
(nn.Embedding(sparse=True)) is told its gradient is sparse, which Adam refuses (it
crashed the checker). A_15 (no length check; with max_len = 1 a longer X silently
broadcasts the one vector) is accepted on purpose, see its comment. S_23 (X + P + b, b a
shared vector started at 0) is rejected (b gets a gradient no table entry gets), not
tested.
"""
# flake8: noqa
import math
import torch
from torch import nn
import torch.nn.functional as F

CHECK = "check_learned_positional_encoding"


def _check_len(n, max_len):
    if n > max_len:
        raise ValueError(f"sequence of length {n} is longer than max_len={max_len}")


class C_01_parameter_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class O_02_embedding(nn.Module):
    """nn.Embedding (initialised N(0, 1)) looked up with arange(n)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        pos = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.emb(pos))


class O_03_custom_dropout(nn.Module):
    """Own inverted dropout with torch.rand_like (a different random stream than nn.Dropout)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[0])
        Y = X + self.P[:X.shape[1]]
        if self.training and self.p > 0:
            keep = torch.rand_like(Y) >= self.p
            Y = Y * keep / (1 - self.p)
        return Y


# ---- wrong ---------------------------------------------------------------------------

class W_01_inplace_add_to_X(nn.Module):
    """X += P: the caller's X changes."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        X += self.P[:, :X.shape[1]]
        return self.dropout(X)


class W_02_dropout_on_P_only(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return X + self.dropout(self.P[:, :X.shape[1]])


class W_03_dropout1d_whole_positions(nn.Module):
    """nn.Dropout1d: drops whole positions (channels = axis 1), right rate, wrong pattern."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout1d(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_04_dropout_mask_shared_over_batch(nn.Module):
    """One dropout mask (1, n, d) for the whole batch."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        Y = X + self.P[:, :X.shape[1]]
        if self.training and self.p > 0:
            keep = torch.rand(1, *Y.shape[1:], device=Y.device) >= self.p
            Y = Y * keep / (1 - self.p)
        return Y


class W_05_clamped_positions_512(nn.Module):
    """Only 512 vectors; positions past 511 share the last one."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(min(max_len, 512), num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        pos = torch.arange(X.shape[1], device=X.device).clamp_max(self.P.shape[0] - 1)
        return self.dropout(X + self.P[pos])


class W_06_low_rank_table(nn.Module):
    """P = A @ B with rank 8: positions are not free vectors."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.A = nn.Parameter(torch.randn(max_len, 8))
        self.B = nn.Parameter(torch.randn(8, num_hiddens) / math.sqrt(8))

    def forward(self, X):
        _check_len(X.shape[1], self.A.shape[0])
        return self.dropout(X + self.A[:X.shape[1]] @ self.B)


class W_07_sinusoid_plus_learned_residual(nn.Module):
    """Fixed sinusoid plus a learned table started at 0 (not 'instead of')."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.fixed = PositionalEncoding(num_hiddens, 0.0, max_len)
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.zeros(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(self.fixed(X) + self.P[:, :X.shape[1]])


class W_08_embedding_scale_grad_by_freq(nn.Module):
    """Embedding(scale_grad_by_freq=True) indexed with (batch, n): each position appears
    batch times, so its gradient is divided by the batch size."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens, scale_grad_by_freq=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        pos = torch.arange(X.shape[1], device=X.device).expand(X.shape[0], -1)
        return self.dropout(X + self.emb(pos))


class W_09_embedding_max_norm(nn.Module):
    """Embedding(max_norm=...): renormalises its rows in place at every lookup."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens, max_norm=math.sqrt(num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        return self.dropout(X + self.emb(torch.arange(X.shape[1], device=X.device)))


class W_10_embedding_sparse(nn.Module):
    """Embedding(sparse=True): sparse gradients, which Adam refuses."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens, sparse=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        return self.dropout(X + self.emb(torch.arange(X.shape[1], device=X.device)))


class W_11_rand_init(nn.Module):
    """torch.rand: uniform on [0, 1), std 0.29 and mean 0.5."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.rand(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_12_xavier_init(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.empty(1, max_len, num_hiddens))
        nn.init.xavier_normal_(self.P)

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_13_dropout_before_add(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X) + self.P[:, :X.shape[1]]


class W_14_positions_from_one(nn.Module):
    """Table of max_len + 1 rows, position i uses row i + 1 (row 0 'for padding')."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len + 1, num_hiddens))
        self.max_len = max_len

    def forward(self, X):
        _check_len(X.shape[1], self.max_len)
        return self.dropout(X + self.P[:, 1:X.shape[1] + 1])


# Accepted on purpose: with max_len = 1 a longer X broadcasts the one row, P[:, :n] being
# (1, 1, d). The course's own solution (exercises/solutions/06_*.ipynb) and 16 right
# entries of rounds 2 to 6 rely on the failing sum for n > max_len in the same way, and the
# checker's hint endorses it ("for n > max_len the sum then fails"); max_len = 1 is
# degenerate, and every max_len >= 2 raises. Rejecting it would need the solution's code
# changed first (an explicit check), and those entries renamed.
class A_15_no_length_check(nn.Module):
    """No length check: with max_len=1 the single vector broadcasts over any length."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_16_dropout_alpha(nn.Module):
    """nn.AlphaDropout ('for self-normalising nets'): not dropout's zero-and-rescale."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.AlphaDropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_17_float_table_cast(nn.Module):
    """Adds self.P.float(): a .double() model loses float64 accuracy in P."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]].float())


class W_18_dropout_not_scaled(nn.Module):
    """Zeroes with the right rate but forgets the 1 / (1 - p) rescale."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        Y = X + self.P[:, :X.shape[1]]
        if self.training and self.p > 0:
            Y = Y * (torch.rand_like(Y) >= self.p)
        return Y


class W_19_learnable_gain_on_X(nn.Module):
    """X * gain + P with a learnable gain (init 1): not 'adds p_i to the tokens'."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.gain = nn.Parameter(torch.ones(()))
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(self.gain * X + self.P[:, :X.shape[1]])


class W_20_normalised_rows(nn.Module):
    """Each row rescaled to norm sqrt(d) in forward: the vectors cannot change length."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        P = F.normalize(self.P[:, :X.shape[1]], dim=-1) * math.sqrt(X.shape[-1])
        return self.dropout(X + P)


class W_21_grad_clamp_hook(nn.Module):
    """Clamps the table's gradient to [-0.01, 0.01] with a hook 'for stability'."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P.register_hook(lambda g: g.clamp(-0.01, 0.01))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_22_grad_mean_over_batch_expand(nn.Module):
    """Adds P averaged... no: divides P's gradient by the batch size via a custom scaling
    (P / b + P.detach() * (1 - 1/b)): right values, gradient 1/b of the true one."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        b = X.shape[0]
        P = self.P[:, :X.shape[1]]
        P = P / b + P.detach() * (1 - 1 / b)
        return self.dropout(X + P)


class S_23_shared_bias_too(nn.Module):
    """X + P + b with an extra vector b shared by all positions (init 0)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.b = nn.Parameter(torch.zeros(num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + self.P[:, :X.shape[1]] + self.b)


class W_24_tanh_of_table(nn.Module):
    """Adds tanh(P) 'to keep the positions bounded': entries can never leave (-1, 1)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + torch.tanh(self.P[:, :X.shape[1]]))


class W_25_table_scaled_by_sqrt_d(nn.Module):
    """Table initialised with std 1/sqrt(d) and multiplied by sqrt(d) in forward (the
    Transformer's embedding scaling misapplied): adds sqrt(d) * p_i, gradient sqrt(d) x."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens) / math.sqrt(num_hiddens))

    def forward(self, X):
        _check_len(X.shape[1], self.P.shape[1])
        return self.dropout(X + math.sqrt(X.shape[-1]) * self.P[:, :X.shape[1]])
