"""Round 1 red team, chapter 4: check_bahdanau_step (exercise 4.1).

Entries: (checker_name, short_description, kind, callable). Written from the exercise
text: bahdanau_step(decoder, token, hidden_state, enc_outputs, enc_valid_lens) ->
(logits (batch, vocab), new hidden_state, weights (batch, enc_steps)), without calling
decoder.attention(...) or decoder(...).
"""
import torch

from book.attention import masked_softmax

C = "check_bahdanau_step"


def _scores(decoder, query_state, enc_outputs):
    att = decoder.attention
    q = att.W_q(query_state)                                   # (batch, a)
    k = att.W_k(enc_outputs)                                   # (batch, enc, a)
    return att.w_v(torch.tanh(q[:, None] + k)).squeeze(-1)     # (batch, enc)


def _rest(decoder, token, hidden_state, enc_outputs, weights):
    context = torch.bmm(weights[:, None], enc_outputs)         # (batch, 1, h)
    emb = decoder.embedding(token)[:, None]                    # (batch, 1, e)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def _weights(scores, enc_valid_lens):
    return masked_softmax(scores[:, None], enc_valid_lens)[:, 0]


# --------------------------------------------------------------------------- wrong

def step_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 3: the query is hidden_state[0] (the bottom layer): right with one layer."""
    weights = _weights(_scores(decoder, hidden_state[0], enc_outputs), enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_no_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: plain softmax, padding gets weight."""
    weights = torch.softmax(_scores(decoder, hidden_state[-1], enc_outputs), dim=-1)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_cat_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: concatenates [embedding, context] instead of [context, embedding]
    (same total size when embed_size == num_hiddens, otherwise a shape error)."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([emb, context], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def step_weights_3d(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 6: returns the weights with shape (batch, 1, enc_steps)."""
    logits, state, weights = step_reference(decoder, token, hidden_state, enc_outputs,
                                            enc_valid_lens)
    return logits, state, weights[:, None]


def step_calls_attention(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: calls decoder.attention(...), which the exercise forbids."""
    context = decoder.attention(hidden_state[-1][:, None], enc_outputs, enc_outputs,
                                enc_valid_lens)
    weights = decoder.attention.attention_weights[:, 0]
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def step_calls_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: calls decoder(...) on a one-step target, which the exercise forbids."""
    logits, (_, new_state, _) = decoder(token[:, None],
                                        (enc_outputs, hidden_state, enc_valid_lens))
    return logits[:, 0], new_state, decoder.attention_weights[:, 0]


def step_top_layer_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 3: passes only the top layer hidden_state[-1:] to the GRU: right with one
    layer, a shape error with more."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state[-1:])
    return decoder.dense(out[:, 0]), new_state, weights


def step_no_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: forgets the tanh."""
    att = decoder.attention
    scores = att.w_v(att.W_q(hidden_state[-1])[:, None] + att.W_k(enc_outputs)).squeeze(-1)
    weights = _weights(scores, enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_mask_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: its own mask keeps positions <= valid_len."""
    scores = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(scores.shape[-1], device=scores.device) <= enc_valid_lens[:, None]
    weights = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_squeeze_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 3: hidden_state.squeeze(0) as the query: right with one layer only."""
    q = hidden_state.squeeze(0)
    if q.dim() == 3:
        q = q.mean(0)   # 'several layers: average them'
    weights = _weights(_scores(decoder, q, enc_outputs), enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_detach_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 1: detaches the context vector."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs).detach()
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def step_context_keys(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 5: averages the projected keys W_k h_t instead of the encoder states
    (only runs when attention_size == num_hiddens)."""
    att = decoder.attention
    keys = att.W_k(enc_outputs)
    scores = att.w_v(torch.tanh(att.W_q(hidden_state[-1])[:, None] + keys)).squeeze(-1)
    weights = _weights(scores, enc_valid_lens)
    context = torch.bmm(weights[:, None], keys)
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def step_logits_3d(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 6: returns logits of shape (batch, 1, vocab)."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)
    emb = decoder.embedding(token)[:, None]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out), new_state, weights


def step_inf_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 1: -inf mask, nan_to_num for empty rows."""
    scores = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(scores.shape[-1], device=scores.device) < enc_valid_lens[:, None]
    weights = torch.nan_to_num(torch.softmax(scores.masked_fill(~keep, float("-inf")),
                                             dim=-1))
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_state_tuple(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Kind 6: returns the whole decoder state tuple (enc_outputs, hidden, lens) as the
    second element, like Seq2SeqAttentionDecoder.forward does."""
    logits, state, weights = step_reference(decoder, token, hidden_state, enc_outputs,
                                            enc_valid_lens)
    return logits, (enc_outputs, state, enc_valid_lens), weights


# --------------------------------------------------------------------------- right

def step_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Right (helper as well): the straightforward step."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, weights)


def step_dense_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Right: logits from the new top hidden state (equal to the GRU output)."""
    weights = _weights(_scores(decoder, hidden_state[-1], enc_outputs), enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)
    emb = decoder.embedding(token.reshape(-1, 1))
    _, new_state = decoder.rnn(torch.cat([context, emb], dim=2), hidden_state)
    return decoder.dense(new_state[-1]), new_state, weights


def step_einsum(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Right: einsum for the context, where-based mask with finfo.min."""
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    scores = att.w_v(feats)[..., 0]
    keep = torch.arange(scores.shape[1], device=scores.device)[None] < \
        enc_valid_lens[:, None]
    weights = torch.softmax(torch.where(keep, scores, torch.finfo(scores.dtype).min),
                            dim=1) * keep
    context = torch.einsum("bt,bth->bh", weights, enc_outputs)
    emb = decoder.embedding(token)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1)[:, None], hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


WRONG = [
    (C, "query from hidden_state[0] (bottom layer)", 3, step_bottom_layer),
    (C, "no mask", 5, step_no_mask),
    (C, "cat([embedding, context]) order swapped", 5, step_cat_swapped),
    (C, "weights of shape (batch, 1, enc)", 6, step_weights_3d),
    (C, "calls decoder.attention (forbidden)", 5, step_calls_attention),
    (C, "calls decoder(...) (forbidden)", 5, step_calls_decoder),
    (C, "GRU gets only hidden_state[-1:]", 3, step_top_layer_state),
    (C, "no tanh", 5, step_no_tanh),
    (C, "mask keeps positions <= valid_len", 5, step_mask_off_by_one),
    (C, "query = hidden_state.squeeze(0) (mean over layers)", 3, step_squeeze_state),
    (C, "detached context", 1, step_detach_context),
    (C, "context averages W_k h_t instead of h_t", 5, step_context_keys),
    (C, "logits of shape (batch, 1, vocab)", 6, step_logits_3d),
    (C, "-inf mask + nan_to_num", 1, step_inf_nan_to_num),
    (C, "returns the decoder's state tuple", 6, step_state_tuple),
]

RIGHT_BUT_UNUSUAL = [
    (C, "straightforward reference-like step", 0, step_reference),
    (C, "logits from new_state[-1]", 0, step_dense_state),
    (C, "einsum context, where(finfo.min) mask", 0, step_einsum),
]
