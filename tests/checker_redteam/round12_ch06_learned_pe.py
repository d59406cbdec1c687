"""Round 12 red team (writer B, issue 12), ch06_learned_pe: wrong (W_), right (C_) and odd
but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round12/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Accepted in round 12, now rejected: W_21 (dropout masks from a private
torch.Generator seeded in __init__: instances built and called after two different seeds
now must drop different entries), W_22 (default max_len=5000: with max_len left at its
default, a sequence of 1001 must now raise). Message: W_15 (the table clamped in place in
forward) is now told that forward changes the parameter in place, not that it keeps a slice.
W_09 and W_11 are refused by the training test only (train=True)."""
# flake8: noqa
import math

import torch
import torch.nn.functional as F
from torch import nn

CHECK = "check_learned_positional_encoding"


class _Base(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def _check(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence of length {X.shape[1]} is longer than "
                             f"max_len={self.P.shape[1]}")


class C_01_reference(_Base):
    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class O_02_embedding_table(nn.Module):
    """nn.Embedding (N(0, 1) init) looked up at arange(n); F.dropout with self.training."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p, self.max_len = dropout, max_len
        self.pos = nn.Embedding(max_len, num_hiddens)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise ValueError(f"length {n} > max_len={self.max_len}")
        pos = torch.arange(n, device=X.device)
        return F.dropout(X + self.pos(pos), self.p, training=self.training)


class O_03_manual_bernoulli_dropout(_Base):
    """Dropout written out: an independent Bernoulli(1 - p) per entry, scaled by 1/(1-p).
    Right in distribution; it draws different random numbers from nn.Dropout."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        keep = (torch.rand_like(Y) >= self.rate).to(Y.dtype)
        return Y * keep / (1 - self.rate)


# ------------------------------------------------------------------ wrong
class W_01_mask_shared_over_batch(_Base):
    """One dropout mask of shape (1, n, d) for the whole batch: the right rate per entry,
    but every example loses the same entries."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        keep = (torch.rand(1, *Y.shape[1:], device=Y.device) >= self.rate).to(Y.dtype)
        return Y * keep / (1 - self.rate)


class W_02_mask_per_position(_Base):
    """A dropout draw per (example, position) shared by all features: whole tokens drop."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        keep = (torch.rand(*Y.shape[:2], 1, device=Y.device) >= self.rate).to(Y.dtype)
        return Y * keep / (1 - self.rate)


class W_03_dropout1d(_Base):
    """nn.Dropout1d: on (batch, n, d) it zeroes whole positions (channels = n)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout1d(dropout)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_04_add_in_place(_Base):
    """X += P: the caller's X changes (and a leaf X that requires grad raises)."""

    def forward(self, X):
        self._check(X)
        if not X.requires_grad:
            X += self.P[:, :X.shape[1]]
            return self.dropout(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_05_functional_dropout_always(_Base):
    """F.dropout without training=: drops in evaluation mode too."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        return F.dropout(X + self.P[:, :X.shape[1]], self.rate)


class W_06_dropout_on_table_only(_Base):
    def forward(self, X):
        self._check(X)
        return X + self.dropout(self.P[:, :X.shape[1]])


class W_07_no_rescale(_Base):
    """Manual dropout that zeroes at the right rate but does not scale by 1/(1-p)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training:
            return Y
        return Y * (torch.rand_like(Y) >= self.rate).to(Y.dtype)


class W_08_extra_shared_bias(_Base):
    """Adds a learned bias besides the table (zero at the start): outputs equal at
    initialisation, but the table is no longer p_i 'themselves'."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.bias = nn.Parameter(torch.zeros(num_hiddens))

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]] + self.bias)


class W_09_table_scaled_by_sqrt_d_inv(_Base):
    """Table started at std 1/sqrt(d) (as for weights): much smaller than 1."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.div_(math.sqrt(num_hiddens))

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


_TABLES = {}


class W_10_shared_table(nn.Module):
    """One table per (max_len, num_hiddens), shared by every instance (module-level)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        key = (max_len, num_hiddens)
        if key not in _TABLES:
            _TABLES[key] = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = _TABLES[key]
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_11_rand_uniform_init(_Base):
    """torch.rand: uniform on [0, 1) (mean 0.5, std 0.29), not std about 1."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.P = nn.Parameter(torch.rand(1, max_len, num_hiddens))

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_12_positions_from_one(_Base):
    """Positions counted 1..n on a max_len table: p_0 is never used, and a sequence of
    exactly max_len positions does not fit."""

    def forward(self, X):
        if X.shape[1] >= self.P.shape[1]:
            raise ValueError("too long")
        return self.dropout(X + self.P[:, 1:X.shape[1] + 1])


class W_13_scale_embeddings(_Base):
    """Multiplies X by sqrt(d) before adding, as the Transformer's embedding does."""

    def forward(self, X):
        self._check(X)
        return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, :X.shape[1]])


class W_14_dropout_p_as_keep(_Base):
    """Treats the argument as a keep probability: nn.Dropout(1 - dropout)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(1 - dropout) if 0 < dropout < 1 else nn.Dropout(dropout)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_15_clamp_table(_Base):
    """Clamps the table in place at every call to keep it 'near the embeddings'."""

    def forward(self, X):
        self._check(X)
        with torch.no_grad():
            self.P.clamp_(-3, 3)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_16_mean_over_batch_dropout(_Base):
    """One dropout draw per (example, feature), shared by all positions of the sequence."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        # one draw per feature, shared over the positions: (b, 1, d)
        keep = (torch.rand(Y.shape[0], 1, Y.shape[2], device=Y.device) >= self.rate)
        return Y * keep.to(Y.dtype) / (1 - self.rate)


class W_17_fresh_unseeded_generator(_Base):
    """torch.Generator() without a seed 'so as not to touch the global RNG': it always
    starts from the same default seed, so every instance gets the same table."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        g = torch.Generator()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, generator=g))

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_18_dropout_then_add(_Base):
    def forward(self, X):
        self._check(X)
        return self.dropout(X) + self.P[:, :X.shape[1]]


class W_19_last_rows(_Base):
    """The table's last n rows: position 0 gets a different vector for every n."""

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, self.P.shape[1] - X.shape[1]:])


class W_20_mask_cached_per_shape(_Base):
    """Draws a dropout mask once per input shape and reuses it: every later call with the
    same shape drops the same entries."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate, self.masks = dropout, {}

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        if Y.shape not in self.masks:
            self.masks[Y.shape] = (torch.rand(Y.shape, device=Y.device) >= self.rate)
        return Y * self.masks[Y.shape].to(Y.dtype) / (1 - self.rate)


class W_21_private_generator_dropout(_Base):
    """Dropout masks from a private generator seeded in __init__ ('reproducible'): every
    instance drops the same entries at its k-th call, whatever the caller's seed."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout
        self.gen = torch.Generator().manual_seed(1234)

    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        if not self.training or self.rate == 0:
            return Y
        keep = torch.rand(Y.shape, generator=self.gen) >= self.rate
        return Y * keep.to(Y.dtype) / (1 - self.rate)


class W_22_default_max_len_5000(_Base):
    """The PyTorch tutorial's default max_len=5000 instead of the course's 1000: with the
    default, a sequence of 1001 to 5000 positions does not raise."""

    def __init__(self, num_hiddens, dropout, max_len=5000):
        super().__init__(num_hiddens, dropout, max_len)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])


class W_23_table_rounded_up_to_64(_Base):
    """Rows rounded up to a multiple of 64 'for alignment', the length checked against the
    table: a sequence a little longer than max_len does not raise."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, -(-max_len // 64) * 64)

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1]])
