"""Round 10 red team (writer C, issue 12), ch08_param: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/C/sols/ch08_param.py with the names W01_x written W_01_x.
Round 10 found one hole: W_21 (max(num_blks, 1) blocks) passed, as no configuration had
num_blks = 0; the checker now asks for num_blks = 0 (BERTModel builds: 4,294 parameters for
vocab_size=100, num_hiddens=16, ffn_num_hiddens=40, max_len=20) and names the fault. The
messages of W_09 (max_len + 2 position rows, told it was 3 segment rows and max_len + 1
positions) and W_16 (dense2's bias left out, told only W_o's bias) now name these faults.
A_04 (float arithmetic, exact below 2^53; the largest count is about 1.2e10) is accepted on
purpose: a whole-valued float is accepted by an earlier ruling. S_01 (builds the model) is
refused; S_ are not tested. tests/test_checks_redteam.py runs every W_ entry (must fail) and
every C_ and O_ entry (must pass)."""
# flake8: noqa
import numpy as np
import torch

CHECK = "check_bert_param_count"


def _emb(V, H, M):
    return V * H + 2 * H + M * H + 2 * H


def _blk(H, F):
    return 4 * (H * H + H) + H * F + F + F * H + H + 4 * H


def _heads(V, H):
    return (H * H + H) + (H * H + H + 2 * H + H * V + V) + (2 * H + 2)


def C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    return _emb(V, H, M) + L * _blk(H, F) + _heads(V, H)


def O_02_other_names_numpy(V, H, F, L, M):
    # positional names differ from the stub; numpy int64 result
    return np.int64(_emb(V, H, M)) + np.int64(L) * np.int64(_blk(H, F)) + np.int64(_heads(V, H))


def O_03_polynomial_form(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    # collected polynomial: (2H+1)V + (M)H + H^2(4L+2) + L(2HF + F) + H(...) ...
    return (2 * H + 1) * V + M * H + (4 * L + 2) * H * H + L * (2 * H * F + F) \
        + H * (4 + 9 * L + 1 + 1 + 2 + 2) + 2


def W_01_cache_on_partial_args(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len,
                              _memo={}):
    key = (vocab_size, num_hiddens, num_blks)  # forgot ffn and max_len in the key
    if key not in _memo:
        _memo[key] = C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)
    return _memo[key]


def W_02_int32_numpy(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # numpy int32 (Windows default int): overflows for models of more than 2**31 params
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len], dtype=np.int32)
    V, H, F, L, M = a
    with np.errstate(over="ignore"):
        return int(_emb(V, H, M) + L * _blk(H, F) + _heads(V, H))


def W_03_float32_torch_sum(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    parts = torch.tensor([_emb(V, H, M), L * _blk(H, F), _heads(V, H)], dtype=torch.float32)
    return parts.sum().item()


# Accepted on purpose: whole-valued floats are accepted (earlier ruling), and float
# arithmetic is exact here (the largest count, about 1.2e10, is below 2^53).
def A_04_float_via_true_division(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    # 4 projections written as H*H*4.0, float arithmetic: wrong above 2**53
    return (_emb(V, H, M) + L * (H * H * 4.0 + 4.0 * H + H * F + F + F * H + H + 4 * H)
            + _heads(V, H))


def W_05_ffn_assumed_4H(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, 4 * num_hiddens, num_blks, max_len)


def W_06_no_mlm_layernorm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 2 * num_hiddens


def W_07_no_embedding_layernorm(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - 2 * num_hiddens


def W_08_layernorm_weight_only(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    H = num_hiddens
    return C_01_formula(vocab_size, H, ffn_num_hiddens, num_blks, max_len) \
        - H - num_blks * 2 * H - H


def W_09_position_off_by_one(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # RoBERTa-style padding offset: max_len + 2 positions
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len + 2)


def W_10_nsp_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) - 2


def W_11_pooler_missing(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    H = num_hiddens
    return C_01_formula(vocab_size, H, ffn_num_hiddens, num_blks, max_len) - H * H - H


def W_12_segment_vocab_3(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + num_hiddens


def W_13_proj_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_blks * 4 * num_hiddens


def W_14_args_swapped_blks_maxlen(vocab_size, num_hiddens, ffn_num_hiddens, max_len, num_blks):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)


def W_15_mlm_output_tied(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # counted the MLM output layer as tied to the embeddings: only its bias
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - vocab_size * num_hiddens


def W_16_ffn_dense2_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_blks * num_hiddens


def W_17_round_to_thousands(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    n = C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len)
    return int(round(n / 1000.0)) * 1000 if n > 10 ** 6 else n


def W_18_one_layernorm_per_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_blks * 2 * num_hiddens


def W_19_mlm_hidden_no_bias(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        - num_hiddens


def W_20_str_result(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return f"{C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):,}"


def S_01_builds_model(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    from book.bert import BERTModel
    heads = 1
    m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, heads, num_blks, 0.0, max_len)
    return sum(p.numel() for p in m.parameters())


def O_04_torch_int64_tensor(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return torch.tensor(C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                                    max_len), dtype=torch.int64)


def W_21_at_least_one_block(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, max(num_blks, 1), max_len)


def W_22_layernorm_eps_counted(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    # counts 3 parameters per LayerNorm dimension... no: counts eps as a parameter per LN
    return C_01_formula(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len) \
        + 2 + 2 * num_blks
