"""Round 10 red team (writer C, issue 12), ch07_prenorm: wrong (W_), right (C_), odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round10/C/sols/ch07_prenorm.py with the names W01_x written W_01_x.
Round 10 found one hole: W_21 (a LayerNorm whose variance is E[x^2] - E[x]^2) gave NaN on
float32 rows with a large mean and passed; the checker now has such rows (1000 + 0.1 randn)
and names the fault. W_26 (valid_lens None replaced by zeros) now gets its own message.
O_25 (the fused attention path, book.attention.fused_multihead_attention, on the
LayerNorm's output) was written as wrong by the writer, who then found it matches the
reference within 2.4e-7 in eval and train mode: it is the book's own fused=True path of the
same attention (on the CPU SDPA's dropout draws from the same generator in the same order),
so it is right and renamed O_. No wrong one is accepted on purpose (no A_).
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


class O_02_functional_pieces(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        Z = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        A = self.attention(Z, Z, Z, valid_lens)
        A = F.dropout(A, self.addnorm1.dropout.p, self.training)
        Y = torch.add(X, A)
        H = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return Y + F.dropout(self.ffn(H), self.addnorm2.dropout.p, self.training)


class O_03_expand_lens(TransformerEncoderBlock):
    # 1-D lengths turned into per-query lengths: the same mask
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 1:
            valid_lens = valid_lens[:, None].expand(-1, X.shape[1])
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_ln_eps_1e6(TransformerEncoderBlock):
    # hand-written LayerNorm with eps 1e-6 (the TF/BERT value) instead of the module's
    def _ln(self, ln, X):
        return F.layer_norm(X, ln.normalized_shape, ln.weight, ln.bias, 1e-6)

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_02_detached_stats(TransformerEncoderBlock):
    # LayerNorm by hand with the statistics computed under no_grad: right forward,
    # wrong gradient w.r.t. X
    def _ln(self, ln, X):
        with torch.no_grad():
            mu = X.mean(-1, keepdim=True)
            sd = (X.var(-1, unbiased=False, keepdim=True) + ln.eps).sqrt()
        return (X - mu) / sd * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_03_residual_detached(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_04_ln1_twice(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_05_no_affine(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        Z = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_06_queries_only_normed(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_07_parallel_block(TransformerEncoderBlock):
    # GPT-J style: both sublayers read X
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return X + A + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_08_lens_last_column(TransformerEncoderBlock):
    # per-query lengths collapsed to one per example (the last query's)
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, -1]
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_09_dropout_before_sublayer(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_10_fresh_dropout_module(TransformerEncoderBlock):
    # a new nn.Dropout each call: always in training mode
    def forward(self, X, valid_lens):
        drop = nn.Dropout(self.addnorm1.dropout.p)
        Z = self.addnorm1.ln(X)
        Y = X + drop(self.attention(Z, Z, Z, valid_lens))
        return Y + drop(self.ffn(self.addnorm2.ln(Y)))


class W_11_ffn_residual_from_normed(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        H = self.addnorm2.ln(Y)
        return H + self.addnorm2.dropout(self.ffn(H))


class W_12_inplace_residual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Y = X.clone() if X.requires_grad else X
        Y += A  # mutates the caller's X when it needs no grad
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_13_dropout_rand_by_hand(TransformerEncoderBlock):
    # dropout by hand with rand_like: the right rate, but other random numbers and the
    # mask is applied also in eval mode
    def _drop(self, Y, p):
        if p == 0:
            return Y
        return Y * (torch.rand_like(Y) >= p) / (1 - p)

    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        Z = self.addnorm1.ln(X)
        Y = X + self._drop(self.attention(Z, Z, Z, valid_lens), p)
        return Y + self._drop(self.ffn(self.addnorm2.ln(Y)), p)


class W_14_unbiased_var(TransformerEncoderBlock):
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        return (X - mu) / (X.var(-1, keepdim=True) + ln.eps).sqrt() * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_15_std_plus_eps(TransformerEncoderBlock):
    # eps added to the std rather than to the variance
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        sd = X.var(-1, unbiased=False, keepdim=True).sqrt()
        return (X - mu) / (sd + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_16_dropout_on_sum(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_17_float32_ln_stats(TransformerEncoderBlock):
    # "mixed precision" LayerNorm: statistics in float32, then back (wrong for float64)
    def _ln(self, ln, X):
        Xf = X.float()
        out = F.layer_norm(Xf, ln.normalized_shape, ln.weight.float(), ln.bias.float(), ln.eps)
        return out.to(X.dtype)

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_18_lens_cached(TransformerEncoderBlock):
    # remembers the first valid_lens it saw
    def forward(self, X, valid_lens):
        if not hasattr(self, "_lens"):
            self._lens = valid_lens
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, self._lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_19_final_ln(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Y = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return self.addnorm2.ln(Y)


class W_20_padding_zeroed(TransformerEncoderBlock):
    # zeroes padded positions of the output (1-D lengths): not what the block does
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        if valid_lens is not None and valid_lens.dim() == 1:
            keep = torch.arange(X.shape[1], device=X.device)[None, :] < valid_lens[:, None]
            out = out * keep[..., None]
        return out


class W_21_var_by_moments(TransformerEncoderBlock):
    # Var = E[x^2] - E[x]^2: cancellation when the rows have a large mean
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        var = (X * X).mean(-1, keepdim=True) - mu * mu
        return (X - mu) / (var + ln.eps).sqrt() * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_22_no_grad_in_eval(TransformerEncoderBlock):
    # "no gradients needed at evaluation": the eval-mode output has no graph
    def forward(self, X, valid_lens):
        with torch.set_grad_enabled(self.training and torch.is_grad_enabled()):
            Z = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_23_ln_params_snapshot(TransformerEncoderBlock):
    # copies the LayerNorm parameters on the first call (detached snapshot)
    def forward(self, X, valid_lens):
        if not hasattr(self, "_snap"):
            self._snap = [(ln.weight.detach().clone(), ln.bias.detach().clone(), ln.eps)
                          for ln in (self.addnorm1.ln, self.addnorm2.ln)]
        (w1, b1, e1), (w2, b2, e2) = self._snap
        d = X.shape[-1:]
        Z = F.layer_norm(X, d, w1.to(X.dtype), b1.to(X.dtype), e1)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        H = F.layer_norm(Y, d, w2.to(X.dtype), b2.to(X.dtype), e2)
        return Y + self.addnorm2.dropout(self.ffn(H))


class W_24_attention_eval_inside(TransformerEncoderBlock):
    # turns off the attention-weight dropout (thinks only the sublayer outputs drop)
    def forward(self, X, valid_lens):
        self.attention.eval()
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_25_fused_path(TransformerEncoderBlock):
    # calls the fused attention (SDPA): same function (on the CPU, the same dropout draws)
    def forward(self, X, valid_lens):
        from book.attention import fused_multihead_attention
        Z = self.addnorm1.ln(X)
        A = fused_multihead_attention(self.attention, Z, Z, Z, valid_lens)
        Y = X + self.addnorm1.dropout(A)
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_26_mask_lens_none_to_zero(TransformerEncoderBlock):
    # valid_lens None replaced by zeros of the batch (thinks 0 = no padding)
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = torch.zeros(X.shape[0], dtype=torch.long, device=X.device)
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_27_rms_norm(TransformerEncoderBlock):
    # RMSNorm (no mean subtraction) with the LayerNorm's weight and bias
    def _ln(self, ln, X):
        return X * torch.rsqrt(X.pow(2).mean(-1, keepdim=True) + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))
