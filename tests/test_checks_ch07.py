"""Chapter 7's checkers pass the reference solutions and reject known-wrong ones with useful
messages."""
import pytest
import torch

from book import checks
from book.transformer import TransformerEncoderBlock


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
}


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


class Crashes(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        return self.attention(X, valid_lens)


WRONG_BLOCKS = {
    "still post-LayerNorm": (PostNorm, "still post-LayerNorm"),
    "normalises the sublayer output": (NormAfterSublayer, "wrong"),
    "no residual connection": (NoResidual, "wrong"),
    "ignores the padding": (IgnoresPadding, "ignores valid_lens"),
    "adds the normalised input": (ResidualOfTheNorm, "un-normalised X"),
    "one LayerNorm for both sublayers": (SharedNorm, "wrong"),
    "none of the block's submodules": (Fresh, "subclass TransformerEncoderBlock"),
    "crashes": (Crashes, "TypeError"),
    "not a class": (None, "None"),
}


def test_check_pre_norm_block_accepts_the_reference():
    assert "passed" in checks.check_pre_norm_block(PreNorm)


@pytest.mark.parametrize("name", WRONG_BLOCKS)
def test_check_pre_norm_block_rejects_wrong_blocks(name):
    cls, message = WRONG_BLOCKS[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_pre_norm_block(cls)
