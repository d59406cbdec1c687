"""book.gpt: shapes, the KV cache equal to full recomputation, agreement with PyTorch, the
sampling filters on ties and edge cases, the cache's memory, and the hooks of chapter 10."""
import dataclasses
import math

import pytest
import torch
from torch import nn

from book.gpt import (GPT, CausalSelfAttention, CharData, GPTConfig, KVCache, cache_nbytes,
                      evaluate, generate, kv_cache_bytes, ngram_loss, sample_next, sampling_probs,
                      time_per_token, to_torch_layer, top_k_filter, top_p_filter, train_gpt)

SMALL = GPTConfig(vocab_size=23, block_size=40, num_layers=2, num_heads=4, num_hiddens=32,
                  ffn_num_hiddens=64)


def small_model(seed=0, **changes):
    torch.manual_seed(seed)
    return GPT(dataclasses.replace(SMALL, **changes)).eval()


def test_shapes_and_tied_embeddings():
    model = small_model()
    tokens = torch.randint(23, (3, 11))
    assert model(tokens).shape == (3, 11, 23)
    with_vocab = [name for name, p in model.named_parameters() if 23 in p.shape]
    assert with_vocab == ["token_embedding.weight"]   # one V x d matrix, read at both ends
    X = model.ln_f(torch.randn(2, 32))
    assert torch.equal(X @ model.token_embedding.weight.T,
                       nn.functional.linear(X, model.token_embedding.weight))


def test_causal_outputs_before_a_change_do_not_move():
    model = small_model()
    tokens = torch.randint(23, (2, 30))
    changed = tokens.clone()
    changed[:, 17] = (changed[:, 17] + 1) % 23
    a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :17], b[:, :17], atol=1e-6)
    assert not torch.allclose(a[:, 17:], b[:, 17:], atol=1e-4)


@pytest.mark.parametrize("changes", [{}, {"fused": True}, {"num_kv_heads": 2},
                                     {"num_kv_heads": 1, "fused": True}])
def test_cache_gives_the_logits_and_tokens_of_full_recomputation(changes):
    model = small_model(**changes)
    prompt = torch.randint(23, (3, 5))
    for kwargs in ({"temperature": 0}, {"temperature": 1.0}, {"top_k": 5, "top_p": 0.9}):
        runs = [generate(model, prompt, 30, use_cache=use,
                         generator=torch.Generator().manual_seed(7), **kwargs)
                for use in (True, False)]
        assert torch.equal(*runs), kwargs
    tokens = runs[0]
    full = model(tokens)                                          # (3, 35, V)
    caches = model.new_caches()
    steps = [model(tokens[:, :5], caches)] + [model(tokens[:, t:t + 1], caches)
                                              for t in range(5, 35)]
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-5


def test_generate_checks_lengths_and_restores_training_mode():
    model = small_model().train()
    with pytest.raises(ValueError, match="block_size=40"):
        generate(model, torch.zeros(1, 30, dtype=torch.long), 11)
    generate(model, torch.zeros(1, 30, dtype=torch.long), 10, temperature=0)
    assert model.training
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 41, dtype=torch.long))


def test_fused_path_gives_the_same_logits():
    readable, fused = small_model(), small_model(fused=True)
    fused.load_state_dict(readable.state_dict())
    tokens = torch.randint(23, (4, 40))
    assert (readable(tokens) - fused(tokens)).abs().max() < 1e-5


def test_block_equals_torch_encoder_layer_with_a_causal_mask():
    block = small_model().blocks[0]
    with torch.no_grad():  # LayerNorms away from the identity, so that a swap would show
        for ln in (block.ln1, block.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    layer = to_torch_layer(block)
    X = torch.randn(3, 33, 32)
    mask = nn.Transformer.generate_square_subsequent_mask(33)
    ours = block(X, torch.arange(33))
    theirs = layer(X, src_mask=mask, is_causal=True)
    assert (ours - theirs).abs().max() < 1e-5


def test_attention_equals_multihead_attention_with_causal_valid_lens():
    from book.attention import MultiHeadAttention
    from book.transformer import causal_valid_lens

    attention = small_model().blocks[0].attention
    mha = MultiHeadAttention(32, 4, 0.0).eval()
    mha.load_state_dict({k: v for k, v in attention.state_dict().items()})
    X = torch.randn(2, 17, 32)
    ours = attention(X, torch.arange(17))
    assert torch.allclose(ours, mha(X, X, X, causal_valid_lens(2, 17)), atol=1e-5)


def test_kv_cache_bytes_matches_the_tensors():
    for changes, dtype in [({}, torch.float32), ({"num_kv_heads": 2}, torch.float16)]:
        model = small_model(**changes).to(dtype)
        caches = model.new_caches()
        model(torch.randint(23, (3, 37)), caches)
        kv = model.config.num_kv_heads or model.config.num_heads
        expected = kv_cache_bytes(2, 37, kv, 8, torch.finfo(dtype).bits // 8, batch_size=3)
        assert cache_nbytes(caches) == expected
    # Llama 2 7B (32 layers, 32 heads of 128, 4096 positions, float16): 2 GiB per sequence
    assert kv_cache_bytes(32, 4096, 32, 128, 2) == 2 * 2 ** 30


def test_kv_cache_appends_along_positions():
    cache = KVCache()
    assert len(cache) == 0
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    keys, values = cache.append(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    assert len(cache) == 4 and keys.shape == values.shape == (1, 2, 4, 4)
    assert keys[:, :, 3].eq(1).all() and keys[:, :, :3].eq(0).all()


def test_config_rejects_sizes_that_do_not_divide():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(num_hiddens=30, num_heads=4)
    with pytest.raises(ValueError, match="num_kv_heads=3"):
        GPTConfig(num_heads=4, num_kv_heads=3)
    assert GPTConfig(num_hiddens=64, num_heads=8).head_size == 8


# -- sampling -------------------------------------------------------------------------------

def test_top_k_keeps_ties_and_everything_when_k_exceeds_the_vocabulary():
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0, 0.0]])
    assert torch.isinf(top_k_filter(logits, 1)).tolist() == [[True, False, True, False, True]]
    kept = top_k_filter(logits, 3)
    assert torch.isfinite(kept).sum() == 3 and torch.equal(kept[0, 1:4], logits[0, 1:4])
    assert torch.equal(top_k_filter(logits, 50), logits)
    with pytest.raises(ValueError):
        top_k_filter(logits, 0)


def test_top_p_keeps_the_token_that_crosses_p_and_its_ties():
    probs = torch.tensor([[0.5, 0.1, 0.3, 0.1]])
    logits = probs.log()
    assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [[True, False, False, False]]
    # 0.5 < 0.6: the 0.3 token crosses 0.6 and is kept
    assert torch.isfinite(top_p_filter(logits, 0.6)).tolist() == [[True, False, True, False]]
    # 0.8 + a 0.1 crosses 0.85: both 0.1 tokens are tied, both kept
    assert torch.isfinite(top_p_filter(logits, 0.85)).all()
    assert torch.isfinite(top_p_filter(logits, 1e-6)).sum() == 1
    assert torch.isfinite(top_p_filter(logits, 1.0)).all()
    # p = 1 keeps every token, also where float32's running sum reaches 1 early (a row of
    # GPT-2's 50,257 tokens used to lose about 1e-6 of its mass)
    wide = torch.randn(2, 50257, generator=torch.Generator().manual_seed(0)) * 3
    assert torch.equal(top_p_filter(wide, 1.0), wide)
    unsorted = torch.tensor([[0.2, 5.0, -1.0], [3.0, 0.0, 3.0]])  # rows independent
    assert torch.isfinite(top_p_filter(unsorted, 0.5)).tolist() == [[False, True, False],
                                                                      [True, False, True]]
    half = top_p_filter(torch.tensor([[1e4, 1e4 - 1, -1e4]], dtype=torch.float16), 0.9)
    assert half.dtype == torch.float16 and torch.isfinite(half).tolist() == [[True, True, False]]
    with pytest.raises(ValueError):
        top_p_filter(logits, 0.0)


def test_sampling_stays_in_the_allowed_set_and_follows_the_renormalised_probabilities():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0]).expand(20000, 6)
    draws = sample_next(logits, top_k=3, generator=torch.Generator().manual_seed(0))
    assert draws.max() < 3
    freq = torch.bincount(draws, minlength=6).float() / 20000
    expected = torch.softmax(logits[0, :3], 0)
    assert (freq[:3] - expected).abs().max() < 5 * (0.25 / 20000) ** 0.5
    greedy = sample_next(logits[:2], temperature=0)
    assert greedy.tolist() == [0, 0]
    cold = sample_next(logits[:200], temperature=0.01, generator=torch.Generator())
    assert cold.eq(0).all()
    with pytest.raises(ValueError):
        sample_next(logits, temperature=-1)


def test_sampling_probs_is_what_sample_next_draws_from():
    logits = torch.tensor([[2.0, 1.0, 0.0, 0.0, -1.0]])
    assert sampling_probs(logits, temperature=0).tolist() == [[1.0, 0.0, 0.0, 0.0, 0.0]]
    assert torch.allclose(sampling_probs(logits, temperature=0.5), torch.softmax(2 * logits, -1))
    kept = sampling_probs(logits, top_k=3)                  # the third place is shared
    assert (kept > 0).tolist() == [[True, True, True, True, False]]
    assert torch.allclose(kept.sum(-1), torch.ones(1))
    both = sampling_probs(logits, top_k=3, top_p=0.5)       # top-k first, then top-p
    assert (both > 0).tolist() == [[True, False, False, False, False]]
    with pytest.raises(ValueError, match="temperature"):
        sampling_probs(logits, temperature=-0.5)


# -- hooks for chapter 10 ---------------------------------------------------------------------

def rotate(X, positions):
    """A RoPE-like rotation of feature pairs by an angle proportional to the position."""
    angle = positions[:, None].float() * torch.linspace(0.1, 1.0, X.shape[-1] // 2)  # (n, hs/2)
    x1, x2 = X[..., 0::2], X[..., 1::2]
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def alibi(query_positions, key_positions):
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])[:, None, None]          # (h, 1, 1)
    return -slopes * (query_positions[:, None] - key_positions).float()       # (h, n, t)


@pytest.mark.parametrize("fused", [False, True])
def test_hooks_see_absolute_positions_with_and_without_the_cache(fused):
    seen = []

    def recording_rotate(X, positions):
        seen.append(positions.tolist())
        return rotate(X, positions)

    torch.manual_seed(0)
    model = GPT(dataclasses.replace(SMALL, num_layers=1, fused=fused),
                qk_transform=recording_rotate, score_bias=alibi).eval()
    model.position_embedding = None   # positions enter only through the hooks
    tokens = torch.randint(23, (2, 12))
    full = model(tokens)
    caches = model.new_caches()
    seen.clear()
    steps = [model(tokens[:, :4], caches)] + [model(tokens[:, t:t + 1], caches)
                                              for t in range(4, 12)]
    assert seen[0] == [0, 1, 2, 3] and seen[-1] == [11]         # queries and keys, per call
    assert (torch.cat(steps, dim=1) - full).abs().max() < 1e-5
    # Without position embeddings or hooks, a causal model still varies with position
    # (through the number of keys), but shifting the rotation changes the outputs:
    assert not torch.allclose(full, GPT(dataclasses.replace(SMALL, num_layers=1))(tokens))


def test_attention_alone_takes_positions():
    attention = CausalSelfAttention(SMALL).eval()
    X = torch.randn(2, 6, 32)
    out = attention(X, torch.arange(6))
    assert out.shape == (2, 6, 32) and attention.attention_weights.shape == (2, 4, 6, 6)
    assert torch.allclose(attention.attention_weights.sum(-1), torch.ones(2, 4, 6))


# -- data, baselines, training --------------------------------------------------------------

@pytest.fixture(scope="module")
def data():
    return CharData()


def test_char_data_round_trips_and_holds_out_every_topic(data):
    assert 400_000 < len(data.train_text) + len(data.val_text) < 600_000
    assert 0.09 < len(data.val) / (len(data.train) + len(data.val)) < 0.11
    assert data.decode(data.encode("def f(x):")) == "def f(x):"
    X, Y = data.batch(4, 16, torch.Generator().manual_seed(0))
    assert X.shape == Y.shape == (4, 16) and torch.equal(X[:, 1:], Y[:, :-1])
    with pytest.raises(ValueError, match="not in the vocabulary"):
        data.encode("\u263a")


def test_ngram_baselines(data):
    V = len(data)
    unigram = ngram_loss(data.train, data.val, V, 1, 0.1)
    bigram = ngram_loss(data.train, data.val, V, 2, 0.1)
    assert math.log(V) > unigram > bigram > 2.0
    tiny = torch.tensor([0, 1, 0, 1, 0, 1])
    assert ngram_loss(tiny, tiny, 2, 2, 0.0) == pytest.approx(0.0)
    assert ngram_loss(tiny, tiny, 2, 1, 0.0) == pytest.approx(math.log(2))


def test_training_lowers_the_loss(data):
    model = GPT(GPTConfig(vocab_size=len(data), block_size=16, num_layers=1, num_heads=2,
                          num_hiddens=16, ffn_num_hiddens=32))
    before = evaluate(model, data.val, 16, max_windows=20)
    losses, val = train_gpt(model, data, 30, batch_size=8, eval_every=15, eval_windows=20)
    assert len(losses) == 30 and sorted(val) == [0, 15, 30]
    assert val[0] == pytest.approx(before) and val[30] < before - 0.5


def test_time_per_token_returns_positive_seconds():
    model = small_model()
    for position in (1, 20):
        assert time_per_token(model, position, use_cache=True, repeats=1) > 0
        assert time_per_token(model, position, use_cache=False, repeats=1) > 0
