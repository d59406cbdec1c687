"""The GRU encoder-decoder with and without Bahdanau attention (book.seq2seq, chapter 4)."""
import pytest
import torch

from book import seq2seq
from book.attention import masked_softmax
from book.data import DateData
from book.train import train_seq2seq


def batch(vocab_size=11, batch_size=3, steps=6, valid_lens=(6, 4, 2), seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randint(4, vocab_size, (batch_size, steps), generator=g)
    valid_lens = torch.tensor(valid_lens)
    X[torch.arange(steps)[None] >= valid_lens[:, None]] = 0  # <pad>
    return X, valid_lens


def test_encoder_shapes_and_final_state_is_the_last_real_step():
    torch.manual_seed(0)
    encoder = seq2seq.Seq2SeqEncoder(11, 5, 7, num_layers=2)
    X, valid_lens = batch()
    outputs, state = encoder(X, valid_lens)
    assert outputs.shape == (3, 6, 7) and state.shape == (2, 3, 7)
    last = outputs[torch.arange(3), valid_lens - 1]          # (batch, hiddens)
    assert torch.allclose(state[-1], last, atol=1e-6)         # packing: padding not read
    assert (outputs[2, 2:] == 0).all()                        # zero on padding
    alone, _ = encoder(X[2:, :2], valid_lens[2:])             # the same sequence, unpadded
    assert torch.allclose(alone[0], outputs[2, :2], atol=1e-6)


def test_plain_decoder_sees_only_the_final_state():
    torch.manual_seed(0)
    encoder, decoder = seq2seq.Seq2SeqEncoder(11, 5, 7), seq2seq.Seq2SeqDecoder(9, 4, 7)
    X, valid_lens = batch()
    outputs, state = encoder(X, valid_lens)
    Y = torch.randint(4, 9, (3, 5))
    logits, (new_state, context) = decoder(Y, decoder.init_state((outputs, state), valid_lens))
    assert logits.shape == (3, 5, 9) and new_state.shape == (1, 3, 7)
    scrambled = (torch.randn_like(outputs), state)           # other per-step states
    again, _ = decoder(Y, decoder.init_state(scrambled, valid_lens))
    assert torch.equal(logits, again)


def reference_attention_decoder(decoder, Y, enc_outputs, hidden_state, valid_lens):
    """The same decoder written out step by step, from the equations of the chapter."""
    att, logits, weights = decoder.attention, [], []
    for t in range(Y.shape[1]):
        s = hidden_state[-1]                                                   # (batch, h)
        scores = att.w_v(torch.tanh(att.W_q(s)[:, None] + att.W_k(enc_outputs)))  # (b, k, 1)
        alpha = masked_softmax(scores.transpose(1, 2), valid_lens)            # (batch, 1, k)
        context = alpha @ enc_outputs                                          # (batch, 1, h)
        x = torch.cat([context, decoder.embedding(Y[:, t:t + 1])], dim=-1)
        out, hidden_state = decoder.rnn(x, hidden_state)
        logits.append(decoder.dense(out))
        weights.append(alpha)
    return torch.cat(logits, 1), torch.cat(weights, 1), hidden_state


@pytest.mark.parametrize("num_layers", [1, 2])
def test_attention_decoder_matches_the_equations(num_layers):
    torch.manual_seed(0)
    decoder = seq2seq.Seq2SeqAttentionDecoder(9, 4, 7, num_layers=num_layers,
                                              attention_size=5)
    enc_outputs, state = torch.randn(3, 6, 7), torch.randn(num_layers, 3, 7)
    valid_lens, Y = torch.tensor([6, 4, 2]), torch.randint(4, 9, (3, 5))
    logits, (_, new_state, _) = decoder(Y, decoder.init_state((enc_outputs, state), valid_lens))
    ref_logits, ref_weights, ref_state = reference_attention_decoder(decoder, Y, enc_outputs,
                                                                     state, valid_lens)
    assert logits.shape == (3, 5, 9) and decoder.attention_weights.shape == (3, 5, 6)
    assert torch.allclose(logits, ref_logits, atol=1e-6)
    assert torch.allclose(decoder.attention_weights, ref_weights, atol=1e-6)
    assert torch.allclose(new_state, ref_state, atol=1e-6)
    weights = decoder.attention_weights
    assert torch.allclose(weights.sum(-1), torch.ones(3, 5), atol=1e-6)
    assert (weights[1, :, 4:] == 0).all() and (weights[2, :, 2:] == 0).all()


def test_decoding_one_step_at_a_time_equals_decoding_the_whole_target():
    """Greedy decoding calls the decoder one token at a time; training calls it once."""
    torch.manual_seed(0)
    for decoder in (seq2seq.Seq2SeqDecoder(9, 4, 7), seq2seq.Seq2SeqAttentionDecoder(9, 4, 7)):
        state = decoder.init_state((torch.randn(3, 6, 7), torch.randn(1, 3, 7)),
                                   torch.tensor([6, 4, 2]))
        Y = torch.randint(4, 9, (3, 5))
        whole, _ = decoder(Y, state)
        steps = []
        for t in range(5):
            out, state = decoder(Y[:, t:t + 1], state)
            steps.append(out)
        assert torch.allclose(whole, torch.cat(steps, 1), atol=1e-6)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    data = DateData(600, 40, seed=0, max_dates=2)
    model = seq2seq.make_model(data.src_vocab, data.tgt_vocab, attention=True, embed_size=8,
                               num_hiddens=16, attention_size=8)
    losses = train_seq2seq(model, data, 60, lr=0.01, warmup_steps=1, batch_size=32,
                           progress=False)
    return data, model, losses


def test_training_lowers_the_loss(tiny):
    _, _, losses = tiny
    assert sum(losses[-10:]) / 10 < 0.7 * sum(losses[:10]) / 10


def test_greedy_decode_shapes_eos_and_mode(tiny):
    data, model, _ = tiny
    src, _, src_valid_len, _ = data.test
    model.train()
    tokens, weights = seq2seq.greedy_decode(model, src, src_valid_len, data.num_steps_tgt,
                                            data.tgt_vocab.bos, data.tgt_vocab.eos)
    assert model.training                                    # the mode is restored
    assert tokens.shape == (40, 22) and weights.shape == (40, 22, src.shape[1])
    ended = (tokens == data.tgt_vocab.eos).cumsum(1) > 0
    assert (tokens[ended] == data.tgt_vocab.eos).all()       # nothing after <eos>
    assert (weights[src_valid_len == 5, :, 5:] == 0).all() if (src_valid_len == 5).any() else True
    plain = seq2seq.make_model(data.src_vocab, data.tgt_vocab, attention=False)
    tokens, weights = seq2seq.greedy_decode(plain, src, src_valid_len, 22,
                                            data.tgt_vocab.bos, data.tgt_vocab.eos)
    assert tokens.shape == (40, 22) and weights is None


def test_predict_and_translate_agree(tiny):
    data, model, _ = tiny
    pairs = data.test_pairs[:7]
    texts, weights = seq2seq.predict_seq2seq(model, data, pairs, batch_size=3)
    assert len(texts) == len(weights) == 7
    for (source, _), text in zip(pairs, texts):
        prediction, w = seq2seq.translate(model, data, source)
        assert prediction == text
        num_out = min(len(prediction) + 1, data.num_steps_tgt)
        assert w.shape == (num_out, len(source) + 1)
        assert torch.allclose(w.sum(-1), torch.ones(num_out), atol=1e-5)


def test_accuracy_by_length_bins_and_counts():
    sources = ["ab", "abc", "abcd", "abcdefg", "x" * 12]
    predictions = ["1", "2", "x", "4", "5"]
    targets = ["1", "2", "3", "y", "5"]
    rows = seq2seq.accuracy_by_length(sources, predictions, targets, [0, 3, 5, 10, 20, 30])
    assert [r[2] for r in rows] == [1, 2, 1, 1, 0]
    assert rows[0][3] == 1.0 and rows[1][3] == 0.5 and rows[2][3] == 0.0 and rows[3][3] == 1.0
    assert rows[4][3] != rows[4][3]                          # NaN for an empty bin


def test_year_positions_find_each_dates_year_in_source_and_target():
    source, target = "3 mar 2021; tuesday, 12 january 1950", "2021-03-03 1950-01-12"
    pairs = seq2seq.year_positions(source, target)
    assert [([target[t] for t in rows], "".join(source[s] for s in cols))
            for rows, cols in pairs] == [(list("2021"), "2021"), (list("1950"), "1950")]
    assert seq2seq.year_positions("01/02/1999", "1999-02-01") == [([0, 1, 2, 3],
                                                                   [6, 7, 8, 9])]


def test_attention_share_averages_the_weight_on_the_given_columns():
    weights = torch.zeros(5, 6)
    weights[0, 2], weights[0, 3], weights[1, 4], weights[1, 0] = 0.5, 0.5, 0.25, 0.75
    assert seq2seq.attention_share(weights, [([0, 1], [2, 3, 4])]) == pytest.approx(0.625)
    assert seq2seq.attention_share(weights, [([0], [2]), ([1], [0])]) == pytest.approx(0.625)


def test_bidirectional_final_state_is_forward_last_and_backward_first():
    """c = [forward h_T; backward h_1]: each direction ends where it stops reading."""
    torch.manual_seed(0)
    encoder = seq2seq.Seq2SeqEncoder(11, 5, 8, num_layers=2, bidirectional=True)
    X, valid_lens = batch()
    outputs, state = encoder(X, valid_lens)
    assert outputs.shape == (3, 6, 8) and state.shape == (2, 3, 8)
    forward_last = outputs[torch.arange(3), valid_lens - 1, :4]   # (batch, units)
    backward_first = outputs[:, 0, 4:]                            # (batch, units)
    assert torch.allclose(state[-1], torch.cat([forward_last, backward_first], -1), atol=1e-6)
    assert not torch.allclose(state[-1], outputs[torch.arange(3), valid_lens - 1], atol=1e-3)
