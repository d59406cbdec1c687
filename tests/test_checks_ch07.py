"""Chapter 7's checkers pass right solutions (also unusual ones) and reject wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch07.py), and kinds that round 1 missed."""
import pytest
import torch

from book import checks
from book.transformer import TransformerEncoderBlock
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects


def causal_mask(num_steps):
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool))


def stub(*args):
    raise NotImplementedError("write your solution here")


def additive(num_steps):
    return torch.triu(torch.full((num_steps, num_steps), float("-inf")), diagonal=1)


WRONG_MASKS = {
    "diagonal excluded": (lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), -1),
                          "itself"),
    "upper instead of lower": (lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)),
                               "in its future"),
    "off by one (sees the next key)": (
        lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), 1), "1 step"),
    "inverted convention (True = ignore)": (
        lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool), 1), "inverted"),
    "float 0/1 mask": (lambda n: torch.tril(torch.ones(n, n)), "dtype"),
    "additive 0/-inf mask": (additive, "dtype"),
    "no mask at all": (lambda n: torch.ones(n, n, dtype=torch.bool), "future"),
    "only the diagonal": (lambda n: torch.eye(n, dtype=torch.bool), "in its past"),
    "a batch axis added": (lambda n: causal_mask(n)[None], "shape"),
    "a list": (lambda n: causal_mask(n).tolist(), "torch.Tensor"),
    "forgets to return": (lambda n: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "a cached 256 x 256 mask": (lambda n: _CACHE_256[:n, :n], "too small for longer"),
    "strict comparison j < i written as the MHA mask": (
        lambda n: torch.arange(n)[:, None] < torch.arange(n)[None, :], "inverted"),
    "uint8 positions (wrap at 255)": (
        lambda n: torch.arange(n).to(torch.uint8)[None, :] <= torch.arange(n).to(
            torch.uint8)[:, None], "wrong for long ones"),
}

_CACHE_256 = torch.tril(torch.ones(256, 256, dtype=torch.bool))

R1_EXPECTED = {
    "upper triangle (j >= i)": "in its future",
    "strictly lower (no diagonal)": "itself",
    "float tril of ones": "expected torch.bool",
    "int8 positions (wrong for n > 128)": "int8 positions wrap around",
    "cached 64 x 64 mask": "too small for longer sequences",
    "48-step local window": "not a window of recent steps",
    "numpy bool array": "got a ndarray",
    "nn.MultiheadAttention convention (True = masked)": "the mask is inverted",
    "shape (1, n, n)": "return the 2-D (num_steps, num_steps) mask",
    "uint8 0/1": "expected torch.bool",
    "nested Python list": "got a list",
    "float16 positions (wrong past 2048)": "float16 ones are not exact past 2048",
    "transposed [j, i]": "in its future",
    "post-LN forward unchanged": "still post-LayerNorm",
    "LayerNorm inside and on the sum": "normalises the residual sums too",
    "residual from the normalised input": "the residual adds the normalised input",
    "no dropout": "no dropout is applied to the sublayer outputs",
    "dropout on the residual sum": "dropout is applied to the residual sum",
    "LayerNorms swapped (ln2 before attention)": "the two LayerNorms are swapped",
    "parameter-free layer_norm instead of the block's": "without the block's LayerNorm",
    "only the queries normalised": "only the queries are normalised",
    "valid_lens ignored": "ignores valid_lens",
    "FFN sees LN2(X) instead of LN2(Y)": "the FFN sees LN2(X)",
    "detached residual stream": "both residuals add detached inputs",
    "final LayerNorm inside the block": "ends with a LayerNorm of its output",
    "dropout on the sublayer input": "dropout is applied to the sublayer's input",
    "AddNorm modules called on pre-normed branch": "calling self.addnorm1(X, ...) does this",
    "own nn.Dropout(0.1)": "with the block's own rate",
}


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch07", "check_causal_mask",
                                                 expected=R1_EXPECTED))
def test_check_causal_mask_rejects_round1(fn, fragment):
    rejects(checks.check_causal_mask, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch07", "check_causal_mask",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_causal_mask_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_causal_mask, fn)


@pytest.mark.parametrize("cls, fragment", redteam("round1_ch07", "check_pre_norm_block",
                                                  expected=R1_EXPECTED))
def test_check_pre_norm_block_rejects_round1(cls, fragment):
    rejects(checks.check_pre_norm_block, cls, fragment)


@pytest.mark.parametrize("cls, fragment", redteam("round1_ch07", "check_pre_norm_block",
                                                  "RIGHT_BUT_UNUSUAL"))
def test_check_pre_norm_block_accepts_round1_right_solutions(cls, fragment):
    accepts(checks.check_pre_norm_block, cls)


def test_check_causal_mask_accepts_the_reference():
    assert "passed" in checks.check_causal_mask(causal_mask)


@pytest.mark.parametrize("name", WRONG_MASKS)
def test_check_causal_mask_rejects_wrong_masks(name):
    fn, message = WRONG_MASKS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_causal_mask(fn)


def test_causal_mask_messages_say_which_query_sees_which_key():
    with pytest.raises(AssertionError) as info:
        checks.check_causal_mask(lambda n: torch.tril(torch.ones(n, n, dtype=torch.bool), 1))
    text = str(info.value)
    assert "num_steps=4" in text and "query 0 may attend key 1" in text and "Hint:" in text


# -- pre-LayerNorm encoder block ---------------------------------------------------------------

class PreNorm(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        norm1, norm2 = self.addnorm1.ln, self.addnorm2.ln
        Y = X + self.addnorm1.dropout(self.attention(norm1(X), norm1(X), norm1(X), valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(norm2(Y)))


class PostNorm(TransformerEncoderBlock):
    pass


class NormAfterSublayer(TransformerEncoderBlock):  # X + LN(Sublayer(X))
    def forward(self, X, valid_lens):
        Y = X + self.addnorm1.ln(self.attention(X, X, X, valid_lens))
        return Y + self.addnorm2.ln(self.ffn(Y))


class NoResidual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        norm1, norm2 = self.addnorm1.ln, self.addnorm2.ln
        Y = self.attention(norm1(X), norm1(X), norm1(X), valid_lens)
        return Y + self.ffn(norm2(Y))


class IgnoresPadding(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        return PreNorm.forward(self, X, None)


class ResidualOfTheNorm(TransformerEncoderBlock):  # adds LN(X) instead of X
    def forward(self, X, valid_lens):
        norm1, norm2 = self.addnorm1.ln, self.addnorm2.ln
        Y = norm1(X) + self.attention(norm1(X), norm1(X), norm1(X), valid_lens)
        return norm2(Y) + self.ffn(norm2(Y))


class SharedNorm(TransformerEncoderBlock):  # one LayerNorm for both sublayers
    def forward(self, X, valid_lens):
        norm = self.addnorm1.ln
        Y = X + self.attention(norm(X), norm(X), norm(X), valid_lens)
        return Y + self.ffn(norm(Y))


class Fresh(torch.nn.Module):  # its own layers, without the block's submodules
    def __init__(self, *args):
        super().__init__()
        self.layer = torch.nn.Linear(16, 16)

    def forward(self, X, valid_lens):
        return self.layer(X)


class DropoutOnBothSides(TransformerEncoderBlock):
    """Drops the sublayer's input and its output."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class NoFFNResidual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class ScaledResidual(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = (X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))) / 2 ** 0.5
        return (Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))) / 2 ** 0.5


class SwappedDropouts(TransformerEncoderBlock):
    """Right: addnorm2.dropout on the attention, addnorm1.dropout on the FFN (same rate)."""
    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm2.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class TwoAttentionCalls(TransformerEncoderBlock):
    """Right: computes LN1(X) three times and calls attention once (same random draws)."""
    def forward(self, X, valid_lens):
        out = self.attention(self.addnorm1.ln(X), self.addnorm1.ln(X), self.addnorm1.ln(X),
                             valid_lens)
        Y = X + self.addnorm1.dropout(out)
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class Crashes(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        return self.attention(X, valid_lens)


WRONG_BLOCKS = {
    "still post-LayerNorm": (PostNorm, "still post-LayerNorm"),
    "normalises the sublayer output": (NormAfterSublayer, "wrong"),
    "no residual connection": (NoResidual, "has no residual"),
    "ignores the padding": (IgnoresPadding, "ignores valid_lens"),
    "adds the normalised input": (ResidualOfTheNorm, "un-normalised X"),
    "one LayerNorm for both sublayers": (SharedNorm,
                                         "the same LayerNorm, self.addnorm1.ln"),
    "none of the block's submodules": (Fresh, "subclass TransformerEncoderBlock"),
    "crashes": (Crashes, "TypeError"),
    "not a class": (None, "None"),
    # kinds round 1 missed
    "dropout on the sublayer's input and output": (DropoutOnBothSides, "in train mode"),
    "no residual around the FFN": (NoFFNResidual, "the FFN sublayer has no residual"),
    "residuals scaled by 1/sqrt(2)": (
        ScaledResidual, "Each residual adds its sublayer's un-normalised input"),
}


def test_check_pre_norm_block_accepts_the_reference():
    accepts(checks.check_pre_norm_block, PreNorm)
    accepts(checks.check_pre_norm_block, TwoAttentionCalls)
    accepts(checks.check_pre_norm_block, SwappedDropouts)


@pytest.mark.parametrize("name", WRONG_BLOCKS)
def test_check_pre_norm_block_rejects_wrong_blocks(name):
    cls, message = WRONG_BLOCKS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_pre_norm_block(cls)


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch07_mask", ("W_",)))
def test_check_causal_mask_rejects_round2(fn):
    rejects(checks.check_causal_mask, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch07_mask", ("C_", "O_", "Q_")))
def test_check_causal_mask_accepts_round2_right_solutions(fn):
    accepts(checks.check_causal_mask, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch07_prenorm", ("W_",)))
def test_check_pre_norm_block_rejects_round2(fn):
    rejects(checks.check_pre_norm_block, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch07_prenorm", ("C_", "O_", "Q_")))
def test_check_pre_norm_block_accepts_round2_right_solutions(fn):
    accepts(checks.check_pre_norm_block, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch07_*.py; tests/test_checks_redteam.py
# runs every entry): the messages name the fault --------------------------------------

R4_MASK = {
    "W_16_shared_cached_tensor_mutated": "changed what it returned earlier",
    "W_18_table_4096": "on num_steps=4097",
}
R4_PRENORM = {
    "W_06_ignores_valid_lens": "your block ignores valid_lens",
    "W_10_second_residual_from_X": "the FFN sublayer's residual adds X, the block's input",
    "W_12_functional_dropout_always_on":
        "changes from call to call: dropout must be off in eval mode",
    "W_18_eval_forces": "switched the block to eval mode",
    "W_23_train_flag_flipped": "dropout must be off in eval mode",
    "W_25_valid_lens_repeated_per_head":
        "as if the lengths were [6, 6], not valid_lens [6, 3], and with valid_lens [3, 6] "
        "as if they were [3, 3]",
    "W_28_breaks_on_valid_lens_none": "on X of shape (2, 6, 16) with valid_lens=None",
    "W_29_batch_first_example_lengths": "passes other lengths to the attention",
}


@pytest.mark.parametrize("name", R4_MASK)
def test_check_causal_mask_round4_messages(name):
    rejects(checks.check_causal_mask, redteam_entry("round4_ch07_causal_mask", name),
            R4_MASK[name])


def test_causal_mask_of_zero_steps_is_empty():
    """Round 7 (W14): num_steps=0 gives the empty (0, 0) mask, not a (1, 1) one."""
    assert checks.check_causal_mask(causal_mask)
    rejects(checks.check_causal_mask,
            redteam_entry("round7_ch07_causal_mask", "W_14_zero_steps_wrong"),
            "on num_steps=0; expected (0, 0)", "do not force at least one step")


@pytest.mark.parametrize("name", R4_PRENORM)
def test_check_pre_norm_block_round4_messages(name):
    text = rejects(checks.check_pre_norm_block,
                   redteam_entry("round4_ch07_pre_norm_block", name), R4_PRENORM[name])
    if name == "W_28_breaks_on_valid_lens_none":
        assert "valid_lens may be None" in text


def test_check_pre_norm_block_calls_the_block_without_lengths():
    class NoneBreaks(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            return PreNorm.forward(self, X, valid_lens.clone())

    rejects(checks.check_pre_norm_block, NoneBreaks, "valid_lens=None",
            "valid_lens may be None")


def test_check_pre_norm_block_leaves_the_mode_alone():
    """A forward that switches the mode is refused, also one that switches on dropout."""
    class TrainForces(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            self.train()
            return PreNorm.forward(self, X, valid_lens)

    rejects(checks.check_pre_norm_block, TrainForces, "switched the block to train mode")


# -- Round 5 red team (tests/checker_redteam/round5_ch07_pre_norm.py) ---------------------
R5_PRENORM = {
    "W_02_same_ln_twice": "the same LayerNorm, self.addnorm1.ln, is used before both",
    "W_15_ffn_first": "the sublayers are in the wrong order: the FFN comes first",
    "W_23_float32_cast": "X of dtype float64",
    "W_24_dropout_keep_prob": "dropout 0.2, train mode, the same random seed as the "
                              "reference, the dropouts drop a share 1 - 0.2 = 0.8 of the "
                              "entries",
}


@pytest.mark.parametrize("name", R5_PRENORM)
def test_check_pre_norm_block_round5_messages(name):
    text = rejects(checks.check_pre_norm_block,
                   redteam_entry("round5_ch07_pre_norm", name), R5_PRENORM[name])
    if name == "W_23_float32_cast":
        assert "compute in X's dtype" in text


def test_check_pre_norm_block_refuses_a_float32_output_of_a_float64_block():
    class Float32Out(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            return PreNorm.forward(self, X, valid_lens).float()

    rejects(checks.check_pre_norm_block, Float32Out, "has dtype torch.float32",
            "compute in X's dtype")


# -- Round 6 red team (tests/checker_redteam/round6_ch07_pre_norm.py): the expected values
# come from the checker's own TransformerEncoderBlock, and the learner's module tree must be
# a fresh block's, so changes made in __init__ or by forward are named ---------------------
R6_PRENORM = {
    "W_13_cached_ln_output": "keeps something from an earlier call",
    "W_16_shared_layernorm_module": "self.addnorm2.ln and self.addnorm1.ln of your block are "
                                    "one and the same LayerNorm",
    "W_17_remembers_last_valid_lens": "keeps something from an earlier call",
    "W_20_init_swaps_relu_for_gelu": "self.ffn.relu of your block is a GELU, where a "
                                     "TransformerEncoderBlock(16, 32, 4, 0.0) has a ReLU",
    "W_21_init_zero_dropout": "self.addnorm1.dropout.p of your block is 0.0, where a "
                              "TransformerEncoderBlock(16, 32, 4, 0.5) has 0.5",
    "W_22_init_eps_changed": "self.addnorm1.ln.eps of your block is 0.1",
    "W_23_init_ignores_dropout_arg": "every Dropout of your block has p = 0.1, though the "
                                     "block was built with dropout=0.0",
    "W_24_forward_sets_p_zero": "your block's forward changed its modules: "
                                "self.addnorm1.dropout.p was 0.5 before the call and is 0.0",
}


@pytest.mark.parametrize("name", R6_PRENORM)
def test_check_pre_norm_block_round6_messages(name):
    text = rejects(checks.check_pre_norm_block,
                   redteam_entry("round6_ch07_pre_norm", name), R6_PRENORM[name])
    if name.startswith(("W_16", "W_20", "W_21", "W_22", "W_23")):
        assert "the exercise changes only forward" in text
    if name == "W_13_cached_ln_output":
        assert "a second X of shape (2, 6, 16)" in text
        assert "autograd" not in text


class Aliases(TransformerEncoderBlock):
    """Right: __init__ adds aliases of the block's own modules (nothing new, nothing
    replaced), and forward loops over them."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.norms = torch.nn.ModuleList([self.addnorm1.ln, self.addnorm2.ln])

    def forward(self, X, valid_lens):
        Z = self.norms[0](X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.norms[1](Y)))


def test_check_pre_norm_block_accepts_aliases_of_its_own_modules():
    accepts(checks.check_pre_norm_block, Aliases)


def test_check_pre_norm_block_refuses_changes_outside_forward():
    class ExtraGain(TransformerEncoderBlock):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.gain = torch.nn.Parameter(torch.ones(()))

        def forward(self, X, valid_lens):
            return PreNorm.forward(self, X, valid_lens) * self.gain

    class OneAddNorm(TransformerEncoderBlock):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.addnorm2 = self.addnorm1

        def forward(self, X, valid_lens):
            return PreNorm.forward(self, X, valid_lens)

    class ReplacesFFN(TransformerEncoderBlock):
        """forward swaps in a new FFN module (right shapes, its own weights)."""
        def forward(self, X, valid_lens):
            self.ffn = type(self.ffn)(32, 16, num_inputs=16)
            return PreNorm.forward(self, X, valid_lens)

    class ZeroInitFFN(TransformerEncoderBlock):
        """__init__ zeroes the FFN's output layer (a residual branch that starts at 0)."""
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            torch.nn.init.zeros_(self.ffn.dense2.weight)

        def forward(self, X, valid_lens):
            return PreNorm.forward(self, X, valid_lens)

    rejects(checks.check_pre_norm_block, ZeroInitFFN, "its ffn.dense2.weight differs",
            "keep TransformerEncoderBlock's initialisation")
    rejects(checks.check_pre_norm_block, ExtraGain, "it has ['gain'] besides",
            "the exercise changes only forward")
    rejects(checks.check_pre_norm_block, OneAddNorm,
            "self.addnorm2 and self.addnorm1 of your block are one and the same AddNorm")
    rejects(checks.check_pre_norm_block, ReplacesFFN, "your block's forward changed its "
            "modules", "forward must not change the block's modules")


# -- Round 7 red team (tests/checker_redteam/round7_ch07_pre_norm.py): a non-contiguous X and
# one length per query are run; a wrong gradient, a tiny float64 difference and an output
# wrong only at padded positions are named ----------------------------------------------
R7_PRENORM = {
    "W_03_ln_output_detached": "the outputs of both LayerNorms are detached",
    "W_04_residual_detached": "the residual around the attention adds a detached X",
    "W_05_own_ln_stats_stopgrad": "your LayerNorm's mean and variance get no gradient",
    "W_06_own_ln_unbiased_var": "divides by the unbiased standard deviation",
    "W_07_own_ln_no_eps": "its LayerNorm leaves out eps",
    "W_16_valid_lens_ignored_when_2d": "valid_lens of shape (2, 6), one length per query",
    "W_18_padding_rows_zeroed": "wrong only at padded positions (positions at or beyond "
                                "valid_lens; example 1: 3 to 5)",
    "W_19_kv_detached": "the keys and values are detached",
    "W_20_layernorm_in_float32": "about what float32 arithmetic gives",
    "W_22_own_ln_with_view": "on a non-contiguous X of shape (2, 6, 16)",
}


@pytest.mark.parametrize("name", R7_PRENORM)
def test_check_pre_norm_block_round7_messages(name):
    text = rejects(checks.check_pre_norm_block,
                   redteam_entry("round7_ch07_pre_norm", name), R7_PRENORM[name])
    assert "X.detach() in the residual" not in text or name == "W_04_residual_detached"
    if name in ("W_07_own_ln_no_eps", "W_20_layernorm_in_float32"):
        assert "The formula is right" in text or "the formula is right" in text
        assert "Y = X + dropout1" not in text          # not the formula hint
    if name == "W_20_layernorm_in_float32":
        assert "expected 2.79335840088, got 2.79335830531" in text   # digits that differ
        assert "compute in X's dtype" in text
    if name == "W_16_valid_lens_ignored_when_2d":
        assert "the first query's ([1, 1])" in text and "causal_valid_lens" in text
    if name == "W_22_own_ln_with_view":
        assert "Use .reshape()" in text


def test_check_pre_norm_block_names_where_an_unusual_gradient_goes_wrong():
    class ValuesDetached(TransformerEncoderBlock):
        """Only the values are detached: no listed mistake; the message says which
        gradients are wrong and which are right."""
        def forward(self, X, valid_lens):
            Z = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z.detach(), valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))

    text = rejects(checks.check_pre_norm_block, ValuesDetached,
                   "Wrong: the gradients with respect to X, self.addnorm1.ln",
                   "right: those of self.attention.W_q", "hidden from autograd")
    assert "X.detach() in the residual" not in text


def test_check_pre_norm_block_names_eps_on_the_standard_deviation():
    class EpsOnStd(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            def norm(ln, Y):
                centred = Y - Y.mean(-1, keepdim=True)
                return centred / (Y.var(-1, keepdim=True, unbiased=False).sqrt() + ln.eps) \
                    * ln.weight + ln.bias
            Z = norm(self.addnorm1.ln, X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(norm(self.addnorm2.ln, Y)))

    rejects(checks.check_pre_norm_block, EpsOnStd, "adds eps to the standard deviation")


def test_check_pre_norm_block_accepts_per_query_lengths_and_strided_inputs():
    class ReshapeNorm(TransformerEncoderBlock):
        """Right: a LayerNorm on X.reshape(-1, d), and valid_lens of any shape passed on."""
        def forward(self, X, valid_lens):
            def norm(ln, Y):
                return ln(Y.reshape(-1, Y.shape[-1])).reshape(Y.shape)
            Z = norm(self.addnorm1.ln, X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(norm(self.addnorm2.ln, Y)))

    accepts(checks.check_pre_norm_block, ReshapeNorm)


# -- Round 8 red team (tests/checker_redteam/round8_ch07_prenorm.py, writer C) -------------


def test_check_pre_norm_block_round8_dropout_messages():
    from checker_redteam import round8_ch07_prenorm as r8

    block = checks.check_pre_norm_block
    rejects(block, r8.W_24_dropout_no_rescale, "train mode",
            "does not scale the kept ones by 1 / (1 - p) = 2", "self.addnorm1.dropout")
    # Against the wording (its own mask, right in distribution): named, not accepted.
    rejects(block, r8.S_05_own_dropout_mask, "train mode", "the right rate and scale",
            "its mask is your own", "self.addnorm1.dropout")


def test_check_causal_mask_hint_names_the_uint8_and_bfloat16_limits():
    def uint8_positions(num_steps):
        i = torch.arange(num_steps).to(torch.uint8)
        return i[None, :] <= i[:, None]

    rejects(checks.check_causal_mask, uint8_positions, "num_steps=300",
            "uint8 ones after 255", "bfloat16 ones past 256")


# -- Round 9 red team (tests/checker_redteam/round9_ch07_causal_mask.py, writer B) ----------

def test_check_causal_mask_round9_messages():
    """torch.manual_seed inside the function (the global generator's state changes) is
    refused; a sparse mask is told to be dense, not PyTorch's dispatcher error."""
    rejects(checks.check_causal_mask,
            redteam_entry("round9_ch07_causal_mask", "W_11_reseeds_global_rng"),
            "drew from torch's global random generator (or seeded it) on num_steps=4",
            "no torch.manual_seed")
    text = rejects(checks.check_causal_mask,
                   redteam_entry("round9_ch07_causal_mask", "W_19_sparse"),
                   "the mask is a sparse_coo tensor on num_steps=4", "dense", "to_sparse()")
    assert "stopped with" not in text and "SparseCPU" not in text


# -- Round 10 red team (tests/checker_redteam/round10_ch07_prenorm.py, writer C) -----------

def test_check_pre_norm_block_round10_large_mean_rows():
    """A LayerNorm whose variance is E[x^2] - E[x]^2 cancels on float32 rows of mean 1000
    and spread 0.1: NaN (W_21), or far off when clamped at 0; both are named. Two-pass and
    torch.var_mean LayerNorms of one's own pass."""
    def pre_norm(norm):
        class Block(TransformerEncoderBlock):
            def forward(self, X, valid_lens):
                Z = norm(self.addnorm1.ln, X)
                Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
                return Y + self.addnorm2.dropout(self.ffn(norm(self.addnorm2.ln, Y)))
        return Block

    def clamped(ln, X):
        mu = X.mean(-1, keepdim=True)
        var = ((X * X).mean(-1, keepdim=True) - mu * mu).clamp_min(0)
        return (X - mu) / (var + ln.eps).sqrt() * ln.weight + ln.bias

    def var_mean(ln, X):
        var, mu = torch.var_mean(X, -1, unbiased=False, keepdim=True)
        return (X - mu) * torch.rsqrt(var + ln.eps) * ln.weight + ln.bias

    def two_pass(ln, X):
        centred = X - X.mean(-1, keepdim=True)
        var = (centred * centred).mean(-1, keepdim=True)
        return centred / (var + ln.eps).sqrt() * ln.weight + ln.bias

    block = checks.check_pre_norm_block
    rejects(block, redteam_entry("round10_ch07_prenorm", "W_21_var_by_moments"),
            "contains NaN", "1000 + 0.1 x randn", "E[x^2] - E[x]^2",
            "from the centred values")
    rejects(block, pre_norm(clamped), "1000 + 0.1 x randn", "on the same X minus 1000 it "
            "is right", "loses the small variance to float32 rounding")
    accepts(block, pre_norm(var_mean))
    accepts(block, pre_norm(two_pass))


def test_check_pre_norm_block_round10_none_replaced_by_lengths():
    """valid_lens=None turned into zeros (every key masked, W_26) or into ones: named."""
    block = checks.check_pre_norm_block
    rejects(block, redteam_entry("round10_ch07_prenorm", "W_26_mask_lens_none_to_zero"),
            "valid_lens=None", "as if valid_lens were all 0",
            "None means no padding, every key is valid", "hand it on to self.attention")

    class NoneToOnes(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            if valid_lens is None:
                valid_lens = torch.ones(X.shape[0], dtype=torch.long)
            Z = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
    rejects(block, NoneToOnes, "valid_lens=None", "as if valid_lens were [1, 1]")


# -- Round 11 red team (tests/checker_redteam/round11_ch07_prenorm.py, writer C) -----------


def _eps_block(eps):
    """The pre-LN block with F.layer_norm given another eps (the module's weight and bias)."""
    import torch.nn.functional as F

    class OtherEps(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            l1, l2 = self.addnorm1.ln, self.addnorm2.ln
            Z = F.layer_norm(X, X.shape[-1:], l1.weight, l1.bias, eps)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            H = F.layer_norm(Y, Y.shape[-1:], l2.weight, l2.bias, eps)
            return Y + self.addnorm2.dropout(self.ffn(H))
    return OtherEps


def test_check_pre_norm_block_round11_names_another_eps():
    """W_19 (eps 1e-3) was told the formula with 'expected -1.591, got -1.591'; an eps the
    float32 cases see (1e-2, 1e-3) is named there, one they cannot (1e-6, 1e-12: within
    rounding) on the float64 block, with digits that differ."""
    block = checks.check_pre_norm_block
    text = rejects(block, redteam_entry("round11_ch07_prenorm", "W_19_ln_eps_default"),
                   "off by a little", "expected -1.5914, got -1.5912",
                   "LayerNorms whose eps is 0.001", "eps = 1e-05 (self.addnorm1.ln.eps",
                   "pass their eps on")
    assert "Each residual adds" not in text
    rejects(block, _eps_block(1e-2), "LayerNorms whose eps is 0.01")
    rejects(block, redteam_entry("round10_ch07_prenorm", "W_01_ln_eps_1e6"), "float64",
            "LayerNorms whose eps is 1e-06", "expected 2.561632, got 2.561631")
    rejects(block, _eps_block(1e-8), "float64", "LayerNorms whose eps is 1e-08")


def test_check_pre_norm_block_round11_prints_digits_that_differ():
    """A small difference that is not another eps: the generic message prints the two
    values with digits that tell them apart, and says the difference is small."""
    from book.checks import ch07

    assert ch07._shown(-1.59137, -1.59118) == ("-1.5914", "-1.5912")
    assert ch07._shown(2.5, 3.25) == ("2.5", "3.25")

    class Nudged(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            Z = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            out = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
            return out + 6e-4 * ((out > 2) & (out < 4)).to(out.dtype)
    text = rejects(checks.check_pre_norm_block, Nudged, "largest difference 0.0006",
                   "small against outputs up to", "a constant differs")
    got = text.split("expected ")[1].split(" (largest")[0]
    want, seen = got.split(", got ")
    assert want != seen, text


# -- Round 12 red team (tests/checker_redteam/round12_ch07_prenorm.py, writer C) -----------

R12_PRENORM = {  # train-mode dropout faults, each named (they were told "a mask of your own")
    "W_06_no_dropout_on_ffn": ("self.addnorm2.dropout is missing",),
    "W_08_dropout_before_ffn": ("self.addnorm2.dropout is applied to the FFN's input",),
    "W_17_attention_internal_dropout_off": ("the attention's own dropout",
                                            "is off in train mode"),
    "W_13_ffn_dropout_mask_from_attention": ("the FFN's dropout mask is drawn before the "
                                             "attention runs",),
    "W_22_dropout_shared_mask": ("one dropout mask, drawn before the attention runs, is used "
                                 "for both sublayers",),
    "W_15_dropout_only_in_train_when_lens_none": ("self.addnorm1.dropout is missing",),
}


@pytest.mark.parametrize("name", R12_PRENORM)
def test_check_pre_norm_block_round12_names_the_dropout_fault(name):
    text = rejects(checks.check_pre_norm_block, redteam_entry("round12_ch07_prenorm", name),
                   *R12_PRENORM[name])
    assert "torch.rand or torch.bernoulli" not in text


# -- Round 13 red team (tests/checker_redteam/round13_ch07_*.py, writer D) -----------------

def test_check_causal_mask_rejects_an_inference_tensor():
    """W_27: decorated with @torch.inference_mode(); sdpa or torch.where on scores that
    require grad then cannot save the mask for backward (caught by _core.call)."""
    rejects(checks.check_causal_mask,
            redteam_entry("round13_ch07_causal_mask", "W_27_inference_mode"),
            "inference tensor", "@torch.inference_mode()")


R13_PRENORM = {
    # valid_lens.clamp(min=1): the example of length 0 attends its first key
    "W_11_clamp_lens": ("valid_lens [6, 0]", "the example of length 0 the output of length 1",
                        "clamp(min=1)", "zeros included"),
    # F.linear(x, W.weight) in a hand-written attention: wrong on a block with use_bias=True
    "W_13_manual_mha_no_bias": ("use_bias=True", "leaves out the biases of its projections "
                                "W_q, W_k, W_v and W_o", "not its weight alone"),
    "W_26_inference_mode_forward": ("inference tensor",),
}


@pytest.mark.parametrize("name", R13_PRENORM)
def test_check_pre_norm_block_round13_names_the_fault(name):
    rejects(checks.check_pre_norm_block, redteam_entry("round13_ch07_pre_norm_block", name),
            *R13_PRENORM[name])


def test_check_pre_norm_block_names_a_missing_output_bias():
    """Only W_o's bias left out (a hand-written output projection): named as such."""
    class NoOutputBias(TransformerEncoderBlock):
        def forward(self, X, valid_lens):
            Z = self.addnorm1.ln(X)
            A = self.attention(Z, Z, Z, valid_lens)
            if self.attention.W_o.bias is not None:
                A = A - self.attention.W_o.bias
            Y = X + self.addnorm1.dropout(A)
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
    rejects(checks.check_pre_norm_block, NoOutputBias, "use_bias=True",
            "leaves out the biases of its output projection W_o")


# -- Round 14 red team (tests/checker_redteam/round14_ch07_*.py, writer D) -----------------

R14_PRENORM = {
    # the graph built only when X requires grad: with plain X the parameters get no gradient
    "W_26_grad_follows_X": ("X not requiring grad", "does not require grad",
                            "parameters need their gradients"),
    # self.ffn.forward(...) and the like: the submodules' forward hooks never fire
    "W_28_bypass_hooks": ("forward hooks registered", "self.attention", "self.ffn",
                          ".forward(...) directly", "not their .forward method"),
}


@pytest.mark.parametrize("name", R14_PRENORM)
def test_check_pre_norm_block_round14_names_the_fault(name):
    rejects(checks.check_pre_norm_block, redteam_entry("round14_ch07_pre_norm_block", name),
            *R14_PRENORM[name])


def test_check_pre_norm_block_leaves_no_hooks_behind():
    """The hook check removes its hooks and forward wrappers from the learner's block."""
    seen = []

    class Recording(TransformerEncoderBlock):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen.append(self)

        def forward(self, X, valid_lens):
            Z = self.addnorm1.ln(X)
            Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
            return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
    accepts(checks.check_pre_norm_block, Recording)
    for block in seen:
        for module in block.modules():
            assert not module._forward_pre_hooks and not module._forward_hooks
            assert "forward" not in module.__dict__
