"""Round 7 red team (writer B, issue 12), ch04_bahdanau: wrong (W_), right (C_) and odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round7/B/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass); A_ entries
are wrong ones accepted on purpose (see each).
The writer first labelled O_18 and O_19 (-inf fill, the NaN of an empty row patched after the
softmax) as W: they are right, gradients included (masked_fill's backward zeroes the gradient
at the filled positions), so they are O_ as in the writer's final results.
"""
# flake8: noqa
CHECK = "check_bahdanau_step"
import torch
from book.attention import masked_softmax


def _scores(decoder, query, enc_outputs):
    att = decoder.attention
    q = att.W_q(query)[:, None, :]                  # (b, 1, h)
    k = att.W_k(enc_outputs)                        # (b, t, h)
    return att.w_v(torch.tanh(q + k)).squeeze(-1)   # (b, t)


def _finish(decoder, token, hidden_state, enc_outputs, weights):
    context = torch.bmm(weights[:, None, :], enc_outputs)        # (b, 1, h)
    emb = decoder.embedding(token)[:, None, :]
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def _keep(scores, lens):
    pos = torch.arange(scores.shape[-1], device=scores.device)
    return pos[None, :] < lens[:, None]


def C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_02_clamp_then_zero(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -inf fill, but rows of length 0 get one fake valid key, then are zeroed by a product
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    safe = keep.clone()
    safe[:, 0] = True
    w = torch.softmax(s.masked_fill(~safe, float("-inf")), dim=-1) * keep
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_03_dense_on_new_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # logits from the new top-layer state (equal to the GRU output), einsum for the context
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    s = torch.einsum("bth,h->bt", torch.tanh(q[:, None] + att.W_k(enc_outputs)),
                     att.w_v.weight[0])
    if att.w_v.bias is not None:
        s = s + att.w_v.bias
    keep = _keep(s, enc_valid_lens)
    s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1) * keep.any(-1, keepdim=True)
    ctx = torch.einsum("bt,bth->bh", w, enc_outputs)
    x = torch.cat([ctx, decoder.embedding(token)], dim=-1)[:, None]
    _, new = decoder.rnn(x, hidden_state)
    return decoder.dense(new[-1]), new, w


def O_18_nan_to_num_after_inf(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -inf fill, NaN rows of length 0 patched to 0 after the softmax: forward right,
    # gradients NaN
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_19_where_after_inf(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    w = torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_03_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -1e4 "because -1e6 overflows float16": padding wins when valid scores < -1e4
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e4), dim=-1) * keep.any(-1, keepdim=True)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


# Was accepted on purpose until session 21 (issue 12's float64 decision): a float64 input
# asks for float64 accuracy in every checker (_core.expect_float64_accuracy), so this is W_.
def W_04_softmax_in_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # softmax done in float32 and cast back: float64 loses its precision
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :].float(), enc_valid_lens)[:, 0].to(s.dtype)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_05_global_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # manual softmax, the maximum subtracted over the whole batch, not per row
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    e = torch.exp(s - s.max()) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_06_max_includes_padding(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # row max taken before masking: a large padding score underflows the valid ones
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    e = torch.exp(s - s.max(-1, keepdim=True).values) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_07_zero_fill_renormalise(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # padding scores set to 0, softmax, mask, renormalise: wrong when the valid scores are
    # all far below 0 (they underflow against the padding's 0)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s * keep, dim=-1) * keep
    w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(s.dtype).tiny)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_08_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[0], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_09_mutates_enc_outputs(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # zeroes the padding of enc_outputs in place ("it is never attended anyway")
    keep = _keep(enc_outputs[..., 0], enc_valid_lens)
    enc_outputs.data.mul_(keep[..., None].to(enc_outputs.dtype))
    return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_10_uniform_on_empty(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # d2l's masked_softmax: -1e6 fill (finfo.min here for float16), empty rows uniform
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


_keys = {}


def W_11_key_cache_by_shape(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # W_k(enc_outputs) cached per (shape, dtype) "since keys do not change between steps"
    # (detached to survive several backward passes)
    key = (tuple(enc_outputs.shape), enc_outputs.dtype)
    if key not in _keys:
        _keys[key] = decoder.attention.W_k(enc_outputs).detach()
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1])[:, None] + _keys[key])).squeeze(-1)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_12_keys_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # keys computed from enc_outputs.detach(): W_k still trains, but no gradient reaches
    # the encoder through the keys
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1])[:, None]
                           + att.W_k(enc_outputs.detach()))).squeeze(-1)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_13_lens_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], (enc_valid_lens - 1).clamp_min(0))[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_14_query_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # the query is "just a lookup": hidden_state[-1].detach()
    s = _scores(decoder, hidden_state[-1].detach(), enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_15_weights_detached_in_context(decoder, token, hidden_state, enc_outputs,
                                     enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    lg, st, _ = _finish(decoder, token, hidden_state, enc_outputs, w.detach())
    return lg, st, w


# Right (the writer's report: "C16 ... correct"): the comment below is a leftover; the code
# returns () + the right triple.
def C_16_tuple_concat_odd(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # context divided by the valid length ("an average")... equals the sum only when
    # every length is 1
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    return _finish(decoder, token, hidden_state, enc_outputs, w)[0:0] + \
        _finish(decoder, token, hidden_state, enc_outputs, w)


def W_17_float16_upcast_outputs(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # the whole step in float32 (weights and logits returned as float32)
    dt = enc_outputs.dtype
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :].float(), enc_valid_lens)[:, 0]
    ctx = torch.bmm(w[:, None, :], enc_outputs.float()).to(dt)
    emb = decoder.embedding(token)[:, None, :]
    out, new_state = decoder.rnn(torch.cat([ctx, emb], dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), new_state, w


def W_20_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # .squeeze() instead of .squeeze(-1): with one encoder step the scores lose the step
    # axis and the (batch, 1) mask broadcasts them to (batch, batch)
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1])[:, None] + att.W_k(enc_outputs)))
    s = s.squeeze()
    if s.dim() == 1 and enc_outputs.shape[0] == 1:
        s = s[None]
    keep = torch.arange(enc_outputs.shape[1])[None, :] < enc_valid_lens[:, None]
    s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1) * keep.any(-1, keepdim=True)
    w = w.reshape(enc_outputs.shape[0], -1)[:, : enc_outputs.shape[1]]
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_21_functional_dropout_on_weights(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    # F.dropout(w, p) (training=True by default) applied to the weights: dropout in eval
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    wd = torch.nn.functional.dropout(w, decoder.attention.dropout.p)
    lg, st, _ = _finish(decoder, token, hidden_state, enc_outputs, wd)
    return lg, st, w


def W_22_mask_broadcast_without_axis(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    # pos < lens without [:, None]: transposed mask when batch == enc_steps
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[-1]) < enc_valid_lens
    keep = keep.expand_as(s) if keep.dim() == 1 else keep
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * \
        keep.any(-1, keepdim=True)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_23_new_state_written_into_input(decoder, token, hidden_state, enc_outputs,
                                     enc_valid_lens):
    # copies the new state into hidden_state "to save memory" and returns it
    lg, st, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    with torch.no_grad():
        hidden_state.data.copy_(st)
    return lg, st, w


def W_24_weights_returned_detached(decoder, token, hidden_state, enc_outputs,
                                  enc_valid_lens):
    lg, st, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return lg, st, w.detach()


def W_25_new_state_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # truncated BPTT done inside the step
    lg, st, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return lg, st.detach(), w


def W_26_lens_as_float_mean(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # context normalised again by the sum of the weights + eps (changes nothing) but the
    # weights are returned before masking the empty rows: uniform NaN-free but not 0
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    ctx_w = w * keep
    lg, st, _ = _finish(decoder, token, hidden_state, enc_outputs, ctx_w)
    return lg, st, w


def O_27_mul_sum_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s[:, None, :], enc_valid_lens)[:, 0]
    ctx = (w[..., None] * enc_outputs).sum(1, keepdim=True)
    emb = decoder.embedding.weight[token][:, None]
    out, st = decoder.rnn(torch.cat([ctx, emb], -1), hidden_state)
    return decoder.dense(out).squeeze(1), st, w
