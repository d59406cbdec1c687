"""Round 8 red team (writer B, issue 12), ch06_learned_pe: wrong (W_),
right (C_), odd but right (O_) and against-the-wording (S_) solutions written from the
exercise text alone; copied from /work/redteam/round8/B/sols/ch06_learned_pe.py
with the names W01_x written W_01_x. tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass); S_ entries are not tested.
The writer first wrote W_28 (a table drawn with std 0.02) and W_29 (a zero table) as odd but
right: the exercise warns that the table must start on the scale of the embeddings (std 1),
and both train too slowly on the checker's task, so they are wrong.
"""
# flake8: noqa
import math

import torch
import torch.nn.functional as F
from torch import nn

CHECK = "check_learned_positional_encoding"

_SHARED = {}


class _Base(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def _check(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence of length {X.shape[1]} is longer than "
                             f"max_len={self.P.shape[1]}")


# ---- correct / odd -------------------------------------------------------------------
class C_01_param_table(_Base):
    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


class O_02_embedding_lookup(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.pos = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise ValueError(f"length {n} > max_len={self.max_len}")
        pos = torch.arange(n, device=X.device)
        return self.dropout(X + self.pos(pos).unsqueeze(0).to(X.dtype))


class W_28_small_init_std002_trains_too_slowly(_Base):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        nn.init.normal_(self.P, std=0.02)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


class O_04_manual_dropout(_Base):
    # inverted dropout written by hand: keep with probability 1 - p, scale by 1 / (1 - p)
    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, : X.shape[1], :]
        p = self.dropout.p
        if not self.training or p == 0:
            return Y
        keep = (torch.rand_like(Y) >= p).to(Y.dtype)
        return Y * keep / (1 - p)


class W_29_zero_init_trains_too_slowly(_Base):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        nn.init.zeros_(self.P)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


# ---- wrong ---------------------------------------------------------------------------
class W_01_dropout_before_add(_Base):
    def forward(self, X):
        self._check(X)
        return self.dropout(X) + self.P[:, : X.shape[1], :]


class W_02_dropout_on_table_only(_Base):
    def forward(self, X):
        self._check(X)
        return X + self.dropout(self.P[:, : X.shape[1], :])


class W_03_functional_dropout_always_on(_Base):
    def forward(self, X):
        self._check(X)
        return F.dropout(X + self.P[:, : X.shape[1], :], self.dropout.p)


class W_04_no_dropout(_Base):
    def forward(self, X):
        self._check(X)
        return X + self.P[:, : X.shape[1], :]


class W_05_table_one_too_long(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len + 1, num_hiddens))  # "positions 0..max_len"

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_06_embedding_padding_idx(O_02_embedding_lookup):
    # copied nn.Embedding(..., padding_idx=0) from a token embedding: p_0 is frozen at 0
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.pos = nn.Embedding(max_len, num_hiddens, padding_idx=0)


class W_07_embedding_max_norm(O_02_embedding_lookup):
    # nn.Embedding(max_norm=1) renormalises the looked-up rows in place at every call
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.pos = nn.Embedding(max_len, num_hiddens, max_norm=1.0)


class W_08_table_float64(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_09_add_in_place(_Base):
    def forward(self, X):
        self._check(X)
        if X.requires_grad:
            X = X + self.P[:, : X.shape[1], :]
        else:
            X += self.P[:, : X.shape[1], :]       # "saves memory": changes the caller's X
        return self.dropout(X)


class W_10_last_rows(_Base):
    # takes the table's last n rows: the vector of a position depends on the length
    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, self.P.shape[1] - X.shape[1]:, :])


class W_11_batch_for_length(_Base):
    # slices with X.shape[0]: right only when batch == n
    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[0], :])


class W_12_scaled_tokens(_Base):
    # Transformer habit: X * sqrt(d) + P (not asked)
    def forward(self, X):
        self._check(X)
        return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, : X.shape[1], :])


class W_13_shared_between_instances(nn.Module):
    # one table per (max_len, num_hiddens), shared by every instance
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        key = (max_len, num_hiddens)
        if key not in _SHARED:
            _SHARED[key] = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = _SHARED[key]
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_14_fixed_dropout_rate(_Base):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(0.1)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_15_no_rescale_dropout(_Base):
    # hand-written dropout without the 1 / (1 - p) factor
    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training:
            return Y
        return Y * (torch.rand_like(Y) >= self.dropout.p).to(Y.dtype)


class W_16_detached_in_eval(_Base):
    def forward(self, X):
        self._check(X)
        P = self.P if self.training else self.P.detach()
        return self.dropout(X + P[:, : X.shape[1], :])


class W_17_slice_cache(_Base):
    # caches the slice for each length (taken the first time it is seen)
    def forward(self, X):
        self._check(X)
        n = X.shape[1]
        if not hasattr(self, "_slices"):
            self._slices = {}
        if n not in self._slices:
            self._slices[n] = self.P[:, :n, :]
        return self.dropout(X + self._slices[n])


class W_18_rejects_max_len_itself(_Base):
    # off by one the other way: a sequence of exactly max_len raises
    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_19_lazy_table(nn.Module):
    # the table is made at the first call, sized to that call's length
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.num_hiddens, self.max_len = num_hiddens, max_len
        self.dropout = nn.Dropout(dropout)
        self.P = None

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError("too long")
        if self.P is None:
            self.P = nn.Parameter(torch.randn(1, self.max_len, self.num_hiddens,
                                              dtype=X.dtype, device=X.device))
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_20_output_float32(_Base):
    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :]).float()


class W_21_dropout_twice(_Base):
    # dropout on the tokens and again on the sum
    def forward(self, X):
        self._check(X)
        return self.dropout(self.dropout(X) + self.P[:, : X.shape[1], :])


class O_06_parameter_list(nn.Module):
    # one nn.Parameter per position, stacked at every call
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.vecs = nn.ParameterList([nn.Parameter(torch.randn(num_hiddens))
                                      for _ in range(max_len)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > len(self.vecs):
            raise ValueError(f"length {n} > max_len={len(self.vecs)}")
        P = torch.stack([self.vecs[i] for i in range(n)]).to(X.dtype)
        return self.dropout(X + P)


class O_07_assert_too_long(_Base):
    def forward(self, X):
        assert X.shape[1] <= self.P.shape[1], "sequence longer than max_len"
        return self.dropout(X + self.P[:, : X.shape[1], :])


class O_08_sinusoid_initialised(nn.Module):
    # a trainable table that starts as the sinusoids (std about 0.7)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.P = nn.Parameter(PositionalEncoding(num_hiddens, 0.0, max_len).P.clone())
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_22_low_rank_table(nn.Module):
    # factorised table P = A @ B (ALBERT-style): positions share an 8-dim subspace
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        r = max(1, num_hiddens // 2)
        self.A = nn.Parameter(torch.randn(max_len, r))
        self.B = nn.Parameter(torch.randn(r, num_hiddens) / math.sqrt(r))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.A.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + (self.A[: X.shape[1]] @ self.B).unsqueeze(0))


class S_09_learned_plus_sinusoid(_Base):
    # keeps the fixed sinusoids and adds a learned table on top (not "instead of")
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        from book.attention import PositionalEncoding
        self.register_buffer("S", PositionalEncoding(num_hiddens, 0.0, max_len).P.clone())

    def forward(self, X):
        self._check(X)
        n = X.shape[1]
        return self.dropout(X + self.P[:, :n, :] + self.S[:, :n, :].to(X.dtype))


class S_10_positions_from_one(_Base):
    # 1-based positions (row 0 "reserved"), with a table one row longer to fit
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.P = nn.Parameter(torch.randn(1, max_len + 1, num_hiddens))

    def forward(self, X):
        if X.shape[1] > self.P.shape[1] - 1:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, 1: X.shape[1] + 1, :])


class W_25_keep_prob_confusion(_Base):
    # TensorFlow 1 habit: the argument read as the keep probability
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(1 - dropout)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_26_dropout1d(_Base):
    # nn.Dropout1d "for sequences": drops whole positions (channels = axis 1), not entries
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout1d(dropout)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_27_mask_shared_over_batch(_Base):
    # one dropout mask of shape (1, n, d), shared by every example of the batch
    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, : X.shape[1], :]
        p = self.dropout.p
        if not self.training or p == 0:
            return Y
        keep = torch.bernoulli(torch.full_like(Y[:1], 1 - p))
        return Y * keep / (1 - p)
