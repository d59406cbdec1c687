"""Round 13 red team (writer D, issue 12), ch07_pre_norm_block: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round13/D/sols/ch07_pre_norm_block.py (the writer's header: PreNormEncoderBlock (entries are classes).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: W_11
(valid_lens.clamp(min=1)) by an eval case with valid_lens [6, 0], an example with no valid
key, whose message names the length 0 treated as 1; W_13 (a hand-written attention with
F.linear(x, W.weight)) by an eval case on a block built with use_bias=True, whose message
names the left-out projection biases. W_26 (inference mode) is rejected by _core. A_16
(swapped dropouts) is accepted: the constructor takes one rate for both."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F

from book.attention import masked_softmax
from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class C_02_functional_dropout(TransformerEncoderBlock):
    def forward(self, X, valid_lens=None):
        d1, d2 = self.addnorm1.dropout, self.addnorm2.dropout
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), d1.p, d1.training)
        Z = self.ffn(self.addnorm2.ln(Y))
        return Y + F.dropout(Z, d2.p, d2.training)


class O_03_manual_layernorm(TransformerEncoderBlock):
    @staticmethod
    def _ln(ln, X):
        mu = X.mean(-1, keepdim=True)
        var = ((X - mu) ** 2).mean(-1, keepdim=True)
        return (X - mu) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_04_post_ln(TransformerEncoderBlock):
    """Unchanged post-LN forward (inherited); any input."""
    def forward(self, X, valid_lens):
        return super().forward(X, valid_lens)


class W_05_swapped_norms(TransformerEncoderBlock):
    """ln2 before attention and ln1 before the FFN: identical at init (weight 1, bias 0),
    wrong once the two LayerNorms hold different parameters (any trained block)."""
    def forward(self, X, valid_lens):
        H = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_06_norm_no_affine(TransformerEncoderBlock):
    """F.layer_norm without the LayerNorm's weight and bias: right only at init."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        H = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_07_ln_params_detached(TransformerEncoderBlock):
    """LayerNorm weight/bias detached: same outputs, but the LayerNorms never learn (their
    .grad stays None); any input, seen in the parameter gradients."""
    def forward(self, X, valid_lens):
        l1, l2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, l1.normalized_shape, l1.weight.detach(), l1.bias.detach(), l1.eps)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        G = F.layer_norm(Y, l2.normalized_shape, l2.weight.detach(), l2.bias.detach(), l2.eps)
        return Y + self.addnorm2.dropout(self.ffn(G))


class W_08_unbiased_variance(TransformerEncoderBlock):
    """Hand-written LayerNorm with torch.var's default unbiased (n-1) variance: the
    normalised values are sqrt((d-1)/d) too small (3% at d=16, 0.1% at d=512)."""
    @staticmethod
    def _ln(ln, X):
        return (X - X.mean(-1, keepdim=True)) / torch.sqrt(X.var(-1, keepdim=True) + ln.eps) \
            * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_09_eps_1e6(TransformerEncoderBlock):
    """F.layer_norm with eps=1e-6 (the HF/TF default) instead of the module's 1e-5: visible
    when a row's variance is near 1e-5 (e.g. X rows of scale 3e-3)."""
    def forward(self, X, valid_lens):
        l1, l2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, l1.normalized_shape, l1.weight, l1.bias, 1e-6)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        G = F.layer_norm(Y, l2.normalized_shape, l2.weight, l2.bias, 1e-6)
        return Y + self.addnorm2.dropout(self.ffn(G))


class W_10_kv_unnormalised(TransformerEncoderBlock):
    """Only the queries are normalised: attention(LN(X), X, X); any input."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_11_clamp_lens(TransformerEncoderBlock):
    """valid_lens.clamp(min=1) "to avoid empty rows": an example of length 0 attends key 0
    instead of giving a zero attention output; valid_lens containing 0."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            valid_lens = valid_lens.clamp(min=1)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_12_lens_rowmax(TransformerEncoderBlock):
    """2-D (per-query) valid_lens reduced to their row max: the causal mask is lost."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens.max(dim=1).values
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_13_manual_mha_no_bias(TransformerEncoderBlock):
    """Attention rewritten by hand with F.linear(x, W.weight): the projection biases are
    dropped; wrong whenever the block is built with use_bias=True (BERT's blocks)."""
    def forward(self, X, valid_lens):
        a = self.attention
        H = self.addnorm1.ln(X)
        b, n, d = H.shape
        h = a.num_heads

        def split(T):
            return T.reshape(b, n, h, -1).permute(0, 2, 1, 3).reshape(b * h, n, -1)

        q, k, v = (split(F.linear(H, W.weight)) for W in (a.W_q, a.W_k, a.W_v))
        lens = None if valid_lens is None else valid_lens.repeat_interleave(h, dim=0)
        w = masked_softmax(torch.bmm(q / (d // h) ** 0.5, k.transpose(1, 2)), lens)
        a.attention.attention_weights = w
        o = torch.bmm(a.attention.dropout(w), v)
        o = o.reshape(b, h, n, -1).permute(0, 2, 1, 3).reshape(b, n, d)
        Y = X + self.addnorm1.dropout(F.linear(o, a.W_o.weight))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_14_ln_in_float32(TransformerEncoderBlock):
    """LayerNorm computed on X.float() and cast back: float64 blocks lose precision in LN
    (relative error ~1e-7 instead of 1e-16); float64 input."""
    def forward(self, X, valid_lens):
        l1, l2 = self.addnorm1.ln, self.addnorm2.ln

        def ln(l, T):
            return F.layer_norm(T.float(), l.normalized_shape, l.weight.float(),
                                l.bias.float(), l.eps).to(T.dtype)

        H = ln(l1, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(ln(l2, Y)))


class W_15_new_layernorms(TransformerEncoderBlock):
    """New nn.LayerNorm modules made in __init__ instead of addnorm1.ln / addnorm2.ln:
    same at init, but a loaded or trained state in addnorm*.ln is ignored."""
    def __init__(self, num_hiddens, *args, **kwargs):
        super().__init__(num_hiddens, *args, **kwargs)
        self.pre_ln1 = nn.LayerNorm(num_hiddens)
        self.pre_ln2 = nn.LayerNorm(num_hiddens)

    def forward(self, X, valid_lens):
        H = self.pre_ln1(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.pre_ln2(Y)))


class A_16_swapped_dropouts(TransformerEncoderBlock):
    """addnorm2.dropout on the attention output and addnorm1.dropout on the FFN output:
    the same when both p are equal; wrong when addnorm1.dropout.p != addnorm2.dropout.p.
    Accepted (lead's ruling, round 13): TransformerEncoderBlock takes one dropout rate for
    both AddNorms, so no block the exercise builds tells the two apart, and both draw from
    the one global generator in the same order."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_17_ffn_from_x(TransformerEncoderBlock):
    """Parallel block (GPT-J style): FFN reads LN2(X), not LN2(Y); any input."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_18_ln_stats_no_grad(TransformerEncoderBlock):
    """LayerNorm with its mean and std computed under no_grad (detached statistics): the
    outputs are right, the input gradient is not (it misses the -mean/-var terms)."""
    @staticmethod
    def _ln(ln, X):
        with torch.no_grad():
            mu = X.mean(-1, keepdim=True)
            sd = torch.sqrt(X.var(-1, unbiased=False, keepdim=True) + ln.eps)
        return (X - mu) / sd * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_19_eval_mode_dropout_always(TransformerEncoderBlock):
    """Sublayer dropout with training=True always: eval mode drops too; eval with p>0."""
    def forward(self, X, valid_lens):
        p1, p2 = self.addnorm1.dropout.p, self.addnorm2.dropout.p
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), p1, True)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p2, True)


class W_20_residual_from_normed(TransformerEncoderBlock):
    """The residual taken from LN(X) instead of X: Y = LN1(X) + attn(LN1(X)); any input
    whose rows are not already normalised."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = H + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        G = self.addnorm2.ln(Y)
        return G + self.addnorm2.dropout(self.ffn(G))


class W_21_half_ln_bias(TransformerEncoderBlock):
    """Uses ln.weight but forgets ln.bias (F.layer_norm(X, shape, weight)); right while the
    bias is 0 (at init), wrong for a trained bias."""
    def forward(self, X, valid_lens):
        l1, l2 = self.addnorm1.ln, self.addnorm2.ln
        H = F.layer_norm(X, l1.normalized_shape, l1.weight, None, l1.eps)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        G = F.layer_norm(Y, l2.normalized_shape, l2.weight, None, l2.eps)
        return Y + self.addnorm2.dropout(self.ffn(G))


class W_22_attention_dropout_off(TransformerEncoderBlock):
    """Calls the attention in eval mode (its own dropout disabled) during training."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        was = self.attention.training
        self.attention.eval()
        try:
            A = self.attention(H, H, H, valid_lens)
        finally:
            self.attention.train(was)
        Y = X + self.addnorm1.dropout(A)
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_23_output_float32(TransformerEncoderBlock):
    """Residual stream accumulated in float32 and returned as float32: a float64 block
    returns float32 (precision ~1e-7 lost); float64 input (block.double())."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X.float() + self.addnorm1.dropout(self.attention(H, H, H, valid_lens)).float()
        Yc = Y.to(X.dtype)
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Yc))).float()


class W_24_zero_padding(TransformerEncoderBlock):
    """Outputs at padded positions (>= valid_len) set to 0 "to keep padding clean": the
    chapter's block (and the next block's input) keeps them; valid_lens [6, 3]."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        if valid_lens is not None and valid_lens.dim() == 1:
            keep = torch.arange(X.shape[1], device=X.device) < valid_lens[:, None]
            out = out * keep[..., None]
        return out


class W_25_annotated_std_eps(TransformerEncoderBlock):
    """The Annotated Transformer's LayerNorm: (X - mean) / (std + eps) with the biased std,
    eps outside the root; off when a row's variance is not >> eps (rows of scale 1e-3)."""
    @staticmethod
    def _ln(ln, X):
        mu = X.mean(-1, keepdim=True)
        sd = X.std(-1, unbiased=False, keepdim=True)
        return (X - mu) / (sd + ln.eps) * ln.weight + ln.bias

    def forward(self, X, valid_lens):
        H = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_26_inference_mode_forward(TransformerEncoderBlock):
    """forward decorated with @torch.inference_mode(): right values, but no gradient at all
    (and an inference tensor that later autograd use rejects); any input in training."""
    @torch.inference_mode()
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
