"""Round 5 red team (writer R5-B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math

import torch
from torch import nn
from torch.nn import functional as F

CHECK = "check_learned_positional_encoding"


class C_01_reference(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_02_embedding_sinusoid_init(nn.Module):
    # nn.Embedding over positions, initialised from the sinusoidal table, then learned
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.emb = nn.Embedding(max_len, num_hiddens)
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        ang = pos / torch.pow(10000, torch.arange(0, num_hiddens, 2) / num_hiddens)
        with torch.no_grad():
            self.emb.weight[:, 0::2] = torch.sin(ang)
            self.emb.weight[:, 1::2] = torch.cos(ang[:, : num_hiddens // 2])

    def forward(self, X):
        pos = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.emb(pos).to(X.dtype)[None])


class O_03_rand_init(nn.Module):
    # uniform init in [-sqrt(3), sqrt(3)): std 1
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter((torch.rand(1, max_len, num_hiddens) * 2 - 1) * math.sqrt(3))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_01_scale_times_sinusoid(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        ang = pos / torch.pow(10000, torch.arange(0, num_hiddens, 2) / num_hiddens)
        P = torch.zeros(1, max_len, num_hiddens)
        P[:, :, 0::2] = torch.sin(ang)
        P[:, :, 1::2] = torch.cos(ang[:, : num_hiddens // 2])
        self.register_buffer("P", P)
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, X):
        return self.dropout(X + self.scale * self.P[:, :X.shape[1]])


class W_02_no_dropout(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return X + self.P[:, :X.shape[1], :]


class W_03_dropout_on_P_only(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return X + self.dropout(self.P[:, :X.shape[1], :])


class W_04_buffer_not_parameter(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_05_stale_clone_cache(nn.Module):
    # the slice is copied once per length and reused: later updates of P are not seen
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self._cache = {}

    def forward(self, X):
        n = X.shape[1]
        if n not in self._cache:
            self._cache[n] = self.P[:, :n, :].detach().clone()
        return self.dropout(X + self._cache[n])


class W_06_indexed_from_end(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, -X.shape[1]:, :])


class W_07_shared_between_instances(nn.Module):
    _P = None

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        if W_07_shared_between_instances._P is None or \
                W_07_shared_between_instances._P.shape != (1, max_len, num_hiddens):
            W_07_shared_between_instances._P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = W_07_shared_between_instances._P

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_08_dropout_rate_fixed(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_09_inplace_add(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        X += self.P[:, :X.shape[1], :]
        return self.dropout(X)


class W_10_one_vector_all_positions(nn.Module):
    # one learned vector added at every position (no position information)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 1, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P)


class W_11_float64_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_12_dropout_keep_prob(nn.Module):
    # passes 1 - dropout, thinking the argument is the keep probability
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(1 - dropout if dropout > 0 else 0.0)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_13_dropout_always(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return F.dropout(X + self.P[:, :X.shape[1], :], self.p, training=True)


class W_14_small_table(nn.Module):
    # table capped at 64 positions whatever max_len says
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, min(max_len, 64), num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_18_std002_init(nn.Module):
    # Renamed from O04 (the writer counted it right): the exercise asks for an encoding that
    # trains to 30 points above the order-blind baseline and warns that the embeddings have
    # std 1; a table of std 0.02 stays at the baseline (34%), and the message says why.
    # BERT's init (std 0.02): right structure, but tiny next to tokens of std 1
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens) * 0.02)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class _Base(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))


class W_15_dropout_whole_positions(_Base):
    # one keep/drop decision per (example, position), shared by all features
    def forward(self, X):
        Z = X + self.P[:, :X.shape[1], :]
        if not self.training or self.p == 0:
            return Z
        keep = (torch.rand(Z.shape[0], Z.shape[1], 1, device=Z.device) >= self.p)
        return Z * keep / (1 - self.p)


class W_16_dropout_mask_shared_by_batch(_Base):
    # one dropout mask (1, n, d) for the whole batch
    def forward(self, X):
        Z = X + self.P[:, :X.shape[1], :]
        if not self.training or self.p == 0:
            return Z
        keep = (torch.rand(1, Z.shape[1], Z.shape[2], device=Z.device) >= self.p)
        return Z * keep / (1 - self.p)


class W_17_dropout_mask_cached(_Base):
    # the dropout mask is drawn once (per shape) and reused at every call
    def forward(self, X):
        Z = X + self.P[:, :X.shape[1], :]
        if not self.training or self.p == 0:
            return Z
        if not hasattr(self, "_m") or self._m.shape != Z.shape:
            self._m = (torch.rand(Z.shape, device=Z.device) >= self.p)
        return Z * self._m / (1 - self.p)
