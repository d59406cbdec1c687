"""Round 11 red team (writer C, issue 12), ch08_bert_count: wrong (W_), right (C_) and odd
but right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round11/C/sols/ch08_bert_count.py with the names W01_x written W_01_x.
Round 11 found no hole and no misleading message (the third clean round for this checker):
every wrong count was refused with a hint that names its slip. O_02 (numpy.int64) and O_03
(a whole-valued float, by an earlier ruling) are accepted. No wrong one is accepted on
purpose (no A_). tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_
and O_ entry (must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_bert_param_count"


def _count(V, H, F, L, M, *, seg=2, emb_ln=True, proj_bias=True, ffn_b1=True, ffn_b2=True,
           blk_ln=2, pooler=True, mlm_ln=True, mlm_out_bias=True, nsp_bias=True, pos=None,
           mlm_out=True):
    n = V * H + seg * H + (M if pos is None else pos) * H + (2 * H if emb_ln else 0)
    blk = 4 * (H * H + (H if proj_bias else 0)) + H * F + (F if ffn_b1 else 0) \
        + F * H + (H if ffn_b2 else 0) + blk_ln * 2 * H
    n += L * blk
    if pooler:
        n += H * H + H
    n += H * H + H + (2 * H if mlm_ln else 0)
    if mlm_out:
        n += H * V + (V if mlm_out_bias else 0)
    n += 2 * H + (2 if nsp_bias else 0)
    return n


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return np.int64(_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def O_03_float_whole(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return float(_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def W_01_float32_numpy(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # summed in float32: above 2**24 the count is rounded (BERT-large ~335M -> off by tens)
    V, H, F, L, M = (np.float32(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens,
                                              num_blks, max_len))
    return _count(V, H, F, L, M)


def W_02_int32_torch(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # int32 arithmetic: wraps above 2**31 parameters
    t = [torch.tensor(x, dtype=torch.int32) for x in (vocab_size, num_hiddens,
                                                       ffn_num_hiddens, num_blks, max_len)]
    return int(_count(*t))


def W_03_no_segment(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, seg=0)


def W_04_three_segments(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, seg=3)


def W_05_no_embedding_ln(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, emb_ln=False)


def W_06_ffn4H_assumed(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, 4 * num_hiddens, num_blks, max_len)


def W_07_max_len_512(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, pos=512)


def W_08_no_pooler(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, pooler=False)


def W_09_mlm_no_ln(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, mlm_ln=False)


def W_10_mlm_out_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  mlm_out_bias=False)


def W_11_nsp_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  nsp_bias=False)


def W_12_tied_mlm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # counts the MLM output weight as tied to the token embeddings (only its bias)
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  mlm_out=False) + vocab_size


def W_13_one_ln_per_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, blk_ln=1)


def W_14_ffn_out_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, ffn_b2=False)


def W_15_proj_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # chapter 7's default use_bias=False; BERT passes use_bias=True
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  proj_bias=False)


def W_16_round_float(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # reports in millions, rounded to 3 decimals, times 1e6
    return round(_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) / 1e6, 3) * 1e6


def W_17_pos_max_len_plus1(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  pos=max_len + 1)
