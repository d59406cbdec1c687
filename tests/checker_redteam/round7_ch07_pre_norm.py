"""Round 7 red team (writer C, issue 12), ch07_pre_norm: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round7/C/sols/ch07_prenorm.py with the names W01_x written W_01_x. Wrong
ones the checker accepts on purpose would be named A_ (none here).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Round 7 found two holes, both inputs the chapter's block takes and the checker
never gave: valid_lens of shape (batch, n), one length per query (W_16 kept only the first
column), and a non-contiguous X (W_22's .view raised); the checker now runs both. It also
found messages that pointed at the wrong fault, now named: float32 arithmetic in a float64
block (W_20) and a LayerNorm without eps (W_07) were told the formula, with 'expected 2.793,
got 2.793'; LayerNorm statistics without gradient (W_05) and detached keys and values
(W_19) were told 'e.g. X.detach() in the residual'; an output wrong only at padded
positions (W_18) got the generic formula hint. S_04 and S_05 (one or swapped dropout
modules, the same p and stream) cannot be told from the right block; S_06 (an unused extra
LayerNorm) is refused, as 'keeps its submodules' asks."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F
from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference_style(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_02_functional_layer_norm_default_arg(TransformerEncoderBlock):
    """F.layer_norm with the module's own parameters and eps; valid_lens defaults to None."""
    def forward(self, X, valid_lens=None):
        ln1, ln2 = self.addnorm1.ln, self.addnorm2.ln
        Z = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, ln1.eps)
        Y = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens)) + X
        Z2 = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, ln2.eps)
        return torch.add(Y, self.addnorm2.dropout(self.ffn(Z2)))


class O_03_loop_over_sublayers(TransformerEncoderBlock):
    """A generic loop over (norm, sublayer) pairs, as many codebases write it."""
    def forward(self, X, valid_lens):
        subs = [(self.addnorm1, lambda Z: self.attention(Z, Z, Z, valid_lens)),
                (self.addnorm2, self.ffn)]
        for addnorm, f in subs:
            X = X + addnorm.dropout(f(addnorm.ln(X)))
        return X


class S_04_one_dropout_module_for_both(TransformerEncoderBlock):
    """addnorm1.dropout for both sublayers: same p, same RNG stream; against the wording."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_swapped_layernorms(TransformerEncoderBlock):
    """ln2 before attention, ln1 before the FFN: identical at init (weight 1, bias 0)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_02_layer_norm_without_affine(TransformerEncoderBlock):
    """Normalises with F.layer_norm but forgets the LN's weight and bias."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        Z = F.layer_norm(X, d, eps=self.addnorm1.ln.eps)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d,
                                                               eps=self.addnorm2.ln.eps)))


class W_03_ln_output_detached(TransformerEncoderBlock):
    """Forward right; the LN outputs are detached, so LN params and the branch get no grad."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X).detach()
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y).detach()))


class W_04_residual_detached(TransformerEncoderBlock):
    """The skip path is X.detach(): forward right, dX lacks the identity term."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_05_own_ln_stats_stopgrad(TransformerEncoderBlock):
    """Own LayerNorm with its parameters, but mean/var computed without gradient."""
    def _ln(self, ln, X):
        with torch.no_grad():
            mu = X.mean(-1, keepdim=True)
            var = X.var(-1, keepdim=True, unbiased=False)
        return (X - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_06_own_ln_unbiased_var(TransformerEncoderBlock):
    """Own LayerNorm with torch.var's default (unbiased) variance."""
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        return (X - mu) / torch.sqrt(X.var(-1, keepdim=True) + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_07_own_ln_no_eps(TransformerEncoderBlock):
    """Own LayerNorm without eps: right for var ~ 1, wrong for small-scale inputs."""
    def _ln(self, ln, X):
        mu = X.mean(-1, keepdim=True)
        sd = X.std(-1, keepdim=True, unbiased=False)
        return (X - mu) / sd * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_08_dropout_on_ln_output(TransformerEncoderBlock):
    """Dropout placed on the sublayer's input (after LN) instead of its output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_09_dropout_after_residual_sum(TransformerEncoderBlock):
    """Dropout on the residual sum (X + f) rather than on f."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class W_10_inplace_residual(TransformerEncoderBlock):
    """X += ...: mutates the caller's X (works while X needs no grad)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        X += self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        X += self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))
        return X


class W_11_no_attention_dropout(TransformerEncoderBlock):
    """__init__ switches off the attention-weight dropout ("pre-LN models skip it")."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attention.attention.dropout = nn.Dropout(0.0)

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_12_ln_cached_by_shape(TransformerEncoderBlock):
    """Caches LN1(X) between calls, recomputed only when X's shape changes."""
    def forward(self, X, valid_lens):
        cache = self.__dict__.setdefault("_z_cache", {})
        if X.shape not in cache:
            cache[X.shape] = self.addnorm1.ln(X)
        Z = cache[X.shape]
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_13_final_norm_inside_block(TransformerEncoderBlock):
    """Adds 'the final LayerNorm' inside every block (normalises the sum once more)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Y2 = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return F.layer_norm(Y2, Y2.shape[-1:])


class W_14_ffn_reads_normed_x(TransformerEncoderBlock):
    """Both LNs applied to X (parallel block): the FFN sees LN2(X), not LN2(Y)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_15_functional_dropout_always_on(TransformerEncoderBlock):
    """F.dropout with the module's p but training left at its default True."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(Z, Z, Z, valid_lens), self.addnorm1.dropout.p)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), self.addnorm2.dropout.p)


class W_16_valid_lens_ignored_when_2d(TransformerEncoderBlock):
    """Keeps only each example's first length when valid_lens is 2-D (per query)."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, 0]
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class S_05_dropouts_swapped(TransformerEncoderBlock):
    """addnorm2.dropout after the attention, addnorm1.dropout after the FFN (same p)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_06_inplace_on_intermediate(TransformerEncoderBlock):
    """In-place adds on the sublayer outputs (not on X): fine for autograd."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        A += X
        B = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(A)))
        B += A
        return B


class W_17_only_queries_normalised(TransformerEncoderBlock):
    """LN1 on the queries only; keys and values from the raw X."""
    def forward(self, X, valid_lens):
        Y = X + self.addnorm1.dropout(self.attention(self.addnorm1.ln(X), X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_18_padding_rows_zeroed(TransformerEncoderBlock):
    """Zeroes the FFN branch at padded positions ('padding must not change')."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        F_ = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        if valid_lens is not None and valid_lens.dim() == 1:
            keep = torch.arange(X.shape[1], device=X.device)[None, :] < valid_lens[:, None]
            F_ = F_ * keep[..., None]
        return Y + F_


class W_19_kv_detached(TransformerEncoderBlock):
    """Keys and values from LN1(X).detach() ('only the query needs gradients')."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z.detach(), Z.detach(), valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class S_06_extra_final_norm_module_unused(TransformerEncoderBlock):
    """__init__ adds a (never used) final LayerNorm 'for the last block'."""
    def __init__(self, num_hiddens, *args, **kwargs):
        super().__init__(num_hiddens, *args, **kwargs)
        self.final_ln = nn.LayerNorm(num_hiddens)

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_20_layernorm_in_float32(TransformerEncoderBlock):
    """LayerNorm computed in float32 'for stability' and cast back: float64 blocks lose
    precision."""
    def _ln(self, ln, X):
        return F.layer_norm(X.float(), ln.normalized_shape, ln.weight.float(),
                            ln.bias.float(), ln.eps).to(X.dtype)

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_21_none_becomes_last_index(TransformerEncoderBlock):
    """valid_lens None replaced by 'the last index' n - 1 for every example: the last key
    is masked out when there is no padding."""
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = torch.full((X.shape[0],), X.shape[1] - 1, device=X.device)
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_22_own_ln_with_view(TransformerEncoderBlock):
    """Own LayerNorm on X.view(-1, d): raises on a non-contiguous X."""
    def _ln(self, ln, X):
        flat = X.view(-1, X.shape[-1])
        out = F.layer_norm(flat, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        return out.view(X.shape)

    def forward(self, X, valid_lens):
        Z = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))
