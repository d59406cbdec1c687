"""Chapter 1: attention pooling, the scoring rules and the desk scene."""
import pytest
import torch

from book import cues
from book.attention import attention_pool, constant_score, dot_score, gaussian_score


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(3, 4, generator=g), torch.randn(6, 4, generator=g), torch.randn(6, 2, generator=g)


def test_weights_lie_on_the_simplex_and_outputs_are_weighted_values(data):
    queries, keys, values = data
    for score in (dot_score, gaussian_score, constant_score):
        outputs, weights = attention_pool(queries, keys, values, score)
        assert outputs.shape == (3, 2) and weights.shape == (3, 6)
        assert (weights >= 0).all() and torch.allclose(weights.sum(-1), torch.ones(3))
        torch.testing.assert_close(outputs, weights @ values)


def test_scores_match_their_formulas(data):
    queries, keys, _ = data
    torch.testing.assert_close(dot_score(queries, keys), torch.einsum("qd,kd->qk", queries, keys))
    expected = -0.5 * ((queries[:, None, :] - keys[None, :, :]) ** 2).sum(-1)
    torch.testing.assert_close(gaussian_score(queries, keys), expected, atol=1e-4, rtol=1e-4)


def test_constant_score_is_average_pooling(data):
    queries, keys, values = data
    outputs, _ = attention_pool(queries, keys, values, constant_score)
    torch.testing.assert_close(outputs, values.mean(0).expand(3, 2))


def test_desk_intentions_pick_the_expected_objects():
    picks = {i: cues.OBJECTS[int(cues.gaze(i)[1].argmax())] for i in cues.QUERIES}
    assert picks == {"no intention": "coffee cup", "read": "book", "drink": "coffee cup", "write": "notebook"}


def test_sharpness_zero_is_the_average_and_large_sharpness_a_hard_choice():
    point, weights = cues.gaze("read", "dot product", 0.0)
    torch.testing.assert_close(point, cues.VALUES.mean(0))
    point, weights = cues.gaze("read", "dot product", 100.0)
    torch.testing.assert_close(point, cues.VALUES[cues.OBJECTS.index("book")], atol=1e-4, rtol=0)


def test_gaze_rejects_unknown_names():
    with pytest.raises(KeyError, match="choose one of"):
        cues.gaze("sleep")
    with pytest.raises(KeyError, match="scoring rule"):
        cues.gaze("read", "cosine")


def test_a_sharp_soft_lookup_is_the_hard_one():
    """Chapter 1: with the book's own key as the query, a large sharpness returns its value."""
    book = cues.OBJECTS.index("book")
    query = cues.KEYS[book].reshape(1, -1)
    place, weights = attention_pool(query, cues.KEYS, cues.VALUES,
                                    lambda q, k: 100 * gaussian_score(q, k))
    torch.testing.assert_close(place[0], cues.VALUES[book], atol=1e-3, rtol=0)
    place, _ = attention_pool(query, cues.KEYS, cues.VALUES, gaussian_score)
    assert not torch.allclose(place[0], cues.VALUES[book], atol=0.1), "a blend at s = 1"


def test_the_gaussian_rule_is_less_sure_of_the_book_because_it_squares_the_shortfall():
    """Chapter 1: under "read", the book leads the research paper by 0.4 (dot product) and
    by 0.08 + 0.015 (Gaussian: squared shortfall, plus unasked features that favour the book)."""
    q = cues.QUERIES["read"]
    book, paper = (cues.KEYS[cues.OBJECTS.index(n)] for n in ("book", "research paper"))
    asked = q > 0
    dot_lead = q * book - q * paper
    gauss_lead = -(q - book) ** 2 / 2 + (q - paper) ** 2 / 2
    assert dot_lead.sum().item() == pytest.approx(0.4, abs=1e-6)
    assert gauss_lead[asked].sum().item() == pytest.approx(0.08, abs=1e-6)
    assert gauss_lead[~asked].sum().item() == pytest.approx(0.015, abs=1e-6)
    for rule, lead in [("dot product", dot_lead), ("gaussian", gauss_lead)]:
        w = cues.gaze("read", rule, 3.0)[1]
        ratio = w[cues.OBJECTS.index("book")] / w[cues.OBJECTS.index("research paper")]
        assert ratio.item() == pytest.approx(torch.exp(3 * lead.sum()).item(), rel=1e-4)


def test_average_pooling_returns_the_centroid_of_the_objects():
    point, weights = cues.gaze("write", "constant (average)", 3.0)
    torch.testing.assert_close(point, torch.tensor([2.3, 2.1]))
    torch.testing.assert_close(weights, torch.full((5,), 0.2))
