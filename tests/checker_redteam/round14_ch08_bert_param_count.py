"""Round 14 red team (writer D, issue 12), ch08_bert_param_count: wrong (W_), right (C_), odd but
right (O_) and accepted-on-purpose (A_) solutions written from the exercise text alone; copied
from /work/redteam/round14/D/sols/ch08_bert_param_count.py (the writer's header: Round 14, writer D, check_bert_param_count: wrong formulas by new mechanisms (precision, integer widths, special cases).).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ entries are not tested (each says why). Holes fixed: none. A_04, A_06 and A_17 (float64 arithmetic, wrong only
above 2**53 parameters) are accepted by the lead's ruling: beyond any case, no realistic
configuration reaches 2**53. A_21 (BERTModel on the meta device) is rejected by the checker,
as the text asks (no model built)."""
# flake8: noqa
import math

import numpy as np
import torch

CHECK = "check_bert_param_count"


def _exact(V, H, F, L, M):
    emb = V * H + 2 * H + M * H + 2 * H
    blk = 4 * (H * H + H) + (H * F + F) + (F * H + H) + 4 * H
    pooler = H * H + H
    mlm = (H * H + H) + 2 * H + (H * V + V)
    nsp = 2 * H + 2
    return emb + L * blk + pooler + mlm + nsp


def C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _exact(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def C_02_factored(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return H * (2 * V + M + 2 * H + 10) + V + 2 + L * (4 * H * H + 2 * H * F + 9 * H + F)


def O_03_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Right: numpy int64 arithmetic (exact far beyond BERT sizes), returned as int."""
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len], dtype=np.int64)
    return int(_exact(*a))


def A_04_math_pow(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """math.pow(H, 2) makes the whole sum a float: wrong above 2**53 parameters
    (e.g. V = 10**12, H = 10**4). Accepted (lead's ruling,
    round 14): beyond any case, no realistic configuration has 2**53 parameters."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return (V * H + 4 * H + M * H + L * (4 * math.pow(H, 2) + 9 * H + 2 * H * F + F)
            + math.pow(H, 2) + H + math.pow(H, 2) + 3 * H + H * V + V + 2 * H + 2)


def W_05_torch_int32(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """int32 tensors: wraps above 2**31 parameters (e.g. V = 250000, H = 4096, 32 blocks)."""
    a = torch.tensor([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len],
                     dtype=torch.int32)
    return int(_exact(*a))


def A_06_float64_numpy(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """np.float64 arithmetic (np.prod of float arrays): wrong above 2**53. Accepted (lead's ruling,
    round 14): beyond any case, no realistic configuration has 2**53 parameters."""
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len],
                 dtype=np.float64)
    return float(_exact(*a))


def W_07_float32(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """torch float32 tensors: wrong above 2**24."""
    a = torch.tensor([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len],
                     dtype=torch.float32)
    return _exact(*a).item()


def W_08_no_pos(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Forgets the learned position embeddings (max_len * H)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - max_len * num_hiddens


def W_09_tied(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts the MLM output weight as tied to the token embeddings (V * H less)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size * num_hiddens


def W_10_no_mlm_out_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Leaves out the MLM output layer's bias (V)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size


def W_11_attention_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Attention projections without bias (the chapter-7 default use_bias=False)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 4 * num_hiddens * num_blks


def W_12_segment_three(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Three segment embeddings (counts a padding segment)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + num_hiddens


def W_13_max_len_plus_one(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Position table of max_len + 1 rows."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len + 1)


def W_14_ffn_4h(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Assumes ffn_num_hiddens = 4 H."""
    return C_01_reference(vocab_size, num_hiddens, 4 * num_hiddens, num_blks, max_len)


def W_15_no_mlm_ln(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Forgets the MLM head's LayerNorm (2H)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 2 * num_hiddens


def W_16_one_block_ln(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """One LayerNorm per block instead of two (pre-LN thinking)."""
    return C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 2 * num_hiddens * num_blks


def A_17_int_of_float_div(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts heads' share as H * H / 1 then int(): float above 2**53 (V = 2**45, H = 2**10). Accepted (lead's ruling,
    round 14): beyond any case, no realistic configuration has 2**53 parameters."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return int(_exact(V, H, F, L, M) / 1.0)


def W_18_cached_by_sum(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """lru-style cache keyed on the sum of the arguments: (V, H, F, L, M) and a permutation
    with the same sum share one answer."""
    key = vocab_size + num_hiddens + ffn_num_hiddens + num_blks + max_len
    cache = W_18_cached_by_sum.__dict__.setdefault("cache", {})
    if key not in cache:
        cache[key] = _exact(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)
    return cache[key]


def W_19_zero_blocks_special(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Treats num_blks = 0 as 1 (max(num_blks, 1))."""
    return _exact(vocab_size, num_hiddens, ffn_num_hiddens, max(num_blks, 1), max_len)


def W_20_builds_meta_wrong(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds the model on the meta device (forbidden by the text) with the d2l default
    use_bias=False blocks: the attention biases are missing."""
    from book.transformer import TransformerEncoderBlock
    with torch.device("meta"):
        blk = TransformerEncoderBlock(num_hiddens, ffn_num_hiddens, 1, 0.0)
    per = sum(p.numel() for p in blk.parameters())
    V, H, M = vocab_size, num_hiddens, max_len
    return V * H + 4 * H + M * H + num_blks * per + H * H + H + H * H + 3 * H + H * V + V \
        + 2 * H + 2


def A_21_builds_meta_right(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Builds BERTModel on the meta device (the text says 'do not build the model'), right
    numbers: reported only."""
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def W_22_numpy_int32_prod(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """np.int32 (Windows' default C long in NumPy < 2): wraps above 2**31."""
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len], dtype=np.int32)
    with np.errstate(over="ignore"):
        return int(_exact(*a))
