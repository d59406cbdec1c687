"""Round 14 red team (writer C, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round14/C/sols/ch04_bahdanau_step.py (Round 14, writer C, check_bahdanau_step: one step of Bahdanau's decoder by hand.).
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: main accepted W_14 (decoder.requires_grad_(True): a frozen
parameter unfrozen), W_15 (a forward hook left on decoder.rnn) and W_19 (torch.manual_seed(
torch.initial_seed()) inside the step). Now the first call of each case has the embedding
table frozen by the caller, and every parameter's requires_grad and every module's and
parameter's hooks must be unchanged after each call (W_14, W_15); a step of a decoder whose
dropouts are off (every case) runs with draws forbidden, after one draw from each global
generator so that a re-seed shows (W_19). Left for _core: none (W_16-W_18, W_20, W_23, W_24
are rejected by _core on main).
"""
# flake8: noqa
import random

import numpy as np
import torch
import torch.nn.functional as F

CHECK = "check_bahdanau_step"


def _weights(decoder, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_q(hidden_state[-1])                                  # (b, h)
    k = att.W_k(enc_outputs)                                       # (b, T, h)
    scores = att.w_v(torch.tanh(q.unsqueeze(1) + k)).squeeze(-1)   # (b, T)
    keep = torch.arange(enc_outputs.shape[1], device=scores.device) < enc_valid_lens[:, None]
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    return w * keep


def _rest(decoder, token, hidden_state, enc_outputs, w):
    context = torch.bmm(w.unsqueeze(1), enc_outputs)               # (b, 1, h)
    emb = decoder.embedding(token).unsqueeze(1)                    # (b, 1, e)
    out, new_state = decoder.rnn(torch.cat([context, emb], -1), hidden_state)
    return decoder.dense(out.squeeze(1)), new_state, w


def _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    w = _weights(decoder, hidden_state, enc_outputs, enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def C_02_book_masked_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    from book.attention import masked_softmax
    att = decoder.attention
    q = att.W_q(hidden_state[-1].unsqueeze(1))
    k = att.W_k(enc_outputs)
    scores = att.w_v(torch.tanh(q.unsqueeze(2) + k.unsqueeze(1))).squeeze(-1)  # (b,1,T)
    w = masked_softmax(scores, enc_valid_lens)
    context = torch.bmm(w, enc_outputs)
    x = torch.cat([context, decoder.embedding(token).unsqueeze(1)], dim=-1)
    out, state = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), state, w[:, 0]


def O_03_dense_on_new_top_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """A GRU's top-layer output for one step is its new top-layer state: dense on that."""
    w = _weights(decoder, hidden_state, enc_outputs, enc_valid_lens)
    context = (w.unsqueeze(-1) * enc_outputs).sum(1)
    x = torch.cat([context, decoder.embedding.weight[token]], -1).unsqueeze(1)
    _, new_state = decoder.rnn(x, hidden_state)
    return decoder.dense(new_state[-1]), new_state, w


def O_04_mask_under_no_grad_and_where(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Mask built under no_grad (never differentiated), -inf fill, empty rows set by where."""
    att = decoder.attention
    scores = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1)
                                + att.W_k(enc_outputs))).squeeze(-1)
    with torch.no_grad():
        keep = torch.arange(scores.shape[1], device=scores.device)[None] < enc_valid_lens[:, None]
        empty = ~keep.any(-1, keepdim=True)
    filled = scores.masked_fill(~keep | empty, float("-inf"))
    filled = torch.where(empty, torch.zeros_like(scores), filled)   # empty rows: finite, then 0
    w = torch.where(keep, torch.softmax(filled, -1), torch.zeros_like(scores))
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def O_05_sets_and_restores_default_dtype(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    old = torch.get_default_dtype()
    torch.set_default_dtype(enc_outputs.dtype if enc_outputs.dtype.is_floating_point else old)
    try:
        return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    finally:
        torch.set_default_dtype(old)


def O_06_einsum_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    w = _weights(decoder, hidden_state, enc_outputs, enc_valid_lens)
    context = torch.einsum("bt,bth->bh", w, enc_outputs).unsqueeze(1)
    x = torch.cat([context, decoder.embedding(token)[:, None]], -1)
    out, s = decoder.rnn(x, hidden_state)
    return decoder.dense(out)[:, 0], s, w


# ---------------------------------------------------------------- wrong
def W_10_query_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Query from hidden_state[0] (bottom layer): wrong for num_layers >= 2."""
    return _q0(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def _q0(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    att = decoder.attention
    q = att.W_q(hidden_state[0])
    scores = att.w_v(torch.tanh(q.unsqueeze(1) + att.W_k(enc_outputs))).squeeze(-1)
    keep = torch.arange(scores.shape[1]) .to(scores.device) < enc_valid_lens[:, None]
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def W_11_mask_from_zero_encoder_rows(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Padding found as all-zero encoder rows (the encoder zeroes padding) instead of from
    enc_valid_lens: wrong whenever padded rows are non-zero (or a valid row is zero)."""
    att = decoder.attention
    scores = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))).squeeze(-1)
    keep = enc_outputs.abs().sum(-1) > 0
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def W_12_query_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """query = hidden_state[-1].detach(): the attention path's gradient to the state is lost
    (the GRU path still gives one): dL/dhidden_state wrong."""
    hs = hidden_state.clone()
    hs_q = torch.cat([hidden_state[:-1], hidden_state[-1:].detach()], 0)
    w = _weights(decoder, hs_q, enc_outputs, enc_valid_lens)
    return _rest(decoder, token, hs, enc_outputs, w)


def W_13_keys_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Keys taken from enc_outputs.detach() (values not): dL/denc_outputs misses the key path."""
    w = _weights(decoder, hidden_state, enc_outputs.detach(), enc_valid_lens)
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def W_14_unfreezes_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """decoder.requires_grad_(True) 'so gradients flow': a caller's frozen parameters
    (e.g. a frozen embedding) are unfrozen for good."""
    decoder.requires_grad_(True)
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_15_forward_hook_left_on_rnn(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Registers a forward hook on decoder.rnn (to log outputs) and leaves it: the caller's
    module now has a hook and keeps every output it ever computes."""
    log = []
    decoder.rnn.register_forward_hook(lambda m, i, o: log.append(o))
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_16_forces_grad_mode_on(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """torch.set_grad_enabled(True): under the caller's no_grad the results require grad and
    the caller's block records graphs afterwards."""
    torch.set_grad_enabled(True)
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_17_numpy_rng_self_test(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Deterministic, yet advances the caller's NumPy global stream (a random probe)."""
    np.random.randint(0, 10)
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_18_python_random(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Deterministic, yet advances Python's global `random` stream."""
    random.random()
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_19_rewinds_torch_generator(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """'Leave dropout out' done by running dropout-free and reseeding with initial_seed():
    the caller's torch generator is rewound to its seed."""
    torch.manual_seed(torch.initial_seed())
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_20_retain_grad_on_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """hidden_state.retain_grad() left behind: the caller's non-leaf state keeps a .grad."""
    if hidden_state.requires_grad:
        hidden_state.retain_grad()
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_21_off_by_one_mask(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """positions <= valid_len: one padding step too many gets weight."""
    att = decoder.attention
    scores = att.w_v(torch.tanh(att.W_q(hidden_state[-1]).unsqueeze(1) + att.W_k(enc_outputs))).squeeze(-1)
    keep = torch.arange(scores.shape[1], device=scores.device) <= enc_valid_lens[:, None]
    keep = keep & (enc_valid_lens[:, None] > 0)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), -1) * keep
    return _rest(decoder, token, hidden_state, enc_outputs, w)


def W_22_dense_weight_grad_lost(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """logits with F.linear(out, dense.weight.detach(), bias): the dense layer learns nothing."""
    w = _weights(decoder, hidden_state, enc_outputs, enc_valid_lens)
    context = torch.bmm(w.unsqueeze(1), enc_outputs)
    out, s = decoder.rnn(torch.cat([context, decoder.embedding(token).unsqueeze(1)], -1), hidden_state)
    d = decoder.dense
    return F.linear(out[:, 0], d.weight.detach(), d.bias), s, w


def W_23_anomaly_mode_left_on(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Debugging left in: autograd anomaly detection turned on for the caller."""
    torch.autograd.set_detect_anomaly(True)
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_24_flush_denormal(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Flush-denormal turned on for the caller and left on."""
    torch.set_flush_denormal(True)
    return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def A_25_half_roundtrip_of_decoder(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Runs the step with the decoder moved to the input's dtype and back (decoder.to(dt)
    then .to(old)): a float32 decoder fed float16 has its parameters rounded to float16. A_: the text has the inputs in the decoder's dtype, where .to is a no-op."""
    old = next(decoder.parameters()).dtype
    decoder.to(enc_outputs.dtype)
    try:
        return _ref(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    finally:
        decoder.to(old)
