"""Round 12 red team (writer C, issue 12), ch07_prenorm: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/C/sols/ch07_prenorm.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); S_ entries are not tested (S_03, the two dropout modules swapped, gives the
same output: same rate, one global generator). No hole. Messages: W_06 (no dropout on the
FFN), W_08 (addnorm2.dropout on the FFN input), W_17 (the attention's own dropout switched
off), W_13 (the FFN mask drawn before the attention) and W_22 (one mask for both sublayers)
were told "its mask is your own (torch.rand or torch.bernoulli)"; each is now named."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F
from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference_like(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_02_functional_layer_norm_with_params(TransformerEncoderBlock):
    """LayerNorm written through F.layer_norm with the module's own weight, bias and eps."""
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        H2 = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return Y + self.addnorm2.dropout(self.ffn(H2))


class S_03_dropouts_swapped(TransformerEncoderBlock):
    """addnorm2's dropout on the attention, addnorm1's on the FFN: same p, same global RNG."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_ln1_used_twice(TransformerEncoderBlock):
    """Uses addnorm1.ln before both sublayers (identical to ln2 only at initialisation)."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_02_lns_swapped(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_03_layer_norm_without_affine(TransformerEncoderBlock):
    """F.layer_norm without the LayerNorm's weight and bias: right only at initialisation."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        H = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_04_ln_params_detached(TransformerEncoderBlock):
    """Right values, but the LayerNorms' weight and bias get no gradient."""
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, ln1.normalized_shape, ln1.weight.detach(), ln1.bias.detach(),
                         ln1.eps)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        H2 = F.layer_norm(Y, ln2.normalized_shape, ln2.weight.detach(), ln2.bias.detach(),
                          ln2.eps)
        return Y + self.addnorm2.dropout(self.ffn(H2))


class W_05_functional_dropout_always_on(TransformerEncoderBlock):
    """F.dropout defaults to training=True: drops in eval mode too."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), p)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p)


class W_06_no_dropout_on_ffn(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.ffn(self.addnorm2.ln(Y))


class W_07_dropout_on_residual_sum(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(H, H, H, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_08_dropout_before_ffn(TransformerEncoderBlock):
    """Dropout on the FFN's input instead of its output."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_09_keys_values_not_normalised(TransformerEncoderBlock):
    """Only the queries go through the LayerNorm."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_10_per_query_lens_collapsed(TransformerEncoderBlock):
    """(batch, n) lengths collapsed to their last column (the longest): loses causality."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, -1]
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_11_in_place_residual(TransformerEncoderBlock):
    """Adds the sublayers into X in place: the caller's X is changed."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        a = self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        if X.requires_grad:
            X = X + a
        else:
            X += a
        f = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X + f


class W_12_parallel_block(TransformerEncoderBlock):
    """GPT-J style: both sublayers read LN(X), not the first sublayer's output."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        a = self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return X + a + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_13_ffn_dropout_mask_from_attention(TransformerEncoderBlock):
    """Draws the FFN's dropout before running the attention (RNG order differs)."""
    def forward(self, X, valid_lens):
        keep = self.addnorm2.dropout(torch.ones_like(X))
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + keep * self.ffn(self.addnorm2.ln(Y))


class W_14_unbiased_variance(TransformerEncoderBlock):
    """LayerNorm by hand with torch.var's default (unbiased) variance."""
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        var = X.var(-1, keepdim=True)
        return (X - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_15_dropout_only_in_train_when_lens_none(TransformerEncoderBlock):
    """Skips the attention dropout when a mask is given (thinks masking replaces it)."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        a = self.attention(H, H, H, valid_lens)
        if valid_lens is None:
            a = self.addnorm1.dropout(a)
        Y = X + a
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_16_lengths_expanded_per_query(TransformerEncoderBlock):
    """(batch,) lengths expanded to (batch, n) before the attention: the same mask."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 1:
            valid_lens = valid_lens[:, None].expand(-1, X.shape[1])
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_17_attention_internal_dropout_off(TransformerEncoderBlock):
    """Switches the attention's own (attention-weight) dropout off: the text names only the
    dropouts of addnorm1 and addnorm2."""
    def forward(self, X, valid_lens):
        was = self.attention.training
        self.attention.eval()
        H = self.addnorm1.ln(X)
        a = self.attention(H, H, H, valid_lens)
        self.attention.train(was)
        Y = X + self.addnorm1.dropout(a)
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_18_ln_stats_detached(TransformerEncoderBlock):
    """LayerNorm by hand with the mean and variance detached: right values, wrong dX."""
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True).detach()
        var = X.var(-1, keepdim=True, unbiased=False).detach()
        return (X - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_19_residual_from_normalised(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        X = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(X, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_20_view_flatten_for_ln(TransformerEncoderBlock):
    """Flattens with .view for the LayerNorm: fails on a non-contiguous X."""
    def forward(self, X, valid_lens):
        b, n, d = X.shape
        H = self.addnorm1.ln(X.view(b * n, d)).view(b, n, d)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        H2 = self.addnorm2.ln(Y.view(b * n, d)).view(b, n, d)
        return Y + self.addnorm2.dropout(self.ffn(H2))


class W_21_post_ln_in_eval(TransformerEncoderBlock):
    """Pre-LN only in training; falls back to the chapter's (post-LN) forward in eval."""
    def forward(self, X, valid_lens):
        if not self.training:
            return super().forward(X, valid_lens)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_22_dropout_shared_mask(TransformerEncoderBlock):
    """One dropout mask drawn once and reused for both sublayers."""
    def forward(self, X, valid_lens):
        mask = self.addnorm1.dropout(torch.ones_like(X))
        H = self.addnorm1.ln(X)
        Y = X + mask * self.attention(H, H, H, valid_lens)
        return Y + mask * self.ffn(self.addnorm2.ln(Y))
