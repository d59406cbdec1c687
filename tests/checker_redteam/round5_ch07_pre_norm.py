"""Round 5 red team (writer R5-B, issue 12), ch07_pre_norm: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch07_pre_norm.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F

from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_02_explicit_valid_lens(TransformerEncoderBlock):
    # fills in valid_lens=None as "all positions valid"
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = torch.full((X.shape[0],), X.shape[1], device=X.device)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_03_functional_ln(TransformerEncoderBlock):
    # F.layer_norm with the submodule's own weight, bias and eps
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        H = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return Y + self.addnorm2.dropout(self.ffn(H))


class W_01_post_ln(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class W_02_same_ln_twice(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_03_kv_unnormed(TransformerEncoderBlock):
    # only the queries are normalised
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_04_residual_from_normed(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = H + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        H2 = self.addnorm2.ln(Y)
        return H2 + self.addnorm2.dropout(self.ffn(H2))


class W_05_no_ffn_dropout(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.ffn(self.addnorm2.ln(Y))


class W_06_dropout_on_sum(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(H, H, H, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_07_parallel(TransformerEncoderBlock):
    # attention and FFN both read X (GPT-J's parallel block), not sequential
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        a = self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        f = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X + a + f


class W_08_fresh_layernorm(TransformerEncoderBlock):
    # a new LayerNorm each call: same values at init, but not the block's parameters
    def forward(self, X, valid_lens):
        d = X.shape[-1]
        H = nn.LayerNorm(d).to(X)(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(nn.LayerNorm(d).to(X)(Y)))


class W_09_ln_no_affine(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        d = (X.shape[-1],)
        H = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_10_final_norm_inside(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return self.addnorm2.ln(Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


class W_11_ignore_valid_lens(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_12_inplace_residual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        X += self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        X += self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X


class W_13_dropout_always_on(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), p, training=True)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p, training=True)


class W_14_dropout_before_ln(TransformerEncoderBlock):
    # dropout on the sublayer input instead of its output
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(self.addnorm1.dropout(X))
        Y = X + self.attention(H, H, H, valid_lens)
        return Y + self.ffn(self.addnorm2.ln(self.addnorm2.dropout(Y)))


class W_15_ffn_first(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Y = X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        H = self.addnorm1.ln(Y)
        return Y + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))


class W_16_hardcoded_dropout(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), 0.1, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), 0.1, self.training)


class W_17_ffn_reads_ln_of_X(TransformerEncoderBlock):
    # the FFN normalises the block's input, adds to Y
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_18_detach_residual(TransformerEncoderBlock):
    # "stop-gradient" on the residual path
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_19_attention_dropout_twice(TransformerEncoderBlock):
    # the rate applied a second time to the FFN hidden layer (extra dropout)
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        f = self.ffn.dense2(self.addnorm2.dropout(self.ffn.relu(
            self.ffn.dense1(self.addnorm2.ln(Y)))))
        return Y + self.addnorm2.dropout(f)


class W_20_ln_by_hand_unbiased_std_no_eps(TransformerEncoderBlock):
    # LayerNorm by hand with the variance unbiased (n-1) and eps inside sqrt missing
    def forward(self, X, valid_lens):
        def ln(mod, Z):
            mu = Z.mean(-1, keepdim=True)
            sd = Z.std(-1, keepdim=True)
            return (Z - mu) / sd * mod.weight + mod.bias
        H = ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(self.addnorm2.ln, Y)))


class O_04_swapped_dropout_modules(TransformerEncoderBlock):
    # addnorm2's dropout on the attention and addnorm1's on the FFN: same rate, same module
    # type, so the same result (the text says "the dropouts of addnorm1 and addnorm2")
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_21_valid_lens_required(TransformerEncoderBlock):
    # breaks on valid_lens=None
    def forward(self, X, valid_lens):
        valid_lens = valid_lens.to(X.device)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_22_one_dropout_mask(TransformerEncoderBlock):
    # one dropout mask drawn once and reused for both sublayers
    def forward(self, X, valid_lens):
        m = self.addnorm1.dropout(torch.ones_like(X))
        H = self.addnorm1.ln(X)
        Y = X + m * self.attention(H, H, H, valid_lens)
        return Y + m * self.ffn(self.addnorm2.ln(Y))


class S_01_manual_dropout(TransformerEncoderBlock):
    # inverted dropout by hand with the right rate (not the addnorm dropouts' RNG stream)
    def _drop(self, Z, p):
        if not self.training or p == 0:
            return Z
        return Z * (torch.rand_like(Z) >= p) / (1 - p)

    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        H = self.addnorm1.ln(X)
        Y = X + self._drop(self.attention(H, H, H, valid_lens), p)
        return Y + self._drop(self.ffn(self.addnorm2.ln(Y)), p)


class W_23_float32_cast(TransformerEncoderBlock):
    # casts the input to float32
    def forward(self, X, valid_lens):
        X = X.float()
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_24_dropout_keep_prob(TransformerEncoderBlock):
    # reads the rate as a keep probability: F.dropout(x, 1 - p); same as p only at p = 0.5
    def forward(self, X, valid_lens):
        q = 1 - self.addnorm1.dropout.p
        q = 0.0 if q == 1 else q
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), q, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), q, self.training)
