"""Checkers for chapter 7's exercises: the causal mask and a pre-LayerNorm encoder block."""
import torch

from ._core import call, expect_close, expect_tensor, fail


def _reference_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def check_causal_mask(fn):
    """Check `fn(num_steps)`: a (num_steps, num_steps) bool mask, True where query i may
    attend key j, that is j <= i (scaled_dot_product_attention's convention)."""
    for n in (4, 1, 2, 7):
        case = f"num_steps={n}"
        mask = call(fn, n, name="causal_mask", case=case)
        expect_tensor(mask, (n, n), what="the mask", case=case)
        if mask.dtype != torch.bool:
            fail(f"the mask has dtype {mask.dtype} on {case}; expected torch.bool "
                 "(True = may attend).",
                 "an additive mask of 0 and -inf, or 1.0 and 0.0, is another convention: "
                 "build the mask with a comparison or pass dtype=torch.bool.")
        expected = _reference_mask(n)
        if torch.equal(mask, expected):
            continue
        if n > 1 and torch.equal(mask, ~expected):
            fail(f"the mask is inverted on {case}: True marks the keys to hide.",
                 "here True means 'may attend' (scaled_dot_product_attention's convention); "
                 "nn.MultiheadAttention's masks use the opposite one (True = ignore).")
        wrong = (mask != expected).nonzero()
        i, j = (int(v) for v in wrong[0])
        if j > i:
            fail(f"on {case}, query {i} may attend key {j}, which is {j - i} step(s) in its "
                 f"future (mask[{i}, {j}] is True).",
                 "keep only the entries on and below the diagonal: key j <= query i.")
        if j == i:
            fail(f"on {case}, query {i} may not attend key {i}, itself (mask[{i}, {i}] is "
                 "False): a query with no visible key has nothing to average.",
                 "the diagonal belongs to the past: position t sees positions <= t.")
        fail(f"on {case}, query {i} may not attend key {j}, which is in its past "
             f"(mask[{i}, {j}] is False).",
             "keep every entry on and below the diagonal: key j <= query i.")
    return "causal_mask: all checks passed."


def _reference_pre_norm(block, X, valid_lens):
    norm1, norm2 = block.addnorm1.ln, block.addnorm2.ln
    Y = X + block.attention(norm1(X), norm1(X), norm1(X), valid_lens)
    return Y + block.ffn(norm2(Y))


def check_pre_norm_block(cls):
    """Check `cls(num_hiddens, ffn_num_hiddens, num_heads, dropout)`: a TransformerEncoderBlock
    whose forward is pre-LayerNorm, X + Sublayer(LayerNorm(X)), for both sublayers."""
    torch.manual_seed(0)
    block = call(cls, 16, 32, 4, 0.0, name="PreNormEncoderBlock",
                 case="PreNormEncoderBlock(16, 32, 4, 0.0)")
    for part in ("attention", "addnorm1", "ffn", "addnorm2"):
        if not hasattr(block, part):
            fail(f"your block has no `{part}`.",
                 "subclass TransformerEncoderBlock and override only forward, so the block "
                 "keeps its attention, addnorm1.ln, ffn and addnorm2.ln.")
    with torch.no_grad():  # LayerNorm starts as the identity affine map: make it visible
        for ln in (block.addnorm1.ln, block.addnorm2.ln):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    block.eval()
    g = torch.Generator().manual_seed(1)
    X = 3 + 2 * torch.randn(2, 6, 16, generator=g)  # far from mean 0, std 1
    valid_lens = torch.tensor([6, 3])
    case = "X of shape (2, 6, 16) with valid_lens [6, 3]"
    with torch.no_grad():
        out = call(block, X, valid_lens, name="your block", case=case)
        expect_tensor(out, X.shape, what="the block's output", case=case)
        expected = _reference_pre_norm(block, X, valid_lens)
        Y = block.addnorm1(X, block.attention(X, X, X, valid_lens))  # post-LN, as before
        post = block.addnorm2(Y, block.ffn(Y))
        if torch.allclose(out, post, atol=1e-5):
            fail(f"on {case} your block is still post-LayerNorm: LayerNorm(X + Sublayer(X)).",
                 "in pre-LN the norm moves inside the residual branch: "
                 "X + Sublayer(LayerNorm(X)), and nothing normalises the sum.")
        if torch.allclose(out, _reference_pre_norm(block, X, None), atol=1e-5):
            fail(f"on {case} your block ignores valid_lens: padded keys get attention.",
                 "pass valid_lens on to self.attention.")
        expect_close(out, expected, what="the block's output", case=case, atol=1e-4,
                     hint="Y = X + attention(LN1(X), LN1(X), LN1(X), valid_lens), then "
                          "Y + ffn(LN2(Y)), with LN1 = self.addnorm1.ln, "
                          "LN2 = self.addnorm2.ln; the residual adds the un-normalised X.")
    return "PreNormEncoderBlock: all checks passed."
