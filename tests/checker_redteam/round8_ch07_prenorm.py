"""Round 8 red team (writer C, issue 12), ch07_prenorm: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/C/sols/ch07_prenorm.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). S_03 (one Dropout module for both
sublayers: the same numbers) is accepted; S_05 (its own inverted-dropout mask, against the
text's "use addnorm's dropouts") is rejected with a message naming the own mask. S_ are
not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_pre_norm_block"
import torch
from torch import nn
from torch.nn import functional as F
from book.transformer import TransformerEncoderBlock


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z = self.addnorm2.ln(Y)
        return Y + self.addnorm2.dropout(self.ffn(Z))


class O_02_functional(TransformerEncoderBlock):
    """F.layer_norm with the LN's own parameters and eps, F.dropout with self.training."""
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        Z = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        A = self.attention(Z, Z, Z, valid_lens)
        Y = X + F.dropout(A, self.addnorm1.dropout.p, self.training)
        Z = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return Y + F.dropout(self.ffn(Z), self.addnorm2.dropout.p, self.training)


class S_03_one_dropout_for_both(TransformerEncoderBlock):
    """Uses addnorm1.dropout for both sublayers (same p, no state: same numbers)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_post_ln(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        return super().forward(X, valid_lens)


class W_02_norm_the_output(TransformerEncoderBlock):
    """Pre-LN inside, but also normalises the block's output (the text: nothing normalizes the sum)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return self.addnorm2.ln(out)


class W_03_no_ffn_dropout(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.ffn(self.addnorm2.ln(Y))


class W_04_dropout_on_residual_sum(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_05_kv_unnormalised(TransformerEncoderBlock):
    """Normalises only the query; keys and values are the raw X."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_06_residual_from_normed(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = Z + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z2 = self.addnorm2.ln(Y)
        return Z2 + self.addnorm2.dropout(self.ffn(Z2))


class W_07_swapped_norms(TransformerEncoderBlock):
    """addnorm2.ln before attention, addnorm1.ln before FFN: same at init (weight 1, bias 0)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_08_ignores_valid_lens(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_09_F_dropout_always_training(TransformerEncoderBlock):
    """F.dropout defaults to training=True: drops in eval mode too."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Z, Z, Z, valid_lens), self.addnorm1.dropout.p)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), self.addnorm2.dropout.p)


class W_10_dropout_before_sublayer(TransformerEncoderBlock):
    """Dropout on the normalised input of the sublayer, not its output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_11_inplace_residual(TransformerEncoderBlock):
    """X += ... changes the caller's tensor."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        X += self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        X += self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X


class W_12_plain_layer_norm(TransformerEncoderBlock):
    """F.layer_norm without the LN's weight and bias: right only at initialisation."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        Z = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_13_ln_input_detached(TransformerEncoderBlock):
    """Normalises X.detach(): forward right, no gradient to X through the branch."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X.detach())
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y.detach())))


class W_14_second_ln_on_X(TransformerEncoderBlock):
    """Both sublayers read LN(X) (in parallel, GPT-J style) instead of LN(Y)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_15_valid_lens_per_row_only(TransformerEncoderBlock):
    """Reduces (batch, n) valid_lens to the last column (thinks MHA wants (batch,))."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, -1]
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_16_eval_attention(TransformerEncoderBlock):
    """Switches the attention to eval in forward (no attention-weight dropout) and leaves it so."""
    def forward(self, X, valid_lens):
        self.attention.eval()
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_17_ffn_before_attention(TransformerEncoderBlock):
    """Sublayers in the wrong order."""
    def forward(self, X, valid_lens):
        Y = X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        Z = self.addnorm1.ln(Y)
        return Y + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))


class W_18_dropout_twice(TransformerEncoderBlock):
    """Dropout on the sublayer output and again on the block output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return self.addnorm2.dropout(out)


class W_19_batch_first_stats(TransformerEncoderBlock):
    """Normalises over the sequence axis (transposes, LN over n): only when n == d works...
    here: LN weights applied to X normalised over positions."""
    def forward(self, X, valid_lens):
        def ln(m, T):
            mu = T.mean(dim=1, keepdim=True)
            var = T.var(dim=1, keepdim=True, unbiased=False)
            return (T - mu) / torch.sqrt(var + m.eps) * m.weight + m.bias
        Z = ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(self.addnorm2.ln, Y)))


class W_20_unbiased_var(TransformerEncoderBlock):
    """Hand-written LayerNorm with the unbiased variance (torch.var default)."""
    def forward(self, X, valid_lens):
        def ln(m, T):
            mu = T.mean(dim=-1, keepdim=True)
            var = T.var(dim=-1, keepdim=True)
            return (T - mu) / torch.sqrt(var + m.eps) * m.weight + m.bias
        Z = ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(self.addnorm2.ln, Y)))


class W_21_cached_norm(TransformerEncoderBlock):
    """Caches LN1(X) per input shape (thinking the norm of the input does not change)."""
    def forward(self, X, valid_lens):
        if getattr(self, "_z_shape", None) != X.shape:
            self._z = self.addnorm1.ln(X)
            self._z_shape = X.shape
        Z = self._z
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_22_fixed_rate(TransformerEncoderBlock):
    """F.dropout with p = 0.1 (BERT's rate) and self.training, not the block's rate."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Z, Z, Z, valid_lens), 0.1, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), 0.1, self.training)


class W_23_lazy_final_ln(TransformerEncoderBlock):
    """Adds its own final LayerNorm module lazily in forward (a new submodule, and a norm of the sum)."""
    def forward(self, X, valid_lens):
        if not hasattr(self, "final_ln"):
            self.final_ln = nn.LayerNorm(X.shape[-1])
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return self.final_ln(Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


class O_04_loop_over_batch(TransformerEncoderBlock):
    """Runs the block one example at a time in eval mode (valid_lens sliced per example)."""
    def forward(self, X, valid_lens):
        if self.training:
            return C_01_reference.forward(self, X, valid_lens)
        outs = []
        for i in range(X.shape[0]):
            vl = None if valid_lens is None else valid_lens[i:i + 1]
            outs.append(C_01_reference.forward(self, X[i:i + 1], vl))
        return torch.cat(outs)


class S_05_own_dropout_mask(TransformerEncoderBlock):
    """Hand-written inverted dropout with the block's rate (same distribution as nn.Dropout,
    different random stream): against the wording (use addnorm's dropouts)."""
    def _drop(self, A, p):
        if not self.training or p == 0:
            return A
        return A * (torch.rand_like(A) >= p) / (1 - p)

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self._drop(self.attention(Z, Z, Z, valid_lens), self.addnorm1.dropout.p)
        return Y + self._drop(self.ffn(self.addnorm2.ln(Y)), self.addnorm2.dropout.p)


class W_24_dropout_no_rescale(TransformerEncoderBlock):
    """Hand-written dropout without the 1 / (1 - p) rescaling."""
    def forward(self, X, valid_lens):
        def drop(A, p):
            return A * (torch.rand_like(A) >= p) if self.training else A
        Z = self.addnorm1.ln(X)
        Y = X + drop(self.attention(Z, Z, Z, valid_lens), self.addnorm1.dropout.p)
        return Y + drop(self.ffn(self.addnorm2.ln(Y)), self.addnorm2.dropout.p)
