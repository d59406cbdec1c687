"""Round 10 red team (writer B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Accepted in round 10, now rejected: W_02 and W_24 (a table from a private
generator with a fixed seed, or torch.manual_seed inside fork_rng: the same table whatever
the caller's seed), W_03 (a table of max_len + 1 rows read from row 1: row 0 never gets a
gradient), W_09 (the table cast to float32 in forward: a float64 model adds float32
numbers), W_13 (16 free features tiled across the width: caught at num_hiddens=40).
W_26 was B's O04 (init std 0.02, GPT-2's): rejected by the training test (34% against
63.7% needed in B's run) with the scale hint; the exercise text now asks for std about 1.
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
            raise ValueError("sequence longer than max_len")
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_01_embedding_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.pos = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.max_len:
            raise ValueError("too long")
        return self.dropout(X + self.pos(torch.arange(X.shape[1], device=X.device)))


class O_02_sinusoid_initialised_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        pos = torch.arange(max_len, dtype=torch.float32)[:, None]
        two_j = torch.arange(0, num_hiddens, 2, dtype=torch.float32)
        A = pos / torch.pow(10000, two_j / num_hiddens)
        P = torch.zeros(max_len, num_hiddens)
        P[:, 0::2] = torch.sin(A)
        P[:, 1::2] = torch.cos(A[:, : num_hiddens // 2])
        self.P = nn.Parameter(P)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + self.P[: X.shape[1]])


class O_03_parameter_list_per_position(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(torch.randn(num_hiddens))
                                    for _ in range(max_len)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > len(self.ps):
            raise ValueError("too long")
        P = torch.stack([self.ps[i] for i in range(X.shape[1])])
        return self.dropout(X + P)


# B's O04, filed as wrong: the exercise asks for vectors at the scale of the token
# embeddings (std about 1); std 0.02 does not learn in the check's short training
# (rejected by the training test, with the scale hint that says so).
class W_26_gpt2_init_std002(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.normal_(0.0, 0.02)


# ---------------------------------------------------------------- wrong
class W_01_embedding_padding_idx0(O_01_embedding_table):
    """Position 0's vector is zero and never trained."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.pos = nn.Embedding(max_len, num_hiddens, padding_idx=0)


class W_02_private_generator_seed0(nn.Module):
    """Does not reseed the global RNG, but every instance gets the same table."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, generator=g))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_03_one_based_positions(nn.Module):
    """Positions numbered 1..n: p_0 is never used, the table has max_len + 1 rows."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len + 1, num_hiddens))
        self.max_len = max_len
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, 1:n + 1])


class W_04_add_in_place_to_input(C_01_reference):
    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        X += self.P[:, :X.shape[1]]
        return self.dropout(X)


class W_05_length_from_batch_axis(C_01_reference):
    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[0]].transpose(0, 1)[:, :1].transpose(
            0, 1).expand(1, X.shape[1], -1) if False else X + self.P[0, :X.shape[0]][:, None])


class W_06_functional_dropout_always_on(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return F.dropout(X + self.P[:, :X.shape[1]], self.p)


class W_07_uniform_init(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.uniform_(0.0, 1.0)


class W_08_scaled_input(C_01_reference):
    """Scales the tokens by sqrt(d) as the Transformer's embedding does."""
    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, :X.shape[1]])


class W_09_table_float32_always(C_01_reference):
    """P cast to float32 on every call: the float64 model adds a rounded table."""
    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]].float())


class W_10_dropout_rate_ignored(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(0.1)


class W_11_off_by_one_length_check(C_01_reference):
    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_12_no_length_check_truncates(nn.Module):
    """Too long: adds the table to the first max_len positions, leaves the rest."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = min(X.shape[1], self.P.shape[1])
        P = F.pad(self.P[:, :n], (0, 0, 0, X.shape[1] - n))
        return self.dropout(X + P)


class W_13_shared_table_across_dims(nn.Module):
    """One value per (position, feature) for the first 16 features, tiled across d."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.d = num_hiddens
        self.P = nn.Parameter(torch.randn(1, max_len, min(16, num_hiddens)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        P = self.P[:, :X.shape[1]]
        reps = -(-self.d // P.shape[-1])
        return self.dropout(X + P.repeat(1, 1, reps)[..., :self.d])


class W_14_dropout_before_add_on_X(C_01_reference):
    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X) + self.P[:, :X.shape[1]]


class W_15_low_rank_table(nn.Module):
    """P = A B with rank 4: positions are not free vectors."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.A = nn.Parameter(torch.randn(max_len, 4))
        self.B = nn.Parameter(torch.randn(4, num_hiddens) / 2)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.A.shape[0]:
            raise ValueError("too long")
        return self.dropout(X + self.A[:X.shape[1]] @ self.B)


class W_16_dropout_mask_shared_across_batch(C_01_reference):
    """One dropout mask per (position, feature), the same for every example."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand(1, *Y.shape[1:], device=Y.device) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_17_token_level_dropout(C_01_reference):
    """Drops whole token vectors (one draw per position, shared by the features)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :X.shape[1]]
        if self.training and self.p > 0:
            keep = (torch.rand(*Y.shape[:2], 1, device=Y.device) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_18_dropout1d_channels(C_01_reference):
    """nn.Dropout1d: drops whole feature channels of an example (all positions)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout1d(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :X.shape[1]]
        return self.dropout(Y.transpose(1, 2)).transpose(1, 2)


class W_19_dropout_own_seeded_generator(C_01_reference):
    """Dropout mask from a private generator seeded once: the same mask every call."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.p = dropout

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        Y = X + self.P[:, :X.shape[1]]
        if self.training and self.p > 0:
            g = torch.Generator(device=Y.device).manual_seed(1234)
            keep = (torch.rand(Y.shape, generator=g, device=Y.device) >= self.p).to(Y.dtype)
            Y = Y * keep / (1 - self.p)
        return Y


class W_20_table_in_float16_storage(nn.Module):
    """Keeps the table in float16 to save memory, adds it cast to X's dtype."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens).half())
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]].to(X.dtype))


_TABLES = {}


class W_21_shared_storage_table(nn.Module):
    """Draws the table once per (max_len, d) and wraps it in a new Parameter per
    instance: every instance's parameter shares the same storage."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        key = (max_len, num_hiddens)
        if key not in _TABLES:
            _TABLES[key] = torch.randn(1, max_len, num_hiddens)
        self.P = nn.Parameter(_TABLES[key])
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_22_rate_is_keep_probability(C_01_reference):
    """Confuses the rate with the keep probability: nn.Dropout(1 - dropout).
    Identical at dropout 0.5."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(1 - dropout if dropout > 0 else 0.0)


class W_23_dropout_twice(C_01_reference):
    def forward(self, X):
        return self.dropout(super().forward(X))


class W_24_fork_rng_seeded_init(nn.Module):
    """Reseeds inside torch.random.fork_rng(): the global state is restored afterwards,
    but every instance gets the same table and the caller's seed is ignored."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        with torch.random.fork_rng():
            torch.manual_seed(42)
            P = torch.randn(1, max_len, num_hiddens)
        self.P = nn.Parameter(P)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_25_table_float64_in_float32_model(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))
