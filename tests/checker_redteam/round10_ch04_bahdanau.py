"""Round 10 red team (writer B, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but
right (O_) and against-the-wording (S_) solutions written from the exercise text alone;
copied from /work/redteam/round10/B/sols/ch04_bahdanau.py with the names W01_x written W_01_x.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Every W_ was rejected in round 10 already. O_05, O_06 and O_07 were written as W
and are right (a -inf fill then nan_to_num or a where on the empty rows: masked_fill's
backward zeroes the NaN, so values and gradients equal the reference's). S_01 to S_03
reach the forbidden forward through type(att).forward, nn.Module.__call__ or the decoder
class (rejected with the right message); S_04 applies decoder.attention.dropout to the
returned weights (undetectable: the checker's decoders use dropout 0 by design).
"""
# flake8: noqa
import torch
import torch.nn.functional as F
from book.attention import masked_softmax

CHECK = "check_bahdanau_step"


def _scores(decoder, query, enc_outputs):
    att = decoder.attention
    q = att.W_q(query)                       # (b, h)
    k = att.W_k(enc_outputs)                 # (b, n, h)
    return att.w_v(torch.tanh(q[:, None, :] + k)).squeeze(-1)  # (b, n)


def _keep(scores, enc_valid_lens):
    n = scores.shape[1]
    return torch.arange(n, device=scores.device)[None, :] < enc_valid_lens[:, None]


def _finish(decoder, token, hidden_state, enc_outputs, w):
    context = torch.bmm(w.unsqueeze(1), enc_outputs)          # (b, 1, h)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h


def _weights(scores, keep):
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * keep


def C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_01_book_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = masked_softmax(s.unsqueeze(1), enc_valid_lens).squeeze(1)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_02_softmax_only_on_valid_rows(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    rows = keep.any(dim=-1)
    w = torch.zeros_like(s)
    w[rows] = torch.softmax(s[rows].masked_fill(~keep[rows], float("-inf")), dim=-1)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_03_einsum_and_dense_on_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    k = att.W_k(enc_outputs)
    s = torch.einsum("bnh,h->bn", torch.tanh(q.unsqueeze(1) + k), att.w_v.weight[0])
    keep = _keep(s, enc_valid_lens)
    w = _weights(s, keep)
    context = torch.einsum("bn,bnh->bh", w, enc_outputs)
    emb = decoder.embedding.weight[token]
    out, h = decoder.rnn(torch.cat([context, emb], -1).unsqueeze(1), hidden_state)
    return decoder.dense(h[-1]), h, w


# ---------------------------------------------------------------- wrong
def W_01_query_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[0], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_02_query_mean_of_layers(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state.mean(0), enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_03_detach_new_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, h, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, h.detach(), w


def W_04_detach_returned_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, h, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, h, w.detach()


def W_05_squeeze_everything(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_q(hidden_state[-1])
    k = att.W_k(enc_outputs)
    s = att.w_v(torch.tanh(q[:, None, :] + k)).squeeze()
    keep = torch.arange(enc_outputs.shape[1])[None, :] < enc_valid_lens[:, None]
    s = torch.where(keep, s, torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1) * keep
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    emb = decoder.embedding(token)
    out, h = decoder.rnn(torch.cat([context, emb], -1).unsqueeze(1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def W_06_zero_length_gets_uniform(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_07_clamp_length_to_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens.clamp(min=1)))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_05_inf_mask_nan_to_num(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1).nan_to_num(0.0)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_06_inf_mask_where_empty_rows(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, float("-inf")), dim=-1)
    w = torch.where((enc_valid_lens > 0)[:, None], w, torch.zeros_like(w))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_10_fill_minus_1e4(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, -1e4), dim=-1) * keep
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_11_update_hidden_in_place(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, h, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    with torch.no_grad():
        hidden_state.copy_(h)
    return logits, hidden_state, w


def W_12_exp_without_max(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    e = torch.exp(s) * keep
    w = e / e.sum(-1, keepdim=True).clamp(min=torch.finfo(s.dtype).tiny)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_13_rnn_gets_top_layer_only(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    logits, h = _finish(decoder, token, hidden_state[-1:].expand_as(hidden_state)
                        .contiguous(), enc_outputs, w)
    return logits, h, w


def W_14_hidden_from_out(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    new_h = torch.cat([h[:-1], out.transpose(0, 1)], 0) if h.shape[0] > 1 else \
        out.transpose(0, 1)
    new_h = out.transpose(0, 1).expand_as(h)
    return decoder.dense(out.squeeze(1)), new_h, w


def W_15_mask_by_padding_zeros(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Treats an encoder state that is exactly zero as padding; ignores valid lens
    except for the empty rows."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = (enc_outputs != 0).any(-1) & (enc_valid_lens > 0)[:, None]
    w = _weights(s, keep)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_16_softmax_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Weights through float32 even for float16 AND float64 -- skip-ruled, kept tiny."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = (torch.softmax(s.float().masked_fill(~keep, -3e38), -1) * keep).to(s.dtype)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_17_lengths_capped_at_max_valid(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    """Attends over the first max(valid_lens) steps only, ignoring per-row lengths
    for all but the zero rows."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    m = int(enc_valid_lens.max())
    keep = _keep(s, torch.full_like(enc_valid_lens, m)) & (enc_valid_lens > 0)[:, None]
    w = _weights(s, keep)
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def W_18_context_keeps_gradient_off(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, _keep(s, enc_valid_lens))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs.detach(), w)
    return logits, h, w


def S_01_class_forward_of_attention(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    """Calls AdditiveAttention.forward through the class (forbidden by the wording)."""
    att = decoder.attention
    context = type(att).forward(att, hidden_state[-1].unsqueeze(1), enc_outputs,
                                enc_outputs, enc_valid_lens)
    w = att.attention_weights.squeeze(1)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def S_02_module_call_unbound(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """torch.nn.Module.__call__ on the attention: the same forward, another spelling."""
    att = decoder.attention
    context = torch.nn.Module.__call__(att, hidden_state[-1].unsqueeze(1), enc_outputs,
                                       enc_outputs, enc_valid_lens)
    w = att.attention_weights.squeeze(1)
    emb = decoder.embedding(token).unsqueeze(1)
    out, h = decoder.rnn(torch.cat([context, emb], dim=-1), hidden_state)
    return decoder.dense(out.squeeze(1)), h, w


def S_03_decoder_class_forward(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """The whole decoder step through the class's forward."""
    logits, state = type(decoder).forward(decoder, token.unsqueeze(1),
                                          (enc_outputs, hidden_state, enc_valid_lens))
    return logits.squeeze(1), state[1], decoder.attention_weights.squeeze(1)


def W_19_inplace_zero_after_softmax(decoder, token, hidden_state, enc_outputs,
                                   enc_valid_lens):
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1)
    w[~keep] = 0
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def O_07_zero_rows_two_branches(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    """Zeroes the empty rows only if the first example is empty (a scalar test)."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), dim=-1)
    if (enc_valid_lens == 0).all():
        w = w * 0
    elif not keep.any(-1).all():
        w = w * keep
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w


def S_04_dropout_on_returned_weights(decoder, token, hidden_state, enc_outputs,
                                      enc_valid_lens):
    """Applies the attention's dropout to the weights returned (not only the context):
    with dropout 0 it is the identity, so the checker decoders never see it -- S."""
    logits, h, w = C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, h, decoder.attention.dropout(w)


def W_22_weights_left_in_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Softmax in float32 for safety; the context is cast back, the weights are not."""
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    keep = _keep(s, enc_valid_lens)
    dt = torch.promote_types(s.dtype, torch.float32)
    w = torch.softmax(s.to(dt).masked_fill(~keep, torch.finfo(dt).min), -1) * keep
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w.to(s.dtype))
    return logits, h, w


def W_23_weights_from_rows_valid_in_first_call(decoder, token, hidden_state, enc_outputs,
                                              enc_valid_lens):
    """Keeps the mask of the first call for every later call with the same batch size."""
    key = (enc_outputs.shape[0], enc_outputs.shape[1])
    cache = W_23_weights_from_rows_valid_in_first_call.__dict__.setdefault("c", {})
    if key not in cache:
        cache[key] = torch.arange(key[1])[None, :] < enc_valid_lens[:, None].cpu()
    s = _scores(decoder, hidden_state[-1], enc_outputs)
    w = _weights(s, cache[key].to(s.device))
    logits, h = _finish(decoder, token, hidden_state, enc_outputs, w)
    return logits, h, w
