"""Round 14 red team (writer C, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round14/C/sols/ch06_learned_pe.py (Round 14, writer C, check_learned_positional_encoding: entries are classes.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: main accepted W_18 (a global module forward hook registered
in __init__) and W_21 (the table drawn inside fork_rng: every instance the same). Now every
build and forward of the check compares torch.nn's global module hooks before and after
(W_18), and two instances built one after the other from one seed must not start from the
same random-looking table (W_21; a smooth, deterministic table such as a sinusoid is still
allowed).
"""
# flake8: noqa
import random

import numpy as np
import torch
from torch import nn

CHECK = "check_learned_positional_encoding"


class _Base(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def _check(self, X):
        if X.shape[1] > self.P.shape[1]:
            raise ValueError(f"sequence of length {X.shape[1]} longer than max_len={self.P.shape[1]}")

    def forward(self, X):
        self._check(X)
        return self.dropout(X + self.P[:, :X.shape[1], :])


class C_01_reference(_Base):
    pass


class C_02_embedding_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise IndexError(f"length {n} > max_len {self.max_len}")
        pos = torch.arange(n, device=X.device)
        return self.dropout(X + self.emb(pos).unsqueeze(0))


class O_03_positions_under_no_grad_and_functional_dropout(_Base):
    """Position ids built under no_grad; F.dropout with the module's training flag."""
    def forward(self, X):
        self._check(X)
        with torch.no_grad():
            ids = torch.arange(X.shape[1], device=X.device)
        return nn.functional.dropout(X + self.P[0, ids], self.dropout.p, self.training)


class O_04_default_dtype_set_and_restored(_Base):
    def forward(self, X):
        old = torch.get_default_dtype()
        torch.set_default_dtype(X.dtype)
        try:
            return super().forward(X)
        finally:
            torch.set_default_dtype(old)


class O_05_manual_mask_from_global_generator(_Base):
    """Dropout by hand: a Bernoulli mask from the global generator, scaled by 1/(1-p)."""
    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        p = self.dropout.p
        if not self.training or p == 0:
            return Y
        if p == 1:
            return torch.zeros_like(Y)
        mask = torch.empty_like(Y).bernoulli_(1 - p)
        return Y * mask / (1 - p)


class O_06_trunc_normal_init_shape_2d(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.table = nn.Parameter(torch.empty(max_len, num_hiddens))
        nn.init.trunc_normal_(self.table, std=1.0, a=-3.0, b=3.0)
        self.drop = nn.Dropout(dropout)

    def forward(self, X):
        n = X.shape[1]
        if n > self.table.shape[0]:
            raise ValueError("too long")
        return self.drop(X + self.table[:n])


# ---------------------------------------------------------------- wrong
class W_10_private_os_seeded_generator(_Base):
    """The table is drawn from a private generator seeded from the OS (g.seed()): the caller's
    seed no longer reproduces the model (two runs after set_seed(0) differ)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        nn.Module.__init__(self)
        self.dropout = nn.Dropout(dropout)
        g = torch.Generator()
        g.seed()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, generator=g))


class W_11_embedding_scale_grad_by_freq(C_02_embedding_table):
    """nn.Embedding(scale_grad_by_freq=True) looked up with (batch, n) ids: each position's
    gradient is divided by the batch size instead of summed over it (any batch > 1)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.emb = nn.Embedding(max_len, num_hiddens, scale_grad_by_freq=True)

    def forward(self, X):
        n = X.shape[1]
        if n > self.max_len:
            raise IndexError("too long")
        ids = torch.arange(n, device=X.device).expand(X.shape[0], n)
        return self.dropout(X + self.emb(ids))


class W_12_embedding_sparse(C_02_embedding_table):
    """nn.Embedding(sparse=True): sparse gradients; Adam/AdamW (the course's optimiser) and
    weight decay refuse them, so the model cannot be trained with the usual optimiser."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.emb = nn.Embedding(max_len, num_hiddens, sparse=True)


class W_13_embedding_padding_idx0(C_02_embedding_table):
    """nn.Embedding(padding_idx=0): position 0's vector is 0 and never trained."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.emb = nn.Embedding(max_len, num_hiddens, padding_idx=0)


class W_14_embedding_max_norm(C_02_embedding_table):
    """nn.Embedding(max_norm=sqrt(d)): renormalises rows in place at lookup (parameters
    changed by forward; vectors of norm > sqrt(d) shrunk)."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.emb = nn.Embedding(max_len, num_hiddens, max_norm=float(num_hiddens) ** 0.5)


class W_15_forces_grad_mode_on(_Base):
    """forward calls torch.set_grad_enabled(True): under the caller's no_grad the output
    requires grad and the caller's block records graphs afterwards."""
    def forward(self, X):
        torch.set_grad_enabled(True)
        return super().forward(X)


class H_16_numpy_rng_in_eval_forward(_Base):
    # H_: a hole found by round 14 and NOT yet fixed (the fixer's run of this file did not
    # finish; the lead's run found it at the end of the session): wrong, still accepted by
    # check_learned_positional_encoding (random=True, so _core does not judge its draws).
    # Fix it in ch06, then rename it W_.
    """forward draws from NumPy's global generator even in eval mode (a random 'jitter' of 0)."""
    def forward(self, X):
        np.random.rand()
        return super().forward(X)


class H_17_python_random_in_init(_Base):
    # H_: a hole found by round 14 and NOT yet fixed (the fixer's run of this file did not
    # finish; the lead's run found it at the end of the session): wrong, still accepted by
    # check_learned_positional_encoding (random=True, so _core does not judge its draws).
    # Fix it in ch06, then rename it W_.
    """__init__ draws a Python `random` number (e.g. for a name): advances the caller's stream."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.tag = random.random()


class W_18_global_module_forward_hook(_Base):
    """__init__ registers a *global* module forward hook (to log shapes): every module the
    caller runs afterwards calls it, for good."""
    _installed = []

    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        log = []
        self._installed.append(nn.modules.module.register_module_forward_hook(
            lambda m, i, o: log.append(type(m).__name__)))


class W_19_rewinds_generator_in_eval(_Base):
    """In eval mode forward 'resets randomness' with manual_seed(initial_seed()): the caller's
    generator is rewound (later draws repeat)."""
    def forward(self, X):
        if not self.training:
            torch.manual_seed(torch.initial_seed())
        return super().forward(X)


class H_20_retain_grad_on_input(_Base):
    # H_: a hole found by round 14 and NOT yet fixed (the fixer's run of this file did not
    # finish; the lead's run found it at the end of the session): wrong, still accepted by
    # check_learned_positional_encoding (random=True, so _core does not judge its draws).
    # Fix it in ch06, then rename it W_.
    """forward calls X.retain_grad(): the caller's non-leaf X keeps a .grad after backward."""
    def forward(self, X):
        if X.requires_grad:
            X.retain_grad()
        return super().forward(X)


class W_21_fork_rng_init(_Base):
    """__init__ draws inside fork_rng (to 'not disturb' the caller): every instance made from
    the same generator state gets the same table."""
    def __init__(self, num_hiddens, dropout, max_len=1000):
        nn.Module.__init__(self)
        self.dropout = nn.Dropout(dropout)
        with torch.random.fork_rng(devices=[]):
            self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))


class W_22_anomaly_mode_left_on(_Base):
    def forward(self, X):
        """Debugging left in: anomaly detection on for the caller (backward raises on NaN)."""
        torch.autograd.set_detect_anomaly(True)
        return super().forward(X)


class W_23_dropout_mask_shared_over_batch(_Base):
    """One dropout mask of shape (1, n, d) shared by every example in the batch."""
    def forward(self, X):
        self._check(X)
        Y = X + self.P[:, :X.shape[1]]
        p = self.dropout.p
        if not self.training or p == 0:
            return Y
        if p == 1:
            return torch.zeros_like(Y)
        mask = torch.empty_like(Y[:1]).bernoulli_(1 - p)
        return Y * mask / (1 - p)


class W_24_flush_denormal_in_init(_Base):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        """Flush-denormal turned on by the constructor and left on."""
        super().__init__(num_hiddens, dropout, max_len)
        torch.set_flush_denormal(True)
