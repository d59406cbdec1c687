"""Round 4 red team (writer B, issue 12), ch06_learned_pe: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise
text alone; copied from /work/redteam/round4/B/sols/ch06_learned_pe.py
with the names W01_x written W_01_x. The tests run every W_ entry (must fail) and
every C_ and O_ entry (must pass); A_ entries are wrong ones accepted on purpose
(each says why), not tested.
Writer's note: Round 4, writer B: LearnedPositionalEncoding (exercise 6.1), from the
exercise text only."""
# flake8: noqa
import math

import torch
from torch import nn
from torch.nn import functional as F

CHECK = "check_learned_positional_encoding"


# ---------------------------------------------------------------- correct and odd
class C_01_parameter_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_02_embedding_of_positions(nn.Module):
    """nn.Embedding(max_len, d) looked up with arange(n): a table by another name."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pos = nn.Embedding(max_len, num_hiddens)  # N(0, 1) init

    def forward(self, X):
        return self.dropout(X + self.pos(torch.arange(X.shape[1], device=X.device)))


class O_03_2d_table_uniform_init(nn.Module):
    """A (max_len, d) table without batch axis, uniform init with std 1."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.table = nn.Parameter(torch.empty(max_len, num_hiddens))
        nn.init.uniform_(self.table, -math.sqrt(3), math.sqrt(3))
        self.drop = nn.Dropout(p=dropout)

    def forward(self, X):
        n = X.shape[1]
        return self.drop(X + self.table[:n].unsqueeze(0))


class O_04_functional_dropout_with_training_flag(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return F.dropout(X + self.P[:, :X.shape[1]], self.p, training=self.training)


class S_05_bert_init_std002(C_01_parameter_table):
    """BERT's init (std 0.02): a trainable per-position table, but far smaller than the
    std-1 token embeddings (the exercise's hint)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        nn.init.normal_(self.P, std=0.02)


# ---------------------------------------------------------------- wrong
class W_01_plain_tensor_not_parameter(nn.Module):
    """requires_grad tensor attribute: not registered, so the optimizer never sees it."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.randn(1, max_len, num_hiddens, requires_grad=True)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :].to(X.device))


class W_02_buffer(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_03_dropout_before_add(C_01_parameter_table):
    def forward(self, X):
        return self.dropout(X) + self.P[:, :X.shape[1], :]


class W_04_dropout_on_P_only(C_01_parameter_table):
    def forward(self, X):
        return X + self.dropout(self.P[:, :X.shape[1], :])


class W_05_no_dropout(C_01_parameter_table):
    def forward(self, X):
        return X + self.P[:, :X.shape[1], :]


class W_06_dropout_keep_prob(C_01_parameter_table):
    """Reads `dropout` as the keep probability."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(1 - dropout)


class W_07_functional_dropout_always_on(C_01_parameter_table):
    """F.dropout without training=self.training: also drops in eval mode."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        return F.dropout(X + self.P[:, :X.shape[1], :], self.p)


class W_08_dropout_module_built_in_forward(C_01_parameter_table):
    """A fresh nn.Dropout in forward: always in training mode."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        return nn.Dropout(self.p)(X + self.P[:, :X.shape[1], :])


class W_09_one_vector_for_all_positions(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 1, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P)


class W_10_last_rows(C_01_parameter_table):
    """Adds the table's LAST n rows: position 0 gets a different vector for each n."""
    def forward(self, X):
        return self.dropout(X + self.P[:, -X.shape[1]:, :])


class W_11_batch_axis_for_length(C_01_parameter_table):
    """Slices by X.shape[0] (the batch) instead of X.shape[1]."""
    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[0], :].transpose(0, 1)[:, :1]
                            if X.shape[0] != X.shape[1] else X + self.P[:, :X.shape[0], :])


class W_12_cyclic_16(nn.Module):
    """Only 16 vectors, reused cyclically (position i gets vector i % 16)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(16, num_hiddens))

    def forward(self, X):
        idx = torch.arange(X.shape[1], device=X.device) % 16
        return self.dropout(X + self.P[idx])


class W_13_lazy_table(nn.Module):
    """Creates the table at the first call, sized for that call's length."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.d = num_hiddens
        self.P = None

    def forward(self, X):
        if self.P is None or self.P.shape[1] < X.shape[1]:
            self.P = nn.Parameter(torch.randn(1, X.shape[1], self.d, device=X.device))
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_14_fresh_random_each_call(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.ones(1, max_len, 1))

    def forward(self, X):
        noise = torch.randn(1, X.shape[1], X.shape[2], device=X.device)
        return self.dropout(X + self.scale[:, :X.shape[1]] * noise)


class W_15_inplace_add(C_01_parameter_table):
    """X += P: changes the caller's tensor."""
    def forward(self, X):
        X += self.P[:, :X.shape[1], :]
        return self.dropout(X)


class W_16_float64_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_17_multiplies(C_01_parameter_table):
    def forward(self, X):
        return self.dropout(X * self.P[:, :X.shape[1], :])


class W_18_rescales_X(C_01_parameter_table):
    """Multiplies X by sqrt(d) as the Transformer's encoder does (not asked here)."""
    def forward(self, X):
        return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, :X.shape[1], :])


class W_19_detached_table(C_01_parameter_table):
    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :].detach())


class W_20_shared_global_table(nn.Module):
    """One table shared by every instance (a module-level cache keyed by size)."""
    _tables = {}

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        key = (max_len, num_hiddens)
        if key not in W_20_shared_global_table._tables:
            W_20_shared_global_table._tables[key] = nn.Parameter(
                torch.randn(1, max_len, num_hiddens))
        self.P = W_20_shared_global_table._tables[key]

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_21_sinusoid_plus_learned_scalar_per_position(nn.Module):
    """Fixed sinusoids times a learned scalar per position (not a vector per position)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.register_buffer("S", PositionalEncoding(num_hiddens, 0.0, max_len).P)
        self.a = nn.Parameter(torch.ones(1, max_len, 1))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        return self.dropout(X + self.a[:, :n] * self.S[:, :n])


class W_22_sinusoid_plus_learned_offset_vector(nn.Module):
    """Fixed sinusoids plus ONE learned vector shared by all positions."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.register_buffer("S", PositionalEncoding(num_hiddens, 0.0, max_len).P)
        self.b = nn.Parameter(torch.zeros(1, 1, num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.S[:, :X.shape[1]] + self.b)


class W_23_low_rank_table(nn.Module):
    """P = A B with A (max_len, 2), B (2, d): per-position but only rank 2."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.A = nn.Parameter(torch.randn(max_len, 2))
        self.B = nn.Parameter(torch.randn(2, num_hiddens) / math.sqrt(2))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + (self.A[:X.shape[1]] @ self.B)[None])


class W_24_max_len_ignored_64(nn.Module):
    """A table of 64 rows whatever max_len says."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 64, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


# Round 11: forward adds a cumulative sum of the parameters, not the table itself (exercise 6.1
# says forward adds the vectors p_i themselves); right before, wrong since.
class W_25_cumsum_reparametrisation(C_01_parameter_table):
    """P_i = sum of learned increments up to i: still one free vector per position."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.mul_(0.3)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :].cumsum(dim=1))


class S_26_positions_from_one(C_01_parameter_table):
    """Uses rows 1..n (row 0 unused): right except at n = max_len, where it breaks."""
    def forward(self, X):
        return self.dropout(X + self.P[:, 1:X.shape[1] + 1, :])


class W_27_dropout_twice(C_01_parameter_table):
    def forward(self, X):
        return self.dropout(self.dropout(X + self.P[:, :X.shape[1], :]))


class W_28_P_added_again_after_dropout(C_01_parameter_table):
    def forward(self, X):
        P = self.P[:, :X.shape[1], :]
        return self.dropout(X + P) + P


class W_29_positions_only_in_training(C_01_parameter_table):
    """Adds the positions only in train mode (confuses it with dropout)."""
    def forward(self, X):
        if self.training:
            X = X + self.P[:, :X.shape[1], :]
        return self.dropout(X)


class W_30_cached_clone(C_01_parameter_table):
    """Caches a copy of the table slice at the first call: stale after training steps."""
    def forward(self, X):
        n = X.shape[1]
        if getattr(self, "_cache", None) is None or self._cache.shape[1] < n:
            self._cache = self.P[:, :n].clone()
        return self.dropout(X + self._cache[:, :n])


class W_31_dropout_rate_hardcoded(C_01_parameter_table):
    """nn.Dropout(0.1) whatever the argument."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(0.1)


class W_32_table_in_python_list(nn.Module):
    """The parameter kept in a plain Python list: not registered."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.tables = [nn.Parameter(torch.randn(1, max_len, num_hiddens))]

    def forward(self, X):
        return self.dropout(X + self.tables[0][:, :X.shape[1], :])


class W_33_half_table(nn.Module):
    """Table in float16 (memory): X + P becomes float32 but P's values are rounded and
    its gradients are float16."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens).half())

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_34_sinusoid_initialised_trainable(nn.Module):
    """A trainable per-position table that STARTS at the sinusoids (then learns freely)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.P = nn.Parameter(PositionalEncoding(num_hiddens, 0.0, max_len).P.clone())
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_35_register_parameter_2d(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.register_parameter("pos", nn.Parameter(torch.randn(max_len, num_hiddens)))
        self.drop = nn.Dropout(dropout)

    def forward(self, X):
        return self.drop(X + self.pos[: X.size(1)])


class W_36_position0_fixed_zero(nn.Module):
    """Position 0 is a fixed zero vector ('no offset'); only positions 1.. are learned."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len - 1, num_hiddens))
        self.register_buffer("P0", torch.zeros(1, 1, num_hiddens))

    def forward(self, X):
        table = torch.cat([self.P0, self.P], dim=1)
        return self.dropout(X + table[:, :X.shape[1], :])
