"""Round 9 red team (writer C, issue 12), ch07_prenorm: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/C/sols/ch07_prenorm.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_); every W_ failed in round 9 already. S_01 (the
two dropouts swapped: the same p, so the same numbers) is accepted; S_ are not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F

from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_01_functional_dropout(TransformerEncoderBlock):
    """F.dropout with the module's p and the block's training flag."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        Z = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Z, Z, Z, valid_lens), p, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p, self.training)


class O_02_functional_layer_norm_with_params(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        Z = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z2 = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return Y + self.addnorm2.dropout(self.ffn(Z2))


class S_01_dropouts_swapped(TransformerEncoderBlock):
    """addnorm2's dropout on the attention, addnorm1's on the FFN (same p: same numbers)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_same_ln_twice(TransformerEncoderBlock):
    """Uses addnorm1.ln before both sublayers (ln2 never used): equal only at init."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_02_lns_swapped(TransformerEncoderBlock):
    """ln2 before the attention, ln1 before the FFN."""
    def forward(self, X, valid_lens):
        Z = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_03_layer_norm_without_affine(TransformerEncoderBlock):
    """F.layer_norm without the LayerNorms' weight and bias: right only at init."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        Z = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_04_new_layernorms(TransformerEncoderBlock):
    """Makes its own LayerNorms instead of using addnorm1.ln / addnorm2.ln."""
    def __init__(self, num_hiddens, *args, **kwargs):
        super().__init__(num_hiddens, *args, **kwargs)
        self.ln_a = nn.LayerNorm(num_hiddens)
        self.ln_b = nn.LayerNorm(num_hiddens)

    def forward(self, X, valid_lens):
        Z = self.ln_a(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.ln_b(Y)))


class W_05_inplace_residual(TransformerEncoderBlock):
    """X += ...: the right output, but the caller's X is overwritten."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        if X.requires_grad:
            X = X.clone()
        X += self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        X += self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X


class W_06_dropout_hardcoded_p(TransformerEncoderBlock):
    """F.dropout with p = 0.1 whatever the block was built with."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Z, Z, Z, valid_lens), 0.1, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), 0.1, self.training)


class W_07_new_dropout_module_in_forward(TransformerEncoderBlock):
    """nn.Dropout(p) made in forward is always in training mode: drops in eval too."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        Z = self.addnorm1.ln(X)
        Y = X + nn.Dropout(p)(self.attention(Z, Z, Z, valid_lens))
        return Y + nn.Dropout(p)(self.ffn(self.addnorm2.ln(Y)))


class W_08_valid_lens_last_query(TransformerEncoderBlock):
    """Per-query lengths (batch, n) collapsed to the last query's: no causal mask left."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, -1]
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_09_ffn_residual_from_normed(TransformerEncoderBlock):
    """Second residual adds to LN2(Y) instead of Y."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z2 = self.addnorm2.ln(Y)
        return Z2 + self.addnorm2.dropout(self.ffn(Z2))


class W_10_keys_values_unnormed(TransformerEncoderBlock):
    """Only the queries are normalised; keys and values are the raw X."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_11_parallel_block(TransformerEncoderBlock):
    """GPT-J style: both sublayers read X (not Y)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        a = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        f = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X + a + f


class W_12_dropout_on_ln_output(TransformerEncoderBlock):
    """Dropout on the sublayer's input (after LN) instead of its output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_13_eps_changed(TransformerEncoderBlock):
    """Changes the LayerNorms' eps to 1e-2 in forward (module state changed)."""
    def forward(self, X, valid_lens):
        self.addnorm1.ln.eps = 1e-2
        self.addnorm2.ln.eps = 1e-2
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_14_final_norm(TransformerEncoderBlock):
    """Normalises the sum at the end (a post-LN tail)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.ln(Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


class W_15_valid_lens_ignored_when_2d(TransformerEncoderBlock):
    """Drops per-query lengths (passes None for a 2-D valid_lens)."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = None
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_16_ln_stats_over_batch_of_first_row(TransformerEncoderBlock):
    """Normalises with the mean/std of the first example (batch-dependent)."""
    def forward(self, X, valid_lens):
        def ln(mod, T):
            mu = T[:1].mean(-1, keepdim=True)
            var = T[:1].var(-1, unbiased=False, keepdim=True)
            return (T - mu) / torch.sqrt(var + mod.eps) * mod.weight + mod.bias
        Z = ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(self.addnorm2.ln, Y)))


class W_17_residual_detached(TransformerEncoderBlock):
    """The residual stream is detached: same values, no gradient along the skip path."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y.detach() + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_18_ln_under_no_grad(TransformerEncoderBlock):
    """LayerNorms under torch.no_grad(): no gradient to their weights or through them."""
    def forward(self, X, valid_lens):
        with torch.no_grad():
            Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        with torch.no_grad():
            Z2 = self.addnorm2.ln(Y)
        return Y + self.addnorm2.dropout(self.ffn(Z2))


class O_03_valid_lens_default_full(TransformerEncoderBlock):
    """None replaced by full lengths (the same attention)."""
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = torch.full((X.shape[0],), X.shape[1], device=X.device)
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
