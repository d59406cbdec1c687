"""Round 9 red team (writer C, issue 12), ch08_bertcount: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/C/sols/ch08_bertcount.py with the names W01_x written W_01_x.
No wrong one is accepted on purpose (no A_). S_01 and S_02 (building BERTModel or a
TransformerEncoderBlock, against the text's "by formula") are refused; S_03 (counting with
nn.Linear and nn.LayerNorm objects built on meta) is accepted. S_ are not tested.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry (must
pass)."""
# flake8: noqa
import numpy as np

CHECK = "check_bert_param_count"


def _count(V, H, F, L, M, *, attn_bias=True, pos=True, seg=2, emb_ln=True, blk_lns=2,
           projections=4, ffn_bias=True, pooler=True, mlm_hidden=True, mlm_ln=True,
           mlm_out_bias=True, mlm_out=True, nsp_bias=True):
    emb = V * H + seg * H + (M * H if pos else 0) + (2 * H if emb_ln else 0)
    blk = projections * (H * H + (H if attn_bias else 0))
    blk += H * F + (F if ffn_bias else 0) + F * H + (H if ffn_bias else 0)
    blk += blk_lns * 2 * H
    pool = H * H + H if pooler else 0
    mlm = (H * H + H if mlm_hidden else 0) + (2 * H if mlm_ln else 0)
    mlm += (H * V if mlm_out else 0) + (V if mlm_out_bias else 0)
    nsp = 2 * H + (2 if nsp_bias else 0)
    return emb + L * blk + pool + mlm + nsp


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_01_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    a = [np.int64(x) for x in (vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)]
    return _count(*a)


def O_02_factored(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return (V + 2 + M + 2) * H + L * (4 * H * H + 2 * H * F + F + 9 * H) \
        + 2 * H * H + 4 * H + H * V + V + 2 * H + 2


def O_03_torch_scalar(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    import torch
    return torch.tensor(_count(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def S_01_builds_model(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds the model on meta and counts (the exercise says: do not build the model)."""
    import torch
    from book.bert import BERTModel
    heads = 1
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, heads, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def W_01_no_attention_biases(V, H, F, L, M):
    """Chapter 7's default use_bias=False; BERT's blocks have use_bias=True."""
    return _count(V, H, F, L, M, attn_bias=False)


def W_02_no_position_embedding(V, H, F, L, M):
    return _count(V, H, F, L, M, pos=False)


def W_03_max_len_512_fixed(V, H, F, L, M):
    return _count(V, H, F, L, 512)


def W_04_ffn_is_4H(V, H, F, L, M):
    return _count(V, H, 4 * H, L, M)


def W_05_no_embedding_layernorm(V, H, F, L, M):
    return _count(V, H, F, L, M, emb_ln=False)


def W_06_no_mlm_layernorm(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_ln=False)


def W_07_mlm_output_no_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_out_bias=False)


def W_08_tied_output(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_out=False)


def W_09_nsp_no_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, nsp_bias=False)


def W_10_no_segment_embedding(V, H, F, L, M):
    return _count(V, H, F, L, M, seg=0)


def W_11_no_pooler(V, H, F, L, M):
    return _count(V, H, F, L, M, pooler=False)


def W_12_one_layernorm_per_block(V, H, F, L, M):
    return _count(V, H, F, L, M, blk_lns=1)


def W_13_three_projections(V, H, F, L, M):
    return _count(V, H, F, L, M, projections=3)


def W_14_int32_overflow(V, H, F, L, M):
    """numpy int32 arithmetic: wraps past 2**31 (a big vocabulary or model)."""
    with np.errstate(over="ignore"):
        a = [np.int32(x) for x in (V, H, F, L, M)]
        return int(_count(*a))


def W_15_ordinary_vocab_only(V, H, F, L, M):
    """Counts the output layer over the ordinary tokens only (V - 5)."""
    return _count(V, H, F, L, M) - 5 * H - 5


def W_16_no_mlm_hidden(V, H, F, L, M):
    return _count(V, H, F, L, M, mlm_hidden=False)


def W_17_float_rounding(V, H, F, L, M):
    """Float arithmetic through millions: round(x / 1e6) * 1e6 style rounding to 1e3."""
    return int(round(_count(V, H, F, L, M) / 1000.0) * 1000)


def W_18_ffn_no_bias(V, H, F, L, M):
    return _count(V, H, F, L, M, ffn_bias=False)


def W_19_segment_count_per_max_len(V, H, F, L, M):
    """Position embedding counted as (max_len + 1) rows (off by one)."""
    return _count(V, H, F, L, M) + H


def W_20_swapped_args(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Reads the arguments in d2l's BERTModel order (vocab, H, ffn, heads, blks...)."""
    return _count(vocab_size, num_hiddens, ffn_num_hiddens, max_len, num_blks)


def S_02_builds_one_block(V, H, F, L, M):
    """Builds one TransformerEncoderBlock on meta and multiplies (not a formula)."""
    import torch
    from book.transformer import TransformerEncoderBlock
    with torch.device("meta"):
        blk = TransformerEncoderBlock(H, F, 1, 0.0, use_bias=True)
    per = sum(p.numel() for p in blk.parameters())
    return _count(V, H, F, 0, M) + L * per


def S_03_builds_torch_layers(V, H, F, L, M):
    """Counts with nn.Linear / nn.LayerNorm objects built on meta (not a formula)."""
    import torch
    from torch import nn
    n = lambda m: sum(p.numel() for p in m.parameters())
    with torch.device("meta"):
        lin = lambda a, b: n(nn.Linear(a, b))
        ln = n(nn.LayerNorm(H))
        blk = 4 * lin(H, H) + lin(H, F) + lin(F, H) + 2 * ln
        return (V * H + 2 * H + M * H + ln + L * blk + lin(H, H) + lin(H, H) + ln
                + lin(H, V) + lin(H, 2))
