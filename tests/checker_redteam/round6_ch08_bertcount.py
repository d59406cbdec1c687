"""Round 6 red team (writer R6-C, issue 12), ch08_bertcount: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round6/C/sols/ch08_bertcount.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import functools
import numpy as np
import torch

CHECK = "check_bert_param_count"


def _lin(a, b, bias=True):
    return a * b + (b if bias else 0)


def _count(V, H, F, L, M, *, emb_ln=True, seg=2, attn_bias=True, blk_lns=2, ffn_b2=True,
           pooler=True, mlm_ln=True, mlm_hidden=True, mlm_out_bias=True, nsp_bias=True,
           tied=False, pos=None, nblk=None):
    pos = M if pos is None else pos
    nblk = L if nblk is None else nblk
    emb = V * H + seg * H + pos * H + (2 * H if emb_ln else 0)
    blk = 4 * _lin(H, H, attn_bias) + _lin(H, F) + _lin(F, H, ffn_b2) + blk_lns * 2 * H
    pool = _lin(H, H) if pooler else 0
    mlm = (_lin(H, H) if mlm_hidden else 0) + (2 * H if mlm_ln else 0)
    mlm += (V if mlm_out_bias else 0) + (0 if tied else H * V)
    nsp = _lin(H, 2, nsp_bias)
    return emb + nblk * blk + pool + mlm + nsp


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = (np.int64(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens,
                                            num_blks, max_len))
    return _count(V, H, F, L, M)


def O_03_expanded_polynomial(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    # H^2 terms: 4L + 2 (pooler, mlm hidden); HV twice; HF 2L
    return ((4 * L + 2) * H * H + 2 * H * V + 2 * L * H * F + V + L * F
            + H * (2 + M + 2 + 4 * L + L + 4 * L + 1 + 1 + 2 + 2) + 2)


def S_04_builds_on_meta(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds the model on the meta device (the text says: do not build the model)."""
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.1, max_len)
    return sum(p.numel() for p in m.parameters())


def W_01_no_embedding_layernorm(V, H, F, L, M):
    return _count(V, H, F, L, M, emb_ln=False)


def W_02_attention_without_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, attn_bias=False)


def W_03_one_layernorm_per_block(V, H, F, L, M):
    return _count(V, H, F, L, M, blk_lns=1)


def W_04_ffn_is_4H(V, H, F, L, M):
    """Uses 4H for the FFN width (right whenever ffn_num_hiddens == 4 * num_hiddens)."""
    return _count(V, H, 4 * H, L, M)


def W_05_no_mlm_layernorm(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_ln=False)


def W_06_mlm_output_no_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_out_bias=False)


def W_07_tied_output(V, H, F, L, M):
    return _count(V, H, F, L, M, tied=True)


def W_08_nsp_no_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, nsp_bias=False)


def W_09_three_segments(V, H, F, L, M):
    return _count(V, H, F, L, M, seg=3)


def W_10_max_len_fixed_512(V, H, F, L, M):
    return _count(V, H, F, L, M, pos=512)


# Accepted on purpose: a float equal to the right count is the right number (rounds 1, 2 and 5
# accepted it too; exact up to 2^53, far above any BERT); only a float that is rounded (float32
# above 2^24) is refused, with its own message.
def A_11_float_result(V, H, F, L, M):
    """Float arithmetic: 1.1e8 as a float, loses exactness for big models."""
    return float(_count(float(V), float(H), float(F), float(L), float(M)))


def W_12_cached_first_call(V, H, F, L, M, _memo={}):
    """Remembers the first answer (a memo keyed on the vocabulary size only)."""
    if V not in _memo:
        _memo[V] = _count(V, H, F, L, M)
    return _memo[V]


def W_13_no_pooler(V, H, F, L, M):
    return _count(V, H, F, L, M, pooler=False)


def W_14_ffn_second_bias_missing(V, H, F, L, M):
    return _count(V, H, F, L, M, ffn_b2=False)


def W_15_int32_overflow(V, H, F, L, M):
    """numpy int32 arithmetic: wraps around for large models."""
    V, H, F, L, M = (np.int32(x) for x in (V, H, F, L, M))
    with np.errstate(over="ignore"):
        return int(_count(V, H, F, L, M))


def W_16_pos_max_len_plus_one(V, H, F, L, M):
    return _count(V, H, F, L, M, pos=M + 1)


def W_17_specials_added_to_vocab(V, H, F, L, M):
    """Adds the 5 special tokens to the vocabulary (they are already in vocab_size)."""
    return _count(V + 5, H, F, L, M)


def W_18_string_result(V, H, F, L, M):
    return f"{_count(V, H, F, L, M):,}"


def O_19_torch_int64_scalar(V, H, F, L, M):
    """A 0-d int64 tensor (odd; a learner who used torch arithmetic)."""
    return torch.tensor(_count(V, H, F, L, M), dtype=torch.int64)


def W_20_positions_capped_at_512(V, H, F, L, M):
    """min(max_len, 512) positions (right for every max_len <= 512)."""
    return _count(V, H, F, L, M, pos=min(M, 512))


def W_21_float_rounded_millions(V, H, F, L, M):
    """Rounds to whole thousands, as in a printed table."""
    return round(_count(V, H, F, L, M), -3)
