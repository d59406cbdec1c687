"""Round 5 red team (writer A, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round5/A/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
"""
# flake8: noqa
import torch
import torch.nn.functional as F

CHECK = "check_bahdanau_step"


def _scores(att, query, enc_outputs, key_layer=None, tanh=True):
    key_layer = key_layer or att.W_k
    f = att.W_q(query).unsqueeze(1) + key_layer(enc_outputs)      # (b, n, a)
    if tanh:
        f = torch.tanh(f)
    return att.w_v(f).squeeze(-1)                                 # (b, n)


def _weights(scores, enc_valid_lens, fill=None, op="lt"):
    n = scores.shape[-1]
    pos = torch.arange(n, device=scores.device)
    keep = pos < enc_valid_lens[:, None] if op == "lt" else pos <= enc_valid_lens[:, None]
    f = torch.finfo(scores.dtype).min if fill is None else fill
    w = torch.softmax(scores.masked_fill(~keep, f), -1)
    return w * keep if fill is None else w


def _finish(decoder, token, hidden_state, context, weights, order="ce"):
    emb = decoder.embedding(token)                                # (b, e)
    x = torch.cat([context, emb] if order == "ce" else [emb, context], -1).unsqueeze(1)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, weights


def C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_02_bmm_book_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from book.attention import masked_softmax
    att = decoder.attention
    q = hidden_state[-1].unsqueeze(1)                              # (b, 1, h)
    s = att.w_v(torch.tanh(att.W_q(q).unsqueeze(2) + att.W_k(enc_outputs).unsqueeze(1)))
    w = masked_softmax(s.squeeze(-1), enc_valid_lens)              # (b, 1, n)
    context = torch.bmm(w, enc_outputs)                            # (b, 1, h)
    x = torch.cat([context, decoder.embedding(token).unsqueeze(1)], -1)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), new_h, w[:, 0]


def O_03_dense_on_new_top_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.einsum("bn,bnh->bh", w, enc_outputs)
    x = torch.cat([context, decoder.embedding(token)], -1).unsqueeze(1)
    _, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(new_h[-1]), new_h, w


def W_01_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[0], enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_02_cat_order_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w,
                   order="ec")


def W_03_no_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = torch.softmax(_scores(att, hidden_state[-1], enc_outputs), -1)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_04_d2l_minus_1e6(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens, fill=-1e6)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_05_weights_keep_step_axis(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    out = C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return out[0], out[1], out[2].unsqueeze(1)


def W_06_additive_inf_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device) < enc_valid_lens[:, None]
    bias = torch.zeros_like(s).masked_fill(~keep, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s + bias, -1))
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_07_values_are_projected_keys(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state,
                   (w.unsqueeze(-1) * att.W_k(enc_outputs)).sum(1), w)


def W_08_functional_dropout(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = (F.dropout(w, 0.2).unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_09_off_by_one_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens, op="le")
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_10_detached_encoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    e = enc_outputs.detach()
    w = _weights(_scores(att, hidden_state[-1], e), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * e).sum(1), w)


def W_11_no_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs, tanh=False), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_12_W_q_for_keys(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs, key_layer=att.W_q), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_13_returns_old_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, _, w = C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, hidden_state, w


def W_14_updates_state_in_place(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new_h, w = C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    with torch.no_grad():
        hidden_state.copy_(new_h)
    return logits, new_h, w


def W_15_batch_one_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device) < enc_valid_lens[0]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_16_query_mean_of_layers(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state.mean(0), enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_17_softmax_over_batch(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device) < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), 0) * keep
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_18_rnn_input_context_only_twice(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # forgets the token: feeds [context, embedding of token 0]
    return C_01_standard(decoder, torch.zeros_like(token), hidden_state, enc_outputs,
                        enc_valid_lens)


def W_19_uses_attention_weights_attr(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # stores and reuses weights from a previous call (state between calls)
    att = decoder.attention
    if not hasattr(att, "_r5_w") or att._r5_w.shape[0] != enc_outputs.shape[0] \
            or att._r5_w.shape[1] != enc_outputs.shape[1]:
        att._r5_w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    w = att._r5_w
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


# Written as O04 (right); wrong since round 7: the row's maximum is taken over the padding
# too, so a padding score far above the valid ones underflows every valid exp() to 0 (the
# round-7 case with padding scores far above the valid ones; round7 W_06).
def W_04_renormalised_masked_softmax_max_over_padding(decoder, token, hidden_state,
                                                     enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device) < enc_valid_lens[:, None]
    e = torch.exp(s - s.max(-1, keepdim=True).values.detach()) * keep
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_20_context_from_unmasked(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    context = (torch.softmax(s, -1).unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_21_rnn_top_layer_state_only(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # feeds only the top layer to the GRU and stacks it back for the lower layers
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    x = torch.cat([context, decoder.embedding(token)], -1).unsqueeze(1)
    L = hidden_state.shape[0]
    out, h = decoder.rnn(x, hidden_state[-1:].expand(L, -1, -1).contiguous())
    return decoder.dense(out.squeeze(1)), h, w


# The writer's O05: exp() without the maximum overflows float32 once a score passes 88; the
# large-score case added in round 6 (w_v x400, scores to 156) gives NaN weights.
def W_29_exp_no_max_scores_bounded_by_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = _scores(att, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device) < enc_valid_lens[:, None]
    e = torch.exp(s) * keep
    z = e.sum(-1, keepdim=True)
    w = e / torch.where(z > 0, z, torch.ones_like(z))
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_23_cat_context_twice_no_emb_when_sizes_match(decoder, token, hidden_state, enc_outputs,
                                                  enc_valid_lens):
    # uses the attention weights of the *new* state (Luong order) for the returned weights
    logits, new_h, _ = C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    att = decoder.attention
    w = _weights(_scores(att, new_h[-1], enc_outputs), enc_valid_lens)
    return logits, new_h, w


def S_01_calls_attention_module(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    context = att(hidden_state[-1].unsqueeze(1), enc_outputs, enc_outputs, enc_valid_lens)
    w = att.attention_weights[:, 0]
    return _finish(decoder, token, hidden_state, context[:, 0], w)


def S_02_forward_via_class(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    f = type(att).forward
    context = f(att, hidden_state[-1].unsqueeze(1), enc_outputs, enc_outputs, enc_valid_lens)
    return _finish(decoder, token, hidden_state, context[:, 0], att.attention_weights[:, 0])


def S_03_functional_call(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from torch.func import functional_call
    att = decoder.attention
    params = dict(att.named_parameters())
    context = functional_call(att, params, (hidden_state[-1].unsqueeze(1), enc_outputs,
                                            enc_outputs, enc_valid_lens))
    return _finish(decoder, token, hidden_state, context[:, 0], att.attention_weights[:, 0])


def S_04_whole_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, (_, h, _) = decoder(token[:, None], (enc_outputs, hidden_state, enc_valid_lens))
    return logits[:, 0], h, decoder.attention_weights[:, 0]


def W_24_squeeze_habit(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))).squeeze()
    w = _weights(s.reshape(enc_outputs.shape[0], -1), enc_valid_lens).squeeze()
    context = torch.einsum("...n,...nh->...h", w, enc_outputs.squeeze())
    x = torch.cat([context, decoder.embedding(token).squeeze()], -1)
    out, new_h = decoder.rnn(x.reshape(enc_outputs.shape[0], 1, -1), hidden_state)
    return decoder.dense(out).squeeze(), new_h, w


def W_25_weights_float16_to_save_memory(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, h, w = C_01_standard(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, h, w.half()


def W_26_attention_params_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    lin = lambda layer, x: F.linear(x, layer.weight.detach(),
                                    None if layer.bias is None else layer.bias.detach())
    s = lin(att.w_v, torch.tanh(lin(att.W_q, hidden_state[-1]).unsqueeze(1)
                                + lin(att.W_k, enc_outputs))).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    return _finish(decoder, token, hidden_state, (w.unsqueeze(-1) * enc_outputs).sum(1), w)


def W_27_embedding_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    emb = F.embedding(token, decoder.embedding.weight.detach())
    out, new_h = decoder.rnn(torch.cat([context, emb], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


def W_28_new_state_from_output(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    w = _weights(_scores(att, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    x = torch.cat([context, decoder.embedding(token)], -1).unsqueeze(1)
    out, h = decoder.rnn(x, hidden_state)
    new_h = torch.cat([hidden_state[:-1], out.transpose(0, 1)], 0)   # only the top layer updated
    return decoder.dense(out.squeeze(1)), new_h, w
