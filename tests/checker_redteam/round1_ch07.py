"""Round 1 red team, chapter 7: check_causal_mask (7.1) and check_pre_norm_block (7.3).

Entries: (checker_name, short_description, kind, callable or class). From the exercise
text: causal_mask(num_steps) is a bool (n, n) tensor, True where key j <= query i.
PreNormEncoderBlock subclasses TransformerEncoderBlock, keeps its submodules, and only
changes forward: X + dropout1(attention(LN1(X))), then Y + dropout2(ffn(LN2(Y))), with
LN1 = self.addnorm1.ln, LN2 = self.addnorm2.ln and the dropouts of addnorm1 / addnorm2.
"""
import numpy as np
import torch
from torch import nn

from book.transformer import TransformerEncoderBlock

M = "check_causal_mask"
P = "check_pre_norm_block"


# -------------------------------------------------------------- 7.1 causal mask: wrong

def mask_upper(num_steps):
    """Kind 5: the upper triangle (j >= i)."""
    i = torch.arange(num_steps)
    return i[None, :] >= i[:, None]


def mask_strict(num_steps):
    """Kind 5: strictly lower (j < i): a query cannot see itself."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=-1)


def mask_float(num_steps):
    """Kind 6: torch.tril(torch.ones(n, n)): float 0/1, which SDPA would ADD to the
    scores."""
    return torch.tril(torch.ones(num_steps, num_steps))


def mask_int8_positions(num_steps):
    """Kind 3: positions as int8 'to save memory': they wrap at 128, so the mask is
    wrong for n > 128."""
    i = torch.arange(num_steps).to(torch.int8)
    return i[None, :] <= i[:, None]


def mask_cached_64(num_steps):
    """Kind 3: slices a cached 64 x 64 mask: wrong shape for n > 64."""
    return _CACHE[:num_steps, :num_steps]


_CACHE = torch.tril(torch.ones(64, 64, dtype=torch.bool))


def mask_window(num_steps):
    """Kind 3: a causal mask with a 48-step window copied from a 'local attention'
    snippet: right for n <= 48."""
    i = torch.arange(num_steps)
    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 48)


def mask_numpy(num_steps):
    """Kind 6: a numpy bool array."""
    return np.tril(np.ones((num_steps, num_steps), dtype=bool))


def mask_mha_convention(num_steps):
    """Kind 5: nn.MultiheadAttention's convention (True = masked)."""
    return torch.triu(torch.ones(num_steps, num_steps, dtype=torch.bool), diagonal=1)


def mask_batch_axis(num_steps):
    """Kind 6: shape (1, n, n) 'ready to broadcast'."""
    i = torch.arange(num_steps)
    return (i[None, :] <= i[:, None])[None]


def mask_uint8(num_steps):
    """Kind 6: uint8 0/1 (the old PyTorch mask type)."""
    return torch.tril(torch.ones(num_steps, num_steps, dtype=torch.uint8))


def mask_list(num_steps):
    """Kind 6: a nested Python list of booleans."""
    return [[j <= i for j in range(num_steps)] for i in range(num_steps)]


def mask_float16_positions(num_steps):
    """Kind 3: positions in float16 (exact only up to 2048): wrong beyond that."""
    i = torch.arange(num_steps, dtype=torch.float16)
    return i[None, :] <= i[:, None]


def mask_transposed(num_steps):
    """Kind 5: [j, i] instead of [i, j] (the same as the upper triangle)."""
    i = torch.arange(num_steps)
    return (i[None, :] <= i[:, None]).T


# -------------------------------------------------------------- 7.1 causal mask: right

def mask_triu_not(num_steps):
    """Right: the complement of the strict upper triangle."""
    return ~torch.ones(num_steps, num_steps, dtype=torch.bool).triu(1)


def mask_tril_bool(num_steps):
    """Right: tril of ones, then .bool()."""
    return torch.tril(torch.ones(num_steps, num_steps)).bool()


def mask_numpy_int(num_steps):
    """Right: accepts numpy integers too (int(num_steps))."""
    n = int(num_steps)
    return torch.arange(n).unsqueeze(0) <= torch.arange(n).unsqueeze(1)


# ------------------------------------------------------------ 7.3 pre-LN block: wrong

class PostLN(TransformerEncoderBlock):
    """Kind 5: the chapter's post-LN forward, unchanged."""

    def forward(self, X, valid_lens):
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))
        return self.addnorm2(Y, self.ffn(Y))


class NormBoth(TransformerEncoderBlock):
    """Kind 5: pre-LN, and the sum is normalised again (LN inside and outside)."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.ln(X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens)))
        return self.addnorm2.ln(Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y))))


class ResidualFromNormed(TransformerEncoderBlock):
    """Kind 5: the residual adds the normalised input: Z + f(Z)."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = Z + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Z2 = self.addnorm2.ln(Y)
        return Z2 + self.addnorm2.dropout(self.ffn(Z2))


class NoDropout(TransformerEncoderBlock):
    """Kind 5: no dropout at all."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.ln(Y))


class DropoutOnSum(TransformerEncoderBlock):
    """Kind 5: dropout on the residual sum instead of the sublayer output."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1.dropout(X + self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2.dropout(Y + self.ffn(self.addnorm2.ln(Y)))


class SwappedNorms(TransformerEncoderBlock):
    """Kind 3: addnorm2.ln before the attention and addnorm1.ln before the FFN: the
    same function while both LayerNorms are at their initial weight 1, bias 0."""

    def forward(self, X, valid_lens):
        Z = self.addnorm2.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class FreshLayerNorm(TransformerEncoderBlock):
    """Kind 3/5: normalises with a parameter-free layer_norm instead of the block's
    LayerNorms (right only while they are at weight 1, bias 0)."""

    def forward(self, X, valid_lens):
        d = X.shape[-1]
        Z = nn.functional.layer_norm(X, (d,))
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(nn.functional.layer_norm(Y, (d,))))


class QueryOnlyNormed(TransformerEncoderBlock):
    """Kind 5: only the queries are normalised; keys and values are raw X."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class IgnoresValidLens(TransformerEncoderBlock):
    """Kind 5: passes None as valid_lens."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class FFNFromFirstNorm(TransformerEncoderBlock):
    """Kind 5: the FFN sees LN2(X) (the block input) instead of LN2(Y)."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class DetachedResidual(TransformerEncoderBlock):
    """Kind 1: detaches the residual stream ('the skip needs no gradient')."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X.detach() + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y.detach() + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class FinalNormInside(TransformerEncoderBlock):
    """Kind 5: pre-LN, plus addnorm2.ln applied to the block's output ('the final
    LayerNorm')."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        Y = Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return self.addnorm2.ln(Y)


class DropoutOnInput(TransformerEncoderBlock):
    """Kind 5: dropout on the sublayer's input instead of its output."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.dropout(self.addnorm1.ln(X))
        Y = X + self.attention(Z, Z, Z, valid_lens)
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class UsesAddNormModules(TransformerEncoderBlock):
    """Kind 5: calls the AddNorm modules with swapped arguments, believing that
    addnorm(X, Y) = X + LN(Y): gives LN(LN(X) ... ) nonsense (post-LN of normed)."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = self.addnorm1(X, self.attention(Z, Z, Z, valid_lens))
        return self.addnorm2(Y, self.ffn(self.addnorm2.ln(Y)))


class NewDropoutModules(TransformerEncoderBlock):
    """Kind 5: creates its own nn.Dropout(0.1) in __init__ instead of using the
    block's dropout rate."""

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, *args, **kwargs):
        super().__init__(num_hiddens, ffn_num_hiddens, num_heads, dropout, *args, **kwargs)
        self.drop = nn.Dropout(0.1)

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.drop(self.attention(Z, Z, Z, valid_lens))
        return Y + self.drop(self.ffn(self.addnorm2.ln(Y)))


# ------------------------------------------------------------ 7.3 pre-LN block: right

class OneDropoutModule(TransformerEncoderBlock):
    """Right: uses addnorm1.dropout for both sublayers (same rate, same RNG stream)."""

    def forward(self, X, valid_lens):
        Z = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(Z, Z, Z, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class Helper(TransformerEncoderBlock):
    """Right: a helper method for the residual branch."""

    @staticmethod
    def _branch(X, norm, f, drop):
        return X + drop(f(norm(X)))

    def forward(self, X, valid_lens):
        Y = self._branch(X, self.addnorm1.ln,
                         lambda Z: self.attention(Z, Z, Z, valid_lens),
                         self.addnorm1.dropout)
        return self._branch(Y, self.addnorm2.ln, self.ffn, self.addnorm2.dropout)


WRONG = [
    (M, "upper triangle (j >= i)", 5, mask_upper),
    (M, "strictly lower (no diagonal)", 5, mask_strict),
    (M, "float tril of ones", 6, mask_float),
    (M, "int8 positions (wrong for n > 128)", 3, mask_int8_positions),
    (M, "cached 64 x 64 mask", 3, mask_cached_64),
    (M, "48-step local window", 3, mask_window),
    (M, "numpy bool array", 6, mask_numpy),
    (M, "nn.MultiheadAttention convention (True = masked)", 5, mask_mha_convention),
    (M, "shape (1, n, n)", 6, mask_batch_axis),
    (M, "uint8 0/1", 6, mask_uint8),
    (M, "nested Python list", 6, mask_list),
    (M, "float16 positions (wrong past 2048)", 3, mask_float16_positions),
    (M, "transposed [j, i]", 5, mask_transposed),
    (P, "post-LN forward unchanged", 5, PostLN),
    (P, "LayerNorm inside and on the sum", 5, NormBoth),
    (P, "residual from the normalised input", 5, ResidualFromNormed),
    (P, "no dropout", 5, NoDropout),
    (P, "dropout on the residual sum", 5, DropoutOnSum),
    (P, "LayerNorms swapped (ln2 before attention)", 3, SwappedNorms),
    (P, "parameter-free layer_norm instead of the block's", 3, FreshLayerNorm),
    (P, "only the queries normalised", 5, QueryOnlyNormed),
    (P, "valid_lens ignored", 5, IgnoresValidLens),
    (P, "FFN sees LN2(X) instead of LN2(Y)", 5, FFNFromFirstNorm),
    (P, "detached residual stream", 1, DetachedResidual),
    (P, "final LayerNorm inside the block", 5, FinalNormInside),
    (P, "dropout on the sublayer input", 5, DropoutOnInput),
    (P, "AddNorm modules called on pre-normed branch", 5, UsesAddNormModules),
    (P, "own nn.Dropout(0.1)", 5, NewDropoutModules),
]

RIGHT_BUT_UNUSUAL = [
    (M, "~triu(1)", 0, mask_triu_not),
    (M, "tril(ones).bool()", 0, mask_tril_bool),
    (M, "int(num_steps) first", 0, mask_numpy_int),
    (P, "addnorm1.dropout for both sublayers", 0, OneDropoutModule),
    (P, "helper method for the branch", 0, Helper),
]
