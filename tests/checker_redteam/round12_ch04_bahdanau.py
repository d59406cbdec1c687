"""Round 12 red team (writer B, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round12/B/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 12 already (before and after the condition matrix). Two
messages were sharpened: W_06 (tanh written out) is told that a step loses precision, and
the first case names attention_size 10 (W_23 views w_v with num_hiddens 12).
"""
# flake8: noqa
import torch
import torch.nn.functional as F

from book.attention import masked_softmax

CHECK = "check_bahdanau_step"


def _scores(decoder, hidden_state, enc_outputs, query=None):
    att = decoder.attention
    s = hidden_state[-1] if query is None else query
    q = att.W_q(s)                                      # (b, a)
    k = att.W_k(enc_outputs)                            # (b, T, a)
    return att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)   # (b, T)


def _keep(enc_outputs, enc_valid_lens):
    T = enc_outputs.shape[1]
    return torch.arange(T, device=enc_outputs.device)[None, :] < enc_valid_lens[:, None]


def _weights(scores, keep):
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    return w * keep


def _finish(decoder, token, hidden_state, context, w):
    emb = decoder.embedding(token)                        # (b, e)
    x = torch.cat([context, emb], dim=-1).unsqueeze(1)    # (b, 1, h+e)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


# ---------------------------------------------------------------- correct / odd
def C_01_reference_style(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def O_02_book_masked_softmax_einsum(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """masked_softmax from book.attention (imported in the notebook) on (b, 1, T)."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = torch.einsum("bt,bth->bh", w, enc_outputs)
    emb = decoder.embedding(token)
    out, new_h = decoder.rnn(torch.cat([context, emb], -1)[:, None], hidden_state)
    return decoder.dense(new_h[-1]), new_h, w       # top layer of h_n == out for one step


def O_03_where_and_broadcast_sum(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """-inf through torch.where on a finite copy; zero rows via where on the weights."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    any_valid = keep.any(-1, keepdim=True)
    safe = torch.where(keep | ~any_valid, scores, torch.full_like(scores, float("-inf")))
    w = torch.where(keep, torch.softmax(safe, -1), torch.zeros_like(scores))
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, context, w)


# ---------------------------------------------------------------- wrong
def W_01_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """.squeeze() without an axis: with one encoder step the scores lose the T axis and
    the softmax runs over the batch (wrong for enc_steps == 1, batch > 1)."""
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    k = att.W_k(enc_outputs)
    scores = att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze()
    keep = _keep(enc_outputs, enc_valid_lens).reshape(scores.shape)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    w = w.reshape(enc_outputs.shape[:2])
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_02_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """hidden_state[0] as query: the bottom layer, wrong for num_layers > 1."""
    scores = _scores(decoder, hidden_state, enc_outputs, query=hidden_state[0])
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_03_out_as_new_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns the GRU's output sequence as the new state: right for one layer only."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = decoder.embedding(token)
    out, _ = decoder.rnn(torch.cat([context, emb], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze(1)), out.transpose(0, 1).contiguous(), w


def W_04_detached_values(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """The values are detached ('the encoder is trained through the keys'): no decoder
    parameter notices, but enc_outputs gets only the keys' part of its gradient."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs.detach()).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_05_detached_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """The query is detached: W_q still gets its gradient, hidden_state loses the part that
    flows through the attention scores."""
    scores = _scores(decoder, hidden_state, enc_outputs, query=hidden_state[-1].detach())
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_06_manual_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """tanh written out as (e^2x - 1)/(e^2x + 1): NaN once a feature exceeds ~44 (float32)
    or ~5.5 (float16)."""
    att = decoder.attention
    f = att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs)
    e = torch.exp(2 * f)
    scores = att.w_v((e - 1) / (e + 1)).squeeze(-1)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_07_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Padding filled with -1e4 ('safe in float16'): padding gets weight once the valid
    scores are below -1e4 (or above +1e4 apart)."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, -1e4), -1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_08_premask_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Subtracts the maximum over all steps, padding included, then masks the exponentials:
    all-zero weights when a padding score dominates."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    e = torch.exp(scores - scores.max(-1, keepdim=True).values) * keep
    w = e / e.sum(-1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_09_trim_to_longest(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Cuts the encoder states at the longest valid length to save work: weights come back
    (batch, max(valid)) instead of (batch, enc_steps)."""
    L = int(enc_valid_lens.max())
    enc = enc_outputs[:, :L]
    scores = _scores(decoder, hidden_state, enc)
    w = _weights(scores, _keep(enc, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_10_zero_len_attends_first(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """clamp(min=1) on the lengths: a length-0 sequence attends its first step."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens.clamp(min=1)))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_11_batch_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """One maximum for the whole batch: rows far below the batch's best score underflow."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    s = scores.masked_fill(~keep, float("-inf"))
    e = torch.exp(s - s.max()) * keep
    w = e / e.sum(-1, keepdim=True).clamp(min=torch.finfo(e.dtype).tiny)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_12_fill_float32_min(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Hard-coded float32 fill: float16 cannot hold it (masked_fill raises)."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, -3.4e38), -1) * keep
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_13_keep_as_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Multiplies by keep.float(): float16 weights become float32."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1)
    w = w * keep.float()
    context = torch.bmm(w.unsqueeze(1).to(enc_outputs.dtype), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_14_lengths_clamped_in_place(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """clamp_ in place on the caller's lengths (changes enc_valid_lens when > enc_steps or
    0 -> 1)."""
    enc_valid_lens.clamp_(min=1, max=enc_outputs.shape[1])
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_15_emb_first(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """[embedding, context] instead of [context, embedding]: runs when embed_size equals
    num_hiddens."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = decoder.embedding(token)
    out, new_h = decoder.rnn(torch.cat([emb, context], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


def O_16_inf_fill_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """-inf fill, softmax, nan_to_num for empty rows. Correct: masked_fill's backward zeroes
    the NaN gradient of the filled entries (checked by hand against C01, float64)."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_17_context_through_dropout_module(decoder, token, hidden_state, enc_outputs,
                                        enc_valid_lens):
    """Sets the attention to eval to 'leave dropout out' and never restores it."""
    decoder.attention.eval()
    return C_01_reference_style(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_18_half_scores_for_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """w_v replaced by the mean of its weights times the sum of the tanh features."""
    att = decoder.attention
    f = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    scores = f.sum(-1) * att.w_v.weight.mean()
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_19_mask_transposed_when_square(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """keep built as (steps, batch): it only runs when batch == enc_steps, and is then the
    transpose of the right mask."""
    T = enc_outputs.shape[1]
    keep = torch.arange(T, device=enc_outputs.device)[:, None] < enc_valid_lens
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, keep)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_20_out_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """out.squeeze(): for batch 1 the logits are (vocab,), not (1, vocab)."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = decoder.embedding(token)
    out, new_h = decoder.rnn(torch.cat([context, emb], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze()), new_h, w


def W_21_weights_returned_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns weights.detach() ('they are only for plotting')."""
    lo, h, w = C_01_reference_style(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return lo, h, w.detach()


def O_04_stores_attention_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Also stores the weights on decoder.attention.attention_weights, as the chapter's
    layer does (harmless bookkeeping)."""
    lo, h, w = C_01_reference_style(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    decoder.attention.attention_weights = w.unsqueeze(1)
    return lo, h, w


def W_22_additive_inf_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """An additive -inf mask (scores + mask), softmax, nan_to_num: the length-0 row's NaN
    gradient reaches the scores through the addition."""
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(enc_outputs, enc_valid_lens)
    add = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    w = torch.softmax(scores + add, -1).nan_to_num(0.0)
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)


def W_23_w_v_as_vector_of_num_hiddens(decoder, token, hidden_state, enc_outputs,
                                       enc_valid_lens):
    """w_v's weight viewed with the decoder's num_hiddens: fails for a decoder whose
    attention_size differs from num_hiddens (make_model's attention_size=...)."""
    att = decoder.attention
    H = decoder.rnn.hidden_size
    f = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    scores = (f * att.w_v.weight.view(1, 1, H)).sum(-1)
    w = _weights(scores, _keep(enc_outputs, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, context, w)
