"""Round 2 red team (writer R2), ch07_prenorm: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch07_prenorm.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch
from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_prenorm(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_prenorm_separate_calls(TransformerEncoderBlock):
    """Calls the norm three times (same result) and adds in the other order."""
    def forward(self, X, valid_lens):
        ln1 = self.addnorm1.ln
        Y = self.addnorm1.dropout(self.attention(ln1(X), ln1(X), ln1(X), valid_lens)) + X
        return self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))) + Y


class W_postnorm(TransformerEncoderBlock):
    """Keeps the post-LN forward."""
    def forward(self, X, valid_lens):
        return super().forward(X, valid_lens)


class W_norm_query_only(TransformerEncoderBlock):
    """Normalises only the queries."""
    def forward(self, X, valid_lens):
        Y = X + self.addnorm1.dropout(self.attention(self.addnorm1.ln(X), X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_residual_from_normed(TransformerEncoderBlock):
    """Adds the residual to LN(X) instead of X."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = Z + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z2 = self.addnorm2.ln(Y)
        return Z2 + self.addnorm2.dropout(self.ffn(Z2))


class W_same_ln_twice(TransformerEncoderBlock):
    """Uses addnorm1.ln for both sublayers."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_norm_after_sublayer(TransformerEncoderBlock):
    """X + LN(f(X)): the norm on the sublayer's output."""
    def forward(self, X, valid_lens):
        Y = X + self.addnorm1.dropout(self.addnorm1.ln(self.attention(X, X, X, valid_lens)))
        return Y + self.addnorm2.dropout(self.addnorm2.ln(self.ffn(Y)))


class W_no_valid_lens(TransformerEncoderBlock):
    """Forgets the mask."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_dropout_on_input(TransformerEncoderBlock):
    """Dropout on the normed input instead of the sublayer output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        Z2 = self.addnorm2.dropout(self.addnorm2.ln(Y))
        return Y + self.ffn(Z2)


class W_dropout_on_sum(TransformerEncoderBlock):
    """Dropout on the residual sum."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_no_dropout(TransformerEncoderBlock):
    """Forgets the dropouts."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.ln(Y))


class W_final_norm(TransformerEncoderBlock):
    """Normalises the block's output too."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.ln(Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


class W_addnorm_call(TransformerEncoderBlock):
    """Calls addnorm1(X, attention(LN(X))): double norm (pre and post)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1(X, self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2(Y, self.ffn(self.addnorm2.ln(Y)))


class W_ffn_from_X(TransformerEncoderBlock):
    """The FFN reads LN(X), not LN(Y): parallel instead of sequential sublayers."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class Q_swapped_dropouts(TransformerEncoderBlock):
    """addnorm2's dropout on the attention, addnorm1's on the FFN: same p, so a check in eval
    mode or with equal rates cannot tell; listed as a probe."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_new_layernorm(TransformerEncoderBlock):
    """Creates fresh nn.LayerNorm modules in forward (not the block's own, untrained)."""
    def forward(self, X, valid_lens):
        ln = torch.nn.functional.layer_norm
        Z = ln(X, X.shape[-1:])
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(Y, Y.shape[-1:])))


class W_inplace_residual(C_prenorm):
    """X += attention(...) in place when X does not require grad."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        if not X.requires_grad:
            X += A
            Y = X
        else:
            Y = X + A
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
