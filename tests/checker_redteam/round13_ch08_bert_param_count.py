"""Round 13 red team (writer D, issue 12), ch08_bert_param_count: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round13/D/sols/ch08_bert_param_count.py (the writer's header: parameters of book.bert.BERTModel by formula.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: W_18 (LayerNorms
counted as 4 x (H // 2)) and W_23 (projections counted head by head, 4 heads of H // 4) by
a configuration with num_hiddens=15 (odd, not a multiple of 4), whose hint names the
rounding of num_hiddens."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_bert_param_count"


def _parts(V, H, F, L, M):
    emb = V * H + 2 * H + M * H + 2 * H
    blk = 4 * (H * H + H) + (H * F + F) + (F * H + H) + 2 * 2 * H
    pooler = H * H + H
    mlm = (H * H + H) + 2 * H + (H * V + V)
    nsp = 2 * H + 2
    return emb, blk, pooler, mlm, nsp


def C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    emb, blk, pooler, mlm, nsp = _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)
    return emb + num_blks * blk + pooler + mlm + nsp


def C_02_expanded(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return (2 * V * H + V + (M + 2) * H + 4 * H + L * (4 * H * H + 2 * H * F + F + 9 * H)
            + 2 * H * H + 4 * H + 2)


def O_03_meta_model(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds nothing real: counts shapes by formula per module list (odd but right)."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    shapes = [(V, H), (2, H), (M, H), (H,), (H,)]
    for _ in range(L):
        shapes += [(H, H), (H,)] * 4 + [(F, H), (F,), (H, F), (H,), (H,), (H,), (H,), (H,)]
    shapes += [(H, H), (H,), (H, H), (H,), (H,), (H,), (V, H), (V,), (2, H), (2,)]
    return sum(int(np.prod(s)) for s in shapes)


def _wrong(delta):
    def f(V, H, F, L, M):
        return C_01_reference(V, H, F, L, M) + delta(V, H, F, L, M)
    return f


def W_04_no_embedding_ln(V, H, F, L, M):
    """d2l's BERTEncoder: no LayerNorm on the embedding sum (-2H); any sizes."""
    return C_01_reference(V, H, F, L, M) - 2 * H


def W_05_no_proj_bias(V, H, F, L, M):
    """Chapter 7's default use_bias=False: attention projections without bias (-4H per block)."""
    return C_01_reference(V, H, F, L, M) - 4 * H * L


def W_06_no_nsp_bias(V, H, F, L, M):
    """NSP head counted as 2H (no bias): -2; any sizes."""
    return C_01_reference(V, H, F, L, M) - 2


def W_07_ffn_4h(V, H, F, L, M):
    """FFN width taken as 4H (BERT's convention) instead of ffn_num_hiddens: wrong when F != 4H."""
    return C_01_reference(V, H, 4 * H, L, M)


def W_08_max_len_512(V, H, F, L, M):
    """Position table hard-coded at 512 rows: wrong when max_len != 512."""
    return C_01_reference(V, H, F, L, 512)


def W_09_int32_numpy(V, H, F, L, M):
    """Arithmetic in np.int32 (Windows' default numpy int): overflows past 2^31 parameters,
    e.g. V=50000, H=8192, F=32768, L=40, M=2048."""
    V, H, F, L, M = (np.int32(x) for x in (V, H, F, L, M))
    with np.errstate(over="ignore"):
        emb = V * H + np.int32(2) * H + M * H + np.int32(2) * H
        blk = np.int32(4) * (H * H + H) + (H * F + F) + (F * H + H) + np.int32(4) * H
        rest = (H * H + H) + (H * H + H) + np.int32(2) * H + (H * V + V) + np.int32(2) * H + np.int32(2)
        return int(emb + L * blk + rest)


def W_10_float32(V, H, F, L, M):
    """Computed in float32 (torch.tensor of floats): exact only below 2^24 parameters; a
    BERT-base-sized count is off by a few."""
    t = torch.tensor(float(C_01_reference(V, H, F, L, M)), dtype=torch.float32)
    return float(t)


def W_11_no_mlm_ln(V, H, F, L, M):
    """MLM head's LayerNorm forgotten (-2H)."""
    return C_01_reference(V, H, F, L, M) - 2 * H


def W_12_mlm_tied(V, H, F, L, M):
    """MLM output weight counted as tied to the token embedding (-V*H): BERTModel does not tie."""
    return C_01_reference(V, H, F, L, M) - V * H


def W_13_mlm_hidden_ffn(V, H, F, L, M):
    """MLM hidden layer sized H -> F (like the FFN) instead of H -> H: wrong when F != H."""
    return C_01_reference(V, H, F, L, M) - (H * H + H) + (H * F + F) - 2 * H + 2 * F - (H * V) + F * V


def W_14_one_ln_per_block(V, H, F, L, M):
    """One LayerNorm per block instead of two (-2H per block)."""
    return C_01_reference(V, H, F, L, M) - 2 * H * L


def W_15_segments_three(V, H, F, L, M):
    """Segment table of 3 rows (+H)."""
    return C_01_reference(V, H, F, L, M) + H


def W_16_no_pooler(V, H, F, L, M):
    """Pooler forgotten (-(H*H + H))."""
    return C_01_reference(V, H, F, L, M) - (H * H + H)


def W_17_specials_not_predicted(V, H, F, L, M):
    """MLM output over V - 5 ids (specials are never predicted): -5H - 5."""
    return C_01_reference(V, H, F, L, M) - 5 * (H + 1)


def W_18_ln_half(V, H, F, L, M):
    """Each LayerNorm counted as 4*(H//2) (written for even H): wrong for odd H."""
    n_ln = 1 + 2 * L + 1
    return C_01_reference(V, H, F, L, M) - n_ln * 2 * H + n_ln * 4 * (H // 2)


def W_19_blocks_minus_one(V, H, F, L, M):
    """(L - 1) blocks plus a 'first block' counted with the embeddings... but the first
    block's counting uses max(L, 1): wrong for num_blks = 0 (counts one block)."""
    emb, blk, pooler, mlm, nsp = _parts(V, H, F, L, M)
    return emb + max(L, 1) * blk + pooler + mlm + nsp


def W_20_float_rounded(V, H, F, L, M):
    """Float arithmetic with a /2*2 on the LayerNorms: float64 is exact to 2^53, but
    written as round(x, -1) for 'readability' -> off unless the count ends in 0."""
    return round(C_01_reference(V, H, F, L, M), -1)


def W_21_tensor_result(V, H, F, L, M):
    """Returns a float32 0-d tensor (torch.tensor(count, dtype=float)): rounded above 2^24."""
    return torch.tensor(C_01_reference(V, H, F, L, M), dtype=torch.float32)


def W_22_position_max_len_plus_special(V, H, F, L, M):
    """Position table of max_len + 2 rows ([CLS] and [SEP] thought extra): +2H."""
    return C_01_reference(V, H, F, L, M) + 2 * H


def W_23_heads_of_four(V, H, F, L, M):
    """Projections counted head by head with 4 heads of H // 4 columns each (the chapter's
    num_heads=4): 4 * (H * 4 * (H // 4) + H) per block, wrong when H % 4 != 0 (e.g. H=30)."""
    emb, blk, pooler, mlm, nsp = _parts(V, H, F, L, M)
    blk = blk - 4 * (H * H + H) + 4 * (H * 4 * (H // 4) + H)
    return emb + L * blk + pooler + mlm + nsp
