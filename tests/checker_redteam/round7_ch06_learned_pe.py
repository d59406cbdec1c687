"""Round 7 red team (writer R7-B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round7/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x. Wrong ones
the checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
CHECK = "check_learned_positional_encoding"
import torch
from torch import nn
import torch.nn.functional as F


class C_01_reference(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError(f"sequence of length {n} longer than max_len={self.P.shape[1]}")
        return self.dropout(X + self.P[:, :n].to(X.dtype))


class O_02_embedding(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        # nn.Embedding raises IndexError past max_len
        p = self.pos(torch.arange(X.shape[1], device=X.device))
        return self.dropout(X + p.to(X.dtype))


class O_03_parameter_list_std1(nn.Module):
    # one nn.Parameter per position (a ParameterList), standard normal like the tokens
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(num_hiddens) * 0.5)
                                    for _ in range(max_len)])
        self.p = dropout

    def forward(self, X):
        n = X.shape[1]
        if n > len(self.ps):
            raise IndexError("sequence longer than max_len")
        P = torch.stack([self.ps[i] for i in range(n)]).to(X.dtype)
        return F.dropout(X + P, self.p, self.training)


class W_01_fixed_dropout_mask(C_01_reference):
    # one dropout mask drawn in __init__ and reused at every call (and for every example)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout
        self.register_buffer("keep", (torch.rand(1, max_len, num_hiddens) >= dropout).float())

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :n].to(X.dtype)
        if self.training and self.rate > 0:
            Y = Y * self.keep[:, :n].to(X.dtype) / (1 - self.rate)
        return Y


class W_02_dropout_per_position(C_01_reference):
    # whole position vectors dropped (mask (batch, n, 1)) instead of single entries
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :n].to(X.dtype)
        if self.training and self.dropout.p > 0:
            keep = (torch.rand(X.shape[0], n, 1, device=X.device) >= self.dropout.p)
            Y = Y * keep.to(X.dtype) / (1 - self.dropout.p)
        return Y


class W_03_dropout_mask_shared_over_batch(C_01_reference):
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :n].to(X.dtype)
        if self.training and self.dropout.p > 0:
            keep = (torch.rand(1, n, X.shape[2], device=X.device) >= self.dropout.p)
            Y = Y * keep.to(X.dtype) / (1 - self.dropout.p)
        return Y


class W_04_modulo_wrap(C_01_reference):
    # positions past max_len silently wrap around instead of raising
    def forward(self, X):
        idx = torch.arange(X.shape[1], device=X.device) % self.P.shape[1]
        return self.dropout(X + self.P[:, idx].to(X.dtype))


class W_05_table_one_too_long(C_01_reference):
    # max_len + 1 rows "to include position max_len": a sequence of max_len + 1 passes
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len + 1)


class W_06_raises_at_max_len(C_01_reference):
    # off by one: a sequence of exactly max_len raises
    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("sequence too long")
        return super().forward(X)


class W_07_inplace_add(C_01_reference):
    # X += P: the caller's X is changed (when it does not require grad)
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        if not X.requires_grad:
            X += self.P[:, :n].to(X.dtype)
            return self.dropout(X)
        return self.dropout(X + self.P[:, :n].to(X.dtype))


class W_08_functional_dropout_always(C_01_reference):
    # F.dropout's default training=True: dropout also in eval mode
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return F.dropout(X + self.P[:, :n].to(X.dtype), self.dropout.p)


class A_09_no_cast_half(C_01_reference):
    # Accepted on purpose: the official solution does not cast the table to X's dtype
    # either; the exercise text now says that float32 and float64 (a model made .double())
    # are asked, lower precisions not.
    # no .to(X.dtype): float16 / bfloat16 X come back as float32
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :n])


class W_10_double_dropout(C_01_reference):
    def forward(self, X):
        return self.dropout(super().forward(X))


class W_11_zero_init_buffer_grad(nn.Module):
    # a zero-initialised table kept as a plain tensor with requires_grad (not registered)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = torch.zeros(1, max_len, num_hiddens, requires_grad=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, : X.shape[1]].to(X.dtype))


class W_12_scaled_tokens(C_01_reference):
    # the Transformer's sqrt(d) scaling of the embeddings applied here: X * sqrt(d) + P
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X * X.shape[-1] ** 0.5 + self.P[:, :n].to(X.dtype))


class W_13_dropout_rate_ignored_in_init(C_01_reference):
    # nn.Dropout() with its default rate 0.5, the argument is ignored
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout()


class W_14_detached_in_eval(C_01_reference):
    # "no need for gradients in eval": reads P.detach() when not training
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        P = self.P if self.training else self.P.detach()
        return self.dropout(X + P[:, :n].to(X.dtype))


# Was O_ until round 8: a slice cached per (n, dtype) made under torch.no_grad() (a
# validation pass) has no autograd link to P, so later training steps at that length give
# P no gradient (round 8 B's W17); check_learned_positional_encoding now refuses it.
class W_15_cached_slice_per_length(C_01_reference):
    # caches P[:, :n].to(dtype) per (n, dtype): after an optimiser step the cached copy
    # is stale (the .to() of the same dtype is the parameter itself... but the slice is a
    # view, so this one stays current; the cast copy for another dtype does not)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self._c = {}

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        key = (n, X.dtype)
        if key not in self._c or X.dtype != self.P.dtype:
            self._c[key] = self.P[:, :n].to(X.dtype)
        return self.dropout(X + self._c[key])


class W_16_sqrt_keep_scaling(C_01_reference):
    # inverted dropout scaled by 1/sqrt(1-p) instead of 1/(1-p)
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :n].to(X.dtype)
        if self.training and self.dropout.p > 0:
            keep = torch.rand_like(Y) >= self.dropout.p
            Y = Y * keep / (1 - self.dropout.p) ** 0.5
        return Y


class O_17_big_init(C_01_reference):
    # table drawn with std 10 ("so the model sees the positions"): drowns the tokens
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.normal_(0, 10.0)


class S_20_gpt_init_0p02(C_01_reference):
    # GPT-2 / BERT's init std 0.02 (the exercise text warns about the scale)
    # S_ (not tested): rejected on purpose by the training test, with the std hint; the
    # exercise text warns that the token embeddings have std 1 (as round 6 S_17).
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.mul_(0.02)


class W_18_embedding_padding_idx(nn.Module):
    # nn.Embedding copied with padding_idx=0: position 0 gets the zero vector and no gradient
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens, padding_idx=0)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        p = self.pos(torch.arange(X.shape[1], device=X.device))
        return self.dropout(X + p.to(X.dtype))


class W_19_embedding_max_norm(nn.Module):
    # nn.Embedding(max_norm=1): forward renormalises the table in place (module state
    # changed by forward) and caps every position vector at norm 1
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens, max_norm=1.0)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        p = self.pos(torch.arange(X.shape[1], device=X.device))
        return self.dropout(X + p.to(X.dtype))


class W_20_scalar_per_position(C_01_reference):
    # one learned number per position, broadcast over the features
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.P = nn.Parameter(torch.randn(1, max_len, 1))


class W_21_length_check_on_batch_axis(C_01_reference):
    # checks X.shape[0] (the batch) against max_len: a batch larger than max_len raises
    def forward(self, X):
        if X.shape[0] > self.P.shape[1]:
            raise ValueError("sequence longer than max_len")
        return self.dropout(X + self.P[:, : X.shape[1]].to(X.dtype))


_TABLES = {}


class W_22_table_shared_by_size(C_01_reference):
    # one table per (max_len, num_hiddens), shared between instances of that size
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        key = (max_len, num_hiddens)
        if key not in _TABLES:
            _TABLES[key] = self.P
        self.P = _TABLES[key]


class W_23_max_len_rows_but_check_1000(C_01_reference):
    # the table follows max_len, the length check compares with the default 1000
    def forward(self, X):
        if X.shape[1] > 1000:
            raise ValueError("sequence longer than max_len")
        n = min(X.shape[1], self.P.shape[1])
        Y = X.clone()
        Y[:, :n] = Y[:, :n] + self.P[:, :n].to(X.dtype)
        return self.dropout(Y)


class A_24_manual_dropout_p1_nan(C_01_reference):
    # Accepted on purpose: rate 1.0 (a layer that drops everything) is not a setting the
    # exercise uses, and a hand-written dropout dividing by 1 - p is accepted as right
    # (tests/test_checks_ch06.py::test_accepts_a_hand_written_dropout); requiring zeros
    # at rate 1.0 would refuse it.
    # hand-written inverted dropout: at rate 1 it divides by 0 (0 * inf = NaN)
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :n].to(X.dtype)
        p = self.dropout.p
        if self.training:
            keep = (torch.rand_like(Y) >= p).to(Y.dtype)
            Y = Y * keep / (1 - p)   # tensor / 0.0 at p = 1: 0 / 0 = NaN
        return Y


class W_25_float64_table_no_cast(C_01_reference):
    # table created in float64 "for precision", no cast: float32 X comes back float64
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))

    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :n])


class W_26_reinit_in_forward(C_01_reference):
    # re-draws the table at every call in training mode ("fresh noise helps")
    def forward(self, X):
        if self.training:
            with torch.no_grad():
                nn.init.normal_(self.P)
        return super().forward(X)


class W_27_positions_from_one(C_01_reference):
    # positions counted from 1: rows 1..n of the table; row 0 is never used, and a
    # sequence of exactly max_len gets only max_len - 1 rows
    def forward(self, X):
        n = X.shape[1]
        if n > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, 1:n + 1].to(X.dtype))


class O_21_2d_table_register_parameter(nn.Module):
    # a (max_len, num_hiddens) table registered under another name, explicit IndexError
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.register_parameter("table", nn.Parameter(torch.empty(max_len, num_hiddens)))
        nn.init.trunc_normal_(self.table, std=1.0, a=-3.0, b=3.0)
        self.drop = nn.Dropout(dropout)

    def forward(self, X):
        if X.size(-2) > self.table.size(0):
            raise IndexError(f"length {X.size(-2)} > max_len {self.table.size(0)}")
        return self.drop(torch.add(X, self.table[: X.size(-2)], alpha=1).to(X.dtype))
