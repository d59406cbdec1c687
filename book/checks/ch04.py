"""Checker for chapter 4's exercise: one step of Bahdanau's attention decoder, by hand."""
import contextlib
import copy
import random
import sys

import torch

from ..seq2seq import Seq2SeqAttentionDecoder
from ._core import STANDARD, _learner_line, call, checker, cotangents, draws_allowed, \
    expect_close, expect_conditions, expect_gradients, expect_tensor, fail, is_close, worst


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
            "-inf gives NaN. If the -inf came from an addition (scores + a mask of 0 and "
            "-inf), nan_to_num (or torch.where) after the softmax hides the NaN in the "
            "forward pass only: the addition's backward carries it to the scores "
            "(masked_fill's backward does not: it zeroes the gradient at the filled "
            "positions). Fill the masked scores with a large finite negative number, "
            "scores.masked_fill(~mask, torch.finfo(scores.dtype).min), and multiply the "
            "weights by the mask, as book.attention.masked_softmax does.")

EXP_HINT = ("NaN weights come from exp() overflowing (above a score of 88 in float32, 11 in "
            "float16: inf / inf) or from 0 / 0: in a row with no valid position (a clamp such "
            "as 1e-12 is 0 in float16), or in a row whose every exp() underflowed to 0 because "
            "the number subtracted (the batch's maximum, a padding score, 0 for the padding) "
            "lies far above its valid scores. Take torch.softmax of the masked scores (it "
            "subtracts each row's maximum first) and multiply by the mask, as "
            "book.attention.masked_softmax does.")

UNDERFLOW_HINT = ("subtract each row's maximum over its valid scores only: fill the padding "
                  "scores with torch.finfo(scores.dtype).min first, then take torch.softmax "
                  "over the last axis (it subtracts the row's maximum), then multiply by the "
                  "mask, as book.attention.masked_softmax does. The maximum of the whole batch, "
                  "a row's maximum taken before masking, padding scores set to 0, and a fixed "
                  "fill such as -1e4 can each lie far above a row's valid scores.")

SQUEEZE_HINT = ("with one encoder step the scores w_v(...) have shape (batch, 1, 1): .squeeze() "
                "removes the step axis too (and the batch axis for a batch of 1), and the mask "
                "then broadcasts the scores to (batch, batch). Squeeze only the last axis, "
                ".squeeze(-1).")

STALE_HINT = ("a module's stored attention_weights are what its last forward pass computed, "
              "for plotting afterwards; this step does not call the module, so they belong to "
              "another step. Return the weights you compute in this call.")

TOLERANCE = {torch.float16: (1e-2, 1e-2)}  # (atol, rtol) against a float64 reference

# float16 gradients against a float64 run: each gradient within HALF_GRAD_TOLERANCE times its
# largest entry. The chapter's own decoder in float16 stays within 0.006 of that (0.0014 on
# the checker's case; 0.0057 at worst over 40 other seeds), so 0.05 leaves a wide margin.
HALF_GRAD_TOLERANCE = 0.05

LARGE_SCORES_GRAD_HINT = (
    "the gradients were right on the earlier cases, with small scores, and are wrong only "
    "here, where the scores are large: a softmax written out by hand (exp(s - "
    "logsumexp(s)), for one) computes the same function but loses precision in float32 "
    "with large scores, here in its backward pass. Take torch.softmax over the masked "
    "scores, as the exercise asks, and multiply by the mask, as "
    "book.attention.masked_softmax does.")

CACHE_HINT = ("compute the keys W_k(enc_outputs), and everything else, from this call's "
              "arguments: a cache on the decoder, in a global or keyed on the shape (or on "
              "a few entries, a sum or another checksum of the values) serves the first "
              "call's keys to later batches. (Reusing the keys over the steps "
              "of one sequence is the caller's optimisation, not the step's.)")


def _decoder_and_inputs(num_layers, batch, enc_steps, valid_lens, seed, attention=10,
                        dtype=torch.float32, w_v_scale=1, crowd=0, dropout=0.0,
                        far_apart=False, train=False, noncontiguous=False, peaks=False):
    g = torch.Generator().manual_seed(seed)
    vocab, embed, hiddens = 13, 8, 12  # attention size 10 != hiddens on purpose
    with torch.random.fork_rng():  # seeded weights, without touching the learner's RNG
        torch.manual_seed(seed)
        decoder = Seq2SeqAttentionDecoder(vocab, embed, hiddens, num_layers=num_layers,
                                          dropout=dropout, attention_size=attention).eval()
    with torch.no_grad():
        decoder.attention.w_v.weight.mul_(w_v_scale)  # large scores when scaled up
    token = torch.randint(4, vocab, (batch,), generator=g)             # (batch,)
    hidden_state = torch.randn(num_layers, batch, hiddens, generator=g)
    enc_outputs = torch.randn(batch, enc_steps, hiddens, generator=g)  # padding not zero
    if crowd:  # sequence 0's states near its top-scoring one: large scores close together
        with torch.no_grad():
            att = decoder.attention
            scores = att.w_v(torch.tanh(att.W_q(hidden_state[-1, 0]) + att.W_k(enc_outputs[0])))
        enc_outputs[0] = enc_outputs[0, scores.argmax()] + crowd * torch.randn(
            enc_steps, hiddens, generator=g)
    if far_apart:
        enc_outputs = _far_apart(decoder, enc_outputs, g)
    if peaks:
        enc_outputs = _peaks(decoder, enc_outputs, valid_lens, g)
    decoder.train(train)
    if train:  # mixed modes, as a caller may set them: the GRU alone in evaluation mode
        decoder.rnn.eval()
    if noncontiguous:  # the same values, stored (steps, batch, ...) and (batch, layers, ...)
        enc_outputs = enc_outputs.transpose(0, 1).contiguous().transpose(0, 1)
        hidden_state = hidden_state.transpose(0, 1).contiguous().transpose(0, 1)
    return (decoder.to(dtype), token, hidden_state.to(dtype), enc_outputs.to(dtype),
            torch.tensor(valid_lens))


# Encoder states (times ones) that give, with W_q = 0, W_k = [I 0] and w_v = 2500: sequence
# 0 scores 7000 to 23000 (one far ahead), sequence 1 (valid length 2) valid scores -17000 and
# -20000 and padding scores 9000 to 22000, sequence 2 (valid length 4) valid scores within a
# few units of 0 (weights spread) and a padding score of 19000.
FAR_APART = [[0.9, 0.3, 1.5, 0.6, 1.2], [-0.8, -1.1, 0.7, 1.3, 0.4]]


def _far_apart(decoder, enc_outputs, g):
    """Scores of very different sizes, padding scores far above the valid ones: every score
    is 2500 * sum(tanh(h_t[:10])), so each gap is a chosen one (hundreds at least, or a few
    units where the weights spread), far above rounding."""
    att = decoder.attention
    a, hiddens = att.W_k.weight.shape
    with torch.no_grad():
        att.W_q.weight.zero_()
        att.W_k.weight.copy_(torch.eye(a, hiddens))
        att.w_v.weight.fill_(2500.0)
    batch, steps, _ = enc_outputs.shape
    levels = torch.tensor(FAR_APART)[:, :, None]
    out = torch.empty(batch, steps, hiddens)
    out[:2] = levels * (1 + 0.02 * torch.randn(2, steps, hiddens, generator=g))
    out[2] = 1e-4 * torch.randn(steps, hiddens, generator=g)
    out[2, 4:] = 1.0
    return out


def _peaks(decoder, enc_outputs, valid_lens, g):
    """Each sequence's last valid step ahead of the others (W_q = 0, W_k = [I 0], w_v all 2:
    a score of 9 there, within 0.1 of 0 elsewhere), so that it takes most of the weight
    (0.7 of 4099 steps): a mask that drops it, or lets the next step in, changes the
    weights by far more than float16's rounding."""
    att = decoder.attention
    a, hiddens = att.W_k.weight.shape
    with torch.no_grad():
        att.W_q.weight.zero_()
        att.W_k.weight.copy_(torch.eye(a, hiddens))
        att.w_v.weight.fill_(2.0)
    out = 0.005 * torch.randn(enc_outputs.shape, generator=g)
    for i, n in enumerate(valid_lens):
        if n > 0:
            out[i, n - 1] = 0.5
    return out


def _scores(decoder, hidden_state, enc_outputs):
    att = decoder.attention
    with torch.no_grad():
        features = att.W_q(hidden_state[-1])[:, None] + att.W_k(enc_outputs)
        return att.w_v(torch.tanh(features)).squeeze(-1)  # (batch, enc_steps)


def _largest_score(decoder, hidden_state, enc_outputs):
    return _scores(decoder, hidden_state, enc_outputs).max().item()


def _number(x):
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2g}"


def _score_ranges(scores, valid_lens):
    """'sequence 0: valid 7279 to 22631; sequence 1: valid ..., padding ...' for a case name."""
    parts = []
    for i, (row, n) in enumerate(zip(scores.tolist(), valid_lens.tolist())):
        part = f"sequence {i}: valid {_number(min(row[:n]))} to {_number(max(row[:n]))}"
        if n < len(row):
            low, high = _number(min(row[n:])), _number(max(row[n:]))
            part += f", padding {low}" + (f" to {high}" if high != low else "")
        parts.append(part)
    return "; ".join(parts)


def _reference(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    state = (enc_outputs, hidden_state, enc_valid_lens)
    logits, (_, new_state, _) = decoder(token[:, None], state)  # the chapter's decoder
    weights = decoder.attention_weights[:, 0]
    _forget_weights(decoder)  # the learner's call finds only the stale ones planted there
    return logits[:, 0], new_state, weights


def _forget_weights(decoder):
    decoder.__dict__.pop("attention_weights", None)
    decoder.attention.__dict__.pop("attention_weights", None)


def _stale_weights(valid_lens, enc_steps, dtype):
    """What decoder(...) would have left in attention_weights at an earlier step: weights of
    another query (here uniform over the valid positions), shape (batch, 1, enc_steps)."""
    keep = (torch.arange(enc_steps)[None] < valid_lens[:, None]).to(dtype)
    return (keep / valid_lens.clamp_min(1)[:, None].to(dtype))[:, None]


def _shares_memory(tensor, other):
    try:
        return tensor.untyped_storage().data_ptr() == other.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return False


def _weights_with(decoder, query, enc_outputs, valid_lens, tanh=True):
    """The attention weights a common slip would give, to name the slip in the message."""
    att = decoder.attention
    features = att.W_q(query)[:, None] + att.W_k(enc_outputs)   # (batch, enc_steps, a)
    scores = att.w_v(torch.tanh(features) if tanh else features).squeeze(-1)
    mask = torch.arange(enc_outputs.shape[1])[None] < valid_lens[:, None]
    return torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), -1) * mask


def _without_shortcut(fn, decoder, *args, case, stale):
    """Call the learner's step with decoder.attention(...) (and so decoder(...)) disabled, and
    with `stale` weights left in decoder.attention.attention_weights and
    decoder.attention_weights, as an earlier step of decoder(...) would leave them."""
    deterministic = not _may_draw(decoder)
    with _shortcut_blocked(decoder, stale), _accumulated_gradients(decoder, case), \
            draws_allowed(not deterministic):
        if deterministic:  # one draw from each generator first, so that a re-seed shows
            _advance_generators()
        saved = _decoder_state(decoder)
        result = call(fn, decoder, *args, name="bahdanau_step", case=case,
                      hint_on_error=_gru_hint)
        _expect_decoder_unchanged(decoder, saved, case)
        return result


def _may_draw(decoder):
    """Whether one step of this decoder may draw random numbers: only where a dropout with a
    rate above 0 is in training mode (the GRU's between layers). The check's decoders are
    in evaluation mode or built with dropout 0, so there the step is deterministic (round 14:
    torch.manual_seed(torch.initial_seed()) inside the step, which rewinds the caller's
    random numbers)."""
    rnn = decoder.rnn
    return any(isinstance(m, torch.nn.Dropout) and m.training and m.p > 0
               for m in decoder.modules()) or (
        rnn.training and getattr(rnn, "dropout", 0) > 0 and getattr(rnn, "num_layers", 1) > 1)


def _advance_generators():
    """One draw from torch's, Python's and NumPy's global generators (the check runs inside
    `seeded`, which restores them): the generators are then past their seed, so that a step
    that re-seeds one (torch.manual_seed(torch.initial_seed())) changes its state."""
    torch.rand(1)
    random.random()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.random()


@contextlib.contextmanager
def _frozen_embedding(decoder):
    """Within the block the decoder's embedding table is frozen (requires_grad False), as a
    caller with pretrained embeddings sets it; the step must leave it so (round 14:
    decoder.requires_grad_(True) inside the step unfroze it)."""
    weight = decoder.embedding.weight
    was = weight.requires_grad
    weight.requires_grad_(False)
    try:
        yield
    finally:
        weight.requires_grad_(was)


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_state_dict_hooks", "_load_state_dict_pre_hooks")
_TENSOR_HOOK_DICTS = ("_backward_hooks", "_post_accumulate_grad_hooks")
_HOOK_WORDS = {"_forward_hooks": "forward hook", "_forward_pre_hooks": "forward pre-hook",
               "_backward_hooks": "backward hook", "_backward_pre_hooks": "backward pre-hook",
               "_state_dict_hooks": "state_dict hook",
               "_load_state_dict_pre_hooks": "load_state_dict pre-hook",
               "_post_accumulate_grad_hooks": "post-accumulate-grad hook"}


def _hooks(decoder):
    """{(module or parameter name, kind): the ids of its hooks}: a hook the step leaves behind
    runs on every later call of the caller's decoder."""
    found = {}
    for name, module in decoder.named_modules():
        for kind in _HOOK_DICTS:
            found[(f"module `{name}`" if name else "the decoder itself", kind)] = tuple(
                getattr(module, kind, None) or ())
    for name, p in decoder.named_parameters():
        for kind in _TENSOR_HOOK_DICTS:
            found[(f"parameter `{name}`", kind)] = tuple(getattr(p, kind, None) or ())
    return found


@contextlib.contextmanager
def _accumulated_gradients(decoder, case):
    """Within the block, every parameter of the decoder holds a gradient, as if the caller had
    accumulated some (earlier steps' backward, before the optimizer step); after the step
    they must be as they were. The parameters' own .grad (None in the check) is restored."""
    __tracebackhide__ = True
    params = list(decoder.named_parameters())
    own = [p.grad for _, p in params]
    planted = []
    with torch.no_grad():
        for i, (_, p) in enumerate(params):
            p.grad = torch.full_like(p, 0.25 + i / 64)
            planted.append(p.grad.clone())
    try:
        yield
        for (name, p), kept in zip(params, planted):
            if p.grad is None or p.grad.shape != kept.shape or not torch.equal(p.grad, kept):
                fail(f"bahdanau_step changed the gradient the caller had accumulated on the "
                     f"decoder's parameter `{name}` on {case}: it held "
                     f"{float(kept.flatten()[0]):g} everywhere before the call and "
                     + ("None after it" if p.grad is None else
                        f"{float(p.grad.flatten()[0]):g} (at index 0) after it")
                     + ": the gradients of the earlier steps, summed for one optimizer step, "
                     "are lost.",
                     "leave the decoder's gradients alone: no decoder.zero_grad() (or "
                     "optimizer.zero_grad(), p.grad = None) in the step. Clearing the "
                     "gradients is the training loop's choice, once per optimizer step.")
    finally:
        for (_, p), grad in zip(params, own):
            p.grad = grad


@contextlib.contextmanager
def _shortcut_blocked(decoder, stale):
    """Within the block, decoder.attention(...) (and so decoder(...)) fails the check, and
    `stale` weights lie in decoder.attention.attention_weights and decoder.attention_weights,
    as an earlier step of decoder(...) would leave them."""
    forward, cls = decoder.attention.forward, type(decoder.attention)
    cls_forward = cls.__dict__.get("forward")
    decoder.attention.forward = _NoShortcut().forward
    cls.forward = _blocked_forward  # also AdditiveAttention.forward(decoder.attention, ...)
    decoder.attention.attention_weights = decoder.attention_weights = stale
    try:
        yield
    finally:
        _forget_weights(decoder)
        if cls_forward is None:
            del cls.forward
        else:
            cls.forward = cls_forward
        decoder.attention.forward = forward


_SETTING_TYPES = (bool, int, float, str, type(None))


def _settings(module):
    """A module's settings: its attributes that are numbers, flags or strings (a dropout
    rate p, the GRU's dropout and num_layers, ...), not its tensors or training flag."""
    return {key: value for key, value in vars(module).items()
            if key != "training" and isinstance(value, _SETTING_TYPES)}


def _decoder_state(decoder):
    """What the step must leave as it is: every parameter's and buffer's dtype and values,
    every module's training flag and settings (dropout rates), every parameter's
    requires_grad, and every module's and parameter's hooks."""
    return ({name: t.detach().clone() for name, t in decoder.state_dict().items()},
            {name: m.training for name, m in decoder.named_modules()},
            {name: _settings(m) for name, m in decoder.named_modules()},
            {name: p.requires_grad for name, p in decoder.named_parameters()},
            _hooks(decoder))


def _expect_decoder_unchanged(decoder, saved, case):
    """The step only reads the decoder: Module.float() (.half(), .double(), .to(dtype)),
    .train() or an in-place write would change the caller's decoder for every later step."""
    __tracebackhide__ = True
    tensors, modes, settings, requires, hooks = saved
    for name, p in decoder.named_parameters():
        if name in requires and p.requires_grad != requires[name]:
            fail(f"bahdanau_step changed requires_grad of the decoder's parameter `{name}` on "
                 f"{case}: it was {requires[name]} before the call (set by the caller"
                 + (": a frozen table, as pretrained embeddings are" if not requires[name]
                    else "") + f") and is {p.requires_grad} after it, so the caller's "
                 "optimizer and backward " + ("now train a parameter the caller froze."
                                              if p.requires_grad else
                                              "no longer reach a parameter it trains."),
                 "leave the parameters' requires_grad alone: no decoder.requires_grad_(...) "
                 "(or p.requires_grad = ...) in the step. Its outputs require grad anyway "
                 "through the parameters (and inputs) that do; freezing is the caller's "
                 "choice.")
    now_hooks = _hooks(decoder)
    for (owner, kind), ids in now_hooks.items():
        old_ids = hooks.get((owner, kind), ())
        if ids != old_ids:
            words = _HOOK_WORDS[kind]
            fail(f"bahdanau_step changed the hooks of the caller's decoder on {case}: its "
                 f"{owner} held {len(old_ids)} {words}(s) before the call and "
                 f"{len(ids)} after it" + (" (other ones)" if len(ids) == len(old_ids) else "")
                 + ". A hook left behind runs on every later call of the caller's decoder "
                 "(and keeps whatever it stores alive); a hook removed was the caller's.",
                 "call the submodules directly and use what they return (out, state = "
                 "decoder.rnn(x, hidden_state)) rather than catching it with a hook; a hook "
                 "you must register, remove before returning (handle.remove(), in a "
                 "finally), and leave the caller's hooks alone.")
    now = decoder.state_dict()
    for name, old in tensors.items():
        new = now.get(name)
        if new is None or new.shape != old.shape:
            fail(f"bahdanau_step changed the decoder it was given on {case}: its parameter "
                 f"`{name}` is gone or has another shape after the call.",
                 "the step only reads the decoder's modules and parameters: leave them as "
                 "they are.")
        if new.dtype != old.dtype:
            fail(f"bahdanau_step changed the decoder it was given on {case}: its parameter "
                 f"`{name}` was {old.dtype} before the call and is {new.dtype} after it. "
                 "Module.float(), .half(), .double() and .to(dtype) convert a module in "
                 f"place, so the caller's decoder is no longer {old.dtype}: its next call, "
                 f"decoder(...) on {old.dtype} inputs, fails.",
                 "leave the decoder in its dtype: compute in the decoder's dtype (float16 "
                 "runs on the CPU too), or cast tensors (x.float()), never the module. A "
                 "converted copy (copy.deepcopy(decoder).float()) does not help either: the "
                 "gradients would reach the copy, not the decoder.")
        if not torch.equal(new, old):
            where, want, got, _ = worst(new, old)
            fail(f"bahdanau_step changed the decoder's parameter `{name}` in place on "
                 f"{case}: at index {where} it held {want:.4g} before the call and "
                 f"{got:.4g} after it.",
                 "the step only reads the decoder's parameters: no in-place operation on "
                 "them (.data, .mul_(), .copy_(), torch.no_grad() writes).")
    changed = [(name, m) for name, m in decoder.named_modules()
               if modes.get(name, m.training) != m.training]
    if changed:
        name, module = changed[0]
        where = "" if not name else f" (its module `{name}`)"
        fail(f"bahdanau_step switched the decoder{where} to "
             f"{'training' if module.training else 'evaluation'} mode on {case}, and left "
             "it so: the caller's decoder now runs every later step in that mode ("
             + ("in training mode, with dropout on)." if module.training else
                "in evaluation mode, without dropout: a training loop that calls the "
                "step trains on without the dropout it asked for)."),
             "leave the mode alone: the caller chooses decoder.train() or decoder.eval(), "
             "and may set a submodule's mode apart (decoder.rnn.eval()): restoring with "
             "decoder.train(was) sets every submodule to one mode. Gradients need no mode "
             "switch: autograd works in evaluation mode too.")
    for name, module in decoder.named_modules():
        for key, old in settings.get(name, {}).items():
            new = getattr(module, key, None)
            if new != old or type(new) is not type(old):
                label = f"decoder.{name + '.' if name else ''}{key}"
                fail(f"bahdanau_step changed the decoder's setting `{label}` on {case}: it "
                     f"was {old!r} before the call and is {new!r} after it, so the caller's "
                     "decoder runs every later step (and its training) with it.",
                     "leave the decoder's settings alone: leaving dropout out of this step "
                     "means not calling the dropout modules (the exercise's step has none), "
                     "not setting their rates to 0.")


def _with_grad_outputs(fn, decoder, token, hidden_state, enc_outputs, valid_lens, case, stale):
    """The learner's step, for the gradient check: every output must require grad."""
    __tracebackhide__ = True
    result = _without_shortcut(fn, decoder, token, hidden_state, enc_outputs, valid_lens,
                               case=case, stale=stale)
    if isinstance(result, (tuple, list)) and len(result) == 3:
        for what, value in zip(("the logits", "the new hidden_state", "the weights"), result):
            if isinstance(value, torch.Tensor) and not value.requires_grad:
                fail(f"{what} returned by bahdanau_step {'has' if what[-1] != 's' else 'have'} "
                     f"requires_grad=False on {case}, although hidden_state, enc_outputs and "
                     "the decoder's parameters require grad: no gradient flows back through "
                     f"{'it' if what[-1] != 's' else 'them'} to the earlier steps and the "
                     "parameters.",
                     ("return the state the GRU gives back as it is: cutting the graph "
                      "(.detach(), truncated backpropagation through time) is the training "
                      "loop's choice, not the step's. " if "state" in what else "") +
                     "No .detach(), .data, torch.no_grad() or NumPy detour in the step.")
    return result


def _gru_hint(error):
    text = str(error)
    if "without overflow" in text:
        return ("a fill value such as -1e9 does not fit in float16 (its largest magnitude is "
                "65504): fill the masked scores with torch.finfo(scores.dtype).min, which fits "
                "every dtype (book.attention.masked_softmax does).")
    if "must match the size of tensor b" in text:
        query = ("W_q(query) has shape (batch, attention_size) and W_k(enc_outputs) (batch, "
                 "enc_steps, attention_size), so give the query a step axis, "
                 "W_q(query)[:, None] (or .unsqueeze(1)), before adding them.")
        mask = ("the positions torch.arange(enc_steps) and the lengths enc_valid_lens, "
                "(batch,), broadcast to (batch, enc_steps) only with a step axis on the "
                "lengths: torch.arange(enc_steps)[None, :] < enc_valid_lens[:, None].")
        line = _learner_line(error).partition(": ")[2]
        if any(word in line for word in ("W_q", "W_k", "query", "tanh")):
            return "if this line adds W_q(query) and W_k(enc_outputs): " + query
        if any(word in line for word in ("valid", "len", "arange", "mask", "keep", "<", ">")):
            return "if this line builds the mask from the valid lengths: " + mask
        return ("if this line compares positions with enc_valid_lens: " + mask + " If it "
                "adds W_q(query) and W_k(enc_outputs): " + query)
    if "Expected hidden size" in text or "hidden" in text and "size" in text:
        return ("pass the whole state hidden_state, shape (num_layers, batch, num_hiddens), to "
                "decoder.rnn; only the query is the top layer hidden_state[-1].")
    if "input_size" in text or "input.size(-1)" in text:
        return ("the GRU's input is torch.cat([context, embedding], dim=-1), shape (batch, 1, "
                "num_hiddens + embed_size): the context is weights @ enc_outputs (the encoder "
                "states themselves, not W_k applied to them).")
    return None


CASES = [("1 layer, batch 3, 5 encoder steps, valid lengths [5, 3, 1] (num_hiddens 12, "
          "attention_size 10: W_q, W_k and w_v work in 10 dimensions)", 1, 3, 5, [5, 3, 1]),
         ("2 layers, batch 2, 6 encoder steps, valid lengths [4, 6], the decoder built with "
          "dropout 0.2 (in eval mode, where dropout does nothing)", 2, 2, 6, [4, 6], 10,
          {"dropout": 0.2}),
         ("2 layers, batch 4, 7 encoder steps, valid lengths [2, 7, 5, 3]", 2, 4, 7,
          [2, 7, 5, 3]),
         ("3 layers, batch 1, 55 encoder steps, valid length [52]", 3, 1, 55, [52]),
         ("2 layers, batch 2, 60 encoder steps, valid lengths [60, 9]", 2, 2, 60, [60, 9]),
         ("1 layer, batch 2, 4 encoder steps, valid lengths [4, 2], the default "
          "attention_size (= num_hiddens, 12)", 1, 2, 4, [4, 2], None),
         ("1 layer, batch 3, 5 encoder steps, valid lengths [5, 0, 2] (a sequence of "
          "valid length 0: its weights are all 0, so its context is 0)", 1, 3, 5,
          [5, 0, 2], 10),
         ("2 layers, batch 3, 6 encoder steps, valid lengths [6, 0, 3], in float64 "
          "(decoder.double(), float64 inputs)", 2, 3, 6, [6, 0, 3], 10,
          {"dtype": torch.float64}),
         ("2 layers, batch 3, 6 encoder steps, valid lengths [6, 0, 3], with large scores "
          "(w_v scaled by 400: scores up to {largest:.0f}, past 88, where exp() overflows "
          "float32; sequence 0's encoder states close together, so its scores are all large "
          "and its weights spread)", 2, 3, 6, [6, 0, 3], 10, {"w_v_scale": 400, "crowd": 0.01}),
         ("2 layers, batch 3, 6 encoder steps, valid lengths [6, 0, 3], in float16 "
          "(decoder.half(), float16 inputs; values within 0.01 of a float64 run)", 2, 3, 6,
          [6, 0, 3], 10, {"dtype": torch.float16}),
         ("1 layer, batch 3, 1 encoder step, valid lengths [1, 0, 1] (one encoder step: the "
          "weights are [1], [0], [1])", 1, 3, 1, [1, 0, 1], 10),
         ("1 layer, batch 3, 5 encoder steps, valid lengths [5, 2, 4], with scores of very "
          "different sizes and padding scores far above the valid ones (W_q = 0, W_k = [I 0], "
          "w_v all 2500; {ranges})", 1, 3, 5, [5, 2, 4], 10, {"far_apart": True}),
         ("1 layer, batch 3, 3 encoder steps, valid lengths [3, 1, 2] (as many sequences "
          "as encoder steps: the batch axis and the step axis have the same size)", 1, 3, 3,
          [3, 1, 2], 10),
         ("2 layers, batch 2, 4 encoder steps, valid lengths [4, 3], the decoder in "
          "training mode but its GRU decoder.rnn in evaluation mode (mixed modes, set by "
          "the caller; built with dropout 0, so the modes change no value)", 2, 2, 4,
          [4, 3], 10, {"train": True}),
         ("2 layers, batch 3, 5 encoder steps, valid lengths [5, 2, 4], enc_outputs and "
          "hidden_state not contiguous in memory (transposed views, as an encoder that "
          "works step-major returns them; same values)", 2, 3, 5, [5, 2, 4], 10,
          {"noncontiguous": True}),
         ("1 layer, batch 3, 4099 encoder steps, valid lengths [2049, 4097, 4099], in "
          "float16 (decoder.half(); each sequence's last valid step scores 9, all others "
          "about 0, so it takes most of the weight; float16 counts in steps of 2 above "
          "2048: positions or lengths held in float16 round)", 1, 3, 4099,
          [2049, 4097, 4099], 10, {"dtype": torch.float16, "peaks": True})]


def _kept_tensors(decoder):
    """'decoder.x' for every attribute of the decoder or its submodules (not a parameter,
    buffer or submodule) that holds a tensor other than those, also inside a tuple, list
    or dict."""
    found, own = [], {id(t) for t in [*decoder.parameters(), *decoder.buffers()]}
    for name, module in decoder.named_modules():
        for key, value in vars(module).items():
            if key in ("_parameters", "_buffers", "_modules"):
                continue
            stack = [value]
            while stack:
                item = stack.pop()
                if isinstance(item, torch.Tensor) and id(item) not in own:
                    found.append(f"decoder.{name + '.' if name else ''}{key}")
                    break
                if isinstance(item, (tuple, list)):
                    stack += list(item)
                elif isinstance(item, dict):
                    stack += list(item.values())
    return found


def _double_copy(decoder, case):
    """A float64 copy of the decoder (for the float64 reference of a float16 case). A tensor
    with a graph that the step kept on the decoder makes copy.deepcopy fail: say so."""
    __tracebackhide__ = True
    try:
        return copy.deepcopy(decoder).double()
    except RuntimeError as error:
        if "deepcopy" not in str(error):
            raise
        kept = ", ".join(f"`{k}`" for k in _kept_tensors(decoder)) or "an attribute"
        fail(f"bahdanau_step stored tensors on the decoder it was given ({kept}) and kept "
             f"them there between calls: on {case}, copy.deepcopy(decoder) then fails "
             f"(\"{str(error).split('.')[0]}\"), as it would for a caller who keeps a copy "
             "of the best model; and a tensor computed in one call (keys, a cache) belongs "
             "to that call's inputs and weights, not to the next call's.",
             "keep no state on the module: compute the keys W_k(enc_outputs) and "
             "everything else from this call's arguments, and store nothing on the "
             "decoder or its submodules.")


def _references(decoder, token, state, enc_outputs, valid_lens, dtype, case=""):
    """The chapter's decoder on these inputs; for float16 a float64 run from the same numbers."""
    with torch.no_grad():
        if dtype == torch.float16:
            return _reference(_double_copy(decoder, case), token, state.double(),
                              enc_outputs.double(), valid_lens)
        return _reference(decoder, token, state, enc_outputs, valid_lens)


def _wrong_output(result, refs, dtype):
    """(what, ' (at index ... expected ..., got ...)') for the first output of `result` that
    differs from `refs` (weights first), or None when all three are right."""
    atol, rtol = TOLERANCE.get(dtype, (1e-5, 1e-4))
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        return "results (not a triple)", ""
    for what, value, ref in sorted(zip(("logits", "the new hidden_state", "weights"), result,
                                       refs), key=lambda item: item[0] != "weights"):
        if isinstance(value, torch.Tensor) and value.shape == ref.shape \
                and value.dtype == dtype and is_close(value, ref, atol, rtol):
            continue
        detail = ""
        if isinstance(value, torch.Tensor) and value.shape == ref.shape:
            where, want, got, _ = worst(value.detach().to(ref.dtype), ref)
            detail = f" (at index {where} expected {want:.4g}, got {got:.4g})"
        return what, detail
    return None


def _same_corners(enc_outputs):
    """Other encoder states with the same shape, the same first and last steps and the same
    values overall (the features of every other step reversed: a permutation, so the sum, the
    sum of squares and the corner entries stay): a key made of such a checksum collides."""
    if enc_outputs.shape[1] < 3:
        return enc_outputs.flip(-1)
    return torch.cat([enc_outputs[:, :1], enc_outputs[:, 1:-1].flip(-1), enc_outputs[:, -1:]],
                     dim=1)


_OTHER_KEYS = [  # (how the second enc_outputs is made, words, under torch.no_grad())
    (_same_corners, "under torch.no_grad() (decoding a new batch), with other enc_outputs of "
     "the same shape, first and last steps, sum and sum of squares (the features of the "
     "steps between reversed)", True),
    (lambda e: e.flip(-1), "with other enc_outputs of the same shape (the first ones with "
     "their features reversed)", False)]


def _expect_fresh_keys(fn, decoder, new_decoder, token, state, enc_outputs, valid_lens,
                       dtype, case, stale):
    """A second call on the same decoder, with other enc_outputs of the same shape (the next
    batch's), must give their results: nothing kept from the first call (keys cached on the
    decoder or under a checksum of the values, right on the first call and stale after it),
    also under torch.no_grad(). Where the step is also wrong on a new decoder (a twin never
    called before), the fault is not what the first call left: that failure is returned,
    for the end of the check, after the cases made for the common faults have had their
    say."""
    __tracebackhide__ = True
    for make, words, inference in _OTHER_KEYS:
        other = make(enc_outputs)
        refs = _references(decoder, token, state, other, valid_lens, dtype, case)
        with torch.no_grad() if inference else contextlib.nullcontext():
            again = _without_shortcut(fn, decoder, token, state.clone(), other,
                                      valid_lens.clone(), case=case, stale=stale)
        wrong = _wrong_output(again, refs, dtype)
        if wrong is None:
            continue
        with torch.no_grad() if inference else contextlib.nullcontext():
            first = _without_shortcut(fn, new_decoder, token, state.clone(), other,
                                      valid_lens.clone(), case=case, stale=stale)
        what, detail = wrong
        if _wrong_output(first, refs, dtype) is None:
            fail(f"called a second time on the same decoder, {words}, bahdanau_step returns "
                 f"wrong {what} on {case}{detail}, although its first call was right, and a "
                 "first call on a new decoder with these enc_outputs is right too: it keeps "
                 "something from the first call.", CACHE_HINT)
        return (f"on {case}, {words}, bahdanau_step returns wrong {what}{detail}, although "
                "it is right on the first ones (also on a new decoder).",
                "if your step keeps anything between calls (a cache in a global, keyed on the "
                "shape), that is the fault: " + CACHE_HINT[0].lower() + CACHE_HINT[1:] + " "
                "Otherwise compare your step with the chapter's decoder on these inputs.")
    return None


def _expect_keys_after_update(fn, make_decoder, token, state, enc_outputs, valid_lens,
                              dtype, case, stale):
    """Two calls on one decoder with the same enc_outputs object, the decoder's weights
    changed between them (an optimizer step on one batch): the second call must follow the
    new weights (no keys W_k(enc_outputs) cached under the identity of the tensors). As in
    _expect_fresh_keys, a step wrong also on a decoder never called before gets the failure
    returned, for the end of the check."""
    __tracebackhide__ = True
    decoder, twin = make_decoder(), make_decoder()
    _without_shortcut(fn, decoder, token, state.clone(), enc_outputs, valid_lens.clone(),
                      case=case, stale=stale)
    g = torch.Generator().manual_seed(12)
    with torch.no_grad():  # an optimizer step, on both
        for p, q in zip(decoder.parameters(), twin.parameters()):
            step = 0.1 * torch.randn(p.shape, generator=g)
            p.add_(step.to(p.dtype))
            q.add_(step.to(q.dtype))
    refs = _references(decoder, token, state, enc_outputs, valid_lens, dtype, case)
    again = _without_shortcut(fn, decoder, token, state.clone(), enc_outputs,
                              valid_lens.clone(), case=case, stale=stale)
    wrong = _wrong_output(again, refs, dtype)
    if wrong is None:
        return None
    what, detail = wrong
    first = _without_shortcut(fn, twin, token, state.clone(), enc_outputs.clone(),
                              valid_lens.clone(), case=case, stale=stale)
    if _wrong_output(first, refs, dtype) is None:
        fail(f"called a second time on the same decoder and the same enc_outputs (the same "
             f"tensor object), after a change of the decoder's weights (what an optimizer "
             f"step does), bahdanau_step returns wrong {what} on {case}{detail}, although "
             "a first call with these weights is right: it keeps something from the first "
             "call, computed with the old weights (keys cached under the identity of the "
             "decoder or of enc_outputs, id() or data_ptr(), are stale once the weights "
             "change, as they do at every training step on one batch).", CACHE_HINT)
    return (f"on {case}, after a change of the decoder's weights, bahdanau_step returns "
            f"wrong {what}{detail}, although it is right with the weights the decoder was "
            "built with.",
            "if your step keeps anything between calls (a cache), that is the fault: "
            + CACHE_HINT[0].lower() + CACHE_HINT[1:] + " Otherwise compare your step with "
            "the chapter's decoder on these inputs.")


def _expect_half_gradients(fn, decoder, token, state, enc_outputs, valid_lens, case, stale):
    """float16: gradients reach the state, the encoder outputs and every parameter of the
    decoder given (not of a converted copy), finite and close to a float64 run's (each within
    HALF_GRAD_TOLERANCE of its largest entry)."""
    __tracebackhide__ = True
    case += " (gradients of logits, new state and weights)"
    twin = _double_copy(decoder, case)
    ref_h = state.detach().double().requires_grad_(True)
    ref_e = enc_outputs.detach().double().requires_grad_(True)
    ref_out = _reference(twin, token, ref_h, ref_e, valid_lens)
    weights = cotangents(ref_out)
    ref_grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(ref_out, weights)),
                                    [ref_h, ref_e, *twin.parameters()], allow_unused=True)
    h = state.detach().clone().requires_grad_(True)
    e = enc_outputs.detach().clone().requires_grad_(True)
    out = _with_grad_outputs(fn, decoder, token, h, e, valid_lens, case, stale)
    if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(
            isinstance(o, torch.Tensor) and o.shape == r.shape for o, r in zip(out, ref_out)):
        fail(f"bahdanau_step returned something other than the triple of its first call on "
             f"{case}.")
    try:
        grads = torch.autograd.grad(sum((o.double() * w).sum() for o, w in zip(out, weights)),
                                    [h, e, *decoder.parameters()], allow_unused=True)
    except RuntimeError as error:
        fail(f"backward() through bahdanau_step failed on {case}: {error}")
    labels = ["hidden_state", "enc_outputs"] + [f"decoder.{name}" for name, _ in
                                                decoder.named_parameters()]
    for label, grad, ref in zip(labels, grads, ref_grads):
        ref = torch.zeros((), dtype=torch.float64) if ref is None else ref
        if grad is None:
            if (ref != 0).any():
                fail(f"no gradient reaches {label} on {case}, while the float64 run's "
                     "gradient there is not zero: in float16 your step computes with "
                     "something other than the decoder and tensors it was given (a converted "
                     "copy such as copy.deepcopy(decoder).float(), for one), or detaches "
                     "them.",
                     "use the decoder's own modules and parameters in every dtype: float16 "
                     "runs on the CPU too. To compute a part in float32, cast tensors "
                     "(x.float(), then .to(x.dtype)), never the module or a copy of it.")
            continue
        if not torch.isfinite(grad).all():
            where = tuple(int(i) for i in (~torch.isfinite(grad)).nonzero()[0])
            fail(f"the gradient with respect to {label} contains NaN or inf on {case}, at "
                 f"index {where} first, where a float64 run gives "
                 f"{ref.broadcast_to(grad.shape)[where].item():.4g}.", NAN_HINT)
        ref = ref.broadcast_to(grad.shape)
        tol = HALF_GRAD_TOLERANCE * ref.abs().max().item() + 1e-4
        if (grad.double() - ref).abs().max().item() > tol:
            where, want, got, diff = worst(grad.double(), ref)
            fail(f"the gradient with respect to {label} is wrong on {case}: at index {where} "
                 f"a float64 run gives {want:.4g}, yours {got:.4g} (largest difference "
                 f"{diff:.3g}; float16's rounding stays within {tol:.2g}).",
                 "the float16 values are right but the gradients are not: in float16 part "
                 "of your step is detached or computed apart from the decoder's parameters.")


def _padding_weights(weights, scores, valid_lens, case):
    """Weights on padding: no mask, or a finite fill that is not below every valid score."""
    __tracebackhide__ = True
    padding = ~(torch.arange(weights.shape[-1])[None] < valid_lens[:, None])
    on_padding = (weights.detach().abs() > 1e-6) & padding
    if not on_padding.any():
        return
    i = int(on_padding.nonzero()[0, 0])
    n = int(valid_lens[i])
    hint = ("mask the scores at positions >= enc_valid_lens before the softmax "
            "(book.attention.masked_softmax does it).")
    if 0 < n and scores[i, :n].max() < -1000:
        hint = (f"sequence {i}'s valid scores are all at most {_number(scores[i, :n].max())}: "
                "a finite fill such as -1e4 lies above them, so the padding takes the weight. "
                "Fill the masked scores with torch.finfo(scores.dtype).min, the most negative "
                "number of the dtype, and multiply the weights by the mask, as "
                "book.attention.masked_softmax does.")
    fail(f"weights on padding positions are not 0 on {case}: the step attended to encoder "
         f"states past each sequence's valid length (sequence {i}, valid length {n}, got "
         f"{[round(w, 3) for w in weights[i].tolist()]}).", hint)


def _underflowed(weights, ref_weights, scores, valid_lens, case):
    """Name a row whose weights are all 0 because every exp() of its valid scores underflowed:
    the number subtracted (the batch's maximum, a maximum over the padding too, the 0 of
    padding scores set to 0) lay far above them."""
    __tracebackhide__ = True
    gap = 50  # exp(-50) is 2e-22: far below any weight the reference gives a valid position
    dead = (valid_lens > 0) & (weights.detach().abs().amax(-1) < 1e-6)
    for i in dead.nonzero()[:, 0].tolist():
        n = int(valid_lens[i])
        top = scores[i, :n].max().item()
        above = []
        if n < scores.shape[1] and scores[i, n:].max().item() > top + gap:
            above.append(f"its padding scores (up to {_number(scores[i, n:].max().item())})")
        if top < -gap:
            above.append("0 (what padding scores set to 0 put above them)")
            above.append(f"a fixed fill such as -1e4 (any fill above {_number(top)})")
        if scores.max().item() > top + gap:
            above.append(f"the batch's largest score ({_number(scores.max().item())})")
        if not above:
            continue
        fail(f"the weights of sequence {i} (valid length {n}) are all 0 on {case}; expected "
             f"{[round(w, 3) for w in ref_weights[i].tolist()]}. Its valid scores "
             f"({_number(scores[i, :n].min().item())} to {_number(top)}) lie far below "
             + (", ".join(above[:-1]) + " and " if len(above) > 1 else "") + above[-1]
             + ": exp() of them underflows to 0 once such a larger number is subtracted "
             "from them.", UNDERFLOW_HINT)


def _mask_too_short(weights, ref_weights, valid_lens, case):
    """Name a mask that also hides valid positions (weight exactly 0 where the right one is
    not small), e.g. every sequence masked with the batch's shortest length."""
    __tracebackhide__ = True
    steps = weights.shape[-1]
    valid = torch.arange(steps)[None] < valid_lens[:, None]
    zero = (weights.detach() == 0) & valid
    lost = zero & (ref_weights.detach() > 1e-3)
    if not lost.any():
        return
    i, t = (int(k) for k in lost.nonzero()[0])
    shortest = int(valid_lens.min())
    if weights.dtype == torch.float16 and t >= 2048:
        fail(f"the weights are 0 at a valid position on {case}: sequence {i} (valid length "
             f"{int(valid_lens[i])}) got weight 0 at position {t}, where the right weight is "
             f"{ref_weights[i, t].item():.3g}. float16 holds only every other integer above "
             f"2048: positions or lengths cast to the scores' dtype round ({int(valid_lens[i])} "
             f"becomes {int(torch.tensor(float(valid_lens[i])).half())}).",
             "build the mask from integers: torch.arange(enc_steps, device=...) (int64) "
             "compared with enc_valid_lens as given, keep = torch.arange(enc_steps)[None, :] "
             "< enc_valid_lens[:, None]; cast only the finished mask, if at all.")
    by_shortest = torch.equal(zero, valid & (torch.arange(steps)[None] >= shortest))
    fail(f"the weights are 0 at a valid position on {case}: sequence {i} (valid length "
         f"{int(valid_lens[i])}) got weight 0 at position {t}, where the right weight is "
         f"{ref_weights[i, t].item():.3g}. Only the positions at or past a sequence's own "
         "valid length are padding" + (
             f"; your zeros are those of masking every sequence with the batch's shortest "
             f"valid length, {shortest}." if by_shortest else "."),
         "your mask is too short: mask position t of sequence i exactly when t >= "
         "enc_valid_lens[i], each sequence with its own length: keep = "
         "torch.arange(enc_steps)[None, :] < enc_valid_lens[:, None].")


@checker("bahdanau_step", random=True)  # attention dropout in training draws
def check_bahdanau_step(fn):
    """Check `fn(decoder, token, hidden_state, enc_outputs, enc_valid_lens)`.

    It must return (logits (batch, vocab), new hidden_state (layers, batch, hiddens),
    weights (batch, enc_steps)) equal to one step of the chapter's Seq2SeqAttentionDecoder,
    in the decoder's dtype, with the same gradients (with respect to the state, the encoder
    outputs and the decoder's parameters), also for a sequence of valid length 0 (weights and
    context 0), in float64, with large scores (past exp()'s float32 range) and in float16
    (against a float64 run: values within 0.01, gradients within 5% of their largest entry),
    in eval mode, with the attention module's forward blocked (also via its class) and stale
    weights left in its attention_weights; the decoder left as it was (dtypes, values, mode),
    and a second call with other enc_outputs of the same shape right too (nothing cached).
    """
    pending = None  # a failure on other enc_outputs, given after every case has passed
    for seed, (case, layers, batch, steps, lens, *extra) in enumerate(CASES):
        attention = extra[0] if extra else 10
        options = extra[1] if len(extra) > 1 else {}
        dtype = options.get("dtype", torch.float32)
        atol, rtol = TOLERANCE.get(dtype, (1e-5, 1e-4))
        decoder, token, state, enc_outputs, valid_lens = _decoder_and_inputs(
            layers, batch, steps, lens, seed, attention, dtype, options.get("w_v_scale", 1),
            options.get("crowd", 0), options.get("dropout", 0.0),
            options.get("far_apart", False), options.get("train", False),
            options.get("noncontiguous", False), options.get("peaks", False))
        scores = _scores(decoder, state, enc_outputs)
        case = case.format(largest=scores.max().item(),
                           ranges=_score_ranges(scores, valid_lens) if "{ranges}" in case
                           else "")
        ref_logits, ref_state, ref_weights = _references(decoder, token, state, enc_outputs,
                                                         valid_lens, dtype, case)
        stale = _stale_weights(valid_lens, steps, dtype)
        before = state.clone()
        others = [t.clone() for t in (token, enc_outputs, valid_lens)]
        with _frozen_embedding(decoder):
            result = _without_shortcut(fn, decoder, token, state, enc_outputs, valid_lens,
                                       case=case + ", the embedding table frozen by the "
                                       "caller (decoder.embedding.weight.requires_grad "
                                       "False)", stale=stale)
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
        if isinstance(weights, torch.Tensor) and _shares_memory(weights, stale):
            fail(f"the weights returned on {case} are decoder.attention.attention_weights (or "
                 "decoder.attention_weights): stale weights that an earlier call of the "
                 "decoder left there (the check leaves some there, as an earlier step would), "
                 "not this step's.", STALE_HINT)
        expect_tensor(weights, (batch, steps), what="weights", case=case, nan_hint=EXP_HINT)
        if weights.dtype != dtype:
            expect_tensor(weights, dtype=dtype, what="weights", case=case)
        empty = valid_lens == 0
        if empty.any() and weights[empty].abs().max() > 1e-6:
            got = [round(w, 3) for w in weights[empty][0].tolist()]
            fail(f"a sequence of valid length 0 got weights {got} on {case}; expected all 0 "
                 "(no encoder step is valid, so the context is 0).",
                 "a finite fill such as -1e6 leaves such a row a uniform softmax over the "
                 "padding: multiply the weights by the mask afterwards (or use "
                 "book.attention.masked_softmax, which does).")
        _padding_weights(weights, scores, valid_lens, case)
        _underflowed(weights, ref_weights, scores, valid_lens, case)
        _mask_too_short(weights, ref_weights, valid_lens, case)
        sums = weights.detach().double().sum(dim=-1)
        sum_atol = max(atol, 1e-5)
        if not torch.allclose(sums, (~empty).double(), atol=sum_atol):
            hint = "take the softmax over the last axis (the encoder steps)."
            if steps == 1:
                hint = SQUEEZE_HINT
            by_batch = weights.detach().double().sum(dim=0)
            if batch > 1 and torch.allclose(by_batch, torch.ones_like(by_batch),
                                            atol=sum_atol):
                hint = ("the weights sum to 1 over the batch: the softmax runs over dim 0 "
                        "(the examples); take it over the encoder steps, dim=-1.")
            elif (sums > 1 + sum_atol).any() and (weights.detach() == 0).any():
                hint = ("rows that sum to more than 1, with some weights set to 0, are what "
                        "dropout does (it zeroes weights and scales the rest by 1 / (1 - p)): "
                        "the step's weights are the masked softmax itself, without dropout.")
            fail(f"each row of weights must sum to 1 over the encoder steps (0 for a "
                 f"sequence of valid length 0) on {case}; "
                 f"they sum to {[round(s, 3) for s in sums.tolist()]}.", hint)
        if not is_close(weights, ref_weights, atol, rtol):
            if layers > 1 and is_close(
                    weights, _weights_with(decoder, state[0], enc_outputs, valid_lens),
                    atol, rtol):
                fail(f"the weights are those of the query hidden_state[0] on {case}.",
                     "hidden_state[0] is the bottom layer; the query is the top layer's "
                     "state, hidden_state[-1].")
            if is_close(weights, _weights_with(decoder, state[-1], enc_outputs, valid_lens,
                                               tanh=False), atol, rtol):
                fail(f"the weights are those of scores without tanh on {case}.",
                     "the score is w_v^T tanh(W_q q + W_k k): apply tanh before w_v.")
            hint = ("query = hidden_state[-1] (the state before this step), keys = "
                    "enc_outputs; score = w_v(tanh(W_q(query) + W_k(keys))).")
            off = (weights.detach().double() - ref_weights.double()).abs().max().item()
            if dtype != torch.float16 and off < 1e-3:  # round 12: a tanh written out
                hint = (f"your weights are within {off:.2g} of the right ones: the score "
                        "formula is right, but a step loses precision. Use torch.tanh and "
                        "torch.softmax (or book.attention.masked_softmax) in the decoder's "
                        "dtype: a tanh written out, (e^2x - 1) / (e^2x + 1), loses digits "
                        "(or overflows), and so does a softmax written out.")
            expect_close(weights, ref_weights, what="weights", case=case, atol=atol,
                         rtol=rtol, hint=hint)
        expect_tensor(new_state, tuple(state.shape), what="the new hidden_state", case=case)
        if new_state.dtype != dtype:
            expect_tensor(new_state, dtype=dtype, what="the new hidden_state", case=case)
        if torch.allclose(new_state, state):
            fail(f"the returned hidden_state is the one passed in, on {case}.",
                 "return the state the GRU gives back after this step.")
        if layers > 1 and not is_close(new_state, ref_state, atol, rtol) \
                and is_close(new_state[-1], ref_state[-1], atol, rtol):
            fail(f"the top layer of the new hidden_state is right on {case}, but the lower "
                 "layers are not.",
                 "return the state the GRU gives back, `out, new_state = decoder.rnn(x, "
                 "hidden_state)`: it holds every layer's new state; out is the top layer's "
                 "output only.")
        if not (is_close(new_state, ref_state, atol, rtol)
                and is_close(logits, ref_logits, atol, rtol)):
            again = _without_shortcut(fn, decoder, token, state.clone(),
                                      enc_outputs.clone(), valid_lens.clone(), case=case,
                                      stale=stale)
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
        if empty.any() and not is_close(new_state, ref_state, atol, rtol) \
                and is_close(new_state[:, ~empty], ref_state[:, ~empty], atol, rtol):
            i = int(empty.nonzero()[0])
            where, want, got, _ = worst(new_state[:, i], ref_state[:, i])
            fail(f"the new hidden_state is wrong on {case} only for the sequences of valid "
                 f"length 0 (sequence {i}: at index {where} expected {want:.4g}, got "
                 f"{got:.4g}); the others are right. Their weights are all 0, so their "
                 "context must be 0.",
                 "compute the context from the weights you return, after the mask has "
                 "zeroed them: context = weights @ enc_outputs with the masked weights, not "
                 "with a softmax taken before the zeroing (for a row with no valid step "
                 "that softmax is uniform over the padding).")
        expect_close(new_state, ref_state, what="the new hidden_state", case=case, atol=atol,
                     rtol=rtol,
                     hint="the GRU's input is torch.cat([context, embedding], dim=-1), in "
                          "this order, shaped (batch, 1, hiddens + embed); the context is "
                          "weights @ enc_outputs (the values), not a pooling of the keys.")
        expect_tensor(logits, (batch, decoder.dense.out_features), what="logits", case=case)
        if logits.dtype != dtype:
            expect_tensor(logits, dtype=dtype, what="logits", case=case)
        expect_close(logits, ref_logits, what="logits", case=case, atol=atol, rtol=rtol,
                     hint="logits = decoder.dense(GRU output of this step), shape "
                          "(batch, vocab).")
        new_decoder = _decoder_and_inputs(
            layers, batch, steps, lens, seed, attention, dtype, options.get("w_v_scale", 1),
            options.get("crowd", 0), options.get("dropout", 0.0),
            options.get("far_apart", False), options.get("train", False),
            peaks=options.get("peaks", False))[0]  # never called
        pending = pending or _expect_fresh_keys(fn, decoder, new_decoder, token, state,
                                                enc_outputs, valid_lens, dtype, case, stale)
        if options.keys() <= {"dropout", "train"}:  # ordinary scores, float32
            def make_decoder(options=options, seed=seed, attention=attention):
                return _decoder_and_inputs(
                    layers, batch, steps, lens, seed, attention, dtype,
                    dropout=options.get("dropout", 0.0),
                    train=options.get("train", False))[0]
            pending = pending or _expect_keys_after_update(
                fn, make_decoder, token, state, enc_outputs, valid_lens, dtype, case, stale)
        if dtype == torch.float16:  # compared with a float64 run, within float16's rounding
            _expect_half_gradients(fn, decoder, token, state, enc_outputs, valid_lens, case,
                                   stale)
            continue
        large = options.get("w_v_scale", 1) > 1 or options.get("far_apart", False)
        expect_gradients(
            lambda h, e: _with_grad_outputs(fn, decoder, token, h, e, valid_lens, case, stale),
            lambda h, e: _reference(decoder, token, h, e, valid_lens),
            [("hidden_state", state), ("enc_outputs", enc_outputs)],
            params=[(f"decoder.{name}", p) for name, p in decoder.named_parameters()],
            reference_dtype=None, name="bahdanau_step", nan_hint=NAN_HINT,
            case=case + " (gradients of logits, new state and weights)",
            wrong_hint=LARGE_SCORES_GRAD_HINT if large else (
                "your step also gives wrong results on other inputs of this shape, while "
                "right on these: it reuses something from an earlier call (a cache, e.g. "
                "of the keys W_k(enc_outputs), keyed on the shape), whose gradient goes to "
                "that call's enc_outputs, not to these. " + CACHE_HINT[0].upper()
                + CACHE_HINT[1:]) if pending else
            "the values are right but the gradients are not: something is detached "
            "(.detach(), .data, torch.no_grad(), a NumPy detour), computed outside "
            "autograd (e.g. the context or the weights), or reused from an earlier call "
            "(a cache, e.g. of the keys W_k(enc_outputs): its gradient goes to that "
            "call's enc_outputs, not to this one's).")
    if pending:
        fail(*pending)
    _matrix_bahdanau(fn)


# -- The condition matrix (issue 12, session 12) ---------------------------------------------
# The step ends with the condition matrix (_core.expect_conditions) on its tensor arguments,
# the decoder fixed: two small cases run as given, on a second call with other tokens, states,
# encoder outputs and lengths of the same shapes, non-contiguous, expanded (stride 0), in
# float64, float16 and bfloat16 (the decoder given in that dtype: a copy converted before
# the call, its parameters rounded to bfloat16 first, so that every dtype's decoder holds the
# same numbers as the float64 reference's), values and the gradients of hidden_state and
# enc_outputs. Not covered by the matrix (the cases above cover them): the gradients of the
# decoder's parameters, other decoders (layers, attention sizes, dropout, training mode), and
# scores beyond float16's range: the scores are w_v(tanh(...)), bounded by the decoder's
# w_v whatever the arguments, so no scaled() condition can push them there (the cases with
# w_v scaled by 400 and the far-apart scores do, with a decoder built for them).

def _matrix_decoders():
    """{dtype: the same 2-layer decoder (parameters rounded to bfloat16) in that dtype}."""
    with torch.random.fork_rng():
        torch.manual_seed(413)
        decoder = Seq2SeqAttentionDecoder(13, 8, 12, num_layers=2, attention_size=10).eval()
    with torch.no_grad():
        for p in decoder.parameters():
            p.copy_(p.bfloat16().float())
    return {dtype: copy.deepcopy(decoder).to(dtype) for dtype in (
        torch.float32, torch.float64, torch.float16, torch.bfloat16)}


def _matrix_bahdanau(fn):
    """bahdanau_step under every condition of the matrix (its tensor arguments)."""
    __tracebackhide__ = True
    decoders = _matrix_decoders()

    def learner(token, hidden_state, enc_outputs, valid_lens):
        decoder = decoders[hidden_state.dtype]
        stale = _stale_weights(valid_lens, enc_outputs.shape[1], hidden_state.dtype)
        with _shortcut_blocked(decoder, stale):
            return fn(decoder, token, hidden_state, enc_outputs, valid_lens)

    def reference(token, hidden_state, enc_outputs, valid_lens):
        return _reference(decoders[torch.float64], token, hidden_state, enc_outputs,
                          valid_lens)

    g = torch.Generator().manual_seed(414)

    def args(batch, steps, lens):
        return (torch.randint(4, 13, (batch,), generator=g),
                torch.randn(2, batch, 12, generator=g),
                torch.randn(batch, steps, 12, generator=g), torch.tensor(lens))

    expect_conditions(
        learner, reference,
        [("2 layers, batch 3, 4 encoder steps, valid lengths [4, 0, 2]", args(3, 4, [4, 0, 2])),
         ("2 layers, batch 2, 1 encoder step (one key), valid lengths [1, 0]",
          args(2, 1, [1, 0]))],
        name="bahdanau_step", differentiable=(1, 2), conditions=STANDARD,
        hint="compare your step with the chapter's decoder on these inputs: query = "
             "hidden_state[-1], score = w_v(tanh(W_q(query) + W_k(enc_outputs))), masked "
             "softmax, context = weights @ enc_outputs, GRU input cat([context, embedding]).")
