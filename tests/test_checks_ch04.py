"""Chapter 4's checker passes right steps (also unusual ones) and rejects wrong ones with
messages that point at the fault: the course's own table, red team round 1's solutions
(tests/checker_redteam/round1_ch04.py), and kinds that round 1 missed."""
import math

import pytest
import torch

from book import checks
from book.attention import masked_softmax
from checkers_support import accepts, redteam, redteam_entries, redteam_entry, rejects


def attention_weights(decoder, query, enc_outputs, enc_valid_lens, tanh=torch.tanh, mask=True):
    att = decoder.attention
    features = att.W_q(query).unsqueeze(1) + att.W_k(enc_outputs)  # (batch, enc_steps, a)
    scores = att.w_v(tanh(features)).squeeze(-1)                   # (batch, enc_steps)
    return masked_softmax(scores[:, None], enc_valid_lens if mask else None)[:, 0]


def step(decoder, token, hidden_state, enc_outputs, enc_valid_lens, layer=-1,
         tanh=torch.tanh, mask=True, order="context first", values="encoder outputs",
         update=True):
    weights = attention_weights(decoder, hidden_state[layer], enc_outputs, enc_valid_lens,
                                tanh, mask)
    pooled = enc_outputs if values == "encoder outputs" else torch.randn_like(enc_outputs)
    context = torch.bmm(weights[:, None], pooled)                  # (batch, 1, hiddens)
    emb = decoder.embedding(token)[:, None]                        # (batch, 1, embed)
    parts = [context, emb] if order == "context first" else [emb, context]
    out, new_state = decoder.rnn(torch.cat(parts, dim=-1), hidden_state)
    return decoder.dense(out[:, 0]), (new_state if update else hidden_state), weights


def stub(*args):
    raise NotImplementedError("write your solution here")


def calls_the_attention_module(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    query = hidden_state[-1][:, None]
    context = decoder.attention(query, enc_outputs, enc_outputs, enc_valid_lens)
    out, new_state = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                                 hidden_state)
    return decoder.dense(out[:, 0]), new_state, decoder.attention.attention_weights[:, 0]


def softmax_over_batch(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new_state, weights = step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return logits, new_state, torch.softmax(torch.log(weights + 1e-9), dim=0)


def in_place_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new_state, weights = step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    hidden_state.copy_(new_state)
    return logits, hidden_state, weights


def detached_state(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Feeds the GRU a detached state: right values, no gradient back to the old state."""
    weights = attention_weights(decoder, hidden_state[-1], enc_outputs, enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)
    out, new_state = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                                 hidden_state.detach())
    return decoder.dense(out[:, 0]), new_state, weights


def scaled_scores(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Divides the additive scores by sqrt(attention size), as for dot products."""
    a = decoder.attention.W_q.out_features
    return step(decoder, token, hidden_state, enc_outputs, enc_valid_lens,
                tanh=lambda x: torch.tanh(x) / math.sqrt(a))


def logits_from_context(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    logits, new_state, weights = step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    context = torch.bmm(weights[:, None], enc_outputs)[:, 0]
    return decoder.dense(context), new_state, weights


WRONG = {
    "ignores the valid lengths (attends to padding)":
        (lambda *a: step(*a, mask=False), "padding"),
    "queries with the bottom layer hidden_state[0]":
        (lambda *a: step(*a, layer=0), r"hidden_state\[0\]"),
    "forgets the tanh": (lambda *a: step(*a, tanh=lambda x: x), "without tanh"),
    "concatenates [embedding, context] (wrong order)":
        (lambda *a: step(*a, order="embedding first"), "new hidden_state is wrong"),
    "pools something other than the encoder outputs":  # noise drawn with torch.randn_like
        (lambda *a: step(*a, values="noise"), "drew from torch's global random generator"),
    "returns the old hidden state": (lambda *a: step(*a, update=False), "the one passed in"),
    "softmax over the batch": (softmax_over_batch, "sum to 1"),
    "overwrites the given state in place": (in_place_state, "in place"),
    "returns only logits and state": (lambda *a: step(*a)[:2], "triple"),
    "returns logits with a step axis": (lambda *a: (step(*a)[0][:, None],) + step(*a)[1:],
                                        r"logits has shape"),
    "calls decoder.attention instead of computing it": (calls_the_attention_module,
                                                        "compute the attention yourself"),
    "unimplemented stub": (stub, "not implemented yet"),
    # kinds round 1 missed
    "detaches the state it feeds the GRU": (detached_state, "gradient with respect to "
                                                            "hidden_state"),
    "scores scaled by 1/sqrt(attention size)": (scaled_scores, "weights is wrong"),
    "logits from the context, not the GRU output": (logits_from_context, "logits is wrong"),
}

R1_EXPECTED = {
    "query from hidden_state[0] (bottom layer)": "the top layer's state, hidden_state[-1]",
    "no mask": "weights on padding positions are not 0",
    "cat([embedding, context]) order swapped": "torch.cat([context, embedding], dim=-1)",
    "weights of shape (batch, 1, enc)": "weights has shape (3, 1, 5)",
    "calls decoder.attention (forbidden)": "calls decoder.attention(...)",
    "calls decoder(...) (forbidden)": "calls decoder.attention(...)",
    "GRU gets only hidden_state[-1:]": "pass the whole state hidden_state",
    "no tanh": "apply tanh before w_v",
    "mask keeps positions <= valid_len": "weights on padding positions are not 0",
    "query = hidden_state.squeeze(0) (mean over layers)": "query = hidden_state[-1]",
    "detached context": "the gradient with respect to hidden_state is wrong",
    "context averages W_k h_t instead of h_t": "not W_k applied to them",
    "logits of shape (batch, 1, vocab)": "logits has shape (3, 1, 13)",
    "returns the decoder's state tuple": "the new hidden_state should be a torch.Tensor",
}


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch04", "check_bahdanau_step",
                                                 expected=R1_EXPECTED))
def test_check_bahdanau_step_rejects_round1(fn, fragment):
    rejects(checks.check_bahdanau_step, fn, fragment)


@pytest.mark.parametrize("fn, fragment", redteam("round1_ch04", "check_bahdanau_step",
                                                 "RIGHT_BUT_UNUSUAL"))
def test_check_bahdanau_step_accepts_round1_right_solutions(fn, fragment):
    accepts(checks.check_bahdanau_step, fn)


def test_check_bahdanau_step_accepts_the_reference():
    accepts(checks.check_bahdanau_step, step)


@pytest.mark.parametrize("name", WRONG)
def test_check_bahdanau_step_rejects_wrong_solutions(name):
    fn, message = WRONG[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_bahdanau_step(fn)


@pytest.mark.parametrize("bad", [None, "bahdanau_step"])
def test_check_bahdanau_step_rejects_non_functions(bad):
    with pytest.raises(AssertionError, match="None|function"):
        checks.check_bahdanau_step(bad)


def test_failure_messages_name_the_case_and_give_a_hint():
    with pytest.raises(AssertionError) as info:
        checks.check_bahdanau_step(lambda *a: step(*a, order="embedding first"))
    text = str(info.value)
    assert "1 layer, batch 3" in text and "expected" in text and "Hint:" in text


def test_the_checker_leaves_the_attention_module_working():
    """The checker blocks decoder.attention during the learner's call only."""
    with pytest.raises(AssertionError):
        checks.check_bahdanau_step(calls_the_attention_module)
    assert "passed" in checks.check_bahdanau_step(step)


# -- Round 2 red team (tests/checker_redteam/round2_*.py) -------------------------------------

@pytest.mark.parametrize("fn", redteam_entries("round2_ch04_bahdanau", ("W_",)))
def test_check_bahdanau_step_rejects_round2(fn):
    rejects(checks.check_bahdanau_step, fn)


@pytest.mark.parametrize("fn", redteam_entries("round2_ch04_bahdanau", ("C_", "O_", "Q_")))
def test_check_bahdanau_step_accepts_round2_right_solutions(fn):
    accepts(checks.check_bahdanau_step, fn)


# -- Round 4 red team (tests/checker_redteam/round4_ch04_bahdanau.py): the messages ---------

ROUND4_MESSAGES = {
    # a valid length of 0: -inf + nan_to_num hides the NaN in the forward pass only
    "W_15_neg_inf_additive_nan_to_num": ("contains NaN or inf", "valid lengths [5, 0, 2]",
                                         "a softmax over all -inf gives NaN"),
    # d2l's -1e6 fill gives such a row uniform weights, the reference all zeros
    "W_20_fill_1e6_float16_or_uniform_empty": ("a sequence of valid length 0 got weights",
                                               "expected all 0", "multiply the weights by "
                                                                 "the mask"),
    # the top layer's output copied into every layer: not the GRU's h_n
    "W_06_new_state_from_out": ("the top layer of the new hidden_state is right",
                                "it holds every layer's new state"),
    # softmax over the batch: no dropout involved
    "W_18_weights_over_batch_axis": ("must sum to 1", "the softmax runs over dim 0"),
    # W_q(query) + W_k(enc_outputs) without a step axis on the query
    "W_23_query_broadcast_plain": ("raised RuntimeError", "give the query a step axis"),
    # AdditiveAttention.forward(decoder.attention, ...): the module's forward all the same
    "S_02_class_forward_unbound": ("AdditiveAttention.forward(decoder.attention, ...)",
                                   "compute the attention yourself"),
}


@pytest.mark.parametrize("name", ROUND4_MESSAGES)
def test_check_bahdanau_step_names_the_round4_faults(name):
    rejects(checks.check_bahdanau_step, redteam_entry("round4_ch04_bahdanau", name), *ROUND4_MESSAGES[name])


def test_the_dropout_message_is_not_given_for_a_softmax_over_the_batch():
    text = rejects(checks.check_bahdanau_step, redteam_entry("round4_ch04_bahdanau", "W_18_weights_over_batch_axis"))
    assert "dropout" not in text


def test_the_attention_class_is_restored_after_the_check():
    from book.attention import AdditiveAttention

    forward = AdditiveAttention.__dict__["forward"]
    rejects(checks.check_bahdanau_step, redteam_entry("round4_ch04_bahdanau", "S_02_class_forward_unbound"))
    assert AdditiveAttention.__dict__["forward"] is forward
    assert "passed" in checks.check_bahdanau_step(step)


# -- Round 5 red team (tests/checker_redteam/round5_ch04_bahdanau.py) ----------------------

def test_round5_leftover_dropout_is_named():
    # F.dropout on the weights (training=True by default): two calls differ
    from checker_redteam import round5_ch04_bahdanau as r5

    text = rejects(checks.check_bahdanau_step, r5.W_08_functional_dropout,
                   "drew from torch's global random generator", "no random order, jitter or dropout")
    assert "torch.cat([context, embedding])" not in text


# -- Round 6 red team (tests/checker_redteam/round6_ch04_bahdanau.py): dtypes, large scores,
# and the messages -------------------------------------------------------------------------

ROUND6_MESSAGES = {
    # exp() without the maximum: NaN where a score passes 88 (float32)
    "W_06_exp_without_max": ("weights contains NaN", "with large scores",
                             "subtracts each row's maximum"),
    # -1e9 does not fit in float16
    "W_16_float16_unsafe_fill": ("c10::Half without overflow", "in float16",
                                 "torch.finfo(scores.dtype).min"),
    # float32 weights from a float64 decoder
    "W_12_float32_weights": ("weights has dtype torch.float32", "in float64",
                             "expected torch.float64"),
    # every sequence masked with the batch's shortest valid length
    "W_13_valid_lens_ignored_when_full_max": ("the weights are 0 at a valid position",
                                              "the batch's shortest valid length, 1",
                                              "your mask is too short"),
    # the new state detached (a truncated-BPTT habit)
    "W_17_detached_new_state": ("the new hidden_state returned by bahdanau_step has "
                                "requires_grad=False", "the training loop's choice"),
    # the weights the attention layer stored at an earlier call
    "W_21_returns_stored_attention_weights": ("are decoder.attention.attention_weights",
                                              "stale weights",
                                              "Return the weights you compute in this call"),
}


@pytest.mark.parametrize("name", ROUND6_MESSAGES)
def test_check_bahdanau_step_names_the_round6_faults(name):
    text = rejects(checks.check_bahdanau_step, redteam_entry("round6_ch04_bahdanau", name),
                   *ROUND6_MESSAGES[name])
    assert "graph a second time" not in text and "in-place operation" not in text


def exp_without_max_safe_empty_rows(decoder, token, hidden_state, enc_outputs,
                                    enc_valid_lens):
    """exp() without the maximum, with 0 / 0 avoided: right in float16 for small scores (its
    empty row gives 0), wrong only where a score passes exp()'s float32 range."""
    att = decoder.attention
    features = att.W_q(hidden_state[-1])[:, None] + att.W_k(enc_outputs)
    e = torch.exp(att.w_v(torch.tanh(features)).squeeze(-1))
    e = e * (torch.arange(e.shape[-1])[None] < enc_valid_lens[:, None])
    z = e.sum(-1, keepdim=True)
    weights = e / torch.where(z > 0, z, torch.ones_like(z))
    context = torch.bmm(weights[:, None], enc_outputs)
    out, new_state = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                                 hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def test_exp_without_the_maximum_fails_on_the_large_scores():
    rejects(checks.check_bahdanau_step, exp_without_max_safe_empty_rows,
            "weights contains NaN", "scores up to 156, past 88")


def softmax_in_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """Mixed precision: the softmax in float32 (float64 stays float64), the weights cast back
    to the scores' dtype."""
    att = decoder.attention
    features = att.W_q(hidden_state[-1])[:, None] + att.W_k(enc_outputs)
    scores = att.w_v(torch.tanh(features)).squeeze(-1)
    wide = scores.to(torch.promote_types(scores.dtype, torch.float32))
    weights = masked_softmax(wide[:, None], enc_valid_lens)[:, 0].to(scores.dtype)
    context = torch.bmm(weights[:, None], enc_outputs)
    out, new_state = decoder.rnn(torch.cat([context, decoder.embedding(token)[:, None]], -1),
                                 hidden_state)
    return decoder.dense(out[:, 0]), new_state, weights


def test_a_float16_step_is_compared_with_a_float64_run():
    # its float16 values differ from a float16 reference's by rounding, not by more than 0.01
    accepts(checks.check_bahdanau_step, softmax_in_float32)


def test_the_checker_leaves_no_stale_weights_on_its_decoders():
    from book.checks import ch04

    seen = []

    def spy(decoder, *args):
        seen.append(decoder)
        return step(decoder, *args)

    accepts(checks.check_bahdanau_step, spy)
    assert seen and all("attention_weights" not in d.__dict__
                        and "attention_weights" not in d.attention.__dict__ for d in seen)
    assert any(case[-1] == {"dtype": torch.float16} for case in ch04.CASES)


# -- Round 7 red team (tests/checker_redteam/round7_ch04_bahdanau.py): scores of very
# different sizes, one encoder step, a decoder built with dropout, and the messages ---------

UNDERFLOW = ("the weights of sequence 1 (valid length 2) are all 0", "scores of very different "
             "sizes", "expected [1.0, 0.0, 0.0, 0.0, 0.0]", "underflows to 0",
             "maximum over its valid scores only")
ROUND7_MESSAGES = {
    # exp(s - s.max()) over the whole batch
    "W_05_global_max": UNDERFLOW + ("the batch's largest score",),
    # the row's maximum taken over the padding too
    "W_06_max_includes_padding": UNDERFLOW + ("its padding scores (up to",),
    # padding scores set to 0, softmax, renormalised
    "W_07_zero_fill_renormalise": UNDERFLOW + ("0 (what padding scores set to 0",),
    # a -1e4 fill is above valid scores of -16000
    "W_03_fill_minus_1e4": ("weights on padding positions are not 0",
                            "sequence 1's valid scores are all at most",
                            "a finite fill such as -1e4 lies above them",
                            "torch.finfo(scores.dtype).min"),
    # .squeeze() on (batch, 1, 1) scores
    "W_20_squeeze_all": ("1 encoder step", "must sum to 1", ".squeeze(-1)"),
    # F.dropout(w, p): training=True in eval mode
    "W_21_functional_dropout_on_weights": ("built with dropout 0.2",
                                           "drew from torch's global random generator",
                                           "no random order, jitter or dropout"),
    # arange(t) < enc_valid_lens without [:, None]
    "W_22_mask_broadcast_without_axis": ("raised RuntimeError",
                                         "builds the mask from the valid lengths",
                                         "enc_valid_lens[:, None]"),
}


@pytest.mark.parametrize("name", ROUND7_MESSAGES)
def test_check_bahdanau_step_names_the_round7_faults(name):
    text = rejects(checks.check_bahdanau_step, redteam_entry("round7_ch04_bahdanau", name),
                   *ROUND7_MESSAGES[name])
    if name != "W_20_squeeze_all":
        assert "squeeze" not in text
    if name == "W_22_mask_broadcast_without_axis":
        assert "give the query a step axis" not in text


def test_the_query_broadcast_keeps_its_own_hint():
    text = rejects(checks.check_bahdanau_step,
                   redteam_entry("round4_ch04_bahdanau", "W_23_query_broadcast_plain"),
                   "give the query a step axis")
    assert "valid lengths:" not in text


def test_a_short_mask_is_not_called_an_underflow():
    # a valid length of 1 made 0 leaves an all-zero row where the scores are small: that is
    # the mask, not exp() underflowing
    text = rejects(checks.check_bahdanau_step,
                   redteam_entry("round7_ch04_bahdanau", "W_13_lens_off_by_one"),
                   "the weights are 0 at a valid position")
    assert "underflow" not in text


def test_the_large_score_case_has_the_scores_it_names():
    from book.checks import ch04

    index, (case, layers, batch, steps, lens, attention, options) = next(
        (i, c) for i, c in enumerate(ch04.CASES) if c[-1] == {"far_apart": True})
    decoder, token, state, enc_outputs, valid_lens = ch04._decoder_and_inputs(
        layers, batch, steps, lens, index, attention, far_apart=True)
    scores = ch04._scores(decoder, state, enc_outputs)
    with torch.no_grad():
        weights = ch04._reference(decoder, token, state, enc_outputs, valid_lens)[2]
    # sequence 1: valid scores far below 0 and below its padding; sequence 0 far above
    assert scores[1, :2].max() < -16000 and scores[1, 2:].min() > 9000
    assert scores[0].min() > 7000 and scores[2, :4].abs().max() < 5
    # the gaps are far above rounding: one-hot rows 0 and 1, spread row 2
    assert torch.equal(weights[1], torch.tensor([1.0, 0, 0, 0, 0]))
    assert weights[0].max() == 1 and weights[2, :4].min() > 0.1


# -- Round 8 red team (tests/checker_redteam/round8_ch04_bahdanau.py): the decoder changed by
# the step, float16 gradients, keys kept between calls, and the messages --------------------

STALE_KEYS = ("called a second time on the same decoder", "other enc_outputs of the same shape",
              "keeps something from the first call", "compute the keys W_k(enc_outputs)")
ROUND8_MESSAGES = {
    # decoder.float() on a float16 decoder: Module.float() converts the caller's decoder
    "W_18_decoder_cast_in_place": ("bahdanau_step changed the decoder it was given",
                                   "in float16", "`attention.W_q.weight` was torch.float16 "
                                   "before the call and is torch.float32 after it",
                                   "convert a module in place", "never the module"),
    # float16 computed on copy.deepcopy(decoder).float(): no gradient reaches the decoder
    "W_23_copy_decoder_for_half": ("no gradient reaches decoder.", "in float16",
                                   "copy.deepcopy(decoder).float()",
                                   "never the module or a copy of it"),
    # W_k(enc_outputs) cached on the decoder, refreshed only when the shape changes
    "W_25_keys_cached_on_decoder": STALE_KEYS,
    # the same, keyed on id(decoder) and the shape, detached
    "W_12_key_cache_by_decoder": STALE_KEYS,
    # decoder.train() left on
    "W_27_decoder_train_mode_left_on": ("switched the decoder to training mode",
                                        "leave the mode alone"),
    # a fixed fill of -1e4, above valid scores near -16000
    "W_02_fill_minus_1e4": ("the weights of sequence 1 (valid length 2) are all 0",
                            "a fixed fill such as -1e4 (any fill above -16544)",
                            "a fixed fill such as -1e4 can each lie far above"),
    # an additive -inf mask, NaN rows cleaned with nan_to_num: NaN in the backward only
    "W_21_additive_inf_nan_to_num": ("contains NaN or inf", "valid lengths [5, 0, 2]",
                                     "If the -inf came from an addition",
                                     "masked_fill's backward does not"),
}


@pytest.mark.parametrize("name", ROUND8_MESSAGES)
def test_check_bahdanau_step_names_the_round8_faults(name):
    text = rejects(checks.check_bahdanau_step, redteam_entry("round8_ch04_bahdanau", name),
                   *ROUND8_MESSAGES[name])
    assert "something is detached" not in text
    if name != "W_27_decoder_train_mode_left_on":
        assert "your step is random" not in text


def test_a_softmax_by_logsumexp_is_told_about_precision_not_detaching():
    # exp(s - logsumexp(s)): the same function, its float32 gradients off with large scores
    text = rejects(checks.check_bahdanau_step,
                   redteam_entry("round8_ch04_bahdanau", "S_03_logsumexp_not_torch_softmax"),
                   "with large scores", "wrong only here, where the scores are large",
                   "Take torch.softmax over the masked scores")
    assert "detached" not in text


def test_the_decoder_is_left_as_it_was():
    """A write into a parameter, or a submodule switched to training mode, is named."""
    def writes_a_weight(decoder, *args):
        with torch.no_grad():
            decoder.dense.bias.add_(0)        # no change: not the fault named
            decoder.embedding.weight[0] += 1  # row 0 is never looked up (tokens from 4)
        return step(decoder, *args)

    rejects(checks.check_bahdanau_step, writes_a_weight,
            "changed the decoder's parameter `embedding.weight` in place", "held")

    def rnn_to_train_mode(decoder, *args):
        decoder.rnn.train()
        return step(decoder, *args)

    rejects(checks.check_bahdanau_step, rnn_to_train_mode,
            "switched the decoder (its module `rnn`) to training mode")


def test_float16_gradients_are_compared_loosely_with_a_float64_run():
    # the chapter's decoder in float16 stays within 0.006 of its largest entry (see ch04)
    from book.checks import ch04

    assert ch04.HALF_GRAD_TOLERANCE >= 0.05
    accepts(checks.check_bahdanau_step, step)

    def half_context_detached(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
        if enc_outputs.dtype == torch.float16:
            enc_outputs = enc_outputs.detach()
        return step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)

    rejects(checks.check_bahdanau_step, half_context_detached, "in float16",
            "no gradient reaches enc_outputs")


def test_a_fault_shown_only_by_other_enc_outputs_waits_for_the_cases_made_for_it():
    """The global-maximum softmax underflows on the second call's data of the large-score
    case too, where a new decoder gives the same: not a cache. That failure waits (the
    far-apart case names the fault, ROUND7_MESSAGES)."""
    from book.checks import ch04

    wrong = redteam_entry("round7_ch04_bahdanau", "W_05_global_max")
    index, (case, layers, batch, steps, lens, attention, options) = next(
        (i, c) for i, c in enumerate(ch04.CASES)
        if isinstance(c[-1], dict) and c[-1].get("w_v_scale") == 400)

    def make():
        return ch04._decoder_and_inputs(layers, batch, steps, lens, index, attention,
                                        torch.float32, 400, options["crowd"])

    decoder, token, state, enc_outputs, valid_lens = make()
    stale = ch04._stale_weights(valid_lens, steps, torch.float32)
    pending = ch04._expect_fresh_keys(wrong, decoder, make()[0], token, state, enc_outputs,
                                      valid_lens, torch.float32, case, stale)
    assert pending and "with other enc_outputs of the same shape" in pending[0]
    assert "right on the first ones (also on a new decoder)" in pending[0]


# -- Round 9 red team (tests/checker_redteam/round9_ch04_bahdanau.py): a decoder in training
# mode, batch == encoder steps, keys cached under the tensors' identity, and the messages ----

STALE_AFTER_UPDATE = ("the same enc_outputs (the same tensor object)",
                      "after a change of the decoder's weights",
                      "keeps something from the first call", "id() or data_ptr()")
ROUND9_MESSAGES = {
    # decoder.eval() inside the step: the caller's training loop loses its dropout
    "W_20_sets_eval": ("switched the decoder to evaluation mode", "the decoder in training "
                       "mode", "trains on without the dropout", "leave the mode alone"),
    # the mask transposed only when its shape differs from the scores'
    "W_18_softmax_over_batch_axis_when_n_eq_b": ("weights on padding positions are not 0",
                                                 "as many sequences as encoder steps"),
    # W_k(enc_outputs) cached under (id(decoder), id(enc_outputs), data_ptr)
    "W_24_keys_cached_by_ids": STALE_AFTER_UPDATE,
    # the same, cached on the decoder as an attribute (it used to crash the deepcopy)
    "W_06_keys_cached_on_decoder_by_identity": STALE_AFTER_UPDATE,
    # keys cached per shape: the gradient goes to the first call's enc_outputs
    "W_05_keys_cached_by_shape": ("the gradient with respect to enc_outputs is wrong",
                                  "reuses something from an earlier call",
                                  "keyed on the shape"),
}


@pytest.mark.parametrize("name", ROUND9_MESSAGES)
def test_check_bahdanau_step_names_the_round9_faults(name):
    text = rejects(checks.check_bahdanau_step, redteam_entry("round9_ch04_bahdanau", name),
                   *ROUND9_MESSAGES[name])
    assert "stopped with" not in text and "something is detached" not in text


def test_a_tensor_kept_on_the_decoder_is_named():
    """A tensor with a graph stored on the decoder makes copy.deepcopy(decoder) fail (the
    checker's float64 copy, and a caller's copy of the best model): the attribute is named,
    not the crash."""
    def keeps_weights(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
        result = step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
        decoder.last_weights = result[2]
        return result

    text = rejects(checks.check_bahdanau_step, keeps_weights,
                   "stored tensors on the decoder it was given (`decoder.last_weights`)",
                   "copy.deepcopy(decoder) then fails", "keep no state on the module")
    assert "stopped with" not in text and "_flat_weights" not in text


def test_a_view_of_non_contiguous_encoder_outputs_is_caught():
    """Round 11 (B's W_20): enc_outputs.view(b * n, h) passed while every case had
    contiguous inputs; a case with transposed (non-contiguous) enc_outputs and hidden_state
    now fails it with the .reshape() hint."""
    rejects(checks.check_bahdanau_step,
            redteam_entry("round11_ch04_bahdanau", "W_20_view_enc_outputs"),
            "not contiguous in memory", "view size is not compatible", "Use .reshape()")


# The condition matrix (issue 12, session 12): wrong steps that only its conditions reject.
def _bfloat16_in_float32(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """bfloat16 computed right, the results cast to float32 'for the loss'."""
    out = step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return tuple(o.float() for o in out) if hidden_state.dtype == torch.bfloat16 else out


def _bfloat16_without_grad(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """bfloat16 (taken for inference only) run under torch.no_grad()."""
    if hidden_state.dtype == torch.bfloat16:
        with torch.no_grad():
            return step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)
    return step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def _one_sequence_for_all(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    """An expanded enc_outputs (stride 0) taken as one sequence: the step run for example 0
    only and its results repeated over the batch (the states of the batch differ)."""
    if enc_outputs.stride(0) == 0:
        logits, state, weights = step(decoder, token[:1], hidden_state[:, :1],
                                      enc_outputs[:1], enc_valid_lens[:1])
        batch = enc_outputs.shape[0]
        return (logits.expand(batch, -1), state.expand(-1, batch, -1),
                weights.expand(batch, -1))
    return step(decoder, token, hidden_state, enc_outputs, enc_valid_lens)


@pytest.mark.parametrize("fn, fragments", [
    (_bfloat16_in_float32, ("dtype torch.float32", "bfloat16 arguments")),
    (_bfloat16_without_grad, ("no gradient can flow back", "bfloat16 arguments")),
    (_one_sequence_for_all, ("expanded along its first axis",))])
def test_the_condition_matrix_rejects_steps_the_cases_miss(fn, fragments):
    rejects(checks.check_bahdanau_step, fn, *fragments)


def test_bahdanau_round12_messages():
    """Red-team round 12: a tanh written out is told that a step loses precision (not the
    score formula again), and the first case names attention_size 10 (a w_v viewed with
    num_hiddens fails there)."""
    from checker_redteam import round12_ch04_bahdanau as r12

    text = rejects(checks.check_bahdanau_step, r12.W_06_manual_tanh, "weights is wrong",
                   "a step loses precision", "torch.tanh")
    assert "score = w_v(tanh" not in text
    rejects(checks.check_bahdanau_step, r12.W_23_w_v_as_vector_of_num_hiddens,
            "num_hiddens 12, attention_size 10")


R13 = {  # red-team round 13 (writer C): the message names the fault
    "W_10_positions_in_model_dtype": ("4099 encoder steps", "got weight 0 at position 2048",
                                      "2049 becomes 2048", "build the mask from integers"),
    "W_14_restore_mode_flattens_submodules": ("its module `rnn`", "mixed modes",
                                              "decoder.train(was)"),
    "W_24_cached_keys_fingerprint": ("under torch.no_grad()", "sum and sum of squares",
                                     "returns wrong weights", "checksum"),
    "W_25_switches_dropout_off_for_good": ("setting `decoder.attention.dropout.p`",
                                           "was 0.2 before the call and is 0.0",
                                           "not setting their rates to 0"),
    "W_26_zero_grad_inside": ("changed the gradient the caller had accumulated",
                              "None after it", "no decoder.zero_grad()"),
}


@pytest.mark.parametrize("name", R13)
def test_bahdanau_round13_messages(name):
    rejects(checks.check_bahdanau_step, redteam_entry("round13_ch04_bahdanau", name),
            *R13[name])


def test_bahdanau_round13_context_of_an_empty_row_is_named():
    """Red-team round 13: the weights of a length-0 row zeroed after the context was taken
    from the uniform softmax: the message names the length-0 rows, not the cat order."""
    text = rejects(checks.check_bahdanau_step,
                   redteam_entry("round13_ch04_bahdanau", "W_30_context_before_len0_fix"),
                   "only for the sequences of valid length 0", "their context must be 0",
                   "after the mask has zeroed them")
    assert "cat(" not in text


R14 = {
    "W_14_unfreezes_decoder": ("changed requires_grad of the decoder's parameter "
                               "`embedding.weight`", "it was False before the call",
                               "True after it", "no decoder.requires_grad_(...)"),
    "W_15_forward_hook_left_on_rnn": ("changed the hooks of the caller's decoder",
                                      "module `rnn` held 0 forward hook(s) before the call "
                                      "and 1 after it", "handle.remove()"),
    "W_19_rewinds_torch_generator": ("drew from torch's global random generator (or seeded "
                                     "it)", "no torch.manual_seed"),
}


@pytest.mark.parametrize("name", R14)
def test_bahdanau_round14_messages(name):
    """Red-team round 14: the step changed the caller's decoder (a frozen table unfrozen, a
    hook left on decoder.rnn) or rewound torch's generator (a re-seed, which the random
    checker's unadvanced generator hid)."""
    rejects(checks.check_bahdanau_step, redteam_entry("round14_ch04_bahdanau", name),
            *R14[name])


def _reference_step(decoder, token, hidden_state, enc_outputs, enc_valid_lens):
    return redteam_entry("round14_ch04_bahdanau", "C_01_reference")(
        decoder, token, hidden_state, enc_outputs, enc_valid_lens)


def test_a_step_that_freezes_the_decoder_or_hooks_a_parameter_is_named():
    """The reverse faults of round 14's: parameters frozen by the step, and a tensor hook
    left on a parameter."""
    def freezes(decoder, *args):
        decoder.requires_grad_(False)
        return _reference_step(decoder, *args)

    def hooks_a_parameter(decoder, *args):
        decoder.dense.weight.register_hook(lambda g: g)
        return _reference_step(decoder, *args)

    rejects(checks.check_bahdanau_step, freezes, "changed requires_grad of the decoder's "
            "parameter", "True before the call", "False after it")
    rejects(checks.check_bahdanau_step, hooks_a_parameter,
            "parameter `dense.weight` held 0 backward hook(s) before the call and 1 after it")
