"""Round 4 red team (writer A, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but right
(O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round4/A/sols/04_bahdanau.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); S_
entries are not run, and A_ entries are wrong ones accepted on purpose (see each).
O04_query_broadcast_with_fallback_CONTRIVED_ignore was dropped (contrived).
"""
# flake8: noqa
import torch
import torch.nn.functional as F

CHECK = "check_bahdanau_step"


def _mask_softmax(scores, enc_valid_lens):
    # scores (b, t)
    keep = torch.arange(scores.shape[-1], device=scores.device)[None, :] < enc_valid_lens[:, None]
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return w


def C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    query = hidden_state[-1]                                   # (b, h)
    feats = torch.tanh(att.W_q(query)[:, None, :] + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze(-1)                        # (b, t)
    weights = _mask_softmax(scores, enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)      # (b, 1, h)
    emb = decoder.embedding(token)[:, None, :]                 # (b, 1, e)
    out, new_state = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def O_02_book_masked_softmax_and_dense_on_state(decoder, token, hidden_state, enc_outputs,
                                                enc_valid_lens):
    from book.attention import masked_softmax
    att = decoder.attention
    q = att.W_q(hidden_state[-1].unsqueeze(1))                 # (b, 1, a)
    k = att.W_k(enc_outputs)                                   # (b, t, a)
    scores = att.w_v(torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))).squeeze(-1)  # (b, 1, t)
    w = masked_softmax(scores, enc_valid_lens)                 # (b, 1, t)
    ctx = w @ enc_outputs
    x = torch.cat([ctx, decoder.embedding(token.unsqueeze(1))], dim=2)
    _, new_state = decoder.rnn(x, hidden_state)
    return decoder.dense(new_state[-1]), new_state, w.squeeze(1)


def O_03_einsum_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    scores = att.w_v(feats)[..., 0]
    weights = _mask_softmax(scores, enc_valid_lens)
    context = torch.einsum("bt,bth->bh", weights, enc_outputs)
    x = torch.cat([context, decoder.embedding(token)], dim=-1).unsqueeze(1)
    out, new_state = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def W_01_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[0])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_02_emb_then_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([decoder.embedding(token)[:, None], context], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_03_no_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = torch.softmax(att.w_v(feats).squeeze(-1), -1)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_04_Wq_Wk_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_k(hidden_state[-1])[:, None, :] + att.W_q(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_05_no_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs)
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_06_new_state_from_out(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # returns the top layer's output as the whole new state: right for one layer only
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, _ = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                         hidden_state)
    new = out.transpose(0, 1).expand(hidden_state.shape[0], -1, -1)
    return decoder.dense(out[:, 0]), new, weights


def W_07_le_mask_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze(-1)
    keep = torch.arange(scores.shape[-1])[None, :] <= enc_valid_lens[:, None]
    weights = torch.softmax(scores.masked_fill(~keep, -1e9), -1)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_08_weights_keepdim(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, new, w[:, None, :]


def W_09_logits_keepdim(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits[:, None, :], new, w


def W_10_no_dense(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return out[:, 0], new, weights


def W_11_hidden_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    h = hidden_state.detach()
    feats = torch.tanh(att.W_q(h[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1), h)
    return decoder.dense(out[:, 0]), new, weights


def W_12_query_is_mean_of_layers(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = hidden_state.mean(0)
    feats = torch.tanh(att.W_q(q)[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_14_context_uses_keys_projection(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # averages W_k(h_t) instead of h_t when sizes match
    att = decoder.attention
    k = att.W_k(enc_outputs)
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + k)
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    vals = k if k.shape[-1] == enc_outputs.shape[-1] else enc_outputs
    context = torch.bmm(weights[:, None, :], vals)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_15_neg_inf_additive_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze(-1)
    keep = torch.arange(scores.shape[-1])[None, :] < enc_valid_lens[:, None]
    weights = torch.nan_to_num(torch.softmax(scores + torch.where(keep, 0.0, float("-inf")), -1))
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_16_hidden_mutated_inplace(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    hidden_state.data.copy_(new.data)  # "update the state" in place
    return logits, new, w


# Accepted on purpose (not tested): the check runs the decoder in eval mode, where dropout
# does nothing, and exercise 4.1 says so; applying decoder.attention.dropout is then a
# no-op, so the step is right for the exercise as stated.
def A_17_attention_dropout_skipped_in_train(decoder, token, hidden_state, enc_outputs,
                                           enc_valid_lens):
    # uses decoder.attention.dropout on the weights it returns (the module drops the copy
    # it multiplies with values, not the stored weights)
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = att.dropout(_mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens))
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_18_weights_over_batch_axis(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze(-1)
    keep = torch.arange(scores.shape[-1])[None, :] < enc_valid_lens[:, None]
    weights = torch.softmax(scores.masked_fill(~keep, -1e9), 0)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_19_calls_attention_module(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    ctx = decoder.attention(hidden_state[-1].unsqueeze(1), enc_outputs, enc_outputs,
                            enc_valid_lens)
    w = decoder.attention.attention_weights.squeeze(1)
    out, new = decoder.rnn(torch.cat([ctx, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, w


def W_20_fill_1e6_float16_or_uniform_empty(decoder, token, hidden_state, enc_outputs,
                                          enc_valid_lens):
    # d2l style -1e6 fill: a sequence of valid length 0 gets uniform weights
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze(-1)
    keep = torch.arange(scores.shape[-1])[None, :] < enc_valid_lens[:, None]
    weights = torch.softmax(scores.masked_fill(~keep, -1e6), -1)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_21_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    scores = att.w_v(feats).squeeze()
    if scores.dim() == 1:
        scores = scores[None]
    weights = _mask_softmax(scores, enc_valid_lens)
    context = torch.bmm(weights.unsqueeze(1), enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out).squeeze(), new, weights.squeeze()


def W_22_returns_old_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, hidden_state, w


def W_23_query_broadcast_plain(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1]) + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_24_query_from_first_layer_slice(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # hidden_state[:, -1] (the last example) instead of hidden_state[-1] (the top layer)
    att = decoder.attention
    q = hidden_state[:, -1] if hidden_state.shape[0] == hidden_state.shape[1] else hidden_state[-1]
    feats = torch.tanh(att.W_q(q)[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def S_01_attention_forward_method(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    ctx = att.forward(hidden_state[-1].unsqueeze(1), enc_outputs, enc_outputs, enc_valid_lens)
    w = att.attention_weights.squeeze(1)
    out, new = decoder.rnn(torch.cat([ctx, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, w


def S_02_class_forward_unbound(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from book.attention import AdditiveAttention
    att = decoder.attention
    ctx = AdditiveAttention.forward(att, hidden_state[-1].unsqueeze(1), enc_outputs,
                                    enc_outputs, enc_valid_lens)
    w = att.attention_weights.squeeze(1)
    out, new = decoder.rnn(torch.cat([ctx, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, w


def S_03_decoder_forward_method(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, (_, new, _) = decoder.forward(token[:, None], (enc_outputs, hidden_state,
                                                          enc_valid_lens))
    return logits[:, 0], new, decoder.attention_weights[:, 0]


def S_04_fresh_module_copied_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    import copy
    att = copy.deepcopy(decoder.attention)
    ctx = att(hidden_state[-1].unsqueeze(1), enc_outputs, enc_outputs, enc_valid_lens)
    w = att.attention_weights.squeeze(1)
    out, new = decoder.rnn(torch.cat([ctx, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, w


def W_25_scores_under_no_grad(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "the weights are not trained directly": computes the scores without autograd.
    # Gradients still reach hidden_state (via the GRU) and enc_outputs (via the context)
    att = decoder.attention
    with torch.no_grad():
        feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
        weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_26_keys_detached_in_score(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs.detach()))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_27_query_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1].detach())[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_29_weight_data_matmul(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # writes the layers as matrix products with .weight.data: inputs get the right
    # gradients, the attention's parameters get none (they would never train)
    att = decoder.attention
    Wq, Wk, wv = att.W_q.weight.data, att.W_k.weight.data, att.w_v.weight.data
    feats = torch.tanh((hidden_state[-1] @ Wq.T)[:, None, :] + enc_outputs @ Wk.T)
    weights = _mask_softmax((feats @ wv.T).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    out, new = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                           hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_30_embedding_weight_data(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # looks the embedding up in .weight.data: the embedding never trains
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1])[:, None, :] + att.W_k(enc_outputs))
    weights = _mask_softmax(att.w_v(feats).squeeze(-1), enc_valid_lens)
    context = torch.bmm(weights[:, None, :], enc_outputs)
    emb = decoder.embedding.weight.data[token][:, None]
    out, new = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out[:, 0]), new, weights


def W_31_dense_weight_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    out = new[-1]
    return F.linear(out, decoder.dense.weight.detach(), decoder.dense.bias.detach()), new, w
