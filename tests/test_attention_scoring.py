"""Chapter 3: masked_softmax, AdditiveAttention and DotProductAttention against d2l 1.0.3 and
torch.nn.functional.scaled_dot_product_attention, the fully masked row, float16/bfloat16.

Tolerances: float32 comparisons use atol=1e-6, rtol=1e-5 (the same arithmetic in a different
order); float16/bfloat16 results are compared with the float32 result at atol=1e-2 (their
machine epsilons are about 1e-3 and 8e-3)."""
import math

import pytest
import torch
from d2l import torch as d2l
from torch import nn

from book import scoring
from book.attention import AdditiveAttention, DotProductAttention, masked_softmax

F = nn.functional
ATOL, RTOL = 1e-6, 1e-5


@pytest.fixture
def g():
    return torch.Generator().manual_seed(0)


def lengths(g, batch, num_queries, num_keys, per_query):
    """Random valid lengths in 1..num_keys (at least one valid key: d2l's regime)."""
    shape = (batch, num_queries) if per_query else (batch,)
    return torch.randint(1, num_keys + 1, shape, generator=g)


@pytest.mark.parametrize("per_query", [False, True])
def test_masked_softmax_equals_d2l_where_some_key_is_valid(g, per_query):
    for _ in range(20):
        X = 3 * torch.randn(4, 3, 7, generator=g)
        valid_lens = lengths(g, 4, 3, 7, per_query)
        expected = d2l.masked_softmax(X.clone(), valid_lens)  # d2l writes into its input
        torch.testing.assert_close(masked_softmax(X, valid_lens), expected, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(masked_softmax(X, None), d2l.masked_softmax(X.clone(), None))


def test_masked_keys_get_exactly_zero_and_the_input_is_untouched(g):
    X = torch.randn(2, 3, 5, generator=g)
    before = X.clone()
    W = masked_softmax(X, torch.tensor([[1, 3, 5], [2, 4, 1]]))
    assert torch.equal(X, before)
    assert (W[0, 0, 1:] == 0).all() and (W[0, 1, 3:] == 0).all() and (W[1, 2, 1:] == 0).all()
    torch.testing.assert_close(W.sum(-1), torch.ones(2, 3))


def test_fully_masked_rows_give_zeros_not_nan_nor_d2ls_uniform(g):
    X = torch.randn(2, 3, 5, generator=g)
    W = masked_softmax(X, torch.tensor([0, 2]))
    assert torch.isfinite(W).all() and (W[0] == 0).all()
    torch.testing.assert_close(W[1].sum(-1), torch.ones(3))
    theirs = d2l.masked_softmax(X.clone(), torch.tensor([0, 2]))
    torch.testing.assert_close(theirs[0], torch.full((3, 5), 0.2))  # uniform over padding
    W = masked_softmax(X, torch.tensor([[2, 0, 5], [0, 0, 0]]))      # per query
    assert (W[0, 1] == 0).all() and (W[1] == 0).all() and torch.isfinite(W).all()
    with_inf = torch.softmax(X.masked_fill(torch.ones_like(X, dtype=torch.bool), -math.inf), -1)
    assert torch.isnan(with_inf).all(), "the trap the fill value avoids"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_fill_value_is_safe_in_half_precision(g, dtype):
    X = 30 * torch.randn(3, 4, 6, generator=g)  # large scores: a row max near +-100
    valid_lens = torch.tensor([[0, 1, 6, 3], [2, 2, 0, 5], [6, 6, 6, 6]])
    low = masked_softmax(X.to(dtype), valid_lens)
    assert low.dtype == dtype and torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), masked_softmax(X, valid_lens), atol=1e-2, rtol=0)
    assert (low[0, 0] == 0).all() and (low[1, 2] == 0).all()
    if dtype == torch.float16:  # d2l's -1e6 does not fit in float16: NaN for an empty row
        assert torch.isnan(d2l.masked_softmax(X.to(dtype), valid_lens)[0, 0]).all()


def share_weights(ours, theirs):
    theirs.W_q.weight.data.copy_(ours.W_q.weight.data)
    theirs.W_k.weight.data.copy_(ours.W_k.weight.data)
    theirs.w_v.weight.data.copy_(ours.w_v.weight.data)


@pytest.mark.parametrize("per_query", [False, True, None])
def test_additive_attention_equals_d2l_with_shared_weights(g, per_query):
    queries, keys = torch.randn(2, 3, 20, generator=g), torch.randn(2, 7, 5, generator=g)
    values = torch.randn(2, 7, 4, generator=g)
    valid_lens = None if per_query is None else lengths(g, 2, 3, 7, per_query)
    ours, theirs = AdditiveAttention(8, dropout=0.1), d2l.AdditiveAttention(8, dropout=0.1)
    ours.eval(), theirs.eval()
    ours(queries, keys, values, valid_lens), theirs(queries, keys, values, valid_lens)  # size
    share_weights(ours, theirs)
    torch.testing.assert_close(ours(queries, keys, values, valid_lens),
                               theirs(queries, keys, values, valid_lens), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights,
                               atol=ATOL, rtol=RTOL)
    assert sum(p.numel() for p in ours.parameters()) == 8 * 20 + 8 * 5 + 8


def test_additive_attention_with_known_sizes_needs_no_first_call():
    layer = AdditiveAttention(8, dropout=0.0, query_size=20, key_size=5)
    assert not any(isinstance(p, nn.parameter.UninitializedParameter) for p in layer.parameters())
    out = layer(torch.randn(2, 3, 20), torch.randn(2, 7, 5), torch.randn(2, 7, 4))
    assert out.shape == (2, 3, 4)


@pytest.mark.parametrize("per_query", [False, True, None])
def test_dot_product_attention_equals_d2l(g, per_query):
    queries, keys = torch.randn(3, 4, 16, generator=g), torch.randn(3, 6, 16, generator=g)
    values = torch.randn(3, 6, 5, generator=g)
    valid_lens = None if per_query is None else lengths(g, 3, 4, 6, per_query)
    ours, theirs = DotProductAttention(0.5).eval(), d2l.DotProductAttention(0.5).eval()
    torch.testing.assert_close(ours(queries, keys, values, valid_lens),
                               theirs(queries, keys, values, valid_lens), atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(ours.attention_weights, theirs.attention_weights,
                               atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("per_query", [False, True])
def test_dot_product_attention_equals_torch_sdpa_with_padding_masks(g, per_query):
    queries, keys = torch.randn(3, 4, 16, generator=g), torch.randn(3, 6, 16, generator=g)
    values = torch.randn(3, 6, 5, generator=g)
    valid_lens = lengths(g, 3, 4, 6, per_query)
    lens = valid_lens if per_query else valid_lens[:, None]
    keep = torch.arange(6) < lens[..., None]          # (batch, queries or 1, keys)
    ours = DotProductAttention(0.0)(queries, keys, values, valid_lens)
    # boolean attn_mask: True = attend (the opposite of nn.MultiheadAttention's padding mask)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=keep), atol=ATOL, rtol=RTOL)
    float_mask = torch.zeros(keep.shape).masked_fill(~keep, -math.inf)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(
        queries, keys, values, attn_mask=float_mask), atol=ATOL, rtol=RTOL)
    flipped = F.scaled_dot_product_attention(queries, keys, values, attn_mask=~keep)
    assert not torch.allclose(ours, flipped, atol=1e-3), "the conventions are not symmetric"
    assert torch.allclose(DotProductAttention(0.0)(queries, keys, values),
                          F.scaled_dot_product_attention(queries, keys, values),
                          atol=ATOL, rtol=RTOL)


def test_nn_multihead_attention_key_padding_mask_is_the_negation_of_the_keep_mask(g):
    """One head with identity projections is our DotProductAttention; its mask is ~keep."""
    d = 8
    mha = nn.MultiheadAttention(d, num_heads=1, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(d)] * 3))
        mha.out_proj.weight.copy_(torch.eye(d))
    mha.eval()
    queries, keys = torch.randn(2, 3, d, generator=g), torch.randn(2, 5, d, generator=g)
    values = torch.randn(2, 5, d, generator=g)
    valid_lens = torch.tensor([2, 4])
    key_padding_mask = torch.arange(5) >= valid_lens[:, None]  # True = ignore
    out, weights = mha(queries, keys, values, key_padding_mask=key_padding_mask)
    ours = DotProductAttention(0.0)
    torch.testing.assert_close(out, ours(queries, keys, values, valid_lens), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, ours.attention_weights, atol=1e-6, rtol=1e-5)
    # a fully masked example: NaN from nn.MultiheadAttention, zeros from ours
    out, _ = mha(queries, keys, values, key_padding_mask=torch.ones(2, 5, dtype=torch.bool))
    assert torch.isnan(out).all()
    assert (ours(queries, keys, values, torch.tensor([0, 0])) == 0).all()


def test_batched_form_equals_the_definition_one_query_at_a_time(g):
    Q, K, V = (torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g),
               torch.randn(2, 5, 6, generator=g))
    out = DotProductAttention(0.0)(Q, K, V, torch.tensor([2, 5]))
    for b, m in enumerate([2, 5]):
        for i in range(3):
            alpha = torch.softmax(torch.stack([Q[b, i] @ K[b, j] / 2 for j in range(m)]), 0)
            torch.testing.assert_close(out[b, i], alpha @ V[b, :m], atol=ATOL, rtol=RTOL)


def test_dot_product_variance_grows_like_d_and_the_scale_keeps_entropy():
    for d in [4, 64, 1024]:
        assert abs(scoring.dot_product_variance(d) / d - 1) < 0.1
    entropies = [scoring.softmax_saturation(d, scale=False)[1] for d in (4, 64, 1024)]
    assert entropies[0] > entropies[1] > entropies[2] and entropies[2] < 0.2
    scaled = [scoring.softmax_saturation(d, scale=True)[1] for d in (4, 64, 1024)]
    assert max(scaled) - min(scaled) < 0.1 and min(scaled) > 2.0
    weights, _, top, grads = scoring.softmax_saturation(1024, scale=False)
    assert top > 0.9 and weights.shape == (500, 16) and grads.shape == (500,)
    # Without the scale most queries get almost no gradient, a few a large one
    assert grads.median() < 0.01 < 1.0 < grads.mean() and (grads < 0.01).float().mean() > 0.5
    _, _, _, scaled_grads = scoring.softmax_saturation(1024, scale=True)
    assert 0.2 < scaled_grads.median() < 0.4 and (scaled_grads < 0.01).sum() == 0


@pytest.mark.parametrize("scale", [True, False])
def test_saturation_gradient_is_the_autograd_gradient(scale):
    d = 16
    weights, _, _, grads = scoring.softmax_saturation(d, scale, num_queries=5)
    queries = scoring.random_vectors(5, d, 0).requires_grad_()
    keys = scoring.random_vectors(16, d, 1)
    c = 1 / math.sqrt(d) if scale else 1.0
    for i in range(5):
        jacobian = torch.autograd.functional.jacobian(
            lambda q: torch.softmax(c * q @ keys.T, dim=-1), queries[i])  # (16, d)
        torch.testing.assert_close(grads[i], jacobian.norm(), rtol=1e-4, atol=1e-6)


def test_train_retrieval_learns_and_rejects_an_unknown_optimizer():
    accuracy = scoring.train_retrieval(scale=True, lr=1.0, d=16, num_steps=60)
    assert 0.8 < accuracy <= 1.0, accuracy       # chance is 1/16
    assert scoring.train_retrieval(scale=True, lr=1.0, d=16, num_steps=0) < 0.3
    with pytest.raises(ValueError, match="optimizer"):
        scoring.train_retrieval(scale=True, lr=1.0, optimizer="lbfgs")


def test_widget_functions_draw_and_report(g):
    from book.plot import new_figure
    caption = scoring.draw_entropy(new_figure((7.5, 2.6)), 64, "none")
    assert "mean entropy" in caption and "d = 64" in caption
    for valid_len in range(9):
        W, valid_lens = scoring.masked_example(valid_len, scoring.MASK_KINDS[0])
        assert W.shape == (8, 8) and (W[:, valid_len:] == 0).all()
        W, valid_lens = scoring.masked_example(valid_len, scoring.MASK_KINDS[1])
        assert valid_lens.tolist() == [[min(i + 1, valid_len) for i in range(8)]]
        assert torch.isfinite(W).all()
    assert (scoring.masked_example(0)[0] == 0).all()
    caption = scoring.draw_masked(new_figure((4.5, 3)), 0, scoring.MASK_KINDS[0])
    assert "rows with no valid key (all-zero weights): 8" in caption
    assert "1-D and 2-D agree" in caption
    assert "same weights" in scoring.draw_entropy(new_figure((7.5, 2.6)), 1, "none")


def test_every_frame_of_the_masking_widget_shows_different_weights():
    """Each valid length gives other weights, for both kinds (issue 11: no identical frames).

    Across the two kinds the frames agree only where the causal limit cannot bind
    (valid_len <= 1), and the caption says so."""
    for kind in scoring.MASK_KINDS:
        frames = [scoring.masked_example(v, kind)[0] for v in range(9)]
        for a in range(9):
            for b in range(a + 1, 9):
                assert not torch.equal(frames[a], frames[b]), (kind, a, b)
    for valid_len in range(9):
        one_d, two_d = (scoring.masked_example(valid_len, k)[0] for k in scoring.MASK_KINDS)
        assert torch.equal(one_d, two_d) == (valid_len <= 1)


def test_the_entropy_widget_draws_on_a_fixed_zero_to_one_scale():
    from book.plot import new_figure
    for d, scale in [(4, "1/sqrt(d)"), (1024, "none")]:
        fig = new_figure((7.5, 2.6))
        scoring.draw_entropy(fig, d, scale)
        image = next(im for ax in fig.axes for im in ax.get_images())
        assert image.get_clim() == (0.0, 1.0)
