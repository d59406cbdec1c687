"""Round 6 red team (writer C, issue 12), ch07_pre_norm: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round6/C/sols/ch07_prenorm.py with the names W01_x written W_01_x. Wrong
ones the checker accepts on purpose would be named A_ (none here).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass). Round 6 found that the expected output was computed from the learner's own
submodules, so a change made in __init__ (W_16, W_20 to W_23) or to the modules in forward
(W_24) reached the reference too; the checker now builds its own TransformerEncoderBlock,
loads its parameters into the learner's block, and compares the module trees."""
# flake8: noqa
import torch
from torch import nn
import torch.nn.functional as F
from book.transformer import TransformerEncoderBlock

CHECK = "check_pre_norm_block"


class C_01_reference(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_02_ln_three_times(TransformerEncoderBlock):
    """LayerNorm computed separately for query, key, value (same values)."""
    def forward(self, X, valid_lens):
        ln = self.addnorm1.ln
        Y = X + self.addnorm1.dropout(self.attention(ln(X), ln(X), ln(X), valid_lens))
        Z = self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
        return Z + Y


class S_03_dropout1_twice(TransformerEncoderBlock):
    """Uses addnorm1.dropout for both sublayers (same p, stateless: indistinguishable)."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm1.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_01_ln_only_on_query(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, X, X, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_02_ln_only_on_keys_values(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(X, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_03_ln1_for_both(TransformerEncoderBlock):
    """addnorm1.ln before the FFN too: equal to ln2 only while both are at init."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm1.ln(Y)))


class W_04_fresh_layernorm(TransformerEncoderBlock):
    """F.layer_norm without the block's weight/bias (a fresh LN): equal only at init."""
    def forward(self, X, valid_lens):
        d = X.shape[-1:]
        H = F.layer_norm(X, d)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(F.layer_norm(Y, d)))


class W_05_ignores_valid_lens(TransformerEncoderBlock):
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, None))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_06_parallel_block(TransformerEncoderBlock):
    """GPT-J style: FFN reads LN2(X), not LN2(Y)."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return X + A + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_07_inplace_residual(TransformerEncoderBlock):
    """Adds into X in place: the caller's tensor changes."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        A = self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        if X.requires_grad:
            X = X + A
        else:
            X += A
        return X + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(X)))


class W_08_detached_branch_input(TransformerEncoderBlock):
    """LN(X.detach()): right values, no gradient to X through the branches."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X.detach())
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y.detach())))


class W_09_dropout_always_on(TransformerEncoderBlock):
    """F.dropout(training=True): drops in eval mode too."""
    def forward(self, X, valid_lens):
        p = self.addnorm1.dropout.p
        H = self.addnorm1.ln(X)
        Y = X + F.dropout(self.attention(H, H, H, valid_lens), p, training=True)
        return Y + F.dropout(self.ffn(self.addnorm2.ln(Y)), p, training=True)


class W_10_ffn_dropout_before_ffn(TransformerEncoderBlock):
    """Dropout on the FFN's input instead of its output."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.ffn(self.addnorm2.dropout(self.addnorm2.ln(Y)))


class W_11_valid_lens_first_row_only(TransformerEncoderBlock):
    """Uses the first sequence's length for the whole batch (right when lengths agree)."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            valid_lens = valid_lens[:1].expand(X.shape[0], *valid_lens.shape[1:])
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_12_residual_from_normalised(TransformerEncoderBlock):
    """Second residual adds onto LN2(Y) instead of Y."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        G = self.addnorm2.ln(Y)
        return G + self.addnorm2.dropout(self.ffn(G))


class W_13_cached_ln_output(TransformerEncoderBlock):
    """Keeps the first call's LN1(X) when the shape repeats (state between calls)."""
    def forward(self, X, valid_lens):
        cache = self.__dict__.setdefault("_cache", {})
        key = tuple(X.shape)
        if key not in cache:
            cache[key] = self.addnorm1.ln(X)
        H = cache[key]
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_14_no_grad_ffn(TransformerEncoderBlock):
    """FFN computed under no_grad: right values, FFN parameters get no gradient."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        with torch.no_grad():
            Z = self.ffn(self.addnorm2.ln(Y))
        return Y + self.addnorm2.dropout(Z)


class W_15_valid_lens_mutated(TransformerEncoderBlock):
    """Clamps valid_lens in place to at least 1 ... and at most n-1 (off by one)."""
    def forward(self, X, valid_lens):
        if valid_lens is not None:
            valid_lens.clamp_(max=X.shape[1] - 1)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class O_04_none_as_full_lengths(TransformerEncoderBlock):
    """valid_lens None replaced by full lengths (the same masking)."""
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = torch.full((X.shape[0],), X.shape[1], device=X.device)
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_16_shared_layernorm_module(TransformerEncoderBlock):
    """__init__ makes addnorm2.ln the same module as addnorm1.ln (one LN, shared)."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.addnorm2.ln = self.addnorm1.ln

    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_17_remembers_last_valid_lens(TransformerEncoderBlock):
    """valid_lens None -> reuses the lengths of the previous call (state between calls)."""
    def forward(self, X, valid_lens):
        if valid_lens is None:
            valid_lens = self.__dict__.get("_last")
            if valid_lens is not None and valid_lens.shape[0] != X.shape[0]:
                valid_lens = None
        else:
            self.__dict__["_last"] = valid_lens
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_18_second_ln_on_attention_output(TransformerEncoderBlock):
    """LN2 applied to the attention branch's output before adding (sandwich-ish),
    FFN reads Y un-normalised."""
    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y - X)))


class W_19_inplace_dropout_on_view(TransformerEncoderBlock):
    """LN via X's own storage: normalises into X with F.layer_norm(..., out) emulation:
    X.sub_(mean).div_(std) when X needs no grad (changes the caller's X)."""
    def forward(self, X, valid_lens):
        if not X.requires_grad:
            X0 = X.clone()
            ln = self.addnorm1.ln
            H = self.addnorm1.ln(X)
            X.copy_(H)   # 'saves memory'
            X = X0
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_20_init_swaps_relu_for_gelu(TransformerEncoderBlock):
    """__init__ changes the FFN's activation to GELU (the exercise: change only forward)."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ffn.relu = nn.GELU()

    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_21_init_zero_dropout(TransformerEncoderBlock):
    """__init__ replaces the residual dropouts by Dropout(0) (nothing is ever dropped)."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.addnorm1.dropout = nn.Dropout(0.0)
        self.addnorm2.dropout = nn.Dropout(0.0)

    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_22_init_eps_changed(TransformerEncoderBlock):
    """__init__ swaps in LayerNorms with eps=1e-2 (keeps the weights' shapes)."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        d = self.addnorm1.ln.normalized_shape
        self.addnorm1.ln = nn.LayerNorm(d, eps=1e-1)
        self.addnorm2.ln = nn.LayerNorm(d, eps=1e-1)

    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_23_init_ignores_dropout_arg(TransformerEncoderBlock):
    """An __init__ with its own signature that passes a fixed dropout of 0.1 up."""
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias=False,
                 fused=False):
        super().__init__(num_hiddens, ffn_num_hiddens, num_heads, 0.1, use_bias, fused)

    def forward(self, X, valid_lens):
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))


class W_24_forward_sets_p_zero(TransformerEncoderBlock):
    """forward switches the residual dropouts off (p = 0) 'for stability'."""
    def forward(self, X, valid_lens):
        self.addnorm1.dropout.p = 0.0
        self.addnorm2.dropout.p = 0.0
        H = self.addnorm1.ln(X)
        Y = X + self.addnorm1.dropout(self.attention(H, H, H, valid_lens))
        return Y + self.addnorm2.dropout(self.ffn(self.addnorm2.ln(Y)))
