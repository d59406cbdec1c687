"""Checkers for chapter 7's exercises: the causal mask and a pre-LayerNorm encoder block."""
import torch

import torch.nn.functional as F

from ..transformer import TransformerEncoderBlock
from ._core import call, checker, expect_close, expect_gradients, expect_tensor, fail, \
    is_close, seeded


def _reference_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


@checker("causal_mask")
def check_causal_mask(fn):
    """Check `fn(num_steps)`: a (num_steps, num_steps) bool mask, True where query i may
    attend key j, that is j <= i (scaled_dot_product_attention's convention), for lengths
    from 1 to 4097 (past 64, 127, 2048 and 4096, where cached masks or tables, int8 or
    float16 positions break), and the first length once more at the end (a cached mask must
    not change between calls)."""
    seen = set()
    for n in (4, 1, 2, 7, 50, 65, 130, 300, 2050, 4097, 4):
        again = n in seen
        case = f"num_steps={n}" + (" (asked a second time)" if again else "")
        seen.add(n)
        mask = call(fn, n, name="causal_mask", case=case)
        if isinstance(mask, torch.Tensor) and tuple(mask.shape) != (n, n) and \
                mask.dim() == 3 and tuple(mask.shape[1:]) == (n, n):
            fail(f"the mask has shape {tuple(mask.shape)} on {case}; expected ({n}, {n}).",
                 "return the 2-D (num_steps, num_steps) mask; broadcasting adds batch axes "
                 "where it is used.")
        expect_tensor(mask, (n, n), what="the mask", case=case,
                      hint="a mask of a fixed size (cached, or sliced from a fixed table) is "
                           "too small for longer sequences: build it for num_steps."
                      if n > 64 else None)
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
                    "around after 127, float16 ones are not exact past 2048 (keep "
                    "torch.arange's int64), and a fixed window or table ends somewhere.")
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

    def branch(X, lens, n1=ln1, n2=ln2, keys=None, ffn_in=None, outer=None, final=None):
        Z = n1(X)
        K = Z if keys is None else keys(X)
        Y = X + d1(att(Z, K, K, lens))
        Y = Y if outer is None else outer[0](Y)
        out = Y + d2(ffn(n2(Y) if ffn_in is None else ffn_in(X, Y)))
        return out if final is None else final(out)
    return [
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
    ]


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
    return [(keep_prob, f"the dropouts drop a share 1 - {d1.p:g} = {1 - d1.p:g} of the "
                        f"entries, not the block's rate {d1.p:g}: the rate is the share "
                        "dropped, not the share kept."),
            (no_dropout, "no dropout is applied to the sublayer outputs."),
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
    args = f"TransformerEncoderBlock(16, 32, 4, {ref.dropout_arg})"
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
    args = f"TransformerEncoderBlock(16, 32, 4, {ref.dropout_arg})"
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


def _blocks(cls, dropout):
    """(the learner's block, the checker's reference) with the same parameters: the
    reference is a fresh TransformerEncoderBlock with LayerNorm parameters made visible
    (they start as the identity affine map), loaded into the learner's block."""
    with seeded(0):
        ref = _PreNormReference(16, 32, 4, dropout)
    ref.dropout_arg, ref.template = dropout, _tree(ref)
    ref.initial = {key: value.clone() for key, value in ref.state_dict().items()}
    with torch.no_grad():
        g = torch.Generator().manual_seed(2)
        for ln in (ref.addnorm1.ln, ref.addnorm2.ln):
            ln.weight.copy_(0.5 + torch.rand(ln.weight.shape, generator=g))
            ln.bias.copy_(torch.rand(ln.bias.shape, generator=g) - 0.5)
    return _learner_block(cls, ref), ref


def _learner_block(cls, ref):
    case = f"PreNormEncoderBlock(16, 32, 4, {ref.dropout_arg})"
    with seeded(0):
        block = call(cls, 16, 32, 4, ref.dropout_arg, name="PreNormEncoderBlock", case=case)
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


def _modes(block):
    return {name: module.training for name, module in block.named_modules()}


def _run(block, ref, X, valid_lens, case):
    """Call the learner's block; its forward must leave every module's train/eval mode as
    the caller set it (a forward that calls self.eval() never drops anything), and every
    submodule as it was."""
    before = _modes(block)
    modules = {path: _submodule(block, path) for path in ref.template}
    out = call(block, X, valid_lens, name="your block", case=case,
               hint_on_error=(lambda error: _NONE_HINT) if valid_lens is None else None)
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
    expect_tensor(out, X.shape, what="the block's output", case=case)
    return out


def _lengths_used(ref, X, out):
    """The valid lengths [a, b] (1..n each) that make the reference give `out`, or None."""
    n = X.shape[1]
    for a in range(1, n + 1):
        for b in range(1, n + 1):
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
        if not diagnose:
            expect_close(out, expected, what="the block's output", case=case, atol=1e-4,
                         hint=_FORMULA)
        given = valid_lens.tolist() if valid_lens is not None else None
        used = _lengths_used(ref, X, out) if valid_lens is not None else None
        if used is not None:  # right, apart from the lengths the attention was given
            probe_lens = torch.tensor([3, X.shape[1]])
            probe = _run(block, ref, X, probe_lens,
                         f"the same X with valid_lens {probe_lens.tolist()}")
            seen = _lengths_used(ref, X, probe)
            full = [X.shape[1]] * 2
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
        expect_close(out, expected, what="the block's output", case=case, atol=1e-4,
                     hint=_FORMULA + " Each residual adds its sublayer's un-normalised "
                     "input: X around the attention, Y around the FFN.")


@checker("PreNormEncoderBlock")
def check_pre_norm_block(cls):
    """Check `cls(num_hiddens, ffn_num_hiddens, num_heads, dropout)`: a
    TransformerEncoderBlock whose forward is pre-LayerNorm, X + Dropout(Sublayer(LN(X))),
    for both sublayers. The expected values come from the checker's own block (a fresh
    TransformerEncoderBlock with the pre-LN forward), whose parameters are loaded into the
    learner's; the learner's block must have the same submodules (types, settings such as
    Dropout.p and LayerNorm.eps, none shared), before and after every call. Checked: eval
    mode (valid_lens [6, 3], [3, 6], None, and a second X: nothing kept between calls), its
    gradients, a float64 block on float64 X, eval mode with dropout 0.5 (no dropout then),
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
    # new values of the same shape: a block that keeps LN1(X) or lengths between calls
    X2 = 3 + 2 * torch.randn(2, 6, 16, generator=g)
    _expect_eval_output(block, ref, X2, valid_lens, "a second X of shape (2, 6, 16) (new "
                        "values) with valid_lens [6, 3]", renew)
    # the reference runs on the learner's tensors, by the names of a fresh block
    params = {name: block.get_parameter(name) for name, _ in ref.named_parameters()}
    expect_gradients(lambda x: block(x, valid_lens),
                     lambda x: torch.func.functional_call(ref, params, (x, valid_lens)),
                     [("X", X)], params=list(params.items()),
                     reference_dtype=None, name="your block",
                     case=case + " (gradients with respect to X and the block's parameters)",
                     wrong_hint="the output is right, but part of it is hidden from autograd "
                                "(e.g. X.detach() in the residual): the gradient must flow "
                                "through both the residual and the sublayer.")
    _expect_tree(block, ref, case + " (with gradients)")

    _expect_float64(cls, X, valid_lens)

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
        expect_close(out, ref(X, valid_lens), what="the block's output", case=case,
                     atol=1e-8, rtol=1e-8, hint=_FORMULA)


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
        expect_close(out, expected, what="the block's output", case=case, atol=1e-4,
                     hint="in train mode the dropouts must sit on the sublayer outputs, with "
                          "the block's own rate: " + _FORMULA)
