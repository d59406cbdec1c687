"""Round 5 red team (writer R5-B, issue 12), ch08_bert_param_count: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone; copied
from /work/redteam/round5/B/sols/ch08_bert_param_count.py with the names W01_x written W_01_x. Wrong ones the
checker accepts on purpose are named A_ (not tested), with the reason beside them.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass)."""
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
    return dict(emb=emb, blk=blk, L=L, pooler=pooler, mlm=mlm, nsp=nsp)


def _total(p):
    return p["emb"] + p["L"] * p["blk"] + p["pooler"] + p["mlm"] + p["nsp"]


def C_01_reference(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    return _total(_parts(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len))


def O_02_numpy_int64(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    a = np.array([vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len], np.int64)
    V, H, F, L, M = a
    return (V * H + 2 * H + M * H + 2 * H + L * (4 * H * H + 4 * H + 2 * H * F + F + H + 4 * H)
            + H * H + H + H * H + 3 * H + H * V + V + 2 * H + 2)


def O_03_collected(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    V, H, F, L, M = vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len
    # polynomial collected by hand
    return (2 * V * H + V + M * H + 2 * H * H + 10 * H + 2
            + L * (4 * H * H + 2 * H * F + 9 * H + F))


def W_01_no_position(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["emb"] -= M * H; return _total(p)


def W_02_no_segment(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["emb"] -= 2 * H; return _total(p)


def W_03_no_embedding_ln(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["emb"] -= 2 * H; return _total(p) + 0 * V


def W_04_attention_no_bias(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["blk"] -= 4 * H; return _total(p)


def W_05_one_ln_per_block(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["blk"] -= 2 * H; return _total(p)


def W_06_no_pooler(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["pooler"] = 0; return _total(p)


def W_07_mlm_no_ln(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["mlm"] -= 2 * H; return _total(p)


def W_08_mlm_output_no_bias(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["mlm"] -= V; return _total(p)


def W_09_nsp_no_bias(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["nsp"] -= 2; return _total(p)


def W_10_tied_output(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["mlm"] -= V * H; return _total(p)


def W_11_ffn_is_4h(V, H, F, L, M):
    return _total(_parts(V, H, 4 * H, L, M))


def W_12_max_len_512(V, H, F, L, M):
    return _total(_parts(V, H, F, L, 512))


def W_13_float32_arithmetic(V, H, F, L, M):
    # torch float32 scalars: not exact above 2**24
    t = torch.tensor([V, H, F, L, M], dtype=torch.float32)
    V, H, F, L, M = t
    return int(V * H + 2 * H + M * H + 2 * H + L * (4 * (H * H + H) + H * F + F + F * H + H
               + 4 * H) + H * H + H + H * H + H + 2 * H + H * V + V + 2 * H + 2)


def W_14_int32(V, H, F, L, M):
    a = np.array([V, H, F, L, M], np.int32)
    V, H, F, L, M = a
    with np.errstate(over="ignore"):
        return int(V * H + 2 * H + M * H + 2 * H + L * (4 * H * H + 4 * H + 2 * H * F + F + H
                   + 4 * H) + H * H + H + H * H + 3 * H + H * V + V + 2 * H + 2)


def W_15_swapped_args(V, H, F, L, M):
    # learner's signature order (vocab, hiddens, blks, ffn, max_len) differs from the call
    return _total(_parts(V, H, L, F, M))


def W_16_three_segments(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["emb"] += H; return _total(p)


def W_17_ffn_one_bias(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["blk"] -= H; return _total(p)


def W_18_mlm_hidden_missing(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["mlm"] -= H * H + H; return _total(p)


# Accepted on purpose: a float equal to the right count (6782.0) is the right number; only a
# float that is rounded (float32 above 2^24) is refused, with its own message.
def A_19_float_result(V, H, F, L, M):
    return float(_total(_parts(V, H, F, L, M)))


def W_20_nsp_on_vocab(V, H, F, L, M):
    # NSP head counted as a second layer H->H then H->2 (pooler counted twice)
    p = _parts(V, H, F, L, M); p["nsp"] += H * H + H; return _total(p)


def S_01_builds_model(vocab_size, num_hiddens, ffn_num_hiddens, num_blks, max_len):
    from book.bert import BERTModel, num_params
    with torch.device("meta"):
        m = BERTModel(vocab_size, num_hiddens, ffn_num_hiddens, 1, num_blks, 0.0, max_len)
    return num_params(m)


def W_21_round_to_millions(V, H, F, L, M):
    return round(_total(_parts(V, H, F, L, M)), -3)


def W_22_positions_max_len_minus_1(V, H, F, L, M):
    p = _parts(V, H, F, L, M); p["emb"] -= H; return _total(p) + 0


def W_23_ffn_both_biases_F(V, H, F, L, M):
    # both FFN biases counted with the FFN's hidden size
    p = _parts(V, H, F, L, M); p["blk"] += F - H; return _total(p)


def W_24_ln_counted_H(V, H, F, L, M):
    # every LayerNorm counted as H parameters (weight only)
    p = _parts(V, H, F, L, M)
    p["emb"] -= H; p["blk"] -= 2 * H; p["mlm"] -= H
    return _total(p)
