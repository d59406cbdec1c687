"""Round 6 red team (writer B, issue 12), ch04_bahdanau: wrong (W_), right (C_) and odd but
right (O_) solutions written from the exercise text alone; copied from
/work/redteam/round6/B/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
The tests run every W_ entry (must fail) and every C_ and O_ entry (must pass).
The writer's O02_renormalise_after_full_softmax is W_27_renormalise_fill_minus_1e30 here: its
-1e30 fill raises in float16 ("cannot be converted to type c10::Half without overflow"),
the fault of W_16, which the float16 case added after this round rejects.
"""
# flake8: noqa
import torch
import torch.nn.functional as F

CHECK = "check_bahdanau_step"


def _scores(decoder, query, enc_outputs):
    att = decoder.attention
    q = att.W_q(query)                       # (b, h)
    k = att.W_k(enc_outputs)                 # (b, n, h)
    return att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)   # (b, n)


def _weights_ref(scores, valid):
    n = scores.shape[-1]
    keep = torch.arange(n, device=scores.device)[None, :] < valid[:, None]
    s = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(s, dim=-1) * keep


def _finish(decoder, token, hidden_state, enc_outputs, w):
    context = torch.bmm(w.unsqueeze(1), enc_outputs)              # (b, 1, h)
    emb = decoder.embedding(token).unsqueeze(1)                   # (b, 1, e)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


# ---------------- correct / odd ----------------
def C_01_reference_like(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_27_renormalise_fill_minus_1e30(decoder, token, hidden_state, enc_outputs,
                                       enc_valid_lens):
    # (the writer's O02: -1e30 overflows float16, see the docstring)
    # softmax over all steps (max-subtracted over valid ones), zero padding, renormalise.
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    n = s.shape[-1]
    keep = (torch.arange(n, device=s.device)[None, :] < enc_valid_lens[:, None])
    m = s.masked_fill(~keep, -1e30).amax(-1, keepdim=True).clamp_min(-1e29)
    e = torch.exp((s - m).clamp_max(0)) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(1e-30)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_03_functional_weights_and_gru_cell_by_hand(decoder, token, hidden_state, enc_outputs,
                                                enc_valid_lens):
    # Uses F.linear with the layers' weights and calls decoder.rnn (allowed) ; weights via
    # masked log-softmax style with torch.where.
    att = decoder.attention
    q = F.linear(hidden_state[-1], att.W_q.weight, att.W_q.bias)
    k = F.linear(enc_outputs, att.W_k.weight, att.W_k.bias)
    s = F.linear(torch.tanh(q[:, None] + k), att.w_v.weight, att.w_v.bias)[..., 0]
    keep = torch.arange(s.shape[1], device=s.device) < enc_valid_lens[:, None]
    s = torch.where(keep, s, torch.full_like(s, -1e4 if s.dtype == torch.float16 else -1e9))
    w = torch.where(keep, torch.softmax(s, -1), torch.zeros_like(s))
    return _finish(decoder, token, hidden_state, enc_outputs, w)


# ---------------- wrong ----------------
def W_01_query_is_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # hidden_state[0]: the bottom layer; same as [-1] only when num_layers == 1
    s = _scores(decoder, hidden_state[0], enc_outputs)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_02_query_is_mean_of_layers(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state.mean(0), enc_outputs)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def O_04_inf_masked_fill_then_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_05_inf_masked_fill_where_zero_rows(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # NaN forward in empty rows replaced by torch.where: forward right, backward NaN
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1)
    w = torch.where(keep.any(-1, keepdim=True), w, torch.zeros_like(w))
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_05_d2l_uniform_on_empty_rows(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, -1e6), -1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_06_exp_without_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    e = torch.exp(s) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(1e-12)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


_CACHE = {}


def W_07_keys_cached_per_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "W_k(enc_outputs) is the same at every step": cached per decoder, stale for new inputs
    key = id(decoder)
    if key not in _CACHE:
        _CACHE[key] = decoder.attention.W_k(enc_outputs)
    k = _CACHE[key]
    q = decoder.attention.W_q(hidden_state[-1])
    s = decoder.attention.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_08_mask_off_by_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    n = s.shape[1]
    keep = torch.arange(n, device=s.device)[None] <= enc_valid_lens[:, None]
    keep = keep & (enc_valid_lens[:, None] > 0)      # keeps empty rows empty
    s = s.masked_fill(~keep, torch.finfo(s.dtype).min)
    w = torch.softmax(s, -1) * keep
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_09_weights_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    with torch.no_grad():
        s = _scores(decoder, hidden_state[-1], enc_outputs)
        w = _weights_ref(s, enc_valid_lens)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_10_state_is_top_output(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # returns out (top layer only) as new hidden state: right only for one layer
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    logits, h, w = _finish(decoder, token, hidden_state, enc_outputs,
                           _weights_ref(s, enc_valid_lens))
    top = h[-1:].expand_as(h).contiguous()
    return logits, top, w


def W_11_mutates_hidden_state_in_place(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    logits, h, w = _finish(decoder, token, hidden_state, enc_outputs,
                           _weights_ref(s, enc_valid_lens))
    with torch.no_grad():
        hidden_state.copy_(h)            # "update the state" in place
    return logits, hidden_state, w


def W_12_float32_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s.float(), enc_valid_lens).float()
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs.float()).to(enc_outputs.dtype)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([ctx, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def W_13_valid_lens_ignored_when_full_max(decoder, token, hidden_state, enc_outputs,
                                         enc_valid_lens):
    # masks with the batch's smallest length (a "padding position" for the batch)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    v = enc_valid_lens.min().expand_as(enc_valid_lens)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, v))


def W_14_context_from_keys_W_k(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # context built from projected keys padded back... uses W_k(h) as values? no: uses
    # tanh features summed -- here: values are enc_outputs but weights transposed per batch
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s, enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(0, keepdim=True).expand(
        enc_outputs.shape[0], -1, -1).sum(1, keepdim=True) / enc_outputs.shape[0]
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def W_15_scale_scores_by_sqrt_d(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # carries the dot-product habit over: divides the additive scores by sqrt(d)
    s = _scores(decoder, hidden_state[-1], enc_outputs) / enc_outputs.shape[-1] ** 0.5
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_16_float16_unsafe_fill(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # -1e9 fill: fine in float32/64, -inf in float16 -> NaN rows only if all masked; here
    # combined with "* keep" to zero out: forward fine, but float16 overflows to -inf
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, -1e9), -1) * keep
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_03_additive_inf_mask_then_nan_to_num(decoder, token, hidden_state, enc_outputs,
                                          enc_valid_lens):
    # additive mask (scores + (-inf on padding)): forward right after nan_to_num,
    # backward NaN for a sequence of valid length 0
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    add = torch.zeros_like(s).masked_fill(~keep, float("-inf"))
    w = torch.softmax(s + add, -1).nan_to_num(0.0)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def O_06_gru_step_by_hand_dense_on_state(decoder, token, hidden_state, enc_outputs,
                                        enc_valid_lens):
    # one GRU step written out with decoder.rnn's weights; dense on the new top state
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s, enc_valid_lens)
    context = torch.einsum("bn,bnh->bh", w, enc_outputs)
    x = torch.cat([context, decoder.embedding(token)], dim=-1)
    rnn, hs = decoder.rnn, []
    for layer in range(rnn.num_layers):
        h = hidden_state[layer]
        gi = F.linear(x, getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"bias_ih_l{layer}"))
        gh = F.linear(h, getattr(rnn, f"weight_hh_l{layer}"), getattr(rnn, f"bias_hh_l{layer}"))
        ir, iz, inn = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
        nn_ = torch.tanh(inn + r * hn)
        h = (1 - z) * nn_ + z * h
        hs.append(h)
        x = h
    new = torch.stack(hs)
    return decoder.dense(new[-1]), new, w


def W_17_detached_new_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # truncated-BPTT habit: the returned state is detached
    logits, h, w = C_01_reference_like(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens)
    return logits, h.detach(), w


def W_18_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # .squeeze() without a dim: breaks for batch 1 or one encoder step
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    k = att.W_k(enc_outputs)
    s = att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze()
    if s.dim() == 1:
        s = s.unsqueeze(0) if enc_outputs.shape[0] == 1 else s.unsqueeze(1)
    w = _weights_ref(s, enc_valid_lens)
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out).squeeze(), h, w.squeeze()


def W_19_inplace_zero_after_softmax(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = torch.arange(s.shape[1], device=s.device)[None] < enc_valid_lens[:, None]
    w = torch.softmax(s.masked_fill(~keep, -1e30 if s.dtype != torch.float16 else -6e4), -1)
    w[~keep] = 0.0                      # in place on softmax's output: backward breaks
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_20_rnn_input_order_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # [embedding, context] instead of [context, embedding]: same total size, no crash
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s, enc_valid_lens)
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([emb, context], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def O_07_book_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from book.attention import masked_softmax
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s.unsqueeze(1), enc_valid_lens).squeeze(1)
    return _finish(decoder, token, hidden_state, enc_outputs, w)


def W_21_returns_stored_attention_weights(decoder, token, hidden_state, enc_outputs,
                                         enc_valid_lens):
    # computes everything, but returns the weights the attention layer stored last time
    logits, h, w = C_01_reference_like(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens)
    stored = getattr(decoder.attention, "attention_weights", None)
    if stored is not None and stored.shape[0] == w.shape[0] and stored.shape[-1] == w.shape[-1]:
        return logits, h, stored.reshape(w.shape)
    return logits, h, w


def W_22_W_q_and_W_k_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_k(hidden_state[-1])
    k = att.W_q(enc_outputs)
    s = att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_23_embedding_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # "the token is data": embedding looked up under no_grad -> embedding never trains
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s, enc_valid_lens)
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    with torch.no_grad():
        emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def W_24_attention_params_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    # uses the attention layers' weights as constants: W_q, W_k, w_v never train
    att = decoder.attention
    q = F.linear(hidden_state[-1], att.W_q.weight.detach())
    k = F.linear(enc_outputs, att.W_k.weight.detach())
    s = F.linear(torch.tanh(q.unsqueeze(1) + k), att.w_v.weight.detach()).squeeze(-1)
    return _finish(decoder, token, hidden_state, enc_outputs, _weights_ref(s, enc_valid_lens))


def W_25_dense_weight_data(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights_ref(s, enc_valid_lens)
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    logits = F.linear(out.squeeze(1), decoder.dense.weight.data, decoder.dense.bias.data)
    return logits, h, w


def W_26_zeroes_padding_states_in_place(decoder, token, hidden_state, enc_outputs,
                                       enc_valid_lens):
    # "clean" the padding encoder states first: in place on the caller's enc_outputs
    keep = torch.arange(enc_outputs.shape[1], device=enc_outputs.device)[None] < \
        enc_valid_lens[:, None]
    with torch.no_grad():
        enc_outputs.masked_fill_(~keep[..., None], 0.0)
    return C_01_reference_like(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
