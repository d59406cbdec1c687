"""Round 6 red team (writer R6-B, issue 12), ch06_learned_pe: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round6/B/sols/ch06_learned_pe.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import math
import torch
from torch import nn

CHECK = "check_learned_positional_encoding"


class C_01_reference(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class O_02_embedding_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens)      # N(0, 1) init
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        pos = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.pos(pos).unsqueeze(0).to(X.dtype))


class O_03_2d_table_functional_dropout(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = dropout
        self.P = nn.Parameter(torch.empty(max_len, num_hiddens).normal_(0.0, 1.0))

    def forward(self, X):
        Y = X + self.P[: X.shape[1]]
        return nn.functional.dropout(Y, self.p, self.training)


# ---------------- wrong ----------------
class W_01_dropout_on_X_only(C_01_reference):
    def forward(self, X):
        return self.dropout(X) + self.P[:, : X.shape[1], :]


class W_02_dropout_on_P_only(C_01_reference):
    def forward(self, X):
        return X + self.dropout(self.P[:, : X.shape[1], :])


class W_03_mask_shared_across_batch(C_01_reference):
    # hand-made dropout: one mask (1, n, d) for the whole batch
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training or self.rate == 0:
            return Y
        keep = (torch.rand(1, *Y.shape[1:], device=Y.device) >= self.rate).to(Y.dtype)
        return Y * keep / (1 - self.rate)


class W_04_mask_per_token(C_01_reference):
    # drops whole token vectors (mask (b, n, 1)) instead of single entries
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training or self.rate == 0:
            return Y
        keep = (torch.rand(*Y.shape[:2], 1, device=Y.device) >= self.rate).to(Y.dtype)
        return Y * keep / (1 - self.rate)


class W_05_no_rescale(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training:
            return Y
        return Y * (torch.rand_like(Y) >= self.rate).to(Y.dtype)


class W_06_keep_prob_confusion(C_01_reference):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.dropout = nn.Dropout(1 - dropout if 0 < dropout < 1 else dropout)


_TABLES = {}


class W_07_table_shared_between_instances(nn.Module):
    # one table per (max_len, num_hiddens), cached at module level
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        key = (max_len, num_hiddens)
        if key not in _TABLES:
            _TABLES[key] = nn.Parameter(torch.randn(1, max_len, num_hiddens))
        self.P = _TABLES[key]
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_08_lazy_table_created_in_forward(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.max_len, self.num_hiddens = max_len, num_hiddens
        self.dropout = nn.Dropout(dropout)
        self.P = None

    def forward(self, X):
        if self.P is None:
            self.P = nn.Parameter(torch.randn(1, self.max_len, self.num_hiddens,
                                              device=X.device))
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_09_slice_cached_at_first_call(C_01_reference):
    # keeps the first slice it cut: stale after an optimizer step (and wrong for longer X)
    def forward(self, X):
        if not hasattr(self, "_slice") or self._slice.shape[1] < X.shape[1]:
            self._slice = self.P[:, : X.shape[1], :]
        return self.dropout(X + self._slice.detach()[:, : X.shape[1]] +
                            0 * self.P[:, : X.shape[1]])


class W_10_last_n_rows(C_01_reference):
    def forward(self, X):
        n = X.shape[1]
        return self.dropout(X + self.P[:, self.P.shape[1] - n:, :])


class W_11_in_place_add_to_input(C_01_reference):
    def forward(self, X):
        X += self.P[:, : X.shape[1], :]
        return self.dropout(X)


class W_12_wraps_past_max_len(C_01_reference):
    # positions >= max_len silently reuse rows (i % max_len) instead of raising
    def forward(self, X):
        idx = torch.arange(X.shape[1], device=X.device) % self.P.shape[1]
        return self.dropout(X + self.P[:, idx, :])


class W_13_scaled_embeddings_sqrt_d(C_01_reference):
    # the Transformer habit: X * sqrt(d) before adding positions
    def forward(self, X):
        return self.dropout(X * math.sqrt(X.shape[-1]) + self.P[:, : X.shape[1], :])


class W_14_float64_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens, dtype=torch.float64))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_15_table_of_rank_one(nn.Module):
    # p_i = a_i * v: one learned scalar per position times one shared learned vector
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.a = nn.Parameter(torch.randn(1, max_len, 1))
        self.v = nn.Parameter(torch.randn(1, 1, num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.a[:, : X.shape[1]] * self.v)


class W_16_dropout_twice(C_01_reference):
    # dropout on X and again on the sum
    def forward(self, X):
        return self.dropout(self.dropout(X) + self.P[:, : X.shape[1], :])


class S_17_small_init_002(C_01_reference):
    # GPT-2 style init std 0.02: structure right, but against the hint about std 1
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.mul_(0.02)


class O_04_parameter_list(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.p = nn.ParameterList([nn.Parameter(torch.randn(num_hiddens))
                                   for _ in range(max_len)])
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        P = torch.stack([self.p[i] for i in range(X.shape[1])])      # (n, d)
        return self.dropout(X + P.to(X.dtype))


class W_17_len_X_is_batch(C_01_reference):
    # len(X) is the batch size, not the sequence length
    def forward(self, X):
        return self.dropout(X + self.P[:, : len(X), :][:, : X.shape[1]])


class W_18_mask_drawn_once(C_01_reference):
    # dropout mask drawn at the first training call and reused afterwards
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate, self._mask = dropout, None

    def forward(self, X):
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training or self.rate == 0:
            return Y
        if self._mask is None or self._mask.shape != Y.shape:
            self._mask = (torch.rand_like(Y) >= self.rate).to(Y.dtype) / (1 - self.rate)
        return Y * self._mask


class W_19_own_generator_seeded(C_01_reference):
    # "reproducible" dropout: a private generator seeded at every call
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        Y = X + self.P[:, : X.shape[1], :]
        if not self.training or self.rate == 0:
            return Y
        g = torch.Generator(device=Y.device).manual_seed(1234)
        keep = torch.rand(Y.shape, generator=g, device=Y.device) >= self.rate
        return Y * keep.to(Y.dtype) / (1 - self.rate)


class W_20_always_float32(C_01_reference):
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :]).float()


class W_21_ignores_max_len(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.P = nn.Parameter(torch.randn(1, 1000, num_hiddens))
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class O_05_learned_init_from_sinusoid(nn.Module):
    # a learned table that starts from the sinusoid (then trains freely, per position)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        from book.attention import PositionalEncoding
        self.P = nn.Parameter(PositionalEncoding(num_hiddens, 0.0, max_len).P.clone())
        self.dropout = nn.Dropout(dropout)

    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])


class W_23_functional_dropout_always_on(C_01_reference):
    # F.dropout defaults to training=True: drops in eval mode too
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        self.rate = dropout

    def forward(self, X):
        return nn.functional.dropout(X + self.P[:, : X.shape[1], :], self.rate)


class S_18_uniform_init(C_01_reference):
    # torch.rand init: mean 0.5, std 0.29 (hint: the tokens have std 1)
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, dropout, max_len)
        with torch.no_grad():
            self.P.copy_(torch.rand_like(self.P))


class W_24_positions_from_one(C_01_reference):
    # row 0 "reserved" (for padding / a CLS token): position i reads row i + 1,
    # so a sequence of exactly max_len positions fails
    def forward(self, X):
        return self.dropout(X + self.P[:, 1: X.shape[1] + 1, :])
