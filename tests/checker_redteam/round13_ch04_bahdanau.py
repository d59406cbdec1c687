"""Round 13 red team (writer C, issue 12), ch04_bahdanau: wrong (W_), right (C_), odd but right (O_)
and accepted-on-purpose (A_) solutions written from the exercise text alone; copied from
/work/redteam/round13/C/sols/ch04_bahdanau.py.
tests/test_checks_redteam.py runs every W_ entry (must fail) and every C_ and O_ entry
(must pass); A_ (accepted on purpose) and S_ entries are not tested.
Holes fixed: the red team's snapshot accepted W_10 (mask positions and lengths in the
scores' dtype: float16 rounds 2049 to 2048), W_14 (mode restored with decoder.train(was),
flattening a submodule's own mode), W_24 (keys cached under no_grad, keyed on the shape and
the corner entries), W_25 (dropout rates set to 0 for good) and W_26 (decoder.zero_grad()
inside the step). Now: a float16 case with 4099 encoder steps and valid lengths 2049, 4097,
4099 whose last valid step takes most of the weight (W_10); the case in training mode has
its GRU in evaluation mode (W_14); the second call on the same decoder runs also under
torch.no_grad() with enc_outputs holding the same values in another order, first and last
steps unchanged (W_24); the decoder's settings (numbers, flags, strings of every module: the
dropout rates) must be unchanged after each call (W_25); every parameter holds an
accumulated gradient during each call, which must be unchanged after it (W_26). Left for
_core (the lead's ruling): W_27 (torch's default dtype changed and left so); _core on main
rejects it already ("changed torch's default dtype"). Message: W_30 (the context of a length-0
row taken from the softmax before the zeroing) is now told that only the length-0 rows are
wrong and that their context must be 0, not to check the cat order. Q_99 (the writer's housekeeping entry that reset the default dtype) is
dropped: it is not a solution.
"""
# flake8: noqa
import contextlib
import torch
import torch.nn.functional as F
CHECK = "check_bahdanau_step"


def _mask(valid_lens, n, device):
    return torch.arange(n, device=device)[None, :] < valid_lens.to(device)[:, None]


def _weights(scores, valid_lens):
    keep = _mask(valid_lens, scores.shape[-1], scores.device)
    w = torch.softmax(scores.masked_fill(~keep, torch.finfo(scores.dtype).min), dim=-1)
    return w * keep


def _finish(decoder, token, hidden_state, context, weights):
    emb = decoder.embedding(token)
    x = torch.cat([context, emb], dim=-1).unsqueeze(1)
    out, h = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), h, weights


def _scores(decoder, hidden_state, enc_outputs):
    a = decoder.attention
    q = a.W_q(hidden_state[-1])
    k = a.W_k(enc_outputs)
    return a.w_v(torch.tanh(q[:, None, :] + k)).squeeze(-1)


def C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    s = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w.unsqueeze(1), enc_outputs).squeeze(1)
    return _finish(decoder, token, hidden_state, ctx, w)


def C_02_einsum(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    a = decoder.attention
    q = hidden_state[-1] @ a.W_q.weight.T
    k = torch.einsum("bth,ah->bta", enc_outputs, a.W_k.weight)
    s = torch.einsum("bta,a->bt", torch.tanh(q[:, None] + k), a.w_v.weight[0])
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.where(keep, torch.softmax(s.masked_fill(~keep, -torch.inf), -1), 0.0)
    w = torch.nan_to_num(w) if False else w
    # rows with no valid key: -inf everywhere gives NaN; use finfo fill instead
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.einsum("bt,bth->bh", w, enc_outputs)
    return _finish(decoder, token, hidden_state, ctx, w)


def O_03_dense_on_hidden(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Uses the new top hidden state for the logits (equal to the GRU output for one step)."""
    s = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = (w.unsqueeze(-1) * enc_outputs).sum(1)
    emb = decoder.embedding.weight[token]
    out, h = decoder.rnn(torch.cat([ctx, emb], -1)[:, None], hidden_state)
    return decoder.dense(h[-1]), h, w


def O_04_weights_by_renorm_of_masked_exp(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Masked scores via where(-inf) then softmax, rows with len 0 replaced by zeros safely."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    any_ = keep.any(-1, keepdim=True)
    safe = torch.where(keep | ~any_, s, torch.full_like(s, -torch.inf))
    w = torch.softmax(safe, -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_05_mask_after_softmax_renorm(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Softmax over ALL steps, zero the padding, renormalise: when the padding's scores are
    far above the valid ones (by >~ 90 in float32), the valid weights underflow to 0 -> 0/0 NaN
    (or 0 weights); float16 after only ~ 17."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.softmax(s, -1) * keep
    w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(w.dtype).tiny)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_06_values_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Context from enc_outputs.detach(): no gradient reaches the encoder through the values
    (any input; gradient w.r.t. enc_outputs)."""
    s = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs.detach())[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_07_query_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Query from hidden_state[-1].detach(): gradient w.r.t. hidden_state misses the attention
    path (any input)."""
    a = decoder.attention
    q = a.W_q(hidden_state[-1].detach())
    s = a.w_v(torch.tanh(q[:, None] + a.W_k(enc_outputs))).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_08_no_grad_in_eval(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """'Inference is eval mode': runs under no_grad when not decoder.training, so no gradients
    at all for an eval-mode decoder (any input in eval mode)."""
    ctx = contextlib.nullcontext() if decoder.training else torch.no_grad()
    with ctx:
        return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_09_squeeze_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """squeeze() without dims: batch 1 gives logits (vocab,) and weights (enc_steps,); enc_steps 1
    gives weights (batch,)."""
    a = decoder.attention
    q = a.W_q(hidden_state[-1])
    s = a.w_v(torch.tanh(q[:, None] + a.W_k(enc_outputs))).squeeze()
    s = s.reshape(enc_outputs.shape[0], enc_outputs.shape[1])
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)
    x = torch.cat([ctx, decoder.embedding(token)[:, None]], -1)
    out, h = decoder.rnn(x, hidden_state)
    return decoder.dense(out).squeeze(), h, w.squeeze()


def W_10_positions_in_model_dtype(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Mask positions built in the scores' dtype: in float16, odd lengths above 2048 round
    (valid_len 2049 -> 2048 masks a valid step); enc_steps >= 2050."""
    s = _scores(decoder, hidden_state, enc_outputs)
    pos = torch.arange(s.shape[-1], device=s.device, dtype=s.dtype)
    keep = pos[None] < enc_valid_lens.to(s.dtype)[:, None]
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_11_inplace_zero_softmax(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Zeroes padding in the softmax output in place: backward raises (softmax needs its
    output); any input with padding, on backward."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    w[~keep] = 0
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_12_query_bottom_layer(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Query from hidden_state[0] (bottom layer): wrong when num_layers >= 2."""
    a = decoder.attention
    q = a.W_q(hidden_state[0])
    s = a.w_v(torch.tanh(q[:, None] + a.W_k(enc_outputs))).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_13_toggle_eval_restore_train(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Puts the decoder in eval 'to be safe' and afterwards calls decoder.train(): an eval-mode
    caller gets its decoder back in training mode."""
    decoder.eval()
    try:
        return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    finally:
        decoder.train()


def W_14_restore_mode_flattens_submodules(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Saves decoder.training, sets eval, restores with decoder.train(was): a caller who had
    decoder.train() but decoder.rnn.eval() (mixed modes) gets rnn back in training mode."""
    was = decoder.training
    decoder.eval()
    try:
        return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    finally:
        decoder.train(was)


def W_15_query_broadcast_wrong_axis(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """q[None] + k instead of q[:, None] + k: crashes unless batch == 1 or batch == enc_steps,
    where it mixes example t's query into step t of every example."""
    a = decoder.attention
    q = a.W_q(hidden_state[-1])
    s = a.w_v(torch.tanh(q[None] + a.W_k(enc_outputs))).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_16_cat_order_swapped(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """[embedding, context] instead of [context, embedding]: runs only when embed_size ==
    num_hiddens, then feeds the wrong columns of the GRU's input weights."""
    s = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    x = torch.cat([decoder.embedding(token), ctx], -1).unsqueeze(1)
    out, h = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), h, w


def W_17_len0_uniform(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Valid length 0 gives uniform weights over the padding (d2l's behaviour), not zeros."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.softmax(s.masked_fill(~keep, -1e6 if s.dtype != torch.float16 else -6e4), -1)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_18_mask_le(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Off by one: keeps positions <= valid_len (one padding step attended); any len < steps."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = torch.arange(s.shape[-1], device=s.device)[None] <= enc_valid_lens[:, None]
    keep = keep & (enc_valid_lens[:, None] > 0)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_19_hidden_from_output(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Returns out.transpose(0, 1) as the new state: only the top layer, wrong for num_layers >= 2."""
    s = _scores(decoder, hidden_state, enc_outputs)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    x = torch.cat([ctx, decoder.embedding(token)], -1).unsqueeze(1)
    out, h = decoder.rnn(x, hidden_state)
    return decoder.dense(out[:, 0]), out.transpose(0, 1).expand_as(h).contiguous(), w


def W_20_float32_weights_half(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Softmax with dtype=float32 and weights left in float32 for a float16 decoder (the
    context is cast back): returned weights have the wrong dtype in float16."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.softmax(s.float().masked_fill(~keep, -torch.finfo(torch.float32).max), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs.float())[:, 0].to(enc_outputs.dtype)
    return _finish(decoder, token, hidden_state, ctx, w)


def W_21_padding_by_zero_states(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Ignores enc_valid_lens, takes padding to be the steps whose encoder state is all zero:
    wrong whenever padded encoder states are nonzero (always for a GRU encoder)."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = enc_outputs.abs().sum(-1) > 0
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_22_tanh_after_sum_with_wv_bias_free_shortcut(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Shortcut: w_v tanh(W_q s) + w_v tanh(W_k h) (tanh split over the sum): wrong scores
    everywhere except where the tanh is linear (tiny weights)."""
    a = decoder.attention
    q = a.w_v(torch.tanh(a.W_q(hidden_state[-1])))            # (b, 1)
    k = a.w_v(torch.tanh(a.W_k(enc_outputs))).squeeze(-1)     # (b, t)
    s = q + k
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_23_softmax_over_valid_slice_loop(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Per-example loop that slices s[b, :len] but uses int(len) of the FIRST example for all
    when lengths are equal-ish... (mask built from enc_valid_lens.max())."""
    s = _scores(decoder, hidden_state, enc_outputs)
    L = int(enc_valid_lens.max())
    keep = torch.arange(s.shape[-1], device=s.device)[None].expand_as(s) < L
    keep = keep & (enc_valid_lens[:, None] > 0)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


_KEYS = {}


def W_24_cached_keys_fingerprint(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Precomputes W_k(enc_outputs) once per source ('keys do not change while decoding'),
    fingerprinted by (decoder, shape, first and last entries): another source batch with the
    same shape and corner values (or after W_k is trained) reuses stale keys."""
    a = decoder.attention
    key = (id(decoder), tuple(enc_outputs.shape), enc_outputs.dtype,
           float(enc_outputs.reshape(-1)[0]), float(enc_outputs.reshape(-1)[-1]))
    if key not in _KEYS or torch.is_grad_enabled():
        _KEYS[key] = a.W_k(enc_outputs)
    k = _KEYS[key] if not torch.is_grad_enabled() else a.W_k(enc_outputs)
    s = a.w_v(torch.tanh(a.W_q(hidden_state[-1])[:, None] + k)).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_25_switches_dropout_off_for_good(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """'Leave dropout out' done by setting every dropout rate of the decoder to 0 and never
    restoring it: the caller's decoder (built with dropout 0.2) trains without dropout after."""
    for m in decoder.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    decoder.rnn.dropout = 0.0
    return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_26_zero_grad_inside(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Calls decoder.zero_grad() 'to start clean': gradients the caller accumulated on the
    decoder's parameters (earlier steps' backward) are wiped."""
    decoder.zero_grad()
    return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_27_set_default_dtype_leak(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Sets torch's default dtype to the decoder's float dtype 'to keep its dtype' and leaves
    it: after a float64 call, the caller's torch.randn etc. are float64."""
    dt = decoder.dense.weight.dtype
    if dt in (torch.float32, torch.float64):
        torch.set_default_dtype(dt)
    return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def W_28_len_clamped_to_one(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Clamps lengths to >= 1 'to avoid empty rows': a length-0 sequence attends to step 0."""
    return C_01_reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens.clamp_min(1))


def W_29_mask_from_python_max_len(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Mask via a python loop with int(v) but builds rows with a list comprehension over
    range(len(enc_valid_lens) - 1) and pads the last row as all valid: last example unmasked."""
    s = _scores(decoder, hidden_state, enc_outputs)
    n = s.shape[-1]
    rows = [[t < int(v) for t in range(n)] for v in enc_valid_lens[:-1]] + [[True] * n]
    keep = torch.tensor(rows, device=s.device)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1) * keep
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_30_context_before_len0_fix(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Zeroes the returned weights of length-0 rows but computes the context from the uniform
    softmax before the fix: a length-0 sequence gets the mean of its padding as context."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    w = torch.softmax(s.masked_fill(~keep, torch.finfo(s.dtype).min), -1)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w * keep)


def W_31_hand_tanh(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """tanh written as (e^{2x} - 1) / (e^{2x} + 1): inf/inf = NaN once W_q s + W_k h exceeds
    ~44 in float32, ~5.5 in float16 (e.g. float16 features of size 6)."""
    a = decoder.attention
    x = a.W_q(hidden_state[-1])[:, None] + a.W_k(enc_outputs)
    e = torch.exp(2 * x)
    s = a.w_v((e - 1) / (e + 1)).squeeze(-1)
    w = _weights(s, enc_valid_lens)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)


def W_32_global_max_shift(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Softmax by hand with one max over the whole batch (not per row): a row whose scores sit
    far (> ~100 in float32) below another row's max underflows to 0/0."""
    s = _scores(decoder, hidden_state, enc_outputs)
    keep = _mask(enc_valid_lens, s.shape[-1], s.device)
    e = torch.exp(s - s.masked_fill(~keep, -torch.inf).max()) * keep
    w = e / e.sum(-1, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)
    ctx = torch.bmm(w[:, None], enc_outputs)[:, 0]
    return _finish(decoder, token, hidden_state, ctx, w)
