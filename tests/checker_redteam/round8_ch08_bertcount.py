"""Round 8 red team (writer C, issue 12), ch08_bertcount: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round8/C/sols/ch08_bertcount.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). S_04 (builds the model on the meta
device, against the text's "by formula") is rejected with a message saying so; S_ are not
tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
CHECK = "check_bert_param_count"
import numpy as np
import torch


def _parts(V, H, F, L, M, *, seg=2, pos=True, emb_ln=True, attn_bias=4, ffn_bias=True,
           block_lns=2, pooler=True, mlm_hidden=True, mlm_ln=True, mlm_out_bias=True,
           nsp=True, ln=2):
    emb = V * H + seg * H + (M * H if pos else 0) + (ln * H if emb_ln else 0)
    attn = 4 * H * H + attn_bias * H
    ffn = H * F + F + F * H + H if ffn_bias else H * F + F * H
    blk = attn + ffn + block_lns * ln * H
    pool = H * H + H if pooler else 0
    mlm = (H * H + H if mlm_hidden else 0) + (ln * H if mlm_ln else 0) + H * V + (V if mlm_out_bias else 0)
    nsph = 2 * H + 2 if nsp else 0
    return emb + L * blk + pool + mlm + nsph


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = (np.int64(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))
    return (V + M + 2 + 2) * H + L * (4 * H * H + 4 * H + 2 * H * F + F + H + 4 * H) \
        + H * H + H + H * H + 3 * H + H * V + V + 2 * H + 2


def O_03_torch_int64_scalar(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return torch.tensor(_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def S_04_builds_meta_model(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Against the wording (builds the model), right numbers."""
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def W_01_no_segment(V, H, F, L, M):
    return _parts(V, H, F, L, M, seg=0)


def W_02_no_position(V, H, F, L, M):
    return _parts(V, H, F, L, M, pos=False)


def W_03_no_attention_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, attn_bias=0)


def W_04_output_proj_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, attn_bias=3)


def W_05_ffn_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, ffn_bias=False)


def W_06_one_ln_per_block(V, H, F, L, M):
    return _parts(V, H, F, L, M, block_lns=1)


def W_07_no_embedding_ln(V, H, F, L, M):
    return _parts(V, H, F, L, M, emb_ln=False)


def W_08_no_mlm_ln(V, H, F, L, M):
    return _parts(V, H, F, L, M, mlm_ln=False)


def W_09_mlm_out_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, mlm_out_bias=False)


def W_10_no_nsp(V, H, F, L, M):
    return _parts(V, H, F, L, M, nsp=False)


def W_11_no_pooler(V, H, F, L, M):
    return _parts(V, H, F, L, M, pooler=False)


def W_12_ln_is_H(V, H, F, L, M):
    return _parts(V, H, F, L, M, ln=1)


def W_13_ffn_is_4H(V, H, F, L, M):
    return _parts(V, H, 4 * H, L, M)


def W_14_max_len_512(V, H, F, L, M):
    return _parts(V, H, F, L, 512)


def W_15_segment_as_2(V, H, F, L, M):
    """Counts the segment embedding as 2 numbers, not 2 x H."""
    return _parts(V, H, F, L, M, seg=0) + 2


def W_16_no_mlm_hidden(V, H, F, L, M):
    return _parts(V, H, F, L, M, mlm_hidden=False)


def W_17_int32_overflow(V, H, F, L, M):
    """Computes in int32 numpy: wraps around above 2**31 parameters."""
    a = np.array([V, H, F, L, M], dtype=np.int32)
    V, H, F, L, M = a
    with np.errstate(over="ignore"):
        return int(_parts(V, H, F, L, M))


def W_18_float_rounding(V, H, F, L, M):
    """Goes through float32 (e.g. a torch.tensor of floats): loses units above 2**24."""
    return int(torch.tensor(float(_parts(V, H, F, L, M)), dtype=torch.float32).item())


def W_19_nsp_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, nsp=False) + 2 * H


def W_20_tied_mlm(V, H, F, L, M):
    """Already ties the MLM output weight to the token embeddings (not BERTModel)."""
    return _parts(V, H, F, L, M) - V * H


def W_21_segment_three(V, H, F, L, M):
    return _parts(V, H, F, L, M, seg=3)


def W_22_blocks_plus_one(V, H, F, L, M):
    """An off-by-one: range(num_blks + 1) for the blocks."""
    return _parts(V, H, F, L + 1, M)


def W_23_pos_max_len_plus_one(V, H, F, L, M):
    return _parts(V, H, F, L, M + 1)


def W_24_block_lns_once(V, H, F, L, M):
    """The blocks' LayerNorms counted once, not per block."""
    return _parts(V, H, F, L, M, block_lns=0) + 4 * H


def W_25_ffn_hidden_from_H(V, H, F, L, M):
    """Uses ffn_num_hiddens for the FFN's first layer only; second layer H x H."""
    return _parts(V, H, F, L, M) - L * (F * H) + L * (H * H)


def W_26_embeddings_times_blocks(V, H, F, L, M):
    """Puts the embeddings inside the per-block sum."""
    emb = V * H + 2 * H + M * H + 2 * H
    return _parts(V, H, F, L, M) + (L - 1) * emb
