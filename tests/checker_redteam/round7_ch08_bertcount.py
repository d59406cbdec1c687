"""Round 7 red team (writer R7-C, issue 12), ch08_bertcount: wrong (W_), right (C_), odd but right (O_)
and against-the-wording (S_) solutions written from the exercise text alone; copied from
/work/redteam/round7/C/sols/ch08_bertcount.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
# flake8: noqa
import functools
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


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    emb, blk, pooler, mlm, nsp = _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                        max_len)
    return emb + num_blks * blk + pooler + mlm + nsp


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """The same formula in numpy int64 arithmetic (returns np.int64)."""
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len],
                 dtype=np.int64)
    V, H, F, L, M = a
    return (V * H + 4 * H + M * H) + L * (4 * H * H + 2 * H * F + F + 9 * H) \
        + (H * H + H) + (H * H + 3 * H + H * V + V) + (2 * H + 2)


def O_03_expanded_polynomial(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Collected by powers of H: 2VH + V + (L*4+2)H^2 + ... (keyword-free)."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return 2 * V * H + V + (4 * L + 2) * H * H + 2 * L * H * F + L * F \
        + (9 * L + M + 10) * H + 2


def S_04_builds_model_on_meta(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Right count, but builds the model (on meta), which the exercise forbids."""
    from book.bert import BERTModel
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def W_01_no_qkvo_biases(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Chapter 7's block has use_bias=False by default: forgets BERT's 4H biases/block."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_blks * 4 * num_hiddens


def W_02_no_embedding_layernorm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 2 * num_hiddens


def W_03_ffn_assumed_4H(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, 4 * num_hiddens, num_blks, max_len)


def W_04_per_head_of_64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts Q, K, V, O per head of size 64: exact only when H is a multiple of 64."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    heads = max(H // 64, 1)
    attn = 4 * heads * (H * 64 + 64)
    blk = attn + (H * F + F) + (F * H + H) + 4 * H
    emb = V * H + 2 * H + M * H + 2 * H
    return emb + L * blk + (H * H + H) + (H * H + 3 * H + H * V + V) + 2 * H + 2


def W_05_float32_torch(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """The formula in float32 torch arithmetic: counts above 2**24 get rounded."""
    V, H, F, L, M = (torch.tensor(float(x)) for x in
                     (vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))
    total = (V * H + 4 * H + M * H) + L * (4 * H * H + 2 * H * F + F + 9 * H) \
        + (H * H + H) + (H * H + 3 * H + H * V + V) + (2 * H + 2)
    return int(total.item())


def W_06_mlm_output_tied(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts the MLM output layer as tied to the embeddings (only its bias)."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size * num_hiddens


def W_07_positions_max_len_plus_one(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                   max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len + 1)


def W_08_three_segments(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + num_hiddens


_EMB = {}


def W_09_embeddings_cached_by_vocab(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                   max_len):
    """Caches the embedding count keyed on (vocab_size, num_hiddens): a new max_len reuses
    the old count."""
    key = (vocab_size, num_hiddens)
    if key not in _EMB:
        _EMB[key] = _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)[0]
    _, blk, pooler, mlm, nsp = _parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                      max_len)
    return _EMB[key] + num_blks * blk + pooler + mlm + nsp


def W_10_one_layernorm_per_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_blks * 2 * num_hiddens


def W_11_layernorm_counted_H(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Counts every LayerNorm as H parameters (forgets the bias)."""
    n_ln = 1 + 2 * num_blks + 1
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - n_ln * num_hiddens


def W_12_no_pooler(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_hiddens * num_hiddens - num_hiddens


def W_13_ffn_output_bias_F(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """The FFN's second Linear(F, H) counted with F biases instead of H."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + num_blks * (ffn_num_hiddens - num_hiddens)


def W_14_mlm_head_no_hidden_bias_and_vocab_bias(vocab_size, num_hiddens, ffn_num_hiddens,
                                               num_blks, max_len):
    """MLM output over the vocabulary counted without its bias (V fewer)."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size


@functools.lru_cache(maxsize=None)
def O_05_lru_cached(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def O_06_ffn_via_exact_division(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Odd but exact: the FFN total over all blocks divided back by num_blks."""
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    per_blk_ffn = (2 * H * F * L + F * L) // L if L else 0
    emb, blk, pooler, mlm, nsp = _parts(V, H, F, L, M)
    blk_wo_ffn = blk - (2 * H * F + F)
    return emb + L * (blk_wo_ffn + per_blk_ffn) + pooler + mlm + nsp


def O_07_float_result(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """Exact value as a float (true division by 1.0 somewhere): 1.3e8 is exact in float64."""
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) / 1


def W_16_numpy_int32(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """numpy int32 arithmetic (numpy < 2 on Windows): wraps around above 2**31."""
    V, H, F, L, M = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len],
                             dtype=np.int32)
    return (V * H + 4 * H + M * H) + L * (4 * H * H + 2 * H * F + F + 9 * H) \
        + (H * H + H) + (H * H + 3 * H + H * V + V) + (2 * H + 2)


def S_08_renamed_parameters(V, H, F, L, M):
    """The stub's parameter names replaced by single letters (fails keyword calls)."""
    return C_01_formula(V, H, F, L, M)


def O_09_torch_int64_tensor(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    """The formula in torch int64 arithmetic: returns a 0-dim int64 tensor."""
    V, H, F, L, M = (torch.tensor(x, dtype=torch.int64) for x in
                     (vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))
    return (V * H + 4 * H + M * H) + L * (4 * H * H + 2 * H * F + F + 9 * H) \
        + (H * H + H) + (H * H + 3 * H + H * V + V) + (2 * H + 2)
