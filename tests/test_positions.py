"""book.positions: RoPE (two forms that agree, scores that depend only on i - j, offsets as
in a KV cache), ALiBi (the paper's slopes, the sign of the bias) and the GPT built with each
encoding (cached generation equal to full recomputation)."""
import math

import pytest
import torch

from book import positions
from book.gpt import GPTConfig, generate
from book.selfattention import rotation, sinusoidal_table

CONFIG = GPTConfig(vocab_size=17, block_size=48, num_layers=2, num_heads=4, num_hiddens=32,
                   ffn_num_hiddens=64)


def test_rotation_and_complex_forms_agree():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(2, 3, 20, 16, generator=g, dtype=torch.float64)
    where = torch.tensor([0, 1, 2, 5, 9, 100, 101, 3, 7, 8, 2000, 11, 12, 13, 14, 15, 16,
                          17, 18, 19])
    a = positions.apply_rope(X, where)
    b = positions.apply_rope_rotation(X, where)
    assert (a - b).abs().max() < 1e-12
    a32 = positions.apply_rope(X.float(), where)
    assert a32.dtype == torch.float32 and (a32.double() - b).abs().max() < 1e-5


def test_half_pairing_is_the_interleaved_one_with_features_permuted():
    X = torch.randn(5, 3, 8)
    where = torch.arange(3, 8)[:3]
    perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])      # half layout -> interleaved layout
    half = positions.apply_rope(X, where, "half")
    inter = positions.apply_rope(X[..., perm], where)
    assert torch.allclose(half[..., perm], inter, atol=1e-6)


def test_scores_depend_only_on_the_distance_and_norms_are_kept():
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        q, k = torch.randn(2, 1, 64, generator=g, dtype=torch.float64)
        i, j, shift = (int(v) for v in torch.randint(0, 1000, (3,), generator=g))
        def score(a, b):
            return (positions.apply_rope(q, torch.tensor([a]))
                    @ positions.apply_rope(k, torch.tensor([b])).T).item()
        assert math.isclose(score(i, j), score(i + shift, j + shift), abs_tol=1e-9)
        rotated = positions.apply_rope(q, torch.tensor([i]))
        assert math.isclose(rotated.norm().item(), q.norm().item(), rel_tol=1e-12)


def test_rope_at_position_zero_is_the_identity_and_uses_chapter_6s_rotation():
    X = torch.randn(4, 12, dtype=torch.float64)
    assert torch.equal(positions.apply_rope(X, torch.zeros(4, dtype=torch.long)), X)
    # the pair (x_2j, x_2j+1) turns like chapter 6's (sin, cos) pair, the other way round
    R = positions.rope_rotations(torch.tensor([3]), 12)[0]
    assert torch.allclose(R, rotation(3, 12).T, atol=1e-12)
    P = sinusoidal_table(10, 12).double()
    assert torch.allclose(rotation(3, 12) @ P[2], P[5], atol=1e-6)


def test_odd_sizes_and_unknown_pairings_are_refused():
    with pytest.raises(ValueError, match="even"):
        positions.apply_rope(torch.randn(3, 5), torch.arange(3))
    with pytest.raises(ValueError, match="even"):
        positions.apply_rope_rotation(torch.randn(3, 5), torch.arange(3))
    with pytest.raises(ValueError, match="pairing"):
        positions.apply_rope(torch.randn(3, 4), torch.arange(3), "pairs")


def test_float16_is_rotated_with_float64_angles():
    X = torch.randn(6, 16).half()
    where = torch.arange(2000, 2006)
    out = positions.apply_rope(X, where)
    assert out.dtype == torch.float16
    assert (out.double() - positions.apply_rope(X.double(), where)).abs().max() < 1e-2


def test_alibi_slopes_are_the_papers():
    assert positions.alibi_slopes(8) == [2.0 ** -k for k in range(1, 9)]
    assert positions.alibi_slopes(1) == [2.0 ** -8]
    four, eight = positions.alibi_slopes(4), positions.alibi_slopes(8)
    assert positions.alibi_slopes(6) == four + eight[0::2][:2]
    assert positions.alibi_slopes(12) == eight + positions.alibi_slopes(16)[0::2][:4]
    for bad in (0, -2, 2.0, "4"):
        with pytest.raises(ValueError, match="positive int"):
            positions.alibi_slopes(bad)


def test_alibi_bias_is_minus_slope_times_distance():
    bias = positions.alibi_bias(4, 6)
    assert bias.shape == (4, 6, 6) and bias.dtype == torch.float32
    i, j = torch.arange(6)[:, None], torch.arange(6)
    m = torch.tensor(positions.alibi_slopes(4))
    lower = (j <= i).expand(4, 6, 6)
    assert torch.allclose(bias[lower], (-m[:, None, None] * (i - j))[lower])
    assert (bias[lower] <= 0).all() and (bias.diagonal(dim1=1, dim2=2) == 0).all()


@pytest.mark.parametrize("encoding", positions.ENCODINGS)
def test_every_encoding_builds_a_gpt_whose_cache_gives_the_same_tokens(encoding):
    torch.manual_seed(0)
    model = positions.make_gpt(encoding, CONFIG).eval()
    prompt = torch.randint(17, (2, 5))
    assert model(prompt).shape == (2, 5, 17)
    with_cache = generate(model, prompt, 20, use_cache=True, temperature=0)
    without = generate(model, prompt, 20, use_cache=False, temperature=0)
    assert torch.equal(with_cache, without)
    has_table = encoding in ("learned", "sinusoidal")
    assert (model.position_embedding is not None) == has_table


def test_rope_and_alibi_models_are_unchanged_by_a_shift_of_every_position():
    """Relative encodings see only distances: the keys and queries of positions 10..19
    give the same attention as those of 0..9. An absolute table does not."""
    x = torch.randn(1, 10, 32)
    for encoding in ("RoPE", "ALiBi"):
        torch.manual_seed(0)
        attention = positions.make_gpt(encoding, CONFIG).blocks[0].attention.eval()
        first = attention(x, torch.arange(10))
        later = attention(x, torch.arange(10, 20))
        assert torch.allclose(first, later, atol=1e-5), encoding


def test_make_gpt_refuses_unknown_encodings():
    with pytest.raises(ValueError, match="encoding must be one of"):
        positions.make_gpt("rotary", CONFIG)


def test_repeating_sequences_and_what_can_be_predicted():
    task = positions.RepeatTask()
    tokens, known = task.batch(500, 20, torch.Generator().manual_seed(0))
    assert tokens.shape == (500, 21) and known.shape == (500, 20)
    for row, mask in zip(tokens, known):
        k = int(mask.float().argmax())                       # the first predictable input
        assert task.min_period <= k <= task.max_period
        assert len(set(row[:k].tolist())) == k               # k distinct tokens
        assert torch.equal(row[k:], row[:21 - k])            # then repeated
        assert mask[k:].all() and not mask[:k].any()


def test_repeat_accuracy_of_a_perfect_and_a_constant_predictor():
    task = positions.RepeatTask()

    class Oracle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, tokens):            # knows the period: the token k back, k found
            out = torch.zeros(*tokens.shape, task.vocab_size)
            for b, row in enumerate(tokens):
                for t in range(len(row)):
                    earlier = (row[:t] == row[t]).nonzero()
                    if len(earlier):
                        out[b, t, row[int(earlier[-1]) + 1]] = 1
            return out

    assert positions.repeat_accuracy(Oracle(), task, 24, num_sequences=20) == 1.0


def test_score_maps_depend_only_on_the_distance_for_relative_schemes():
    for scheme in positions.SCHEMES:
        spreads = [positions.diagonal_spread(positions.score_map(scheme, h)) for h in range(4)]
        assert (max(spreads) < 1e-9) == (scheme != "sinusoidal"), scheme
    scores = positions.score_map("ALiBi", 0)
    assert scores.shape == (24, 24) and scores.triu(1).isnan().sum() == 24 * 23 // 2
    with pytest.raises(ValueError, match="scheme"):
        positions.score_map("learned", 0)
    with pytest.raises(ValueError, match="head"):
        positions.score_map("RoPE", 4)


def test_a_short_training_run_learns_something():
    task = positions.RepeatTask(num_steps=20)
    torch.manual_seed(0)
    model = positions.make_gpt("ALiBi", CONFIG)
    losses = positions.train_repeat(model, task, seed=0)
    assert len(losses) == 20 and losses[-1] < losses[0]
