"""book.transformer and book.train: shapes, the masks proven, equivalence with d2l and with
torch.nn.Transformer's layers, greedy decoding and a short training run."""
import d2l.torch as d2l
import pytest
import torch
from torch import nn

from book import transformer as T
from book.data import DateData
from book.train import (exact_match, predict, train_seq2seq, training_step_flops,
                        training_throughput, warmup_schedule)

D, FFN, HEADS = 16, 32, 4


def seeded(seed=0):
    torch.manual_seed(seed)


def small_model(fused=False, **kwargs):
    seeded()
    return T.Transformer(11, 7, D, FFN, HEADS, 2, 0.1, fused=fused, **kwargs).eval()


def batch(n_src=6, n_tgt=5, batch_size=3):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 11, (batch_size, n_src), generator=g)
    dec_input = torch.randint(4, 7, (batch_size, n_tgt), generator=g)
    valid_lens = torch.tensor([n_src, 3, 1])[:batch_size]
    return src, dec_input, valid_lens


# -- shapes -----------------------------------------------------------------------------------

def test_shapes_of_every_piece():
    X = torch.randn(2, 5, D)
    assert T.PositionWiseFFN(FFN, 8, num_inputs=D)(X).shape == (2, 5, 8)
    assert T.AddNorm(D, 0.0)(X, X).shape == (2, 5, D)
    block = T.TransformerEncoderBlock(D, FFN, HEADS, 0.0)
    assert block(X, torch.tensor([5, 2])).shape == (2, 5, D)
    dec_block = T.TransformerDecoderBlock(D, FFN, HEADS, 0.0)
    assert dec_block(torch.randn(2, 3, D), X, torch.tensor([5, 2])).shape == (2, 3, D)
    model = small_model()
    src, dec_input, valid_lens = batch()
    assert model(src, dec_input, valid_lens).shape == (3, 5, 7)
    maps = T.attention_maps(model, src, valid_lens, dec_input)
    assert maps["encoder self-attention"].shape == (2, 3, HEADS, 6, 6)
    assert maps["decoder self-attention"].shape == (2, 3, HEADS, 5, 5)
    assert maps["cross-attention"].shape == (2, 3, HEADS, 5, 6)
    for w in maps.values():
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)


def test_ffn_is_the_same_mlp_at_every_position():
    ffn = T.PositionWiseFFN(FFN, D, num_inputs=D)
    X = torch.randn(2, 5, D)
    perm = torch.tensor([3, 0, 4, 1, 2])
    assert torch.allclose(ffn(X)[:, perm], ffn(X[:, perm]), atol=1e-6)


def test_causal_valid_lens():
    assert T.causal_valid_lens(2, 4).tolist() == [[1, 2, 3, 4]] * 2


def test_embeddings_start_small_so_the_scaled_embedding_matches_the_encoding():
    model = T.Transformer(50, 50, 64, 128, 4, 1, 0.0)
    std = model.encoder.embedding.weight.std().item() * 64 ** 0.5
    assert 0.9 < std < 1.1


# -- the masks, proven ------------------------------------------------------------------------

@pytest.mark.parametrize("fused", [False, True])
def test_changing_a_future_target_token_leaves_every_earlier_output_unchanged(fused):
    model = small_model(fused)
    src, dec_input, valid_lens = batch()
    before = model(src, dec_input, valid_lens)
    for t in range(dec_input.shape[1]):
        changed = dec_input.clone()
        changed[:, t] = 4 + (changed[:, t] - 4 + 1) % 3  # a different token at step t
        after = model(src, changed, valid_lens)
        assert torch.allclose(after[:, :t], before[:, :t], atol=1e-6), f"step {t} leaked"
        assert not torch.allclose(after[:, t], before[:, t], atol=1e-4), "the test must bite"


def test_every_decoder_block_is_causal_on_its_own():
    seeded()
    block = T.TransformerDecoderBlock(D, FFN, HEADS, 0.0).eval()
    X, enc = torch.randn(2, 6, D), torch.randn(2, 4, D)
    before = block(X, enc, None)
    X2 = X.clone()
    X2[:, 4:] = torch.randn(2, 2, D)
    after = block(X2, enc, None)
    assert torch.allclose(after[:, :4], before[:, :4], atol=1e-6)
    assert not torch.allclose(after[:, 4:], before[:, 4:], atol=1e-4)


@pytest.mark.parametrize("fused", [False, True])
def test_changing_a_padded_source_token_changes_nothing(fused):
    model = small_model(fused)
    src, dec_input, valid_lens = batch()
    before = model(src, dec_input, valid_lens)
    enc_before = model.encoder(src, valid_lens)
    changed = src.clone()
    for i, n in enumerate(valid_lens.tolist()):
        changed[i, n:] = 4 + (changed[i, n:] - 4 + 1) % 7  # only the padding changes
    assert not torch.equal(changed, src)
    assert torch.allclose(model(changed, dec_input, valid_lens), before, atol=1e-6)
    enc_after = model.encoder(changed, valid_lens)
    for i, n in enumerate(valid_lens.tolist()):
        assert torch.allclose(enc_after[i, :n], enc_before[i, :n], atol=1e-6)
    # ... while changing a valid token does change the output (so the test can fail)
    changed[:, 0] = 4 + (changed[:, 0] - 4 + 1) % 7
    assert not torch.allclose(model(changed, dec_input, valid_lens), before, atol=1e-4)


def test_attention_weights_show_both_masks():
    model = small_model()
    src, dec_input, valid_lens = batch()
    maps = T.attention_maps(model, src, valid_lens, dec_input)
    future = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    assert (maps["decoder self-attention"][..., future] == 0).all()
    assert (maps["decoder self-attention"][..., ~future] > 0).all()
    for i, n in enumerate(valid_lens.tolist()):
        assert (maps["cross-attention"][:, i, ..., n:] == 0).all()
        assert (maps["encoder self-attention"][:, i, ..., n:] == 0).all()
        assert (maps["cross-attention"][:, i, ..., :n] > 0).all()


def test_fused_and_readable_models_compute_the_same_function():
    readable, fused = small_model(), small_model(fused=True)
    fused.load_state_dict(readable.state_dict())
    src, dec_input, valid_lens = batch()
    assert torch.allclose(readable(src, dec_input, valid_lens), fused(src, dec_input, valid_lens),
                          atol=1e-5)


# -- equivalence with d2l and with torch.nn ---------------------------------------------------

@pytest.mark.parametrize("use_bias", [False, True])
def test_encoder_block_equals_d2ls_with_shared_weights(use_bias):
    seeded()
    ours = T.TransformerEncoderBlock(D, FFN, HEADS, 0.0, use_bias=use_bias).eval()
    theirs = d2l.TransformerEncoderBlock(D, FFN, HEADS, 0.0, use_bias=use_bias).eval()
    X, valid_lens = torch.randn(3, 6, D), torch.tensor([6, 4, 2])
    theirs(X, valid_lens)  # d2l's LazyLinear layers take their sizes on the first call
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert torch.allclose(ours(X, valid_lens), theirs(X, valid_lens), atol=1e-5)
    assert torch.allclose(ours(X, None), theirs(X, None), atol=1e-5)


def test_ffn_and_addnorm_equal_d2ls():
    seeded()
    X, Y = torch.randn(2, 3, D), torch.randn(2, 3, D)
    ffn, d2l_ffn = T.PositionWiseFFN(FFN, D, num_inputs=D), d2l.PositionWiseFFN(FFN, D)
    d2l_ffn(X)
    d2l_ffn.load_state_dict(ffn.state_dict())
    assert torch.allclose(ffn(X), d2l_ffn(X), atol=1e-6)
    assert torch.allclose(T.AddNorm(D, 0.0)(X, Y), d2l.AddNorm(D, 0.0)(X, Y), atol=1e-6)


@pytest.mark.parametrize("use_bias", [False, True])
def test_blocks_equal_torch_layers_with_copied_weights(use_bias):
    seeded()
    X, enc, valid_lens = torch.randn(3, 6, D), torch.randn(3, 4, D), torch.tensor([6, 4, 2])
    padding = torch.arange(6) >= valid_lens[:, None]                 # True = ignore
    ours = T.TransformerEncoderBlock(D, FFN, HEADS, 0.0, use_bias).eval()
    layer = nn.TransformerEncoderLayer(D, HEADS, FFN, 0.0, batch_first=True).eval()
    T.copy_to_torch_layer(ours, layer)
    out, ref = ours(X, valid_lens), layer(X, src_key_padding_mask=padding)
    for i, n in enumerate(valid_lens.tolist()):  # padded query rows are don't-care
        assert torch.allclose(out[i, :n], ref[i, :n], atol=1e-5)

    enc_lens = torch.tensor([4, 2, 1])
    dec = T.TransformerDecoderBlock(D, FFN, HEADS, 0.0, use_bias).eval()
    dec_layer = nn.TransformerDecoderLayer(D, HEADS, FFN, 0.0, batch_first=True).eval()
    T.copy_to_torch_layer(dec, dec_layer)
    causal = nn.Transformer.generate_square_subsequent_mask(6)
    ref = dec_layer(X, enc, tgt_mask=causal, tgt_is_causal=True,
                    memory_key_padding_mask=torch.arange(4) >= enc_lens[:, None])
    assert torch.allclose(dec(X, enc, enc_lens), ref, atol=1e-5)


def test_parameter_counts_differ_from_torch_by_biases_and_two_final_norms():
    d, blks = 32, 2
    ours = T.Transformer(20, 12, d, 64, 4, blks, 0.1)
    theirs = T.TorchTransformer(20, 12, d, 64, 4, blks, 0.1)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    attention_layers = blks + 2 * blks           # encoder self; decoder self and cross
    assert count(theirs) - count(ours) == attention_layers * 4 * d + 2 * 2 * d
    with_bias = T.Transformer(20, 12, d, 64, 4, blks, 0.1, use_bias=True)
    assert count(theirs) - count(with_bias) == 2 * 2 * d   # only the final LayerNorms


def test_torch_transformer_masks_the_future_and_the_padding():
    seeded()
    model = T.TorchTransformer(11, 7, D, FFN, HEADS, 2, 0.1).eval()
    src, dec_input, valid_lens = batch()
    before = model(src, dec_input, valid_lens)
    changed = dec_input.clone()
    changed[:, 3] = 4 + (changed[:, 3] - 4 + 1) % 3
    assert torch.allclose(model(src, changed, valid_lens)[:, :3], before[:, :3], atol=1e-5)
    padded = src.clone()
    padded[2, 1:] = 4 + (padded[2, 1:] - 4 + 1) % 7
    assert torch.allclose(model(padded, dec_input, valid_lens), before, atol=1e-5)


# -- decoding and training --------------------------------------------------------------------

class Constant(nn.Module):
    """A fake model whose decoder always predicts `token`."""

    def __init__(self, token, vocab=7):
        super().__init__()
        self.token, self.vocab = token, vocab
        self.encoder = lambda src, valid_lens: src
        self.decoder = self.decode

    def decode(self, dec_input, enc_outputs, valid_lens):
        logits = torch.zeros(*dec_input.shape, self.vocab)
        logits[..., self.token] = 1.0
        return logits


def test_greedy_decode_stops_at_eos_and_pads_with_eos():
    src, valid_lens = torch.zeros(2, 3, dtype=torch.long), torch.tensor([3, 2])
    out = T.greedy_decode(Constant(token=2), src, valid_lens, num_steps=4, bos=1, eos=2)
    assert out.tolist() == [[2, 2, 2, 2]] * 2
    out = T.greedy_decode(Constant(token=5), src, valid_lens, num_steps=4, bos=1, eos=2)
    assert out.tolist() == [[5, 5, 5, 5]] * 2


@pytest.fixture(scope="module")
def tiny_data():
    return DateData(num_train=256, num_test=32, seed=3)


def test_training_lowers_the_loss_and_repeats_exactly(tiny_data, capsys):
    def run():
        torch.manual_seed(0)
        model = T.Transformer(len(tiny_data.src_vocab), len(tiny_data.tgt_vocab), 32, 64, 4, 1,
                              0.1)
        return model, train_seq2seq(model, tiny_data, 40, lr=3e-3, warmup_steps=5,
                                    batch_size=32)
    model, losses = run()
    assert len(losses) == 40
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5
    assert run()[1] == losses
    assert "training" in capsys.readouterr().out  # the progress bar goes to stdout
    predictions = predict(model, tiny_data, tiny_data.test_pairs)
    assert len(predictions) == 32 and all(isinstance(p, str) for p in predictions)
    assert 0.0 <= exact_match(predictions, tiny_data.test_pairs) <= 1.0
    assert exact_match([t for _, t in tiny_data.test_pairs], tiny_data.test_pairs) == 1.0


def test_warmup_schedule_constant_or_linear_decay():
    constant = warmup_schedule(4)
    assert [constant(k) for k in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    decaying = warmup_schedule(4, total_steps=8)
    assert [decaying(k) for k in range(8)] == [0.25, 0.5, 0.75, 1.0, 1.0, 0.75, 0.5, 0.25]
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        warmup_schedule(10, total_steps=10)


def test_decay_changes_training_only_when_asked(tiny_data):
    def run(**kwargs):
        torch.manual_seed(0)
        model = T.Transformer(len(tiny_data.src_vocab), len(tiny_data.tgt_vocab), 16, 32, 4, 1,
                              0.0)
        return train_seq2seq(model, tiny_data, 12, lr=3e-3, warmup_steps=4, batch_size=32,
                             progress=False, **kwargs)
    plain = run()
    assert run(decay=False) == plain
    decayed = run(decay=True)
    assert decayed[:5] == plain[:5] and decayed != plain   # same warm-up, then smaller steps


def test_flops_of_a_training_step_are_the_same_for_readable_fused_and_torch(tiny_data):
    V_src, V_tgt = len(tiny_data.src_vocab), len(tiny_data.tgt_vocab)
    models = [T.Transformer(V_src, V_tgt, D, FFN, HEADS, 2, 0.1),
              T.Transformer(V_src, V_tgt, D, FFN, HEADS, 2, 0.1, fused=True),
              T.TorchTransformer(V_src, V_tgt, D, FFN, HEADS, 2, 0.1)]
    totals = [training_step_flops(m, tiny_data, batch_size=16) for m in models]
    assert totals[0] > 0 and len(set(totals)) == 1
    by_operator = training_step_flops(models[0], tiny_data, batch_size=16, by_operator=True)
    assert sum(by_operator.values()) == totals[0] and "bmm" in by_operator
    assert all(p.grad is None or not p.grad.any() for p in models[0].parameters())


def test_training_throughput_is_a_positive_rate(tiny_data):
    model = T.Transformer(len(tiny_data.src_vocab), len(tiny_data.tgt_vocab), D, FFN, HEADS, 1,
                          0.0)
    assert training_throughput(model, tiny_data, num_steps=2, batch_size=16) > 0
