"""Round 1 red team, chapter 6: check_learned_positional_encoding (exercise 6.1).

Entries: (checker_name, short_description, kind, class). From the exercise text:
LearnedPositionalEncoding(num_hiddens, dropout, max_len=1000); forward(X) adds one learned
vector p_i per position i < max_len to X (batch, n, num_hiddens) and applies dropout; the
token embeddings it is added to have std 1.
"""
import math

import torch
from torch import nn

C = "check_learned_positional_encoding"


def _sinusoid(max_len, d):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    two_j = torch.arange(0, d, 2, dtype=torch.float32)
    angles = pos / torch.pow(10000, two_j / d)
    P = torch.zeros(1, max_len, d)
    P[:, :, 0::2] = torch.sin(angles)
    P[:, :, 1::2] = torch.cos(angles[:, : d // 2])
    return P


# --------------------------------------------------------------------------- wrong

class ScaledSinusoid(nn.Module):
    """Kind 5: one learnable scale times the fixed sinusoid (the issue's example)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.ones(()))
        self.register_buffer("P", _sinusoid(max_len, num_hiddens), persistent=False)

    def forward(self, X):
        return self.dropout(X + self.scale * self.P[:, : X.shape[1]])


class NoDropout(nn.Module):
    """Kind 5: the table is right, dropout is never applied."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return X + self.P[:, : X.shape[1]]


class DropoutOnTableOnly(nn.Module):
    """Kind 5: dropout on the positional vectors only: X + dropout(P)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return X + self.dropout(self.P[:, : X.shape[1]])


class DropoutBeforeAdd(nn.Module):
    """Kind 5: dropout(X) + P."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X) + self.P[:, : X.shape[1]]


class FixedDropout(nn.Module):
    """Kind 5: ignores the dropout argument, always 0.1."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class ZeroInit(nn.Module):
    """Kind 5: the table starts at zero: every position gets the same vector at first."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.zeros(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class MultiplyX(nn.Module):
    """Kind 5: multiplies X by the table instead of adding it."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X * self.P[:, : X.shape[1]])


class BufferTable(nn.Module):
    """Kind 5: a random table registered as a buffer: not trainable."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class PlainAttribute(nn.Module):
    """Kind 5: a tensor with requires_grad=True stored as a plain attribute: it gets
    gradients but is not in parameters(), so no optimizer trains it."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = torch.randn(1, max_len, num_hiddens, requires_grad=True)

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]].to(X.device))


class ScalarPerPosition(nn.Module):
    """Kind 5: one learned scalar per position, broadcast over the features."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, 1))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class OneSharedVector(nn.Module):
    """Kind 5: one learned vector shared by every position."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 1, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P)


class DetachedTable(nn.Module):
    """Kind 1: a Parameter, but forward adds a detached slice: no gradient."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]].detach())


class FreshEachCall(nn.Module):
    """Kind 5: draws new random vectors at every call (nothing is learned)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.num_hiddens = num_hiddens
        self.bias = nn.Parameter(torch.zeros(num_hiddens))   # 'something trainable'

    def forward(self, X):
        P = torch.randn(1, X.shape[1], self.num_hiddens, device=X.device)
        return self.dropout(X + P + self.bias)


class SmallInit(nn.Module):
    """Kind 5 (hint 'think about std 1'): BERT's std 0.02 init, tiny next to the
    token embeddings."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(0.02 * torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class RandInit(nn.Module):
    """Ambiguous (issue 12: the std hint flips at random for torch.rand): uniform
    [0, 1) init, std 0.29 and mean 0.5. Whatever the verdict, it must be stable."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.rand(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])


class SliceBatchAxis(nn.Module):
    """Kind 6: slices the batch axis self.P[: n] instead of the positions: a shape
    error unless n == max_len."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[: X.shape[1]])


class LastRows(nn.Module):
    """Kind 3: adds the LAST n rows of the table (P[:, -n:]): position 0 of a short
    sequence gets another vector than position 0 of a long one."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, -X.shape[1]:])


class SinusoidPlusZeroLearned(nn.Module):
    """Kind 5: the fixed sinusoid plus a learned table initialised at zero ('learned
    on top of the fixed one')."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("S", _sinusoid(max_len, num_hiddens), persistent=False)
        self.P = nn.Parameter(torch.zeros(1, max_len, num_hiddens))

    def forward(self, X):
        n = X.shape[1]
        return self.dropout(X + self.S[:, :n] + self.P[:, :n])


# --------------------------------------------------------------------------- right

class EmbeddingTable(nn.Module):
    """Right: nn.Embedding(max_len, d) looked up with arange(n)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.pos = nn.Embedding(max_len, num_hiddens)

    def forward(self, X):
        idx = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.pos(idx)[None])


class TwoDimTable(nn.Module):
    """Right: a (max_len, d) Parameter without the batch axis."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens))
        self.drop = nn.Dropout(p=dropout)

    def forward(self, X):
        return self.drop(X + self.P[: X.shape[1]])


class SinusoidInitLearned(nn.Module):
    """Right: a Parameter initialised with the sinusoid (then learned)."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(_sinusoid(max_len, num_hiddens).clone())

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class FunctionalDropout(nn.Module):
    """Right: nn.functional.dropout with self.training, xavier-normal init."""

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.empty(1, max_len, num_hiddens))
        nn.init.normal_(self.P, std=1.0)

    def forward(self, X):
        return nn.functional.dropout(X + self.P[:, : X.shape[1]], self.p, self.training)


WRONG = [
    (C, "one learnable scale times the sinusoid", 5, ScaledSinusoid),
    (C, "no dropout", 5, NoDropout),
    (C, "dropout on the table only: X + dropout(P)", 5, DropoutOnTableOnly),
    (C, "dropout(X) + P", 5, DropoutBeforeAdd),
    (C, "dropout fixed at 0.1", 5, FixedDropout),
    (C, "zero-initialised table", 5, ZeroInit),
    (C, "X * P instead of X + P", 5, MultiplyX),
    (C, "random buffer (not trainable)", 5, BufferTable),
    (C, "plain tensor attribute with requires_grad", 5, PlainAttribute),
    (C, "one scalar per position", 5, ScalarPerPosition),
    (C, "one vector shared by all positions", 5, OneSharedVector),
    (C, "detached table in forward", 1, DetachedTable),
    (C, "fresh random vectors at every call", 5, FreshEachCall),
    (C, "std 0.02 init (BERT's)", 5, SmallInit),
    (C, "torch.rand init (must at least be stable)", 5, RandInit),
    (C, "P[: n] slices the batch axis", 6, SliceBatchAxis),
    (C, "last n rows of the table", 3, LastRows),
    (C, "sinusoid + zero-initialised learned table", 5, SinusoidPlusZeroLearned),
]

RIGHT_BUT_UNUSUAL = [
    (C, "nn.Embedding(max_len, d)", 0, EmbeddingTable),
    (C, "(max_len, d) Parameter", 0, TwoDimTable),
    (C, "learned, initialised with the sinusoid", 0, SinusoidInitLearned),
    (C, "functional dropout, normal_ init", 0, FunctionalDropout),
]
