"""Round 3 red team (writer R3, issue 12), ch06_lpe: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round3/sols/ch06_lpe.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass)."""
# flake8: noqa
CHECK = "check_learned_positional_encoding"
import torch
from torch import nn

class C_1_randn_std1(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens))
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1], :])

class O_1_embedding_table(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.pos = nn.Embedding(max_len, num_hiddens)
        self.dropout = nn.Dropout(dropout)
    def forward(self, X):
        pos = torch.arange(X.shape[1], device=X.device)
        return self.dropout(X + self.pos(pos))

class O_2_std_002_like_bert(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(max_len, num_hiddens) * 0.02)
    def forward(self, X):
        return self.dropout(X + self.P[: X.shape[1]])

class O_3_zero_init(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.zeros(1, max_len, num_hiddens))
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])

class W_01_buffer_not_parameter(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("P", torch.randn(1, max_len, num_hiddens))
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])

class W_02_lazy_param_per_length(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.h = num_hiddens
        self.P = None
    def forward(self, X):
        if self.P is None or self.P.shape[1] != X.shape[1]:
            self.P = nn.Parameter(torch.randn(1, X.shape[1], self.h, device=X.device))
        return self.dropout(X + self.P)

class W_03_dropout_before_add(C_1_randn_std1):
    def forward(self, X):
        return self.dropout(X) + self.P[:, : X.shape[1]]

class W_04_dropout_on_P_only(C_1_randn_std1):
    def forward(self, X):
        return X + self.dropout(self.P[:, : X.shape[1]])

class W_05_last_positions(C_1_randn_std1):
    def forward(self, X):
        return self.dropout(X + self.P[:, -X.shape[1]:])

class W_06_scales_X_by_sqrt_d(C_1_randn_std1):
    def forward(self, X):
        return self.dropout(X * X.shape[-1] ** 0.5 + self.P[:, : X.shape[1]])

class W_07_dropout_hardcoded_01(C_1_randn_std1):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__(num_hiddens, 0.1, max_len)

class W_08_no_dropout(C_1_randn_std1):
    def forward(self, X):
        return X + self.P[:, : X.shape[1]]

class W_09_one_shared_vector(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 1, num_hiddens))
    def forward(self, X):
        return self.dropout(X + self.P)

class W_10_positions_scaled_vector(nn.Module):
    # one learned direction times the position index: "learned" but not one vector per position
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.w = nn.Parameter(torch.randn(num_hiddens) * 0.1)
        self.max_len = max_len
    def forward(self, X):
        pos = torch.arange(X.shape[1], device=X.device, dtype=X.dtype)[:, None]
        return self.dropout(X + pos * self.w)

class W_11_P_requires_grad_false(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, max_len, num_hiddens), requires_grad=False)
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])

class W_12_max_len_ignored_table_64(nn.Module):
    def __init__(self, num_hiddens, dropout, max_len=1000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.P = nn.Parameter(torch.randn(1, 64, num_hiddens))
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]])

class W_13_detached_P_in_forward(C_1_randn_std1):
    def forward(self, X):
        return self.dropout(X + self.P[:, : X.shape[1]].detach())
