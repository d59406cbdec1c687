"""Round 2 red team (writer R2), ch07_mask: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch07_mask.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import numpy as np
import torch

CHECK = "check_causal_mask"


def W_triu(num_steps):
    """Transposed: j >= i."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).triu()


def W_strict(num_steps):
    """j < i: a query cannot see itself."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(diagonal=-1)


def W_float01(num_steps):
    """Float 0/1 instead of bool."""
    return torch.ones(num_steps, num_steps).tril()


def W_mha_convention(num_steps):
    """nn.MultiheadAttention's convention: True = masked."""
    return ~torch.ones(num_steps, num_steps, dtype=torch.bool).tril()


def W_additive(num_steps):
    """Additive float mask: 0 where allowed, -inf elsewhere."""
    return torch.zeros(num_steps, num_steps).masked_fill(
        ~torch.ones(num_steps, num_steps, dtype=torch.bool).tril(), float("-inf"))


def W_long(num_steps):
    """int64 0/1."""
    return torch.ones(num_steps, num_steps, dtype=torch.long).tril()


def W_batched(num_steps):
    """Shape (1, n, n)."""
    return torch.ones(1, num_steps, num_steps, dtype=torch.bool).tril()


def W_peek_next(num_steps):
    """diagonal=1: also attends the next token."""
    return torch.ones(num_steps, num_steps, dtype=torch.bool).tril(diagonal=1)


def W_numpy(num_steps):
    """A NumPy array."""
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def W_hardcoded_len(num_steps):
    """Builds a 10 x 10 mask and slices it: breaks above 10 steps."""
    return torch.ones(10, 10, dtype=torch.bool).tril()[:num_steps, :num_steps]


def W_arange_wrong_way(num_steps):
    """Row of query positions vs column of key positions: i <= j."""
    i = torch.arange(num_steps)
    return i[None, :] <= i[:, None] if False else i[:, None] <= i[None, :]


def C_tril(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def O_compare(num_steps):
    """Comparing a column of query positions with a row of key positions."""
    pos = torch.arange(num_steps)
    return pos[None, :] <= pos[:, None]


def O_not_triu(num_steps):
    """Not the strict upper triangle."""
    return torch.triu(torch.ones(num_steps, num_steps), diagonal=1) == 0
