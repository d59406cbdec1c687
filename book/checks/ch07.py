"""Checkers for chapter 7's exercises: the causal mask and a pre-LayerNorm encoder block."""
import copy
import functools

import torch

import torch.nn.functional as F

from ..transformer import TransformerEncoderBlock
from ._core import CheckFailed, _shown, call, checker, cotangents, expect_close, \
    expect_gradients, expect_tensor, fail, is_close, seeded, view_hint, worst


def _reference_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


_EMPTY_HINT = ("num_steps=0 (an empty sequence) has no queries and no keys: the mask is "
               "the empty (0, 0) bool tensor that torch.arange(0) compared with itself, or "
               "torch.ones(0, 0, dtype=torch.bool).tril(), gives; do not force at least "
               "one step (max(num_steps, 1)).")


@checker("causal_mask")
def check_causal_mask(fn):
    """Check `fn(num_steps)`: a (num_steps, num_steps) bool mask, True where query i may
    attend key j, that is j <= i (scaled_dot_product_attention's convention), for lengths
    from 0 (an empty (0, 0) mask) to 4097 (past 64, 127, 255, 256, 2048 and 4096, where
    cached masks or tables, int8, uint8, bfloat16 or float16 positions break), and the
    first length once more at the end (a cached mask must not change between calls); a
    dense tensor, and torch's global random generator left as it was (no reseeding)."""
    seen = set()
    for n in (4, 1, 0, 2, 7, 50, 65, 130, 300, 2050, 4097, 4):
        again = n in seen
        case = f"num_steps={n}" + (" (asked a second time)" if again else "")
        seen.add(n)
        mask = call(fn, n, name="causal_mask", case=case)  # a draw or a re-seed fails there
        if isinstance(mask, torch.Tensor) and tuple(mask.shape) != (n, n) and \
                mask.dim() == 3 and tuple(mask.shape[1:]) == (n, n):
            fail(f"the mask has shape {tuple(mask.shape)} on {case}; expected ({n}, {n}).",
                 "return the 2-D (num_steps, num_steps) mask; broadcasting adds batch axes "
                 "where it is used.")
        expect_tensor(mask, (n, n), what="the mask", case=case,
                      hint="a mask of a fixed size (cached, or sliced from a fixed table) is "
                           "too small for longer sequences: build it for num_steps."
                      if n > 64 else _EMPTY_HINT if n == 0 else None)
        if mask.layout != torch.strided:
            fail(f"the mask is a {str(mask.layout).replace('torch.', '')} tensor on {case}; "
                 "expected an ordinary (dense) torch.bool tensor.",
                 "return the dense mask itself, without .to_sparse(): attention functions "
                 "(masked_fill, scaled_dot_product_attention) take a dense mask.")
        if mask.dtype != torch.bool:
            fail(f"the mask has dtype {mask.dtype} on {case}; expected torch.bool "
                 "(True = may attend).",
                 "an additive mask of 0 and -inf, or 1.0 and 0.0, is another convention: "
                 "build the mask with a comparison or pass dtype=torch.bool.")
        expected = _reference_mask(n)
        if torch.equal(mask, expected):
            continue
        if again:
            fail(f"on {case} the mask is wrong ({int((mask != expected).sum())} entries), "
                 "although it was right the first time: your function's answer changes "
                 "from call to call.",
                 "build the mask anew at each call, or, if you cache it, never change the "
                 "cached tensor (no in-place writes to it).")
        if n > 1 and torch.equal(mask, ~expected):
            fail(f"the mask is inverted on {case}: True marks the keys to hide.",
                 "here True means 'may attend' (scaled_dot_product_attention's convention); "
                 "nn.MultiheadAttention's masks use the opposite one (True = ignore).")
        wrong = (mask != expected).nonzero()
        i, j = (int(v) for v in wrong[0])
        if n > 127:
            hint = ("right for short sequences, wrong for long ones: int8 positions wrap "
                    "around after 127 (uint8 ones after 255), float16 ones are not exact "
                    "past 2048 (bfloat16 ones past 256; keep torch.arange's int64), and a "
                    "fixed window or table ends somewhere.")
            fail(f"on {case}, mask[{i}, {j}] is {bool(mask[i, j])}, expected "
                 f"{bool(expected[i, j])} ({int((mask != expected).sum())} entries wrong).",
                 hint)
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
             "keep every entry on and below the diagonal: key j <= query i (the whole past, "
             "not a window of recent steps).")


def _reference_pre_norm(block, X, valid_lens):
    norm1, norm2 = block.addnorm1.ln, block.addnorm2.ln
    Z = norm1(X)
    Y = X + block.addnorm1.dropout(block.attention(Z, Z, Z, valid_lens))
    return Y + block.addnorm2.dropout(block.ffn(norm2(Y)))


class _PreNormReference(TransformerEncoderBlock):
    """The checker's own block: a TransformerEncoderBlock built here (never the learner's
    class, so nothing the learner's __init__ or forward changes reaches the expected values)
    with the pre-LN forward. The learner's block gets its parameters."""

    def forward(self, X, valid_lens):
        return _reference_pre_norm(self, X, valid_lens)


def _mistakes(block):
    """Forwards a learner may write instead, each with what is wrong about it."""
    ln1, ln2, att, ffn = block.addnorm1.ln, block.addnorm2.ln, block.attention, block.ffn
    d1, d2 = block.addnorm1.dropout, block.addnorm2.dropout

    def plain(Y):
        return F.layer_norm(Y, Y.shape[-1:])

    def unbiased(ln):
        return lambda Y: ((Y - Y.mean(-1, keepdim=True))
                          / torch.sqrt(Y.var(-1, keepdim=True) + ln.eps) * ln.weight + ln.bias)

    def branch(X, lens, n1=ln1, n2=ln2, keys=None, ffn_in=None, outer=None, final=None,
               attention=att):
        Z = n1(X)
        K = Z if keys is None else keys(X)
        Y = X + d1(attention(Z, K, K, lens))
        Y = Y if outer is None else outer[0](Y)
        out = Y + d2(ffn(n2(Y) if ffn_in is None else ffn_in(X, Y)))
        return out if final is None else final(out)
    biased = [name for name in ("W_q", "W_k", "W_v", "W_o")
              if getattr(getattr(att, name, None), "bias", None) is not None]
    without_biases = [
        (lambda X, lens, names=names: branch(X, lens, attention=_without_biases(att, names)),
         f"your attention leaves out the biases of {what} (the block was built with "
         "use_bias=True, as BERTModel builds its blocks): a hand-written attention that "
         "applies only the weights, F.linear(x, W.weight), or a copy built without biases.",
         "call the block's own self.attention(Z, Z, Z, valid_lens), which adds the biases "
         "when the block has them; a projection of your own must use the whole layer, "
         "W(x), not its weight alone.")
        for names, what in ((biased, "its projections W_q, W_k, W_v and W_o"),
                            (biased[:3], "its projections W_q, W_k and W_v"),
                            (biased[3:], "its output projection W_o"))
        if len(biased) == 4 and names]
    return without_biases + [
        (lambda X, lens: block.addnorm2(block.addnorm1(X, att(X, X, X, lens)),
                                        ffn(block.addnorm1(X, att(X, X, X, lens)))),
         "your block is still post-LayerNorm: LayerNorm(X + Sublayer(X)).",
         "in pre-LN the norm moves inside the residual branch: X + Sublayer(LayerNorm(X)), "
         "and nothing normalises the sum."),
        (lambda X, lens: branch(X, lens, n1=ln2, n2=ln1),
         "the two LayerNorms are swapped: self.addnorm2.ln is used before the attention and "
         "self.addnorm1.ln before the FFN.",
         "LN1 = self.addnorm1.ln goes before the attention, LN2 = self.addnorm2.ln before the "
         "FFN (they have their own weights)."),
        (lambda X, lens: branch(X, lens, n1=ln1, n2=ln1),
         "the same LayerNorm, self.addnorm1.ln, is used before both sublayers.",
         "LN1 = self.addnorm1.ln goes before the attention, LN2 = self.addnorm2.ln before "
         "the FFN: two LayerNorms with their own weights."),
        (lambda X, lens: _ffn_first(block, X, lens),
         "the sublayers are in the wrong order: the FFN comes first, the attention second.",
         "the attention sublayer comes first: Y = X + dropout1(attention(LN1(X), ...)), "
         "then Y + dropout2(ffn(LN2(Y)))."),
        (lambda X, lens: branch(X, lens, n1=plain, n2=plain),
         "your block normalises without the block's LayerNorm parameters (F.layer_norm "
         "without weight and bias, or a new nn.LayerNorm).",
         "use the block's own modules, self.addnorm1.ln and self.addnorm2.ln: their weights "
         "and biases are trained."),
        (lambda X, lens: branch(X, lens, n1=unbiased(ln1), n2=unbiased(ln2)),
         "your LayerNorm divides by the unbiased standard deviation (torch.var's and "
         "torch.std's default, n - 1 in the denominator); LayerNorm uses the biased one "
         "(n in the denominator).",
         "use the block's modules, self.addnorm1.ln and self.addnorm2.ln; a LayerNorm of your "
         "own needs X.var(-1, keepdim=True, unbiased=False) + eps under the square root."),
        (lambda X, lens: branch(X, lens, outer=(ln1,), final=ln2),
         "your block normalises the residual sums too (LayerNorm inside and outside; "
         "calling self.addnorm1(X, ...) does this, since AddNorm returns LN(X + Y)).",
         "pre-LN normalises only the sublayer's input: Y = X + Sublayer(LN(X)), and nothing "
         "normalises Y. Use the parts self.addnorm1.ln and self.addnorm1.dropout, not the "
         "AddNorm modules themselves."),
        (lambda X, lens: _residual_from_normed(block, X, lens),
         "the residual adds the normalised input, LN(X) + Sublayer(LN(X)).",
         "the residual adds the un-normalised X: X + Sublayer(LN(X))."),
        (lambda X, lens: branch(X, lens, keys=lambda X: X),
         "only the queries are normalised: the keys and values are the raw X.",
         "pass LN1(X) as queries, keys and values: attention(Z, Z, Z, valid_lens) with "
         "Z = LN1(X)."),
        (lambda X, lens: branch(X, lens, ffn_in=lambda X, Y: ln2(X)),
         "the FFN sees LN2(X), the block's input, instead of LN2(Y), the output of the "
         "attention sublayer.", "the second sublayer works on Y = X + attention(...): "
         "Y + FFN(LN2(Y))."),
        (lambda X, lens: _no_residual(block, X, lens, first=True),
         "the attention sublayer has no residual: Y = attention(...) instead of "
         "X + attention(...).", "add the block's input back: Y = X + dropout1(attention("
         "LN1(X), ...))."),
        (lambda X, lens: _no_residual(block, X, lens, first=False),
         "the FFN sublayer has no residual: the output is FFN(LN2(Y)) instead of "
         "Y + FFN(LN2(Y)).", "add Y back: Y + dropout2(ffn(LN2(Y)))."),
        (lambda X, lens: _second_residual_from_input(block, X, lens),
         "the FFN sublayer's residual adds X, the block's input, instead of Y: the output "
         "is X + FFN(LN2(Y)), which throws away what the attention sublayer added.",
         "each residual adds its own sublayer's input: Y = X + dropout1(attention(LN1(X), "
         "...)), then Y + dropout2(ffn(LN2(Y))), with Y, not X, in the second sum."),
        (lambda X, lens: branch(X, lens, final=ln2),
         "your block ends with a LayerNorm of its output.",
         "pre-LN blocks do not normalise their output: the single final LayerNorm comes "
         "after the last block, outside this class."),
        (lambda X, lens: branch(X, lens, final=plain),
         "your block ends with a LayerNorm of its output (F.layer_norm or a new "
         "nn.LayerNorm).",
         "pre-LN blocks do not normalise their output: the single final LayerNorm comes "
         "after the last block, outside this class."),
    ]


def _without_biases(attention, names):
    """A copy of the block's attention with the biases of the projections `names` zeroed."""
    bare = copy.deepcopy(attention)
    with torch.no_grad():
        for name in names:
            getattr(bare, name).bias.zero_()
    return bare


def _ffn_first(block, X, lens):
    ln1, ln2 = block.addnorm1.ln, block.addnorm2.ln
    Y = X + block.addnorm2.dropout(block.ffn(ln2(X)))
    Z = ln1(Y)
    return Y + block.addnorm1.dropout(block.attention(Z, Z, Z, lens))


def _no_residual(block, X, lens, first):
    Z = block.addnorm1.ln(X)
    A = block.addnorm1.dropout(block.attention(Z, Z, Z, lens))
    Y = A if first else X + A
    F_ = block.addnorm2.dropout(block.ffn(block.addnorm2.ln(Y)))
    return Y + F_ if first else F_


def _second_residual_from_input(block, X, lens):
    Z = block.addnorm1.ln(X)
    Y = X + block.addnorm1.dropout(block.attention(Z, Z, Z, lens))
    return X + block.addnorm2.dropout(block.ffn(block.addnorm2.ln(Y)))


def _residual_from_normed(block, X, lens):
    Z = block.addnorm1.ln(X)
    Y = Z + block.addnorm1.dropout(block.attention(Z, Z, Z, lens))
    Z2 = block.addnorm2.ln(Y)
    return Z2 + block.addnorm2.dropout(block.ffn(Z2))


def _dropout_mistakes(block):
    ln1, ln2, att, ffn = block.addnorm1.ln, block.addnorm2.ln, block.attention, block.ffn
    d1, d2 = block.addnorm1.dropout, block.addnorm2.dropout

    def no_dropout(X, lens):
        Z = ln1(X)
        Y = X + att(Z, Z, Z, lens)
        return Y + ffn(ln2(Y))

    def on_sum(X, lens):
        Z = ln1(X)
        Y = d1(X + att(Z, Z, Z, lens))
        return d2(Y + ffn(ln2(Y)))

    def on_input(X, lens):
        Z = d1(ln1(X))
        Y = X + att(Z, Z, Z, lens)
        return Y + ffn(d2(ln2(Y)))
    def keep_prob(X, lens):
        q = 1 - d1.p
        Z = ln1(X)
        Y = X + F.dropout(att(Z, Z, Z, lens), q, True)
        return Y + F.dropout(ffn(ln2(Y)), q, True)

    def one_dropped(X, lens, first=True, second=True, ffn_on_input=False,
                    attention_on_input=False):
        Z = ln1(X)
        A = att(*(3 * (d1(Z) if attention_on_input else Z,)), lens)
        Y = X + (d1(A) if first and attention_on_input != "only" else A)
        if ffn_on_input:
            return Y + ffn(d2(ln2(Y)))
        return Y + (d2(ffn(ln2(Y))) if second else ffn(ln2(Y)))

    def attention_eval(X, lens):
        try:
            att.eval()
            Z = ln1(X)
            A = att(Z, Z, Z, lens)
        finally:
            att.train()
        Y = X + d1(A)
        return Y + d2(ffn(ln2(Y)))

    def ffn_mask_first(X, lens):
        keep = d2(torch.ones_like(X))
        Z = ln1(X)
        Y = X + d1(att(Z, Z, Z, lens))
        return Y + keep * ffn(ln2(Y))

    def shared_mask(X, lens):
        keep = d1(torch.ones_like(X))
        Z = ln1(X)
        Y = X + keep * att(Z, Z, Z, lens)
        return Y + keep * ffn(ln2(Y))

    drawn_early = ("(with the reference's seed the masks must be drawn where the reference "
                   "draws them: the attention runs, with its own dropout, then "
                   "self.addnorm1.dropout is called on its output, then "
                   "self.addnorm2.dropout on the FFN's output)")
    return [(keep_prob, f"the dropouts drop a share 1 - {d1.p:g} = {1 - d1.p:g} of the "
                        f"entries, not the block's rate {d1.p:g}: the rate is the share "
                        "dropped, not the share kept."),
            (no_dropout, "no dropout is applied to the sublayer outputs."),
            (lambda X, lens: one_dropped(X, lens, second=False),
             "no dropout is applied to the FFN's output: self.addnorm2.dropout is missing "
             "(Y + ffn(LN2(Y)) instead of Y + dropout2(ffn(LN2(Y))))."),
            (lambda X, lens: one_dropped(X, lens, first=False),
             "no dropout is applied to the attention's output: self.addnorm1.dropout is "
             "missing (X + attention(...) instead of X + dropout1(attention(...)))."),
            (lambda X, lens: one_dropped(X, lens, ffn_on_input=True),
             "self.addnorm2.dropout is applied to the FFN's input, ffn(dropout2(LN2(Y))), "
             "not to its output, dropout2(ffn(LN2(Y)))."),
            (lambda X, lens: one_dropped(X, lens, attention_on_input="only"),
             "self.addnorm1.dropout is applied to the attention's input, "
             "attention(dropout1(LN1(X)), ...), not to its output."),
            (lambda X, lens: one_dropped(X, lens, attention_on_input=True),
             "self.addnorm1.dropout is applied twice, to the attention's input "
             "attention(dropout1(LN1(X)), ...) and to its output: in train mode only the "
             "sublayer's output is dropped."),
            (attention_eval, "the attention's own dropout (on its attention weights, inside "
                             "self.attention) is off in train mode: your forward puts "
                             "self.attention in eval mode (or otherwise skips its dropout). "
                             "That dropout is part of the sublayer and stays on in train "
                             "mode, as in the chapter's block; the exercise's dropouts of "
                             "addnorm1 and addnorm2 come on top of it."),
            (ffn_mask_first, "the FFN's dropout mask is drawn before the attention runs "
                             "(self.addnorm2.dropout called on a tensor of ones first, then "
                             "multiplied in) " + drawn_early + "."),
            (shared_mask, "one dropout mask, drawn before the attention runs, is used for "
                          "both sublayers: each sublayer's output needs its own mask, "
                          + drawn_early[1:-1] + "."),
            (on_sum, "dropout is applied to the residual sum X + Sublayer(...), which also "
                     "drops entries of X itself."),
            (on_input, "dropout is applied to the sublayer's input LN(X), not its output.")]


def _settings(module):
    """The plain settings of a module (Dropout.p, LayerNorm.eps, Linear sizes, ...)."""
    return {key: value for key, value in vars(module).items()
            if not key.startswith("_") and key != "training"
            and isinstance(value, (bool, int, float, str, tuple))}


def _tree(block):
    """{path: (type, settings)} of every submodule of a block, as built."""
    return {path: (type(module), _settings(module))
            for path, module in block.named_modules() if path}


_KEEP_HINT = ("keep the submodules TransformerEncoderBlock.__init__ builds, as it builds "
              "them: the exercise changes only forward. An __init__ of your own must pass "
              "every argument on to super().__init__(...) unchanged and change nothing "
              "after it.")
_FORWARD_KEEPS_HINT = ("forward must not change the block's modules or their settings (p, "
                       "eps, ...): they belong to __init__, and the train/eval mode to the "
                       "caller.")


def _expect_tree(block, ref, case=None):
    """The learner's block must have the submodules of a fresh TransformerEncoderBlock with
    the same arguments: the same types and settings, and no module in two places. Checked
    after construction and (with `case`) after each call: forward must not change them."""
    args = _args(ref)
    if case:  # it was right before the call
        where, hint = f"on {case}, your block's forward changed its modules: ", \
            _FORWARD_KEEPS_HINT
    else:
        where, hint = "", _KEEP_HINT
    seen = {}
    for path, (kind, settings) in ref.template.items():
        mine = _submodule(block, path)
        if mine is None:
            fail(f"{where}your block has no self.{path} (a {args} has a {kind.__name__} "
                 "there).", hint)
        if type(mine) is not kind:
            fail(f"{where}self.{path} of your block is a {type(mine).__name__}, where a "
                 f"{args} has a {kind.__name__}.", hint)
        for key, value in settings.items():
            have = getattr(mine, key, "missing")
            if have == value:
                continue
            rates = {getattr(_submodule(block, other), "p", None)
                     for other, (k, _) in ref.template.items() if k is torch.nn.Dropout}
            if case:
                fail(f"{where}self.{path}.{key} was {value!r} before the call and is "
                     f"{have!r} after it.", hint)
            if key == "p" and kind is torch.nn.Dropout and rates == {have}:
                fail(f"every Dropout of your block has p = {have!r}, though the block was "
                     f"built with dropout={ref.dropout_arg}: the block ignores its dropout "
                     "argument.", hint)
            fail(f"self.{path}.{key} of your block is {have!r}, where a {args} has "
                 f"{value!r}.", hint)
        if id(mine) in seen:
            fail(f"{where}self.{path} and self.{seen[id(mine)]} of your block are one and "
                 f"the same {kind.__name__}, where a {args} has two, each with its own "
                 "parameters.", hint)
        seen[id(mine)] = path


def _submodule(block, path):
    try:
        return block.get_submodule(path)
    except AttributeError:
        return None


def _load(block, ref):
    """Give the learner's block the reference's parameters (the same names and shapes)."""
    args = _args(ref)
    want = ref.state_dict()
    have = block.state_dict(keep_vars=True)
    known = {id(value) for key, value in have.items() if key in want}
    missing = [key for key in want if key not in have]
    extra = [key for key, value in have.items()
             if key not in want and id(value) not in known]
    if missing or extra:
        fail(f"your block's parameters and buffers are not those of a {args}: "
             + (f"it lacks {missing}" if missing else "")
             + ("; " if missing and extra else "")
             + (f"it has {extra} besides" if extra else "") + ".", _KEEP_HINT)
    for key, value in ref.initial.items():  # built from the same seed: the same start
        mine = have[key].detach()
        if mine.shape == value.shape and not torch.equal(mine, value):
            diff = (mine.double() - value.double()).abs().max().item()
            fail(f"your block does not start from the parameters of a {args} built from "
                 f"the same random seed: its {key} differs (largest difference {diff:.3g}), "
                 "so your __init__ initialises the block its own way.",
                 "the exercise changes only forward: keep TransformerEncoderBlock's "
                 "initialisation (no re-initialising or scaling of parameters in __init__).")
    try:
        block.load_state_dict(want, strict=False)  # aliases of known tensors are allowed
    except RuntimeError as error:
        fail(f"the parameters of a {args} do not fit your block: {error}", _KEEP_HINT)


def _args(ref, name="TransformerEncoderBlock"):
    """How the blocks of `ref`'s kind are built, as Python: name(16, 32, 4, dropout)."""
    return f"{name}(16, 32, 4, {ref.dropout_arg}" + \
        (", use_bias=True)" if ref.use_bias else ")")


def _blocks(cls, dropout, use_bias=False):
    """(the learner's block, the checker's reference) with the same parameters: the
    reference is a fresh TransformerEncoderBlock with LayerNorm parameters made visible
    (they start as the identity affine map), loaded into the learner's block. With
    use_bias=True (as BERT builds its blocks) the attention's four projections have biases."""
    with seeded(0):
        ref = _PreNormReference(16, 32, 4, dropout, use_bias=use_bias) if use_bias else \
            _PreNormReference(16, 32, 4, dropout)
    ref.dropout_arg, ref.use_bias, ref.template = dropout, use_bias, _tree(ref)
    ref.initial = {key: value.clone() for key, value in ref.state_dict().items()}
    with torch.no_grad():
        g = torch.Generator().manual_seed(2)
        for ln in (ref.addnorm1.ln, ref.addnorm2.ln):
            ln.weight.copy_(0.5 + torch.rand(ln.weight.shape, generator=g))
            ln.bias.copy_(torch.rand(ln.bias.shape, generator=g) - 0.5)
    return _learner_block(cls, ref), ref


def _learner_block(cls, ref):
    case = _args(ref, "PreNormEncoderBlock")
    kwargs = {"use_bias": True} if ref.use_bias else {}
    with seeded(0):
        block = call(cls, 16, 32, 4, ref.dropout_arg, **kwargs, name="PreNormEncoderBlock",
                     case=case)
    for part in ("attention", "addnorm1", "ffn", "addnorm2"):
        if not hasattr(block, part):
            fail(f"your block has no `{part}`.",
                 "subclass TransformerEncoderBlock and override only forward, so the block "
                 "keeps its attention, addnorm1.ln, ffn and addnorm2.ln.")
    _expect_tree(block, ref)
    _load(block, ref)
    return block


_FORMULA = ("Y = X + dropout1(attention(LN1(X), LN1(X), LN1(X), valid_lens)), then "
            "Y + dropout2(ffn(LN2(Y))), with LN1 = self.addnorm1.ln, LN2 = self.addnorm2.ln, "
            "dropout1 = self.addnorm1.dropout, dropout2 = self.addnorm2.dropout.")
_NONE_HINT = ("valid_lens may be None (no padding: BERTModel passes None by default, and "
              "the chapter's post-LN block accepts it): hand it on to self.attention as it "
              "is, which handles None, without calling methods on it.")


_PER_QUERY_HINT = ("valid_lens may also have shape (batch, n), one length per query (the "
                   "chapter's causal_valid_lens gives such lengths, and self.attention "
                   "takes them): hand valid_lens on to self.attention as it is, whatever its "
                   "shape.")


def _error_hint(error, X, valid_lens):
    """The hint for a block that raises on an input the chapter's block takes."""
    if valid_lens is None:
        return _NONE_HINT
    if not X.is_contiguous():
        return view_hint(error, "X (here a transposed tensor, which a caller may pass)")
    if valid_lens.dim() == 2:
        return _PER_QUERY_HINT
    return None


def _modes(block):
    return {name: module.training for name, module in block.named_modules()}


def _run(block, ref, X, valid_lens, case, nan_hint=None):
    """Call the learner's block; its forward must leave every module's train/eval mode as
    the caller set it (a forward that calls self.eval() never drops anything), and every
    submodule as it was."""
    before = _modes(block)
    modules = {path: _submodule(block, path) for path in ref.template}
    out = call(block, X, valid_lens, name="your block", case=case,
               hint_on_error=lambda error: _error_hint(error, X, valid_lens))
    for path, module in modules.items():
        if _submodule(block, path) is not module:
            fail(f"on {case}, your block's forward changed its modules: self.{path} is "
                 f"no longer the {type(module).__name__} it had before the call (forward "
                 "assigned another module to it).", _FORWARD_KEEPS_HINT)
    after = _modes(block)
    changed = [name for name, mode in before.items() if after.get(name, mode) != mode]
    if changed:
        name, mode = changed[0], after[changed[0]]
        which = "the block" if name == "" else f"self.{name}"
        fail(f"on {case}, your block's forward switched {which} to "
             f"{'train' if mode else 'eval'} mode (block.training was {before['']} before "
             f"the call and is {after.get('', before[''])} after it): forward must leave "
             "the mode as the caller set it.",
             "model.train() and model.eval() belong to the caller (the training loop); "
             "nn.Dropout follows the mode by itself, so forward needs no self.eval() or "
             "self.train().")
    _expect_tree(block, ref, case)
    expect_tensor(out, X.shape, what="the block's output", case=case, nan_hint=nan_hint)
    return out


def _lengths_used(ref, X, out):
    """The valid lengths [a, b] (0..n each) that make the reference give `out`, or None."""
    n = X.shape[1]
    for a in range(n + 1):
        for b in range(n + 1):
            lens = torch.tensor([a, b])
            if is_close(out, ref(X, lens), atol=1e-4, rtol=1e-4):
                return [a, b]
    return None


def _expect_eval_output(block, ref, X, valid_lens, case, renew, diagnose=True):
    """Eval mode, no gradient: the output must be the reference's; if not, say why.
    renew() gives a new learner block with the same parameters (never called yet)."""
    with torch.no_grad():
        out = _run(block, ref, X, valid_lens, case)
        expected = ref(X, valid_lens)
        if is_close(out, expected, atol=1e-4, rtol=1e-4):
            return
        new = renew().eval()
        if is_close(_run(new, ref, X, valid_lens, case), expected, atol=1e-4, rtol=1e-4):
            fail(f"on {case}, your block's output is wrong, while a new block of your "
                 "class with the same parameters, called once on the same input, gives the "
                 "right one: your block keeps something from an earlier call (a cached "
                 "LN1(X), the last valid_lens, ...) and uses it again.",
                 "compute each call from its arguments X and valid_lens alone: keep no "
                 "results or lengths between calls (in self.__dict__, an attribute or a "
                 "global).")
        if valid_lens is None:
            _diagnose_none(ref, X, out, case)
        _diagnose_eps(ref, X, valid_lens, out, expected, case, tol=1e-5)
        if not diagnose:
            _expect_output(out, expected, case, 1e-4, _FORMULA)
        if valid_lens is not None and valid_lens.dim() == 2:
            _diagnose_per_query(ref, X, valid_lens, out, expected, case)
        given = valid_lens.tolist() if valid_lens is not None else None
        used = _lengths_used(ref, X, out) if valid_lens is not None else None
        if used is not None:  # right, apart from the lengths the attention was given
            probe_lens = torch.tensor([3, X.shape[1]])
            probe = _run(block, ref, X, probe_lens,
                         f"the same X with valid_lens {probe_lens.tolist()}")
            seen = _lengths_used(ref, X, probe)
            full = [X.shape[1]] * 2
            if 0 in given and all(u == (g or 1) for u, g in zip(used, given)):
                fail(f"on {case}, your block gives the example of length 0 the output of "
                     f"length 1 (it masks the keys as if valid_lens were {used}): an "
                     "example with no valid key attends its first key instead of none "
                     "(valid_lens.clamp(min=1), or max(length, 1)?).",
                     "pass valid_lens on to self.attention unchanged, zeros included: the "
                     "chapter's masked_softmax gives a row with no valid key zero weights "
                     "(so the attention adds only its output bias there), which the block "
                     "must keep.")
            if used == full and seen in (full, None):
                fail(f"on {case}, your block ignores valid_lens: padded keys get attention "
                     "(the output is the one without any lengths, also for valid_lens "
                     f"{probe_lens.tolist()}).", "pass valid_lens on to self.attention.")
            also = (f", and with valid_lens {probe_lens.tolist()} as if they were {seen}"
                    if seen is not None else "")
            fail(f"on {case}, your block masks the keys as if the lengths were {used}, not "
                 f"valid_lens {given}{also}: it passes other lengths to the attention.",
                 "pass valid_lens on to self.attention unchanged: one length per example; "
                 "MultiHeadAttention repeats them for the heads itself.")
        for mistake, what, hint in _mistakes(ref):
            if is_close(out, mistake(X, valid_lens), atol=1e-4, rtol=1e-4):
                fail(f"on {case}, {what}", hint)
        _diagnose_padded_only(X, valid_lens, out, expected, case)
        _expect_output(out, expected, case, 1e-4, _FORMULA + " Each residual adds its "
                       "sublayer's un-normalised input: X around the attention, Y around "
                       "the FFN.")


def _diagnose_none(ref, X, out, case):
    """valid_lens=None (no padding) replaced by lengths: zeros (no key at all) or others."""
    zeros = torch.zeros(X.shape[0], dtype=torch.long)
    if is_close(out, ref(X, zeros), atol=1e-4, rtol=1e-4):
        fail(f"on {case}, your block masks every key, as if valid_lens were all 0 (no "
             "valid key, so the attention adds nothing): valid_lens=None means no padding, "
             "every key is valid.", _NONE_HINT)
    used = _lengths_used(ref, X, out)
    if used is not None and used != [X.shape[1]] * X.shape[0]:
        fail(f"on {case}, your block masks the keys as if valid_lens were {used}: "
             "valid_lens=None means no padding, every key is valid.", _NONE_HINT)


def _diagnose_per_query(ref, X, valid_lens, out, expected, case):
    """A block given one length per query, shape (batch, n), that uses one length per
    example instead (a column, or the largest)."""
    for lens, which in ((valid_lens[:, 0], "the first query's"),
                        (valid_lens[:, -1], "the last query's"),
                        (valid_lens.amax(1), "the largest")):
        if is_close(out, ref(X, lens), atol=1e-4, rtol=1e-4):
            fail(f"on {case}, your block masks the keys with one length per example, "
                 f"{which} ({lens.tolist()}), not one per query.", _PER_QUERY_HINT)
    _expect_output(out, expected, case, 1e-4, _PER_QUERY_HINT + " " + _FORMULA)


def _diagnose_padded_only(X, valid_lens, out, expected, case):
    """An output wrong only at padded positions (at or beyond an example's valid length)."""
    if valid_lens is None or valid_lens.dim() != 1:
        return
    wrong = ~torch.isclose(out.double(), expected.double(), atol=1e-4, rtol=1e-4)
    padded = torch.arange(X.shape[1])[None, :] >= valid_lens[:, None]   # (batch, n)
    if not wrong.any() or (wrong & ~padded[..., None]).any():
        return
    where, want, got, diff = worst(out, expected)
    spans = ", ".join(f"example {i}: {int(n)} to {X.shape[1] - 1}"
                      for i, n in enumerate(valid_lens.tolist()) if n < X.shape[1])
    fail(f"on {case}, your block's output is wrong only at padded positions (positions at or "
         f"beyond valid_lens; {spans}): every entry at a valid position is right. At index "
         f"{where} expected {want:.4g}, got {got:.4g} (largest difference {diff:.3g}).",
         "valid_lens only tells the attention which keys to ignore (self.attention does "
         "that); the block computes every position alike, padded ones included, and later "
         "steps (the loss, the pooling) ignore the padded outputs.")



# eps values a hand-written LayerNorm may carry instead of the module's (1e-5 by default):
# TensorFlow's 1e-3, BERT's 1e-12, 1e-6 and others; 0 (no eps) has its own message.
_OTHER_EPS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-12)


def _with_eps(ref, X, valid_lens, eps):
    """The reference block with both LayerNorms given another eps (weight and bias kept)."""
    ln1, ln2 = ref.addnorm1.ln, ref.addnorm2.ln
    Z = F.layer_norm(X, ln1.normalized_shape, ln1.weight, ln1.bias, eps)
    Y = X + ref.addnorm1.dropout(ref.attention(Z, Z, Z, valid_lens))
    H = F.layer_norm(Y, ln2.normalized_shape, ln2.weight, ln2.bias, eps)
    return Y + ref.addnorm2.dropout(ref.ffn(H))


def _diagnose_eps(ref, X, valid_lens, out, expected, case, tol):
    """An output that is the reference's with LayerNorms of another eps (1e-3, 1e-6,
    1e-12, ...): name that eps. `tol` is the closeness asked of the match (1e-5 on float32,
    where an eps within a factor of 10 of the module's hides in rounding; 1e-10 on
    float64, where every one shows)."""
    ln1 = ref.addnorm1.ln
    for eps in _OTHER_EPS:
        if eps == ln1.eps:
            continue
        with torch.no_grad():
            other = _with_eps(ref, X, valid_lens, eps)
        if is_close(out, other, atol=tol, rtol=tol) and \
                not is_close(other, expected, atol=tol, rtol=tol):
            where, want, got, diff = worst(out, expected)
            shown_want, shown_got = _shown(want, got)
            fail(f"on {case}, your block's output is off by a little: at index {where} "
                 f"expected {shown_want}, got {shown_got} (largest difference {diff:.3g}). "
                 "It is what the right formula gives with LayerNorms whose eps is "
                 f"{eps:g}; "
                 f"the block's LayerNorms have eps = {ln1.eps:g} (self.addnorm1.ln.eps, "
                 "self.addnorm2.ln.eps).",
                 "use the block's modules, self.addnorm1.ln and self.addnorm2.ln, or pass "
                 "their eps on: F.layer_norm(X, ln.normalized_shape, ln.weight, ln.bias, "
                 "ln.eps); do not write a constant of your own.")


def _expect_output(out, expected, case, atol, hint):
    """expect_close on the block's output, printing as many digits as tell the expected and
    the seen value apart, and saying so when the difference is small against the output."""
    if not is_close(out, expected, atol=atol, rtol=1e-4):
        where, want, got, diff = worst(out, expected)
        shown_want, shown_got = _shown(want, got)
        scale = expected.detach().abs().max().item()
        small = diff < 1e-3 * max(scale, 1.0)
        fail(f"the block's output is wrong on {case}: at index {where} expected "
             f"{shown_want}, got {shown_got} (largest difference {diff:.3g}"
             + (f", small against outputs up to {scale:.3g}" if small else "") + ").",
             hint + (" A difference this small often means the formula is right and a "
                     "constant differs: a LayerNorm of your own with another eps (use "
                     "self.addnorm1.ln and self.addnorm2.ln, or their eps), or a step "
                     "computed in another precision." if small else ""))
    expect_close(out, expected, what="the block's output", case=case, atol=atol, hint=hint)

@checker("PreNormEncoderBlock", random=True)  # initialisation, dropout
def check_pre_norm_block(cls):
    """Check `cls(num_hiddens, ffn_num_hiddens, num_heads, dropout)`: a
    TransformerEncoderBlock whose forward is pre-LayerNorm, X + Dropout(Sublayer(LN(X))),
    for both sublayers. The expected values come from the checker's own block (a fresh
    TransformerEncoderBlock with the pre-LN forward), whose parameters are loaded into the
    learner's; the learner's block must have the same submodules (types, settings such as
    Dropout.p and LayerNorm.eps, none shared), before and after every call. Checked: eval
    mode (valid_lens [6, 3], [3, 6], None, [6, 0] (an example with no valid key), and a
    second X: nothing kept between calls), its gradients (a wrong one is traced to a
    detached residual, LayerNorm output or statistics, or keys/values where it is one of
    those; also with an X that does not require grad, where the parameters' gradients must
    be the reference's), every submodule the block runs called as a module (so that its
    forward hooks fire, not through .forward(...)), a non-contiguous X, valid_lens of shape
    (batch, n) (one length per query, as causal_valid_lens gives), float32 rows with a
    large mean and a small spread (a variance taken as E[x^2] - E[x]^2 is named), a float64
    block on
    float64 X (a LayerNorm without eps, or float32 arithmetic, is named), a block built with
    use_bias=True (the attention's projection biases must be applied), eval mode with
    dropout 0.5 (no dropout then),
    and train mode with dropout 0.5 and 0.2 (same random seed as the reference, so the
    dropout masks must fall where the reference's do). Forward must leave the block's
    train/eval mode as it was."""
    block, ref = _blocks(cls, 0.0)
    block.eval(), ref.eval()

    def renew():
        return _learner_block(cls, ref)
    g = torch.Generator().manual_seed(1)
    X = 3 + 2 * torch.randn(2, 6, 16, generator=g)  # far from mean 0, std 1
    valid_lens = torch.tensor([6, 3])
    case = "X of shape (2, 6, 16) with valid_lens [6, 3]"
    _expect_eval_output(block, ref, X, valid_lens, case, renew)
    _expect_eval_output(block, ref, X, torch.tensor([3, 6]),
                        "X of shape (2, 6, 16) with valid_lens [3, 6]", renew)
    _expect_eval_output(block, ref, X, None, "X of shape (2, 6, 16) with valid_lens=None",
                        renew, diagnose=False)
    # an example of length 0 (no valid key): the masked softmax gives it zero weights
    _expect_eval_output(block, ref, X, torch.tensor([6, 0]), "X of shape (2, 6, 16) with "
                        "valid_lens [6, 0] (the second example has no valid key: the "
                        "chapter's masked_softmax gives it zero attention weights)", renew)
    # new values of the same shape: a block that keeps LN1(X) or lengths between calls
    X2 = 3 + 2 * torch.randn(2, 6, 16, generator=g)
    _expect_eval_output(block, ref, X2, valid_lens, "a second X of shape (2, 6, 16) (new "
                        "values) with valid_lens [6, 3]", renew)
    # the reference runs on the learner's tensors, by the names of a fresh block
    params = {name: block.get_parameter(name) for name, _ in ref.named_parameters()}
    gradient_case = case + " (gradients with respect to X and the block's parameters)"
    try:
        expect_gradients(lambda x: block(x, valid_lens),
                         lambda x: torch.func.functional_call(ref, params, (x, valid_lens)),
                         [("X", X)], params=list(params.items()),
                         reference_dtype=None, name="your block", case=gradient_case,
                         wrong_hint=_GRADIENT_HINT)
    except CheckFailed as failure:
        if "is wrong on" in str(failure):  # finite gradients, other values: say which
            _diagnose_gradients(block, ref, X, valid_lens, gradient_case, str(failure))
        raise
    _expect_tree(block, ref, case + " (with gradients)")
    _expect_parameter_gradients(block, ref, X, valid_lens)
    _expect_hooks_fire(block, ref, X, valid_lens)
    # inputs the chapter's block takes too: a non-contiguous X (a transposed tensor), and
    # one length per query, shape (batch, n), as causal_valid_lens gives
    X_t = X.transpose(0, 1).contiguous().transpose(0, 1)       # the same values
    _expect_eval_output(block, ref, X_t, valid_lens, "a non-contiguous X of shape (2, 6, 16) "
                        "(X.transpose(0, 1) of a (6, 2, 16) tensor) with valid_lens [6, 3]",
                        renew)
    per_query = torch.minimum(torch.arange(1, 7), torch.tensor([[6], [3]]))   # (2, 6)
    _expect_eval_output(block, ref, X, per_query, "X of shape (2, 6, 16) with valid_lens of "
                        f"shape (2, 6), one length per query: {per_query.tolist()}", renew)

    _expect_large_mean(block, ref, valid_lens)
    _expect_float64(cls, X, valid_lens)
    _expect_with_biases(cls, X, valid_lens)

    p = 0.5
    block, ref = _blocks(cls, p)
    block.eval(), ref.eval()
    case = f"X of shape (2, 6, 16) with valid_lens [6, 3], dropout {p}, eval mode"
    with torch.no_grad():
        first = _run(block, ref, X, valid_lens, case)
        second = _run(block, ref, X, valid_lens, case + ", called again")
        expected = ref(X, valid_lens)
    if not torch.equal(first, second) or \
            not is_close(first, expected, atol=1e-4, rtol=1e-4):
        random = "changes from call to call" if not torch.equal(first, second) else \
            "differs from the block's output without dropout"
        fail(f"on {case}, your block's output {random}: dropout must be off in eval mode.",
             "use the block's nn.Dropout modules, self.addnorm1.dropout and "
             "self.addnorm2.dropout, which follow block.train() and block.eval(); "
             "F.dropout(x, p) is always on unless you pass training=self.training.")
    _expect_train_mode(block, ref, X, valid_lens)
    # a second rate: at 0.5 a rate read as the share kept (1 - p) gives the same masks
    _expect_train_mode(*_blocks(cls, 0.2), X, valid_lens)
    return None


def _expect_parameter_gradients(block, ref, X, valid_lens):
    """X that does not require grad (data, as in training; exercise 7.4 feeds a plain
    random X): the block's parameters must still get the reference's gradients (added after
    red-team round 14: a forward that builds its graph only when X requires grad)."""
    case = ("X of shape (2, 6, 16) with valid_lens [6, 3], X not requiring grad (only the "
            "block's parameters do, as in training on data)")
    hint = ("compute forward the same way whatever X is: the parameters need their gradients "
            "also when X does not require grad (no torch.no_grad() or set_grad_enabled tied "
            "to X.requires_grad).")
    names = [name for name, _ in ref.named_parameters()]
    mine = [block.get_parameter(name) for name in names]
    theirs = [ref.get_parameter(name) for name in names]
    with torch.no_grad():
        weight = cotangents([ref(X, valid_lens)], seed=1)[0]
    x = X.detach().clone()
    out = _run(block, ref, x, valid_lens, case)
    if not out.requires_grad:
        fail(f"on {case}, your block's output does not require grad, although the block's "
             "parameters do: loss.backward() would give them no gradient (it fails with "
             "'element 0 of tensors does not require grad').", hint)
    got = torch.autograd.grad((out.double() * weight).sum(), mine, allow_unused=True)
    want = torch.autograd.grad((ref(x, valid_lens).double() * weight).sum(), theirs,
                               allow_unused=True)
    for name, a, b, t in zip(names, got, want, theirs):
        a = torch.zeros_like(t) if a is None else a
        b = torch.zeros_like(t) if b is None else b
        expect_close(a, b, what=f"the gradient of self.{name}", case=case, atol=1e-4,
                     rtol=1e-3, hint=hint)


def _expect_hooks_fire(block, ref, X, valid_lens):
    """Every submodule the block runs must be called as a module, so that its hooks fire
    (added after red-team round 14: self.ffn.forward(...) runs the FFN without the forward
    hooks that record activations block by block, as exercise 7.4 does). Each submodule's
    forward is counted both by a forward pre-hook (calls through the module) and by a
    wrapper of its forward (every run); the two counts must agree. A submodule the block does
    not use at all (F.layer_norm with self.addnorm1.ln's parameters) is not asked for."""
    case = "X of shape (2, 6, 16) with valid_lens [6, 3], with forward hooks registered " \
           "on the block's submodules"
    modules = [(name, module) for name, module in block.named_modules() if name]
    hooked = {name: 0 for name, _ in modules}
    ran = {name: 0 for name, _ in modules}
    handles, wrapped = [], []

    def count_hook(name):
        def hook(module, args):
            hooked[name] += 1
        return hook

    def count_run(name, forward):
        @functools.wraps(forward)
        def run(*args, **kwargs):
            ran[name] += 1
            return forward(*args, **kwargs)
        return run
    try:
        for name, module in modules:
            if "forward" in module.__dict__:
                continue  # a forward of its own on the instance: left as it is
            handles.append(module.register_forward_pre_hook(count_hook(name)))
            module.forward = count_run(name, module.forward)
            wrapped.append(module)
        with torch.no_grad():
            call(block, X, valid_lens, name="your block", case=case)
    finally:
        for handle in handles:
            handle.remove()
        for module in wrapped:
            module.__dict__.pop("forward", None)
    bypassed = [name for name, _ in modules if ran[name] > hooked[name]]
    if bypassed:
        shown = ", ".join(f"self.{name}" for name in bypassed[:4])
        fail(f"on {case}, your block runs {shown} without calling the module"
             f"{'s' if len(bypassed) > 1 else ''} (it calls their .forward(...) directly, "
             f"{ran[bypassed[0]]} run{'s' if ran[bypassed[0]] != 1 else ''} of "
             f"self.{bypassed[0]}.forward, {hooked[bypassed[0]]} through the module): the "
             "modules' hooks never fire, so forward hooks that record activations (as "
             "exercise 7.4 does, block by block) see nothing.",
             "call the modules themselves, self.attention(Z, Z, Z, valid_lens), "
             "self.addnorm1.ln(X), self.ffn(...), not their .forward method: "
             "nn.Module.__call__ runs the hooks around forward.")


_GRADIENT_HINT = ("the output is right, but part of forward is hidden from autograd (a "
                  ".detach(), .data, torch.no_grad() or a value rebuilt from numbers) or "
                  "differentiated differently: the gradient must flow through every path, "
                  "the residuals, the LayerNorms (their mean and variance too), and the "
                  "queries, keys and values.")


def _gradients(fn, X, weight, wrt):
    """The gradients of sum(fn(X) * weight) with respect to X and `wrt` (zeros for none)."""
    x = X.detach().clone().requires_grad_(True)
    loss = (fn(x).double() * weight).sum()
    grads = torch.autograd.grad(loss, [x] + wrt, allow_unused=True)
    return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, [x] + wrt)]


def _gradient_mistakes(ref):
    """Forwards with the right values and a part hidden from autograd, each with what."""
    ln1, ln2, att, ffn = ref.addnorm1.ln, ref.addnorm2.ln, ref.attention, ref.ffn

    def stats_detached(ln):
        def norm(Y):
            with torch.no_grad():
                mean = Y.mean(-1, keepdim=True)
                var = Y.var(-1, keepdim=True, unbiased=False)
            return (Y - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias
        return norm

    def cut(X, lens, res1=False, res2=False, z1=False, z2=False, stats1=False, stats2=False,
            q=False, kv=False):
        Z = (stats_detached(ln1) if stats1 else ln1)(X)
        Z = Z.detach() if z1 else Z
        Q, K = (Z.detach() if q else Z), (Z.detach() if kv else Z)
        Y = (X.detach() if res1 else X) + att(Q, K, K, lens)
        Z2 = (stats_detached(ln2) if stats2 else ln2)(Y)
        return (Y.detach() if res2 else Y) + ffn(Z2.detach() if z2 else Z2)
    stats = ("your LayerNorm's mean and variance get no gradient (computed under "
             "torch.no_grad() or detached), {}: the normalised values are right, but the "
             "gradient through the statistics is missing.")
    stats_hint = ("use the block's modules, self.addnorm1.ln and self.addnorm2.ln; a "
                  "LayerNorm of your own must keep its mean and variance in the graph.")
    residual_hint = ("add the block's input itself: Y = X + dropout1(...), then "
                     "Y + dropout2(...), with no .detach() or .data on the residual.")
    normed_hint = ("pass the LayerNorm's output itself on to the sublayer: its gradient "
                   "trains the LayerNorm's weight and bias and reaches X.")
    return [(functools.partial(cut, **cuts), what, hint) for cuts, what, hint in [
        (dict(res1=True), "the residual around the attention adds a detached X (X.detach() "
         "or X.data): no gradient flows along the residual path to X.", residual_hint),
        (dict(res2=True), "the residual around the FFN adds a detached Y (Y.detach() or "
         "Y.data): no gradient flows along that residual path.", residual_hint),
        (dict(res1=True, res2=True), "both residuals add detached inputs (X.detach(), "
         "Y.detach()): no gradient flows along the residual paths.", residual_hint),
        (dict(z1=True, z2=True), "the outputs of both LayerNorms are detached before their "
         "sublayers: the LayerNorms' weights and biases get no gradient, and X gets it only "
         "through the residuals.", normed_hint),
        (dict(z1=True), "the output of self.addnorm1.ln is detached before the attention: "
         "its weight and bias get no gradient.", normed_hint),
        (dict(z2=True), "the output of self.addnorm2.ln is detached before the FFN: its "
         "weight and bias get no gradient.", normed_hint),
        (dict(stats1=True, stats2=True), stats.format("in both LayerNorms"), stats_hint),
        (dict(stats1=True), stats.format("in the LayerNorm before the attention"),
         stats_hint),
        (dict(stats2=True), stats.format("in the LayerNorm before the FFN"), stats_hint),
        (dict(kv=True), "the keys and values are detached (attention(Z, Z.detach(), "
         "Z.detach(), ...)): only the queries pass a gradient back to LN1(X) and X.",
         "pass Z = LN1(X) itself as queries, keys and values: the gradient flows back "
         "through all three."),
        (dict(q=True), "the queries are detached (attention(Z.detach(), Z, Z, ...)): only "
         "the keys and values pass a gradient back to LN1(X) and X.",
         "pass Z = LN1(X) itself as queries, keys and values: the gradient flows back "
         "through all three."),
    ]]


def _diagnose_gradients(block, ref, X, valid_lens, case, message):
    """Right values, wrong gradients: name the path hidden from autograd if one of the
    usual ones matches, else say which gradients are wrong and which are right."""
    names = [name for name, _ in ref.named_parameters()]
    mine = [block.get_parameter(name) for name in names]
    theirs = [ref.get_parameter(name) for name in names]
    with torch.no_grad():
        weight = cotangents([ref(X, valid_lens)], seed=1)[0]
    got = _gradients(lambda x: call(block, x, valid_lens, name="your block", case=case),
                     X, weight, mine)

    def same(grads):
        return all(is_close(a, b, atol=1e-4, rtol=1e-3) for a, b in zip(got, grads))
    for mistake, what, hint in _gradient_mistakes(ref):
        if same(_gradients(lambda x: mistake(x, valid_lens), X, weight, theirs)):
            fail(f"the gradients of your block are wrong on {case}, though its output is "
                 f"right: {what}", hint)
    right = _gradients(lambda x: ref(x, valid_lens), X, weight, theirs)
    groups = {}
    for label, a, b in zip(["X"] + names, got, right):
        group = "X" if label == "X" else "self." + label.rsplit(".", 1)[0]
        groups.setdefault(group, []).append(is_close(a, b, atol=1e-4, rtol=1e-3))
    wrong = [group for group, oks in groups.items() if not all(oks)]
    fine = [group for group, oks in groups.items() if all(oks)]
    text, hint = message.split("\nHint: ", 1) if "\nHint: " in message else (message, None)
    fail(text + f" Wrong: the gradients with respect to {', '.join(wrong)}"
         + (f"; right: those of {', '.join(fine)}." if fine else "."), hint)


LARGE_MEAN = 1000.0


def _expect_large_mean(block, ref, valid_lens):
    """float32 rows with a large mean and a small spread (1000 + 0.1 randn): the variance
    0.01 must survive. E[x^2] - E[x]^2 subtracts two numbers near 10^6, whose float32
    spacing is 0.06: the variance comes out negative (NaN) or far off. A LayerNorm shifts
    with its input, so the block's output on X - 1000 is the output on X minus 1000: a block
    right there and wrong here loses the variance to rounding. Tolerance 1e-2 (absolute, on
    outputs near 1000): float32 LayerNorms computed another right way (two passes, Welford,
    float64 and back) differ from nn.LayerNorm by at most 5e-4 here (measured), since the
    mean itself carries float32 rounding of about 6e-5 against a spread of 0.1."""
    g = torch.Generator().manual_seed(3)
    X = LARGE_MEAN + 0.1 * torch.randn(2, 6, 16, generator=g)
    case = ("X of shape (2, 6, 16), float32, with a large mean and a small spread (1000 + "
            "0.1 x randn: every row has mean about 1000 and standard deviation 0.1), "
            "valid_lens [6, 3]")
    why = ("your LayerNorm loses the small variance to float32 rounding: a variance "
           "computed as E[x^2] - E[x]^2 subtracts two numbers near 10^6 that agree in "
           "every float32 digit, and comes out negative (NaN) or far off.")
    fix = ("compute the variance from the centred values, ((x - mean) ** 2).mean(-1), as "
           "nn.LayerNorm does, or use the block's own self.addnorm1.ln and "
           "self.addnorm2.ln.")
    with torch.no_grad():
        out = _run(block, ref, X, valid_lens, case, nan_hint="a LayerNorm that loses "
                   "the small variance to float32 rounding gives NaN here: a variance "
                   "computed as E[x^2] - E[x]^2 subtracts two numbers near 10^6 that agree "
                   "in every float32 digit, and comes out negative. "
                   + fix[0].upper() + fix[1:])
        expected = ref(X, valid_lens)
        if is_close(out, expected, atol=1e-2, rtol=0.0):
            return
        shifted = _run(block, ref, X - LARGE_MEAN, valid_lens, "the same X minus 1000")
        right_there = is_close(shifted, ref(X - LARGE_MEAN, valid_lens), atol=1e-4,
                               rtol=1e-4)
    if right_there:
        where, want, got, diff = worst(out, expected)
        fail(f"on {case}, your block's output is wrong: at index {where} expected "
             f"{want:.6g}, got {got:.6g} (largest difference {diff:.3g}), while on the "
             "same X minus 1000 it is right (a LayerNorm ignores a constant shift, so the "
             f"output just moves by 1000): {why}", fix)
    expect_close(out, expected, what="the block's output", case=case, atol=1e-2, rtol=0.0,
                 hint=_FORMULA)


def _expect_float64(cls, X, valid_lens):
    """A float64 block (block.double()) on float64 X must compute in float64."""
    block, ref = _blocks(cls, 0.0)
    block.double().eval(), ref.double().eval()
    X = X.double()
    case = ("X of dtype float64, shape (2, 6, 16), valid_lens [6, 3], block.double(), "
            "eval mode")
    hint = ("compute in X's dtype: no .float() or dtype=torch.float32 in forward; the "
            "block's modules (block.double() converts them) already match X.")
    with torch.no_grad():
        out = call(block, X, valid_lens, name="your block", case=case,
                   hint_on_error=lambda error: hint)
        expect_tensor(out, X.shape, what="the block's output", case=case)
        if out.dtype != X.dtype:
            fail(f"on {case}, the block's output has dtype {out.dtype}: it must keep X's "
                 "dtype, float64.", hint)
        expected = ref(X, valid_lens)
        if is_close(out, expected, atol=1e-8, rtol=1e-8):
            return
        _diagnose_float64(ref, X, valid_lens, out, expected, case, hint)
        expect_close(out, expected, what="the block's output", case=case,
                     atol=1e-8, rtol=1e-8, hint=_FORMULA)


def _expect_with_biases(cls, X, valid_lens):
    """A block built with use_bias=True (as BERTModel builds its blocks): the attention's
    four projections have biases, which the block must apply (through self.attention)."""
    block, ref = _blocks(cls, 0.0, use_bias=True)
    block.eval(), ref.eval()
    _expect_eval_output(block, ref, X, valid_lens, "X of shape (2, 6, 16) with valid_lens "
                        f"[6, 3], a block built as {_args(ref, 'PreNormEncoderBlock')} (the "
                        "attention's projections have biases)",
                        lambda: _learner_block(cls, ref))


def _own_norm(ln, eps_on_std=False, eps=True):
    """A hand-written LayerNorm with the module's weight and bias; eps under the square root
    (as nn.LayerNorm), added to the standard deviation, or left out."""
    def norm(Y):
        centred = Y - Y.mean(-1, keepdim=True)
        var = Y.var(-1, keepdim=True, unbiased=False)
        if eps_on_std:
            scale = var.sqrt() + ln.eps
        else:
            scale = (var + ln.eps).sqrt() if eps else var.sqrt()
        return centred / scale * ln.weight + ln.bias
    return norm


def _diagnose_float64(ref, X, valid_lens, out, expected, case, hint):
    """A float64 output that is close but not float64-close: a LayerNorm without its eps (or
    with eps on the standard deviation), or float32 arithmetic somewhere in forward."""
    ln1, ln2 = ref.addnorm1.ln, ref.addnorm2.ln

    def pre_norm(n1, n2):
        Z = n1(X)
        Y = X + ref.attention(Z, Z, Z, valid_lens)
        return Y + ref.ffn(n2(Y))
    for kwargs, what in (({"eps": False}, "leaves out eps: it divides by sqrt(var), not "
                                          "sqrt(var + eps)"),
                         ({"eps_on_std": True}, "adds eps to the standard deviation, "
                                                "sqrt(var) + eps, not to the variance")):
        if is_close(out, pre_norm(_own_norm(ln1, **kwargs), _own_norm(ln2, **kwargs)),
                    atol=1e-10, rtol=1e-10):
            diff = worst(out, expected)[3]
            fail(f"on {case}, your block's output is off by a tiny amount (largest "
                 f"difference {diff:.3g}): the formula is right, but its LayerNorm {what} "
                 f"(eps = {ln1.eps:g}). In float32 the difference hides in rounding; in "
                 "float64 it shows.",
                 "use the block's modules, self.addnorm1.ln and self.addnorm2.ln, which add "
                 "their eps to the variance under the square root.")
    _diagnose_eps(ref, X, valid_lens, out, expected, case, tol=1e-10)
    if not is_close(out, expected, atol=1e-4, rtol=1e-4):
        return  # a real difference: the formula's message
    where, want, got, diff = worst(out, expected)
    with torch.no_grad():
        single = copy.deepcopy(ref).float()(X.float(), valid_lens).double()
    rounding = (single - expected).abs().max().item()
    if diff <= 3 * rounding:
        why = (f"about what float32 arithmetic gives (the whole block in float32 differs by "
               f"up to {rounding:.2g}): part of your forward computes in float32.")
        fix = hint
    else:
        why = (f"more than float32 rounding (the whole block in float32 differs by up to "
               f"{rounding:.2g}) and far less than a wrong formula: a constant differs "
               "slightly (a LayerNorm of your own with another eps), or part of forward "
               "computes in float32.")
        fix = ("use the block's modules, self.addnorm1.ln and self.addnorm2.ln (their eps), "
               "and " + hint[0].lower() + hint[1:])
    fail(f"on {case}, your block's output is off by a tiny amount: at index {where} "
         f"expected {want:.12g}, got {got:.12g} (largest difference {diff:.3g}). The formula "
         f"is right; the difference is {why}", fix)


def _expect_train_mode(block, ref, X, valid_lens):
    """Train mode, with the same random seed as the reference: the dropout masks must fall
    where the reference's do (the block's own dropout modules, on the sublayer outputs)."""
    p = ref.dropout_arg
    block.train(), ref.train()
    case = f"X of shape (2, 6, 16) with valid_lens [6, 3], dropout {p}, train mode, the same " \
           "random seed as the reference"
    with torch.no_grad():
        with seeded(7):
            out = _run(block, ref, X, valid_lens, case)
        with seeded(7):
            expected = ref(X, valid_lens)
        if is_close(out, expected, atol=1e-4, rtol=1e-4):
            return
        for mistake, what in _dropout_mistakes(ref):
            with seeded(7):
                alternative = mistake(X, valid_lens)
            if is_close(out, alternative, atol=1e-4, rtol=1e-4):
                fail(f"on {case}, {what}", _FORMULA)
        own = _own_dropout(block, ref, X, valid_lens)
        expect_close(out, expected, what="the block's output", case=case, atol=1e-4,
                     hint=own or "in train mode the dropouts must sit on the sublayer "
                                 "outputs, with the block's own rate: " + _FORMULA)


def _own_dropout(block, ref, X, valid_lens):
    """A hint for a train-mode output that is wrong although the eval-mode one is right,
    from copies of both blocks whose FFN ends in zeros and whose attention runs in eval
    mode: the learner's output minus X is then the dropped attention output A. Its ratio
    to A is 0 or 1 (a dropout that does not rescale), or 0 or 1/(1 - p) (a dropout of the
    right kind with a mask of its own). None if neither, or if the copies fail."""
    try:
        mine, theirs = copy.deepcopy(block), copy.deepcopy(ref)
        with torch.no_grad():
            for model in (mine, theirs):
                last = [m for m in model.ffn.modules()
                        if isinstance(m, torch.nn.Linear)][-1]
                last.weight.zero_()
                if last.bias is not None:
                    last.bias.zero_()
            attention = theirs.eval()(X, valid_lens) - X
            mine.train()
            mine.attention.eval()
            dropped = mine(X, valid_lens) - X
    except Exception:  # a diagnosis only
        return None
    if not (isinstance(dropped, torch.Tensor) and dropped.shape == attention.shape):
        return None
    big = attention.abs() > 1e-3
    ratio = (dropped[big] / attention[big]).double()
    p = ref.addnorm1.dropout.p
    zero, one, scaled = ((ratio - r).abs() < 1e-3 for r in (0.0, 1.0, 1 / (1 - p)))
    if not (zero.any() and (one | scaled).any() and (zero | one | scaled).all()):
        return None
    if one.any() and not scaled.any():
        return (f"your dropout zeroes entries but does not scale the kept ones by "
                f"1 / (1 - p) = {1 / (1 - p):g}, so in train mode the sublayer outputs are "
                f"{1 - p:g} times their eval-mode size on average. Use the block's own "
                "dropouts, self.addnorm1.dropout and self.addnorm2.dropout (nn.Dropout "
                "rescales): " + _FORMULA)
    if scaled.any() and not one.any():
        return ("your dropout has the right rate and scale, but with the reference's seed "
                "it drops other entries than the reference: its mask is your own "
                "(torch.rand, torch.bernoulli), or drawn at another point of forward. The "
                "masks must come from the block's own dropouts, drawn where the reference "
                "draws them (the attention runs with its own dropout on, then "
                "self.addnorm1.dropout on its output, then self.addnorm2.dropout on the "
                "FFN's output), each called once: " + _FORMULA)
    return None
