"""Round 11 red team (writer B, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round11/B/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 11 already except W_20 (enc_outputs.view(b * n, h):
no case had a non-contiguous enc_outputs); a case with enc_outputs and hidden_state as
transposed views now rejects it with the .reshape() hint. O_09 (a -inf fill, then
nan_to_num) is right: its values and gradients equal the reference's, even for a row of
valid length 0.
"""
# flake8: noqa
import torch
import torch.nn.functional as F

CHECK = "check_bahdanau_step"


def _scores(decoder, q, keys):
    att = decoder.attention
    feats = torch.tanh(att.W_q(q).unsqueeze(1) + att.W_k(keys))   # (b, n, a)
    return att.w_v(feats).squeeze(-1)                              # (b, n)


def _keep(scores, lens):
    n = scores.shape[-1]
    return torch.arange(n, device=scores.device) < lens.to(scores.device)[:, None]


def _weights(scores, lens):
    keep = _keep(scores, lens)
    s = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(s, dim=-1) * keep


def _finish(decoder, token, hidden_state, context, w):
    emb = decoder.embedding(token)                                 # (b, e)
    x = torch.cat([context, emb], dim=-1).unsqueeze(1)             # (b, 1, h+e)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


def C_01_reference_like(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def O_02_where_and_einsum(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """-inf fill, softmax, then torch.where for empty rows *before* the softmax sees them."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    empty = ~keep.any(-1, keepdim=True)
    s = torch.where(keep | empty, s, torch.tensor(float("-inf"), dtype=s.dtype))
    w = torch.softmax(s, -1)
    w = torch.where(empty, torch.zeros_like(w), w)
    ctx = torch.einsum("bn,bnh->bh", w, enc_outputs)
    return _finish(decoder, token, hidden_state, ctx, w)


def O_03_numpy_int_lens_loop(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Per-example loop over the batch (slow, but right)."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    ws = []
    for b in range(s.shape[0]):
        L = int(enc_valid_lens[b])
        row = torch.zeros_like(s[b])
        if L > 0:
            row = torch.cat([torch.softmax(s[b, :L], -1), s[b, L:] * 0])
        ws.append(row)
    w = torch.stack(ws)
    ctx = (w.unsqueeze(-1) * enc_outputs).sum(1)
    return _finish(decoder, token, hidden_state, ctx, w)


# ---- wrong ---------------------------------------------------------------------------

def W_01_query_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """query = hidden_state[0]: right only for one-layer GRUs."""
    s = _scores(decoder, hidden_state[0], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_02_detach_enc_outputs_in_keys(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Keys from enc_outputs.detach(): parameters' grads right, enc_outputs' grad wrong."""
    s = _scores(decoder, hidden_state[-1], enc_outputs.detach())
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_03_detach_enc_outputs_in_values(decoder, token, hidden_state, enc_outputs,
                                     enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs.detach()).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_04_detach_query(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Query from hidden_state.detach(): no gradient to the previous state through W_q."""
    s = _scores(decoder, hidden_state[-1].detach(), enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_05_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """'float16-safe' fill of -1e4: wrong when valid scores are below -1e4."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e4), -1) * keep
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_06_renormalise_after_full_softmax(decoder, token, hidden_state, enc_outputs,
                                       enc_valid_lens):
    """Softmax over all steps, zero the padding, renormalise (sum clamped): padding that
    dominates makes the valid weights underflow."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s, -1) * keep
    w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_07_context_embedding_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """[embedding, context] instead of [context, embedding]."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = decoder.embedding(token)
    x = torch.cat([emb, ctx], dim=-1).unsqueeze(1)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


def W_08_hidden_from_out(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """New state taken from the GRU's output: right for one layer only."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    x = torch.cat([ctx, decoder.embedding(token)], dim=-1).unsqueeze(1)
    out, _ = decoder.rnn(x, hidden_state)
    new_h = out.transpose(0, 1).expand(hidden_state.shape[0], -1, -1)
    return decoder.dense(out.squeeze(1)), new_h, w


def O_09_nan_to_num_after_inf(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), -1).nan_to_num(0.0)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_10_mutates_enc_outputs(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Zeroes the padding of enc_outputs in place (the caller's tensor changes)."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    with torch.no_grad():
        enc_outputs.mul_(keep.unsqueeze(-1).to(enc_outputs.dtype))
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


_CACHE = {}


def W_11_keys_cached_by_shape(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """W_k(enc_outputs) computed once per shape (the encoder states 'do not change')."""
    key = (tuple(enc_outputs.shape), enc_outputs.dtype)
    if key not in _CACHE:
        _CACHE[key] = decoder.attention.W_k(enc_outputs)
    keys = _CACHE[key]
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + keys)).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_12_keys_cached_by_data_ptr(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    key = (enc_outputs.data_ptr(), tuple(enc_outputs.shape), enc_outputs.dtype)
    if key not in _CACHE:
        _CACHE[key] = decoder.attention.W_k(enc_outputs).detach()
    keys = _CACHE[key]
    att = decoder.attention
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + keys)).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_13_empty_row_uniform(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Finite fill, no zeroing: a length-0 row gets uniform weights (d2l's behaviour)."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_14_max_over_valid_but_exp_manual(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    """Hand-written softmax with max over all steps (padding included), exp*keep / sum."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    e = torch.exp(s - s.max(-1, keepdim=True).values) * keep
    den = e.sum(-1, keepdim=True)
    w = torch.where(den > 0, e / den.clamp_min(torch.finfo(s.dtype).tiny), e * 0)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_15_attention_dropout_then_eval(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    """Puts the decoder in eval mode 'to be safe' and leaves it there."""
    decoder.eval()
    return C_01_reference_like(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_16_lens_clamped_to_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Avoids empty rows by clamping the lengths at 1 (attends to step 0)."""
    lens = enc_valid_lens.clamp_min(1)
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_17_float32_softmax_cast_back_half_only(decoder, token, hidden_state, enc_outputs,
                                            enc_valid_lens):
    """Scores via a float32 copy of w_v's weight (a 'stable' matmul): float64 loses digits."""
    att = decoder.attention
    feats = torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))
    s = (feats.float() @ att.w_v.weight.float().T).squeeze(-1).to(feats.dtype)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_18_weights_returned_before_zeroing(decoder, token, hidden_state, enc_outputs,
                                        enc_valid_lens):
    """Context from zeroed weights, but the returned weights are the uniform ones."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w0 = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    w = w0 * keep
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w0)


# Renamed O_ -> W_ after round 13: positions and lengths in float16 are wrong past 2048 encoder
# steps, which round 13's case of 4099 steps now reaches (round 13's W_10).
def W_19_lens_as_float_compare(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Lengths compared after a float16 cast: wrong once enc_steps passes 2048 (never)...
    and also uses <= len - 0.5 which is fine: a control that should PASS if lens are ints."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    n = s.shape[-1]
    keep = torch.arange(n, dtype=torch.float16)[None] < enc_valid_lens.to(torch.float16)[:, None]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_20_view_enc_outputs(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Flattens enc_outputs with .view: crashes on a non-contiguous enc_outputs."""
    b, n, h = enc_outputs.shape
    att = decoder.attention
    keys = att.W_k(enc_outputs.view(b * n, h)).view(b, n, -1)
    s = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + keys)).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_21_additive_mask_1e30(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s - 1e30 * (~keep).to(s.dtype), -1) * keep
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_22_batch_one_fast_path(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """'One sequence has no padding': skips the mask for batch 1."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = torch.softmax(s, -1) if s.shape[0] == 1 else _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_23_padding_from_zero_states(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Padding found as all-zero encoder states (true of the course's encoder), plus
    length-0 rows from the lengths."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = (enc_outputs != 0).any(-1) & (enc_valid_lens[:, None] > 0)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_24_lens_full_skip_when_max_equals_n(decoder, token, hidden_state, enc_outputs,
                                         enc_valid_lens):
    """Skips the mask when the longest length fills the steps (batch-wide test)."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    if int(enc_valid_lens.max()) == s.shape[-1] and int(enc_valid_lens.min()) > 0:
        w = torch.softmax(s, -1)
    else:
        w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_25_embedding_weight_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Looks the token up in decoder.embedding.weight.detach(): the embedding learns nothing."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    emb = F.embedding(token, decoder.embedding.weight.detach())
    x = torch.cat([ctx, emb], dim=-1).unsqueeze(1)
    out, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(out.squeeze(1)), new_h, w


def W_26_hidden_state_updated_in_place(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    """Writes the new state into the caller's hidden_state and returns it."""
    logits, new_h, w = C_01_reference_like(decoder, token, hidden_state, enc_outputs,
                                          enc_valid_lens)
    with torch.no_grad():
        hidden_state.copy_(new_h)
    return logits, new_h, w


def O_27_dense_on_new_state_and_truncated_keys(decoder, token, hidden_state, enc_outputs,
                                              enc_valid_lens):
    """Scores only the first max(len) steps, pads the weights back; logits from new_h[-1]."""
    L = max(int(enc_valid_lens.max()), 1)
    s = _scores(decoder, hidden_state[-1], enc_outputs[:, :L])
    w = _weights(s, enc_valid_lens)
    w = F.pad(w, (0, enc_outputs.shape[1] - L))
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    x = torch.cat([ctx, decoder.embedding(token)], dim=-1).unsqueeze(1)
    _, new_h = decoder.rnn(x, hidden_state)
    return decoder.dense(new_h[-1]), new_h, w


def W_28_weights_detached_for_context(decoder, token, hidden_state, enc_outputs,
                                     enc_valid_lens):
    """Context from w.detach() ('the weights are just for plotting'): the attention
    layers get their gradient only through the returned weights."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.detach().unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)
