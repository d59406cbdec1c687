"""Round 2 red team (writer R2), ch04_bahdanau: wrong (W_), right (C_), unusual but right (O_)
and debatable (Q_) solutions written from the exercise text alone, without reading the
checker; copied from /work/redteam/round2b/sols/ch04_bahdanau.py. The tests run every W_ entry
(must fail) and every C_, O_ and Q_ entry (must pass). Each docstring names the mistake.
"""
import torch
from book.attention import masked_softmax

CHECK = "check_bahdanau_step"


def _scores(decoder, query, enc_outputs):
    a = decoder.attention
    f = torch.tanh(a.W_q(query)[:, None, :] + a.W_k(enc_outputs))  # (b, T, h)
    return a.w_v(f).squeeze(-1)                                     # (b, T)


def _finish(decoder, token, hidden_state, enc_outputs, w):
    context = torch.bmm(w[:, None, :], enc_outputs)                 # (b, 1, H)
    emb = decoder.embedding(token)[:, None, :]                      # (b, 1, E)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), h, w


def _w(scores, lens):
    return masked_softmax(scores[:, None, :], lens)[:, 0]


def W_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Query from the first (bottom) layer: right only for one layer."""
    w = _w(_scores(decoder, hidden_state[0], enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_cat_order(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """[embedding, context] instead of [context, embedding]."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(w[:, None, :], enc_outputs)
    emb = decoder.embedding(token)[:, None, :]
    x = torch.cat([emb, context], dim=-1)
    out, h = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), h, w


def W_no_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Softmax over every encoder step, padding included."""
    w = torch.softmax(_scores(decoder, hidden_state[-1], enc_outputs), dim=-1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_mask_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Masks positions > valid_len: keeps one padding step."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] <= enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, -1e9), dim=-1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_batch_index(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """hidden_state[:, -1] picks the last example, not the top layer... then broadcasts."""
    q = hidden_state[:, -1]  # (num_layers, H): only matches the batch when num_layers == batch
    q = q[-1:].expand(enc_outputs.shape[0], -1)
    w = _w(_scores(decoder, q, enc_outputs), enc_valid_lens)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_mean_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Context = the plain mean of the encoder states (weights computed but unused)."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = enc_outputs.mean(1, keepdim=True)
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out[:, 0]), h, w


def W_weights_3d(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns weights of shape (batch, 1, enc_steps)."""
    logits, h, w = _finish(decoder, token, hidden_state, enc_outputs,
                           _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens))
    return logits, h, w[:, None, :]


def W_old_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns the old hidden state instead of the GRU's new one."""
    logits, h, w = _finish(decoder, token, hidden_state, enc_outputs,
                           _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens))
    return logits, hidden_state, w


def W_no_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    a = decoder.attention
    s = a.w_v(a.W_q(hidden_state[-1])[:, None, :] + a.W_k(enc_outputs)).squeeze(-1)
    return _finish(decoder, token, hidden_state, enc_outputs, _w(s, enc_valid_lens))


def W_swapped_Wq_Wk(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """W_k on the query and W_q on the keys."""
    a = decoder.attention
    s = a.w_v(torch.tanh(a.W_k(hidden_state[-1])[:, None, :] + a.W_q(enc_outputs))).squeeze(-1)
    return _finish(decoder, token, hidden_state, enc_outputs, _w(s, enc_valid_lens))


def W_top_layer_state_only(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Feeds only the top layer's state to the GRU: right for one layer only."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(w[:, None, :], enc_outputs)
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state[-1:].contiguous())
    if hidden_state.shape[0] > 1:
        h = torch.cat([hidden_state[:-1], h], 0)
    return decoder.dense(out[:, 0]), h, w


def W_logits_from_state_bottom(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Logits from the new state's bottom layer h[0] (= out only for one layer)."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(w[:, None, :], enc_outputs)
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(h[0]), h, w


def W_context_over_keys_after_Wk(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Context built from W_k(enc_outputs) (the projected keys) instead of enc_outputs."""
    a = decoder.attention
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    keys = a.W_k(enc_outputs)
    if keys.shape[-1] != enc_outputs.shape[-1]:
        keys = enc_outputs
    context = torch.bmm(w[:, None, :], keys)
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out[:, 0]), h, w


def W_calls_attention(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Calls decoder.attention (forbidden) - right values."""
    context = decoder.attention(hidden_state[-1][:, None], enc_outputs, enc_outputs, enc_valid_lens)
    w = decoder.attention.attention_weights[:, 0]
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out[:, 0]), h, w


def C_step(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    a = decoder.attention
    query = hidden_state[-1]                                            # (b, H)
    feats = torch.tanh(a.W_q(query).unsqueeze(1) + a.W_k(enc_outputs))  # (b, T, h)
    scores = a.w_v(feats).squeeze(-1)                                   # (b, T)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = (weights.unsqueeze(-1) * enc_outputs).sum(1, keepdim=True)
    emb = decoder.embedding(token).unsqueeze(1)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def O_own_mask_logits_from_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Own masking with finfo.min; logits from the new top state (= the GRU output)."""
    a = decoder.attention
    s = a.w_v(torch.tanh(a.W_q(hidden_state[-1])[:, None] + a.W_k(enc_outputs)))[..., 0]
    keep = torch.arange(s.shape[1], device=s.device) < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    context = torch.einsum("bt,bth->bh", w, enc_outputs)
    x = torch.cat([context, decoder.embedding(token)], -1)[:, None]
    _, h = decoder.rnn(x, hidden_state)
    return decoder.dense(h[-1]), h, w


def W_logits_3d(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns logits (batch, 1, vocab)."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(w[:, None, :], enc_outputs)
    emb = decoder.embedding(token)[:, None, :]
    out, h = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out), h, w


def W_dropout_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """F.dropout on the weights (training=True by default)."""
    w = _w(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    w = torch.nn.functional.dropout(w, 0.1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_inplace_enc_outputs(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Zeroes the padded encoder states in place (when no grad is needed)."""
    if not enc_outputs.requires_grad:
        keep = torch.arange(enc_outputs.shape[1], device=enc_outputs.device) < enc_valid_lens[:, None]
        enc_outputs.mul_(keep[..., None])
    return C_step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
