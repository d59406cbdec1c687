"""Round 2 red team (writer R2), ch08_count: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch08_count.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import numpy as np

CHECK = "check_bert_param_count"


def _parts(V, H, F, L, M, attn_bias=True, seg=True, pos=True, ffn_b=2, mlm_out=True,
           mlm_ln=True, emb_ln=True, nproj=4, nsp_bias=True, pooler=True, blk_lns=2):
    emb = V * H + (2 * H if seg else 0) + (M * H if pos else 0) + (2 * H if emb_ln else 0)
    blk = nproj * (H * H + (H if attn_bias else 0))
    blk += H * F + F * H + (F if ffn_b >= 1 else 0) + (H if ffn_b >= 2 else 0)
    blk += blk_lns * 2 * H
    pool = (H * H + H) if pooler else 0
    mlm = H * H + H + (2 * H if mlm_ln else 0) + ((H * V + V) if mlm_out else 0)
    nsp = 2 * H + (2 if nsp_bias else 0)
    return emb + L * blk + pool + mlm + nsp


def C_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_numpy_int(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Returns a numpy.int64."""
    return np.int64(_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def O_by_linear_helper(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """The same count via small helpers."""
    H, F = num_hiddens, ffn_num_hiddens
    lin = lambda a, b: a * b + b
    ln = lambda h: 2 * h
    emb = vocab_size * H + 2 * H + max_len * H + ln(H)
    blk = 4 * lin(H, H) + lin(H, F) + lin(F, H) + 2 * ln(H)
    return emb + num_blks * blk + lin(H, H) + lin(H, H) + ln(H) + lin(H, vocab_size) + lin(H, 2)


def Q_float_exact(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Returns a float with the exact integer value (e.g. after a division by 1)."""
    return float(_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def W_no_attn_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, attn_bias=False)


def W_no_segment(V, H, F, L, M):
    return _parts(V, H, F, L, M, seg=False)


def W_no_position(V, H, F, L, M):
    return _parts(V, H, F, L, M, pos=False)


def W_one_ffn_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, ffn_b=1)


def W_tied_mlm(V, H, F, L, M):
    """Leaves out the MLM output layer."""
    return _parts(V, H, F, L, M, mlm_out=False)


def W_no_mlm_ln(V, H, F, L, M):
    return _parts(V, H, F, L, M, mlm_ln=False)


def W_no_emb_ln(V, H, F, L, M):
    return _parts(V, H, F, L, M, emb_ln=False)


def W_three_projections(V, H, F, L, M):
    return _parts(V, H, F, L, M, nproj=3)


def W_nsp_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M, nsp_bias=False)


def W_no_pooler(V, H, F, L, M):
    return _parts(V, H, F, L, M, pooler=False)


def W_one_ln_per_block(V, H, F, L, M):
    return _parts(V, H, F, L, M, blk_lns=1)


def W_ffn_is_4H(V, H, F, L, M):
    """Hard-codes the FFN width as 4H."""
    return _parts(V, H, 4 * H, L, M)


def W_ln_H_params(V, H, F, L, M):
    """Counts a LayerNorm as H parameters (forgets the bias)."""
    full = _parts(V, H, F, L, M)
    n_ln = 1 + 2 * L + 1
    return full - n_ln * H


def W_mlm_output_no_bias(V, H, F, L, M):
    return _parts(V, H, F, L, M) - V


def W_builds_model(V, H, F, L, M):
    """Builds the model and counts (the exercise says not to)."""
    import torch
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(V, H, F, 2, L, 0.0, max_len=M)
    return sum(p.numel() for p in m.parameters())


def W_segment_vocab_3(V, H, F, L, M):
    """Three segment embeddings."""
    return _parts(V, H, F, L, M) + H


def Q_torch_int(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Returns a 0-d int64 torch tensor (computed with torch ops)."""
    import torch
    return torch.tensor(_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def W_float_rounded(V, H, F, L, M):
    """Computes in float32 (torch), loses exactness on large counts."""
    import torch
    return float(torch.tensor(float(_parts(V, H, F, L, M)), dtype=torch.float32))
