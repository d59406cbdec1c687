"""Round 4 red team (writer B, issue 12), ch07_pre_norm_block: wrong (W_), right (C_),
odd but right (O_) and against-the-wording (S_) solutions written from the exercise
text alone; copied from /work/redteam/round4/B/sols/ch07_pre_norm_block.py
with the names W01_x written W_01_x. The tests run every W_ entry (must fail) and
every C_ and O_ entry (must pass); A_ entries are wrong ones accepted on purpose
(each says why), not tested.
Writer's note: Round 4, writer B: PreNormEncoderBlock (exercise 7.3), written from the
exercise text only."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F

from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


# ---------------------------------------------------------------- correct and odd
class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        Yn = self.addnorm2.ln(Y)
        return Y + self.addnorm2.dropout(self.ffn(Yn))


class O_02_functional_layer_norm_with_params(TransformerEncoderBlock):
    """F.layer_norm with the LayerNorm's own weight, bias and eps."""
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        Xn = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        X = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        Yn = F.layer_norm(X, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return X + self.addnorm2.dropout(self.ffn(Yn))


class O_03_loop_over_sublayers(TransformerEncoderBlock):
    """A loop over (norm, sublayer, dropout) triples."""
    def forward(self, X, valid_lens):
        subs = [(self.addnorm1, lambda Z: self.attention(Z, Z, Z, valid_lens)),
                (self.addnorm2, self.ffn)]
        for addnorm, f in subs:
            X = X + addnorm.dropout(f(addnorm.ln(X)))
        return X


# ---------------------------------------------------------------- wrong
class W_01_post_ln(TransformerEncoderBlock):
    """Unchanged post-LN forward."""
    def forward(self, X, valid_lens):
        return super().forward(X, valid_lens)


class W_02_residual_from_normalized(TransformerEncoderBlock):
    """The residual adds LN(X), not X."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = Xn + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        Yn = self.addnorm2.ln(Y)
        return Yn + self.addnorm2.dropout(self.ffn(Yn))


class W_03_no_dropout(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.attention(Xn, Xn, Xn, valid_lens)
        return Y + self.ffn(self.addnorm2.ln(Y))


class W_04_dropout_on_sum(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Xn, Xn, Xn, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_05_lns_swapped(TransformerEncoderBlock):
    """addnorm2.ln before the attention, addnorm1.ln before the FFN (equal at init)."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_06_ignores_valid_lens(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_07_keys_values_unnormalized(TransformerEncoderBlock):
    """Normalises only the queries."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_08_final_norm_inside_block(TransformerEncoderBlock):
    """Normalises the block's output too (the sum must stay unnormalised)."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        Z = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return self.addnorm2.ln(Z)


class W_09_ffn_normalizes_input_X(TransformerEncoderBlock):
    """The FFN reads LN2(X) (the block input) instead of LN2(Y)."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_10_second_residual_from_X(TransformerEncoderBlock):
    """The second residual adds X, dropping the attention's contribution."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_11_inplace_residual(TransformerEncoderBlock):
    """X += ...: mutates the caller's X."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        X += self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        X += self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X


class W_12_functional_dropout_always_on(TransformerEncoderBlock):
    """F.dropout without training=self.training: dropout also in eval mode."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        Xn = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Xn, Xn, Xn, valid_lens), p)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p)


class W_13_fresh_layernorm(TransformerEncoderBlock):
    """New LayerNorms built in forward: ignores the block's (trained) LN parameters."""
    def forward(self, X, valid_lens):
        ln = nn.LayerNorm(X.shape[-1]).to(X.device)
        Xn = ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(Y)))


class W_14_layer_norm_no_affine(TransformerEncoderBlock):
    """F.layer_norm without the LN's weight and bias (equal at init)."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        Xn = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_15_detached_residual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_16_dropout_before_norm(TransformerEncoderBlock):
    """Dropout on the sublayer's input (before LN) instead of its output."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(self.addnorm1.dropout(X))
        Y = X + self.attention(Xn, Xn, Xn, valid_lens)
        Yn = self.addnorm2.ln(self.addnorm2.dropout(Y))
        return Y + self.ffn(Yn)


class W_17_shared_dropout_mask(TransformerEncoderBlock):
    """One dropout mask drawn once and reused for both sublayers."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        A = self.attention(Xn, Xn, Xn, valid_lens)
        keep = self.addnorm1.dropout(torch.ones_like(A))
        Y = X + A * keep
        return Y + self.ffn(self.addnorm2.ln(Y)) * keep


class W_18_eval_forces(TransformerEncoderBlock):
    """Calls self.eval() inside forward 'for stability': no dropout ever."""
    def forward(self, X, valid_lens):
        self.eval()
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class S_19_dropout_modules_swapped(TransformerEncoderBlock):
    """addnorm2.dropout on the attention, addnorm1.dropout on the FFN: same rate, so
    the same values; against the wording."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_20_functional_dropout_with_training(TransformerEncoderBlock):
    """F.dropout with the module's rate and training flag: same RNG use as nn.Dropout."""
    def forward(self, X, valid_lens):
        p1, p2 = self.addnorm1.dropout.p, self.addnorm2.dropout.p
        Xn = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Xn, Xn, Xn, valid_lens), p1, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p2, self.training)


class W_21_sandwich_addnorm(TransformerEncoderBlock):
    """Uses AddNorm on the pre-normalised sublayer: LN(X + Sublayer(LN(X)))."""
    def forward(self, X, valid_lens):
        Xn = self.addnorm1.ln(X)
        Y = self.addnorm1(X, self.attention(Xn, Xn, Xn, valid_lens))
        return self.addnorm2(Y, self.ffn(self.addnorm2.ln(Y)))


class W_22_ffn_first(TransformerEncoderBlock):
    """FFN sublayer first, attention second."""
    def forward(self, X, valid_lens):
        Y = X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        Yn = self.addnorm1.ln(Y)
        return Y + self.addnorm1.dropout(self.attention(Yn, Yn, Yn, valid_lens))


class W_23_train_flag_flipped(TransformerEncoderBlock):
    """Switches dropout on only in eval mode (condition inverted)."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        Xn = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Xn, Xn, Xn, valid_lens), p, not self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p, not self.training)


class W_24_restores_train_but_skips_dropout(TransformerEncoderBlock):
    """Turns the dropouts off for the call and puts the mode back afterwards."""
    def forward(self, X, valid_lens):
        mode = self.training
        self.eval()
        try:
            Xn = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        finally:
            self.train(mode)


class W_25_valid_lens_repeated_per_head(TransformerEncoderBlock):
    """Repeats valid_lens per head itself (MultiHeadAttention already does), then cuts
    to the batch: [6, 3] becomes [6, 6]."""
    def forward(self, X, valid_lens):
        h = self.attention.num_heads
        vl = valid_lens.repeat_interleave(h) if valid_lens is not None else None
        vl = vl[: X.shape[0]] if vl is not None else None
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, vl))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


def _manual_ln(X, ln, unbiased=False, eps=None):
    mu = X.mean(-1, keepdim=True)
    var = X.var(-1, keepdim=True, unbiased=unbiased)
    return (X - mu) / torch.sqrt(var + (ln.eps if eps is None else eps)) * ln.weight + ln.bias


class W_26_manual_ln_unbiased_var(TransformerEncoderBlock):
    """Hand-written LayerNorm with torch.var's default (unbiased) variance."""
    def forward(self, X, valid_lens):
        Xn = _manual_ln(X, self.addnorm1.ln, unbiased=True)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(_manual_ln(Y, self.addnorm2.ln, True)))


class O_27_manual_ln_biased_var(TransformerEncoderBlock):
    """Hand-written LayerNorm, exactly nn.LayerNorm's formula with its own parameters."""
    def forward(self, X, valid_lens):
        Xn = _manual_ln(X, self.addnorm1.ln)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(_manual_ln(Y, self.addnorm2.ln)))


class W_28_breaks_on_valid_lens_none(TransformerEncoderBlock):
    """Copies valid_lens to X's device unconditionally: crashes when valid_lens is None
    (the post-LN block accepts None)."""
    def forward(self, X, valid_lens):
        valid_lens = valid_lens.to(X.device)
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_29_batch_first_example_lengths(TransformerEncoderBlock):
    """Uses the first example's length for the whole batch."""
    def forward(self, X, valid_lens):
        vl = valid_lens[:1].expand(X.shape[0]) if valid_lens is not None else None
        Xn = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Xn, Xn, Xn, vl))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
