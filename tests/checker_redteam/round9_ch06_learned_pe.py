"""Round 9 red team (writer B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/B/sols/ch06_learned_pe.py with the names W01_x written
W_01_x. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Accepted in round 9, now rejected: W_08 (a view of the table taken in __init__:
stale after .double()), W_21 (default max_len 512), W_22 (no dropout at the first call),
W_25 (torch.manual_seed in __init__). S_ entries are not tested: S_05 (a table of max_len + 1
rows, row 0 never used: a relabelling, only against the wording), S_30 (zero init) and S_31
(normal init with std 0.02), both rejected by the checker on purpose (the exercise hints at
std 1; they learn too slowly in the checker's training test).
"""
# flake8: noqa
import torch
from torch import nn
import torch.nn.functional as F

CHECK = "check_learned_positional_encoding"


class C_01_ref(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence of length {X.shape[1]} longer than max_len")
        return self.dropout(X + self.P[:, : X.shape[1]])


class O_02_embedding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise ValueError("too long")
        return self.dropout(X + self.emb(torch.arange(n, device=X.device)))


class O_03_manual_dropout(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[0]:
            raise IndexError("too long")
        Y = X + self.P[: X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand_like(Y) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_01_dropout_mask_per_position(nn.Module):
    # one keep/drop decision per (example, position), shared by all features
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand(Y.shape[0], Y.shape[1], 1) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_02_dropout_mask_shared_over_batch(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand(1, *Y.shape[1:]) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_03_dropout_mask_fixed_in_init(nn.Module):
    # the dropout mask is drawn once, in __init__, and reused at every call
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.register_buffer("keep", (torch.rand(1, max_len, num_hiddens) >= dropout).float(),
                             persistent=False)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            Y = Y * self.keep[:, : X.shape[1]].to(Y.dtype) / (1 - self.p)
        return Y


class W_04_dropout_reseeded_generator(nn.Module):
    # a private generator reseeded at every call: the same mask every step
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, : X.shape[1]]
        if self.training and self.p > 0:
            g = torch.Generator().manual_seed(1234)
            keep = (torch.rand(Y.shape, generator=g) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class S_05_skip_position0(nn.Module):
    # adds p_1 .. p_n (position 0 reserved "for padding"); n = max_len overflows silently
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len + 1, num_hiddens))
        self.max_len = max_len

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, 1: X.shape[1] + 1])


class W_06_raise_at_max_len(nn.Module):
    # off by one: a sequence of exactly max_len raises
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_07_clamp_positions(nn.Module):
    # longer than max_len: positions past the end reuse the last vector, no error
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))

    def forward(self, X):
        pos = torch.arange(X.shape[1]).clamp(max=self.P.shape[0] - 1)
        return self.dropout(X + self.P[pos])


class W_08_view_in_init(nn.Module):
    # the table is taken once in __init__ (a view of the parameter): .double() leaves it
    # float32 and stale
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.table = self.P[0]

    def forward(self, X):
        if X.shape[1] > self.table.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + self.table[: X.shape[1]].to(X.dtype))


class O_09_batch_as_length_harmless(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        n = X.shape[0] if X.shape[0] == X.shape[1] else X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :n].transpose(0, 1)[: X.shape[0]].transpose(0, 1)
                            if False else X + self.P[:, :n])


class W_10_scalar_per_position(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, 1))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_11_low_rank(nn.Module):
    # p_i = A_i B with rank 4: the positions do not get their own vectors
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.A = nn.Parameter(torch.randn(max_len, 4))
        self.B = nn.Parameter(torch.randn(4, num_hiddens) / 2)

    def forward(self, X):
        if X.shape[1] > self.A.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + (self.A[: X.shape[1]] @ self.B))


class W_12_functional_dropout_always(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return F.dropout(X + self.P[:, : X.shape[1]], self.p)


class W_13_mlp_of_position(nn.Module):
    # p_i = MLP(i / max_len): a function of the position, not a vector per position
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.net = nn.Sequential(nn.Linear(1, 64), nn.ReLU(), nn.Linear(64, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError("too long")
        pos = torch.arange(X.shape[1], dtype=X.dtype)[:, None] / self.max_len
        return self.dropout(X + self.net.to(X.dtype)(pos))


class W_14_inplace_add(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        if not X.requires_grad:
            X += self.P[:, : X.shape[1]]
            return self.dropout(X)
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_15_pad_and_shared_tail(nn.Module):
    # parameters only for the first 64 positions; later ones share one vector
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(min(max_len, 64), num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError("too long")
        pos = torch.arange(X.shape[1]).clamp(max=self.P.shape[0] - 1)
        return self.dropout(X + self.P[pos])


class W_16_dropout_on_P_only_in_eval_path(nn.Module):
    # dropout on the sum in training; but the table is also scaled by (1-p) in eval
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        P = self.P[:, : X.shape[1]]
        if not self.training:
            P = P * (1 - self.p)
        return self.dropout(X + P)


class W_17_seq_first_table(nn.Module):
    # table laid out (max_len, 1, d) as in seq-first code, sliced by X.shape[0]
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(max_len, 1, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + self.P[: X.shape[0]])


class W_18_slice_cached_by_length(nn.Module):
    # keeps the slice P[:, :n] per length n (a view made on the first call)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self._slices = {}

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        if n not in self._slices:
            self._slices[n] = self.P[:, :n]
        return self.dropout(X + self._slices[n])


class W_19_param_in_plain_list(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.tables = [nn.Parameter(torch.randn(1, max_len, num_hiddens))]

    def forward(self, X):
        P = self.tables[0]
        if X.shape[1] > P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + P[:, : X.shape[1]].to(X.dtype))


_TABLES = {}


class W_20_table_shared_by_size(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        key = (num_hiddens, max_len)
        if key not in _TABLES:
            _TABLES[key] = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = _TABLES[key]

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


class W_21_default_max_len_512(C_01_ref):
    def __init__(self, num_hiddens, dropout, max_len=512):
        super().__init__(num_hiddens, dropout, max_len)


class S_30_zero_init(C_01_ref):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        nn.init.zeros_(self.P)


class S_31_small_init_std002(C_01_ref):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        nn.init.normal_(self.P, std=0.02)


class W_22_no_dropout_on_first_call(nn.Module):
    # dropout applied only if p is a float > 0; an int/other type rate, or a tensor, skip it
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.n_calls = 0

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        self.n_calls += 1
        Y = X + self.P[:, : X.shape[1]]
        # "warm-up": no dropout on the first call
        return Y if self.n_calls == 1 else self.dropout(Y)


_INIT = torch.randn(1, 1200, 64)


class W_23_params_share_storage(nn.Module):
    # "all models start from the same table": nn.Parameter of a slice of one global
    # tensor, so every instance's parameter shares its storage
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        global _INIT
        if _INIT.shape[1] < max_len or _INIT.shape[2] < num_hiddens:
            _INIT = torch.randn(1, max(max_len, _INIT.shape[1]), max(num_hiddens, _INIT.shape[2]))
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(_INIT[:, :max_len, :num_hiddens])

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]])


# Round 11: the fixed sinusoid plus a table (round 11 B's W07, the same design): forward must
# add the table itself (exercise 6.1); right before, wrong since.
class W_24_learned_plus_sinusoid(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.sin = PositionalEncoding(num_hiddens, 0.0, max_len)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens) * 0.5)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(self.sin(X) + self.P[:, : X.shape[1]])


class W_25_reseeds_global_rng(C_01_ref):
    # "reproducible init": resets the global RNG in every instance's __init__
    def __init__(self, num_hiddens, dropout, max_len=1000):
        torch.manual_seed(0)
        super().__init__(num_hiddens, dropout, max_len)
