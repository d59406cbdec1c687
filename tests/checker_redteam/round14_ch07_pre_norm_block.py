"""Round 14 red team (writer D, issue 12), ch07_pre_norm_block: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round14/D/sols/ch07_pre_norm_block.py (the writer's header: Round 14, writer D, check_pre_norm_block: wrong pre-LN blocks (entries are classes).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: W_26 (a graph built only when X requires grad) by a case
with X not requiring grad whose parameter gradients are compared with the reference's
(_expect_parameter_gradients: "your block's output does not require grad, although the
block's parameters do"); W_28 (self.attention.forward(...), self.ffn.forward(...): the
submodules' hooks never fire) by _expect_hooks_fire, which counts each submodule's forward
runs against its calls through the module (a submodule not used at all, as with F.layer_norm,
is not asked for). A_24 (fused_multihead_attention called directly) gives the reference's
output, train mode included; A_29 (LN(X.squeeze())) is right for every d > 1."""
# flake8: noqa
import torch
from torch import nn
from torch.nn import functional as F

from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Y = X + self.addnorm1.dropout(self.attention(*[self.addnorm1.ln(X)] * 3, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class C_02_explicit(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        a = self.attention(h, h, h, valid_lens)
        Y = X + self.addnorm1.dropout(a)
        h2 = self.addnorm2.ln(Y)
        return Y + self.addnorm2.dropout(self.ffn(h2))


class O_03_functional_ln(TransformerEncoderBlock):
    """Right: F.layer_norm with the modules' own weight, bias and eps."""
    def _ln(self, ln, X):
        return F.layer_norm(X, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

    def forward(self, X, valid_lens):
        h = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class O_04_lens_no_grad_copy(TransformerEncoderBlock):
    """Right: copies valid_lens under no_grad (an index, never differentiated)."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            with torch.no_grad():
                valid_lens = valid_lens.clone()
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_05_addnorm_trick(TransformerEncoderBlock):
    """Right: the sum via torch.add with alpha=1 and out-of-place ops only."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = torch.add(X, self.addnorm1.dropout(self.attention(h, h, h, valid_lens)), alpha=1)
        return torch.add(Y, self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


def _manual_ln(ln, X, eps=None, unbiased=False, no_grad_stats=False, naive_var=False,
               eps_outside=False):
    eps = ln.eps if eps is None else eps
    if no_grad_stats:
        with torch.no_grad():
            mu = X.mean(-1, keepdim=True)
            var = X.var(-1, keepdim=True, unbiased=unbiased)
    elif naive_var:
        mu = X.mean(-1, keepdim=True)
        var = (X * X).mean(-1, keepdim=True) - mu * mu
    else:
        mu = X.mean(-1, keepdim=True)
        var = X.var(-1, keepdim=True, unbiased=unbiased)
    if eps_outside:
        Z = (X - mu) / (var.sqrt() + eps)
    else:
        Z = (X - mu) / torch.sqrt(var + eps)
    return Z * ln.weight + ln.bias


class _Manual(TransformerEncoderBlock):
    kw = {}

    def forward(self, X, valid_lens):
        h = _manual_ln(self.addnorm1.ln, X, **self.kw)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(_manual_ln(self.addnorm2.ln, Y, **self.kw)))


class O_06_manual_ln(_Manual):
    """Right: LayerNorm written out (biased variance, eps inside the sqrt)."""
    kw = {}


class W_07_ln_stats_no_grad(_Manual):
    """LN mean/variance computed under no_grad (treated as constants): outputs right,
    dL/dX wrong; any input with grad."""
    kw = {"no_grad_stats": True}


class W_08_naive_variance(_Manual):
    """var = E[x^2] - E[x]^2: cancellation for rows with a large mean (X + 1e4, float32)."""
    kw = {"naive_var": True}


class W_09_eps_1e6(_Manual):
    """LN eps 1e-6 instead of the module's 1e-5: wrong for rows of small variance
    (X * 1e-3)."""
    kw = {"eps": 1e-6}


class W_10_eps_outside(_Manual):
    """eps added to the std, not the variance: wrong for rows of small variance."""
    kw = {"eps_outside": True}


class W_11_unbiased_var(_Manual):
    """Unbiased variance (torch.var default): off by sqrt(d/(d-1))."""
    kw = {"unbiased": True}


class W_12_ln_params_data(TransformerEncoderBlock):
    """F.layer_norm with ln.weight.data / ln.bias.data: LN parameters get no gradient."""
    def _ln(self, ln, X):
        return F.layer_norm(X, ln.normalized_shape, ln.weight.data, ln.bias.data, ln.eps)

    def forward(self, X, valid_lens):
        h = self._ln(self.addnorm1.ln, X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self._ln(self.addnorm2.ln, Y)))


class W_13_keys_values_unnormed(TransformerEncoderBlock):
    """Only the queries normalised; keys and values are raw X."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_14_parallel(TransformerEncoderBlock):
    """Parallel block (GPT-J): FFN on LN2(X) instead of LN2(Y)."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_15_kv_detached(TransformerEncoderBlock):
    """Keys and values detached: dL/dX misses the key/value path."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h.detach(), h.detach(), valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_16_hardcoded_p(TransformerEncoderBlock):
    """Dropout rate hard-coded 0.1 (F.dropout) instead of the block's rate."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(h, h, h, valid_lens), 0.1, self.training)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), 0.1, self.training)


class W_17_rezero_gate(TransformerEncoderBlock):
    """An extra gate parameter alpha = 1 (ReZero-like): same output at init, but a new
    parameter that training moves; the text says keep the submodules, change forward."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.alpha = nn.Parameter(torch.ones(()))

    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + self.alpha * self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.alpha * self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_18_lens_last_column(TransformerEncoderBlock):
    """2-D valid_lens reduced to its last column (batch,): causal lens become full."""
    def forward(self, X, valid_lens):
        if valid_lens is not None and valid_lens.dim() == 2:
            valid_lens = valid_lens[:, -1]
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_19_lens_clamped_inplace(TransformerEncoderBlock):
    """valid_lens.clamp_(min=1) in place: mutates the caller's lengths (0 -> 1) and changes
    rows with no valid key."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            valid_lens.clamp_(min=1)
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_20_float32_compute(TransformerEncoderBlock):
    """Computes the LN outputs in float32 and casts back: float64 blocks lose precision."""
    def forward(self, X, valid_lens):
        h = F.layer_norm(X.float(), self.addnorm1.ln.normalized_shape,
                         self.addnorm1.ln.weight.float(), self.addnorm1.ln.bias.float(),
                         self.addnorm1.ln.eps).to(X.dtype)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        h2 = F.layer_norm(Y.float(), self.addnorm2.ln.normalized_shape,
                          self.addnorm2.ln.weight.float(), self.addnorm2.ln.bias.float(),
                          self.addnorm2.ln.eps).to(Y.dtype)
        return Y + self.addnorm2.dropout(self.ffn(h2))


class W_21_dropout_order(TransformerEncoderBlock):
    """Draws the FFN branch's dropout mask before the attention's (mask precomputed on a
    ones tensor): the random streams are consumed in the wrong order in training mode."""
    def forward(self, X, valid_lens):
        keep2 = self.addnorm2.dropout(torch.ones_like(X))
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + keep2 * self.ffn(self.addnorm2.ln(Y))


class W_22_dropout_on_ln_input(TransformerEncoderBlock):
    """Dropout on the normalised input of the sublayer, not on its output."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(h, h, h, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_23_attn_weights_stale(TransformerEncoderBlock):
    """Caches LN1(X) on the module across calls when shapes match (no key on values)."""
    def forward(self, X, valid_lens):
        c = getattr(self, "_c", None)
        if c is None or c[0].shape != X.shape or c[0].dtype != X.dtype or torch.is_grad_enabled():
            h = self.addnorm1.ln(X)
            self._c = (h.detach(),)
        else:
            h = c[0]
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class A_24_fused_attention(TransformerEncoderBlock):
    """Calls the fused kernel path (fused_multihead_attention) directly: the attention
    weights are no longer stored (None), and SDPA's dropout draws differ in training."""
    def forward(self, X, valid_lens):
        from book.attention import fused_multihead_attention
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(fused_multihead_attention(self.attention, h, h, h,
                                                                valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_25_no_grad_in_eval(TransformerEncoderBlock):
    """Eval mode runs under no_grad ('inference needs no graph'): gradients in eval mode
    (saliency, exercise 7.4's gradient norms at init) are gone."""
    def forward(self, X, valid_lens):
        with torch.set_grad_enabled(self.training and torch.is_grad_enabled()):
            h = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_26_grad_follows_X(TransformerEncoderBlock):
    """Builds a graph only when X requires grad: with X a plain tensor, the parameters get
    no gradient."""
    def forward(self, X, valid_lens):
        with torch.set_grad_enabled(X.requires_grad and torch.is_grad_enabled()):
            h = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_27_swapped_lns(TransformerEncoderBlock):
    """addnorm2.ln before the attention and addnorm1.ln before the FFN."""
    def forward(self, X, valid_lens):
        h = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_28_bypass_hooks(TransformerEncoderBlock):
    """Calls .forward of the submodules instead of the modules: forward hooks registered on
    block.attention / the LayerNorms / the FFN (to measure activations, as exercise 7.4 asks)
    never fire."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln.forward(X)
        Y = X + self.addnorm1.dropout(self.attention.forward(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn.forward(self.addnorm2.ln.forward(Y)))


class A_29_squeeze_batch(TransformerEncoderBlock):
    """LN on X.squeeze(0)... then unsqueeze: batch 1 with valid_lens (1,) breaks shapes
    of the attention (a 2-D input)."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X.squeeze()).reshape(X.shape)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_30_lens_as_float_mask(TransformerEncoderBlock):
    """Converts 1-D valid_lens to per-query lens with n = X.shape[1] via expand (a view):
    fine; but 2-D lens are capped at n with clamp_max (n) -- changes lens > n? no -- instead
    rounds float lens down: valid_lens.long() after dividing by 1.0 (ok) ... and 0 lens
    become 1 (max(1)): a row with no valid key attends key 0."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            valid_lens = valid_lens.clamp(min=1)
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_31_grad_left_disabled(TransformerEncoderBlock):
    """Computes the block, then torch.set_grad_enabled(False) 'for the masks of later
    calls', never restored: the caller's next forward builds no graph."""
    def forward(self, X, valid_lens):
        h = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(h, h, h, valid_lens))
        out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        torch.set_grad_enabled(False)
        return out
