"""Round 9 red team (writer B, issue 12), ch04_bahdanau_step: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round9/B/sols/ch04_bahdanau_step.py with the names W01_x written
W_01_x (O03b_neg_inf_nan_to_num written O_28_neg_inf_nan_to_num). tests/test_checks_redteam.py
runs every W_ entry (must fail) and every C_ and O_ entry (must pass). Accepted in round 9,
now rejected: W_18 (the mask transposed only when its shape differs: wrong when batch ==
encoder steps), W_20 (decoder.eval() inside the step), W_24 (the keys cached under
id(decoder), id(enc_outputs) and data_ptr: stale after an optimizer step on one batch).
S_ entries are not tested: S_16 (positions compared in the scores' dtype: wrong only past
256 steps in bfloat16, which the exercise does not ask for), S_25 (decoder.to(the inputs'
dtype): a no-op for inputs in the decoder's dtype, the only ones the exercise passes).
"""
# flake8: noqa
import copy
import torch
import torch.nn.functional as F
from book.attention import masked_softmax, AdditiveAttention

CHECK = "check_bahdanau_step"


def _finish(decoder, token, hidden_state, context, weights):
    emb = decoder.embedding(token)                              # (b, e)
    x = torch.cat([context, emb], dim=-1).unsqueeze(1)          # (b, 1, h+e)
    out, new_state = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def _scores(decoder, query, enc_outputs):
    att = decoder.attention
    q = att.W_q(query)                                          # (b, a)
    k = att.W_k(enc_outputs)                                    # (b, n, a)
    return att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)  # (b, n)


def _keep(enc_outputs, enc_valid_lens):
    pos = torch.arange(enc_outputs.shape[1], device=enc_outputs.device)
    return pos[None, :] < enc_valid_lens[:, None]


def C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_02_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_03_dense_on_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    w = torch.where(keep, w, torch.zeros((), dtype=w.dtype))
    w = torch.where(keep.any(-1, keepdim=True), w, torch.zeros((), dtype=w.dtype))
    # NaN rows above; the where() zeroes them (gradient may be NaN: judge)
    context = torch.einsum("bn,bnh->bh", w, enc_outputs)
    emb = decoder.embedding(token)
    _, new_state = decoder.rnn(torch.cat([context, emb], -1)[:, None], hidden_state)
    return decoder.dense(new_state[-1]), new_state, w


def O_04_clamp_lens_then_zero(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens.clamp(min=1))
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    w = w * (enc_valid_lens > 0)[:, None].to(w.dtype)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_01_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[0], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_02_fill_minus_1e6_uniform_on_empty(decoder, token, hidden_state, enc_outputs,
                                        enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e6), dim=-1)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_28_neg_inf_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.nan_to_num(torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_04_emb_first(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = decoder.embedding(token)
    out, st = decoder.rnn(torch.cat([emb, context], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze(1)), st, w


_KCACHE = {}


def W_05_keys_cached_by_shape(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "the keys are the same at every step": W_k(enc_outputs) computed once per shape
    key = (tuple(enc_outputs.shape), enc_outputs.dtype)
    if key not in _KCACHE:
        _KCACHE[key] = decoder.attention.W_k(enc_outputs)
    k = _KCACHE[key]
    q = decoder.attention.W_q(hidden_state[-1])
    s = decoder.attention.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_06_keys_cached_on_decoder_by_identity(decoder, token, hidden_state, enc_outputs,
                                           enc_valid_lens):
    # cache on the decoder, keyed on the identity of enc_outputs: stale after the
    # decoder's weights change (a training step, decoder.double())
    c = getattr(decoder, "_k_cache", None)
    if c is None or c[0] is not enc_outputs:
        c = (enc_outputs, decoder.attention.W_k(enc_outputs))
        decoder._k_cache = c
    k = c[1]
    q = decoder.attention.W_q(hidden_state[-1])
    s = decoder.attention.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_07_mask_from_max_valid_len(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # masks beyond the batch's longest length only (as if all were equally long)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    L = int(enc_valid_lens.max())
    w = torch.zeros_like(s)
    w[:, :L] = torch.softmax(s[:, :L], dim=-1)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_08_weights_returned_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, st, w = C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, st, w.detach()


def W_09_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # a fill that fits float16; the masked keys leak when scores are large
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e4), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_10_float16_fill_minus_1e9(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -1e9 is -inf in float16: an empty row gives NaN, NaN * 0 stays NaN
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e9), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_11_where_after_neg_inf(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # values right; NaN gradient from the empty rows
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    w = torch.where(keep, w, torch.zeros((), dtype=w.dtype))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_12_class_forward(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # calls AdditiveAttention.forward through the class: forbidden by the text
    context = AdditiveAttention.forward(decoder.attention, hidden_state[-1].unsqueeze(1),
                                        enc_outputs, enc_outputs, enc_valid_lens)
    w = decoder.attention.attention_weights.squeeze(1)
    return _finish(decoder, token, hidden_state, context.squeeze(1), w)


def W_13_functional_call(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from torch.func import functional_call
    att = decoder.attention
    params = dict(att.named_parameters())
    context = functional_call(att, params, (hidden_state[-1].unsqueeze(1), enc_outputs,
                                            enc_outputs, enc_valid_lens))
    w = att.attention_weights.squeeze(1)
    return _finish(decoder, token, hidden_state, context.squeeze(1), w)


def W_14_sigmoid_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.sigmoid(s) * keep
    w = w / w.sum(-1, keepdim=True).clamp(min=1e-12)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_15_inplace_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, st, w = C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    if not hidden_state.requires_grad:
        hidden_state.copy_(st.detach())      # "update the state in place"
        return logits, hidden_state, w
    return logits, st, w


def S_16_positions_in_score_dtype(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    # positions in the scores' dtype: float16/bfloat16 round them
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    pos = torch.arange(enc_outputs.shape[1], dtype=s.dtype)
    keep = pos[None, :] < enc_valid_lens[:, None].to(s.dtype)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_17_query_mean_over_layers(decoder, token, hidden_state, enc_outputs,
                                             enc_valid_lens):
    # queries W_q(s) computed on the mean over layers
    s = _scores(decoder, hidden_state.mean(0), enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_18_softmax_over_batch_axis_when_n_eq_b(decoder, token, hidden_state, enc_outputs,
                                            enc_valid_lens):
    # scores laid out (n, b) by a transpose, softmax over dim 0 (right), but the mask is
    # built (b, n) and transposed only when the shape needs it
    s = _scores(decoder, hidden_state[-1], enc_outputs).T          # (n, b)
    keep = _keep(enc_outputs, enc_valid_lens)                       # (b, n)
    if keep.shape != s.shape:
        keep = keep.T
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=0) * keep
    w = w.T
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_19_dropout_on_weights_always(decoder, token, hidden_state, enc_outputs,
                                        enc_valid_lens):
    # reuses the dropout-free path but with the attention's dropout on the weights kept
    # after eval, via F.dropout(training=True)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    p = decoder.attention.dropout.p
    context = torch.bmm(F.dropout(w, p, training=True).unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_20_sets_eval(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    decoder.eval()   # "dropout does nothing in eval mode": switches the caller's model
    return C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_21_renorm_after_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s, dim=-1) * keep
    w = w / w.sum(-1, keepdim=True).clamp(min=torch.finfo(w.dtype).tiny)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_23_clamp_valid_lens_inplace(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    empty = enc_valid_lens == 0
    enc_valid_lens.clamp_(min=1)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1)
    w = w * (~empty)[:, None]
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


_ID_CACHE = {}


def W_24_keys_cached_by_ids(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # W_k(enc_outputs) cached per (decoder, enc_outputs) object: stale once the weights
    # change (a training step on the same batch) or enc_outputs is edited in place
    key = (id(decoder), id(enc_outputs), enc_outputs.data_ptr())
    if key not in _ID_CACHE or _ID_CACHE[key][0] is not enc_outputs:
        _ID_CACHE[key] = (enc_outputs, decoder.attention.W_k(enc_outputs))
    k = _ID_CACHE[key][1]
    q = decoder.attention.W_q(hidden_state[-1])
    s = decoder.attention.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def S_25_casts_decoder_to_input(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    decoder.to(enc_outputs.dtype)
    return C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def O_26_no_mask_when_all_full(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    # skips the mask when no sequence is padded; pads wrongly when lengths exceed steps
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    if bool((enc_valid_lens >= enc_outputs.shape[1]).all()):
        w = torch.softmax(s, dim=-1)
    else:
        keep = _keep(enc_outputs, enc_valid_lens)
        w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_27_weights_view_of_buffer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # the weights are written into a buffer kept on the function between calls
    logits, st, w = C_01_ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    buf = getattr(W_27_weights_view_of_buffer, "buf", None)
    if buf is None or buf.shape != w.shape or buf.dtype != w.dtype:
        buf = torch.empty_like(w.detach())
        W_27_weights_view_of_buffer.buf = buf
    return logits, st, buf.copy_(w)
