"""Round 4 red team (writer R4-B, issue 12), ch08_bert_param_count: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round4/B/sols/ch08_bert_param_count.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_bert_param_count"


def _lin(a, b, bias=True):
    return a * b + (b if bias else 0)


def _ref(V, H, F, L, M):
    emb = V * H + 2 * H + M * H + 2 * H
    blk = 4 * _lin(H, H) + _lin(H, F) + _lin(F, H) + 2 * 2 * H
    pooler = _lin(H, H)
    mlm = _lin(H, H) + 2 * H + _lin(H, V)
    nsp = _lin(H, 2)
    return emb + L * blk + pooler + mlm + nsp


# ---------------------------------------------------------------- correct and odd
def C_01_by_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _ref(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def C_02_expanded_polynomial(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return (2 * V * H + V + M * H + 2 * H * H + 10 * H + 2
            + L * (4 * H * H + 2 * H * F + F + 9 * H))


def O_03_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return np.int64(_ref(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def O_04_zero_dim_tensor(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return torch.tensor(_ref(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def O_05_numpy_arguments_ok(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Computes in Python ints even if given numpy ints (no overflow)."""
    args = [int(a) for a in (vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)]
    return _ref(*args)


# ---------------------------------------------------------------- wrong
def W_01_no_segment_embedding(V, H, F, L, M):
    return _ref(V, H, F, L, M) - 2 * H


def W_02_no_embedding_layernorm(V, H, F, L, M):
    return _ref(V, H, F, L, M) - 2 * H


def W_03_projections_without_bias(V, H, F, L, M):
    """Chapter 7's default use_bias=False: but BERT's blocks have biases."""
    return _ref(V, H, F, L, M) - L * 4 * H


def W_04_no_mlm_layernorm(V, H, F, L, M):
    return _ref(V, H, F, L, M) - 2 * H


def W_05_mlm_output_no_bias(V, H, F, L, M):
    return _ref(V, H, F, L, M) - V


def W_06_no_pooler(V, H, F, L, M):
    return _ref(V, H, F, L, M) - _lin(H, H)


def W_07_nsp_one_logit(V, H, F, L, M):
    return _ref(V, H, F, L, M) - _lin(H, 2) + _lin(H, 1)


def W_08_layernorm_H(V, H, F, L, M):
    """LayerNorm counted as H (forgets the bias)."""
    n_ln = 1 + 2 * L + 1
    return _ref(V, H, F, L, M) - n_ln * H


def W_09_no_position_embedding(V, H, F, L, M):
    """Thinks the positions are the fixed sinusoids (no parameters)."""
    return _ref(V, H, F, L, M) - M * H


def W_10_three_projections(V, H, F, L, M):
    """Forgets W_o."""
    return _ref(V, H, F, L, M) - L * _lin(H, H)


def W_11_ffn_is_4H(V, H, F, L, M):
    """Ignores ffn_num_hiddens (assumes 4H)."""
    return _ref(V, H, 4 * H, L, M)


def W_12_max_len_512(V, H, F, L, M):
    """Ignores max_len (BERT's 512)."""
    return _ref(V, H, F, L, 512)


def W_13_twelve_blocks(V, H, F, L, M):
    return _ref(V, H, F, 12, M)


def W_14_ffn_biases_both_H(V, H, F, L, M):
    """Both FFN biases counted as H (dense1's has F entries): right only when F == H."""
    return _ref(V, H, F, L, M) - L * F + L * H


def W_15_one_ln_per_block(V, H, F, L, M):
    return _ref(V, H, F, L, M) - L * 2 * H


def W_16_mlm_bias_H(V, H, F, L, M):
    """The MLM output layer's bias counted as H (right only when V == H)."""
    return _ref(V, H, F, L, M) - V + H


def W_17_no_mlm_hidden(V, H, F, L, M):
    return _ref(V, H, F, L, M) - _lin(H, H)


def W_18_float_result(V, H, F, L, M):
    """A float (e.g. from a / in the formula): 1.1e8-sized floats print inexactly."""
    return float(_ref(V, H, F, L, M)) * (1 + 1e-12)


def W_19_segments_as_max_len(V, H, F, L, M):
    """Segment embeddings sized like the positions (max_len rows)."""
    return _ref(V, H, F, L, M) - 2 * H + M * H


def W_20_int32_overflow(V, H, F, L, M):
    """numpy int32 arithmetic: overflows for big models."""
    V, H, F, L, M = (np.int32(a) for a in (V, H, F, L, M))
    with np.errstate(over="ignore"):
        return (V * H + 2 * H + M * H + 2 * H
                + L * (4 * (H * H + H) + (H * F + F) + (F * H + H) + 4 * H)
                + (H * H + H) + (H * H + H) + 2 * H + (H * V + V) + (2 * H + 2))


def W_21_tied_output(V, H, F, L, M):
    """Counts the MLM output as tied to the token embeddings (not what BERTModel does)."""
    return _ref(V, H, F, L, M) - V * H


def S_22_builds_model_on_meta(V, H, F, L, M):
    """Builds BERTModel on the meta device and counts (the exercise says not to)."""
    from book.bert import BERTModel
    with torch.device("meta"):
        model = BERTModel(V, H, F, 2 if H % 2 == 0 else 1, L, 0.0, M)
    return sum(p.numel() for p in model.parameters())
