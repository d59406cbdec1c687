"""Round 2 red team (writer R2), ch06_lpe: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch06_lpe.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch
from torch import nn

CHECK = "check_learned_positional_encoding"


class C_randn(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class O_embedding(nn.Module):
    """nn.Embedding over the positions: the same thing, a different container."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        idx = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.pos(idx).to(X.dtype))


class O_2d_param(nn.Module):
    """(max_len, d) table broadcast over the batch; init std 0.5."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.table = nn.Parameter(0.5 * torch.randn(max_len, num_hiddens))
        self.drop = nn.Dropout(dropout)

    def forward(self, X):
        return self.drop(X + self.table[:X.shape[1]])


class W_buffer(nn.Module):
    """A buffer: not trainable."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_plain_tensor(nn.Module):
    """requires_grad tensor attribute: not registered, the optimiser never sees it."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.randn(1, max_len, num_hiddens, requires_grad=True)

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :].to(X.device))


class W_zeros(nn.Module):
    """Zero init: every position starts with the same vector."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.zeros(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_batch_axis(nn.Module):
    """Slices the table with X.shape[0] (the batch) instead of X.shape[1]."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(max_len, 1, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:X.shape[0]])


class W_no_dropout(nn.Module):
    """Forgets the dropout."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return X + self.P[:, :X.shape[1], :]


class W_dropout_before_add(nn.Module):
    """Dropout on the tokens only, then adds the positions (they never get dropped)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X) + self.P[:, :X.shape[1], :]


class W_detach(nn.Module):
    """Detaches the table in forward: no gradient reaches it."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :].detach())


class W_one_vector(nn.Module):
    """One vector for every position."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 1, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P)


class W_multiply(nn.Module):
    """Multiplies the tokens by the position vectors."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X * self.P[:, :X.shape[1], :])


class W_tiny_init(nn.Module):
    """Init std 1e-4: positions start almost equal and are drowned by std-1 tokens."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(1e-4 * torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])


class W_inplace_add(nn.Module):
    """Adds in place into X: changes the caller's tensor."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        X += self.P[:, :X.shape[1], :]
        return self.dropout(X)


class W_last_rows(nn.Module):
    """Takes the table's last n rows: position i's vector depends on the length n."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, -X.shape[1]:, :])


class W_fixed_len_slice(nn.Module):
    """Hard-codes the slice to 8 positions (the reversal task's longest length)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        P = self.P[:, :8, :]
        if X.shape[1] < 8:
            P = P[:, :X.shape[1]]
        return self.dropout(X + P)


class W_huge_init(nn.Module):
    """Init std 10: the positions drown the std-1 token embeddings."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(10 * torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, :X.shape[1], :])
