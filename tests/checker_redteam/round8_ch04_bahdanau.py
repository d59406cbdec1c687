"""Round 8 red team (writer B, issue 12), ch04_bahdanau_step: wrong (W_),
right (C_), odd but right (O_) and against-the-wording (S_) solutions written from the
exercise text alone; copied from /work/redteam/round8/B/sols/ch04_bahdanau_step.py
with the names W01_x written W_01_x. tests/test_checks_redteam.py runs every W_ entry (must
fail) and every C_ and O_ entry (must pass); S_ entries are not tested.
O_05 (the GRU run sequence-first, transposed back) and O_06 (-inf fill, the NaN of an
empty row replaced with torch.where after the softmax) were first written as wrong: both are
right, gradients included (masked_fill's backward zeroes the gradient at the filled
positions).
S_03 (the softmax as exp(s - logsumexp(s))) is the same function, rejected on purpose: the
exercise asks torch.softmax to take the exponentials, and in float32 with scores near 156
its gradients are up to 5e-4 off (torch.softmax's 1e-5).
"""
# flake8: noqa
import torch
import torch.nn.functional as F

from book.attention import masked_softmax

CHECK = "check_bahdanau_step"

_cache = {}


def _keep(scores, valid_lens):
    pos = torch.arange(scores.shape[-1], device=scores.device)
    return pos[None, :] < valid_lens[:, None]


def _finish(decoder, token, hidden_state, enc_outputs, weights, query_layer=-1):
    context = torch.bmm(weights.unsqueeze(1), enc_outputs)          # (b, 1, h)
    emb = decoder.embedding(token).unsqueeze(1)                     # (b, 1, e)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def _scores(decoder, hidden_state, enc_outputs, layer=-1):
    att = decoder.attention
    q = att.W_q(hidden_state[layer])                                 # (b, a)
    k = att.W_k(enc_outputs)                                         # (b, n, a)
    return att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)       # (b, n)


# ---- correct / odd -------------------------------------------------------------------
def C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def O_02_logits_from_new_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # GRU: the last step's top-layer output IS the new top-layer state
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    w = w * keep
    context = torch.einsum("bn,bnh->bh", w, enc_outputs).unsqueeze(1)
    emb = decoder.embedding.weight[token].unsqueeze(1)
    _, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(new_state[-1]), new_state, w


def S_03_logsumexp_not_torch_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # log-softmax over the valid keys only, via logsumexp; torch.where keeps grads finite
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    low = torch.finfo(scores.dtype).min
    s = torch.where(keep, scores, torch.full_like(scores, low))
    w = torch.where(keep, torch.exp(s - torch.logsumexp(s, -1, keepdim=True)),
                    torch.zeros_like(s))
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def S_04_attention_dropout_kept(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # applies decoder.attention.dropout (a no-op in eval mode) although told to leave it out
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = torch.bmm(decoder.attention.dropout(weights).unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


# ---- wrong ---------------------------------------------------------------------------
def W_01_bottom_layer_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    scores = _scores(decoder, hidden_state, enc_outputs, layer=0)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def W_02_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "float16-safe" fill of -1e4: loses to valid scores below -1e4
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, -1e4), dim=-1) * keep
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_03_softmax_then_renormalise(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # softmax over all steps, zero the padding, renormalise: underflows when padding dominates
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    w = torch.softmax(scores, dim=-1) * keep
    w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_04_batch_wide_length(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # one length for the whole batch (the longest)
    scores = _scores(decoder, hidden_state, enc_outputs)
    lens = enc_valid_lens.max().expand(scores.shape[0])
    weights = masked_softmax(scores.unsqueeze(1), lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def W_05_broadcast_without_axis(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # arange(n) < valid_lens (no [:, None]): works by accident when batch == enc_steps
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = torch.arange(scores.shape[-1]) < enc_valid_lens
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_06_squeeze_everything(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # stray .squeeze(): batch 1 loses its batch axis
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze()
    context = torch.bmm(weights.reshape(scores.shape).unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out).squeeze(), new_state, weights


def O_05_seq_first_then_transposed_back(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # feeds the GRU (1, batch, features) although it is batch_first: right for batch 1 only
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = torch.bmm(weights.unsqueeze(1), enc_outputs).transpose(0, 1)   # (1, b, h)
    emb = decoder.embedding(token).unsqueeze(0)                               # (1, b, e)
    x = torch.cat([context, emb], dim=-1)
    if x.shape[1] != 1:            # make the shapes fit the GRU: one step per example
        x = x.transpose(0, 1)
    out, new_state = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, -1]), new_state, weights


def W_08_embedding_weight_data(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # looks the embedding up in .weight.data: no gradient reaches the embedding table
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = torch.bmm(weights.unsqueeze(1), enc_outputs)
    emb = decoder.embedding.weight.data[token].unsqueeze(1)
    out, new_state = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def W_09_w_v_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    k = att.W_k(enc_outputs)
    f = torch.tanh(q.unsqueeze(1) + k)
    scores = (f * att.w_v.weight.detach()[0]).sum(-1)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def W_10_weights_float32_for_half(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # softmax in float32 for safety, but the returned weights stay float32
    scores = _scores(decoder, hidden_state, enc_outputs).float()
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    out = _finish(decoder, token, hidden_state, enc_outputs, weights.to(enc_outputs.dtype))
    return out[0], out[1], weights


def W_11_state_updated_in_place(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "the state is updated": writes the new state into the caller's tensor
    logits, new_state, weights = C_01_masked_softmax(decoder, token, hidden_state,
                                                    enc_outputs, enc_valid_lens)
    with torch.no_grad():
        hidden_state.copy_(new_state)
    return logits, hidden_state, weights


def W_12_key_cache_by_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # W_k h_t does not change between decoding steps: cache it... per decoder and shape
    key = (id(decoder), tuple(enc_outputs.shape), enc_outputs.dtype)
    if key not in _cache:
        _cache[key] = decoder.attention.W_k(enc_outputs).detach()
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    scores = att.w_v(torch.tanh(q.unsqueeze(1) + _cache[key])).squeeze(-1)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def W_13_pre_mask_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # manual softmax: max over all steps (padding included) before masking
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    e = torch.exp(scores - scores.max(-1, keepdim=True).values) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_14_mask_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    scores = _scores(decoder, hidden_state, enc_outputs)
    pos = torch.arange(scores.shape[-1])
    keep = pos[None, :] <= enc_valid_lens[:, None]
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1)
    w = w * keep.any(-1, keepdim=True)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_15_uniform_for_empty(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # d2l's masked_softmax: a sequence of length 0 averages the padding
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, -1e6), dim=-1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_16_emb_first(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # concatenates [embedding, context]: same size only when embed_size == num_hiddens
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    context = torch.bmm(weights.unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, new_state = decoder.rnn(torch.cat([emb, context], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, weights


def O_06_inf_fill_then_where_isnan(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -inf fill, then NaN rows replaced by torch.where: forward right, backward NaN
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    w = torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_18_decoder_cast_in_place(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "keep the decoder's dtype": .to() on a module is in place: a float16 decoder is
    # made float32 for the computation (and never cast back)
    dtype = enc_outputs.dtype
    if dtype == torch.float16:
        decoder.float()
        out = C_01_masked_softmax(decoder, token, hidden_state.float(), enc_outputs.float(),
                                 enc_valid_lens)
        return tuple(t.to(dtype) for t in out)
    return C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_19_valid_len_zero_gives_first(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    # clamps the lengths to at least 1 "to avoid NaN": an empty sequence attends step 0
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens.clamp(min=1)).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def W_20_logits_from_old_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # dense on the query (old top state) instead of the GRU output
    scores = _scores(decoder, hidden_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    _, new_state, _ = _finish(decoder, token, hidden_state, enc_outputs, weights)
    return decoder.dense(hidden_state[-1]), new_state, weights


def W_21_additive_inf_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # additive -inf mask, NaN rows cleaned with nan_to_num: NaN reaches the gradients
    scores = _scores(decoder, hidden_state, enc_outputs)
    keep = _keep(scores, enc_valid_lens)
    add = torch.zeros_like(scores).masked_fill(~keep, float("-inf"))
    w = torch.nan_to_num(torch.softmax(scores + add, dim=-1), nan=0.0)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_22_zero_padding_states_in_place(decoder, token, hidden_state, enc_outputs,
                                     enc_valid_lens):
    # "clean" the padding encoder states first (through .data: no autograd error)
    keep = _keep(enc_outputs[..., 0], enc_valid_lens)
    enc_outputs.data[~keep] = 0
    return C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_23_copy_decoder_for_half(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # float16: work on a float32 *copy* of the decoder (to leave it intact) and cast back:
    # the values are right, but no gradient reaches the decoder's own parameters
    import copy
    dtype = enc_outputs.dtype
    if dtype == torch.float16:
        dec32 = copy.deepcopy(decoder).float()
        out = C_01_masked_softmax(dec32, token, hidden_state.float(), enc_outputs.float(),
                                 enc_valid_lens)
        return tuple(t.to(dtype) for t in out)
    return C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_24_luong_order(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # Luong's order: step the GRU first (with the previous context taken as 0), then
    # attend with the new state
    b = token.shape[0]
    emb = decoder.embedding(token).unsqueeze(1)
    zero_ctx = enc_outputs.new_zeros(b, 1, enc_outputs.shape[-1])
    out, new_state = decoder.rnn(torch.cat([zero_ctx, emb], dim=-1), hidden_state)
    scores = _scores(decoder, new_state, enc_outputs)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return decoder.dense(out.squeeze(1)), new_state, weights


def W_25_keys_cached_on_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # keys cached on the decoder object, refreshed only when the shape changes
    k = getattr(decoder, "_cached_keys", None)
    if k is None or k.shape[:2] != enc_outputs.shape[:2] or k.dtype != enc_outputs.dtype:
        k = decoder.attention.W_k(enc_outputs)
        decoder._cached_keys = k
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    scores = att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    weights = masked_softmax(scores.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, weights)


def S_28_valid_lens_clamped_in_place_no_change(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    # "lengths past enc_steps are impossible": clamps the caller's tensor in place
    enc_valid_lens.clamp_(max=enc_outputs.shape[1])
    return C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_27_decoder_train_mode_left_on(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    # switches the decoder to training mode "to get gradients" and leaves it there
    decoder.train()
    return C_01_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
