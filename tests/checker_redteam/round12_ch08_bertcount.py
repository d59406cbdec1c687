"""Round 12 red team (writer C, issue 12), ch08_bertcount: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/C/sols/ch08_bertcount.py with the names W01_x written
W_01_x. tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_
entry (must pass); S_03 (BERTModel built on the meta device) is refused, rightly: the text
says not to build the model; not tested. Round 12 found no hole and no misleading message."""
# flake8: noqa
import numpy as np

CHECK = "check_bert_param_count"


def _count(V, H, F, L, M, *, seg=2, emb_ln=True, attn_bias=True, ffn_b2=None, blk_lns=2,
           pooler=True, mlm_ln=True, mlm_out_bias=True, nsp_bias=True, pos=None,
           mlm_hidden_bias=True):
    pos = M if pos is None else pos
    emb = V * H + seg * H + pos * H + (2 * H if emb_ln else 0)
    attn = 4 * (H * H + (H if attn_bias else 0))
    ffn = H * F + F + F * H + (H if ffn_b2 is None else ffn_b2)
    blk = attn + ffn + blk_lns * 2 * H
    pool = H * H + H if pooler else 0
    mlm = H * H + (H if mlm_hidden_bias else 0) + (2 * H if mlm_ln else 0) + H * V \
        + (V if mlm_out_bias else 0)
    nsp = 2 * H + (2 if nsp_bias else 0)
    return emb + L * blk + pool + mlm + nsp


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = (np.int64(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens,
                                           num_blks, max_len))
    return _count(V, H, F, L, M)


def S_03_meta_device(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds the model on the meta device (against the wording: 'do not build it')."""
    import torch
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def W_01_ffn_is_4H(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Ignores ffn_num_hiddens: BERT's FFN is 4H wide."""
    return _count(vocab_size, num_hiddens, 4 * num_hiddens, num_blks, max_len)


def W_02_no_segment_embedding(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, seg=0)


def W_03_position_table_512(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """BERT's 512 positions, whatever max_len says."""
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, pos=512)


def W_04_attention_without_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Chapter 7's default use_bias=False, though BERT builds its blocks with biases."""
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  attn_bias=False)


def W_05_ffn_second_bias_F(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Second FFN layer's bias counted with the hidden size F instead of H."""
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  ffn_b2=ffn_num_hiddens)


def W_06_one_layernorm_per_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, blk_lns=1)


def W_07_no_pooler(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, pooler=False)


def W_08_no_mlm_layernorm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, mlm_ln=False)


def W_09_no_embedding_layernorm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, emb_ln=False)


def W_10_mlm_output_without_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  mlm_out_bias=False)


def W_11_nsp_without_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  nsp_bias=False)


def W_12_numpy_int32_overflow(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """np.int32 arithmetic: wraps around past 2**31 (a model of billions of parameters)."""
    with np.errstate(over="ignore"):
        V, H, F, L, M = (np.int32(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens,
                                               num_blks, max_len))
        return _count(V, H, F, L, M)


def W_13_position_table_max_len_plus_one(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                        max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  pos=max_len + 1)


def W_14_mlm_hidden_without_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                  mlm_hidden_bias=False)


def W_15_float_pow(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """math via floats in float32 (numpy): loses units past 2**24."""
    r = _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)
    return int(np.float32(r))


def W_16_segment_table_max_len(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Segment embedding sized like the positions (max_len rows) instead of 2."""
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len, seg=max_len)


def W_17_tied_output_counted(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts the MLM output layer as tied to the token embeddings (subtracts V*H)."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size * num_hiddens


def O_18_torch_scalar(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Returns a 0-d int64 tensor (computed with torch)."""
    import torch
    return torch.tensor(C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                    max_len), dtype=torch.int64)


def W_19_refuses_zero_blocks(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Raises for num_blks = 0, which BERTModel builds (embeddings and heads only)."""
    if min(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) < 1:
        raise ValueError("every size must be at least 1")
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def W_20_pooler_per_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts the pooler inside every block."""
    H = num_hiddens
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + (num_blks - 1) * (H * H + H)
