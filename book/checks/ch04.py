"""Checker for chapter 4's exercise: one step of Bahdanau's attention decoder, by hand."""
import torch

from ..seq2seq import Seq2SeqAttentionDecoder
from ._core import call, checker, expect_close, expect_gradients, expect_tensor, fail, \
    is_close


class _NoShortcut(torch.nn.Module):
    """Stands in for `decoder.attention.forward`: the exercise computes the attention itself."""

    def forward(self, *args, **kwargs):
        __tracebackhide__ = True
        fail("bahdanau_step calls decoder.attention(...) (or its forward, also as "
             "AdditiveAttention.forward(decoder.attention, ...), or decoder(...), which calls "
             "it): the exercise asks you to compute the attention yourself.",
             "compute the scores from decoder.attention.W_q, .W_k and .w_v, the weights with "
             "a masked softmax, and the context as weights @ enc_outputs.")


def _blocked_forward(module, *args, **kwargs):
    """Stands in for the attention class's forward, reached as AdditiveAttention.forward."""
    __tracebackhide__ = True
    _NoShortcut().forward()


NAN_HINT = ("a sequence of valid length 0 masks every score of its row: a softmax over all "
            "-inf gives NaN, and nan_to_num (or torch.where) hides it in the forward pass only. "
            "Fill the masked scores with a large finite negative number, "
            "torch.finfo(scores.dtype).min, and multiply the weights by the mask, as "
            "book.attention.masked_softmax does.")


def _decoder_and_inputs(num_layers, batch, enc_steps, valid_lens, seed, attention=10):
    g = torch.Generator().manual_seed(seed)
    vocab, embed, hiddens = 13, 8, 12  # attention size 10 != hiddens on purpose
    with torch.random.fork_rng():  # seeded weights, without touching the learner's RNG
        torch.manual_seed(seed)
        decoder = Seq2SeqAttentionDecoder(vocab, embed, hiddens, num_layers=num_layers,
                                          attention_size=attention).eval()
    token = torch.randint(4, vocab, (batch,), generator=g)             # (batch,)
    hidden_state = torch.randn(num_layers, batch, hiddens, generator=g)
    enc_outputs = torch.randn(batch, enc_steps, hiddens, generator=g)  # padding not zero
    return decoder, token, hidden_state, enc_outputs, torch.tensor(valid_lens)


def _reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    state = (enc_outputs, hidden_state, enc_valid_lens)
    logits, (_, new_state, _) = decoder(token[:, None], state)  # the chapter's decoder
    return logits[:, 0], new_state, decoder.attention_weights[:, 0]


def _weights_with(decoder, query, enc_outputs, valid_lens, tanh=True):
    """The attention weights a common slip would give, to name the slip in the message."""
    att = decoder.attention
    features = att.W_q(query)[:, None] + att.W_k(enc_outputs)   # (batch, enc_steps, a)
    scores = att.w_v(torch.tanh(features) if tanh else features).squeeze(-1)
    mask = torch.arange(enc_outputs.shape[1])[None] < valid_lens[:, None]
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)


def _without_shortcut(fn, decoder, *args, case):
    """Call the learner's step with decoder.attention(...) (and so decoder(...)) disabled."""
    forward, cls = decoder.attention.forward, type(decoder.attention)
    cls_forward = cls.__dict__.get("forward")
    decoder.attention.forward = _NoShortcut().forward
    cls.forward = _blocked_forward  # also AdditiveAttention.forward(decoder.attention, ...)
    try:
        return call(fn, decoder, *args, name="bahdanau_step", case=case,
                    hint_on_error=_gru_hint)
    finally:
        if cls_forward is None:
            del cls.forward
        else:
            cls.forward = cls_forward
        decoder.attention.forward = forward


def _gru_hint(error):
    text = str(error)
    if "must match the size of tensor b" in text:
        return ("if this line adds W_q(query) and W_k(enc_outputs): W_q(query) has shape "
                "(batch, attention_size) and W_k(enc_outputs) (batch, enc_steps, "
                "attention_size), so give the query a step axis, W_q(query)[:, None] (or "
                ".unsqueeze(1)), before adding them.")
    if "Expected hidden size" in text or "hidden" in text and "size" in text:
        return ("pass the whole state hidden_state, shape (num_layers, batch, num_hiddens), to "
                "decoder.rnn; only the query is the top layer hidden_state[-1].")
    if "input_size" in text or "input.size(-1)" in text:
        return ("the GRU's input is torch.cat([context, embedding], dim=-1), shape (batch, 1, "
                "num_hiddens + embed_size): the context is weights @ enc_outputs (the encoder "
                "states themselves, not W_k applied to them).")
    return None


@checker("bahdanau_step")
def check_bahdanau_step(fn):
    """Check `fn(decoder, token, hidden_state, enc_outputs, enc_valid_lens)`.

    It must return (logits (batch, vocab), new hidden_state (layers, batch, hiddens),
    weights (batch, enc_steps)) equal to one step of the chapter's Seq2SeqAttentionDecoder,
    with the same gradients (with respect to the state, the encoder outputs and the
    decoder's parameters), also for a sequence of valid length 0 (weights and context 0), in
    eval mode, with the attention module's forward blocked (also via its class).
    """
    cases = [("1 layer, batch 3, 5 encoder steps, valid lengths [5, 3, 1]", 1, 3, 5, [5, 3, 1]),
             ("2 layers, batch 2, 6 encoder steps, valid lengths [4, 6]", 2, 2, 6, [4, 6]),
             ("2 layers, batch 4, 7 encoder steps, valid lengths [2, 7, 5, 3]", 2, 4, 7,
              [2, 7, 5, 3]),
             ("3 layers, batch 1, 55 encoder steps, valid length [52]", 3, 1, 55, [52]),
             ("2 layers, batch 2, 60 encoder steps, valid lengths [60, 9]", 2, 2, 60, [60, 9]),
             ("1 layer, batch 2, 4 encoder steps, valid lengths [4, 2], the default "
              "attention_size (= num_hiddens, 12)", 1, 2, 4, [4, 2], None),
             ("1 layer, batch 3, 5 encoder steps, valid lengths [5, 0, 2] (a sequence of "
              "valid length 0: its weights are all 0, so its context is 0)", 1, 3, 5,
              [5, 0, 2], 10)]
    for seed, (case, layers, batch, steps, lens, *attention) in enumerate(cases):
        decoder, token, state, enc_outputs, valid_lens = _decoder_and_inputs(
            layers, batch, steps, lens, seed, *attention)
        with torch.no_grad():
            ref_logits, ref_state, ref_weights = _reference(decoder, token, state, enc_outputs,
                                                            valid_lens)
        before = state.clone()
        others = [t.clone() for t in (token, enc_outputs, valid_lens)]
        result = _without_shortcut(fn, decoder, token, state, enc_outputs, valid_lens,
                                   case=case)
        for name, kept, now in zip(("token", "enc_outputs", "enc_valid_lens"), others,
                                   (token, enc_outputs, valid_lens)):
            if not torch.equal(kept, now):
                fail(f"bahdanau_step changed its argument `{name}` in place on {case}.",
                     "build new tensors: the caller uses them again at the next step.")
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            fail(f"bahdanau_step should return a triple (logits, hidden_state, weights), got "
                 f"{type(result).__name__} on {case}.")
        logits, new_state, weights = result
        if not torch.equal(state, before):
            fail(f"bahdanau_step changed the hidden_state it was given, in place, on {case}.",
                 "let the GRU return a new state: `out, hidden_state = decoder.rnn(x, state)`.")
        expect_tensor(weights, (batch, steps), what="weights", case=case)
        if weights.dtype != ref_weights.dtype:
            expect_tensor(weights, dtype=ref_weights.dtype, what="weights", case=case)
        empty = valid_lens == 0
        if empty.any() and weights[empty].abs().max() > 1e-6:
            got = [round(w, 3) for w in weights[empty][0].tolist()]
            fail(f"a sequence of valid length 0 got weights {got} on {case}; expected all 0 "
                 "(no encoder step is valid, so the context is 0).",
                 "a finite fill such as -1e6 leaves such a row a uniform softmax over the "
                 "padding: multiply the weights by the mask afterwards (or use "
                 "book.attention.masked_softmax, which does).")
        if weights[~(torch.arange(steps)[None] < valid_lens[:, None])].abs().max() > 1e-6:
            fail(f"weights on padding positions are not 0 on {case}: the step attended to "
                 "encoder states past each sequence's valid length.",
                 "mask the scores at positions >= enc_valid_lens before the softmax "
                 "(book.attention.masked_softmax does it).")
        sums = weights.sum(dim=-1)
        if not torch.allclose(sums, (~empty).to(sums.dtype), atol=1e-5):
            hint = "take the softmax over the last axis (the encoder steps)."
            by_batch = weights.detach().sum(dim=0)
            if batch > 1 and torch.allclose(by_batch, torch.ones_like(by_batch), atol=1e-5):
                hint = ("the weights sum to 1 over the batch: the softmax runs over dim 0 "
                        "(the examples); take it over the encoder steps, dim=-1.")
            elif (sums > 1 + 1e-5).any() and (weights.detach() == 0).any():
                hint = ("rows that sum to more than 1, with some weights set to 0, are what "
                        "dropout does (it zeroes weights and scales the rest by 1 / (1 - p)): "
                        "the step's weights are the masked softmax itself, without dropout.")
            fail(f"each row of weights must sum to 1 over the encoder steps (0 for a "
                 f"sequence of valid length 0) on {case}; "
                 f"they sum to {[round(s, 3) for s in sums.tolist()]}.", hint)
        if not torch.allclose(weights, ref_weights, atol=1e-5):
            if layers > 1 and torch.allclose(
                    weights, _weights_with(decoder, state[0], enc_outputs, valid_lens),
                    atol=1e-5):
                fail(f"the weights are those of the query hidden_state[0] on {case}.",
                     "hidden_state[0] is the bottom layer; the query is the top layer's "
                     "state, hidden_state[-1].")
            if torch.allclose(weights, _weights_with(decoder, state[-1], enc_outputs,
                                                     valid_lens, tanh=False), atol=1e-5):
                fail(f"the weights are those of scores without tanh on {case}.",
                     "the score is w_v^T tanh(W_q q + W_k k): apply tanh before w_v.")
            expect_close(weights, ref_weights, what="weights", case=case,
                         hint="query = hidden_state[-1] (the state before this step), keys = "
                              "enc_outputs; score = w_v(tanh(W_q(query) + W_k(keys))).")
        expect_tensor(new_state, tuple(state.shape), what="the new hidden_state", case=case)
        if torch.allclose(new_state, state):
            fail(f"the returned hidden_state is the one passed in, on {case}.",
                 "return the state the GRU gives back after this step.")
        if layers > 1 and not is_close(new_state, ref_state, atol=1e-5, rtol=1e-4) \
                and is_close(new_state[-1], ref_state[-1], atol=1e-5, rtol=1e-4):
            fail(f"the top layer of the new hidden_state is right on {case}, but the lower "
                 "layers are not.",
                 "return the state the GRU gives back, `out, new_state = decoder.rnn(x, "
                 "hidden_state)`: it holds every layer's new state; out is the top layer's "
                 "output only.")
        if not (is_close(new_state, ref_state, atol=1e-5, rtol=1e-4)
                and is_close(logits, ref_logits, atol=1e-5, rtol=1e-4)):
            again = _without_shortcut(fn, decoder, token, state.clone(),
                                      enc_outputs.clone(), valid_lens.clone(), case=case)
            if isinstance(again, (tuple, list)) and len(again) == 3 and all(
                    isinstance(t, torch.Tensor) and t.shape == u.shape
                    for t, u in zip(again, (logits, new_state))) \
                    and not (torch.equal(again[0], logits)
                             and torch.equal(again[1], new_state)):
                fail(f"the new hidden_state is wrong on {case}, and two calls on the same "
                     "inputs give different results: your step is random.",
                     "dropout with training=True (F.dropout's default) changes the weights "
                     "or the context at random (so does anything drawn with torch.rand*): "
                     "leave dropout out of this step, as the exercise says; the context is "
                     "the masked softmax's weights @ enc_outputs.")
        expect_close(new_state, ref_state, what="the new hidden_state", case=case,
                     hint="the GRU's input is torch.cat([context, embedding], dim=-1), in "
                          "this order, shaped (batch, 1, hiddens + embed); the context is "
                          "weights @ enc_outputs (the values), not a pooling of the keys.")
        expect_tensor(logits, (batch, decoder.dense.out_features), what="logits", case=case)
        expect_close(logits, ref_logits, what="logits", case=case,
                     hint="logits = decoder.dense(GRU output of this step), shape "
                          "(batch, vocab).")
        expect_gradients(
            lambda h, e: _without_shortcut(fn, decoder, token, h, e, valid_lens, case=case),
            lambda h, e: _reference(decoder, token, h, e, valid_lens),
            [("hidden_state", state), ("enc_outputs", enc_outputs)],
            params=[(f"decoder.{name}", p) for name, p in decoder.named_parameters()],
            reference_dtype=None, name="bahdanau_step", nan_hint=NAN_HINT,
            case=case + " (gradients of logits, new state and weights)",
            wrong_hint="the values are right but the gradients are not: something is "
                       "detached (.detach(), .data, torch.no_grad(), a NumPy detour) or "
                       "computed outside autograd, e.g. the context or the weights.")
